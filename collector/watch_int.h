/* What ddpspy watch keeps of a job as it follows it (watch.c), for the metrics it serves
 * (watchprom.c). */
#ifndef DDPSPY_WATCH_INT_H
#define DDPSPY_WATCH_INT_H

#include <stdint.h>
#include <time.h>

#include "analysis_int.h"
#include "prom.h"
#include "steps_int.h"
#include "trace.h"
#include "watchfind.h"

#define FLIGHT 8        /* calls to peers in flight kept per rank */
#define HELPERS 16      /* a library's helper threads whose calls a rank's are */

struct flight {         /* a call to peers in flight, as its file last said */
	int tid, kind, op;
	int32_t comm, seq;
	uint64_t raw;
	int64_t t;          /* its start, CLOCK_REALTIME ns */
};

struct wrank {
	char *path;
	struct trace_file f;
	int rank, tid;      /* tid: the thread followed (-1 not yet) */
	int markers;        /* its steps are the program's markers */
	int64_t to_real;    /* its file's CLOCK_REALTIME - CLOCK_MONOTONIC */
	struct ev *first;   /* its first calls, until its steps' phase is known */
	size_t nfirst;
	size_t ncalls;      /* its synchronizing calls so far */
	int64_t s0;         /* the index of its first step's first call; -1 unknown */
	int64_t prev_end;   /* its latest call's end (realtime) */
	int64_t bound;      /* its latest step boundary (realtime), INT64_MIN none */
	size_t steps;
	struct flight fl[FLIGHT];
	int nfl;
	uint64_t events;
	int64_t t_lo, t_hi; /* the earliest start and latest end of its events read (realtime ns) */
	/* its steps' lengths by bucket and their sum, the others' waits for it, the time in calls by
	 * category of the followed thread and of the main thread (all since watch began), the
	 * training thread's at the last line and its shares of the interval (the report's training
	 * thread: the followed one, or the main thread when that one is a library's helper) */
	uint64_t hist[16];
	double step_s, late_s;
	int helper;         /* the followed thread is a library's helper (gloo's), not the main thread */
	double cat_ns[CAT_COUNT], main_ns[CAT_COUNT], cat_last[CAT_COUNT], share[CAT_COUNT];
	double lost_ns;     /* the others' waits for it over the interval (the last-but-one's) */
	int64_t late_upto, late_lag; /* its latest arrival last, and how late (realtime ns) */
	/* a library's helper threads (gloo's, several) run its collectives: their calls are held
	 * until no helper can still be in one that started earlier, then taken in time order */
	struct ev *held;
	size_t nheld, cheld;
	int htid[HELPERS], nh;
	int64_t hend[HELPERS]; /* each helper's latest call's end (realtime) */
};

/* the step histogram's upper bounds, seconds (+Inf after them; watchprom.c) */
#define NBUCKETS 14
extern const double watch_buckets[NBUCKETS];

struct pend {           /* a numbered collective instance: each rank's arrival, realtime */
	int64_t key;        /* 0 free */
	int n;
	int64_t *arr;       /* nranks of them, INT64_MIN not yet */
};

struct watch {
	const char *dir;
	struct wrank *r;
	int n;
	char **skip;        /* files that are not ranks' */
	char *launcher;     /* each of them: a launcher's (LAUNCHER_*) or not (0) */
#define LAUNCHER_OPEN 1     /* (its file not complete when last read) */
#define LAUNCHER_EXEC 2     /* (complete in an exec: it goes on as the program it became) */
#define LAUNCHER_ENDED 3    /* (complete: it ended) */
	int nskip;
	/* the step pattern, from the lowest rank's first calls */
	int have_pat, no_pat;
	struct pattern pt;
	/* this interval's step lengths (ms), all the run's */
	double *iv, *run;
	size_t niv, civ, nrun, crun;
	/* lateness: per rank, this interval's instances it was last to and its lateness in all */
	struct pend *insts;
	double *late_ms;
	int *late_n, nlast;
	uint64_t events;    /* at the last line, */
	double last_s;      /* made then (seconds since watch began) */
	int64_t t_last;     /* the job's time (realtime ns) read up to then; INT64_MIN none yet */
	int hang;           /* a hang alarm was raised */
	struct wfind find;  /* the report's findings over the last interval (watchfind.c) */
};

static inline int64_t now_real(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* the job's metrics now, in Prometheus' text format (watchprom.c; ctx: the struct watch) */
void watch_metrics(const void *ctx, struct prom *p);

#endif
