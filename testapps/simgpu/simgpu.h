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
	uint32_t tid;           /* the host thread (API, sync) */
	int cbid;               /* API: CUPTI's runtime callback id */
	int ret;                /* API: the call's cudaError_t */
	uint64_t bytes;         /* copies and sets */
	int copy_kind;          /* copies: cudaMemcpyKind, resolved (never cudaMemcpyDefault) */
	int src, dst;           /* copies: enum simgpu_mem of each side */
	int async;              /* copies: an Async call */
	const char *name;       /* kernels: the device name, valid as long as the program runs */
	uint32_t grid[3], block[3];
	int sync;               /* SIMGPU_SYNC: CUpti_ActivitySynchronizationType */
};

/* Sets the function every item is handed to, from the thread that made it (NULL: none). */
void simgpu_observe(void (*fn)(const struct simgpu_item *));

#endif
