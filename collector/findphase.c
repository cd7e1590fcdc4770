/* The program's own phases, its NVTX ranges (ranges.c), in the findings: a rank's ranges per
 * analysed step (ranks[i].ranges), and evidence.range, the range a finding's cost is in. For a
 * rank's excess over its peers (rank 0's host work, a straggler's, an asymmetric rank's) that is
 * the range whose time per step exceeds its peers' median the most, or a range inside it that
 * holds at least half as much: the innermost that says it (the excess of "step" is all of it; that
 * of "backward" in it says more). For input waits it is the range that holds the most of them
 * (each wait counts in the innermost range open around it). */
#include <math.h>
#include <stdlib.h>

#include "analysis_int.h"
#include "findings_int.h"

double an_span_part(const struct span *sp, int64_t lo, int64_t hi)
{
	if (hi <= lo)
		return lo >= sp->t0 && lo < sp->t1;
	int64_t a = lo > sp->t0 ? lo : sp->t0, b = hi < sp->t1 ? hi : sp->t1;
	return b > a ? (double)(b - a) / (double)(hi - lo) : 0;
}

/* the part of [t, t + d) (the file's clock) in rank r's analysed steps, in ms; in: whether it began there */
static double clip(const struct analysis *a, int r, int64_t t, int64_t d, int *in)
{
	const struct span *sp = &a->sd->span[r];
	int64_t lo = an_job_time(a->ranks[r].p, t);
	*in = an_span_part(sp, lo, lo) > 0;
	return d > 0 ? an_span_part(sp, lo, lo + d) * (double)d / 1e6 : 0;
}

double an_range_ms(const struct analysis *a, int r, const struct nvrange *g, double *calls)
{
	const struct span *sp = &a->sd->span[r];
	double ms = 0, n = 0, known_ms = 0;
	int nc = (int)fmin(g->calls, 1e9), nh = nc < AN_RANGE_ENDS ? nc : AN_RANGE_ENDS;
	int nt = nc - nh < AN_RANGE_ENDS ? nc - nh : AN_RANGE_ENDS, in;
	/* the first few and the latest few exactly (the warm-up's and the end's) */
	for (int i = 0; i < nh + nt; i++) {
		int64_t t = i < nh ? g->head[i].t : g->tail[(nc - nt + (i - nh)) % AN_RANGE_ENDS].t;
		int64_t d = i < nh ? g->head[i].d : g->tail[(nc - nt + (i - nh)) % AN_RANGE_ENDS].d;
		ms += clip(a, r, t, d, &in);
		n += in;
		known_ms += (double)d / 1e6;
	}
	/* the rest taken as spread evenly between them */
	int mid = nc - nh - nt;
	if (mid > 0) {
		int64_t lo = an_job_time(a->ranks[r].p, g->head[nh - 1].t + g->head[nh - 1].d);
		int64_t hi = an_job_time(a->ranks[r].p, g->tail[(nc - nt) % AN_RANGE_ENDS].t);
		double share = an_span_part(sp, lo, hi);
		ms += share * fmax(0, g->ms - known_ms);
		n += share * mid;
	}
	if (calls)
		*calls = sp->n > 0 ? n / sp->n : 0;
	return sp->n > 0 ? ms / sp->n : 0;
}

int an_train_ranges(const struct analysis *a, int r, const struct nvrange **out, int max)
{
	const struct proc *p = a->ranks[r].p;
	const struct thr *t = an_train_thread(p);
	int n = 0;
	for (int i = 0; t && i < p->nrange && n < max; i++)
		if (p->range[i].tid == t->tid)
			out[n++] = &p->range[i];
	return n;
}

/* rank index r's training thread's range of g's domain and name, NULL none */
static const struct nvrange *same_range(const struct analysis *a, int r, const struct nvrange *g)
{
	const struct proc *p = a->ranks[r].p;
	const struct thr *t = an_train_thread(p);
	int k = t ? an_range_find(p, t->tid, g->domain, g->name) : p->nrange;
	return k < p->nrange ? &p->range[k] : NULL;
}

/* the median of the peers' time per step in a range like g (0 where a peer has none), -1 no peers */
static double peers_ms(const struct analysis *a, int L, const struct nvrange *g)
{
	double *v = malloc((size_t)a->nranks * sizeof *v);
	size_t n = 0;
	for (int r = 0; v && r < a->nranks; r++) {
		if (r == L || !a->ranks[r].steps)
			continue;
		const struct nvrange *o = same_range(a, r, g);
		v[n++] = o ? an_range_ms(a, r, o, NULL) : 0;
	}
	double m = n ? an_quantile_select(v, n, 0.5) : -1;
	free(v);
	return m;
}

#define RANGE_MIN_MS 0.5 /* a cost under this per step is not placed in a range */

void an_range_evidence(struct finding *f, const struct analysis *a, int L, int cat)
{
	const struct nvrange *g[AN_RANGES];
	int n = an_train_ranges(a, L, g, AN_RANGES);
	double ms[AN_RANGES], peers[AN_RANGES], cost[AN_RANGES], top = 0;
	for (int i = 0; i < n; i++) {
		ms[i] = an_range_ms(a, L, g[i], NULL);
		peers[i] = peers_ms(a, L, g[i]);
		if (cat == CAT_DATA) /* (its input waits: the share of them in the steps, like its own time's) */
			cost[i] = g[i]->ms > 0 ? ms[i] * g[i]->cat_ms[CAT_DATA] / g[i]->ms : 0;
		else
			cost[i] = peers[i] >= 0 ? ms[i] - peers[i] : 0;
		top = fmax(top, cost[i]);
	}
	int best = -1;
	for (int i = 0; top >= RANGE_MIN_MS && i < n; i++)
		if (cost[i] >= 0.5 * top && (best < 0 || g[i]->depth > g[best]->depth ||
					     (g[i]->depth == g[best]->depth && cost[i] > cost[best])))
			best = i;
	if (best < 0)
		return;
	an_ev_open(f, "range", FV_OBJ);
	an_ev_str(f, "name", g[best]->name);
	an_ev_str(f, "domain", g[best]->domain[0] ? g[best]->domain : NULL);
	an_ev_num(f, "ms_per_step", ms[best], 3);
	if (peers[best] >= 0)
		an_ev_num(f, "peers_ms_per_step", peers[best], 3);
	else
		an_ev_str(f, "peers_ms_per_step", NULL);
	an_ev_num(f, cat == CAT_DATA ? "input_wait_ms_per_step" : "excess_ms_per_step", cost[best], 3);
	an_ev_end(f);
}
