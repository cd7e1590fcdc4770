/* NCCL's kernels as NCCL's profiler plugin told them (preload/ncclprof.c's nccl_kernel events):
 * the GPU times of NCCL where CUPTI gave none (another tool held it), and a check of CUPTI's where
 * it did (docs/gpu.md, "NCCL's profiler plugin").
 *
 * A collective's events (one per channel) become one kernel: its first channel's start to its
 * last channel's end, on the GPU's %globaltimer. It is joined to its call: the one its event names
 * (2.14: NCCL told the plugin of the call, inside it, and that CollApi event is the collective's
 * parent). Files before that, and calls their event could not name, join by communicator,
 * operation and sequence number: the plugin numbers each operation's collectives in its
 * communicator apart (allreduce 0, 1, ...; allgather 0, ...), so the n-th allreduce call ddpspy
 * recorded on that communicator is allreduce n; a communicator the plugin could not name (made on
 * a thread of NCCL's own, as a nonblocking one is) is the one of the process's communicators that
 * no other hash names, of that rank, whose calls are enough for the plugin's numbers. That order
 * breaks once a CUDA graph captured a collective: NCCL numbers each launch of the graph, when its
 * stream reaches it, and not the capture. Such a replay is its captured call's k-th, in GPU order:
 * an instance of its own on every rank (the call's communicator and number, and k), with the
 * call's bytes; its launch, a cudaGraphLaunch, is not known to the plugin. A group's
 * collectives launch one kernel at its end: they become that one kernel, as CUPTI sees it. One
 * joined to no call (NCCL reached through a dlopen handle, which ddpspy's wrappers never see) is
 * still the same collective on every rank by NCCL's hash of its communicator, its operation and
 * number: its instance across the ranks is named by those (hkey), and it has no bytes.
 *
 * The clock: %globaltimer is the GPU's, not the host's. Each kernel bounds the offset between
 * them: it began after its launching call did (offset >= call start - GPU start) and ended before
 * NCCL told the plugin (offset <= told - GPU end). Over each kernel's 64 neighbours (a drift of
 * the two clocks over that span is below the bounds' width) the tightest bounds are taken. The
 * upper one is used: NCCL's progress thread tells of a kernel soon after it ended, on every rank
 * alike, while a kernel queued behind others starts long after its call, so the lower bound is
 * often loose; the estimate is then late by at most the bounds' width (reported), and alike on
 * every rank. Where the bounds cross, the assumption broke: the crossing is counted, and their
 * middle used. */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../common/format.h"
#include "analysis_int.h"
#include "gpu_int.h"

#define WINDOW 32 /* neighbours on each side whose bounds a kernel's clock takes */

static struct {
	int8_t comm, hash, op, seq, count, gs, ge, rank, call_comm, call, replay;
} P;

__attribute__((constructor)) static void positions(void)
{
	P.comm = an_argpos(DDPSPY_EV_NCCL_KERNEL, "comm");
	P.hash = an_argpos(DDPSPY_EV_NCCL_KERNEL, "hash");
	P.op = an_argpos(DDPSPY_EV_NCCL_KERNEL, "op");
	P.seq = an_argpos(DDPSPY_EV_NCCL_KERNEL, "seq");
	P.count = an_argpos(DDPSPY_EV_NCCL_KERNEL, "count");
	P.gs = an_argpos(DDPSPY_EV_NCCL_KERNEL, "gpu_start");
	P.ge = an_argpos(DDPSPY_EV_NCCL_KERNEL, "gpu_end");
	P.rank = an_argpos(DDPSPY_EV_NCCL_KERNEL, "comm_rank");
	P.call_comm = an_argpos(DDPSPY_EV_NCCL_KERNEL, "call_comm");
	P.call = an_argpos(DDPSPY_EV_NCCL_KERNEL, "call");
	P.replay = an_argpos(DDPSPY_EV_NCCL_KERNEL, "replay");
}

int an_plug_event(struct gpuproc *g, const struct trace_event *e)
{
	struct gplug p = { e->t_ns, an_arg(e, P.gs, 0), an_arg(e, P.ge, 0), an_arg(e, P.seq, -1), an_arg(e, P.count, 0),
			   (uint64_t)an_arg(e, P.hash, 0), (int32_t)an_arg(e, P.comm, -1), (int32_t)an_arg(e, P.rank, -1),
			   (int32_t)an_arg(e, P.call_comm, -1), an_arg(e, P.call, -1), (int8_t)an_arg(e, P.op, -1),
			   (int8_t)(an_arg(e, P.replay, 0) == 1) };
	if (an_arg(e, P.call_comm, -1) == -1 || p.call < 0 || p.call > INT32_MAX) /* (ids as gpu.c's calls: low 32 bits) */
		p.call = -1;
	/* (a damaged or unfinished one: no place on any clock; below 2^62 ns, as gpu.c's sane, so that
	 * no difference of two bounds overflows) */
	if (p.gs <= 0 || p.ge < p.gs || p.ge >= (INT64_C(1) << 62) || p.ge - p.gs >= (INT64_C(1) << 46) ||
	    p.told < 0 || p.told >= (INT64_C(1) << 62) || p.seq < 0 || p.seq > INT32_MAX)
		return 0;
	struct gplug *grown = room_for(g->plug, g->np, &g->cp, sizeof *grown, 256);
	if (!grown)
		return 1;
	(g->plug = grown)[g->np++] = p;
	return 0;
}

void an_plug_free(struct gpuproc *g)
{
	free(g->plug);
	g->plug = NULL;
	g->np = g->cp = 0;
}

/* the operations the plugin tells of as collectives (its Coll events; send and receive are not) */
static int plugged(int op)
{
	return op == DDPSPY_OP_ALLREDUCE || op == DDPSPY_OP_ALLGATHER || op == DDPSPY_OP_BCAST || op == DDPSPY_OP_REDUCE ||
	       op == DDPSPY_OP_REDUCE_SCATTER || op == DDPSPY_OP_ALLTOALL || op == DDPSPY_OP_GATHER ||
	       op == DDPSPY_OP_SCATTER;
}

struct pcoll {            /* one collective: its channels' events merged */
	int64_t gs, ge, told;
	uint64_t hash;
	int64_t seq;
	int32_t comm, rank;   /* (comm: ddpspy's id, -1 unknown) */
	int32_t call_comm;    /* the call its events named (call -1: none) */
	int64_t call_seq;
	int8_t op, replay;
	const struct gcall *call, *unit; /* its call, and the group end that launched it (NULL none) */
	int64_t lo, hi;       /* its bounds of the clock offset (INT64_MIN, INT64_MAX: none) */
};

static int cmp_plug(const void *x, const void *y)
{
	const struct gplug *a = x, *b = y;
	return AN_ORDER(a->hash, b->hash) ?:
	       AN_ORDER(a->op, b->op) ?:
	       AN_ORDER(a->seq, b->seq) ?:
	       AN_ORDER(a->replay, b->replay) ?: /* (NCCL numbers a replay as the next collective where */
	       AN_ORDER(a->call, b->call) ?:     /* KernelCh was not asked for: never here, but apart) */
	       AN_ORDER(a->gs, b->gs) ?:
	       AN_ORDER(a->ge, b->ge) ?:
	       AN_ORDER(a->told, b->told) ?:
	       AN_ORDER(a->comm, b->comm) ?:
	       AN_ORDER(a->rank, b->rank);
}

static int cmp_gs(const void *x, const void *y)
{
	const struct pcoll *a = x, *b = y;
	return AN_ORDER(a->gs, b->gs) ?:
	       AN_ORDER(a->hash, b->hash) ?:
	       AN_ORDER(a->op, b->op) ?:
	       AN_ORDER(a->seq, b->seq);
}

/* the channels' events of each collective as one (g->plug sorted); returns how many */
static size_t merged(struct gpuproc *g, struct pcoll *c)
{
	size_t n = 0;
	sort_n(g->plug, g->np, sizeof *g->plug, cmp_plug);
	for (size_t i = 0; i < g->np; i++) {
		const struct gplug *p = &g->plug[i];
		struct pcoll *l = n ? &c[n - 1] : NULL;
		if (l && l->hash == p->hash && l->op == p->op && l->seq == p->seq && l->replay == p->replay &&
		    l->call_seq == p->call) {
			l->gs = p->gs < l->gs ? p->gs : l->gs;
			l->ge = p->ge > l->ge ? p->ge : l->ge;
			l->told = p->told > l->told ? p->told : l->told;
			if (l->comm == -1)
				l->comm = p->comm;
			if (l->call_seq < 0 && p->call >= 0)
				l->call_comm = p->call_comm, l->call_seq = p->call;
			l->replay |= p->replay;
			continue;
		}
		c[n++] = (struct pcoll){ p->gs, p->ge, p->told, p->hash, p->seq, p->comm, p->rank, p->call_comm, p->call,
					 p->op, p->replay, NULL, NULL, INT64_MIN, INT64_MAX };
	}
	return n;
}

/* an NCCL call's place among its communicator's calls of its operation */
struct ord {
	int32_t comm;
	int8_t op;
	int64_t n;
	const struct gcall *call;
};

static int cmp_ord(const void *x, const void *y)
{
	const struct ord *a = x, *b = y;
	return AN_ORDER(a->comm, b->comm) ?:
	       AN_ORDER(a->op, b->op) ?:
	       AN_ORDER(a->n, b->n);
}

/* whether call c is one ddpspy's wrapper recorded (not a group's end, which repeats the first) */
static int a_call(const struct gcall *c)
{
	return !(c->unit && c->grp);
}

/* g's calls of operations the plugin numbers, each with its number (o: g->nc of room); returns
 * how many (g->call is in external id order, which is call order) */
static size_t ordinals(const struct gpuproc *g, struct ord *o)
{
	size_t n = 0;
	for (size_t i = 0; i < g->nc; i++)
		if (a_call(&g->call[i]) && plugged(g->call[i].op) && g->call[i].comm != -1)
			o[n++] = (struct ord){ g->call[i].comm, g->call[i].op, (int64_t)i, &g->call[i] };
	sort_n(o, n, sizeof *o, cmp_ord);
	for (size_t i = 0, k = 0; i < n; i++) { /* (external ids in order: numbered 0, 1, ... per run) */
		k = i && o[i].comm == o[i - 1].comm && o[i].op == o[i - 1].op ? k + 1 : 0;
		o[i].n = (int64_t)k;
	}
	return n;
}

/* A communicator for each hash the plugin could not name (see the file comment): c sorted by hash */
static void named(const struct gpuproc *g, struct pcoll *c, size_t n, const struct ord *o, size_t no)
{
	int taken[MAX_GCOMMS] = { 0 };
	for (size_t i = 0; i < n; i++)
		for (int m = 0; m < g->ncomms; m++)
			taken[m] |= c[i].comm != -1 && c[i].comm == g->comms[m].comm;
	for (size_t i = 0; i < n;) {
		size_t j = i;
		int32_t comm = -1;
		while (j < n && c[j].hash == c[i].hash)
			comm = c[j].comm != -1 ? c[j].comm : comm, j++;
		if (comm == -1) {
			int64_t last[DDPSPY_OP_COUNT]; /* the plugin's largest number, per operation */
			for (int q = 0; q < DDPSPY_OP_COUNT; q++)
				last[q] = -1;
			for (size_t q = i; q < j; q++)
				if (c[q].op >= 0 && c[q].op < DDPSPY_OP_COUNT && c[q].seq > last[c[q].op])
					last[c[q].op] = c[q].seq;
			int pick = -1, cands = 0;
			for (int m = 0; m < g->ncomms; m++) {
				if (taken[m] || g->comms[m].comm == -1 || g->comms[m].rank != c[i].rank)
					continue;
				int enough = 1; /* (its calls numbered 0 to k-1: one numbered last[op] is enough) */
				for (int q = 0; q < DDPSPY_OP_COUNT && enough; q++) {
					struct ord k = { g->comms[m].comm, (int8_t)q, last[q], NULL };
					enough = last[q] < 0 || bsearch(&k, o, no, sizeof *o, cmp_ord) != NULL;
				}
				if (enough)
					pick = m, cands++;
			}
			if (cands == 1) {
				comm = g->comms[pick].comm;
				taken[pick] = 1;
			}
		}
		for (size_t q = i; q < j; q++)
			c[q].comm = comm;
		i = j;
	}
}

static int cmp_grp(const void *x, const void *y)
{
	const struct gcall *const *a = x, *const *b = y;
	return AN_ORDER((*a)->grp, (*b)->grp);
}

/* g's calls by communicator and number (o: g->nc of room, op 0); returns how many */
static size_t numbered(const struct gpuproc *g, struct ord *o)
{
	size_t n = 0;
	for (size_t i = 0; i < g->nc; i++)
		if (a_call(&g->call[i]) && g->call[i].comm != -1 && g->call[i].seq >= 0)
			o[n++] = (struct ord){ g->call[i].comm, 0, g->call[i].seq, &g->call[i] };
	sort_n(o, n, sizeof *o, cmp_ord);
	return n;
}

/* each collective's call and launching group end, and its bounds of the clock offset: the call its
 * events named (by: by number), else by order (o); a graph's replay launched long after its call,
 * which bounds nothing */
static void joined_calls(const struct gpuproc *g, struct pcoll *c, size_t n, const struct ord *o, size_t no,
			 const struct ord *by, size_t nb)
{
	const struct gcall **ends = malloc((g->nc + 1) * sizeof *ends);
	size_t ne = 0;
	for (size_t i = 0; ends && i < g->nc; i++)
		if (!a_call(&g->call[i]))
			ends[ne++] = &g->call[i];
	if (ends)
		sort_n(ends, ne, sizeof *ends, cmp_grp);
	for (size_t i = 0; i < n; i++) {
		struct ord k = { c[i].comm, c[i].op, c[i].seq, NULL }, kb = { c[i].call_comm, 0, c[i].call_seq, NULL };
		const struct ord *f = c[i].call_seq >= 0 ? bsearch(&kb, by, nb, sizeof *by, cmp_ord)
				      : c[i].comm != -1 && !c[i].replay ? bsearch(&k, o, no, sizeof *o, cmp_ord) : NULL;
		if (!f)
			continue;
		c[i].call = f->call;
		if (f->call->grp && ends) {
			struct gcall key = { .grp = f->call->grp };
			const struct gcall *kp = &key, *const *u = bsearch(&kp, ends, ne, sizeof *ends, cmp_grp);
			c[i].unit = u ? *u : NULL;
			if (!u) /* (a group not ended in the file: its calls launch nothing yet) */
				c[i].call = NULL;
		}
		if (c[i].call && !c[i].replay)
			c[i].lo = (c[i].unit ? c[i].unit->t : c[i].call->t) - c[i].gs;
	}
	for (size_t i = 0; i < n; i++)
		c[i].hi = c[i].told - c[i].ge;
	free(ends);
}

/* each collective's offset from its neighbours' bounds (c sorted by GPU start): off[i] */
static void offsets(struct gpuproc *g, const struct pcoll *c, size_t n, int64_t *off)
{
	double *half = malloc((n + 1) * sizeof *half); /* (each bounds' width, us) */
	size_t nh = 0;
	for (size_t i = 0; i < n; i++) {
		int64_t lo = INT64_MIN, hi = INT64_MAX;
		for (size_t j = i > WINDOW ? i - WINDOW : 0; j < n && j <= i + WINDOW; j++) {
			lo = c[j].lo > lo ? c[j].lo : lo;
			hi = c[j].hi < hi ? c[j].hi : hi;
		}
		if (lo == INT64_MIN) { /* (no call joined near it: the upper bound alone) */
			off[i] = hi;
			continue;
		}
		off[i] = lo > hi ? lo + (hi - lo) / 2 : hi;
		if (lo > hi)
			g->pstat.conflicts++;
		else if (half)
			half[nh++] = (double)(hi - lo) / 1e3;
	}
	/* (none with both bounds, as where every one is a graph's replay: its width is not known) */
	g->pstat.bound_us = half && nh ? an_quantile(half, nh, 0.5) : nh || !n ? 0 : NAN;
	free(half);
}

/* an unjoined collective's instance: a communicator number from NCCL's hash, [2^30, 2^31) (ddpspy's
 * ids are others by chance only), and a sequence number from the plugin's and the operation's */
static void hkey(uint64_t hash, int64_t seq, int op, int32_t *comm, int32_t *s)
{
	*comm = (int32_t)(((hash ^ (hash >> 31)) & 0x3fffffff) | 0x40000000);
	*s = seq < (INT32_MAX >> 5) && op >= 0 && op < 32 ? (int32_t)(seq << 5 | op) : -1;
}

static int cmp_start(const void *x, const void *y)
{
	const struct gwork *const *a = x, *const *b = y;
	return AN_ORDER((*a)->t, (*b)->t) ?: AN_ORDER((*a)->corr, (*b)->corr);
}

static int cmp_kernel(const void *x, const void *y)
{
	const struct gwork *a = x, *b = y;
	return AN_ORDER(a->comm, b->comm) ?:
	       AN_ORDER(a->seq, b->seq) ?:
	       AN_ORDER(a->t, b->t);
}

static int cmp_t(const void *x, const void *y)
{
	const struct gwork *a = x, *b = y;
	return AN_ORDER(a->t, b->t) ?: AN_ORDER(a->comm, b->comm) ?: AN_ORDER(a->seq, b->seq);
}

/* CUPTI's NCCL kernels that CUDA graphs' launches ran: a kernel of a graph carries its
 * cudaGraphLaunch's correlation id, so no call's id joined it (comm INT32_MIN, an_gpu_identify).
 * Where they are as many as the plugin's replays (w, c: n; a captured group's collectives one
 * kernel, as CUPTI sees it), the i-th in time is the i-th replay and takes its collective; else
 * they stay as they are. */
static void graph_kernels(struct gpuproc *g, const struct gwork *w, const struct pcoll *c, size_t n)
{
	size_t nr = 0, nu = 0;
	for (size_t i = 0; i < n; i++)
		nr += c[i].replay && c[i].call;
	struct gwork *r = nr ? malloc(nr * sizeof *r) : NULL;
	if (!r)
		return;
	nr = 0;
	for (size_t i = 0; i < n; i++)
		if (c[i].replay && c[i].call)
			r[nr++] = w[i];
	sort_n(r, nr, sizeof *r, cmp_kernel);
	size_t m = 0;
	for (size_t i = 0; i < nr; i++) /* (a group's: its first start) */
		if (!m || r[i].comm != r[m - 1].comm || r[i].seq != r[m - 1].seq)
			r[m++] = r[i];
	/* (CUPTI's calls tell a graph's kernels: those alone, where any is told, even if all were
	 * joined already (an_gpu_identify); and of sends and receives none, whose events the plugin is
	 * not told) */
	int graphs = 0;
	for (size_t i = 0; i < g->nw && !graphs; i++)
		graphs = g->w[i].graph && g->w[i].cls == GW_NCCL;
#define UNJOINED(w) \
	((w).cls == GW_NCCL && !(w).plugin && !(w).p2p && (w).comm == INT32_MIN && ((w).graph || !graphs))
	for (size_t i = 0; i < g->nw; i++)
		nu += UNJOINED(g->w[i]);
	struct gwork **u = nu == m ? malloc((nu + 1) * sizeof *u) : NULL;
	if (u) {
		nu = 0;
		for (size_t i = 0; i < g->nw; i++)
			if (UNJOINED(g->w[i]))
				u[nu++] = &g->w[i];
#undef UNJOINED
		sort_n(u, nu, sizeof *u, cmp_start);
		sort_n(r, m, sizeof *r, cmp_t);
		for (size_t i = 0; i < m; i++) {
			u[i]->comm = r[i].comm;
			u[i]->seq = r[i].seq;
			u[i]->bytes = r[i].bytes;
			u[i]->op = r[i].op;
		}
		g->join[JOIN_ORDER] = g->join[JOIN_ORDER] > nu ? g->join[JOIN_ORDER] - (uint32_t)nu : 0;
		g->join[JOIN_GRAPH] = (uint32_t)nu;
	}
	free(u);
	free(r);
}

size_t an_plug_kernels(struct gpuproc *g, struct gwork **out)
{
	*out = NULL;
	struct plugstat zero = { 0 };
	g->pstat = zero;
	if (!g->np)
		return 0;
	struct pcoll *c = malloc(g->np * sizeof *c);
	struct ord *o = malloc((g->nc + 1) * sizeof *o), *by = malloc((g->nc + 1) * sizeof *by);
	int64_t *off = malloc(g->np * sizeof *off), *nrep = calloc(g->nc + 1, sizeof *nrep);
	struct gwork *w = malloc(g->np * sizeof *w);
	size_t n = 0, nw = 0;
	if (c && o && by && off && nrep && w) {
		n = merged(g, c);
		size_t no = ordinals(g, o), nb = numbered(g, by);
		named(g, c, n, o, no);
		joined_calls(g, c, n, o, no, by, nb);
		sort_n(c, n, sizeof *c, cmp_gs);
		offsets(g, c, n, off);
		for (size_t i = 0; i < n; i++) {
			const struct gcall *k = c[i].unit ? c[i].unit : c[i].call;
			w[i] = (struct gwork){ .t = c[i].gs + off[i], .d = c[i].ge - c[i].gs, .comm = INT32_MIN, .seq = -1,
					       .op = c[i].op, .cls = GW_NCCL, .plugin = 1, .ctx = GCTX_NONE };
			w[i].launch = k && !c[i].replay ? k->t : w[i].t;
			if (k) { /* (a group's: its first call's collective, all its bytes, as CUPTI's kernel) */
				w[i].comm = k->comm;
				w[i].seq = k->seq;
				w[i].bytes = k->bytes;
				w[i].op = k->op;
				if (c[i].replay) /* (its call's replays in GPU order: the same k on every rank) */
					an_replay_key(k->comm, k->seq, nrep[c[i].call - g->call]++, &w[i].comm, &w[i].seq);
			} else {
				hkey(c[i].hash, c[i].seq, c[i].op, &w[i].comm, &w[i].seq);
			}
			g->pstat.unjoined += !k;
			g->pstat.replays += c[i].replay;
		}
		graph_kernels(g, w, c, n);
		g->pstat.colls = (uint32_t)n;
		/* a group's collectives: one kernel */
		sort_n(w, n, sizeof *w, cmp_kernel);
		for (size_t i = 0; i < n; i++) {
			struct gwork *l = nw ? &w[nw - 1] : NULL;
			if (l && w[i].seq >= 0 && l->comm == w[i].comm && l->seq == w[i].seq) {
				int64_t end = w[i].t + w[i].d > l->t + l->d ? w[i].t + w[i].d : l->t + l->d;
				l->t = w[i].t < l->t ? w[i].t : l->t;
				l->d = end - l->t;
				continue;
			}
			w[nw++] = w[i];
		}
	}
	free(c);
	free(o);
	free(by);
	free(off);
	free(nrep);
	if (!nw)
		free(w), w = NULL;
	*out = w;
	return nw;
}

static int cmp_coll(const void *x, const void *y)
{
	const struct gwork *const *a = x, *const *b = y;
	if ((*a)->comm != (*b)->comm)
		return AN_ORDER((*a)->comm, (*b)->comm);
	return AN_ORDER((*a)->seq, (*b)->seq);
}

void an_plug_check(struct gpuproc *g, const struct gwork *k, size_t n)
{
	size_t nc = 0, cc = 0;
	const struct gwork **cu = NULL;
	double *ds = malloc((n + 1) * sizeof *ds), *dd = malloc((n + 1) * sizeof *dd);
	double *dl = malloc((n + 1) * sizeof *dl);
	if (!ds || !dd || !dl)
		goto out;
	for (size_t i = 0; i < g->nw; i++) /* (one walk: the work is mostly compute kernels) */
		if (g->w[i].cls == GW_NCCL && !g->w[i].plugin && g->w[i].seq >= 0 && plugged(g->w[i].op)) {
			const struct gwork **grown = room_for(cu, nc, &cc, sizeof *cu, 256);
			if (!grown)
				goto out;
			(cu = grown)[nc++] = &g->w[i];
		}
	sort_n(cu, nc, sizeof *cu, cmp_coll);
	size_t m = 0;
	for (size_t i = 0; i < n; i++) {
		if (an_gpu_past_stop(g, k[i].t)) {
			g->pstat.after_stop++;
			continue;
		}
		if (k[i].seq < 0) {
			g->pstat.plugin_only++;
			continue;
		}
		const struct gwork *kp = &k[i], *const *f = nc ? bsearch(&kp, cu, nc, sizeof *cu, cmp_coll) : NULL;
		if (!f) {
			g->pstat.plugin_only++;
			continue;
		}
		dl[m] = (double)(k[i].t - (*f)->t) / 1e3;
		ds[m] = fabs(dl[m]);
		dd[m] = (double)llabs(k[i].d - (*f)->d) / 1e3;
		g->pstat.dur_us_max = dd[m] > g->pstat.dur_us_max ? dd[m] : g->pstat.dur_us_max;
		m++;
	}
	g->pstat.matched = (uint32_t)m;
	g->pstat.cupti_only = (uint32_t)(nc > m ? nc - m : 0);
	g->pstat.start_us = an_quantile(ds, m, 0.5);
	g->pstat.dur_us = an_quantile(dd, m, 0.5);
	g->pstat.late_us = an_quantile(dl, m, 0.5);
out:
	free(dl);
	free(cu);
	free(ds);
	free(dd);
}
