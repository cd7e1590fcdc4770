/* Joining a rank's device records (gpu.c), once its file is read: each kernel, copy and set to
 * its launching call (CUPTI's correlation id), and each NCCL kernel to its collective: by the
 * external id ddpspy pushed around the NCCL call (or the group's end) that launched it; a
 * nonblocking communicator's, launched by NCCL's own thread with no id, by the order of its
 * calls (several such communicators: each by the stream whose kernels are as many as its calls;
 * a CUDA graph's kernels and its captured calls left out of that order: ncclplug.c joins them);
 * the rest by their order alone. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "analysis_int.h"
#include "gpu_int.h"
#include "trace.h"

/* the earliest call of correlation id corr (a runtime call and the driver call inside it share
 * theirs) in api, sorted by id then time; NULL none. *at: where the last search ended, for ids
 * asked in increasing order (seq), else each is searched for. */
static const struct gapi *api_of(const struct gpuproc *g, uint32_t corr, int seq, size_t *at)
{
	size_t i = *at;
	if (seq) {
		while (i < g->na && g->api[i].corr < corr)
			i++;
		*at = i;
	} else {
		size_t hi = g->na;
		for (i = 0; i < hi;) {
			size_t m = (i + hi) / 2;
			if (g->api[m].corr < corr)
				i = m + 1;
			else
				hi = m;
		}
	}
	return i < g->na && g->api[i].corr == corr ? &g->api[i] : NULL;
}

/* (the orders an_sort_near sorts by order any two records that differ: the report never depends on
 * how a sort leaves equal ones) */
static int cmp_api_corr_t(const void *x, const void *y)
{
	const struct gapi *a = x, *b = y;
	return AN_ORDER(a->corr, b->corr) ?:
	       AN_ORDER(a->t, b->t) ?:
	       AN_ORDER(a->d, b->d) ?:
	       AN_ORDER(a->launch, b->launch);
}

static int cmp_api_t(const void *x, const void *y)
{
	const struct gapi *a = x, *b = y;
	return AN_ORDER(a->t, b->t) ?:
	       AN_ORDER(a->corr, b->corr) ?:
	       AN_ORDER(a->d, b->d) ?:
	       AN_ORDER(a->launch, b->launch);
}

static int cmp_xc(const void *x, const void *y)
{
	const struct gxc *a = x, *b = y;
	return AN_ORDER(a->corr, b->corr);
}

static int cmp_call(const void *x, const void *y)
{
	const struct gcall *a = x, *b = y;
	return AN_ORDER(a->ext, b->ext);
}

int an_gpu_cmp_launch(const void *x, const void *y)
{
	const struct gwork *a = x, *b = y;
	return AN_ORDER(a->launch, b->launch) ?:
	       AN_ORDER(a->t, b->t) ?:
	       AN_ORDER(a->corr, b->corr) ?:
	       AN_ORDER(a->ctx, b->ctx) ?:
	       AN_ORDER(a->stream, b->stream) ?:
	       AN_ORDER(a->d, b->d) ?:
	       AN_ORDER(a->bytes, b->bytes) ?:
	       AN_ORDER(a->comm, b->comm) ?:
	       AN_ORDER(a->seq, b->seq) ?:
	       AN_ORDER(a->name, b->name) ?:
	       AN_ORDER(a->cls, b->cls) ?:
	       AN_ORDER(a->pageable, b->pageable) ?:
	       AN_ORDER(a->op, b->op);
}

/* Each work's launch time, and NCCL kernels' collectives (by the call's external id, else by
 * their order), once the file is read; times on the process's own clock. */
const struct gcomm *an_gpu_comm(const struct gpuproc *g, int32_t comm)
{
	for (int i = 0; i < g->ncomms; i++)
		if (g->comms[i].comm == comm)
			return &g->comms[i];
	return NULL;
}

/* a nonblocking communicator's launching call still without a kernel: its kernels are launched by
 * NCCL's own thread, after the call returned, with no external id (so on an H200, NCCL 2.28.9);
 * one rank alone launches no kernel (an in-place collective nothing, an out-of-place one a copy),
 * nor does a captured call (its graph's launches do) */
static int waiting_unit(const struct gpuproc *g, const struct gcall *c)
{
	const struct gcomm *m = c->unit && !c->used && !c->captured ? an_gpu_comm(g, c->comm) : NULL;
	return m && !m->blocking && m->nranks != 1;
}

static int cmp_key(const void *x, const void *y)
{
	const int64_t *a = x, *b = y;
	return AN_ORDER(a[0], b[0]) ?: AN_ORDER(a[1], b[1]);
}

/* The calls captured into CUDA graphs: those NCCL's profiler plugin names as a replay's (its Coll
 * event's CollApi parent, 2.14), and every call of a group one of them is in, its end too (NCCL
 * captures a group whole or not at all: src/group.cc). Without the plugin none is known. */
static void captured_calls(struct gpuproc *g)
{
	size_t nk = 0, ng = 0;
	for (size_t i = 0; i < g->np; i++)
		nk += g->plug[i].replay && g->plug[i].call >= 0;
	int64_t(*key)[2] = nk ? malloc(nk * sizeof *key) : NULL;
	int64_t *grp = key ? malloc(g->nc * sizeof *grp + 1) : NULL;
	if (grp) {
		nk = 0;
		for (size_t i = 0; i < g->np; i++)
			if (g->plug[i].replay && g->plug[i].call >= 0)
				key[nk][0] = g->plug[i].call_comm, key[nk++][1] = g->plug[i].call;
		sort_n(key, nk, sizeof *key, cmp_key);
		for (size_t i = 0; i < g->nc; i++) {
			struct gcall *c = &g->call[i];
			const int64_t k[2] = { c->comm, c->seq };
			c->captured = c->seq >= 0 && bsearch(k, key, nk, sizeof *key, cmp_key);
			if (c->captured && c->grp)
				grp[ng++] = c->grp;
		}
		sort_n(grp, ng, sizeof *grp, an_cmp_i64);
		for (size_t i = 0; i < g->nc && ng; i++)
			g->call[i].captured |= g->call[i].grp &&
					       bsearch(&(int64_t){ g->call[i].grp }, grp, ng, sizeof *grp, an_cmp_i64);
	}
	free(key);
	free(grp);
}

static int cmp_graph_kernel(const void *x, const void *y)
{
	const struct gwork *const *a = x, *const *b = y;
	return AN_ORDER((*a)->launch, (*b)->launch) ?: AN_ORDER((*a)->corr, (*b)->corr) ?: AN_ORDER((*a)->t, (*b)->t);
}

/* c's captured calls (nc, in call order) for the graph kernels k (nk, by launch, then start): where
 * each graph launch ran one kernel of each, in that order, a kernel of sends and receives where
 * its call is one, the i-th of the L-th launch is the i-th call's L-th replay: its instance as the
 * plugin's replays name it (an_replay_key), of its collective, or of its message where it is one
 * (as an_gpu_identify names an eager one, the peer's the same). Else they stay as they are. */
static void replays_by_launch(struct gpuproc *g, struct gcall **c, size_t nc, struct gwork **k, size_t nk)
{
	int fits = nc && nk % nc == 0;
	for (size_t i = 0; fits && i < nk; i++)
		fits = k[i]->p2p == (c[i % nc]->seq < 0) &&
		       (i % nc ? k[i]->corr == k[i - 1]->corr : !i || k[i]->corr != k[i - 1]->corr);
	for (size_t i = 0; fits && i < nk; i++) {
		struct gcall *u = c[i % nc];
		k[i]->bytes = u->bytes;
		k[i]->op = u->op;
		u->captured = 1;
		int32_t kc = u->mseq >= 0 ? u->mcomm : u->comm, ks = u->mseq >= 0 ? u->mseq : u->seq;
		if (ks >= 0) {
			an_replay_key(kc, ks, (int64_t)(i / nc), &k[i]->comm, &k[i]->seq);
			g->join[JOIN_GRAPH]++;
		}
	}
}

/* CUPTI's own account of CUDA graphs: a blocking communicator's call captured into a graph made
 * its launch call under its external id (CUPTI records it) yet ran no kernel of it; its kernels
 * carry their graph launch's correlation id at each launch (replays_by_launch). What this leaves
 * (a nonblocking communicator's, whose launch has no id) ncclplug.c joins by the plugin's replays,
 * where it told them; where it joined, the plugin's replays are checked against it. Run before
 * the calls are sorted by time (api_of). */
static void graph_by_launch(struct gpuproc *g)
{
	size_t nk = 0, nl = 0, nc = 0;
	for (size_t i = 0; i < g->nw; i++)
		nk += g->w[i].cls == GW_NCCL && g->w[i].graph && g->w[i].comm == INT32_MIN;
	int64_t *ext = nk ? malloc((g->nx + 1) * sizeof *ext) : NULL;
	struct gcall **c = ext ? malloc((g->nc + 1) * sizeof *c) : NULL;
	struct gwork **k = c ? malloc(nk * sizeof *k) : NULL;
	if (k) {
		size_t at = 0;
		for (size_t i = 0; i < g->nx; i++) {
			const struct gapi *a = api_of(g, g->xc[i].corr, 0, &at);
			if (a && a->launch == L_WORK)
				ext[nl++] = (int64_t)g->xc[i].ext;
		}
		sort_n(ext, nl, sizeof *ext, an_cmp_i64);
		for (size_t i = 0; i < g->nc; i++) { /* (in call order) */
			struct gcall *u = &g->call[i];
			const struct gcomm *m = u->unit && !u->used ? an_gpu_comm(g, u->comm) : NULL;
			if (m && m->blocking && m->nranks != 1 &&
			    bsearch(&(int64_t){ (int64_t)u->ext }, ext, nl, sizeof *ext, an_cmp_i64))
				c[nc++] = u;
		}
		nk = 0;
		for (size_t i = 0; i < g->nw; i++)
			if (g->w[i].cls == GW_NCCL && g->w[i].graph && g->w[i].comm == INT32_MIN)
				k[nk++] = &g->w[i];
		sort_n(k, nk, sizeof *k, cmp_graph_kernel);
		replays_by_launch(g, c, nc, k, nk);
	}
	free(ext);
	free(c);
	free(k);
}

/* k's kernels take the waiting units of comm, in order (the unit's collective, its bytes) */
static void take_units(struct gpuproc *g, struct gwork **k, size_t n, int32_t comm)
{
	size_t j = 0;
	for (size_t i = 0; i < g->nc && j < n; i++)
		if (g->call[i].comm == comm && waiting_unit(g, &g->call[i])) {
			struct gwork *w = k[j++];
			w->comm = comm;
			w->seq = g->call[i].seq;
			w->bytes = g->call[i].bytes;
			w->op = g->call[i].op;
		}
	g->join[JOIN_COMM_ORDER] += (uint32_t)n;
}

/* Several communicators' waiting units (cs, units: nc of them) for the n kernels k, in launch
 * order: each communicator takes the stream (lane) whose kernels are as many as its units, where
 * that count pairs one stream with one communicator. */
static void join_by_stream(struct gpuproc *g, struct gwork **k, size_t n, const int32_t *cs, const size_t *units,
			   size_t nc)
{
	/* each lane's count of kernels: lanes sorted, then counted in place (lk[i] has lc[i]) */
	uint64_t *lk = malloc(n * sizeof *lk);
	size_t *lc = malloc(n * sizeof *lc), nl = 0;
	struct gwork **rest = malloc(n * sizeof *rest);
	for (size_t i = 0; lk && lc && rest && i < n; i++)
		lk[i] = lane(k[i]);
	if (lk && lc && rest) {
		sort_n(lk, n, sizeof *lk, an_cmp_i64); /* (any order: equal lanes together) */
		for (size_t i = 0; i < n; i++)
			if (nl && lk[nl - 1] == lk[i])
				lc[nl - 1]++;
			else
				lk[nl] = lk[i], lc[nl++] = 1;
	}
	for (size_t m = 0; m < nc && n && nl; m++) {
		size_t pl = 0;
		int pairs = 0;
		for (size_t l = 0; l < nl; l++)
			if (lc[l] == units[m])
				pairs++, pl = l;
		for (size_t o = 0; o < nc; o++)
			pairs += o != m && units[o] == units[m]; /* (two communicators of one count: no pair) */
		if (pairs != 1)
			continue;
		/* the stream's kernels to the front, the others after them, each in launch order */
		size_t j = 0, r = 0;
		for (size_t i = 0; i < n; i++)
			if (lane(k[i]) == lk[pl])
				k[j++] = k[i];
			else
				rest[r++] = k[i];
		take_units(g, k, j, cs[m]);
		memcpy(k, rest, r * sizeof *k);
		n = r;
		lc[pl] = 0; /* (taken: a count of 0 pairs with no communicator) */
	}
	free(lk);
	free(lc);
	free(rest);
}

/* NCCL kernels no external id joined: each nonblocking communicator's launches come in the order
 * of its calls, so its kernels, in launch order, are its waiting calls in call order (g->call is in
 * external id order, which is call order). One such communicator: its kernels are those. Several:
 * each takes the stream whose kernels are as many as its calls, where the counts pair them one to
 * one. Else they stay joined by order alone, and where the process has more than one
 * communicator are used for nothing across ranks (no instance, no clock point): the order of a
 * process's kernels is not its communicators' own. n: how many (no walk of the work when none). */
static void join_by_order(struct gpuproc *g, size_t n)
{
	g->join[JOIN_ORDER] = 0;
	if (!n)
		return;
	struct gwork **k = malloc(n * sizeof *k);
	int32_t cs[MAX_GCOMMS];
	size_t units[MAX_GCOMMS] = { 0 }, nc = 0;
	if (k) {
		n = 0;
		for (size_t i = 0; i < g->nw; i++) /* (in launch order) */
			if (g->w[i].cls == GW_NCCL && g->w[i].comm == INT32_MIN && !g->w[i].graph)
				k[n++] = &g->w[i]; /* (a graph's: its captured calls', ncclplug.c) */
		for (size_t i = 0; i < g->nc; i++) {
			if (!waiting_unit(g, &g->call[i]))
				continue;
			size_t m = 0;
			while (m < nc && cs[m] != g->call[i].comm)
				m++;
			if (m == nc)
				cs[nc++] = g->call[i].comm;
			units[m]++;
		}
	}
	if (nc == 1 && units[0] == n) {
		take_units(g, k, n, cs[0]);
	} else if (nc > 1) {
		join_by_stream(g, k, n, cs, units, nc);
	}
	for (size_t i = 0; i < g->nw; i++)
		if (g->w[i].cls == GW_NCCL && g->w[i].comm == INT32_MIN) {
			g->join[JOIN_ORDER]++;
			if (g->allcomms > 1)
				g->w[i].seq = -1;
		}
	free(k);
}

void an_gpu_identify(struct gpuproc *g)
{
	an_sort_near(g->api, g->na, sizeof *g->api, cmp_api_corr_t);
	sort_n(g->xc, g->nx, sizeof *g->xc, cmp_xc);
	sort_n(g->call, g->nc, sizeof *g->call, cmp_call);
	/* (while the work comes in the order of its ids, as CUPTI mostly writes it, one walk of the calls
	 * joins it; from the first that does not, a search each) */
	int seq = 1;
	uint32_t last = 0;
	int32_t order = 0;
	size_t at = 0;
	memset(g->join, 0, sizeof g->join);
	for (size_t i = 0; i < g->nc; i++)
		g->call[i].used = 0;
	captured_calls(g);
	for (size_t i = 0; i < g->nw; i++) {
		struct gwork *w = &g->w[i];
		if (w->corr) {
			seq &= w->corr >= last;
			last = w->corr;
		}
		const struct gapi *a = w->corr ? api_of(g, w->corr, seq, &at) : NULL;
		w->launch = a ? a->t : w->t;
		w->graph = a && a->launch == L_GRAPH;
		struct gxc kx = { .corr = w->corr };
		const struct gxc *x = w->corr && g->nx ? bsearch(&kx, g->xc, g->nx, sizeof *g->xc, cmp_xc) : NULL;
		struct gcall kc = { .ext = x ? x->ext : 0 };
		struct gcall *c = x && g->nc ? bsearch(&kc, g->call, g->nc, sizeof *g->call, cmp_call) : NULL;
		if (c && w->cls == GW_COMPUTE)
			w->cls = GW_NCCL; /* a kernel an NCCL call launched, whatever its name */
		if (w->cls != GW_NCCL)
			continue;
		if (c) {
			w->comm = c->mseq >= 0 ? c->mcomm : c->comm;
			w->seq = c->mseq >= 0 ? c->mseq : c->seq;
			w->bytes = c->bytes;
			w->op = c->op;
			c->used = 1;
			g->join[JOIN_EXT]++;
		} else { /* by order, in a sequence of their own (join_by_order may do better) */
			w->comm = INT32_MIN;
			w->seq = order++;
		}
	}
	graph_by_launch(g);
	an_sort_near(g->api, g->na, sizeof *g->api, cmp_api_t);
	an_sort_near(g->w, g->nw, sizeof *g->w, an_gpu_cmp_launch); /* (CUPTI's records come as work ends) */
	g->nccl = g->join[JOIN_EXT] + (uint32_t)order;
	join_by_order(g, (size_t)order);
}
