/* The clocks' spread (analysis_int.h): per thread, the messages and collectives whose ends the
 * clocks phase lines up across ranks, kept while a file is read, at levels by importance. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "analysis_int.h"

/* v, of level lv, kept when the thread's level lets it; past max, a level more is asked of them all */
static void spread_put(struct thr *t, const struct ev *v, unsigned lv, size_t max)
{
	if (lv < t->spk)
		return;
	if (t->nspr == t->cspr) { /* room for one more: max + 1 at most (it goes at once), as long as the
				   * levels can thin them (out of memory: fewer calls for the clocks; cspr is
				   * what both arrays have) */
		size_t c = t->cspr ? t->cspr * 2 : 256;
		if (c > max + 1 && max + 1 > t->cspr)
			c = max + 1;
		struct ev *n = realloc(t->spr, c * sizeof *n);
		if (!n)
			return;
		t->spr = n;
		uint8_t *l = realloc(t->slv, c);
		if (!l)
			return;
		t->slv = l;
		t->cspr = c;
	}
	t->spr[t->nspr] = *v;
	t->slv[t->nspr++] = (uint8_t)lv;
	while (t->nspr > max && t->spk < 64) {
		size_t k = 0;
		t->spk++;
		for (size_t i = 0; i < t->nspr; i++)
			if (t->slv[i] >= t->spk) {
				t->spr[k] = t->spr[i];
				t->slv[k++] = t->slv[i];
			}
		t->nspr = k;
	}
}

/* the highest level of v's messages (point-to-point), -1 when none is matched */
static int msg_level(const struct proc *p, const struct ev *v)
{
	struct an_p2pmsg msg[2];
	int nm = an_p2p_msgs(p, v, msg), lv = -1;
	for (int k = 0; k < nm; k++)
		if (msg[k].seq >= 0 && (int)an_msg_level(&msg[k]) > lv)
			lv = (int)an_msg_level(&msg[k]);
	return lv;
}

static uint32_t ppost_req(const void *ctx, size_t k)
{
	return ((const struct an_posts *)ctx)->v[k].req;
}

/* v, a synchronizing call beyond t's prefix: kept for the clocks when every rank leaves it
 * together, when it is a blocking send or receive, or when it is a wait that completed posts:
 * then with them, at the highest level among them (a Waitall and what it completed stay together,
 * so that the clocks match them again as they would in the whole trace) */
static void spread_call(const struct proc *p, struct thr *t, const struct ev *v, size_t max, int put)
{
	int i = 0, last = 0;
	if (an_exit_aligns(v)) {
		if (put)
			spread_put(t, v, an_spread_level(v), max);
		return;
	}
	if (!t->posts && !(t->posts = calloc(1, sizeof *t->posts)))
		return;
	if (!t->pposts && !(t->pposts = calloc(1, sizeof *t->pposts)))
		return;
	int lv = -1;
	if (an_is_p2p(v)) {
		if (v->op != DDPSPY_OP_SENDRECV && v->req) /* nonblocking: kept with its wait, if at all */
			an_posts_push(t->pposts, v);
		else if (put && (lv = msg_level(p, v)) >= 0)
			spread_put(t, v, (unsigned)lv, max);
		return;
	}
	if (an_post(t->posts, v))
		return;
	/* a wait: the collectives it completed (an_posts_of), or the point-to-point operations (as
	 * p2p.c matches them); neither when it completed both kinds (their order is not kept) */
	size_t from = 0, to = 0;
	int coll = an_posts_of(t->posts, v, &i, &last);
	int p2p = an_completes(v) && v->req && an_p2p_completed((size_t)t->pposts->n, ppost_req, t->pposts, v, &from, &to);
	for (int j = i; put && coll && !p2p && j < last; j++) {
		int l = (int)an_spread_level(&t->posts->v[j]);
		lv = l > lv ? l : lv;
	}
	for (size_t j = from; put && !coll && p2p && j < to; j++) {
		int l = msg_level(p, &t->pposts->v[j]);
		lv = l > lv ? l : lv;
	}
	if (put && lv >= 0) {
		const struct ev *g = coll ? &t->posts->v[i] : &t->pposts->v[from];
		size_t n = coll ? (size_t)(last - i) : to - from;
		for (size_t j = 0; j < n; j++)
			spread_put(t, &g[j], (unsigned)lv, SIZE_MAX);
		spread_put(t, v, (unsigned)lv, max);
	}
	if (coll)
		an_posts_done(t->posts, i, last);
	if (p2p)
		an_posts_done(t->pposts, (int)from, (int)to);
}

void an_spread_add(const struct proc *p, struct thr *t, const struct ev *v, size_t max)
{
	spread_call(p, t, v, max, 1);
}

/* The posts of t's prefix that no wait in it completed, as the spread's pending ones: a wait
 * beyond the prefix then keeps them with it, as the whole trace would pair them (else the
 * instance that straddles the prefix's end was lost to the clocks) */
void an_spread_seed(const struct proc *p, struct thr *t)
{
	for (size_t k = 0; k < t->n; k++)
		spread_call(p, t, &t->ev[k], 0, 0);
}

void an_spread_drop(struct thr *t)
{
	free(t->spr);
	free(t->slv);
	free(t->posts);
	free(t->pposts);
	t->spr = NULL, t->slv = NULL, t->posts = NULL, t->pposts = NULL;
	t->nspr = t->cspr = 0;
}

void an_spread_free(struct analysis *a)
{
	for (int i = 0; i < a->nprocs; i++)
		for (int h = 0; h < a->procs[i].nthr; h++)
			an_spread_drop(&a->procs[i].thr[h]);
}
