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
#define DDPSPY_FORMAT_MINOR 0
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

/* Collective and point-to-point operations, shared by MPI and gloo events. */
#define DDPSPY_OPS(X)                                                                    \
	X(OP_BARRIER, "barrier")                                                               \
	X(OP_BCAST, "broadcast")                                                               \
	X(OP_REDUCE, "reduce")                                                                 \
	X(OP_ALLREDUCE, "allreduce")                                                           \
	X(OP_ALLGATHER, "allgather")                                                           \
	X(OP_ALLGATHERV, "allgatherv")                                                         \
	X(OP_GATHER, "gather")                                                                 \
	X(OP_GATHERV, "gatherv")                                                               \
	X(OP_SCATTER, "scatter")                                                               \
	X(OP_SCATTERV, "scatterv")                                                             \
	X(OP_ALLTOALL, "alltoall")                                                             \
	X(OP_ALLTOALLV, "alltoallv")                                                           \
	X(OP_REDUCE_SCATTER, "reduce_scatter")                                                 \
	X(OP_REDUCE_SCATTER_BLOCK, "reduce_scatter_block")                                     \
	X(OP_SEND, "send")                                                                     \
	X(OP_RECV, "recv")                                                                     \
	X(OP_WAIT, "wait")                                                                     \
	X(OP_WAITALL, "waitall")                                                               \
	X(OP_TEST, "test")                                                                     \
	X(OP_TESTALL, "testall")

enum ddpspy_op {
#define X(e, s) DDPSPY_##e,
	DDPSPY_OPS(X)
#undef X
	DDPSPY_OP_COUNT
};

/* Event kinds. In an "events" record each event is a msgpack array
 *   [kind, dt, dur, stack, arg...]
 * kind: the number below; dt: raw-clock ticks since the previous event's start in the same
 * record (the first: since the record's "t0"); dur: raw ticks; stack: id in the stack table,
 * 0 for none; then the kind's arguments in the order listed (integers, -1 meaning unknown;
 * "path" and "name" are strings). Newer minor versions may append arguments: readers ignore
 * arguments past the ones they know. Kind numbers are never reused. */
#define DDPSPY_EVENT_KINDS(X)                                                            \
	X(EV_THREAD_START, "thread_start", "parent_tid")                                       \
	X(EV_THREAD_NAME, "thread_name", "tid,name")                                               \
	X(EV_THREAD_EXIT, "thread_exit", "")                                                   \
	X(EV_MUTEX_WAIT, "mutex_wait", "mutex,ret")                                            \
	X(EV_COND_WAIT, "cond_wait", "cond,mutex,timed,ret")                                   \
	X(EV_BARRIER_WAIT, "barrier_wait", "barrier,ret")                                      \
	X(EV_SEM_WAIT, "sem_wait", "sem,timed,ret")                                            \
	X(EV_SLEEP, "sleep", "req_ns,ret")                                                     \
	X(EV_OPEN, "open", "ret,flags,fdclass,path")                                           \
	X(EV_READ, "read", "fd,fdclass,bytes,ret")                                             \
	X(EV_PREAD, "pread", "fd,fdclass,bytes,ret,offset")                                    \
	X(EV_READV, "readv", "fd,fdclass,bytes,ret,iovcnt")                                    \
	X(EV_STAT, "stat", "ret,path")                                                         \
	X(EV_FSTAT, "fstat", "fd,fdclass,ret")                                                 \
	X(EV_CLOSE, "close", "fd,fdclass,ret")                                                 \
	X(EV_POLL, "poll", "nfds,timeout_ms,ret")                                              \
	X(EV_SELECT, "select", "nfds,timeout_us,ret")                                          \
	X(EV_EPOLL_WAIT, "epoll_wait", "epfd,maxevents,timeout_ms,ret")                        \
	X(EV_MPI_INIT, "mpi_init", "rank,size,ret")                                            \
	X(EV_MPI_FINALIZE, "mpi_finalize", "ret")                                              \
	X(EV_MPI_COLL, "mpi_coll", "op,comm,seq,bytes,root,ret")                               \
	X(EV_MPI_ICOLL, "mpi_icoll", "op,comm,seq,bytes,root,request,ret")                     \
	X(EV_MPI_P2P, "mpi_p2p", "op,comm,peer,tag,bytes,request,ret")                         \
	X(EV_MPI_WAIT, "mpi_wait", "op,count,request,ret")                                     \
	X(EV_GLOO_COLL, "gloo_coll", "op,seq,bytes,threw")                                     \
	X(EV_STEP, "step", "begin")   /* 1.1: ddpspy_step_begin() (1) / ddpspy_step_end() (0) */

enum ddpspy_event_kind {
#define X(e, s, a) DDPSPY_##e,
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
