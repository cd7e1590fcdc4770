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

/* what the step analysis leaves for the findings */
struct stepdata {   /* scratch shared by analyse_steps and the findings */
	int R;
	size_t K;
	double *wfrom;  /* [(r * K + k) * R + L]: ms rank r waited for late rank L in step k */
	double *exc;    /* [(k * R + L) * CAT_COUNT + c]: L's excess over the median of its peers */
	struct itab tab;
	double **late;  /* per rank: lateness of each collective it entered (ms) */
	size_t *nlate;
};

/* analyze.c */
void an_warn(struct analysis *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int an_category(const struct ev *e);   /* of an event on the training thread */
int an_is_coll(int kind);
double an_quantile(double *v, size_t n, double q); /* sorts v */
int an_cmp_i64(const void *x, const void *y);
/* the instance of (comm, seq), created when asked; NULL when absent or out of memory */
struct inst *an_inst_get(struct itab *t, int comm, int seq, int create);
struct thr *an_train_thread(struct proc *p);

/* load.c: one trace file into a->procs, with its rank's training thread chosen (proc.train);
 * an unreadable file is a warning, not an error */
int an_load_file(struct analysis *a, const char *path);
void an_proc_free(struct proc *p);
double an_read_bytes(const struct proc *p, int64_t t0, int64_t t1);

/* steps.c */
void an_align_clocks(struct analysis *a);
void an_analyse_steps(struct analysis *a);

/* findings.c: the findings, sorted, and the verdict */
void an_find_all(struct analysis *a);

#endif
