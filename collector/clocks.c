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
 * collective, posted a nonblocking one, launched its NCCL kernel) and when it saw it done (left
 * the call, left the wait that completed it, the kernel ended), on its own clock, anchored. An
 * instance of a symmetric collective (all-reduce, all-gather, all-to-all, barrier, reduce-scatter)
 * is done only once every rank joined it: no rank saw it done before the last one joined. */
struct cpt {
	int32_t comm, seq;
	int64_t join, done;
};

struct cpts {
	struct cpt *v;
	size_t n, cap;
};

static void cpt_add(struct cpts *c, int32_t comm, int32_t seq, int64_t join, int64_t done)
{
	if (c->n == c->cap) {
		size_t cap = c->cap ? 2 * c->cap : 256;
		struct cpt *v = realloc(c->v, cap * sizeof *v);
		if (!v)
			return;
		c->v = v;
		c->cap = cap;
	}
	c->v[c->n++] = (struct cpt){ comm, seq, join, done };
}

/* The host's: blocking symmetric collectives, and nonblocking ones with the wait that completed
 * them, found by its request (a Waitall's count requests, posted in a row from its first: the
 * last posted count, as p2p.c takes them). A wait whose request is none of the posted (a request
 * a test completed already) says nothing. */
#define PEND 64
static void host_points(const struct proc *p, struct cpts *c)
{
	for (int h = 0; h < p->nthr; h++) {
		const struct thr *t = &p->thr[h];
		const struct ev *pend[PEND];
		int np = 0;
		for (size_t k = 0; k < t->n; k++) {
			const struct ev *e = &t->ev[k];
			unsigned m = an_kind(e->kind)->m;
			if (an_exit_aligns(e)) {
				cpt_add(c, e->comm, e->seq, e->t, e->t + e->d);
			} else if ((m & DDPSPY_KM_NONBLOCKING) && !(m & DDPSPY_KM_ENQUEUES) && e->seq >= 0 && e->req) {
				if (np == PEND) {
					memmove(pend, pend + 1, (PEND - 1) * sizeof *pend);
					np--;
				}
				pend[np++] = e;
			} else if (an_completes(e) && e->req) {
				int i = np - 1;
				while (i >= 0 && pend[i]->req != e->req)
					i--;
				if (i < 0)
					continue;
				int last = i + (e->count > 1 ? e->count : 1);
				last = last < np ? last : np;
				for (int j = i; j < last; j++)
					if (an_op_is(pend[j], DDPSPY_OPF_SYM))
						cpt_add(c, pend[j]->comm, pend[j]->seq, pend[j]->t, e->t + e->d);
				memmove(pend + i, pend + last, (size_t)(np - last) * sizeof *pend);
				np -= last - i;
			}
		}
	}
}

static void gpu_points(const struct proc *p, struct cpts *c)
{
	struct gend *e;
	size_t n = an_gpu_nccl_ends(p, &e);
	for (size_t i = 0; i < n; i++)
		cpt_add(c, e[i].comm, e[i].seq, e[i].start, e[i].end);
	free(e);
}

/* ---- the estimate ----
 * Rank r's clock reads o_r ahead of the job's (the lowest rank's). Every rank leaves an instance
 * together, to within microseconds, when each was on a CPU as it ended: the median of r's exits
 * against the lowest rank's is o_r. A rank off its CPU then (milliseconds at a time when a host
 * has fewer cores than busy threads) leaves late; the median resists that while it is the
 * exception. Causality bounds the estimate besides: r saw instance k done only after every rank L
 * joined it, so done_r,k - o_r >= join_L,k - o_L, that is o_r - o_L <= done_r,k - join_L,k. The
 * tightest bound of each pair over the instances, and the tightest path of bounds through the
 * other ranks (Floyd-Warshall up to MAX_PATHS ranks; beyond, the lowest rank's only), put o_r in
 * [lo, hi], and a median outside is moved to the nearer end (the message-causality reasoning of Scalasca's and
 * Vampir's clock controllers, for collectives, whose every rank sends to every other). The
 * residual is the median distance of r's exits from the estimate: how closely the trace says the
 * clocks agree, measured.
 *
 * Drift: over DRIFT_MIN_SPAN or more, with WINDOW_MIN instances per window at least, the job is cut
 * into windows of equal counts; each window's estimate is o_r at its middle time, and a line
 * through them (least squares, each weighted by its residual) is the drift. With the drift taken
 * out of r's times, one estimate over the whole job gives the level and the residual.
 *
 * CLOCK_REALTIME is kept (no correction) where the trace cannot tell it wrong: 0 within [lo, hi],
 * and the offset and the drift over the job within the residual. Ranks on one host share its
 * clock, and a correction there would move them by the exits' noise. */
#define DRIFT_MIN_SPAN 4000000000LL
#define WINDOW_MIN 8
#define MAX_WINDOWS 8
#define MAX_PATHS 64

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

/* [lo[r], hi[r]] for o_r - o_0 from the instances in [k0, k1), times of rank r moved by
 * -b_r (t - tc) first (the drift found so far); infinite where nothing bounds it. Up to MAX_PATHS
 * ranks, every pair's bound and the tightest paths through the others (U: R x R scratch); beyond,
 * each rank's bounds against the lowest rank's only (K x R, not K x R x R). */
static void bounds(const struct mat *m, size_t k0, size_t k1, const double *b, int64_t tc, double *U, double *lo,
		   double *hi)
{
	int R = m->R;
	if (R > MAX_PATHS) {
		for (int r = 0; r < R; r++) {
			lo[r] = r ? -INFINITY : 0;
			hi[r] = r ? INFINITY : 0;
		}
		for (size_t k = k0; k < k1; k++) {
			const struct cpt *x0 = X(m, k, 0);
			for (int r = 1; x0->join != INT64_MIN && r < R; r++) {
				const struct cpt *xr = X(m, k, r);
				if (xr->join == INT64_MIN)
					continue;
				double dj = b[r] * (double)(xr->join - tc), dd = b[r] * (double)(xr->done - tc);
				hi[r] = fmin(hi[r], (double)(xr->done - x0->join) - dd);
				lo[r] = fmax(lo[r], (double)(xr->join - x0->done) - dj);
			}
		}
		return;
	}
	for (size_t i = 0; i < (size_t)R * (size_t)R; i++)
		U[i] = INFINITY;
	for (int r = 0; r < R; r++)
		U[(size_t)r * (size_t)R + (size_t)r] = 0;
	for (size_t k = k0; k < k1; k++)
		for (int r = 0; r < R; r++) {
			const struct cpt *xr = X(m, k, r);
			if (xr->join == INT64_MIN)
				continue;
			double dr = (double)xr->done - b[r] * (double)(xr->done - tc);
			for (int L = 0; L < R; L++) {
				const struct cpt *xl = X(m, k, L);
				if (L == r || xl->join == INT64_MIN)
					continue;
				double jl = (double)xl->join - b[L] * (double)(xl->join - tc);
				double *u = &U[(size_t)r * (size_t)R + (size_t)L];
				*u = fmin(*u, dr - jl);
			}
		}
	for (int q = 0; q < R; q++)
		for (int i = 0; i < R; i++) {
			double iq = U[(size_t)i * (size_t)R + (size_t)q];
			if (!isfinite(iq))
				continue;
			for (int j = 0; j < R; j++) {
				double *u = &U[(size_t)i * (size_t)R + (size_t)j];
				*u = fmin(*u, iq + U[(size_t)q * (size_t)R + (size_t)j]);
			}
		}
	for (int r = 0; r < R; r++) {
		hi[r] = U[(size_t)r * (size_t)R];
		lo[r] = -U[(size_t)r];
	}
}

/* Rank r's lead over the lowest rank in the instances [k0, k1), its drift (b about tc) taken out:
 * the median of its exits against the lowest rank's, moved into [lo, hi] where it falls outside
 * (an exit late for reasons of its own); *res, the median distance of those exits from it. -1
 * with fewer than 3 instances both saw. */
static int estimate(const struct mat *m, size_t k0, size_t k1, int r, double b, int64_t tc, double lo, double hi,
		    double *v, double *est, double *res)
{
	size_t n = 0;
	for (size_t k = k0; k < k1; k++) {
		const struct cpt *x0 = X(m, k, 0), *xr = X(m, k, r);
		if (x0->join != INT64_MIN && xr->join != INT64_MIN)
			v[n++] = (double)(xr->done - x0->done) - b * (double)(xr->done - tc);
	}
	if (n < 3)
		return -1;
	*est = an_quantile(v, n, 0.5);
	if (lo <= hi)
		*est = fmin(fmax(*est, lo), hi);
	for (size_t i = 0; i < n; i++)
		v[i] = fabs(v[i] - *est);
	*res = an_quantile(v, n, 0.5);
	return 0;
}

static int cmp_cpt_t(const void *a, const void *b)
{
	int64_t x = ((const struct cpt *)a)->join, y = ((const struct cpt *)b)->join;
	return (x > y) - (x < y);
}

/* by instance, then by time: a rank that saw one twice keeps the first */
static int cmp_cpt_key(const void *a, const void *b)
{
	const struct cpt *p = a, *q = b;
	int64_t x = an_inst_key(p->comm, p->seq), y = an_inst_key(q->comm, q->seq);
	return x != y ? (x > y) - (x < y) : cmp_cpt_t(a, b);
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
	return (x > y) - (x < y);
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
	for (int r = 1; !rc && r < R; r++) {
		c.n = 0;
		points(a->ranks[r].p, &c);
		for (size_t i = 0; i < c.n; i++) {
			struct krow q = { an_inst_key(c.v[i].comm, c.v[i].seq), 0 };
			const struct krow *f = bsearch(&q, ix, n, sizeof *ix, cmp_krow);
			if (f && X(m, f->k, r)->join == INT64_MIN)
				*X(m, f->k, r) = c.v[i];
		}
	}
	free(c.v);
	free(ix);
	return rc;
}

/* Every rank's clock against the lowest rank's from the instances points() finds, at least 3
 * shared with it for a rank to be corrected. *worst: the largest residual (us). Returns the ranks
 * corrected. */
static int align_from(struct analysis *a, void (*points)(const struct proc *, struct cpts *), double *worst)
{
	int R = a->nranks, refined = 0;
	struct mat m = { 0 };
	double *B = calloc((size_t)R, sizeof *B);
	double *lo = malloc((size_t)R * sizeof *lo), *hi = malloc((size_t)R * sizeof *hi);
	double *U = R <= MAX_PATHS ? malloc((size_t)R * (size_t)R * sizeof *U) : NULL;
	double *wm = malloc((size_t)R * MAX_WINDOWS * sizeof *wm), *ww = malloc((size_t)R * MAX_WINDOWS * sizeof *ww);
	double wt[MAX_WINDOWS];
	double *v = NULL;
	if (!B || !lo || !hi || (!U && R <= MAX_PATHS) || !wm || !ww || gather(a, points, &m) < 0 || m.K < 3 ||
	    !(v = malloc(m.K * sizeof *v)))
		goto out;
	int64_t tc = m.t[m.K / 2];
	/* the drift, where the job is long enough to show one */
	size_t W = m.t[m.K - 1] - m.t[0] >= DRIFT_MIN_SPAN ? m.K / WINDOW_MIN : 1;
	W = W > MAX_WINDOWS ? MAX_WINDOWS : W;
	if (W >= 2) {
		for (size_t w = 0; w < W; w++) {
			size_t k0 = m.K * w / W, k1 = m.K * (w + 1) / W;
			bounds(&m, k0, k1, B, tc, U, lo, hi);
			wt[w] = (double)(m.t[(k0 + k1) / 2] - tc);
			for (int r = 1; r < R; r++) {
				double est, res;
				int got = estimate(&m, k0, k1, r, 0, tc, lo[r], hi[r], v, &est, &res);
				wm[(size_t)r * MAX_WINDOWS + w] = est;
				ww[(size_t)r * MAX_WINDOWS + w] = got < 0 ? INFINITY : res;
			}
		}
		for (int r = 1; r < R; r++) {
			/* weighted least squares over the windows, each by how closely its exits agree */
			double s = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
			for (size_t w = 0; w < W; w++) {
				double width = ww[(size_t)r * MAX_WINDOWS + w], y = wm[(size_t)r * MAX_WINDOWS + w];
				if (!isfinite(width))
					continue;
				double q = 1 / (width * width + 1e6); /* (1 us squared: a spread of 0 weighs much, not all) */
				s += q;
				sx += q * wt[w];
				sy += q * y;
				sxx += q * wt[w] * wt[w];
				sxy += q * wt[w] * y;
			}
			double den = s * sxx - sx * sx;
			if (s > 0 && den > 0)
				B[r] = (s * sxy - sx * sy) / den;
		}
	}
	bounds(&m, 0, m.K, B, tc, U, lo, hi);
	for (int r = 1; r < R; r++) {
		double est, res;
		if (estimate(&m, 0, m.K, r, B[r], tc, lo[r], hi[r], v, &est, &res) < 0)
			continue;
		/* CLOCK_REALTIME kept where the trace cannot tell it wrong: nothing it bounds excludes it,
		 * and the offset and the drift over the job are within the exits' own spread (one host's
		 * ranks share its clock: a correction there would only move them by that noise) */
		double span = (double)(m.t[m.K - 1] - m.t[0]), e0, r0;
		if (!(lo[r] > 0 || hi[r] < 0) && fabs(est) <= res && fabs(B[r]) * span <= res &&
		    estimate(&m, 0, m.K, r, 0, tc, 0, 0, v, &e0, &r0) == 0) {
			est = 0; /* (e0: 0, clamped; r0: the exits' spread about it) */
			res = r0;
			B[r] = 0;
		}
		/* rank r's time x goes to x - est - B (x - tc) */
		struct proc *p = a->ranks[r].p;
		int64_t off = -(int64_t)llround(est);
		shift_proc(p, off);
		p->offset = off;
		drift_proc(p, -B[r], tc + off);
		*worst = fmax(*worst, res / 1e3);
		refined++;
	}
out:
	free(m.x);
	free(m.t);
	free(B);
	free(lo);
	free(hi);
	free(U);
	free(wm);
	free(ww);
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
 * rank has them, else from the host's collectives. */
void an_align_clocks(struct analysis *a)
{
	for (int i = 0; i < a->nprocs; i++)
		shift_proc(&a->procs[i], a->procs[i].to_real);
	a->clock_method = "realtime";
	a->clock_residual_us = 0; /* (one rank: nothing to compare) */
	if (a->nranks < 2)
		return;
	a->clock_residual_us = NAN; /* until a signal measures it */
	double worst = 0;
	if (align_from(a, gpu_points, &worst) == a->nranks - 1) {
		a->clock_method = "nccl-kernel-end";
		a->clock_residual_us = worst;
		align_workers(a);
		return;
	}
	unalign(a); /* (some rank had too few: the host's calls) */
	worst = 0;
	if (align_from(a, host_points, &worst)) {
		a->clock_method = "collective-exit";
		a->clock_residual_us = worst;
		align_workers(a);
	}
}

/* The residual is measured, never assumed: when nothing in the trace checked the ranks' clocks
 * against each other, the report says so (max_offset_us null) */
void an_clock_warning(struct analysis *a)
{
	if (a->nranks < 2 || !isnan(a->clock_residual_us))
		return;
	an_warn(a, "nothing in this trace checks the ranks' clocks against each other (fewer than 3 collectives "
		"every rank leaves together, blocking or completed by a wait, and no NCCL kernels): their "
		"CLOCK_REALTIME is trusted as it is, %s, and the residual is unknown",
		a->nhosts > 1 ? "across hosts" : "on one host");
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
