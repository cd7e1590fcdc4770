/* The runs of a thread's calls between its kept synchronizing ones (analysis.h's struct callrun),
 * summed while a file is read, so that the split need not read a training thread a second time. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "analysis_int.h"

_Static_assert(CAT_COUNT == 4 && CAT_COMPUTE == 0, "struct callrun's ns: data, comms, host");

/* calls before a thread's first synchronizing one beyond which its runs are given up: an input
 * thread's reads need none, and a training thread that made so many is read again */
#define RUN_FIRST_MAX 16384

void an_runs_drop(struct thr *t)
{
	free(t->run);
	free(t->rpat);
	free(t->own);
	free(t->rfirst);
	t->run = NULL;
	t->rpat = NULL;
	t->own = NULL;
	t->rfirst = NULL;
	t->nrun = t->crun = t->nrpat = t->crpat = t->crfirst = 0;
	t->runs_ok = 0;
}

/* v, the first call of t's run nrun, kept in t->rfirst (its path as a second reading gives it:
 * none); -1 out of memory (t's runs are given up) */
static int run_first(struct thr *t, const struct ev *v)
{
	struct ev *n = room_for(t->rfirst, t->nrun, &t->crfirst, sizeof *n, 64);
	if (!n) {
		an_runs_drop(t);
		return -1;
	}
	t->rfirst = n;
	t->rfirst[t->nrun] = *v;
	t->rfirst[t->nrun].path = -1;
	return 0;
}

/* v, a call of t that is not kept, into its current run; its input patterns as the split's fold
 * takes them (split.c) */
void an_run_add(struct thr *t, const struct ev *v)
{
	struct runacc *u = &t->cur;
	int c = an_category(v);
	if (c < 0 || c >= CAT_COUNT) { /* (a point in time not kept: the split needs it) */
		an_runs_drop(t);
		return;
	}
	if (!u->n++) {
		u->tmin = u->tmax = v->t;
		u->end = INT64_MIN;
		u->pat = (uint32_t)t->nrpat;
		u->nopat = !t->n; /* (a thread's calls before its first kept one: every call of threads that
				   * never make one, an input thread's reads, which the split will not need) */
		if (t->first_on && run_first(t, v) < 0)
			return;
	} else if (u->nopat && u->n > RUN_FIRST_MAX) { /* most likely not a training thread: given up */
		an_runs_drop(t);
		return;
	}
	t->nmemb++;
	if (u->n > 1) /* (the call before it in the run: tl, dl, cat) */
		u->ns[CAT_DATA] += an_input_gap(u->cat, u->tl + u->dl, c, v);
	u->tmin = v->t < u->tmin ? v->t : u->tmin; /* (calls come in order of their ends: nested ones first) */
	u->tmax = v->t > u->tmax ? v->t : u->tmax;
	u->tl = v->t;
	u->dl = v->d;
	if (v->t + v->d > u->end)
		u->end = v->t + v->d;
	u->ns[c] += v->d;
	u->cat = c;
	if (c != CAT_DATA || u->nopat)
		return;
	int64_t by = an_pat_bytes(v);
	/* (its patterns are the pool's last) */
	size_t j = u->pat + (u->npat ? an_pat_find(&t->rpat[u->pat], u->npat, v->kind, v->fdclass, by) : 0);
	if (j == (size_t)u->pat + u->npat) {
		struct pat *n = u->npat < MAX_PATS ? room_for(t->rpat, t->nrpat, &t->crpat, sizeof *n, 64) : NULL;
		if (!n || t->nrpat >= UINT32_MAX) {
			an_runs_drop(t);
			return;
		}
		t->rpat = n;
		t->rpat[t->nrpat++] = (struct pat){ v->kind, v->fdclass, by, 0, 0, 0 };
		u->npat++;
	}
	t->rpat[j].calls++;
	t->rpat[j].ns += v->d;
}

/* t's current run ends (a kept call, or the end of the file): kept when it has calls, in the
 * narrower form (what does not fit in it is read again instead) */
void an_run_close(struct thr *t)
{
	const struct runacc *u = &t->cur;
	if (!u->n)
		return;
	const uint32_t M = UINT32_MAX;
	struct callrun *n = room_for(t->run, t->nrun, &t->crun, sizeof *n, 64);
	if (!n || u->end - u->tmin > M || u->dl > M || t->n > M || u->ns[CAT_DATA] > M || u->ns[CAT_COMMS] > M ||
	    u->ns[CAT_HOST] > M) {
		if (n)
			t->run = n;
		an_runs_drop(t);
		return;
	}
	t->run = n;
	t->run[t->nrun++] = (struct callrun){ .tmin = u->tmin, .tmax = (uint32_t)(u->tmax - u->tmin),
					     .tl = (uint32_t)(u->tl - u->tmin), .end = (uint32_t)(u->end - u->tmin),
					     .dl = (uint32_t)u->dl, .ns = { (uint32_t)u->ns[CAT_DATA],
									    (uint32_t)u->ns[CAT_COMMS], (uint32_t)u->ns[CAT_HOST] },
					     .before = (uint32_t)t->n, .pat = u->pat, .npat = (uint8_t)u->npat,
					     .cat = (int8_t)u->cat, .nopat = (uint8_t)u->nopat };
	memset(&t->cur, 0, sizeof t->cur);
}
