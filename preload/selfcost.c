/* ddpspy's own cost per recorded event, measured once per process by the writer thread as it
 * starts: the recording path of a read that did not block (the guard, the call published in flight
 * and its first reading of the raw clock, the second reading, an event of four arguments into a
 * ring, the call cleared) run in batches into a scratch ring and call slot of the writer's own,
 * never the program's. The file states it ("cost" record); the report multiplies it
 * by each rank's events per step (docs/report.md, "ddpspy's own cost").
 *
 * Timed as a program meets it, not as a tight loop would: a ring of the program's rings' size,
 * written whole first so that each event lands on a line last touched a ring ago (out of this
 * core's caches, as in a long run), and a locked instruction where the real call is (the
 * program's futex words and syscalls drain the store buffer, which exposes the wait for each new
 * ring line: measured 20 ns per event hot and without it, against 44-60 ns a recorded sem_wait
 * costs beside the plain one; docs/performance.md). The locked instruction's own time is timed
 * alone in the batches between and taken off. */
#include "internal.h"

#include <string.h>
#include <sys/mman.h>
#include <time.h>

#define BATCH 512
#define BATCHES 9
#define LAP_MAX ((size_t)16 << 20) /* (a larger ring's lines come from memory too) */
#define LAP_MIN ((size_t)1 << 17)  /* (a batch, 28 KiB, fits whatever DDPSPY_RING_KB says) */

static int64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* one batch: ns per event; the scratch thread state t owns its ring, which nobody drains (space is
 * given back by hand, the position kept); with record 0 only the locked instruction; -1 never, in
 * practice (t is active and its guard free) */
static double batch(struct dsp_tls *t, int record, uint64_t *word)
{
	static const int64_t args[4] = {3, DDPSPY_FD_FILE, 4096, 4096};
	t->ring->tail = t->ring->tail_cache = t->ring->head;
	t->ring->wake_at = UINT64_MAX; /* (nobody to wake) */
	int64_t t0 = mono_ns();
	for (int i = 0; i < BATCH; i++) {
		if (!record) {
			__atomic_fetch_add(word, 1, __ATOMIC_SEQ_CST);
			continue;
		}
		/* dsp_enter's work, whatever dsp_on says yet: on a busy machine the writer may get here
		 * before init has turned recording on, and a file of such a process stated no cost */
		t->guard = 0;
		if (t->guard || (!__atomic_load_n(&dsp_on, __ATOMIC_RELAXED) && t->state == TS_OFF))
			return -1;
		t->guard = 1;
		uint64_t a = DSP_CALL(t, DDPSPY_EV_READ, 3, 4, 3, DDPSPY_FD_FILE, 4096, -1);
		__atomic_fetch_add(word, 1, __ATOMIC_SEQ_CST); /* the real call's */
		uint64_t b = dsp_now();
		dsp_emit(t, DDPSPY_EV_READ, a, b, 4, args);
		dsp_leave(t);
	}
	return (double)(mono_ns() - t0) / BATCH;
}

static void sorted_add(double *v, int *n, double x)
{
	int i = (*n)++;
	for (; i > 0 && v[i - 1] > x; i--) /* (insertion: kept sorted) */
		v[i] = v[i - 1];
	v[i] = x;
}

/* The median recorded batch's ns per event less the median locked-only batch's (medians: the
 * writer may be preempted in one), -1 when it cannot be measured. Called with the writer's own
 * guard held; the scratch state has its own. */
double dsp_event_cost_ns(void)
{
	struct dsp_call slot = {0};
	struct dsp_tls t = { .call = &slot };
	double rec[BATCHES], bare[BATCHES];
	int n = 0, m = 0;
	uint64_t word = 0;
	size_t lap = (size_t)dsp_cfg.ring_kb * 1024;
	lap = lap < LAP_MIN ? LAP_MIN : lap > LAP_MAX ? LAP_MAX : lap;
	if (!(t.ring = ring_create(lap)))
		return -1;
	/* every page faulted in and every line written once: the batches from its start then write
	 * lines a ring's length old */
#ifdef MADV_POPULATE_WRITE
	madvise(t.ring->data, t.ring->size, MADV_POPULATE_WRITE); /* (one call, not a fault a page) */
#endif
	memset(t.ring->data, 0, t.ring->size);
	t.state = TS_ACTIVE;
	for (int k = 0; k < BATCHES; k++) {
		double x = batch(&t, 1, &word);
		if (x < 0)
			break;
		sorted_add(rec, &n, x);
		sorted_add(bare, &m, batch(&t, 0, &word));
	}
	ring_release(t.ring);
	double c = n ? rec[n / 2] - bare[m / 2] : -1;
	return c > 0 ? c : -1;
}
