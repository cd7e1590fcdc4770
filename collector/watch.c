/* ddpspy watch DIR: a running job followed from its growing trace files (each read on from where
 * the last look stopped, collector/tracefollow.c), one line every --interval seconds: steps so far,
 * the step's median over the interval against the run's, the rank the others waited for most and
 * by how much, the interval's top finding (the report's analysis of what the files gained over the
 * interval, watchfind.c), and an alarm once a call to peers has been in flight longer than
 * --hang-after seconds, with the hang verdict's first line (the report's analysis of the whole
 * files, run once then). It ends when every rank's file is complete; --exit-on hang ends it with
 * exit 3 on a hang.
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

#include "../common/format.h"
#include "analysis_int.h"
#include "base.h"
#include "cli.h"
#include "findings_int.h"
#include "watch_int.h"

#define FIRST_MAX 4096  /* calls a rank keeps until its steps' phase is known */
#define INSTS 4096      /* collective instances awaiting their last rank */
#define PATTERN_STEPS 8 /* steps a pattern must be seen in */

static volatile sig_atomic_t stop_asked;
static void on_sigint(int s) { (void)s; stop_asked = 1; }

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
		while (b < NBUCKETS && ms / 1e3 > watch_buckets[b])
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
	/* (a pattern seen in a few steps only may be chance: a job's set-up calls before its first
	 * steps, a few steps' gaps; one of PATTERN_STEPS or more, or what all the calls kept give) */
	if (an_find_pattern(&s, &pt) == 0 && pt.period > 0 && pt.nsteps >= 2 &&
	    (pt.nsteps >= PATTERN_STEPS || lo->nfirst == FIRST_MAX)) {
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
	/* How long the last-but-one waited for it: what the job lost to it there. Where the others
	 * reached this one before it reached the last it was late to, nothing synchronized them in
	 * between (nonblocking or helper threads' collectives, in flight together): only how much
	 * later it came than there is new. */
	struct wrank *lr = &w->r[last];
	int64_t lag = in->arr[last] - second;
	double lost = (double)(second < lr->late_upto ? (lag > lr->late_lag ? lag - lr->late_lag : 0) : lag);
	lr->late_upto = in->arr[last] > lr->late_upto ? in->arr[last] : lr->late_upto;
	lr->late_lag = lag;
	w->late_ms[last] += (double)lag / 1e6;
	w->r[last].lost_ns += lost;
	w->r[last].late_s += lost / 1e9;
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

/* ---- a library's helper threads: their calls in the order they were made ---- */

#define HOLD_NS 1000000000 /* a call held no longer than this behind the latest one read */
#define HOLD_MAX 1024      /* nor behind more calls */

/* helper thread tid's call v (realtime) read: held in time order */
static void hold(struct wrank *r, int tid, const struct ev *v)
{
	int h = 0;
	while (h < r->nh && r->htid[h] != tid)
		h++;
	if (h == r->nh && h < HELPERS)
		r->htid[r->nh++] = tid, r->hend[h] = INT64_MIN;
	if (h < HELPERS)
		r->hend[h] = r->hend[h] > v->t + v->d ? r->hend[h] : v->t + v->d;
	struct ev *m = room_for(r->held, r->nheld, &r->cheld, sizeof *m, 64);
	if (!m)
		return;
	r->held = m;
	size_t i = r->nheld++;
	while (i > 0 && r->held[i - 1].t > v->t) {
		r->held[i] = r->held[i - 1];
		i--;
	}
	r->held[i] = *v;
}

/* the held calls that no helper can precede any more (all: every one) taken, in time order; of
 * one operation's numbered calls, in the order they were numbered, which is the order they were
 * issued (two started at nearly the same time may swap places, as pattern.c says) */
static void release(struct watch *w, struct wrank *r, int all)
{
	int64_t safe = INT64_MAX, newest = INT64_MIN;
	for (int h = 0; h < r->nh; h++) {
		safe = r->hend[h] < safe ? r->hend[h] : safe;
		newest = r->hend[h] > newest ? r->hend[h] : newest;
	}
	safe = newest - HOLD_NS > safe ? newest - HOLD_NS : safe;
	size_t k = 0;
	for (; k < r->nheld && (all || r->held[k].t < safe || r->nheld - k > HOLD_MAX); k++) {
		struct ev *e = &r->held[k];
		for (size_t j = k + 1; an_numbered_coll(e) && j < r->nheld; j++)
			if (r->held[j].op == e->op && r->held[j].comm == e->comm && an_numbered_coll(&r->held[j]) &&
			    r->held[j].seq < e->seq) {
				struct ev x = *e; /* (the earlier numbered in this place, the later in its) */
				*e = r->held[j];
				r->held[j] = x;
			}
		sync_call(w, r, e, 0);
	}
	memmove(r->held, r->held + k, (r->nheld - k) * sizeof *r->held);
	r->nheld -= k;
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
	/* (a helper rank's calls: any of its library's helper threads') */
	int mine = e->tid == r->tid || (r->helper && !marker && (an_kind(v.kind)->m & DDPSPY_KM_HELPER));
	if (!mine || (!marker && !an_train_sync(&v)))
		return 0;
	v.t += r->to_real;
	if (r->helper && !marker) {
		hold(r, e->tid, &v);
		release(c->w, r, 0);
	} else {
		sync_call(c->w, r, &v, marker);
	}
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

/* new files under the directory: ranks' followed from their start (a file may name its rank later,
 * in an identity record), input workers' for their CPU figures, launchers' left out */
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
		int have = f.have_header, launcher = have && !strcmp(f.role, "launcher");
		int other = launcher || (have && !strcmp(f.role, "worker"));
		int rank = have ? f.rank : -1; /* (known before any file's events: arrive() counts the ranks) */
		if (!have) { /* (not written yet: looked at again) */
			trace_close(&f);
			continue;
		}
		trace_close(&f);
		char *path = strdup(list[i]);
		if (other) {
			char **m = path ? realloc(w->skip, (size_t)(w->nskip + 1) * sizeof *m) : NULL;
			char *l = m ? realloc(w->launcher, (size_t)(w->nskip + 1)) : NULL;
			if (m)
				w->skip = m;
			if (l) {
				w->launcher = l;
				w->launcher[w->nskip] = launcher ? LAUNCHER_OPEN : 0;
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

/* no rank's file, and every launcher's complete: the job ended before any rank started (a file
 * that ended in an exec goes on as the program it became: its next file comes). A launcher's file
 * is read again only while it is not complete. */
static int launchers_done(struct watch *w)
{
	int n = 0, open = 0;
	for (int i = 0; !w->n && i < w->nskip; i++) {
		if (w->launcher[i] == LAUNCHER_OPEN) {
			struct trace_file f;
			struct trace_visitor none = { 0 };
			if (trace_open(&f, w->skip[i]) == 0)
				trace_read(&f, &none);
			if (f.ended)
				w->launcher[i] = !strcmp(f.end_reason, "exec") ? LAUNCHER_EXEC : LAUNCHER_ENDED;
			trace_close(&f);
		}
		n += w->launcher[i] != 0;
		open |= w->launcher[i] == LAUNCHER_OPEN || w->launcher[i] == LAUNCHER_EXEC;
	}
	return n && !open;
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
		if (r->f.ended)
			release(w, r, 1);
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

/* the interval's top finding of severity FINDING_MIN or more, or "-", from the report's analysis
 * of the interval (watchfind.c; a hang is the alarm's) */
#define FINDING_MIN 0.05
static void top_finding(const struct watch *w, char *out, size_t n)
{
	snprintf(out, n, "top: -");
	double best = FINDING_MIN;
	for (int k = 0; k < w->find.nkinds; k++) {
		const char *kind = wfind_kind(&w->find, k);
		if (!strcmp(kind, "hang") || w->find.sev[k] < best)
			continue;
		best = w->find.sev[k];
		if (w->find.rank[k] >= 0)
			snprintf(out, n, "top: %s rank %d %.2f", kind, w->find.rank[k], best);
		else
			snprintf(out, n, "top: %s %.2f", kind, best);
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
	for (int i = 0; i < w->n && w->late_ms && w->late_n; i++) /* (the one the job lost most time to) */
		if (w->late_n[i] && (L < 0 || w->r[i].lost_ns > w->r[L].lost_ns))
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
	if (w->t_last == INT64_MIN && lo != INT64_MAX) /* (none read yet: the interval starts with the first) */
		w->t_last = lo;
	double span_ns = hi > w->t_last ? (double)(hi - w->t_last) : 0;
	w->t_last = hi > w->t_last ? hi : w->t_last;
	interval_shares(w, span_ns);
	wfind_interval(&w->find, w->dir);
	top_finding(w, top, sizeof top);
	printf("%s %5.0f s  %d ranks  steps %zu  %s%s  %s  %s  %.0f events/s\n", hm, since_s, nr,
	       steps != SIZE_MAX ? steps : 0, p50, run, slow, top,
	       since_s > w->last_s ? (double)(ev - w->events) / (since_s - w->last_s) : 0);
	w->events = ev;
	w->last_s = since_s;
	w->niv = 0;
	w->nlast = 0;
	for (int i = 0; i < w->n && w->late_ms && w->late_n; i++)
		w->late_ms[i] = 0, w->late_n[i] = 0, w->r[i].lost_ns = 0;
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

static void usage(FILE *to)
{
	fprintf(to, "usage: ddpspy watch DIR [--interval S] [--hang-after S] [--exit-on hang] [--prometheus [HOST:]PORT]\n"
		    "  follows a running job's trace files in DIR (ddpspy run -o DIR, or DDPSPY_OUT)\n"
		    "  and prints a line every S seconds (default 10): steps so far, the step's median\n"
		    "  over the interval and the run, the rank the others waited for most, the interval's\n"
		    "  top finding (the report's, over what the files gained in it); a hang alarm\n"
		    "  once a call to peers has waited --hang-after seconds (default 60). It ends when\n"
		    "  every rank's file is complete (exit 1: the launcher ended and no rank came);\n"
		    "  --exit-on hang ends it with exit 3 on a hang.\n"
		    "  --prometheus serves the metrics at http://HOST:PORT/metrics (no HOST: every address).\n");
}

static void watch_free(struct watch *w)
{
	for (int i = 0; i < w->n; i++) {
		if (w->r[i].f.path)
			trace_close(&w->r[i].f);
		free(w->r[i].path);
		free(w->r[i].first);
		free(w->r[i].held);
	}
	free(w->r);
	for (int i = 0; i < w->nskip; i++)
		free(w->skip[i]);
	free(w->skip);
	free(w->launcher);
	for (int k = 0; w->insts && k < INSTS; k++)
		free(w->insts[k].arr);
	free(w->insts);
	free(w->iv);
	free(w->run);
	free(w->late_ms);
	free(w->late_n);
	wfind_free(&w->find);
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
		if (!got) {
			fprintf(stderr, "ddpspy watch: %s\n", npos != 1 ? "needs one directory" :
				"--exit-on knows one event: hang");
			usage(stderr);
		}
		free(pos);
		return got > 0 ? 0 : 2;
	}
	int lfd = prom_at ? prom_listen(prom_at, "ddpspy watch") : -1;
	if (prom_at && lfd < 0) {
		free(pos);
		return 2;
	}
	struct watch w = { .dir = pos[0], .insts = calloc(INSTS, sizeof(struct pend)), .t_last = INT64_MIN };
	wfind_init(&w.find);
	signal(SIGINT, on_sigint);
	signal(SIGTERM, on_sigint);
	setvbuf(stdout, NULL, _IOLBF, 0);
	int64_t start = now_real(), next = start + (int64_t)(interval * 1e9);
	int alarmed = 0, rc = 0, done = 0;
	while (!stop_asked && !done) {
		scan(&w);
		done = follow(&w);
		if (!done && launchers_done(&w)) {
			fprintf(stderr, "ddpspy watch: the job's launcher ended and no rank's file came to %s\n", w.dir);
			rc = 1;
			break;
		}
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
			prom_wait(lfd, 100, watch_metrics, &w); /* (a look every 0.1 s: a writer flushes about that often) */
	}
	if (lfd >= 0)
		close(lfd);
	if (done)
		printf("watch: every file is complete (%d followed; the intervals' analyses took %.2f s of CPU)\n", w.n,
		       w.find.cpu_s);
	watch_free(&w);
	free(pos);
	return rc;
}
