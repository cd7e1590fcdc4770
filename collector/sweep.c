/* Long traces' steps (steps_int.h's comment on the sweep): when a rank made more synchronizing
 * calls than the prefix kept while loading, its steps found again from every call, read a second
 * time in time order or streamed while its file is read, and a sample of them kept, with the
 * training thread's calls of the sampled blocks for the split (struct sruns); report --mpi: each
 * rank swept by the process that read its file, the results exchanged. */
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

/* whether step i is in the sample: its block's hash (splitmix64's finalizer) has no bit of the
 * mask set; the block of the first analysed step always is, so that a sample is never empty */
static int sampled(const struct sweep *w, size_t i)
{
	if (i / SAMPLE_BLOCK == (size_t)w->a->skip / SAMPLE_BLOCK)
		return 1;
	return (an_mix64((uint64_t)(i / SAMPLE_BLOCK) + 0x9e3779b97f4a7c15ull) & w->mask) == 0;
}

/* ---- a long trace's sampled blocks kept for the split (analysis_int.h's struct sruns) ---- */

/* what the sweep does while a file is read, for load.c (analysis_int.h) */
__attribute__((constructor)) static void registered(void)
{
	an_sweep_part = (struct an_sweep_part){ an_lsweep_start, an_lsweep_event, an_lsweep_end, an_lsweep_free,
						an_sruns_free };
}

void an_sruns_free(struct sruns *sr)
{
	if (!sr)
		return;
	an_runs_drop(&sr->acc);
	free(sr->acc.ev);
	free(sr->kept);
	for (size_t k = 0; k < sr->nb; k++)
		free(sr->b[k].w);
	free(sr->b);
	free(sr);
}

/* the latest block's run ends (a call comes, or the stream ends) */
static void sr_close(struct sruns *sr)
{
	if (!sr->ok || !sr->nb)
		return;
	an_run_close(&sr->acc);
	if (!sr->acc.runs_ok)
		sr->ok = 0;
	sr->b[sr->nb - 1].r1 = sr->acc.nrun;
}

/* room for one more in calls *ev of n and their steps *st, *cap of each; -1 out of memory (either
 * may have grown, *cap is what both have) */
static int room_ev_step(struct ev **ev, size_t **st, size_t n, size_t *cap)
{
	if (n < *cap)
		return 0;
	size_t c = *cap ? *cap * 2 : 256;
	struct ev *ne = realloc(*ev, c * sizeof *ne);
	size_t *ns = ne ? realloc(*st, c * sizeof *ns) : NULL;
	if (ne)
		*ev = ne;
	if (!ns)
		return -1;
	*st = ns;
	*cap = c;
	return 0;
}

/* v (on the thread's own clock) the latest block's next call; cur: v is the stream's current
 * event (which the sweep may keep: sr->app) */
static void sr_call(struct sruns *sr, const struct ev *v, int cur)
{
	sr_close(sr);
	struct thr *t = &sr->acc;
	if (!sr->ok || !sr->nb || room_ev_step(&t->ev, &sr->kept, t->n, &t->cap) < 0) {
		sr->ok = 0;
		return;
	}
	if (cur) {
		sr->app_id = sr->id;
		sr->app = t->n;
	}
	sr->kept[t->n] = SIZE_MAX;
	t->ev[t->n++] = *v;
	sr->b[sr->nb - 1].c1 = t->n;
}

/* v, a call not kept, into the latest block's current run */
static void sr_run(struct sruns *sr, const struct ev *v)
{
	if (!sr->ok || !sr->nb)
		return;
	an_run_add(&sr->acc, v);
	if (!sr->acc.runs_ok)
		sr->ok = 0;
}

/* block blk begins with call b (cur: the stream's current event, as sr_call's), the wait state
 * before it ws */
static void sr_block(struct sruns *sr, size_t blk, const struct ev *b, const struct wait_ctx *ws, int cur)
{
	sr_close(sr);
	struct sblock *n = sr->ok ? room_for(sr->b, sr->nb, &sr->cb, sizeof *n, 16) : NULL;
	if (n)
		sr->b = n;
	struct wsnap *w = n ? an_wait_save(ws) : NULL;
	if (!w) {
		sr->ok = 0;
		return;
	}
	const struct thr *t = &sr->acc;
	sr->b[sr->nb++] = (struct sblock){ .blk = blk, .c0 = t->n, .c1 = t->n, .r0 = t->nrun, .r1 = t->nrun, .w = w };
	sr_call(sr, b, cur);
}

static int sampled(const struct sweep *w, size_t i);

/* the blocks no longer in the sample (or of steps from below on) let go, the rest moved down, and
 * so the calls kept; returns how many are */
static size_t sr_prune(struct sweep *w, size_t below)
{
	struct sruns *sr = w->sr;
	if (!sr || !sr->ok)
		return 0;
	struct thr *t = &sr->acc;
	if (t->cur.n) { /* (blocks change only between runs) */
		sr->ok = 0;
		return 0;
	}
	size_t nc = 0, nr = 0, np = 0, nb = 0, kept = 0;
	for (size_t k = 0; k < sr->nb; k++) {
		struct sblock b = sr->b[k];
		size_t i = b.blk * SAMPLE_BLOCK;
		if (i >= below || !sampled(w, i)) {
			free(b.w);
			continue;
		}
		size_t c0 = nc, r0 = nr;
		memmove(&t->ev[nc], &t->ev[b.c0], (b.c1 - b.c0) * sizeof *t->ev);
		memmove(&sr->kept[nc], &sr->kept[b.c0], (b.c1 - b.c0) * sizeof *sr->kept);
		for (size_t c = nc; c < nc + (b.c1 - b.c0); c++) {
			if (sr->kept[c] != SIZE_MAX && (sr->kept[c] >= below || !sampled(w, sr->kept[c])))
				sr->kept[c] = SIZE_MAX;
			kept += sr->kept[c] != SIZE_MAX;
		}
		nc += b.c1 - b.c0;
		for (size_t j = b.r0; j < b.r1; j++) {
			struct callrun u = t->run[j];
			u.before = (uint32_t)(u.before - b.c0 + c0);
			memmove(&t->rpat[np], &t->rpat[u.pat], u.npat * sizeof *t->rpat);
			u.pat = (uint32_t)np;
			np += u.npat;
			t->run[nr++] = u;
		}
		b.c0 = c0, b.c1 = nc, b.r0 = r0, b.r1 = nr;
		sr->b[nb++] = b;
	}
	t->n = nc, t->nrun = nr, t->nrpat = np, sr->nb = nb;
	return kept;
}

static void sweep_prune(struct sweep *w, size_t below)
{
	size_t n = 0;
	for (size_t i = 0; i < w->nks; i++)
		if (w->ks[i].i < below && sampled(w, w->ks[i].i))
			w->ks[n++] = w->ks[i];
	w->nks = n;
	w->kept = 0;
	for (int h = 0; w->kt && h < w->p->nthr; h++) { /* (none yet while the file is read) */
		struct kthr *k = &w->kt[h];
		n = 0;
		for (size_t i = 0; i < k->n; i++)
			if (k->step[i] < below && sampled(w, k->step[i])) {
				k->ev[n] = k->ev[i];
				k->step[n++] = k->step[i];
			}
		k->n = n;
		w->kept += n;
	}
	w->kept += sr_prune(w, below);
}

static void sweep_keep(struct sweep *w, int h, const struct ev *e)
{
	if (!w->nb || e->t < w->bprev)
		return;
	size_t i = w->nb >= 2 && e->t < w->b ? w->nb - 2 : w->nb - 1;
	if (!sampled(w, i))
		return;
	struct sruns *sr = w->sr;
	if (sr && h == w->th) { /* (the split's copy of it, when it is the call just taken in the step's
				 * block; else the thread is swept again without blocks: sweep_one) */
		if (sr->ok && sr->app_id == sr->id && sr->b[sr->nb - 1].blk == i / SAMPLE_BLOCK) {
			sr->kept[sr->app] = i;
			w->kept++;
		} else {
			sr->ok = 0;
		}
		return;
	}
	struct kthr *k = &w->kt[h];
	if (room_ev_step(&k->ev, &k->step, k->n, &k->cap) < 0) {
		w->failed = 1;
		return;
	}
	k->ev[k->n] = *e;
	if (w->mode != BY_WINDOWS) /* (the kept calls are on the job's clock) */
		k->ev[k->n].t = an_job_time(w->p, e->t);
	k->step[k->n++] = i;
	w->kept++;
}

/* whether e, of thread h, is a call the sweep's steps are found by (an_step_call; a training thread
 * swept alone, sr_fits, needs not know it is one: the sweep may begin while its file is read) */
static int sel_call(const struct sweep *w, int h, const struct ev *e)
{
	if (w->sr && !w->p2p)
		return an_train_sync(e);
	return an_step_call(w->p2p, w->p, &w->p->thr[h], e);
}

/* a boundary at t: step nb - 1 (if any) is complete */
static void sweep_bound(struct sweep *w, int64_t t)
{
	if (w->nb) {
		size_t i = w->nb - 1;
		if (i >= (size_t)w->a->skip && t - w->b > w->len_max) {
			w->len_max = t - w->b;
			w->lm0 = w->b;
			w->lm1 = t;
		}
		if (sampled(w, i)) {
			if (w->nks == w->cks) {
				size_t cap = w->cks ? w->cks * 2 : 64;
				struct kstep *n = realloc(w->ks, cap * sizeof *n);
				if (!n) {
					w->failed = 1;
					return;
				}
				w->ks = n;
				w->cks = cap;
			}
			w->ks[w->nks++] = (struct kstep){ w->b, t, i };
		}
		/* (a sample another rank's sweep has thinned to already: this one's will be too, in the
		 * end, and holds less meanwhile; a rank's sample is the thinnest its own steps need, or
		 * that it started from, so the job's is the same whatever order the ranks are swept in) */
		uint64_t seen = w->share ? __atomic_load_n(&w->a->mask_seen, __ATOMIC_RELAXED) : 0;
		if (seen > w->mask) {
			w->mask = seen;
			sweep_prune(w, SIZE_MAX);
		}
		int grew = 0;
		while ((w->nks > w->smax || w->kept > SAMPLE_CALLS * w->smax) && w->mask < (1ull << 40)) {
			w->mask = w->mask * 2 + 1;
			sweep_prune(w, SIZE_MAX);
			grew = 1;
		}
		for (uint64_t m = seen; grew && w->share && m < w->mask;)
			if (__atomic_compare_exchange_n(&w->a->mask_seen, &m, w->mask, 0, __ATOMIC_RELAXED,
							__ATOMIC_RELAXED))
				break;
	}
	if (w->nb == 0)
		w->b0 = t;
	if (w->nb == (size_t)w->a->skip)
		w->bskip = t;
	w->bprev = w->nb ? w->b : t;
	w->b = t;
	w->nb++;
}

static int sweep_event(void *ctx, int h, const struct ev *e)
{
	struct sweep *w = ctx;
	struct ev ae;
	if (w->mode == BY_WINDOWS) { /* (windows are on the job's clock) */
		ae = *e;
		ae.t = an_job_time(w->p, e->t);
		e = &ae;
		while (w->nb <= w->K && e->t >= an_window_at(w->lo, w->hi, w->nb, w->K))
			sweep_bound(w, an_window_at(w->lo, w->hi, w->nb, w->K));
		if (w->nb > w->K)
			return 1;
	} else if (w->mode == BY_MARKERS && an_category(e) == DDPSPY_CAT_MARKER) {
		if (!e->op) {
			w->lastend = e->t > w->lastend ? e->t : w->lastend;
		} else {
			sweep_bound(w, e->t);
		}
	}
	int sel = w->mode == BY_PATTERN && sel_call(w, h, e);
	size_t idx = sel ? w->calls++ : 0;
	if (sel && w->sig && idx >= w->first && !an_same_sig(e, &w->sig[(idx - w->first) % w->pt->period]))
		return 1; /* the rank's pattern ends: the step it was in is not whole */
	if (sel && idx + 1 == w->first) /* the call before step 0: where it begins */
		sweep_bound(w, e->t + e->d);
	sweep_keep(w, h, e);
	if (sel && idx >= w->first && (idx - w->first + 1) % w->pt->period == 0) {
		sweep_bound(w, e->t + e->d);
		if (w->nb - 1 >= w->maxsteps)
			return 1;
	}
	return w->failed;
}

/* what call e (on its file's clock) is to the steps: 1 it ends the open step (a pattern's), 2 it
 * is the call before step 0, 3 it begins step w->nb (a begin marker), -1 the rank's pattern ends
 * there, 0 none of these */
static int call_role(const struct sweep *w, const struct ev *e)
{
	if (w->mode == BY_MARKERS)
		return an_category(e) == DDPSPY_CAT_MARKER && e->op ? 3 : 0;
	if (w->mode != BY_PATTERN || !sel_call(w, w->th, e))
		return 0;
	size_t idx = w->calls;
	if (idx + 1 == w->first)
		return 2;
	if (idx < w->first)
		return 0;
	if (w->sig && !an_same_sig(e, &w->sig[(idx - w->first) % w->pt->period]))
		return -1;
	return (idx - w->first + 1) % w->pt->period == 0;
}

/* the kinds the stream converts: every one while a kept block's events are taken */
static void sr_want(struct sweep *w)
{
	int all = w->on || w->want_next;
	if (all == w->all)
		return;
	for (int k = 0; k < DDPSPY_EV_COUNT; k++)
		w->want[k] = (uint8_t)(all || an_is_sync_kind(k));
	w->all = all;
}

/* whether the open step's block is kept (or begins with the next event) */
static int sr_on(const struct sweep *w)
{
	size_t blk = (w->nb - 1) / SAMPLE_BLOCK;
	const struct sruns *sr = w->sr;
	return sr->ok && ((w->pend_blk != SIZE_MAX && w->pend_blk == blk) || (sr->nb && sr->b[sr->nb - 1].blk == blk));
}

/* v, the stream's next event: when it is the one after a block's last step, taken (and the block
 * that begins with the call before it made); 1 when the sweep ends with it */
static int sr_next(struct sweep *w, const struct ev *v)
{
	struct sruns *sr = w->sr;
	sr->id++;
	if (!w->want_next)
		return 0;
	sr_call(sr, v, 0);
	if (sr->ok)
		sr->b[sr->nb - 1].has_next = 1;
	w->want_next = 0;
	if (w->pend_blk != SIZE_MAX)
		sr_block(sr, w->pend_blk, &w->pend_b, &w->pend_w, 0);
	w->pend_blk = SIZE_MAX;
	return w->stopping;
}

/* Every event of the training thread the stream converts (v on its own clock): the synchronizing
 * calls to sweep_event, and what the split takes of the sampled blocks (struct sruns) kept, with
 * the split's wait state followed through every post and wait. */
static int sweep_local(void *ctx, const struct ev *v)
{
	struct sweep *w = ctx;
	struct sruns *sr = w->sr;
	struct inst *rel;
	int follow = an_is_coll(v->kind) || an_is_p2p(v);
	if (sr_next(w, v))
		return 1;
	if (!an_kept_sync(v)) {
		if (w->on)
			sr_run(sr, v);
		if (follow)
			an_wait_of(&sr->mirror, v, &rel);
		sr_want(w);
		return 0;
	}
	int role = call_role(w, v);
	size_t i = w->nb - 1, blk = SIZE_MAX;
	if (role == 2 && sampled(w, 0))
		blk = 0;
	else if (role == 1 && (i + 1) % SAMPLE_BLOCK == 0 && sampled(w, i + 1))
		blk = (i + 1) / SAMPLE_BLOCK;
	else if (role == 3 && w->nb % SAMPLE_BLOCK == 0 && sampled(w, w->nb)) /* (the marker is in it: the
		* block before ends with it, and needs no event after) */
		blk = w->nb / SAMPLE_BLOCK;
	struct wait_ctx before;
	if (blk != SIZE_MAX)
		before = sr->mirror;
	/* (a block that begins with the call, not after it, is made before the sweep may keep it) */
	int now = blk != SIZE_MAX && role != 1;
	if (w->on)
		sr_call(sr, v, !now);
	if (now)
		sr_block(sr, blk, v, &before, 1);
	if (follow)
		an_wait_of(&sr->mirror, v, &rel);
	int stop = sweep_event(w, w->th, v);
	/* a step of the latest block ended and the block with it, or the sweep: the next event is
	 * what the split takes as its last call's successor */
	if (role == 1 && w->on && ((i + 1) % SAMPLE_BLOCK == 0 || stop) && sr->ok && sr->nb &&
	    sr->b[sr->nb - 1].blk == i / SAMPLE_BLOCK)
		w->want_next = 1;
	if (stop) {
		w->pend_blk = SIZE_MAX;
		if (!w->want_next || w->failed || role == -1)
			return 1;
		w->stopping = 1;
	} else if (blk != SIZE_MAX && !now && sampled(w, blk * SAMPLE_BLOCK)) {
		if (w->want_next) {
			w->pend_blk = blk;
			w->pend_b = *v;
			w->pend_w = before;
		} else {
			sr_block(sr, blk, v, &before, 0);
		}
	}
	w->on = sr_on(w);
	sr_want(w);
	return 0;
}

/* the sweep's times on the job's clock (a step's bounds as the kept calls' ends move: the
 * longest step, the longest on the file's clock) */
static void sweep_on_job(struct sweep *w)
{
	if (w->mode == BY_WINDOWS)
		return;
	const struct proc *p = w->p;
	for (size_t i = 0; i < w->nks; i++) {
		w->ks[i].t0 = an_job_time(p, w->ks[i].t0);
		w->ks[i].t1 = an_job_time(p, w->ks[i].t1);
	}
	w->b0 = an_job_time(p, w->b0);
	w->bskip = an_job_time(p, w->bskip);
	w->b = an_job_time(p, w->b);
	w->bprev = an_job_time(p, w->bprev);
	if (w->len_max)
		w->len_max = an_job_time(p, w->lm1) - an_job_time(p, w->lm0);
}

/* the stream ended: the last step's end (markers: the latest end marker; windows: the rest); the
 * number of whole steps, the calls of the one still open let go */
static size_t sweep_finish(struct sweep *w)
{
	if (w->mode == BY_MARKERS && w->nb && w->lastend > w->b)
		sweep_bound(w, w->lastend);
	if (w->mode == BY_WINDOWS)
		while (w->nb <= w->K)
			sweep_bound(w, an_window_at(w->lo, w->hi, w->nb, w->K));
	size_t n = w->nb ? w->nb - 1 : 0;
	sweep_prune(w, n);
	return n;
}

/* Streams rank r's calls again (w set up by the caller); returns its number of whole steps and
 * leaves the kept steps and calls in w. */
static size_t sweep_rank(struct sweep *w)
{
	if (w->sr) {
		sr_want(w);
		if (an_stream_thread(w->p, w->th, w->want, sweep_local, w) < 0 || w->failed)
			return 0;
		sr_close(w->sr);
	} else if (an_stream_sync(w->p, sweep_event, w) < 0 || w->failed) {
		return 0;
	}
	size_t n = sweep_finish(w);
	sweep_on_job(w);
	return n;
}

/* ---- one reading: the sweep begun while a rank's file is read ----
 *
 * When a thread of a rank's file makes more synchronizing calls than the prefix keeps, the steps
 * would be found again from all of them, a second reading. Instead, there and then, its steps are
 * found from its own markers or pattern in its prefix (an_find_pattern, as rank 0's is found for the
 * job), the prefix swept from its kept calls and the runs between them (or, where the thread's runs
 * were given up, read again) and the rest as it is read: the sample's blocks kept for the split
 * (sr), as a sweep alone on the training thread keeps them. Once every file is read, the sweep is
 * taken where it is the one the job's steps would have made (lsweep_same), else let go and the rank
 * swept again. */

static void sweep_drop(struct sweep *v);

/* run j of t's prefix (load.c), as sweep_local takes its calls one by one (none of them a
 * collective or a point-to-point call, which are all kept): its first, when it is the event after
 * a block's last step, then all of them into the block's runs, when the step is kept; 1 when the
 * sweep ends */
static int replay_run(struct sweep *w, const struct thr *t, size_t j)
{
	struct sruns *sr = w->sr;
	if (sr_next(w, &t->rfirst[j]))
		return 1;
	if (!w->on || !sr->ok || !sr->nb)
		return 0;
	const struct callrun *u = &t->run[j];
	struct thr *a = &sr->acc;
	struct callrun *n = a->cur.n ? NULL : room_for(a->run, a->nrun, &a->crun, sizeof *n, 64);
	if (n)
		a->run = n;
	while (n && a->nrpat + u->npat > a->crpat) { /* (room_for makes room for one more) */
		struct pat *q = room_for(a->rpat, a->crpat, &a->crpat, sizeof *q, 64);
		if (q)
			a->rpat = q;
		else
			n = NULL;
	}
	if (!n) {
		sr->ok = 0;
		return 0;
	}
	if (u->npat)
		memcpy(&a->rpat[a->nrpat], &t->rpat[u->pat], u->npat * sizeof *a->rpat);
	a->run[a->nrun] = *u;
	a->run[a->nrun].before = (uint32_t)a->n;
	a->run[a->nrun++].pat = (uint32_t)a->nrpat;
	a->nrpat += u->npat;
	sr->b[sr->nb - 1].r1 = a->nrun;
	return 0;
}

/* the prefix read again: its events up to its call prefix + 1 (the one being read) */
struct prefix {
	struct sweep *w;
	size_t prefix, calls;
	int reached;
};

static int prefix_event(void *ctx, const struct ev *v)
{
	struct prefix *x = ctx;
	if (an_kept_sync(v) && ++x->calls > x->prefix)
		return x->reached = 1;
	return x->w->ended = sweep_local(x->w, v);
}

struct sweep *an_lsweep_start(const struct analysis *a, struct proc *p, int h, struct trace_file *f,
			      const char *path, size_t prefix)
{
	struct thr *t = &p->thr[h];
	struct sync s = { malloc((t->n + 1) * sizeof *s.e), 0 };
	size_t np = 0, nc = 0, marks = 0;
	for (size_t i = 0; s.e && i < t->n; i++) {
		const struct ev *e = &t->ev[i];
		np += an_is_p2p(e);
		nc += (an_kind(e->kind)->m & DDPSPY_KM_COLL) != 0;
		marks += an_category(e) == DDPSPY_CAT_MARKER;
		if (an_train_sync(e))
			s.e[s.n++] = &t->ev[i];
	}
	struct pattern pt = { 0 };
	struct sweep *w = NULL;
	/* steps by its markers when it has some; else by a pattern whose run reaches the prefix's end
	 * (as the job's must for a sweep to go on past it), not by point-to-point calls */
	int mode = marks ? BY_MARKERS : BY_PATTERN;
	if (!s.e || (mode == BY_PATTERN && (np > nc || !s.n || an_find_pattern(&s, &pt) < 0 ||
					   pt.first + (pt.nsteps + 1) * pt.period <= s.n)) ||
	    !(w = calloc(1, sizeof *w)))
		goto out;
	*w = (struct sweep){ .a = (struct analysis *)a, .p = p, .mode = mode, .own = pt, .first = pt.first,
			     .lastend = INT64_MIN, .maxsteps = SIZE_MAX, .th = h, .all = -1, .pend_blk = SIZE_MAX,
			     .smax = an_sample_max(p->world > 0 ? (size_t)p->world : 1), .nend = SIZE_MAX };
	w->sr = calloc(1, sizeof *w->sr);
	w->own_sig = mode == BY_PATTERN ? malloc(pt.period * sizeof *w->own_sig) : NULL;
	if (!w->sr || (mode == BY_PATTERN && !w->own_sig)) {
		an_lsweep_free(w);
		w = NULL;
		goto out;
	}
	if (mode == BY_PATTERN) {
		size_t mid = pt.first + (pt.nsteps / 2) * pt.period;
		for (size_t i = 0; i < pt.period; i++)
			w->own_sig[i] = *s.e[mid + i];
		w->pt = &w->own;
		w->sig = w->own_sig;
	}
	w->sr->ok = w->sr->acc.runs_ok = 1;
	sr_want(w);
	/* the thread's events up to this one, its call prefix + 1: from its calls and runs, else read
	 * again */
	int whole = 1;
	if (t->runs_ok && (t->rfirst || !t->nrun)) {
		for (size_t i = 0, j = 0; i <= t->n && !w->ended; i++) {
			for (; j < t->nrun && t->run[j].before == i && !w->ended; j++)
				w->ended = replay_run(w, t, j);
			if (i == t->n || w->ended)
				break;
			struct ev x = t->ev[i];
			x.path = -1;
			w->ended = sweep_local(w, &x);
		}
	} else {
		struct trace_clock clk = { 0 };
		struct prefix x = { w, prefix, 0, 0 };
		whole = trace_get_clock(f, &clk) == 0 && an_stream_file(path, &clk, 0, t, w->want, prefix_event, &x) == 0 &&
			(x.reached || w->ended); /* (else the file or the thread ended before this call) */
		free(clk.calib);
	}
	if (!whole || w->failed) {
		an_lsweep_free(w);
		w = NULL;
	}
out:
	free(s.e);
	return w;
}

/* v, the thread's next event as the file is read (converted, numbered; its path is not what a
 * second reading gives: not taken) */
void an_lsweep_event(struct sweep *w, const struct ev *v)
{
	if (w->ended || v->kind >= DDPSPY_EV_COUNT || !w->want[v->kind]) /* (what the stream would parse past) */
		return;
	struct ev x = *v;
	x.path = -1;
	w->ended = sweep_local(w, &x);
}

/* the file ended (complete: read to its end, undamaged); returns 0, -1 when the sweep is not to be
 * taken */
int an_lsweep_end(struct sweep *w, int complete)
{
	if (!complete || w->failed)
		return -1;
	sr_close(w->sr);
	w->nend = sweep_finish(w);
	/* (held till every file is read: no more room than they need) */
	struct thr *t = &w->sr->acc;
	struct ev *e = t->n ? realloc(t->ev, t->n * sizeof *e) : NULL;
	size_t *k = e ? realloc(w->sr->kept, t->n * sizeof *k) : NULL;
	if (e)
		t->ev = e;
	if (k) {
		w->sr->kept = k;
		t->cap = t->n;
	}
	struct callrun *u = t->nrun ? realloc(t->run, t->nrun * sizeof *u) : NULL;
	if (u) {
		t->run = u;
		t->crun = t->nrun;
	}
	struct pat *q = t->nrpat ? realloc(t->rpat, t->nrpat * sizeof *q) : NULL;
	if (q) {
		t->rpat = q;
		t->crpat = t->nrpat;
	}
	return 0;
}

void an_lsweep_free(struct sweep *w)
{
	if (!w)
		return;
	sweep_drop(w);
	free(w->own_sig);
	free(w);
}

struct sweepjob {
	struct analysis *a;
	struct sync *syn;
	int mode, p2p;
	struct pattern *pts;
	const size_t *first;
	struct sweep *w;
	size_t *n;     /* each rank's whole steps; SIZE_MAX: it could not be swept */
	int64_t lo, hi;
	size_t calls0;
};

/* whether p's training thread can be kept in sampled blocks for the split: the rank's only thread
 * with synchronizing calls, no helper threads' collectives or device work to follow with it */
static int sr_fits(const struct proc *p)
{
	if (p->train < 0 || p->bg || an_gpu_busy(p))
		return 0;
	for (int h = 0; h < p->nthr; h++)
		if (h != p->train && p->thr[h].nsync)
			return 0;
	return 1;
}

static void sweep_drop(struct sweep *v);

/* By the pattern: when the reference's run of it reached its prefix's end (rank 0's, or each
 * rank's own when each has its own pattern), every rank goes on while its calls match its own in
 * the middle of that run (job_sig: a rank's bytes may differ from rank 0's); else every rank stops
 * at the steps the prefix showed. */
static int job_ext(const struct sweepjob *j, int r)
{
	int ref = j->p2p ? r : 0;
	const struct pattern *rp = &j->pts[ref];
	return j->first[ref] + (rp->nsteps + 1) * rp->period > j->syn[ref].n;
}

/* whether rank r's prefix ends before the middle of the reference's run: it goes on without
 * signatures (to the end of its calls) */
static int sig_missing(const struct sweepjob *j, int r)
{
	const struct pattern *pt = &j->pts[r];
	return j->first[r] + (pt->nsteps / 2) * pt->period + pt->period > j->syn[r].n;
}

/* rank r's signatures (allocated), NULL when sig_missing or out of memory */
static struct ev *job_sig(const struct sweepjob *j, int r)
{
	const struct pattern *pt = &j->pts[r];
	size_t mid = j->first[r] + (pt->nsteps / 2) * pt->period;
	struct ev *sig = sig_missing(j, r) ? NULL : malloc(pt->period * sizeof *sig);
	for (size_t i = 0; sig && i < pt->period; i++)
		sig[i] = *j->syn[r].e[mid + i];
	return sig;
}

static void sweep_one_as(struct sweepjob *j, int r, int blocks);

/* whether l, begun while rank r's file was read, is the sweep sweep_one_as would make: by the
 * job's pattern from the same call, the same signatures, on the training thread alone with blocks,
 * the same sample's size, and the stream as a second reading gives it (no wildcard receive
 * numbered after its status came) */
static int lsweep_same(const struct sweepjob *j, int r, const struct sweep *l)
{
	const struct analysis *a = j->a;
	const struct proc *p = a->ranks[r].p;
	if (j->mode != l->mode || a->reread || !sr_fits(p) || l->th != p->train || l->failed || l->nend == SIZE_MAX ||
	    p->thr[l->th].nwres || l->smax != a->sample_max)
		return 0;
	if (l->mode == BY_MARKERS) /* (markers need nothing of the job) */
		return 1;
	if (j->p2p || l->first != j->first[r] || l->own.period != j->pts[r].period || !job_ext(j, r))
		return 0;
	struct ev *sig = job_sig(j, r);
	int same = sig != NULL;
	for (size_t i = 0; same && i < l->own.period; i++)
		same = an_same_sig(&sig[i], &l->own_sig[i]);
	free(sig);
	return same;
}

/* rank r's sweep from the one begun while its file was read, when it is the same (lsweep_same):
 * 1; else that one is let go, 0 */
static int lsweep_take(struct sweepjob *j, int r, int blocks)
{
	struct proc *p = j->a->ranks[r].p;
	struct sweep *l = p->lsw, *v = &j->w[r];
	p->lsw = NULL;
	if (!l)
		return 0;
	if (!blocks || !lsweep_same(j, r, l) || !(l->kt = calloc((size_t)p->nthr + 1, sizeof *l->kt))) {
		an_lsweep_free(l);
		return 0;
	}
	free(l->own_sig);
	*v = *l;
	free(l);
	v->a = j->a;
	v->p = p;
	v->pt = v->mode == BY_PATTERN ? &j->pts[r] : NULL;
	v->sig = v->own_sig = NULL;
	j->n[r] = v->nend;
	__atomic_add_fetch(&j->a->swept_while_read, 1, __ATOMIC_RELAXED);
	sweep_on_job(v);
	if (v->sr && !v->sr->ok) { /* (as sweep_one_as) */
		sweep_drop(v);
		sweep_one_as(j, r, 0);
	}
	return 1;
}

/* rank r's sweep, with sampled blocks for the split where they fit and blocks allows */
static void sweep_one_as(struct sweepjob *j, int r, int blocks)
{
	struct analysis *a = j->a;
	int mode = j->mode;
	struct sweep *v = &j->w[r];
	struct ev *sig = NULL;
	j->n[r] = SIZE_MAX;
	if (lsweep_take(j, r, blocks))
		return;
	*v = (struct sweep){ .a = a, .p = a->ranks[r].p, .mode = mode, .pt = mode == BY_PATTERN ? &j->pts[r] : NULL,
			     .lastend = INT64_MIN, .maxsteps = SIZE_MAX, .p2p = j->p2p, .smax = a->sample_max,
			     .share = 1 };
	v->kt = calloc((size_t)v->p->nthr + 1, sizeof *v->kt);
	if (!v->kt)
		return;
	if (blocks && (mode == BY_PATTERN || mode == BY_MARKERS) && !a->reread && sr_fits(v->p)) {
		v->sr = calloc(1, sizeof *v->sr);
		if (v->sr) {
			v->sr->ok = v->sr->acc.runs_ok = 1;
			v->th = v->p->train;
			v->all = -1;
			v->pend_blk = SIZE_MAX;
		}
	}
	if (mode == BY_PATTERN) {
		int ext = job_ext(j, r);
		if (ext && !(sig = job_sig(j, r)) && !sig_missing(j, r))
			return;
		v->first = j->first[r];
		v->sig = sig;
		v->maxsteps = ext ? SIZE_MAX : j->pts[0].nsteps;
	} else if (mode == BY_WINDOWS) {
		v->lo = j->lo;
		v->hi = j->hi;
		v->K = j->calls0 / 64 > 20 ? j->calls0 / 64 : 20;
	}
	size_t n = sweep_rank(v);
	v->sig = NULL;
	free(sig);
	j->n[r] = n;
	if (v->sr && !v->sr->ok) { /* (its kept calls were left in the blocks given up) */
		sweep_drop(v);
		sweep_one_as(j, r, 0);
	}
}

static void sweep_one(void *ctx, size_t r)
{
	sweep_one_as(ctx, (int)r, 1);
}

/* the training thread's kept calls, marked in its blocks, copied to w->kt as the others are kept
 * (at the latest: report --mpi sends them, the analysis takes them as the rank's calls) */
static void sr_to_kt(struct sweep *w)
{
	struct sruns *sr = w->sr;
	if (!sr || !w->kt)
		return;
	struct kthr *k = &w->kt[w->th];
	size_t n = k->n;
	for (size_t c = 0; c < sr->acc.n; c++)
		n += sr->kept[c] != SIZE_MAX;
	if (n == k->n)
		return;
	struct ev *ev = realloc(k->ev, n * sizeof *ev);
	size_t *st = ev ? realloc(k->step, n * sizeof *st) : NULL;
	if (ev)
		k->ev = ev;
	if (!st)
		return;
	k->step = st;
	k->cap = n;
	for (size_t c = 0; c < sr->acc.n; c++)
		if (sr->kept[c] != SIZE_MAX) {
			k->ev[k->n] = sr->acc.ev[c];
			k->ev[k->n].t = an_job_time(w->p, sr->acc.ev[c].t);
			k->step[k->n++] = sr->kept[c];
			sr->kept[c] = SIZE_MAX;
		}
}

/* ---- report --mpi: each rank swept by the process that read its file (an_mine), the results
 * gathered to process 0 and sent to every process, which goes on from them all ---- */

/* what a sweep holds let go */
static void sweep_drop(struct sweep *v)
{
	for (int t = 0; v->kt && t < v->p->nthr; t++) {
		free(v->kt[t].ev);
		free(v->kt[t].step);
	}
	free(v->kt);
	free(v->ks);
	an_sruns_free(v->sr);
	v->sr = NULL;
}

/* rank r's sweep as bytes, and back into j (keep 0: read past it) */
static void pack_sweep(struct an_buf *b, const struct sweepjob *j, size_t r)
{
	const struct sweep *v = &j->w[r];
	uint64_t h[10] = { r, j->n[r], v->mask, v->nb, (uint64_t)v->b, (uint64_t)v->b0, (uint64_t)v->bskip,
			   (uint64_t)v->len_max, v->nks, (uint64_t)v->failed };
	an_put(b, h, sizeof h);
	an_put(b, v->ks, v->nks * sizeof *v->ks);
	for (int t = 0; t < j->a->ranks[r].p->nthr; t++) { /* (v is not set up where no sweep began) */
		uint64_t n = v->kt ? v->kt[t].n : 0;
		an_put(b, &n, sizeof n);
		if (n) {
			an_put(b, v->kt[t].ev, n * sizeof *v->kt[t].ev);
			an_put(b, v->kt[t].step, n * sizeof *v->kt[t].step);
		}
	}
}

static int unpack_sweep(struct an_rd *rd, struct sweepjob *j)
{
	uint64_t h[10];
	if (an_get(rd, h, sizeof h) < 0 || h[0] >= (uint64_t)j->a->nranks)
		return -1;
	size_t r = (size_t)h[0];
	int keep = !an_mine(j->a, (int)r);
	struct sweep *v = &j->w[r], x = { .a = j->a, .p = j->a->ranks[r].p, .mode = j->mode, .lastend = INT64_MIN };
	if (keep) {
		sweep_drop(v);
		*v = x;
		j->n[r] = (size_t)h[1];
		v->mask = h[2];
		v->nb = (size_t)h[3];
		v->b = (int64_t)h[4], v->b0 = (int64_t)h[5], v->bskip = (int64_t)h[6], v->len_max = (int64_t)h[7];
		v->failed = (int)h[9];
	} else {
		v = &x;
	}
	v->ks = an_get_arr(rd, (size_t)h[8], sizeof *v->ks, 0);
	v->nks = v->cks = v->ks ? (size_t)h[8] : 0;
	v->kt = calloc((size_t)v->p->nthr + 1, sizeof *v->kt);
	for (int t = 0; v->kt && t < v->p->nthr && !rd->err; t++) {
		uint64_t n;
		an_get(rd, &n, sizeof n);
		if (!n || rd->err)
			continue;
		struct kthr *k = &v->kt[t];
		k->ev = an_get_arr(rd, (size_t)n, sizeof *k->ev, 0);
		k->step = an_get_arr(rd, (size_t)n, sizeof *k->step, 0);
		k->n = k->cap = k->ev && k->step ? (size_t)n : 0;
		v->kept += k->n;
	}
	if (!v->kt)
		rd->err = 1;
	if (!keep) /* (this process's own, read past) */
		sweep_drop(v);
	return rd->err ? -1 : 0;
}

/* every rank's sweep from the process that made it, through process 0, to every process */
static int mpi_sweeps(struct sweepjob *j)
{
	struct analysis *a = j->a;
	struct an_mpi *m = a->mpi;
	struct an_buf b = { 0 };
	int rc = 0;
	if (an_mpi_me(m) != 0) {
		for (int r = 0; r < a->nranks; r++)
			if (an_mine(a, r))
				pack_sweep(&b, j, (size_t)r);
		rc = b.err || an_mpi_send(m, &b) < 0 ? -1 : 0;
	} else {
		for (int q = 1; q < an_mpi_np(m) && rc == 0; q++) {
			rc = an_mpi_recv(m, q, &b) < 0 ? -1 : 0;
			struct an_rd rd = { b.p, b.p + b.n, 0 };
			while (rc == 0 && rd.p < rd.end)
				rc = unpack_sweep(&rd, j);
		}
		b.n = 0;
		for (int r = 0; r < a->nranks; r++)
			pack_sweep(&b, j, (size_t)r);
		rc = rc || b.err ? -1 : 0;
	}
	if (rc == 0 && (rc = an_mpi_bcast(m, &b) < 0 ? -1 : 0) == 0 && an_mpi_me(m) != 0) {
		struct an_rd rd = { b.p, b.p + b.n, 0 };
		while (rc == 0 && rd.p < rd.end)
			rc = unpack_sweep(&rd, j);
	}
	free(b.p);
	return rc;
}

/* Every rank's steps again, streamed (see above), by the mode and patterns found in the prefix
 * (pts[r], from call first[r]: one pattern for all when steps are found by collectives, each
 * rank's own by point-to-point calls); *out gets the sweeps. Returns the number of steps every
 * rank has, 0 when that cannot be done. */
size_t an_sweep_steps(struct analysis *a, struct sync *syn, int mode, struct pattern *pts, const size_t *first,
			  int p2p, struct sweep **out)
{
	int R = a->nranks;
	size_t K = SIZE_MAX;
	uint64_t mask = 0;
	struct sweep *w = *out = calloc((size_t)R, sizeof *w);
	struct sweepjob j = { .a = a, .syn = syn, .mode = mode, .p2p = p2p, .pts = pts, .first = first, .w = w,
			      .n = calloc((size_t)R, sizeof *j.n) };
	if (!w || !j.n) {
		free(j.n);
		return 0;
	}
	an_common_span(a, &j.lo, &j.hi);
	if (mode == BY_WINDOWS) { /* windows of about 64 calls of the lowest rank, 20 at least */
		for (int h = 0; h < a->ranks[0].p->nthr; h++)
			j.calls0 += a->ranks[0].p->thr[h].nsync;
	}
	/* every rank on a->jobs threads (report --mpi: each by the process that read its file, then
	 * every process gets them all) */
	size_t *mine = malloc((size_t)R * sizeof *mine), nmine = 0;
	if (!mine) {
		if (a->mpi)
			an_mpi_abort(a->mpi); /* (the others would wait for this process) */
		free(j.n);
		return 0;
	}
	for (int r = 0; r < R; r++) {
		j.n[r] = SIZE_MAX;
		if (an_mine(a, r))
			mine[nmine++] = (size_t)r;
	}
	an_parallel(nmine, a->jobs, mine, sweep_one, &j);
	if (getenv("DDPSPY_REPORT_SWEEPS")) /* (test-only: how each rank's steps were found) */
		fprintf(stderr, "ddpspy: steps swept while read: %d of %zu ranks\n", a->swept_while_read, nmine);
	free(mine);
	for (int r = 0; a->mpi && r < R; r++)
		sr_to_kt(&w[r]);
	if (a->mpi && mpi_sweeps(&j) < 0)
		an_mpi_abort(a->mpi);
	for (int r = 0; r < R; r++) {
		size_t n = j.n[r] == SIZE_MAX ? 0 : j.n[r];
		K = n < K ? n : K;
		mask = w[r].mask > mask ? w[r].mask : mask;
		if (!K)
			break;
	}
	free(j.n);
	if (K == SIZE_MAX || !K) {
		an_warn(a, "the steps could not be found again in the whole trace; none analysed");
		return 0;
	}
	for (int r = 0; r < R; r++) {
		w[r].mask = mask;
		sweep_prune(&w[r], K);
	}
	return K;
}

/* The sample's steps from skip on, the same on every rank, become the ranks' kept calls (the
 * prefix is let go). Returns their number. */
size_t an_sweep_keep_analysed(struct analysis *a, struct sweep *w, size_t skip)
{
	size_t N = SIZE_MAX;
	for (int r = 0; r < a->nranks; r++) {
		struct sweep *v = &w[r];
		size_t n = 0;
		for (size_t i = 0; i < v->nks; i++)
			if (v->ks[i].i >= skip)
				v->ks[n++] = v->ks[i];
		v->nks = n;
		N = n < N ? n : N;
		sr_to_kt(v);
		for (int h = 0; h < v->p->nthr; h++) {
			struct thr *t = &v->p->thr[h];
			struct kthr *k = &v->kt[h];
			size_t m = 0;
			for (size_t i = 0; i < k->n; i++)
				if (k->step[i] >= skip)
					k->ev[m++] = k->ev[i];
			free(t->ev);
			t->ev = k->ev;
			t->n = t->cap = m;
			k->ev = NULL;
			an_runs_drop(t); /* (they lie between the calls it had) */
		}
		if (v->sr) { /* (the split takes the sampled blocks instead) */
			struct thr *t = &v->p->thr[v->th];
			an_sruns_free(t->sr);
			t->sr = v->sr->ok ? v->sr : NULL;
			if (!t->sr)
				an_sruns_free(v->sr);
			v->sr = NULL;
		}
	}
	for (int r = 1; r < a->nranks; r++)
		for (size_t k = 0; k < N; k++)
			if (w[r].ks[k].i != w[0].ks[k].i) {
				an_warn(a, "rank %d's sampled steps differ from rank %d's; none analysed",
					a->ranks[r].rank, a->ranks[0].rank);
				return 0;
			}
	return N == SIZE_MAX ? 0 : N;
}

void an_sweep_free(struct sweep *w, int R)
{
	for (int r = 0; w && r < R; r++)
		sweep_drop(&w[r]);
	free(w);
}
