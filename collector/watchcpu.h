/* ddpspy watch's CPU contention (watchcpu.c): each process's "sched" records as they are read,
 * and the interval's cpu_contention as the report judges a run. */
#ifndef DDPSPY_WATCHCPU_H
#define DDPSPY_WATCHCPU_H

#include <stdint.h>

#include "trace.h"

struct wthr {           /* a thread's cumulative CPU and run-queue time: now and at the last line */
	int tid;
	int64_t t, run, wait, t0, run0, wait0;
};

struct wproc {          /* a process of the job (a rank, or an input worker) */
	int pid, parent, worker; /* parent: the rank whose input a worker makes */
	int cpus, host_cpus;     /* it may use, the host has (0 unknown) */
	char host[256];     /* (as a file's header holds it) */
	int64_t ht, hbusy, ht0, hbusy0; /* the host's CPU time in use: now and at the last line */
	struct wthr *thr;
	int nthr;
	size_t cthr;
};

struct wworker {        /* an input worker's file, followed for its sched records alone */
	char *path;
	struct trace_file f;
	struct wproc *p;
	int ended;          /* complete: let go after the next line */
};

struct wcpu {
	struct wproc **p;   /* every process: the ranks' (watch.c's) and the workers' */
	int n;
	struct wworker *w;
	int nw;
};

/* a process to follow (a rank's: its records are handed to wcpu_sample by its reader); NULL when
 * out of memory */
struct wproc *wcpu_proc(struct wcpu *c, const struct trace_file *f);
void wcpu_sample(struct wproc *p, const struct trace_sched *s);
/* an input worker's file (its header read): followed by wcpu_follow; -1 when out of memory */
int wcpu_worker(struct wcpu *c, const char *path, const struct trace_file *hdr);
void wcpu_follow(struct wcpu *c);

struct wcpu_rank {      /* a rank as the line judges it */
	const struct wproc *p;
	int rank, tid;      /* tid: its training thread */
	double waiting;     /* its share of the interval waiting for peers */
};
/* cpu_contention over the interval since the last line (an_cpu_severity on each rank, an_cpu_top
 * over them): its severity, *worst the index in rk of the rank most delayed, *all 1 when it is the
 * job's; then now becomes the last line's */
double wcpu_contention(struct wcpu *c, const struct wcpu_rank *rk, int n, int *worst, int *all);
void wcpu_free(struct wcpu *c);

#endif
