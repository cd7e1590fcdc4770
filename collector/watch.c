/* ddpspy watch DIR: a running job followed from its growing trace files (each read on from where
 * the last look stopped, collector/tracefollow.c), one line every --interval seconds: steps so far,
 * the step's median over the interval against the run's, the rank the others waited for most and
 * by how much, the interval's top finding (straggler or data_stall, severities as the report's
 * over the interval), and an alarm once a call to peers has been in flight longer than --hang-after
 * seconds, with the hang verdict's first line (the report's analysis, run once then). It ends when
 * every rank's file is complete; --exit-on hang ends it with exit 3 on a hang.
 *
 * Steps: the report's repeating pattern of the lowest rank's synchronizing calls (pattern.c), found
 * from its first calls, and each rank's steps by the same pattern from the call every rank numbers
 * alike (a collective's sequence number); step markers where the program makes them. A rank's
 * calls are those of its first thread to make a numbered blocking collective (MPI's, NCCL's, a
 * gloo rank's first helper thread); its shares of time, those of its training thread: that thread,
 * or the process's main thread when it is a library's helper (as the report picks it). */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include "../common/format.h"
#include "analysis_int.h"
#include "base.h"
#include "cli.h"
#include "findings_int.h"
#include "prom.h"
#include "steps_int.h"
#include "trace.h"

#define FIRST_MAX 4096  /* calls a rank keeps until its steps' phase is known */
#define FLIGHT 8        /* calls to peers in flight kept per rank */
#define INSTS 4096      /* collective instances awaiting their last rank */

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
};

/* the step histogram's upper bounds, seconds (+Inf after them) */
static const double BUCKETS[] = { 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30 };
#define NBUCKETS (sizeof BUCKETS / sizeof *BUCKETS)

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
	/* the last interval's findings (severities as the report's, over the interval): the late
	 * rank's, the training threads' waits for input (one rank's: data_rank, else -1), a hang */
	double straggler, data_stall;
	int data_rank, hang;
};

static volatile sig_atomic_t stop_asked;
static void on_sigint(int s) { (void)s; stop_asked = 1; }

static int64_t now_real(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int push(double **v, size_t *n, size_t *cap, double x)
{
	double *m = room_for(*v, *n, cap, sizeof *m, 256);
	if (!m)
		return -1;
	*v = m;
	(*v)[(*n)++] = x;
	return 0;
}

/* ---- steps ---- */

static void boundary(struct watch *w, struct wrank *r, int64_t t)
{
	if (r->bound != INT64_MIN && t > r->bound) {
		double ms = (double)(t - r->bound) / 1e6;
		push(&w->iv, &w->niv, &w->civ, ms);
		push(&w->run, &w->nrun, &w->crun, ms);
		r->steps++;
		size_t b = 0;
		while (b < NBUCKETS && ms / 1e3 > BUCKETS[b])
			b++;
		r->hist[b]++;
		r->step_s += ms / 1e3;
	}
	r->bound = t;
}

/* call idx (realtime start t, end e) of rank r once its phase is known: a boundary where a step
 * begins (after the call before it) */
static void step_call(struct watch *w, struct wrank *r, size_t idx, int64_t t)
{
	if (r->s0 >= 0 && (int64_t)idx >= r->s0 && ((int64_t)idx - r->s0) % (int64_t)w->pt.period == 0)
		boundary(w, r, idx ? r->prev_end : t);
}

/* rank r's phase: where its call numbered like the pattern's key is, its first calls replayed */
static void find_phase(struct watch *w, struct wrank *r)
{
	for (size_t i = 0; i < r->nfirst && r->s0 < 0; i++)
		if (r->first[i].comm == w->pt.key_comm && r->first[i].seq == w->pt.key_seq &&
		    (int64_t)i >= (int64_t)w->pt.key_delta)
			r->s0 = (int64_t)(i - w->pt.key_delta);
	if (r->s0 < 0)
		return;
	r->prev_end = INT64_MIN;
	for (size_t i = 0; i < r->nfirst; i++) {
		step_call(w, r, i, r->first[i].t);
		r->prev_end = r->first[i].t + r->first[i].d;
	}
	free(r->first);
	r->first = NULL;
	r->nfirst = 0;
}

/* the pattern of the lowest rank's first calls (times already realtime) */
static void find_pattern(struct watch *w)
{
	struct wrank *lo = NULL;
	for (int i = 0; i < w->n; i++)
		if (w->r[i].rank >= 0 && !w->r[i].markers && (!lo || w->r[i].rank < lo->rank))
			lo = &w->r[i];
	if (!lo || lo->nfirst < 12 || w->have_pat || w->no_pat)
		return;
	struct ev **e = malloc(lo->nfirst * sizeof *e);
	if (!e)
		return;
	for (size_t i = 0; i < lo->nfirst; i++)
		e[i] = &lo->first[i];
	struct sync s = { e, lo->nfirst };
	struct pattern pt = { 0 };
	if (an_find_pattern(&s, &pt) == 0 && pt.period > 0 && pt.nsteps >= 2) {
		w->pt = pt;
		w->have_pat = 1;
	} else if (lo->nfirst == FIRST_MAX) {
		w->no_pat = 1;
	}
	free(e);
	for (int i = 0; w->have_pat && i < w->n; i++)
		if (w->r[i].s0 < 0 && !w->r[i].markers)
			find_phase(w, &w->r[i]);
}

/* ---- lateness: who each numbered collective waited for ---- */

static void arrive(struct watch *w, struct wrank *r, const struct ev *v, int64_t t)
{
	int nr = 0; /* (the files that are ranks': a collective's instance is complete with all of them) */
	for (int k = 0; k < w->n; k++)
		nr += w->r[k].rank >= 0;
	if (!w->insts || nr < 2 || r->rank < 0)
		return;
	int64_t key = an_inst_key(v->comm, v->seq);
	key = key ? key : -1;
	size_t h = (size_t)an_mix64((uint64_t)key) % INSTS, j = h;
	while (w->insts[j].key && w->insts[j].key != key && (j = (j + 1) % INSTS) != h)
		;
	struct pend *in = &w->insts[j];
	if (in->key != key) {
		if (in->key) /* (full: the oldest pending are let go as they are met) */
			in->n = 0;
		in->key = key;
		in->n = 0;
		if (!in->arr && !(in->arr = malloc((size_t)w->n * sizeof *in->arr)))
			return;
		for (int k = 0; k < w->n; k++)
			in->arr[k] = INT64_MIN;
	}
	int me = (int)(r - w->r);
	if (in->arr[me] == INT64_MIN) {
		in->arr[me] = t;
		in->n++;
	}
	if (in->n < nr)
		return;
	int last = me;
	for (int k = 0; k < w->n; k++)
		if (in->arr[k] != INT64_MIN && in->arr[k] > in->arr[last])
			last = k;
	int64_t second = INT64_MIN;
	for (int k = 0; k < w->n; k++)
		if (k != last && in->arr[k] != INT64_MIN && in->arr[k] > second)
			second = in->arr[k];
	/* (how long the last-but-one waited for it: what the job lost to it there) */
	w->late_ms[last] += (double)(in->arr[last] - second) / 1e6;
	w->r[last].late_s += (double)(in->arr[last] - second) / 1e9;
	w->late_n[last]++;
	w->nlast++;
	in->key = 0;
}

/* ---- reading ---- */

struct rd {
	struct watch *w;
	struct wrank *r;
};

/* r is the lowest rank followed: the one whose calls give the steps' pattern */
static int lowest(const struct watch *w, const struct wrank *r)
{
	for (int i = 0; i < w->n; i++)
		if (w->r[i].rank >= 0 && w->r[i].rank < r->rank)
			return 0;
	return r->rank >= 0;
}

static void sync_call(struct watch *w, struct wrank *r, struct ev *v, int marker)
{
	if (marker) { /* (the program's own steps: a boundary at each begin) */
		r->markers = 1;
		if (v->op)
			boundary(w, r, v->t);
		return;
	}
	size_t idx = r->ncalls++;
	/* (a nonblocking collective's post too: the last rank to post is the one the waits wait for) */
	if (v->seq >= 0 && (an_kind(v->kind)->m & DDPSPY_KM_COLL))
		arrive(w, r, v, v->t);
	if (r->markers)
		return;
	if (w->have_pat && r->s0 >= 0) {
		step_call(w, r, idx, v->t);
	} else if (r->nfirst < FIRST_MAX && (r->first || (r->first = malloc(FIRST_MAX * sizeof *r->first)))) {
		r->first[r->nfirst++] = *v;
		if (w->have_pat && v->comm == w->pt.key_comm && v->seq == w->pt.key_seq)
			find_phase(w, r); /* (the call every rank numbers alike: its phase) */
		else if (!w->have_pat && ((r->nfirst & (r->nfirst - 1)) == 0 || r->nfirst == FIRST_MAX) && lowest(w, r))
			find_pattern(w); /* (at 16, 32, 64 ... of its calls: before its early steps are let go) */
	}
	r->prev_end = v->t + v->d;
}

static int on_event(void *ctx, struct trace_file *f, const struct trace_event *e)
{
	struct rd *c = ctx;
	struct wrank *r = c->r;
	r->events++;
	struct ev v;
	if (!an_convert(e, &v))
		return 0;
	for (int i = 0; i < r->nfl; i++) /* a call in flight that returned */
		if (r->fl[i].tid == e->tid && r->fl[i].raw == e->raw)
			r->fl[i--] = r->fl[--r->nfl];
	int marker = an_category(&v) == DDPSPY_CAT_MARKER, cat = an_category(&v);
	if (r->tid < 0 && (marker || (v.seq >= 0 && (an_kind(v.kind)->m & DDPSPY_KM_COLL)))) {
		r->tid = e->tid;
		r->helper = e->tid != f->pid && !marker && (an_kind(v.kind)->m & DDPSPY_KM_HELPER);
	}
	if (e->tid == r->tid && cat >= 0 && cat < CAT_COUNT)
		r->cat_ns[cat] += (double)v.d;
	if (e->tid == f->pid && cat >= 0 && cat < CAT_COUNT)
		r->main_ns[cat] += (double)v.d;
	r->t_lo = v.t + r->to_real < r->t_lo ? v.t + r->to_real : r->t_lo;
	r->t_hi = v.t + v.d + r->to_real > r->t_hi ? v.t + v.d + r->to_real : r->t_hi;
	if (e->tid != r->tid || (!marker && !an_train_sync(&v)))
		return 0;
	v.t += r->to_real;
	sync_call(c->w, r, &v, marker);
	return 0;
}

/* the file's clock and rank, before its events */
static int on_header(void *ctx, struct trace_file *f)
{
	struct wrank *r = ((struct rd *)ctx)->r;
	r->rank = f->rank;
	if (f->ncalib)
		r->to_real = f->calib[0].real_ns - f->calib[0].mono_ns;
	return 0;
}

static int on_identity(void *ctx, struct trace_file *f)
{
	((struct rd *)ctx)->r->rank = f->rank;
	return 0;
}

static int on_gpu(void *ctx, struct trace_file *f, const struct trace_event *e)
{
	(void)f, (void)e;
	((struct rd *)ctx)->r->events++;
	return 0;
}

/* a call to its peers in flight (format 2.9), kept until an event of its thread ends it */
static int on_inflight(void *ctx, struct trace_file *f, const struct trace_inflight *c)
{
	struct wrank *r = ((struct rd *)ctx)->r;
	(void)f;
	struct ev v;
	if (!an_convert(&c->ev, &v) || DDPSPY_KM_CAT(an_kind(v.kind)->m) != DDPSPY_CAT_COMMS)
		return 0;
	for (int i = 0; i < r->nfl; i++)
		if (r->fl[i].tid == c->ev.tid && r->fl[i].raw == c->ev.raw)
			return 0;
	if (r->nfl < FLIGHT)
		r->fl[r->nfl++] = (struct flight){ c->ev.tid, v.kind, v.op, v.comm, v.seq, c->ev.raw, v.t + r->to_real };
	return 0;
}

static int is_skipped(const struct watch *w, const char *path)
{
	for (int i = 0; i < w->nskip; i++)
		if (!strcmp(w->skip[i], path))
			return 1;
	for (int i = 0; i < w->n; i++)
		if (!strcmp(w->r[i].path, path))
			return 1;
	return 0;
}

static int stop_at_header(void *ctx, struct trace_file *f)
{
	(void)ctx, (void)f;
	return 1;
}

/* new files under the directory: all but launchers' and workers' followed from their start (a
 * file may name its rank later, in an identity record) */
static void scan(struct watch *w)
{
	char **list = NULL;
	int n = trace_list(w->dir, &list);
	for (int i = 0; i < n; i++) {
		if (is_skipped(w, list[i]))
			continue;
		struct trace_file f;
		struct trace_visitor hv = { .on_header = stop_at_header };
		if (trace_open(&f, list[i]) < 0) {
			trace_close(&f);
			continue;
		}
		trace_read(&f, &hv);
		int have = f.have_header, other = have && (!strcmp(f.role, "launcher") || !strcmp(f.role, "worker"));
		int rank = have ? f.rank : -1; /* (known before any file's events: arrive() counts the ranks) */
		trace_close(&f);
		if (!have) /* (not written yet: looked at again) */
			continue;
		char *path = strdup(list[i]);
		if (other) {
			char **m = path ? realloc(w->skip, (size_t)(w->nskip + 1) * sizeof *m) : NULL;
			if (m) {
				w->skip = m;
				w->skip[w->nskip++] = path;
			} else {
				free(path);
			}
			continue;
		}
		struct wrank *m = path ? realloc(w->r, (size_t)(w->n + 1) * sizeof *m) : NULL;
		if (!m) {
			free(path);
			continue;
		}
		w->r = m;
		struct wrank *r = &w->r[w->n++];
		*r = (struct wrank){ .path = path, .rank = rank, .tid = -1, .s0 = -1, .prev_end = INT64_MIN,
				     .bound = INT64_MIN, .t_lo = INT64_MAX, .t_hi = INT64_MIN };
		if (trace_open(&r->f, path) < 0)
			r->f.path = NULL; /* (gone since: left out) */
		/* (the instances' arrival arrays are per file: those pending start again) */
		for (int k = 0; w->insts && k < INSTS; k++) {
			free(w->insts[k].arr);
			w->insts[k] = (struct pend){ 0 };
		}
		double *lm = realloc(w->late_ms, (size_t)w->n * sizeof *lm);
		int *ln = realloc(w->late_n, (size_t)w->n * sizeof *ln);
		if (lm)
			w->late_ms = lm, lm[w->n - 1] = 0;
		if (ln)
			w->late_n = ln, ln[w->n - 1] = 0;
	}
	trace_free_list(list, n);
}

/* every rank's file read on; 1 when each is complete */
static int follow(struct watch *w)
{
	int done = w->n > 0;
	for (int i = 0; i < w->n; i++) {
		struct wrank *r = &w->r[i];
		struct rd c = { w, r };
		struct trace_visitor v = { .ctx = &c, .on_header = on_header, .on_identity = on_identity,
					   .on_event = on_event, .on_gpu = on_gpu, .on_inflight = on_inflight };
		if (!r->f.path)
			continue;
		trace_follow(&r->f, &v);
		done &= r->f.ended;
	}
	return done;
}

/* ---- the line ---- */

static double median(const double *v, size_t n)
{
	double *c = n ? malloc(n * sizeof *c) : NULL;
	if (!c)
		return 0;
	memcpy(c, v, n * sizeof *c);
	double m = an_quantile_select(c, n, 0.5);
	free(c);
	return m;
}

/* the oldest call to peers in flight of any rank, NULL none; *who its rank */
static const struct flight *oldest(const struct watch *w, int *who)
{
	const struct flight *o = NULL;
	for (int i = 0; i < w->n; i++)
		for (int k = 0; k < w->r[i].nfl; k++)
			if (!o || w->r[i].fl[k].t < o->t) {
				o = &w->r[i].fl[k];
				*who = w->r[i].rank;
			}
	return o;
}

/* the report's hang verdict on the directory now: its finding's title, or why there is none */
static void verdict(const char *dir, char *out, size_t n)
{
	struct analysis a;
	char err[256];
	char *dirs[1] = { (char *)dir };
	struct report_options o = { .skip = 2 };
	snprintf(out, n, "the report finds no hang yet (a call must wait 10 times its rank's longest before)");
	if (analysis_run(&a, dirs, 1, &o, err, sizeof err) == 0) {
		an_words(&a);
		for (int i = 0; i < a.nfindings; i++)
			if (!strcmp(a.findings[i].kind, "hang"))
				snprintf(out, n, "%s", a.findings[i].title);
	} else {
		snprintf(out, n, "no report: %s", err);
	}
	analysis_free(&a);
}

static void clock_now(char *buf, size_t n)
{
	time_t t = time(NULL);
	struct tm tm;
	localtime_r(&t, &tm);
	strftime(buf, n, "%H:%M:%S", &tm);
}

/* each rank's training thread's shares of the interval (span_ns long) */
static void interval_shares(struct watch *w, double span_ns)
{
	for (int i = 0; i < w->n; i++) {
		struct wrank *r = &w->r[i];
		const double *ns = r->helper ? r->main_ns : r->cat_ns;
		double busy = 0;
		for (int c = 0; c < CAT_COUNT; c++) {
			r->share[c] = span_ns > 0 ? fmax(0, fmin(1, (ns[c] - r->cat_last[c]) / span_ns)) : 0;
			r->cat_last[c] = ns[c];
			busy += c == CAT_COMPUTE ? 0 : r->share[c];
		}
		r->share[CAT_COMPUTE] = fmax(0, 1 - busy); /* (compute: what its calls leave) */
	}
}

/* the interval's data_stall as the report judges it over a run (an_data_severity): the training
 * threads' waits for input, one rank's (data_rank) or every rank's (-1) */
static void interval_data(struct watch *w)
{
	double *x = malloc(((size_t)w->n + 1) * sizeof *x);
	int *rank = malloc(((size_t)w->n + 1) * sizeof *rank), worst, all;
	size_t n = 0;
	for (int i = 0; x && rank && i < w->n; i++)
		if (w->r[i].rank >= 0) {
			rank[n] = w->r[i].rank;
			x[n++] = w->r[i].share[CAT_DATA];
		}
	w->data_stall = an_data_severity(x, n, &worst, &all);
	w->data_rank = n && !all && w->data_stall > 0 ? rank[worst] : -1;
	free(x);
	free(rank);
}

/* the interval's top finding of severity FINDING_MIN or more, or "-" */
#define FINDING_MIN 0.05
static void top_finding(const struct watch *w, int L, char *out, size_t n)
{
	snprintf(out, n, "top: -");
	double best = FINDING_MIN;
	if (w->straggler >= best) {
		best = w->straggler;
		snprintf(out, n, "top: straggler rank %d %.2f", w->r[L].rank, w->straggler);
	}
	if (w->data_stall >= best) {
		if (w->data_rank >= 0)
			snprintf(out, n, "top: data_stall rank %d %.2f", w->data_rank, w->data_stall);
		else
			snprintf(out, n, "top: data_stall %.2f", w->data_stall);
	}
}

/* the interval's line; 1 when a hang alarm was raised */
static int line(struct watch *w, double since_s, double hang_after, int *alarmed)
{
	char hm[16], slow[160] = "slowest: -", run[48] = "", top[64];
	clock_now(hm, sizeof hm);
	size_t steps = SIZE_MAX;
	uint64_t ev = 0;
	int nr = 0;
	for (int i = 0; i < w->n; i++) {
		if (w->r[i].rank >= 0)
			steps = w->r[i].steps < steps ? w->r[i].steps : steps, nr++;
		ev += w->r[i].events;
	}
	int L = -1;
	for (int i = 0; i < w->n && w->late_ms && w->late_n; i++)
		if (w->late_n[i] && (L < 0 || w->late_ms[i] > w->late_ms[L]))
			L = i;
	if (L >= 0)
		snprintf(slow, sizeof slow, "slowest: rank %d, last to %.0f%% of %d collectives, %.1f ms late each",
			 w->r[L].rank, 100.0 * w->late_n[L] / (w->nlast ? w->nlast : 1), w->nlast,
			 w->late_ms[L] / w->late_n[L]);
	if (w->nrun)
		snprintf(run, sizeof run, " (run %.1f ms)", median(w->run, w->nrun));
	char p50[64] = "step p50 -";
	if (w->niv)
		snprintf(p50, sizeof p50, "step p50 %.1f ms", median(w->iv, w->niv));
	/* the interval in the job's time, as read: a job read as it runs moves with the clock, a
	 * finished one is read whole in the first */
	int64_t lo = INT64_MAX, hi = INT64_MIN;
	for (int i = 0; i < w->n; i++)
		if (w->r[i].rank >= 0 && w->r[i].t_hi > w->r[i].t_lo)
			lo = w->r[i].t_lo < lo ? w->r[i].t_lo : lo, hi = w->r[i].t_hi > hi ? w->r[i].t_hi : hi;
	if (w->t_last == INT64_MIN)
		w->t_last = lo;
	double span_ns = hi > w->t_last ? (double)(hi - w->t_last) : 0;
	w->t_last = hi > w->t_last ? hi : w->t_last;
	interval_shares(w, span_ns);
	interval_data(w);
	w->straggler = L >= 0 && span_ns > 0 ? fmin(1, w->late_ms[L] * 1e6 / span_ns) : 0;
	top_finding(w, L, top, sizeof top);
	printf("%s %5.0f s  %d ranks  steps %zu  %s%s  %s  %s  %.0f events/s\n", hm, since_s, nr,
	       steps != SIZE_MAX ? steps : 0, p50, run, slow, top,
	       since_s > w->last_s ? (double)(ev - w->events) / (since_s - w->last_s) : 0);
	w->events = ev;
	w->last_s = since_s;
	w->niv = 0;
	w->nlast = 0;
	for (int i = 0; i < w->n && w->late_ms && w->late_n; i++)
		w->late_ms[i] = 0, w->late_n[i] = 0;
	int who = -1;
	const struct flight *o = oldest(w, &who);
	double age = o ? (double)(now_real() - o->t) / 1e9 : 0;
	if (!o || age < hang_after || *alarmed)
		return *alarmed;
	char v[600];
	verdict(w->dir, v, sizeof v);
	const char *k = ddpspy_name(ddpspy_event_names, DDPSPY_EV_COUNT, o->kind);
	printf("%s HANG: rank %d has waited %.0f s in %s%s%s", hm, who, age, k ? k : "a call",
	       o->op >= 0 ? " " : "", o->op >= 0 ? an_op_name(o->op) : "");
	if (o->seq >= 0)
		printf(" #%d", o->seq);
	printf("; %s\n", v);
	*alarmed = 1;
	w->hang = 1;
	return 1;
}

/* ---- --prometheus: the metrics of the job as watched now ---- */

static void rank_labels(const struct wrank *r, char *rank, size_t n, const char **l)
{
	snprintf(rank, n, "%d", r->rank);
	l[0] = "rank", l[1] = rank, l[2] = "host", l[3] = r->f.host;
}

/* a family of one value per rank: what 0, the others' waits for it; 1, its events dropped; 2, how
 * long its oldest call to peers has been in flight */
static void per_rank(const struct watch *w, struct prom *p, const char *name, const char *type, const char *help,
		     int what)
{
	char rk[16];
	const char *l[4];
	double now = (double)now_real();
	prom_family(p, name, type, help);
	for (int i = 0; i < w->n; i++) {
		const struct wrank *r = &w->r[i];
		double v = what == 0 ? r->late_s : what == 1 ? (double)r->f.dropped : 0;
		for (int k = 0; what == 2 && k < r->nfl; k++)
			v = fmax(v, (now - (double)r->fl[k].t) / 1e9);
		if (r->rank < 0)
			continue;
		rank_labels(r, rk, sizeof rk, l);
		prom_sample(p, name, l, 2, v);
	}
}

static void metrics(const struct watch *w, struct prom *p)
{
	char rk[16], le[32];
	const char *l[8];
	prom_family(p, "ddpspy_step_seconds", "histogram", "Each rank's step time, since ddpspy watch began.");
	for (int i = 0; i < w->n; i++) {
		const struct wrank *r = &w->r[i];
		if (r->rank < 0)
			continue;
		rank_labels(r, rk, sizeof rk, l);
		uint64_t cum = 0;
		for (size_t b = 0; b <= NBUCKETS; b++) {
			cum += r->hist[b];
			if (b < NBUCKETS)
				snprintf(le, sizeof le, "%g", BUCKETS[b]);
			l[4] = "le", l[5] = b < NBUCKETS ? le : "+Inf";
			prom_sample(p, "ddpspy_step_seconds_bucket", l, 3, (double)cum);
		}
		prom_sample(p, "ddpspy_step_seconds_sum", l, 2, r->step_s);
		prom_sample(p, "ddpspy_step_seconds_count", l, 2, (double)cum);
	}
	per_rank(w, p, "ddpspy_late_seconds_total", "counter",
		 "Time the rank's peers waited for it: it was the last to a collective, by this much after the next-last.", 0);
	prom_family(p, "ddpspy_time_ratio", "gauge",
		    "The share of the last interval the rank's training thread spent by category (compute: outside its calls).");
	for (int i = 0; i < w->n; i++)
		for (int c = 0; c < CAT_COUNT && w->r[i].rank >= 0; c++) {
			rank_labels(&w->r[i], rk, sizeof rk, l);
			l[4] = "category", l[5] = ddpspy_category_names[c];
			prom_sample(p, "ddpspy_time_ratio", l, 3, w->r[i].share[c]);
		}
	per_rank(w, p, "ddpspy_events_dropped_total", "counter", "Events the rank's process could not record (full rings).", 1);
	per_rank(w, p, "ddpspy_inflight_seconds", "gauge",
		 "How long the rank's oldest call to its peers has been in flight (0: none).", 2);
	prom_family(p, "ddpspy_finding_severity", "gauge",
		    "Severity of what ddpspy watch judges, over the last interval: straggler (its peers' waits for the rank "
		    "they waited for most, over the interval), data_stall (the training threads' waits for input, as the "
		    "report's) and hang (1 once raised).");
	l[0] = "kind", l[1] = "straggler";
	prom_sample(p, "ddpspy_finding_severity", l, 1, w->straggler);
	l[1] = "data_stall";
	prom_sample(p, "ddpspy_finding_severity", l, 1, w->data_stall);
	l[1] = "hang";
	prom_sample(p, "ddpspy_finding_severity", l, 1, w->hang);
	prom_family(p, "ddpspy_hang", "gauge", "1 once a call to peers has been in flight longer than --hang-after.");
	prom_sample(p, "ddpspy_hang", NULL, 0, w->hang);
	prom_family(p, "ddpspy_watch_events_total", "counter", "Events ddpspy watch has read.");
	uint64_t ev = 0;
	for (int i = 0; i < w->n; i++)
		ev += w->r[i].events;
	prom_sample(p, "ddpspy_watch_events_total", NULL, 0, (double)ev);
}

/* [HOST:]PORT listened on (no HOST: every address), non-blocking; -1 with a message */
static int listen_on(const char *spec)
{
	char host[256] = "0.0.0.0";
	const char *colon = strrchr(spec, ':'), *port = colon ? colon + 1 : spec;
	if (colon && (size_t)(colon - spec) < sizeof host) {
		memcpy(host, spec, (size_t)(colon - spec));
		host[colon - spec] = 0;
	}
	char *end;
	long pn = strtol(port, &end, 10);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)pn) };
	if (!*port || *end || pn < 1 || pn > 65535 || inet_pton(AF_INET, host, &a.sin_addr) != 1) {
		fprintf(stderr, "ddpspy watch: --prometheus needs [HOST:]PORT (an IPv4 address, a port 1-65535), not '%s'\n",
			spec);
		return -1;
	}
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0), one = 1;
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0 ||
	    bind(fd, (struct sockaddr *)&a, sizeof a) < 0 || listen(fd, 16) < 0) {
		fprintf(stderr, "ddpspy watch: cannot listen on %s: %s\n", spec, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	return fd;
}

/* a wait of at most ms, answering scrapes meanwhile */
static void wait_serving(const struct watch *w, int lfd, int ms)
{
	struct pollfd pf = { lfd, POLLIN, 0 };
	if (lfd < 0) {
		usleep((useconds_t)ms * 1000);
		return;
	}
	if (poll(&pf, 1, ms) <= 0)
		return;
	int c;
	while ((c = accept4(lfd, NULL, NULL, SOCK_CLOEXEC)) >= 0) {
		struct prom p = { 0 };
		metrics(w, &p);
		prom_serve(c, p.failed ? "" : p.buf, p.failed ? 0 : p.n);
		prom_free(&p);
	}
}

static void usage(FILE *to)
{
	fprintf(to, "usage: ddpspy watch DIR [--interval S] [--hang-after S] [--exit-on hang] [--prometheus [HOST:]PORT]\n"
		    "  follows a running job's trace files in DIR (ddpspy run -o DIR, or DDPSPY_OUT)\n"
		    "  and prints a line every S seconds (default 10): steps so far, the step's median\n"
		    "  over the interval and the run, the rank the others waited for most; a hang alarm\n"
		    "  once a call to peers has waited --hang-after seconds (default 60). It ends when\n"
		    "  every rank's file is complete; --exit-on hang ends it with exit 3 on a hang.\n"
		    "  --prometheus serves the metrics at http://HOST:PORT/metrics (no HOST: every address).\n");
}

static void watch_free(struct watch *w)
{
	for (int i = 0; i < w->n; i++) {
		if (w->r[i].f.path)
			trace_close(&w->r[i].f);
		free(w->r[i].path);
		free(w->r[i].first);
	}
	free(w->r);
	for (int i = 0; i < w->nskip; i++)
		free(w->skip[i]);
	free(w->skip);
	for (int k = 0; w->insts && k < INSTS; k++)
		free(w->insts[k].arr);
	free(w->insts);
	free(w->iv);
	free(w->run);
	free(w->late_ms);
	free(w->late_n);
}

int cmd_watch(int argc, char **argv)
{
	double interval = 10, hang_after = 60;
	const char *exit_on = NULL, *prom_at = NULL;
	char **pos = calloc((size_t)argc + 1, sizeof *pos);
	int npos = 0;
	if (!pos)
		return 2;
	const struct cli_opt opts[] = {
		{ "--interval", NULL, CLI_DOUBLE, &interval, 0.1, 86400, "seconds, 0.1 to 86400", 0 },
		{ "--hang-after", NULL, CLI_DOUBLE, &hang_after, 0.1, 1e7, "seconds, 0.1 or more", 0 },
		{ "--exit-on", NULL, CLI_STR, &exit_on, 0, 0, NULL, 0 },
		{ "--prometheus", NULL, CLI_STR, &prom_at, 0, 0, NULL, 0 },
		{ NULL, NULL, CLI_FLAG, NULL, 0, 0, NULL, 0 },
	};
	const struct cli cl = { "watch", opts, usage, 0 };
	int got = cli_parse(&cl, argc, argv, pos, &npos);
	if (got || npos != 1 || (exit_on && strcmp(exit_on, "hang"))) {
		if (!got)
			fprintf(stderr, "ddpspy watch: %s\n", npos != 1 ? "needs one directory" :
				"--exit-on knows one event: hang");
		if (!got)
			usage(stderr);
		free(pos);
		return got > 0 ? 0 : 2;
	}
	int lfd = prom_at ? listen_on(prom_at) : -1;
	if (prom_at && lfd < 0) {
		free(pos);
		return 2;
	}
	struct watch w = { .dir = pos[0], .insts = calloc(INSTS, sizeof(struct pend)), .t_last = INT64_MIN };
	signal(SIGINT, on_sigint);
	signal(SIGTERM, on_sigint);
	setvbuf(stdout, NULL, _IOLBF, 0);
	int64_t start = now_real(), next = start + (int64_t)(interval * 1e9);
	int alarmed = 0, rc = 0, done = 0;
	while (!stop_asked && !done) {
		scan(&w);
		done = follow(&w);
		int64_t now = now_real();
		if (now >= next || done) {
			line(&w, (double)(now - start) / 1e9, hang_after, &alarmed);
			next += (int64_t)(interval * 1e9);
			if (alarmed && exit_on) {
				rc = 3;
				break;
			}
		}
		if (!done)
			wait_serving(&w, lfd, 100); /* (a look every 0.1 s: a writer flushes about that often) */
	}
	if (lfd >= 0)
		close(lfd);
	if (done)
		printf("watch: every file is complete (%d followed)\n", w.n);
	watch_free(&w);
	free(pos);
	return rc;
}
