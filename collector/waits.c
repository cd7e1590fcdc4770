/* A training thread's waits for late peers, as the split follows its calls (split.c) and a long
 * trace's sweep follows them too (sweep.c, without the instances): how long a blocking collective,
 * or the completing wait of nonblocking ones, waited for the last rank to arrive, and the state of
 * its nonblocking posts between calls, which a sampled block of steps starts from (saved and
 * loaded). Under both; calls only the model's instances. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../common/format.h"
#include "analysis_int.h"

#define POSTS 64

/* The pending collectives a completing wait e completed: those posted among the e->count posts in a
 * row from the latest with e's request (the last count posted when the first of them has it: a
 * loop that posts then waits all), as p2p.c completes point-to-point operations; a MPI_Waitall whose
 * request is none of the latest posts, every pending one. [*from, *to): orders of posts. */
static void completed_posts(const struct wait_ctx *w, const struct ev *e, uint64_t *from, uint64_t *to)
{
	uint64_t c = e->count > 1 ? (uint64_t)e->count : 1, n = w->nposts, f = UINT64_MAX;
	uint64_t oldest = n > POSTS ? n - POSTS : 0;
	if (c <= n - oldest && w->post_req[(n - c) % POSTS] == e->req)
		f = n - c;
	for (uint64_t j = n; f == UINT64_MAX && j-- > oldest;)
		if (w->post_req[j % POSTS] == e->req)
			f = j;
	if (f == UINT64_MAX) {
		*from = 0;
		*to = e->op == DDPSPY_OP_WAITALL ? UINT64_MAX : 0;
		return;
	}
	*from = f;
	*to = f + c;
}

double an_wait_of(struct wait_ctx *w, const struct ev *e, struct inst **rel)
{
	*rel = NULL;
	int64_t release = INT64_MIN;
	if (an_blocking_coll(e)) {
		struct inst *in = w->tab ? an_inst_get(w->tab, e->comm, e->seq, 0) : NULL;
		if (in && in->n > 1) {
			release = in->max_arr;
			*rel = in;
		}
	} else if (an_completes(e)) {
		/* the collectives it completed (and any posted before them still pending: done by then,
		 * as far as the trace can tell): it waited for the last rank to post the latest */
		uint64_t from, to;
		completed_posts(w, e, &from, &to);
		int last = -1, k = 0;
		for (int i = 0; i < w->npend; i++)
			if (w->pend_ord[i] >= from && w->pend_ord[i] < to)
				last = i;
		for (int i = 0; i < w->npend; i++) {
			if (i > last) {
				w->pend_comm[k] = w->pend_comm[i], w->pend_seq[k] = w->pend_seq[i];
				w->pend_ord[k++] = w->pend_ord[i];
				continue;
			}
			struct inst *in = w->tab ? an_inst_get(w->tab, w->pend_comm[i], (int)w->pend_seq[i], 0) : NULL;
			if (in && in->n > 1 && in->max_arr > release) {
				release = in->max_arr;
				*rel = in;
			}
		}
		w->npend = k;
	} else if (e->req && ((an_kind(e->kind)->m & DDPSPY_KM_NONBLOCKING) ||
			      (an_is_p2p(e) && e->op != DDPSPY_OP_SENDRECV))) {
		if ((an_kind(e->kind)->m & DDPSPY_KM_NONBLOCKING) && w->npend < 64) {
			w->pend_comm[w->npend] = e->comm;
			w->pend_ord[w->npend] = w->nposts;
			w->pend_seq[w->npend++] = e->seq;
		}
		w->post_req[w->nposts++ % POSTS] = e->req;
	}
	if (!*rel)
		return 0;
	int64_t wt = release - e->t;
	return wt <= 0 ? 0 : MS(wt < e->d ? wt : e->d);
}

struct wsnap {
	uint64_t nposts;
	int npend;
	uint32_t post_req[POSTS];
	struct wpend { int64_t seq; uint64_t ord; int comm; } pend[];
};

struct wsnap *an_wait_save(const struct wait_ctx *w)
{
	struct wsnap *s = malloc(sizeof *s + (size_t)w->npend * sizeof *s->pend);
	if (!s)
		return NULL;
	s->nposts = w->nposts;
	s->npend = w->npend;
	memcpy(s->post_req, w->post_req, sizeof s->post_req);
	for (int i = 0; i < w->npend; i++)
		s->pend[i] = (struct wpend){ w->pend_seq[i], w->pend_ord[i], w->pend_comm[i] };
	return s;
}

void an_wait_load(struct wait_ctx *w, const struct wsnap *s)
{
	w->nposts = s->nposts;
	w->npend = s->npend;
	memcpy(w->post_req, s->post_req, sizeof s->post_req);
	for (int i = 0; i < s->npend; i++) {
		w->pend_seq[i] = s->pend[i].seq;
		w->pend_ord[i] = s->pend[i].ord;
		w->pend_comm[i] = s->pend[i].comm;
	}
}
