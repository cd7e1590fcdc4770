/* Steps: where each rank's training steps begin and end on the job clock. From step markers when
 * the program has them, else from the repeating pattern of its synchronizing calls (mapped across
 * ranks by collective sequence numbers, or in programs that mostly send and receive, each rank's
 * own pattern aligned through their messages), else equal time windows; on long traces the steps
 * are found again from every call, streamed, and a sample of them kept (sweep.c). */
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/format.h"
#include "analysis_int.h"
#include "steps_int.h"
#include "trace.h"

static void windows(struct analysis *a, int64_t **b, size_t *nb, size_t K)
{
	int64_t lo, hi;
	an_common_span(a, &lo, &hi);
	for (int r = 0; r < a->nranks; r++) {
		nb[r] = 0;
		if (lo == INT64_MIN || hi <= lo)
			continue;
		for (size_t k = 0; k <= K; k++)
			b[r][nb[r]++] = an_window_at(lo, hi, k, K);
	}
}

/* a rank's step starts b (n of them, in any order) and the latest end: its bounds in order, the
 * end after the last start when it is later; K lowered to its steps; -1 when it has no step */
static int close_bounds(int64_t *b, size_t n, int64_t last_end, size_t *nb, size_t *K)
{
	sort_n(b, n, sizeof *b, an_cmp_i64);
	if (n && last_end > b[n - 1])
		b[n++] = last_end;
	*nb = n;
	if (n < 2)
		return -1;
	if (n - 1 < *K)
		*K = n - 1;
	return 0;
}

static int marker_bounds(struct analysis *a, int64_t **b, size_t *nb, size_t *K)
{
	for (int r = 0; r < a->nranks; r++) {
		struct proc *p = a->ranks[r].p;
		size_t n = 0, cap = 0;
		int64_t last_end = INT64_MIN;
		for (int h = 0; h < p->nthr; h++)
			for (size_t k = 0; k < p->thr[h].n; k++) {
				struct ev *e = &p->thr[h].ev[k];
				if (an_category(e) != DDPSPY_CAT_MARKER)
					continue;
				if (!e->op) {
					last_end = e->t > last_end ? e->t : last_end;
					continue;
				}
				if (n + 2 > cap) {
					cap = cap ? cap * 2 : 64;
					int64_t *nbp = realloc(b[r], cap * sizeof *nbp);
					if (!nbp)
						return -1;
					b[r] = nbp;
				}
				b[r][n++] = e->t;
			}
		if (!n || close_bounds(b[r], n, last_end, &nb[r], K) < 0)
			return -1;
	}
	return 0;
}


/* The training thread's NVTX range that marks its steps, where neither markers nor collectives
 * give them: a push-pop range of the least nesting level that every rank's training thread has,
 * three times at least, the most time first (rank 0's "step", not its "forward" inside it) */
static const struct nvrange *step_range(const struct analysis *a)
{
	const struct proc *p0 = a->ranks[0].p;
	const struct thr *t0 = an_train_thread(p0);
	const struct nvrange *best = NULL;
	for (int i = 0; t0 && i < p0->nrange; i++) {
		const struct nvrange *g = &p0->range[i];
		if (g->tid != t0->tid || g->depth < 0 || g->depth > 1 || g->calls < 3 ||
		    (best && (g->depth > best->depth || (g->depth == best->depth && g->ms <= best->ms))))
			continue;
		int all = 1;
		for (int r = 1; r < a->nranks && all; r++) {
			const struct proc *p = a->ranks[r].p;
			const struct thr *t = an_train_thread(p);
			int k = t ? an_range_find(p, t->tid, g->domain, g->name) : p->nrange;
			all = k < p->nrange && p->range[k].depth == g->depth && p->range[k].calls >= 3;
		}
		if (all)
			best = g;
	}
	return best;
}

/* steps by that range: each from one of its starts to the next, the last to its end */
static int range_bounds(struct analysis *a, int64_t **b, size_t *nb, size_t *K)
{
	const struct nvrange *g = step_range(a);
	if (!g)
		return -1;
	uint64_t key = an_range_key(g->domain, g->name);
	for (int r = 0; r < a->nranks; r++) {
		const struct proc *p = a->ranks[r].p;
		const struct thr *t = an_train_thread(p);
		if (p->nvmark_over)
			return -1;
		size_t n = 0;
		int64_t last_end = INT64_MIN;
		free(b[r]);
		b[r] = malloc((p->nnvmark + 1) * sizeof **b);
		if (!b[r])
			return -1;
		for (size_t k = 0; k < p->nnvmark; k++)
			if (p->nvmark[k].tid == t->tid && p->nvmark[k].key == key) {
				int64_t end = an_job_time(p, p->nvmark[k].t1);
				b[r][n++] = an_job_time(p, p->nvmark[k].t0);
				last_end = end > last_end ? end : last_end;
			}
		if (n < 2 || close_bounds(b[r], n, last_end, &nb[r], K) < 0)
			return -1;
	}
	snprintf(a->step_range, sizeof a->step_range, "%s", g->name);
	snprintf(a->step_range_domain, sizeof a->step_range_domain, "%s", g->domain);
	return 0;
}

/* Steps by point-to-point calls: when rank 0's training thread makes more of them than
 * collectives (a halo exchange or a pipeline with a rare reduction) */
static int by_p2p(const struct analysis *a)
{
	const struct thr *t = a->nranks ? an_train_thread(a->ranks[0].p) : NULL;
	size_t np = 0, nc = 0;
	for (size_t i = 0; t && i < t->n; i++) {
		np += an_is_msg(&t->ev[i]);
		nc += (an_kind(t->ev[i].kind)->m & DDPSPY_KM_COLL) && !an_nccl_p2p(&t->ev[i]);
	}
	return np > nc;
}

/* Steps by collectives: rank 0's pattern on every rank, from the call that matches its key: that
 * of the first of its steps every rank has (where a rank's calls begin later than rank 0's, as in
 * the spans of the files ddpspy watch analyses, rank 0's first steps have no match there) */
static int same_pattern(struct sync *syn, int R, struct pattern *pts, size_t *first)
{
	if (pts[0].key_seq < 0)
		return -1;
	for (int r = 1; r < R;) {
		struct pattern *pt = &pts[0];
		if (an_rank_first(&syn[r], pt) != SIZE_MAX) {
			r++;
			continue;
		}
		if (pt->nsteps <= 1)
			return -1;
		pt->first += pt->period;
		pt->nsteps--;
		const struct ev *k = syn[0].e[pt->first + pt->key_delta];
		if (k->seq < 0)
			return -1;
		pt->key_seq = k->seq;
		pt->key_comm = k->comm;
		r = 1; /* (every rank again, with the later key) */
	}
	for (int r = 0; r < R; r++) {
		pts[r] = pts[0];
		first[r] = an_rank_first(&syn[r], &pts[0]);
		if (first[r] == SIZE_MAX)
			return -1;
	}
	return 0;
}

/* Steps by point-to-point calls: every rank's own pattern (ranks with fewer neighbours make fewer
 * calls), numbered alike through the messages they exchange: a message sent in a rank's step j
 * and received in its peer's step j' says that the two steps are the same iteration, so the
 * peer's numbering is offset by j - j' from the sender's (the most common offset over the pair's
 * messages), from rank 0 on across the graph of who talks to whom. Collectives tie ranks the same
 * way, each member to the first (a pipeline's replicas of a stage exchange no message: they
 * all-reduce its gradients). Each rank then starts at the first step every rank has (first[r]),
 * pts[r].nsteps the steps they all have. -1 when a rank has no pattern or is tied to none of the
 * ranks numbered already. */
struct mref {
	int32_t comm, src, dst, tag, seq; /* (a collective: src and dst -1, tag its operation) */
	int r;
	long j;
	long pos;  /* a message: its call's place in its rank's sync list from the pattern's first call */
};

/* the message: equal for its send and its receive */
static int cmp_message(const struct mref *a, const struct mref *b)
{
	return AN_ORDER(a->comm, b->comm) ?: AN_ORDER(a->src, b->src) ?: AN_ORDER(a->dst, b->dst) ?:
	       AN_ORDER(a->tag, b->tag) ?: AN_ORDER(a->seq, b->seq);
}

static int cmp_mref(const void *x, const void *y)
{
	const struct mref *a = x, *b = y;
	return cmp_message(a, b) ?: AN_ORDER(a->r, b->r) ?: AN_ORDER(a->j, b->j);
}

struct pedge { int a, b; long d; };

static int cmp_pedge(const void *x, const void *y)
{
	const struct pedge *a = x, *b = y;
	if (a->a != b->a)
		return AN_ORDER(a->a, b->a);
	if (a->b != b->b)
		return AN_ORDER(a->b, b->b);
	return AN_ORDER(a->d, b->d);
}

/* rank r's numbered collectives on its training thread within the steps of its pattern pt, each
 * with its step (from pt->first on), appended to *m */
static int coll_refs(struct analysis *a, const struct sync *s, const struct pattern *pt, int r, struct mref **m,
		     size_t *n, size_t *cap)
{
	const struct thr *t = an_train_thread(a->ranks[r].p);
	int64_t *b = malloc((pt->nsteps + 1) * sizeof *b);
	size_t nb = b ? an_rank_bounds((struct sync *)s, pt, pt->first, b) : 0;
	for (size_t i = 0, j = 0; t && nb > 1 && i < t->n; i++) {
		const struct ev *v = &t->ev[i];
		/* (a collective NCCL enqueues is called in its step as a blocking one is: a pipeline's
		 * replicas all-reduce their stage's gradients on the GPU) */
		if (!an_numbered_coll(v) && !(v->seq >= 0 && (an_kind(v->kind)->m & DDPSPY_KM_COLL) &&
					      (an_kind(v->kind)->m & DDPSPY_KM_ENQUEUES)))
			continue;
		while (j < nb && b[j] <= v->t)
			j++;
		if (j == 0 || j == nb)
			continue; /* (before the first step, or after the last) */
		if (*n == *cap) {
			*cap = *cap ? 2 * *cap : 1024;
			struct mref *nm = realloc(*m, *cap * sizeof *nm);
			if (!nm) {
				free(b);
				return -1;
			}
			*m = nm;
		}
		(*m)[(*n)++] = (struct mref){ v->comm, -1, -1, v->op, v->seq, r, (long)j - 1, -1 };
	}
	free(b);
	return b || !pt->nsteps ? 0 : -1;
}

static long floor_div(long x, long p)
{
	return x >= 0 ? x / p : -((-x + p - 1) / p);
}

struct mpair { int a, b; long pa, pb; };
struct qd { int q; long d; };

static int cmp_qd(const void *x, const void *y)
{
	const struct qd *a = x, *b = y;
	return AN_ORDER(a->q, b->q) ?: AN_ORDER(a->d, b->d);
}

/* how many of rank r's pairs (pr[adj[0 .. na)], at most 4096 of them evenly spaced: the shifts
 * tried then cost no more on a long trace) fall in the same step on both ends, its calls shifted by
 * delta, against the ranks fixed so far (each pair of ranks at its own most common offset); v:
 * room for na */
static size_t consistent(const struct mpair *pr, const size_t *adj, size_t na, int r, long delta,
			 const struct pattern *pts, const long *shift, const char *fixed, struct qd *v)
{
	size_t nv = 0, sum = 0;
	for (size_t k = 0; k < na; k += na / 4096 + 1) {
		const struct mpair *x = &pr[adj[k]];
		int q = x->a == r ? x->b : x->a;
		long pr_ = x->a == r ? x->pa : x->pb, pq = x->a == r ? x->pb : x->pa;
		if (fixed[q])
			v[nv++] = (struct qd){ q, floor_div(pq - shift[q], (long)pts[q].period) -
						  floor_div(pr_ - delta, (long)pts[r].period) };
	}
	sort_n(v, nv, sizeof *v, cmp_qd);
	for (size_t i = 0, k; i < nv; i = k) {
		size_t most = 0;
		for (k = i; k < nv && v[k].q == v[i].q;) {
			size_t l = k;
			while (l < nv && v[l].q == v[k].q && v[l].d == v[k].d)
				l++;
			most = l - k > most ? l - k : most;
			k = l;
		}
		sum += most;
	}
	return sum;
}

/* rank r placed: its peers are tied to it by their pairs with it */
static void tie_up(const struct mpair *pr, const size_t *adj, const size_t *at, int r, size_t *tie)
{
	for (size_t k = at[r]; k < at[r + 1]; k++) {
		const struct mpair *x = &pr[adj[k]];
		tie[x->a == r ? x->b : x->a]++;
	}
}

/* Each rank's phase against the ranks before it, where its gaps put it mid-step: the last stage of
 * a pipeline pauses longest before its first backward, after its last forward, and then half its
 * messages are a step off its peers' (a forward's receive in the step before). The shift of its
 * first call (below its period) that puts the most of its messages in the same step as their other
 * ends' (each pair of ranks at one offset) is its phase, where that is a tenth more than its own;
 * ranks whose messages agree already (19 in 20) keep theirs. Ranks are placed from the lowest on,
 * the one tied by the most messages to those placed first. m: sorted by message, positions from
 * each rank's first call (made from the shifted first here). */
static int align_phases(struct mref *m, size_t n, struct pattern *pts, int R)
{
	struct mpair *pr = malloc((n / 2 + 1) * sizeof *pr);
	struct qd *v = malloc((n + 1) * sizeof *v);
	size_t *adj = calloc(n + 1, sizeof *adj), *at = calloc((size_t)R + 1, sizeof *at);
	size_t *tie = calloc((size_t)R, sizeof *tie), np = 0;
	long *shift = calloc((size_t)R, sizeof *shift);
	char *fixed = calloc((size_t)R, 1);
	int rc = -1;
	if (!pr || !v || !adj || !at || !tie || !shift || !fixed)
		goto out;
	for (size_t i = 0; i + 1 < n; i++)
		if (m[i].r != m[i + 1].r && m[i].pos >= 0 && m[i + 1].pos >= 0 && !cmp_message(&m[i], &m[i + 1])) {
			pr[np++] = (struct mpair){ m[i].r, m[i + 1].r, m[i].pos, m[i + 1].pos };
			i++;
		}
	/* each rank's pairs: adj[at[r] .. at[r + 1]) */
	for (size_t i = 0; i < np; i++)
		at[pr[i].a + 1]++, at[pr[i].b + 1]++;
	for (int r = 0; r < R; r++)
		at[r + 1] += at[r];
	for (size_t i = 0; i < np; i++)
		adj[at[pr[i].a]++] = i, adj[at[pr[i].b]++] = i;
	for (int r = R; r > 0; r--)
		at[r] = at[r - 1];
	at[0] = 0;
	fixed[0] = 1;
	tie_up(pr, adj, at, 0, tie);
	for (int round = 1; round < R; round++) {
		int c = -1; /* (the unplaced rank tied most to those placed) */
		for (int q = 1; q < R; q++)
			if (!fixed[q] && tie[q] && (c < 0 || tie[q] > tie[c]))
				c = q;
		if (c < 0)
			break;
		size_t na = at[c + 1] - at[c], tot = (tie[c] + na / 4096) / (na / 4096 + 1); /* (as sampled) */
		size_t own = consistent(pr, adj + at[c], na, c, 0, pts, shift, fixed, v), best = own;
		for (long d = 1; own < tot - tot / 20 && d < (long)pts[c].period; d++) {
			size_t k = consistent(pr, adj + at[c], na, c, d, pts, shift, fixed, v);
			if (k > best && (double)k >= 1.1 * (double)own) {
				best = k;
				shift[c] = d;
			}
		}
		fixed[c] = 1;
		tie_up(pr, adj, at, c, tie);
	}
	for (int r = 0; r < R; r++) { /* (a step earlier where there is room: none lost at the end) */
		if (!shift[r])
			continue;
		if (pts[r].first > pts[r].period - (size_t)shift[r])
			shift[r] -= (long)pts[r].period;
		pts[r].first += (size_t)shift[r];
		if (shift[r] > 0 && pts[r].first + pts[r].nsteps * pts[r].period > pts[r].end)
			pts[r].nsteps--;
	}
	for (size_t i = 0; i < n; i++)
		m[i].pos -= m[i].pos >= 0 ? shift[m[i].r] : 0;
	rc = 0;
out:
	free(pr);
	free(v);
	free(adj);
	free(at);
	free(tie);
	free(shift);
	free(fixed);
	return rc;
}

static int p2p_align(struct analysis *a, struct sync *syn, struct pattern *pts, size_t *first)
{
	int R = a->nranks, rc = -1;
	size_t n = 0, cap = 0, ne = 0;
	struct mref *m = NULL;
	struct pedge *e = NULL;
	long *off = calloc((size_t)R, sizeof *off);
	char *known = calloc((size_t)R, 1);
	if (!off || !known)
		goto out;
	for (int r = 0; r < R; r++) {
		if (r && an_find_pattern(&syn[r], &pts[r]) < 0)
			goto out;
		const struct pattern *pt = &pts[r];
		const struct proc *p = a->ranks[r].p;
		for (size_t j = 0; j < pt->nsteps; j++)
			for (size_t c = 0; c < pt->period; c++) {
				const struct ev *v = syn[r].e[pt->first + j * pt->period + c];
				struct an_p2pmsg msg[2];
				int nmsg = an_is_msg(v) ? an_p2p_msgs(p, v, msg) : 0;
				for (int k = 0; k < nmsg; k++) {
					if (msg[k].seq < 0)
						continue;
					if (n == cap) {
						cap = cap ? 2 * cap : 1024;
						struct mref *nm = realloc(m, cap * sizeof *nm);
						if (!nm)
							goto out;
						m = nm;
					}
					m[n++] = (struct mref){ msg[k].comm, msg[k].src, msg[k].dst, msg[k].tag, msg[k].seq, r, 0,
								(long)(j * pt->period + c) };
				}
			}
	}
	sort_n(m, n, sizeof *m, cmp_mref);
	if (align_phases(m, n, pts, R) < 0)
		goto out;
	for (size_t i = 0; i < n; i++)
		m[i].j = floor_div(m[i].pos, (long)pts[m[i].r].period);
	for (int r = 0; r < R; r++)
		if (coll_refs(a, &syn[r], &pts[r], r, &m, &n, &cap) < 0)
			goto out;
	sort_n(m, n, sizeof *m, cmp_mref);
	/* the two ends of a message: equal keys, two ranks; a collective's members: each with the
	 * first */
	e = malloc((n + 1) * sizeof *e);
	if (!e)
		goto out;
	for (size_t i = 0, k; i < n; i = k) {
		for (k = i + 1; k < n && !cmp_message(&m[i], &m[k]); k++)
			if (m[k].r != m[i].r && (m[i].src < 0 || k == i + 1))
				e[ne++] = (struct pedge){ m[i].r, m[k].r, m[i].j - m[k].j };
	}
	sort_n(e, ne, sizeof *e, cmp_pedge);
	/* per pair, the most common offset */
	size_t np = 0;
	for (size_t i = 0, k; i < ne; i = k) {
		size_t best = i, bestn = 0;
		for (k = i; k < ne && e[k].a == e[i].a && e[k].b == e[i].b;) {
			size_t l = k;
			while (l < ne && e[l].a == e[k].a && e[l].b == e[k].b && e[l].d == e[k].d)
				l++;
			if (l - k > bestn) {
				bestn = l - k;
				best = k;
			}
			k = l;
		}
		e[np++] = e[best];
	}
	known[0] = 1;
	for (int changed = 1; changed;) {
		changed = 0;
		for (size_t i = 0; i < np; i++) {
			/* off[b] + j_b = off[a] + j_a: off[b] = off[a] + d */
			if (known[e[i].a] && !known[e[i].b]) {
				off[e[i].b] = off[e[i].a] + e[i].d;
				known[e[i].b] = changed = 1;
			} else if (known[e[i].b] && !known[e[i].a]) {
				off[e[i].a] = off[e[i].b] - e[i].d;
				known[e[i].a] = changed = 1;
			}
		}
	}
	long g0 = LONG_MIN, g1 = LONG_MAX;
	for (int r = 0; r < R; r++) {
		if (!known[r])
			goto out;
		g0 = off[r] > g0 ? off[r] : g0;
		g1 = off[r] + (long)pts[r].nsteps < g1 ? off[r] + (long)pts[r].nsteps : g1;
	}
	if (g1 <= g0)
		goto out;
	for (int r = 0; r < R; r++) {
		first[r] = pts[r].first + (size_t)(g0 - off[r]) * pts[r].period;
		pts[r].nsteps = (size_t)(g1 - g0);
	}
	rc = 0;
out:
	free(m);
	free(e);
	free(off);
	free(known);
	return rc;
}

/* the steps by the pattern of the ranks' synchronizing calls (point-to-point ones where p2p): each
 * rank's bounds into b (nb of them) and the steps every rank has, 0 when no pattern holds */
static size_t pattern_bounds(struct analysis *a, struct sync *syn, struct pattern *pts, size_t *first, int64_t **b,
			     size_t *nb, int p2p)
{
	int R = a->nranks;
	size_t K = SIZE_MAX;
	if (!syn[0].n || an_find_pattern(&syn[0], &pts[0]) < 0 ||
	    (p2p ? p2p_align(a, syn, pts, first) : same_pattern(syn, R, pts, first)) < 0)
		return 0;
	for (int r = 0; r < R; r++) {
		free(b[r]);
		b[r] = malloc((pts[r].nsteps + 1) * sizeof **b);
		nb[r] = b[r] ? an_rank_bounds(&syn[r], &pts[r], first[r], b[r]) : 0;
		K = nb[r] > 1 && nb[r] - 1 < K ? nb[r] - 1 : nb[r] > 1 ? K : 0;
	}
	return K == SIZE_MAX ? 0 : K;
}

/* the training thread of rank 0 makes numbered collectives: steps can be found by them */
static int has_colls(const struct analysis *a)
{
	const struct thr *t = a->nranks ? an_train_thread(a->ranks[0].p) : NULL;
	for (size_t i = 0; t && i < t->n; i++)
		if (an_numbered_coll(&t->ev[i]))
			return 1;
	return 0;
}

/* each rank's step bounds into b (nb of them) by markers, else the pattern of the synchronizing
 * calls, else (a trace read whole) the program's NVTX step range, else windows; the steps found
 * and how (mode). A program that sends and receives more than it makes collectives (*p2p) is
 * stepped by its messages' pattern; where they give none (a halo exchange's alike calls, their
 * pause behind an all-reduce that ends each iteration), by its collectives': the sync lists are
 * made again for them and *p2p cleared. */
static size_t bounds(struct analysis *a, struct sync *syn, struct pattern *pts, size_t *first, int64_t **b, size_t *nb,
		     int *p2p, int trunc, int *mode)
{
	int R = a->nranks;
	size_t K = SIZE_MAX;
	if (marker_bounds(a, b, nb, &K) == 0) {
		a->step_source = "markers";
		*mode = BY_MARKERS;
	} else {
		/* (K: what marker_bounds took from the ranks with markers is forgotten) */
		K = pattern_bounds(a, syn, pts, first, b, nb, *p2p);
		if (!K && *p2p && has_colls(a)) {
			*p2p = 0;
			memset(pts, 0, (size_t)R * sizeof *pts);
			memset(first, 0, (size_t)R * sizeof *first);
			for (int r = 0; r < R; r++) {
				free(syn[r].e);
				an_sync_list(a->ranks[r].p, &syn[r], 0);
			}
			K = pattern_bounds(a, syn, pts, first, b, nb, 0);
		}
		if (!K)
			K = SIZE_MAX;
	}
	if (K != SIZE_MAX && K > 0) {
		if (strcmp(a->step_source, "markers"))
			a->step_source = *p2p ? "p2p" : "collectives";
	} else if (!trunc && (K = SIZE_MAX) && range_bounds(a, b, nb, &K) == 0) {
		/* (no collectives to go by, on a trace read whole: the program's own step range) */
		a->step_source = "markers";
		*mode = BY_MARKERS;
	} else {
		K = 20;
		*mode = BY_WINDOWS;
		for (int r = 0; r < R; r++) {
			free(b[r]);
			b[r] = malloc((K + 1) * sizeof **b);
		}
		windows(a, b, nb, K);
		for (int r = 0; r < R; r++)
			if (nb[r] < 2)
				K = 0;
		a->step_source = K ? "windows" : "none";
	}
	return K;
}

/* The steps CUPTI's records cover on every rank. Where a rank's stopped before the run did (another
 * client took CUPTI's callbacks: gpu.c's p->gpu_stop), the steps from the first that ended less than
 * its own length before that are left out (the device runs behind the host, so a step's work may
 * end after the host's step did), or none when that would leave none: that rank is then split from
 * its host (gpustep.c). Returns the steps kept; *who the rank that left out most. */
static size_t cupti_cut(const struct analysis *a, size_t N, int *who)
{
	size_t keep = N;
	for (int r = 0; r < a->nranks; r++) {
		const struct rankinfo *ri = &a->ranks[r];
		if (!ri->p->gpu_stop || !ri->steps)
			continue;
		int64_t stop = an_job_time(ri->p, ri->p->gpu_stop);
		size_t k = 0;
		while (k < keep && 2 * ri->steps[k].t1 - ri->steps[k].t0 <= stop)
			k++;
		if (k < keep)
			keep = k, *who = r;
	}
	return keep ? keep : N;
}

/* The analysed steps, the same number on every rank: boundaries by markers, else by the pattern
 * of rank 0's synchronizing calls, else by the program's NVTX step range, else by windows; a->ranks[r].steps gets each kept step's start
 * and end, a->sd the sample's indices and each rank's whole span. */
void an_find_steps(struct analysis *a)
{
	int R = a->nranks;
	struct stepdata *sd = a->sd = calloc(1, sizeof *a->sd);
	if (!sd)
		return;
	struct sync *syn = calloc((size_t)R, sizeof *syn);
	struct sweep *w = NULL;
	int64_t **b = calloc((size_t)R, sizeof *b);
	size_t *nb = calloc((size_t)R, sizeof *nb);
	struct pattern *pts = calloc((size_t)R, sizeof *pts);
	size_t *first = calloc((size_t)R, sizeof *first);
	if (!syn || !b || !nb)
		goto out;
	int trunc = 0, p2p = by_p2p(a);
	for (int r = 0; r < R; r++) {
		struct proc *p = a->ranks[r].p;
		for (int h = 0; h < p->nthr; h++)
			trunc |= p->thr[h].n < p->thr[h].nsync;
		an_sync_list(p, &syn[r], p2p);
	}
	size_t K = SIZE_MAX;
	int mode = BY_PATTERN;
	if (!pts || !first)
		goto out;
	K = bounds(a, syn, pts, first, b, nb, &p2p, trunc, &mode);
	if (trunc && K)
		K = an_sweep_steps(a, syn, mode, pts, first, p2p, &w);
	if (!strcmp(a->step_source, "windows") && K)
		an_warn(a, "no repeating pattern of %s: steps are %zu equal time windows",
			p2p ? "point-to-point calls" : "collectives", K);
	a->steps_detected = (int)K;
	size_t skip = (size_t)a->skip;
	if (skip >= K) { /* none skipped: with no step at all, none analysed either (not K - skip < 0) */
		if (K)
			an_warn(a, "only %zu step%s found; none skipped as warm-up", K, K == 1 ? "" : "s");
		else
			an_warn(a, "no step found: the training threads made no collective, step marker or other event "
				"to time one by");
		skip = 0;
	}
	a->skip = (int)skip;
	a->nsteps = (int)(K - skip);
	size_t N = K - skip;
	if (w && K)
		N = an_sweep_keep_analysed(a, w, skip);
	a->nsampled = (int)N;
	if (!N)
		goto out;
	if (N < K - skip)
		an_warn(a, "%d steps analysed; their per-step figures come from a sample of %zu of them (blocks of %d "
			"consecutive steps chosen by a hash of their index), to bound the report's memory",
			a->nsteps, N, SAMPLE_BLOCK);
	sd->gidx = malloc(N * sizeof *sd->gidx);
	sd->span = calloc((size_t)R, sizeof *sd->span);
	if (!sd->gidx || !sd->span)
		goto out;
	for (size_t k = 0; k < N; k++)
		sd->gidx[k] = w ? w[0].ks[k].i - skip : k;
	for (int r = 0; r < R; r++) {
		struct rankinfo *ri = &a->ranks[r];
		ri->steps = calloc(N, sizeof *ri->steps);
		struct thr *t = an_train_thread(ri->p);
		if (!ri->steps || !t)
			continue;
		for (size_t k = 0; k < N; k++) {
			ri->steps[k].t0 = ri->steps[k].h0 = w ? w[r].ks[k].t0 : b[r][skip + k];
			ri->steps[k].t1 = ri->steps[k].h1 = w ? w[r].ks[k].t1 : b[r][skip + k + 1];
		}
		/* (the rank's longest step only where the sample left some out: a job step is the mean of
		 * its ranks', which the kept ones give when all are, and a rank's own is longer by noise) */
		if (w && N == K - skip) /* (all kept: as read whole, a rank's later steps left out) */
			sd->span[r] = (struct span){ ri->steps[0].t0, ri->steps[N - 1].t1, (double)N, 0 };
		else if (w)
			sd->span[r] = (struct span){ skip ? w[r].bskip : w[r].b0, w[r].b, (double)(w[r].nb - 1 - skip),
						     MS(w[r].len_max) };
		else
			sd->span[r] = (struct span){ ri->steps[0].t0, ri->steps[N - 1].t1, (double)N, 0 };
	}
	int who = -1;
	size_t kept = cupti_cut(a, N, &who);
	if (kept < N) { /* (the kept ones are the first: a sample's too, in order; with a sample, the
			  * steps left out include those between its last kept one and the stop) */
		int analysed = (int)sd->gidx[kept - 1] + 1;
		a->steps_cut = a->nsteps - analysed;
		an_warn(a, "rank %d: CUPTI's records stopped (another CUPTI client took CUPTI's callbacks) in step %d of "
			"%d: the %d steps from there are left out, so that every step analysed has its device's "
			"timeline", a->ranks[who].rank, analysed + 1, a->nsteps, a->steps_cut);
		a->nsteps = analysed;
		a->nsampled = (int)(N = kept);
		for (int r = 0; r < R; r++)
			if (a->ranks[r].steps)
				sd->span[r] = (struct span){ a->ranks[r].steps[0].t0, a->ranks[r].steps[N - 1].t1,
							     (double)(sd->gidx[N - 1] - sd->gidx[0] + 1), 0 };
	}
	sd->K = N;
out:
	free(pts);
	free(first);
	an_sweep_free(w, R);
	for (int r = 0; syn && r < R; r++)
		free(syn[r].e);
	for (int r = 0; b && r < R; r++)
		free(b[r]);
	free(syn);
	free(b);
	free(nb);
}

void an_steps_free(struct analysis *a)
{
	struct stepdata *sd = a->sd;
	for (int r = 0; a->ranks && r < a->nranks; r++)
		free(a->ranks[r].steps);
	if (!sd)
		return;
	free(sd->gidx);
	free(sd->span);
	free(sd);
	a->sd = NULL;
}
