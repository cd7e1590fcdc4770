/* The program's NVTX ranges while its file is read (the load phase): pushes paired with pops per
 * thread and domain, starts with ends by id, each closed range counted by thread, domain and name
 * (proc.range), with the recorded calls that ran in it and in none of its inner ranges. What a
 * call or a Python sample ran in is asked here too: the innermost range open on its thread when it
 * began (a sample's, from the main thread's latest closed ranges). Findings say from these which
 * of the user's phases (forward, backward, the optimizer step, their own names) a cost is in
 * (findphase.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/format.h"
#include "../common/hash.h"
#include "analysis_int.h"
#include "trace.h"

#define DEPTH 32     /* ranges followed open on a thread at once (deeper ones: counted lost) */
#define STARTS 256   /* start-end ranges followed open at once in a process */
#define DOMAINS 32   /* domains' names kept */
#define RING 4096    /* the main thread's latest closed ranges, for its samples */

struct open {
	int64_t t, domain;
	int depth;
	double cat_ns[CAT_COUNT];
	char name[AN_RANGE_NAME];
};
struct tstack {
	int tid, n;        /* n: its ranges open, those past DEPTH not kept */
	struct open o[DEPTH];
};
struct closed {
	int64_t t0, t1;
	int depth;
	char name[AN_RANGE_NAME];
};
struct nvload {
	struct tstack *st;
	int nst, last;
	struct { int64_t id, t, domain; int tid; char name[AN_RANGE_NAME]; } start[STARTS];
	int nstart;
	struct { int64_t id; char name[32]; } dom[DOMAINS];
	int ndom;
	struct closed *ring;
	unsigned nring;
};

static int8_t P_range, P_id, P_domain, P_msg; /* the "nvtx" event's arguments' places */

__attribute__((constructor)) static void places(void)
{
	P_range = an_argpos(DDPSPY_EV_NVTX, "range");
	P_id = an_argpos(DDPSPY_EV_NVTX, "id");
	P_domain = an_argpos(DDPSPY_EV_NVTX, "domain");
	P_msg = an_argpos(DDPSPY_EV_NVTX, "message");
}

static struct nvload *state(struct proc *p)
{
	if (!p->nvload)
		p->nvload = calloc(1, sizeof(struct nvload));
	return p->nvload;
}

static struct tstack *stack_of(struct nvload *L, int tid, int make)
{
	if (L->last < L->nst && L->st[L->last].tid == tid)
		return &L->st[L->last];
	for (int i = 0; i < L->nst; i++)
		if (L->st[i].tid == tid)
			return &L->st[L->last = i];
	if (!make)
		return NULL;
	struct tstack *n = realloc(L->st, (size_t)(L->nst + 1) * sizeof *n);
	if (!n)
		return NULL;
	L->st = n;
	memset(&n[L->nst], 0, sizeof *n);
	n[L->nst].tid = tid;
	return &L->st[L->last = L->nst++];
}

/* the message as the range's name: cut before what makes each call's name its own (torch's
 * emit_nvtx writes "aten::addmm, seq = 12, op_id = 40, sizes = [...]") */
static void range_name(char *to, const struct trace_event *e)
{
	size_t n = e->str ? e->slen : 0;
	if (n >= AN_RANGE_NAME)
		n = AN_RANGE_NAME - 1;
	memcpy(to, e->str ? e->str : "", n);
	to[n] = 0;
	static const char *const cut[] = { ", seq = ", ", op_id = ", ", sizes = " };
	for (size_t k = 0; k < sizeof cut / sizeof *cut; k++) {
		char *at = strstr(to, cut[k]);
		if (at)
			*at = 0;
	}
}

static const char *domain_name(const struct nvload *L, int64_t id)
{
	for (int i = 0; id && i < L->ndom; i++)
		if (L->dom[i].id == id)
			return L->dom[i].name;
	return "";
}

int an_range_find(const struct proc *p, int tid, const char *domain, const char *name)
{
	int i = 0;
	while (i < p->nrange && !(p->range[i].tid == tid && !strcmp(p->range[i].name, name) &&
				  !strcmp(p->range[i].domain, domain)))
		i++;
	return i;
}

/* a closed range into p->range: a new name takes the place of the one of least time when that is
 * less than its own, else it is lost */
static void count(struct proc *p, int tid, int depth, const char *domain, const char *name, int64_t t, int64_t d,
		  const double *cat_ns)
{
	int i = an_range_find(p, tid, domain, name);
	int taken;
	if ((i = an_keep(p->range, &p->nrange, AN_RANGES, sizeof p->range[0], offsetof(struct nvrange, ms), i, d / 1e6,
			 &taken)) < 0) {
		p->ranges_lost++;
		return;
	}
	if (taken) { /* (the one that gives way) */
		p->ranges_lost += (uint64_t)p->range[i].calls;
		memset(&p->range[i], 0, sizeof p->range[i]);
	}
	struct nvrange *r = &p->range[i];
	if (!r->calls) {
		r->tid = tid;
		r->depth = depth;
		r->first = t;
		strcpy(r->name, name);
		snprintf(r->domain, sizeof r->domain, "%s", domain);
	}
	if (depth < r->depth)
		r->depth = depth;
	r->last = t;
	if (r->calls < AN_RANGE_ENDS) {
		r->head[(int)r->calls].t = t;
		r->head[(int)r->calls].d = d;
	}
	r->tail[(uint64_t)r->calls % AN_RANGE_ENDS].t = t;
	r->tail[(uint64_t)r->calls % AN_RANGE_ENDS].d = d;
	r->calls++;
	r->ms += d / 1e6;
	for (int c = 0; cat_ns && c < CAT_COUNT; c++)
		r->cat_ms[c] += cat_ns[c] / 1e6;
}

uint64_t an_range_key(const char *domain, const char *name)
{
	uint64_t h = ddpspy_fnv_bytes(DDPSPY_FNV_SEED, domain, strlen(domain) + 1);
	return ddpspy_fnv_bytes(h, name, strlen(name));
}

static void mark(struct proc *p, int tid, uint64_t key, int64_t t0, int64_t t1)
{
	struct an_nvmark *m = NULL;
	if (p->nnvmark < AN_NVMARKS && (m = room_for(p->nvmark, p->nnvmark, &p->cnvmark, sizeof *m, 256)))
		(p->nvmark = m)[p->nnvmark++] = (struct an_nvmark){ t0, t1, key, tid };
	else
		p->nvmark_over = 1;
}

static void pop(struct proc *p, struct nvload *L, const struct trace_event *e, int64_t domain)
{
	struct tstack *s = stack_of(L, e->tid, 0);
	if (!s || s->n <= 0)
		return;
	if (s->n > DEPTH) { /* (the innermost are not kept: one of them ends) */
		s->n--;
		p->ranges_lost++;
		return;
	}
	int i = s->n - 1; /* (each domain has its own stack: the innermost of this domain's ends) */
	while (i > 0 && s->o[i].domain != domain)
		i--;
	if (s->o[i].domain != domain)
		i = s->n - 1;
	struct open o = s->o[i];
	memmove(&s->o[i], &s->o[i + 1], (size_t)(s->n - 1 - i) * sizeof s->o[0]);
	s->n--;
	count(p, e->tid, o.depth, domain_name(L, o.domain), o.name, o.t, e->t_ns - o.t, o.cat_ns);
	if (o.depth <= 1) /* (a step-level range, perhaps: kept for the steps) */
		mark(p, e->tid, an_range_key(domain_name(L, o.domain), o.name), o.t, e->t_ns);
	if (e->tid != p->pid || (!L->ring && !(L->ring = malloc(RING * sizeof *L->ring))))
		return;
	struct closed *c = &L->ring[L->nring++ % RING];
	c->t0 = o.t;
	c->t1 = e->t_ns;
	c->depth = o.depth;
	memcpy(c->name, o.name, sizeof c->name);
}

void an_range_event(struct proc *p, const struct trace_event *e)
{
	struct nvload *L = state(p);
	if (!L)
		return;
	int64_t what = an_arg(e, P_range, -1), id = an_arg(e, P_id, 0), domain = an_arg(e, P_domain, 0);
	char name[AN_RANGE_NAME] = "";
	if (e->str && e->str_index == P_msg)
		range_name(name, e);
	if (what == DDPSPY_NVTX_PUSH) {
		struct tstack *s = stack_of(L, e->tid, 1);
		if (s && s->n++ < DEPTH)
			s->o[s->n - 1] = (struct open){ .t = e->t_ns, .domain = domain, .depth = s->n - 1 };
		if (s && s->n <= DEPTH)
			memcpy(s->o[s->n - 1].name, name, sizeof name);
	} else if (what == DDPSPY_NVTX_POP) {
		pop(p, L, e, domain);
	} else if (what == DDPSPY_NVTX_START) {
		if (L->nstart == STARTS) { /* (the oldest is forgotten: an end never came) */
			memmove(&L->start[0], &L->start[1], (STARTS - 1) * sizeof L->start[0]);
			L->nstart--;
			p->ranges_lost++;
		}
		L->start[L->nstart].id = id;
		L->start[L->nstart].t = e->t_ns;
		L->start[L->nstart].domain = domain;
		L->start[L->nstart].tid = e->tid;
		memcpy(L->start[L->nstart++].name, name, sizeof name);
	} else if (what == DDPSPY_NVTX_END) {
		for (int i = L->nstart - 1; i >= 0; i--)
			if (L->start[i].id == id) {
				count(p, L->start[i].tid, -1, domain_name(L, L->start[i].domain), L->start[i].name, L->start[i].t,
				      e->t_ns - L->start[i].t, NULL);
				L->start[i] = L->start[--L->nstart];
				break;
			}
	} else if (what == DDPSPY_NVTX_DOMAIN && L->ndom < DOMAINS) {
		L->dom[L->ndom].id = id;
		snprintf(L->dom[L->ndom++].name, sizeof L->dom[0].name, "%s", name);
	}
}

static struct open *innermost(struct proc *p, int tid)
{
	struct nvload *L = p->nvload;
	struct tstack *s = L ? stack_of(L, tid, 0) : NULL;
	return s && s->n > 0 && s->n <= DEPTH ? &s->o[s->n - 1] : NULL;
}

const char *an_range_now(struct proc *p, int tid)
{
	struct open *o = innermost(p, tid);
	return o ? o->name : "";
}

void an_range_call(struct proc *p, int tid, const struct ev *v)
{
	struct open *o = innermost(p, tid);
	int c = an_category(v);
	if (o && c >= 0 && c < CAT_COUNT)
		o->cat_ns[c] += (double)v->d;
}

const char *an_range_at(struct proc *p, int64_t t)
{
	struct nvload *L = p->nvload;
	const char *best = "";
	int depth = -1;
	struct tstack *s = L ? stack_of(L, p->pid, 0) : NULL;
	for (int i = s ? (s->n < DEPTH ? s->n : DEPTH) - 1 : -1; i >= 0; i--)
		if (s->o[i].t <= t) {
			best = s->o[i].name;
			depth = i;
			break;
		}
	for (unsigned k = 0; L && L->ring && k < RING && k < L->nring; k++) {
		const struct closed *c = &L->ring[(L->nring - 1 - k) % RING];
		if (c->t0 <= t && t < c->t1 && c->depth > depth) {
			best = c->name;
			depth = c->depth;
		}
		if (c->t1 <= t) /* (closed in order: none older holds it) */
			break;
	}
	return best;
}

static int cmp_range(const void *x, const void *y)
{
	const struct nvrange *a = x, *b = y;
	return a->ms != b->ms ? (a->ms < b->ms ? 1 : -1) : AN_ORDER(a->tid, b->tid) ? AN_ORDER(a->tid, b->tid) :
	       strcmp(a->name, b->name);
}

void an_range_loaded(struct proc *p)
{
	struct nvload *L = p->nvload;
	if (L) {
		free(L->st);
		free(L->ring);
		free(L);
	}
	p->nvload = NULL;
	sort_n(p->range, (size_t)p->nrange, sizeof p->range[0], cmp_range);
}
