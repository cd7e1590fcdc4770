/* ddpspy watch's CPU contention over each interval, judged as the report judges a run (cpu.c's
 * figures, findings.c's an_cpu_severity): from each process's "sched" records (every thread's CPU
 * time and time runnable but waiting for a CPU, the host's CPU time in use; written at most every
 * 100 ms), the differences between the records read at the last line and those read now. The
 * report interpolates its samples at the analysed steps' ends; an interval of seconds holds tens
 * of samples, so watch takes them as they come. The ranks' files are read by watch.c; the input
 * workers' (DataLoader processes), whose threads the report counts as the job's, are followed
 * here for their sched records alone. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base.h"
#include "findings_int.h"
#include "watchcpu.h"

struct wproc *wcpu_proc(struct wcpu *c, const struct trace_file *f)
{
	struct wproc *p = calloc(1, sizeof *p), **m = p ? realloc(c->p, (size_t)(c->n + 1) * sizeof *m) : NULL;
	if (!m) {
		free(p);
		return NULL;
	}
	c->p = m;
	c->p[c->n++] = p;
	p->pid = f->pid;
	p->worker = !strcmp(f->role, "worker");
	p->parent = f->parent_pid > 0 ? f->parent_pid : f->ppid;
	snprintf(p->host, sizeof p->host, "%s", f->host);
	return p;
}

/* thread tid of p, NULL when it has no records */
static struct wthr *thread(const struct wproc *p, int tid)
{
	for (int i = 0; i < p->nthr; i++)
		if (p->thr[i].tid == tid)
			return &p->thr[i];
	return NULL;
}

void wcpu_sample(struct wproc *p, const struct trace_sched *s)
{
	if (!p)
		return;
	if (s->cpus > 0)
		p->cpus = s->cpus;
	if (s->host_cpus > 0)
		p->host_cpus = s->host_cpus;
	if (s->host_busy_ns >= 0 && s->t_ns != p->ht) { /* (the host's, once per record) */
		if (!p->ht0)
			p->ht0 = s->t_ns, p->hbusy0 = s->host_busy_ns;
		p->ht = s->t_ns;
		p->hbusy = s->host_busy_ns;
	}
	struct wthr *t = thread(p, s->tid);
	if (!t) {
		struct wthr *m = room_for(p->thr, (size_t)p->nthr, &p->cthr, sizeof *m, 16);
		if (!m)
			return;
		p->thr = m;
		/* (a thread first seen: its interval starts at its first record) */
		p->thr[p->nthr++] = (struct wthr){ s->tid, s->t_ns, (int64_t)s->run_ns, (int64_t)s->wait_ns,
						   s->t_ns, (int64_t)s->run_ns, (int64_t)s->wait_ns };
		return;
	}
	t->t = s->t_ns;
	t->run = (int64_t)s->run_ns;
	t->wait = (int64_t)s->wait_ns;
}

static int on_header(void *ctx, struct trace_file *f)
{
	(void)ctx, (void)f;
	return 0;
}

static int on_sched(void *ctx, struct trace_file *f, const struct trace_sched *s)
{
	(void)f;
	wcpu_sample(ctx, s);
	return 0;
}

int wcpu_worker(struct wcpu *c, const char *path, const struct trace_file *hdr)
{
	struct wworker *m = realloc(c->w, (size_t)(c->nw + 1) * sizeof *m);
	if (!m)
		return -1;
	c->w = m;
	struct wworker *k = &c->w[c->nw];
	*k = (struct wworker){ .path = strdup(path) };
	if (!k->path || !(k->p = wcpu_proc(c, hdr))) {
		free(k->path);
		return -1;
	}
	if (trace_open(&k->f, k->path) < 0) {
		trace_close(&k->f);
		k->f.path = NULL;
		k->ended = 1; /* (gone since: let go) */
	}
	c->nw++;
	return 0;
}

void wcpu_follow(struct wcpu *c)
{
	for (int i = 0; i < c->nw; i++) {
		struct wworker *k = &c->w[i];
		struct trace_visitor v = { .ctx = k->p, .on_header = on_header, .on_sched = on_sched };
		if (!k->f.path || k->ended)
			continue;
		trace_follow(&k->f, &v);
		k->ended = k->f.ended;
	}
}

/* rank k's severity over the interval, -1 when its training thread has no records in it */
static double rank_severity(const struct wcpu *c, const struct wcpu_rank *k)
{
	const struct wproc *rp = k->p;
	const struct wthr *t = thread(rp, k->tid);
	double len = t ? (double)(t->t - t->t0) : 0;
	if (len <= 0)
		return -1;
	double runq = (double)(t->wait - t->wait0) / len, job = (double)(t->run - t->run0) / len, jt = 0;
	/* bound to some of the host's CPUs: its own process's and workers' threads compete for them,
	 * the other ranks are bound elsewhere (cpu.c) */
	int process = rp->cpus > 0 && rp->host_cpus > 0 && rp->cpus < rp->host_cpus;
	for (int i = 0; i < c->n; i++) {
		const struct wproc *q = c->p[i];
		if (strcmp(q->host, rp->host))
			continue;
		int mine = q == rp || (q->worker && q->parent == rp->pid);
		for (int h = 0; h < q->nthr; h++) {
			const struct wthr *u = &q->thr[h];
			double d = (double)(u->t - u->t0);
			if (u == t || d <= 0)
				continue;
			job += (double)(u->run - u->run0) / d;
			if (!process || mine)
				jt += (double)(u->run - u->run0) / d;
		}
	}
	double outside = 0, hd = (double)(rp->ht - rp->ht0);
	if (hd > 0)
		outside = fmax(0, (double)(rp->hbusy - rp->hbusy0) / hd - job) *
			  (process ? (double)rp->cpus / rp->host_cpus : 1);
	return an_cpu_severity(fmin(1, runq), fmax(0, 1 - k->waiting), jt, outside);
}

/* now becomes the last line's; workers' files complete since are let go */
static void mark(struct wcpu *c)
{
	for (int i = 0; i < c->n; i++) {
		struct wproc *p = c->p[i];
		p->ht0 = p->ht, p->hbusy0 = p->hbusy;
		for (int h = 0; h < p->nthr; h++)
			p->thr[h].t0 = p->thr[h].t, p->thr[h].run0 = p->thr[h].run, p->thr[h].wait0 = p->thr[h].wait;
	}
	for (int i = 0; i < c->nw; i++) {
		struct wworker *k = &c->w[i];
		if (!k->ended)
			continue;
		for (int j = 0; j < c->n; j++)
			if (c->p[j] == k->p)
				c->p[j] = c->p[--c->n];
		if (k->f.path)
			trace_close(&k->f);
		free(k->p->thr);
		free(k->p);
		free(k->path);
		c->w[i--] = c->w[--c->nw];
	}
}

double wcpu_contention(struct wcpu *c, const struct wcpu_rank *rk, int n, int *worst, int *all)
{
	double *x = malloc(((size_t)n + 1) * sizeof *x), top = 0;
	int *at = malloc(((size_t)n + 1) * sizeof *at), m = 0;
	*worst = -1;
	*all = 0;
	for (int i = 0; x && at && i < n; i++) {
		double s = rank_severity(c, &rk[i]);
		if (s >= 0)
			at[m] = i, x[m++] = s;
	}
	if (m) {
		int w;
		top = an_cpu_top(x, (size_t)m, &w, all);
		*worst = at[w];
	}
	free(x);
	free(at);
	mark(c);
	return top;
}

void wcpu_free(struct wcpu *c)
{
	for (int i = 0; i < c->nw; i++) {
		if (c->w[i].f.path)
			trace_close(&c->w[i].f);
		free(c->w[i].path);
	}
	for (int i = 0; i < c->n; i++) {
		free(c->p[i]->thr);
		free(c->p[i]);
	}
	free(c->w);
	free(c->p);
}
