/* Shared between the parts of the analysis (analyze.c, load.c, steps.c, findings.c); report.c
 * and compare.c see only analysis.h. Internal names carry the an_ prefix. */
#ifndef DDPSPY_ANALYSIS_INT_H
#define DDPSPY_ANALYSIS_INT_H

#include "analysis.h"

#define MS(ns) ((double)(ns) / 1e6)

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

/* what the findings need from every event of a rank's training thread in the analysed steps,
 * folded as the second pass streams them (an_fold) */
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

/* what the step analysis leaves for the findings */
struct stepdata {   /* scratch shared by analyse_steps and the findings */
	int R;
	size_t K;
	struct wfrom **wf; /* per rank */
	size_t *nwf, *cwf;
	double *exc;    /* [(k * R + L) * CAT_COUNT + c]: L's excess over the median of its peers */
	struct itab tab;
	double **late;  /* per rank: lateness of each collective it entered (ms) */
	size_t *nlate;
	struct trainfold *fold; /* per rank */
	size_t *gidx;   /* each step's index among the analysed steps (k when they were all kept) */
	struct span {   /* per rank: all of its analysed steps, kept or not */
		int64_t t0, t1;
		double n;       /* how many */
		double max_ms;  /* the longest (0: taken from the kept ones) */
	} *span;
};

/* analyze.c */
void an_warn(struct analysis *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int an_category(const struct ev *e);   /* of an event on the training thread */
int an_is_coll(int kind);
double an_quantile(double *v, size_t n, double q); /* sorts v */
int an_cmp_i64(const void *x, const void *y);
int an_cmp_evp(const void *x, const void *y); /* struct ev pointers by start time */
/* the instance of (comm, seq), created when asked; NULL when absent or out of memory */
struct inst *an_inst_get(struct itab *t, int comm, int seq, int create);
struct thr *an_train_thread(struct proc *p);

/* load.c: one trace file into a->procs, with its rank's training thread chosen (proc.train);
 * an unreadable file is a warning, not an error */
int an_load_file(struct analysis *a, const char *path);
void an_proc_free(struct proc *p);
/* The second pass over a rank's file: every event of its training thread again, in order, times
 * aligned like the kept ones, handed to fn (non-zero stops). -1 when the file cannot be read. */
int an_stream_train(const struct proc *p, int (*fn)(void *ctx, const struct ev *e), void *ctx);
double an_read_bytes(const struct proc *p, int64_t t0, int64_t t1);
int an_stream_sync(const struct proc *p, int (*fn)(void *ctx, int thr, const struct ev *e), void *ctx);

/* steps.c */
/* rank r's waits for late ranks in step k: *n entries from the one returned */
const struct wfrom *an_wfrom_step(const struct stepdata *sd, int r, size_t k, size_t *n);
double an_wfrom(const struct stepdata *sd, int r, size_t k, int L);
void an_align_clocks(struct analysis *a);
void an_analyse_steps(struct analysis *a);

/* findings.c: one training-thread event e of an analysed step, of category cat, into tf, with
 * the events before and after it on the thread (NULL at either end) */
void an_fold(struct trainfold *tf, const struct ev *prev, const struct ev *e, int cat, const struct ev *next);
/* the findings, sorted, and the verdict */
void an_find_all(struct analysis *a);

#endif
