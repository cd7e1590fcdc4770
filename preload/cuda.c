/* CUDA runtime: the host side of copies and of the calls that wait for the GPU (cudaMemcpy and
 * cudaMemcpyAsync, stream, event and device synchronize, with their per-thread default stream
 * variants) on a dynamically linked libcudart (PyTorch's wheels, nvcc -cudart shared; nvcc's
 * default static cudart is not seen here, only by CUPTI). A call's recorded time is how long the
 * host was held: a whole copy when it is synchronous or from pageable memory, the enqueue when it
 * is asynchronous; what the GPU did and when comes from CUPTI, never from these host calls.
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
	uint64_t t0 = dsp_now();
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
	uint64_t t0 = dsp_now();
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
	uint64_t t0 = dsp_now();
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
	uint64_t t0 = dsp_now();
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
	uint64_t t0 = dsp_now();
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
	uint64_t t0 = dsp_now();
	cudaError_t rc = real_cudaDeviceSynchronize();
	rec_sync(t, t0, DDPSPY_SYNC_DEVICE, NULL, NULL, rc);
	dsp_leave(t);
	return rc;
}
