/* The sweep's engine (steps_int.h's comment on the sweep): one rank's steps found from every call
 * handed to it, in time order, a sample of them kept with their calls, and the training thread's
 * calls of the sampled blocks kept for the split (struct sruns). Begun while a file is read
 * (lsweep.c) or by the job once every file is (sweep.c). */
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
void an_sr_close(struct sruns *sr)
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
	an_sr_close(sr);
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
	an_sr_close(sr);
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

/* the kept steps below below let go, with their calls */
void an_sweep_prune(struct sweep *w, size_t below)
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
	/* (the kept calls are on the job's clock, their ends too, as the clocks move the short
	 * trace's; a window's are already) */
	k->ev[k->n] = w->mode != BY_WINDOWS ? an_job_ev(w->p, e) : *e;
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
			an_sweep_prune(w, SIZE_MAX);
		}
		int grew = 0;
		while ((w->nks > w->smax || w->kept > SAMPLE_CALLS * w->smax) && w->mask < (1ull << 40)) {
			w->mask = w->mask * 2 + 1;
			an_sweep_prune(w, SIZE_MAX);
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
		ae = an_job_ev(w->p, e);
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
void an_sr_want(struct sweep *w)
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
int an_sr_next(struct sweep *w, const struct ev *v)
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
int an_sweep_local(void *ctx, const struct ev *v)
{
	struct sweep *w = ctx;
	struct sruns *sr = w->sr;
	struct inst *rel;
	int follow = an_is_coll(v->kind) || an_is_p2p(v);
	if (an_sr_next(w, v))
		return 1;
	if (!an_kept_sync(v)) {
		if (w->on)
			sr_run(sr, v);
		if (follow)
			an_wait_of(&sr->mirror, v, &rel);
		an_sr_want(w);
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
	an_sr_want(w);
	return 0;
}

/* the sweep's times on the job's clock (a step's bounds as the kept calls' ends move: the
 * longest step, the longest on the file's clock) */
void an_sweep_on_job(struct sweep *w)
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
size_t an_sweep_finish(struct sweep *w)
{
	if (w->mode == BY_MARKERS && w->nb && w->lastend > w->b)
		sweep_bound(w, w->lastend);
	if (w->mode == BY_WINDOWS)
		while (w->nb <= w->K)
			sweep_bound(w, an_window_at(w->lo, w->hi, w->nb, w->K));
	size_t n = w->nb ? w->nb - 1 : 0;
	an_sweep_prune(w, n);
	return n;
}

/* Streams rank r's calls again (w set up by the caller); returns its number of whole steps and
 * leaves the kept steps and calls in w. */
size_t an_sweep_rank(struct sweep *w)
{
	if (w->sr) {
		an_sr_want(w);
		if (an_stream_thread(w->p, w->th, w->want, an_sweep_local, w) < 0 || w->failed)
			return 0;
		an_sr_close(w->sr);
	} else if (an_stream_sync(w->p, sweep_event, w) < 0 || w->failed) {
		return 0;
	}
	size_t n = an_sweep_finish(w);
	an_sweep_on_job(w);
	return n;
}

/* what a sweep holds let go */
void an_sweep_drop(struct sweep *v)
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
