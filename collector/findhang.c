/* hang: the job stopped making progress. A rank whose file ends with a call to its peers in flight
 * (a collective, a point-to-point call, a wait for the device after an NCCL collective) far longer
 * than any it completed is waiting for something that does not come. Then, for a collective: which
 * ranks are in it, which never called it (the first of them is the finding's rank) and what each of
 * those was doing (its call in flight, its descriptor and path, its call site; "no call in flight";
 * or its file ended: the process died); for point-to-point calls: who waits for whom, a deadlock
 * when that goes round in a circle. Severity 1: a hung job loses everything from there on. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/format.h"
#include "analysis_int.h"
#include "findings_int.h"

#define HANG_MIN_NS 2000000000LL /* a call in flight at least this long, */
#define HANG_FACTOR 10           /* and this many times the longest call to peers its rank completed */
#define EV_PER_RANK (11 + AN_STUCK_CALLERS) /* evidence values a rank's entry takes, at most */

struct rstate {                  /* one rank as its file ends */
	const struct proc *p;
	int rank;
	int64_t end;                 /* its file's latest time (the file's clock) */
	const struct an_stuck *blk;  /* its longest call to peers in flight, NULL none */
	const struct an_stuck *call; /* the call to name: blk, else its longest in flight of any kind */
	int hung;                    /* blk has been in flight long enough to be a hang */
	int peer;                    /* blk a point-to-point call: the rank it waits for, -1 none */
	const char *state;
};

static int64_t in_flight(const struct rstate *r, const struct an_stuck *s)
{
	int64_t until = r->end > s->v.t + s->v.d ? r->end : s->v.t + s->v.d;
	return until - s->v.t;
}

/* a call that waits for its peers: any call to them, or for the device once NCCL's are enqueued */
static int to_peers(const struct proc *p, const struct an_stuck *s)
{
	unsigned m = an_kind(s->v.kind)->m;
	if (DDPSPY_KM_CAT(m) == DDPSPY_CAT_COMMS)
		return 1;
	for (int i = 0; i < p->hang.nspace; i++)
		if (p->hang.space[i].kind == DDPSPY_EV_NCCL_COLL)
			return s->v.kind == DDPSPY_EV_CUDA_SYNC || s->v.kind == DDPSPY_EV_CUDA_MEMCPY;
	return 0;
}

/* the global rank of comm's member crank (MPI: communicator 0 is the world), -1 unknown */
static int global_rank(const struct analysis *a, int32_t comm, int crank)
{
	if (comm == 0)
		return crank;
	for (int i = 0; i < a->nranks; i++)
		for (int k = 0; k < a->ranks[i].p->ncomms; k++)
			if (a->ranks[i].p->comms[k].comm == comm && a->ranks[i].p->comms[k].rank == crank)
				return a->ranks[i].rank;
	return -1;
}

static void rank_state(const struct analysis *a, struct rstate *r)
{
	const struct an_hang *h = &r->p->hang;
	const struct thr *t = an_train_thread(r->p);
	int main = t ? t->tid : r->p->pid; /* (the thread whose calls say what the rank does) */
	int64_t best = -1, any = -1;
	for (int i = 0; i < h->nstuck; i++) {
		const struct an_stuck *s = &h->stuck[i];
		int64_t d = in_flight(r, s);
		if (to_peers(r->p, s) && d > best)
			best = d, r->blk = s;
		if (s->tid == main && d > any)
			any = d, r->call = s;
	}
	if (r->blk)
		r->call = r->blk;
	int64_t need = HANG_FACTOR * h->comms_max > HANG_MIN_NS ? HANG_FACTOR * h->comms_max : HANG_MIN_NS;
	r->hung = r->blk && best >= need;
	r->peer = -1;
	if (r->blk && (an_kind(r->blk->v.kind)->m & DDPSPY_KM_P2P) && r->blk->v.peer >= 0)
		r->peer = global_rank(a, r->blk->v.comm, r->blk->v.peer);
}

static const struct an_space *space(const struct proc *p, int32_t comm, int16_t kind)
{
	for (int i = 0; i < p->hang.nspace; i++)
		if (p->hang.space[i].comm == comm && p->hang.space[i].kind == kind)
			return &p->hang.space[i];
	return NULL;
}

/* The collective the hung ranks wait in: the one a hung rank is in, else (a wait for the device,
 * for a nonblocking collective's request) the space in which a hung rank called furthest beyond
 * another member. 0 none. */
struct coll {
	int32_t comm, seq;
	int16_t kind;
	int op;
};

static int pick_coll(const struct analysis *a, const struct rstate *rs, struct coll *c)
{
	for (int i = 0; i < a->nranks; i++)
		if (rs[i].hung && (an_kind(rs[i].blk->v.kind)->m & DDPSPY_KM_COLL) && rs[i].blk->v.seq >= 0) {
			const struct ev *v = &rs[i].blk->v;
			*c = (struct coll){ v->comm, v->seq, v->kind == DDPSPY_EV_MPI_ICOLL ? DDPSPY_EV_MPI_COLL : v->kind,
					    v->op };
			return 1;
		}
	int found = 0, gap = 0;
	for (int i = 0; i < a->nranks && !found; i++) { /* (the first hung rank that has one: R x spaces) */
		if (!rs[i].hung || rs[i].peer >= 0)
			continue;
		const struct an_hang *h = &rs[i].p->hang;
		for (int k = 0; k < h->nspace; k++) {
			int lo = h->space[k].issued;
			for (int j = 0; j < a->nranks; j++) {
				const struct an_space *o = space(rs[j].p, h->space[k].comm, h->space[k].kind);
				if (o && o->issued < lo)
					lo = o->issued;
			}
			if (h->space[k].issued - lo > gap) {
				const struct an_space *sp = &h->space[k];
				gap = sp->issued - lo;
				*c = (struct coll){ sp->comm, sp->issued, sp->kind, sp->issued_op };
				found = 1;
			}
		}
	}
	return found;
}

/* a rank of the collective space (comm, kind): it called in it, or it is MPI's world or gloo's
 * default group, which every rank is in */
static int member(const struct proc *p, int32_t comm, int16_t kind)
{
	return space(p, comm, kind) || (kind == DDPSPY_EV_MPI_COLL && comm == 0) || kind == DDPSPY_EV_GLOO_COLL;
}

/* a call as a few words: "read of /tmp/x (pipe) at prog+0x12" */
static void call_words(const struct an_stuck *s, char *buf, size_t n)
{
	const char *k = ddpspy_name(ddpspy_event_names, DDPSPY_EV_COUNT, s->v.kind);
	size_t l = (size_t)snprintf(buf, n, "%s", k ? k : "call");
	unsigned m = an_kind(s->v.kind)->m;
	if (l < n && (m & (DDPSPY_KM_COLL | DDPSPY_KM_P2P)) && s->v.op >= 0)
		l += (size_t)snprintf(buf + l, n - l, " %s", an_op_name(s->v.op));
	if (l < n && (m & DDPSPY_KM_COLL) && s->v.seq >= 0)
		l += (size_t)snprintf(buf + l, n - l, " #%d", s->v.seq);
	if (l < n && (m & DDPSPY_KM_P2P) && s->v.peer >= 0)
		l += (size_t)snprintf(buf + l, n - l, " peer %d tag %d", s->v.peer, s->v.tag);
	if (l < n && s->path[0])
		l += (size_t)snprintf(buf + l, n - l, " of %s", s->path);
	if (l < n && (s->v.fd >= 0 || s->path[0]) && s->v.fdclass > 0)
		l += (size_t)snprintf(buf + l, n - l, " (%s)",
				      ddpspy_name(ddpspy_fdclass_names, DDPSPY_FDCLASS_COUNT, s->v.fdclass));
	if (l < n && s->site[0])
		snprintf(buf + l, n - l, " at %s", s->site);
}

/* the last sequence number p completed in space sp (-1 none): an NCCL collective completes on the
 * device, when its kernel ends (where CUPTI timed it: its kernels joined to their calls) */
static int32_t completed(const struct proc *p, const struct an_space *sp)
{
	if (!sp || sp->kind != DDPSPY_EV_NCCL_COLL)
		return sp ? sp->done : -1;
	struct gend *e;
	size_t n = an_gpu_nccl_ends(p, &e);
	int32_t done = -1;
	for (size_t i = 0; i < n; i++)
		if (e[i].comm == sp->comm && e[i].seq > done)
			done = e[i].seq;
	free(e);
	return done;
}

/* rank entry r: rank, state, its last completed and last called sequence number in the space (-1:
 * none, or no space), its call in flight (null: none), for how long, whether its file ended */
static void rank_entry(struct finding *f, const struct rstate *r, const struct an_space *sp)
{
	char call[256];
	an_ev_open(f, NULL, FV_OBJ);
	an_ev_int(f, "rank", r->rank);
	an_ev_str(f, "state", r->state);
	an_ev_int(f, "last_completed", completed(r->p, sp));
	an_ev_int(f, "last_called", sp ? sp->issued : -1);
	if (r->call) {
		call_words(r->call, call, sizeof call);
		an_ev_str(f, "call", call);
		an_ev_num(f, "for_s", (double)in_flight(r, r->call) / 1e9, 1);
		if (strcmp(r->state, "waiting")) { /* (the ranks that matter: the frames above the call site) */
			an_ev_open(f, "callers", FV_LIST);
			for (int k = 0; k < r->call->ncallers; k++)
				an_ev_str(f, NULL, r->call->callers[k]);
			an_ev_end(f);
		}
	} else {
		an_ev_str(f, "call", NULL);
		an_ev_num(f, "for_s", 0, 1);
	}
	an_ev_bool(f, "file_ended", r->p->hang.end_reason[0] != 0 || r->p->ended);
	an_ev_end(f);
}

/* every rank's entry, those not waiting first (the ones that matter), while room is left */
static void rank_entries(struct finding *f, const struct rstate *rs, int n, int32_t comm, int16_t kind)
{
	int left = 0;
	an_ev_open(f, "ranks", FV_LIST);
	for (int pass = 0; pass < 2; pass++)
		for (int i = 0; i < n; i++) {
			if ((pass == 0) != (strcmp(rs[i].state, "waiting") != 0))
				continue;
			if (f->nev + EV_PER_RANK + 4 > MAX_EVIDENCE)
				left++;
			else
				rank_entry(f, &rs[i], kind >= 0 ? space(rs[i].p, comm, kind) : NULL);
		}
	an_ev_end(f);
	an_ev_int(f, "ranks_left_out", left);
}

/* what a rank that is not in the collective is doing */
static const char *absent_state(const struct rstate *r, int64_t job_end)
{
	if (r->call)
		return "missing";
	/* no call in flight: computing, unless its file stopped well before the others' (it died, or was
	 * stopped; an end record says only how it ended: killed with the others, or not) */
	return an_job_time(r->p, r->end) + HANG_MIN_NS < job_end ? "gone" : "computing";
}

/* hidden evidence for the words: what rank r (the finding's) is doing */
static void blame(struct finding *f, const struct rstate *r, int64_t job_end)
{
	an_ev_hidden_num(f, "blame_behind_s", (double)(job_end - an_job_time(r->p, r->end)) / 1e9);
	an_ev_hidden_num(f, "blame_file_ended", r->p->ended);
	char call[256];
	if (r->call)
		call_words(r->call, call, sizeof call);
	an_ev_hidden_str(f, "blame_state", r->state);
	an_ev_hidden_str(f, "blame_call", r->call ? call : NULL);
	an_ev_hidden_num(f, "blame_for_s", r->call ? (double)in_flight(r, r->call) / 1e9 : 0);
}

static void find_coll(struct analysis *a, struct rstate *rs, const struct coll *c, int64_t job_end)
{
	int32_t comm = c->comm, seq = c->seq;
	int16_t kind = c->kind;
	int first = -1, nmiss = 0, nwait = 0, fi = -1;
	int64_t waited = 0;
	for (int i = 0; i < a->nranks; i++) {
		struct rstate *r = &rs[i];
		const struct an_space *sp = space(r->p, comm, kind);
		if (!member(r->p, comm, kind)) {
			r->state = "not_member";
		} else if (sp && sp->issued >= seq && r->blk) {
			r->state = "waiting";
			nwait++;
			if (in_flight(r, r->blk) > waited)
				waited = in_flight(r, r->blk);
		} else if (!sp || sp->issued < seq) {
			r->state = absent_state(r, job_end);
			nmiss++;
			if (first < 0)
				first = r->rank, fi = i;
		} else {
			r->state = sp->done >= seq ? "passed" : "elsewhere";
		}
	}
	struct finding *f = an_add_finding(a, "hang", first, 1.0);
	if (!f)
		return;
	an_ev_str(f, "pattern", nmiss ? "collective" : "collective_all_in");
	an_ev_open(f, "collective", FV_OBJ);
	an_ev_str(f, "kind", ddpspy_name(ddpspy_event_names, DDPSPY_EV_COUNT, kind));
	an_ev_int(f, "comm", kind == DDPSPY_EV_GLOO_COLL ? -1 : comm);
	an_ev_int(f, "seq", seq);
	an_ev_str(f, "op", an_op_name(c->op));
	an_ev_end(f);
	if (fi >= 0)
		blame(f, &rs[fi], job_end);
	an_ev_int(f, "waiting", nwait);
	an_ev_int(f, "missing", nmiss);
	an_ev_num(f, "waited_s", (double)waited / 1e9, 1);
	rank_entries(f, rs, a->nranks, comm, kind);
}

/* Point-to-point: follow who waits for whom from the first hung rank; a circle is a deadlock,
 * else the chain ends at a rank that is not waiting for a peer (the one to look at). */
static void find_p2p(struct analysis *a, struct rstate *rs, int start, int64_t job_end)
{
	int chain[64], n = 0, at = start, circle = -1;
	while (at >= 0 && n < 64) {
		for (int k = 0; k < n; k++)
			if (chain[k] == at)
				circle = k;
		if (circle >= 0)
			break;
		chain[n++] = at;
		int next = -1;
		for (int i = 0; i < a->nranks; i++)
			if (rs[i].rank == rs[at].peer)
				next = i;
		at = rs[at].hung && rs[at].peer >= 0 ? next : -1;
	}
	int last = chain[n - 1], first = circle >= 0 ? chain[circle] : last;
	for (int k = circle >= 0 ? circle : 0; k < n; k++)
		if (circle >= 0 && rs[chain[k]].rank < rs[first].rank)
			first = chain[k];
	for (int i = 0; i < a->nranks; i++)
		rs[i].state = "elsewhere";
	for (int k = 0; k < n; k++)
		rs[chain[k]].state = circle >= 0 && k >= circle ? "deadlocked" : "waiting";
	/* the chain's end: a rank not waiting for a peer, or one waiting for a rank not traced */
	int untraced = circle < 0 && rs[last].hung;
	if (circle < 0 && !untraced)
		rs[last].state = absent_state(&rs[last], job_end);
	struct finding *f = an_add_finding(a, "hang", untraced ? rs[last].peer : rs[first].rank, 1.0);
	if (!f)
		return;
	an_ev_str(f, "pattern", circle >= 0 ? "deadlock" : untraced ? "peer_untraced" : "peer");
	blame(f, &rs[first], job_end);
	an_ev_open(f, "chain", FV_LIST); /* (a circle from its lowest rank) */
	int from = circle >= 0 ? circle : 0, lo = from;
	for (int k = from; k < n; k++)
		if (circle >= 0 && rs[chain[k]].rank < rs[chain[lo]].rank)
			lo = k;
	for (int k = 0; k < n - from; k++)
		an_ev_int(f, NULL, rs[chain[from + (lo - from + k) % (n - from)]].rank);
	an_ev_end(f);
	an_ev_num(f, "waited_s", (double)in_flight(&rs[start], rs[start].blk) / 1e9, 1);
	rank_entries(f, rs, a->nranks, 0, -1);
}

/* a rank waits for its peers and no collective or peer says for whom: what every rank does */
static void find_stalled(struct analysis *a, struct rstate *rs, int hung, int64_t job_end)
{
	for (int i = 0; i < a->nranks; i++)
		rs[i].state = rs[i].hung ? "waiting" : rs[i].call ? "elsewhere" : "computing";
	struct finding *f = an_add_finding(a, "hang", -1, 1.0);
	if (!f)
		return;
	an_ev_str(f, "pattern", "stalled");
	blame(f, &rs[hung], job_end);
	an_ev_hidden_num(f, "blame_rank", rs[hung].rank);
	an_ev_num(f, "waited_s", (double)in_flight(&rs[hung], rs[hung].blk) / 1e9, 1);
	rank_entries(f, rs, a->nranks, 0, -1);
}

void an_find_hang(struct analysis *a)
{
	struct rstate *rs = calloc(a->nranks > 0 ? (size_t)a->nranks : 1, sizeof *rs);
	int64_t job_end = INT64_MIN;
	if (!rs)
		return;
	int hung = -1;
	for (int i = 0; i < a->nranks; i++) {
		rs[i] = (struct rstate){ .p = a->ranks[i].p, .rank = a->ranks[i].rank, .end = a->ranks[i].p->hang.last,
					 .state = "" };
		rank_state(a, &rs[i]);
		if (an_job_time(rs[i].p, rs[i].end) > job_end)
			job_end = an_job_time(rs[i].p, rs[i].end);
		if (rs[i].hung && (hung < 0 || in_flight(&rs[i], rs[i].blk) > in_flight(&rs[hung], rs[hung].blk)))
			hung = i;
	}
	struct coll c;
	if (hung < 0)
		;
	else if (rs[hung].peer >= 0)
		find_p2p(a, rs, hung, job_end);
	else if (pick_coll(a, rs, &c))
		find_coll(a, rs, &c, job_end);
	else
		find_stalled(a, rs, hung, job_end);
	free(rs);
}
