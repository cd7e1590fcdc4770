/* Long traces' steps (steps_int.h's comment on the sweep): when a rank made more synchronizing
 * calls than the prefix kept while loading, its steps found again from every call, read a second
 * time in time order (the engine: sweepcore.c) or taken from the sweep begun while its file was
 * read (lsweep.c) where that is the one the job's steps make, and a sample of them kept; report
 * --mpi: each rank swept by the process that read its file, the results exchanged. */
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

/* By the pattern: when the reference's run of it reached its prefix's end (rank 0's, or each
 * rank's own when each has its own pattern), every rank goes on while its calls match its own in
 * the middle of that run (job_sig: a rank's bytes may differ from rank 0's); else every rank stops
 * at the steps the prefix showed. */
static int job_ext(const struct sweepjob *j, int r)
{
	int ref = j->p2p ? r : 0;
	const struct pattern *rp = &j->pts[ref];
	/* (by point-to-point calls, the run as found: aligning the ranks cut it to the steps they all
	 * have, which a rank of fewer calls a step has more of in its prefix) */
	size_t end = j->p2p ? rp->end : j->first[ref] + rp->nsteps * rp->period;
	return end + rp->period > j->syn[ref].n;
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
	if (j->mode != l->mode || !sr_fits(p) || l->th != p->train || l->failed || l->nend == SIZE_MAX ||
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
	an_sweep_on_job(v);
	if (v->sr && !v->sr->ok) { /* (as sweep_one_as) */
		an_sweep_drop(v);
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
	if (blocks && (mode == BY_PATTERN || mode == BY_MARKERS) && sr_fits(v->p)) {
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
	size_t n = an_sweep_rank(v);
	v->sig = NULL;
	free(sig);
	j->n[r] = n;
	if (v->sr && !v->sr->ok) { /* (its kept calls were left in the blocks given up) */
		an_sweep_drop(v);
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
			k->ev[k->n] = an_job_ev(w->p, &sr->acc.ev[c]);
			k->step[k->n++] = sr->kept[c];
			sr->kept[c] = SIZE_MAX;
		}
}

/* ---- report --mpi: each rank swept by the process that read its file (an_mine), the results
 * gathered to process 0 and sent to every process, which goes on from them all ---- */

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
		an_sweep_drop(v);
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
		an_sweep_drop(v);
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
	if (an_knob(AN_KNOB_SWEEPS, 0) != 0) /* (test-only: how each rank's steps were found) */
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
		an_sweep_prune(&w[r], K);
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
		an_sweep_drop(&w[r]);
	free(w);
}
