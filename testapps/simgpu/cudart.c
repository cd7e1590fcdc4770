/* A stand-in for libcudart.so.13, for tests on machines without a GPU: `make sim` builds it as
 * build/simgpu/libcudart.so.13, and a program linked against the real shared cudart (nvcc
 * -cudart shared) runs on it with LD_LIBRARY_PATH=build/simgpu. A test double, never part of the
 * product: it has the real ABI (compiled against the installed cuda_runtime_api.h; nvcc's launch
 * entry points are declared below as crt/host_runtime.h has them), runs no device code and models
 * time instead (docs/testing.md, "The simulated device"):
 *  - memory: device and pinned allocations are host memory, tracked so that a copy knows its
 *    direction and whether its host side is pinned; copies move the bytes for real, on a worker
 *    thread, and whatever waits for the device waits for them too (SIMGPU_MOVE_BYTES=0: not at
 *    all, for programs that never read what they copy);
 *  - streams: each has a timeline. Work enqueued on one starts when the stream is free, and not
 *    before the host enqueued it plus LAUNCH_NS; it lasts its modelled time: a kernel
 *    SIMGPU_KERNEL_US (default 20) or, by a substring of its (mangled) name, what
 *    SIMGPU_KERNELS="name=us,..." says ("name=arg": each launch's first argument, in ns); a copy COPY_NS plus its bytes at SIMGPU_PINNED_GBS (25)
 *    or, with pageable host memory, SIMGPU_PAGEABLE_GBS (6); device to device at 500 GB/s;
 *  - the legacy default stream waits for every blocking stream's work, and they for its; each
 *    thread's default stream (the _ptsz/_ptds entry points, cudaStreamPerThread) is blocking;
 *  - cudaMemcpy, and cudaMemcpyAsync from or to pageable memory, return when the copy ends;
 *    synchronize calls sleep until the work they wait for ends (CLOCK_MONOTONIC);
 *  - collectives (the NCCL stand-in's, simgpu.h) transfer once every rank agrees: their kernel
 *    runs from when its stream could start it (waiting for the last rank, as NCCL's kernels do)
 *    to the transfer's end; work enqueued behind one is placed later, in order, by a device
 *    thread of the stand-in's own.
 * The calls that do or wait for device work, the work and the waits are told, with their times and
 * correlation ids, to the CUPTI stand-in when one observes (simgpu.h). */
#include <cuda_runtime_api.h>
#include <cupti_activity.h>
#include <cupti_runtime_cbid.h>
#include <cupti_driver_cbid.h>
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "cudart_int.h"

#define LAUNCH_NS 3000   /* from the host's enqueue to the earliest start on the device */
#define COPY_NS 5000     /* a copy's fixed cost */
#define D2D_GBS 2000.0   /* HBM: an H200 copied 1 GiB device to device at 2,133 GB/s (docs/gpu.md) */
#define STAGE_BYTES 65536 /* a pageable copy's last staging chunk, whose DMA ends after an async call returns */

/* nvcc's entry points (crt/host_runtime.h, crt/device_functions.h: C++ headers) */
void **__cudaRegisterFatBinary(void *fatCubin);
void __cudaRegisterFatBinaryEnd(void **handle);
void __cudaUnregisterFatBinary(void **handle);
char __cudaInitModule(void **handle);
void __cudaRegisterFunction(void **handle, const char *hostFun, char *deviceFun, const char *deviceName,
			    int thread_limit, uint3 *tid, uint3 *bid, dim3 *bDim, dim3 *gDim, int *wSize);
void __cudaRegisterVar(void **handle, char *hostVar, char *deviceAddress, const char *deviceName, int ext,
		       size_t size, int constant, int global);
unsigned __cudaPushCallConfiguration(dim3 gridDim, dim3 blockDim, size_t sharedMem, struct CUstream_st *stream);
cudaError_t __cudaPopCallConfiguration(dim3 *gridDim, dim3 *blockDim, size_t *sharedMem, void *stream);
cudaError_t __cudaGetKernel(cudaKernel_t *kernel, const void *hostFun);
cudaError_t __cudaLaunchKernel(cudaKernel_t kernel, dim3 gridDim, dim3 blockDim, void **args, size_t sharedMem,
			       cudaStream_t stream);

/* the per-thread default stream's entry points (cuda_runtime_api.h declares them only for programs
 * built with it) */
cudaError_t __cudaLaunchKernel_ptsz(cudaKernel_t kernel, dim3 gridDim, dim3 blockDim, void **args, size_t sharedMem,
				    cudaStream_t stream);
cudaError_t cudaLaunchKernel_ptsz(const void *func, dim3 gridDim, dim3 blockDim, void **args, size_t sharedMem,
				  cudaStream_t stream);
cudaError_t cudaMemcpy_ptds(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind);
cudaError_t cudaMemcpy2D_ptds(void *, size_t, const void *, size_t, size_t, size_t, enum cudaMemcpyKind);
cudaError_t cudaMemcpy2DAsync_ptsz(void *, size_t, const void *, size_t, size_t, size_t, enum cudaMemcpyKind,
				   cudaStream_t);
cudaError_t cudaMemcpyAsync_ptsz(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind, cudaStream_t s);
cudaError_t cudaMemset_ptds(void *p, int v, size_t n);
cudaError_t cudaMemsetAsync_ptsz(void *p, int v, size_t n, cudaStream_t s);
cudaError_t cudaStreamSynchronize_ptsz(cudaStream_t s);
cudaError_t cudaStreamQuery_ptsz(cudaStream_t s);
cudaError_t cudaEventRecord_ptsz(cudaEvent_t e, cudaStream_t s);
cudaError_t cudaStreamWaitEvent_ptsz(cudaStream_t s, cudaEvent_t e, unsigned int flags);

pthread_mutex_t sim_lock = PTHREAD_MUTEX_INITIALIZER;
static __thread cudaError_t last_error;

cudaError_t sim_fail(cudaError_t e)
{
	last_error = e;
	return e;
}

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* the calling thread's last error; clear: as cudaGetLastError, which resets it */
cudaError_t sim_last_error(int clear)
{
	cudaError_t e = last_error;
	if (clear)
		last_error = cudaSuccess;
	return e;
}

uint64_t sim_now(void)
{
	return now_ns();
}

static void sleep_until(uint64_t t)
{
	struct timespec ts = { (time_t)(t / 1000000000u), (long)(t % 1000000000u) };
	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
		;
}

/* sleep_until to within a microsecond: the last millisecond spent spinning (a sleep overshoots by
 * the timer slack, 50 us, more than the staging tail it must resolve, and on a busy 2-core CI
 * machine the wake-up came up to 300 us late: a 200 us spin returned 40 to 110 us past t) */
static void sleep_until_exact(uint64_t t)
{
	if (t > 1000000)
		sleep_until(t - 1000000);
	while (now_ns() < t)
		;
}

static double env_num(const char *name, double def)
{
	const char *v = getenv(name);
	char *end;
	double d = v ? strtod(v, &end) : 0;
	return v && *v && !*end && d > 0 ? d : def;
}

/* ---- the driver's start: cuInit, on the first call that needs the device ----
 * As the real runtime and driver do: the driver (libcuda.so.1, the stand-in of driver.c) is loaded,
 * then at cuInit a library named by CUDA_INJECTION64_PATH is loaded and its InitializeInjection
 * called, once, from the thread that got there first, before any work. */
static pthread_once_t driver_once = PTHREAD_ONCE_INIT;

static void driver_start(void)
{
	void *drv = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL); /* the driver stand-in, when on the path */
	int (*init)(unsigned) = drv ? (int (*)(unsigned))dlsym(drv, "cuInit") : NULL;
	if (init)
		init(0); /* (cuInit: from now on the driver says it is initialised) */
	const char *path = getenv("CUDA_INJECTION64_PATH");
	if (!path || !*path)
		return;
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	int (*inject)(void) = h ? (int (*)(void))dlsym(h, "InitializeInjection") : NULL;
	if (inject)
		inject();
}

static void driver(void)
{
	pthread_once(&driver_once, driver_start);
}

/* ---- what the CUPTI stand-in is told (simgpu.h) ---- */

static void (*observer)(const struct simgpu_item *);
static uint32_t correlations;
static __thread uint32_t correlation; /* the runtime API call this thread is in */

void simgpu_observe(void (*fn)(const struct simgpu_item *))
{
	__atomic_store_n(&observer, fn, __ATOMIC_RELEASE);
}

/* hands it to the observer as it is (correlation and thread set) */
static void tell_as(const struct simgpu_item *it)
{
	void (*fn)(const struct simgpu_item *) = __atomic_load_n(&observer, __ATOMIC_ACQUIRE);
	if (fn)
		fn(it);
}

/* the calling thread's item, in the runtime call it is in. CUPTI's thread id is the low 32 bits of
 * the thread's pthread_t, not its tid: so on an H200 with CUDA 13.0 (docs/gpu.md) */
void sim_tell(struct simgpu_item *it)
{
	it->correlation = correlation;
	it->tid = (uint32_t)(uintptr_t)pthread_self();
	tell_as(it);
}

static void tell(struct simgpu_item *it)
{
	sim_tell(it);
}

/* A runtime API call begins: its correlation id, its start. CUPTI records every runtime call, those
 * that do no device work too (a PyTorch step on an H200 made 5.1 a kernel: docs/gpu.md); need: it
 * needs the device (cuInit first) */
uint64_t sim_api_begin(int need)
{
	if (need)
		driver();
	correlation = __atomic_add_fetch(&correlations, 1, __ATOMIC_RELAXED);
	return now_ns();
}

static uint64_t api_begin(void)
{
	return sim_api_begin(1);
}

cudaError_t sim_api_end(int cbid, uint64_t t0, cudaError_t rc)
{
	struct simgpu_item it = { .what = SIMGPU_API, .start = t0, .end = now_ns(), .cbid = cbid, .ret = (int)rc };
	tell(&it);
	correlation = 0;
	return rc;
}

static cudaError_t api_end(int cbid, uint64_t t0, cudaError_t rc)
{
	return sim_api_end(cbid, t0, rc);
}

/* a driver call that began with sim_api_begin: told as CUPTI's driver record, with its CUresult */
int sim_driver_end(int cbid, uint64_t t0, int rc)
{
	struct simgpu_item it = { .what = SIMGPU_API, .start = t0, .end = now_ns(), .cbid = cbid, .ret = rc, .driver = 1 };
	tell(&it);
	correlation = 0;
	return rc;
}

/* a driver call of the calling thread, from t0 until now, with a correlation id of its own (a
 * runtime call it is made in keeps its own) */
uint32_t sim_driver_call(int cbid, uint64_t t0)
{
	uint32_t saved = correlation, corr = __atomic_add_fetch(&correlations, 1, __ATOMIC_RELAXED);
	struct simgpu_item api = { .what = SIMGPU_API, .start = t0, .end = now_ns(), .driver = 1, .cbid = cbid };
	correlation = corr;
	tell(&api);
	correlation = saved;
	return corr;
}

/* ---- memory ---- */

enum { MEM_DEVICE = 1, MEM_PINNED = 2 };

static struct alloc { char *p; size_t n; int kind; } *allocs;
static size_t nallocs, callocs;

static int track(void *p, size_t n, int kind)
{
	pthread_mutex_lock(&sim_lock);
	if (nallocs == callocs) {
		size_t cap = callocs ? callocs * 2 : 64;
		struct alloc *a = realloc(allocs, cap * sizeof *a);
		if (!a) {
			pthread_mutex_unlock(&sim_lock);
			return -1;
		}
		allocs = a;
		callocs = cap;
	}
	allocs[nallocs++] = (struct alloc){ p, n, kind };
	pthread_mutex_unlock(&sim_lock);
	return 0;
}

/* the kind of the allocation holding p; 0: pageable host memory */
static int kind_of(const void *p)
{
	int kind = 0;
	pthread_mutex_lock(&sim_lock);
	for (size_t i = 0; i < nallocs; i++)
		if ((const char *)p >= allocs[i].p && (const char *)p < allocs[i].p + (allocs[i].n ? allocs[i].n : 1)) {
			kind = allocs[i].kind;
			break;
		}
	pthread_mutex_unlock(&sim_lock);
	return kind;
}

/* forgets the allocation that starts at p, of that kind; -1 when there is none */
static int untrack(const void *p, int kind)
{
	int rc = -1;
	pthread_mutex_lock(&sim_lock);
	for (size_t i = 0; i < nallocs; i++)
		if (allocs[i].p == p && allocs[i].kind == kind) {
			allocs[i] = allocs[--nallocs];
			rc = 0;
			break;
		}
	pthread_mutex_unlock(&sim_lock);
	return rc;
}

static void device_idle(void);

/* Pinned host memory costs the host its pinning, SIMGPU_PIN_GBS (2: an H200's host pinned 256 MiB
 * in 134.5 ms with cudaHostAlloc, docs/gpu.md), and is one of the programming guide's implicit
 * synchronizations ("a page-locked host memory allocation"): the device's work before it ends
 * first. */
static cudaError_t alloc(void **p, size_t n, int kind)
{
	driver();
	if (!p)
		return sim_fail(cudaErrorInvalidValue);
	*p = malloc(n ? n : 1);
	if (!*p || track(*p, n, kind) < 0) {
		free(*p);
		*p = NULL;
		return sim_fail(cudaErrorMemoryAllocation);
	}
	if (kind == MEM_PINNED) {
		device_idle();
		sleep_until(now_ns() + (uint64_t)((double)n / env_num("SIMGPU_PIN_GBS", 2)));
	}
	return cudaSuccess;
}

/* cudaFree and cudaFreeHost "may perform implicit synchronization" (cuda_runtime_api.h): here
 * they do, and unpinning costs the host too (an H200's freed 256 MiB pinned in 37.4 ms) */
static cudaError_t release(void *p, int kind)
{
	if (!p)
		return cudaSuccess;
	size_t n = 0;
	pthread_mutex_lock(&sim_lock);
	for (size_t i = 0; i < nallocs; i++)
		if (allocs[i].p == p)
			n = allocs[i].n;
	pthread_mutex_unlock(&sim_lock);
	if (untrack(p, kind) < 0)
		return sim_fail(cudaErrorInvalidValue);
	device_idle();
	if (kind == MEM_PINNED)
		sleep_until(now_ns() + (uint64_t)((double)n / 7.0));
	free(p);
	return cudaSuccess;
}

int sim_kind_of(const void *p)
{
	return kind_of(p);
}

/* a runtime call that does no device work of its own: its result, told as CUPTI records it */
#define TOLD(cbid, call)                                        \
	do {                                                    \
		uint64_t t0_ = api_begin();                     \
		return api_end(CUPTI_RUNTIME_TRACE_CBID_##cbid, t0_, (call)); \
	} while (0)

cudaError_t cudaMalloc(void **p, size_t n)
{
	TOLD(cudaMalloc_v3020, alloc(p, n, MEM_DEVICE));
}

cudaError_t cudaFree(void *p)
{
	TOLD(cudaFree_v3020, release(p, MEM_DEVICE));
}

cudaError_t cudaMallocHost(void **p, size_t n)
{
	TOLD(cudaMallocHost_v3020, alloc(p, n, MEM_PINNED));
}

cudaError_t cudaHostAlloc(void **p, size_t n, unsigned int flags)
{
	TOLD(cudaHostAlloc_v3020, alloc(p, n, MEM_PINNED));
}

cudaError_t cudaFreeHost(void *p)
{
	TOLD(cudaFreeHost_v3020, release(p, MEM_PINNED));
}

/* The bytes of asynchronous copies and sets move on a worker thread, in order, so that the host
 * is not held up by them; whatever waits for the device waits for the worker too. */
struct move { void *dst; const void *src; size_t n; int set, v; struct move *next; };
static struct move *moves, **moves_tail = &moves;
static pthread_cond_t moves_cv = PTHREAD_COND_INITIALIZER;
static pthread_t mover;
static int mover_started, moving;

static void *mover_main(void *arg)
{
	pthread_mutex_lock(&sim_lock);
	for (;;) {
		while (!moves)
			pthread_cond_wait(&moves_cv, &sim_lock);
		struct move *m = moves;
		moves = m->next;
		if (!moves)
			moves_tail = &moves;
		moving = 1;
		pthread_mutex_unlock(&sim_lock);
		if (m->set)
			memset(m->dst, m->v, m->n);
		else
			memmove(m->dst, m->src, m->n);
		free(m);
		pthread_mutex_lock(&sim_lock);
		moving = 0;
		pthread_cond_broadcast(&moves_cv);
	}
	return NULL;
}

/* queues a move (or does it now when that is impossible); under lock. SIMGPU_MOVE_BYTES=0: no
 * bytes move at all, for programs that never read what they copy (the testbed's GPU mode), so
 * that this machine's memory bandwidth does not stand in for the modelled copy's */
static void move_later(void *dst, const void *src, size_t n, int set, int v)
{
	static int skip = -1;
	if (skip < 0) {
		const char *e = getenv("SIMGPU_MOVE_BYTES");
		skip = e && !strcmp(e, "0");
	}
	if (skip)
		return;
	struct move *m = malloc(sizeof *m);
	if (!mover_started && m)
		mover_started = pthread_create(&mover, NULL, mover_main, NULL) == 0 ? 1 : -1;
	if (!m || mover_started < 0) {
		free(m);
		if (set)
			memset(dst, v, n);
		else
			memmove(dst, src, n);
		return;
	}
	*m = (struct move){ dst, src, n, set, v, NULL };
	*moves_tail = m;
	moves_tail = &m->next;
	pthread_cond_broadcast(&moves_cv);
}

/* waits until every queued move is done */
static void moves_done(void)
{
	pthread_mutex_lock(&sim_lock);
	while (moves || moving)
		pthread_cond_wait(&moves_cv, &sim_lock);
	pthread_mutex_unlock(&sim_lock);
}

/* ---- streams and their timelines ---- */

struct CUevent_st {
	uint64_t t;   /* when the work before its record ends; 0: never recorded */
	int pending;  /* recorded behind a collective: t is not known yet */
	int refs;     /* queued records and waits that name it (under sim_lock) */
	int dead;     /* destroyed while refs: freed by the device thread once none is left */
};

#define MAXDEV 8
/* each device's legacy default stream (stream 0), id 7 in its own context as on a GPU */
static struct CUstream_st legacies[MAXDEV] = {
	{ 0, 1, 7, 0, NULL, NULL }, { 0, 1, 7, 1, NULL, NULL }, { 0, 1, 7, 2, NULL, NULL }, { 0, 1, 7, 3, NULL, NULL },
	{ 0, 1, 7, 4, NULL, NULL }, { 0, 1, 7, 5, NULL, NULL }, { 0, 1, 7, 6, NULL, NULL }, { 0, 1, 7, 7, NULL, NULL },
};
static __thread int cur_dev; /* the calling thread's device (cudaSetDevice) */

int *sim_device(void)
{
	return &cur_dev;
}

/* SIMGPU_DEVICES devices (1 to 8; default 1) */
int sim_devices(void)
{
	static int n;
	if (!n) {
		const char *v = getenv("SIMGPU_DEVICES");
		int k = v ? atoi(v) : 1;
		n = k >= 1 && k <= MAXDEV ? k : 1;
	}
	return n;
}

#define LEGACY(s) ((s) == &legacies[(s)->device])
static uint32_t stream_ids = 12;
static struct CUstream_st *streams;                /* the others */

static struct CUstream_st *new_stream(int blocking);

/* The stream a handle names: 0 is the legacy default stream, or, in the per-thread variants
 * (_ptsz, _ptds: nvcc --default-stream per-thread), the calling thread's default stream, which
 * cudaStreamPerThread names too. Not under lock: a thread's default stream is made on first use. */
static struct CUstream_st *stream_of(cudaStream_t s, int per_thread)
{
	static __thread struct CUstream_st *mine[MAXDEV]; /* (one a device) */
	if (s == cudaStreamLegacy || (!s && !per_thread))
		return &legacies[cur_dev];
	if (s && s != cudaStreamPerThread)
		return s;
	if (!mine[cur_dev])
		mine[cur_dev] = new_stream(1); /* blocking: it and the legacy stream wait for each other */
	return mine[cur_dev] ? mine[cur_dev] : &legacies[cur_dev];
}

/* When work enqueued on stream s at time enq could start. Under lock. */
static uint64_t ready_at(struct CUstream_st *s, uint64_t enq)
{
	uint64_t start = enq + LAUNCH_NS;
	if (s->busy_until > start)
		start = s->busy_until;
	if (LEGACY(s)) { /* (a device's streams only: each device runs on its own) */
		for (struct CUstream_st *o = streams; o; o = o->next)
			if (o->device == s->device && o->blocking && o->busy_until > start)
				start = o->busy_until;
	} else if (s->blocking && legacies[s->device].busy_until > start) {
		start = legacies[s->device].busy_until;
	}
	return start;
}

/* Work of dur ns on stream s, enqueued at enq: returns when it ends. Under lock. */
static uint64_t place(struct CUstream_st *s, uint64_t dur, uint64_t enq)
{
	s->busy_until = ready_at(s, enq) + dur;
	return s->busy_until;
}

/* ---- work placed later: after a collective (simgpu.h) ----
 * While a collective waits for its ranks, everything enqueued after it, on any stream, waits in
 * this queue in enqueue order, with its enqueue time; the device thread places each in turn with
 * the rules above, so the times come out as if placed at enqueue. */
enum { D_WORK, D_EVENT, D_WAIT, D_COLL };
struct deferred {
	int what;
	struct CUstream_st *st;
	uint64_t enq, dur;
	struct simgpu_item it;      /* D_WORK, D_COLL: told once placed */
	struct CUevent_st *ev;      /* D_EVENT, D_WAIT */
	struct simgpu_coll *coll;   /* D_COLL */
	uint64_t *end;              /* D_WORK: where a waiting caller wants the end, or NULL */
	uint64_t no;
	struct deferred *next;
};
static struct deferred *dq, **dq_tail = &dq;
static uint64_t deferred_n, placed_n; /* enqueued into the queue, placed from it */
static pthread_cond_t placed_cv = PTHREAD_COND_INITIALIZER, dq_cv = PTHREAD_COND_INITIALIZER;
static int device_started;

static void *device_main(void *arg);

/* queues d (under lock); returns its number for wait_placed */
static uint64_t defer(struct deferred *d)
{
	if (!device_started) {
		pthread_t t;
		device_started = pthread_create(&t, NULL, device_main, NULL) == 0;
	}
	d->no = ++deferred_n;
	d->next = NULL;
	*dq_tail = d;
	dq_tail = &d->next;
	pthread_cond_broadcast(&dq_cv);
	return d->no;
}

/* waits (under lock) until everything queued so far, or up to no, is placed */
static void wait_placed(uint64_t no)
{
	while (placed_n < no)
		pthread_cond_wait(&placed_cv, &sim_lock);
}

/* Work of dur ns on st, told to CUPTI as it (start and end filled in) once placed: returns its end,
 * or 0 when it is queued behind a collective (then *end gets it, if end is not NULL, and a caller
 * that needs it waits with wait_placed(*no)). Under lock; tells after unlocking (told[0] = 1). */
static uint64_t work(struct CUstream_st *st, uint64_t dur, struct simgpu_item *it, uint64_t *end, uint64_t *no,
		     int *told)
{
	*told = 0;
	it->device = st->device;
	if (!dq) {
		uint64_t e = place(st, dur, now_ns());
		it->start = e - dur;
		it->end = e;
		*told = 1;
		return e;
	}
	struct deferred *d = calloc(1, sizeof *d);
	if (!d) { /* (no memory: placed now, out of order) */
		uint64_t e = place(st, dur, now_ns());
		it->start = e - dur;
		it->end = e;
		*told = 1;
		return e;
	}
	it->correlation = correlation;
	it->tid = (uint32_t)syscall(SYS_gettid);
	*d = (struct deferred){ .what = D_WORK, .st = st, .enq = now_ns(), .dur = dur, .it = *it, .end = end };
	*no = defer(d);
	return 0;
}

static void *device_main(void *arg)
{
	pthread_mutex_lock(&sim_lock);
	for (;;) {
		while (!dq)
			pthread_cond_wait(&dq_cv, &sim_lock);
		struct deferred *d = dq; /* stays at the head until placed: new work queues behind it */
		uint64_t e = 0;
		switch (d->what) {
		case D_WORK:
			e = place(d->st, d->dur, d->enq);
			d->it.start = e - d->dur;
			d->it.end = e;
			if (d->end)
				*d->end = e;
			break;
		case D_EVENT:
			d->ev->t = ready_at(d->st, d->enq);
			if (d->st->busy_until < d->ev->t)
				d->st->busy_until = d->ev->t;
			d->ev->pending = 0;
			break;
		case D_WAIT:
			if (d->ev->t > d->st->busy_until)
				d->st->busy_until = d->ev->t;
			break;
		case D_COLL: {
			uint64_t local = ready_at(d->st, d->enq);
			pthread_mutex_unlock(&sim_lock);
			uint64_t start = d->coll->start(d->coll, local);
			pthread_mutex_lock(&sim_lock);
			start = start > local ? start : local;
			d->st->busy_until = start + d->coll->dur;
			/* as a real NCCL kernel: it runs from when its stream could start it, waiting in it
			 * for the last rank, and ends when the transfer that begins then ends */
			d->it.start = local;
			d->it.end = start + d->coll->dur;
			break;
		}
		}
		/* told before it counts as placed: whoever waits for it (a synchronize before the
		 * program's exit) finds its record with CUPTI */
		pthread_mutex_unlock(&sim_lock);
		if (d->what == D_WORK || d->what == D_COLL)
			tell_as(&d->it);
		pthread_mutex_lock(&sim_lock);
		dq = d->next;
		if (!dq)
			dq_tail = &dq;
		placed_n = d->no;
		pthread_cond_broadcast(&placed_cv);
		struct CUevent_st *gone = NULL;
		if ((d->what == D_EVENT || d->what == D_WAIT) && !--d->ev->refs && d->ev->dead)
			gone = d->ev;
		pthread_mutex_unlock(&sim_lock);
		free(gone);
		if (d->what == D_COLL)
			d->coll->done(d->coll);
		free(d);
		pthread_mutex_lock(&sim_lock);
	}
	return NULL;
}

static struct CUstream_st *new_stream(int blocking)
{
	driver();
	struct CUstream_st *s = calloc(1, sizeof *s);
	if (!s)
		return NULL;
	s->blocking = blocking;
	s->device = cur_dev;
	pthread_mutex_lock(&sim_lock);
	s->id = ++stream_ids;
	s->next = streams;
	streams = s;
	pthread_mutex_unlock(&sim_lock);
	return s;
}

static cudaError_t stream_create(cudaStream_t *p, unsigned int flags)
{
	if (!p)
		return sim_fail(cudaErrorInvalidValue);
	*p = new_stream(!(flags & cudaStreamNonBlocking));
	return *p ? cudaSuccess : sim_fail(cudaErrorMemoryAllocation);
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *p, unsigned int flags)
{
	TOLD(cudaStreamCreateWithFlags_v5000, stream_create(p, flags));
}

cudaError_t cudaStreamCreate(cudaStream_t *p)
{
	TOLD(cudaStreamCreate_v3020, stream_create(p, cudaStreamDefault));
}

static cudaError_t stream_destroy(cudaStream_t s);

cudaError_t cudaStreamDestroy(cudaStream_t s)
{
	TOLD(cudaStreamDestroy_v5050, stream_destroy(s));
}

static cudaError_t stream_destroy(cudaStream_t s)
{
	if (!s)
		return sim_fail(cudaErrorInvalidResourceHandle);
	pthread_mutex_lock(&sim_lock);
	for (struct CUstream_st **q = &streams; *q; q = &(*q)->next)
		if (*q == s) {
			wait_placed(deferred_n); /* (the real one lets pending work finish, too) */
			*q = s->next;
			pthread_mutex_unlock(&sim_lock);
			sleep_until(s->busy_until);
			free(s);
			return cudaSuccess;
		}
	pthread_mutex_unlock(&sim_lock);
	return sim_fail(cudaErrorInvalidResourceHandle);
}

/* a synchronization record for the CUPTI stand-in: the host waited from t0 until now; rc its
 * result (a query of unfinished work: CUDA_ERROR_NOT_READY, 600) */
static void tell_sync(int type, uint64_t t0, uint32_t stream, int rc)
{
	struct simgpu_item it = { .what = SIMGPU_SYNC, .start = t0, .end = now_ns(), .stream = stream, .sync = type,
				  .ret = rc };
	tell(&it);
}

static cudaError_t stream_sync(struct CUstream_st *st, int cbid)
{
	uint64_t t0 = api_begin();
	pthread_mutex_lock(&sim_lock);
	wait_placed(deferred_n);
	uint64_t t = st->busy_until;
	pthread_mutex_unlock(&sim_lock);
	moves_done();
	sleep_until(t);
	tell_sync(CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE, t0, st->id, 0);
	return api_end(cbid, t0, cudaSuccess);
}

/* a query: told as a call and, as a real CUPTI does, as a synchronization record of its stream
 * whatever its answer (on an H200 a cudaEventQuery of unfinished work gave one with result 600,
 * CUDA_ERROR_NOT_READY; cuptiActivityEnableAllSyncRecords(0) leaves those out: the CUPTI stand-in) */
static cudaError_t stream_query(struct CUstream_st *st, int cbid)
{
	uint64_t t0 = api_begin();
	pthread_mutex_lock(&sim_lock);
	uint64_t t = st->busy_until;
	int queued = dq != NULL;
	pthread_mutex_unlock(&sim_lock);
	cudaError_t rc = !queued && now_ns() >= t ? cudaSuccess : cudaErrorNotReady;
	tell_sync(CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE, t0, st->id, rc == cudaSuccess ? 0 : 600);
	return api_end(cbid, t0, rc);
}

cudaError_t cudaStreamSynchronize(cudaStream_t s)
{
	return stream_sync(stream_of(s, 0), CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020);
}

cudaError_t cudaStreamSynchronize_ptsz(cudaStream_t s)
{
	return stream_sync(stream_of(s, 1), CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_ptsz_v7000);
}

cudaError_t cudaStreamQuery(cudaStream_t s)
{
	return stream_query(stream_of(s, 0), CUPTI_RUNTIME_TRACE_CBID_cudaStreamQuery_v3020);
}

cudaError_t cudaStreamQuery_ptsz(cudaStream_t s)
{
	return stream_query(stream_of(s, 1), CUPTI_RUNTIME_TRACE_CBID_cudaStreamQuery_ptsz_v7000);
}

/* until every stream's work is done on the calling thread's device */
static void device_idle(void)
{
	pthread_mutex_lock(&sim_lock);
	wait_placed(deferred_n);
	uint64_t t = legacies[cur_dev].busy_until;
	for (struct CUstream_st *o = streams; o; o = o->next)
		if (o->device == cur_dev)
			t = o->busy_until > t ? o->busy_until : t;
	pthread_mutex_unlock(&sim_lock);
	moves_done();
	sleep_until(t);
}

cudaError_t cudaDeviceSynchronize(void)
{
	uint64_t t0 = api_begin();
	device_idle();
	tell_sync(CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE, t0, UINT32_MAX, 0);
	return api_end(CUPTI_RUNTIME_TRACE_CBID_cudaDeviceSynchronize_v3020, t0, cudaSuccess);
}

/* ---- events ---- */

static cudaError_t event_create(cudaEvent_t *e)
{
	if (!e)
		return sim_fail(cudaErrorInvalidValue);
	*e = calloc(1, sizeof **e);
	return *e ? cudaSuccess : sim_fail(cudaErrorMemoryAllocation);
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned int flags)
{
	TOLD(cudaEventCreateWithFlags_v3020, event_create(e));
}

cudaError_t cudaEventCreate(cudaEvent_t *e)
{
	TOLD(cudaEventCreate_v3020, event_create(e));
}

/* "An event may be destroyed before it is complete ... the call does not block on completion of
 * the event, and any associated resources will automatically be released asynchronously at
 * completion" (cuda_runtime_api.h, cudaEventDestroy): one still named by queued work is freed by
 * the device thread once placed */
cudaError_t cudaEventDestroy(cudaEvent_t e)
{
	uint64_t t0 = api_begin();
	if (e) {
		pthread_mutex_lock(&sim_lock);
		int later = e->refs > 0;
		e->dead = later;
		pthread_mutex_unlock(&sim_lock);
		if (!later)
			free(e);
	}
	return api_end(CUPTI_RUNTIME_TRACE_CBID_cudaEventDestroy_v3020, t0, cudaSuccess);
}

static cudaError_t event_record(cudaEvent_t e, struct CUstream_st *st)
{
	if (!e)
		return sim_fail(cudaErrorInvalidResourceHandle);
	pthread_mutex_lock(&sim_lock);
	struct deferred *d = dq ? calloc(1, sizeof *d) : NULL;
	if (d) {
		*d = (struct deferred){ .what = D_EVENT, .st = st, .enq = now_ns(), .ev = e };
		e->pending = 1;
		e->refs++;
		defer(d);
	} else {
		e->t = place(st, 0, now_ns());
		e->pending = 0;
	}
	pthread_mutex_unlock(&sim_lock);
	return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s)
{
	TOLD(cudaEventRecord_v3020, event_record(e, stream_of(s, 0)));
}

cudaError_t cudaEventRecord_ptsz(cudaEvent_t e, cudaStream_t s)
{
	TOLD(cudaEventRecord_ptsz_v7000, event_record(e, stream_of(s, 1)));
}

cudaError_t cudaEventSynchronize(cudaEvent_t e)
{
	if (!e)
		return sim_fail(cudaErrorInvalidResourceHandle);
	uint64_t t0 = api_begin();
	pthread_mutex_lock(&sim_lock);
	while (e->pending)
		pthread_cond_wait(&placed_cv, &sim_lock);
	pthread_mutex_unlock(&sim_lock);
	moves_done();
	sleep_until(e->t);
	tell_sync(CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE, t0, UINT32_MAX, 0);
	return api_end(CUPTI_RUNTIME_TRACE_CBID_cudaEventSynchronize_v3020, t0, cudaSuccess);
}

cudaError_t cudaEventQuery(cudaEvent_t e)
{
	uint64_t t0 = api_begin();
	if (!e)
		return api_end(CUPTI_RUNTIME_TRACE_CBID_cudaEventQuery_v3020, t0, sim_fail(cudaErrorInvalidResourceHandle));
	cudaError_t rc = !__atomic_load_n(&e->pending, __ATOMIC_ACQUIRE) && now_ns() >= e->t ? cudaSuccess : cudaErrorNotReady;
	tell_sync(CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE, t0, UINT32_MAX, rc == cudaSuccess ? 0 : 600);
	return api_end(CUPTI_RUNTIME_TRACE_CBID_cudaEventQuery_v3020, t0, rc);
}

static cudaError_t elapsed(float *ms, cudaEvent_t a, cudaEvent_t b);

cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b)
{
	TOLD(cudaEventElapsedTime_v3020, elapsed(ms, a, b));
}

static cudaError_t elapsed(float *ms, cudaEvent_t a, cudaEvent_t b)
{
	if (!ms || !a || !b)
		return sim_fail(cudaErrorInvalidValue);
	if (a->pending || b->pending)
		return sim_fail(cudaErrorNotReady);
	if (!a->t || !b->t || now_ns() < a->t || now_ns() < b->t)
		return sim_fail(a->t && b->t ? cudaErrorNotReady : cudaErrorInvalidResourceHandle);
	*ms = (float)(((double)b->t - (double)a->t) / 1e6);
	return cudaSuccess;
}

static cudaError_t stream_wait(struct CUstream_st *st, cudaEvent_t e)
{
	if (!e)
		return sim_fail(cudaErrorInvalidResourceHandle);
	pthread_mutex_lock(&sim_lock);
	struct deferred *d = dq ? calloc(1, sizeof *d) : NULL;
	if (d) {
		*d = (struct deferred){ .what = D_WAIT, .st = st, .ev = e };
		e->refs++;
		defer(d);
	} else if (e->t > st->busy_until) {
		st->busy_until = e->t;
	}
	pthread_mutex_unlock(&sim_lock);
	return cudaSuccess;
}

cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned int flags)
{
	TOLD(cudaStreamWaitEvent_v3020, stream_wait(stream_of(s, 0), e));
}

cudaError_t cudaStreamWaitEvent_ptsz(cudaStream_t s, cudaEvent_t e, unsigned int flags)
{
	TOLD(cudaStreamWaitEvent_ptsz_v7000, stream_wait(stream_of(s, 1), e));
}

/* ---- copies ---- */

/* the copy's duration: device to device fast; otherwise at the pinned or the pageable rate */
static uint64_t copy_ns(size_t n, int host_pinned, int d2d)
{
	double gbs = d2d ? D2D_GBS : host_pinned ? env_num("SIMGPU_PINNED_GBS", 25) : env_num("SIMGPU_PAGEABLE_GBS", 6);
	return COPY_NS + (uint64_t)((double)n / gbs);
}

static int side(int mem)
{
	return mem == MEM_DEVICE ? SIMGPU_DEVICE : mem == MEM_PINNED ? SIMGPU_PINNED : SIMGPU_PAGEABLE;
}

static cudaError_t copy2d(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width, size_t height,
			  enum cudaMemcpyKind kind, struct CUstream_st *st, int async, int cbid);

static cudaError_t copy(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind, struct CUstream_st *st,
			int async, int cbid)
{
	return copy2d(dst, n, src, n, n, 1, kind, st, async, cbid);
}

/* a copy of height rows of width bytes, each pitch bytes from the last */
static cudaError_t copy2d(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width, size_t height,
			  enum cudaMemcpyKind kind, struct CUstream_st *st, int async, int cbid)
{
	size_t n = width * height;
	uint64_t t0 = api_begin();
	int dk = kind_of(dst), sk = kind_of(src);
	if (kind == cudaMemcpyDefault)
		kind = dk == MEM_DEVICE ? (sk == MEM_DEVICE ? cudaMemcpyDeviceToDevice : cudaMemcpyHostToDevice) :
		       (sk == MEM_DEVICE ? cudaMemcpyDeviceToHost : cudaMemcpyHostToHost);
	int d2d = kind == cudaMemcpyDeviceToDevice;
	int host = kind == cudaMemcpyHostToDevice ? sk : kind == cudaMemcpyDeviceToHost ? dk : MEM_PINNED;
	if ((kind == cudaMemcpyHostToDevice && dk != MEM_DEVICE) || (kind == cudaMemcpyDeviceToHost && sk != MEM_DEVICE))
		return api_end(cbid, t0, sim_fail(cudaErrorInvalidValue));
	uint64_t dur = copy_ns(n, host == MEM_PINNED, d2d), end = 0, no = 0;
	/* Pageable memory goes through pinned staging buffers, so the host is held for the copy. A
	 * synchronous call returns once the DMA is done; an asynchronous one returns once the last
	 * chunk is staged, and that chunk's DMA ends after the call ("for transfers from pageable host
	 * memory to device memory, a stream sync is performed before the copy is initiated. The function
	 * will return once the pageable buffer has been copied to the staging memory for DMA transfer to
	 * device memory, but the DMA to final destination may not have completed": cuda_runtime_api.h,
	 * API synchronization behavior; on an H200 a 64 MiB one's DMA ended 12 us after the call) */
	int hold = !async || host != MEM_PINNED, told;
	uint64_t tail = async && host != MEM_PINNED && !d2d ? copy_ns(n < STAGE_BYTES ? n : STAGE_BYTES, 0, 0) - COPY_NS : 0;
	struct simgpu_item it = { .what = SIMGPU_MEMCPY, .stream = st->id, .bytes = n, .copy_kind = (int)kind,
				  .src = side(sk), .dst = side(dk), .async = async };
	if (async && host == MEM_PINNED && sim_captured(st, dur, &it))
		return api_end(cbid, t0, cudaSuccess);
	pthread_mutex_lock(&sim_lock);
	/* (the end's address only where this call waits for it: a call that returns first would have
	 * the device thread write into its dead frame, corrupting the program's stack) */
	uint64_t e = work(st, dur, &it, hold ? &end : NULL, &no, &told);
	for (size_t r = 0; n && dst != src && r < height; r++)
		move_later((char *)dst + r * dpitch, (const char *)src + r * spitch, width, 0, 0);
	if (e)
		end = e;
	else if (hold)
		wait_placed(no);
	pthread_mutex_unlock(&sim_lock);
	if (told)
		tell(&it);
	if (hold) {
		moves_done();
		if (tail)
			sleep_until_exact(end - tail);
		else
			sleep_until(end);
	}
	return api_end(cbid, t0, cudaSuccess);
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind)
{
	return copy(dst, src, n, kind, stream_of(NULL, 0), 0, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_v3020);
}

cudaError_t cudaMemcpy_ptds(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind)
{
	return copy(dst, src, n, kind, stream_of(NULL, 1), 0, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_ptds_v7000);
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind, cudaStream_t s)
{
	return copy(dst, src, n, kind, stream_of(s, 0), 1, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020);
}

cudaError_t cudaMemcpyAsync_ptsz(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind, cudaStream_t s)
{
	return copy(dst, src, n, kind, stream_of(s, 1), 1, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_ptsz_v7000);
}

cudaError_t cudaMemcpy2D(void *d, size_t dp, const void *s, size_t sp, size_t w, size_t h, enum cudaMemcpyKind k)
{
	return copy2d(d, dp, s, sp, w, h, k, stream_of(NULL, 0), 0, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2D_v3020);
}

cudaError_t cudaMemcpy2D_ptds(void *d, size_t dp, const void *s, size_t sp, size_t w, size_t h, enum cudaMemcpyKind k)
{
	return copy2d(d, dp, s, sp, w, h, k, stream_of(NULL, 1), 0, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2D_ptds_v7000);
}

cudaError_t cudaMemcpy2DAsync(void *d, size_t dp, const void *s, size_t sp, size_t w, size_t h, enum cudaMemcpyKind k,
			      cudaStream_t st)
{
	return copy2d(d, dp, s, sp, w, h, k, stream_of(st, 0), 1, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2DAsync_v3020);
}

cudaError_t cudaMemcpy2DAsync_ptsz(void *d, size_t dp, const void *s, size_t sp, size_t w, size_t h,
				   enum cudaMemcpyKind k, cudaStream_t st)
{
	return copy2d(d, dp, s, sp, w, h, k, stream_of(st, 1), 1, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2DAsync_ptsz_v7000);
}

/* one device: a peer copy is a copy on it ("asynchronous with respect to the host",
 * cuda_runtime_api.h, on the legacy stream) */
cudaError_t cudaMemcpyPeer(void *d, int dd, const void *s, int sd, size_t n)
{
	if (dd || sd)
		return sim_fail(cudaErrorInvalidDevice);
	return copy(d, s, n, cudaMemcpyDeviceToDevice, stream_of(NULL, 0), 1, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyPeer_v4000);
}

cudaError_t cudaMemcpyPeerAsync(void *d, int dd, const void *s, int sd, size_t n, cudaStream_t st)
{
	if (dd || sd)
		return sim_fail(cudaErrorInvalidDevice);
	return copy(d, s, n, cudaMemcpyDeviceToDevice, stream_of(st, 0), 1, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyPeerAsync_v4000);
}

static cudaError_t set(void *p, int v, size_t n, struct CUstream_st *st, int cbid)
{
	uint64_t t0 = api_begin();
	if (kind_of(p) != MEM_DEVICE)
		return api_end(cbid, t0, sim_fail(cudaErrorInvalidValue));
	uint64_t dur = copy_ns(n, 1, 1), no;
	int told;
	struct simgpu_item it = { .what = SIMGPU_MEMSET, .stream = st->id, .bytes = n };
	if (sim_captured(st, dur, &it))
		return api_end(cbid, t0, cudaSuccess);
	pthread_mutex_lock(&sim_lock);
	work(st, dur, &it, NULL, &no, &told);
	move_later(p, NULL, n, 1, v);
	pthread_mutex_unlock(&sim_lock);
	if (told)
		tell(&it);
	return api_end(cbid, t0, cudaSuccess);
}

cudaError_t cudaMemsetAsync(void *p, int v, size_t n, cudaStream_t s)
{
	return set(p, v, n, stream_of(s, 0), CUPTI_RUNTIME_TRACE_CBID_cudaMemsetAsync_v3020);
}

cudaError_t cudaMemsetAsync_ptsz(void *p, int v, size_t n, cudaStream_t s)
{
	return set(p, v, n, stream_of(s, 1), CUPTI_RUNTIME_TRACE_CBID_cudaMemsetAsync_ptsz_v7000);
}

cudaError_t cudaMemset(void *p, int v, size_t n)
{
	return set(p, v, n, stream_of(NULL, 0), CUPTI_RUNTIME_TRACE_CBID_cudaMemset_v3020);
}

cudaError_t cudaMemset_ptds(void *p, int v, size_t n)
{
	return set(p, v, n, stream_of(NULL, 1), CUPTI_RUNTIME_TRACE_CBID_cudaMemset_ptds_v7000);
}

/* ---- kernels ---- */

static struct CUkern_st *kernels;

#define ARG_NS UINT64_MAX /* a kernel's duration is its first argument's value */

/* SIMGPU_KERNELS="substr=us,...": the first whose substring is in the name (us "arg": the
 * kernel's first argument, a 64-bit count of ns, gives each launch's duration); else
 * SIMGPU_KERNEL_US */
static uint64_t kernel_ns(const char *name)
{
	const char *spec = getenv("SIMGPU_KERNELS");
	while (spec && *spec) {
		size_t len = strcspn(spec, ",");
		const char *eq = memchr(spec, '=', len);
		if (eq && eq > spec) {
			char sub[256];
			size_t sl = (size_t)(eq - spec) < sizeof sub - 1 ? (size_t)(eq - spec) : sizeof sub - 1;
			memcpy(sub, spec, sl);
			sub[sl] = 0;
			if (strstr(name, sub))
				return strncmp(eq + 1, "arg", 3) == 0 ? ARG_NS : (uint64_t)(strtod(eq + 1, NULL) * 1000);
		}
		spec += len + (spec[len] == ',');
	}
	return (uint64_t)(env_num("SIMGPU_KERNEL_US", 20) * 1000);
}

static struct CUkern_st *kernel_of(const void *host_fun)
{
	pthread_mutex_lock(&sim_lock);
	struct CUkern_st *k = kernels;
	while (k && k->host_fun != host_fun)
		k = k->next;
	pthread_mutex_unlock(&sim_lock);
	return k;
}

void **__cudaRegisterFatBinary(void *fatCubin)
{
	static void *handle;
	return &handle;
}

void __cudaRegisterFatBinaryEnd(void **handle)
{
}

void __cudaUnregisterFatBinary(void **handle)
{
}

char __cudaInitModule(void **handle)
{
	return 1;
}

void __cudaRegisterFunction(void **handle, const char *hostFun, char *deviceFun, const char *deviceName,
			    int thread_limit, uint3 *tid, uint3 *bid, dim3 *bDim, dim3 *gDim, int *wSize)
{
	struct CUkern_st *k = calloc(1, sizeof *k);
	if (!k || !(k->name = strdup(deviceName ? deviceName : "?"))) {
		free(k);
		return;
	}
	k->host_fun = hostFun;
	k->ns = kernel_ns(k->name);
	pthread_mutex_lock(&sim_lock);
	k->next = kernels;
	kernels = k;
	pthread_mutex_unlock(&sim_lock);
}

void __cudaRegisterVar(void **handle, char *hostVar, char *deviceAddress, const char *deviceName, int ext,
		       size_t size, int constant, int global)
{
	/* device variables are the host's own here */
}

/* the <<<>>> configuration, pushed then popped by the launch stub on the same thread */
static __thread struct { dim3 grid, block; size_t shared; cudaStream_t stream; } config;

unsigned __cudaPushCallConfiguration(dim3 gridDim, dim3 blockDim, size_t sharedMem, struct CUstream_st *stream)
{
	config.grid = gridDim;
	config.block = blockDim;
	config.shared = sharedMem;
	config.stream = stream;
	return 0;
}

cudaError_t __cudaPopCallConfiguration(dim3 *gridDim, dim3 *blockDim, size_t *sharedMem, void *stream)
{
	*gridDim = config.grid;
	*blockDim = config.block;
	*sharedMem = config.shared;
	*(cudaStream_t *)stream = config.stream;
	return cudaSuccess;
}

cudaError_t __cudaGetKernel(cudaKernel_t *kernel, const void *hostFun)
{
	struct CUkern_st *k = kernel_of(hostFun);
	if (!kernel || !k)
		return sim_fail(cudaErrorInvalidDeviceFunction);
	*kernel = k;
	return cudaSuccess;
}

void sim_enqueue(struct CUstream_st *st, uint64_t dur, struct simgpu_item *it)
{
	uint64_t no;
	int told;
	pthread_mutex_lock(&sim_lock);
	work(st, dur, it, NULL, &no, &told);
	pthread_mutex_unlock(&sim_lock);
	if (told)
		tell(it);
}

cudaError_t sim_launch(struct CUkern_st *k, dim3 grid, dim3 block, void **args, struct CUstream_st *st)
{
	if (!k || (k->ns == ARG_NS && (!args || !args[0])))
		return sim_fail(cudaErrorInvalidDeviceFunction);
	uint64_t ns = k->ns;
	if (ns == ARG_NS)
		memcpy(&ns, args[0], sizeof ns);
	struct simgpu_item it = { .what = SIMGPU_KERNEL, .stream = st->id, .name = k->name,
				  .grid = { grid.x, grid.y, grid.z }, .block = { block.x, block.y, block.z } };
	if (!sim_captured(st, ns, &it))
		sim_enqueue(st, ns, &it);
	return cudaSuccess;
}

static cudaError_t launch(struct CUkern_st *k, dim3 grid, dim3 block, void **args, struct CUstream_st *st, int cbid)
{
	uint64_t t0 = api_begin();
	return api_end(cbid, t0, sim_launch(k, grid, block, args, st));
}

/* ---- collectives (simgpu.h): the NCCL stand-in's ---- */

/* c queued on st as its kernel it (its correlation: the calling thread's call where 0), enqueued at
 * enq (0: now), placed by the device's thread once what came before it is */
void sim_coll_enqueue(struct CUstream_st *st, struct simgpu_coll *c, const struct simgpu_item *it, uint64_t enq)
{
	struct deferred *d = calloc(1, sizeof *d);
	if (!d) /* (no memory: it never runs, as a failed launch) */
		return;
	*d = (struct deferred){ .what = D_COLL, .st = st, .enq = enq ? enq : now_ns(), .coll = c, .it = *it };
	d->it.stream = st->id;
	d->it.device = st->device;
	if (!d->it.correlation)
		d->it.correlation = correlation;
	d->it.tid = (uint32_t)(uintptr_t)pthread_self();
	pthread_mutex_lock(&sim_lock);
	defer(d);
	pthread_mutex_unlock(&sim_lock);
}

uint32_t simgpu_collective(void *stream, int per_thread, struct simgpu_coll *c)
{
	struct CUstream_st *st = stream_of((cudaStream_t)stream, per_thread);
	driver();
	uint64_t t0 = now_ns();
	/* the launch, as NCCL 2.28 makes it: a driver call, cuLaunchKernelEx (seen on an H200) */
	uint32_t corr = sim_driver_call(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx, t0);
	struct simgpu_item it = { .what = SIMGPU_KERNEL, .stream = st->id, .name = c->name, .grid = { c->grid, 1, 1 },
				  .block = { c->block, 1, 1 }, .correlation = corr };
	/* (captured: the graph keeps c as its node, run anew at each of its launches) */
	if (!sim_captured_coll(st, c, &it))
		sim_coll_enqueue(st, c, &it, t0);
	return corr;
}

/* CUDA 13.0's <<<>>> entry points. The real runtime reports them to CUPTI as cudaLaunchKernel
 * (callback id 211, _ptsz 214), not as cupti_runtime_cbid.h's __cudaLaunchKernel_v13000 (505): on
 * the H100 and the H200 (docs/gpu-runs/h100-2026-11-27-first.tap, check 23) nvcc 13.0's launches were
 * 2004 cudaLaunchKernel_v7000 records and no other, a callback on 211 came for each launch and one
 * on 505 never (h200-2026-11-28-rules.jsonl, h200-2026-11-28-diagnosis.txt) */
cudaError_t __cudaLaunchKernel(cudaKernel_t kernel, dim3 gridDim, dim3 blockDim, void **args, size_t sharedMem,
			       cudaStream_t stream)
{
	return launch(kernel, gridDim, blockDim, args, stream_of(stream, 0), CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000);
}

cudaError_t __cudaLaunchKernel_ptsz(cudaKernel_t kernel, dim3 gridDim, dim3 blockDim, void **args, size_t sharedMem,
				    cudaStream_t stream)
{
	return launch(kernel, gridDim, blockDim, args, stream_of(stream, 1),
		      CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000);
}

cudaError_t cudaLaunchKernel(const void *func, dim3 gridDim, dim3 blockDim, void **args, size_t sharedMem,
			     cudaStream_t stream)
{
	return launch(kernel_of(func), gridDim, blockDim, args, stream_of(stream, 0),
		      CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000);
}

cudaError_t cudaLaunchKernel_ptsz(const void *func, dim3 gridDim, dim3 blockDim, void **args, size_t sharedMem,
				  cudaStream_t stream)
{
	return launch(kernel_of(func), gridDim, blockDim, args, stream_of(stream, 1),
		      CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000);
}

struct CUstream_st *sim_stream_of(cudaStream_t s, int per_thread)
{
	return stream_of(s, per_thread);
}

struct CUkern_st *sim_kernel_of(const void *host_fun)
{
	return kernel_of(host_fun);
}
