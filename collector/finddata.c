/* data_stall: the training thread waiting for input, and what the input was (its calls' pattern
 * per step: kind, descriptor class, size, directory), from the split's fold. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/format.h"
#include "analysis_int.h"
#include "findings_int.h"
#include "trace.h"

#define MAX_DIRS 512 /* directories of a rank and its workers, for the top three */

struct dirsum {
	char dir[256];
	double ms, calls, bytes;
};

/* the directories rank ri's input came from (every thread of it and of its input workers), whole-
 * run totals scaled to the analysed span, the longest time in calls first, then the most bytes
 * (dirs: room for MAX_DIRS); their number */
static int input_dirs(const struct analysis *a, const struct rankinfo *ri, int64_t span, struct dirsum *dirs)
{
	int nd = 0;
	for (int i = 0; i < a->nprocs; i++) {
		const struct proc *p = &a->procs[i];
		if (p != ri->p && !(p->role == DDPSPY_ROLE_WORKER && p->parent_pid == ri->p->pid))
			continue;
		double frac = p->span > 0 ? fmin(1, (double)span / (double)p->span) : 1;
		for (int k = 0; k < p->ndstat; k++) {
			const struct dirstat *ds = &p->dstat[k];
			int j = 0;
			while (j < nd && strcmp(dirs[j].dir, ds->dir))
				j++;
			if (j == nd) {
				if (nd == MAX_DIRS)
					continue;
				snprintf(dirs[nd].dir, sizeof dirs[nd].dir, "%s", ds->dir);
				dirs[nd].ms = dirs[nd].calls = dirs[nd].bytes = 0;
				nd++;
			}
			dirs[j].ms += ds->ms * frac;
			dirs[j].calls += ds->calls * frac;
			dirs[j].bytes += ds->bytes * frac;
		}
	}
	for (int i = 0; i < nd; i++)
		for (int j = i + 1; j < nd; j++)
			if (dirs[j].ms > dirs[i].ms || (dirs[j].ms == dirs[i].ms && dirs[j].bytes > dirs[i].bytes)) {
				struct dirsum tmp = dirs[i];
				dirs[i] = dirs[j];
				dirs[j] = tmp;
			}
	return nd;
}

/* which kind of data-bound, in evidence: the input workers (threads that read files, worker
 * processes) mostly on a CPU or waiting for one (the transform), or mostly blocked (behind the
 * step, they are not idle: they wait for storage, in read calls or in the library under them);
 * without workers, the training thread's own input calls: I/O */
static void data_kind(struct finding *f, const struct cpustat *cs)
{
	double life = cs->in_life, cpu = cs->in_run + cs->in_wait;
	int transform = cs->in_threads && life > 0 && cpu > 0.5 * life;
	an_ev_str(f, "kind", transform ? "cpu_transform" : "io");
	if (cs->in_threads && life > 0) {
		an_ev_open(f, "input_workers", FV_OBJ);
		an_ev_int(f, "threads", cs->in_threads);
		an_ev_num(f, "on_cpu_share", cs->in_run / life, 3);
		an_ev_num(f, "runqueue_share", cs->in_wait / life, 3);
		an_ev_num(f, "blocked_share", fmax(0, 1 - cpu / life), 3);
		an_ev_num(f, "io_call_share", cs->in_io / life, 3);
		an_ev_end(f);
	}
}

/* data_stall's severity from each rank's share of its step spent waiting for input (x, n ranks;
 * reordered): the ranks' median where every rank waits at least half as much as the most (*all
 * 1), else the most's; *worst the index of the most */
static double data_severity(double *x, size_t n, int *worst, int *all)
{
	double lo = 1, hi = 0;
	*worst = 0;
	for (size_t r = 0; r < n; r++) {
		lo = fmin(lo, x[r]);
		if (x[r] > hi) {
			hi = x[r];
			*worst = (int)r;
		}
	}
	*all = n > 1 && lo >= 0.5 * hi;
	return !n ? 0 : *all ? an_quantile(x, n, 0.5) : hi;
}

/* input: the training thread waits for files or for its input pipeline */
void an_find_data(struct analysis *a)
{
	struct stepdata *sd = a->sd;
	size_t N = sd->K;
	if (!N)
		return;
	int worst, all;
	double *x = malloc((size_t)a->nranks * sizeof *x);
	if (!x)
		return;
	for (int r = 0; r < a->nranks; r++) {
		x[r] = a->ranks[r].shares[CAT_DATA];
		/* on a device, input copies count as data too; what the host waited on is the idle part */
		const struct gpustat *g = &a->ranks[r].gpu;
		if (g->have) {
			double sum = 0;
			for (int c = 0; c < GP_COUNT; c++)
				sum += g->part[c];
			x[r] = sum > 0 ? g->part[GP_IDLE_DATA] / sum : 0;
		}
	}
	double sev = data_severity(x, (size_t)a->nranks, &worst, &all);
	free(x);
	if (sev < 0.05)
		return;
	struct rankinfo *ri = &a->ranks[worst];
	if (!ri->steps)
		return;
	struct pat pats[MAX_PATS];
	int np = sd->fold[worst].np;
	memcpy(pats, sd->fold[worst].pats, sizeof pats);
	/* the files are counted over the whole run: per step of all the analysed ones, kept or not */
	int64_t t0 = sd->span[worst].t0, t1 = sd->span[worst].t1;
	double Nall = sd->span[worst].n;
	/* top three by time */
	for (int i = 0; i < np; i++)
		for (int j = i + 1; j < np; j++)
			if (pats[j].ms > pats[i].ms) {
				struct pat tmp = pats[i];
				pats[i] = pats[j];
				pats[j] = tmp;
			}
	/* the files behind it, from every thread of the rank and its input workers: by directory,
	 * whole-run totals scaled to the analysed span, the longest time in calls first, then the most
	 * bytes: what the step waits for is time (a worker importing modules reads more bytes of
	 * .pyc than of samples, fast, from the page cache) */
	struct dirsum *dirs = calloc(MAX_DIRS, sizeof *dirs);
	if (!dirs)
		return;
	int nd = input_dirs(a, ri, t1 - t0, dirs);
	struct finding *f = an_add_finding(a, "data_stall", all ? -1 : ri->rank, sev);
	if (!f) {
		free(dirs);
		return;
	}
	double opens = 0, stats = 0, reads = 0;
	for (int i = 0; i < np; i++) {
		unsigned m = an_kind(pats[i].kind)->m;
		if (m & DDPSPY_KM_OPENS)
			opens += pats[i].calls;
		else if (m & DDPSPY_KM_STATS)
			stats += pats[i].calls;
		else if (pats[i].fdclass == DDPSPY_FD_FILE && (m & DDPSPY_KM_READS))
			reads += pats[i].calls;
	}
	double dms = 0;
	for (size_t k = 0; k < N; k++)
		dms += ri->steps[k].cat[CAT_DATA] / (double)N;
	an_ev_int(f, "rank_shown", ri->rank);
	an_ev_num(f, "data_ms_per_step", dms, 3);
	an_ev_open(f, "ops", FV_LIST);
	for (int i = 0; i < np && i < 3; i++) {
		an_ev_open(f, NULL, FV_OBJ);
		an_ev_str(f, "op", ddpspy_name(ddpspy_event_names, DDPSPY_EV_COUNT, pats[i].kind));
		an_ev_str(f, "fdclass", ddpspy_name(ddpspy_fdclass_names, DDPSPY_FDCLASS_COUNT, pats[i].fdclass));
		an_ev_int(f, "bytes_per_call", pats[i].bytes);
		an_ev_num(f, "calls_per_step", pats[i].calls / (double)N, 1);
		an_ev_num(f, "ms_per_step", pats[i].ms / (double)N, 3);
		an_ev_end(f);
	}
	an_ev_end(f);
	an_sites(f, a, worst, CAT_DATA);
	an_ev_open(f, "files", FV_LIST);
	for (int i = 0; i < nd && i < 3; i++) {
		an_ev_open(f, NULL, FV_OBJ);
		an_ev_str(f, "dir", dirs[i].dir);
		an_ev_num(f, "calls_per_step", dirs[i].calls / Nall, 1);
		an_ev_num(f, "ms_per_step", dirs[i].ms / Nall, 3);
		an_ev_num(f, "bytes_per_step", dirs[i].bytes / Nall, 0);
		an_ev_end(f);
	}
	an_ev_end(f);
	free(dirs);
	data_kind(f, &ri->cpu);
	/* a file per sample (opened, perhaps stat'ed, and read per step): what the words name */
	if (opens >= 2 * (double)N && opens >= 0.8 * reads && opens <= 1.25 * reads) {
		an_ev_hidden_num(f, "files_per_step", opens / (double)N);
		an_ev_hidden_num(f, "files_statted", stats >= 0.8 * opens);
	}
}
