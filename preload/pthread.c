/* pthread family: thread creation (the start routine is wrapped so the new thread announces
 * itself with its parent), thread names, and the waits a training thread blocks in: contended
 * mutexes, condition variables, barriers and semaphores. */
#include "internal.h"

#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdarg.h>
#include <stdlib.h>
#include <sys/prctl.h>

/* the wrappers below are the library's exports (exports.map); helpers are static */
#pragma GCC visibility push(default)

DSP_REAL(int, pthread_create, (pthread_t *, const pthread_attr_t *, void *(*)(void *), void *), NULL)
DSP_REAL(int, pthread_setname_np, (pthread_t, const char *), NULL)
DSP_REAL(int, prctl, (int, unsigned long, unsigned long, unsigned long, unsigned long), NULL)
DSP_REAL(int, pthread_mutex_lock, (pthread_mutex_t *), NULL)
DSP_REAL(int, pthread_mutex_trylock, (pthread_mutex_t *), NULL)
DSP_REAL_V(int, pthread_cond_wait, (pthread_cond_t *, pthread_mutex_t *), "GLIBC_2.3.2")
DSP_REAL_V(int, pthread_cond_timedwait, (pthread_cond_t *, pthread_mutex_t *, const struct timespec *), "GLIBC_2.3.2")
DSP_REAL(int, pthread_cond_clockwait, (pthread_cond_t *, pthread_mutex_t *, clockid_t, const struct timespec *), NULL)
DSP_REAL(int, pthread_barrier_wait, (pthread_barrier_t *), NULL)
DSP_REAL(int, sem_wait, (sem_t *), NULL)
DSP_REAL(int, sem_timedwait, (sem_t *, const struct timespec *), NULL)
DSP_REAL(int, sem_clockwait, (sem_t *, clockid_t, const struct timespec *), NULL)

/* ---- creation ---- */
struct start {
	void *(*fn)(void *);
	void *arg;
	int parent_tid;   /* -1: a thread a library started while ddpspy called it (CUPTI's), untraced */
};

static void *trampoline(void *p)
{
	struct start s = *(struct start *)p;
	struct dsp_tls *t = &dsp_tls;

	free(p);
	if (s.parent_tid < 0)
		t->state = TS_OFF;
	else if (dsp_enter(t)) {
		uint64_t now = dsp_now();
		int64_t a[1] = {s.parent_tid};
		dsp_emit(t, DDPSPY_EV_THREAD_START, now, now, 1, a);
		dsp_leave(t);
	}
	return s.fn(s.arg);
}

int pthread_create(pthread_t *th, const pthread_attr_t *attr, void *(*fn)(void *), void *arg)
{
	if (!get_pthread_create())
		return EAGAIN;
	struct dsp_tls *t = &dsp_tls;
	int own = t->guard >= DSP_GUARD_OWN;
	if (!own && !dsp_enter(t))
		return real_pthread_create(th, attr, fn, arg);
	struct start *s = malloc(sizeof *s); /* pthread_create allocates anyway: not a fast path */
	int rc;
	if (!s) {
		rc = real_pthread_create(th, attr, fn, arg);
	} else {
		*s = (struct start){fn, arg, own ? -1 : t->tid ? t->tid : dsp_gettid()};
		rc = real_pthread_create(th, attr, trampoline, s);
		if (rc)
			free(s);
	}
	if (!own)
		dsp_leave(t);
	return rc;
}

/* ---- names ---- */
static void record_name(struct dsp_tls *t, int tid, const char *name)
{
	uint64_t now = dsp_now();
	int64_t a[1] = {tid};
	if (tid == t->tid)
		dsp_thread_set_name(t, name);
	dsp_emit_full(t, DDPSPY_EV_THREAD_NAME, now, now, 1, a, name, 0);
}

int pthread_setname_np(pthread_t th, const char *name)
{
	if (!get_pthread_setname_np())
		return ENOSYS;
	struct dsp_tls *t = &dsp_tls;
	if (!dsp_enter(t))
		return real_pthread_setname_np(th, name);
	int rc = real_pthread_setname_np(th, name);
	/* another thread's tid is not at hand without a syscall: -1, the collector attributes it */
	if (rc == 0 && dsp_thread_ring(t))
		record_name(t, pthread_equal(th, pthread_self()) ? t->tid : -1, name);
	dsp_leave(t);
	return rc;
}

int prctl(int option, ...)
{
	va_list ap;
	unsigned long a2, a3, a4, a5;

	va_start(ap, option);
	a2 = va_arg(ap, unsigned long);
	a3 = va_arg(ap, unsigned long);
	a4 = va_arg(ap, unsigned long);
	a5 = va_arg(ap, unsigned long);
	va_end(ap);
	if (!get_prctl()) {
		errno = ENOSYS;
		return -1;
	}
	struct dsp_tls *t = &dsp_tls;
	if (option != PR_SET_NAME || !dsp_enter(t))
		return real_prctl(option, a2, a3, a4, a5);
	int rc = real_prctl(option, a2, a3, a4, a5);
	if (rc == 0 && dsp_thread_ring(t)) {
		char name[17];
		strncpy(name, (const char *)a2, 16);
		name[16] = 0;
		record_name(t, t->tid, name);
	}
	dsp_leave(t);
	return rc;
}

/* ---- waits ---- */

/* A mutex is recorded only when it blocks: an uncontended lock costs one trylock. */
int pthread_mutex_lock(pthread_mutex_t *m)
{
	if (!get_pthread_mutex_lock() || !get_pthread_mutex_trylock())
		return EINVAL;
	struct dsp_tls *t = &dsp_tls;
	if (!dsp_enter(t))
		return real_pthread_mutex_lock(m);
	int rc = real_pthread_mutex_trylock(m);
	if (likely(rc != EBUSY)) { /* got it, or an answer lock would give too */
		dsp_leave(t);
		return rc;
	}
	uint64_t t0 = DSP_CALL(t, DDPSPY_EV_MUTEX_WAIT, -1, 2, (int64_t)(uintptr_t)m, -1);
	rc = real_pthread_mutex_lock(m);
	uint64_t t1 = dsp_now();
	int64_t a[2] = {(int64_t)(uintptr_t)m, rc};
	dsp_emit_wait(t, DDPSPY_EV_MUTEX_WAIT, t0, t1, 2, a);
	dsp_leave(t);
	return rc;
}

static void record_cond(struct dsp_tls *t, uint64_t t0, pthread_cond_t *c, pthread_mutex_t *m,
			int timed, int rc)
{
	uint64_t t1 = dsp_now();
	int64_t a[4] = {(int64_t)(uintptr_t)c, (int64_t)(uintptr_t)m, timed, rc};
	dsp_emit_wait(t, DDPSPY_EV_COND_WAIT, t0, t1, 4, a);
}

int pthread_cond_wait(pthread_cond_t *c, pthread_mutex_t *m)
{
	if (!get_pthread_cond_wait())
		return EINVAL;
	struct dsp_tls *t = &dsp_tls;
	if (!dsp_enter(t))
		return real_pthread_cond_wait(c, m);
	uint64_t t0 = DSP_CALL(t, DDPSPY_EV_COND_WAIT, -1, 4, (int64_t)(uintptr_t)c, (int64_t)(uintptr_t)m, 0, -1);
	int rc = real_pthread_cond_wait(c, m);
	record_cond(t, t0, c, m, 0, rc);
	dsp_leave(t);
	return rc;
}

int pthread_cond_timedwait(pthread_cond_t *c, pthread_mutex_t *m, const struct timespec *ts)
{
	if (!get_pthread_cond_timedwait())
		return EINVAL;
	struct dsp_tls *t = &dsp_tls;
	if (!dsp_enter(t))
		return real_pthread_cond_timedwait(c, m, ts);
	uint64_t t0 = DSP_CALL(t, DDPSPY_EV_COND_WAIT, -1, 4, (int64_t)(uintptr_t)c, (int64_t)(uintptr_t)m, 1, -1);
	int rc = real_pthread_cond_timedwait(c, m, ts);
	record_cond(t, t0, c, m, 1, rc);
	dsp_leave(t);
	return rc;
}

int pthread_cond_clockwait(pthread_cond_t *c, pthread_mutex_t *m, clockid_t clk,
			   const struct timespec *ts)
{
	if (!get_pthread_cond_clockwait())
		return EINVAL;
	struct dsp_tls *t = &dsp_tls;
	if (!dsp_enter(t))
		return real_pthread_cond_clockwait(c, m, clk, ts);
	uint64_t t0 = DSP_CALL(t, DDPSPY_EV_COND_WAIT, -1, 4, (int64_t)(uintptr_t)c, (int64_t)(uintptr_t)m, 1, -1);
	int rc = real_pthread_cond_clockwait(c, m, clk, ts);
	record_cond(t, t0, c, m, 1, rc);
	dsp_leave(t);
	return rc;
}

int pthread_barrier_wait(pthread_barrier_t *b)
{
	if (!get_pthread_barrier_wait())
		return EINVAL;
	struct dsp_tls *t = &dsp_tls;
	if (!dsp_enter(t))
		return real_pthread_barrier_wait(b);
	uint64_t t0 = DSP_CALL(t, DDPSPY_EV_BARRIER_WAIT, -1, 2, (int64_t)(uintptr_t)b, -1);
	int rc = real_pthread_barrier_wait(b);
	uint64_t t1 = dsp_now();
	int64_t a[2] = {(int64_t)(uintptr_t)b, rc};
	dsp_emit_wait(t, DDPSPY_EV_BARRIER_WAIT, t0, t1, 2, a);
	dsp_leave(t);
	return rc;
}

static void record_sem(struct dsp_tls *t, uint64_t t0, sem_t *s, int timed, int rc)
{
	uint64_t t1 = dsp_now();
	int64_t a[3] = {(int64_t)(uintptr_t)s, timed, rc};
	dsp_emit_wait(t, DDPSPY_EV_SEM_WAIT, t0, t1, 3, a);
}

int sem_wait(sem_t *s)
{
	if (!get_sem_wait()) {
		errno = ENOSYS;
		return -1;
	}
	struct dsp_tls *t = &dsp_tls;
	if (!dsp_enter(t))
		return real_sem_wait(s);
	uint64_t t0 = DSP_CALL(t, DDPSPY_EV_SEM_WAIT, -1, 3, (int64_t)(uintptr_t)s, 0, -1);
	int rc = real_sem_wait(s);
	record_sem(t, t0, s, 0, rc);
	dsp_leave(t);
	return rc;
}

int sem_timedwait(sem_t *s, const struct timespec *ts)
{
	if (!get_sem_timedwait()) {
		errno = ENOSYS;
		return -1;
	}
	struct dsp_tls *t = &dsp_tls;
	if (!dsp_enter(t))
		return real_sem_timedwait(s, ts);
	uint64_t t0 = DSP_CALL(t, DDPSPY_EV_SEM_WAIT, -1, 3, (int64_t)(uintptr_t)s, 1, -1);
	int rc = real_sem_timedwait(s, ts);
	record_sem(t, t0, s, 1, rc);
	dsp_leave(t);
	return rc;
}

int sem_clockwait(sem_t *s, clockid_t clk, const struct timespec *ts)
{
	if (!get_sem_clockwait()) {
		errno = ENOSYS;
		return -1;
	}
	struct dsp_tls *t = &dsp_tls;
	if (!dsp_enter(t))
		return real_sem_clockwait(s, clk, ts);
	uint64_t t0 = DSP_CALL(t, DDPSPY_EV_SEM_WAIT, -1, 3, (int64_t)(uintptr_t)s, 1, -1);
	int rc = real_sem_clockwait(s, clk, ts);
	record_sem(t, t0, s, 1, rc);
	dsp_leave(t);
	return rc;
}
