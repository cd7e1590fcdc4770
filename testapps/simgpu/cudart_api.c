/* The simulated device's libcudart.so.13, its calls that do no device work of their own (device and
 * error queries, pointer attributes, stream capture state), CUDA graphs, and the launch entry of
 * the driver stand-in (testapps/simgpu/driver.c). A test double, never part of the product. Each
 * call is told to the CUPTI stand-in as a runtime call, as a real CUPTI records every one of them:
 * a PyTorch step on an H200 made 5.1 runtime records a kernel, 3 of them cudaGetDevice
 * (docs/gpu.md).
 *
 * Graphs, as the real runtime runs them: work enqueued on a stream between cudaStreamBeginCapture
 * and cudaStreamEndCapture is recorded into the graph, not run (its launch calls are recorded by
 * CUPTI, their kernels are not); cudaGraphLaunch runs the instantiated graph's work in capture order
 * on its stream, and CUPTI reports each of its kernels as a kernel record that carries the
 * cudaGraphLaunch call's correlation id and the graph's id (on an H200: three kernels of one
 * launch, one correlation id, graphId set; docs/gpu.md). A collective of the NCCL stand-in captured
 * so is run anew at each launch (simgpu.h's replay), its ranks agreeing as at any other. Captures
 * of one stream only (no events across streams), whatever the capture mode. */
#include <cupti_activity.h>
#include <cupti_driver_cbid.h>
#include <cupti_runtime_cbid.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cudart_int.h"

cudaError_t sim_last_error(int clear);
int sim_driver_end(int cbid, uint64_t t0, int rc);

#define TOLD(need, cbid, call)                                                                   \
	do {                                                                                     \
		uint64_t t0_ = sim_api_begin(need);                                              \
		return sim_api_end(CUPTI_RUNTIME_TRACE_CBID_##cbid, t0_, (call));                \
	} while (0)

/* ---- the device and errors ---- */

static cudaError_t device_count(int *n)
{
	if (!n)
		return sim_fail(cudaErrorInvalidValue);
	*n = sim_devices();
	return cudaSuccess;
}

cudaError_t cudaGetDeviceCount(int *n)
{
	TOLD(1, cudaGetDeviceCount_v3020, device_count(n));
}

static cudaError_t get_device(int *d)
{
	if (!d)
		return sim_fail(cudaErrorInvalidValue);
	*d = *sim_device();
	return cudaSuccess;
}

cudaError_t cudaGetDevice(int *d)
{
	TOLD(0, cudaGetDevice_v3020, get_device(d));
}

static cudaError_t set_device(int d)
{
	if (d < 0 || d >= sim_devices())
		return sim_fail(cudaErrorInvalidDevice);
	*sim_device() = d;
	return cudaSuccess;
}

cudaError_t cudaSetDevice(int d)
{
	TOLD(1, cudaSetDevice_v3020, set_device(d));
}

cudaError_t cudaGetLastError(void)
{
	TOLD(0, cudaGetLastError_v3020, sim_last_error(1));
}

cudaError_t cudaPeekAtLastError(void)
{
	TOLD(0, cudaPeekAtLastError_v3020, sim_last_error(0));
}

const char *cudaGetErrorName(cudaError_t e)
{
	static __thread char buf[32];
	snprintf(buf, sizeof buf, "cudaError_%d", (int)e);
	return e == cudaSuccess ? "cudaSuccess" : buf;
}

const char *cudaGetErrorString(cudaError_t e)
{
	return e == cudaSuccess ? "no error" : "simulated device error";
}

static cudaError_t pointer_attributes(struct cudaPointerAttributes *a, const void *p)
{
	if (!a)
		return sim_fail(cudaErrorInvalidValue);
	int kind = sim_kind_of(p);
	memset(a, 0, sizeof *a);
	a->type = kind == 1 ? cudaMemoryTypeDevice : kind == 2 ? cudaMemoryTypeHost : cudaMemoryTypeUnregistered;
	a->device = 0;
	a->devicePointer = kind ? (void *)p : NULL;
	a->hostPointer = kind == 2 ? (void *)p : NULL;
	return cudaSuccess;
}

cudaError_t cudaPointerGetAttributes(struct cudaPointerAttributes *a, const void *p)
{
	TOLD(1, cudaPointerGetAttributes_v4000, pointer_attributes(a, p));
}

/* ---- stream capture and graphs ---- */

struct sim_node {
	uint64_t dur;
	struct simgpu_item it;
	struct simgpu_coll *coll; /* a collective's node: its template (simgpu.h's replay), else NULL */
};

struct sim_capture {
	struct sim_node *n;
	size_t len, cap;
};

struct CUgraph_st {
	struct sim_node *n;
	size_t len;
};

struct CUgraphExec_st {
	struct sim_node *n;
	size_t len;
	uint32_t id;  /* CUPTI's graphId of its kernels */
};

static __thread enum cudaStreamCaptureMode capture_mode = cudaStreamCaptureModeGlobal;
static uint32_t graph_ids;

static int captured(struct CUstream_st *st, uint64_t dur, const struct simgpu_item *it, struct simgpu_coll *coll)
{
	pthread_mutex_lock(&sim_lock);
	struct sim_capture *c = st->capture;
	int took = 0;
	if (c) {
		if (c->len == c->cap) {
			size_t cap = c->cap ? c->cap * 2 : 16;
			struct sim_node *n = realloc(c->n, cap * sizeof *n);
			if (n)
				c->n = n, c->cap = cap;
		}
		if (c->len < c->cap)
			c->n[c->len++] = (struct sim_node){ dur, *it, coll };
		took = 1; /* (no memory: the node is lost, as its launch failed) */
	}
	pthread_mutex_unlock(&sim_lock);
	return took;
}

int sim_captured(struct CUstream_st *st, uint64_t dur, const struct simgpu_item *it)
{
	return captured(st, dur, it, NULL);
}

/* (the template stays as long as the program runs: a graph and each of its instances name it) */
int sim_captured_coll(struct CUstream_st *st, struct simgpu_coll *c, const struct simgpu_item *it)
{
	return captured(st, 0, it, c);
}

static cudaError_t begin_capture(struct CUstream_st *st)
{
	if (!st->id || st->id == 7) /* the legacy default streams cannot be captured */
		return sim_fail(cudaErrorStreamCaptureUnsupported);
	struct sim_capture *c = calloc(1, sizeof *c);
	if (!c)
		return sim_fail(cudaErrorMemoryAllocation);
	pthread_mutex_lock(&sim_lock);
	cudaError_t rc = st->capture ? cudaErrorIllegalState : cudaSuccess;
	if (!st->capture)
		st->capture = c, c = NULL;
	pthread_mutex_unlock(&sim_lock);
	free(c);
	return rc == cudaSuccess ? rc : sim_fail(rc);
}

cudaError_t cudaStreamBeginCapture(cudaStream_t s, enum cudaStreamCaptureMode mode)
{
	TOLD(1, cudaStreamBeginCapture_v10000, begin_capture(sim_stream_of(s, 0)));
}

cudaError_t cudaStreamBeginCapture_ptsz(cudaStream_t s, enum cudaStreamCaptureMode mode)
{
	TOLD(1, cudaStreamBeginCapture_ptsz_v10000, begin_capture(sim_stream_of(s, 1)));
}

static cudaError_t end_capture(struct CUstream_st *st, cudaGraph_t *g)
{
	if (!g)
		return sim_fail(cudaErrorInvalidValue);
	pthread_mutex_lock(&sim_lock);
	struct sim_capture *c = st->capture;
	st->capture = NULL;
	pthread_mutex_unlock(&sim_lock);
	if (!c)
		return sim_fail(cudaErrorIllegalState);
	*g = malloc(sizeof **g);
	if (!*g) {
		free(c->n);
		free(c);
		return sim_fail(cudaErrorMemoryAllocation);
	}
	**g = (struct CUgraph_st){ c->n, c->len };
	free(c);
	return cudaSuccess;
}

cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t *g)
{
	TOLD(1, cudaStreamEndCapture_v10000, end_capture(sim_stream_of(s, 0), g));
}

cudaError_t cudaStreamEndCapture_ptsz(cudaStream_t s, cudaGraph_t *g)
{
	TOLD(1, cudaStreamEndCapture_ptsz_v10000, end_capture(sim_stream_of(s, 1), g));
}

static cudaError_t is_capturing(struct CUstream_st *st, enum cudaStreamCaptureStatus *status)
{
	if (!status)
		return sim_fail(cudaErrorInvalidValue);
	pthread_mutex_lock(&sim_lock);
	*status = st->capture ? cudaStreamCaptureStatusActive : cudaStreamCaptureStatusNone;
	pthread_mutex_unlock(&sim_lock);
	return cudaSuccess;
}

int simgpu_capturing(void *stream)
{
	enum cudaStreamCaptureStatus st;
	return is_capturing(sim_stream_of((cudaStream_t)stream, 0), &st) == cudaSuccess && st == cudaStreamCaptureStatusActive;
}

cudaError_t cudaStreamIsCapturing(cudaStream_t s, enum cudaStreamCaptureStatus *status)
{
	TOLD(1, cudaStreamIsCapturing_v10000, is_capturing(sim_stream_of(s, 0), status));
}

cudaError_t cudaStreamIsCapturing_ptsz(cudaStream_t s, enum cudaStreamCaptureStatus *status)
{
	TOLD(1, cudaStreamIsCapturing_ptsz_v10000, is_capturing(sim_stream_of(s, 1), status));
}

static cudaError_t exchange_mode(enum cudaStreamCaptureMode *mode)
{
	if (!mode)
		return sim_fail(cudaErrorInvalidValue);
	enum cudaStreamCaptureMode old = capture_mode;
	capture_mode = *mode;
	*mode = old;
	return cudaSuccess;
}

cudaError_t cudaThreadExchangeStreamCaptureMode(enum cudaStreamCaptureMode *mode)
{
	TOLD(0, cudaThreadExchangeStreamCaptureMode_v10010, exchange_mode(mode));
}

static cudaError_t instantiate(cudaGraphExec_t *x, cudaGraph_t g)
{
	if (!x || !g)
		return sim_fail(cudaErrorInvalidValue);
	struct sim_node *n = g->len ? malloc(g->len * sizeof *n) : NULL;
	if ((g->len && !n) || !(*x = malloc(sizeof **x))) {
		free(n);
		return sim_fail(cudaErrorMemoryAllocation);
	}
	if (g->len)
		memcpy(n, g->n, g->len * sizeof *n);
	**x = (struct CUgraphExec_st){ n, g->len, __atomic_add_fetch(&graph_ids, 1, __ATOMIC_RELAXED) };
	return cudaSuccess;
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t *x, cudaGraph_t g, unsigned long long flags)
{
	TOLD(1, cudaGraphInstantiate_v12000, instantiate(x, g));
}

/* the graph's work on st in capture order, told with this call's correlation id and its graph's */
static cudaError_t graph_launch(cudaGraphExec_t x, struct CUstream_st *st)
{
	if (!x)
		return sim_fail(cudaErrorInvalidValue);
	for (size_t i = 0; i < x->len; i++) {
		struct simgpu_item it = x->n[i].it;
		it.stream = st->id;
		it.graph = x->id;
		it.graph_node = i + 1;
		if (x->n[i].coll) { /* (a collective: this launch's own, after what came before it) */
			struct simgpu_coll *c = x->n[i].coll->replay ? x->n[i].coll->replay(x->n[i].coll) : NULL;
			it.correlation = 0;
			if (c)
				sim_coll_enqueue(st, c, &it, 0);
			continue;
		}
		sim_enqueue(st, x->n[i].dur, &it);
	}
	return cudaSuccess;
}

cudaError_t cudaGraphLaunch(cudaGraphExec_t x, cudaStream_t s)
{
	TOLD(1, cudaGraphLaunch_v10000, graph_launch(x, sim_stream_of(s, 0)));
}

cudaError_t cudaGraphLaunch_ptsz(cudaGraphExec_t x, cudaStream_t s)
{
	TOLD(1, cudaGraphLaunch_ptsz_v10000, graph_launch(x, sim_stream_of(s, 1)));
}

static cudaError_t exec_destroy(cudaGraphExec_t x)
{
	if (x)
		free(x->n);
	free(x);
	return cudaSuccess;
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t x)
{
	TOLD(1, cudaGraphExecDestroy_v10000, exec_destroy(x));
}

static cudaError_t graph_destroy(cudaGraph_t g)
{
	if (g)
		free(g->n);
	free(g);
	return cudaSuccess;
}

cudaError_t cudaGraphDestroy(cudaGraph_t g)
{
	TOLD(1, cudaGraphDestroy_v10000, graph_destroy(g));
}

/* ---- kernels as functions, for the driver ---- */

static cudaError_t func_by_symbol(cudaFunction_t *f, const void *sym)
{
	struct CUkern_st *k = f ? sim_kernel_of(sym) : NULL;
	if (!k)
		return sim_fail(cudaErrorInvalidDeviceFunction);
	*f = (cudaFunction_t)(void *)k;
	return cudaSuccess;
}

cudaError_t cudaGetFuncBySymbol(cudaFunction_t *f, const void *sym)
{
	TOLD(1, cudaGetFuncBySymbol_v11000, func_by_symbol(f, sym));
}

/* The driver stand-in's cuLaunchKernelEx (as Triton calls it, found through cuGetProcAddress): a
 * kernel from cudaGetFuncBySymbol launched on stream, told as a driver call (cbid) whose
 * correlation id the kernel carries. Returns a CUresult: 0, or 400 (CUDA_ERROR_INVALID_HANDLE). */
int simgpu_driver_launch(void *func, const unsigned grid[3], const unsigned block[3], void **args, void *stream, int cbid)
{
	uint64_t t0 = sim_api_begin(1);
	dim3 g = { grid[0], grid[1], grid[2] }, b = { block[0], block[1], block[2] };
	cudaError_t rc = func ? sim_launch(func, g, b, args, sim_stream_of(stream, 0)) : cudaErrorInvalidResourceHandle;
	return sim_driver_end(cbid, t0, rc == cudaSuccess ? 0 : 400);
}
