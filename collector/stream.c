/* The second reading of a rank's file that later phases stream: one thread's events again,
 * converted and with their point-to-point calls numbered as while loading, or every
 * synchronizing call of a process in time order. */
#include <stdint.h>
#include <stdlib.h>

#include "analysis_int.h"
#include "trace.h"

struct aligned {
	const struct proc *p;
	int (*fn)(void *ctx, const struct ev *e);
	void *ctx;
};

static int align_one(void *ctx, const struct ev *v)
{
	const struct aligned *x = ctx;
	struct ev e = *v;
	e.t = an_job_time(x->p, v->t);
	return x->fn(x->ctx, &e);
}

int an_stream_train(const struct proc *p, int (*fn)(void *ctx, const struct ev *e), void *ctx)
{
	struct aligned x = { p, fn, ctx };
	return p->train < 0 ? -1 : an_stream_thread(p, p->train, NULL, align_one, &x);
}

int an_stream_file(const char *path, const struct trace_clock *clock, size_t verified, const struct trace_span *span,
		   const struct thr *t, const uint8_t *want, int (*fn)(void *ctx, const struct ev *e), void *ctx)
{
	struct trace_cursor c;
	struct trace_event e;
	struct p2pnum *num = NULL;
	if (t->nwres)
		an_p2p_num_replay(&num, t->wres, t->nwres);
	int rc = trace_cursor_open(&c, path, t->tid, clock, verified, span, want);
	while (rc == 0 && trace_cursor_next(&c, &e) > 0) {
		struct ev v;
		if (!an_convert(&e, &v))
			continue;
		if (an_is_msg(&v))
			an_p2p_number(&num, &v);
		if (fn(ctx, &v))
			break;
	}
	trace_cursor_close(&c);
	an_p2p_num_free(num);
	return rc;
}

int an_stream_thread(const struct proc *p, int h, const uint8_t *want, int (*fn)(void *ctx, const struct ev *e),
		     void *ctx)
{
	/* (damage where the first reading stopped ends this one there too) */
	return an_stream_file(p->open ? p->open : p->file, p->clock, p->read_to, &p->part, &p->thr[h], want, fn,
			      ctx);
}

/* Every synchronizing call of p again (collectives, their waits, step markers), from every
 * thread that made any, in order of start time (by thread, in the order of p->thr, when equal),
 * on the file's own clock; fn gets the thread's index too. */
int an_stream_sync(const struct proc *p, int (*fn)(void *ctx, int thr, const struct ev *e), void *ctx)
{
	uint8_t want[DDPSPY_EV_COUNT] = { 0 };
	for (int k = 0; k < DDPSPY_EV_COUNT; k++)
		want[k] = (uint8_t)an_is_sync_kind(k);
	struct trace_cursor *c = calloc((size_t)p->nthr + 1, sizeof *c);
	struct ev *head = calloc((size_t)p->nthr + 1, sizeof *head);
	struct p2pnum **num = calloc((size_t)p->nthr + 1, sizeof *num); /* numbered again, as while loading */
	int *live = calloc((size_t)p->nthr + 1, sizeof *live), rc = c && head && live && num ? 0 : -1;
	/* one cursor per thread with synchronizing calls, and its next call */
	for (int h = 0; rc == 0 && h < p->nthr; h++) {
		if (!p->thr[h].nsync)
			continue;
		if (p->thr[h].nwres) /* (its wildcard receives resolved as the first reading did) */
			an_p2p_num_replay(&num[h], p->thr[h].wres, p->thr[h].nwres);
		if (trace_cursor_open(&c[h], p->open ? p->open : p->file, p->thr[h].tid, p->clock, p->read_to, &p->part,
				      want) < 0) {
			trace_cursor_close(&c[h]);
			rc = -1;
			break;
		}
		live[h] = 1;
	}
	for (int h = 0; rc == 0 && h < p->nthr; h++) {
		struct trace_event e;
		while (live[h] == 1) {
			if (trace_cursor_next(&c[h], &e) <= 0)
				live[h] = 2; /* ended: closed below */
			else if (an_convert(&e, &head[h]) && (an_p2p_number(&num[h], &head[h]), an_kept_sync(&head[h])))
				live[h] = 3;
		}
		if (h == p->nthr - 1) { /* every head read: deliver the earliest, read its thread's next */
			int best = -1;
			for (int k = 0; k < p->nthr; k++)
				if (live[k] == 3 && (best < 0 || head[k].t < head[best].t))
					best = k;
			if (best < 0)
				break;
			if (fn(ctx, best, &head[best]))
				break;
			live[best] = 1;
			h = best - 1;
		}
	}
	for (int h = 0; c && live && h < p->nthr; h++)
		if (live[h])
			trace_cursor_close(&c[h]);
	for (int h = 0; num && h < p->nthr; h++)
		an_p2p_num_free(num[h]);
	free(num);
	free(c);
	free(head);
	free(live);
	return rc;
}
