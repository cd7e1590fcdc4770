/* Inside the simulated device's libcudart.so.13 (testapps/simgpu/): what cudart.c (the device: time
 * model, streams, memory, copies, kernels) shares with cudart_api.c (the calls that do no device
 * work of their own, stream capture and CUDA graphs, and the driver stand-in's launch entry). Not
 * exported: the library's version script keeps only cuda*, __cuda* and simgpu_*. */
#ifndef SIMGPU_CUDART_INT_H
#define SIMGPU_CUDART_INT_H

#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdint.h>

#include "simgpu.h"

struct sim_capture;

struct CUstream_st {
	uint64_t busy_until;  /* when the work enqueued so far ends */
	int blocking;         /* synchronizes with the legacy default stream */
	uint32_t id;          /* CUPTI's stream id: unique in its device's context (every legacy stream is 7) */
	int device;           /* its device (SIMGPU_DEVICES of them; each its own context, CUPTI's device + 1) */
	struct sim_capture *capture; /* capturing into a graph (cudaStreamBeginCapture): work is recorded, not run */
	struct CUstream_st *next;
};

struct CUkern_st {
	const char *host_fun;   /* what the program calls it by */
	char *name;             /* its device name (mangled) */
	uint64_t ns;            /* its modelled duration */
	struct CUkern_st *next;
};

extern pthread_mutex_t sim_lock;

cudaError_t sim_fail(cudaError_t e);
uint64_t sim_now(void);
/* a runtime call begins: its correlation id and start; driver: the call needs the device (cuInit) */
uint64_t sim_api_begin(int driver);
/* it ends: told to CUPTI with its result, which it returns */
cudaError_t sim_api_end(int cbid, uint64_t t0, cudaError_t rc);
/* a driver API call of the calling thread, from t0 until now (its own correlation id) */
uint32_t sim_driver_call(int cbid, uint64_t t0);
/* the calling thread's item, told in the call it is in (its correlation id, CUPTI's thread id) */
void sim_tell(struct simgpu_item *it);
struct CUstream_st *sim_stream_of(cudaStream_t s, int per_thread);
struct CUkern_st *sim_kernel_of(const void *host_fun);
/* work of dur ns on st, told as it once placed, as enqueued now by the calling thread's call */
void sim_enqueue(struct CUstream_st *st, uint64_t dur, struct simgpu_item *it);
/* a kernel launch on st: enqueued (or captured), told with the calling thread's call */
cudaError_t sim_launch(struct CUkern_st *k, dim3 grid, dim3 block, void **args, struct CUstream_st *st);
/* where st is capturing (cudaStreamBeginCapture): the work goes into its graph instead, 1 */
int sim_captured(struct CUstream_st *st, uint64_t dur, const struct simgpu_item *it);
/* a collective (simgpu.h) on st: captured into its graph where st is capturing, 1 (the graph owns
 * c then); and one queued on st, as its kernel it, enqueued at enq (0: now) */
int sim_captured_coll(struct CUstream_st *st, struct simgpu_coll *c, const struct simgpu_item *it);
void sim_coll_enqueue(struct CUstream_st *st, struct simgpu_coll *c, const struct simgpu_item *it, uint64_t enq);
/* the memory kind of an address: 1 device, 2 pinned, 0 pageable (cudart.c's MEM_*) */
int sim_kind_of(const void *p);
/* the calling thread's device (cudaSetDevice), and how many there are (SIMGPU_DEVICES, 1) */
int *sim_device(void);
int sim_devices(void);

#endif
