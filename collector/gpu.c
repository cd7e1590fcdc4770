/* GPU jobs: what CUPTI recorded of each rank's device (cupti/gpu.c) and its NCCL calls
 * (preload/nccl.c), kept while loading, and each analysed step split from the device's timeline
 * rather than from the training thread's calls, which on a GPU only enqueue work
 * (docs/report.md, section 8).
 *
 * A step on the device: each of the host's step bounds (steps.c) mapped to when the computation
 * enqueued before it ended (the work of the streams that run compute kernels), the latest over
 * the ranks, so that the device's steps tile its timeline as the host's tile the host's and are
 * the same on every rank. Within a step every instant is the first of: a compute kernel, a copy or
 * set other than an input copy (compute); a host-to-device copy (data); an NCCL kernel (comms: its
 * part before the last rank's kernel of the same collective started is a wait for that rank, the
 * rest transfer); or idle, charged to what the training thread did then: waiting for input
 * (data), held by a pageable copy, waiting for the device or right after such a wait returned,
 * which had let the device's queue run dry (host: sync), launching kernels back to back (host:
 * launch), in a collective of its own (comms), or anything else (host). NCCL kernels are known by
 * name (ncclDevKernel_, ncclKernel_) and by correlation: the external id ddpspy pushes around each
 * NCCL call (gpu_extcorr) names the call, whose communicator and sequence number match the same
 * collective's kernels on every rank; kernels of unrecorded calls are matched by their order. */
#include <inttypes.h>
#include <limits.h>
#include <stddef.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/format.h"
#include "analysis_int.h"
#include "gpu_int.h"
#include "trace.h"

#define LAUNCH_RUN_NS 50000   /* launch calls closer than this are one run of launching */
#define AFTER_SYNC_NS 200000  /* an idle gap that begins this soon after a wait for the device */
#define SYNC_MIN_NS 20000     /* a copy call that held the host this long waited for the device */
#define PAGEABLE_MIN 65536     /* a pageable copy this large costs bandwidth, not only a sync */
#define EXT_KIND_DDPSPY 5     /* CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2 (cupti/gpu.c's EXT_KIND) */

const char *const an_gpart_names[GP_COUNT] = {
#define X(e, s) s,
	GPU_PARTS(X)
#undef X
};

static void identify(struct gpuproc *g);
static int cmp_name(const void *x, const void *y);
static int cmp_launch(const void *x, const void *y);

#define PUSH(arr, n, cap, val)                                                              \
	do {                                                                                    \
		if ((n) == (cap)) {                                                                 \
			size_t c_ = (cap) ? (cap) * 2 : 256;                                            \
			void *p_ = realloc((arr), c_ * sizeof *(arr));                                  \
			if (!p_)                                                                        \
				return 1;                                                                   \
			(arr) = p_;                                                                     \
			(cap) = c_;                                                                     \
		}                                                                                   \
		(arr)[(n)++] = (val);                                                               \
	} while (0)

/* argument positions of the kinds read here, from their names (common/format.h) */
static struct {
	int8_t k_device, k_ctx, m_device, m_ctx, s_device, s_ctx, k_stream, k_corr, k_kname, m_stream, m_corr, m_bytes,
		m_copy, m_src, m_dst, s_stream, s_corr, a_corr, a_fn, a_thread, x_kind, x_ext, x_corr, n_ext, g_begin, g_ext,
		c_dir, c_async, y_what, i_nranks, i_blocking, i_rank;
} P;

__attribute__((constructor)) static void positions(void)
{
	P.k_device = an_argpos(DDPSPY_EV_GPU_KERNEL, "device");
	P.k_ctx = an_argpos(DDPSPY_EV_GPU_KERNEL, "context");
	P.m_device = an_argpos(DDPSPY_EV_GPU_MEMCPY, "device");
	P.m_ctx = an_argpos(DDPSPY_EV_GPU_MEMCPY, "context");
	P.s_device = an_argpos(DDPSPY_EV_GPU_MEMSET, "device");
	P.s_ctx = an_argpos(DDPSPY_EV_GPU_MEMSET, "context");
	P.k_stream = an_argpos(DDPSPY_EV_GPU_KERNEL, "stream");
	P.k_corr = an_argpos(DDPSPY_EV_GPU_KERNEL, "corr");
	P.k_kname = an_argpos(DDPSPY_EV_GPU_KERNEL, "kname");
	P.m_stream = an_argpos(DDPSPY_EV_GPU_MEMCPY, "stream");
	P.m_corr = an_argpos(DDPSPY_EV_GPU_MEMCPY, "corr");
	P.m_bytes = an_argpos(DDPSPY_EV_GPU_MEMCPY, "bytes");
	P.m_copy = an_argpos(DDPSPY_EV_GPU_MEMCPY, "copy");
	P.m_src = an_argpos(DDPSPY_EV_GPU_MEMCPY, "src");
	P.m_dst = an_argpos(DDPSPY_EV_GPU_MEMCPY, "dst");
	P.s_stream = an_argpos(DDPSPY_EV_GPU_MEMSET, "stream");
	P.s_corr = an_argpos(DDPSPY_EV_GPU_MEMSET, "corr");
	P.a_corr = an_argpos(DDPSPY_EV_CUDA_API, "corr");
	P.a_fn = an_argpos(DDPSPY_EV_CUDA_API, "fn");
	P.a_thread = an_argpos(DDPSPY_EV_CUDA_API, "thread");
	P.x_kind = an_argpos(DDPSPY_EV_GPU_EXTCORR, "ext_kind");
	P.x_ext = an_argpos(DDPSPY_EV_GPU_EXTCORR, "ext_id");
	P.x_corr = an_argpos(DDPSPY_EV_GPU_EXTCORR, "corr");
	P.n_ext = an_argpos(DDPSPY_EV_NCCL_COLL, "ext");
	P.g_begin = an_argpos(DDPSPY_EV_NCCL_GROUP, "begin");
	P.g_ext = an_argpos(DDPSPY_EV_NCCL_GROUP, "ext");
	P.i_nranks = an_argpos(DDPSPY_EV_NCCL_INIT, "nranks");
	P.i_blocking = an_argpos(DDPSPY_EV_NCCL_INIT, "blocking");
	P.i_rank = an_argpos(DDPSPY_EV_NCCL_INIT, "comm_rank");
	P.c_dir = an_argpos(DDPSPY_EV_CUDA_MEMCPY, "dir");
	P.c_async = an_argpos(DDPSPY_EV_CUDA_MEMCPY, "async");
	P.y_what = an_argpos(DDPSPY_EV_CUDA_SYNC, "what");
}

/* whether the string table entry id of f contains needle */
static int name_has(const struct trace_file *f, int64_t id, const char *needle)
{
	const struct trace_name *n = id > 0 ? trace_name(f, (uint32_t)id) : NULL;
	size_t l = strlen(needle);
	for (uint32_t i = 0; n && i + l <= n->len; i++)
		if (!memcmp(n->s + i, needle, l))
			return 1;
	return 0;
}

/* a class of a string table entry of f: arg as each class says */
typedef int8_t name_class(const struct trace_file *f, int64_t id, const void *arg);

/* whether the entry contains any of arg's needles (a NULL-ended list) */
static int8_t has_any(const struct trace_file *f, int64_t id, const void *arg)
{
	for (const char *const *n = arg; *n; n++)
		if (name_has(f, id, *n))
			return 1;
	return 0;
}

/* Whether a runtime call (its name) may hold the host for the device, as the preload's wrappers
 * take them (preload/cuda.c): synchronizes, synchronous copies, frees and pinning (W_ALWAYS);
 * queries (W_POLL: a run of them is a wait); asynchronous and peer copies (W_LONG: a wait when one
 * held the host). */
static int8_t api_wait(const struct trace_file *f, int64_t id, const void *arg)
{
	(void)arg;
	const struct trace_name *n = id > 0 ? trace_name(f, (uint32_t)id) : NULL;
	char s[64];
	snprintf(s, sizeof s, "%.*s", n ? (int)(n->len < 63 ? n->len : 63) : 0, n ? n->s : "");
	if (strstr(s, "Synchronize") || !strncmp(s, "cudaHostAlloc", 13) || !strncmp(s, "cudaMallocHost", 14) ||
	    !strncmp(s, "cudaHostRegister", 16) || !strncmp(s, "cudaHostUnregister", 18) ||
	    (!strncmp(s, "cudaFree", 8) && !strstr(s, "Async")))
		return W_ALWAYS;
	if (!strncmp(s, "cudaEventQuery", 14) || !strncmp(s, "cudaStreamQuery", 15))
		return W_POLL;
	if (!strncmp(s, "cudaMemcpy", 10))
		return strstr(s, "Async") || strstr(s, "Peer") ? W_LONG : W_ALWAYS;
	return W_NONE;
}

/* cls of the file's string id, remembered (a kernel's or a call's name repeats; ids 0, no name,
 * answer 0 as a zeroed memo does) */
static int8_t memo(struct namememo *m, const struct trace_file *f, int64_t id, name_class *cls, const void *arg)
{
	unsigned slot = (unsigned)id & 63;
	if (m->id[slot] != id) {
		m->id[slot] = id;
		m->has[slot] = cls(f, id, arg);
	}
	return m->has[slot];
}

static const char *const NCCL_KERNELS[] = { "ncclDevKernel_", "ncclKernel_", NULL };
static const char *const LAUNCHES[] = { "Launch", NULL };

static struct gpuproc *gpu_of(struct proc *p)
{
	if (!p->gpu && (p->gpu = calloc(1, sizeof *p->gpu)))
		p->gpu->device = -1;
	return p->gpu;
}

/* (times past 2^62 ns, 146 years, or lasting more than 2^46 ns, 19 hours, are not a device's: a
 * damaged record, left out so that no sum of times overflows) */
static int sane(const struct trace_event *e)
{
	return e->t_ns >= 0 && e->t_ns < (INT64_C(1) << 62) && e->dur_ns >= 0 && e->dur_ns < (INT64_C(1) << 46);
}

/* w's device and context, counted */
static void on_device(struct gpuproc *g, struct gwork *w, int64_t device, int64_t ctx)
{
	w->device = device >= 0 && device < MAX_GDEV ? (int8_t)device : -1;
	w->ctx = (uint32_t)ctx;
	if (w->device >= 0) {
		g->on_dev[w->device]++;
		g->nccl_on_dev[w->device] += w->cls == GW_NCCL;
	}
}

/* A process's work may be on several devices (a second GPU for evaluation, a model split over
 * two): its rank's split follows one, where most of its NCCL kernels ran (its communicator's
 * device), else most of its work; the rest is left out and counted (an_gpu_warn says so). */
static void devices_chosen(struct gpuproc *g)
{
	int best = -1;
	for (int d = 0; d < MAX_GDEV; d++)
		if (g->on_dev[d] && (best < 0 || g->nccl_on_dev[d] > g->nccl_on_dev[best] ||
				     (g->nccl_on_dev[d] == g->nccl_on_dev[best] && g->on_dev[d] > g->on_dev[best])))
			best = d;
	g->device = best;
	size_t n = 0;
	g->other_dev = 0;
	for (size_t i = 0; i < g->nw; i++)
		if (best < 0 || g->w[i].device == best)
			g->w[n++] = g->w[i];
		else
			g->other_dev++;
	g->nw = n;
}

/* work's place: its context's stream */
static uint64_t lane(const struct gwork *w)
{
	return (uint64_t)w->ctx << 32 | w->stream;
}

/* a CUPTI record into g: kept (work 1) or, of the kernels, copies, sets and runtime calls, none
 * (work 0: a rank over its share, reading its file the first time) */
static int take(struct gpuproc *g, const struct trace_file *f, const struct trace_event *e, int work)
{
	if (!sane(e))
		return 0;
	struct gwork w = { .t = e->t_ns, .d = e->dur_ns, .launch = e->t_ns, .comm = -1, .seq = -1, .op = -1 };
	switch (e->kind) {
	case DDPSPY_EV_GPU_KERNEL: {
		int64_t kn = an_arg(e, P.k_kname, 0);
		w.corr = (uint32_t)an_arg(e, P.k_corr, 0);
		w.stream = (uint32_t)an_arg(e, P.k_stream, 0);
		w.name = (uint32_t)kn;
		w.cls = memo(&g->nccl_name, f, kn, has_any, NCCL_KERNELS) ? GW_NCCL : GW_COMPUTE;
		on_device(g, &w, an_arg(e, P.k_device, 0), an_arg(e, P.k_ctx, 0));
		if (work)
			PUSH(g->w, g->nw, g->cw, w);
		break;
	}
	case DDPSPY_EV_GPU_MEMCPY: {
		int64_t copy = an_arg(e, P.m_copy, 0);
		w.corr = (uint32_t)an_arg(e, P.m_corr, 0);
		w.stream = (uint32_t)an_arg(e, P.m_stream, 0);
		w.bytes = an_arg(e, P.m_bytes, 0);
		w.cls = copy == DDPSPY_GCOPY_HTOD ? GW_COPY_IN : GW_COPY;
		w.pageable = (copy == DDPSPY_GCOPY_HTOD && an_arg(e, P.m_src, 0) == DDPSPY_GMEM_PAGEABLE) ||
			     (copy == DDPSPY_GCOPY_DTOH && an_arg(e, P.m_dst, 0) == DDPSPY_GMEM_PAGEABLE);
		w.pinned = (copy == DDPSPY_GCOPY_HTOD && an_arg(e, P.m_src, 0) == DDPSPY_GMEM_PINNED) ||
			   (copy == DDPSPY_GCOPY_DTOH && an_arg(e, P.m_dst, 0) == DDPSPY_GMEM_PINNED);
		on_device(g, &w, an_arg(e, P.m_device, 0), an_arg(e, P.m_ctx, 0));
		if (work)
			PUSH(g->w, g->nw, g->cw, w);
		break;
	}
	case DDPSPY_EV_GPU_MEMSET:
		w.corr = (uint32_t)an_arg(e, P.s_corr, 0);
		w.stream = (uint32_t)an_arg(e, P.s_stream, 0);
		w.cls = GW_COPY;
		on_device(g, &w, an_arg(e, P.s_device, 0), an_arg(e, P.s_ctx, 0));
		if (work)
			PUSH(g->w, g->nw, g->cw, w);
		break;
	case DDPSPY_EV_CUDA_API: {
		if (!work)
			break;
		int64_t fn = an_arg(e, P.a_fn, 0);
		struct gapi a = { e->t_ns, e->dur_ns, (uint32_t)an_arg(e, P.a_corr, 0), (uint32_t)an_arg(e, P.a_thread, 0),
				  memo(&g->launch_name, f, fn, has_any, LAUNCHES), memo(&g->wait_name, f, fn, api_wait, NULL) };
		PUSH(g->api, g->na, g->ca, a);
		break;
	}
	case DDPSPY_EV_GPU_EXTCORR:
		if (an_arg(e, P.x_kind, 0) == EXT_KIND_DDPSPY) {
			struct gxc x = { (uint32_t)an_arg(e, P.x_corr, 0), (uint64_t)an_arg(e, P.x_ext, 0) };
			PUSH(g->xc, g->nx, g->cx, x);
		}
		break;
	}
	return 0;
}

int an_gpu_record(struct proc *p, const struct trace_file *f, const struct trace_event *e, size_t keep)
{
	struct gpuproc *g = gpu_of(p);
	if (!g)
		return 1;
	g->records++;
	int rc = take(g, f, e, !g->over);
	g->nall += sane(e) && (e->kind == DDPSPY_EV_GPU_KERNEL || e->kind == DDPSPY_EV_GPU_MEMCPY ||
			       e->kind == DDPSPY_EV_GPU_MEMSET); /* (what take keeps of work, or would) */
	if (!g->over && keep && g->nw + g->na > keep) { /* (the rest when the rank is split: an_gpu_open) */
		g->over = 1;
		free(g->w);
		free(g->api);
		g->w = NULL, g->api = NULL;
		g->nw = g->cw = g->na = g->ca = 0;
	}
	return rc;
}

/* a call site that waited for the device: the same thread and stack add up */
static void add_site(struct gpuproc *g, const struct trace_event *e, int what)
{
	int i = 0;
	while (i < g->nsites && !(g->site[i].tid == e->tid && g->site[i].stack == e->stack && g->site[i].kind == e->kind))
		i++;
	if (i == MAX_SITES) { /* full: the smallest goes */
		i = 0;
		for (int k = 1; k < MAX_SITES; k++)
			if (g->site[k].ms < g->site[i].ms)
				i = k;
		if (g->site[i].ms > MS(e->dur_ns))
			return;
		memset(&g->site[i], 0, sizeof g->site[i]);
	} else if (i == g->nsites) {
		g->nsites++;
	}
	struct gsite *s = &g->site[i];
	s->tid = e->tid;
	s->stack = e->stack;
	s->kind = e->kind;
	s->what = what;
	s->ms += MS(e->dur_ns);
	s->calls++;
}

int an_gpu_host(struct proc *p, const struct trace_event *e, const struct ev *v)
{
	if (e->kind != DDPSPY_EV_NCCL_COLL && e->kind != DDPSPY_EV_NCCL_GROUP && e->kind != DDPSPY_EV_CUDA_SYNC &&
	    e->kind != DDPSPY_EV_CUDA_MEMCPY && e->kind != DDPSPY_EV_NCCL_INIT && e->kind != DDPSPY_EV_NCCL_KERNEL)
		return 0;
	struct gpuproc *g = gpu_of(p);
	if (!g)
		return 1;
	if (e->kind == DDPSPY_EV_NCCL_KERNEL) {
		return an_plug_event(g, e);
	} else if (e->kind == DDPSPY_EV_NCCL_INIT) { /* (files before 2.6 say nothing of blocking: blocking) */
		g->allcomms++;
		if (g->ncomms < MAX_GCOMMS)
			g->comms[g->ncomms++] = (struct gcomm){ v->comm, (int32_t)an_arg(e, P.i_nranks, -1),
								(int32_t)an_arg(e, P.i_rank, -1),
								(int8_t)(an_arg(e, P.i_blocking, 1) != 0) };
	} else if (e->kind == DDPSPY_EV_NCCL_COLL) {
		struct gcall c = { (uint64_t)an_arg(e, P.n_ext, 0), v->comm, v->seq, v->bytes, v->op, g->depth == 0, 0,
				   e->t_ns, g->depth > 0 ? g->groups : 0 };
		PUSH(g->call, g->nc, g->cc, c);
	} else if (e->kind == DDPSPY_EV_NCCL_GROUP) {
		/* a group's calls launch at its end, under the end's external id: that id names the
		 * group's first collective (its kernel's place in the sequence) and all its bytes */
		if (an_arg(e, P.g_begin, 0)) {
			if (g->depth++ == 0) {
				g->group_first = g->nc;
				g->groups++;
			}
		} else if (g->depth > 0 && --g->depth == 0 && g->nc > g->group_first) {
			struct gcall c = g->call[g->group_first];
			c.ext = (uint64_t)an_arg(e, P.g_ext, 0);
			c.unit = 1;
			c.t = e->t_ns;
			c.bytes = 0;
			for (size_t i = g->group_first; i < g->nc; i++)
				c.bytes += g->call[i].bytes > 0 ? g->call[i].bytes : 0;
			PUSH(g->call, g->nc, g->cc, c);
		}
	} else if (e->kind == DDPSPY_EV_CUDA_SYNC) {
		g->host_cuda = 1;
		add_site(g, e, (int)an_arg(e, P.y_what, -1));
	} else {
		g->host_cuda = 1;
		if (!an_arg(e, P.c_async, 1) || e->dur_ns >= SYNC_MIN_NS)
			add_site(g, e, (int)an_arg(e, P.c_dir, -1));
	}
	return 0;
}

/* NCCL's kernels from its profiler plugin (ncclplug.c): where CUPTI timed none, the plugin's are
 * them; where it did, checked against them */
static void plugin_kernels(struct gpuproc *g)
{
	size_t nc = 0, n = 0;
	for (size_t i = 0; i < g->nw; i++) /* (read again: none of the plugin's yet) */
		if (!g->w[i].plugin)
			nc += (g->w[n++] = g->w[i]).cls == GW_NCCL;
	g->nw = n;
	struct gwork *k;
	size_t nk = an_plug_kernels(g, &k);
	g->nccl_src = nc ? NSRC_CUPTI : nk ? NSRC_PLUGIN : NSRC_NONE;
	if (nc && nk) {
		an_plug_check(g, k, nk);
	} else if (nk) {
		struct gwork *w = realloc(g->w, (g->nw + nk) * sizeof *w);
		if (w) {
			memcpy(w + g->nw, k, nk * sizeof *k);
			g->w = w;
			g->nw += nk;
			g->cw = g->nw;
			sort_n(g->w, g->nw, sizeof *g->w, cmp_launch);
		} else {
			g->nccl_src = NSRC_NONE;
		}
	}
	free(k);
}

/* identify, then what it joined let go (of the runtime calls, only the launches are needed), the
 * rest held at its size */
static void joined(struct gpuproc *g)
{
	memset(&g->nccl_name, 0, sizeof g->nccl_name); /* (another file's ids are other names) */
	memset(&g->launch_name, 0, sizeof g->launch_name);
	memset(&g->wait_name, 0, sizeof g->wait_name);
	devices_chosen(g);
	identify(g);
	plugin_kernels(g);
	size_t na = 0;
	for (size_t i = 0; i < g->na; i++)
		if (g->api[i].launch || g->api[i].wait)
			g->api[na++] = g->api[i];
	g->na = na;
	struct gwork *w = g->nw ? realloc(g->w, g->nw * sizeof *g->w) : NULL;
	struct gapi *a = g->na ? realloc(g->api, g->na * sizeof *g->api) : NULL;
	if (w)
		g->w = w, g->cw = g->nw;
	if (a)
		g->api = a, g->ca = g->na;
	else if (!g->na)
		free(g->api), g->api = NULL, g->ca = 0;
}

static void clear(struct gpuproc *g)
{
	free(g->w);
	free(g->api);
	g->w = NULL, g->api = NULL;
	g->nw = g->cw = g->na = g->ca = 0;
	g->placed = 0;
}

static int again(void *ctx, struct trace_file *f, const struct trace_event *e)
{
	return take(ctx, f, e, 1);
}

/* A rank over its share: its file's CUPTI records read again (the others skipped without
 * decoding), its work whole and joined as the first reading would have it; 0, -1 when the file
 * could not be read again (or out of memory). */
static int reread(struct proc *p, const char *path)
{
	struct gpuproc *g = p->gpu;
	struct trace_file f;
	struct trace_visitor v = { .ctx = g, .on_gpu = again };
	clear(g);
	free(g->xc); /* (read again with the rest) */
	g->xc = NULL;
	g->nx = g->cx = 0;
	int rc = trace_open(&f, path);
	if (rc == 0) {
		f.only_tid = INT_MAX; /* (no thread's: every "events" record is skipped) */
		if (p->clock)
			trace_set_clock(&f, p->clock);
		f.verified = p->read_to;
		rc = trace_read(&f, &v);
	}
	trace_close(&f);
	if (rc == 1 || rc < 0) {
		clear(g);
		return -1;
	}
	joined(g);
	return 0;
}

/* the whole work (after reread) down to what a rank over its share holds: its NCCL kernels, and
 * the copies of pageable memory an_gpu_lanes_new takes */
static void partial(struct gpuproc *g)
{
	size_t n = 0;
	for (size_t i = 0; i < g->nw; i++)
		if (g->w[i].cls == GW_NCCL || (g->w[i].pageable && g->w[i].bytes >= PAGEABLE_MIN))
			g->w[n++] = g->w[i];
	g->nw = n;
	struct gwork *w = n ? realloc(g->w, n * sizeof *g->w) : NULL;
	if (w)
		g->w = w, g->cw = n;
	else if (!n)
		free(g->w), g->w = NULL, g->cw = 0;
	free(g->api);
	g->api = NULL;
	g->na = g->ca = 0;
}

/* what was read again let go, the list set aside back */
static void restore(struct gpuproc *g)
{
	clear(g);
	g->w = g->pw, g->nw = g->cw = g->npw, g->placed = g->pplaced;
	g->pw = NULL;
	g->opened = 0;
}

int an_gpu_open(struct proc *p)
{
	struct gpuproc *g = p->gpu;
	if (!g || !g->over || g->opened || g->nccl_only)
		return 0;
	g->pw = g->w, g->npw = g->nw, g->pplaced = g->placed;
	g->w = NULL, g->nw = g->cw = 0;
	if (reread(p, p->open ? p->open : p->file) < 0) {
		restore(g);
		return -1;
	}
	g->opened = 1;
	return 0;
}

void an_gpu_close(struct proc *p)
{
	struct gpuproc *g = p->gpu;
	if (g && g->opened)
		restore(g);
}

void an_gpu_loaded(struct proc *p, const struct trace_file *f, const char *path)
{
	if (f->gpu.have && gpu_of(p)) {
		snprintf(p->gpu->state, sizeof p->gpu->state, "%s", f->gpu.state);
		snprintf(p->gpu->why, sizeof p->gpu->why, "%.159s", f->gpu.why);
		p->gpu->dropped = f->gpu.dropped + f->gpu.refused;
		p->gpu->lead_ns = f->gpu.lead_ns;
		snprintf(p->gpu->client, sizeof p->gpu->client, "%s", f->gpu.client);
	}
	struct gpuproc *g = p->gpu;
	if (g && !g->over) {
		joined(g);
		free(g->xc);
		free(g->call);
		g->xc = NULL, g->call = NULL;
		g->nx = g->cx = g->nc = g->cc = 0;
		an_plug_free(g);
	} else if (g) { /* (what the clocks, the collectives and the host's split need: partial) */
		if (reread(p, path) == 0)
			partial(g);
		else
			clear(g);
	}
	/* the kernels' names, for the viewer (sorted by id, as the file's table is read) */
	if (g && f->nnames && (g->names = calloc(f->nnames, sizeof *g->names))) {
		for (size_t i = 0; i < f->nnames; i++) {
			g->names[g->nnames] = f->names[i];
			g->names[g->nnames].s = strndup(f->names[i].s, f->names[i].len);
			g->nnames += g->names[g->nnames].s != NULL;
		}
		sort_n(g->names, g->nnames, sizeof *g->names, cmp_name);
	}
	for (int i = 0; g && i < g->nsites; i++) {
		struct gsite *s = &g->site[i];
		const struct trace_stack *st = s->stack ? trace_stack(f, s->stack) : NULL;
		for (uint32_t k = 0; st && k < st->n && s->nframes < 8; k++) {
			const struct trace_module *m = trace_module_of(f, st->ips[k]);
			const char *base = m && m->path ? strrchr(m->path, '/') : NULL;
			if (m)
				snprintf(s->frames[s->nframes++], sizeof s->frames[0], "%s+0x%" PRIx64,
					 base ? base + 1 : m->path ? m->path : "?", st->ips[k] - m->bias);
			else
				snprintf(s->frames[s->nframes++], sizeof s->frames[0], "0x%" PRIx64, st->ips[k]);
		}
	}
}

static int cmp_name(const void *x, const void *y)
{
	const struct trace_name *a = x, *b = y;
	return (a->id > b->id) - (a->id < b->id);
}

void an_gpu_free(struct proc *p)
{
	struct gpuproc *g = p->gpu;
	if (!g)
		return;
	free(g->w);
	free(g->pw);
	free(g->api);
	free(g->xc);
	free(g->call);
	an_plug_free(g);
	for (size_t i = 0; i < g->nnames; i++)
		free(g->names[i].s);
	free(g->names);
	free(g);
	p->gpu = NULL;
}

struct gpuproc *an_gpu_take(struct proc *p)
{
	struct gpuproc *g = p->gpu;
	p->gpu = NULL;
	return g;
}

void an_gpu_give(struct proc *p, struct gpuproc *g)
{
	struct proc q = { .gpu = g };
	if (p) {
		an_gpu_free(p);
		p->gpu = g;
	} else {
		an_gpu_free(&q);
	}
}

/* p's device records as bytes, and back (report --mpi): whole, or (!whole) only what every
 * process needs of a rank split elsewhere: its NCCL kernels, in their order */
void an_gpu_pack(struct an_buf *b, const struct proc *p, int whole)
{
	const struct gpuproc *g = p->gpu;
	uint8_t have = g != NULL;
	an_put(b, &have, 1);
	if (!g)
		return;
	if (!whole || g->nccl_only) {
		struct gpuproc h = *g;
		h.nw = 0;
		for (size_t i = 0; i < g->nw; i++)
			h.nw += g->w[i].cls == GW_NCCL;
		h.na = h.nx = h.nc = h.nnames = 0;
		h.nccl_only = 1;
		an_put(b, &h, sizeof h);
		for (size_t i = 0; i < g->nw; i++)
			if (g->w[i].cls == GW_NCCL)
				an_put(b, &g->w[i], sizeof g->w[i]);
		return;
	}
	an_put(b, g, sizeof *g);
	an_put(b, g->w, g->nw * sizeof *g->w);
	an_put(b, g->api, g->na * sizeof *g->api);
	an_put(b, g->xc, g->nx * sizeof *g->xc);
	an_put(b, g->call, g->nc * sizeof *g->call);
	for (size_t i = 0; i < g->nnames; i++) {
		an_put(b, &g->names[i], sizeof g->names[i]);
		an_put_str(b, g->names[i].s);
	}
}

int an_gpu_unpack(struct an_rd *r, struct proc *p)
{
	uint8_t have;
	p->gpu = NULL;
	if (an_get(r, &have, 1) < 0 || !have)
		return r->err ? -1 : 0;
	struct gpuproc *g = calloc(1, sizeof *g);
	if (!g || an_get(r, g, sizeof *g) < 0) {
		free(g);
		return -1;
	}
	size_t nn = g->nnames;
	g->api = NULL, g->xc = NULL, g->call = NULL, g->names = NULL, g->nnames = 0;
	g->pw = NULL, g->npw = 0, g->opened = 0, g->placed = 0;
	g->plug = NULL, g->np = g->cp = 0; /* (its kernels are in w) */
	p->gpu = g; /* (freed by an_gpu_free on failure) */
	g->w = an_get_arr(r, g->nw, sizeof *g->w, 0);
	g->cw = g->nw;
	g->api = an_get_arr(r, g->na, sizeof *g->api, 0);
	g->ca = g->na;
	g->xc = an_get_arr(r, g->nx, sizeof *g->xc, 0);
	g->cx = g->nx;
	g->call = an_get_arr(r, g->nc, sizeof *g->call, 0);
	g->cc = g->nc;
	if (r->err || nn > (size_t)(r->end - r->p) / sizeof *g->names || !(g->names = calloc(nn + 1, sizeof *g->names)))
		return -1;
	for (; g->nnames < nn; g->nnames++) {
		struct trace_name *t = &g->names[g->nnames];
		an_get(r, t, sizeof *t);
		if (!(t->s = an_get_str(r)))
			return -1;
	}
	return r->err ? -1 : 0;
}

/* ---- the split ---- */

/* the earliest call of correlation id corr (a runtime call and the driver call inside it share
 * theirs) in api, sorted by id then time; NULL none. *at: where the last search ended, for ids
 * asked in increasing order (seq), else each is searched for. */
static const struct gapi *api_of(const struct gpuproc *g, uint32_t corr, int seq, size_t *at)
{
	size_t i = *at;
	if (seq) {
		while (i < g->na && g->api[i].corr < corr)
			i++;
		*at = i;
	} else {
		size_t hi = g->na;
		for (i = 0; i < hi;) {
			size_t m = (i + hi) / 2;
			if (g->api[m].corr < corr)
				i = m + 1;
			else
				hi = m;
		}
	}
	return i < g->na && g->api[i].corr == corr ? &g->api[i] : NULL;
}

/* (the orders an_sort_near sorts by order any two records that differ: the report never depends on
 * how a sort leaves equal ones) */
static int cmp_api_corr_t(const void *x, const void *y)
{
	const struct gapi *a = x, *b = y;
	CMP_BY(corr);
	CMP_BY(t);
	CMP_BY(d);
	return (a->launch > b->launch) - (a->launch < b->launch);
}

static int cmp_api_t(const void *x, const void *y)
{
	const struct gapi *a = x, *b = y;
	CMP_BY(t);
	CMP_BY(corr);
	CMP_BY(d);
	return (a->launch > b->launch) - (a->launch < b->launch);
}

static int cmp_xc(const void *x, const void *y)
{
	const struct gxc *a = x, *b = y;
	return (a->corr > b->corr) - (a->corr < b->corr);
}

static int cmp_call(const void *x, const void *y)
{
	const struct gcall *a = x, *b = y;
	return (a->ext > b->ext) - (a->ext < b->ext);
}

static int cmp_launch(const void *x, const void *y)
{
	const struct gwork *a = x, *b = y;
	CMP_BY(launch);
	CMP_BY(t);
	CMP_BY(corr);
	CMP_BY(ctx);
	CMP_BY(stream);
	CMP_BY(d);
	CMP_BY(bytes);
	CMP_BY(comm);
	CMP_BY(seq);
	CMP_BY(name);
	CMP_BY(cls);
	CMP_BY(pageable);
	return (a->op > b->op) - (a->op < b->op);
}

/* Each work's launch time, and NCCL kernels' collectives (by the call's external id, else by
 * their order), once the file is read; times on the process's own clock. */
static const struct gcomm *comm_of(const struct gpuproc *g, int32_t comm)
{
	for (int i = 0; i < g->ncomms; i++)
		if (g->comms[i].comm == comm)
			return &g->comms[i];
	return NULL;
}

/* a nonblocking communicator's launching call still without a kernel: its kernels are launched by
 * NCCL's own thread, after the call returned, with no external id (so on an H200, NCCL 2.28.9);
 * one rank alone launches no kernel (an in-place collective nothing, an out-of-place one a copy) */
static int waiting_unit(const struct gpuproc *g, const struct gcall *c)
{
	const struct gcomm *m = c->unit && !c->used ? comm_of(g, c->comm) : NULL;
	return m && !m->blocking && m->nranks != 1;
}

/* k's kernels take the waiting units of comm, in order (the unit's collective, its bytes) */
static void take_units(struct gpuproc *g, struct gwork **k, size_t n, int32_t comm)
{
	size_t j = 0;
	for (size_t i = 0; i < g->nc && j < n; i++)
		if (g->call[i].comm == comm && waiting_unit(g, &g->call[i])) {
			struct gwork *w = k[j++];
			w->comm = comm;
			w->seq = g->call[i].seq;
			w->bytes = g->call[i].bytes;
			w->op = g->call[i].op;
		}
	g->join[JOIN_COMM_ORDER] += (uint32_t)n;
}

/* Several communicators' waiting units (cs, units: nc of them) for the n kernels k, in launch
 * order: each communicator takes the stream (lane) whose kernels are as many as its units, where
 * that count pairs one stream with one communicator. */
static void join_by_stream(struct gpuproc *g, struct gwork **k, size_t n, const int32_t *cs, const size_t *units,
			   size_t nc)
{
	/* each lane's count of kernels: lanes sorted, then counted in place (lk[i] has lc[i]) */
	uint64_t *lk = malloc(n * sizeof *lk);
	size_t *lc = malloc(n * sizeof *lc), nl = 0;
	struct gwork **rest = malloc(n * sizeof *rest);
	for (size_t i = 0; lk && lc && rest && i < n; i++)
		lk[i] = lane(k[i]);
	if (lk && lc && rest) {
		sort_n(lk, n, sizeof *lk, an_cmp_i64); /* (any order: equal lanes together) */
		for (size_t i = 0; i < n; i++)
			if (nl && lk[nl - 1] == lk[i])
				lc[nl - 1]++;
			else
				lk[nl] = lk[i], lc[nl++] = 1;
	}
	for (size_t m = 0; m < nc && n && nl; m++) {
		size_t pl = 0;
		int pairs = 0;
		for (size_t l = 0; l < nl; l++)
			if (lc[l] == units[m])
				pairs++, pl = l;
		for (size_t o = 0; o < nc; o++)
			pairs += o != m && units[o] == units[m]; /* (two communicators of one count: no pair) */
		if (pairs != 1)
			continue;
		/* the stream's kernels to the front, the others after them, each in launch order */
		size_t j = 0, r = 0;
		for (size_t i = 0; i < n; i++)
			if (lane(k[i]) == lk[pl])
				k[j++] = k[i];
			else
				rest[r++] = k[i];
		take_units(g, k, j, cs[m]);
		memcpy(k, rest, r * sizeof *k);
		n = r;
		lc[pl] = 0; /* (taken: a count of 0 pairs with no communicator) */
	}
	free(lk);
	free(lc);
	free(rest);
}

/* NCCL kernels no external id joined: each nonblocking communicator's launches come in the order
 * of its calls, so its kernels, in launch order, are its waiting calls in call order (g->call is in
 * external id order, which is call order). One such communicator: its kernels are those. Several:
 * each takes the stream whose kernels are as many as its calls, where the counts pair them one to
 * one. Else they stay joined by order alone, and where the process has more than one
 * communicator are used for nothing across ranks (no instance, no clock point): the order of a
 * process's kernels is not its communicators' own. */
static void join_by_order(struct gpuproc *g)
{
	size_t n = 0;
	for (size_t i = 0; i < g->nw; i++)
		n += g->w[i].cls == GW_NCCL && g->w[i].comm == INT32_MIN;
	struct gwork **k = n ? malloc(n * sizeof *k) : NULL;
	int32_t cs[MAX_GCOMMS];
	size_t units[MAX_GCOMMS] = { 0 }, nc = 0;
	if (k) {
		n = 0;
		for (size_t i = 0; i < g->nw; i++) /* (in launch order) */
			if (g->w[i].cls == GW_NCCL && g->w[i].comm == INT32_MIN)
				k[n++] = &g->w[i];
		for (size_t i = 0; i < g->nc; i++) {
			if (!waiting_unit(g, &g->call[i]))
				continue;
			size_t m = 0;
			while (m < nc && cs[m] != g->call[i].comm)
				m++;
			if (m == nc)
				cs[nc++] = g->call[i].comm;
			units[m]++;
		}
	}
	if (nc == 1 && units[0] == n) {
		take_units(g, k, n, cs[0]);
	} else if (nc > 1) {
		join_by_stream(g, k, n, cs, units, nc);
	}
	g->join[JOIN_ORDER] = 0;
	for (size_t i = 0; i < g->nw; i++)
		if (g->w[i].cls == GW_NCCL && g->w[i].comm == INT32_MIN) {
			g->join[JOIN_ORDER]++;
			if (g->allcomms > 1)
				g->w[i].seq = -1;
		}
	free(k);
}

static void identify(struct gpuproc *g)
{
	an_sort_near(g->api, g->na, sizeof *g->api, cmp_api_corr_t);
	sort_n(g->xc, g->nx, sizeof *g->xc, cmp_xc);
	sort_n(g->call, g->nc, sizeof *g->call, cmp_call);
	int seq = 1; /* (the work in the order of its ids, as CUPTI mostly writes it: one walk joins it) */
	for (size_t i = 1; i < g->nw && seq; i++)
		seq = g->w[i].corr >= g->w[i - 1].corr;
	int32_t order = 0;
	size_t at = 0;
	memset(g->join, 0, sizeof g->join);
	for (size_t i = 0; i < g->nc; i++)
		g->call[i].used = 0;
	for (size_t i = 0; i < g->nw; i++) {
		struct gwork *w = &g->w[i];
		const struct gapi *a = w->corr ? api_of(g, w->corr, seq, &at) : NULL;
		w->launch = a ? a->t : w->t;
		struct gxc kx = { .corr = w->corr };
		const struct gxc *x = w->corr && g->nx ? bsearch(&kx, g->xc, g->nx, sizeof *g->xc, cmp_xc) : NULL;
		struct gcall kc = { .ext = x ? x->ext : 0 };
		struct gcall *c = x && g->nc ? bsearch(&kc, g->call, g->nc, sizeof *g->call, cmp_call) : NULL;
		if (c && w->cls == GW_COMPUTE)
			w->cls = GW_NCCL; /* a kernel an NCCL call launched, whatever its name */
		if (w->cls != GW_NCCL)
			continue;
		if (c) {
			w->comm = c->comm;
			w->seq = c->seq;
			w->bytes = c->bytes;
			w->op = c->op;
			c->used = 1;
			g->join[JOIN_EXT]++;
		} else { /* by order, in a sequence of their own (join_by_order may do better) */
			w->comm = INT32_MIN;
			w->seq = order++;
		}
	}
	an_sort_near(g->api, g->na, sizeof *g->api, cmp_api_t);
	an_sort_near(g->w, g->nw, sizeof *g->w, cmp_launch); /* (CUPTI's records come as work ends) */
	join_by_order(g);
}

/* w's start on the job's clock */
static int64_t job_start(const struct proc *p, const struct gwork *w)
{
	return an_job_time(p, w->plugin ? w->t - p->gpu->shift : w->t);
}

/* times onto the job's clock (after clocks.c), once */
static void place(struct proc *p)
{
	struct gpuproc *g = p->gpu;
	g->placed = 1;
	for (size_t i = 0; i < g->nw; i++) {
		g->w[i].t = job_start(p, &g->w[i]);
		g->w[i].launch = an_job_time(p, g->w[i].launch);
	}
	for (size_t i = 0; i < g->na; i++)
		g->api[i].t = an_job_time(p, g->api[i].t);
}

size_t an_gpu_nccl_ends(const struct proc *p, struct gend **out)
{
	const struct gpuproc *g = p->gpu;
	size_t n = 0;
	*out = NULL;
	/* (not the plugin's: their times are the host's clock, within their bounds, not the device's) */
	for (size_t i = 0; g && i < g->nw; i++)
		n += g->w[i].cls == GW_NCCL && g->w[i].seq >= 0 && !g->w[i].plugin;
	if (!n || !(*out = malloc(n * sizeof **out)))
		return 0;
	n = 0;
	for (size_t i = 0; i < g->nw; i++)
		if (g->w[i].cls == GW_NCCL && g->w[i].seq >= 0 && !g->w[i].plugin)
			(*out)[n++] = (struct gend){ g->w[i].comm == INT32_MIN ? -7 : g->w[i].comm, g->w[i].seq,
						     an_job_time(p, g->w[i].t), an_job_time(p, g->w[i].t + g->w[i].d) };
	return n;
}

/* In n elements of size bytes from base, sorted by the int64_t at byte offset off: the first whose
 * value is t or more (n when none). */
static size_t first_at(const void *base, size_t n, size_t size, size_t off, int64_t t)
{
	size_t lo = 0, hi = n;
	while (lo < hi) {
		size_t m = (lo + hi) / 2;
		int64_t v;
		memcpy(&v, (const char *)base + m * size + off, sizeof v);
		if (v < t)
			lo = m + 1;
		else
			hi = m;
	}
	return lo;
}

/* when all the work launched before host time t ended: ends[] is the running maximum of the
 * works' ends in launch order */
static int64_t drained(const struct gwork *w, const int64_t *ends, size_t n, int64_t t)
{
	size_t i = first_at(w, n, sizeof *w, offsetof(struct gwork, launch), t);
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
	int32_t late;  /* ... that rank */
};

static int cmp_edge(const void *x, const void *y)
{
	const struct edge *a = x, *b = y;
	CMP_BY(t);
	CMP_BY(delta);
	CMP_BY(lane);
	return (a->wait > b->wait) - (a->wait < b->wait);
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
	PUSH(h->e, h->n, h->cap, ((struct edge){ t, -1, (int8_t)lane, 1 }));
	PUSH(h->e, h->n, h->cap, ((struct edge){ t + d, -1, (int8_t)lane, -1 }));
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
	uint32_t me = t ? t->cupti_id : 0;
	int64_t p0 = 0, p1 = -1; /* the run of queries so far */
	for (size_t i = 0; me && i < g->na; i++) { /* (in time order: identify) */
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
		size_t i = first_at(h->page, h->npage, sizeof *h->page, 0, e->t);
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
	size_t k = first_at(b + 1, N, 2 * sizeof *b, 0, t + 1); /* the first step ending after t */
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
 * start). NCCL's own streams run behind the computation: a step ends when its computation does,
 * and a collective still running then is exposed in the next. Returns -1 when out of memory. */
static int bounds(const struct rankinfo *ri, size_t N, int64_t *b)
{
	const struct gpuproc *g = ri->p->gpu;
	size_t nw = g->nw;
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
	size_t k = first_at(ri->steps, N, sizeof *ri->steps, offsetof(struct rankstep, t1), w->launch + 1);
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
		for (size_t i = first_at(g->api, g->na, sizeof *g->api, offsetof(struct gapi, t), ri->steps[k].t0);
		     i < g->na && g->api[i].t < ri->steps[k].t1; i++)
			launches += g->api[i].launch;
	/* the edges: the training thread's waits (gathered as split.c streamed it), runs of launch
	 * calls, device work */
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
			goto out;
		i = j;
	}
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
				waits[nwaits] = (struct nwait){ wt < w->d ? wt : w->d, in->late };
				h->e[h->n - 2].wait = (int32_t)nwaits++;
			}
		}
		/* the per-step figures: work launched in a step (launch_step; the work between a
		 * sample's steps is in the sweep, which must know when the device was busy, but not in
		 * them) */
		long k = launch_step(ri, N, w);
		if (k < 0)
			continue;
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
	int after = 0, last_wait = 0, late_rank = -1; /* after: the part of an idle gap a wait began */
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
			double ms = MS(hi - lo);
			struct rankstep *st = &ri->steps[q];
			double *part = gs->part;
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
					an_wf_add(sd, r, q, late_rank, wt);
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
	for (size_t q = 0; q < N; q++)
		if (ri->steps[q].wait > ri->steps[q].cat[CAT_COMMS])
			ri->steps[q].wait = ri->steps[q].cat[CAT_COMMS];
	gs->have = 1;
	for (int c = 0; c < GP_COUNT; c++)
		gs->part[c] /= (double)N;
	gs->kernel_us_p50 = kus && gs->kernels > 0 ? an_quantile_select(kus, (size_t)gs->kernels, 0.5) : 0;
	gs->nccl_src = g->nccl_src;
	if (sd->late[r] && sd->nlate[r] && kus) { /* (kus's room is enough: one a work) */
		memcpy(kus, sd->late[r], sd->nlate[r] * sizeof *kus);
		gs->nccl_late_p50 = p50(kus, sd->nlate[r]);
	}
	gs->kernels /= (double)N;
	gs->nccl_ms /= (double)N;
	gs->nccl_bytes /= (double)N;
	gs->nccl_calls /= (double)N;
	gs->nccl_xfer_ms /= (double)N;
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
	struct thr *t = an_train_thread(p);
	gs->site = -1;
	for (int i = 0; t && i < g->nsites; i++)
		if (g->site[i].tid == t->tid && (gs->site < 0 || g->site[i].ms > g->site[gs->site].ms))
			gs->site = i;
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

int an_gpu_busy(const struct proc *p)
{
	return p->gpu && p->gpu->nall > 0;
}

/* ranks with device work, or NCCL kernels from the plugin */
static int with_work(const struct analysis *a)
{
	int n = 0;
	for (int r = 0; r < a->nranks; r++)
		n += a->ranks[r].p->gpu && (a->ranks[r].p->gpu->nall > 0 || a->ranks[r].p->gpu->nccl_src == NSRC_PLUGIN);
	return n;
}

/* A rank whose only device times are its NCCL kernels' from the plugin (no CUPTI): its steps stay
 * its host's (no device timeline to split), and its NCCL figures are its kernels' launched in
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
	gs->nccl_bytes /= (double)N;
	gs->nccl_calls /= (double)N;
	gs->nccl_late_p50 = p50(late, nl);
	gs->nccl_src = NSRC_PLUGIN;
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
		place(ri->p);
	if (j->phase == 1)
		split_rank(j->a, j->sd, j->tab, (int)r, j->b, &j->sd->gadd[r]);
	else
		j->ok[r] = ri->steps && bounds(ri, N, j->mine + 2 * N * r) == 0;
	an_gpu_close(ri->p);
}

void an_gpu_warn(struct analysis *a)
{
	uint64_t untimed = 0;
	for (int r = 0; r < a->nranks; r++) {
		const struct gpuproc *g = a->ranks[r].p->gpu;
		if (g && g->state[0] && strcmp(g->state, "on"))
			an_warn(a, "rank %d: GPU capture %s (%s): its device's timeline is not recorded, only its host calls%s",
				a->ranks[r].rank, g->state, g->why,
				g->nccl_src == NSRC_PLUGIN ? " and, from NCCL's profiler plugin, its NCCL kernels' times" : "");
		if (g && g->pstat.conflicts)
			an_warn(a, "rank %d: %u of the %u NCCL kernels NCCL's profiler plugin told of have no GPU clock "
				"offset that fits their calls and their ends (the GPU's clock moved against the host's?): "
				"their times are the bounds' middle", a->ranks[r].rank, g->pstat.conflicts, g->pstat.colls);
		untimed += a->ranks[r].p->gpu_untimed;
		if (a->sd && a->sd->K && a->ranks[r].p->gpu_dropped && g && g->nall)
			an_warn(a, "rank %d: CUPTI lost %" PRIu64 " of its records: its device's timeline has holes, so its "
				"steps are split from its host's calls, as without GPU capture (the other ranks' from "
				"their devices')", a->ranks[r].rank, a->ranks[r].p->gpu_dropped);
		if (g && g->other_dev)
			an_warn(a, "rank %d: %" PRIu64 " records of device work on other devices than device %d, where its "
				"%s ran, are left out of its split", a->ranks[r].rank, g->other_dev, g->device,
				g->nccl_on_dev[g->device >= 0 ? g->device : 0] ? "NCCL kernels" : "most work");
		if (a->ranks[r].gpu.reread_failed)
			an_warn(a, "rank %d: %s could not be read again for its device's work: its steps are split from its "
				"host calls", a->ranks[r].rank, a->ranks[r].p->file);
	}
	if (untimed)
		an_warn(a, "CUPTI gave %" PRIu64 " device record%s no times (work still running when it was last flushed, "
			"at exit): left out", untimed, untimed == 1 ? "" : "s");
}

/* The plugin's clock on a rank without CUPTI is late by how soon NCCL told it of a kernel's end
 * (ncclplug.c): where other ranks had both, the median of how late it ran there is taken off
 * (before any rank is placed; every process of report --mpi has every rank's check alike). */
static void shifts(const struct analysis *a)
{
	double *v = malloc(((size_t)a->nranks + 1) * sizeof *v);
	size_t n = 0;
	for (int r = 0; v && r < a->nranks; r++) {
		const struct gpuproc *g = a->ranks[r].p->gpu;
		if (g && g->nccl_src == NSRC_CUPTI && g->pstat.matched)
			v[n++] = g->pstat.late_us;
	}
	int64_t shift = n ? (int64_t)llround(p50(v, n) * 1e3) : 0;
	for (int r = 0; r < a->nranks; r++) {
		struct gpuproc *g = a->ranks[r].p->gpu;
		if (g && g->nccl_src == NSRC_PLUGIN && !g->placed)
			g->shift = shift;
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
	/* (a device timeline with holes would show them as idle: a rank CUPTI lost records of keeps its
	 * host split, and its device's steps count in no bound) */
	for (size_t i = 0; i < nrs; i++)
		if (a->ranks[rs[i]].p->gpu && a->ranks[rs[i]].p->gpu->nall && !a->ranks[rs[i]].p->gpu->nccl_only &&
		    !a->ranks[rs[i]].p->gpu_dropped)
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
			place(a->ranks[r].p);
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
	/* the ranks split here whose only device times are the plugin's NCCL kernels */
	for (size_t i = 0; i < nrs; i++) {
		const struct gpuproc *g = a->ranks[rs[i]].p->gpu;
		if (g && !g->nall && g->nccl_src == NSRC_PLUGIN && !g->nccl_only && a->ranks[rs[i]].steps)
			nccl_figures(a, sd, &tab, (int)rs[i]);
	}
	size_t k = 0;
	for (size_t i = 0; i < n; i++)
		if (a->ranks[order[i]].steps && !a->ranks[order[i]].gpu.reread_failed)
			order[k++] = order[i];
	j.phase = 1;
	an_parallel(k, a->jobs, order, gpu_one, &j);
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

const char *an_gpu_site(const struct proc *p, int i, const char *(*frames)[8], int *nframes, double *ms,
			double *calls, int *kind, int *what)
{
	const struct gpuproc *g = p->gpu;
	if (!g || i < 0 || i >= g->nsites)
		return NULL;
	const struct gsite *s = &g->site[i];
	for (int k = 0; k < s->nframes; k++)
		(*frames)[k] = s->frames[k];
	*nframes = s->nframes;
	*ms = s->ms;
	*calls = s->calls;
	*kind = s->kind;
	*what = s->what;
	return ddpspy_event_names[s->kind];
}

void an_gpu_job(const struct analysis *a, struct gpujob *j)
{
	memset(j, 0, sizeof *j);
	j->capture = "host-only";
	for (int r = 0; r < a->nranks; r++) {
		const struct gpuproc *g = a->ranks[r].p->gpu;
		if (!g)
			continue;
		j->ranks += g->nall > 0;
		j->any |= g->nall > 0 || g->state[0] || g->nccl_src == NSRC_PLUGIN;
		if (!strcmp(g->state, "on"))
			j->capture = "cupti";
		j->dropped += g->dropped > 0 ? (uint64_t)g->dropped : 0;
		j->untimed += a->ranks[r].p->gpu_untimed;
		j->lead_us = fmax(j->lead_us, (double)g->lead_ns / 1e3);
	}
}

void an_gpu_cover(const struct analysis *a, int r, struct gpucover *c)
{
	const struct gpuproc *g = a->ranks[r].p->gpu;
	int on = g && (!strcmp(g->state, "on") || (!g->state[0] && g->nall > 0)); /* (files before 2.2: no state) */
	int plug = g && g->nccl_src == NSRC_PLUGIN;
	*c = (struct gpucover){ .source = on ? (g->client[0] ? "cupti-shared" : "cupti") : plug ? "nccl-plugin" : "host-only",
				.client = on && g->client[0] ? g->client : NULL,
				.why = g && g->why[0] ? g->why : "no GPU capture recorded in this rank's file",
				.kernels = !on, .copies = !on, .nccl_timing = !on && !plug,
				.dropped = g && g->dropped > 0 ? (uint64_t)g->dropped : 0,
				.nccl = plug ? "nccl-plugin" : g && g->nccl_src == NSRC_CUPTI ? "cupti" : "none" };
	if (!g || !g->pstat.colls)
		return;
	const struct plugstat *s = &g->pstat;
	c->colls = s->colls, c->unjoined = s->unjoined, c->conflicts = s->conflicts, c->bound_us = s->bound_us;
	c->shift_us = (double)g->shift / 1e3;
	if (g->nccl_src == NSRC_CUPTI) {
		c->checked = 1;
		c->matched = s->matched, c->cupti_only = s->cupti_only, c->plugin_only = s->plugin_only;
		c->start_us = s->start_us, c->dur_us = s->dur_us, c->dur_us_max = s->dur_us_max;
	}
}

/* one group of alike ranks [r0, r1] into the line */
static void cover_group(FILE *f, const struct analysis *a, int r0, int r1, const struct gpucover *c, int first)
{
	fprintf(f, "%s", first ? "" : "; ");
	if (r0 == r1)
		fprintf(f, "rank %d ", a->ranks[r0].rank);
	else
		fprintf(f, "ranks %d-%d ", a->ranks[r0].rank, a->ranks[r1].rank);
	if (c->client)
		fprintf(f, "CUPTI, shared with another client (%s)", c->client);
	else if (c->kernels && !c->nccl_timing)
		fprintf(f, "NCCL kernel times from NCCL's profiler plugin, no CUPTI (%s): no kernels or copies", c->why);
	else if (c->kernels)
		fprintf(f, "host calls only (%s): no kernels, copies or NCCL kernel times", c->why);
	else if (!strcmp(c->nccl, "nccl-plugin"))
		fprintf(f, "CUPTI, NCCL kernel times from NCCL's profiler plugin");
	else
		fprintf(f, "CUPTI");
}

char *an_gpu_cover_line(const struct analysis *a)
{
	struct gpujob j;
	struct gpucover c, d;
	an_gpu_job(a, &j);
	if (!a->nranks || !j.any)
		return NULL;
	an_gpu_cover(a, 0, &c);
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	if (!f)
		return NULL;
	uint64_t dropped = c.dropped;
	int r0 = 0;
	for (int r = 1; r <= a->nranks; r++) {
		if (r < a->nranks)
			an_gpu_cover(a, r, &d);
		int same = r < a->nranks && !strcmp(d.source, c.source) &&
			   (!c.kernels || !strcmp(d.why, c.why)) && (!c.client || !strcmp(d.client, c.client)) &&
			   !strcmp(d.nccl, c.nccl);
		if (same) {
			dropped += d.dropped;
			continue;
		}
		cover_group(f, a, r0, r - 1, &c, r0 == 0);
		if (r < a->nranks) {
			c = d;
			dropped += d.dropped;
			r0 = r;
		}
	}
	if (dropped)
		fprintf(f, "; %" PRIu64 " CUPTI records lost (holes in the device timeline)", dropped);
	return fclose(f) == 0 ? buf : (free(buf), NULL);
}

size_t an_gpu_nwork(const struct proc *p)
{
	return p->gpu ? p->gpu->nw : 0;
}

int an_gpu_work(const struct proc *p, size_t i, struct gpuitem *it)
{
	static const char *const cls[GW_COUNT] = { "kernel", "copy", "copy_in", "nccl" };
	const struct gpuproc *g = p->gpu;
	if (!g || i >= g->nw)
		return -1;
	const struct gwork *w = &g->w[i];
	*it = (struct gpuitem){ .t = g->placed ? w->t : job_start(p, w), .d = w->d,
				.launch = g->placed ? w->launch : an_job_time(p, w->launch), .bytes = w->bytes,
				.stream = w->plugin ? UINT32_MAX : w->stream, .corr = w->corr, .comm = w->comm, .seq = w->seq, .op = w->op,
				.pageable = w->pageable, .cls = cls[w->cls], .nccl = w->cls == GW_NCCL,
				.plugin = w->plugin };
	if (w->cls == GW_COMPUTE || w->cls == GW_NCCL) {
		struct trace_name k = { .id = w->name };
		const struct trace_name *n = w->name && g->nnames ? bsearch(&k, g->names, g->nnames, sizeof k, cmp_name) : NULL;
		it->name = n ? n->s : NULL;
	}
	return 0;
}
