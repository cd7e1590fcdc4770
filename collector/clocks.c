/* Clocks: every process's times moved onto one job clock, first by its CLOCK_REALTIME anchor,
 * then, for the ranks, by the offset the ends of NCCL kernels (GPU jobs) or the exits of blocking
 * collectives show (every rank leaves them together); a rank's input workers move with it. Also
 * the job's span on that clock. */
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

/* workers share their rank's host clock */
static void align_workers(struct analysis *a)
{
	for (int i = 0; i < a->nprocs; i++) {
		struct proc *w = &a->procs[i];
		if (w->role != DDPSPY_ROLE_WORKER)
			continue;
		for (int r = 0; r < a->nranks; r++)
			if (a->ranks[r].p->pid == w->parent_pid && !strcmp(a->ranks[r].p->host, w->host))
				shift_proc(w, a->ranks[r].p->offset);
	}
}

/* Each rank's offset from the ends of its NCCL kernels, which every rank's kernels of one collective
 * reach together (the device waits in them for the last rank, then they transfer alike): on GPU
 * jobs, many more and cleaner than the host's few blocking calls. Returns the ranks refined. */
static int align_nccl(struct analysis *a, double *worst)
{
	struct gend *ref, *e;
	size_t nref = an_gpu_nccl_ends(a->ranks[0].p, &ref), refined = 0;
	struct itab ends = { 0 };
	for (size_t i = 0; i < nref; i++) {
		struct inst *in = an_inst_get(&ends, ref[i].comm, ref[i].seq, 1);
		if (in)
			in->max_arr = ref[i].end;
	}
	free(ref);
	for (int r = 1; ends.n && r < a->nranks; r++) {
		size_t n = an_gpu_nccl_ends(a->ranks[r].p, &e), m = 0;
		int64_t *d = malloc((n + 1) * sizeof *d);
		for (size_t i = 0; d && i < n; i++) {
			struct inst *in = an_inst_get(&ends, e[i].comm, e[i].seq, 0);
			if (in)
				d[m++] = e[i].end - in->max_arr;
		}
		free(e);
		if (d && m >= 3) {
			sort_n(d, m, sizeof *d, an_cmp_i64);
			int64_t off = d[m / 2];
			shift_proc(a->ranks[r].p, -off);
			a->ranks[r].p->offset = -off;
			for (size_t k = 0; k < m; k++)
				d[k] = llabs(d[k] - off);
			sort_n(d, m, sizeof *d, an_cmp_i64);
			*worst = fmax(*worst, (double)d[m / 2] / 1e3);
			refined++;
		}
		free(d);
	}
	free(ends.v);
	return (int)refined;
}

/* Realtime anchors first; then each rank's offset from the ends of NCCL kernels where every rank
 * has them, else from the exits of symmetric blocking collectives, which all ranks leave within
 * microseconds of each other. */
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
	if (align_nccl(a, &worst) == a->nranks - 1) {
		a->clock_method = "nccl-kernel-end";
		a->clock_residual_us = worst;
		align_workers(a);
		return;
	}
	for (int r = 1; r < a->nranks; r++) { /* (some rank had too few: back to the host's calls) */
		shift_proc(a->ranks[r].p, -a->ranks[r].p->offset);
		a->ranks[r].p->offset = 0;
	}
	worst = 0;
	struct itab exits = { 0 };
	/* reference: the lowest rank's exits, keyed by instance (collectives of any of its threads) */
	struct proc *p0 = a->ranks[0].p;
	for (int h = 0; h < p0->nthr; h++)
		for (size_t k = 0; k < p0->thr[h].n; k++) {
			struct ev *e = &p0->thr[h].ev[k];
			if (an_exit_aligns(e)) {
				struct inst *in = an_inst_get(&exits, e->comm, e->seq, 1);
				if (in)
					in->max_arr = e->t + e->d;
			}
		}
	if (!exits.n)
		return;
	int refined = 0;
	for (int r = 1; r < a->nranks; r++) {
		struct proc *p = a->ranks[r].p;
		size_t n = 0, cap = 0;
		for (int h = 0; h < p->nthr; h++)
			cap += p->thr[h].n;
		int64_t *d = malloc((cap + 1) * sizeof *d);
		if (!d)
			continue;
		for (int h = 0; h < p->nthr; h++)
			for (size_t k = 0; k < p->thr[h].n && n < cap; k++) {
				struct ev *e = &p->thr[h].ev[k];
				if (!an_exit_aligns(e))
					continue;
				struct inst *in = an_inst_get(&exits, e->comm, e->seq, 0);
				if (in)
					d[n++] = e->t + e->d - in->max_arr;
			}
		if (n >= 3) {
			sort_n(d, n, sizeof *d, an_cmp_i64);
			int64_t off = d[n / 2];
			shift_proc(p, -off);
			p->offset = -off;
			/* residual: the median distance of the exits from the reference after the shift */
			for (size_t k = 0; k < n; k++)
				d[k] = llabs(d[k] - off);
			sort_n(d, n, sizeof *d, an_cmp_i64);
			worst = fmax(worst, (double)d[n / 2] / 1e3);
			refined++;
		}
		free(d);
	}
	free(exits.v);
	if (refined) {
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
	an_warn(a, "nothing in this trace checks the ranks' clocks against each other (fewer than 3 blocking "
		"collectives every rank leaves together, and no NCCL kernels): their CLOCK_REALTIME is trusted "
		"as it is, %s, and the residual is unknown", a->nhosts > 1 ? "across hosts" : "on one host");
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
}
