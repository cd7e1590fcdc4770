/* ddpspy watch: the report's findings over the last interval (watchfind.c). */
#ifndef DDPSPY_WATCHFIND_H
#define DDPSPY_WATCHFIND_H

#include <stddef.h>

#define WFIND_KINDS 32 /* at least the report's finding kinds (an_finding_kind) */
#define WFIND_MIN_STEPS 3

struct wfind {
	/* each trace file of the directory (sorted, as trace_list gives them) and its size at the last
	 * interval's end */
	char **path;
	size_t *size;
	int n;
	/* the last interval's: every finding kind's severity (the most severe finding of that kind;
	 * 0 none, or not judged: fewer than WFIND_MIN_STEPS steps of the job's own, collectives' or
	 * point-to-point calls' repeating pattern or its markers) and its rank there (-1 the job's) */
	int nkinds;         /* the report's kinds (wfind_kind) */
	double sev[WFIND_KINDS];
	int rank[WFIND_KINDS];
	double cpu_s;  /* the analysis' CPU time, all intervals */
};

/* The report's analysis of what each file of dir gained since the last call (the whole file at
 * the first): x->sev and x->rank for every kind (0 and -1 where not judged). */
void wfind_interval(struct wfind *x, const char *dir);
/* x ready: its kinds counted (before the first interval) */
void wfind_init(struct wfind *x);
/* the kinds in the report's order, i from 0; NULL past the last */
const char *wfind_kind(const struct wfind *x, int i);
void wfind_free(struct wfind *x);

#endif
