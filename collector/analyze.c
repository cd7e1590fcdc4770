/* The analysis behind `ddpspy report` (see analysis.h): analysis_run loads the files (load.c),
 * aligns clocks and splits steps (steps.c) and derives the findings and verdict (findings.c);
 * this file also holds the helpers those parts share (analysis_int.h). */
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../common/format.h"
#include "analysis_int.h"
#include "trace.h"

const char *const cat_names[CAT_COUNT] = { "compute", "data", "comms", "host" };

void an_warn(struct analysis *a, const char *fmt, ...)
{
	if (a->nwarnings == MAX_WARNINGS)
		return;
	char buf[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	a->warnings[a->nwarnings] = strdup(buf);
	if (a->warnings[a->nwarnings])
		a->nwarnings++;
}

int an_is_coll(int kind)
{
	return kind == DDPSPY_EV_MPI_COLL || kind == DDPSPY_EV_MPI_ICOLL || kind == DDPSPY_EV_MPI_WAIT ||
	       kind == DDPSPY_EV_GLOO_COLL;
}

/* ---- small helpers ---- */

static int cmp_dbl(const void *x, const void *y)
{
	double a = *(const double *)x, b = *(const double *)y;
	return (a > b) - (a < b);
}

double an_quantile(double *v, size_t n, double q)
{
	if (!n)
		return 0;
	sort_n(v, n, sizeof *v, cmp_dbl);
	double pos = q * (double)(n - 1);
	size_t i = (size_t)pos;
	return i + 1 < n ? v[i] + (pos - (double)i) * (v[i + 1] - v[i]) : v[i];
}

int an_cmp_evp(const void *x, const void *y)
{
	const struct ev *a = *(const struct ev *const *)x, *b = *(const struct ev *const *)y;
	return (a->t > b->t) - (a->t < b->t);
}

int an_cmp_i64(const void *x, const void *y)
{
	int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
	return (a > b) - (a < b);
}


/* the category of an event on the training thread */
int an_category(const struct ev *e)
{
	switch (e->kind) {
	case DDPSPY_EV_MPI_COLL:
	case DDPSPY_EV_MPI_ICOLL:
	case DDPSPY_EV_MPI_P2P:
	case DDPSPY_EV_MPI_WAIT:
	case DDPSPY_EV_GLOO_COLL:
		return CAT_COMMS;
	case DDPSPY_EV_OPEN:
	case DDPSPY_EV_STAT:
	case DDPSPY_EV_FSTAT:
	case DDPSPY_EV_CLOSE:
	case DDPSPY_EV_POLL:
	case DDPSPY_EV_SELECT:
	case DDPSPY_EV_EPOLL_WAIT:
		return CAT_DATA;
	case DDPSPY_EV_READ:
	case DDPSPY_EV_PREAD:
	case DDPSPY_EV_READV:
		/* files, and the pipes and sockets input workers answer on; not devices or eventfds */
		return e->fdclass == DDPSPY_FD_DEVICE || e->fdclass == DDPSPY_FD_ANON ? CAT_HOST : CAT_DATA;
	case DDPSPY_EV_MPI_INIT:
	case DDPSPY_EV_MPI_FINALIZE:
		return CAT_COMMS;
	default:
		return CAT_HOST; /* sleeps, locks, condition variables, barriers, semaphores */
	}
}

/* ---- collective instances: (comm, seq) -> arrivals over all ranks ---- */

static int64_t inst_key(int comm, int seq)
{
	int64_t k = (int64_t)((uint64_t)(uint32_t)comm << 32 | (uint32_t)seq);
	return k ? k : -1;
}

struct inst *an_inst_get(struct itab *t, int comm, int seq, int create)
{
	if (create && (t->n + 1) * 2 > t->cap) {
		size_t cap = t->cap ? t->cap * 2 : 4096;
		struct inst *v = calloc(cap, sizeof *v);
		if (!v)
			return NULL;
		for (size_t i = 0; i < t->cap; i++) {
			if (!t->v[i].key)
				continue;
			size_t k = (uint64_t)t->v[i].key * 0x9e3779b97f4a7c15ull >> 20 & (cap - 1);
			while (v[k].key)
				k = (k + 1) & (cap - 1);
			v[k] = t->v[i];
		}
		free(t->v);
		t->v = v;
		t->cap = cap;
	}
	if (!t->cap)
		return NULL;
	int64_t key = inst_key(comm, seq);
	size_t k = (uint64_t)key * 0x9e3779b97f4a7c15ull >> 20 & (t->cap - 1);
	while (t->v[k].key) {
		if (t->v[k].key == key)
			return &t->v[k];
		k = (k + 1) & (t->cap - 1);
	}
	if (!create)
		return NULL;
	struct inst *i = &t->v[k];
	i->key = key;
	i->min_arr = INT64_MAX;
	i->max_arr = INT64_MIN;
	i->late = -1;
	i->prev_cat = -1;
	t->n++;
	return i;
}

struct thr *an_train_thread(struct proc *p)
{
	return p->train >= 0 ? &p->thr[p->train] : NULL;
}

/* ---- the analysis ---- */

/* Test-only limits (docs/report.md): a positive integer from the environment, or def */
static size_t env_size(const char *name, size_t def)
{
	const char *v = getenv(name);
	char *end;
	long long n = v ? strtoll(v, &end, 10) : 0;
	return v && *v && !*end && n > 0 ? (size_t)n : def;
}

static int cmp_rank(const void *x, const void *y)
{
	const struct rankinfo *a = x, *b = y;
	return (a->rank > b->rank) - (a->rank < b->rank);
}

static int wanted(const struct report_options *o, int rank)
{
	if (!o->ranks)
		return 1;
	for (int i = 0; i < o->nranks; i++)
		if (o->ranks[i] == rank)
			return 1;
	return 0;
}

int analysis_run(struct analysis *a, char **dirs, int ndirs, const struct report_options *o,
	char *err, size_t errlen)
{
	memset(a, 0, sizeof *a);
	a->dirs = dirs;
	a->ndirs = ndirs;
	a->skip = o->skip;
	a->step_source = "none";
	a->bound = "unknown";
	a->clock_method = "none";
	a->prefix = env_size("DDPSPY_REPORT_PREFIX", 0); /* 0: by the job's size (load.c) */
	int files = 0, total = 0;
	char ***lists = calloc((size_t)ndirs, sizeof *lists);
	int *counts = calloc((size_t)ndirs, sizeof *counts);
	if (!lists || !counts) {
		free(lists);
		free(counts);
		goto nothing;
	}
	for (int d = 0; d < ndirs; d++) {
		counts[d] = trace_list(dirs[d], &lists[d]);
		if (counts[d] < 0)
			an_warn(a, "%s: cannot be read", dirs[d]);
		else if (counts[d] == 0)
			an_warn(a, "%s: no .ddpspy files", dirs[d]);
		else
			total += counts[d];
	}
	/* a progress line on a terminal once reading takes more than a second */
	struct timespec t0, now;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	int tty = isatty(2), shown = 0;
	for (int d = 0; d < ndirs; d++) {
		for (int i = 0; i < counts[d]; i++) {
			an_load_file(a, lists[d][i]);
			files++;
			clock_gettime(CLOCK_MONOTONIC, &now);
			if (tty && (now.tv_sec - t0.tv_sec) * 1000 + (now.tv_nsec - t0.tv_nsec) / 1000000 > 1000) {
				uint64_t ev = 0;
				for (int k = 0; k < a->nprocs; k++)
					ev += a->procs[k].events;
				fprintf(stderr, "\rddpspy report: read %d of %d files, %.1fM events", files, total, (double)ev / 1e6);
				shown = 1;
			}
		}
		if (counts[d] > 0)
			trace_free_list(lists[d], counts[d]);
	}
	if (shown)
		fputs("\r\033[K", stderr);
	free(lists);
	free(counts);
	/* the ranks, one process each (the first file of a rank wins; duplicates are warned) */
	a->ranks = calloc((size_t)a->nprocs + 1, sizeof *a->ranks);
	if (!a->ranks)
		goto nothing;
	char hosts[64][256];
	int nh = 0;
	for (int i = 0; i < a->nprocs; i++) {
		struct proc *p = &a->procs[i];
		a->events += p->events;
		a->dropped += p->dropped + p->unwritten;
		int seen = 0;
		for (int h = 0; h < nh; h++)
			seen |= !strcmp(hosts[h], p->host);
		if (!seen && nh < 64)
			snprintf(hosts[nh++], sizeof hosts[0], "%s", p->host);
		if (p->role != DDPSPY_ROLE_RANK || p->rank < 0 || !wanted(o, p->rank))
			continue;
		int dup = 0;
		for (int r = 0; r < a->nranks; r++)
			dup |= a->ranks[r].rank == p->rank;
		if (dup) {
			an_warn(a, "%s: a second file for rank %d; left out", p->file, p->rank);
			continue;
		}
		a->ranks[a->nranks].rank = p->rank;
		a->ranks[a->nranks++].p = p;
	}
	a->nhosts = nh;
	if (!a->nranks) {
		snprintf(err, errlen, "no readable rank in %s%s (%d trace file%s)", dirs[0], ndirs > 1 ? " ..." : "",
			 files, files == 1 ? "" : "s");
		return -1;
	}
	sort_n(a->ranks, (size_t)a->nranks, sizeof *a->ranks, cmp_rank);
	int world = a->ranks[0].p->world;
	if (world > a->nranks && !o->ranks)
		an_warn(a, "%d of %d ranks have a readable file; the missing ranks are not analysed", a->nranks, world);
	/* about a million rank-steps in all (some 400 MiB at most), between 512 and 8192 per rank */
	size_t per = ((size_t)1 << 20) / (size_t)a->nranks;
	a->sample_max = env_size("DDPSPY_REPORT_SAMPLE", per < 512 ? 512 : per > 8192 ? 8192 : per);
	if (a->sample_max < 64)
		a->sample_max = 64;
	an_align_clocks(a);
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
	an_analyse_steps(a);
	an_find_all(a);
	return 0;
nothing:
	snprintf(err, errlen, "out of memory");
	return -1;
}

void analysis_free(struct analysis *a)
{
	for (int i = 0; i < a->nprocs; i++)
		an_proc_free(&a->procs[i]);
	free(a->procs);
	for (int r = 0; a->ranks && r < a->nranks; r++)
		free(a->ranks[r].steps);
	free(a->ranks);
	for (int i = 0; i < a->nwarnings; i++)
		free(a->warnings[i]);
	struct stepdata *sd = a->sd;
	if (sd) {
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
		free(sd->gidx);
		free(sd->span);
		free(sd->tab.v);
		free(sd);
	}
}
