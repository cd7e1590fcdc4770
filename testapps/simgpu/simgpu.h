/* What the simulated device's libcudart.so.13 tells its libcupti.so.13 (testapps/simgpu/): each
 * runtime API call and each piece of device work, with modelled times. The CUPTI stand-in finds
 * simgpu_observe in the program's cudart with dlsym(RTLD_DEFAULT) when a kind is enabled. */
#ifndef SIMGPU_H
#define SIMGPU_H

#include <stdint.h>

enum simgpu_what { SIMGPU_API, SIMGPU_KERNEL, SIMGPU_MEMCPY, SIMGPU_MEMSET, SIMGPU_SYNC };
enum simgpu_mem { SIMGPU_PAGEABLE, SIMGPU_DEVICE, SIMGPU_PINNED };

struct simgpu_item {
	int what;               /* enum simgpu_what */
	uint64_t start, end;    /* CLOCK_MONOTONIC ns; for SIMGPU_API and SIMGPU_SYNC, host times */
	uint32_t correlation;   /* the runtime API call's; device work carries its launching call's */
	uint32_t stream;        /* stream id (device work, stream synchronization) */
	int device;             /* device work: its device (CUPTI's contextId is device + 1) */
	uint32_t tid;           /* the host thread (API, sync): CUPTI's id of it, the low 32 bits of its pthread_t
				 * (an API item is told on that thread) */
	int cbid;               /* API: CUPTI's runtime callback id */
	int ret;                /* API: the call's cudaError_t (a driver call's CUresult); SYNC: its CUresult */
	uint64_t bytes;         /* copies and sets */
	int copy_kind;          /* copies: cudaMemcpyKind, resolved (never cudaMemcpyDefault) */
	int src, dst;           /* copies: enum simgpu_mem of each side */
	int async;              /* copies: an Async call */
	const char *name;       /* kernels: the device name, valid as long as the program runs */
	uint32_t grid[3], block[3];
	int sync;               /* SIMGPU_SYNC: CUpti_ActivitySynchronizationType */
	int driver;             /* SIMGPU_API: a driver API call (cbid: CUPTI's driver callback id) */
	uint32_t graph;         /* device work of a CUDA graph's launch: the graph's id, and its node's */
	uint64_t graph_node;
};

/* Sets the function every item is handed to (NULL: none): from the thread that made it, or, for
 * work placed after a collective, from the simulated device's own thread once it is placed. */
void simgpu_observe(void (*fn)(const struct simgpu_item *));

/* A collective (the NCCL stand-in's, testapps/simgpu/nccl.c): device work whose start every rank
 * must agree on, so that its end, and that of everything after it on its stream, stays unknown
 * until every rank has enqueued it. The host is never held at enqueue: work placed after a
 * collective waits in order for the simulated device's own thread, which places it once the
 * collective is; what waits for the device (synchronize calls, synchronous copies, events) waits
 * for that too. */
struct simgpu_coll {
	/* From the device's thread, once: local is when this rank's stream could start it; returns
	 * when it starts (the latest rank's), waiting as long as that takes. */
	uint64_t (*start)(struct simgpu_coll *c, uint64_t local);
	void (*done)(struct simgpu_coll *c); /* afterwards: frees it */
	uint64_t dur;                        /* ns, from its start */
	const char *name;                    /* its kernel's name */
	uint32_t grid, block;
	/* Captured into a CUDA graph (its stream capturing): c is kept as the graph's node and never
	 * run; at each launch of the graph, on the launching thread, the collective that launch runs
	 * (NULL: none, as one that cannot be captured). */
	struct simgpu_coll *(*replay)(struct simgpu_coll *c);
};

/* Enqueues c on stream (per_thread: 0 means the calling thread's default stream). Tells a driver
 * launch call (cuLaunchKernel, as NCCL launches) at once and the kernel once placed, both with
 * the returned correlation id. Where the stream is capturing, c becomes a node of its graph
 * (replay, above); its kernels then carry the graph launch's correlation id and the graph's. */
uint32_t simgpu_collective(void *stream, int per_thread, struct simgpu_coll *c);

/* Whether stream (0: the legacy default) is capturing into a graph, 1; told to no one (the NCCL
 * stand-in asks as NCCL asks cudaStreamGetCaptureInfo, inside its own static cudart). */
int simgpu_capturing(void *stream);

/* The driver stand-in's launch (cuLaunchKernelEx): func from cudaGetFuncBySymbol, told as the
 * driver call cbid; returns a CUresult. */
int simgpu_driver_launch(void *func, const unsigned grid[3], const unsigned block[3], void **args, void *stream,
			 int cbid);

#endif
