/* One reading: the sweep begun while a rank's file is read (an_parts.sweep), so that a long
 * trace's steps need not be found from a second reading. */
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

/* what the sweep does while a file is read, for load.c (analysis_int.h) */
__attribute__((constructor)) static void registered(void)
{
	an_parts.sweep.start = an_lsweep_start;
	an_parts.sweep.event = an_lsweep_event;
	an_parts.sweep.end = an_lsweep_end;
	an_parts.sweep.free = an_lsweep_free;
	an_parts.sweep.sruns_free = an_sruns_free;
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

/* run j of t's prefix (runs.c), as an_sweep_local takes its calls one by one (none of them a
 * collective or a point-to-point call, which are all kept): its first, when it is the event after
 * a block's last step, then all of them into the block's runs, when the step is kept; 1 when the
 * sweep ends */
static int replay_run(struct sweep *w, const struct thr *t, size_t j)
{
	struct sruns *sr = w->sr;
	if (an_sr_next(w, &t->rfirst[j]))
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
	return x->w->ended = an_sweep_local(x->w, v);
}

struct sweep *an_lsweep_start(const struct analysis *a, struct proc *p, int h, struct trace_file *f,
			      const char *path, size_t prefix)
{
	struct thr *t = &p->thr[h];
	struct sync s = { malloc((t->n + 1) * sizeof *s.e), 0 };
	size_t np = 0, nc = 0, marks = 0;
	for (size_t i = 0; s.e && i < t->n; i++) {
		const struct ev *e = &t->ev[i];
		np += an_is_msg(e);
		nc += (an_kind(e->kind)->m & DDPSPY_KM_COLL) && !an_nccl_p2p(e);
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
	an_sr_want(w);
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
			w->ended = an_sweep_local(w, &x);
		}
	} else {
		struct trace_clock clk = { 0 };
		struct prefix x = { w, prefix, 0, 0 };
		whole = trace_get_clock(f, &clk) == 0 && an_stream_file(path, &clk, 0, &f->span, t, w->want, prefix_event, &x) == 0 &&
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
	w->ended = an_sweep_local(w, &x);
}

/* the file ended (complete: read to its end, undamaged); returns 0, -1 when the sweep is not to be
 * taken */
int an_lsweep_end(struct sweep *w, int complete)
{
	if (!complete || w->failed)
		return -1;
	an_sr_close(w->sr);
	w->nend = an_sweep_finish(w);
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
	an_sweep_drop(w);
	free(w->own_sig);
	free(w);
}
