/* NCCL's profiler plugin (NVIDIA/nccl ext-profiler, version 5: common/nccl_profiler.h): NCCL's own
 * account of when each collective's kernel ran on the GPU, which needs no CUPTI, so that NCCL is
 * timed on the GPU where another tool holds CUPTI (nsys, ncu). The constructor names this library
 * in NCCL_PROFILER_PLUGIN unless the program set it (DDPSPY_NCCL_PLUGIN=0: never); NCCL dlopens it
 * (the copy already loaded) at its first communicator and calls ncclProfiler_v5 below.
 *
 * init (every communicator): a context with NCCL's hash of it, and ddpspy's id of it where a
 * wrapped creation call made it on this thread (nccl.c fills it in when the call returns), asking
 * for Coll and KernelCh events. NCCL then also tells of each collective call, inside it, as a
 * CollApi event (src/enqueue.cc, collTaskAppend): its handle names the call ddpspy's wrapper is in
 * (communicator and number, nccl.c), and whether its stream was capturing into a CUDA graph. A
 * Coll event (the launching thread; for a captured call, each launch of its graph, from CUDA's
 * host-function thread) is the collective: its function and that function's sequence number in
 * the communicator, its count, and its call's CollApi handle as parent. Each KernelCh event
 * (NCCL's progress thread, once the kernel ran on a channel) carries the channel's start on the
 * GPU's %globaltimer, its stop in recordEventState(KernelChStop); at its stopEvent one nccl_kernel
 * event is written (docs/format.md) on the thread NCCL called from: what the collector needs to
 * join it to the nccl_coll call: the call its CollApi event named, else by communicator,
 * operation and sequence number per operation.
 * Handles are slots of fixed pools, never freed: NCCL may stop a Coll event before its channels'
 * events come (its progress thread is later), so a slot is reused only 4096 collectives on; a
 * captured call's CollApi slot never is (its graph may be launched for the rest of the run): past
 * 16384 such calls in a process their replays are told as replays of no known call.
 * Nothing here runs unless tracing is on (init fails otherwise: NCCL then disables the plugin). */
#include "internal.h"
#include "../common/nccl_profiler.h"

#include <stdio.h>
#include <string.h>

#define CTXS 1024   /* communicators a process can be told of; later ones get no events */
#define SLOTS 4096  /* collectives (and channels) whose events may be in flight */
#define GRAPHED 16384 /* captured collective calls a process can name */

struct pctx {
	uint64_t hash;
	int64_t comm;  /* ddpspy's id (nccl_init's comm), -1 unknown */
	int rank, nranks;
	uint64_t made; /* when NCCL told it (raw clock) */
};
struct papi {           /* a collective call's CollApi event */
	uint64_t type;  /* NCCLP_COLL_API */
	int64_t comm, seq; /* the nccl_coll call's communicator and number; seq -1: ddpspy recorded no call */
	int captured;   /* its stream was capturing: what NCCL launches under it are its graph's replays */
};
struct pcoll {
	uint64_t type; /* (NCCLP_COLL; first, as every handle's) */
	struct pctx *ctx;
	int op;
	int64_t seq, count;
	int64_t call_comm, call_seq; /* its call (its CollApi event's, copied: that slot is reused), seq -1 none */
	int replay;     /* a launch of a graph that captured that call */
};
struct pch {
	uint64_t type; /* NCCLP_KERNEL_CH */
	struct pcoll *coll;
	int channel;
	uint64_t start, stop;
};

static struct pctx ctxs[CTXS];
static unsigned nctx;
static struct pcoll colls[SLOTS];
static struct pch chans[SLOTS];
static struct papi apis[SLOTS], graphed[GRAPHED];
static struct papi graphed_lost = { NCCLP_COLL_API, -1, -1, 1 }; /* (past GRAPHED: a replay of an unknown call) */
static unsigned ncoll, nchan, napi, ngraphed;
static uint64_t group_handle = NCCLP_GROUP; /* (one handle for every Group event: nothing in it) */

/* NCCL's function names (ncclFuncToString) as ddpspy's operations */
static int op_of(const char *f)
{
	static const struct { const char *name; int op; } ops[] = {
		{"AllReduce", DDPSPY_OP_ALLREDUCE}, {"AllGather", DDPSPY_OP_ALLGATHER}, {"Broadcast", DDPSPY_OP_BCAST},
		{"Reduce", DDPSPY_OP_REDUCE}, {"ReduceScatter", DDPSPY_OP_REDUCE_SCATTER},
		{"AlltoAll", DDPSPY_OP_ALLTOALL}, {"AllToAll", DDPSPY_OP_ALLTOALL}, {"Gather", DDPSPY_OP_GATHER},
		{"Scatter", DDPSPY_OP_SCATTER}, {"SendRecv", DDPSPY_OP_SENDRECV},
	};
	for (size_t i = 0; f && i < sizeof ops / sizeof *ops; i++)
		if (!strcmp(f, ops[i].name))
			return ops[i].op;
	return -1;
}

static int p_init(void **context, uint64_t hash, int *mask, const char *name, int nnodes, int nranks, int rank,
		  ncclp_logger_t log)
{
	(void)name, (void)nnodes, (void)log;
	unsigned i = __atomic_fetch_add(&nctx, 1, __ATOMIC_RELAXED);
	if (!__atomic_load_n(&dsp_on, __ATOMIC_RELAXED) || i >= CTXS)
		return 1; /* (NCCL goes on without the plugin) */
	ctxs[i] = (struct pctx){ hash, -1, rank, nranks, dsp_now() };
	*context = &ctxs[i];
	*mask = NCCLP_COLL | NCCLP_KERNEL_CH;
	dsp_tls.nccl_pctx = &ctxs[i]; /* (nccl.c names it once the creating call returns) */
	return 0;
}

/* (only a context made during the call that began at since: one left by a call ddpspy did not
 * record, made on this thread, is not this communicator) */
void dsp_ncclprof_named(void *pctx, int64_t comm, uint64_t since)
{
	struct pctx *c = pctx;
	if (c && c->made >= since)
		__atomic_store_n(&c->comm, comm, __ATOMIC_RELEASE);
}

static int p_start(void *context, void **handle, ncclp_descr_v5_t *d)
{
	*handle = NULL;
	if (d->type == NCCLP_GROUP) {
		*handle = &group_handle;
	} else if (d->type == NCCLP_COLL_API) { /* (inside the call, on its thread) */
		const struct dsp_tls *t = &dsp_tls;
		struct papi *a = &graphed_lost;
		if (!d->collApi.graphCaptured) {
			a = &apis[__atomic_fetch_add(&napi, 1, __ATOMIC_RELAXED) % SLOTS];
		} else {
			unsigned i = __atomic_fetch_add(&ngraphed, 1, __ATOMIC_RELAXED);
			a = i < GRAPHED ? &graphed[i] : a;
		}
		if (a != &graphed_lost)
			*a = (struct papi){ NCCLP_COLL_API, t->nccl_seq1 ? t->nccl_comm : -1, t->nccl_seq1 - 1,
					    d->collApi.graphCaptured };
		*handle = a;
	} else if (d->type == NCCLP_COLL && context) {
		struct pcoll *c = &colls[__atomic_fetch_add(&ncoll, 1, __ATOMIC_RELAXED) % SLOTS];
		const struct papi *a = d->parentObj && *(uint64_t *)d->parentObj == NCCLP_COLL_API ? d->parentObj : NULL;
		*c = (struct pcoll){ NCCLP_COLL, context, op_of(d->coll.func), (int64_t)d->coll.seqNumber,
				     (int64_t)d->coll.count, a && a->seq >= 0 ? a->comm : -1, a ? a->seq : -1,
				     a ? a->captured : 0 };
		*handle = c;
	} else if (d->type == NCCLP_KERNEL_CH && d->parentObj && *(uint64_t *)d->parentObj == NCCLP_COLL) {
		struct pch *k = &chans[__atomic_fetch_add(&nchan, 1, __ATOMIC_RELAXED) % SLOTS];
		*k = (struct pch){ NCCLP_KERNEL_CH, d->parentObj, d->kernelCh.channelId, d->kernelCh.pTimer, 0 };
		*handle = k;
	}
	return 0;
}

static int p_record(void *handle, int state, ncclp_state_args_v5_t *a)
{
	if (handle && *(uint64_t *)handle == NCCLP_KERNEL_CH && state == NCCLP_KERNEL_CH_STOP && a)
		((struct pch *)handle)->stop = a->kernelCh.pTimer;
	return 0;
}

static int p_stop(void *handle)
{
	if (!handle || *(uint64_t *)handle != NCCLP_KERNEL_CH)
		return 0;
	const struct pch *k = handle;
	const struct pcoll *c = k->coll;
	struct dsp_tls *t = &dsp_tls;
	if (!k->stop || !__atomic_load_n(&dsp_on, __ATOMIC_RELAXED) || t->state == TS_OFF)
		return 0;
	int g = t->guard;
	t->guard = 1;
	uint64_t now = dsp_now();
	int known = c->call_seq >= 0 && c->call_comm != -1;
	int64_t a[12] = { __atomic_load_n(&c->ctx->comm, __ATOMIC_ACQUIRE), (int64_t)(c->ctx->hash >> 2), c->op, c->seq,
			  c->count, k->channel, (int64_t)k->start, (int64_t)k->stop, c->ctx->rank, known ? c->call_comm : -1,
			  known ? c->call_seq : -1, c->replay };
	dsp_emit(t, DDPSPY_EV_NCCL_KERNEL, now, now, 12, a);
	t->guard = g;
	return 0;
}

static int p_finalize(void *context)
{
	(void)context; /* (its slot stays: a late channel event may still name it) */
	return 0;
}

#pragma GCC visibility push(default)
ncclp_v5_t ncclProfiler_v5 = { "ddpspy", p_init, p_start, p_stop, p_record, p_finalize };
#pragma GCC visibility pop

/* Constructor: NCCL is told of this library unless the program chose a plugin (or none). */
void dsp_ncclprof_init(void)
{
	if (dsp_cfg.nccl_plugin && !dsp_inject("NCCL_PROFILER_PLUGIN"))
		dsp_log("NCCL_PROFILER_PLUGIN is the program's (%s): NCCL's own GPU times are not recorded",
			getenv("NCCL_PROFILER_PLUGIN"));
}
