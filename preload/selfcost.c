/* ddpspy's own cost per recorded event, measured once per process by the writer thread as it
 * starts: the recording path of a read that did not block (the guard, the call published in flight
 * and its first reading of the raw clock, the second reading, an event of four arguments into a
 * ring, the call cleared) run in batches into a scratch ring and call slot of the writer's own,
 * never the program's. The file states it ("cost" record); the report multiplies it
 * by each rank's events per step (docs/report.md, "ddpspy's own cost"). */
#include "internal.h"

#include <time.h>

#define BATCH 512
#define BATCHES 9

static int64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* one batch: ns per event; the scratch thread state t owns its ring (emptied first); -1 never, in
 * practice (t is active and its guard free) */
static double batch(struct dsp_tls *t)
{
	static const int64_t args[4] = {3, DDPSPY_FD_FILE, 4096, 4096};
	ring_reset(t->ring);
	int64_t t0 = mono_ns();
	for (int i = 0; i < BATCH; i++) {
		/* dsp_enter's work, whatever dsp_on says yet: on a busy machine the writer may get here
		 * before init has turned recording on, and a file of such a process stated no cost */
		t->guard = 0;
		if (t->guard || (!__atomic_load_n(&dsp_on, __ATOMIC_RELAXED) && t->state == TS_OFF))
			return -1;
		t->guard = 1;
		uint64_t a = DSP_CALL(t, DDPSPY_EV_READ, 3, 4, 3, DDPSPY_FD_FILE, 4096, -1), b = dsp_now();
		dsp_emit(t, DDPSPY_EV_READ, a, b, 4, args);
		dsp_leave(t);
	}
	return (double)(mono_ns() - t0) / BATCH;
}

/* The median batch's ns per event (the median: the writer may be preempted in one), -1 when it
 * cannot be measured. Called with the writer's own guard held; the scratch state has its own. */
double dsp_event_cost_ns(void)
{
	struct dsp_call slot = {0};
	struct dsp_tls t = { .call = &slot };
	double v[BATCHES];
	int n = 0;
	if (!(t.ring = ring_create(1 << 17))) /* (BATCH events of 56 bytes: under a quarter) */
		return -1;
	t.state = TS_ACTIVE;
	for (int k = 0; k < BATCHES; k++) {
		double x = batch(&t);
		if (x < 0)
			break;
		int i = n++;
		for (; i > 0 && v[i - 1] > x; i--) /* (insertion: kept sorted) */
			v[i] = v[i - 1];
		v[i] = x;
	}
	ring_release(t.ring);
	return n ? v[n / 2] : -1;
}
