/* The split: every call of each rank's training thread (its kept synchronizing calls with the runs
 * of calls between them summed while loading, or, where those are not enough, the thread read a
 * second time) spread over the analysed steps as compute / data / comms / host; the waits of its
 * collectives for late peers, who was late and what that peer did right before; the critical path
 * (waits charged to what made the peer late); per-rank and job figures; and what the findings need
 * of every call (the fold). */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/format.h"
#include "analysis_int.h"
#include "split_int.h"
#include "trace.h"

/* ---- steps: boundaries, raw splits, waits, critical path ---- */

struct rv {
	double v;
	int r;
};

static int cmp_rv(const void *x, const void *y)
{
	double a = ((const struct rv *)x)->v, b = ((const struct rv *)y)->v;
	return AN_ORDER(a, b);
}

/* For step k and category c, every rank's excess over the median of the other ranks: one sort,
 * then each rank's "others" are the sorted values without its own. */
static void excesses(struct analysis *a, size_t k, int c, struct rv *v, double *out)
{
	int R = a->nranks;
	for (int r = 0; r < R; r++) {
		v[r].v = a->ranks[r].steps ? a->ranks[r].steps[k].cat[c] : 0;
		v[r].r = r;
	}
	sort_n(v, (size_t)R, sizeof *v, cmp_rv);
	for (int pos = 0; pos < R; pos++) {
		/* median of the R-1 others: positions lo and hi of the reduced array */
		int m = R - 1, lo = (m - 1) / 2, hi = m / 2;
		double a0 = v[lo < pos ? lo : lo + 1].v, a1 = v[hi < pos ? hi : hi + 1].v;
		double med = (a0 + a1) / 2;
		out[v[pos].r] = fmax(0, v[pos].v - med);
	}
}

/* spread [t, t+d) over the steps it overlaps, from *cur on, in ns (ns[k * CAT_COUNT + c]: whole
 * numbers, summed exactly; ms once the rank's events are all in) */
static void add_span(const struct rankstep *st, int64_t *ns, size_t nsteps, size_t *cur, int64_t t, int64_t d, int c)
{
	while (*cur < nsteps && st[*cur].t1 <= t)
		(*cur)++;
	for (size_t k = *cur; k < nsteps && st[k].t0 < t + d; k++) {
		int64_t lo = t > st[k].t0 ? t : st[k].t0, hi = t + d < st[k].t1 ? t + d : st[k].t1;
		if (hi > lo)
			ns[k * CAT_COUNT + (size_t)c] += hi - lo;
	}
}

static void dvec_add(struct dvec *d, double x)
{
	double *v = room_for(d->v, d->n, &d->cap, sizeof *v, 64);
	if (v)
		(d->v = v)[d->n++] = x;
}

static void shared_add(struct shared *l, int type, size_t i, double v, int cat)
{
	struct sadd *n = room_for(l->v, l->n, &l->cap, sizeof *n, 64);
	if (n)
		(l->v = n)[l->n++] = (struct sadd){ type, (uint32_t)i, v, cat };
}

static void shared_apply(struct stepdata *sd, const struct shared *l)
{
	for (size_t k = 0; k < l->n; k++) {
		const struct sadd *a = &l->v[k];
		if (a->type == SH_WAIT_SUM)
			sd->tab.v[a->i].wait_sum += a->v;
		else if (a->type == SH_P2PL)
			sd->p2pL[a->i] += a->v;
		else if (a->type == SH_P2POP)
			sd->p2pop[a->i] += a->v;
		else if (a->type == SH_PLATE)
			dvec_add(&sd->plate[a->i], a->v);
		else if (a->type == SH_PREV) {
			sd->tab.v[a->i].prev_cat = a->cat;
			sd->tab.v[a->i].prev_gap = (int64_t)a->v;
		}
	}
}

/* One rank's training thread, call by call (kept or streamed): each event spread over the steps by
 * category, the waits of its collectives, what it did before the collectives it was late to, and
 * the findings' fold (one event behind, which needs its successor). */
struct split {
	struct stepdata *sd;
	struct rankinfo *ri;
	struct hostlanes *lanes; /* a rank with device work: its waits for gpu.c, from the same reading */
	int r;
	size_t N, cur, maxlate;
	struct wait_ctx w;
	int prev_cat, pp_cat;    /* the latest event's category, the one before's */
	int64_t prev_end, pp_end;
	struct ev win[2]; /* the two latest events: event i in win[i & 1] */
	int wcat[2];      /* and their categories */
	int win_in[2];    /* and whether they start in a step (steps may have gaps: a sample) */
	size_t fcur;      /* the first step that ends after the latest event starts */
	size_t seen;
	size_t pb, pend;   /* its blocking point-to-point calls (sd->pblk): the next, and the end */
	/* collectives on helper threads (p->bg), in time order, and the union of their spans */
	const struct ev **bg;
	size_t nbg, bgi;
	struct bgseg *seg;
	size_t nseg, segi;
	double waited;   /* ms of the segments the training thread waited through, in the steps */
	struct shared *log; /* what it adds to other ranks' figures and the instances' */
	int64_t *ns;        /* the steps' raw split in ns (add_span) */
};

struct bgseg {
	int64_t t0, t1, release; /* release: the last peer's arrival at any collective in it */
	struct inst *rel;        /* that collective */
};

static long step_at(const struct rankstep *st, size_t n, int64_t t)
{
	size_t lo = 0, hi = n;
	while (lo < hi) {
		size_t m = (lo + hi) / 2;
		if (st[m].t1 <= t)
			lo = m + 1;
		else
			hi = m;
	}
	return lo < n && st[lo].t0 <= t ? (long)lo : -1;
}

/* A rank's collectives on its helper threads, in time order, and the union of their spans. */
static void bg_build(struct split *s, struct proc *p)
{
	struct thr *t = an_train_thread(p);
	size_t n = 0;
	for (int h = 0; h < p->nthr; h++)
		n += &p->thr[h] != t ? p->thr[h].n : 0;
	s->bg = malloc((n + 1) * sizeof *s->bg);
	s->seg = malloc((n + 1) * sizeof *s->seg);
	if (!s->bg || !s->seg)
		return;
	for (int h = 0; h < p->nthr; h++)
		for (size_t k = 0; &p->thr[h] != t && k < p->thr[h].n && s->nbg < n; k++)
			if (an_numbered_coll(&p->thr[h].ev[k]))
				s->bg[s->nbg++] = &p->thr[h].ev[k];
	sort_n(s->bg, s->nbg, sizeof *s->bg, an_cmp_evp);
	for (size_t i = 0; i < s->nbg; i++) {
		const struct ev *e = s->bg[i];
		struct inst *in = an_inst_get(&s->sd->tab, e->comm, e->seq, 0);
		struct bgseg *g = s->nseg ? &s->seg[s->nseg - 1] : NULL;
		if (!g || e->t >= g->t1) {
			g = &s->seg[s->nseg++];
			*g = (struct bgseg){ e->t, e->t + e->d, INT64_MIN, NULL };
		}
		if (e->t + e->d > g->t1)
			g->t1 = e->t + e->d;
		if (in && in->n > 1 && in->max_arr > g->release) {
			g->release = in->max_arr;
			g->rel = in;
		}
	}
}

/* A helper thread's collective starts: the rank's lateness to it, and, if it was the last to
 * arrive, what the training thread did right before. */
static void bg_arrival(struct split *s, const struct ev *e)
{
	struct stepdata *sd = s->sd;
	struct inst *in = an_inst_get(&sd->tab, e->comm, e->seq, 0);
	if (!in || in->n < 2)
		return;
	if (in->late == s->r) {
		/* the training thread's wait for this very collective may have begun first (it enqueues,
		 * then waits): what it did before is the event before that wait */
		int straddles = s->prev_end > e->t;
		shared_add(s->log, SH_PREV, (size_t)(in - sd->tab.v), (double)(e->t - (straddles ? s->pp_end : s->prev_end)),
			   straddles ? s->pp_cat : s->prev_cat);
	}
	long k = step_at(s->ri->steps, s->N, e->t);
	if (k >= 0) {
		double late = MS(e->t - in->min_arr);
		s->ri->steps[k].late_max = fmax(s->ri->steps[k].late_max, late);
		if (sd->late[s->r] && sd->nlate[s->r] < s->maxlate)
			sd->late[s->r][sd->nlate[s->r]++] = late;
	}
}

/* A wait of the training thread while collectives run on helper threads: the overlap is comms
 * (the part before the last peer arrived, a wait for it), the rest host. Returns the category
 * the event counts as for what follows it. */
static int split_wait(struct split *s, const struct ev *e)
{
	struct rankinfo *ri = s->ri;
	int64_t t = e->t, end = e->t + e->d;
	int c = CAT_HOST;
	while (s->segi < s->nseg && s->seg[s->segi].t1 <= t)
		s->segi++;
	for (size_t i = s->segi; i < s->nseg && s->seg[i].t0 < end; i++) {
		const struct bgseg *g = &s->seg[i];
		int64_t lo = t > g->t0 ? t : g->t0, hi = end < g->t1 ? end : g->t1;
		if (lo > t)
			add_span(ri->steps, s->ns, s->N, &s->cur, t, lo - t, CAT_HOST);
		add_span(ri->steps, s->ns, s->N, &s->cur, lo, hi - lo, CAT_COMMS);
		c = CAT_COMMS;
		int64_t a0 = lo > ri->steps[0].t0 ? lo : ri->steps[0].t0, a1 = hi < ri->steps[s->N - 1].t1 ? hi : ri->steps[s->N - 1].t1;
		if (a1 > a0)
			s->waited += MS(a1 - a0);
		long k = step_at(ri->steps, s->N, lo);
		if (g->rel && g->release > lo && k >= 0) {
			double wt = MS((hi < g->release ? hi : g->release) - lo);
			ri->steps[k].wait += wt;
			shared_add(s->log, SH_WAIT_SUM, (size_t)(g->rel - s->sd->tab.v), wt, 0);
			if (g->rel->late >= 0 && g->rel->late != s->r)
				an_wf_add(s->sd, s->r, (size_t)k, g->rel->late, wt, 0);
		}
		t = hi;
	}
	if (end > t)
		add_span(ri->steps, s->ns, s->N, &s->cur, t, end - t, CAT_HOST);
	return c;
}

/* a blocking all-reduce (of a library that records its bytes: see the fold below) */
static int is_allreduce(const struct ev *e)
{
	return an_blocking_coll(e) && e->op == DDPSPY_OP_ALLREDUCE;
}

/* the fold's entry for input calls of kind, fdclass and bytes, made when new; NULL when MAX_PATS
 * others came first */
static struct pat *pat_of(struct trainfold *tf, int kind, int fdclass, int64_t by)
{
	/* (the latest pattern first: input calls come in runs of one) */
	int j = tf->last < tf->np && an_pat_find(&tf->pats[tf->last], 1, kind, fdclass, by) == 0
			? tf->last : (int)an_pat_find(tf->pats, (size_t)tf->np, kind, fdclass, by);
	tf->last = j;
	if (j == tf->np) {
		if (tf->np == MAX_PATS)
			return NULL;
		tf->pats[tf->np++] = (struct pat){ kind, fdclass, by, 0, 0, 0 };
	}
	return &tf->pats[j];
}

/* One training-thread event e of an analysed step, of category cat, into what the findings need
 * (tf), with the events before and after it on the thread (NULL at either end). */
static void fold(struct trainfold *tf, const struct ev *prev, const struct ev *e, int cat, const struct ev *next)
{
	if (an_kind(e->kind)->m & DDPSPY_KM_NONBLOCKING)
		tf->icoll++;
	/* one of a run of blocking all-reduces with next to nothing between them (no_overlap) */
	if (is_allreduce(e) && e->bytes > 0 && next &&
	    ((is_allreduce(next) && next->t - (e->t + e->d) < 200000) ||
	     (prev && is_allreduce(prev) && e->t - (prev->t + prev->d) < 200000))) {
		tf->runs++;
		tf->run_bytes += (double)e->bytes;
		tf->run_ms += MS(e->d);
	}
	if (cat != CAT_DATA)
		return;
	/* input calls (data_stall), by pattern */
	struct pat *q = pat_of(tf, e->kind, e->fdclass, an_pat_bytes(e));
	if (q) {
		q->calls++;
		q->ns += e->d;
	}
}

/* the findings' fold of event i = seen - 1, now that its successor (next, NULL at the end) is known */
static void fold_at(struct split *s, const struct ev *next)
{
	size_t i = s->seen - 1;
	const struct ev *e = &s->win[i & 1], *prev = i ? &s->win[(i - 1) & 1] : NULL;
	if (s->win_in[i & 1] && s->sd->fold)
		fold(&s->sd->fold[s->r], prev, e, s->wcat[i & 1], next);
}

/* rank r waited ms in step k for L in blocking point-to-point call b */
static void p2p_charge(struct split *s, size_t k, int L, double ms, const struct an_p2pblk *b)
{
	struct stepdata *sd = s->sd;
	an_wf_add(sd, s->r, k, L, ms, 0);
	shared_add(s->log, SH_P2PL, 2 * (size_t)L + (size_t)b->late_sender, ms, 0);
	if (b->op >= 0 && b->op < DDPSPY_OP_COUNT)
		shared_add(s->log, SH_P2POP, (size_t)L * DDPSPY_OP_COUNT + (size_t)b->op, ms, 0);
}

/* e, of category c, becomes the latest event: what follows it takes it as the one before, the
 * event before it is folded now that its successor is known, and e waits in the fold's window
 * (in a step if may_fold and a step holds its start). upto: the latest start among the calls e
 * stands for (e's own, or a run's). */
static void step_past(struct split *s, const struct ev *e, int c, int64_t upto, int may_fold)
{
	const struct rankstep *st = s->ri->steps;
	s->pp_cat = s->prev_cat;
	s->pp_end = s->prev_end;
	s->prev_cat = c;
	s->prev_end = e->t + e->d;
	if (s->seen)
		fold_at(s, e);
	while (s->fcur < s->N && st[s->fcur].t1 <= upto)
		s->fcur++;
	s->win[s->seen & 1] = *e;
	s->wcat[s->seen & 1] = c;
	s->win_in[s->seen & 1] = may_fold && s->fcur < s->N && st[s->fcur].t0 <= e->t;
	s->seen++;
}

static int split_event(void *ctx, const struct ev *e)
{
	struct split *s = ctx;
	struct stepdata *sd = s->sd;
	struct rankinfo *ri = s->ri;
	size_t N = s->N;
	int r = s->r;
	int c = an_category(e);
	/* an input call right after another: the loop between them is input too (x: e with it) */
	int64_t gap = an_input_gap(s->prev_cat, s->prev_end, c, e);
	struct ev x = *e;
	x.t -= gap;
	x.d += gap;
	if (s->lanes)
		an_gpu_lanes_event(s->lanes, &x);
	while (s->bgi < s->nbg && s->bg[s->bgi]->t <= e->t)
		bg_arrival(s, s->bg[s->bgi++]);
	if (s->nseg && c == CAT_HOST && (an_kind(e->kind)->m & DDPSPY_KM_THREAD_WAIT))
		c = split_wait(s, e);
	else if (c < CAT_COUNT) /* (a marker is a point in time) */
		add_span(ri->steps, s->ns, N, &s->cur, x.t, x.d, c);
	struct inst *rel = NULL;
	double wt = an_is_coll(e->kind) || an_is_p2p(e) ? an_wait_of(&s->w, e, &rel) : 0;
	/* add_span left cur at the first step ending after e starts: events come in time order */
	long k = s->cur < N && ri->steps[s->cur].t0 <= e->t ? (long)s->cur : -1;
	if (k >= 0 && rel && wt > 0) {
		ri->steps[k].wait += wt;
		shared_add(s->log, SH_WAIT_SUM, (size_t)(rel - sd->tab.v), wt, 0);
		if (rel->late >= 0 && rel->late != r)
			an_wf_add(sd, r, (size_t)k, rel->late, wt, 0);
	}
	/* a blocking point-to-point call that waited for a late peer (p2p.c): the calls come in the
	 * same order as the kept ones they were found among (and no other call takes their place) */
	while (s->pb < s->pend && an_kept_sync(e) && sd->pblk[s->pb].t < e->t)
		s->pb++;
	for (; s->pb < s->pend && an_kept_sync(e) && sd->pblk[s->pb].t == e->t; s->pb++) {
		const struct an_p2pblk *b = &sd->pblk[s->pb];
		if (b->kind != e->kind || b->op != e->op)
			continue;
		if (k >= 0 && b->L >= 0 && b->wait > 0) {
			double w = MS(b->wait), wr = b->root >= 0 ? MS(b->wroot) : 0;
			ri->steps[k].p2p[b->late_sender] += w;
			if (wr > 0)
				p2p_charge(s, (size_t)k, b->root, wr, b);
			if (b->L != r && w > wr)
				p2p_charge(s, (size_t)k, b->L, w - wr, b);
			if (b->L != r)
				shared_add(s->log, SH_PLATE, (size_t)b->L, w, 0);
		}
		s->pb++;
		break;
	}
	if (e->seq >= 0 && (an_kind(e->kind)->m & DDPSPY_KM_COLL)) {
		struct inst *in = an_inst_get(&sd->tab, e->comm, e->seq, 0);
		if (in && in->n > 1) {
			if (in->late == r) {
				shared_add(s->log, SH_PREV, (size_t)(in - sd->tab.v), (double)(e->t - s->prev_end), s->prev_cat);
			}
			if (k >= 0) {
				double late = MS(e->t - in->min_arr);
				ri->steps[k].late_max = fmax(ri->steps[k].late_max, late);
				if (sd->late[r] && sd->nlate[r] < s->maxlate) /* (a file that grew since) */
					sd->late[r][sd->nlate[r]++] = late;
			}
		}
	}
	step_past(s, e, c, e->t, 1);
	return 0;
}

/* ---- the split from the training thread's runs (runs.c), without reading it a second time ---- */

/* where on the job's clock run u's calls lie: every start and end in [*a, *b] (b is a bound:
 * a negative drift may move an end that was not the latest past it by its rate over the run) */
static void run_span(const struct proc *p, const struct callrun *u, int64_t *a, int64_t *b)
{
	*a = an_job_time(p, u->tmin);
	*b = an_job_time(p, u->tmin + u->end) + 2 + (int64_t)(fabs(p->drift) * (double)u->end);
}

/* the step that holds all of [a, b] (its index), -1 when no step has any of it, -2 when it
 * straddles a step's start or end; *cur: the first step that ends after a (add_span's) */
static long run_step(const struct rankstep *st, size_t N, size_t *cur, int64_t a, int64_t b)
{
	while (*cur < N && st[*cur].t1 <= a)
		(*cur)++;
	if (*cur == N || b < st[*cur].t0)
		return -1;
	return st[*cur].t0 <= a && b < st[*cur].t1 ? (long)*cur : -2;
}

/* whether every run of t lies within one step or between steps: what taking its calls as sums
 * needs (the streamed split spreads each call over the steps it overlaps) */
static int runs_fit(const struct proc *p, const struct thr *t, const struct rankstep *st, size_t N)
{
	size_t cur = 0;
	for (size_t i = 0; i < t->nrun; i++) {
		int64_t a, b;
		run_span(p, &t->run[i], &a, &b);
		long k = run_step(st, N, &cur, a, b);
		if (k == -2 || (k >= 0 && t->run[i].nopat))
			return 0;
	}
	return 1;
}

/* run u of the training thread of p, as split_event would take its calls one by one: their time
 * in the step that holds them, their input calls in the fold, and, for the calls after, the place
 * of the latest (one that stands for them all in the fold's window, in no step: folded here) */
static void split_run(struct split *s, const struct proc *p, const struct thr *t, const struct callrun *u)
{
	const struct rankstep *st = s->ri->steps;
	int64_t a, b;
	run_span(p, u, &a, &b);
	long k = run_step(st, s->N, &s->cur, a, b);
	if (k >= 0) {
		int64_t *ns = &s->ns[(size_t)k * CAT_COUNT];
		ns[CAT_DATA] += u->ns[0];
		ns[CAT_COMMS] += u->ns[1];
		ns[CAT_HOST] += u->ns[2];
		for (uint32_t i = 0; s->sd->fold && i < u->npat; i++) {
			const struct pat *q = &t->rpat[u->pat + i];
			struct pat *f = pat_of(&s->sd->fold[s->r], q->kind, q->fdclass, q->bytes);
			if (f) {
				f->calls += q->calls;
				f->ns += q->ns;
			}
		}
	}
	int64_t tmax = an_job_time(p, u->tmin + u->tmax);
	while (s->cur < s->N && st[s->cur].t1 <= tmax)
		s->cur++;
	/* (its pp_* is not the run's second last call: it serves helper threads' collectives, which
	 * take the streamed split) */
	struct ev last = { .t = an_job_time(p, u->tmin + u->tl), .d = u->dl, .bytes = -1, .seq = -1,
			   .kind = DDPSPY_EV_COUNT, .op = -1 };
	step_past(s, &last, u->cat, tmax, 0);
}

/* A long trace's training thread from its sampled blocks (sweepcore.c): each block's calls and runs as
 * the runs above, from the wait state before its first call, unless it goes on from the block
 * before (then its first call, that block's last, and that block's event after are taken once) */
static void split_blocks(struct split *s, const struct proc *p, const struct sruns *sr)
{
	const struct thr *t = &sr->acc;
	for (size_t b = 0; b < sr->nb; b++) {
		const struct sblock *k = &sr->b[b];
		int after = b && sr->b[b - 1].blk + 1 == k->blk, cont = b + 1 < sr->nb && sr->b[b + 1].blk == k->blk + 1;
		size_t c0 = k->c0 + (after && k->c1 > k->c0), c1 = k->c1 - (cont && k->has_next && k->c1 > c0), j = k->r0;
		if (!after)
			an_wait_load(&s->w, k->w);
		for (size_t i = c0;; i++) {
			for (; j < k->r1 && t->run[j].before <= i; j++)
				if (t->run[j].before == i)
					split_run(s, p, t, &t->run[j]);
			if (i >= c1)
				break;
			struct ev e = t->ev[i];
			e.t = an_job_time(p, e.t);
			split_event(s, &e);
		}
	}
}

/* Every collective instance, from every thread of every rank: who arrived first and last. Of the
 * calls in the rank's analysed steps (its span), as a long trace keeps them: on a GPU rank the host
 * runs ahead, and the next step's first all-reduce can be called before a slower rank's last step
 * ends. */
static void collect_instances(struct analysis *a, struct stepdata *sd)
{
	for (int r = 0; r < a->nranks; r++) {
		struct proc *p = a->ranks[r].p;
		for (int i = 0; i < p->nthr; i++)
			for (size_t k = 0; k < p->thr[i].n; k++) {
				struct ev *e = &p->thr[i].ev[k];
				if (e->seq < 0 || !(an_kind(e->kind)->m & DDPSPY_KM_COLL) || e->t < sd->span[r].t0 ||
				    e->t >= sd->span[r].t1)
					continue;
				struct inst *in = an_inst_get(&sd->tab, e->comm, e->seq, 1);
				if (!in)
					continue;
				in->n++;
				in->op = e->op;
				in->bytes = e->bytes;
				if (e->t < in->min_arr)
					in->min_arr = e->t;
				if (e->t > in->max_arr) {
					in->max_arr = e->t;
					in->late = r;
				}
			}
	}
}

/* Rank r's training thread streamed again and split (split_event); compute is what is left.
 * What it adds to figures of others goes to log. */
static void split_rank(struct analysis *a, struct stepdata *sd, int r, struct shared *log)
{
	size_t N = sd->K;
	struct rankinfo *ri = &a->ranks[r];
	struct thr *t = an_train_thread(ri->p);
	if (!ri->steps || !t)
		return;
	struct split sp = { .sd = sd, .ri = ri, .r = r, .N = N, .w = { .tab = &sd->tab, .rank = r },
			    .prev_cat = CAT_COMPUTE, .prev_end = INT64_MIN, .pp_cat = CAT_COMPUTE,
			    .pp_end = INT64_MIN, .log = log, .ns = calloc(N * CAT_COUNT + 1, sizeof *sp.ns) };
	if (!sp.ns) {
		if (asprintf(&log->warn, "out of memory: rank %d's steps are not split", ri->rank) < 0)
			log->warn = NULL;
		return;
	}
	if (ri->p->bg)
		bg_build(&sp, ri->p);
	if (sd->pbo) {
		sp.pb = sd->pbo[r];
		sp.pend = sd->pbo[r + 1];
	}
	sp.maxlate = t->n + sp.nbg + 1;
	sp.lanes = sd->lanes[r] = an_gpu_lanes_new(ri->p);
	sd->late[r] = malloc(sp.maxlate * sizeof **sd->late);
	if (t->runs_ok && !sp.nbg && !sp.lanes && runs_fit(ri->p, t, ri->steps, N)) {
		/* every call it made between its kept ones is summed in a run that one step holds; the
		 * kept ones with their own times on the job's clock, as a second reading gives them */
		for (size_t i = 0, j = 0; i <= t->n; i++) {
			for (; j < t->nrun && t->run[j].before == i; j++)
				split_run(&sp, ri->p, t, &t->run[j]);
			if (i == t->n)
				break;
			struct ev e = t->ev[i];
			e.t = an_job_time(ri->p, t->own[i].t);
			e.d = t->own[i].d;
			split_event(&sp, &e);
		}
	} else if (t->sr && !sp.nbg && !sp.lanes && runs_fit(ri->p, &t->sr->acc, ri->steps, N)) {
		split_blocks(&sp, ri->p, t->sr);
	} else if (an_stream_train(ri->p, split_event, &sp) < 0 &&
		   asprintf(&log->warn, "%s: could not be read a second time; rank %d's steps are not split",
			    ri->p->file, ri->rank) < 0) {
		log->warn = NULL;
	}
	while (sp.bgi < sp.nbg)
		bg_arrival(&sp, sp.bg[sp.bgi++]);
	if (sp.nseg) {
		double bg = 0;
		int64_t lo = ri->steps[0].t0, hi = ri->steps[N - 1].t1;
		for (size_t i = 0; i < sp.nseg; i++) {
			int64_t a0 = sp.seg[i].t0 > lo ? sp.seg[i].t0 : lo, a1 = sp.seg[i].t1 < hi ? sp.seg[i].t1 : hi;
			bg += a1 > a0 ? MS(a1 - a0) : 0;
		}
		ri->bg_ms = bg / (double)N;
		ri->bg_overlap = bg > 0 ? fmax(0, 1 - sp.waited / bg) : 0;
	}
	free(sp.bg);
	free(sp.seg);
	if (sp.seen)
		fold_at(&sp, NULL);
	for (int j = 0; sd->fold && j < sd->fold[r].np; j++)
		sd->fold[r].pats[j].ms = MS(sd->fold[r].pats[j].ns);
	an_wf_sort(sd, r);
	for (size_t k = 0; k < N; k++) {
		struct rankstep *st = &ri->steps[k];
		for (int c = 0; c < CAT_COUNT; c++)
			st->cat[c] += MS(sp.ns[k * CAT_COUNT + (size_t)c]);
		double len = MS(st->t1 - st->t0), busy = st->cat[CAT_DATA] + st->cat[CAT_COMMS] + st->cat[CAT_HOST];
		st->cat[CAT_COMPUTE] = len > busy ? len - busy : 0;
		if (st->wait > st->cat[CAT_COMMS])
			st->wait = st->cat[CAT_COMMS];
		for (int i = 0; i < 2; i++)
			if (st->p2p[i] > st->cat[CAT_COMMS] - st->wait)
				st->p2p[i] = fmax(0, st->cat[CAT_COMMS] - st->wait);
	}
	free(sp.ns);
}

/* The late ranks' excess over their peers, and the critical path: each wait for a late rank
 * charged to what made it late, as far as its extra work explains the wait. */
static void critical_path(struct analysis *a, struct stepdata *sd)
{
	int R = a->nranks;
	size_t N = sd->K;
	struct rv *rv = malloc((size_t)R * sizeof *rv);
	double *ex = malloc((size_t)R * sizeof *ex);
	for (size_t k = 0; rv && ex && R > 1 && k < N; k++)
		for (int c = 0; c < CAT_COUNT; c++) {
			if (c == CAT_COMMS)
				continue;
			excesses(a, k, c, rv, ex);
			for (int L = 0; L < R; L++)
				sd->exc[(k * R + L) * CAT_COUNT + c] = a->ranks[L].steps ? ex[L] : 0;
		}
	free(rv);
	free(ex);
	for (int r = 0; r < R; r++) {
		struct rankinfo *ri = &a->ranks[r];
		if (!ri->steps)
			continue;
		for (size_t k = 0; k < N; k++) {
			struct rankstep *st = &ri->steps[k];
			memcpy(st->crit, st->cat, sizeof st->crit);
			size_t nw;
			const struct wfrom *wl = an_wfrom_step(sd, r, k, &nw);
			for (size_t i = 0; i < nw; i++) {
				int L = wl[i].L;
				double wt = wl[i].ms;
				const double *e = &sd->exc[(k * R + L) * CAT_COUNT];
				double sum = e[CAT_COMPUTE] + e[CAT_DATA] + e[CAT_HOST];
				if (wt <= 0 || sum <= 0)
					continue;
				/* only what L's extra work explains is charged to it; a wait beyond that
				 * is the collective's own cost (a rank whose previous collective finished
				 * later, not one that worked longer) and stays comms. On a device the wait
				 * is the skew of the NCCL kernels' starts, and the collectives before them
				 * ended together: all of it is what L did since, charged in the proportions
				 * of its extra work over the step; but a device's wait in a send or receive
				 * (a pipeline stage's, for its neighbour's different work) as a host's */
				double pw = wl[i].p2p_ms;
				wt = fmin(ri->gpu.have ? wt - pw + fmin(pw, sum) : fmin(wt, sum), st->crit[CAT_COMMS]);
				st->crit[CAT_COMMS] -= wt;
				for (int c = 0; c < CAT_COUNT; c++)
					if (c != CAT_COMMS)
						st->crit[c] += wt * e[c] / sum;
			}
		}
	}
}

/* Per rank: step quantiles, shares, waits, lateness, bytes per step; for the job: the critical
 * path's shares and the step quantiles (a step of the job: the mean of its ranks'. Their steps
 * take turns being long by where each rank's own bounds fall, never for long since every step
 * synchronizes them: the longest rank's, step by step, would be longer than any rank's steps
 * are, by that noise). */
static void figures(struct analysis *a, struct stepdata *sd)
{
	int R = a->nranks;
	size_t N = sd->K;
	double *v = malloc(N * sizeof *v), tot[CAT_COUNT] = { 0 }, all = 0;
	double *job = calloc(N, sizeof *job);
	if (!v || !job) {
		free(v);
		free(job);
		return;
	}
	int with = 0; /* (the ranks that have steps) */
	for (int r = 0; r < R; r++)
		with += a->ranks[r].steps != NULL;
	a->overhead_share = -1;
	for (int r = 0; r < R; r++) {
		struct rankinfo *ri = &a->ranks[r];
		if (!ri->steps)
			continue;
		double sum = 0, cat[CAT_COUNT] = { 0 }, wait = 0, p2p[2] = { 0 };
		for (size_t k = 0; k < N; k++) {
			struct rankstep *st = &ri->steps[k];
			double len = MS(st->t1 - st->t0);
			v[k] = len;
			job[k] += len / with;
			sum += len;
			wait += st->wait;
			p2p[0] += st->p2p[0];
			p2p[1] += st->p2p[1];
			for (int c = 0; c < CAT_COUNT; c++) {
				cat[c] += st->cat[c];
				tot[c] += st->crit[c];
			}
			all += len;
		}
		ri->step_p50 = an_quantile(v, N, 0.5);
		ri->step_p95 = an_quantile(v, N, 0.95);
		for (int c = 0; c < CAT_COUNT; c++)
			ri->shares[c] = sum > 0 ? cat[c] / sum : 0;
		ri->wait_share = sum > 0 ? wait / sum : 0;
		for (int i = 0; i < 2; i++)
			ri->p2p_share[i] = sum > 0 ? p2p[i] / sum : 0;
		ri->p2p_wait_share = ri->p2p_share[0] + ri->p2p_share[1];
		/* lateness to collectives and to point-to-point peers, together */
		struct dvec *pl = &sd->plate[r];
		if (sd->late[r])
			for (size_t i = 0; i < sd->nlate[r]; i++)
				dvec_add(pl, sd->late[r][i]);
		ri->late_p50 = pl->n ? an_quantile(pl->v, pl->n, 0.5) : 0;
		/* bytes per step over all of the rank's threads and its input workers, in its host's steps
		 * (a GPU rank's bounds are its device's by now) */
		int64_t t0 = sd->span[r].t0, t1 = sd->span[r].t1;
		double coll = 0, rd = 0;
		for (int i = 0; i < a->nprocs; i++) {
			struct proc *p = &a->procs[i];
			if (p != ri->p && !(p->role == DDPSPY_ROLE_WORKER && p->parent_pid == ri->p->pid))
				continue;
			rd += an_read_bytes(p, sd->span[r].t0, sd->span[r].t1);
			for (int h = 0; h < p->nthr; h++)
				for (size_t k = 0; k < p->thr[h].n; k++) {
					struct ev *e = &p->thr[h].ev[k];
					if (e->t < t0 || e->t >= t1 || e->bytes <= 0)
						continue;
					if (an_kind(e->kind)->m & DDPSPY_KM_COLL)
						coll += (double)e->bytes;
				}
		}
		ri->coll_bytes = coll / (double)N;
		/* (every analysed step's, kept or not) */
		ri->read_bytes = sd->span[r].n > 0 ? rd / sd->span[r].n : 0;
		/* its recording: the file's events, as many in a step as its share of the file's span */
		double in = ri->p->span > 0 ? fmin(1, (double)(t1 - t0) / (double)ri->p->span) : 1;
		ri->events_step = sd->span[r].n > 0 ? (double)ri->p->events * in / sd->span[r].n : 0;
		ri->overhead_share = ri->p->event_ns > 0 && ri->step_p50 > 0 ?
				     ri->events_step * ri->p->event_ns / 1e6 / ri->step_p50 : -1;
		a->overhead_share = fmax(a->overhead_share, ri->overhead_share);
	}
	for (int c = 0; c < CAT_COUNT; c++)
		a->shares[c] = all > 0 ? tot[c] / all : 0;
	memcpy(v, job, N * sizeof *v);
	a->step_p50 = an_quantile(v, N, 0.5);
	a->step_p95 = an_quantile(v, N, 0.95);
	a->step_max = v[N - 1];
	for (int r = 0; r < R; r++) /* the longest of all steps, when only some were kept */
		a->step_max = fmax(a->step_max, sd->span[r].max_ms);
	free(v);
	free(job);
}

struct splitjob {
	struct analysis *a;
	struct stepdata *sd;
	struct shared *logs;
	struct an_progress progress;
};

static void split_one(void *ctx, size_t r)
{
	struct splitjob *j = ctx;
	split_rank(j->a, j->sd, (int)r, &j->logs[r]);
	const struct proc *p = j->a->ranks[r].p;
	an_progress_add(&j->progress, p->read_to, p->events);
}

/* Every collective instance; then each rank's training thread streamed and split, the ranks on
 * a->jobs threads; then the critical path; then per-rank and job figures. */
void an_split_steps(struct analysis *a)
{
	int R = a->nranks;
	struct stepdata *sd = a->sd;
	size_t N = sd ? sd->K : 0;
	if (!N)
		return;
	collect_instances(a, sd);
	an_p2p_match(a, sd);
	sd->R = R;
	sd->wf = calloc((size_t)R, sizeof *sd->wf);
	sd->nwf = calloc((size_t)R, sizeof *sd->nwf);
	sd->cwf = calloc((size_t)R, sizeof *sd->cwf);
	sd->exc = calloc(N * R * CAT_COUNT, sizeof *sd->exc);
	sd->late = calloc((size_t)R, sizeof *sd->late);
	sd->nlate = calloc((size_t)R, sizeof *sd->nlate);
	sd->fold = calloc((size_t)R, sizeof *sd->fold);
	sd->lanes = calloc((size_t)R, sizeof *sd->lanes);
	sd->p2pL = calloc(2 * (size_t)R, sizeof *sd->p2pL);
	sd->p2pop = calloc((size_t)R * DDPSPY_OP_COUNT, sizeof *sd->p2pop);
	sd->plate = calloc((size_t)R, sizeof *sd->plate);
	if (!sd->wf || !sd->nwf || !sd->cwf || !sd->exc || !sd->late || !sd->nlate || !sd->fold || !sd->lanes ||
	    !sd->p2pL || !sd->p2pop || !sd->plate)
		return;
	struct splitjob job = { .a = a, .sd = sd, .logs = calloc((size_t)R, sizeof *job.logs) };
	size_t *mine = malloc(((size_t)R + 1) * sizeof *mine), nmine = 0;
	if (!job.logs || !mine) {
		free(job.logs);
		free(mine);
		return;
	}
	/* the ranks split here: all, or (report --mpi) those whose files this process read */
	uint64_t bytes = 0;
	for (int r = 0; r < R; r++)
		if (an_mine(a, r)) {
			mine[nmine++] = (size_t)r;
			bytes += a->ranks[r].p->read_to;
		}
	an_progress_start(&job.progress, "split ranks", nmine, bytes);
	an_parallel(nmine, a->jobs, mine, split_one, &job);
	an_progress_end(&job.progress);
	an_gpu_split(a, sd, mine, nmine);
	if (a->mpi && an_split_exchange(a, sd, job.logs, mine, nmine) < 0)
		an_warn(a, "--mpi: the other processes' splits could not be gathered; their ranks are not split");
	free(mine);
	for (int r = 0; r < R; r++) {
		struct shared *l = &job.logs[r];
		shared_apply(sd, l);
		if (l->warn)
			an_warn(a, "%s", l->warn);
		free(l->v);
		free(l->warn);
	}
	free(job.logs);
	if (a->mpi_follower)
		return; /* (process 0 goes on) */
	an_gpu_warn(a);
	an_gpu_adds(sd);
	critical_path(a, sd);
	figures(a, sd);
}

void an_split_free(struct analysis *a)
{
	struct stepdata *sd = a->sd;
	if (!sd)
		return;
	for (int r = 0; sd->late && r < sd->R; r++)
		free(sd->late[r]);
	free(sd->late);
	free(sd->nlate);
	for (int r = 0; sd->wf && r < sd->R; r++)
		free(sd->wf[r]);
	free(sd->wf);
	free(sd->nwf);
	free(sd->cwf);
	free(sd->exc);
	free(sd->fold);
	for (int r = 0; sd->lanes && r < sd->R; r++)
		an_gpu_lanes_free(sd->lanes[r]);
	free(sd->lanes);
	for (int r = 0; sd->gadd && r < sd->R; r++)
		free(sd->gadd[r].v);
	free(sd->gadd);
	free(sd->tab.v);
	free(sd->pblk);
	free(sd->pbo);
	free(sd->p2pL);
	free(sd->p2pop);
	for (int r = 0; sd->plate && r < sd->R; r++)
		free(sd->plate[r].v);
	free(sd->plate);
}
