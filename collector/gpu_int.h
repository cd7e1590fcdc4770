/* The GPU part's own records (gpu.c), shared with the file that turns NCCL's profiler plugin's
 * events into NCCL kernels (ncclplug.c): what one process's file held of its device. */
#ifndef DDPSPY_GPU_INT_H
#define DDPSPY_GPU_INT_H

#include <stdint.h>
#include <stddef.h>

#include "trace.h"

enum { GW_COMPUTE, GW_COPY, GW_COPY_IN, GW_NCCL, GW_COUNT };

struct gwork {            /* a kernel, copy or set */
	int64_t t, d, launch; /* launch: its launching call's host time (t when unknown) */
	int64_t bytes;
	uint32_t corr, stream;
	int32_t comm, seq;    /* NCCL kernels: their collective (seq -1 unknown) */
	uint32_t name;        /* kernels: the name's id in the file's string table (gpuproc.names) */
	uint8_t ctx;          /* its context and device: gpuproc.ctxs[ctx] (GCTX_NONE: none known). CUPTI's
			       * stream ids are their context's (every legacy stream is 7) */
	int8_t op;            /* NCCL kernels: their call's operation (-1 unknown) */
	int8_t cls;
	uint8_t pageable : 1; /* (bit-fields: a record is stored whole, built apart, never field by
			       * field into its array: see gapi) */
	uint8_t pinned : 1;   /* copies between the device and pinned host memory */
	uint8_t plugin : 1;   /* an NCCL kernel as NCCL's profiler plugin told it (ncclplug.c), not CUPTI */
	uint8_t graph : 1;    /* launched by a CUDA graph's launch (its call's L_GRAPH) */
	uint8_t p2p : 1;      /* an NCCL kernel of sends and receives only, by its name */
};
/* (a GPU job's trace is mostly kernels and their launches: every byte here is one per kernel) */
_Static_assert(sizeof(struct gwork) == 56, "struct gwork grew");

/* work's place: its context's stream */
static inline uint64_t lane(const struct gwork *w)
{
	return (uint64_t)w->ctx << 32 | w->stream;
}

#define SYNC_MIN_NS 20000   /* a copy call that held the host this long waited for the device */
#define PAGEABLE_MIN 65536  /* a pageable copy this large costs bandwidth, not only a sync */

struct gapi {             /* a CUDA runtime or driver call, as CUPTI saw it */
	int64_t t, d;
	uint32_t corr;
	uint16_t thread;      /* its thread: gpuproc.cthreads[thread], CUPTI's id (the low half of its
			       * pthread_t); GTHR_NONE: unknown */
	uint8_t launch;       /* L_*: a call that launches work */
	uint8_t wait;         /* W_*: a call that may wait for the device */
};
/* (no bit-fields here: GCC stores one into the array by reading its byte first, and a read of a
 * page not yet written maps the zero page, so each page of the array faulted twice and flushed
 * the other CPUs' TLBs: 330,000 flushes reading bench's GPU trace on 2 threads, against 11,000) */
_Static_assert(sizeof(struct gapi) == 24, "struct gapi grew");

/* launching calls, by their names: a kernel's, a host function's, or a CUDA graph's (whose work
 * CUPTI gives the graph launch's correlation id, one for all of it) */
enum { L_NONE, L_WORK, L_GRAPH };

/* a CUDA graph's launch of a captured NCCL call: the k-th of the call (communicator, number) as a
 * communicator number of its own, in the range of NCCL's hashes (bit 30; ncclplug.c), and k */
static inline void an_replay_key(int32_t comm, int32_t seq, int64_t k, int32_t *kc, int32_t *ks)
{
	uint64_t h = ((uint64_t)(uint32_t)comm << 32 | (uint32_t)seq) * 0x9e3779b97f4a7c15ull;
	*kc = (int32_t)(((h ^ (h >> 29)) & 0x3fffffff) | 0x40000000);
	*ks = k < INT32_MAX ? (int32_t)k : -1;
}

/* runtime calls that hold the host for the device, by their names (api_wait) */
enum { W_NONE, W_ALWAYS, W_POLL, W_LONG };

struct gxc {              /* CUPTI's external correlation: the call corr ran inside ddpspy's ext */
	uint32_t corr;
	uint64_t ext;
};

struct gcall {            /* an NCCL call, or the end of a group, by the external id around it */
	uint64_t ext;
	int32_t comm, seq;
	int64_t bytes;
	int8_t op;
	int8_t unit;          /* what launches: a call outside a group, or a group's end */
	int8_t used;          /* a kernel joined it by its external id */
	int8_t captured;      /* captured into a CUDA graph (the plugin's replays name it, or its group):
			       * it launches nothing itself, each of its graph's launches does */
	int64_t t;            /* its call's start (a group's end: the group end call's) */
	uint32_t grp;         /* the group it is in or ends (1, 2, ... in the process), 0 none */
	int32_t mcomm, mseq;  /* NCCL's send and recv (a group's end: its least such message): the
			       * message as an instance of two ranks, alike on both (gpu.c's
			       * msg_instance); mseq -1 none */
};

/* one nccl_kernel event: a collective's kernel on one channel, as NCCL's profiler plugin told it */
struct gplug {
	int64_t told;         /* when the plugin was told (the host's clock) */
	int64_t gs, ge;       /* its start and end on the GPU's %globaltimer */
	int64_t seq, count;   /* the plugin's sequence number: per operation in its communicator */
	uint64_t hash;        /* NCCL's hash of its communicator (equal on every rank) */
	int32_t comm, rank;   /* ddpspy's id of the communicator (-1 unknown), the rank's in it */
	int32_t call_comm;    /* the call it was launched for (its CollApi event, 2.14): communicator, */
	int64_t call;         /* and number there (-1 unknown) */
	int8_t op;
	int8_t replay;        /* a launch of a CUDA graph that captured that call */
};

/* what became of the plugin's events: their collectives, joined to calls or not, their clock, and
 * where CUPTI timed the same kernels, how the two agree */
struct plugstat {
	uint32_t colls;       /* collectives (channels' events merged) */
	uint32_t unjoined;    /* of them, not joined to a call (no communicator or no such call) */
	uint32_t replays;     /* of them, graph launches' of a captured call */
	uint32_t conflicts;   /* of them, whose clock bounds crossed (the mapping's assumption broke) */
	double bound_us;      /* the median width of the clock mapping's bounds: how late a time may be
			       * (NaN: no collective had both bounds) */
	uint32_t matched, cupti_only, plugin_only; /* against CUPTI's NCCL kernels, by collective */
	uint32_t after_stop;  /* the plugin's that started after CUPTI's records stopped (an_gpu_cupti_stopped):
			       * not checked, not counted as the plugin's only */
	double start_us, dur_us, dur_us_max;  /* |plugin - CUPTI|: starts' and durations' median, and the
					        * durations' largest */
	double late_us;       /* plugin - CUPTI, starts' median: how late the plugin's clock runs */
};

/* where a rank's NCCL kernels' times came from: BOTH, CUPTI's until its records stopped, the
 * plugin's after (plugin_kernels) */
enum { NSRC_NONE, NSRC_CUPTI, NSRC_PLUGIN, NSRC_BOTH };

#define MAX_GCOMMS 16
#define MAX_GDEV 16 /* devices told apart in one process */
#define MAX_GCTX 64 /* contexts told apart in one process: work in more is left out, as on other devices */
#define GCTX_NONE 255
#define MAX_GTHR 256 /* threads told apart in one process's CUPTI records of calls */
#define GTHR_NONE UINT16_MAX
enum { JOIN_EXT, JOIN_COMM_ORDER, JOIN_ORDER, JOIN_GRAPH, JOIN_KINDS };

struct gsite {            /* a call site that waited for the device: thread, stack, kind */
	int tid;
	uint32_t stack;
	int kind, what;
	double ms, calls;
	char frames[8][112];
	int nframes;
	struct pysite py;     /* its Python frames (2.12) */
	char range[AN_RANGE_NAME]; /* the innermost NVTX range open around it, "" none */
};

#define MAX_SITES 16

#define COPY_RING 8 /* a process's last CUDA copy calls kept (gpuproc.copy_at), and NCCL launches */
struct gpuproc {
	struct gwork *w;
	size_t nw, cw;
	struct gapi *api;
	size_t na, ca;
	struct gxc *xc;
	size_t nx, cx;
	struct gcall *call;
	size_t nc, cc;
	int depth;            /* NCCL group nesting, and the group's first call */
	size_t group_first;
	struct gsite site[MAX_SITES];
	int nsites;
	uint64_t records;
	struct namememo {     /* memo's answers for the file's names, the last one each slot saw */
		int64_t id[64];
		int8_t has[64];
	} nccl_name, launch_name, wait_name;
	int host_cuda;        /* the preload's wrappers saw CUDA calls: its host waits come from them */
	struct trace_name *names; /* the file's string table, copied: the kernels' names */
	size_t nnames;
	int placed;           /* times on the job's clock (place) */
	size_t nall;          /* its device work when read (w may hold only its NCCL kernels: below) */
	int nccl_only;        /* report --mpi: another process read the file, and splits its rank; of its
			       * work, only the NCCL kernels came here (the clocks and the instances) */
	int over;             /* its work was more than its share (part_record's keep, gpu.c): w holds only
			       * its NCCL kernels and large pageable copies, api none, and xc and call
			       * are kept for an_gpu_open, which reads the file again for the rest */
	struct gwork *pw;     /* while open (an_gpu_open): that list, set aside */
	size_t npw;
	int pplaced, opened;
	int device;           /* the device its split follows: where most of its NCCL kernels ran, else most of its
			       * work (devices_chosen); -1 none */
	uint32_t on_dev[MAX_GDEV], nccl_on_dev[MAX_GDEV]; /* its work, and its NCCL kernels, by device */
	uint32_t kept_on[MAX_GDEV]; /* of its work, what w holds, by device (devices_chosen) */
	struct gctx {         /* the contexts its work ran in (gwork.ctx), in the order they came */
		uint32_t id;      /* CUPTI's contextId */
		int8_t device;    /* its device (-1 beyond MAX_GDEV) */
	} ctxs[MAX_GCTX];
	int nctxs;
	uint32_t cthreads[MAX_GTHR]; /* the threads of its CUPTI records of calls (gapi.thread) */
	int ncthreads;
	uint64_t other_dev;   /* records of its work on other devices, left out */
	uint64_t other_ctx;   /* and in contexts past the first MAX_GCTX, left out */
	struct gcomm {        /* its communicators (nccl_init): the first MAX_GCOMMS */
		int32_t comm, nranks, rank;
		int8_t blocking;
	} comms[MAX_GCOMMS];
	int ncomms, allcomms;
	uint32_t join[JOIN_KINDS]; /* its NCCL kernels, by how they were joined to their calls */
	uint32_t nccl;        /* its NCCL kernels as CUPTI told them (an_gpu_identify) */
	/* the file's "gpu" record: capture's state and losses */
	char state[16], why[160];
	int64_t dropped, lead_ns;
	char client[64];      /* another CUPTI client that shared ddpspy's subscription ("" none) */
	char client_api[24];  /* its CUDA call kinds served with ddpspy's calls only ("runtime,driver"; "" none) */
	/* NCCL's profiler plugin (ncclplug.c): its events as read, and what became of them */
	struct gplug *plug;
	size_t np, cp;
	uint32_t groups;      /* NCCL groups ended so far (gcall.grp) */
	int nccl_src;         /* NSRC_*: where its NCCL kernels' times came from */
	struct plugstat pstat;
	int64_t shift;        /* taken off its plugin kernels' times when placed: how late the plugin's
			       * clock ran where CUPTI checked it (an_gpu_split), 0 none */
	/* whether CUPTI's records stopped before the run did (another client took its callbacks):
	 * every CUDA copy call the wrappers saw has a CUPTI record of its call, and so has every NCCL
	 * call that launches on a blocking communicator (its driver launch, inside the call), so a file
	 * that ended whole (CUPTI flushed) has none that returned after its last CUPTI record and
	 * before that flush began (the gpu record's stopped_ns); the ends of its last such calls (a
	 * ring each), and how many of those had none (part_loaded) */
	int64_t cupti_end, copy_at[COPY_RING], launch_at[COPY_RING];
	uint32_t copies, unrecorded, launches, unlaunched;
};

/* ncclplug.c: an nccl_kernel event into g (1: out of memory). an_plug_kernels also names CUPTI's
 * NCCL kernels in g->w that CUDA graphs' launches ran (no call's id joins them) by the plugin's
 * replays, where they pair (join[JOIN_GRAPH]) */
int an_plug_event(struct gpuproc *g, const struct trace_event *e);
/* g's plugin events as NCCL kernels on the process's clock, joined to g's calls (its call list
 * and communicators whole): *out (malloc'ed), how many returned; g->pstat's first part filled */
size_t an_plug_kernels(struct gpuproc *g, struct gwork **out);
/* the plugin's kernels k (n) against the CUPTI kernels in g->w: g->pstat's second part */
void an_plug_check(struct gpuproc *g, const struct gwork *k, size_t n);
void an_plug_free(struct gpuproc *g);

/* gpudev.c: the device of w's context (-1 none known) */
int an_gpu_work_device(const struct gpuproc *g, const struct gwork *w);
/* w's context and device, as a record names them, into g's table and w (counted by device) */
void an_gpu_on_device(struct gpuproc *g, struct gwork *w, int64_t device, int64_t ctx);
/* CUPTI's id of a call's thread as its index in g's table, added (GTHR_NONE: unknown, or past it) */
uint16_t an_gpu_api_thread(struct gpuproc *g, uint32_t id);
/* the same, looked up only: -1 not there */
int an_gpu_thread_of(const struct gpuproc *g, uint32_t id);
/* gpucover.c: where g's CUPTI records stopped before its last CUDA copy call or NCCL launch
 * (an_gpu_cupti_stopped), how long before it, in s; -1 when none came at all */
double an_gpu_stopped_s(const struct gpuproc *g);
/* whether g's CUPTI records stopped before the run did (copy calls or NCCL launches after them) */
static inline int an_gpu_cupti_stopped(const struct gpuproc *g)
{
	return g->unrecorded || g->unlaunched;
}
/* whether host time t (g's process clock) is after g's CUPTI records stopped: CUPTI saw nothing then */
static inline int an_gpu_past_stop(const struct gpuproc *g, int64_t t)
{
	return an_gpu_cupti_stopped(g) && g->cupti_end && t > g->cupti_end;
}
/* whether CUPTI timed g's NCCL kernels (all of them, or until its records stopped) */
static inline int an_gpu_nccl_cupti(const struct gpuproc *g)
{
	return g->nccl_src == NSRC_CUPTI || g->nccl_src == NSRC_BOTH;
}
/* whether rank index r's CUPTI records stopped inside its analysed steps (too early for steps.c to
 * leave the steps after it out): its device's timeline ends there, and its steps are split from its
 * host (gpustep.c) */
int an_gpu_stopped_inside(const struct analysis *a, int r);
/* the device g's split follows (g->device); its work on others, and in contexts past the table,
 * left out of g->w and counted */
void an_gpu_devices_chosen(struct gpuproc *g);

/* gpu.c: p's device work onto the job's clock (after clocks.c), once */
void an_gpu_place(struct proc *p);
/* gpujoin.c: g's work joined to its calls and collectives, in launch order (an_gpu_cmp_launch:
 * the order of any two works that differ) */
void an_gpu_identify(struct gpuproc *g);
/* g's communicator comm (its nccl_init), NULL when unknown */
const struct gcomm *an_gpu_comm(const struct gpuproc *g, int32_t comm);
int an_gpu_cmp_launch(const void *x, const void *y);

#endif
