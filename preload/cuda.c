/* CUDA runtime: the host side of copies and of the calls that wait for the GPU (cudaMemcpy,
 * cudaMemcpyAsync, cudaMemcpy2D, cudaMemcpy2DAsync, cudaMemcpyPeer, cudaMemcpyPeerAsync; stream,
 * event and device synchronize; with their per-thread default stream variants) on a dynamically
 * linked libcudart (PyTorch's wheels, nvcc -cudart shared; nvcc's default static cudart is not
 * seen here, only by CUPTI). Waits that are not called so: cudaFree, cudaFreeHost and
 * cudaHostUnregister ("this API may perform implicit synchronization", cuda_runtime_api.h),
 * cudaHostAlloc, cudaMallocHost and cudaHostRegister (pinning host memory holds the host, and is
 * one of the programming guide's implicit synchronizations), and polling: a run of
 * cudaEventQuery or cudaStreamQuery of unfinished work, each no more than 20 us after the last, is
 * one wait from the first query to the one that found it done (or the last of the run). A call's
 * recorded time is how long the host was held: a whole copy when it is synchronous or from
 * pageable memory, the enqueue when it is asynchronous; what the GPU did and when comes from CUPTI,
 * never from these host calls.
 * Compiled when CUDA's headers are found; nothing links against CUDA: the real functions are
 * looked up in the program's libcudart, and a program without one never calls these. */
#include "internal.h"

#include <cuda_runtime_api.h>

_Static_assert((int)cudaMemcpyHostToHost == DDPSPY_DIR_H2H && (int)cudaMemcpyHostToDevice == DDPSPY_DIR_H2D &&
		       (int)cudaMemcpyDeviceToHost == DDPSPY_DIR_D2H && (int)cudaMemcpyDeviceToDevice == DDPSPY_DIR_D2D &&
		       (int)cudaMemcpyDefault == DDPSPY_DIR_DEFAULT,
	       "format.h's copy directions are cudaMemcpyKind's values");

/* the per-thread default stream's entry points (cuda_runtime_api.h declares them only for
 * programs built with it) */
cudaError_t cudaMemcpy_ptds(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind);
cudaError_t cudaMemcpyAsync_ptsz(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind, cudaStream_t s);
cudaError_t cudaStreamSynchronize_ptsz(cudaStream_t s);
cudaError_t cudaStreamQuery_ptsz(cudaStream_t s);
cudaError_t cudaMemcpy2D_ptds(void *, size_t, const void *, size_t, size_t, size_t, enum cudaMemcpyKind);
cudaError_t cudaMemcpy2DAsync_ptsz(void *, size_t, const void *, size_t, size_t, size_t, enum cudaMemcpyKind,
				   cudaStream_t);

/* the wrappers below are the library's exports (exports.map); helpers are static */
#pragma GCC visibility push(default)

DSP_REAL(cudaError_t, cudaMemcpy, (void *, const void *, size_t, enum cudaMemcpyKind), "libcudart")
DSP_REAL(cudaError_t, cudaMemcpy_ptds, (void *, const void *, size_t, enum cudaMemcpyKind), "libcudart")
DSP_REAL(cudaError_t, cudaMemcpyAsync, (void *, const void *, size_t, enum cudaMemcpyKind, cudaStream_t), "libcudart")
DSP_REAL(cudaError_t, cudaMemcpyAsync_ptsz, (void *, const void *, size_t, enum cudaMemcpyKind, cudaStream_t),
	 "libcudart")
DSP_REAL(cudaError_t, cudaStreamSynchronize, (cudaStream_t), "libcudart")
DSP_REAL(cudaError_t, cudaStreamSynchronize_ptsz, (cudaStream_t), "libcudart")
DSP_REAL(cudaError_t, cudaEventSynchronize, (cudaEvent_t), "libcudart")
DSP_REAL(cudaError_t, cudaDeviceSynchronize, (void), "libcudart")
DSP_REAL(cudaError_t, cudaFree, (void *), "libcudart")
DSP_REAL(cudaError_t, cudaFreeHost, (void *), "libcudart")
DSP_REAL(cudaError_t, cudaHostUnregister, (void *), "libcudart")
DSP_REAL(cudaError_t, cudaHostAlloc, (void **, size_t, unsigned int), "libcudart")
DSP_REAL(cudaError_t, cudaMallocHost, (void **, size_t), "libcudart")
DSP_REAL(cudaError_t, cudaHostRegister, (void *, size_t, unsigned int), "libcudart")
DSP_REAL(cudaError_t, cudaMemcpy2D, (void *, size_t, const void *, size_t, size_t, size_t, enum cudaMemcpyKind),
	 "libcudart")
DSP_REAL(cudaError_t, cudaMemcpy2D_ptds, (void *, size_t, const void *, size_t, size_t, size_t, enum cudaMemcpyKind),
	 "libcudart")
DSP_REAL(cudaError_t, cudaMemcpy2DAsync, (void *, size_t, const void *, size_t, size_t, size_t, enum cudaMemcpyKind,
					  cudaStream_t), "libcudart")
DSP_REAL(cudaError_t, cudaMemcpy2DAsync_ptsz, (void *, size_t, const void *, size_t, size_t, size_t,
					       enum cudaMemcpyKind, cudaStream_t), "libcudart")
DSP_REAL(cudaError_t, cudaMemcpyPeer, (void *, int, const void *, int, size_t), "libcudart")
DSP_REAL(cudaError_t, cudaMemcpyPeerAsync, (void *, int, const void *, int, size_t, cudaStream_t), "libcudart")
DSP_REAL(cudaError_t, cudaEventQuery, (cudaEvent_t), "libcudart")
DSP_REAL(cudaError_t, cudaStreamQuery, (cudaStream_t), "libcudart")
DSP_REAL(cudaError_t, cudaStreamQuery_ptsz, (cudaStream_t), "libcudart")

/* the stream a per-thread variant's 0 means */
static cudaStream_t per_thread(cudaStream_t s)
{
	return s ? s : cudaStreamPerThread;
}

static void rec_copy(struct dsp_tls *t, uint64_t t0, size_t n, enum cudaMemcpyKind dir, cudaStream_t s, int async,
		     cudaError_t rc)
{
	uint64_t t1 = dsp_now();
	int64_t a[5] = {(int64_t)n, dir, (int64_t)(uintptr_t)s, async, rc};
	dsp_emit_wait(t, DDPSPY_EV_CUDA_MEMCPY, t0, t1, 5, a);
}

static void rec_sync(struct dsp_tls *t, uint64_t t0, int what, cudaStream_t s, cudaEvent_t e, cudaError_t rc)
{
	uint64_t t1 = dsp_now();
	int64_t a[4] = {what, (int64_t)(uintptr_t)s, (int64_t)(uintptr_t)e, rc};
	dsp_emit_wait(t, DDPSPY_EV_CUDA_SYNC, t0, t1, 4, a);
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind)
{
	if (!get_cudaMemcpy())
		return cudaErrorSymbolNotFound;
	struct dsp_tls *t = &dsp_tls;
	if (!dsp_enter(t))
		return real_cudaMemcpy(dst, src, n, kind);
	uint64_t t0 = DSP_CALL(t, DDPSPY_EV_CUDA_MEMCPY, -1, 5, (int64_t)n, kind, 0, 0, -1);
	cudaError_t rc = real_cudaMemcpy(dst, src, n, kind);
	rec_copy(t, t0, n, kind, NULL, 0, rc);
	dsp_leave(t);
	return rc;
}

cudaError_t cudaMemcpy_ptds(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind)
{
	if (!get_cudaMemcpy_ptds())
		return cudaErrorSymbolNotFound;
	struct dsp_tls *t = &dsp_tls;
	if (!dsp_enter(t))
		return real_cudaMemcpy_ptds(dst, src, n, kind);
	uint64_t t0 = DSP_CALL(t, DDPSPY_EV_CUDA_MEMCPY, -1, 5, (int64_t)n, kind, (int64_t)(uintptr_t)cudaStreamPerThread, 0, -1);
	cudaError_t rc = real_cudaMemcpy_ptds(dst, src, n, kind);
	rec_copy(t, t0, n, kind, cudaStreamPerThread, 0, rc);
	dsp_leave(t);
	return rc;
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind, cudaStream_t s)
{
	if (!get_cudaMemcpyAsync())
		return cudaErrorSymbolNotFound;
	struct dsp_tls *t = &dsp_tls;
	if (!dsp_enter(t))
		return real_cudaMemcpyAsync(dst, src, n, kind, s);
	uint64_t t0 = dsp_now();
	cudaError_t rc = real_cudaMemcpyAsync(dst, src, n, kind, s);
	rec_copy(t, t0, n, kind, s, 1, rc);
	dsp_leave(t);
	return rc;
}

cudaError_t cudaMemcpyAsync_ptsz(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind, cudaStream_t s)
{
	if (!get_cudaMemcpyAsync_ptsz())
		return cudaErrorSymbolNotFound;
	struct dsp_tls *t = &dsp_tls;
	if (!dsp_enter(t))
		return real_cudaMemcpyAsync_ptsz(dst, src, n, kind, s);
	uint64_t t0 = dsp_now();
	cudaError_t rc = real_cudaMemcpyAsync_ptsz(dst, src, n, kind, s);
	rec_copy(t, t0, n, kind, per_thread(s), 1, rc);
	dsp_leave(t);
	return rc;
}

cudaError_t cudaStreamSynchronize(cudaStream_t s)
{
	if (!get_cudaStreamSynchronize())
		return cudaErrorSymbolNotFound;
	struct dsp_tls *t = &dsp_tls;
	if (!dsp_enter(t))
		return real_cudaStreamSynchronize(s);
	uint64_t t0 = DSP_CALL(t, DDPSPY_EV_CUDA_SYNC, -1, 4, DDPSPY_SYNC_STREAM, (int64_t)(uintptr_t)s, 0, -1);
	cudaError_t rc = real_cudaStreamSynchronize(s);
	rec_sync(t, t0, DDPSPY_SYNC_STREAM, s, NULL, rc);
	dsp_leave(t);
	return rc;
}

cudaError_t cudaStreamSynchronize_ptsz(cudaStream_t s)
{
	if (!get_cudaStreamSynchronize_ptsz())
		return cudaErrorSymbolNotFound;
	struct dsp_tls *t = &dsp_tls;
	if (!dsp_enter(t))
		return real_cudaStreamSynchronize_ptsz(s);
	uint64_t t0 = DSP_CALL(t, DDPSPY_EV_CUDA_SYNC, -1, 4, DDPSPY_SYNC_STREAM, (int64_t)(uintptr_t)per_thread(s), 0, -1);
	cudaError_t rc = real_cudaStreamSynchronize_ptsz(s);
	rec_sync(t, t0, DDPSPY_SYNC_STREAM, per_thread(s), NULL, rc);
	dsp_leave(t);
	return rc;
}

cudaError_t cudaEventSynchronize(cudaEvent_t e)
{
	if (!get_cudaEventSynchronize())
		return cudaErrorSymbolNotFound;
	struct dsp_tls *t = &dsp_tls;
	if (!dsp_enter(t))
		return real_cudaEventSynchronize(e);
	uint64_t t0 = DSP_CALL(t, DDPSPY_EV_CUDA_SYNC, -1, 4, DDPSPY_SYNC_EVENT, 0, (int64_t)(uintptr_t)e, -1);
	cudaError_t rc = real_cudaEventSynchronize(e);
	rec_sync(t, t0, DDPSPY_SYNC_EVENT, NULL, e, rc);
	dsp_leave(t);
	return rc;
}

cudaError_t cudaDeviceSynchronize(void)
{
	if (!get_cudaDeviceSynchronize())
		return cudaErrorSymbolNotFound;
	struct dsp_tls *t = &dsp_tls;
	if (!dsp_enter(t))
		return real_cudaDeviceSynchronize();
	uint64_t t0 = DSP_CALL(t, DDPSPY_EV_CUDA_SYNC, -1, 4, DDPSPY_SYNC_DEVICE, 0, 0, -1);
	cudaError_t rc = real_cudaDeviceSynchronize();
	rec_sync(t, t0, DDPSPY_SYNC_DEVICE, NULL, NULL, rc);
	dsp_leave(t);
	return rc;
}

/* ---- waits that are not called so ---- */

/* name(params), the call real_name(args) from start (dsp_now(), or DSP_CALL for a call that can
 * block), then record (t, t0 and rc in scope) */
#define WRAP(name, params, args, start, record)                                              \
	cudaError_t name params                                                              \
	{                                                                                    \
		if (!get_##name())                                                           \
			return cudaErrorSymbolNotFound;                                      \
		struct dsp_tls *t = &dsp_tls;                                                \
		if (!dsp_enter(t))                                                           \
			return real_##name args;                                             \
		uint64_t t0 = start;                                                         \
		cudaError_t rc = real_##name args;                                           \
		record;                                                                      \
		dsp_leave(t);                                                                \
		return rc;                                                                   \
	}

/* name(params) holds the host and may wait for the device: recorded as a cuda_sync of what */
#define HELD(name, params, args, what)                                                       \
	WRAP(name, params, args, DSP_CALL(t, DDPSPY_EV_CUDA_SYNC, -1, 4, what, 0, 0, -1),           \
	     rec_sync(t, t0, what, NULL, NULL, rc))

HELD(cudaFree, (void *p), (p), DDPSPY_SYNC_FREE)
HELD(cudaFreeHost, (void *p), (p), DDPSPY_SYNC_FREE)
HELD(cudaHostUnregister, (void *p), (p), DDPSPY_SYNC_FREE)
HELD(cudaHostAlloc, (void **p, size_t n, unsigned int flags), (p, n, flags), DDPSPY_SYNC_PIN)
HELD(cudaMallocHost, (void **p, size_t n), (p, n), DDPSPY_SYNC_PIN)
HELD(cudaHostRegister, (void *p, size_t n, unsigned int flags), (p, n, flags), DDPSPY_SYNC_PIN)

/* copies of other shapes: their bytes, recorded as cudaMemcpy's */
#define COPY(name, params, args, bytes, dir, stream, async)                                  \
	WRAP(name, params, args,                                                             \
	     DSP_CALL(t, DDPSPY_EV_CUDA_MEMCPY, -1, 5, (int64_t)(bytes), dir, (int64_t)(uintptr_t)(stream), async, -1), \
	     rec_copy(t, t0, bytes, dir, stream, async, rc))

#define P2D (void *d, size_t dp, const void *s, size_t sp, size_t w, size_t h, enum cudaMemcpyKind k)
#define P2DA (void *d, size_t dp, const void *s, size_t sp, size_t w, size_t h, enum cudaMemcpyKind k, cudaStream_t st)
COPY(cudaMemcpy2D, P2D, (d, dp, s, sp, w, h, k), w * h, k, NULL, 0)
COPY(cudaMemcpy2D_ptds, P2D, (d, dp, s, sp, w, h, k), w * h, k, cudaStreamPerThread, 0)
COPY(cudaMemcpy2DAsync, P2DA, (d, dp, s, sp, w, h, k, st), w * h, k, st, 1)
COPY(cudaMemcpy2DAsync_ptsz, P2DA, (d, dp, s, sp, w, h, k, st), w * h, k, per_thread(st), 1)
/* (asynchronous to the host, cuda_runtime_api.h says, but serialized with the device's work: a
 * call that held the host counts as a wait, as an asynchronous copy's does) */
COPY(cudaMemcpyPeer, (void *d, int dd, const void *s, int sd, size_t n), (d, dd, s, sd, n), n, cudaMemcpyDeviceToDevice,
     NULL, 1)
COPY(cudaMemcpyPeerAsync, (void *d, int dd, const void *s, int sd, size_t n, cudaStream_t st), (d, dd, s, sd, n, st), n,
     cudaMemcpyDeviceToDevice, st, 1)

/* A query: nothing recorded but a run of them that found the work unfinished, each within 20 us
 * (twice the poll threshold) of the last: a wait from the first's start to the end of the one that
 * found it done, or of the run's last when it stops before (the thread went on to other work). */
/* the run ends at t1: one wait from its first query's start, of the stream and event queried */
static void poll_end(struct dsp_tls *t, uint64_t t1, cudaError_t rc, uintptr_t s, uintptr_t e)
{
	uint64_t a = t->poll_t0;
	t->poll_t0 = 0;
	t->at_exit = NULL;
	int64_t args[4] = {DDPSPY_SYNC_POLL, (int64_t)s, (int64_t)e, rc};
	dsp_emit_wait(t, DDPSPY_EV_CUDA_SYNC, a, t1, 4, args);
}

/* a run still going when its thread exits or the process ends: a wait to its last query */
static void poll_given_up(struct dsp_tls *t)
{
	poll_end(t, t->poll_t1, cudaErrorNotReady, t->poll_s, t->poll_e);
}

static void polled(struct dsp_tls *t, uint64_t t0, uint64_t t1, cudaError_t rc, cudaStream_t s, cudaEvent_t e)
{
	if (t->poll_t0 && t0 - t->poll_t1 > 2 * dsp_poll_ticks) /* a run given up: a wait to its last */
		poll_given_up(t);
	if (rc == cudaErrorNotReady) {
		if (!t->poll_t0) {
			t->poll_t0 = t0;
			t->at_exit = poll_given_up;
		}
		t->poll_t1 = t1;
		t->poll_s = (uintptr_t)s;
		t->poll_e = (uintptr_t)e;
	} else if (t->poll_t0) {
		poll_end(t, t1, rc, (uintptr_t)s, (uintptr_t)e);
	}
}

#define QUERY(name, type, s, e) WRAP(name, (type x), (x), dsp_now(), polled(t, t0, dsp_now(), rc, s, e))

QUERY(cudaEventQuery, cudaEvent_t, NULL, x)
QUERY(cudaStreamQuery, cudaStream_t, x, NULL)
QUERY(cudaStreamQuery_ptsz, cudaStream_t, per_thread(x), NULL)
