/* A stand-in for libnccl.so.2 on the simulated device (testapps/simgpu/, `make sim`): NCCL's API
 * with the real ABI (compiled against the installed nccl.h; every ncclX a weak alias of pncclX, as
 * in the real library), for the ranks of one host. A test double, never part of the product. It
 * moves no data; it models time:
 *  - a communicator is a shared memory segment named by the unique id (ncclGetUniqueId), which
 *    every rank maps in ncclCommInitRank (waiting, as the real one does, for all of them);
 *  - a collective is enqueued on its stream at once (the call never waits) as one kernel,
 *    "ncclDevKernel_<Op>_..." and launched, as NCCL launches, through a driver call
 *    (cuLaunchKernel); its start is the latest of every rank's "this stream could start it" and
 *    it lasts SIMGPU_NCCL_US (10) plus its bytes over SIMGPU_NCCL_GBS (100) bus bandwidth, in the
 *    nccl-tests convention: allreduce 2(n-1)/n of its bytes, allgather, reduce-scatter, alltoall,
 *    gather and scatter (n-1)/n, broadcast, reduce, send and recv all of them;
 *  - send and recv pair by peer, in call order, and a send's kernel waits for its receive's start
 *    whatever its size (a send "is allowed to block until the corresponding recv() is called":
 *    NVIDIA/nccl issue 783; a small one that fits NCCL's buffer may end before: not modelled);
 *    between ncclGroupStart and ncclGroupEnd calls are
 *    collected and enqueued at the end as one kernel (ncclDevKernel_SendRecv when it holds only
 *    sends and receives) that starts when all of its parts can.
 * The ranks agree through the segment, from the simulated cudart's device thread (simgpu.h). Not
 * simulated: user buffers and windows. ncclCommSplit makes the communicators of each color from the
 * colors and keys every rank leaves in the parent's segment; ncclCommShrink the communicator of the
 * ranks not excluded, which alone call it; ncclCommInitRankScalable joins by its first id.
 *
 * As NCCL 2.28.9 was seen to do on an H200 (docs/gpu.md):
 *  - kernel names are mangled, of the collective's operation, reduction and type:
 *    _Z39ncclDevKernel_AllReduce_Sum_f32_RING_LL24ncclDevKernelArgsStorageILm4096EE;
 *  - the launch is a driver call, cuLaunchKernelEx, and the enqueue makes runtime calls of its own
 *    (cudaGetDevice, cudaStreamIsCapturing), all under the caller's external correlation id;
 *  - a communicator made nonblocking (ncclConfig_t.blocking = 0) returns ncclInProgress from its
 *    creation and its operations, and launches from a thread of its own once the call returned
 *    (the caller's external id is not on that thread); ncclCommGetAsyncError says ncclInProgress
 *    until it has;
 *  - at world size 1 an in-place collective launches nothing and makes no CUDA call; an
 *    out-of-place one is one device-to-device cudaMemcpyAsync of its bytes on its stream; a send to
 *    itself is a SendRecv kernel.
 * Under stream capture (cudaStreamBeginCapture) a call's kernel becomes a node of the graph: it is
 * run, its ranks agreeing, and numbered at each of the graph's launches (simgpu.h's replay), as
 * NCCL's "persistent" plans are; whether the stream captures is asked of the simulated cudart
 * (simgpu_capturing) without a call CUPTI would see (NCCL asks with cudaStreamGetCaptureInfo).
 * A nonblocking communicator's captured call is launched into the capture by its own thread, as
 * its other calls are (src/group.cc: ncclGroupEndInternal starts a nonblocking group's job on a
 * thread of its own whether or not its stream captures); the program waits for it
 * (ncclCommGetAsyncError) before it ends the capture.
 * A profiler plugin (NCCL_PROFILER_PLUGIN) is loaded and called as NCCL 2.28.9 does: nccl_prof.c. */
#include <errno.h>
#include <pthread.h>
#include <fcntl.h>
#include <nccl.h>
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "simgpu.h"
#include "nccl_prof.h"

#define MAXR 16     /* ranks of a communicator */
#define NSLOT 256   /* collectives in flight per communicator */
#define NP2P 32     /* messages in flight per ordered pair of ranks */
#define MAGIC "simgpu-nccl-"

struct slot { uint64_t seq1[MAXR], ready[MAXR], done1[MAXR]; };
struct pslot { uint64_t seq1[2], ready[2], done1[2]; };
#define NSPLIT 8  /* splits of a communicator in flight */
struct split { uint64_t seq1[MAXR], done1[MAXR]; int color[MAXR], key[MAXR]; };
struct shm {
	uint32_t nranks, joined;
	struct slot slots[NSLOT];
	struct pslot p2p[MAXR][MAXR][NP2P];
	struct split splits[NSPLIT];
};

struct launcher;

struct ncclComm {
	int rank, nranks;
	struct launcher *nb;             /* a nonblocking communicator's launching thread, else NULL */
	char name[NCCL_UNIQUE_ID_BYTES]; /* its segment's name */
	uint64_t splits;                 /* ncclCommSplit calls so far */
	struct shm *shm;
	uint64_t seq;                       /* collectives enqueued */
	uint64_t sent[MAXR], received[MAXR]; /* messages to and from each peer */
	struct prof_comm prof;              /* the profiler plugin's part (nccl_prof.c) */
};

enum { OP_COLL, OP_SEND, OP_RECV };
struct op {
	int kind;
	struct ncclComm *comm;
	uint64_t seq;          /* OP_COLL: the collective's; else the message's on its pair */
	int peer;
	uint64_t dur;
	const char *name;
	void *stream;
	const void *src;       /* OP_COLL at world size 1: the copy an out-of-place one is */
	void *dst;
	size_t bytes;
	int func, root;        /* OP_COLL: PF_*, and what the profiler plugin is told of it */
	size_t count;
	ncclDataType_t type;
	void *prof;            /* its Coll event of the profiler plugin, NULL none */
	void *capi;            /* its call's CollApi event of the plugin, NULL none */
	int captured;          /* called on a stream capturing into a CUDA graph */
};
struct sim {
	struct simgpu_coll c;  /* first: the device thread hands it back */
	uint64_t t0, local;    /* when it started on every rank (the last rank's start), and here */
	int replay;            /* a graph's replay of captured ops: their Coll events when it starts */
	int nops;
	struct op ops[];
};

static __thread int depth;       /* ncclGroupStart nesting */
static __thread struct op *grouped;
static __thread int ngrouped, cgrouped;
static __thread ncclResult_t group_error;

static uint32_t (*collective)(void *stream, int per_thread, struct simgpu_coll *c);
static int (*capturing)(void *stream);

static void pause_us(long us)
{
	/* a raw system call: the tools under test do not see the stand-in's own waits */
	struct timespec ts = { 0, us * 1000 };
	syscall(SYS_nanosleep, &ts, NULL);
}

static double env_num(const char *name, double def)
{
	const char *v = getenv(name);
	char *end;
	double d = v ? strtod(v, &end) : 0;
	return v && *v && !*end && d > 0 ? d : def;
}

static size_t type_size(ncclDataType_t t)
{
	static const size_t sz[ncclNumTypes] = { 1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1 };
	return (unsigned)t < ncclNumTypes ? sz[t] : 0;
}

/* ---- agreeing on a start, from the device thread ---- */

static uint64_t ld(uint64_t *p)
{
	return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}

/* participants' indices i < n publish at slot words seq1/ready/done1 (stride 1) */
static void publish(uint64_t *seq1, uint64_t *ready, uint64_t *done1, int n, int me, uint64_t seq, uint64_t ring,
		    uint64_t local)
{
	/* the slot's last use (seq - ring) must be over for everyone before it is written again */
	for (int r = 0; seq >= ring && r < n; r++)
		while (ld(&done1[r]) < seq - ring + 1)
			pause_us(20);
	ready[me] = local;
	__atomic_store_n(&seq1[me], seq + 1, __ATOMIC_RELEASE);
}

static uint64_t agree(uint64_t *seq1, uint64_t *ready, uint64_t *done1, int n, int me, uint64_t seq)
{
	uint64_t start = 0;
	for (int r = 0; r < n; r++) {
		while (ld(&seq1[r]) != seq + 1)
			pause_us(20);
		start = ready[r] > start ? ready[r] : start;
	}
	__atomic_store_n(&done1[me], seq + 1, __ATOMIC_RELEASE);
	return start;
}

static struct pslot *pslot_of(const struct op *o)
{
	int from = o->kind == OP_SEND ? o->comm->rank : o->peer, to = o->kind == OP_SEND ? o->peer : o->comm->rank;
	return &o->comm->shm->p2p[from][to][o->seq % NP2P];
}

/* the name NCCL gives a datatype (ncclDatatypeToString), for the profiler plugin */
static const char *type_name(ncclDataType_t t);

static uint64_t sim_start(struct simgpu_coll *c, uint64_t local)
{
	struct sim *s = (struct sim *)c;
	uint64_t start = local, dur = 0;
	for (int i = 0; s->replay && i < s->nops; i++) { /* (the graph's host node: its plan's events) */
		struct op *o = &s->ops[i];
		if (o->kind != OP_COLL)
			continue;
		o->prof = prof_coll(&o->comm->prof, o->func, o->src, o->dst, o->count, o->root, type_name(o->type),
				    o->capi, 1);
		prof_coll_launched(&o->comm->prof, o->prof, 1);
	}
	for (int i = 0; i < s->nops; i++) { /* every part published first: a group's parts wait together */
		struct op *o = &s->ops[i];
		if (o->kind == OP_COLL) {
			struct slot *sl = &o->comm->shm->slots[o->seq % NSLOT];
			publish(sl->seq1, sl->ready, sl->done1, o->comm->nranks, o->comm->rank, o->seq, NSLOT, local);
		} else {
			struct pslot *p = pslot_of(o);
			publish(p->seq1, p->ready, p->done1, 2, o->kind == OP_RECV, o->seq, NP2P, local);
		}
	}
	for (int i = 0; i < s->nops; i++) {
		struct op *o = &s->ops[i];
		uint64_t t;
		if (o->kind == OP_COLL) {
			struct slot *sl = &o->comm->shm->slots[o->seq % NSLOT];
			t = agree(sl->seq1, sl->ready, sl->done1, o->comm->nranks, o->comm->rank, o->seq);
		} else {
			struct pslot *p = pslot_of(o);
			t = agree(p->seq1, p->ready, p->done1, 2, o->kind == OP_RECV, o->seq);
		}
		start = t > start ? t : start;
		dur = o->dur > dur ? o->dur : dur;
	}
	c->dur = dur;
	s->t0 = start;
	s->local = local;
	return start;
}

static void sim_done(struct simgpu_coll *c)
{
	struct sim *s = (struct sim *)c;
	for (int i = 0; i < s->nops; i++)
		prof_coll_ran(&s->ops[i].comm->prof, s->ops[i].prof, s->local, s->t0 + c->dur);
	free(c);
}

static const char *type_name(ncclDataType_t t)
{
	static const char *const names[ncclNumTypes] = { "ncclInt8", "ncclUint8", "ncclInt32", "ncclUint32",
							 "ncclInt64", "ncclUint64", "ncclFloat16", "ncclFloat32",
							 "ncclFloat64", "ncclBfloat16", "ncclFloat8e4m3",
							 "ncclFloat8e5m2" };
	return (unsigned)t < ncclNumTypes ? names[t] : "ncclUnknown";
}

/* ---- enqueueing ---- */

/* A kernel's name as NCCL 2.28's are: "ncclDevKernel_<op>[_<reduction>_<type>]_RING_LL", mangled as
 * the device function of one argument, ncclDevKernelArgsStorage<4096> (so on an H200:
 * _Z39ncclDevKernel_AllReduce_Sum_f32_RING_LL24ncclDevKernelArgsStorageILm4096EE).
 * SIMGPU_NCCL_KERNEL_PREFIX in place of "ncclDevKernel_" (NCCL before 2.19 said ncclKernel_; a test
 * names them so that only the correlation to the NCCL call tells them). Names stay valid as long as
 * the program runs (simgpu.h): one copy of each, kept. redop, type -1: none in the name. */
static const char *kernel_name(const char *op, int redop, int type)
{
	static const char *const types[ncclNumTypes] = { "i8", "u8", "i32", "u32", "i64", "u64", "f16", "f32", "f64",
							 "bf16", "f8e4m3", "f8e5m2" };
	static const char *const redops[] = { "Sum", "Prod", "MinMax", "MinMax", "PreMulSum" }; /* ncclSum..ncclAvg */
	static struct name { char *s; struct name *next; } *names;
	static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
	const char *prefix = getenv("SIMGPU_NCCL_KERNEL_PREFIX");
	char plain[128], mangled[192];
	if (redop >= 0 && redop < 5 && type >= 0 && type < ncclNumTypes)
		snprintf(plain, sizeof plain, "%s%s_%s_%s_RING_LL", prefix && *prefix ? prefix : "ncclDevKernel_", op,
			 redops[redop], types[type]);
	else
		snprintf(plain, sizeof plain, "%s%s%s", prefix && *prefix ? prefix : "ncclDevKernel_", op,
			 strcmp(op, "SendRecv") ? "_RING_LL" : "");
	snprintf(mangled, sizeof mangled, "_Z%zu%s24ncclDevKernelArgsStorageILm4096EE", strlen(plain), plain);
	pthread_mutex_lock(&mu);
	struct name *n = names;
	while (n && strcmp(n->s, mangled))
		n = n->next;
	if (!n && (n = malloc(sizeof *n))) {
		if ((n->s = strdup(mangled))) {
			n->next = names;
			names = n;
		} else {
			free(n);
			n = NULL;
		}
	}
	pthread_mutex_unlock(&mu);
	return n ? n->s : "ncclDevKernel_unnamed";
}

/* the runtime's calls an enqueue makes, as NCCL's own (its static cudart) make them: not the
 * program's, so not through a preloaded library's wrappers */
static struct {
	cudaError_t (*get_device)(int *);
	cudaError_t (*is_capturing)(cudaStream_t, enum cudaStreamCaptureStatus *);
	cudaError_t (*memcpy_async)(void *, const void *, size_t, enum cudaMemcpyKind, cudaStream_t);
} RT;

static void runtime_calls(void *stream)
{
	int dev;
	enum cudaStreamCaptureStatus st;
	if (RT.get_device) {
		RT.get_device(&dev);
		RT.get_device(&dev);
	}
	if (RT.is_capturing)
		RT.is_capturing(stream, &st);
}

/* a launch of a graph that captured tmpl's ops: their own collective, numbered anew (the same
 * order on every rank, as the program launches its graphs alike), its Coll events when it starts */
static struct simgpu_coll *replayed(struct simgpu_coll *tmpl)
{
	const struct sim *t = (const struct sim *)tmpl;
	struct sim *s = malloc(sizeof *s + (size_t)t->nops * sizeof *t->ops);
	if (!s)
		return NULL;
	memcpy(s, t, sizeof *s + (size_t)t->nops * sizeof *t->ops);
	s->c.replay = NULL;
	s->replay = 1;
	for (int i = 0; i < s->nops; i++) {
		struct op *o = &s->ops[i];
		uint64_t *k = o->kind == OP_COLL ? &o->comm->seq : o->kind == OP_SEND ? &o->comm->sent[o->peer]
										: &o->comm->received[o->peer];
		o->seq = __atomic_fetch_add(k, 1, __ATOMIC_RELAXED);
		o->prof = NULL;
	}
	return &s->c;
}

/* ops' work enqueued now, from the calling thread: at world size 1 a collective is a copy, or
 * nothing in place; the rest one kernel launched through the driver. Captured ops (a stream
 * capturing into a graph) are the graph's: no profiler event until it is launched (replayed). */
static ncclResult_t launch_now(const struct op *ops, int n)
{
	struct sim *s = calloc(1, sizeof *s + (size_t)n * sizeof *ops);
	if (!s)
		return ncclSystemError;
	int p2p = 1, k = 0, calls = 0, captured = ops[0].captured;
	for (int i = 0; i < n; i++) {
		struct op o = ops[i];
		if (o.kind == OP_COLL && !captured) /* (its profiler event on the launching thread) */
			o.prof = prof_coll(&o.comm->prof, o.func, o.src, o.dst, o.count, o.root, type_name(o.type),
					   o.capi, 0);
		if (o.kind == OP_COLL && o.comm->nranks == 1) { /* (one rank: nothing to wait for) */
			if (o.src != o.dst && o.bytes) {
				runtime_calls(o.stream);
				if (RT.memcpy_async)
					RT.memcpy_async(o.dst, o.src, o.bytes, cudaMemcpyDeviceToDevice, o.stream);
			}
			prof_coll_launched(&o.comm->prof, o.prof, 0);
			continue;
		}
		if (!calls++)
			runtime_calls(o.stream);
		p2p &= o.kind != OP_COLL;
		s->ops[k++] = o;
	}
	if (!k) {
		free(s);
		return ncclSuccess;
	}
	s->nops = k;
	s->c = (struct simgpu_coll){ .start = sim_start, .done = sim_done, .dur = s->ops[0].dur,
				     .name = p2p ? kernel_name("SendRecv", -1, -1) : s->ops[0].name, .grid = 2, .block = 640,
				     .replay = captured ? replayed : NULL };
	for (int i = 0; i < k && !captured; i++) /* (before the device's thread may have run it) */
		prof_coll_launched(&s->ops[i].comm->prof, s->ops[i].prof, 1);
	collective(s->ops[0].stream, 0, &s->c);
	return ncclSuccess;
}

/* A nonblocking communicator's launches: made by a thread of its own, in the order of the calls */
struct launcher {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct job { struct op *ops; int n; struct job *next; } *head, **tail;
	int pending;  /* calls not launched yet */
};

static void *launcher_main(void *arg)
{
	struct launcher *l = arg;
	pthread_mutex_lock(&l->mu);
	for (;;) {
		while (!l->head)
			pthread_cond_wait(&l->cv, &l->mu);
		struct job *j = l->head;
		l->head = j->next;
		if (!l->head)
			l->tail = &l->head;
		pthread_mutex_unlock(&l->mu);
		launch_now(j->ops, j->n);
		free(j->ops);
		free(j);
		pthread_mutex_lock(&l->mu);
		l->pending--;
		pthread_cond_broadcast(&l->cv);
	}
	return NULL;
}

static struct launcher *launcher_new(void)
{
	struct launcher *l = calloc(1, sizeof *l);
	pthread_t t;
	if (!l)
		return NULL;
	pthread_mutex_init(&l->mu, NULL);
	pthread_cond_init(&l->cv, NULL);
	l->tail = &l->head;
	if (pthread_create(&t, NULL, launcher_main, l) != 0) {
		free(l);
		return NULL;
	}
	pthread_detach(t);
	return l;
}

static ncclResult_t launch(const struct op *ops, int n)
{
	struct launcher *l = ops[0].comm->nb;
	if (!l) /* (captured too: src/group.cc launches a nonblocking group on its own thread, graph or not) */
		return launch_now(ops, n);
	struct job *j = malloc(sizeof *j);
	struct op *copy = malloc((size_t)n * sizeof *ops);
	if (!j || !copy) {
		free(j);
		free(copy);
		return ncclSystemError;
	}
	memcpy(copy, ops, (size_t)n * sizeof *ops);
	*j = (struct job){ copy, n, NULL };
	pthread_mutex_lock(&l->mu);
	*l->tail = j;
	l->tail = &j->next;
	l->pending++;
	pthread_cond_broadcast(&l->cv);
	pthread_mutex_unlock(&l->mu);
	return ncclInProgress;
}

/* one operation: enqueued now, or collected until the group ends */
static ncclResult_t submit(struct op o)
{
	if (!o.comm || !collective)
		return ncclInvalidArgument;
	if (!depth)
		return launch(&o, 1);
	if (ngrouped == cgrouped) {
		int cap = cgrouped ? cgrouped * 2 : 16;
		struct op *g = realloc(grouped, (size_t)cap * sizeof *g);
		if (!g)
			return group_error = ncclSystemError;
		grouped = g;
		cgrouped = cap;
	}
	grouped[ngrouped++] = o;
	return ncclSuccess;
}

/* bus time of bytes, scaled as nccl-tests scales each operation */
static uint64_t model(double factor, size_t bytes)
{
	return (uint64_t)(env_num("SIMGPU_NCCL_US", 10) * 1000 + factor * (double)bytes / env_num("SIMGPU_NCCL_GBS", 100));
}

/* a collective over count elements of t per part, per parts in all (its receive buffer's);
 * recv_parts: how many of those parts the receive buffer holds (a reduce-scatter's 1) */
static ncclResult_t coll(int func, const char *op, int redop, double factor, const void *src, void *dst, size_t count,
			 ncclDataType_t t, size_t per, size_t recv_parts, int root, ncclComm_t comm, cudaStream_t stream)
{
	if (!comm || !type_size(t))
		return ncclInvalidArgument;
	double n = comm->nranks;
	int captured = capturing && capturing(stream);
	/* (a captured one is numbered at each replay: a number taken now no rank would ever run) */
	uint64_t seq = captured ? 0 : __atomic_fetch_add(&comm->seq, 1, __ATOMIC_RELAXED);
	struct op o = { .kind = OP_COLL, .comm = comm, .seq = seq, .stream = stream,
			.name = kernel_name(op, redop, redop >= 0 ? (int)t : -1),
			.dur = model(factor < 0 ? (n - 1) / n * -factor : factor, count * type_size(t) * per),
			.src = src, .dst = dst, .bytes = count * type_size(t) * recv_parts, .func = func, .root = root,
			.count = count, .type = t, .captured = captured };
	/* (one rank: NCCL launches its copy at once, src/enqueue.cc ncclLaunchOneRank, telling no CollApi) */
	o.capi = comm->nranks > 1 ? prof_coll_api(&comm->prof, func, count, type_name(t), root, stream, depth, captured)
				  : NULL;
	ncclResult_t rc = submit(o);
	if (!depth)
		prof_group_api_end();
	return rc;
}

static ncclResult_t p2p(int kind, size_t count, ncclDataType_t t, int peer, ncclComm_t comm, cudaStream_t stream)
{
	if (!comm || !type_size(t) || peer < 0 || peer >= comm->nranks)
		return ncclInvalidArgument;
	uint64_t *k = kind == OP_SEND ? &comm->sent[peer] : &comm->received[peer];
	int captured = capturing && capturing(stream);
	struct op o = { .kind = kind, .comm = comm, .seq = captured ? 0 : __atomic_fetch_add(k, 1, __ATOMIC_RELAXED),
			.peer = peer, .stream = stream, .dur = model(1, count * type_size(t)), .captured = captured };
	return submit(o);
}

#define API(ret, name, params) \
	ret name params __attribute__((weak, alias("p" #name))); \
	ret p##name params

#define NR(comm) ((comm) ? (size_t)(comm)->nranks : 0)

API(ncclResult_t, ncclAllReduce, (const void *s, void *r, size_t count, ncclDataType_t t, ncclRedOp_t op, ncclComm_t comm,
				  cudaStream_t stream))
{
	return coll(PF_ALLREDUCE, "AllReduce", (int)op, -2, s, r, count, t, 1, 1, -1, comm, stream);
}

API(ncclResult_t, ncclBroadcast, (const void *s, void *r, size_t count, ncclDataType_t t, int root, ncclComm_t comm,
				  cudaStream_t stream))
{
	return coll(PF_BROADCAST, "Broadcast", -1, 1, s, r, count, t, 1, 1, root, comm, stream);
}

API(ncclResult_t, ncclBcast, (void *b, size_t count, ncclDataType_t t, int root, ncclComm_t comm, cudaStream_t stream))
{
	return coll(PF_BROADCAST, "Broadcast", -1, 1, b, b, count, t, 1, 1, root, comm, stream);
}

API(ncclResult_t, ncclReduce, (const void *s, void *r, size_t count, ncclDataType_t t, ncclRedOp_t op, int root,
			       ncclComm_t comm, cudaStream_t stream))
{
	return coll(PF_REDUCE, "Reduce", (int)op, 1, s, r, count, t, 1, 1, root, comm, stream);
}

API(ncclResult_t, ncclAllGather, (const void *s, void *r, size_t count, ncclDataType_t t, ncclComm_t comm,
				  cudaStream_t stream))
{
	return coll(PF_ALLGATHER, "AllGather", -1, -1, s, r, count, t, NR(comm), NR(comm), -1, comm, stream);
}

API(ncclResult_t, ncclReduceScatter, (const void *s, void *r, size_t count, ncclDataType_t t, ncclRedOp_t op,
				      ncclComm_t comm, cudaStream_t stream))
{
	return coll(PF_REDUCESCATTER, "ReduceScatter", (int)op, -1, s, r, count, t, NR(comm), 1, -1, comm, stream);
}

API(ncclResult_t, ncclAlltoAll, (const void *s, void *r, size_t count, ncclDataType_t t, ncclComm_t comm,
				 cudaStream_t stream))
{
	return coll(PF_ALLTOALL, "SendRecv", -1, -1, s, r, count, t, NR(comm), NR(comm), -1, comm, stream);
}

API(ncclResult_t, ncclGather, (const void *s, void *r, size_t count, ncclDataType_t t, int root, ncclComm_t comm,
			       cudaStream_t stream))
{
	return coll(PF_GATHER, "SendRecv", -1, -1, s, r, count, t, NR(comm), NR(comm), root, comm, stream);
}

API(ncclResult_t, ncclScatter, (const void *s, void *r, size_t count, ncclDataType_t t, int root, ncclComm_t comm,
				cudaStream_t stream))
{
	return coll(PF_SCATTER, "SendRecv", -1, -1, s, r, count, t, NR(comm), 1, root, comm, stream);
}

API(ncclResult_t, ncclSend, (const void *s, size_t count, ncclDataType_t t, int peer, ncclComm_t comm,
			     cudaStream_t stream))
{
	return p2p(OP_SEND, count, t, peer, comm, stream);
}

API(ncclResult_t, ncclRecv, (void *r, size_t count, ncclDataType_t t, int peer, ncclComm_t comm, cudaStream_t stream))
{
	return p2p(OP_RECV, count, t, peer, comm, stream);
}

API(ncclResult_t, ncclGroupStart, (void))
{
	if (!depth++) {
		ngrouped = 0;
		group_error = ncclSuccess;
	}
	return ncclSuccess;
}

API(ncclResult_t, ncclGroupEnd, (void))
{
	if (depth <= 0)
		return ncclInvalidUsage;
	if (--depth)
		return ncclSuccess;
	ncclResult_t rc = group_error;
	if (rc == ncclSuccess && ngrouped)
		rc = launch(grouped, ngrouped);
	ngrouped = 0;
	prof_group_api_end();
	return rc;
}

/* ---- communicators ---- */

API(ncclResult_t, ncclGetVersion, (int *version))
{
	if (!version)
		return ncclInvalidArgument;
	*version = NCCL_VERSION_CODE;
	return ncclSuccess;
}

API(ncclResult_t, ncclGetUniqueId, (ncclUniqueId * id))
{
	unsigned char r[8];
	int f = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
	if (!id || f < 0 || read(f, r, sizeof r) != (ssize_t)sizeof r) {
		if (f >= 0)
			close(f);
		return id ? ncclSystemError : ncclInvalidArgument;
	}
	close(f);
	memset(id, 0, sizeof *id);
	snprintf(id->internal, sizeof id->internal, "/" MAGIC "%02x%02x%02x%02x%02x%02x%02x%02x", r[0], r[1], r[2], r[3],
		 r[4], r[5], r[6], r[7]);
	return ncclSuccess;
}

struct prof_args {
	struct prof_comm *p;
	uint64_t hash;
	int nranks, rank;
};

static void *prof_init_job(void *arg)
{
	struct prof_args *a = arg;
	prof_init(a->p, a->hash, a->nranks, a->rank);
	return NULL;
}

/* joins the communicator of segment name (a unique id's, or a split's) as rank of nranks; config
 * (NULL none) blocking 0 makes it nonblocking: NCCL then initializes it on a thread of its own
 * (src/group.cc: a nonblocking communicator's init job runs in ncclAsyncJobMain on a new thread,
 * and the profiler plugin's init with it, src/init.cc), modelled by calling the plugin's init
 * from a thread made for it */
static ncclResult_t join(ncclComm_t *out, int nranks, const char *name, int rank, const ncclConfig_t *config)
{
	if (!out || nranks < 1 || nranks > MAXR || rank < 0 || rank >= nranks ||
	    strncmp(name, "/" MAGIC, strlen(MAGIC) + 1) || !memchr(name, 0, NCCL_UNIQUE_ID_BYTES))
		return ncclInvalidArgument;
	if (!collective) {
		*(void **)&collective = dlsym(RTLD_DEFAULT, "simgpu_collective");
		*(void **)&capturing = dlsym(RTLD_DEFAULT, "simgpu_capturing");
		if (!collective)
			return ncclSystemError; /* not on the simulated cudart */
		void *h = dlopen("libcudart.so.13", RTLD_LAZY | RTLD_NOLOAD);
		if (h) { /* (the library's own definitions, not a preloaded wrapper's) */
			*(void **)&RT.get_device = dlsym(h, "cudaGetDevice");
			*(void **)&RT.is_capturing = dlsym(h, "cudaStreamIsCapturing");
			*(void **)&RT.memcpy_async = dlsym(h, "cudaMemcpyAsync");
		}
	}
	int fd = shm_open(name, O_RDWR | O_CREAT, 0600);
	if (fd < 0)
		return ncclSystemError;
	struct shm *m = ftruncate(fd, sizeof *m) == 0 ?
				mmap(NULL, sizeof *m, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) : MAP_FAILED;
	close(fd);
	struct ncclComm *c = m != MAP_FAILED ? calloc(1, sizeof *c) : NULL;
	if (!c) {
		if (m != MAP_FAILED)
			munmap(m, sizeof *m);
		return ncclSystemError;
	}
	*c = (struct ncclComm){ .rank = rank, .nranks = nranks, .shm = m };
	snprintf(c->name, sizeof c->name, "%s", name);
	/* every rank joins before any returns, as the real one's bootstrap does */
	__atomic_add_fetch(&m->joined, 1, __ATOMIC_ACQ_REL);
	for (int waited = 0; __atomic_load_n(&m->joined, __ATOMIC_ACQUIRE) < (uint32_t)nranks; waited++) {
		if (waited > 600000) { /* a minute */
			munmap(m, sizeof *m);
			free(c);
			return ncclSystemError;
		}
		pause_us(100);
	}
	if (rank == 0)
		shm_unlink(name); /* (every rank has it mapped) */
	uint64_t hash = 1469598103934665603ull; /* (NCCL's commHash: of its unique id, the same on every rank) */
	for (const char *q = name; *q; q++)
		hash = (hash ^ (unsigned char)*q) * 1099511628211ull;
	struct prof_args pa = { &c->prof, hash, nranks, rank };
	pthread_t pt;
	if (config && config->blocking == 0 && pthread_create(&pt, NULL, prof_init_job, &pa) == 0)
		pthread_join(pt, NULL);
	else
		prof_init(&c->prof, hash, nranks, rank);
	*out = c;
	return ncclSuccess;
}

/* a nonblocking communicator's launching thread, where config says blocking 0 (it was made: 0) */
static ncclResult_t configure(ncclComm_t comm, const ncclConfig_t *config)
{
	if (!config || config->blocking != 0)
		return ncclSuccess;
	if (!(comm->nb = launcher_new()))
		return ncclSystemError;
	return ncclInProgress;
}

API(ncclResult_t, ncclCommInitRank, (ncclComm_t * comm, int nranks, ncclUniqueId id, int rank))
{
	return join(comm, nranks, id.internal, rank, NULL);
}

/* config->blocking 0: a nonblocking communicator (its creation says ncclInProgress, as NCCL's does;
 * here it is made before the call returns, and ncclCommGetAsyncError says so) */
API(ncclResult_t, ncclCommInitRankConfig, (ncclComm_t * comm, int nranks, ncclUniqueId id, int rank,
					   ncclConfig_t *config))
{
	ncclResult_t rc = join(comm, nranks, id.internal, rank, config);
	return rc == ncclSuccess ? configure(*comm, config) : rc;
}

API(ncclResult_t, ncclCommInitRankScalable, (ncclComm_t * comm, int nranks, int rank, int nId, ncclUniqueId *ids,
					     ncclConfig_t *config))
{
	if (!ids || nId < 1)
		return ncclInvalidArgument;
	ncclResult_t rc = join(comm, nranks, ids[0].internal, rank, config);
	return rc == ncclSuccess ? configure(*comm, config) : rc;
}

/* Only the ranks not excluded call it, with the same list: they make a communicator in the order
 * of their ranks in comm. */
API(ncclResult_t, ncclCommShrink, (ncclComm_t comm, int *exclude, int nexclude, ncclComm_t *newcomm,
				   ncclConfig_t *config, int flags))
{
	if (!comm || !newcomm || nexclude < 0 || (nexclude && !exclude))
		return ncclInvalidArgument;
	int size = 0, rank = 0;
	for (int r = 0; r < comm->nranks; r++) {
		int out = 0;
		for (int i = 0; i < nexclude; i++)
			out |= exclude[i] == r;
		if (out && r == comm->rank)
			return ncclInvalidArgument;
		size += !out;
		rank += !out && r < comm->rank;
	}
	char name[NCCL_UNIQUE_ID_BYTES];
	snprintf(name, sizeof name, "%.80s-s%llu", comm->name, (unsigned long long)comm->splits++);
	ncclResult_t rc = join(newcomm, size, name, rank, config);
	return rc == ncclSuccess ? configure(*newcomm, config) : rc;
}

/* Every rank of comm calls it: those of one color make a communicator, ranked by key (then by
 * their rank in comm); NCCL_SPLIT_NOCOLOR makes none. The colors and keys meet in comm's segment. */
API(ncclResult_t, ncclCommSplit, (ncclComm_t comm, int color, int key, ncclComm_t *newcomm, ncclConfig_t *config))
{
	if (!comm || !newcomm || (color < 0 && color != NCCL_SPLIT_NOCOLOR))
		return ncclInvalidArgument;
	uint64_t k = comm->splits++;
	struct split *sp = &comm->shm->splits[k % NSPLIT];
	int n = comm->nranks, me = comm->rank;
	for (int r = 0; k >= NSPLIT && r < n; r++) /* the slot's last use over for everyone */
		while (ld(&sp->done1[r]) < k - NSPLIT + 1)
			pause_us(20);
	sp->color[me] = color;
	sp->key[me] = key;
	__atomic_store_n(&sp->seq1[me], k + 1, __ATOMIC_RELEASE);
	int colors[MAXR], keys[MAXR];
	for (int r = 0; r < n; r++) {
		while (ld(&sp->seq1[r]) != k + 1)
			pause_us(20);
		colors[r] = sp->color[r];
		keys[r] = sp->key[r];
	}
	__atomic_store_n(&sp->done1[me], k + 1, __ATOMIC_RELEASE);
	*newcomm = NULL;
	if (color == NCCL_SPLIT_NOCOLOR)
		return ncclSuccess;
	int size = 0, rank = 0;
	for (int r = 0; r < n; r++) {
		if (colors[r] != color)
			continue;
		size++;
		rank += keys[r] < key || (keys[r] == key && r < me);
	}
	char name[NCCL_UNIQUE_ID_BYTES];
	snprintf(name, sizeof name, "%.80s-%llu-%d", comm->name, (unsigned long long)k, color);
	/* with no config of its own it takes its parent's (nccl.h: ncclCommSplit), nonblocking too */
	ncclConfig_t inherit = NCCL_CONFIG_INITIALIZER;
	inherit.blocking = comm->nb ? 0 : 1;
	ncclResult_t rc = join(newcomm, size, name, rank, config ? config : &inherit);
	return rc == ncclSuccess ? configure(*newcomm, config ? config : &inherit) : rc;
}

API(ncclResult_t, ncclCommDestroy, (ncclComm_t comm))
{
	if (!comm)
		return ncclInvalidArgument;
	prof_finalize(&comm->prof);
	munmap(comm->shm, sizeof *comm->shm);
	free(comm);
	return ncclSuccess;
}

API(ncclResult_t, ncclCommAbort, (ncclComm_t comm))
{
	return pncclCommDestroy(comm);
}

API(ncclResult_t, ncclCommFinalize, (ncclComm_t comm))
{
	if (comm)
		prof_finalize(&comm->prof);
	return comm ? ncclSuccess : ncclInvalidArgument;
}

API(ncclResult_t, ncclCommCount, (const ncclComm_t comm, int *count))
{
	if (!comm || !count)
		return ncclInvalidArgument;
	*count = comm->nranks;
	return ncclSuccess;
}

API(ncclResult_t, ncclCommUserRank, (const ncclComm_t comm, int *rank))
{
	if (!comm || !rank)
		return ncclInvalidArgument;
	*rank = comm->rank;
	return ncclSuccess;
}

API(ncclResult_t, ncclCommCuDevice, (const ncclComm_t comm, int *device))
{
	if (!comm || !device)
		return ncclInvalidArgument;
	*device = 0;
	return ncclSuccess;
}

/* a nonblocking communicator: in progress while calls wait for its launching thread */
API(ncclResult_t, ncclCommGetAsyncError, (ncclComm_t comm, ncclResult_t *err))
{
	if (!comm || !err)
		return ncclInvalidArgument;
	*err = ncclSuccess;
	if (comm->nb) {
		pthread_mutex_lock(&comm->nb->mu);
		if (comm->nb->pending)
			*err = ncclInProgress;
		pthread_mutex_unlock(&comm->nb->mu);
	}
	return ncclSuccess;
}

API(const char *, ncclGetErrorString, (ncclResult_t r))
{
	static const char *const s[] = { "no error", "unhandled cuda error", "unhandled system error",
					 "internal error", "invalid argument", "invalid usage", "remote error",
					 "operation in progress" };
	return (unsigned)r < sizeof s / sizeof *s ? s[r] : "unknown result code";
}

API(const char *, ncclGetLastError, (ncclComm_t comm))
{
	return "";
}
