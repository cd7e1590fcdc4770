/* The device split's figures of a sharded job (FSDP, ZeRO-3): each GPU rank's all-gathers of
 * parameters and reduce-scatters of gradients in its analysed steps, how long each transferred with
 * no compute kernel running (exposed), how long it waited for its peers' kernels first, and how
 * much of the exposed time the compute beside it could have hidden: a layer's gather started while
 * the layer before it computed (prefetch), a reduction left to run behind the layers after it.
 * Its peers' kernels' latest start is the device collective's instance's (gpustep.c's table).
 * Under gpustep.c (at the ranks' device split, where each rank is split: report --mpi sends them
 * with the rank's gpustat); what exposed_collective (findshard.c) reads. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../common/format.h"
#include "analysis_int.h"

static int class_of(int op)
{
	if (op == DDPSPY_OP_ALLGATHER || op == DDPSPY_OP_ALLGATHERV || op == DDPSPY_OP_BCAST)
		return SHARD_GATHER;
	return op == DDPSPY_OP_REDUCE_SCATTER || op == DDPSPY_OP_REDUCE_SCATTER_BLOCK ? SHARD_REDUCE : -1;
}

/* compute kernels' time in [t0, t1) (c: their union, sorted, nc of them) */
static int64_t computing(const struct gend *c, size_t nc, int64_t t0, int64_t t1)
{
	int64_t sum = 0;
	size_t lo = 0, hi = nc;
	while (lo < hi) { /* (the first that ends after t0) */
		size_t m = (lo + hi) / 2;
		if (c[m].end <= t0)
			lo = m + 1;
		else
			hi = m;
	}
	for (size_t i = lo; i < nc && c[i].start < t1; i++) {
		int64_t a = c[i].start > t0 ? c[i].start : t0, b = c[i].end < t1 ? c[i].end : t1;
		sum += b > a ? b - a : 0;
	}
	return sum;
}

static int cmp_start(const void *x, const void *y)
{
	const struct gend *a = x, *b = y;
	return AN_ORDER(a->start, b->start) ?: AN_ORDER(a->end, b->end);
}

/* one all-gather or reduce-scatter kernel of a rank */
struct coll {
	int64_t t, end, bytes;
	int32_t comm, seq;
	int cls, op;
};

static int cmp_coll(const void *x, const void *y)
{
	const struct coll *a = x, *b = y;
	return AN_ORDER(a->t, b->t) ?: AN_ORDER(a->seq, b->seq);
}

/* the next one of class cls after index i in v, within [.., t1): its start, t1 when none */
static int64_t next_of(const struct coll *v, size_t n, size_t i, int cls, int64_t t1)
{
	for (size_t j = i + 1; j < n && v[j].t < t1; j++)
		if (v[j].cls == cls)
			return v[j].t;
	return t1;
}

/* Rank index r's all-gathers and reduce-scatters into s[CLASSES]; -1 out of memory. A gather's
 * exposed time could have run beside the compute since the gather before it in the step (the layer
 * before: a prefetch started there), a reduction's beside the compute up to the next reduction
 * (the layers after it), never past the step's end (the optimizer needs it). */
static int rank_shards(const struct analysis *a, int r, struct itab *tab, struct gpushard *s)
{
	struct proc *p = a->ranks[r].p;
	const struct rankinfo *ri = &a->ranks[r];
	size_t N = a->sd->K, n = 0, nk = 0;
	if (an_gpu_open(p) < 0)
		return 0;
	size_t nw = an_gpu_nwork(p), ck = 0;
	struct gend *c = NULL;
	struct coll *k = NULL;
	int rc = -1;
	for (size_t i = 0; i < nw; i++) { /* the collectives of the two classes (k) */
		struct gpuitem g;
		if (an_gpu_work(p, i, &g) < 0)
			break;
		int cls = g.nccl && !g.plugin && g.seq >= 0 ? class_of(g.op) : -1;
		if (cls < 0)
			continue;
		struct coll *grown = room_for(k, nk, &ck, sizeof *k, 256);
		if (!grown)
			goto out;
		(k = grown)[nk++] = (struct coll){ g.t, g.t + g.d, g.bytes > 0 ? g.bytes : 0,
						   g.comm == INT32_MIN ? -7 : g.comm, g.seq, cls, g.op };
	}
	if (!nk) { /* (a job that shards nothing: no compute kernels gathered) */
		rc = 0;
		goto out;
	}
	if (!(c = malloc((nw + 1) * sizeof *c)))
		goto out;
	for (size_t i = 0; i < nw; i++) { /* the compute kernels (c) */
		struct gpuitem g;
		if (an_gpu_work(p, i, &g) < 0)
			break;
		if (!g.nccl && g.cls[0] == 'k')
			c[n++] = (struct gend){ 0, 0, g.t, g.t + g.d };
	}
	sort_n(c, n, sizeof *c, cmp_start);
	sort_n(k, nk, sizeof *k, cmp_coll);
	size_t u = 0;
	for (size_t i = 0; i < n; i++) { /* the compute kernels' union */
		if (u && c[i].start <= c[u - 1].end)
			c[u - 1].end = c[i].end > c[u - 1].end ? c[i].end : c[u - 1].end;
		else
			c[u++] = c[i];
	}
	size_t st = 0;
	int64_t gend_prev = INT64_MIN; /* the latest gather's end in step st */
	for (size_t i = 0; i < nk; i++) {
		const struct coll *g = &k[i];
		size_t was = st;
		while (st < N && ri->steps[st].t1 <= g->t)
			st++;
		if (st != was)
			gend_prev = INT64_MIN;
		if (st == N)
			break;
		if (g->t < ri->steps[st].t0)
			continue;
		const struct inst *in = an_inst_get(tab, g->comm, g->seq, 0);
		int64_t t0 = ri->steps[st].t0, t1 = ri->steps[st].t1, x0 = in && in->n > 1 ? in->max_arr : g->t;
		x0 = x0 > g->t ? (x0 < g->end ? x0 : g->end) : g->t;
		double exposed = MS(g->end - x0 - computing(c, u, x0, g->end));
		struct gpushard *h = &s[g->cls];
		h->calls++;
		h->bytes += (double)g->bytes;
		if (g->op >= 0 && g->op < DDPSPY_OP_COUNT)
			h->opbytes[g->op] += (double)g->bytes;
		h->waited += MS(x0 - g->t);
		h->xfer += MS(g->end - x0);
		h->exposed += exposed;
		double beside;
		if (g->cls == SHARD_GATHER) {
			beside = gend_prev == INT64_MIN ? 0 : MS(computing(c, u, gend_prev > t0 ? gend_prev : t0, g->t));
			gend_prev = g->end > gend_prev ? g->end : gend_prev;
		} else {
			int64_t w1 = next_of(k, nk, i, SHARD_REDUCE, t1);
			beside = w1 < t1 ? MS(computing(c, u, g->end, w1)) : 0;
		}
		h->hideable += fmin(exposed, beside);
	}
	rc = 0;
out:
	free(c);
	free(k);
	an_gpu_close(p);
	return rc;
}


void an_gpu_shards(struct analysis *a, const size_t *ranks, size_t n, struct itab *tab)
{
	for (size_t i = 0; i < n; i++) {
		struct gpushard *s = a->ranks[ranks[i]].gpu.shard;
		memset(s, 0, SHARD_CLASSES * sizeof *s);
		if (a->ranks[ranks[i]].steps && rank_shards(a, (int)ranks[i], tab, s) < 0)
			memset(s, 0, SHARD_CLASSES * sizeof *s);
	}
}
