/* ddpspy watch: every finding kind's severity over the last interval, as the report judges it.
 * At each interval's end the directory's files are listed with their sizes; the report's
 * analysis then runs on the part of each file written since the last look (report_options'
 * spans: the frames between the two sizes, with each file's threads, stacks and clock from
 * before), on one thread. Its cost is the interval's events, not the run's: the frames before a
 * span are walked by their headers alone. */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "analysis.h"
#include "trace.h"
#include "watchfind.h"

#define WFIND_SKIP_FIRST 2 /* warm-up steps left out of the first interval (the report's default) */
#define WFIND_SKIP 1       /* of a later one: its first step, begun before the interval */

static double cpu_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void wfind_init(struct wfind *x)
{
	*x = (struct wfind){ 0 };
	while (x->nkinds < WFIND_KINDS && an_finding_kind(x->nkinds))
		x->nkinds++;
	for (int k = 0; k < WFIND_KINDS; k++)
		x->rank[k] = -1;
}

const char *wfind_kind(const struct wfind *x, int i)
{
	return i >= 0 && i < x->nkinds ? an_finding_kind(i) : NULL;
}

static int cmp_path(const void *key, const void *elem)
{
	return strcmp(key, *(char *const *)elem);
}

/* the size of path at the last look, 0 when new (x->path is sorted: a job's thousands of files) */
static size_t last_size(const struct wfind *x, const char *path)
{
	char **at = x->n ? bsearch(path, x->path, (size_t)x->n, sizeof *x->path, cmp_path) : NULL;
	return at ? x->size[at - x->path] : 0;
}

static void forget(struct wfind *x)
{
	for (int i = 0; i < x->n; i++)
		free(x->path[i]);
	free(x->path);
	free(x->size);
	x->path = NULL;
	x->size = NULL;
	x->n = 0;
}

void wfind_interval(struct wfind *x, const char *dir)
{
	double c0 = cpu_now();
	for (int k = 0; k < WFIND_KINDS; k++)
		x->sev[k] = 0, x->rank[k] = -1;
	char **list = NULL;
	int n = trace_list(dir, &list);
	struct an_span *sp = n > 0 ? calloc((size_t)n, sizeof *sp) : NULL;
	size_t *size = n > 0 ? calloc((size_t)n, sizeof *size) : NULL;
	if (!sp || !size) {
		if (n > 0)
			trace_free_list(list, n);
		free(sp);
		free(size);
		return;
	}
	int first = x->n == 0;
	for (int i = 0; i < n; i++) {
		struct stat st;
		size[i] = stat(list[i], &st) == 0 ? (size_t)st.st_size : 0;
		size_t lo = last_size(x, list[i]);
		sp[i] = (struct an_span){ list[i], { lo <= size[i] ? lo : 0, size[i] } };
	}
	struct analysis a;
	char err[256];
	char *dirs[1] = { (char *)dir };
	struct report_options o = { .skip = first ? WFIND_SKIP_FIRST : WFIND_SKIP, .jobs = 1, .spans = sp,
				    .nspans = n };
	/* (too few steps, or none of the job's own: an interval of set-up or of the job's end, where
	 * the analysis falls back to equal time windows, says nothing of the job's steps) */
	if (analysis_run(&a, dirs, 1, &o, err, sizeof err) == 0 && a.nsteps >= WFIND_MIN_STEPS &&
	    strcmp(a.step_source, "windows") && strcmp(a.step_source, "none")) {
		for (int f = 0; f < a.nfindings; f++)
			for (int k = 0; k < x->nkinds; k++)
				if (!strcmp(a.findings[f].kind, an_finding_kind(k)) && a.findings[f].severity > x->sev[k]) {
					x->sev[k] = a.findings[f].severity;
					x->rank[k] = a.findings[f].rank;
				}
	}
	analysis_free(&a);
	free(sp);
	forget(x);
	x->path = list; /* (this look's sizes are the next interval's start) */
	x->size = size;
	x->n = n;
	x->cpu_s += cpu_now() - c0;
}

void wfind_free(struct wfind *x)
{
	forget(x);
}
