/* The stand-in libnccl.so.2's profiler plugin (NVIDIA/nccl ext-profiler; common/nccl_profiler.h),
 * loaded and called as NCCL 2.28.9 does (src/plugin/plugin_open.cc and profiler.cc):
 *  - once a process, at its first communicator: NCCL_PROFILER_PLUGIN "none" loads nothing; a value
 *    is dlopened (RTLD_NOW | RTLD_LOCAL) as given, then, unless it is a path or a lib*.so name, as
 *    libnccl-profiler-VALUE.so; unset: libnccl-profiler.so. The library's ncclProfiler_v5 is used
 *    (the real one also takes v4 to v1: not modelled);
 *  - init for every communicator, with its hash (the same on every rank), the ranks and this one's;
 *    the activation mask it sets is the process's; an error from init leaves that communicator
 *    without the plugin; finalize when the communicator is destroyed or finalized;
 *  - for each collective call, on the calling thread (src/enqueue.cc, collTaskAppend): a GroupApi
 *    event for the outermost group (an ungrouped call is a group of its own, groupDepth 1) while
 *    any event is asked for, stopped at the group's end, and under it the call's CollApi event
 *    (function, count, datatype, root, stream, and graphCaptured: its stream was capturing),
 *    started and stopped in the call, its handle kept with the collective;
 *  - for each collective, on the thread that launches it: a Group event (NCCLP_GROUP, or any of
 *    Coll and KernelCh asked for), the collective's Coll event under it (its function's sequence
 *    number in the communicator, function, count, datatype as NCCL names them: "AllReduce",
 *    "ncclFloat32"; its parentObj the call's CollApi handle), both stopped once launched;
 *  - a collective captured into a CUDA graph (src/enqueue.cc: a "persistent" plan, whose proxy
 *    work is a host node of the graph, hostStreamPlanCallback): nothing at the capture; at each
 *    replay, when its stream reaches it, the Group and Coll events as above, from a thread that
 *    is not the program's (CUDA's host-function thread; here the device's), under the capture's
 *    CollApi handle. The function's sequence number counts the replay only where the plugin
 *    asked for KernelCh and gave the Group or CollApi event a handle (src/plugin/profiler.cc,
 *    ncclProfilerStartTaskEvents: "graph-captured collectives" are left out of the count
 *    otherwise, for RAS), else it repeats the next number;
 *  - NCCLP_KERNEL_CH: once the kernel has run, from a thread of NCCL's own (its profiler's progress
 *    thread), one KernelCh event per channel under the Coll event (ext-profiler/README.md: the
 *    kernel's channels are its events; the Coll event says nChannels), each with its channel's start
 *    on the GPU's %globaltimer, then recordEventState(KernelChStop) with its end, then stopEvent.
 *    SIMGPU_NCCL_CHANNELS channels (default 2, 1 to 32): channel c begins 300 ns * c after the
 *    kernel did (when it began on this rank: it then waits in the kernel for its peers, as CUPTI's
 *    record of it says too) and ends 200 ns * c before it (the end the same on every rank), so the
 *    first to begin and the last to end are the kernel's own.
 * The GPU's %globaltimer is modelled as the host's CLOCK_REALTIME, in ns, plus
 * SIMGPU_GLOBALTIMER_SKEW_NS (default 0): the PTX ISA says only "a predefined, 64-bit global
 * nanosecond timer"; its relation to a host clock is assumed, not documented.
 * Not modelled: point-to-point (P2p, P2pApi) events, KernelLaunch events, proxy events (no network
 * here). */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../../common/nccl_profiler.h"
#include "nccl_prof.h"

static pthread_once_t once = PTHREAD_ONCE_INIT;
static const ncclp_v5_t *plugin;
static int mask; /* the activation mask the plugin set */

/* the channels a collective's kernel runs on (SIMGPU_NCCL_CHANNELS) */
static int channels(void)
{
	const char *v = getenv("SIMGPU_NCCL_CHANNELS");
	int n = v && *v ? atoi(v) : 2;
	return n < 1 ? 1 : n > 32 ? 32 : n;
}

static void load(void)
{
	const char *v = getenv("NCCL_PROFILER_PLUGIN");
	if (v && !strcasecmp(v, "none"))
		return;
	char name[512];
	snprintf(name, sizeof name, "%s", v && *v ? v : "libnccl-profiler.so");
	void *h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
	size_t n = v ? strlen(v) : 0;
	if (!h && v && *v && !strchr(v, '/') && (strncmp(v, "lib", 3) || n < 3 || strcmp(v + n - 3, ".so"))) {
		snprintf(name, sizeof name, "libnccl-profiler-%s.so", v);
		h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
	}
	plugin = h ? dlsym(h, "ncclProfiler_v5") : NULL;
}

static void logfn(int level, unsigned long flags, const char *file, int line, const char *fmt, ...)
{
	(void)level, (void)flags, (void)file, (void)line, (void)fmt;
}

void prof_init(struct prof_comm *p, uint64_t hash, int nranks, int rank)
{
	pthread_once(&once, load);
	p->ctx = NULL;
	p->rank = rank;
	p->pending = 0;
	p->on = plugin && plugin->init(&p->ctx, hash, &mask, NULL, 1, nranks, rank, logfn) == 0;
	for (int i = 0; i < PROF_FUNCS; i++)
		p->seq[i] = 0;
}

/* (after its kernels' events: NCCL's destroy waits for its profiler thread likewise) */
void prof_finalize(struct prof_comm *p)
{
	for (int i = 0; p->on && __atomic_load_n(&p->pending, __ATOMIC_ACQUIRE) && i < 10000; i++)
		usleep(1000);
	if (p->on)
		plugin->finalize(p->ctx);
	p->on = 0;
}

static const char *const FUNCS[PROF_FUNCS] = { "Broadcast", "Reduce", "AllGather", "ReduceScatter", "AllReduce",
					       "AlltoAll", "Gather", "Scatter" };

/* the calling thread's GroupApi event: its handle, and whether one is started */
static __thread void *group_api;
static __thread int group_api_on;

void *prof_coll_api(struct prof_comm *p, int func, size_t count, const char *dtype, int root, void *stream,
		    int depth, int captured)
{
	const int any = NCCLP_GROUP_API | NCCLP_COLL_API | NCCLP_KERNEL_LAUNCH | NCCLP_GROUP | NCCLP_COLL | NCCLP_P2P |
			NCCLP_PROXY_OP | NCCLP_PROXY_STEP | NCCLP_KERNEL_CH | NCCLP_NET_PLUGIN;
	if (!p->on || func < 0 || func >= PROF_FUNCS || !(mask & any))
		return NULL;
	if (!group_api_on) {
		ncclp_descr_v5_t g = { .type = NCCLP_GROUP_API, .rank = p->rank };
		g.groupApi.graphCaptured = captured;
		g.groupApi.groupDepth = depth + 1; /* (NCCL's implicit group inside the call counts) */
		group_api = NULL;
		plugin->startEvent(p->ctx, &group_api, &g);
		group_api_on = 1;
	}
	void *api = NULL;
	if (mask & (NCCLP_COLL_API | NCCLP_COLL | NCCLP_PROXY_OP | NCCLP_PROXY_STEP | NCCLP_KERNEL_CH | NCCLP_NET_PLUGIN)) {
		ncclp_descr_v5_t c = { .type = NCCLP_COLL_API, .parentObj = group_api, .rank = p->rank,
				       .collApi = { FUNCS[func], count, dtype, root, stream, captured } };
		plugin->startEvent(p->ctx, &api, &c);
		if (api)
			plugin->stopEvent(api);
	}
	return api;
}

void prof_group_api_end(void)
{
	if (group_api_on && group_api)
		plugin->stopEvent(group_api);
	group_api = NULL;
	group_api_on = 0;
}

void *prof_coll(struct prof_comm *p, int func, const void *src, void *dst, size_t count, int root, const char *dtype,
		void *api, int replay)
{
	if (!p->on || func < 0 || func >= PROF_FUNCS)
		return NULL;
	if (!(mask & (NCCLP_GROUP | NCCLP_COLL | NCCLP_KERNEL_CH))) {
		if (!replay)
			__atomic_fetch_add(&p->seq[func], 1, __ATOMIC_RELAXED);
		return NULL;
	}
	void *group = NULL, *coll = NULL;
	ncclp_descr_v5_t g = { .type = NCCLP_GROUP };
	plugin->startEvent(p->ctx, &group, &g);
	uint64_t seq = !replay || ((group || api) && (mask & NCCLP_KERNEL_CH))
			       ? __atomic_fetch_add(&p->seq[func], 1, __ATOMIC_RELAXED)
			       : __atomic_load_n(&p->seq[func], __ATOMIC_RELAXED);
	if (mask & (NCCLP_COLL | NCCLP_KERNEL_CH)) {
		ncclp_descr_v5_t c = { .type = NCCLP_COLL, .rank = p->rank };
		c.coll.seqNumber = seq;
		c.coll.func = FUNCS[func];
		c.coll.sendBuff = src;
		c.coll.recvBuff = dst;
		c.coll.count = count;
		c.coll.root = root;
		c.coll.datatype = dtype;
		c.coll.nChannels = (uint8_t)channels();
		c.coll.nWarps = 16;
		c.coll.algo = "RING";
		c.coll.proto = "LL";
		c.coll.parentGroup = group;
		c.parentObj = api;
		plugin->startEvent(p->ctx, &coll, &c);
	}
	if (group)
		plugin->stopEvent(group);
	return coll;
}

void prof_coll_launched(struct prof_comm *p, void *coll, int kernel)
{
	if (!coll)
		return;
	if (kernel && (mask & NCCLP_KERNEL_CH)) /* (the kernel's event ends it, once it ran) */
		__atomic_add_fetch(&p->pending, 1, __ATOMIC_ACQ_REL);
	else
		plugin->stopEvent(coll);
}

/* ---- the kernels' events, from a thread of the library's own, once each has run ---- */

struct ran {
	struct prof_comm *p;
	void *coll;
	uint64_t start, end; /* CLOCK_MONOTONIC ns */
	struct ran *next;
};
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static struct ran *queue, **tail = &queue;
static int started;

static uint64_t clock_ns(clockid_t id)
{
	struct timespec t;
	clock_gettime(id, &t);
	return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* a CLOCK_MONOTONIC time on the GPU's %globaltimer (assumed: the host's wall clock when the
 * progress thread first looked, skewed; it does not follow the host's later clock steps) */
static uint64_t globaltimer(uint64_t mono)
{
	static uint64_t off;
	if (!off) { /* (the tightest of five readings: one cut by a preemption made each process's offset
		     * its own, 16 us apart on a busy machine, where a GPU's clock is one) */
		const char *v = getenv("SIMGPU_GLOBALTIMER_SKEW_NS");
		uint64_t best = UINT64_MAX, o = 0;
		for (int i = 0; i < 5; i++) {
			uint64_t a = clock_ns(CLOCK_MONOTONIC), r = clock_ns(CLOCK_REALTIME), b = clock_ns(CLOCK_MONOTONIC);
			if (b - a < best) {
				best = b - a;
				o = r - (a + (b - a) / 2);
			}
		}
		off = o + (uint64_t)(v ? atoll(v) : 0);
	}
	return mono + off;
}

static void *progress(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&mu);
	for (;;) {
		while (!queue)
			pthread_cond_wait(&cv, &mu);
		struct ran *r = queue;
		if (!(queue = r->next))
			tail = &queue;
		pthread_mutex_unlock(&mu);
		uint64_t now = clock_ns(CLOCK_MONOTONIC);
		if (now < r->end) /* (seen once it has run, as NCCL's progress thread polls for it) */
			usleep((useconds_t)((r->end - now) / 1000 + 1));
		for (int c = 0, n = channels(); c < n; c++) {
			uint64_t start = r->start + 300u * (unsigned)c, end = r->end - 200u * (unsigned)c;
			void *k = NULL;
			ncclp_descr_v5_t d = { .type = NCCLP_KERNEL_CH, .parentObj = r->coll, .rank = r->p->rank };
			d.kernelCh.channelId = (uint8_t)c;
			d.kernelCh.pTimer = globaltimer(start);
			plugin->startEvent(r->p->ctx, &k, &d);
			if (k) {
				ncclp_state_args_v5_t a = { .kernelCh = { globaltimer(end > start ? end : start) } };
				plugin->recordEventState(k, NCCLP_KERNEL_CH_STOP, &a);
				plugin->stopEvent(k);
			}
		}
		plugin->stopEvent(r->coll);
		__atomic_sub_fetch(&r->p->pending, 1, __ATOMIC_ACQ_REL);
		free(r);
		pthread_mutex_lock(&mu);
	}
	return NULL;
}

void prof_coll_ran(struct prof_comm *p, void *coll, uint64_t start, uint64_t end)
{
	if (!coll || !(mask & NCCLP_KERNEL_CH))
		return;
	struct ran *r = malloc(sizeof *r);
	pthread_mutex_lock(&mu);
	if (!started) {
		pthread_t t;
		started = pthread_create(&t, NULL, progress, NULL) == 0;
		if (started)
			pthread_detach(t);
	}
	if (!r || !started) { /* (no memory, no thread: the event ends without its kernel's) */
		pthread_mutex_unlock(&mu);
		free(r);
		plugin->stopEvent(coll);
		__atomic_sub_fetch(&p->pending, 1, __ATOMIC_ACQ_REL);
		return;
	}
	*r = (struct ran){ p, coll, start, end, NULL };
	*tail = r;
	tail = &r->next;
	pthread_cond_signal(&cv);
	pthread_mutex_unlock(&mu);
}
