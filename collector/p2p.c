/* Point-to-point wait states, as Scalasca defines them. Every send is matched with its receive by
 * communicator, the two ranks, tag and order (MPI's non-overtaking rule: the n-th send from a to b
 * with tag t on a communicator is received by b's n-th receive from a with tag t on it): each
 * call is numbered while it is read (an_p2p_number), so that the numbers stay right when only a
 * sample of the steps is kept. A receive that blocks (a blocking receive, MPI_Sendrecv, or the
 * wait that completes a nonblocking one) before the matching send started waits for a late
 * sender; a send that blocks (a rendezvous send, or its wait) before the matching receive was
 * posted waits for a late receiver. Each blocking call's wait is the longest of its operations',
 * charged to that operation's peer; split.c adds it to the step's waits like a collective's.
 * A blocking receive with a wildcard (MPI_ANY_SOURCE, MPI_ANY_TAG) is recorded with the source and
 * tag it matched (preload/mpi.c) and numbered as such. A nonblocking one waits for the mpi_status
 * event that the call completing it wrote (an_p2p_resolve): numbered then, it takes the number it
 * would have had when posted, as long as no receive it could have taken a message of (on its
 * communicator, any source and the same tag, or the same source and any tag) was numbered in
 * between, nor is a wildcard posted before it and not resolved yet that could have taken from the
 * same sender. Where one was, or no status comes, it is not resolved, and neither that receive nor
 * the thread's later ones it could affect are matched: their numbers could be off. What was
 * resolved is kept by the wildcard's order (an_wres), so that a second reading numbers alike. */
#include <stdlib.h>
#include <string.h>

#include "../common/format.h"
#include "analysis_int.h"

/* ---- numbering ---- */

#define PENDW 64

struct p2pnum {
	struct nkey {
		int32_t comm, peer, tag, dir; /* dir 1: receives */
		int32_t n;                    /* calls so far; 0: a free slot (n starts at 1) */
	} *v;
	size_t cap, n;
	struct nkey wild[8];              /* unresolved wildcard receives seen (peer or tag -1: any) */
	int nwild;                        /* (9: too many to list: every receive is left unmatched) */
	uint64_t wilds, after;            /* such receives, and receives left unmatched after them */
	struct pendw {                    /* nonblocking wildcard receives waiting for their status */
		uint32_t req, ord;
		int32_t comm, peer, tag;
	} pend[PENDW];
	int npend;
	uint32_t nwc;                     /* wildcard receives so far (the next one's order) */
	struct an_wres *res;              /* by order: how each was resolved (src -1: not) */
	size_t nres, cres;
	int replay;                       /* a second reading: res is the first's */
};

static uint64_t nkey_hash(int32_t comm, int32_t peer, int32_t tag, int32_t dir)
{
	uint64_t h = (uint64_t)(uint32_t)comm * 0x9e3779b97f4a7c15ull;
	h ^= ((uint64_t)(uint32_t)peer << 32 | (uint32_t)tag) + 0xbf58476d1ce4e5b9ull + (h << 6) + (h >> 2);
	h ^= (uint64_t)dir * 0x94d049bb133111ebull;
	return h ^ (h >> 29);
}

/* the order of a call to (comm, peer, tag, dir) among the thread's: 0 for the first; -1 when it
 * cannot be matched (a wildcard, MPI_PROC_NULL, an unknown communicator) or out of memory */
static int32_t order(struct p2pnum *t, int32_t comm, int32_t peer, int32_t tag, int32_t dir)
{
	if (comm == -1 || peer < 0 || tag < 0) /* (ids are cut to 32 bits: any other value is one) */
		return -1;
	if (2 * (t->n + 1) > t->cap) {
		size_t cap = t->cap ? 2 * t->cap : 64;
		struct nkey *v = calloc(cap, sizeof *v);
		if (!v)
			return -1;
		for (size_t i = 0; i < t->cap; i++)
			if (t->v[i].n) {
				size_t j = nkey_hash(t->v[i].comm, t->v[i].peer, t->v[i].tag, t->v[i].dir) & (cap - 1);
				while (v[j].n)
					j = (j + 1) & (cap - 1);
				v[j] = t->v[i];
			}
		free(t->v);
		t->v = v;
		t->cap = cap;
	}
	size_t j = nkey_hash(comm, peer, tag, dir) & (t->cap - 1);
	while (t->v[j].n && !(t->v[j].comm == comm && t->v[j].peer == peer && t->v[j].tag == tag && t->v[j].dir == dir))
		j = (j + 1) & (t->cap - 1);
	if (!t->v[j].n) {
		t->v[j] = (struct nkey){ comm, peer, tag, dir, 0 };
		t->n++;
	}
	return t->v[j].n++;
}

/* an unresolved wildcard receive (comm, peer, tag): the thread's later receives it could have taken
 * a message of are left unmatched */
static void give_up(struct p2pnum *t, int32_t comm, int32_t peer, int32_t tag)
{
	int i = 0;
	while (i < t->nwild && i < 8 && !(t->wild[i].comm == comm && t->wild[i].peer == peer && t->wild[i].tag == tag))
		i++;
	if (i == t->nwild && i < 8)
		t->wild[i] = (struct nkey){ comm, peer, tag, 1, 0 };
	t->nwild += i == t->nwild && t->nwild < 9;
	t->wilds++;
}

static int could_take(int32_t wcomm, int32_t wpeer, int32_t wtag, int32_t comm, int32_t peer, int32_t tag)
{
	return wcomm == comm && (wpeer < 0 || wpeer == peer) && (wtag < 0 || wtag == tag) && peer >= 0;
}

static void res_set(struct p2pnum *t, uint32_t ord, int32_t src, int32_t tag)
{
	if (t->replay)
		return;
	if (ord >= t->nres) {
		struct an_wres *v = room_for(t->res, ord, &t->cres, sizeof *v, 64);
		if (!v)
			return;
		t->res = v;
		for (size_t i = t->nres; i <= ord; i++)
			t->res[i] = (struct an_wres){ -1, -1 };
		t->nres = (size_t)ord + 1;
	}
	t->res[ord] = (struct an_wres){ src, tag };
}

/* a receive's number, -1 where an unresolved wildcard receive before it may have taken its message
 * (and that receive noted); a wildcard's own -1 until its status resolves it (req: its request),
 * or, on a second reading, its number from how the first resolved it (*peer, *tag set) */
static int32_t recv_order(struct p2pnum *t, int32_t comm, int32_t *peer, int32_t *tag, uint32_t req)
{
	if (comm != -1 && *peer >= -1 && (*peer == -1 || *tag == -1)) { /* (MPI_ANY_SOURCE, MPI_ANY_TAG; not
									  * from MPI_PROC_NULL, -2) */
		uint32_t ord = t->nwc++;
		if (t->replay && ord < t->nres && t->res[ord].src >= 0) {
			*peer = t->res[ord].src;
			*tag = t->res[ord].tag;
			return order(t, comm, *peer, *tag, 1);
		}
		res_set(t, ord, -1, -1);
		if (req && t->npend < PENDW) {
			t->pend[t->npend++] = (struct pendw){ req, ord, comm, *peer, *tag };
			return -1;
		}
		give_up(t, comm, *peer, *tag);
		return -1;
	}
	/* a pending wildcard that could have taken this one's message: its number is lost */
	for (int i = 0; i < t->npend; i++)
		if (could_take(t->pend[i].comm, t->pend[i].peer, t->pend[i].tag, comm, *peer, *tag)) {
			give_up(t, t->pend[i].comm, t->pend[i].peer, t->pend[i].tag);
			t->pend[i--] = t->pend[--t->npend];
		}
	int32_t pe = *peer, tg = *tag;
	int after = t->nwild > 8 && comm != -1 && pe >= 0;
	for (int i = 0; i < t->nwild && i < 8 && !after; i++)
		after = could_take(t->wild[i].comm, t->wild[i].peer, t->wild[i].tag, comm, pe, tg);
	if (after) {
		t->after++;
		return -1;
	}
	return order(t, comm, pe, tg, 1);
}

int32_t an_p2p_resolve(struct p2pnum *t, uint32_t req, int32_t src, int32_t tag)
{
	int i = t ? t->npend : 0;
	while (i-- > 0 && t->pend[i].req != req)
		;
	if (i < 0 || src < 0 || tag < 0)
		return -1;
	struct pendw w = t->pend[i];
	t->pend[i] = t->pend[--t->npend];
	int early = 0; /* a wildcard posted before it, not resolved yet, that could take from its sender */
	for (int k = 0; k < t->npend && !early; k++)
		early = t->pend[k].ord < w.ord && could_take(t->pend[k].comm, t->pend[k].peer, t->pend[k].tag, w.comm, src, tag);
	if (early || (w.peer >= 0 && w.peer != src) || (w.tag >= 0 && w.tag != tag)) { /* (or not the status it
										       * asked for) */
		give_up(t, w.comm, w.peer, w.tag);
		return -1;
	}
	res_set(t, w.ord, src, tag);
	return order(t, w.comm, src, tag, 1);
}

void an_p2p_num_wild(const struct p2pnum *t, uint64_t *wilds, uint64_t *after)
{
	*wilds += t ? t->wilds + (uint64_t)t->npend : 0;
	*after += t ? t->after : 0;
}

void an_p2p_num_res(struct p2pnum *t, struct an_wres **res, size_t *n)
{
	*res = t && !t->replay ? t->res : NULL;
	*n = *res ? t->nres : 0;
	if (*res)
		t->res = NULL, t->nres = t->cres = 0;
}

void an_p2p_num_replay(struct p2pnum **t, const struct an_wres *res, size_t n)
{
	if (!*t && !(*t = calloc(1, sizeof **t)))
		return;
	(*t)->replay = 1;
	(*t)->res = (struct an_wres *)res; /* (not freed: the thread's) */
	(*t)->nres = n;
}

void an_p2p_number(struct p2pnum **t, struct ev *v)
{
	if (!an_is_msg(v))
		return;
	if (!*t && !(*t = calloc(1, sizeof **t))) {
		v->seq = -1;
		return;
	}
	if (an_nccl_p2p(v)) { /* (NCCL pairs a peer's sends with its receives in order: no tag, no wildcard) */
		v->order = order(*t, v->comm, v->peer, 0, 2 + (v->op == DDPSPY_OP_RECV));
		return;
	}
	/* (a blocking receive is resolved already: no request to wait for its status with) */
	uint32_t req = v->op == DDPSPY_OP_RECV ? v->req : 0;
	v->seq = v->op == DDPSPY_OP_RECV ? recv_order(*t, v->comm, &v->peer, &v->tag, req) :
					   order(*t, v->comm, v->peer, v->tag, 0);
	if (v->op == DDPSPY_OP_SENDRECV)
		v->rseq = recv_order(*t, v->comm, &v->rpeer, &v->rtag, 0);
}

void an_p2p_num_free(struct p2pnum *t)
{
	if (t) {
		free(t->v);
		if (!t->replay)
			free(t->res);
	}
	free(t);
}

/* ---- matching ---- */

/* one send or receive; blk: the call that blocked for it (the call itself when blocking, else the
 * wait that completed it), -1 none */
struct p2op {
	int64_t post;
	int32_t comm, src, dst, tag, seq; /* src, dst: ranks in comm */
	int r;                            /* the rank (index in a->ranks) that made it */
	int send;
	long blk;
	uint32_t req;                     /* nonblocking: its request (folded), 0 blocking */
	int thin;                         /* the clocks' messages leave it out (below the spread's level) */
};

struct match {
	struct p2op *op;
	size_t n, cap;
	struct an_p2pblk *blk;
	size_t nblk, cblk;
};

static struct p2op *op_add(struct match *m)
{
	struct p2op *v = room_for(m->op, m->n, &m->cap, sizeof *v, 1024);
	return v ? &(m->op = v)[m->n++] : NULL;
}

static long blk_add(struct match *m, const struct ev *e, int r)
{
	struct an_p2pblk *v = room_for(m->blk, m->nblk, &m->cblk, sizeof *v, 1024);
	if (!v)
		return -1;
	m->blk = v;
	m->blk[m->nblk] = (struct an_p2pblk){ .t = e->t, .d = e->d, .L = -1, .kind = e->kind, .op = e->op, .r = r,
					      .root = -1 };
	return (long)m->nblk++;
}

int an_comm_rank(const struct proc *p, int32_t comm)
{
	for (int i = 0; i < p->ncomms; i++)
		if (p->comms[i].comm == comm)
			return p->comms[i].rank;
	return comm == 0 ? p->rank : -1;
}

int an_p2p_msgs(const struct proc *p, const struct ev *e, struct an_p2pmsg m[2])
{
	int me = an_comm_rank(p, e->comm), n = 1 + (e->op == DDPSPY_OP_SENDRECV);
	if (an_nccl_p2p(e)) {
		int send = e->op == DDPSPY_OP_SEND;
		m[0] = (struct an_p2pmsg){ e->comm, send ? me : e->peer, send ? e->peer : me, 0, me < 0 ? -1 : e->order, send };
		return 1;
	}
	for (int part = 0; part < n; part++) {
		int send = part == 0 && e->op != DDPSPY_OP_RECV;
		int32_t peer = part ? e->rpeer : e->peer;
		m[part] = (struct an_p2pmsg){ e->comm, send ? me : peer, send ? peer : me, part ? e->rtag : e->tag,
					      me < 0 ? -1 : part ? e->rseq : e->seq, send };
	}
	return n;
}

/* the operations a wait may complete: rank r's nonblocking ones not completed yet, in posting
 * order (indices into m->op) */
struct pending {
	size_t *v;
	size_t n, cap;
};

#define MAX_PENDING 4096 /* more: the oldest half are taken as completed by calls not seen (MPI_Test) */

static void pend_add(struct match *m, struct pending *q, size_t i)
{
	if (q->n == MAX_PENDING) {
		for (size_t j = 0; j < q->n / 2; j++)
			m->op[q->v[j]].blk = -1;
		memmove(q->v, q->v + q->n / 2, (q->n - q->n / 2) * sizeof *q->v);
		q->n -= q->n / 2;
	}
	size_t *v = room_for(q->v, q->n, &q->cap, sizeof *v, 64);
	if (v)
		(q->v = v)[q->n++] = i;
}

struct pendreq {
	const struct match *m;
	const struct pending *q;
};

static uint32_t pend_req(const void *ctx, size_t k)
{
	const struct pendreq *x = ctx;
	return x->m->op[x->q->v[k]].req;
}

/* wait e completes the pending operations an_p2p_completed says */
static void complete(struct match *m, struct pending *q, const struct ev *e, int r)
{
	size_t from, to;
	if (!an_p2p_completed(q->n, pend_req, &(struct pendreq){ m, q }, e, &from, &to))
		return;
	long b = blk_add(m, e, r);
	for (size_t j = from; j < to; j++)
		m->op[q->v[j]].blk = b;
	memmove(q->v + from, q->v + to, (q->n - to) * sizeof *q->v);
	q->n -= to - from;
}

/* whether q holds rank r's operation of message msg with request req (a post of the prefix the
 * spread kept again with the wait beyond it) */
static int pending_has(const struct match *m, const struct pending *q, int r, const struct an_p2pmsg *msg,
		       uint32_t req)
{
	for (size_t j = q->n; j-- > 0;) {
		const struct p2op *o = &m->op[q->v[j]];
		if (o->r == r && o->req == req && o->comm == msg->comm && o->src == msg->src && o->dst == msg->dst &&
		    o->tag == msg->tag && o->seq == msg->seq && o->send == msg->send)
			return 1;
	}
	return 0;
}

/* rank r's training thread's point-to-point operations and the calls that blocked for them:
 * its kept calls (their messages below level thin marked so), then, where lv is not NULL, the
 * calls of its spread (at the job's level, times on its own clock; every message of those, each
 * kept with the wait that completed it). q: the operations pending, carried from the kept calls
 * to the spread, whose waits beyond the prefix complete the posts in it that the spread kept again
 * (those up to seed, on the job's clock), as the whole trace read once would. */
static void gather_calls(struct match *m, const struct proc *p, int r, const struct ev *ev, size_t n,
			 const uint8_t *lv, unsigned thin, struct pending *q, int64_t seed)
{
	for (size_t i = 0; i < n; i++) {
		if (lv && lv[i] < p->spk)
			continue;
		struct ev sp = lv ? an_job_ev(p, &ev[i]) : (struct ev){ 0 };
		const struct ev *e = lv ? &sp : &ev[i];
		if (an_is_p2p(e)) {
			struct an_p2pmsg msg[2];
			int nm = an_p2p_msgs(p, e, msg), nb = e->op != DDPSPY_OP_SENDRECV && e->req != 0;
			long b = nb ? -1 : blk_add(m, e, r);
			for (int k = 0; k < nm; k++) {
				if (msg[k].seq < 0 && !nb) /* (-1: not matched) */
					continue;
				if (nb && lv && e->t <= seed && pending_has(m, q, r, &msg[k], e->req))
					continue;
				struct p2op *o = op_add(m);
				if (!o)
					break;
				*o = (struct p2op){ e->t, msg[k].comm, msg[k].src, msg[k].dst, msg[k].tag, msg[k].seq, r,
						    msg[k].send, b, nb ? e->req : 0, thin && an_msg_level(&msg[k]) < thin };
				if (nb)
					pend_add(m, q, m->n - 1); /* (even unmatched: a wait names it) */
			}
		} else if (an_completes(e) && e->req) {
			complete(m, q, e, r);
		}
	}
}

/* rank r's operations: for the clocks, all that it kept and its spread; for the split, those in
 * its analysed steps (their span), as a long trace keeps them (the first step's receive of a send
 * made before it is no late sender's: the sender's step before was not analysed) */
static void gather_rank(struct analysis *a, struct match *m, int r, int clocks)
{
	const struct proc *p = a->ranks[r].p;
	const struct thr *t = an_train_thread(p);
	if (!t)
		return;
	struct pending q = { 0 };
	size_t i0 = 0, i1 = t->n;
	if (!clocks && a->sd && a->sd->span) {
		while (i0 < i1 && t->ev[i0].t < a->sd->span[r].t0)
			i0++;
		while (i1 > i0 && t->ev[i1 - 1].t >= a->sd->span[r].t1)
			i1--;
	}
	gather_calls(m, p, r, t->ev ? t->ev + i0 : NULL, i1 - i0, NULL, clocks ? p->spk : 0, &q, INT64_MIN); /* (none: NULL) */
	if (clocks)
		gather_calls(m, p, r, t->spr, t->nspr, t->slv, 0, &q, t->n ? t->ev[t->n - 1].t : INT64_MIN);
	free(q.v);
}

static int cmp_key(const struct p2op *x, const struct p2op *y)
{
	return AN_ORDER(x->comm, y->comm) ?: AN_ORDER(x->src, y->src) ?: AN_ORDER(x->dst, y->dst) ?:
	       AN_ORDER(x->tag, y->tag) ?: AN_ORDER(x->seq, y->seq);
}

static int cmp_op(const void *a, const void *b)
{
	const struct p2op *x = a, *y = b;
	int c = cmp_key(x, y);
	return c ? c : AN_ORDER(y->send, x->send); /* the send first */
}

/* the wait of blocking call b for operation o's peer (posted at peer_post, by rank L) */
static void charge(struct an_p2pblk *b, int64_t peer_post, int L, int late_sender)
{
	int64_t w = peer_post - b->t;
	if (w <= 0)
		return;
	if (w > b->d)
		w = b->d;
	/* the longest of its operations' waits; a late sender before a late receiver of the same
	 * length (a Sendrecv whose peer came late is both) */
	if (w > b->wait || (w == b->wait && late_sender && !b->late_sender)) {
		b->wait = w;
		b->L = L;
		b->late_sender = late_sender;
		b->post = peer_post;
	}
}

struct byend {
	int64_t end;
	size_t i;
};

static int cmp_end(const void *x, const void *y)
{
	const struct byend *a = x, *b = y;
	return AN_ORDER(a->end, b->end);
}

/* Waits propagate: a rank that waited for a late peer posts its own sends late, and its
 * neighbours wait for it in turn (a halo exchange passes one rank's delay across the grid in a
 * few iterations). Where L's latest blocking call before it posted the operation that b waited
 * for waited itself, L would have posted that much earlier without it (what it did in between
 * takes as long either way): so much of b's wait is charged to the root of L's wait, the rank
 * whose work started it, as Scalasca's root-cause analysis does; the rest stays L's. The blocks in order of
 * their end, so that L's earlier waits have their roots already. */
static void propagate(struct an_p2pblk *blk, size_t n, const size_t *pbo)
{
	struct byend *ord = malloc((n + 1) * sizeof *ord);
	if (!ord)
		return;
	for (size_t i = 0; i < n; i++)
		ord[i] = (struct byend){ blk[i].t + blk[i].d, i };
	sort_n(ord, n, sizeof *ord, cmp_end);
	for (size_t i = 0; i < n; i++) {
		struct an_p2pblk *b = &blk[ord[i].i];
		if (b->L < 0 || b->wait <= 0)
			continue;
		/* L's latest blocking call that started before it posted */
		size_t lo = pbo[b->L], hi = pbo[b->L + 1];
		while (lo < hi) {
			size_t m = (lo + hi) / 2;
			if (blk[m].t < b->post)
				lo = m + 1;
			else
				hi = m;
		}
		if (lo == pbo[b->L])
			continue;
		const struct an_p2pblk *c = &blk[lo - 1];
		int64_t end = c->t + c->d;
		if (c->L < 0 || c->wait <= 0 || end > b->post)
			continue;
		int M = c->root >= 0 && 2 * c->wroot >= c->wait ? c->root : c->L;
		if (M == b->r || M == b->L)
			continue;
		b->root = M;
		b->wroot = b->wait < c->wait ? b->wait : c->wait;
	}
	free(ord);
}

/* every rank's training thread's operations, sorted so that a send is followed by its receive;
 * pbo (R + 1, may be NULL): where each rank's blocking calls start in m->blk */
static void collect(struct analysis *a, struct match *m, size_t *pbo)
{
	int R = a->nranks;
	for (int r = 0; r < R; r++) {
		if (pbo)
			pbo[r] = m->nblk;
		gather_rank(a, m, r, !pbo);
	}
	if (pbo)
		pbo[R] = m->nblk;
	sort_n(m->op, m->n, sizeof *m->op, cmp_op);
}

/* the first matched send at i or after it (its receive at the next index), m->n when none */
static size_t next_pair(const struct match *m, size_t i)
{
	for (; i + 1 < m->n; i++) {
		const struct p2op *s = &m->op[i], *q = &m->op[i + 1];
		if (s->send && !q->send && s->seq >= 0 && !cmp_key(s, q))
			return i;
	}
	return m->n;
}

/* Every rank's blocking point-to-point calls, each with how long it waited for which late peer:
 * sd->pblk, per rank in time order (sd->pbo[r] .. sd->pbo[r + 1]). */
void an_p2p_match(struct analysis *a, struct stepdata *sd)
{
	struct match m = { 0 };
	sd->pbo = calloc((size_t)a->nranks + 1, sizeof *sd->pbo);
	if (!sd->pbo)
		return;
	collect(a, &m, sd->pbo);
	for (size_t i = next_pair(&m, 0); i < m.n; i = next_pair(&m, i + 2)) {
		const struct p2op *s = &m.op[i], *q = &m.op[i + 1];
		if (q->blk >= 0)
			charge(&m.blk[q->blk], s->post, s->r, 1);
		if (s->blk >= 0)
			charge(&m.blk[s->blk], q->post, q->r, 0);
	}
	free(m.op);
	propagate(m.blk, m.nblk, sd->pbo);
	sd->pblk = m.blk;
	sd->npblk = m.nblk;
}

size_t an_p2p_messages(struct analysis *a, struct an_msg **out)
{
	struct match m = { 0 };
	size_t n = 0;
	collect(a, &m, NULL);
	*out = malloc((m.n / 2 + 1) * sizeof **out);
	for (size_t i = next_pair(&m, 0); *out && i < m.n; i = next_pair(&m, i + 2)) {
		const struct p2op *s = &m.op[i], *q = &m.op[i + 1];
		if (q->blk >= 0 && s->r != q->r && !s->thin && !q->thin)
			(*out)[n++] = (struct an_msg){ s->r, q->r, s->post, m.blk[q->blk].t + m.blk[q->blk].d };
	}
	free(m.op);
	free(m.blk);
	return n;
}
