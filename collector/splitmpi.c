/* report --mpi's split: the ranks split where their files were read, each process's splits (their
 * figures, waits, fold and what they add to others: struct shared) sent to process 0, which takes
 * them in. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../common/format.h"
#include "analysis_int.h"
#include "split_int.h"
#include "trace.h"

/* rank r's split (what split_rank made) as bytes */
static void pack_split(struct an_buf *b, const struct analysis *a, const struct stepdata *sd, int r,
		       const struct shared *l)
{
	const struct rankinfo *ri = &a->ranks[r];
	int32_t rr = r;
	uint8_t steps = ri->steps != NULL;
	uint64_t nwf = sd->nwf[r], nlate = sd->late[r] ? sd->nlate[r] : 0, nlog = l->n;
	an_put(b, &rr, sizeof rr);
	an_put(b, &steps, 1);
	if (steps)
		an_put(b, ri->steps, sd->K * sizeof *ri->steps);
	an_put(b, &ri->bg_ms, sizeof ri->bg_ms);
	an_put(b, &ri->bg_overlap, sizeof ri->bg_overlap);
	an_put(b, &nwf, sizeof nwf);
	an_put(b, sd->wf[r], nwf * sizeof *sd->wf[r]);
	an_put(b, &nlate, sizeof nlate);
	an_put(b, sd->late[r], nlate * sizeof *sd->late[r]);
	an_put(b, &sd->fold[r], sizeof sd->fold[r]);
	an_put(b, &ri->gpu, sizeof ri->gpu);
	uint64_t nadd = sd->gadd ? sd->gadd[r].n : 0;
	an_put(b, &nadd, sizeof nadd);
	if (nadd)
		an_put(b, sd->gadd[r].v, nadd * sizeof *sd->gadd[r].v);
	an_put(b, &nlog, sizeof nlog);
	an_put(b, l->v, nlog * sizeof *l->v);
	an_put_str(b, l->warn);
}

/* splits of other processes' ranks into a, sd and logs */
static int unpack_splits(struct analysis *a, struct stepdata *sd, struct shared *logs, const struct an_buf *b)
{
	struct an_rd rd = { b->p, b->p + b->n, 0 };
	while (!rd.err && rd.p < rd.end) {
		int32_t r;
		uint8_t steps;
		uint64_t nwf, nlate, nlog;
		an_get(&rd, &r, sizeof r);
		an_get(&rd, &steps, 1);
		if (rd.err || r < 0 || r >= a->nranks || steps != (a->ranks[r].steps != NULL))
			return -1;
		struct rankinfo *ri = &a->ranks[r];
		if (steps)
			an_get(&rd, ri->steps, sd->K * sizeof *ri->steps);
		an_get(&rd, &ri->bg_ms, sizeof ri->bg_ms);
		an_get(&rd, &ri->bg_overlap, sizeof ri->bg_overlap);
		an_get(&rd, &nwf, sizeof nwf);
		free(sd->wf[r]);
		sd->wf[r] = an_get_arr(&rd, nwf, sizeof *sd->wf[r], 0);
		sd->nwf[r] = sd->cwf[r] = sd->wf[r] ? nwf : 0;
		an_get(&rd, &nlate, sizeof nlate);
		free(sd->late[r]);
		sd->late[r] = an_get_arr(&rd, nlate, sizeof *sd->late[r], 1);
		sd->nlate[r] = sd->late[r] ? nlate : 0;
		an_get(&rd, &sd->fold[r], sizeof sd->fold[r]);
		an_get(&rd, &ri->gpu, sizeof ri->gpu);
		uint64_t nadd;
		an_get(&rd, &nadd, sizeof nadd);
		if (nadd && !sd->gadd && !(sd->gadd = calloc((size_t)a->nranks, sizeof *sd->gadd)))
			return -1;
		if (sd->gadd) {
			free(sd->gadd[r].v);
			sd->gadd[r].v = an_get_arr(&rd, nadd, sizeof *sd->gadd[r].v, 0);
			sd->gadd[r].n = sd->gadd[r].cap = sd->gadd[r].v ? nadd : 0;
			for (size_t k = 0; k < sd->gadd[r].n; k++) /* (indices into this process's table) */
				if (sd->gadd[r].v[k].in >= sd->tab.cap)
					return -1;
		}
		an_get(&rd, &nlog, sizeof nlog);
		struct shared *l = &logs[r];
		free(l->v);
		l->v = an_get_arr(&rd, nlog, sizeof *l->v, 0);
		l->n = l->cap = l->v ? nlog : 0;
		free(l->warn);
		l->warn = an_get_str(&rd);
		for (size_t k = 0; k < l->n; k++) { /* (indices into this process's tables) */
			const struct sadd *x = &l->v[k];
			size_t lim = x->type == SH_WAIT_SUM || x->type == SH_PREV ? sd->tab.cap :
				     x->type == SH_P2PL ? 2 * (size_t)a->nranks :
				     x->type == SH_P2POP ? (size_t)a->nranks * DDPSPY_OP_COUNT : (size_t)a->nranks;
			if (x->i >= lim || x->type < SH_WAIT_SUM || x->type > SH_PREV)
				return -1;
		}
	}
	return rd.err ? -1 : 0;
}

int an_split_exchange(struct analysis *a, struct stepdata *sd, struct shared *logs, const size_t *mine, size_t n)
{
	struct an_mpi *m = a->mpi;
	struct an_buf b = { 0 };
	int rc = 0;
	if (an_mpi_me(m) != 0) {
		for (size_t i = 0; i < n; i++)
			pack_split(&b, a, sd, (int)mine[i], &logs[mine[i]]);
		rc = b.err ? -1 : an_mpi_send(m, &b);
		if (rc < 0)
			an_mpi_abort(m); /* (process 0 would wait for it) */
	} else {
		for (int q = 1; q < an_mpi_np(m) && rc == 0; q++)
			rc = an_mpi_recv(m, q, &b) < 0 || unpack_splits(a, sd, logs, &b) < 0 ? -1 : 0;
	}
	free(b.p);
	return rc;
}
