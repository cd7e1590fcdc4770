/* Clocks: every process's times moved onto one job clock, first by its CLOCK_REALTIME anchor,
 * then, for the ranks, by the offset and drift that the collectives every rank leaves together
 * show (NCCL kernels on GPU jobs; else the host's, blocking or completed by a wait), bounded by
 * causality; a rank's input workers move with it. Also the job's span on that clock. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/format.h"
#include "analysis_int.h"
#include "trace.h"

static void shift_proc(struct proc *p, int64_t by)
{
	p->shift += by;
	for (int i = 0; i < p->nthr; i++) {
		struct thr *t = &p->thr[i];
		for (size_t k = 0; k < t->n; k++)
			t->ev[k].t += by;
		if (t->first <= t->last) {
			t->first += by;
			t->last += by;
		}
	}
}

/* the drift's correction, t + drift x (t - ref), on every time of p kept so far (a duration's end
 * moves with it) and on every later one (an_job_time) */
static void drift_proc(struct proc *p, double drift, int64_t ref)
{
	p->drift = drift;
	p->drift_ref = ref;
	if (drift == 0)
		return;
#define DRIFT(x) ((x) + (int64_t)(drift * (double)((x) - ref)))
	for (int i = 0; i < p->nthr; i++) {
		struct thr *t = &p->thr[i];
		for (size_t k = 0; k < t->n; k++) {
			int64_t end = DRIFT(t->ev[k].t + t->ev[k].d);
			t->ev[k].t = DRIFT(t->ev[k].t);
			t->ev[k].d = end - t->ev[k].t;
		}
		if (t->first <= t->last) {
			t->first = DRIFT(t->first);
			t->last = DRIFT(t->last);
		}
	}
#undef DRIFT
}

/* workers share their rank's host clock */
static void align_workers(struct analysis *a)
{
	for (int i = 0; i < a->nprocs; i++) {
		struct proc *w = &a->procs[i];
		if (w->role != DDPSPY_ROLE_WORKER)
			continue;
		for (int r = 0; r < a->nranks; r++) {
			const struct proc *p = a->ranks[r].p;
			if (p->pid == w->parent_pid && !strcmp(p->host, w->host)) {
				shift_proc(w, p->offset);
				drift_proc(w, p->drift, p->drift_ref);
			}
		}
	}
}

/* A collective instance (comm, seq) as one rank saw it: when it joined (called a blocking
 * collective, posted a nonblocking one, launched its NCCL kernel), when it began to wait for it
 * (from: the blocking call's or the kernel's start, the wait's) and when it saw it done (left
 * the call, left the wait that completed it, the kernel ended), on its own clock, anchored. An
 * instance of a symmetric collective (all-reduce, all-gather, all-to-all, barrier, reduce-scatter)
 * is done only once every rank joined it: no rank saw it done before the last one joined.
 * done is NO_EXIT where the rank's exit says nothing of when the instance ended: a wait shorter
 * than WAIT_BLOCKED, which may have found it done long before (a wait after the work it overlaps),
 * is neither an exit that every rank leaves together nor a bound tight enough to keep. */
#define NO_EXIT INT64_MAX
#define WAIT_BLOCKED 20000
struct cpt {
	int32_t comm, seq;
	int64_t join, from, done;
};

struct cpts {
	struct cpt *v;
	size_t n, cap;
};

static void cpt_add(struct cpts *c, int32_t comm, int32_t seq, int64_t join, int64_t from, int64_t done)
{
	struct cpt *v = room_for(c->v, c->n, &c->cap, sizeof *v, 256);
	if (v)
		(c->v = v)[c->n++] = (struct cpt){ comm, seq, join, from, done };
}

/* whether instance e counts: a spread's (spread) always, the prefix's at the spread's level */
static int at_level(const struct proc *p, const struct ev *e, int spread)
{
	return spread || !p->spk || an_spread_level(e) >= p->spk;
}

/* The host's: blocking symmetric collectives, and nonblocking ones with the wait that completed
 * them, found by its request (an_posts_of). A wait whose request is none of the posted (a request
 * a test completed already) says nothing. From a thread's kept calls (its prefix, on the job's
 * clock), then its spread (on its own clock): of the prefix, only the instances of the spread's
 * level when a trace has one (p->spk), so that no part of the job weighs more than another. */
static void host_calls(const struct proc *p, const struct ev *ev, size_t n, const uint8_t *lv, struct cpts *c)
{
	struct an_posts *q = malloc(sizeof *q);
	if (!q)
		return;
	q->n = 0;
	for (size_t k = 0; k < n; k++) {
		int i, last;
		if (lv && lv[k] < p->spk)
			continue; /* (a Waitall and its posts: one level) */
		struct ev e = lv ? an_job_ev(p, &ev[k]) : ev[k];
		if (an_exit_aligns(&e)) {
			if (at_level(p, &e, lv != NULL))
				cpt_add(c, e.comm, e.seq, e.t, e.t, e.t + e.d);
		} else if (!an_post(q, &e) && an_posts_of(q, &e, &i, &last)) {
			for (int j = i; j < last; j++)
				if (an_op_is(&q->v[j], DDPSPY_OPF_SYM) && at_level(p, &q->v[j], lv != NULL))
					cpt_add(c, q->v[j].comm, q->v[j].seq, q->v[j].t, e.t,
						e.d < WAIT_BLOCKED ? NO_EXIT : e.t + e.d);
			an_posts_done(q, i, last);
		}
	}
	free(q);
}

static void host_points(const struct proc *p, struct cpts *c)
{
	for (int h = 0; h < p->nthr; h++) {
		host_calls(p, p->thr[h].ev, p->thr[h].n, NULL, c);
		host_calls(p, p->thr[h].spr, p->thr[h].nspr, p->thr[h].slv, c);
	}
}

static void gpu_points(const struct proc *p, struct cpts *c)
{
	struct gend *e;
	size_t n = an_gpu_nccl_ends(p, &e);
	for (size_t i = 0; i < n; i++)
		cpt_add(c, e[i].comm, e[i].seq, e[i].start, e[i].start, e[i].end);
	free(e);
}

/* ---- the estimate ----
 * Rank r's clock reads o_r ahead of the job's (the lowest rank's). Every rank leaves an instance
 * together, to within microseconds, when each was on a CPU as it ended: the median of r's exits
 * against the lowest rank's is o_r. A rank off its CPU then (milliseconds at a time when a host
 * has fewer cores than busy threads) leaves late; the median resists that while it is the
 * exception. An exit says when the instance ended only if the rank waited for it across that
 * moment: a wait that began after it ended (a nonblocking all-reduce waited for after the work it
 * overlapped, its own progress taking tens of us) leaves at no shared moment, and a few such
 * waits, longer than WAIT_BLOCKED by chance, would put the clocks a step apart. Two waits that
 * spanned one moment overlap on the job's clock, however late either rank woke: o_r lies in
 * [from_r - done_0, done_r - from_0]. So the exits measure o_r only when at least half of them
 * agree with their median so; else the rank is measured by its bounds, as one without exits.
 *
 * Causality bounds the estimate besides. r saw instance k done only after every rank L joined it,
 * so done_r,k - o_r >= join_L,k - o_L, that is o_r - o_L <= done_r,k - join_L,k; and a receive
 * returned only after its message was sent, so o_r - o_s <= recvd_r - sent_s for every message
 * from s to r (p2p.c matches them). The tightest bound of each pair, and the tightest path of
 * bounds through the other ranks (Bellman-Ford from and to the lowest rank over every pair's
 * bound up to MAX_PATHS ranks; beyond, over the instances' bounds against the lowest rank and
 * every pair's messages), put o_r in [lo, hi]: the message-causality reasoning of Scalasca's and
 * Vampir's clock controllers, for collectives (whose every rank sends to every other) and
 * messages. A median outside is moved to the nearer end. The residual is the median distance of
 * r's exits from the estimate, no more than the interval's width: how closely the trace says the
 * clocks agree, measured. A rank with no exits but both ends bounded (a program that only sends
 * and receives) is put at the interval's middle, and its residual is the half-width: the most it
 * can be off while causality holds.
 *
 * Drift: over DRIFT_MIN_SPAN or more, the job is cut into windows of equal counts (instances,
 * WINDOW_MIN a window at least; without instances, messages, MSG_WINDOW_MIN); each window's
 * estimate is o_r at its middle time, and a line through them (least squares, each weighted by its
 * standard error) is the drift when it is DRIFT_SIGNIFICANCE standard errors from 0 (drift_fit).
 * With the drift taken out of r's times, one estimate over the whole job gives the level and the
 * residual.
 *
 * CLOCK_REALTIME is kept (no correction) where the trace cannot tell it wrong: 0 within [lo, hi]
 * without the drift, and the offset and the drift over the job within the residual. Ranks on one
 * host share its clock, and a correction there would move them by the exits' noise. */
#define DRIFT_MIN_SPAN 4000000000LL
#define WINDOW_MIN 8
#define MSG_WINDOW_MIN 64
#define MAX_WINDOWS 8
#define MAX_PATHS 64
#define DRIFT_SIGNIFICANCE 3
#define MEDIAN_SE 1.858 /* a median's standard error over (median distance / sqrt(n)), normal noise */

struct mat {
	int R;
	size_t K;
	struct cpt *x; /* x[k * R + r], join INT64_MIN: r has no k */
	int64_t *t;    /* t[k]: when k happened (the lowest rank's time, or any rank's) */
};

static struct cpt *X(const struct mat *m, size_t k, int r)
{
	return &m->x[k * (size_t)m->R + (size_t)r];
}

/* a message from s to r, t: its send on the lowest rank's clock as first measured */
struct tmsg {
	int s, r;
	int64_t sent, recvd, t;
};

/* what the trace has to measure clocks with: instances, messages, and where each window of the
 * job starts in both */
struct sig {
	struct mat m;
	struct tmsg *g;
	size_t ng;
	size_t W, k[MAX_WINDOWS + 1], j[MAX_WINDOWS + 1];
	int64_t tc; /* the time about which drifts turn */
};

/* o_r - o_s <= w */
struct edge {
	int r, s;
	double w;
};

struct edges {
	struct edge *v;
	size_t n, cap;
};

static void edge_add(struct edges *e, int r, int s, double w)
{
	struct edge *v = room_for(e->v, e->n, &e->cap, sizeof *v, 256);
	if (v)
		(e->v = v)[e->n++] = (struct edge){ r, s, w };
}

static int cmp_edge(const void *a, const void *b)
{
	const struct edge *x = a, *y = b;
	if (x->r != y->r)
		return AN_ORDER(x->r, y->r);
	if (x->s != y->s)
		return AN_ORDER(x->s, y->s);
	return AN_ORDER(x->w, y->w);
}

/* rank r's time x with the drift b about tc taken out, as a time from tc (a double holds
 * nanoseconds since 1970 to a quarter of a microsecond only) */
static double undrift(double b, int64_t x, int64_t tc)
{
	return (1 - b) * (double)(x - tc);
}

/* [lo[r], hi[r]] for o_r - o_0 from window w's instances and messages (every window: w == g->W),
 * times of rank r moved by -b_r (t - tc) first (the drift found so far); infinite where nothing
 * bounds it. U: (R + 1) x R scratch up to MAX_PATHS ranks. */
static void bounds(const struct sig *g, size_t w, const double *b, double *U, struct edges *E, double *lo, double *hi)
{
	const struct mat *m = &g->m;
	int R = m->R;
	int64_t tc = g->tc;
	size_t k0 = w < g->W ? g->k[w] : 0, k1 = w < g->W ? g->k[w + 1] : m->K;
	size_t j0 = w < g->W ? g->j[w] : 0, j1 = w < g->W ? g->j[w + 1] : g->ng;
	E->n = 0;
	if (R <= MAX_PATHS) {
		/* (U's rows and this instance's joins, compared with <, not fmin: this is K x R x R) */
		double *jl = U + (size_t)R * (size_t)R;
		for (size_t i = 0; i < (size_t)R * (size_t)R; i++)
			U[i] = INFINITY;
		for (size_t k = k0; k < k1; k++) {
			for (int L = 0; L < R; L++) {
				const struct cpt *xl = X(m, k, L);
				jl[L] = xl->join == INT64_MIN ? NAN : undrift(b[L], xl->join, tc);
			}
			for (int r = 0; r < R; r++) {
				const struct cpt *xr = X(m, k, r);
				if (xr->join == INT64_MIN || xr->done == NO_EXIT)
					continue;
				double dr = undrift(b[r], xr->done, tc), *row = &U[(size_t)r * (size_t)R];
				for (int L = 0; L < R; L++) {
					double v = dr - jl[L];
					if (L != r && v < row[L]) /* (false for a NaN: L has no k) */
						row[L] = v;
				}
			}
		}
		for (int r = 0; r < R; r++)
			for (int L = 0; L < R; L++)
				if (isfinite(U[(size_t)r * (size_t)R + (size_t)L]))
					edge_add(E, r, L, U[(size_t)r * (size_t)R + (size_t)L]);
	} else {
		/* each rank against the lowest only: K x R, not K x R x R (lo, hi as scratch) */
		for (int r = 0; r < R; r++)
			lo[r] = hi[r] = INFINITY;
		for (size_t k = k0; k < k1; k++) {
			const struct cpt *x0 = X(m, k, 0);
			for (int r = 1; x0->join != INT64_MIN && r < R; r++) {
				const struct cpt *xr = X(m, k, r);
				if (xr->join == INT64_MIN)
					continue;
				double h = xr->done == NO_EXIT ? INFINITY : undrift(b[r], xr->done, tc) - undrift(0, x0->join, tc);
				double l = x0->done == NO_EXIT ? INFINITY : undrift(0, x0->done, tc) - undrift(b[r], xr->join, tc);
				hi[r] = h < hi[r] ? h : hi[r];
				lo[r] = l < lo[r] ? l : lo[r];
			}
		}
		for (int r = 1; r < R; r++) {
			if (isfinite(hi[r]))
				edge_add(E, r, 0, hi[r]);
			if (isfinite(lo[r]))
				edge_add(E, 0, r, lo[r]);
		}
	}
	for (size_t j = j0; j < j1; j++) {
		const struct tmsg *x = &g->g[j];
		edge_add(E, x->r, x->s, undrift(b[x->r], x->recvd, tc) - undrift(b[x->s], x->sent, tc));
	}
	/* each pair's tightest */
	sort_n(E->v, E->n, sizeof *E->v, cmp_edge);
	size_t n = 0;
	for (size_t i = 0; i < E->n; i++)
		if (!n || E->v[i].r != E->v[n - 1].r || E->v[i].s != E->v[n - 1].s)
			E->v[n++] = E->v[i];
	E->n = n;
	/* the tightest paths to the lowest rank (hi) and from it (-lo) */
	for (int r = 0; r < R; r++)
		lo[r] = hi[r] = r ? INFINITY : 0;
	for (int it = 0; it < R; it++) {
		int changed = 0;
		for (size_t i = 0; i < E->n; i++) {
			const struct edge *e = &E->v[i];
			if (e->w + hi[e->s] < hi[e->r]) {
				hi[e->r] = e->w + hi[e->s];
				changed = 1;
			}
			if (lo[e->r] + e->w < lo[e->s]) {
				lo[e->s] = lo[e->r] + e->w;
				changed = 1;
			}
		}
		if (!changed)
			break;
	}
	for (int r = 0; r < R; r++)
		lo[r] = -lo[r];
}

/* an instance both ranks saw done at an exit (x0: the lowest rank's view of it, xr: rank r's) */
static int both_exit(const struct cpt *x0, const struct cpt *xr)
{
	return x0->join != INT64_MIN && xr->join != INT64_MIN && x0->done != NO_EXIT && xr->done != NO_EXIT;
}

/* rank r's exits against the lowest rank's in [k0, k1), its drift (b about tc) taken out, into v */
static size_t exits(const struct mat *m, size_t k0, size_t k1, int r, double b, int64_t tc, double *v)
{
	size_t n = 0;
	for (size_t k = k0; k < k1; k++) {
		const struct cpt *x0 = X(m, k, 0), *xr = X(m, k, r);
		if (both_exit(x0, xr))
			v[n++] = undrift(b, xr->done, tc) - undrift(0, x0->done, tc);
	}
	return n;
}

/* how many of r's exits in [k0, k1) agree with its lead e over the lowest rank: moved by e, the
 * two ranks' waits overlap (its drift b about tc taken out) */
static size_t agreeing(const struct mat *m, size_t k0, size_t k1, int r, double b, int64_t tc, double e)
{
	size_t n = 0;
	for (size_t k = k0; k < k1; k++) {
		const struct cpt *x0 = X(m, k, 0), *xr = X(m, k, r);
		if (!both_exit(x0, xr))
			continue;
		double lo = undrift(b, xr->from, tc) - undrift(0, x0->done, tc);
		double hi = undrift(b, xr->done, tc) - undrift(0, x0->from, tc);
		n += lo <= e && e <= hi;
	}
	return n;
}

/* the median distance of v's n values from e (v is overwritten) */
static double spread(double *v, size_t n, double e)
{
	for (size_t i = 0; i < n; i++)
		v[i] = fabs(v[i] - e);
	return an_quantile(v, n, 0.5);
}

/* Rank r's lead over the lowest rank in window w, its drift b taken out, *res how far off it may
 * be: from 3 or more exits, half of them agreeing with their median, it moved into [lo, hi]; else
 * from [lo, hi] alone where both ends are known, its middle. Returns 0 from exits, 1 from the
 * bounds, -1 neither. */
static int estimate(const struct sig *g, size_t w, int r, double b, double lo, double hi, double *v, double *est,
		    double *res, double *se)
{
	size_t k0 = w < g->W ? g->k[w] : 0, k1 = w < g->W ? g->k[w + 1] : g->m.K;
	size_t n = exits(&g->m, k0, k1, r, b, g->tc, v);
	double flat = isfinite(hi - lo) ? fabs(hi - lo) / sqrt(12) : INFINITY; /* (uniform in [lo, hi]) */
	double mid = n >= 3 ? an_quantile(v, n, 0.5) : 0;
	if (n >= 3 && 2 * agreeing(&g->m, k0, k1, r, b, g->tc, mid) >= n) {
		*est = mid;
		if (lo <= hi)
			*est = fmin(fmax(*est, lo), hi);
		*res = spread(v, n, *est);
		*se = fmin(MEDIAN_SE * *res / sqrt((double)n), flat);
		if (lo <= hi && isfinite(hi - lo))
			*res = fmin(*res, hi - lo);
		return 0;
	}
	if (!isfinite(hi - lo))
		return -1;
	*est = (lo + hi) / 2;
	*res = fabs(hi - lo) / 2;
	*se = flat;
	return 1;
}

/* estimate() for ranks 1 to R - 1 over windows w0 to w1 - 1, on the analysis's threads (each
 * rank's are independent of the others'): lo, hi, est, res by window, R each; b: each rank's
 * drift (NULL: none); how: estimate()'s return */
struct estjob {
	const struct sig *g;
	size_t w0, w1;
	const double *b, *lo, *hi;
	double *est, *res;
	int *how;
	double *se; /* the estimates' standard errors (NULL: not asked) */
};

/* rank r's windows, with scratch v (K + 1) */
static void est_windows(const struct estjob *j, int r, double *v)
{
	for (size_t w = j->w0; w < j->w1; w++) {
		size_t x = (w - j->w0) * (size_t)j->g->m.R + (size_t)r;
		double se = INFINITY;
		j->how[x] = estimate(j->g, w, r, j->b ? j->b[r] : 0, j->lo[x], j->hi[x], v, &j->est[x], &j->res[x], &se);
		if (j->se)
			j->se[x] = se;
	}
}

static void est_rank(void *ctx, size_t i)
{
	const struct estjob *j = ctx;
	double *v = malloc((j->g->m.K + 1) * sizeof *v);
	if (v)
		est_windows(j, (int)i + 1, v);
	else
		j->how[i + 1] = -2; /* (its first window's: estimate_ranks does them all) */
	free(v);
}

static void estimate_ranks(const struct analysis *a, const struct estjob *j, double *v)
{
	int R = j->g->m.R;
	an_parallel((size_t)R - 1, a->jobs, NULL, est_rank, (void *)j);
	for (int r = 1; r < R; r++) /* (a thread out of memory: here, with v) */
		if (j->how[r] == -2)
			est_windows(j, r, v);
}

static int cmp_tmsg(const void *a, const void *b)
{
	int64_t x = ((const struct tmsg *)a)->t, y = ((const struct tmsg *)b)->t;
	return AN_ORDER(x, y);
}

/* the messages placed in time by a first estimate over the whole job (est0), sorted; the windows:
 * of equal counts of instances, or of messages when there are fewer than 3 instances */
static void windows(struct sig *g, const double *est0)
{
	const struct mat *m = &g->m;
	for (size_t j = 0; j < g->ng; j++)
		g->g[j].t = g->g[j].sent - (int64_t)llround(est0[g->g[j].s]);
	sort_n(g->g, g->ng, sizeof *g->g, cmp_tmsg);
	int by_inst = m->K >= 3;
	size_t n = by_inst ? m->K : g->ng, min = by_inst ? WINDOW_MIN : MSG_WINDOW_MIN;
	int64_t first = by_inst ? m->t[0] : g->g[0].t, last = by_inst ? m->t[m->K - 1] : g->g[g->ng - 1].t;
	g->tc = by_inst ? m->t[m->K / 2] : g->g[g->ng / 2].t;
	g->W = last - first >= DRIFT_MIN_SPAN ? n / min : 1;
	g->W = g->W > MAX_WINDOWS ? MAX_WINDOWS : g->W < 1 ? 1 : g->W;
	for (size_t w = 0; w <= g->W; w++) {
		size_t i = n * w / g->W;
		int64_t at = w == 0 ? INT64_MIN : w == g->W ? INT64_MAX : by_inst ? m->t[i] : g->g[i].t;
		g->k[w] = by_inst ? i : w == g->W ? m->K : an_first_at(m->t, m->K, sizeof *m->t, 0, at);
		g->j[w] = !by_inst ? i : w == g->W || !g->ng ? g->ng
							    : an_first_at(g->g, g->ng, sizeof *g->g, offsetof(struct tmsg, t), at);
	}
}

/* the time of window w's middle */
static int64_t mid_time(const struct sig *g, size_t w)
{
	if (g->m.K >= 3)
		return g->m.t[(g->k[w] + g->k[w + 1]) / 2];
	return g->g[(g->j[w] + g->j[w + 1]) / 2].t;
}

static int cmp_cpt_t(const void *a, const void *b)
{
	int64_t x = ((const struct cpt *)a)->join, y = ((const struct cpt *)b)->join;
	return AN_ORDER(x, y);
}

/* by instance, then by time: a rank that saw one twice keeps the first */
static int cmp_cpt_key(const void *a, const void *b)
{
	const struct cpt *p = a, *q = b;
	int64_t x = an_inst_key(p->comm, p->seq), y = an_inst_key(q->comm, q->seq);
	return x != y ? AN_ORDER(x, y) : cmp_cpt_t(a, b);
}

/* an instance's key and its row, sorted by key to be found by bsearch (16 bytes an instance:
 * instances grow with the trace while every call is kept) */
struct krow {
	int64_t key;
	size_t k;
};

static int cmp_krow(const void *a, const void *b)
{
	int64_t x = ((const struct krow *)a)->key, y = ((const struct krow *)b)->key;
	return AN_ORDER(x, y);
}

struct gatherjob {
	struct analysis *a;
	void (*points)(const struct proc *, struct cpts *);
	struct mat *m;
	const struct krow *ix;
	size_t n;
};

/* rank i + 1's view of the lowest rank's instances, into its column */
static void gather_rank(void *ctx, size_t i)
{
	struct gatherjob *j = ctx;
	int r = (int)i + 1;
	struct cpts c = { 0 };
	j->points(j->a->ranks[r].p, &c); /* (out of memory: fewer points, as on one thread) */
	for (size_t q = 0; q < c.n; q++) {
		struct krow key = { an_inst_key(c.v[q].comm, c.v[q].seq), 0 };
		const struct krow *f = bsearch(&key, j->ix, j->n, sizeof *j->ix, cmp_krow);
		if (f && X(j->m, f->k, r)->join == INT64_MIN)
			*X(j->m, f->k, r) = c.v[q];
	}
	free(c.v);
}

/* the instances the lowest rank saw, a row each in the order it joined them, with every rank's
 * view of each */
static int gather(struct analysis *a, void (*points)(const struct proc *, struct cpts *), struct mat *m)
{
	int R = a->nranks;
	struct cpts c = { 0 };
	points(a->ranks[0].p, &c);
	sort_n(c.v, c.n, sizeof *c.v, cmp_cpt_key);
	size_t n = 0;
	for (size_t i = 0; i < c.n; i++)
		if (!n || an_inst_key(c.v[i].comm, c.v[i].seq) != an_inst_key(c.v[n - 1].comm, c.v[n - 1].seq))
			c.v[n++] = c.v[i];
	sort_n(c.v, n, sizeof *c.v, cmp_cpt_t);
	m->R = R;
	m->K = n;
	m->x = malloc((n + 1) * (size_t)R * sizeof *m->x);
	m->t = malloc((n + 1) * sizeof *m->t);
	struct krow *ix = malloc((n + 1) * sizeof *ix);
	int rc = m->x && m->t && ix ? 0 : -1;
	for (size_t k = 0; !rc && k < n; k++) {
		for (int r = 0; r < R; r++)
			*X(m, k, r) = (struct cpt){ .join = INT64_MIN };
		*X(m, k, 0) = c.v[k];
		m->t[k] = c.v[k].join;
		ix[k] = (struct krow){ an_inst_key(c.v[k].comm, c.v[k].seq), k };
	}
	if (!rc)
		sort_n(ix, n, sizeof *ix, cmp_krow);
	free(c.v);
	struct gatherjob j = { a, points, m, ix, n };
	if (!rc && R > 1) /* (the other ranks on the analysis's threads: each fills its own column) */
		an_parallel((size_t)R - 1, a->jobs, NULL, gather_rank, &j);
	free(ix);
	return rc;
}

/* Rank r's drift: the slope of its windows' offsets wm against their times wt by weighted least
 * squares, each window by its estimate's standard error (wse; hw < 0: no estimate); 0 when none,
 * or when the slope is within DRIFT_SIGNIFICANCE standard errors of 0 (a slope through windows'
 * noise, carried to the job's ends, moves them by more than the noise). */
static double drift_fit(size_t W, int R, int r, const double *wt, const double *wm, const double *wse,
			const int *hw)
{
	double s = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
	size_t n = 0;
	int exits = 1;
	for (size_t w = 0; w < W; w++) {
		size_t x = w * (size_t)R + (size_t)r;
		double e = hw[x] < 0 ? INFINITY : wse[x], y = wm[x];
		if (!isfinite(e))
			continue;
		double q = 1 / (e * e + 1e6); /* (1 us squared: an error of 0 weighs much, not all) */
		s += q;
		sx += q * wt[w];
		sy += q * y;
		sxx += q * wt[w] * wt[w];
		sxy += q * wt[w] * y;
		n++;
		exits &= hw[x] == 0;
	}
	double den = s * sxx - sx * sx;
	if (!(s > 0 && den > 0))
		return 0;
	double slope = (s * sxy - sx * sy) / den, at = (sy - slope * sx) / s, chi = 0;
	for (size_t w = 0; n > 2 && w < W; w++) {
		size_t x = w * (size_t)R + (size_t)r;
		double e = hw[x] < 0 ? INFINITY : wse[x], d = wm[x] - at - slope * wt[w];
		if (isfinite(e))
			chi += d * d / (e * e + 1e6);
	}
	/* windows of exits: their own errors, or their scatter where larger; windows of bounds: the
	 * scatter alone (the truth's place within an interval is unknown; two windows: none) */
	double scale = n > 2 ? chi / (double)(n - 2) : exits ? 1 : 0;
	double var = s / den * (exits ? fmax(1, scale) : scale);
	return fabs(slope) >= DRIFT_SIGNIFICANCE * sqrt(var) ? slope : 0;
}

/* Every rank's clock against the lowest rank's from the instances points() finds and, with msgs,
 * the messages: a rank is corrected from 3 or more instances it shares with the lowest rank, or
 * from both ends of its interval. *worst: the largest residual (us); *nb: the ranks measured by
 * their bounds alone. Returns the ranks corrected. */
static int align_from(struct analysis *a, void (*points)(const struct proc *, struct cpts *), int msgs, double *worst,
		      int *nb)
{
	int R = a->nranks, refined = 0;
	struct sig g = { 0 };
	struct an_msg *am = NULL;
	struct edges E = { 0 };
	double *B = calloc((size_t)R, sizeof *B), *est0 = calloc((size_t)R, sizeof *est0);
	double *B0 = calloc((size_t)R, sizeof *B0);
	double *lo = malloc((size_t)R * sizeof *lo), *hi = malloc((size_t)R * sizeof *hi);
	double *lo0 = malloc((size_t)R * sizeof *lo0), *hi0 = malloc((size_t)R * sizeof *hi0);
	double *U = R <= MAX_PATHS ? malloc(((size_t)R + 1) * (size_t)R * sizeof *U) : NULL;
	/* by window and rank: the bounds, the estimates, their residuals, estimate()'s return */
	size_t WR = (size_t)R * (MAX_WINDOWS + 1);
	double *wlo = malloc(WR * sizeof *wlo), *whi = malloc(WR * sizeof *whi);
	double *wm = malloc(WR * sizeof *wm), *ww = malloc(WR * sizeof *ww), *wse = malloc(WR * sizeof *wse);
	int *hw = malloc(WR * sizeof *hw);
	double wt[MAX_WINDOWS];
	double *v = NULL;
	*nb = 0;
	if (!B || !B0 || !est0 || !lo || !hi || !lo0 || !hi0 || (!U && R <= MAX_PATHS) || !wlo || !whi || !wm || !ww ||
	    !wse || !hw || gather(a, points, &g.m) < 0)
		goto out;
	if (msgs) {
		size_t n = an_p2p_messages(a, &am);
		g.g = am ? malloc((n + 1) * sizeof *g.g) : NULL;
		for (size_t j = 0; g.g && j < n; j++)
			g.g[g.ng++] = (struct tmsg){ am[j].s, am[j].r, am[j].sent, am[j].recvd, 0 };
	}
	if ((g.m.K < 3 && !g.ng) || !(v = malloc((g.m.K + 1) * sizeof *v)))
		goto out;
	/* a first measure over the whole job places the messages in time */
	g.W = 0;
	g.tc = g.m.K ? g.m.t[g.m.K / 2] : g.g[g.ng / 2].sent;
	if (g.ng) {
		bounds(&g, 0, B, U, &E, wlo, whi);
		estimate_ranks(a, &(struct estjob){ &g, 0, 1, NULL, wlo, whi, wm, ww, hw, NULL }, v);
		for (int r = 1; r < R; r++)
			est0[r] = hw[r] < 0 ? 0 : wm[r];
	}
	windows(&g, est0);
	/* the drift, where the job is long enough to show one */
	if (g.W >= 2) {
		for (size_t w = 0; w < g.W; w++) {
			bounds(&g, w, B, U, &E, wlo + w * (size_t)R, whi + w * (size_t)R);
			wt[w] = (double)(mid_time(&g, w) - g.tc);
		}
		estimate_ranks(a, &(struct estjob){ &g, 0, g.W, NULL, wlo, whi, wm, ww, hw, wse }, v);
		for (int r = 1; r < R; r++)
			B[r] = drift_fit(g.W, R, r, wt, wm, wse, hw);
	}
	/* the bounds of CLOCK_REALTIME as it is (no drift; B0 all 0), and with the drift */
	bounds(&g, g.W, B0, U, &E, lo0, hi0);
	bounds(&g, g.W, B, U, &E, lo, hi);
	estimate_ranks(a, &(struct estjob){ &g, g.W, g.W + 1, B, lo, hi, wm, ww, hw, NULL }, v);
	for (int r = 1; r < R; r++) {
		double est = wm[r], res = ww[r];
		int how = hw[r];
		if (how < 0)
			continue;
		/* CLOCK_REALTIME kept where the trace cannot tell it wrong: nothing it bounds excludes it
		 * as it is, and the offset and the drift over the job are within the exits' own spread
		 * (one host's ranks share its clock: a correction there would only move them by that
		 * noise); how far off 0 may be then: the interval's far end, or the exits' spread about 0
		 * if less. The bounds asked are those without the drift: a drift fitted through wide
		 * intervals' middles (bounds alone) is their noise, and taken out it can move a tight
		 * bound past 0; for a rank of bounds alone, "offset within the spread" is "0 inside". */
		int64_t first = g.m.K >= 3 ? g.m.t[0] : g.g[0].t, last = g.m.K >= 3 ? g.m.t[g.m.K - 1] : g.g[g.ng - 1].t;
		double span = (double)(last - first);
		if (!(lo0[r] > 0 || hi0[r] < 0) && (how == 1 || fabs(est) <= res) && fabs(B[r]) * span <= res) {
			size_t n = how == 0 ? exits(&g.m, 0, g.m.K, r, 0, g.tc, v) : 0;
			res = fmax(hi0[r], -lo0[r]);
			if (n >= 3)
				res = fmin(res, spread(v, n, 0));
			est = 0;
			B[r] = 0;
		}
		/* rank r's time x goes to x - est - B (x - tc) */
		struct proc *p = a->ranks[r].p;
		int64_t off = -(int64_t)llround(est);
		shift_proc(p, off);
		p->offset = off;
		drift_proc(p, -B[r], g.tc + off);
		*worst = fmax(*worst, res / 1e3);
		*nb += how == 1;
		refined++;
	}
out:
	free(g.m.x);
	free(g.m.t);
	free(g.g);
	free(am);
	free(E.v);
	free(B);
	free(B0);
	free(est0);
	free(lo);
	free(hi);
	free(lo0);
	free(hi0);
	free(U);
	free(wlo);
	free(whi);
	free(wm);
	free(ww);
	free(wse);
	free(hw);
	free(v);
	return refined;
}

static void unalign(struct analysis *a)
{
	for (int r = 1; r < a->nranks; r++) {
		struct proc *p = a->ranks[r].p;
		drift_proc(p, p->drift ? -p->drift / (1 + p->drift) : 0, p->drift_ref);
		p->drift = 0;
		shift_proc(p, -p->offset);
		p->offset = 0;
	}
}

/* Realtime anchors first; then each rank's offset and drift from its NCCL kernels where every
 * rank has them, else from the host's collectives and messages. */
void an_align_clocks(struct analysis *a)
{
	unsigned spk = 0; /* the spread's level: every rank's threads keep the same instances */
	for (int i = 0; i < a->nprocs; i++) {
		shift_proc(&a->procs[i], a->procs[i].to_real);
		for (int h = 0; h < a->procs[i].nthr; h++)
			spk = a->procs[i].thr[h].spk > spk ? a->procs[i].thr[h].spk : spk;
	}
	for (int i = 0; i < a->nprocs; i++)
		a->procs[i].spk = spk;
	a->clock_method = "realtime";
	a->clock_residual_us = 0; /* (one rank: nothing to compare) */
	if (a->nranks < 2)
		return;
	a->clock_residual_us = NAN; /* until a signal measures it */
	double worst = 0;
	int nb, got = align_from(a, gpu_points, 0, &worst, &nb);
	if (got == a->nranks - 1) {
		a->clock_method = "nccl-kernel-end";
		a->clock_residual_us = worst;
		align_workers(a);
		return;
	}
	unalign(a); /* (some rank had too few: the host's calls) */
	worst = 0;
	got = align_from(a, host_points, 1, &worst, &nb);
	if (got) {
		a->clock_method = !nb ? "collective-exit" : nb == got ? "message-causality" : "collective-exit+message-causality";
		a->clock_residual_us = worst;
		a->clock_unmeasured = a->nranks - 1 - got;
		align_workers(a);
	}
}

/* The residual is measured, never assumed: when nothing in the trace checked the ranks' clocks
 * against each other, the report says so (max_offset_us null); when it checked only some, which */
void an_clock_warning(struct analysis *a)
{
	if (a->nranks < 2)
		return;
	if (isnan(a->clock_residual_us))
		an_warn(a, "nothing in this trace checks the ranks' clocks against each other (fewer than 3 "
			"collectives every rank leaves together, blocking or completed by a wait, no messages "
			"received both ways, and no NCCL kernels): their CLOCK_REALTIME is trusted as it is, %s, "
			"and the residual is unknown", a->nhosts > 1 ? "across hosts" : "on one host");
	else if (a->clock_unmeasured)
		an_warn(a, "the clocks of %d of %d ranks could not be checked against the lowest rank's (no "
			"collectives shared with it and messages bounding them only one way): their CLOCK_REALTIME "
			"is trusted as it is, and the residual covers the others only", a->clock_unmeasured,
			a->nranks);
}

/* the span of every rank's events on the job clock */
void an_wall_time(struct analysis *a)
{
	int64_t lo = INT64_MAX, hi = INT64_MIN;
	for (int r = 0; r < a->nranks; r++)
		for (int h = 0; h < a->ranks[r].p->nthr; h++) {
			struct thr *t = &a->ranks[r].p->thr[h];
			if (t->first > t->last)
				continue;
			lo = t->first < lo ? t->first : lo;
			hi = t->last > hi ? t->last : hi;
		}
	a->wall_s = hi > lo ? (double)(hi - lo) / 1e9 : 0;
	a->t0 = hi > lo ? lo : 0;
}
