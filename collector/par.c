/* The report's independent pieces of work (a file to read, a rank to split) on several threads
 * (`ddpspy report -j N`). Each piece writes only what is its own; whatever several pieces add to
 * is gathered after them in a fixed order, so that the report is the same byte for byte whatever
 * N is. Also the progress line a long report shows on a terminal. */
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "analysis_int.h"

int an_jobs_default(void)
{
	cpu_set_t s;
	if (sched_getaffinity(0, sizeof s, &s) == 0 && CPU_COUNT(&s) > 0)
		return CPU_COUNT(&s);
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	return n > 0 ? (int)n : 1;
}

struct pool {
	atomic_size_t next;
	size_t n;
	const size_t *order;
	void (*fn)(void *ctx, size_t i);
	void *ctx;
};

static void *worker(void *arg)
{
	struct pool *p = arg;
	for (;;) {
		size_t i = atomic_fetch_add(&p->next, 1);
		if (i >= p->n)
			return NULL;
		p->fn(p->ctx, p->order ? p->order[i] : i);
	}
}

void an_parallel(size_t n, int jobs, const size_t *order, void (*fn)(void *ctx, size_t i), void *ctx)
{
	struct pool p = { .n = n, .order = order, .fn = fn, .ctx = ctx };
	atomic_init(&p.next, 0);
	size_t extra = jobs > 1 ? (size_t)jobs - 1 : 0;
	extra = extra < n ? extra : n ? n - 1 : 0;
	pthread_t *t = extra ? calloc(extra, sizeof *t) : NULL;
	size_t started = 0;
	while (t && started < extra && pthread_create(&t[started], NULL, worker, &p) == 0)
		started++;
	worker(&p); /* (this thread too; alone when no thread could be made) */
	for (size_t i = 0; i < started; i++)
		pthread_join(t[i], NULL);
	free(t);
}

/* ---- the progress line ---- */

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void an_progress_start(struct an_progress *g, const char *what, size_t items, uint64_t bytes)
{
	/* (seconds before the line shows: 1 unless the test-only knob says otherwise) */
	*g = (struct an_progress){ .what = what, .items = items, .bytes = bytes, .tty = isatty(2),
				   .after = an_knob(AN_KNOB_PROGRESS_S, 1) };
	g->t0 = now_s();
	g->last = g->t0 - 1;
	pthread_mutex_init(&g->mu, NULL);
}

/* One more item done, of so many bytes and events: the line is drawn once the phase has taken a
 * second, then at most every quarter of a second; the time left is the bytes left at the rate so
 * far. */
void an_progress_add(struct an_progress *g, uint64_t bytes, uint64_t events)
{
	pthread_mutex_lock(&g->mu);
	g->done++;
	g->done_bytes += bytes;
	g->events += events;
	double t = now_s(), took = t - g->t0;
	if (g->tty && took >= g->after && t - g->last > 0.25) {
		g->last = t;
		g->shown = 1;
		double left = g->done_bytes ? took * (double)(g->bytes - g->done_bytes) / (double)g->done_bytes : 0;
		fprintf(stderr, "\r\033[Kddpspy report: %s %zu of %zu, %.1fM events, %.1fM events/s, about %.0f s left",
			g->what, g->done, g->items, (double)g->events / 1e6, (double)g->events / 1e6 / fmax(took, 1e-3),
			left);
	}
	pthread_mutex_unlock(&g->mu);
}

void an_progress_end(struct an_progress *g)
{
	if (g->shown)
		fputs("\r\033[K", stderr);
	pthread_mutex_destroy(&g->mu);
}

/* ---- records as bytes, for another process (report --mpi) ---- */

void an_put(struct an_buf *b, const void *x, size_t n)
{
	if (b->err || !n)
		return;
	if (b->n + n > b->cap) {
		size_t cap = b->cap ? b->cap : 4096;
		while (cap < b->n + n)
			cap *= 2;
		char *p = realloc(b->p, cap);
		if (!p) {
			b->err = 1;
			return;
		}
		b->p = p;
		b->cap = cap;
	}
	memcpy(b->p + b->n, x, n);
	b->n += n;
}

void an_put_str(struct an_buf *b, const char *s)
{
	uint64_t n = s ? strlen(s) : UINT64_MAX;
	an_put(b, &n, sizeof n);
	if (s)
		an_put(b, s, (size_t)n);
}

int an_get(struct an_rd *r, void *x, size_t n)
{
	if (r->err || (size_t)(r->end - r->p) < n) {
		r->err = 1;
		memset(x, 0, n);
		return -1;
	}
	memcpy(x, r->p, n);
	r->p += n;
	return 0;
}

char *an_get_str(struct an_rd *r)
{
	uint64_t n;
	if (an_get(r, &n, sizeof n) < 0 || n == UINT64_MAX)
		return NULL;
	if (n > (uint64_t)(r->end - r->p)) {
		r->err = 1;
		return NULL;
	}
	char *s = malloc(n + 1);
	if (!s) {
		r->err = 1;
		return NULL;
	}
	memcpy(s, r->p, n);
	s[n] = 0;
	r->p += n;
	return s;
}

void *an_get_arr(struct an_rd *r, size_t n, size_t size, size_t room)
{
	if (r->err || (size && n > (size_t)(r->end - r->p) / size)) {
		r->err = 1;
		return NULL;
	}
	room = room > n ? room : n;
	if (!room)
		return NULL; /* (none, as the reading that made it would have it) */
	void *v = malloc(room * size + 1);
	if (!v) {
		r->err = 1;
		return NULL;
	}
	memcpy(v, r->p, n * size);
	r->p += n * size;
	return v;
}
