/* gloo, PyTorch's CPU collective library: gloo::allreduce(opts) and its siblings, wrapped by
 * their C++ (Itanium ABI) symbol names. PyTorch loads libgloo through RTLD_LOCAL dlopen chains,
 * so the real functions are found by walking the loaded objects (resolve.c).
 *
 * Bytes: the options object's layout is private to each gloo version, so it is not read.
 * Instead the buffers themselves are counted as they are made: every input and output a caller
 * gives a collective's options becomes a gloo::Context::createUnboundBuffer(ptr, size) call (a
 * public, non-virtual function of gloo since 2018) on the thread that then calls the collective.
 * docs/format.md says how a collective's byte count follows from its buffers. Buffers made and
 * then sent or received point to point (c10d's send and recv) are not a collective's: the tcp
 * transport's UnboundBuffer::send and recv, reached through vtables whose entries bind to our
 * exports, forget them. Sequence numbers count each operation per process, in call order, which
 * is the order PyTorch issues them on every rank (the collector keeps one sequence space per
 * operation).
 *
 * gloo reports errors by throwing C++ exceptions. This file is compiled with -fexceptions so an
 * exception can unwind through our frames, and the cleanup attribute releases the guard and
 * records the call (threw=1) while it does. */
#include <stdbool.h>

#include "internal.h"

/* the wrappers below are the library's exports (exports.map); helpers are static */
#pragma GCC visibility push(default)

struct gcall {
	struct dsp_tls *t;
	uint64_t t0, seq;
	int64_t bytes;
	int op, done;
};

static uint64_t seqs[DDPSPY_OP_COUNT];

static void gloo_end(struct gcall *c)
{
	if (!c->t)
		return;
	uint64_t t1 = dsp_now();
	int64_t a[4] = {c->op, (int64_t)c->seq, c->bytes, !c->done};
	dsp_emit_wait(c->t, DDPSPY_EV_GLOO_COLL, c->t0, t1, 4, a);
	dsp_leave(c->t);
}

/* The real function is missing although a caller linked against it: fail the call as gloo
 * would, with an exception (std::runtime_error), using the C++ runtime the caller brought. */
static void gloo_missing(const char *name)
{
	void *(*alloc)(size_t) = (void *(*)(size_t))dsp_resolve("__cxa_allocate_exception", NULL);
	void (*ctor)(void *, const char *) =
		(void (*)(void *, const char *))dsp_resolve("_ZNSt13runtime_errorC1EPKc", NULL);
	void (*thr)(void *, void *, void (*)(void *)) =
		(void (*)(void *, void *, void (*)(void *)))dsp_resolve("__cxa_throw", NULL);
	void *ti = dsp_resolve("_ZTISt13runtime_error", NULL);
	void (*dtor)(void *) = (void (*)(void *))dsp_resolve("_ZNSt13runtime_errorD1Ev", NULL);

	dsp_warn("cannot find the real %s", name);
	if (alloc && ctor && thr && ti && dtor) {
		void *e = alloc(16); /* sizeof(std::runtime_error) on LP64 */
		ctor(e, "ddpspy: the real gloo function was not found");
		thr(e, ti, dtor);
	}
}

/* The collective's bytes in the nccl-tests convention (as for MPI and NCCL) from the buffers its
 * thread made for it, which are then forgotten; -1 when it made none (a gloo that does not make
 * them through createUnboundBuffer). The largest buffer is the whole: allreduce's, broadcast's and
 * reduce's one buffer (in and out may be the same), allgather(v)'s and alltoall's output. gather
 * and scatter: every rank's part times the ranks (the smallest buffer is one rank's part, on the
 * root and elsewhere). alltoallv: its input, made first (the sum of the send counts). */
static int64_t gloo_bytes(struct dsp_tls *t, int op)
{
	int64_t b = -1;
	if (op == DDPSPY_OP_BARRIER)
		b = 0;
	else if (t->gloo.n == 0)
		b = -1;
	else if (op == DDPSPY_OP_GATHER || op == DDPSPY_OP_SCATTER)
		b = (int64_t)t->gloo.min * (t->gloo.ranks > 0 ? t->gloo.ranks : 1);
	else if (op == DDPSPY_OP_ALLTOALLV)
		b = (int64_t)t->gloo.first;
	else
		b = (int64_t)t->gloo.max;
	t->gloo.n = 0;
	return b;
}

/* One gloo call, in the shape of every wrapper: resolve, enter, timestamp (the call in flight, from
 * site: the wrapper's return address), call, record (gloo_end, also when the call throws). */
static void gloo_call(void (**real)(void *), const char *sym, int op, void *opts, const void *site,
		      const void *fp)
{
	if (!*real)
		*real = (void (*)(void *))dsp_resolve(sym, "libgloo");
	if (!*real) {
		gloo_missing(sym);
		return;
	}
	struct gcall c __attribute__((cleanup(gloo_end))) = {NULL, 0, 0, -1, op, 0};
	if (dsp_enter(&dsp_tls)) {
		c.t = &dsp_tls;
		/* numbered as called: ProcessGroupGloo's worker threads may finish two collectives
		 * in a different order on each rank */
		c.seq = __atomic_fetch_add(&seqs[op], 1, __ATOMIC_RELAXED);
		c.bytes = gloo_bytes(c.t, op);
		c.t0 = dsp_call_begin(c.t, DDPSPY_EV_GLOO_COLL, site, fp, -1, NULL, 4,
				      (const int64_t[]){op, (int64_t)c.seq, c.bytes, -1});
	}
	(*real)(opts);
	c.done = 1;
}

/* the declaration boilerplate only: the real function's pointer and the exported wrapper */
#define GLOO_WRAPPER(sym, op)                                                             \
	static void (*real_##sym)(void *);                                                \
	void sym(void *opts)                                                              \
	{                                                                                 \
		gloo_call(&real_##sym, #sym, op, opts, __builtin_return_address(0),      \
			  __builtin_frame_address(0));                                    \
	}

/* gloo 0.5 (Debian's libgloo0, PyTorch 1.13): nm -D libgloo.so | grep 'T _ZN4gloo' */
GLOO_WRAPPER(_ZN4gloo9allreduceERKNS_16AllreduceOptionsE, DDPSPY_OP_ALLREDUCE)
GLOO_WRAPPER(_ZN4gloo7barrierERNS_14BarrierOptionsE, DDPSPY_OP_BARRIER)
GLOO_WRAPPER(_ZN4gloo9broadcastERNS_16BroadcastOptionsE, DDPSPY_OP_BCAST)
GLOO_WRAPPER(_ZN4gloo9allgatherERNS_16AllgatherOptionsE, DDPSPY_OP_ALLGATHER)
GLOO_WRAPPER(_ZN4gloo10allgathervERNS_17AllgathervOptionsE, DDPSPY_OP_ALLGATHERV)
GLOO_WRAPPER(_ZN4gloo6reduceERNS_13ReduceOptionsE, DDPSPY_OP_REDUCE)
GLOO_WRAPPER(_ZN4gloo6gatherERNS_13GatherOptionsE, DDPSPY_OP_GATHER)
GLOO_WRAPPER(_ZN4gloo7scatterERNS_14ScatterOptionsE, DDPSPY_OP_SCATTER)
GLOO_WRAPPER(_ZN4gloo8alltoallERNS_15AlltoallOptionsE, DDPSPY_OP_ALLTOALL)
GLOO_WRAPPER(_ZN4gloo9alltoallvERNS_16AlltoallvOptionsE, DDPSPY_OP_ALLTOALLV)

/* std::unique_ptr<transport::UnboundBuffer> gloo::Context::createUnboundBuffer(void *ptr, size_t
 * size): a class returned by value comes back through a hidden pointer, passed before `this`
 * (Itanium C++ ABI). Outside a collective the buffer is counted for this thread's next one, with
 * the context's rank count: gloo::Context's public `const int rank, size` follow its vtable
 * pointer (gloo/context.h). Inside one (guard held) it is gloo's own and passes through. */
static void *(*real_create)(void *, void *, void *, size_t);
void *_ZN4gloo7Context19createUnboundBufferEPvm(void *ret, void *self, void *ptr, size_t size)
{
	if (!real_create)
		real_create = (void *(*)(void *, void *, void *, size_t))dsp_resolve(
			"_ZN4gloo7Context19createUnboundBufferEPvm", "libgloo");
	if (!real_create) {
		gloo_missing("gloo::Context::createUnboundBuffer");
		return ret;
	}
	struct dsp_tls *t = &dsp_tls;
	if (!t->guard) {
		uint64_t z = size;
		if (t->gloo.n++ == 0)
			t->gloo.first = t->gloo.max = t->gloo.min = z;
		t->gloo.max = z > t->gloo.max ? z : t->gloo.max;
		t->gloo.min = z < t->gloo.min ? z : t->gloo.min;
		t->gloo.ranks = ((const int *)self)[3];
	}
	return real_create(ret, self, ptr, size);
}

/* c10d's point-to-point calls over gloo (ProcessGroupGloo::send and recv, dist.send and recv):
 * the tcp transport's UnboundBuffer::send and recv start them (a rank, or a vector of them passed by
 * reference as any class with a destructor is; then slot, offset, bytes), reached through vtables
 * whose entries bind to our exports, and UnboundBuffer::waitSend and waitRecv (through c10d's
 * Work::wait) complete them. Outside a collective (whose own sends and receives run inside its
 * call, the guard held) each is recorded on its thread: gloo_p2p with the buffer c10d made for it
 * just before (its size: c10d tells gloo no byte count) and gloo_wait, the buffer's address the
 * request that joins them. Both may throw (an I/O error, a timeout): recorded then with threw 1. */
struct gp2p {
	struct dsp_tls *t;
	uint64_t t0;
	int kind, nargs, done;
	int64_t a[7];
};

static void gloo_p2p_end(struct gp2p *c)
{
	if (!c->t)
		return;
	c->a[c->nargs - 1] = !c->done;
	dsp_emit_wait(c->t, c->kind, c->t0, dsp_now(), c->nargs, c->a);
	dsp_leave(c->t);
}

/* the communicator of a buffer of a context of `ranks` ranks: the default group's (0: its ranks
 * are the world's), or a subgroup's that no other is told apart from (-3 - its size) */
static int64_t p2p_comm(int ranks)
{
	return ranks <= 0 || ranks == dsp_id.world_size ? 0 : -3 - (int64_t)ranks;
}

static void gloo_p2p(void (**real)(void *, uintptr_t, uint64_t, size_t, size_t), const char *sym,
		     void *self, uintptr_t peer, uint64_t slot, size_t off, size_t n, int op, int any,
		     const void *site, const void *fp)
{
	if (!*real)
		*real = (void (*)(void *, uintptr_t, uint64_t, size_t, size_t))dsp_resolve(sym, "libgloo");
	if (!*real) {
		gloo_missing(sym);
		return;
	}
	struct dsp_tls *t = &dsp_tls;
	struct gp2p c __attribute__((cleanup(gloo_p2p_end))) = { NULL, 0, DDPSPY_EV_GLOO_P2P, 7, 0, { 0 } };
	if (!t->guard) {
		/* its bytes: the buffer just made for it (gloo::transport's kUnspecifiedByteCount, -1,
		 * where c10d gave none), which no collective of this thread counts */
		int64_t bytes = n != SIZE_MAX ? (int64_t)n : t->gloo.n ? (int64_t)t->gloo.first : -1;
		int ranks = t->gloo.ranks;
		t->gloo.n = 0;
		if (dsp_enter(t)) {
			c.t = t;
			int64_t a[7] = { op, p2p_comm(ranks), any ? -1 : (int64_t)(int)peer, (int64_t)slot, bytes,
					 (int64_t)(uintptr_t)self, -1 };
			memcpy(c.a, a, sizeof a);
			c.t0 = dsp_call_begin(t, DDPSPY_EV_GLOO_P2P, site, fp, -1, NULL, 6, a);
		}
	}
	(*real)(self, peer, slot, off, n);
	c.done = 1;
}

#define GLOO_P2P(sym, peer_t, op, any)                                                          \
	static void (*real_##sym)(void *, uintptr_t, uint64_t, size_t, size_t);                 \
	void sym(void *self, peer_t peer, uint64_t slot, size_t off, size_t n)                  \
	{                                                                                       \
		gloo_p2p(&real_##sym, #sym, self, (uintptr_t)peer, slot, off, n, op, any,       \
			 __builtin_return_address(0), __builtin_frame_address(0));               \
	}

GLOO_P2P(_ZN4gloo9transport3tcp13UnboundBuffer4sendEimmm, int, DDPSPY_OP_SEND, 0)
GLOO_P2P(_ZN4gloo9transport3tcp13UnboundBuffer4recvEimmm, int, DDPSPY_OP_RECV, 0)
GLOO_P2P(_ZN4gloo9transport3tcp13UnboundBuffer4recvESt6vectorIiSaIiEEmmm, void *, DDPSPY_OP_RECV, 1)

/* bool waitSend(int *rank, std::chrono::milliseconds timeout), and waitRecv: the duration, one
 * integer, comes in a register as the integer would */
static bool gloo_wait(bool (**real)(void *, int *, long), const char *sym, void *self, int *rank, long ms,
		      const void *site, const void *fp)
{
	if (!*real)
		*real = (bool (*)(void *, int *, long))dsp_resolve(sym, "libgloo");
	if (!*real) {
		gloo_missing(sym);
		return false;
	}
	struct dsp_tls *t = &dsp_tls;
	struct gp2p c __attribute__((cleanup(gloo_p2p_end))) = { NULL, 0, DDPSPY_EV_GLOO_WAIT, 4, 0, { 0 } };
	if (dsp_enter(t)) {
		c.t = t;
		int64_t a[4] = { DDPSPY_OP_WAIT, 1, (int64_t)(uintptr_t)self, -1 };
		memcpy(c.a, a, sizeof a);
		c.t0 = dsp_call_begin(t, DDPSPY_EV_GLOO_WAIT, site, fp, -1, NULL, 3, a);
	}
	bool ok = (*real)(self, rank, ms);
	c.done = 1;
	return ok;
}

#define GLOO_WAIT(sym)                                                                          \
	static bool (*real_##sym)(void *, int *, long);                                         \
	bool sym(void *self, int *rank, long ms)                                                \
	{                                                                                       \
		return gloo_wait(&real_##sym, #sym, self, rank, ms, __builtin_return_address(0),  \
				 __builtin_frame_address(0));                                    \
	}

GLOO_WAIT(_ZN4gloo9transport3tcp13UnboundBuffer8waitSendEPiNSt6chrono8durationIlSt5ratioILl1ELl1000EEEE)
GLOO_WAIT(_ZN4gloo9transport3tcp13UnboundBuffer8waitRecvEPiNSt6chrono8durationIlSt5ratioILl1ELl1000EEEE)

/* c10d's ProcessGroupGloo(store, rank, size, options), which PyTorch's Python binding calls: where
 * no launcher named this process's rank (mp.spawn's children pass it to init_process_group), the
 * largest group's rank and size are its own (init.c). Both C++ constructor symbols; the store and
 * the options (an intrusive_ptr, passed by reference as any class with a destructor is) are
 * passed on untouched. Debian's PyTorch 1.13's symbol (nm -D libtorch_cpu.so); another version may
 * name it otherwise, and its processes keep the role the environment gave them. */
static void pg_gloo(void (**real)(void *, const void *, int, int, void *), const char *sym, void *self,
		    const void *store, int rank, int size, void *opts)
{
	if (!*real)
		*real = (void (*)(void *, const void *, int, int, void *))dsp_resolve(sym, "libtorch_cpu");
	if (!*real) {
		gloo_missing(sym);
		return;
	}
	(*real)(self, store, rank, size, opts);
	dsp_identity_from_comm(rank, size, "c10d");
}

#define PG_GLOO(sym)                                                                          \
	static void (*real_##sym)(void *, const void *, int, int, void *);                    \
	void sym(void *self, const void *store, int rank, int size, void *opts)               \
	{                                                                                     \
		pg_gloo(&real_##sym, #sym, self, store, rank, size, opts);                    \
	}

PG_GLOO(_ZN4c10d16ProcessGroupGlooC1ERKN3c1013intrusive_ptrINS_5StoreENS1_6detail34intrusive_target_default_null_typeIS3_EEEEiiNS2_INS0_7OptionsENS5_ISA_EEEE)
PG_GLOO(_ZN4c10d16ProcessGroupGlooC2ERKN3c1013intrusive_ptrINS_5StoreENS1_6detail34intrusive_target_default_null_typeIS3_EEEEiiNS2_INS0_7OptionsENS5_ISA_EEEE)
