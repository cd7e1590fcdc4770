/* GPU jobs: what CUPTI recorded of each rank's device (cupti/gpu.c) and its NCCL calls
 * (preload/nccl.c), kept while loading (a rank over its share of memory: read again when it is
 * split), joined, and put on the job's clock; what the report and the views ask of them (each
 * rank's coverage: gpucover.c). The device's steps are split from them in gpustep.c
 * (docs/report.md, section 8); NCCL's profiler plugin's kernels come from ncclplug.c.
 *
 * NCCL kernels are known by name (ncclDevKernel_, ncclKernel_) and by correlation: the external
 * id ddpspy pushes around each NCCL call (gpu_extcorr) names the call, whose communicator and
 * sequence number match the same collective's kernels on every rank; kernels of unrecorded calls
 * are matched by their order. */
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/format.h"
#include "analysis_int.h"
#include "gpu_int.h"
#include "trace.h"

#define EXT_KIND_DDPSPY 5     /* CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2 (cupti_int.h's DSP_EXT_KIND) */

const char *const an_gpart_names[GP_COUNT] = {
#define X(e, s) s,
	GPU_PARTS(X)
#undef X
};

static int cmp_name(const void *x, const void *y);

/* argument positions of the kinds read here, from their names (common/format.h) */
static struct {
	int8_t k_device, k_ctx, m_device, m_ctx, s_device, s_ctx, k_stream, k_corr, k_kname, m_stream, m_corr, m_bytes,
		m_copy, m_src, m_dst, s_stream, s_corr, a_corr, a_fn, a_thread, x_kind, x_ext, x_corr, n_ext, g_begin, g_ext,
		c_dir, c_async, y_what, i_nranks, i_blocking, i_rank, n_ret, g_ret;
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
	P.n_ret = an_argpos(DDPSPY_EV_NCCL_COLL, "ret");
	P.g_ret = an_argpos(DDPSPY_EV_NCCL_GROUP, "ret");
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

/* L_*: whether a call (its name) launches work, and a graph's */
static int8_t launch_kind(const struct trace_file *f, int64_t id, const void *arg)
{
	(void)arg;
	return name_has(f, id, "GraphLaunch") ? L_GRAPH : name_has(f, id, "Launch") ? L_WORK : L_NONE;
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

/* 0 not NCCL's kernel, 1 NCCL's, 2 NCCL's of sends and receives only (ncclDevKernel_SendRecv) */
static int8_t nccl_kind(const struct trace_file *f, int64_t id, const void *arg)
{
	return has_any(f, id, arg) ? 1 + name_has(f, id, "SendRecv") : 0;
}

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

/* a CUPTI record into g: kept (work 1) or, of the kernels, copies, sets and runtime calls, none
 * (work 0: a rank over its share, reading its file the first time) */
static int take(struct gpuproc *g, const struct trace_file *f, const struct trace_event *e, int work)
{
	if (!sane(e))
		return 0;
	struct gwork w = { .t = e->t_ns, .d = e->dur_ns, .launch = e->t_ns, .comm = -1, .seq = -1, .op = -1 };
	int device_work = 1; /* (a kernel, copy or set: kept in g->w below) */
	switch (e->kind) {
	case DDPSPY_EV_GPU_KERNEL: {
		int64_t kn = an_arg(e, P.k_kname, 0);
		w.corr = (uint32_t)an_arg(e, P.k_corr, 0);
		w.stream = (uint32_t)an_arg(e, P.k_stream, 0);
		w.name = (uint32_t)kn;
		int8_t nk = memo(&g->nccl_name, f, kn, nccl_kind, NCCL_KERNELS);
		w.cls = nk ? GW_NCCL : GW_COMPUTE;
		w.p2p = nk == 2;
		an_gpu_on_device(g, &w, an_arg(e, P.k_device, 0), an_arg(e, P.k_ctx, 0));
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
		an_gpu_on_device(g, &w, an_arg(e, P.m_device, 0), an_arg(e, P.m_ctx, 0));
		break;
	}
	case DDPSPY_EV_GPU_MEMSET:
		w.corr = (uint32_t)an_arg(e, P.s_corr, 0);
		w.stream = (uint32_t)an_arg(e, P.s_stream, 0);
		w.cls = GW_COPY;
		an_gpu_on_device(g, &w, an_arg(e, P.s_device, 0), an_arg(e, P.s_ctx, 0));
		break;
	case DDPSPY_EV_CUDA_API: {
		device_work = 0;
		if (!work)
			break;
		int64_t fn = an_arg(e, P.a_fn, 0);
		struct gapi a = { e->t_ns, e->dur_ns, (uint32_t)an_arg(e, P.a_corr, 0),
				  an_gpu_api_thread(g, (uint32_t)an_arg(e, P.a_thread, 0)),
				  (uint8_t)memo(&g->launch_name, f, fn, launch_kind, NULL),
				  (uint8_t)memo(&g->wait_name, f, fn, api_wait, NULL) };
		struct gapi *grown = room_for(g->api, g->na, &g->ca, sizeof *grown, 256);
		if (!grown)
			return 1;
		(g->api = grown)[g->na++] = a;
		break;
	}
	case DDPSPY_EV_GPU_EXTCORR:
		device_work = 0;
		if (an_arg(e, P.x_kind, 0) == EXT_KIND_DDPSPY) {
			struct gxc x = { (uint32_t)an_arg(e, P.x_corr, 0), (uint64_t)an_arg(e, P.x_ext, 0) };
			struct gxc *grown = room_for(g->xc, g->nx, &g->cx, sizeof *grown, 256);
			if (!grown)
				return 1;
			(g->xc = grown)[g->nx++] = x;
		}
		break;
	default:
		device_work = 0;
	}
	if (device_work && work) {
		struct gwork *grown = room_for(g->w, g->nw, &g->cw, sizeof *grown, 256);
		if (!grown)
			return 1;
		(g->w = grown)[g->nw++] = w;
		int dev = an_gpu_work_device(g, &w);
		g->kept_on[dev >= 0 ? dev : 0] += dev >= 0;
	}
	return 0;
}

static int part_record(struct proc *p, const struct trace_file *f, const struct trace_event *e, size_t keep)
{
	struct gpuproc *g = gpu_of(p);
	if (!g)
		return 1;
	g->records++;
	if (sane(e) && e->t_ns + e->dur_ns > g->cupti_end)
		g->cupti_end = e->t_ns + e->dur_ns;
	int rc = take(g, f, e, !g->over);
	g->nall += sane(e) && (e->kind == DDPSPY_EV_GPU_KERNEL || e->kind == DDPSPY_EV_GPU_MEMCPY ||
			       e->kind == DDPSPY_EV_GPU_MEMSET); /* (what take keeps of work, or would) */
	if (!g->over && keep && g->nw + g->na > keep) { /* (the rest when the rank is split: an_gpu_open) */
		g->over = 1;
		free(g->w);
		free(g->api);
		g->w = NULL, g->api = NULL;
		g->nw = g->cw = g->na = g->ca = 0;
		memset(g->kept_on, 0, sizeof g->kept_on);
	}
	return rc;
}

/* a call site that waited for the device: the same thread, stack and NVTX range add up */
static void add_site(struct gpuproc *g, const struct trace_event *e, int what, const char *range)
{
	int i = 0;
	while (i < g->nsites && !(g->site[i].tid == e->tid && g->site[i].stack == e->stack && g->site[i].kind == e->kind &&
				  !strcmp(g->site[i].range, range)))
		i++;
	int taken;
	if ((i = an_keep(g->site, &g->nsites, MAX_SITES, sizeof g->site[0], offsetof(struct gsite, ms), i, MS(e->dur_ns),
			 &taken)) < 0)
		return;
	if (taken)
		memset(&g->site[i], 0, sizeof g->site[i]);
	struct gsite *s = &g->site[i];
	s->tid = e->tid;
	s->stack = e->stack;
	s->kind = e->kind;
	s->what = what;
	snprintf(s->range, sizeof s->range, "%s", range);
	s->ms += MS(e->dur_ns);
	s->calls++;
}

/* An NCCL send or receive as the message it is, an instance of its two ranks alike on both: the
 * communicator's ranks sending and receiving hashed into an id of its own (bit 29 set: a plugin's
 * are bit 30's, ncclplug.c), numbered by the call's order (an_p2p_number): the device split then
 * times the kernel's wait for its peer as a collective's. Unknown rank or order: none. */
static void msg_instance(const struct gpuproc *g, const struct ev *v, struct gcall *c)
{
	const struct gcomm *m = an_gpu_comm(g, v->comm);
	int me = m ? m->rank : -1;
	if (me < 0 || v->peer < 0 || v->order < 0)
		return;
	int send = v->op == DDPSPY_OP_SEND, src = send ? me : v->peer, dst = send ? v->peer : me;
	uint64_t h = an_mix64((uint64_t)(uint32_t)v->comm * 0x9e3779b97f4a7c15ull ^
			      ((uint64_t)(uint32_t)src << 32 | (uint32_t)dst));
	c->mcomm = (int32_t)((h & 0x1fffffff) | 0x20000000);
	c->mseq = v->order;
}

/* an NCCL call that returned (e), having launched c's kernel inside it: its end into g's ring of
 * them (a blocking communicator's of more than one rank, that moved bytes and succeeded: a
 * nonblocking one launches from NCCL's own thread, after the call; one rank may launch nothing) */
static void launched(struct gpuproc *g, const struct trace_event *e, const struct gcall *c, int64_t ret)
{
	const struct gcomm *m = an_gpu_comm(g, c->comm);
	if (ret == 0 && c->bytes > 0 && m && m->blocking && m->nranks > 1)
		g->launch_at[g->launches++ % COPY_RING] = e->t_ns + e->dur_ns;
}

static int part_host(struct proc *p, const struct trace_event *e, const struct ev *v)
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
		struct gcall c = { .ext = (uint64_t)an_arg(e, P.n_ext, 0), .comm = v->comm, .seq = v->seq,
				   .bytes = v->bytes, .op = v->op, .unit = g->depth == 0, .t = e->t_ns,
				   .grp = g->depth > 0 ? g->groups : 0, .mseq = -1 };
		if (an_nccl_p2p(v))
			msg_instance(g, v, &c);
		if (c.unit)
			launched(g, e, &c, an_arg(e, P.n_ret, -1));
		struct gcall *grown = room_for(g->call, g->nc, &g->cc, sizeof *grown, 256);
		if (!grown)
			return 1;
		(g->call = grown)[g->nc++] = c;
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
			for (size_t i = g->group_first; i < g->nc; i++) {
				const struct gcall *m = &g->call[i];
				c.bytes += m->bytes > 0 ? m->bytes : 0;
				/* (a group of messages: its least, which the peer's group holds too where the
				 * two pair their sends and receives, as pipelines do) */
				if (c.seq < 0 && m->mseq >= 0 &&
				    (c.mseq < 0 || m->mcomm < c.mcomm || (m->mcomm == c.mcomm && m->mseq < c.mseq))) {
					c.mcomm = m->mcomm;
					c.mseq = m->mseq;
					c.op = m->op;
				}
			}
			launched(g, e, &c, an_arg(e, P.g_ret, -1));
			struct gcall *grown = room_for(g->call, g->nc, &g->cc, sizeof *grown, 256);
			if (!grown)
				return 1;
			(g->call = grown)[g->nc++] = c;
		}
	} else if (e->kind == DDPSPY_EV_CUDA_SYNC) {
		g->host_cuda = 1;
		add_site(g, e, (int)an_arg(e, P.y_what, -1), an_range_now(p, e->tid));
	} else {
		g->host_cuda = 1;
		g->copy_at[g->copies++ % COPY_RING] = e->t_ns + e->dur_ns;
		if (!an_arg(e, P.c_async, 1) || e->dur_ns >= SYNC_MIN_NS)
			add_site(g, e, (int)an_arg(e, P.c_dir, -1), an_range_now(p, e->tid));
	}
	return 0;
}

/* the plugin's kernels k (n) into g's work, in launch order; -1 out of memory */
static int add_plugin(struct gpuproc *g, const struct gwork *k, size_t n)
{
	struct gwork *w = n ? realloc(g->w, (g->nw + n) * sizeof *w) : g->w;
	if (!w && n)
		return -1;
	memcpy(w + g->nw, k, n * sizeof *k);
	g->w = w;
	g->nw += n;
	g->cw = g->nw;
	sort_n(g->w, g->nw, sizeof *g->w, an_gpu_cmp_launch);
	return 0;
}

/* NCCL's kernels from its profiler plugin (ncclplug.c): where CUPTI timed none, the plugin's are
 * them; where it did, checked against them, and where CUPTI's records stopped before the run did
 * (another client took CUPTI's callbacks), the plugin's after that are them */
static void plugin_kernels(struct gpuproc *g)
{
	size_t nc = g->nccl; /* (none of the plugin's yet: they come in here, and a reading again
			       * starts from none, clear) */
	struct gwork *k;
	size_t nk = an_plug_kernels(g, &k);
	g->nccl_src = nc ? NSRC_CUPTI : nk ? NSRC_PLUGIN : NSRC_NONE;
	if (nc && nk) {
		an_plug_check(g, k, nk);
		size_t n = 0;
		for (size_t i = 0; i < nk; i++) /* (those an_plug_check counted as after_stop) */
			if (an_gpu_past_stop(g, k[i].t))
				k[n++] = k[i];
		if (n && add_plugin(g, k, n) == 0)
			g->nccl_src = NSRC_BOTH;
	} else if (nk && add_plugin(g, k, nk) < 0) {
		g->nccl_src = NSRC_NONE;
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
	an_gpu_devices_chosen(g);
	an_gpu_identify(g);
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
	memset(g->kept_on, 0, sizeof g->kept_on);
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
		f.span = p->part;
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

/* of a ring of the ends of the last n calls that each have a CUPTI record inside, those that
 * returned over 1 ms after CUPTI's last record (end) and before its last flush began (stop) */
static uint32_t after_last_record(const int64_t *ring, uint32_t n, int64_t end, int64_t stop)
{
	uint32_t after = 0;
	for (uint32_t i = 0; i < n && i < COPY_RING; i++)
		after += ring[i] > end + 1000000 && ring[i] < stop;
	return after;
}

static void part_loaded(struct proc *p, const struct trace_file *f, const char *path)
{
	if (f->gpu.have && gpu_of(p)) {
		snprintf(p->gpu->state, sizeof p->gpu->state, "%s", f->gpu.state);
		snprintf(p->gpu->why, sizeof p->gpu->why, "%.159s", f->gpu.why);
		p->gpu->dropped = f->gpu.dropped + f->gpu.refused;
		p->gpu->lead_ns = f->gpu.lead_ns;
		snprintf(p->gpu->client, sizeof p->gpu->client, "%s", f->gpu.client);
		snprintf(p->gpu->client_api, sizeof p->gpu->client_api, "%s", f->gpu.client_api_limited);
	}
	struct gpuproc *g = p->gpu;
	/* (CUPTI flushed at exit, _exit and exec, and dropped nothing; a copy's call record lies inside
	 * the wrapper's call, on the same clock within far less than 1 ms) */
	int whole = f->ended && (!strcmp(f->end_reason, "exit") || !strcmp(f->end_reason, "_exit") ||
				 !strcmp(f->end_reason, "exec")) && g && !g->dropped;
	int64_t stop = f->gpu.have && f->gpu.stopped_ns > 0 ? f->gpu.stopped_ns : INT64_MAX;
	if (g && whole && !strcmp(g->state, "on")) {
		g->unrecorded += after_last_record(g->copy_at, g->copies, g->cupti_end, stop);
		g->unlaunched += after_last_record(g->launch_at, g->launches, g->cupti_end, stop);
	}
	if (g && an_gpu_cupti_stopped(g) && g->cupti_end) /* (the steps after it are left out: steps.c) */
		p->gpu_stop = g->cupti_end;
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
		g->site[i].nframes = an_frames(f, g->site[i].stack, g->site[i].frames, 8);
		an_pysite(f, g->site[i].stack, 0, &g->site[i].py);
	}
}

static int cmp_name(const void *x, const void *y)
{
	const struct trace_name *a = x, *b = y;
	return AN_ORDER(a->id, b->id);
}

static void part_free(struct proc *p)
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

static struct gpuproc *part_take(struct proc *p)
{
	struct gpuproc *g = p->gpu;
	p->gpu = NULL;
	return g;
}

static void part_give(struct proc *p, struct gpuproc *g)
{
	struct proc q = { .gpu = g };
	if (p) {
		part_free(p);
		p->gpu = g;
	} else {
		part_free(&q);
	}
}

/* p's device records as bytes, and back (report --mpi): whole, or (!whole) only what every
 * process needs of a rank split elsewhere: its NCCL kernels, in their order */
static void part_pack(struct an_buf *b, const struct proc *p, int whole)
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

static int part_unpack(struct an_rd *r, struct proc *p)
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
	p->gpu = g; /* (freed by part_free on failure) */
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

/* what the device part does while a file is read and while records travel, for load.c, proc.c
 * and loadmpi.c (analysis_int.h's an_parts) */
__attribute__((constructor)) static void registered(void)
{
	an_parts.gpu.record = part_record;
	an_parts.gpu.host = part_host;
	an_parts.gpu.loaded = part_loaded;
	an_parts.gpu.pack = part_pack;
	an_parts.gpu.unpack = part_unpack;
	an_parts.gpu.take = part_take;
	an_parts.gpu.give = part_give;
	an_parts.gpu.free = part_free;
}

/* w's start on the job's clock */
static int64_t job_start(const struct proc *p, const struct gwork *w)
{
	return an_job_time(p, w->plugin ? w->t - p->gpu->shift : w->t);
}

/* times onto the job's clock (after clocks.c), once */
void an_gpu_place(struct proc *p)
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

/* a collective's kernel, which its ranks leave together: not the plugin's (their times are the
 * host's clock, within their bounds, not the device's), nor a message's (a send may end before
 * its receive, once its data is on the way) */
static int clock_kernel(const struct gwork *w)
{
	return w->cls == GW_NCCL && w->seq >= 0 && !w->plugin && !an_msg_op(w->op);
}

size_t an_gpu_nccl_ends(const struct proc *p, struct gend **out)
{
	const struct gpuproc *g = p->gpu;
	size_t n = 0;
	*out = NULL;
	/* (not the plugin's: their times are the host's clock, within their bounds, not the device's) */
	for (size_t i = 0; g && i < g->nw; i++)
		n += clock_kernel(&g->w[i]);
	if (!n || !(*out = malloc(n * sizeof **out)))
		return 0;
	n = 0;
	for (size_t i = 0; i < g->nw; i++)
		if (clock_kernel(&g->w[i]))
			(*out)[n++] = (struct gend){ g->w[i].comm == INT32_MIN ? -7 : g->w[i].comm, g->w[i].seq,
						     an_job_time(p, g->w[i].t), an_job_time(p, g->w[i].t + g->w[i].d) };
	return n;
}

const char *an_gpu_site(const struct proc *p, int i, const char (**frames)[112], int *nframes, double *ms,
			double *calls, int *kind, int *what, const struct pysite **py, const char **range)
{
	const struct gpuproc *g = p->gpu;
	if (!g || i < 0 || i >= g->nsites)
		return NULL;
	const struct gsite *s = &g->site[i];
	*py = &s->py;
	*range = s->range;
	*frames = s->frames;
	*nframes = s->nframes;
	*ms = s->ms;
	*calls = s->calls;
	*kind = s->kind;
	*what = s->what;
	return ddpspy_event_names[s->kind];
}

int an_gpu_busy(const struct proc *p)
{
	return p->gpu && p->gpu->nall > 0;
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
	return 0;
}

const char *an_gpu_work_name(const struct proc *p, size_t i)
{
	const struct gpuproc *g = p->gpu;
	if (!g || i >= g->nw || (g->w[i].cls != GW_COMPUTE && g->w[i].cls != GW_NCCL) || !g->w[i].name || !g->nnames)
		return NULL;
	struct trace_name k = { .id = g->w[i].name };
	const struct trace_name *n = bsearch(&k, g->names, g->nnames, sizeof k, cmp_name);
	return n ? n->s : NULL;
}
