/* ddpspy view DIR... -o FILE[.gz]: the job as Chrome Trace Event JSON, the format Perfetto UI and
 * Chromium's DevTools (Performance panel) open. One process per rank in rank order, with its
 * threads, its input workers' threads and its GPU streams; a steps track per rank, with the
 * findings as instants; a critical-path track; each collective joined across ranks by flow arrows
 * from the last rank to arrive to each rank that waited for it; the input read rate as a counter.
 * Times on the report's aligned clock, microseconds from the job's start. A few steps by default
 * (the slowest and some typical ones) and at most --max-events events, so that a long job's view
 * opens in a browser (docs/viewer.md). */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "../collector/cli.h"
#include "../collector/json.h"
#include "view_int.h"

/* ---- the output's file (view_int.h: struct sink) ---- */

static ssize_t sink_write(void *c, const char *b, size_t n)
{
	struct sink *s = c;
	if (n && (s->gz ? gzwrite(s->gz, b, (unsigned)n) != (int)n : fwrite(b, 1, n, s->f) != n))
		return -1;
	s->bytes += n;
	return (ssize_t)n;
}

static int sink_close(void *c)
{
	struct sink *s = c;
	return s->gz ? (gzclose(s->gz) == Z_OK ? 0 : -1) : fclose(s->f);
}

/* ---- the view ---- */

/* an argument's value as the report names it: operations, descriptor classes, copy directions */
static void arg_value(FILE *o, const char *name, int kind, int64_t x)
{
	if (!strcmp(name, "op") && x >= 0 && x < DDPSPY_OP_COUNT)
		json_put_string(o, ddpspy_op_names[x], SIZE_MAX);
	else if (!strcmp(name, "fdclass") && x >= 0 && x < DDPSPY_FDCLASS_COUNT)
		json_put_string(o, ddpspy_fdclass_names[x], SIZE_MAX);
	else if (kind == DDPSPY_EV_CUDA_MEMCPY && !strcmp(name, "dir") && x >= 0 && x < DDPSPY_DIR_COUNT)
		json_put_string(o, ddpspy_cuda_dir_names[x], SIZE_MAX);
	else if (kind == DDPSPY_EV_CUDA_SYNC && !strcmp(name, "what") && x >= 0 && x < DDPSPY_SYNC_COUNT)
		json_put_string(o, ddpspy_cuda_sync_names[x], SIZE_MAX);
	else
		fprintf(o, "%lld", (long long)x);
}

/* "python": a stack's Python frames, innermost first, "function (file:line)"; after another
 * argument when comma */
static void python_arg(FILE *o, const struct trace_stack *s, int comma)
{
	fputs(comma ? ",\"python\":[" : "\"python\":[", o);
	for (uint32_t i = 0; i < s->npy; i++) {
		char fr[512];
		snprintf(fr, sizeof fr, "%s (%s:%d)", s->py[i].func, s->py[i].file, s->py[i].line);
		if (i)
			fputc(',', o);
		json_put_string(o, fr, SIZE_MAX);
	}
	fputc(']', o);
}

static void on_call(void *ctx, const struct proc *p, const struct vw_call *c)
{
	struct view *v = ctx;
	const struct ev *e = &c->v;
	const struct trace_event *te = c->e;
	const struct kind *k = an_kind(e->kind);
	int arrival = !v->worker && !c->inflight && vw_is_arrival(e);
	/* the synchronizing calls (collectives, their waits, step markers) are always shown: they are
	 * what the steps, the flows and the critical path are made of; the budget is for the rest */
	int sync = an_is_sync_kind(e->kind);
	int shown = vo_take(v, sync || c->inflight, 1);
	/* the input read rate, of the rank and its workers */
	if (an_is_file_read(e) && e->bytes > 0 && v->bins) {
		const struct vwin *w = &v->w[c->win];
		int64_t span = w->t1 - w->t0 > 0 ? w->t1 - w->t0 : 1;
		int64_t b = (e->t - w->t0) * RATE_BINS / span;
		v->bins[c->win * RATE_BINS + (b < 0 ? 0 : b >= RATE_BINS ? RATE_BINS - 1 : b)] += (double)e->bytes;
	}
	if (arrival) {
		struct varr a = { .rank = v->r, .comm = e->comm, .seq = e->seq, .op = e->op, .t = e->t, .end = e->t + e->d,
				  .bytes = e->bytes, .tid = te->tid, .shown = shown };
		v->oom |= vw_arr_add(&v->arr, &a) < 0;
	}
	if (!shown)
		return;
	int cat = an_category(e);
	int point = cat == DDPSPY_CAT_MARKER;
	vo_ev(v, point ? "i" : "X", v->pid[v->r], te->tid, e->t);
	if (point)
		fputs(",\"s\":\"t\"", v->o);
	else
		vo_us(v->o, "dur", e->d);
	char nb[40];
	const char *name = ddpspy_event_names[e->kind];
	if (k->op >= 0 && e->op >= 0 && e->op < DDPSPY_OP_COUNT) /* MPI's nonblocking ones as MPI names them */
		snprintf(nb, sizeof nb, "%s%s", e->kind == DDPSPY_EV_MPI_ICOLL ? "i" : "", ddpspy_op_names[e->op]), name = nb;
	if (e->kind == DDPSPY_EV_STEP)
		name = e->op ? "step begin" : "step end";
	char fl[64];
	if (c->inflight) /* (a call that never returned: until the file's last look at it) */
		snprintf(fl, sizeof fl, "%s (in flight)", name), name = fl;
	fputs(",\"name\":", v->o);
	json_put_string(v->o, name, SIZE_MAX);
	fprintf(v->o, ",\"cat\":\"%s\",\"args\":{\"call\":\"%s\"", point ? "marker" : ddpspy_category_names[cat],
	      ddpspy_event_names[e->kind]);
	for (int i = 0; i < te->nargs && i < TRACE_MAX_ARGS; i++) {
		const char *an = (unsigned)te->kind < DDPSPY_EV_COUNT ? v->argnames[te->kind][i] : NULL;
		if (!an || i == te->str_index)
			continue;
		fprintf(v->o, ",\"%s\":", an);
		arg_value(v->o, an, te->kind, te->args[i]);
	}
	if (c->path) {
		fputs(",\"path\":", v->o);
		json_put_string(v->o, c->path, c->pathlen);
	} else if (te->str_index >= 0 && te->str) {
		const char *an = v->argnames[te->kind][te->str_index];
		fprintf(v->o, ",\"%s\":", an ? an : "text");
		json_put_string(v->o, te->str, te->slen);
	}
	if (c->inflight)
		fputs(",\"in_flight\":true", v->o);
	if (c->stack && c->stack->npy)
		python_arg(v->o, c->stack, 1);
	fputs("}}", v->o);
	vo_seen_tid(v, te->tid);
}

/* a sample of the main thread's Python frames: an instant on its thread, named by the innermost
 * frame, the frames in its args */
static void on_sample(void *ctx, const struct proc *p, int tid, int64_t t, int win, const struct trace_stack *s)
{
	struct view *v = ctx;
	(void)p, (void)win;
	if (!vo_take(v, 0, 1))
		return;
	char name[256];
	const char *base = strrchr(s->py[0].file, '/');
	snprintf(name, sizeof name, "%s (%s:%d)", s->py[0].func, base ? base + 1 : s->py[0].file, s->py[0].line);
	vo_ev(v, "i", v->pid[v->r], tid, t);
	fputs(",\"s\":\"t\",\"name\":", v->o);
	json_put_string(v->o, name, SIZE_MAX);
	fputs(",\"cat\":\"python sample\",\"args\":{", v->o);
	python_arg(v->o, s, 0);
	fputs("}}", v->o);
	vo_seen_tid(v, tid);
}

/* a sample of the main thread's native stack on a CPU: an instant on its thread, named by its
 * innermost function, the frames in its args */
static void on_cpusample(void *ctx, const struct proc *p, int tid, int64_t t, int win, const char *site,
			 const char (*frames)[VW_FRAME], int n)
{
	struct view *v = ctx;
	(void)p, (void)win;
	if (!vo_take(v, 0, 1))
		return;
	vo_ev(v, "i", v->pid[v->r], tid, t);
	fputs(",\"s\":\"t\",\"name\":", v->o);
	json_put_string(v->o, site, SIZE_MAX);
	fputs(",\"cat\":\"cpu sample\",\"args\":{\"frames\":[", v->o);
	for (int i = 0; i < n; i++) {
		if (i)
			fputc(',', v->o);
		json_put_string(v->o, frames[i], SIZE_MAX);
	}
	fputs("]}}", v->o);
	vo_seen_tid(v, tid);
}

static void on_thread(void *ctx, const struct proc *p, int tid, const char *name)
{
	struct view *v = ctx;
	const struct thr *t = an_train_thread(p);
	int train = !v->worker && t && t->tid == tid, seen = train;
	for (int i = 0; i < v->ntids; i++)
		seen |= v->tids[i] == tid;
	if (!seen || !v->show[v->r])
		return;
	char b[128];
	if (v->worker)
		snprintf(b, sizeof b, "worker %d: %s", p->pid, name[0] ? name : "?");
	else if (train)
		snprintf(b, sizeof b, "%s (training thread)", name[0] ? name : "main");
	else
		snprintf(b, sizeof b, "%s", name[0] ? name : "thread");
	vo_meta(v, "thread_name", v->pid[v->r], tid, b, train ? 1 : v->worker ? 1000 : 10);
}


/* Flows for point-to-point waits (collector/p2p.c): from the late peer's send (or receive) to the
 * call that waited for it, where both are in the steps shown */
static void p2p_flows(struct view *v)
{
	const struct analysis *a = v->a;
	const struct stepdata *sd = a->sd;
	for (size_t i = 0; sd && sd->pblk && i < sd->npblk; i++) {
		const struct an_p2pblk *b = &sd->pblk[i];
		if (b->L < 0 || b->wait <= 0 || !v->show[b->r] || !v->show[b->L] ||
		    vw_window_of(v->w, v->nw, b->t, b->t) < 0 || vw_window_of(v->w, v->nw, b->post, b->post) < 0)
			continue;
		const struct thr *tl = an_train_thread(a->ranks[b->L].p), *tr = an_train_thread(a->ranks[b->r].p);
		if (!tl || !tr)
			continue;
		char nm[64];
		snprintf(nm, sizeof nm, "waited for rank %d (late %s)", a->ranks[b->L].rank,
			 b->late_sender ? "sender" : "receiver");
		v->flows++;
		vo_ev(v, "s", v->pid[b->L], tl->tid, b->post);
		fprintf(v->o, ",\"id\":%llu,\"cat\":\"comms\",\"name\":\"%s\"}", (unsigned long long)v->flows, nm);
		vo_ev(v, "f", v->pid[b->r], tr->tid, b->t);
		fprintf(v->o, ",\"bp\":\"e\",\"id\":%llu,\"cat\":\"comms\",\"name\":\"%s\"}", (unsigned long long)v->flows,
			nm);
	}
}

/* The critical path per window, from the collectives the ranks share: up to each collective's
 * last arrival, the rank that arrived last (everyone waited for it); then the collective itself;
 * after the last one, the rank whose step ended last. Device collectives (NCCL kernels) where
 * there are any, the host's otherwise. And the flows: from each collective's last arrival to
 * every rank that arrived before it. */
static void crit_and_flows(struct view *v)
{
	const struct analysis *a = v->a;
	struct varrs *s = &v->arr;
	vw_arr_sort(s);
	int gpu = s->n && s->v[s->n - 1].gpu; /* (sorted: device ones last) */
	/* flows */
	for (size_t i = 0; i < s->n;) {
		size_t j = vw_inst(s, i);
		const struct varr *L = &s->v[j - 1];
		for (size_t m = i; L->shown && m + 1 < j; m++) {
			const struct varr *r = &s->v[m];
			if (!r->shown || r->rank == L->rank || r->t >= L->t)
				continue;

			const char *cat = L->gpu ? "gpu" : "comms";
			char nm[48];
			snprintf(nm, sizeof nm, "waited for rank %d", a->ranks[L->rank].rank);
			v->flows++;
			vo_ev(v, "s", v->pid[L->rank], L->tid, L->t);
			fprintf(v->o, ",\"id\":%llu,\"cat\":\"%s\",\"name\":\"%s\"}", (unsigned long long)v->flows, cat, nm);
			vo_ev(v, "f", v->pid[r->rank], r->tid, r->t);
			fprintf(v->o, ",\"bp\":\"e\",\"id\":%llu,\"cat\":\"%s\",\"name\":\"%s\"}", (unsigned long long)v->flows, cat,
			      nm);
		}
		i = j;
	}
	/* the critical path: the instances' last arrivals in time order */
	size_t ni = 0;
	struct varr **last = malloc((s->n + 1) * sizeof *last);
	if (!last) {
		v->oom = 1;
		return;
	}
	for (size_t i = 0; i < s->n;) {
		size_t j = vw_inst(s, i);
		if (s->v[i].gpu == gpu && j - i > 1)
			last[ni++] = &s->v[j - 1];
		i = j;
	}
	for (size_t x = 1; x < ni; x++) /* insertion sort by time: nearly sorted already */
		for (size_t y = x; y > 0 && last[y]->t < last[y - 1]->t; y--) {
			struct varr *t = last[y];
			last[y] = last[y - 1];
			last[y - 1] = t;
		}
	size_t q = 0;
	for (int w = 0; w < v->nw; w++) {
		int64_t cur = v->w[w].t0;
		while (q < ni && last[q]->t < v->w[w].t0)
			q++;
		for (; q < ni && last[q]->t <= v->w[w].t1; q++) {
			const struct varr *L = last[q];
			size_t i0 = (size_t)(L - s->v);
			while (i0 > 0 && s->v[i0 - 1].gpu == L->gpu && s->v[i0 - 1].comm == L->comm && s->v[i0 - 1].seq == L->seq)
				i0--;
			double waited = 0;
			for (const struct varr *r = &s->v[i0]; r < L; r++)
				waited += MS(L->t - r->t);
			const char *op = L->op >= 0 && L->op < DDPSPY_OP_COUNT ? ddpspy_op_names[L->op] : "collective";
			if (L->t > cur) {
				char nm[48];
				snprintf(nm, sizeof nm, "rank %d", a->ranks[L->rank].rank);
				vo_ev(v, "X", CRIT_PID, 1, cur);
				vo_us(v->o, "dur", L->t - cur);
				fputs(",\"cat\":\"critical\",\"name\":", v->o);
				json_put_string(v->o, nm, SIZE_MAX);
				fprintf(v->o, ",\"args\":{\"rank\":%d,\"why\":\"the last to reach %s %d (%s)\",\"others_waited_ms\":%.3f}}",
				      a->ranks[L->rank].rank, op, L->seq, L->gpu ? "its NCCL kernel" : "its call", waited);
				cur = L->t;
			}
			if (L->end > cur) {
				vo_ev(v, "X", CRIT_PID, 1, cur);
				vo_us(v->o, "dur", L->end - cur);
				fprintf(v->o, ",\"cat\":\"critical\",\"name\":\"%s\",\"args\":{\"seq\":%d,\"bytes\":%lld,\"on\":\"%s\"}}",
				      op, L->seq, (long long)L->bytes, L->gpu ? "device" : "host");
				cur = L->end;
			}
		}
		/* after the last collective: the rank whose step ended last */
		int late = -1;
		int64_t end = INT64_MIN;
		for (int r = 0; r < a->nranks; r++)
			if (a->ranks[r].steps && a->ranks[r].steps[v->w[w].k1].t1 > end && v->w[w].first >= 0) {
				end = a->ranks[r].steps[v->w[w].k1].t1;
				late = r;
			}
		if (late >= 0 && end > cur) {
			char nm[48];
			snprintf(nm, sizeof nm, "rank %d", a->ranks[late].rank);
			vo_ev(v, "X", CRIT_PID, 1, cur);
			vo_us(v->o, "dur", end - cur);
			fputs(",\"cat\":\"critical\",\"name\":", v->o);
			json_put_string(v->o, nm, SIZE_MAX);
			fprintf(v->o, ",\"args\":{\"rank\":%d,\"why\":\"its step ended last\"}}", a->ranks[late].rank);
		}
	}
	free(last);
	vo_finding_marks(v, CRIT_PID, 1, -1, NULL);
	vo_meta(v, "process_name", CRIT_PID, 0, "critical path", -1);
	vo_meta(v, "thread_name", CRIT_PID, 1, gpu ? "critical path (NCCL kernels)" : "critical path", LONG_MIN);
}

static void usage(FILE *to)
{
	fprintf(to, "usage: ddpspy view DIR... -o FILE[.gz] [--steps A-B] [--ranks LIST] [--skip N] [--max-events N]\n"
		    "  -o FILE          Chrome Trace Event JSON (gzip'ed when FILE ends in .gz), for ui.perfetto.dev\n"
		    "                   or Chromium's DevTools Performance panel\n"
		    "  --steps A-B      these steps (numbered from the first, warm-up included); default: the %d\n"
		    "                   slowest and %d typical steps\n"
		    "  --ranks LIST     only these ranks, e.g. 0,2-3 (the analysis still uses them all)\n"
		    "  --skip N         warm-up steps the analysis leaves out (default 2, as report)\n"
		    "  --max-events N   at most N calls and GPU records other than collectives and their waits,\n"
		    "                   which are always shown (default 300000, some 52 MB)\n",
		NSLOW, NTYP);
}

/* what every rank's tracks need: the processes' ids in the view, the events' argument names, the
 * job's start, and each file's share of the events (maxev over the files shown) */
static void view_setup(struct view *v, long maxev)
{
	const struct analysis *a = v->a;
	/* the processes' own pids where they are unique in the job, else rank + 1 */
	int unique = 1;
	for (int r = 0; r < a->nranks; r++)
		for (int q = 0; q < r; q++)
			unique &= a->ranks[r].p->pid != a->ranks[q].p->pid;
	for (int r = 0; r < a->nranks; r++)
		v->pid[r] = unique && a->ranks[r].p->pid > 0 ? a->ranks[r].p->pid : a->ranks[r].rank + 1;
	for (int k = 0; k < DDPSPY_EV_COUNT; k++) {
		const char *s = ddpspy_event_args[k];
		for (int i = 0; i < TRACE_MAX_ARGS && *s; i++) {
			size_t l = strcspn(s, ",");
			v->argnames[k][i] = strndup(s, l);
			s += l + (s[l] == ',');
		}
	}
	/* the job's start: its earliest event */
	v->base = INT64_MAX;
	for (int i = 0; i < a->nprocs; i++)
		for (int h = 0; h < a->procs[i].nthr; h++)
			if (a->procs[i].thr[h].first <= a->procs[i].thr[h].last && a->procs[i].thr[h].first < v->base)
				v->base = a->procs[i].thr[h].first;
	if (v->base == INT64_MAX)
		v->base = 0;
	/* the files shown share the budget */
	int nfiles = 0;
	for (int i = 0; i < a->nprocs; i++) {
		const struct proc *p = &a->procs[i];
		for (int r = 0; r < a->nranks; r++)
			nfiles += v->show[r] && (p == a->ranks[r].p || (p->role == DDPSPY_ROLE_WORKER && p->parent_pid == a->ranks[r].p->pid &&
								 !strcmp(p->host, a->ranks[r].p->host)));
	}
	v->quota = maxev / (nfiles ? nfiles : 1);
}

/* every rank's tracks: its own file's calls, its GPU streams, its input workers' calls (read for
 * the flows whether the rank is shown or not), then, where shown, its names, steps and rates */
static void view_ranks(struct view *v)
{
	const struct analysis *a = v->a;
	struct vw_reader rd = { .ctx = v, .call = on_call, .thread = on_thread, .nvtx = vo_on_nvtx, .sample = on_sample,
				 .cpusample = on_cpusample };
	for (int r = 0; r < a->nranks; r++) {
		const struct proc *p = a->ranks[r].p;
		v->r = r;
		memset(v->bins, 0, (size_t)v->nw * RATE_BINS * sizeof *v->bins);
		/* the rank's own file, its GPU streams, its workers */
		v->worker = 0;
		v->used = 0;
		v->ntids = v->nnvt = v->nnvs = 0;
		if (vw_read(p, v->w, v->nw, &rd) < 0)
			fprintf(stderr, "ddpspy view: %s: cannot be read again; its calls are left out\n", p->file);
		vo_gpu_tracks(v);
		for (int i = 0; i < a->nprocs; i++) {
			const struct proc *w = &a->procs[i];
			if (w->role != DDPSPY_ROLE_WORKER || w->parent_pid != p->pid || strcmp(w->host, p->host))
				continue;
			v->worker = 1;
			v->used = 0;
			v->ntids = v->nnvt = v->nnvs = 0;
			if (vw_read(w, v->w, v->nw, &rd) < 0)
				fprintf(stderr, "ddpspy view: %s: cannot be read again; its calls are left out\n", w->file);
		}
		v->worker = 0;
		if (!v->show[r])
			continue;
		char nm[320];
		int stage = a->pipe_stage ? a->pipe_stage[r] : -1;
		if (stage >= 0) /* (a pipeline's ranks in stage order) */
			snprintf(nm, sizeof nm, "rank %d (stage %d)", a->ranks[r].rank, stage);
		else
			snprintf(nm, sizeof nm, "rank %d", a->ranks[r].rank);
		vo_meta(v, "process_name", v->pid[r], 0, nm,
		     stage >= 0 ? (long)stage * a->nranks + a->ranks[r].rank : a->ranks[r].rank);
		snprintf(nm, sizeof nm, "%s, pid %d", p->host, p->pid);
		fprintf(v->o, ",\n{\"ph\":\"M\",\"pid\":%d,\"tid\":0,\"name\":\"process_labels\",\"args\":{\"labels\":", v->pid[r]);
		json_put_string(v->o, nm, SIZE_MAX);
		fputs("}}", v->o);
		vo_steps_track(v);
		vo_pipe_track(v);
		vo_rate_track(v);
	}
}

/* the view's last member: the job, the steps shown, what was left out */
static void view_about(struct view *v, int nshow, long maxev)
{
	const struct analysis *a = v->a;
	fprintf(v->o, "\n],\"otherData\":{\"tool\":\"ddpspy %s\",\"verdict\":", DDPSPY_VERSION);
	json_put_string(v->o, a->summary, SIZE_MAX);
	fprintf(v->o, ",\"clock\":\"%s\",\"ranks\":%d,\"ranks_shown\":%d,\"steps_shown\":\"", a->clock_method, a->nranks, nshow);
	for (int w = 0; w < v->nw; w++) {
		if (v->w[w].hang)
			fprintf(v->o, "%sthe hang", w ? "," : "");
		else if (v->w[w].first < 0)
			fprintf(v->o, "the whole run (no steps found)");
		else if (v->w[w].first == v->w[w].last)
			fprintf(v->o, "%s%d", w ? "," : "", v->w[w].first);
		else
			fprintf(v->o, "%s%d-%d", w ? "," : "", v->w[w].first, v->w[w].last);
	}
	fprintf(v->o, "\",\"events\":%llu,\"flows\":%llu,\"max_events\":%ld,\"left_out\":%llu}}\n",
	      (unsigned long long)v->events, (unsigned long long)v->flows, maxev, (unsigned long long)v->left_out);
}

/* what the view holds, said on stderr: the ranks and steps, its size, what was left out, and the
 * analysis's warnings */
static void view_said(const struct view *v, const char *outp, int nshow, long maxev)
{
	fprintf(stderr, "ddpspy view: wrote %s: %d rank%s, steps ", outp, nshow, nshow == 1 ? "" : "s");
	for (int w = 0; w < v->nw; w++)
		if (v->w[w].hang)
			fprintf(stderr, "%sthe hang", w ? ", " : "");
		else if (v->w[w].first < 0)
			fprintf(stderr, "(none found: the whole run)");
		else
			fprintf(stderr, w ? ", %d-%d" : "%d-%d", v->w[w].first, v->w[w].last);
	fprintf(stderr, "; %llu events, %llu flows, %.1f MB (%.0f bytes per event)%s\n", (unsigned long long)v->events,
		(unsigned long long)v->flows, (double)v->sink.bytes / 1e6,
		v->events ? (double)v->sink.bytes / (double)v->events : 0.0, v->sink.gz ? " before gzip" : "");
	if (v->left_out)
		fprintf(stderr, "ddpspy view: %llu events left out to stay within --max-events %ld (pick fewer steps or "
			"ranks to see them)\n", (unsigned long long)v->left_out, maxev);
	for (int i = 0; i < v->a->nwarnings; i++)
		fprintf(stderr, "ddpspy view: warning: %s\n", text_safe(v->a->warnings[i], SIZE_MAX));
}

/* the view's file at outp (gzip'ed when it ends in .gz) as v->o, counting the bytes written; -1
 * (said) when it cannot be written */
static int view_open(struct view *v, const char *outp)
{
	size_t ol = strlen(outp);
	if (ol > 3 && !strcmp(outp + ol - 3, ".gz"))
		v->sink.gz = gzopen(outp, "wb6");
	else
		v->sink.f = fopen(outp, "w");
	cookie_io_functions_t io = { .write = sink_write, .close = sink_close };
	if ((!v->sink.gz && !v->sink.f) || !(v->o = fopencookie(&v->sink, "w", io))) {
		fprintf(stderr, "ddpspy view: cannot write %s: %s\n", outp, strerror(errno));
		if (v->sink.gz || v->sink.f)
			sink_close(&v->sink);
		return -1;
	}
	setvbuf(v->o, NULL, _IOFBF, 1 << 16);
	return 0;
}

int cmd_view(int argc, char **argv)
{
	const char *outp = NULL, *steps = NULL;
	long skip = 2, maxev = 300000;
	int rc = 2;
	struct cli_ranks rk = { NULL, 0 };
	char **dirs = calloc((size_t)argc + 1, sizeof *dirs);
	int ndirs = 0;
	if (!dirs)
		return 2;
	const struct cli_opt opts[] = {
		{ "-o", NULL, CLI_STR, &outp, 0, 0, NULL, 0 },
		{ "--steps", NULL, CLI_STR, &steps, 0, 0, NULL, 0 },
		{ "--ranks", NULL, CLI_RANKS, &rk, 0, 0, "a list like 0,2-3", 0 },
		{ "--skip", NULL, CLI_LONG, &skip, 0, 1000000000, "a whole number >= 0", 0 },
		{ "--max-events", NULL, CLI_LONG, &maxev, 1, 1000000000, "a whole number >= 1", 0 },
		{ NULL, NULL, CLI_FLAG, NULL, 0, 0, NULL, 0 },
	};
	const struct cli c = { "view", opts, usage, 0 };
	int got = cli_parse(&c, argc, argv, dirs, &ndirs);
	if (got) {
		rc = got > 0 ? 0 : 2;
		goto out;
	}
	if (!ndirs || !outp) {
		usage(stderr);
		goto out;
	}
	struct report_options ro = { .skip = (int)skip };
	struct analysis a;
	char err[512];
	if (analysis_run(&a, dirs, ndirs, &ro, err, sizeof err) != 0) {
		fprintf(stderr, "ddpspy view: %s\n", text_safe(err, SIZE_MAX));
		analysis_free(&a);
		goto out;
	}
	an_words(&a);
	if (a.nranks > 131071) { /* (the tracks' tids: STEP_TID) */
		fprintf(stderr, "ddpspy view: %d ranks: at most 131071 ranks in one view\n", a.nranks);
		analysis_free(&a);
		goto out;
	}
	struct view *v = calloc(1, sizeof *v);
	int *show = calloc((size_t)a.nranks, sizeof *show);
	if (!v || !show) {
		fprintf(stderr, "ddpspy view: out of memory\n");
		goto done;
	}
	v->a = &a;
	v->show = show;
	int nshow = 0;
	for (int r = 0; r < a.nranks; r++) {
		show[r] = !rk.v;
		for (int i = 0; i < rk.n; i++)
			show[r] |= rk.v[i] == a.ranks[r].rank;
		nshow += show[r];
	}
	if (!nshow) {
		fprintf(stderr, "ddpspy view: none of the --ranks asked for is in the trace (ranks %d-%d)\n",
			a.ranks[0].rank, a.ranks[a.nranks - 1].rank);
		goto done;
	}
	v->nw = vw_windows(&a, steps, NSLOW, NTYP, &v->w, err, sizeof err);
	if (v->nw < 0) {
		fprintf(stderr, "ddpspy view: %s\n", err);
		goto done;
	}
	if (!steps)
		v->nw = vw_add_hang(&a, &v->w, v->nw);
	v->pid = calloc((size_t)a.nranks, sizeof *v->pid);
	v->bins = calloc((size_t)v->nw * RATE_BINS, sizeof *v->bins);
	if (!v->pid || !v->bins) {
		fprintf(stderr, "ddpspy view: out of memory\n");
		goto done;
	}
	view_setup(v, maxev);
	if (view_open(v, outp) < 0)
		goto done;
	fputs("{\"displayTimeUnit\":\"ms\",\"traceEvents\":[", v->o);
	/* the first member: the job, described */
	fprintf(v->o, "\n{\"ph\":\"M\",\"pid\":%d,\"tid\":0,\"name\":\"process_labels\",\"args\":{\"labels\":", CRIT_PID);
	json_put_string(v->o, a.summary, SIZE_MAX);
	fputs("}}", v->o);
	view_ranks(v);
	vo_pipe_device(v);
	crit_and_flows(v);
	p2p_flows(v);
	view_about(v, nshow, maxev);
	int werr = fflush(v->o) != 0 || ferror(v->o) ? errno ? errno : EIO : 0;
	if (fclose(v->o) != 0 && !werr)
		werr = errno ? errno : EIO;
	if (werr) {
		fprintf(stderr, "ddpspy view: writing %s failed: %s\n", outp, strerror(werr));
		goto done;
	}
	if (v->oom)
		fprintf(stderr, "ddpspy view: out of memory joining collectives; some flows are missing\n");
	view_said(v, outp, nshow, maxev);
	rc = 0;
done:
	if (v) {
		for (int k = 0; k < DDPSPY_EV_COUNT; k++)
			for (int i = 0; i < TRACE_MAX_ARGS; i++)
				free((char *)v->argnames[k][i]);
		free(v->w);
		free(v->pid);
		free(v->bins);
		free(v->arr.v);
		free(v->nvt);
		free(v->nvs);
	}
	free(v);
	free(show);
	analysis_free(&a);
out:
	free(rk.v);
	free(dirs);
	return rc;
}
