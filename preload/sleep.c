/* Sleeps: nanosleep, clock_nanosleep, usleep and sleep. glibc's usleep and sleep call its
 * nanosleep internally, not through the PLT, so each is wrapped on its own. */
#include "internal.h"

#include <errno.h>
#include <unistd.h>

/* the wrappers below are the library's exports (exports.map); helpers are static */
#pragma GCC visibility push(default)

DSP_REAL(int, nanosleep, (const struct timespec *, struct timespec *), NULL)
DSP_REAL(int, clock_nanosleep, (clockid_t, int, const struct timespec *, struct timespec *), NULL)
DSP_REAL(int, usleep, (useconds_t), NULL)
DSP_REAL(unsigned, sleep, (unsigned), NULL)

static int64_t ns(const struct timespec *ts)
{
	return ts ? (int64_t)ts->tv_sec * 1000000000 + ts->tv_nsec : -1;
}

static void record_sleep(struct dsp_tls *t, uint64_t t0, int64_t req_ns, int64_t rc)
{
	uint64_t t1 = dsp_now();
	int64_t a[2] = {req_ns, rc};
	dsp_emit_wait(t, DDPSPY_EV_SLEEP, t0, t1, 2, a);
}

int nanosleep(const struct timespec *req, struct timespec *rem)
{
	if (!get_nanosleep()) {
		errno = ENOSYS;
		return -1;
	}
	struct dsp_tls *t = &dsp_tls;
	if (!dsp_enter(t))
		return real_nanosleep(req, rem);
	uint64_t t0 = DSP_CALL(t, DDPSPY_EV_SLEEP, -1, 2, ns(req), -1);
	int rc = real_nanosleep(req, rem);
	record_sleep(t, t0, ns(req), rc);
	dsp_leave(t);
	return rc;
}

int clock_nanosleep(clockid_t clk, int flags, const struct timespec *req, struct timespec *rem)
{
	if (!get_clock_nanosleep())
		return ENOSYS;
	struct dsp_tls *t = &dsp_tls;
	if (!dsp_enter(t))
		return real_clock_nanosleep(clk, flags, req, rem);
	uint64_t t0 = DSP_CALL(t, DDPSPY_EV_SLEEP, -1, 2, flags & TIMER_ABSTIME ? -1 : ns(req), -1);
	int rc = real_clock_nanosleep(clk, flags, req, rem);
	/* an absolute deadline has no requested length: the duration says it */
	record_sleep(t, t0, flags & TIMER_ABSTIME ? -1 : ns(req), rc);
	dsp_leave(t);
	return rc;
}

int usleep(useconds_t us)
{
	if (!get_usleep()) {
		errno = ENOSYS;
		return -1;
	}
	struct dsp_tls *t = &dsp_tls;
	if (!dsp_enter(t))
		return real_usleep(us);
	uint64_t t0 = DSP_CALL(t, DDPSPY_EV_SLEEP, -1, 2, (int64_t)us * 1000, -1);
	int rc = real_usleep(us);
	record_sleep(t, t0, (int64_t)us * 1000, rc);
	dsp_leave(t);
	return rc;
}

unsigned sleep(unsigned s)
{
	if (!get_sleep())
		return s;
	struct dsp_tls *t = &dsp_tls;
	if (!dsp_enter(t))
		return real_sleep(s);
	uint64_t t0 = DSP_CALL(t, DDPSPY_EV_SLEEP, -1, 2, (int64_t)s * 1000000000, -1);
	unsigned rc = real_sleep(s);
	record_sleep(t, t0, (int64_t)s * 1000000000, rc);
	dsp_leave(t);
	return rc;
}
