/* The ddpspy trace format, shared by the preload library (writer), the collector (reader) and the
 * viewer. One file per traced process: a 16-byte file header, then framed msgpack records.
 * docs/format.md describes it for people writing a second reader; keep the two in step. */
#ifndef DDPSPY_FORMAT_H
#define DDPSPY_FORMAT_H

#include <stdint.h>
#include <stddef.h>

/* File header: 8 magic bytes, u16 major, u16 minor, u32 reserved (0), all little-endian.
 * "\r\n" in the magic catches files mangled by text-mode transfers, as PNG's does. A reader
 * refuses a major it does not know and reads any minor of a major it knows: minors only add
 * record keys, event kinds or trailing event arguments, which old readers skip. */
#define DDPSPY_MAGIC "DDPSPY\r\n"
#define DDPSPY_MAGIC_LEN 8
#define DDPSPY_FILE_HEADER_LEN 16
#define DDPSPY_FORMAT_MAJOR 2
#define DDPSPY_FORMAT_MINOR 15
/* the oldest major this reader still reads (1.x: events as msgpack arrays, modules snapshots) */
#define DDPSPY_FORMAT_MAJOR_OLDEST 1

/* Each frame: u32 payload length, u32 CRC-32 (IEEE, as zlib's crc32) of the payload, then the
 * payload: exactly one msgpack map whose key "k" names the record type. */
#define DDPSPY_FRAME_HEADER_LEN 8
#define DDPSPY_FRAME_MAX (64u << 20) /* a longer length field means a corrupt file */

/* Record types (value of "k"). */
#define DDPSPY_REC_HEADER "header"     /* once, first: who, where, clocks, config */
#define DDPSPY_REC_IDENTITY "identity" /* rank learned later (MPI_Init) */
#define DDPSPY_REC_CALIB "calib"       /* raw timestamp vs CLOCK_MONOTONIC vs CLOCK_REALTIME */
#define DDPSPY_REC_MODULES "modules"   /* loaded objects snapshot, for offline symbolization */
#define DDPSPY_REC_THREAD "thread"     /* a thread's first appearance */
#define DDPSPY_REC_STACKS "stacks"     /* new entries of the per-file stack table */
#define DDPSPY_REC_EVENTS "events"     /* a batch of one thread's events */
#define DDPSPY_REC_LOSS "loss"         /* cumulative dropped-event counts per thread */
#define DDPSPY_REC_END "end"           /* clean end of the file (exit, exec) */
#define DDPSPY_REC_GPU "gpu"           /* 2.2: GPU capture's state: CUPTI, its clock, its losses */
#define DDPSPY_REC_NAMES "names"       /* 2.2: new entries of the per-file string table */
#define DDPSPY_REC_GPU_EVENTS "gpu_events" /* 2.2: a batch of CUPTI's records, times in ns */
#define DDPSPY_REC_SCHED "sched"       /* 2.4: the threads' CPU time and run-queue delay (schedstat) */
#define DDPSPY_REC_COST "cost"         /* 2.8: ddpspy's own cost per recorded event */
#define DDPSPY_REC_INFLIGHT "inflight" /* 2.9: a call in flight long, or when the file ended */
#define DDPSPY_REC_PYTHON "python"     /* 2.12: the CPython found, and whether its frames are read */
#define DDPSPY_REC_PYFRAMES "pyframes" /* 2.12: the Python frames of new stack table entries */
#define DDPSPY_REC_PYSAMPLES "pysamples" /* 2.12: samples of the main thread's Python frames */
#define DDPSPY_REC_CPUSAMPLES "cpusamples" /* 2.13: samples of the main thread's native stacks on a CPU */

/* Process roles (header "role"). */
#define DDPSPY_ROLES(X)                                                                  \
	X(ROLE_RANK, "rank")         /* a training rank: rank info is known */                 \
	X(ROLE_WORKER, "worker")     /* fork child or multiprocessing child of a rank */       \
	X(ROLE_LAUNCHER, "launcher") /* mpirun, torchrun agent, srun, orted ... */             \
	X(ROLE_OTHER, "other")       /* no rank and not a known launcher */

enum ddpspy_role {
#define X(e, s) DDPSPY_##e,
	DDPSPY_ROLES(X)
#undef X
	DDPSPY_ROLE_COUNT
};

/* File-descriptor classes, recorded with every fd-based event. */
#define DDPSPY_FDCLASSES(X)                                                              \
	X(FD_UNKNOWN, "unknown")                                                               \
	X(FD_FILE, "file")                                                                     \
	X(FD_DIR, "dir")                                                                       \
	X(FD_PIPE, "pipe")       /* pipes and FIFOs: multiprocessing queues, DataLoader */     \
	X(FD_UNIX, "unix")       /* AF_UNIX sockets: local IPC */                              \
	X(FD_TCP, "tcp")         /* AF_INET/AF_INET6 stream sockets: network traffic */        \
	X(FD_UDP, "udp")                                                                       \
	X(FD_SOCKET, "socket")   /* other socket families (netlink, ...) */                    \
	X(FD_DEVICE, "device")   /* character and block devices: /dev/null, GPUs, ... */       \
	X(FD_ANON, "anon")       /* eventfd, epoll, timerfd, signalfd: anonymous inodes */

enum ddpspy_fdclass {
#define X(e, s) DDPSPY_##e,
	DDPSPY_FDCLASSES(X)
#undef X
	DDPSPY_FDCLASS_COUNT
};

/* Collective and point-to-point operations, shared by MPI and gloo events, with what the analysis
 * needs to know of each: SYM, every rank contributes and receives, so that all of them leave the
 * call together (their exits align clocks); DONE, a wait that completes the pending nonblocking
 * operations (MPI_Waitany and MPI_Waitsome: the one its request names; MPI_Test* only looks). */
#define DDPSPY_OPF_SYM 1
#define DDPSPY_OPF_DONE 2
#define DDPSPY_OPS(X)                                                                    \
	X(OP_BARRIER, "barrier", DDPSPY_OPF_SYM)                                               \
	X(OP_BCAST, "broadcast", 0)                                                            \
	X(OP_REDUCE, "reduce", 0)                                                              \
	X(OP_ALLREDUCE, "allreduce", DDPSPY_OPF_SYM)                                           \
	X(OP_ALLGATHER, "allgather", DDPSPY_OPF_SYM)                                           \
	X(OP_ALLGATHERV, "allgatherv", DDPSPY_OPF_SYM)                                         \
	X(OP_GATHER, "gather", 0)                                                              \
	X(OP_GATHERV, "gatherv", 0)                                                            \
	X(OP_SCATTER, "scatter", 0)                                                            \
	X(OP_SCATTERV, "scatterv", 0)                                                          \
	X(OP_ALLTOALL, "alltoall", DDPSPY_OPF_SYM)                                             \
	X(OP_ALLTOALLV, "alltoallv", DDPSPY_OPF_SYM)                                           \
	X(OP_REDUCE_SCATTER, "reduce_scatter", DDPSPY_OPF_SYM)                                 \
	X(OP_REDUCE_SCATTER_BLOCK, "reduce_scatter_block", DDPSPY_OPF_SYM)                     \
	X(OP_SEND, "send", 0)                                                                  \
	X(OP_RECV, "recv", 0)                                                                  \
	X(OP_WAIT, "wait", DDPSPY_OPF_DONE)                                                    \
	X(OP_WAITALL, "waitall", DDPSPY_OPF_DONE)                                              \
	X(OP_TEST, "test", 0)                                                                  \
	X(OP_TESTALL, "testall", 0)                                                            \
	X(OP_SENDRECV, "sendrecv", 0) /* 2.3 */                                               \
	X(OP_WAITANY, "waitany", DDPSPY_OPF_DONE) /* 2.5 */                                    \
	X(OP_WAITSOME, "waitsome", DDPSPY_OPF_DONE)                                            \
	X(OP_TESTANY, "testany", 0)                                                            \
	X(OP_TESTSOME, "testsome", 0)                                                          \
	X(OP_SCAN, "scan", 0)                                                                  \
	X(OP_EXSCAN, "exscan", 0)                                                              \
	X(OP_ALLTOALLW, "alltoallw", DDPSPY_OPF_SYM)                                           \
	X(OP_PROBE, "probe", 0)                                                                \
	X(OP_IPROBE, "iprobe", 0)

enum ddpspy_op {
#define X(e, s, f) DDPSPY_##e,
	DDPSPY_OPS(X)
#undef X
	DDPSPY_OP_COUNT
};

/* A CUDA copy's direction (cuda_memcpy "dir": cudaMemcpyKind's values) and what a cuda_sync
 * waited for ("what"). */
#define DDPSPY_CUDA_DIRS(X)                                                              \
	X(DIR_H2H, "h2h")                                                                      \
	X(DIR_H2D, "h2d")                                                                      \
	X(DIR_D2H, "d2h")                                                                      \
	X(DIR_D2D, "d2d")                                                                      \
	X(DIR_DEFAULT, "default") /* cudaMemcpyDefault: from the pointers */

enum ddpspy_cuda_dir {
#define X(e, s) DDPSPY_##e,
	DDPSPY_CUDA_DIRS(X)
#undef X
	DDPSPY_DIR_COUNT
};

#define DDPSPY_CUDA_SYNCS(X)                                                             \
	X(SYNC_DEVICE, "device")                                                               \
	X(SYNC_STREAM, "stream")                                                               \
	X(SYNC_EVENT, "event")                                                                 \
	X(SYNC_FREE, "free")                                                                   \
	X(SYNC_PIN, "pin")                                                                     \
	X(SYNC_POLL, "poll")

/* CUPTI's copy kinds (gpu_memcpy "copy": CUpti_ActivityMemcpyKind), memory kinds ("src", "dst",
 * "mem": CUpti_ActivityMemoryKind) and synchronization types (gpu_sync "sync"), named as CUPTI
 * numbers them; cupti/gpu.c checks the numbers against CUPTI's headers. */
#define DDPSPY_GPU_COPIES(X)                                                             \
	X(GCOPY_UNKNOWN, "unknown") X(GCOPY_HTOD, "htod") X(GCOPY_DTOH, "dtoh")                 \
	X(GCOPY_HTOA, "htoa") X(GCOPY_ATOH, "atoh") X(GCOPY_ATOA, "atoa") X(GCOPY_ATOD, "atod") \
	X(GCOPY_DTOA, "dtoa") X(GCOPY_DTOD, "dtod") X(GCOPY_HTOH, "htoh") X(GCOPY_PTOP, "ptop")
#define DDPSPY_GPU_MEMS(X)                                                               \
	X(GMEM_UNKNOWN, "unknown") X(GMEM_PAGEABLE, "pageable") X(GMEM_PINNED, "pinned")        \
	X(GMEM_DEVICE, "device") X(GMEM_ARRAY, "array") X(GMEM_MANAGED, "managed")              \
	X(GMEM_DEVICE_STATIC, "device_static") X(GMEM_MANAGED_STATIC, "managed_static")
#define DDPSPY_GPU_SYNCS(X)                                                              \
	X(GSYNC_UNKNOWN, "unknown") X(GSYNC_EVENT, "event_synchronize")                         \
	X(GSYNC_STREAM_WAIT_EVENT, "stream_wait_event") X(GSYNC_STREAM, "stream_synchronize")   \
	X(GSYNC_CONTEXT, "context_synchronize")

enum ddpspy_gpu_copy {
#define X(e, s) DDPSPY_##e,
	DDPSPY_GPU_COPIES(X)
#undef X
	DDPSPY_GCOPY_COUNT
};
enum ddpspy_gpu_mem {
#define X(e, s) DDPSPY_##e,
	DDPSPY_GPU_MEMS(X)
#undef X
	DDPSPY_GMEM_COUNT
};
enum ddpspy_gpu_sync {
#define X(e, s) DDPSPY_##e,
	DDPSPY_GPU_SYNCS(X)
#undef X
	DDPSPY_GSYNC_COUNT
};

enum ddpspy_cuda_sync {
#define X(e, s) DDPSPY_##e,
	DDPSPY_CUDA_SYNCS(X)
#undef X
	DDPSPY_SYNC_COUNT
};

/* What an "nvtx" event is ("range"): a push or pop (id: its nesting level), a start or end of a
 * range (id: the range's), a mark, or a domain's creation (id: the domain's, 0 being NVTX's default
 * domain; message: its name). */
#define DDPSPY_NVTX_RANGES(X)                                                            \
	X(NVTX_POP, "pop") X(NVTX_PUSH, "push") X(NVTX_START, "start") X(NVTX_END, "end")       \
	X(NVTX_MARK, "mark") X(NVTX_DOMAIN, "domain")

enum ddpspy_nvtx_range {
#define X(e, s) DDPSPY_##e,
	DDPSPY_NVTX_RANGES(X)
#undef X
	DDPSPY_NVTX_COUNT
};

/* What an event kind means to the analysis: the fourth column of DDPSPY_EVENT_KINDS, one category
 * ORed with properties. The collector asks this table (collector/kinds.c) and never switches on
 * kinds; where a kind's bytes, descriptor, operation, communicator, sequence number, peer and path
 * are comes from its argument names ("fd", "fdclass", "bytes", "op", "comm", "seq", "peer",
 * "path", and "begin" for markers). */
#define DDPSPY_CATEGORIES(X)                                                             \
	X(CAT_COMPUTE, "compute") /* time that counts as computing */                          \
	X(CAT_DATA, "data")       /* waiting for input: files, input workers' pipes, sockets */ \
	X(CAT_COMMS, "comms")     /* communicating with other ranks */                        \
	X(CAT_HOST, "host")       /* other host work and waits: sleeps, locks */              \
	X(CAT_MARKER, "marker")   /* a step marker: a point, not time spent */                \
	X(CAT_NONE, "none")       /* not a call: a thread's start, exit, name */

enum ddpspy_category {
#define X(e, s) DDPSPY_##e,
	DDPSPY_CATEGORIES(X)
#undef X
	DDPSPY_CAT_COUNT
};

#define DDPSPY_KM_CAT(m) ((m) & 15u)  /* the category of a meaning */
#define DDPSPY_KM_INPUT_FD (1u << 4)  /* data only on an input descriptor; host on a device or an
                                       * anonymous inode (eventfd, epoll) */
#define DDPSPY_KM_READS (1u << 5)     /* reads "bytes" (requested) from its descriptor */
#define DDPSPY_KM_OPENS (1u << 6)     /* opens a file */
#define DDPSPY_KM_STATS (1u << 7)     /* asks for a file's metadata */
#define DDPSPY_KM_POLLS (1u << 8)     /* waits for descriptors to be ready (an input queue) */
#define DDPSPY_KM_THREAD_WAIT (1u << 9) /* waits for another thread: lock, condition, barrier */
#define DDPSPY_KM_COLL (1u << 10)     /* one collective instance across ranks, named by comm and seq */
#define DDPSPY_KM_NONBLOCKING (1u << 11) /* starts a collective that a later DONE wait completes */
#define DDPSPY_KM_WAITS (1u << 12)    /* a wait for nonblocking operations ("op" says if it completes) */
#define DDPSPY_KM_EXIT_ALIGNS (1u << 13) /* ranks leave it together whatever its op (else: SYM ops) */
#define DDPSPY_KM_SEQ_PER_OP (1u << 14) /* numbered per operation, no communicator (gloo) */
#define DDPSPY_KM_HELPER (1u << 15)   /* a library may run it on its own threads while the caller
                                       * waits (PyTorch's gloo process group) */
#define DDPSPY_KM_FD_IS_RET (1u << 16) /* its descriptor is its return value ("ret") */
#define DDPSPY_KM_NAMES_THREAD (1u << 17) /* names thread "tid" (0: its own) "name" */
#define DDPSPY_KM_GPU (1u << 18)      /* a CUPTI record ("gpu_events"): the GPU's timeline, or a host
                                       * thread's CUDA call as CUPTI saw it; never in "events" */
#define DDPSPY_KM_GPU_NONE (DDPSPY_CAT_NONE | DDPSPY_KM_GPU)
#define DDPSPY_KM_ENQUEUES (1u << 19) /* its host time is an enqueue: the work runs on the GPU later,
                                       * joined to the call by "ext" (CUPTI's external correlation) */
#define DDPSPY_KM_P2P (1u << 20)      /* a point-to-point send or receive ("peer", "tag"; Sendrecv:
                                       * "rpeer", "rtag" too), matched with the peer's by order */

#define DDPSPY_KM_READ_CALL (DDPSPY_CAT_DATA | DDPSPY_KM_INPUT_FD | DDPSPY_KM_READS)
#define DDPSPY_KM_BLOCKING_COLL (DDPSPY_CAT_COMMS | DDPSPY_KM_COLL)

/* Event kinds. In an "events" record each event is its kind (the number below), its start and
 * duration in raw-clock ticks, its stack (an id in the stack table, 0 for none), then the kind's
 * arguments in the order listed (integers, -1 meaning unknown; "path" and "name" are strings);
 * format 2.x packs them as common/evcodec.h says, 1.x wrote msgpack arrays
 * [kind, dt, dur, stack, arg...]. Newer minor versions may append arguments: readers ignore
 * arguments past the ones they know. Kind numbers are never reused. The last column is what the
 * kind means to the analysis (above). */
#define DDPSPY_EVENT_KINDS(X)                                                            \
	X(EV_THREAD_START, "thread_start", "parent_tid", DDPSPY_CAT_NONE)                     \
	X(EV_THREAD_NAME, "thread_name", "tid,name", DDPSPY_CAT_NONE | DDPSPY_KM_NAMES_THREAD) \
	X(EV_THREAD_EXIT, "thread_exit", "", DDPSPY_CAT_NONE)                                 \
	X(EV_MUTEX_WAIT, "mutex_wait", "mutex,ret", DDPSPY_CAT_HOST | DDPSPY_KM_THREAD_WAIT)  \
	X(EV_COND_WAIT, "cond_wait", "cond,mutex,timed,ret", DDPSPY_CAT_HOST | DDPSPY_KM_THREAD_WAIT) \
	X(EV_BARRIER_WAIT, "barrier_wait", "barrier,ret", DDPSPY_CAT_HOST | DDPSPY_KM_THREAD_WAIT) \
	X(EV_SEM_WAIT, "sem_wait", "sem,timed,ret", DDPSPY_CAT_HOST | DDPSPY_KM_THREAD_WAIT)  \
	X(EV_SLEEP, "sleep", "req_ns,ret", DDPSPY_CAT_HOST)                                   \
	X(EV_OPEN, "open", "ret,flags,fdclass,path", DDPSPY_CAT_DATA | DDPSPY_KM_OPENS | DDPSPY_KM_FD_IS_RET) \
	X(EV_READ, "read", "fd,fdclass,bytes,ret", DDPSPY_KM_READ_CALL)                       \
	X(EV_PREAD, "pread", "fd,fdclass,bytes,ret,offset", DDPSPY_KM_READ_CALL)              \
	X(EV_READV, "readv", "fd,fdclass,bytes,ret,iovcnt", DDPSPY_KM_READ_CALL)              \
	X(EV_STAT, "stat", "ret,path", DDPSPY_CAT_DATA | DDPSPY_KM_STATS)                     \
	X(EV_FSTAT, "fstat", "fd,fdclass,ret", DDPSPY_CAT_DATA | DDPSPY_KM_STATS)             \
	X(EV_CLOSE, "close", "fd,fdclass,ret", DDPSPY_CAT_DATA)                               \
	X(EV_POLL, "poll", "nfds,timeout_ms,ret", DDPSPY_CAT_DATA | DDPSPY_KM_POLLS)          \
	X(EV_SELECT, "select", "nfds,timeout_us,ret", DDPSPY_CAT_DATA | DDPSPY_KM_POLLS)      \
	X(EV_EPOLL_WAIT, "epoll_wait", "epfd,maxevents,timeout_ms,ret", DDPSPY_CAT_DATA | DDPSPY_KM_POLLS) \
	X(EV_MPI_INIT, "mpi_init", "rank,size,ret", DDPSPY_CAT_COMMS)                         \
	X(EV_MPI_FINALIZE, "mpi_finalize", "ret", DDPSPY_CAT_COMMS)                           \
	X(EV_MPI_COLL, "mpi_coll", "op,comm,seq,bytes,root,ret", DDPSPY_KM_BLOCKING_COLL)     \
	X(EV_MPI_ICOLL, "mpi_icoll", "op,comm,seq,bytes,root,request,ret",                    \
	  DDPSPY_CAT_COMMS | DDPSPY_KM_COLL | DDPSPY_KM_NONBLOCKING)                           \
	/* 2.3: rpeer, rtag, rbytes: MPI_Sendrecv's receive (its send is peer, tag, bytes); -1 else */ \
	X(EV_MPI_P2P, "mpi_p2p", "op,comm,peer,tag,bytes,request,ret,rpeer,rtag,rbytes",         \
	  DDPSPY_CAT_COMMS | DDPSPY_KM_P2P) \
	X(EV_MPI_WAIT, "mpi_wait", "op,count,request,ret", DDPSPY_CAT_COMMS | DDPSPY_KM_WAITS) \
	X(EV_GLOO_COLL, "gloo_coll", "op,seq,bytes,threw",                                    \
	  DDPSPY_KM_BLOCKING_COLL | DDPSPY_KM_EXIT_ALIGNS | DDPSPY_KM_SEQ_PER_OP | DDPSPY_KM_HELPER) \
	X(EV_STEP, "step", "begin", DDPSPY_CAT_MARKER) /* 1.1: ddpspy_step_begin() (1) / _end() (0) */ \
	/* 2.1: the host side of CUDA runtime calls; the GPU's own times come from CUPTI. A host     \
	 * held by a copy or a synchronize waits for the GPU's work: compute, as before they were  \
	 * recorded */                                                                           \
	X(EV_CUDA_MEMCPY, "cuda_memcpy", "bytes,dir,stream,async,ret", DDPSPY_CAT_COMPUTE)      \
	X(EV_CUDA_SYNC, "cuda_sync", "what,stream,event,ret", DDPSPY_CAT_COMPUTE)                \
	/* 2.2: CUPTI's activity records, in "gpu_events" records; "kname" and "fn" are ids in the   \
	 * file's string table ("names"); CUPTI's enums as CUPTI numbers them */                   \
	X(EV_GPU_KERNEL, "gpu_kernel",                                                         \
	  "device,context,stream,corr,kname,grid_x,grid_y,grid_z,block_x,block_y,block_z,smem,regs", \
	  DDPSPY_KM_GPU_NONE)                                                                  \
	X(EV_GPU_MEMCPY, "gpu_memcpy", "device,context,stream,corr,bytes,copy,src,dst,async",   \
	  DDPSPY_KM_GPU_NONE)                                                                  \
	X(EV_GPU_MEMSET, "gpu_memset", "device,context,stream,corr,bytes,value,mem", DDPSPY_KM_GPU_NONE) \
	X(EV_GPU_SYNC, "gpu_sync", "sync,context,stream,event,corr,ret", DDPSPY_KM_GPU_NONE)   \
	X(EV_CUDA_API, "cuda_api", "thread,cbid,fn,corr,ret,driver", DDPSPY_KM_GPU_NONE)        \
	X(EV_GPU_EXTCORR, "gpu_extcorr", "ext_kind,ext_id,corr", DDPSPY_KM_GPU_NONE)                \
	/* 2.2: NCCL calls, host side: "comm" equal on every rank, "seq" numbering collectives per   \
	 * communicator from 0 on every rank alike (-1 for send and recv), "ext" the external id     \
	 * pushed around the call, which CUPTI's gpu_extcorr joins to the kernel it launched */      \
	X(EV_NCCL_INIT, "nccl_init", "comm,comm_rank,nranks,ret,blocking", DDPSPY_CAT_COMMS)                 \
	X(EV_NCCL_COLL, "nccl_coll", "op,comm,seq,bytes,root,peer,stream,ext,ret",               \
	  DDPSPY_CAT_COMMS | DDPSPY_KM_COLL | DDPSPY_KM_NONBLOCKING | DDPSPY_KM_ENQUEUES)         \
	X(EV_NCCL_GROUP, "nccl_group", "begin,ext,ret", DDPSPY_CAT_COMMS)                         \
	/* 2.2: the program's NVTX ranges and marks (a point each; DDPSPY_NVTX_RANGES) */          \
	X(EV_NVTX, "nvtx", "range,id,domain,message", DDPSPY_CAT_NONE)                         \
	/* 2.4: an MPI communicator's first use by the process: its id (as mpi_coll's "comm") and   \
	 * this process's rank in it and its size, so that point-to-point peers (ranks in the      \
	 * communicator) can be matched across processes */                                       \
	X(EV_MPI_COMM, "mpi_comm", "comm,comm_rank,comm_size", DDPSPY_CAT_NONE)                 \
	/* 2.5: the source and tag of a message that a receive posted with MPI_ANY_SOURCE or      \
	 * MPI_ANY_TAG took, from the status of the wait or test that completed it (before that   \
	 * call's own event; its request as the mpi_p2p event's) */                                \
	X(EV_MPI_STATUS, "mpi_status", "request,source,tag", DDPSPY_CAT_NONE)                  \
	/* 2.7: a collective's kernel on one channel, as NCCL's profiler plugin told it (once it ran):  \
	 * comm (nccl_init's, -1 unknown), hash (NCCL's of the communicator, 62 bits), op, seq (of   \
	 * that operation in the communicator, from 0), count, channel, and its start and end on the \
	 * GPU's %globaltimer (ns); the event's own time is when NCCL told it. 2.14: call_comm and    \
	 * call (the nccl_coll call it was launched for: its comm and seq, -1 unknown) and replay (1: \
	 * a launch of a CUDA graph that captured the call) */                                         \
	X(EV_NCCL_KERNEL, "nccl_kernel", "comm,hash,op,seq,count,channel,gpu_start,gpu_end,comm_rank,call_comm,call,replay",     \
	  DDPSPY_CAT_NONE)                                                                        \
	/* 2.10: c10d's point-to-point calls over gloo: a send or receive started (op, comm: 0 the    \
	 * default group's, whose peers are world ranks, else -3 - its size; peer, -1 any of several; \
	 * tag: gloo's slot; bytes; request: the transport's buffer), and the wait that completes it \
	 * (op wait, the buffer as its request) */                                                   \
	X(EV_GLOO_P2P, "gloo_p2p", "op,comm,peer,tag,bytes,request,threw", DDPSPY_CAT_COMMS | DDPSPY_KM_P2P) \
	X(EV_GLOO_WAIT, "gloo_wait", "op,count,request,threw", DDPSPY_CAT_COMMS | DDPSPY_KM_WAITS)

enum ddpspy_event_kind {
#define X(e, s, a, m) DDPSPY_##e,
	DDPSPY_EVENT_KINDS(X)
#undef X
	DDPSPY_EV_COUNT
};

/* Names and argument lists, indexed by the enums above. */
extern const char *const ddpspy_role_names[DDPSPY_ROLE_COUNT];
extern const char *const ddpspy_fdclass_names[DDPSPY_FDCLASS_COUNT];
extern const char *const ddpspy_op_names[DDPSPY_OP_COUNT];
extern const char *const ddpspy_event_names[DDPSPY_EV_COUNT];
extern const char *const ddpspy_event_args[DDPSPY_EV_COUNT]; /* "a,b,c" */
extern const unsigned ddpspy_event_meaning[DDPSPY_EV_COUNT];  /* DDPSPY_KM_* */
extern const unsigned ddpspy_op_flags[DDPSPY_OP_COUNT];       /* DDPSPY_OPF_* */
extern const char *const ddpspy_category_names[DDPSPY_CAT_COUNT];
extern const char *const ddpspy_cuda_dir_names[DDPSPY_DIR_COUNT];
extern const char *const ddpspy_cuda_sync_names[DDPSPY_SYNC_COUNT];
extern const char *const ddpspy_gpu_copy_names[DDPSPY_GCOPY_COUNT];
extern const char *const ddpspy_gpu_mem_names[DDPSPY_GMEM_COUNT];
extern const char *const ddpspy_gpu_sync_names[DDPSPY_GSYNC_COUNT];
extern const char *const ddpspy_nvtx_names[DDPSPY_NVTX_COUNT];

/* Returns the name for v, or NULL when v is out of range (a newer writer's value). */
const char *ddpspy_name(const char *const *names, int count, int64_t v);

/* CRC-32 (IEEE 802.3, reflected, as zlib): crc32(0, p, n) for a whole buffer. */
uint32_t ddpspy_crc32(uint32_t crc, const void *p, size_t n);

static inline void ddpspy_put_le32(unsigned char *p, uint32_t v)
{
	p[0] = (unsigned char)v;
	p[1] = (unsigned char)(v >> 8);
	p[2] = (unsigned char)(v >> 16);
	p[3] = (unsigned char)(v >> 24);
}

static inline uint32_t ddpspy_get_le32(const unsigned char *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

#endif
