/* NCCL's profiler plugin interface, version 5 (NCCL 2.25 to 2.28: the libnccl.so.2 here, 2.28.9,
 * exports getNcclProfiler_v1..v5), as NVIDIA/nccl's ext-profiler documents it (README.md and
 * example/nccl/profiler_v5.h): the layout NCCL calls a plugin with. nccl.h declares none of it.
 * A plugin exports an ncclProfiler_v5 object; NCCL dlopens it (NCCL_PROFILER_PLUGIN: a path, a
 * library name, or NAME for libnccl-profiler-NAME.so; unset: libnccl-profiler.so; "none": no
 * plugin), calls init for every communicator, startEvent, recordEventState and stopEvent as it
 * works, and finalize when the communicator goes. */
#ifndef DDPSPY_NCCL_PROFILER_H
#define DDPSPY_NCCL_PROFILER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* event types: the activation mask's bits */
enum {
	NCCLP_GROUP = 1 << 0,
	NCCLP_COLL = 1 << 1,
	NCCLP_P2P = 1 << 2,
	NCCLP_PROXY_OP = 1 << 3,
	NCCLP_PROXY_STEP = 1 << 4,
	NCCLP_PROXY_CTRL = 1 << 5,
	NCCLP_KERNEL_CH = 1 << 6,
	NCCLP_NET_PLUGIN = 1 << 7,
	NCCLP_GROUP_API = 1 << 8,
	NCCLP_COLL_API = 1 << 9,
	NCCLP_P2P_API = 1 << 10,
	NCCLP_KERNEL_LAUNCH = 1 << 11,
};

/* the state a kernel channel's event records its GPU end in (ncclProfilerKernelChStop) */
#define NCCLP_KERNEL_CH_STOP 22

typedef void (*ncclp_logger_t)(int level, unsigned long flags, const char *file, int line, const char *fmt, ...);

typedef struct {
	uint64_t type; /* NCCLP_* */
	void *parentObj;
	int rank;
	union {
		struct { int graphCaptured; int groupDepth; } groupApi;
		struct { const char *func; size_t count; const char *datatype; int root; void *stream; bool graphCaptured; } collApi;
		struct { const char *func; size_t count; const char *datatype; void *stream; bool graphCaptured; } p2pApi;
		struct { void *stream; } kernelLaunch;
		struct {
			uint64_t seqNumber; /* of this collective's function in the communicator */
			const char *func;
			const void *sendBuff;
			void *recvBuff;
			size_t count;
			int root;
			const char *datatype;
			uint8_t nChannels, nWarps;
			const char *algo, *proto;
			void *parentGroup;
		} coll;
		struct { const char *func; void *buff; const char *datatype; size_t count; int peer; uint8_t nChannels; void *parentGroup; } p2p;
		struct { pid_t pid; uint8_t channelId; int peer, nSteps, chunkSize, isSend; } proxyOp;
		struct { int step; } proxyStep;
		struct { uint8_t channelId; uint64_t pTimer; /* the GPU's %globaltimer at its start */ } kernelCh;
		struct { int64_t id; void *data; } netPlugin;
	};
} ncclp_descr_v5_t;

typedef union {
	struct { size_t transSize; } proxyStep;
	struct { int appendedProxyOps; } proxyCtrl;
	struct { void *data; } netPlugin;
	struct { uint64_t pTimer; /* NCCLP_KERNEL_CH_STOP: the GPU's %globaltimer at its end */ } kernelCh;
} ncclp_state_args_v5_t;

typedef struct {
	const char *name;
	int (*init)(void **context, uint64_t commId, int *eActivationMask, const char *commName, int nNodes, int nranks,
		    int rank, ncclp_logger_t logfn);
	int (*startEvent)(void *context, void **eHandle, ncclp_descr_v5_t *eDescr);
	int (*stopEvent)(void *eHandle);
	int (*recordEventState)(void *eHandle, int eState, ncclp_state_args_v5_t *eStateArgs);
	int (*finalize)(void *context);
} ncclp_v5_t;

#endif
