/* A process's host call sites while its file is read (the load phase): its longest host calls
 * (sleeps, lock and condition waits, reads of devices and pipes) and input calls (waits for input
 * workers, reads of samples) by thread, kind and stack, and
 * their stacks as "module+0xoffset (function+0xoffset)" frames once the file's modules are known. What a rank does
 * that its peers do not is named from them (findings.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/format.h"
#include "analysis_int.h"
#include "elfsym.h"
#include "trace.h"

void an_hsite_add(struct proc *p, const struct trace_event *e, const struct ev *v)
{
	int cat = an_category(v);
	if (v->d < AN_HSITE_NS || (cat != CAT_HOST && cat != CAT_DATA) ||
	    (an_kind(v->kind)->m & (DDPSPY_KM_COLL | DDPSPY_KM_P2P | DDPSPY_KM_WAITS)))
		return;
	const char *range = an_range_now(p, e->tid);
	int i = 0;
	while (i < p->nhsite && !(p->hsite[i].tid == e->tid && p->hsite[i].stack == e->stack && p->hsite[i].kind == v->kind &&
				  p->hsite[i].cat == cat && !strcmp(p->hsite[i].range, range)))
		i++;
	int taken;
	if ((i = an_keep(p->hsite, &p->nhsite, AN_HSITES, sizeof p->hsite[0], offsetof(struct hsite, ms), i, MS(v->d),
			 &taken)) < 0)
		return;
	if (taken)
		memset(&p->hsite[i], 0, sizeof p->hsite[i]);
	struct hsite *s = &p->hsite[i];
	if (!s->calls)
		s->first = v->t;
	s->last = v->t;
	s->tid = e->tid;
	s->stack = e->stack;
	s->kind = v->kind;
	s->cat = (int8_t)cat;
	snprintf(s->range, sizeof s->range, "%s", range);
	s->ms += MS(v->d);
	s->calls++;
}

int an_frames(const struct trace_file *f, uint32_t stack, char (*frames)[112], int max)
{
	const struct trace_stack *st = stack ? trace_stack(f, stack) : NULL;
	int n = 0;
	for (uint32_t k = 0; st && k < st->n && n < max; k++) /* (a stack's frames are return addresses) */
		trace_frame_text(f, st->ips[k], 1, frames[n++], sizeof frames[0]);
	return n;
}

static int cmp_site(const void *x, const void *y)
{
	const struct hsite *a = x, *b = y;
	return a->ms != b->ms ? (a->ms < b->ms ? 1 : -1) : AN_ORDER(a->tid, b->tid) ? AN_ORDER(a->tid, b->tid) :
	       AN_ORDER(a->kind, b->kind) ? AN_ORDER(a->kind, b->kind) : AN_ORDER(a->stack, b->stack);
}

/* code of Python's own library (its stdlib, a frozen module, code from a string), not the
 * program's: a site is the frame that called into it (queue.get's caller, not Condition.wait) */
static int python_own(const char *file)
{
	return file[0] == '<' || (strstr(file, "/lib/python3") && !strstr(file, "-packages/"));
}

int an_same_pysite(const struct pysite *x, const struct pysite *y)
{
	return x->n && y->n && x->line == y->line && !strcmp(x->file, y->file) && !strcmp(x->func, y->func);
}

/* an installed package's code (site-packages, Debian's dist-packages) */
static int installed(const char *file)
{
	return strstr(file, "-packages/") != NULL;
}

int an_pysite(const struct trace_file *f, uint32_t stack, int own_code, struct pysite *ps)
{
	const struct trace_stack *st = stack ? trace_stack(f, stack) : NULL;
	ps->n = 0;
	if (!st || !st->npy)
		return 0;
	uint32_t at = 0;
	while (at + 1 < st->npy && (python_own(st->py[at].file) || (own_code && installed(st->py[at].file))))
		at++;
	size_t fl = strlen(st->py[at].file);
	snprintf(ps->file, sizeof ps->file, "%s", st->py[at].file + (fl >= sizeof ps->file ? fl - sizeof ps->file + 1 : 0));
	snprintf(ps->func, sizeof ps->func, "%s", st->py[at].func);
	ps->line = st->py[at].line;
	for (uint32_t k = at; k < st->npy && ps->n < AN_FRAMES; k++) {
		const char *file = st->py[k].file, *base = strrchr(file, '/');
		snprintf(ps->frames[ps->n++], sizeof ps->frames[0], "%s (%s:%d)", st->py[k].func, base ? base + 1 : file,
			 st->py[k].line);
	}
	return ps->n;
}

/* The main thread's latest calls of 20 us or more, by start (its events come in time order; a
 * sample 10 ms apart falls in a shorter one rarely, and a ring of the many short ones would not
 * reach back to the samples of the last flush), and the samples waiting to be told in or out of
 * them: a call is written when it ends, so a sample taken in a call that outlasts the writer's
 * flush comes before the call in the file (rank 0's 100-200 ms waits for a straggler on 2 busy
 * cores: 23 of 94 samples). A sample waits until the thread's next event that began after it:
 * then every call that holds it has been read. A full queue decides its oldest sample at once. */
#define RECENT 4096
#define RECENT_NS 20000
#define PENDING 1024
struct recent {
	int64_t t0[RECENT], t1[RECENT];
	unsigned n;
	struct pending {
		int64_t t;
		uint32_t stack;
		int native; /* (a "cpusamples" sample: native frames) */
		double ms;
	} q[PENDING];
	unsigned qh, qt; /* (head: the next added; tail: the oldest waiting) */
};

static int in_call(const struct recent *r, int64_t t)
{
	for (unsigned k = 0; r && k < RECENT && k < r->n; k++) {
		unsigned i = (r->n - 1 - k) % RECENT;
		if (r->t0[i] <= t && t < r->t1[i])
			return 1;
		if (r->t1[i] < t - 1000000000) /* (a second before it: none older holds it) */
			break;
	}
	return 0;
}

/* the site of psite a probe is, else a new one or the least taken over; NULL when it counts too
 * little to keep */
static struct hsite *site_for(struct proc *p, const struct hsite *probe, double ms, int64_t t)
{
	int i = 0;
	while (i < p->npsite && !((probe->py.n ? an_same_pysite(&p->psite[i].py, &probe->py)
					       : !p->psite[i].py.n && !strcmp(p->psite[i].frames[0], probe->frames[0])) &&
				  !strcmp(p->psite[i].range, probe->range)))
		i++;
	int taken;
	if ((i = an_keep(p->psite, &p->npsite, AN_HSITES, sizeof p->psite[0], offsetof(struct hsite, ms), i, ms, &taken)) < 0)
		return NULL;
	if (taken)
		memset(&p->psite[i], 0, sizeof p->psite[i]);
	struct hsite *s = &p->psite[i];
	if (!s->calls) {
		*s = *probe;
		s->first = t;
		s->tid = p->pid;
		s->kind = -1;
		s->cat = CAT_COMPUTE;
	}
	s->last = t;
	s->ms += ms;
	s->calls++;
	return s;
}

/* a sample out of every call: its site's time */
static void sample_add(struct proc *p, const struct trace_file *f, const struct pending *q)
{
	struct hsite probe = {.stack = q->stack};
	snprintf(probe.range, sizeof probe.range, "%s", p->nvload ? an_range_at(p, q->t) : "");
	if (!q->native) {
		if (an_pysite(f, q->stack, 1, &probe.py))
			site_for(p, &probe, q->ms, q->t);
		return;
	}
	const struct trace_stack *st = q->stack ? trace_stack(f, q->stack) : NULL;
	if (!st || !st->n)
		return;
	uint32_t at = trace_sample_site(f, st);
	/* (the site: its function, whatever the address in it sampled; then its callers) */
	trace_function_text(f, st->ips[at], at > 0, probe.frames[0], sizeof probe.frames[0]);
	struct hsite *s = site_for(p, &probe, q->ms, q->t);
	if (s && s->calls == 1)
		for (s->nframes = 1; at + s->nframes < st->n && s->nframes < AN_FRAMES; s->nframes++)
			trace_frame_text(f, st->ips[at + s->nframes], 1, s->frames[s->nframes], sizeof s->frames[0]);
}

/* the waiting samples taken before t (all of them: t INT64_MAX), each told in or out of the calls */
static void decide(struct proc *p, const struct trace_file *f, int64_t t)
{
	struct recent *r = p->recent;
	for (; r && r->qt != r->qh && r->q[r->qt % PENDING].t < t; r->qt++)
		if (!in_call(r, r->q[r->qt % PENDING].t))
			sample_add(p, f, &r->q[r->qt % PENDING]);
}

void an_psite_call(struct proc *p, const struct trace_file *f, int tid, const struct ev *v)
{
	if (tid != p->pid)
		return;
	if (v->d >= RECENT_NS && (p->recent || (p->recent = calloc(1, sizeof(struct recent))))) {
		struct recent *r = p->recent;
		r->t0[r->n % RECENT] = v->t;
		r->t1[r->n % RECENT] = v->t + v->d;
		r->n++;
	}
	decide(p, f, v->t);
}

static void pend(struct proc *p, const struct trace_file *f, int64_t t, uint32_t stack, int native, double ms)
{
	if (!p->recent && !(p->recent = calloc(1, sizeof(struct recent))))
		return;
	struct recent *r = p->recent;
	if (r->qh - r->qt == PENDING) /* (full: its oldest decided on what is known) */
		decide(p, f, r->q[r->qt % PENDING].t + 1);
	r->q[r->qh++ % PENDING] = (struct pending){t, stack, native, ms};
}

void an_psite_add(struct proc *p, const struct trace_file *f, int64_t t, uint32_t stack, double ms)
{
	pend(p, f, t, stack, 0, ms);
}

void an_csite_add(struct proc *p, const struct trace_file *f, int64_t t, uint32_t stack, double ms)
{
	pend(p, f, t, stack, 1, ms);
}

void an_hsite_loaded(struct proc *p, const struct trace_file *f)
{
	decide(p, f, INT64_MAX); /* (those after the thread's last event: out of every call read) */
	free(p->recent);
	p->recent = NULL;
	sort_n(p->psite, (size_t)p->npsite, sizeof p->psite[0], cmp_site);
	for (int i = 0; i < p->nhsite; i++) {
		p->hsite[i].nframes = an_frames(f, p->hsite[i].stack, p->hsite[i].frames, AN_FRAMES);
		an_pysite(f, p->hsite[i].stack, 0, &p->hsite[i].py);
	}
	sort_n(p->hsite, (size_t)p->nhsite, sizeof p->hsite[0], cmp_site);
}
