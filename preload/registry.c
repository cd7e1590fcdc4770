/* The registry of threads that record: an RCU list (liburcu, bulletproof flavour, so threads
 * need no registration) that the writer walks without locks while threads come and go. A
 * thread joins on its first event; when it exits, a pthread key destructor marks it dead and the
 * writer drains its ring one last time, unlinks it and frees it after a grace period.
 * Only registration and removal take the registry's spinlock; the hot path never does. */
#include "internal.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <urcu-bp.h>
#include <urcu/rculist.h>

__thread struct dsp_tls dsp_tls __attribute__((tls_model("initial-exec")));

struct dsp_thread {
	struct cds_list_head node;
	struct ring *ring;
	int tid;
	int dead;         /* release-stored by the exiting thread */
	uint64_t pthread; /* its pthread_t (CUPTI may name threads by it) */
	uint64_t since;   /* when it joined (dsp_mono_ns): a pthread_t is reused once its thread is gone */
	char name[16];
	uint64_t wstate[DSP_WS_N];
	struct dsp_thread *reap_next; /* private list of unlinked threads awaiting a grace period */
	/* written by the thread, read by the writer: a cache line away from the writer's words above (no
	 * alignment attribute: the list's head, a bare node, is walked as an entry by container_of) */
	char pad[64];
	struct dsp_call call;
};

static CDS_LIST_HEAD(threads);
static int reg_lock;
static pthread_key_t exit_key;
static int exit_key_ok;

int dsp_gettid(void)
{
	return (int)syscall(SYS_gettid);
}

void dsp_registry_lock(void)
{
	while (__atomic_exchange_n(&reg_lock, 1, __ATOMIC_ACQUIRE))
		sched_yield();
}

void dsp_registry_unlock(void)
{
	__atomic_store_n(&reg_lock, 0, __ATOMIC_RELEASE);
}

/* Runs in the exiting thread after its last event of interest. */
static void on_thread_exit(void *p)
{
	struct dsp_thread *th = p;
	struct dsp_tls *t = &dsp_tls;

	if (t->thread == th && t->ring) {
		int g = t->guard;
		t->guard = 1;
		if (t->at_exit) /* (a record the thread began: cuda.c's run of queries) */
			t->at_exit(t);
		uint64_t now = dsp_now();
		dsp_emit(t, DDPSPY_EV_THREAD_EXIT, now, now, 0, NULL);
		t->guard = g;
	}
	t->state = TS_OFF; /* destructors that run later must not register a new ring */
	t->ring = NULL;
	t->thread = NULL;
	t->call = NULL;
	t->in_call = 0;
	__atomic_store_n(&th->dead, 1, __ATOMIC_RELEASE);
}

void dsp_registry_init(void)
{
	exit_key_ok = pthread_key_create(&exit_key, on_thread_exit) == 0;
}

static struct ring *thread_register(struct dsp_tls *t);

/* Wrappers do not save errno around their fast path; the slow path keeps it here. */
struct ring *dsp_thread_ring_slow(struct dsp_tls *t)
{
	if (t->state == TS_OFF || !__atomic_load_n(&dsp_on, __ATOMIC_RELAXED) || !exit_key_ok)
		return NULL;
	int saved = errno;
	struct ring *r = thread_register(t);
	errno = saved;
	return r;
}

static struct ring *thread_register(struct dsp_tls *t)
{
	struct ring *r = ring_create((size_t)dsp_cfg.ring_kb * 1024);
	void *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (!r || p == MAP_FAILED) {
		ring_release(r);
		if (p != MAP_FAILED)
			munmap(p, 4096);
		t->state = TS_OFF;
		dsp_log("no memory for a ring: thread %d is not recorded", dsp_gettid());
		return NULL;
	}
	struct dsp_thread *th = p;
	th->ring = r;
	th->tid = dsp_gettid();
	th->pthread = (uint64_t)pthread_self();
	th->since = (uint64_t)dsp_mono_ns();
	prctl(PR_GET_NAME, th->name);
	t->tid = th->tid;
	t->ring = r;
	t->thread = th;
	t->call = &th->call;
	t->state = TS_ACTIVE;
	/* our key was created first thing at start, so it is one of the first 32 and
	 * pthread_setspecific does not allocate */
	pthread_setspecific(exit_key, th);
	dsp_registry_lock();
	cds_list_add_tail_rcu(&th->node, &threads);
	dsp_registry_unlock();
	return r;
}

void dsp_registry_walk(dsp_thread_fn fn, void *ctx)
{
	struct dsp_thread *th;

	urcu_bp_read_lock();
	cds_list_for_each_entry_rcu(th, &threads, node)
		fn(th, ctx);
	urcu_bp_read_unlock();
}

void dsp_registry_reap(void)
{
	struct dsp_thread *th, *tmp, *gone = NULL;

	dsp_registry_lock();
	cds_list_for_each_entry_safe(th, tmp, &threads, node) {
		if (th->wstate[DSP_WS_FINAL]) {
			cds_list_del_rcu(&th->node);
			th->reap_next = gone;
			gone = th;
		}
	}
	dsp_registry_unlock();
	if (!gone)
		return;
	urcu_bp_synchronize_rcu(); /* no reader still holds any of them */
	while (gone) {
		th = gone;
		gone = th->reap_next;
		ring_release(th->ring);
		munmap(th, 4096);
	}
}

void dsp_registry_fork_child(void)
{
	struct dsp_thread *th, *tmp;
	struct dsp_tls *t = &dsp_tls;

	urcu_bp_after_fork_child();
	reg_lock = 0;
	/* Only the forking thread survives; the other threads' rings hold the parent's events,
	 * which the parent writes. The survivor keeps its ring, emptied. */
	cds_list_for_each_entry_safe(th, tmp, &threads, node) {
		if (th == t->thread) {
			ring_reset(th->ring);
			memset(th->wstate, 0, sizeof th->wstate);
			th->tid = dsp_gettid();
			t->tid = th->tid;
			continue;
		}
		cds_list_del(&th->node);
		ring_release(th->ring);
		munmap(th, 4096);
	}
}

void dsp_registry_fork_prepare(void)
{
	dsp_registry_lock();
	urcu_bp_before_fork();
}

void dsp_registry_fork_parent(void)
{
	urcu_bp_after_fork_parent();
	dsp_registry_unlock();
}

struct ring *dsp_thread_ring_of(struct dsp_thread *th) { return th->ring; }
int dsp_thread_tid(struct dsp_thread *th) { return th->tid; }
const char *dsp_thread_name(struct dsp_thread *th) { return th->name; }
uint64_t dsp_thread_pthread(struct dsp_thread *th) { return th->pthread; }
uint64_t dsp_thread_since(struct dsp_thread *th) { return th->since; }
int dsp_thread_dead(struct dsp_thread *th) { return __atomic_load_n(&th->dead, __ATOMIC_ACQUIRE); }
uint64_t *dsp_thread_writer_state(struct dsp_thread *th) { return th->wstate; }
struct dsp_call *dsp_thread_call(struct dsp_thread *th) { return &th->call; }
_Static_assert(sizeof(struct dsp_thread) <= 4096, "a registry entry is one page");

void dsp_thread_set_name(struct dsp_tls *t, const char *name)
{
	struct dsp_thread *th = t->thread;
	if (th) {
		strncpy(th->name, name, sizeof th->name - 1);
		th->name[sizeof th->name - 1] = 0;
	}
}
