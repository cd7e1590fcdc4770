/* Shared between the analysis's files; report.c and compare.c see only analysis.h. Internal names
 * carry the an_ prefix. The sections follow the phases in order, and each file calls only the
 * sections above its own:
 *   kinds.c, stats.c   what each event kind means; quantiles and collective instances
 *   load.c             the trace files into per-thread timelines; the ranks; warnings
 *   clocks.c           every process's times on the job's clock
 *   steps.c            each rank's step boundaries
 *   split.c            each step split into compute / data / comms / host, waits, critical path
 *   findings.c         the findings
 *   verdict.c          the verdict
 * analyze.c runs them in that order and frees what each made. */
#ifndef DDPSPY_ANALYSIS_INT_H
#define DDPSPY_ANALYSIS_INT_H

#include "../common/format.h"
#include "analysis.h"

#define MS(ns) ((double)(ns) / 1e6)

struct trace_event;

/* ---- kinds.c ---- */

/* an event kind's meaning (common/format.h's DDPSPY_KM_*) and where its arguments are */
struct kind {
	unsigned m;
	int8_t fd, fdclass, bytes, op, comm, seq, peer, begin, path; /* argument positions, -1 none */
};
/* never NULL: a kind this collector does not know (a newer writer's) counts as host time */
const struct kind *an_kind(int kind);
/* what e's time counts as: CAT_* or DDPSPY_CAT_MARKER (a point); DDPSPY_CAT_NONE never reaches
 * the phases (an_convert drops those records) */
int an_category(const struct ev *e);
int an_is_coll(int kind);            /* a collective or a wait for one: the training thread's mark */
int an_is_sync_kind(int kind);       /* collectives, their waits, step markers */
int an_kept_sync(const struct ev *e); /* the synchronizing calls the phases keep (not MPI_Test*) */
int an_completes(const struct ev *e); /* a wait that completes the pending nonblocking collectives */
int an_blocking_coll(const struct ev *e);
int an_exit_aligns(const struct ev *e); /* every rank leaves it together: its exit aligns clocks */
int an_is_file_read(const struct ev *e);
/* the trace reader's event as the analysis sees it (v->path -1: the caller's); 0 for records that
 * are not calls (a thread's start, exit, name) */
int an_convert(const struct trace_event *e, struct ev *v);

/* ---- stats.c ---- */

double an_quantile(double *v, size_t n, double q); /* sorts v */
int an_cmp_i64(const void *x, const void *y);
int an_cmp_evp(const void *x, const void *y); /* struct ev pointers by start time */

/* one collective instance, (comm, seq), over all ranks */
struct inst {
	int64_t key;          /* comm << 32 | seq; 0 free (seq 0 of comm 0 is stored as key -1) */
	int64_t min_arr, max_arr;
	int late;             /* the rank that arrived last */
	int n, op;
	int64_t bytes;
	double wait_sum;      /* ms all ranks waited for the last arrival */
	int prev_cat;         /* on the late rank: what it did right before arriving */
	int64_t prev_gap;     /* ns between that and its arrival */
};

struct itab {
	struct inst *v;
	size_t cap, n;
};

/* the instance of (comm, seq), created when asked; NULL when absent or out of memory */
struct inst *an_inst_get(struct itab *t, int comm, int seq, int create);

/* ---- load.c ---- */

void an_warn(struct analysis *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* every file under a->dirs into a->procs, and a->ranks; -1 when no rank is readable (err says why) */
int an_load(struct analysis *a, const struct report_options *o, char *err, size_t errlen);
void an_load_free(struct analysis *a);
struct thr *an_train_thread(struct proc *p);
/* whether e, a call of p's thread u, is one of the rank's synchronizing calls: the training
 * thread's collectives and completing waits, or, when they run on helper threads (p->bg), those
 * threads' blocking collectives */
int an_rank_sync(const struct proc *p, const struct thr *u, const struct ev *e);
/* The second pass over a rank's file: every event of its training thread again, in order, times
 * aligned like the kept ones, handed to fn (non-zero stops). -1 when the file cannot be read. */
int an_stream_train(const struct proc *p, int (*fn)(void *ctx, const struct ev *e), void *ctx);
/* every synchronizing call of p again, from all its threads, in time order */
int an_stream_sync(const struct proc *p, int (*fn)(void *ctx, int thr, const struct ev *e), void *ctx);
double an_read_bytes(const struct proc *p, int64_t t0, int64_t t1);

/* ---- clocks.c ---- */

void an_align_clocks(struct analysis *a);
void an_wall_time(struct analysis *a);  /* a->wall_s, on the aligned clock */

/* ---- steps.c and split.c: what they leave for the findings (a->sd) ---- */

/* what the findings need from every event of a rank's training thread in the analysed steps,
 * folded as the split streams them */
struct pat {
	int kind, fdclass;
	int64_t bytes;
	double calls, ms;
};
#define MAX_PATS 32
struct trainfold {
	struct pat pats[MAX_PATS]; /* input calls by pattern (kind, descriptor class, file-read size) */
	int np, last;              /* last: the pattern of the latest input call */
	double runs, run_bytes, run_ms; /* blocking all-reduces run back to back */
	double icoll;              /* nonblocking collectives */
};

/* rank r waited ms for late rank L in step k: few per rank and step, so a list per rank, sorted
 * by step and late rank (a dense ranks x steps x ranks table is gigabytes at 512 ranks) */
struct wfrom {
	uint32_t k;
	int32_t L;
	double ms;
};

struct stepdata {
	/* steps.c: the analysed steps kept (a->ranks[r].steps has K of them) */
	size_t K;
	size_t *gidx;   /* each kept step's index among the analysed steps (k when all are kept) */
	struct span {   /* per rank: all of its analysed steps, kept or not */
		int64_t t0, t1;
		double n;       /* how many */
		double max_ms;  /* the longest (0: taken from the kept ones) */
	} *span;
	/* split.c */
	int R;
	struct wfrom **wf; /* per rank */
	size_t *nwf, *cwf;
	double *exc;    /* [(k * R + L) * CAT_COUNT + c]: L's excess over the median of its peers */
	struct itab tab;
	double **late;  /* per rank: lateness of each collective it entered (ms) */
	size_t *nlate;
	struct trainfold *fold; /* per rank */
};

/* steps.c: a->sd, the boundaries in a->ranks[].steps, the step counts and source */
void an_find_steps(struct analysis *a);
void an_steps_free(struct analysis *a);

/* split.c: the steps' splits, waits, critical path, per-rank and job figures */
void an_split_steps(struct analysis *a);
void an_split_free(struct analysis *a);
/* rank r's waits for late ranks in step k: *n entries from the one returned */
const struct wfrom *an_wfrom_step(const struct stepdata *sd, int r, size_t k, size_t *n);
double an_wfrom(const struct stepdata *sd, int r, size_t k, int L);

/* ---- findings.c: the findings, sorted by severity ---- */

void an_find_all(struct analysis *a);

/* ---- verdict.c: a->bound, confidence and summary ---- */

void an_verdict(struct analysis *a);

#endif
