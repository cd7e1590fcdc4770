/* MPI: collectives (blocking and nonblocking), point-to-point, waits, init and finalize. Each
 * MPI_X records and forwards to PMPI_X. The wrappers themselves are generated
 * (mpi_wrappers.inc, from tools/gen_mpi.py); the recording they share is here.
 *
 * Built against Open MPI's mpi.h, whose handles are pointers. Nothing here may refer to Open
 * MPI's global objects (MPI_COMM_WORLD is &ompi_mpi_comm_world): that would make
 * libddpspy.so unloadable in programs without MPI. Such objects are looked up at run time. */
#include "internal.h"
#include "../common/hash.h"

#include <dlfcn.h>
#include <mpi.h>
#include <sched.h>
#include <stdlib.h>

DSP_REAL(int, PMPI_Init, (int *, char ***), "libmpi")
DSP_REAL(int, PMPI_Init_thread, (int *, char ***, int, int *), "libmpi")
DSP_REAL(int, PMPI_Finalize, (void), "libmpi")
DSP_REAL(int, PMPI_Comm_rank, (MPI_Comm, int *), "libmpi")
DSP_REAL(int, PMPI_Comm_size, (MPI_Comm, int *), "libmpi")
DSP_REAL(int, PMPI_Type_size, (MPI_Datatype, int *), "libmpi")
DSP_REAL(int, PMPI_Comm_group, (MPI_Comm, MPI_Group *), "libmpi")
DSP_REAL(int, PMPI_Group_translate_ranks, (MPI_Group, int, const int[], MPI_Group, int[]), "libmpi")
DSP_REAL(int, PMPI_Group_free, (MPI_Group *), "libmpi")
DSP_REAL(int, PMPI_Comm_test_inter, (MPI_Comm, int *), "libmpi")
DSP_REAL(int, PMPI_Comm_free, (MPI_Comm *), "libmpi")

static MPI_Comm world; /* &ompi_mpi_comm_world, found after MPI_Init */

/* ---- sizes ---- */
static int64_t tsize(MPI_Datatype t)
{
	int s = 0;
	return get_PMPI_Type_size() && real_PMPI_Type_size(t, &s) == MPI_SUCCESS ? s : 0;
}

static int64_t csize(MPI_Comm c)
{
	int s = 0;
	return get_PMPI_Comm_size() && real_PMPI_Comm_size(c, &s) == MPI_SUCCESS ? s : 0;
}

static int crank(MPI_Comm c)
{
	int r = -1;
	return get_PMPI_Comm_rank() && real_PMPI_Comm_rank(c, &r) == MPI_SUCCESS ? r : -1;
}

static int64_t vsum(const int *counts, MPI_Comm c)
{
	int64_t n = csize(c), s = 0;
	for (int64_t i = 0; counts && i < n; i++)
		s += counts[i];
	return s;
}

/* MPI_Alltoallw's: the sum of count x its type's size over the ranks */
static int64_t wsum(const int *counts, const MPI_Datatype *types, MPI_Comm c)
{
	int64_t n = csize(c), s = 0;
	for (int64_t i = 0; counts && types && i < n; i++)
		s += counts[i] * tsize(types[i]);
	return s;
}

/* the lock-free tables of requests (persistent ones, wildcard receives): entries looked at from a
 * request's hash on, a taken one being filled, a freed one */
#define PROBES 64
#define PERSIST_BUSY ((void *)1)
#define PERSIST_GONE ((void *)2)

static int64_t request_id(const MPI_Request *r)
{
	return r ? (int64_t)(uintptr_t)*r : 0;
}

static int64_t first_request(const MPI_Request *r, int count)
{
	return r && count > 0 ? (int64_t)(uintptr_t)r[0] : 0;
}

/* ---- communicators ----
 * Collectives are matched across ranks by (communicator id, sequence number). A handle means
 * nothing on another rank, so the id is made from what every member sees alike: the world ranks
 * of the members, plus how many communicators with the same members this process met before
 * (MPI creates communicators collectively, so that count agrees too). World is 0. */
#define MAX_COMMS 1024
static struct comm_ent {
	void *handle; /* release-stored once id is set; NULL again after MPI_Comm_free */
	int64_t id;
	uint64_t hash;
	uint64_t seq;
} comms[MAX_COMMS];
static int ncomms;
static int comm_lock;
static uint64_t overflow_seq; /* sequence for communicators past the table's size */

static uint64_t members_hash(MPI_Comm c)
{
	MPI_Group g, wg;
	int n = (int)csize(c), inter = 0;
	uint64_t h = DDPSPY_FNV_SEED ^ (uint64_t)n;

	if (!world || !get_PMPI_Comm_group() || !get_PMPI_Group_translate_ranks() ||
	    !get_PMPI_Group_free() || !get_PMPI_Comm_test_inter())
		return 0;
	if (real_PMPI_Comm_test_inter(c, &inter) != MPI_SUCCESS || inter || n <= 0)
		return 0;
	int *in = malloc(2 * sizeof(int) * (size_t)n); /* once per communicator */
	if (!in)
		return 0;
	int *out = in + n;
	for (int i = 0; i < n; i++)
		in[i] = i;
	if (real_PMPI_Comm_group(c, &g) == MPI_SUCCESS) {
		if (real_PMPI_Comm_group(world, &wg) == MPI_SUCCESS) {
			if (real_PMPI_Group_translate_ranks(g, n, in, wg, out) == MPI_SUCCESS)
				for (int i = 0; i < n; i++)
					h = ddpspy_fnv_word(h, (uint64_t)(uint32_t)out[i]);
			real_PMPI_Group_free(&wg);
		}
		real_PMPI_Group_free(&g);
	}
	free(in);
	return h;
}

static struct comm_ent *comm_find(MPI_Comm c)
{
	int n = __atomic_load_n(&ncomms, __ATOMIC_ACQUIRE);
	for (int i = 0; i < n; i++)
		if (__atomic_load_n(&comms[i].handle, __ATOMIC_ACQUIRE) == (void *)c)
			return &comms[i];
	return NULL;
}

/* c's entry, made on its first use, when an mpi_comm event says what it is (t: the calling thread,
 * its guard held) */
static struct comm_ent *comm_get(struct dsp_tls *t, MPI_Comm c)
{
	struct comm_ent *e = comm_find(c);
	if (likely(e != NULL))
		return e;
	/* first collective on this communicator: the slow path */
	uint64_t h = c == world ? 0 : members_hash(c);
	struct comm_ent *made = NULL;
	while (__atomic_exchange_n(&comm_lock, 1, __ATOMIC_ACQUIRE))
		sched_yield();
	e = comm_find(c);
	if (!e && ncomms < MAX_COMMS) {
		int same = 0;
		for (int i = 0; i < ncomms; i++)
			same += comms[i].hash == h;
		e = &comms[ncomms];
		e->hash = h;
		e->id = c == world ? 0 : (int64_t)(((h & 0x7fffffffffffull) << 8) | (uint64_t)(same & 0xff));
		if (h == 0 && c != world)
			e->id = -1; /* an intercommunicator, or MPI not answering */
		e->seq = 0;
		__atomic_store_n(&e->handle, (void *)c, __ATOMIC_RELEASE);
		__atomic_store_n(&ncomms, ncomms + 1, __ATOMIC_RELEASE);
		made = e;
	}
	__atomic_store_n(&comm_lock, 0, __ATOMIC_RELEASE);
	if (made && made->id >= 0) {
		uint64_t now = dsp_now();
		int64_t a[3] = {made->id, crank(c), csize(c)};
		dsp_emit(t, DDPSPY_EV_MPI_COMM, now, now, 3, a);
	}
	return e;
}

int MPI_Comm_free(MPI_Comm *c)
{
	if (!get_PMPI_Comm_free())
		return MPI_ERR_OTHER;
	struct comm_ent *e = c ? comm_find(*c) : NULL;
	int rc = real_PMPI_Comm_free(c);
	/* the handle may be reused for a new communicator: forget this one */
	if (rc == MPI_SUCCESS && e)
		__atomic_store_n(&e->handle, NULL, __ATOMIC_RELEASE);
	return rc;
}

/* the sequence number the communicator's next collective will get: a call's in flight */
static inline int64_t seq_now(struct comm_ent *e)
{
	return e ? (int64_t)__atomic_load_n(&e->seq, __ATOMIC_RELAXED) : -1;
}

/* a point-to-point call that can block, published in flight: op, comm, peer, tag, bytes */
#define P2P_CALL(t, op, comm, peer, tag, bytes)                                                      \
	({                                                                                          \
		struct comm_ent *ce_ = comm_get(t, comm);                                           \
		DSP_CALL(t, DDPSPY_EV_MPI_P2P, -1, 6, op, ce_ ? ce_->id : -1, peer, tag, bytes, 0); \
	})

/* ---- recording (each gives the guard back) ---- */
static void rec_coll(struct dsp_tls *t, uint64_t t0, uint64_t t1, int op, MPI_Comm comm,
		     int64_t bytes, int64_t root, int64_t request, int rc)
{
	struct comm_ent *e = comm_get(t, comm);
	uint64_t seq = __atomic_fetch_add(e ? &e->seq : &overflow_seq, 1, __ATOMIC_RELAXED);
	int64_t a[7] = {op, e ? e->id : -1, (int64_t)seq, bytes, root, request, rc};
	if (request == -1) { /* blocking: no request argument */
		a[5] = rc;
		dsp_emit_wait(t, DDPSPY_EV_MPI_COLL, t0, t1, 6, a);
	} else {
		dsp_emit(t, DDPSPY_EV_MPI_ICOLL, t0, t1, 7, a);
	}
	dsp_leave(t);
}

/* A point-to-point call: its send or receive as peer, tag, bytes; MPI_Sendrecv's receive as rpeer,
 * rtag, rbytes (-1 for the other calls) */
static void emit_p2p(struct dsp_tls *t, uint64_t t0, uint64_t t1, int op, MPI_Comm comm, int64_t peer, int64_t tag,
		     int64_t bytes, int64_t request, int rc, int64_t rpeer, int64_t rtag, int64_t rbytes)
{
	struct comm_ent *e = comm_get(t, comm);
	int64_t a[10] = {op, e ? e->id : -1, peer, tag, bytes, request, rc, rpeer, rtag, rbytes};
	dsp_emit_wait(t, DDPSPY_EV_MPI_P2P, t0, t1, 10, a);
}

static void rec_p2p_full(struct dsp_tls *t, uint64_t t0, uint64_t t1, int op, MPI_Comm comm, int64_t peer,
			 int64_t tag, int64_t bytes, int64_t request, int rc, int64_t rpeer, int64_t rtag, int64_t rbytes)
{
	emit_p2p(t, t0, t1, op, comm, peer, tag, bytes, request, rc, rpeer, rtag, rbytes);
	dsp_leave(t);
}

static void rec_p2p(struct dsp_tls *t, uint64_t t0, uint64_t t1, int op, MPI_Comm comm,
		    int64_t peer, int64_t tag, int64_t bytes, int64_t request, int rc)
{
	rec_p2p_full(t, t0, t1, op, comm, peer, tag, bytes, request, rc, -1, -1, -1);
}

/* Waits are recorded when they complete something, or when a Test that found nothing done still
 * took long enough to have done progress work (dsp_poll_ticks); the rest are idle polls. */
static void rec_wait(struct dsp_tls *t, uint64_t t0, uint64_t t1, int op, int64_t count,
		     int64_t request, int rc, int completed)
{
	if (completed || rc != MPI_SUCCESS || t1 - t0 > dsp_poll_ticks) {
		int64_t a[4] = {op, count, request, rc};
		dsp_emit_wait(t, DDPSPY_EV_MPI_WAIT, t0, t1, 4, a);
	}
	dsp_leave(t);
}

/* ---- init and finalize ---- */
static void after_init(struct dsp_tls *t, uint64_t t0, int rc)
{
	uint64_t t1 = dsp_now();
	int rank = -1, size = -1;

	if (rc == MPI_SUCCESS) {
		/* RTLD_DEFAULT, not RTLD_NEXT: a program that names MPI_COMM_WORLD holds the live
		 * object by copy relocation, and libmpi's own definition is then a dead original */
		world = (MPI_Comm)dlsym(RTLD_DEFAULT, "ompi_mpi_comm_world");
		if (world) {
			rank = crank(world);
			size = (int)csize(world);
			if (rank >= 0 && size > 0)
				dsp_identity_from_mpi(rank, size);
		} else {
			dsp_log("not Open MPI: the rank comes from the environment only");
		}
	}
	int64_t a[3] = {rank, size, rc};
	dsp_emit(t, DDPSPY_EV_MPI_INIT, t0, t1, 3, a);
	dsp_leave(t);
}

int MPI_Init(int *argc, char ***argv)
{
	if (!get_PMPI_Init())
		return MPI_ERR_OTHER;
	struct dsp_tls *t = &dsp_tls;
	if (!dsp_enter(t))
		return real_PMPI_Init(argc, argv);
	uint64_t t0 = dsp_now();
	int rc = real_PMPI_Init(argc, argv);
	after_init(t, t0, rc);
	return rc;
}

int MPI_Init_thread(int *argc, char ***argv, int required, int *provided)
{
	if (!get_PMPI_Init_thread())
		return MPI_ERR_OTHER;
	struct dsp_tls *t = &dsp_tls;
	if (!dsp_enter(t))
		return real_PMPI_Init_thread(argc, argv, required, provided);
	uint64_t t0 = dsp_now();
	int rc = real_PMPI_Init_thread(argc, argv, required, provided);
	after_init(t, t0, rc);
	return rc;
}

int MPI_Finalize(void)
{
	if (!get_PMPI_Finalize())
		return MPI_ERR_OTHER;
	struct dsp_tls *t = &dsp_tls;
	if (!dsp_enter(t))
		return real_PMPI_Finalize();
	uint64_t t0 = dsp_now();
	int rc = real_PMPI_Finalize();
	uint64_t t1 = dsp_now();
	int64_t a[1] = {rc};
	dsp_emit(t, DDPSPY_EV_MPI_FINALIZE, t0, t1, 1, a);
	dsp_leave(t);
	return rc;
}

/* ---- MPI_Waitany, Waitsome, Testany, Testsome: the request they completed ----
 * Recorded as one wait (count 1) of the request completed, or for Waitsome and Testsome the first
 * of those it names (the others completed in that call are not named: the collector leaves them
 * without the call that completed them). The call sets a completed request's handle to
 * MPI_REQUEST_NULL, so the handles are copied first, on the stack: the first REQ_COPY of the
 * array; one completed beyond them is recorded as 0 (unknown). */
#define REQ_COPY 256

static int copy_requests(MPI_Request *to, const MPI_Request *from, int count)
{
	int n = from && count > 0 ? (count < REQ_COPY ? count : REQ_COPY) : 0;
	for (int i = 0; i < n; i++)
		to[i] = from[i];
	return n;
}

/* the request at index (MPI_UNDEFINED, a negative value in Open MPI: none) of the copy */
static int64_t request_at(const MPI_Request *saved, int n, int index)
{
	return index >= 0 && index < n ? (int64_t)(uintptr_t)saved[index] : 0;
}

static int wild(int source, int tag)
{
	return source == MPI_ANY_SOURCE || tag == MPI_ANY_TAG;
}

/* ---- nonblocking wildcard receives: the source and tag their completion names ----
 * An MPI_Irecv (or a start of a persistent receive) with MPI_ANY_SOURCE or MPI_ANY_TAG leaves its
 * request in a lock-free table of WILDS entries (at most PROBES looked at from its hash). While the
 * table has ever had one, the waits and tests copy the first WILDCAP handles they are given and,
 * when the program ignores the statuses, pass statuses of ours; after the call, each completed
 * request found in the table is taken out and an mpi_status event (request, source, tag) is
 * written before the call's own. A request past those, or made while its entries are taken, is
 * not resolved: the collector leaves it as an unresolved wildcard. */
#define WILDS 1024
#define WILDCAP 64
static void *wildq[WILDS];
static int wilded; /* whether a wildcard receive was ever posted */

static size_t wild_slot(const void *req)
{
	return (size_t)(((uintptr_t)req >> 4) * 0x9e3779b97f4a7c15ull >> 54) & (WILDS - 1);
}

static void wild_put(MPI_Request req)
{
	for (size_t i = wild_slot(req), n = 0; req && n < PROBES; i = (i + 1) & (WILDS - 1), n++) {
		void *k = __atomic_load_n(&wildq[i], __ATOMIC_RELAXED);
		if (k == (void *)req)
			return;
		if ((k == NULL || k == PERSIST_GONE) &&
		    __atomic_compare_exchange_n(&wildq[i], &k, (void *)req, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
			__atomic_store_n(&wilded, 1, __ATOMIC_RELAXED);
			return;
		}
	}
}

/* req was in the table (then no longer) */
static int wild_take(MPI_Request req)
{
	for (size_t i = wild_slot(req), n = 0; req && n < PROBES; i = (i + 1) & (WILDS - 1), n++) {
		void *k = __atomic_load_n(&wildq[i], __ATOMIC_RELAXED);
		if (k == (void *)req)
			return __atomic_compare_exchange_n(&wildq[i], &k, PERSIST_GONE, 0, __ATOMIC_RELAXED,
							   __ATOMIC_RELAXED);
		if (!k)
			return 0;
	}
	return 0;
}

struct wildcap {
	int n; /* the handles copied; 0: nothing to resolve */
	MPI_Request req[WILDCAP];
	MPI_Status st[WILDCAP];
};

/* before a wait or test of count requests: the statuses to pass it (ours in place of an ignored
 * one, when a wildcard receive may be among them) */
static MPI_Status *wild_before(struct wildcap *c, const MPI_Request *reqs, int count, MPI_Status *st)
{
	c->n = 0;
	if (likely(!__atomic_load_n(&wilded, __ATOMIC_RELAXED)) || !reqs || count <= 0 ||
	    (count > WILDCAP && st == MPI_STATUS_IGNORE))
		return st;
	c->n = count < WILDCAP ? count : WILDCAP;
	for (int i = 0; i < c->n; i++)
		c->req[i] = reqs[i];
	return st == MPI_STATUS_IGNORE ? c->st : st;
}

/* after it, at t1: an mpi_status event for each completed request that was a wildcard receive;
 * the j-th completed is the request idx[j] (or j), its status the j-th (the one, when single) */
static void wild_after(struct dsp_tls *t, uint64_t t1, const struct wildcap *c, const MPI_Status *sts, int ndone,
		       const int *idx, int single)
{
	for (int j = 0; j < ndone && c->n && sts; j++) {
		int ri = idx ? idx[j] : j;
		if (ri < 0 || ri >= c->n || !wild_take(c->req[ri]))
			continue;
		const MPI_Status *s = &sts[single ? 0 : j];
		int64_t a[3] = {(int64_t)(uintptr_t)c->req[ri], s->MPI_SOURCE, s->MPI_TAG};
		dsp_emit(t, DDPSPY_EV_MPI_STATUS, t1, t1, 3, a);
	}
}

#include "mpi_wrappers.inc"

/* The blocking receives (MPI_Recv, MPI_Sendrecv, MPI_Sendrecv_replace), written here: a receive
 * with a wildcard (MPI_ANY_SOURCE, MPI_ANY_TAG) is recorded with the source and tag it matched,
 * from its status (one of ours on the stack when the caller ignores it), so that the collector
 * matches it with its send like any other (an unresolved wildcard is recorded as -1); and two
 * peers do not fit the generated table. */
/* a wildcard's source and tag as its status names them (-1: the call failed); others as they are */
static void resolved(int *source, int *tag, const MPI_Status *st, int rc)
{
	if (*source == MPI_ANY_SOURCE)
		*source = rc == MPI_SUCCESS ? st->MPI_SOURCE : -1;
	if (*tag == MPI_ANY_TAG)
		*tag = rc == MPI_SUCCESS ? st->MPI_TAG : -1;
}

DSP_REAL(int, PMPI_Recv, (void *buf, int count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm,
			  MPI_Status *status), "libmpi")
int MPI_Recv(void *buf, int count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm, MPI_Status *status)
{
	if (!get_PMPI_Recv())
		return MPI_ERR_OTHER;
	struct dsp_tls *t = &dsp_tls;
	if (!dsp_enter(t))
		return real_PMPI_Recv(buf, count, datatype, source, tag, comm, status);
	MPI_Status mine, *st = status == MPI_STATUS_IGNORE && wild(source, tag) ? &mine : status;
	uint64_t t0 = P2P_CALL(t, DDPSPY_OP_RECV, comm, source, tag, count * tsize(datatype));
	int rc = real_PMPI_Recv(buf, count, datatype, source, tag, comm, st);
	uint64_t t1 = dsp_now();
	resolved(&source, &tag, st, rc);
	rec_p2p(t, t0, t1, DDPSPY_OP_RECV, comm, source, tag, count * tsize(datatype), 0, rc);
	return rc;
}

DSP_REAL(int, PMPI_Sendrecv, (const void *sendbuf, int sendcount, MPI_Datatype sendtype, int dest, int sendtag,
			     void *recvbuf, int recvcount, MPI_Datatype recvtype, int source, int recvtag, MPI_Comm comm,
			     MPI_Status *status), "libmpi")
int MPI_Sendrecv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, int dest, int sendtag, void *recvbuf,
		 int recvcount, MPI_Datatype recvtype, int source, int recvtag, MPI_Comm comm, MPI_Status *status)
{
	if (!get_PMPI_Sendrecv())
		return MPI_ERR_OTHER;
	struct dsp_tls *t = &dsp_tls;
	if (!dsp_enter(t))
		return real_PMPI_Sendrecv(sendbuf, sendcount, sendtype, dest, sendtag, recvbuf, recvcount, recvtype, source,
					  recvtag, comm, status);
	MPI_Status mine, *st = status == MPI_STATUS_IGNORE && wild(source, recvtag) ? &mine : status;
	uint64_t t0 = P2P_CALL(t, DDPSPY_OP_SENDRECV, comm, dest, sendtag, sendcount * tsize(sendtype));
	int rc = real_PMPI_Sendrecv(sendbuf, sendcount, sendtype, dest, sendtag, recvbuf, recvcount, recvtype, source,
				    recvtag, comm, st);
	uint64_t t1 = dsp_now();
	resolved(&source, &recvtag, st, rc);
	rec_p2p_full(t, t0, t1, DDPSPY_OP_SENDRECV, comm, dest, sendtag, sendcount * tsize(sendtype), 0, rc, source,
		     recvtag, recvcount * tsize(recvtype));
	return rc;
}

DSP_REAL(int, PMPI_Sendrecv_replace, (void *buf, int count, MPI_Datatype datatype, int dest, int sendtag, int source,
				      int recvtag, MPI_Comm comm, MPI_Status *status), "libmpi")
int MPI_Sendrecv_replace(void *buf, int count, MPI_Datatype datatype, int dest, int sendtag, int source, int recvtag,
			 MPI_Comm comm, MPI_Status *status)
{
	if (!get_PMPI_Sendrecv_replace())
		return MPI_ERR_OTHER;
	struct dsp_tls *t = &dsp_tls;
	if (!dsp_enter(t))
		return real_PMPI_Sendrecv_replace(buf, count, datatype, dest, sendtag, source, recvtag, comm, status);
	MPI_Status mine, *st = status == MPI_STATUS_IGNORE && wild(source, recvtag) ? &mine : status;
	uint64_t t0 = P2P_CALL(t, DDPSPY_OP_SENDRECV, comm, dest, sendtag, count * tsize(datatype));
	int rc = real_PMPI_Sendrecv_replace(buf, count, datatype, dest, sendtag, source, recvtag, comm, st);
	uint64_t t1 = dsp_now();
	resolved(&source, &recvtag, st, rc);
	int64_t bytes = count * tsize(datatype);
	rec_p2p_full(t, t0, t1, DDPSPY_OP_SENDRECV, comm, dest, sendtag, bytes, 0, rc, source, recvtag, bytes);
	return rc;
}

/* MPI_Probe waits for a message without taking it: a wait that completes nothing (comms time);
 * MPI_Iprobe, a poll, only when it took long enough to have done progress work, as MPI_Test */
DSP_REAL(int, PMPI_Probe, (int source, int tag, MPI_Comm comm, MPI_Status *status), "libmpi")
int MPI_Probe(int source, int tag, MPI_Comm comm, MPI_Status *status)
{
	if (!get_PMPI_Probe())
		return MPI_ERR_OTHER;
	struct dsp_tls *t = &dsp_tls;
	if (!dsp_enter(t))
		return real_PMPI_Probe(source, tag, comm, status);
	uint64_t t0 = DSP_CALL(t, DDPSPY_EV_MPI_WAIT, -1, 4, DDPSPY_OP_PROBE, 0, 0, -1);
	int rc = real_PMPI_Probe(source, tag, comm, status);
	uint64_t t1 = dsp_now();
	rec_wait(t, t0, t1, DDPSPY_OP_PROBE, 0, 0, rc, 1);
	return rc;
}

DSP_REAL(int, PMPI_Iprobe, (int source, int tag, MPI_Comm comm, int *flag, MPI_Status *status), "libmpi")
int MPI_Iprobe(int source, int tag, MPI_Comm comm, int *flag, MPI_Status *status)
{
	if (!get_PMPI_Iprobe())
		return MPI_ERR_OTHER;
	struct dsp_tls *t = &dsp_tls;
	if (!dsp_enter(t))
		return real_PMPI_Iprobe(source, tag, comm, flag, status);
	uint64_t t0 = dsp_now();
	int rc = real_PMPI_Iprobe(source, tag, comm, flag, status);
	uint64_t t1 = dsp_now();
	rec_wait(t, t0, t1, DDPSPY_OP_IPROBE, 0, 0, rc, 0);
	return rc;
}

/* ---- persistent requests: MPI_Send_init and its kin, started by MPI_Start and MPI_Startall ----
 * An init sends nothing: what it describes is kept by its request handle in a table, and each start
 * is recorded as the Isend or Irecv it begins, with the persistent request, so that the wait that
 * completes it is matched as theirs are. The table is lock-free for a start's lookup: an entry's
 * fields are written before its handle is published (release), a freed one is marked gone. A
 * request is looked for in the PROBES entries from its hash on (a miss, as in MPI_Request_free of
 * any other request, costs no more than that); one made while those are taken is not recorded
 * when started. */
#define PERSIST 4096
static struct persist {
	void *req;
	MPI_Comm comm;
	int op, peer, tag;
	int64_t bytes;
} persist[PERSIST];
static int persisted; /* whether an entry was ever made: lookups skip the table until then */

static size_t persist_slot(const void *req)
{
	return (size_t)(((uintptr_t)req >> 4) * 0x9e3779b97f4a7c15ull >> 52) & (PERSIST - 1);
}

static struct persist *persist_find(const void *req)
{
	if (!req || !__atomic_load_n(&persisted, __ATOMIC_RELAXED))
		return NULL;
	for (size_t i = persist_slot(req), n = 0; n < PROBES; i = (i + 1) & (PERSIST - 1), n++) {
		void *k = __atomic_load_n(&persist[i].req, __ATOMIC_ACQUIRE);
		if (k == req)
			return &persist[i];
		if (!k)
			return NULL;
	}
	return NULL;
}

static void persist_put(MPI_Request req, int op, MPI_Comm comm, int peer, int tag, int64_t bytes)
{
	for (size_t i = persist_slot(req), n = 0; req && n < PROBES; i = (i + 1) & (PERSIST - 1), n++) {
		void *k = __atomic_load_n(&persist[i].req, __ATOMIC_ACQUIRE);
		if ((k == NULL || k == PERSIST_GONE) &&
		    __atomic_compare_exchange_n(&persist[i].req, &k, PERSIST_BUSY, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) {
			persist[i].comm = comm, persist[i].op = op, persist[i].peer = peer, persist[i].tag = tag;
			persist[i].bytes = bytes;
			__atomic_store_n(&persist[i].req, (void *)req, __ATOMIC_RELEASE);
			__atomic_store_n(&persisted, 1, __ATOMIC_RELAXED);
			return;
		}
	}
}

/* the inits: forwarded, then described in the table (recording nothing themselves) */
#define PERSIST_INIT(name, OP)                                                                      \
	DSP_REAL(int, PMPI_##name, (const void *buf, int count, MPI_Datatype datatype, int peer, int tag,     \
				    MPI_Comm comm, MPI_Request *request), "libmpi")                   \
	int MPI_##name(const void *buf, int count, MPI_Datatype datatype, int peer, int tag, MPI_Comm comm,     \
		       MPI_Request *request)                                                                 \
	{                                                                                                    \
		if (!get_PMPI_##name())                                                                      \
			return MPI_ERR_OTHER;                                                                \
		struct dsp_tls *t = &dsp_tls;                                                                \
		if (!dsp_enter(t))                                                                           \
			return real_PMPI_##name(buf, count, datatype, peer, tag, comm, request);             \
		int rc = real_PMPI_##name(buf, count, datatype, peer, tag, comm, request);                   \
		if (rc == MPI_SUCCESS && request)                                                            \
			persist_put(*request, DDPSPY_OP_##OP, comm, peer, tag, count * tsize(datatype));     \
		dsp_leave(t);                                                                                \
		return rc;                                                                                   \
	}
PERSIST_INIT(Send_init, SEND)
PERSIST_INIT(Ssend_init, SEND)
PERSIST_INIT(Bsend_init, SEND)
PERSIST_INIT(Rsend_init, SEND)
/* (MPI_Recv_init's buffer is not const: its own wrapper) */
DSP_REAL(int, PMPI_Recv_init, (void *buf, int count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm,
			       MPI_Request *request), "libmpi")
int MPI_Recv_init(void *buf, int count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm,
		  MPI_Request *request)
{
	if (!get_PMPI_Recv_init())
		return MPI_ERR_OTHER;
	struct dsp_tls *t = &dsp_tls;
	if (!dsp_enter(t))
		return real_PMPI_Recv_init(buf, count, datatype, source, tag, comm, request);
	int rc = real_PMPI_Recv_init(buf, count, datatype, source, tag, comm, request);
	if (rc == MPI_SUCCESS && request)
		persist_put(*request, DDPSPY_OP_RECV, comm, source, tag, count * tsize(datatype));
	dsp_leave(t);
	return rc;
}

/* a start of a persistent request at t0..t1 (each of MPI_Startall's after the first recorded at
 * its end: one call, its time counted once); whether it was recorded */
static int rec_start(struct dsp_tls *t, uint64_t t0, uint64_t t1, MPI_Request req, int rc)
{
	const struct persist *p = persist_find(req);
	if (p && p->op == DDPSPY_OP_RECV && rc == MPI_SUCCESS && wild(p->peer, p->tag))
		wild_put(req);
	if (p)
		emit_p2p(t, t0, t1, p->op, p->comm, p->peer, p->tag, p->bytes, (int64_t)(uintptr_t)req, rc, -1, -1, -1);
	return p != NULL;
}

DSP_REAL(int, PMPI_Start, (MPI_Request *request), "libmpi")
int MPI_Start(MPI_Request *request)
{
	if (!get_PMPI_Start())
		return MPI_ERR_OTHER;
	struct dsp_tls *t = &dsp_tls;
	if (!dsp_enter(t))
		return real_PMPI_Start(request);
	MPI_Request req = request ? *request : (MPI_Request)0; /* (not MPI_REQUEST_NULL: a global of libmpi) */
	uint64_t t0 = dsp_now();
	int rc = real_PMPI_Start(request);
	uint64_t t1 = dsp_now();
	rec_start(t, t0, t1, req, rc);
	dsp_leave(t);
	return rc;
}

DSP_REAL(int, PMPI_Startall, (int count, MPI_Request reqs[]), "libmpi")
int MPI_Startall(int count, MPI_Request reqs[])
{
	if (!get_PMPI_Startall())
		return MPI_ERR_OTHER;
	struct dsp_tls *t = &dsp_tls;
	if (!dsp_enter(t))
		return real_PMPI_Startall(count, reqs);
	uint64_t t0 = dsp_now();
	int rc = real_PMPI_Startall(count, reqs);
	uint64_t t1 = dsp_now();
	for (int i = 0, one = 0; reqs && i < count; i++) /* (persistent handles stay as they were) */
		one |= rec_start(t, one ? t1 : t0, t1, reqs[i], rc);
	dsp_leave(t);
	return rc;
}

DSP_REAL(int, PMPI_Request_free, (MPI_Request *request), "libmpi")
int MPI_Request_free(MPI_Request *request)
{
	if (!get_PMPI_Request_free())
		return MPI_ERR_OTHER;
	struct persist *p = request ? persist_find(*request) : NULL;
	int rc = real_PMPI_Request_free(request);
	/* the handle may be reused for a new request: forget this one */
	if (rc == MPI_SUCCESS && p)
		__atomic_store_n(&p->req, PERSIST_GONE, __ATOMIC_RELEASE);
	return rc;
}
