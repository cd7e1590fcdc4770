/* NCCL: the host side of every collective and send/recv, group start and end, and communicator
 * creation, on a dynamically linked libnccl.so.2 (PyTorch's wheels; every ncclX there is a weak
 * alias of pncclX, so the program's calls to ncclX come here). A collective's host time is its
 * enqueue: NCCL launches its kernel through the driver and only CUPTI sees when it runs. So each
 * call pushes an external correlation id ("ext") around the real call; CUPTI joins the kernel it
 * launches to that id (gpu_extcorr). Inside ncclGroupStart/End nothing launches until the
 * outermost ncclGroupEnd, whose event carries the id the group's kernel is joined to.
 *
 * Communicators are named by an id equal on every member rank (a hash of the ncclUniqueId they were
 * made from) and their collectives numbered from 0 in call order ("seq"), which is the same on every
 * rank since NCCL requires every rank to call them in the same order; matching (comm, seq) pairs
 * the instances of one collective, as for MPI. "bytes" is the whole buffer in the nccl-tests
 * convention (docs/format.md). The table of communicators is filled at creation (not a fast path)
 * and read without a lock; a communicator made by ncclCommSplit gets an id from its parent's (made
 * before the library was loaded, or by ncclCommShrink, it has none: comm -1). Compiled when CUDA's
 * headers (and nccl.h) are found; nothing links against NCCL. */
#include "internal.h"
#include "../common/hash.h"
#include "../cupti/gpu.h"

#include <nccl.h>
#include <unistd.h>

/* the wrappers below are the library's exports (exports.map); helpers are static */
#pragma GCC visibility push(default)

DSP_REAL(ncclResult_t, ncclCommInitRank, (ncclComm_t *, int, ncclUniqueId, int), "libnccl")
DSP_REAL(ncclResult_t, ncclCommInitRankConfig, (ncclComm_t *, int, ncclUniqueId, int, ncclConfig_t *), "libnccl")
DSP_REAL(ncclResult_t, ncclCommInitAll, (ncclComm_t *, int, const int *), "libnccl")
DSP_REAL(ncclResult_t, ncclCommSplit, (ncclComm_t, int, int, ncclComm_t *, ncclConfig_t *), "libnccl")
DSP_REAL(ncclResult_t, ncclCommInitRankScalable, (ncclComm_t *, int, int, int, ncclUniqueId *, ncclConfig_t *),
	 "libnccl")
DSP_REAL(ncclResult_t, ncclCommShrink, (ncclComm_t, int *, int, ncclComm_t *, ncclConfig_t *, int), "libnccl")
DSP_REAL(ncclResult_t, ncclCommUserRank, (const ncclComm_t, int *), "libnccl")
DSP_REAL(ncclResult_t, ncclCommCount, (const ncclComm_t, int *), "libnccl")
DSP_REAL(ncclResult_t, ncclAllReduce, (const void *, void *, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t,
				       cudaStream_t), "libnccl")
DSP_REAL(ncclResult_t, ncclBroadcast, (const void *, void *, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t),
	 "libnccl")
DSP_REAL(ncclResult_t, ncclBcast, (void *, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t), "libnccl")
DSP_REAL(ncclResult_t, ncclReduce, (const void *, void *, size_t, ncclDataType_t, ncclRedOp_t, int, ncclComm_t,
				    cudaStream_t), "libnccl")
DSP_REAL(ncclResult_t, ncclAllGather, (const void *, void *, size_t, ncclDataType_t, ncclComm_t, cudaStream_t),
	 "libnccl")
DSP_REAL(ncclResult_t, ncclReduceScatter, (const void *, void *, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t,
					   cudaStream_t), "libnccl")
DSP_REAL(ncclResult_t, ncclAlltoAll, (const void *, void *, size_t, ncclDataType_t, ncclComm_t, cudaStream_t),
	 "libnccl")
DSP_REAL(ncclResult_t, ncclGather, (const void *, void *, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t),
	 "libnccl")
DSP_REAL(ncclResult_t, ncclScatter, (const void *, void *, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t),
	 "libnccl")
DSP_REAL(ncclResult_t, ncclSend, (const void *, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t), "libnccl")
DSP_REAL(ncclResult_t, ncclRecv, (void *, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t), "libnccl")
DSP_REAL(ncclResult_t, ncclGroupStart, (void), "libnccl")
DSP_REAL(ncclResult_t, ncclGroupEnd, (void), "libnccl")

/* ---- communicators ---- */
#define COMMS 1024 /* live communicators a process can name; more are recorded with comm -1 */
static struct comm {
	ncclComm_t key;     /* published last (release): a reader that sees it sees the rest */
	int claimed;
	int rank, nranks;
	int64_t id;
	uint64_t seq;       /* collectives called so far */
	uint64_t splits;    /* ncclCommSplit and ncclCommShrink calls on it so far (every member makes them alike) */
	int blocking;       /* 0: made nonblocking (ncclConfig_t.blocking), its kernels launched by NCCL's own thread */
} comms[COMMS];

static size_t slot_of(ncclComm_t c)
{
	return (size_t)(ddpspy_fnv_word(DDPSPY_FNV_SEED, (uint64_t)(uintptr_t)c) & (COMMS - 1));
}

static struct comm *comm_find(ncclComm_t c)
{
	for (size_t i = 0, s = slot_of(c); c && i < COMMS; i++) {
		struct comm *e = &comms[(s + i) & (COMMS - 1)];
		ncclComm_t k = __atomic_load_n(&e->key, __ATOMIC_ACQUIRE);
		if (k == c)
			return e;
		if (!k && !__atomic_load_n(&e->claimed, __ATOMIC_ACQUIRE))
			return NULL;
	}
	return NULL;
}

/* a new communicator (or a new one at a freed one's address) */
static void comm_add(ncclComm_t c, int64_t id, int rank, int nranks, int blocking)
{
	struct comm *e = comm_find(c);
	for (size_t i = 0, s = slot_of(c); c && !e && i < COMMS; i++) {
		struct comm *f = &comms[(s + i) & (COMMS - 1)];
		int zero = 0;
		if (__atomic_compare_exchange_n(&f->claimed, &zero, 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
			e = f;
	}
	if (!e)
		return;
	e->rank = rank;
	e->nranks = nranks;
	e->id = id;
	e->blocking = blocking;
	__atomic_store_n(&e->seq, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&e->splits, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&e->key, c, __ATOMIC_RELEASE);
}

/* equal on every rank made from this unique id: 62 bits of its hash */
static int64_t id_of(const ncclUniqueId *u)
{
	return (int64_t)(ddpspy_fnv_bytes(DDPSPY_FNV_SEED, u->internal, sizeof u->internal) >> 2);
}

/* Whether a communicator made with config is blocking (nccl.h, ncclConfig_t.blocking): as the
 * config says; left undefined, a split or shrink of a parent inherits the parent's (inherit: its
 * blocking, -1 none), any other the default, NCCL_COMM_BLOCKING or 1. Read when communicators are
 * made, not on a fast path. */
static int blocking_of(const ncclConfig_t *config, int inherit)
{
	if (config && config->blocking != NCCL_CONFIG_UNDEF_INT)
		return config->blocking != 0;
	if (!config && inherit >= 0)
		return inherit;
	const char *v = getenv("NCCL_COMM_BLOCKING");
	return v && *v ? atoi(v) != 0 : 1;
}

static void rec_init(struct dsp_tls *t, uint64_t t0, ncclComm_t c, int64_t id, int rank, int nranks, int blocking,
		     ncclResult_t rc)
{
	uint64_t t1 = dsp_now();
	int made = rc == ncclSuccess || rc == ncclInProgress; /* (a non-blocking one is made, not ready) */
	if (made) {
		comm_add(c, id, rank, nranks, blocking);
		dsp_identity_from_comm(rank, nranks, "nccl");
	}
	if (t->nccl_pctx) /* (NCCL told ddpspy's profiler plugin of it during the call) */
		dsp_ncclprof_named(t->nccl_pctx, made ? id : -1, t0);
	t->nccl_pctx = NULL;
	int64_t a[5] = {made ? id : -1, rank, nranks, rc, blocking};
	dsp_emit_wait(t, DDPSPY_EV_NCCL_INIT, t0, t1, 5, a);
}

ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank)
{
	if (!get_ncclCommInitRank())
		return ncclSystemError;
	struct dsp_tls *t = &dsp_tls;
	if (!dsp_enter(t))
		return real_ncclCommInitRank(comm, nranks, id, rank);
	uint64_t t0 = DSP_CALL(t, DDPSPY_EV_NCCL_INIT, -1, 5, id_of(&id), rank, nranks, -1, blocking_of(NULL, -1));
	ncclResult_t rc = real_ncclCommInitRank(comm, nranks, id, rank);
	rec_init(t, t0, comm ? *comm : NULL, id_of(&id), rank, nranks, blocking_of(NULL, -1), rc);
	dsp_leave(t);
	return rc;
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank, ncclConfig_t *config)
{
	if (!get_ncclCommInitRankConfig())
		return ncclSystemError;
	struct dsp_tls *t = &dsp_tls;
	if (!dsp_enter(t))
		return real_ncclCommInitRankConfig(comm, nranks, id, rank, config);
	uint64_t t0 = DSP_CALL(t, DDPSPY_EV_NCCL_INIT, -1, 5, id_of(&id), rank, nranks, -1, blocking_of(config, -1));
	ncclResult_t rc = real_ncclCommInitRankConfig(comm, nranks, id, rank, config);
	rec_init(t, t0, comm ? *comm : NULL, id_of(&id), rank, nranks, blocking_of(config, -1), rc);
	dsp_leave(t);
	return rc;
}

/* one process, ndev ranks: the id is the process's and the call's */
ncclResult_t ncclCommInitAll(ncclComm_t *comm, int ndev, const int *devlist)
{
	static uint64_t calls;
	if (!get_ncclCommInitAll())
		return ncclSystemError;
	struct dsp_tls *t = &dsp_tls;
	if (!dsp_enter(t))
		return real_ncclCommInitAll(comm, ndev, devlist);
	uint64_t t0 = dsp_now();
	ncclResult_t rc = real_ncclCommInitAll(comm, ndev, devlist);
	uint64_t n = __atomic_fetch_add(&calls, 1, __ATOMIC_RELAXED);
	int64_t id = (int64_t)(ddpspy_fnv_word(ddpspy_fnv_word(DDPSPY_FNV_SEED, (uint64_t)getpid()), n) >> 2);
	for (int i = 0; comm && i < ndev; i++)
		rec_init(t, t0, comm[i], id, i, ndev, blocking_of(NULL, -1), rc);
	dsp_leave(t);
	return rc;
}

/* A communicator made from parent p (NULL: not known to ddpspy, its id -1): its id the hash of
 * the parent's and the call's number, then of the n ints of key (a split's color, a shrink's
 * excluded ranks), equal on its members; its rank and size from NCCL once it is made. */
static void rec_child(struct dsp_tls *t, uint64_t t0, struct comm *p, const int *key, int n, ncclComm_t *newcomm,
		      const ncclConfig_t *config, ncclResult_t rc)
{
	/* the call's number among comm's splits and shrinks, counted whether or not it succeeded */
	uint64_t k = p ? __atomic_fetch_add(&p->splits, 1, __ATOMIC_RELAXED) : 0;
	uint64_t h = p ? ddpspy_fnv_word(ddpspy_fnv_word(DDPSPY_FNV_SEED, (uint64_t)p->id), k) : 0;
	if (!newcomm || !*newcomm || (rc != ncclSuccess && rc != ncclInProgress))
		return;
	int r = -1, size = -1;
	if (get_ncclCommUserRank() && real_ncclCommUserRank(*newcomm, &r) != ncclSuccess)
		r = -1;
	if (get_ncclCommCount() && real_ncclCommCount(*newcomm, &size) != ncclSuccess)
		size = -1;
	for (int i = 0; i < n; i++)
		h = ddpspy_fnv_word(h, (uint64_t)(int64_t)key[i]);
	rec_init(t, t0, *newcomm, p ? (int64_t)(h >> 2) : -1, r, size, blocking_of(config, p ? p->blocking : -1), rc);
}

/* Every member of comm calls it, in the same order on each: the new communicator's id is made from
 * comm's, the call's number on comm and the color, so that its members name it alike and the
 * other colors' communicators differently. Its rank and size come from NCCL once it is made. */
ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t *newcomm, ncclConfig_t *config)
{
	if (!get_ncclCommSplit())
		return ncclSystemError;
	struct dsp_tls *t = &dsp_tls;
	if (!dsp_enter(t))
		return real_ncclCommSplit(comm, color, key, newcomm, config);
	uint64_t t0 = dsp_now();
	ncclResult_t rc = real_ncclCommSplit(comm, color, key, newcomm, config);
	rec_child(t, t0, comm_find(comm), &color, 1, newcomm, config, rc);
	dsp_leave(t);
	return rc;
}

/* Several unique ids for one communicator (NCCL 2.23): every rank passes the same nId ids, so the
 * id is made from all of them. */
ncclResult_t ncclCommInitRankScalable(ncclComm_t *comm, int nranks, int rank, int nId, ncclUniqueId *ids,
				      ncclConfig_t *config)
{
	if (!get_ncclCommInitRankScalable())
		return ncclSystemError;
	struct dsp_tls *t = &dsp_tls;
	if (!dsp_enter(t))
		return real_ncclCommInitRankScalable(comm, nranks, rank, nId, ids, config);
	uint64_t t0 = dsp_now();
	ncclResult_t rc = real_ncclCommInitRankScalable(comm, nranks, rank, nId, ids, config);
	uint64_t h = DDPSPY_FNV_SEED;
	for (int i = 0; ids && i < nId; i++)
		h = ddpspy_fnv_bytes(h, ids[i].internal, sizeof ids[i].internal);
	rec_init(t, t0, comm ? *comm : NULL, ids && nId > 0 ? (int64_t)(h >> 2) : -1, rank, nranks,
		 blocking_of(config, -1), rc);
	dsp_leave(t);
	return rc;
}

/* Every member of comm but the excluded ranks calls it (NCCL 2.27), all with the same list: the
 * new communicator's id is made from comm's, the call's number among its splits and shrinks, and
 * the excluded ranks, as for a split. Its rank and size come from NCCL once it is made. */
ncclResult_t ncclCommShrink(ncclComm_t comm, int *exclude, int nexclude, ncclComm_t *newcomm, ncclConfig_t *config,
			    int flags)
{
	if (!get_ncclCommShrink())
		return ncclSystemError;
	struct dsp_tls *t = &dsp_tls;
	if (!dsp_enter(t))
		return real_ncclCommShrink(comm, exclude, nexclude, newcomm, config, flags);
	uint64_t t0 = dsp_now();
	ncclResult_t rc = real_ncclCommShrink(comm, exclude, nexclude, newcomm, config, flags);
	rec_child(t, t0, comm_find(comm), exclude, exclude ? nexclude : 0, newcomm, config, rc);
	dsp_leave(t);
	return rc;
}

/* ---- collectives ---- */
static uint64_t ext_ids; /* the external ids this process pushed */

static size_t type_size(ncclDataType_t t)
{
	static const unsigned char sz[] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1}; /* ncclInt8 .. ncclFloat8e5m2 */
	return (unsigned)t < sizeof sz ? sz[t] : 0;
}

/* the bytes of count elements of type times per parts (0: the communicator's ranks), -1 unknown */
static int64_t coll_bytes(const struct comm *c, size_t count, ncclDataType_t type, int per)
{
	int64_t parts = per ? per : c ? c->nranks : -1;
	return type_size(type) && parts > 0 ? (int64_t)(count * type_size(type)) * parts : -1;
}

/* the call published in flight with the sequence number it will get: enqueues seldom block, but
 * a blocking communicator's call waits for its peers, and a hung one is the call to name */
static uint64_t coll_call(struct dsp_tls *t, int op, ncclComm_t comm, size_t count, ncclDataType_t type, int per,
			  int root, int peer, const void *site, const void *fp)
{
	struct comm *c = comm_find(comm);
	int64_t seq = c && op != DDPSPY_OP_SEND && op != DDPSPY_OP_RECV ? (int64_t)__atomic_load_n(&c->seq, __ATOMIC_RELAXED)
									: -1;
	t->nccl_comm = c ? c->id : -1; /* (NCCL's plugin is told of the call inside it: ncclprof.c) */
	t->nccl_seq1 = seq + 1;
	return dsp_call_begin(t, DDPSPY_EV_NCCL_COLL, site, fp, -1, NULL, 6,
			      (const int64_t[]){op, c ? c->id : -1, seq, coll_bytes(c, count, type, per), root, peer});
}

/* per: how many count-sized parts the whole buffer has (nccl-tests' convention): 0 for nranks */
static void rec_coll(struct dsp_tls *t, uint64_t t0, int op, ncclComm_t comm, size_t count, ncclDataType_t type,
		     int per, int root, int peer, cudaStream_t s, uint64_t ext, ncclResult_t rc)
{
	uint64_t t1 = dsp_now();
	struct comm *c = comm_find(comm);
	int64_t seq = -1;
	if (c && op != DDPSPY_OP_SEND && op != DDPSPY_OP_RECV)
		seq = (int64_t)__atomic_fetch_add(&c->seq, 1, __ATOMIC_RELAXED);
	int64_t a[9] = {op, c ? c->id : -1, seq, coll_bytes(c, count, type, per), root, peer, (int64_t)(uintptr_t)s,
			(int64_t)ext, rc};
	dsp_emit_wait(t, DDPSPY_EV_NCCL_COLL, t0, t1, 9, a);
}

/* The wrapper of name(params): real(args) with an external id pushed around it, recorded as op over
 * count elements of type times per parts (0: nranks), with root and peer (-1 when none). */
#define NCCL_CALL(name, params, args, op, count, type, per, root, peer, stream)                       \
	ncclResult_t name params                                                                    \
	{                                                                                           \
		if (!get_##name())                                                                  \
			return ncclSystemError;                                                     \
		struct dsp_tls *t = &dsp_tls;                                                       \
		if (!dsp_enter(t))                                                                  \
			return real_##name args;                                                    \
		uint64_t ext = DSP_EXT_TAG | __atomic_add_fetch(&ext_ids, 1, __ATOMIC_RELAXED);     \
		dsp_gpu_push(ext);                                                                  \
		uint64_t t0 = coll_call(t, op, comm, count, type, per, root, peer,                  \
					__builtin_return_address(0), __builtin_frame_address(0));  \
		ncclResult_t rc = real_##name args;                                                 \
		t->nccl_seq1 = 0;                                                                   \
		dsp_gpu_pop();                                                                      \
		rec_coll(t, t0, op, comm, count, type, per, root, peer, stream, ext, rc);           \
		dsp_leave(t);                                                                       \
		return rc;                                                                          \
	}

NCCL_CALL(ncclAllReduce, (const void *s, void *r, size_t n, ncclDataType_t ty, ncclRedOp_t o, ncclComm_t comm,
			  cudaStream_t st), (s, r, n, ty, o, comm, st), DDPSPY_OP_ALLREDUCE, n, ty, 1, -1, -1, st)
NCCL_CALL(ncclBroadcast, (const void *s, void *r, size_t n, ncclDataType_t ty, int root, ncclComm_t comm,
			  cudaStream_t st), (s, r, n, ty, root, comm, st), DDPSPY_OP_BCAST, n, ty, 1, root, -1, st)
NCCL_CALL(ncclBcast, (void *b, size_t n, ncclDataType_t ty, int root, ncclComm_t comm, cudaStream_t st),
	  (b, n, ty, root, comm, st), DDPSPY_OP_BCAST, n, ty, 1, root, -1, st)
NCCL_CALL(ncclReduce, (const void *s, void *r, size_t n, ncclDataType_t ty, ncclRedOp_t o, int root, ncclComm_t comm,
		       cudaStream_t st), (s, r, n, ty, o, root, comm, st), DDPSPY_OP_REDUCE, n, ty, 1, root, -1, st)
NCCL_CALL(ncclAllGather, (const void *s, void *r, size_t n, ncclDataType_t ty, ncclComm_t comm, cudaStream_t st),
	  (s, r, n, ty, comm, st), DDPSPY_OP_ALLGATHER, n, ty, 0, -1, -1, st)
NCCL_CALL(ncclReduceScatter, (const void *s, void *r, size_t n, ncclDataType_t ty, ncclRedOp_t o, ncclComm_t comm,
			      cudaStream_t st), (s, r, n, ty, o, comm, st), DDPSPY_OP_REDUCE_SCATTER, n, ty, 0, -1, -1, st)
NCCL_CALL(ncclAlltoAll, (const void *s, void *r, size_t n, ncclDataType_t ty, ncclComm_t comm, cudaStream_t st),
	  (s, r, n, ty, comm, st), DDPSPY_OP_ALLTOALL, n, ty, 0, -1, -1, st)
NCCL_CALL(ncclGather, (const void *s, void *r, size_t n, ncclDataType_t ty, int root, ncclComm_t comm,
		       cudaStream_t st), (s, r, n, ty, root, comm, st), DDPSPY_OP_GATHER, n, ty, 0, root, -1, st)
NCCL_CALL(ncclScatter, (const void *s, void *r, size_t n, ncclDataType_t ty, int root, ncclComm_t comm,
			cudaStream_t st), (s, r, n, ty, root, comm, st), DDPSPY_OP_SCATTER, n, ty, 0, root, -1, st)
NCCL_CALL(ncclSend, (const void *s, size_t n, ncclDataType_t ty, int peer, ncclComm_t comm, cudaStream_t st),
	  (s, n, ty, peer, comm, st), DDPSPY_OP_SEND, n, ty, 1, -1, peer, st)
NCCL_CALL(ncclRecv, (void *r, size_t n, ncclDataType_t ty, int peer, ncclComm_t comm, cudaStream_t st),
	  (r, n, ty, peer, comm, st), DDPSPY_OP_RECV, n, ty, 1, -1, peer, st)

/* ---- groups: begin 1 at ncclGroupStart, 0 at ncclGroupEnd (whose id the group's kernels carry) ---- */
static void rec_group(struct dsp_tls *t, uint64_t t0, int begin, uint64_t ext, ncclResult_t rc)
{
	uint64_t t1 = dsp_now();
	int64_t a[3] = {begin, (int64_t)ext, rc};
	dsp_emit_wait(t, DDPSPY_EV_NCCL_GROUP, t0, t1, 3, a);
}

ncclResult_t ncclGroupStart(void)
{
	if (!get_ncclGroupStart())
		return ncclSystemError;
	struct dsp_tls *t = &dsp_tls;
	if (!dsp_enter(t))
		return real_ncclGroupStart();
	uint64_t t0 = dsp_now();
	ncclResult_t rc = real_ncclGroupStart();
	rec_group(t, t0, 1, 0, rc);
	dsp_leave(t);
	return rc;
}

ncclResult_t ncclGroupEnd(void)
{
	if (!get_ncclGroupEnd())
		return ncclSystemError;
	struct dsp_tls *t = &dsp_tls;
	if (!dsp_enter(t))
		return real_ncclGroupEnd();
	uint64_t ext = DSP_EXT_TAG | __atomic_add_fetch(&ext_ids, 1, __ATOMIC_RELAXED);
	dsp_gpu_push(ext);
	uint64_t t0 = DSP_CALL(t, DDPSPY_EV_NCCL_GROUP, -1, 3, 0, (int64_t)ext, -1);
	ncclResult_t rc = real_ncclGroupEnd();
	dsp_gpu_pop();
	rec_group(t, t0, 0, ext, rc);
	dsp_leave(t);
	return rc;
}

#pragma GCC visibility pop
