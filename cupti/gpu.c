/* The GPU side: CUPTI's activity records on the trace's timeline (cupti/gpu.h).
 *
 * Start. The constructor points CUDA_INJECTION64_PATH at libddpspy.so (unless the program set it,
 * or DDPSPY_GPU=0), so the CUDA driver calls InitializeInjection below from cuInit: the process's
 * first CUDA use, before any context exists. A process that never uses CUDA never gets there and
 * loads no CUDA library. When the variable is another tool's, the writer starts CUPTI itself once
 * it sees the driver (libcuda.so.1) among the loaded objects. libcupti is dlopened (RTLD_LOCAL)
 * from next to the program's libcudart, then $CUDA_HOME, then the loader's search path; nothing
 * links against it. One subscriber per process: when another profiler holds it (nsys, ncu,
 * torch.profiler, DCGM), ddpspy says so once on stderr and in the file and records host events
 * only.
 *
 * Records. CUPTI fills buffers this file hands out (at most MAX_BUFFERS of BUF_BYTES; a request
 * beyond that is refused, and CUPTI drops and counts the records) and hands them back from its
 * own thread; they wait in a queue for the writer thread, which walks them with
 * cuptiActivityGetNextRecord (never by stride: newer CUPTIs append fields) and packs them. Times
 * are CLOCK_MONOTONIC ns through CUPTI's timestamp callback, registered before any kind is
 * enabled (else CUPTI's default, CLOCK_REALTIME, which the file then names).
 *
 * Threads. Every callback runs with the guard held, so nothing CUPTI does inside one is
 * recorded; threads CUPTI creates while ddpspy calls it are created untraced (pthread.c). No call
 * into CUPTI happens after dsp_gpu_stop (exit: before the destructors, for libcupti's run before
 * ours), in a fork child, or from the signal path. */
#include "../preload/internal.h"
#include "gpu.h"
#include "cupti_int.h"

#include <cupti.h>
#include <cupti_driver_cbid.h>
#include <dlfcn.h>
#include <link.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BUF_BYTES (1u << 20)
#define MAX_BUFFERS 64 /* 64 MiB of records waiting for the writer at most */
#define FLUSH_EVERY_NS 1000000000LL
/* CUDA 12's CUPTI (API versions 19, CUDA 12.0, to 28, 12.9 Update 1: cupti_version.h) writes its
 * records in the structs before CUDA 13's (cupti_activity_deprecated.h: Kernel9, Memcpy5, Memset3,
 * Synchronization). Every field read here sits where it sits in CUDA 13's, as these say; of a
 * synchronization record, CUDA 12's has no returnValue, which is read from CUDA 13's alone. */
#define SAME(old, new, f) _Static_assert(offsetof(old, f) == offsetof(new, f), #f " moved between " #old " and " #new)
#define KERNEL_SAME(f) SAME(CUpti_ActivityKernel9, CUpti_ActivityKernel10, f)
KERNEL_SAME(start); KERNEL_SAME(end); KERNEL_SAME(deviceId); KERNEL_SAME(contextId); KERNEL_SAME(streamId);
KERNEL_SAME(correlationId); KERNEL_SAME(gridX); KERNEL_SAME(gridY); KERNEL_SAME(gridZ); KERNEL_SAME(blockX);
KERNEL_SAME(blockY); KERNEL_SAME(blockZ); KERNEL_SAME(staticSharedMemory); KERNEL_SAME(dynamicSharedMemory);
KERNEL_SAME(registersPerThread); KERNEL_SAME(name);
#define MEMCPY_SAME(f) SAME(CUpti_ActivityMemcpy5, CUpti_ActivityMemcpy6, f)
MEMCPY_SAME(copyKind); MEMCPY_SAME(srcKind); MEMCPY_SAME(dstKind); MEMCPY_SAME(flags); MEMCPY_SAME(bytes);
MEMCPY_SAME(start); MEMCPY_SAME(end); MEMCPY_SAME(deviceId); MEMCPY_SAME(contextId); MEMCPY_SAME(streamId);
MEMCPY_SAME(correlationId);
#define MEMSET_SAME(f) SAME(CUpti_ActivityMemset3, CUpti_ActivityMemset4, f)
MEMSET_SAME(value); MEMSET_SAME(bytes); MEMSET_SAME(start); MEMSET_SAME(end); MEMSET_SAME(deviceId);
MEMSET_SAME(contextId); MEMSET_SAME(streamId); MEMSET_SAME(correlationId); MEMSET_SAME(memoryKind);
#define SYNC_SAME(f) SAME(CUpti_ActivitySynchronization, CUpti_ActivitySynchronization2, f)
SYNC_SAME(type); SYNC_SAME(start); SYNC_SAME(end); SYNC_SAME(correlationId); SYNC_SAME(contextId); SYNC_SAME(streamId);
SYNC_SAME(cudaEventId);
#define CUPTI_12_FIRST 19 /* CUDA 12.0's CUPTI API version */
#define SLOTS 4096 /* recent API calls by correlation id, for the launch-order check */

_Static_assert((int)CUPTI_ACTIVITY_MEMCPY_KIND_HTOD == (int)DDPSPY_GCOPY_HTOD && (int)CUPTI_ACTIVITY_MEMCPY_KIND_DTOH ==
		       DDPSPY_GCOPY_DTOH && (int)CUPTI_ACTIVITY_MEMCPY_KIND_DTOD == (int)DDPSPY_GCOPY_DTOD &&
		       (int)CUPTI_ACTIVITY_MEMCPY_KIND_PTOP == (int)DDPSPY_GCOPY_PTOP,
	       "format.h's GPU copy kinds are CUPTI's");
_Static_assert((int)CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE == (int)DDPSPY_GMEM_PAGEABLE && (int)CUPTI_ACTIVITY_MEMORY_KIND_PINNED ==
		       DDPSPY_GMEM_PINNED && (int)CUPTI_ACTIVITY_MEMORY_KIND_MANAGED_STATIC == (int)DDPSPY_GMEM_MANAGED_STATIC,
	       "format.h's GPU memory kinds are CUPTI's");
_Static_assert((int)CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE == (int)DDPSPY_GSYNC_STREAM &&
		       (int)CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE == (int)DDPSPY_GSYNC_CONTEXT,
	       "format.h's GPU synchronization types are CUPTI's");

/* what CUPTI delivers, waiting for the writer; data is the buffer CUPTI filled, a block of its own
 * from malloc: a client that took CUPTI's callbacks through its own handle (share.c cannot stand
 * in front of one) gets the buffers ddpspy had handed out, and may free() them as its own */
struct buf {
	struct buf *next;
	size_t valid;
	uint8_t *data;
};

/* CUPTI's functions, from the dlopened library (cupti_int.h) */
struct dsp_cupti_fns dsp_cupti;
#define C dsp_cupti
struct dsp_cupti_hooks dsp_cupti_hooks;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;      /* G's fields and the queues */
static pthread_mutex_t call_lock = PTHREAD_MUTEX_INITIALIZER; /* calls into CUPTI against stop */
static struct {
	struct dsp_gpu_info info;
	char why[PATH_MAX + 256], lib[PATH_MAX];
	int tried;          /* a start was attempted (once per process) */
	int injection_ours; /* CUDA_INJECTION64_PATH names this library: cuInit will call us */
	int stopped;        /* no more calls into CUPTI */
	int64_t last_flush;
	struct buf *done, **done_tail, *spare;
	int nbufs;
	struct buf *mine[MAX_BUFFERS]; /* every buffer handed out: only those are taken back */
	char holder[CUPTI_OLD_SUBSCRIBER_NAME_MIN_LEN]; /* who holds CUPTI when it is taken, as CUPTI names it */
	CUpti_SubscriberHandle sub;
} G = {.done_tail = &G.done};

static const char *cbnames[CUPTI_RUNTIME_TRACE_CBID_SIZE]; /* runtime API names, asked at start */
/* the driver calls kept (launches: how NCCL and other libraries start kernels), and their names */
static const uint32_t LAUNCHES[] = {
	CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel,		CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz,
	CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx,	CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz,
	CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel, CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz,
	CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch,		CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz,
};
static const char *launch_names[sizeof LAUNCHES / sizeof *LAUNCHES];
/* The runtime calls kept, by the start of their names (cupti_runtime_cbid.h's, versions apart):
 * what the analysis reads. Launches (a kernel's launching call), copies, sets, synchronizes and
 * queries, graph launches, and allocations and frees (which may synchronize). Not the calls a
 * PyTorch step makes several of a kernel and that say nothing of the device's time (cudaGetDevice,
 * cudaGetLastError, cudaStreamIsCapturing, event records: 4 of its 5.1 records a kernel on an H200).
 * DDPSPY_GPU_API_ALL=1 keeps every call. */
static const char *const KEPT_CALLS[] = {
	"cudaLaunch", "__cudaLaunchKernel", "cudaMemcpy", "cudaMemset", "cudaStreamSynchronize",
	"cudaEventSynchronize", "cudaDeviceSynchronize", "cudaThreadSynchronize", "cudaStreamQuery",
	"cudaEventQuery", "cudaGraphLaunch", "cudaMalloc", "cudaFree", "cudaHostAlloc", "cudaHostRegister",
	"cudaHostUnregister",
};
/* recent API calls and device work by correlation id, for the launch-order check: whichever of a
 * pair comes second is checked against the first */
static struct slot { uint32_t corr; uint64_t start; } api_slots[SLOTS], dev_slots[SLOTS];

static uint64_t CUPTIAPI timestamp(void)
{
	return (uint64_t)dsp_mono_ns();
}

static const char *result(CUptiResult r)
{
	const char *s = NULL;
	if (!C.GetResultString || C.GetResultString(r, &s) != CUPTI_SUCCESS || !s)
		s = "unknown CUPTI error";
	return s;
}

/* ---- CUPTI's callbacks: its thread, or whoever called FlushAll; guard held throughout ---- */

/* ddpspy enables no callbacks of its own: those that come were enabled for a client sharing the
 * subscription (share.c) */
static void CUPTIAPI on_callback(void *ud, CUpti_CallbackDomain d, CUpti_CallbackId id, const void *data)
{
	__typeof__(dsp_cupti_hooks.forward) fwd = __atomic_load_n(&dsp_cupti_hooks.forward, __ATOMIC_ACQUIRE);
	static int told; /* (the first few, for DDPSPY_LOG: on an H200 none came, docs/gpu.md) */
	if (told < 6 && __atomic_fetch_add(&told, 1, __ATOMIC_RELAXED) < 6)
		dsp_log("CUPTI: callback domain %d id %u %s", (int)d, id, fwd ? "passed on to a client" : "before any client");
	if (fwd)
		fwd(ud, d, id, data);
}

static void CUPTIAPI buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records)
{
	struct dsp_tls *t = &dsp_tls;
	struct buf *b;
	t->guard++;
	pthread_mutex_lock(&lock);
	if ((b = G.spare) != NULL) {
		G.spare = b->next;
	} else if (G.nbufs < MAX_BUFFERS && (b = malloc(sizeof *b)) != NULL && (b->data = malloc(BUF_BYTES)) != NULL) {
		G.mine[G.nbufs++] = b;
	} else {
		free(b);
		b = NULL;
		G.info.refused++;
		G.info.changes++;
	}
	pthread_mutex_unlock(&lock);
	*buffer = b ? b->data : NULL;
	*size = b ? BUF_BYTES : 0;
	*max_records = 0;
	t->guard--;
}

static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t size, size_t valid)
{
	struct dsp_tls *t = &dsp_tls;
	size_t dropped = 0;
	(void)size;
	t->guard++;
	if (C.GetNumDroppedRecords(ctx, stream, &dropped) != CUPTI_SUCCESS)
		dropped = 0;
	pthread_mutex_lock(&lock);
	/* only a buffer handed out here: another client's (CUPTI has one set of callbacks a process)
	 * is neither read nor written */
	struct buf *b = NULL;
	for (int i = 0; buffer && i < G.nbufs && !b; i++)
		b = G.mine[i]->data == buffer ? G.mine[i] : NULL;
	if (b) {
		__typeof__(dsp_cupti_hooks.seen) seen = __atomic_load_n(&dsp_cupti_hooks.seen, __ATOMIC_ACQUIRE);
		if (seen) { /* (a client's records in it are copied out first: not under lock) */
			pthread_mutex_unlock(&lock);
			seen(buffer, valid);
			pthread_mutex_lock(&lock);
		}
		b->valid = valid;
		b->next = NULL;
		*G.done_tail = b;
		G.done_tail = &b->next;
	} else if (buffer) {
		G.info.foreign++;
		G.info.changes++;
	}
	if (dropped) {
		G.info.dropped += dropped;
		G.info.changes++;
	}
	pthread_mutex_unlock(&lock);
	t->guard--;
}

/* ---- start ---- */

struct find {
	char cudart[PATH_MAX]; /* the loaded libcudart.so.N's path, "" when none */
	int cudart_major;
	int driver;            /* libcuda.so.1 is loaded */
	char cupti[PATH_MAX];  /* a libcupti the process loaded already (PyTorch links Kineto's), "" */
};

/* the CUPTI of the program's CUDA major: 12 or 13 (the default: a static cudart's) */
static const char *cupti_soname(const struct find *f)
{
	return f->cudart_major == 12 ? "libcupti.so.12" : "libcupti.so.13";
}

static int find_cb(struct dl_phdr_info *info, size_t size, void *ctx)
{
	struct find *f = ctx;
	const char *n = info->dlpi_name, *base;
	(void)size;
	if (!n || !*n)
		return 0;
	base = strrchr(n, '/') ? strrchr(n, '/') + 1 : n;
	if (!strncmp(base, "libcudart.so.", 13) && !f->cudart[0]) {
		snprintf(f->cudart, sizeof f->cudart, "%s", n);
		f->cudart_major = atoi(base + 13);
	}
	f->driver |= !strcmp(base, "libcuda.so.1");
	if (!strncmp(base, "libcupti.so", 11) && !f->cupti[0])
		snprintf(f->cupti, sizeof f->cupti, "%s", n);
	return 0;
}

/* libcupti: the one the process has loaded already; DDPSPY_CUPTI; next to the program's libcudart
 * (the toolkit's lib64, or the CUDA wheels' nvidia/cuda_runtime/lib beside nvidia/cuda_cupti/lib);
 * $CUDA_HOME; the search path */
static void *open_cupti(const struct find *f)
{
	char dir[PATH_MAX], path[PATH_MAX];
	const char *cands[9], *so = cupti_soname(f);
	char bufs[9][PATH_MAX];
	int n = 0;
	const char *home = getenv("CUDA_HOME");

	if (f->cupti[0]) /* the one in the process already: a second copy would be a second CUPTI */
		cands[n++] = f->cupti;
	if (dsp_cfg.cupti && *dsp_cfg.cupti)
		cands[n++] = dsp_cfg.cupti;
	if (f->cudart[0] && strrchr(f->cudart, '/')) {
		snprintf(dir, sizeof dir, "%.*s", (int)(strrchr(f->cudart, '/') - f->cudart), f->cudart);
		const char *rel[] = {"", "/../../cuda_cupti/lib", "/../extras/CUPTI/lib64"};
		for (size_t i = 0; i < sizeof rel / sizeof *rel; i++) {
			snprintf(bufs[n], PATH_MAX, "%.4000s%s/%s", dir, rel[i], so);
			cands[n] = bufs[n];
			n++;
		}
	}
	if (!home || !*home)
		home = "/usr/local/cuda";
	snprintf(bufs[n], PATH_MAX, "%.4000s/extras/CUPTI/lib64/%s", home, so);
	cands[n] = bufs[n];
	n++;
	snprintf(bufs[n], PATH_MAX, "%.4000s/lib64/%s", home, so);
	cands[n] = bufs[n];
	n++;
	cands[n++] = so;
	for (int i = 0; i < n; i++) {
		if (strchr(cands[i], '/') && access(cands[i], R_OK) != 0)
			continue;
		void *h = dlopen(cands[i], RTLD_NOW | RTLD_LOCAL);
		if (!h)
			continue;
		struct link_map *lm = NULL;
		if (dlinfo(h, RTLD_DI_LINKMAP, &lm) == 0 && lm && lm->l_name && *lm->l_name)
			snprintf(path, sizeof path, "%s", lm->l_name);
		else
			snprintf(path, sizeof path, "%s", cands[i]);
		snprintf(G.lib, sizeof G.lib, "%s", path);
		return h;
	}
	return NULL;
}

/* the state and G.why (already written) change together, under lock */
static void set_state(int state)
{
	pthread_mutex_lock(&lock);
	G.info.state = state;
	G.info.changes++;
	pthread_mutex_unlock(&lock);
}

#define SAY(...) snprintf(G.why, sizeof G.why, __VA_ARGS__)

static void at_exit(void)
{
	dsp_gpu_stop();
}

static const struct {
	CUpti_ActivityKind cupti;
	int kind;
} KINDS[] = {
	{CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, DDPSPY_EV_GPU_KERNEL},
	{CUPTI_ACTIVITY_KIND_MEMCPY, DDPSPY_EV_GPU_MEMCPY},
	{CUPTI_ACTIVITY_KIND_MEMSET, DDPSPY_EV_GPU_MEMSET},
	{CUPTI_ACTIVITY_KIND_SYNCHRONIZATION, DDPSPY_EV_GPU_SYNC},
	{CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION, DDPSPY_EV_GPU_EXTCORR},
};

static int launch_index(uint32_t cbid);

/* the runtime calls ddpspy records, by callback id (enable_calls); all of them when api_all */
static uint8_t keep_rt[CUPTI_RUNTIME_TRACE_CBID_SIZE], api_all;

int dsp_cupti_own_kind(CUpti_ActivityKind kind)
{
	for (size_t i = 0; i < sizeof KINDS / sizeof *KINDS; i++)
		if (KINDS[i].cupti == kind)
			return (G.info.kinds >> KINDS[i].kind & 1) != 0;
	return (kind == CUPTI_ACTIVITY_KIND_RUNTIME || kind == CUPTI_ACTIVITY_KIND_DRIVER) && api_all;
}

int dsp_cupti_own_api(int driver, uint32_t cbid)
{
	if (driver)
		return launch_index(cbid) >= 0;
	return api_all || (cbid < CUPTI_RUNTIME_TRACE_CBID_SIZE && keep_rt[cbid]);
}

/* the driver's launches recorded, each where CUPTI names it a launch */
static void enable_driver_launches(void)
{
	for (size_t i = 0; i < sizeof LAUNCHES / sizeof *LAUNCHES; i++)
		if (!launch_names[i] || !strncmp(launch_names[i], "cuLaunch", 8) ||
		    !strncmp(launch_names[i], "cuGraphLaunch", 13))
			C.EnableDriverApi(LAUNCHES[i], 1);
}

static int kept(const char *name)
{
	for (size_t i = 0; name && i < sizeof KEPT_CALLS / sizeof *KEPT_CALLS; i++)
		if (!strncmp(name, KEPT_CALLS[i], strlen(KEPT_CALLS[i])))
			return 1;
	return 0;
}

/* The CUDA calls CUPTI records: the kept runtime calls and the driver's launches, by callback id
 * (cuptiActivityEnableRuntimeApi, cuptiActivityEnableDriverApi: a CUPTI_ACTIVITY_KIND_RUNTIME or
 * DRIVER enabled after them would override them, cupti_activity.h), or, with DDPSPY_GPU_API_ALL or
 * a CUPTI without those, every runtime and driver call (the driver's then left out but launches,
 * when read). Queries of unfinished work make no synchronization records
 * (cuptiActivityEnableAllSyncRecords(0)): a polling loop would make one each. Returns how many
 * runtime calls were kept one by one, -1 for every call, 0 when none could be. */
static int enable_calls(void)
{
	int n = 0;
	if (C.EnableAllSyncRecords)
		C.EnableAllSyncRecords(0);
	if (!dsp_cfg.gpu_api_all && C.EnableRuntimeApi && C.EnableDriverApi) {
		for (uint32_t i = 0; i < CUPTI_RUNTIME_TRACE_CBID_SIZE; i++)
			n += (keep_rt[i] = kept(cbnames[i]) && C.EnableRuntimeApi(i, 1) == CUPTI_SUCCESS);
		enable_driver_launches();
		if (n)
			return n;
	}
	int rt = C.Enable(CUPTI_ACTIVITY_KIND_RUNTIME) == CUPTI_SUCCESS;
	int drv = C.Enable(CUPTI_ACTIVITY_KIND_DRIVER) == CUPTI_SUCCESS;
	api_all = rt || drv;
	return api_all ? -1 : 0;
}

/* Once per process, from cuInit's thread (injection) or the writer's. The guard is held as
 * DSP_GUARD_OWN across every call into CUPTI, so threads it starts then are not traced. */
static void start(const char *how)
{
	struct find f = {{0}, 0, 0, {0}};
	void *h;
	CUptiResult r;

	dsp_tls.guard += DSP_GUARD_OWN;
	pthread_mutex_lock(&call_lock);
	if (G.tried || G.stopped) { /* (cuInit's call after a client's first call had started it) */
		pthread_mutex_unlock(&call_lock);
		dsp_tls.guard -= DSP_GUARD_OWN;
		return;
	}
	G.tried = 1;
	dl_iterate_phdr(find_cb, &f);
	if (f.cudart[0] && f.cudart_major != 12 && f.cudart_major != 13) {
		SAY("the program's CUDA runtime is %s (CUDA %d): ddpspy reads CUDA 12's and 13's CUPTI records", f.cudart,
		    f.cudart_major);
		set_state(DSP_GPU_UNAVAILABLE);
		goto out;
	}
	if (!(h = open_cupti(&f))) {
		SAY("no %s next to %s, in $CUDA_HOME or on the library path (set DDPSPY_CUPTI)", cupti_soname(&f),
		    f.cudart[0] ? f.cudart : "the program (static CUDA runtime)");
		set_state(DSP_GPU_UNAVAILABLE);
		goto out;
	}
#define SYM(f, n) (*(void **)&C.f = dlsym(h, n))
	SYM(GetVersion, "cuptiGetVersion");
	SYM(Subscribe, "cuptiSubscribe");
	SYM(Subscribe_v2, "cuptiSubscribe_v2");
	SYM(Unsubscribe, "cuptiUnsubscribe");
	SYM(RegisterCallbacks, "cuptiActivityRegisterCallbacks");
	SYM(RegisterTimestampCallback, "cuptiActivityRegisterTimestampCallback");
	SYM(Enable, "cuptiActivityEnable");
	SYM(FlushAll, "cuptiActivityFlushAll");
	SYM(GetNextRecord, "cuptiActivityGetNextRecord");
	SYM(GetNumDroppedRecords, "cuptiActivityGetNumDroppedRecords");
	SYM(GetCallbackName, "cuptiGetCallbackName");
	SYM(GetResultString, "cuptiGetResultString");
	SYM(Push, "cuptiActivityPushExternalCorrelationId");
	SYM(Pop, "cuptiActivityPopExternalCorrelationId");
	SYM(EnableRuntimeApi, "cuptiActivityEnableRuntimeApi");
	SYM(EnableDriverApi, "cuptiActivityEnableDriverApi");
	SYM(EnableAllSyncRecords, "cuptiActivityEnableAllSyncRecords");
	SYM(Disable, "cuptiActivityDisable");
	SYM(EnableCallback, "cuptiEnableCallback");
	SYM(EnableDomain, "cuptiEnableDomain");
	SYM(EnableAllDomains, "cuptiEnableAllDomains");
#undef SYM
	C.handle = h;
	if (!C.Subscribe || !C.Unsubscribe || !C.RegisterCallbacks || !C.Enable || !C.FlushAll || !C.GetNextRecord ||
	    !C.GetNumDroppedRecords) {
		SAY("%s lacks CUPTI's activity API", G.lib);
		set_state(DSP_GPU_FAILED);
		goto out;
	}
	if (C.GetVersion && C.GetVersion(&G.info.version) == CUPTI_SUCCESS && G.info.version < CUPTI_12_FIRST) {
		SAY("%s is CUPTI API version %u: ddpspy reads CUDA 12's and 13's records (%d and later)", G.lib,
		    G.info.version, CUPTI_12_FIRST);
		set_state(DSP_GPU_FAILED);
		goto out;
	}
	if (C.Subscribe_v2) { /* (CUPTI 12.6 and later: a name, and the holder's when refused) */
		CUpti_SubscriberParams sp = {.structSize = CUpti_SubscriberParams_STRUCT_SIZE, .subscriberName = "ddpspy",
					     .oldSubscriberName = G.holder, .oldSubscriberSize = sizeof G.holder};
		r = C.Subscribe_v2(&G.sub, on_callback, NULL, &sp);
		G.holder[sizeof G.holder - 1] = 0;
	} else {
		r = C.Subscribe(&G.sub, on_callback, NULL);
	}
	if (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {
		if (G.holder[0])
			SAY("%s holds CUPTI's one subscriber: GPU activity is not recorded, host events are", G.holder);
		else
			SAY("another profiler holds CUPTI's one subscriber (nsys, ncu, torch.profiler, DCGM?): GPU "
			    "activity is not recorded, host events are");
		set_state(DSP_GPU_TAKEN);
		dsp_warn("%s", G.why);
		goto out;
	}
	if (r != CUPTI_SUCCESS) {
		SAY("cuptiSubscribe: %s", result(r));
		set_state(DSP_GPU_FAILED);
		goto out;
	}
	G.info.clock = C.RegisterTimestampCallback && C.RegisterTimestampCallback(timestamp) == CUPTI_SUCCESS ?
			       "monotonic" : "realtime";
	if ((r = C.RegisterCallbacks(buffer_requested, buffer_completed)) != CUPTI_SUCCESS) {
		C.Unsubscribe(G.sub);
		SAY("cuptiActivityRegisterCallbacks: %s", result(r));
		set_state(DSP_GPU_FAILED);
		goto out;
	}
	for (uint32_t i = 0; C.GetCallbackName && i < CUPTI_RUNTIME_TRACE_CBID_SIZE; i++)
		if (C.GetCallbackName(CUPTI_CB_DOMAIN_RUNTIME_API, i, &cbnames[i]) != CUPTI_SUCCESS)
			cbnames[i] = NULL;
	for (size_t i = 0; C.GetCallbackName && i < sizeof LAUNCHES / sizeof *LAUNCHES; i++)
		if (C.GetCallbackName(CUPTI_CB_DOMAIN_DRIVER_API, LAUNCHES[i], &launch_names[i]) != CUPTI_SUCCESS)
			launch_names[i] = NULL;
	r = CUPTI_SUCCESS;
	for (size_t i = 0; i < sizeof KINDS / sizeof *KINDS; i++) {
		CUptiResult e = C.Enable(KINDS[i].cupti);
		if (e == CUPTI_SUCCESS)
			G.info.kinds |= 1ull << KINDS[i].kind;
		else
			r = e;
	}
	int calls = enable_calls();
	if (calls)
		G.info.kinds |= 1ull << DDPSPY_EV_CUDA_API;
	G.info.api_calls = calls;
	if (!G.info.kinds) {
		C.Unsubscribe(G.sub);
		SAY("cuptiActivityEnable: %s", result(r));
		set_state(DSP_GPU_FAILED);
		goto out;
	}
	SAY("%s%s", how, r == CUPTI_SUCCESS && calls ? "" : " (some activity kinds refused)");
	set_state(DSP_GPU_ON);
	G.last_flush = dsp_mono_ns();
	atexit(at_exit); /* after the runtime's own handlers registered: runs before them */
out:
	dsp_log("GPU capture: %s", G.why);
	pthread_mutex_unlock(&call_lock);
	dsp_tls.guard -= DSP_GUARD_OWN;
}

int dsp_cupti_claim(const char *why, CUpti_SubscriberHandle *sub)
{
	if (!G.tried && __atomic_load_n(&dsp_on, __ATOMIC_RELAXED)) {
		char how[160];
		snprintf(how, sizeof how, "started at another CUPTI client's first call (%s)", why);
		start(how);
	}
	pthread_mutex_lock(&lock);
	int on = G.info.state == DSP_GPU_ON;
	pthread_mutex_unlock(&lock);
	*sub = G.sub;
	return on;
}

#pragma GCC visibility push(default)
/* The CUDA driver's injection entry point (CUDA_INJECTION64_PATH), called once from cuInit. */
int InitializeInjection(void)
{
	if (__atomic_load_n(&dsp_on, __ATOMIC_RELAXED))
		start("started at cuInit (CUDA_INJECTION64_PATH)");
	return 1;
}
#pragma GCC visibility pop

/* Whether CUDA was initialised before this library's constructor ran: a DT_NEEDED library's
 * constructor runs before a preloaded one's, and one that starts CUDA there makes cuInit read
 * CUDA_INJECTION64_PATH before ddpspy names itself in it. The driver says so without starting
 * anything: cuCtxGetCurrent is CUDA_ERROR_NOT_INITIALIZED before cuInit (cuda.h). */
static int cuda_started_before(void)
{
	void *h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
	if (!h)
		return 0;
	CUresult (*current)(CUcontext *) = (CUresult (*)(CUcontext *))dlsym(h, "cuCtxGetCurrent");
	CUcontext ctx;
	int started = current && current(&ctx) != CUDA_ERROR_NOT_INITIALIZED;
	dlclose(h);
	return started;
}

void dsp_gpu_init(void)
{
	if (!dsp_cfg.gpu) { /* not even a "gpu" record: nothing is attempted */
		G.tried = G.stopped = 1;
		return;
	}
	G.injection_ours = dsp_inject("CUDA_INJECTION64_PATH");
	if (G.injection_ours && cuda_started_before()) /* cuInit has been: no injection call will come */
		start("started in ddpspy's constructor, after a library's constructor had initialised CUDA "
		      "(CUDA_INJECTION64_PATH was read before ddpspy set it): what ran before is not recorded");
}

void dsp_gpu_modules_changed(void)
{
	struct find f = {{0}, 0, 0, {0}};
	if (G.tried || G.injection_ours)
		return;
	dl_iterate_phdr(find_cb, &f);
	if (f.driver)
		start("started when the CUDA driver was loaded (CUDA_INJECTION64_PATH is another library)");
}

/* ---- the writer's side ---- */

static const char *api_name(uint32_t cbid)
{
	return cbid < CUPTI_RUNTIME_TRACE_CBID_SIZE ? cbnames[cbid] : NULL;
}

/* a kept driver call's index in LAUNCHES, -1 for the others */
static int launch_index(uint32_t cbid)
{
	for (size_t i = 0; i < sizeof LAUNCHES / sizeof *LAUNCHES; i++)
		if (LAUNCHES[i] == cbid)
			return (int)i;
	return -1;
}

static int64_t opt(uint32_t v)
{
	return v == CUPTI_SYNCHRONIZATION_INVALID_VALUE ? -1 : (int64_t)v;
}

/* device work against its launching call: how far it started before that call did (api: this
 * is the call's record, else the work's) */
static void check_order(int api, uint32_t corr, uint64_t start)
{
	struct slot *mine = &(api ? api_slots : dev_slots)[corr % SLOTS];
	struct slot *other = &(api ? dev_slots : api_slots)[corr % SLOTS];
	*mine = (struct slot){corr, start};
	if (!corr || other->corr != corr)
		return;
	other->corr = 0;
	int64_t lead = (int64_t)(api ? start - other->start : other->start - start);
	pthread_mutex_lock(&lock);
	if (lead > G.info.lead_ns)
		G.info.lead_ns = lead;
	G.info.checked++;
	pthread_mutex_unlock(&lock);
}

/* the event: kind, its n arguments, its span */
static void fill(struct dsp_gpu_ev *e, int kind, const int64_t *a, int n, uint64_t start, uint64_t end)
{
	e->kind = kind;
	memcpy(e->args, a, (size_t)n * sizeof *a);
	e->nargs = n;
	e->t0 = start;
	e->dur = end - start;
}

#define FILL(e, kind, a, start, end) fill(e, kind, a, (int)(sizeof a / sizeof *a), start, end)

/* A record CUPTI could not time: a start or end of 0 (CUPTI_TIMESTAMP_UNKNOWN, cupti_activity.h:
 * "a value of 0 for both the start and end timestamps indicates that timestamp information could
 * not be collected"; on an H200 the kernel still running at the forced flush at exit came so, once,
 * and never again), or an end before its start. Counted, and never written: a 0 is no time. */
static int untimed(uint64_t start, uint64_t end)
{
	if (start && end && end >= start)
		return 0;
	pthread_mutex_lock(&lock);
	G.info.untimed++;
	G.info.changes++;
	pthread_mutex_unlock(&lock);
	return 1;
}

/* one CUPTI record as an event; 0: not one ddpspy records. last: the end of the record before */
static int convert(const CUpti_Activity *r, struct dsp_gpu_ev *e, uint64_t *last)
{
	e->name_arg = -1;
	e->name = NULL;
	switch (r->kind) {
	case CUPTI_ACTIVITY_KIND_KERNEL:
	case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
		const CUpti_ActivityKernel10 *k = (const void *)r;
		if (untimed(k->start, k->end))
			return 0;
		int64_t a[] = {k->deviceId, k->contextId, k->streamId, k->correlationId, 0, k->gridX, k->gridY, k->gridZ,
			       k->blockX, k->blockY, k->blockZ, (int64_t)k->staticSharedMemory + k->dynamicSharedMemory,
			       k->registersPerThread};
		FILL(e, DDPSPY_EV_GPU_KERNEL, a, k->start, k->end);
		e->name_arg = 4;
		e->name = k->name;
		check_order(0, k->correlationId, k->start);
		break;
	}
	case CUPTI_ACTIVITY_KIND_MEMCPY: {
		const CUpti_ActivityMemcpy6 *m = (const void *)r;
		if (untimed(m->start, m->end))
			return 0;
		int64_t a[] = {m->deviceId, m->contextId, m->streamId, m->correlationId, (int64_t)m->bytes, m->copyKind,
			       m->srcKind, m->dstKind, (m->flags & CUPTI_ACTIVITY_FLAG_MEMCPY_ASYNC) != 0};
		FILL(e, DDPSPY_EV_GPU_MEMCPY, a, m->start, m->end);
		check_order(0, m->correlationId, m->start);
		break;
	}
	case CUPTI_ACTIVITY_KIND_MEMSET: {
		const CUpti_ActivityMemset4 *m = (const void *)r;
		if (untimed(m->start, m->end))
			return 0;
		int64_t a[] = {m->deviceId, m->contextId, m->streamId, m->correlationId, (int64_t)m->bytes, m->value,
			       m->memoryKind};
		FILL(e, DDPSPY_EV_GPU_MEMSET, a, m->start, m->end);
		check_order(0, m->correlationId, m->start);
		break;
	}
	case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: {
		const CUpti_ActivitySynchronization2 *y = (const void *)r;
		/* (a query of unfinished work, when a client sharing CUPTI asked for those records) */
		if ((G.info.version >= 130000 && y->returnValue != CUDA_SUCCESS) || untimed(y->start, y->end))
			return 0;
		int64_t a[] = {y->type, opt(y->contextId), opt(y->streamId), opt(y->cudaEventId), y->correlationId,
			       G.info.version >= 130000 ? (int64_t)y->returnValue : -1}; /* (CUDA 12's has none) */
		FILL(e, DDPSPY_EV_GPU_SYNC, a, y->start, y->end);
		break;
	}
	case CUPTI_ACTIVITY_KIND_RUNTIME:
	case CUPTI_ACTIVITY_KIND_DRIVER: {
		const CUpti_ActivityAPI *p = (const void *)r;
		int driver = r->kind == CUPTI_ACTIVITY_KIND_DRIVER, li = driver ? launch_index(p->cbid) : -1;
		/* (a client sharing CUPTI may have asked for more calls than ddpspy records) */
		if (!dsp_cupti_own_api(driver, p->cbid) || untimed(p->start, p->end))
			return 0;
		int64_t a[] = {p->threadId, p->cbid, 0, p->correlationId, p->returnValue, driver};
		FILL(e, DDPSPY_EV_CUDA_API, a, p->start, p->end);
		e->name_arg = 2;
		e->name = driver ? launch_names[li] : api_name(p->cbid);
		check_order(1, p->correlationId, p->start);
		break;
	}
	case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: {
		const CUpti_ActivityExternalCorrelation *x = (const void *)r;
		/* (another client's ids: torch.profiler pushes its own, and some tool its own of ddpspy's kind) */
		if (!dsp_ext_record_ours(x))
			return 0;
		int64_t a[] = {x->externalKind, (int64_t)x->externalId, x->correlationId};
		FILL(e, DDPSPY_EV_GPU_EXTCORR, a, *last, *last); /* no time of its own */
		break;
	}
	default:
		return 0;
	}
	*last = e->t0 + e->dur;
	return 1;
}

/* what CUPTI dropped since it was last asked (from outside its buffer callbacks: records that
 * found no buffer at all come to light only here); call_lock held */
static void count_dropped(void)
{
	size_t n = 0;
	if (C.GetNumDroppedRecords(NULL, 0, &n) == CUPTI_SUCCESS && n) {
		pthread_mutex_lock(&lock);
		G.info.dropped += n;
		G.info.changes++;
		pthread_mutex_unlock(&lock);
	}
}

uint64_t dsp_gpu_collect(int mode, void (*fn)(void *ctx, const struct dsp_gpu_ev *ev), void *ctx)
{
	struct buf *list;
	uint64_t n = 0, last = 0;
	struct dsp_gpu_ev e;

	if (G.info.state != DSP_GPU_ON)
		return 0;
	if (mode != DSP_GPU_COLLECT_DELIVERED && pthread_mutex_trylock(&call_lock) == 0) {
		int64_t now = dsp_mono_ns();
		dsp_tls.guard += DSP_GUARD_OWN;
		if (!G.stopped && (mode == DSP_GPU_COLLECT_FORCED || now - G.last_flush >= FLUSH_EVERY_NS)) {
			C.FlushAll(mode == DSP_GPU_COLLECT_FORCED ? CUPTI_ACTIVITY_FLAG_FLUSH_FORCED : 0);
			count_dropped();
			G.last_flush = now;
		}
		dsp_tls.guard -= DSP_GUARD_OWN;
		pthread_mutex_unlock(&call_lock);
	}
	pthread_mutex_lock(&lock);
	list = G.done;
	G.done = NULL;
	G.done_tail = &G.done;
	pthread_mutex_unlock(&lock);
	while (list) {
		struct buf *b = list;
		CUpti_Activity *r = NULL;
		list = b->next;
		while (C.GetNextRecord(b->data, b->valid, &r) == CUPTI_SUCCESS)
			if (convert(r, &e, &last)) {
				fn(ctx, &e);
				n++;
			}
		pthread_mutex_lock(&lock);
		b->next = G.spare;
		G.spare = b;
		pthread_mutex_unlock(&lock);
	}
	return n;
}

void dsp_gpu_get_info(struct dsp_gpu_info *info)
{
	pthread_mutex_lock(&lock);
	*info = G.info;
	info->why = G.why;
	info->lib = G.lib;
	info->holder = G.holder;
	pthread_mutex_unlock(&lock);
	__typeof__(dsp_cupti_hooks.info) more = __atomic_load_n(&dsp_cupti_hooks.info, __ATOMIC_ACQUIRE);
	info->client = NULL;
	if (more)
		info->changes += more(info);
}

void dsp_gpu_stop(void)
{
	struct dsp_tls *t = &dsp_tls;
	t->guard += DSP_GUARD_OWN;
	pthread_mutex_lock(&call_lock);
	if (!G.stopped && G.info.state == DSP_GPU_ON) {
		uint64_t now = (uint64_t)dsp_mono_ns(); /* (a call that returned before it is in the flush) */
		C.FlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
		count_dropped();
		pthread_mutex_lock(&lock);
		G.info.stopped_ns = now;
		G.info.changes++;
		pthread_mutex_unlock(&lock);
	}
	G.stopped = 1;
	pthread_mutex_unlock(&call_lock);
	t->guard -= DSP_GUARD_OWN;
}

/* Only while on: "pushed" so that a pop never meets a push made before CUPTI started. */
static __thread int pushed;

void dsp_gpu_push(uint64_t id)
{
	if (__atomic_load_n(&G.info.state, __ATOMIC_RELAXED) == DSP_GPU_ON && !G.stopped && C.Push &&
	    C.Push(DSP_EXT_KIND, id) == CUPTI_SUCCESS)
		pushed++;
}

void dsp_gpu_pop(void)
{
	uint64_t id;
	if (pushed && C.Pop && !G.stopped) {
		pushed--;
		C.Pop(DSP_EXT_KIND, &id);
	}
}

/* The child has no CUPTI thread and its CUDA is unusable: the parent's records are the parent's,
 * and nothing calls CUPTI here. */
void dsp_gpu_atfork_child(void)
{
	pthread_mutex_init(&lock, NULL);
	pthread_mutex_init(&call_lock, NULL);
	for (struct buf *b = G.done, *next; b; b = next) {
		next = b->next;
		free(b);
	}
	for (struct buf *b = G.spare, *next; b; b = next) {
		next = b->next;
		free(b);
	}
	G.done = G.spare = NULL;
	G.done_tail = &G.done;
	G.nbufs = 0;
	G.holder[0] = 0;
	memset(&G.info, 0, sizeof G.info);
	G.why[0] = G.lib[0] = 0;
	G.tried = G.stopped = 1;
}
