/* The GPU's steps (docs/report.md, section 8): each analysed step of a rank with device work split
 * from its device's timeline (gpu.c's records, on the job's clock) rather than from the training
 * thread's calls, which on a GPU only enqueue work.
 *
 * A step on the device: each of the host's step bounds (steps.c) mapped to when the computation
 * enqueued before it ended (the work of the streams that run compute kernels), the latest over
 * the ranks, so that the device's steps tile its timeline as the host's tile the host's and are
 * the same on every rank. Steps that are time windows (no step found in the program) stay the
 * host's windows: a window's edge is no point where the host enqueues a step, and mapped so they
 * closed to nothing once the device had drained. Within a step every instant is the first of: a
 * compute kernel, a copy or set other than an input copy (compute); a host-to-device copy (data);
 * an NCCL kernel (comms: its part before the last rank's kernel of the same collective started is
 * a wait for that rank, the rest transfer); or idle, charged to what the training thread did then:
 * waiting for input (data), held by a pageable copy, waiting for the device or right after such a
 * wait returned, which had let the device's queue run dry (host: sync), launching kernels back to
 * back (host: launch), in a collective of its own (comms), or anything else (host). A rank whose
 * only device times are NCCL's profiler plugin's keeps its host's steps and gets its NCCL figures.
 * The host's lanes (what the training thread did, by kind) are gathered while split.c streams the
 * thread. */
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/format.h"
#include "analysis_int.h"
#include "gpu_int.h"
#include "trace.h"

#define LAUNCH_RUN_NS 50000   /* launch calls closer than this are one run of launching */
#define AFTER_SYNC_NS 200000  /* an idle gap that begins this soon after a wait for the device */

/* when all the work launched before host time t ended: ends[] is the running maximum of the
 * works' ends in launch order */
static int64_t drained(const struct gwork *w, const int64_t *ends, size_t n, int64_t t)
{
	size_t i = an_first_at(w, n, sizeof *w, offsetof(struct gwork, launch), t);
	return i ? ends[i - 1] : INT64_MIN;
}

/* a boundary in the sweep: a work or host interval starts (+1) or ends (-1) */
enum { H_DATA = GW_COUNT, H_PAGEABLE, H_SYNC, H_LAUNCH, H_COMMS, NLANE };
struct edge {
	int64_t t;
	int32_t wait;  /* NCCL, on +1: its wait for the last rank (split_rank's waits[wait]), else -1 */
	int8_t lane, delta;
};

struct nwait {
	int64_t ns;    /* the ns from the kernel's start that are a wait for the last rank ... */
	int32_t late, p2p; /* ... that rank; p2p: in a send or receive (a message's kernel) */
};

static int cmp_edge(const void *x, const void *y)
{
	const struct edge *a = x, *b = y;
	return AN_ORDER(a->t, b->t) ?:
	       AN_ORDER(a->delta, b->delta) ?:
	       AN_ORDER(a->lane, b->lane) ?:
	       AN_ORDER(a->wait, b->wait);
}

struct hostlanes {
	struct edge *e;
	size_t n, cap;
	int64_t *page;         /* launch times (job clock) of copies from or to pageable memory, in order */
	size_t npage;
};

static int add_edge(struct hostlanes *h, int64_t t, int64_t d, int lane)
{
	if (d <= 0)
		return 0;
	for (int end = 0; end < 2; end++) { /* (its start, then its end) */
		struct edge *grown = room_for(h->e, h->n, &h->cap, sizeof *grown, 256);
		if (!grown)
			return 1;
		(h->e = grown)[h->n++] = (struct edge){ end ? t + d : t, -1, (int8_t)lane, end ? -1 : 1 };
	}
	return 0;
}

static void api_waits(const struct proc *p, struct hostlanes *h);

struct hostlanes *an_gpu_lanes_new(const struct proc *p)
{
	const struct gpuproc *g = p->gpu;
	struct hostlanes *h = g && g->nall ? calloc(1, sizeof *h) : NULL;
	if (h && !(h->page = malloc((g->nw + 1) * sizeof *h->page))) {
		free(h);
		return NULL;
	}
	for (size_t i = 0; h && i < g->nw; i++) /* (a few bytes read back, a loss's .item(), are a sync) */
		if (g->w[i].pageable && g->w[i].bytes >= PAGEABLE_MIN)
			h->page[h->npage++] = an_job_time(p, g->w[i].launch); /* (gpu.c's own times move later: place) */
	if (h && !g->host_cuda)
		api_waits(p, h);
	return h;
}

void an_gpu_lanes_free(struct hostlanes *h)
{
	if (h) {
		free(h->e);
		free(h->page);
		free(h);
	}
}

/* The training thread's waits for the device from CUPTI's records of its runtime calls, where the
 * preload's wrappers saw none (nvcc's default static cudart, a library that calls a cudart it
 * loaded itself): as the wrappers take them (preload/cuda.c), a run of queries each no more than
 * POLL_GAP_NS after the last one wait. */
#define POLL_GAP_NS 20000
static void api_waits(const struct proc *p, struct hostlanes *h)
{
	const struct gpuproc *g = p->gpu;
	const struct thr *t = an_train_thread(p);
	int me = t ? an_gpu_thread_of(g, t->cupti_id) : -1; /* (its index in the calls' threads) */
	int64_t p0 = 0, p1 = -1; /* the run of queries so far */
	for (size_t i = 0; me >= 0 && i < g->na; i++) { /* (in time order: identify) */
		const struct gapi *a = &g->api[i];
		if (a->thread != me || !a->wait)
			continue;
		int64_t t0 = an_job_time(p, a->t);
		if (p1 >= 0 && (a->wait != W_POLL || t0 - p1 > POLL_GAP_NS)) {
			add_edge(h, p0, p1 - p0, H_SYNC);
			p1 = -1;
		}
		if (a->wait == W_POLL) {
			if (p1 < 0)
				p0 = t0;
			p1 = t0 + a->d;
		} else if (a->wait == W_ALWAYS || a->d >= SYNC_MIN_NS) {
			add_edge(h, t0, a->d, H_SYNC);
		}
	}
	if (p1 >= 0)
		add_edge(h, p0, p1 - p0, H_SYNC);
}

/* the training thread's waits for input and for the device, from its calls (out of memory: the
 * edges so far) */
void an_gpu_lanes_event(struct hostlanes *h, const struct ev *e)
{
	int c = an_category(e);
	if (c == CAT_DATA) {
		add_edge(h, e->t, e->d, H_DATA);
	} else if (e->kind == DDPSPY_EV_CUDA_MEMCPY && e->d >= SYNC_MIN_NS) {
		/* held by a copy: one of pageable memory if such a copy was launched inside the call */
		size_t i = an_first_at(h->page, h->npage, sizeof *h->page, 0, e->t);
		add_edge(h, e->t, e->d, i < h->npage && h->page[i] < e->t + e->d ? H_PAGEABLE : H_SYNC);
	} else if (e->kind == DDPSPY_EV_CUDA_SYNC) {
		add_edge(h, e->t, e->d, H_SYNC);
	} else if (c == CAT_COMMS && !(an_kind(e->kind)->m & DDPSPY_KM_ENQUEUES) && e->d >= SYNC_MIN_NS) {
		add_edge(h, e->t, e->d, H_COMMS); /* a collective of the host's own (MPI, gloo) */
	}
}

/* the instance of NCCL kernel w in the job's table of device collectives */
static struct inst *ginst(struct itab *t, const struct gwork *w, int create)
{
	/* (kernels matched by order: a sequence that no communicator's numbers reach) */
	return w->seq >= 0 ? an_inst_get(t, w->comm == INT32_MIN ? -7 : w->comm, w->seq, create) : NULL;
}

/* the median of the n values v (reordered), 0 none */
static double p50(double *v, size_t n)
{
	return n ? an_quantile_select(v, n, 0.5) : 0;
}

/* the step of bounds b (2 per step, in order) that holds t, -1 none */
static long step_of(const int64_t *b, size_t N, int64_t t)
{
	size_t k = an_first_at(b + 1, N, 2 * sizeof *b, 0, t + 1); /* the first step ending after t */
	return k < N && b[2 * k] <= t ? (long)k : -1;
}

/* the streams that run compute kernels (at most 64), into cs (lane: context and stream); returns
 * how many */
static int compute_streams(const struct gpuproc *g, uint64_t *cs)
{
	int ncs = 0;
	for (size_t i = 0; i < g->nw; i++) {
		int j = 0;
		while (j < ncs && cs[j] != lane(&g->w[i]))
			j++;
		if (g->w[i].cls == GW_COMPUTE && j == ncs && ncs < 64)
			cs[ncs++] = lane(&g->w[i]);
	}
	return ncs;
}

/* Rank r's device step bounds (b: 2 per step): each of its host's step bounds mapped to when the
 * computation enqueued before it ended on its device (before the first work: the first work's
 * start); windows (1: the steps are time windows) as they are. NCCL's own streams run behind the
 * computation: a step ends when its computation does, and a collective still running then is
 * exposed in the next. Returns -1 when out of memory. */
static int bounds(const struct rankinfo *ri, size_t N, int64_t *b, int windows)
{
	const struct gpuproc *g = ri->p->gpu;
	size_t nw = g->nw;
	if (windows) {
		for (size_t k = 0; k < N; k++)
			b[2 * k] = ri->steps[k].t0, b[2 * k + 1] = ri->steps[k].t1;
		return 0;
	}
	int64_t *ends = malloc((nw + 1) * sizeof *ends);
	if (!ends)
		return -1;
	uint64_t cs[64];
	int ncs = compute_streams(g, cs);
	int64_t run = INT64_MIN;
	for (size_t i = 0; i < nw; i++) {
		int j = 0;
		while (j < ncs && cs[j] != lane(&g->w[i]))
			j++;
		if (!ncs || j < ncs)
			run = g->w[i].t + g->w[i].d > run ? g->w[i].t + g->w[i].d : run;
		ends[i] = run;
	}
	for (size_t k = 0; k < N; k++) {
		int64_t t0 = drained(g->w, ends, nw, ri->steps[k].t0), t1 = drained(g->w, ends, nw, ri->steps[k].t1);
		if (t0 == INT64_MIN) {
			t0 = INT64_MAX;
			for (size_t i = 0; i < nw; i++)
				if (g->w[i].launch >= ri->steps[k].t0 && g->w[i].launch < ri->steps[k].t1 && g->w[i].t < t0)
					t0 = g->w[i].t;
		}
		b[2 * k] = t0;
		b[2 * k + 1] = t1 > t0 ? t1 : t0;
	}
	free(ends);
	return 0;
}

/* For NCCL kernels run on the compute stream: how much of them would still be exposed were they
 * started, on a stream of their own, as soon as backward produced their bytes; in ms per step.
 * Per step, in launch order since the step's input copy: a collective launched after compute
 * position T (the computation so far) is ready at T; several launched together after the same
 * T are spread evenly by bytes over the computation since the collectives before them, or since
 * backward began (two thirds of the computation up to the last collective: the forward:backward
 * rule of dense layers). They run one at a time for their measured transfer time (after the last
 * rank's kernel started); what runs past the last collective's position is left exposed. */
struct ocoll {
	double at, bytes, x; /* compute position (ns), bytes, transfer (ns) */
};

static double overlap_step(const struct ocoll *c, int n)
{
	double last = c[n - 1].at, from = last / 3, tn = 0;
	for (int i = 0; i < n;) {
		int j = i;
		double run = 0, cum = 0;
		while (j < n && c[j].at == c[i].at)
			run += c[j++].bytes;
		for (int q = i; q < j; q++) {
			cum += c[q].bytes;
			double ready = c[i].at > from ? from + (c[i].at - from) * (run > 0 ? cum / run : 1) : c[i].at;
			tn = (ready > tn ? ready : tn) + c[q].x;
		}
		from = c[i].at;
		i = j;
	}
	return tn > last ? tn - last : 0;
}

static double overlap_left(const struct gpuproc *g, struct itab *tab, const int64_t *b, size_t N)
{
	enum { MAXC = 256 };
	struct ocoll c[MAXC];
	double total = 0, pos = 0, steps = 0;
	long cur = -1;
	int nc = 0;
	for (size_t i = 0; i <= g->nw; i++) {
		const struct gwork *w = i < g->nw ? &g->w[i] : NULL;
		long k = w ? step_of(b, N, w->t) : -2;
		if (k != cur) {
			if (cur >= 0 && nc) {
				total += MS(overlap_step(c, nc));
				steps++;
			}
			cur = k;
			pos = 0;
			nc = 0;
		}
		if (!w || k < 0)
			continue;
		if (w->cls == GW_COPY_IN && !nc) {
			pos = 0; /* the batch's copy: forward starts after it */
		} else if (w->cls == GW_COMPUTE) {
			pos += (double)w->d;
		} else if (w->cls == GW_NCCL && nc < MAXC) {
			struct inst *in = ginst(tab, w, 0);
			int64_t wt = in && in->n > 1 && in->max_arr > w->t ? in->max_arr - w->t : 0;
			c[nc++] = (struct ocoll){ pos, (double)(w->bytes > 0 ? w->bytes : 1), (double)(w->d - (wt < w->d ? wt : w->d)) };
		}
	}
	return steps ? total / steps : 0;
}

/* The host step of ri's N (before they become the device's) in which w was launched, -1 none: by
 * its launching call (its start where none was seen). Not the device step it started in: a
 * collective that runs after its step's computation starts in the next device step, and at the
 * end of a block of a sample's steps in none, so a sample's counts would move by a block's edges. */
static long launch_step(const struct rankinfo *ri, size_t N, const struct gwork *w)
{
	size_t k = an_first_at(ri->steps, N, sizeof *ri->steps, offsetof(struct rankstep, t1), w->launch + 1);
	return k < N && ri->steps[k].t0 <= w->launch ? (long)k : -1;
}

/* An NCCL kernel w launched in step st into its rank's figures (gs), and its wait wt (before the
 * last rank's kernel of its collective started, in) into that collective's as the host saw it (its
 * calls, by communicator and sequence number: add). 1 when it has a lateness (*late: after the
 * first rank's kernel started), also st's latest. */
static int nccl_adds(struct stepdata *sd, struct waitadds *add, struct gpustat *gs, struct rankstep *st,
		     const struct gwork *w, const struct inst *in, int64_t wt, double *late)
{
	struct inst *hin = w->comm != INT32_MIN ? an_inst_get(&sd->tab, w->comm, w->seq, 0) : NULL;
	struct waitadd *wa = hin ? room_for(add->v, add->n, &add->cap, sizeof *add->v, 64) : NULL;
	if (wa)
		(add->v = wa)[add->n++] = (struct waitadd){ (size_t)(hin - sd->tab.v), MS(wt < w->d ? wt : w->d) };
	gs->nccl_ms += MS(w->d);
	gs->nccl_xfer_ms += MS(w->d - (wt < w->d ? wt : w->d));
	if (an_msg_op(w->op)) /* (a pipeline's: findpipe.c's, not the collectives' findings) */
		gs->p2p_ms[0] += MS(wt < w->d ? wt : w->d), gs->p2p_ms[1] += MS(w->d - (wt < w->d ? wt : w->d));
	gs->nccl_bytes += (double)(w->bytes > 0 ? w->bytes : 0);
	gs->nccl_calls++;
	gs->nccl_ops |= w->op >= 0 && w->op < 32 ? 1u << w->op : 1u << 31;
	if (w->bytes > gs->nccl_max_bytes) {
		gs->nccl_max_bytes = w->bytes;
		gs->nccl_max_op = w->op;
	}
	if (!in || in->n <= 1)
		return 0;
	*late = MS(w->t - in->min_arr);
	st->late_max = fmax(st->late_max, *late);
	return 1;
}

/* a piece of the sweep, [lo, hi) within one step, and what the sweep knows then: the NCCL wait
 * running to wait_until (for late_rank), the idle cause a wait began (after, 0: none) */
struct piece {
	int64_t lo, hi, wait_until;
	int late_rank, after, p2p; /* (p2p: the wait is a send's or a receive's) */
};

/* the piece charged to step q of rank index r (st) and to the device's parts, by the lanes busy
 * in it (cnt): the first that applies of the device's work, then the host's waits; an NCCL wait
 * also to the late rank it waited for */
static void charge(struct stepdata *sd, int r, size_t q, struct rankstep *st, double *part, const int *cnt,
		   const struct piece *pc)
{
	int64_t lo = pc->lo, hi = pc->hi, wait_until = pc->wait_until;
	int late_rank = pc->late_rank, after = pc->after, p2p = pc->p2p;
	double ms = MS(hi - lo);
	if (cnt[GW_COMPUTE] || cnt[GW_COPY]) {
		st->cat[CAT_COMPUTE] += ms;
		part[cnt[GW_COMPUTE] ? GP_COMPUTE : GP_COPY] += ms;
	} else if (cnt[GW_COPY_IN]) {
		st->cat[CAT_DATA] += ms;
		part[GP_COPY_IN] += ms;
	} else if (cnt[GW_NCCL]) {
		st->cat[CAT_COMMS] += ms;
		double wt = wait_until > lo ? MS((wait_until < hi ? wait_until : hi) - lo) : 0;
		st->wait += wt;
		part[GP_NCCL_WAIT] += wt;
		part[GP_NCCL] += ms - wt;
		if (wt > 0 && late_rank >= 0 && late_rank != r)
			an_wf_add(sd, r, q, late_rank, wt, p2p ? wt : 0);
	} else if (cnt[H_DATA]) {
		st->cat[CAT_DATA] += ms;
		part[GP_IDLE_DATA] += ms;
	} else if (cnt[H_PAGEABLE]) {
		st->cat[CAT_HOST] += ms;
		part[GP_IDLE_PAGEABLE] += ms;
	} else if (cnt[H_SYNC]) {
		st->cat[CAT_HOST] += ms;
		part[GP_IDLE_SYNC] += ms;
	} else if (cnt[H_LAUNCH]) {
		st->cat[CAT_HOST] += ms;
		part[GP_IDLE_LAUNCH] += ms;
	} else if (cnt[H_COMMS]) {
		st->cat[CAT_COMMS] += ms;
		part[GP_IDLE_COMMS] += ms;
	} else {
		st->cat[CAT_HOST] += ms;
		part[after ? after : GP_IDLE_OTHER] += ms;
	}
}

/* rank index r's device figures once its steps are swept: waits within the comms time, the parts
 * and counts per step, the kernels' and NCCL's lateness medians (kus: the kernels' times, then
 * room for the lateness), NCCL sharing a stream with compute, and the training thread's call site
 * that waited longest for the device */
static void rank_figures(struct stepdata *sd, struct itab *tab, int r, struct rankinfo *ri, const int64_t *b,
			 double *kus, size_t launches)
{
	struct gpuproc *g = ri->p->gpu;
	struct gpustat *gs = &ri->gpu;
	size_t N = sd->K, nw = g->nw;
	for (size_t q = 0; q < N; q++)
		if (ri->steps[q].wait > ri->steps[q].cat[CAT_COMMS])
			ri->steps[q].wait = ri->steps[q].cat[CAT_COMMS];
	gs->have = 1;
	for (int c = 0; c < GP_COUNT; c++)
		gs->part[c] /= (double)N;
	gs->kernel_us_p50 = kus && gs->kernels > 0 ? an_quantile_select(kus, (size_t)gs->kernels, 0.5) : 0;
	/* (split from its device: its steps are those CUPTI's records cover, steps.c) */
	gs->nccl_src = g->nccl_src == NSRC_BOTH ? NSRC_CUPTI : g->nccl_src;
	if (sd->late[r] && sd->nlate[r] && kus) { /* (kus's room is enough: one a work) */
		memcpy(kus, sd->late[r], sd->nlate[r] * sizeof *kus);
		gs->nccl_late_p50 = p50(kus, sd->nlate[r]);
	}
	gs->kernels /= (double)N;
	gs->nccl_ms /= (double)N;
	gs->nccl_bytes /= (double)N;
	gs->nccl_calls /= (double)N;
	gs->nccl_xfer_ms /= (double)N;
	gs->p2p_ms[0] /= (double)N, gs->p2p_ms[1] /= (double)N;
	gs->pageable_bytes /= (double)N;
	gs->pageable_ms /= (double)N;
	/* NCCL on a stream where compute kernels run: it cannot overlap them */
	uint64_t cs[64];
	int ncs = compute_streams(g, cs);
	for (size_t i = 0; i < nw && !gs->nccl_on_compute; i++)
		for (int j = 0; g->w[i].cls == GW_NCCL && j < ncs; j++)
			gs->nccl_on_compute |= cs[j] == lane(&g->w[i]);
	gs->nccl_overlap_left_ms = gs->nccl_on_compute ? overlap_left(g, tab, b, N) : 0;
	gs->pageable_calls /= (double)N;
	gs->launches = (double)launches / (double)N;
	an_wf_sort(sd, r);
	/* the longest-waiting call site on the training thread (host_sync's evidence) */
	struct thr *t = an_train_thread(ri->p);
	gs->site = -1;
	for (int i = 0; t && i < g->nsites; i++)
		if (g->site[i].tid == t->tid && (gs->site < 0 || g->site[i].ms > g->site[gs->site].ms))
			gs->site = i;
}

/* g's runs of launch calls (calls within LAUNCH_RUN_NS of each other) as edges of h; -1 out of
 * memory */
static int launch_edges(struct hostlanes *h, const struct gpuproc *g)
{
	for (size_t i = 0; i < g->na;) {
		if (!g->api[i].launch) {
			i++;
			continue;
		}
		int64_t t0 = g->api[i].t, t1 = g->api[i].t + g->api[i].d;
		size_t j = i + 1;
		for (; j < g->na && g->api[j].t - t1 <= LAUNCH_RUN_NS; j++)
			if (g->api[j].launch)
				t1 = g->api[j].t + g->api[j].d > t1 ? g->api[j].t + g->api[j].d : t1;
		/* (a run of one call is its own time) */
		if (add_edge(h, t0, t1 - t0, H_LAUNCH))
			return -1;
		i = j;
	}
	return 0;
}

/* the per-step figures of work w of rank index r (in: its NCCL instance, wt: its wait there):
 * work launched in a step (launch_step; the work between a sample's steps is in the sweep, which
 * must know when the device was busy, but not in them); kus: room for the kernels' times */
static void work_figures(struct stepdata *sd, struct waitadds *add, int r, struct rankinfo *ri, const struct gwork *w,
			 struct inst *in, int64_t wt, double *kus)
{
	struct gpustat *gs = &ri->gpu;
	size_t N = sd->K;
	long k = launch_step(ri, N, w);
	if (k < 0)
		return;
	double late;
	if (w->cls == GW_NCCL) {
		if (nccl_adds(sd, add, gs, &ri->steps[k], w, in, wt, &late) && sd->late[r])
			sd->late[r][sd->nlate[r]++] = late;
	} else if (w->cls == GW_COMPUTE) {
		if (kus)
			kus[(size_t)gs->kernels] = (double)w->d / 1e3;
		gs->kernels++;
	}
	if (w->pageable) {
		gs->pageable_bytes += (double)w->bytes;
		gs->pageable_calls++;
		gs->pageable_ms += MS(w->d);
	} else if (w->pinned && w->bytes >= (1 << 20) && w->d > 0) {
		/* (host-pinned only: a copy on the device runs at HBM speed, 2 TB/s on an H200,
		 * which no host copy can reach) */
		gs->pinned_gbs = fmax(gs->pinned_gbs, (double)w->bytes / (double)w->d);
	}
}

/* Rank r's steps split from its device's timeline within the job's device step bounds b (the file
 * comment): ri->steps' bounds become b, their categories, waits and lateness the device's. */
static void split_rank(struct analysis *a, struct stepdata *sd, struct itab *tab, int r, const int64_t *b,
		       struct waitadds *add)
{
	struct rankinfo *ri = &a->ranks[r];
	struct proc *p = ri->p;
	struct gpuproc *g = p->gpu;
	size_t N = sd->K, nw = g->nw;
	double *kus = NULL;
	struct nwait *waits = NULL; /* (edges' NCCL waits) */
	size_t nwaits = 0, cwaits = 0;
	struct hostlanes *h = sd->lanes[r], none = { 0 };
	if (!h) /* (no memory for them while the host split streamed the thread) */
		h = &none;
	free(sd->late[r]);
	sd->late[r] = malloc((nw + 1) * sizeof **sd->late);
	sd->nlate[r] = 0;
	/* launch calls in the host's steps (a sample's steps are not contiguous) */
	size_t launches = 0;
	for (size_t k = 0; k < N; k++)
		for (size_t i = an_first_at(g->api, g->na, sizeof *g->api, offsetof(struct gapi, t), ri->steps[k].t0);
		     i < g->na && g->api[i].t < ri->steps[k].t1; i++)
			launches += g->api[i].launch != L_NONE;
	/* the edges: the training thread's waits (gathered as split.c streamed it), runs of launch
	 * calls, device work */
	if (launch_edges(h, g))
		goto out;
	size_t nhost = h->n; /* (the host's edges, then the device's: each nearly in order) */
	struct gpustat *gs = &ri->gpu;
	gs->device = g->device;
	memcpy(gs->nccl_join, g->join, sizeof gs->nccl_join);
	kus = malloc((nw + 1) * sizeof *kus);
	for (size_t i = 0; i < nw; i++) {
		const struct gwork *w = &g->w[i];
		if (w->d <= 0)
			continue;
		struct inst *in = w->cls == GW_NCCL ? ginst(tab, w, 0) : NULL;
		int64_t wt = in && in->n > 1 && in->max_arr > w->t ? in->max_arr - w->t : 0;
		if (w->t + w->d > b[0] && w->t < b[2 * N - 1]) { /* (the sweep's) */
			if (add_edge(h, w->t, w->d, w->cls))
				goto out;
			if (wt > 0 && nwaits < INT32_MAX) {
				struct nwait *nv = room_for(waits, nwaits, &cwaits, sizeof *waits, 256);
				if (!nv)
					goto out;
				waits = nv;
				waits[nwaits] = (struct nwait){ wt < w->d ? wt : w->d, in->late, an_msg_op(w->op) };
				h->e[h->n - 2].wait = (int32_t)nwaits++;
			}
		}
		work_figures(sd, add, r, ri, w, in, wt, kus);
	}
	an_sort_near(h->e, nhost, sizeof *h->e, cmp_edge);
	an_sort_near(h->e + nhost, h->n - nhost, sizeof *h->e, cmp_edge); /* (in launch order, start then end) */
	an_merge(h->e, nhost, h->n, sizeof *h->e, cmp_edge);
	for (size_t k = 0; k < N; k++) {
		memset(ri->steps[k].cat, 0, sizeof ri->steps[k].cat);
		ri->steps[k].wait = 0;
		ri->steps[k].t0 = b[2 * k];
		ri->steps[k].t1 = b[2 * k + 1];
	}
	sd->nwf[r] = 0;
	/* the sweep: each piece between two edges is one part of the step it falls in */
	int cnt[NLANE] = { 0 };
	int64_t wait_until = INT64_MIN, last_sync_end = INT64_MIN, gap_start = INT64_MIN;
	int after = 0, last_wait = 0, late_rank = -1, p2p = 0; /* after: the part of an idle gap a wait began */
	size_t k = 0;
	for (size_t i = 0; i < h->n; i++) {
		const struct edge *e = &h->e[i];
		int64_t t0 = i ? h->e[i - 1].t : e->t, t1 = e->t;
		while (k < N && b[2 * k + 1] <= t0)
			k++;
		for (size_t q = k; t1 > t0 && q < N && b[2 * q] < t1; q++) {
			int64_t lo = t0 > b[2 * q] ? t0 : b[2 * q], hi = t1 < b[2 * q + 1] ? t1 : b[2 * q + 1];
			if (hi <= lo)
				continue;
			struct piece pc = { lo, hi, wait_until, late_rank, after, p2p };
			charge(sd, r, q, &ri->steps[q], gs->part, cnt, &pc);
		}
		int busy0 = cnt[GW_COMPUTE] || cnt[GW_COPY] || cnt[GW_COPY_IN] || cnt[GW_NCCL];
		cnt[e->lane] += e->delta;
		int waited = (e->lane == H_SYNC || e->lane == H_PAGEABLE) && e->delta < 0;
		if (waited) {
			last_sync_end = e->t;
			last_wait = e->lane == H_SYNC ? GP_IDLE_SYNC : GP_IDLE_PAGEABLE;
		}
		if (e->wait >= 0) {
			wait_until = e->t + waits[e->wait].ns;
			late_rank = waits[e->wait].late;
			p2p = waits[e->wait].p2p;
		}
		int busy1 = cnt[GW_COMPUTE] || cnt[GW_COPY] || cnt[GW_COPY_IN] || cnt[GW_NCCL];
		if (busy0 && !busy1) { /* an idle gap begins: did a wait for the device just empty the queue? */
			gap_start = e->t;
			after = cnt[H_PAGEABLE] ? GP_IDLE_PAGEABLE : cnt[H_SYNC] ? GP_IDLE_SYNC :
				last_sync_end != INT64_MIN && gap_start - last_sync_end <= AFTER_SYNC_NS ? last_wait : 0;
		}
		if (!busy0 && busy1)
			after = 0;
		if (waited && !busy1 && gap_start != INT64_MIN)
			after = last_wait; /* the wait ended in the gap: what follows is the host catching up */
	}
	rank_figures(sd, tab, r, ri, b, kus, launches);
out:
	free(kus);
	free(waits);
	/* (the edges are needed no more; the lateness held at its size) */
	free(none.e);
	an_gpu_lanes_free(sd->lanes[r]);
	sd->lanes[r] = NULL;
	double *late = sd->late[r] && sd->nlate[r] ? realloc(sd->late[r], sd->nlate[r] * sizeof *late) : NULL;
	if (late)
		sd->late[r] = late;
}

/* ranks with device work, or NCCL kernels from the plugin */
static int with_work(const struct analysis *a)
{
	int n = 0;
	for (int r = 0; r < a->nranks; r++)
		n += a->ranks[r].p->gpu && (a->ranks[r].p->gpu->nall > 0 || a->ranks[r].p->gpu->nccl_src == NSRC_PLUGIN);
	return n;
}

/* A rank whose only device times are its NCCL kernels' from the plugin (no CUPTI), or CUPTI's and
 * then the plugin's (CUPTI's records stopped inside its steps): its steps stay its host's (no
 * device timeline to split), and its NCCL figures are its kernels' launched in
 * them: time, the part before the last rank's kernel started, bytes, count, lateness. Its
 * lateness is its kernels' (as a rank split from its device has), not its calls': on a GPU the
 * calls only enqueue. */
static void nccl_figures(struct analysis *a, struct stepdata *sd, struct itab *tab, int r)
{
	struct rankinfo *ri = &a->ranks[r];
	const struct gpuproc *g = ri->p->gpu;
	struct gpustat *gs = &ri->gpu;
	size_t N = sd->K;
	double *late = malloc((g->nw + 1) * sizeof *late);
	size_t nl = 0;
	if (!late || !ri->steps)
		goto out;
	gs->nccl_max_op = -1;
	for (size_t i = 0; i < g->nw; i++) {
		const struct gwork *w = &g->w[i];
		long k = w->cls == GW_NCCL ? launch_step(ri, N, w) : -1;
		if (k < 0)
			continue;
		struct inst *in = ginst(tab, w, 0);
		int64_t wt = in && in->n > 1 && in->max_arr > w->t ? in->max_arr - w->t : 0;
		nl += (size_t)nccl_adds(sd, &sd->gadd[r], gs, &ri->steps[k], w, in, wt, &late[nl]);
	}
	free(sd->late[r]);
	sd->late[r] = nl ? malloc(nl * sizeof *late) : NULL;
	sd->nlate[r] = sd->late[r] ? nl : 0;
	if (sd->late[r])
		memcpy(sd->late[r], late, nl * sizeof *late);
	gs->nccl_ms /= (double)N;
	gs->nccl_xfer_ms /= (double)N;
	gs->p2p_ms[0] /= (double)N, gs->p2p_ms[1] /= (double)N;
	gs->nccl_bytes /= (double)N;
	gs->nccl_calls /= (double)N;
	gs->nccl_late_p50 = p50(late, nl);
	gs->nccl_src = g->nccl_src;
out:
	free(late);
}

int an_gpu_ranks(const struct analysis *a)
{
	int n = 0;
	for (int r = 0; r < a->nranks; r++)
		n += a->ranks[r].gpu.have;
	return n;
}

struct gjob {
	struct analysis *a;
	struct stepdata *sd;
	struct itab *tab;
	int64_t *b, *mine; /* the job's step bounds; each rank's own (2 * sd->K a rank) */
	int8_t *ok;        /* whose are there */
	int phase;         /* 0: place and bounds, 1: split */
};

static void gpu_one(void *ctx, size_t r)
{
	struct gjob *j = ctx;
	struct rankinfo *ri = &j->a->ranks[r];
	size_t N = j->sd->K;
	/* (a rank over its share: its work read again, and let go after each phase) */
	if (an_gpu_open(ri->p) < 0) {
		ri->gpu.reread_failed = 1;
		return;
	}
	if (!ri->p->gpu->placed)
		an_gpu_place(ri->p);
	if (j->phase == 1)
		split_rank(j->a, j->sd, j->tab, (int)r, j->b, &j->sd->gadd[r]);
	else
		j->ok[r] = ri->steps && bounds(ri, N, j->mine + 2 * N * r,
					       j->a->step_source && !strcmp(j->a->step_source, "windows")) == 0;
	an_gpu_close(ri->p);
}

/* The plugin's clock on a rank without CUPTI is late by how soon NCCL told it of a kernel's end
 * (ncclplug.c): where other ranks had both, the median of how late it ran there is taken off
 * (before any rank is placed; every process of report --mpi has every rank's check alike); a rank
 * whose CUPTI records stopped has its own check, from before they did. */
static void shifts(const struct analysis *a)
{
	double *v = malloc(((size_t)a->nranks + 1) * sizeof *v);
	size_t n = 0;
	for (int r = 0; v && r < a->nranks; r++) {
		const struct gpuproc *g = a->ranks[r].p->gpu;
		if (g && an_gpu_nccl_cupti(g) && g->pstat.matched)
			v[n++] = g->pstat.late_us;
	}
	int64_t shift = n ? (int64_t)llround(p50(v, n) * 1e3) : 0;
	for (int r = 0; r < a->nranks; r++) {
		struct gpuproc *g = a->ranks[r].p->gpu;
		if (g && g->nccl_src == NSRC_PLUGIN && !g->placed)
			g->shift = shift;
		else if (g && g->nccl_src == NSRC_BOTH && !g->placed)
			g->shift = g->pstat.matched ? (int64_t)llround(g->pstat.late_us * 1e3) : shift;
	}
	free(v);
}

/* The job's device steps: each bound the latest of the ranks' own (j->b from j->mine). The ranks
 * leave their collectives together, so a step lasts as long on each; the same bounds on every rank
 * make their steps' parts comparable (the critical path compares them step by step). */
static void job_bounds(const struct analysis *a, struct gjob *j)
{
	size_t N = j->sd->K;
	for (size_t i = 0; i < 2 * N; i++)
		j->b[i] = INT64_MIN;
	for (int r = 0; r < a->nranks; r++)
		for (size_t i = 0; j->ok[r] && i < 2 * N; i++)
			j->b[i] = j->mine[2 * N * (size_t)r + i] > j->b[i] ? j->mine[2 * N * (size_t)r + i] : j->b[i];
	for (size_t i = 1; i < 2 * N; i++) /* (still in order) */
		j->b[i] = j->b[i] < j->b[i - 1] ? j->b[i - 1] : j->b[i];
}

/* report --mpi: the ranks' own step bounds (2N a rank: those of ranks rs[0, n) with ok) to process
 * 0, and the job's (b) back to every process; -1 when that failed */
static int mpi_bounds(struct analysis *a, struct gjob *j, const size_t *rs, size_t n)
{
	struct an_mpi *m = a->mpi;
	struct an_buf buf = { 0 };
	size_t N = j->sd->K;
	int rc = 0;
	if (an_mpi_me(m) != 0) {
		for (size_t i = 0; i < n; i++)
			if (j->ok[rs[i]]) {
				uint64_t r = rs[i];
				an_put(&buf, &r, sizeof r);
				an_put(&buf, j->mine + 2 * N * r, 2 * N * sizeof *j->mine);
			}
		rc = buf.err || an_mpi_send(m, &buf) < 0 || an_mpi_bcast(m, &buf) < 0 || buf.n != 2 * N * sizeof *j->b ? -1 : 0;
		if (!rc)
			memcpy(j->b, buf.p, buf.n);
	} else {
		for (int q = 1; q < an_mpi_np(m) && rc == 0; q++) {
			if (an_mpi_recv(m, q, &buf) < 0) {
				rc = -1;
				break;
			}
			struct an_rd rd = { buf.p, buf.p + buf.n, 0 };
			while (!rd.err && rd.p < rd.end) {
				uint64_t r;
				an_get(&rd, &r, sizeof r);
				if (rd.err || r >= (uint64_t)a->nranks)
					break;
				an_get(&rd, j->mine + 2 * N * r, 2 * N * sizeof *j->mine);
				j->ok[r] = !rd.err;
			}
			rc = rd.err ? -1 : 0;
		}
	}
	if (rc == 0 && an_mpi_me(m) == 0) {
		buf.n = 0;
		job_bounds(a, j);
		an_put(&buf, j->b, 2 * N * sizeof *j->b);
		rc = buf.err || an_mpi_bcast(m, &buf) < 0 ? -1 : 0;
	}
	free(buf.p);
	return rc;
}

void an_gpu_split(struct analysis *a, struct stepdata *sd, const size_t *rs, size_t nrs)
{
	int R = a->nranks;
	struct itab tab = { 0 };
	if (!sd->K || !with_work(a))
		return;
	shifts(a);
	/* the ranks split here with device work: their times onto the job's clock and their own step
	 * bounds, on a->jobs threads */
	size_t N = sd->K, *order = malloc(((size_t)R + 1) * sizeof *order), n = 0;
	struct gjob j = { a, sd, &tab, malloc(2 * N * sizeof *j.b), malloc(2 * N * (size_t)R * sizeof *j.mine),
			  calloc((size_t)R, sizeof *j.ok), 0 };
	if (!sd->gadd)
		sd->gadd = calloc((size_t)R, sizeof *sd->gadd);
	if (!order || !j.b || !j.mine || !j.ok || !sd->gadd) {
		if (a->mpi)
			an_mpi_abort(a->mpi); /* (the others would wait for this process) */
		goto out;
	}
	/* (a device timeline with holes would show them as idle: a rank CUPTI lost records of, or whose
	 * records stopped inside its steps, keeps its host split, and its device's steps count in no
	 * bound) */
	for (size_t i = 0; i < nrs; i++)
		if (a->ranks[rs[i]].p->gpu && a->ranks[rs[i]].p->gpu->nall && !a->ranks[rs[i]].p->gpu->nccl_only &&
		    !a->ranks[rs[i]].p->gpu_dropped && !an_gpu_stopped_inside(a, (int)rs[i]))
			order[n++] = rs[i];
	an_parallel(n, a->jobs, order, gpu_one, &j);
	if (a->mpi) { /* (the job's bounds from every process's ranks) */
		if (mpi_bounds(a, &j, order, n) < 0) {
			an_mpi_abort(a->mpi);
			goto out;
		}
	} else {
		job_bounds(a, &j);
	}
	/* every device collective: whose kernel started first and last (the kernels of ranks split
	 * elsewhere, onto the job's clock here) */
	for (int r = 0; r < R; r++) {
		struct gpuproc *g = a->ranks[r].p->gpu;
		if (g && !g->placed)
			an_gpu_place(a->ranks[r].p);
		for (size_t i = 0; g && i < g->nw; i++) {
			struct inst *in = g->w[i].cls == GW_NCCL ? ginst(&tab, &g->w[i], 1) : NULL;
			if (!in)
				continue;
			in->n++;
			in->bytes = g->w[i].bytes;
			if (g->w[i].t < in->min_arr)
				in->min_arr = g->w[i].t;
			if (g->w[i].t > in->max_arr) {
				in->max_arr = g->w[i].t;
				in->late = r;
			}
		}
	}
	/* the ranks split here whose only device times are the plugin's NCCL kernels, or, where CUPTI's
	 * records stopped inside the steps, CUPTI's and then the plugin's */
	for (size_t i = 0; i < nrs; i++) {
		const struct gpuproc *g = a->ranks[rs[i]].p->gpu;
		if (g && !g->nccl_only && a->ranks[rs[i]].steps &&
		    ((!g->nall && g->nccl_src == NSRC_PLUGIN) || (g->nccl_src == NSRC_BOTH && an_gpu_stopped_inside(a, (int)rs[i]))))
			nccl_figures(a, sd, &tab, (int)rs[i]);
	}
	size_t k = 0;
	for (size_t i = 0; i < n; i++)
		if (a->ranks[order[i]].steps && !a->ranks[order[i]].gpu.reread_failed)
			order[k++] = order[i];
	j.phase = 1;
	an_parallel(k, a->jobs, order, gpu_one, &j);
	an_gpu_shards(a, order, k, &tab);
out:
	free(j.ok);
	free(j.mine);
	free(j.b);
	free(order);
	free(tab.v);
}

void an_gpu_adds(struct stepdata *sd)
{
	for (int r = 0; sd->gadd && r < sd->R; r++) /* (the sums the same whatever the threads) */
		for (size_t i = 0; i < sd->gadd[r].n; i++)
			sd->tab.v[sd->gadd[r].v[i].in].wait_sum += sd->gadd[r].v[i].ms;
}
