/* The analysis behind `ddpspy report` (see analysis.h): load, align clocks, find steps, split
 * them, measure waits for late peers, and derive the verdict and the findings. */
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/format.h"
#include "analysis.h"
#include "trace.h"

const char *const cat_names[CAT_COUNT] = { "compute", "data", "comms", "host" };

#define MS(ns) ((double)(ns) / 1e6)

static void warn(struct analysis *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void warn(struct analysis *a, const char *fmt, ...)
{
	if (a->nwarnings == MAX_WARNINGS)
		return;
	char buf[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	a->warnings[a->nwarnings] = strdup(buf);
	if (a->warnings[a->nwarnings])
		a->nwarnings++;
}

/* ---- loading ---- */

static int category(const struct ev *e);
static int is_coll(int kind);
static int is_sync(int kind);
struct loadctx;
static void account(struct loadctx *c, const struct ev *e);

struct loadctx {
	struct analysis *a;
	struct proc *p;
	int keep;           /* this file's events are needed */
	uint32_t *path_hash; /* open addressing over p->paths, 0 empty, else index + 1 */
	size_t hash_cap;
	struct thr *last;   /* the thread of the previous event */
	int64_t lo, hi;     /* the span of the file's events */
};

static uint64_t hash_str(const char *s, size_t n)
{
	uint64_t h = 1469598103934665603ull;
	for (size_t i = 0; i < n; i++)
		h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
	return h;
}

static int intern_path(struct loadctx *c, const char *s, size_t n)
{
	struct proc *p = c->p;
	if ((size_t)p->npaths * 2 + 2 > c->hash_cap) {
		size_t cap = c->hash_cap ? c->hash_cap * 2 : 1024;
		uint32_t *h = calloc(cap, sizeof *h);
		if (!h)
			return -1;
		for (int i = 0; i < p->npaths; i++) {
			size_t k = hash_str(p->paths[i], strlen(p->paths[i])) & (cap - 1);
			while (h[k])
				k = (k + 1) & (cap - 1);
			h[k] = (uint32_t)i + 1;
		}
		free(c->path_hash);
		c->path_hash = h;
		c->hash_cap = cap;
	}
	size_t k = hash_str(s, n) & (c->hash_cap - 1);
	while (c->path_hash[k]) {
		const char *q = p->paths[c->path_hash[k] - 1];
		if (strlen(q) == n && memcmp(q, s, n) == 0)
			return (int)c->path_hash[k] - 1;
		k = (k + 1) & (c->hash_cap - 1);
	}
	if (p->npaths == p->cpaths) {
		int cap = p->cpaths ? p->cpaths * 2 : 64;
		char **np = realloc(p->paths, (size_t)cap * sizeof *np);
		if (!np)
			return -1;
		p->paths = np;
		p->cpaths = cap;
	}
	char *d = malloc(n + 1);
	if (!d)
		return -1;
	memcpy(d, s, n);
	d[n] = 0;
	p->paths[p->npaths] = d;
	c->path_hash[k] = (uint32_t)p->npaths + 1;
	return p->npaths++;
}

static void set_fd_path(struct proc *p, int fd, int path)
{
	if (fd < 0 || fd >= (1 << 20))
		return;
	if (fd >= p->nfd) {
		int n = p->nfd ? p->nfd : 64;
		while (n <= fd)
			n *= 2;
		int32_t *m = realloc(p->fd_path, (size_t)n * sizeof *m);
		if (!m)
			return;
		for (int i = p->nfd; i < n; i++)
			m[i] = -1;
		p->fd_path = m;
		p->nfd = n;
	}
	p->fd_path[fd] = path;
}

static int fd_path(const struct proc *p, int fd)
{
	return fd >= 0 && fd < p->nfd ? p->fd_path[fd] : -1;
}

static struct thr *thread_of(struct proc *p, int tid)
{
	for (int i = p->nthr - 1; i >= 0; i--)
		if (p->thr[i].tid == tid)
			return &p->thr[i];
	struct thr *t = realloc(p->thr, (size_t)(p->nthr + 1) * sizeof *t);
	if (!t)
		return NULL;
	p->thr = t;
	t = &p->thr[p->nthr++];
	memset(t, 0, sizeof *t);
	t->tid = tid;
	return t;
}

static int is_coll(int kind)
{
	return kind == DDPSPY_EV_MPI_COLL || kind == DDPSPY_EV_MPI_ICOLL || kind == DDPSPY_EV_MPI_WAIT ||
	       kind == DDPSPY_EV_GLOO_COLL;
}

static int on_header(void *ctx, struct trace_file *f)
{
	struct loadctx *c = ctx;
	struct proc *p = c->p;
	snprintf(p->host, sizeof p->host, "%s", f->host);
	p->pid = f->pid;
	p->ppid = f->ppid;
	p->rank = f->rank;
	p->world = f->world_size;
	p->parent_rank = f->parent_rank;
	p->parent_pid = f->parent_pid;
	p->role = !strcmp(f->role, "rank") ? DDPSPY_ROLE_RANK : !strcmp(f->role, "worker") ? DDPSPY_ROLE_WORKER :
		  !strcmp(f->role, "launcher") ? DDPSPY_ROLE_LAUNCHER : DDPSPY_ROLE_OTHER;
	c->keep = p->role == DDPSPY_ROLE_RANK || p->role == DDPSPY_ROLE_WORKER;
	p->bin0 = f->start_mono_ns; /* every event comes after the process started */
	if (f->ncalib)
		p->to_real = f->calib[0].real_ns - f->calib[0].mono_ns;
	else
		p->to_real = f->start_real_ns - f->start_mono_ns;
	return 0;
}

static int on_identity(void *ctx, struct trace_file *f)
{
	return on_header(ctx, f);
}

static int on_thread(void *ctx, struct trace_file *f, const struct trace_thread *th)
{
	struct loadctx *c = ctx;
	if (!c->keep)
		return 0;
	struct thr *t = thread_of(c->p, th->tid);
	if (t)
		snprintf(t->name, sizeof t->name, "%s", th->name);
	return 0;
}

static int on_event(void *ctx, struct trace_file *f, const struct trace_event *e)
{
	struct loadctx *c = ctx;
	if (!c->keep || e->kind == DDPSPY_EV_THREAD_START || e->kind == DDPSPY_EV_THREAD_EXIT)
		return 0;
	if (e->kind == DDPSPY_EV_THREAD_NAME) {
		struct thr *t = thread_of(c->p, (int)e->args[0] > 0 ? (int)e->args[0] : e->tid);
		if (t && e->str) {
			size_t n = e->slen < sizeof t->name - 1 ? e->slen : sizeof t->name - 1;
			memcpy(t->name, e->str, n);
			t->name[n] = 0;
		}
		return 0;
	}
	struct thr *t = c->last && c->last->tid == e->tid ? c->last : thread_of(c->p, e->tid);
	if (!t)
		return 1;
	c->last = t;
	struct ev ev, *v = &ev;
	memset(v, 0, sizeof *v);
	v->t = e->t_ns;
	v->d = e->dur_ns;
	v->kind = (int16_t)e->kind;
	v->bytes = -1;
	v->seq = -1;
	v->fd = -1;
	v->path = -1;
	v->op = -1;
	const int64_t *a = e->args;
	switch (e->kind) {
	case DDPSPY_EV_OPEN:
		v->fd = (int32_t)a[0];
		v->fdclass = (int8_t)a[2];
		if (e->str) {
			v->path = intern_path(c, e->str, e->slen);
			if (a[0] >= 0)
				set_fd_path(c->p, (int)a[0], v->path);
		}
		break;
	case DDPSPY_EV_READ:
	case DDPSPY_EV_PREAD:
	case DDPSPY_EV_READV:
		v->fd = (int32_t)a[0];
		v->fdclass = (int8_t)a[1];
		v->bytes = a[2];
		v->path = fd_path(c->p, v->fd);
		break;
	case DDPSPY_EV_STAT:
		if (e->str)
			v->path = intern_path(c, e->str, e->slen);
		break;
	case DDPSPY_EV_FSTAT:
	case DDPSPY_EV_CLOSE:
		v->fd = (int32_t)a[0];
		v->fdclass = (int8_t)a[1];
		v->path = fd_path(c->p, v->fd);
		break;
	case DDPSPY_EV_MPI_COLL:
	case DDPSPY_EV_MPI_ICOLL:
		v->op = (int8_t)a[0];
		v->comm = (int32_t)a[1];
		v->seq = (int32_t)a[2];
		v->bytes = a[3];
		break;
	case DDPSPY_EV_MPI_P2P:
		v->op = (int8_t)a[0];
		v->comm = (int32_t)a[1];
		v->bytes = a[4];
		break;
	case DDPSPY_EV_MPI_WAIT:
		v->op = (int8_t)a[0];
		break;
	case DDPSPY_EV_STEP:
		v->op = (int8_t)(a[0] != 0); /* 1: begin, 0: end */
		break;
	case DDPSPY_EV_GLOO_COLL:
		v->op = (int8_t)a[0];
		v->comm = -2; /* gloo's own sequence space */
		v->seq = (int32_t)a[1];
		v->bytes = a[2];
		break;
	}
	if (is_coll(e->kind))
		t->ncoll++;
	account(c, v);
	/* Keep what the step analysis reads: every event of a thread that makes collectives (the
	 * training thread is one of them; compact() drops the others' later) and of the main
	 * thread, and the collectives and markers of any thread. Input threads' reads are only
	 * counted (account), which is most of a trace. */
	if (!(is_sync(v->kind) || t->ncoll || t->tid == c->p->pid))
		return 0;
	if (t->n == t->cap) {
		size_t cap = t->cap ? t->cap * 2 : 256;
		struct ev *ne = realloc(t->ev, cap * sizeof *ne);
		if (!ne)
			return 1;
		t->ev = ne;
		t->cap = cap;
	}
	t->ev[t->n++] = *v;
	return 0;
}

static int is_sync(int kind)
{
	return is_coll(kind) || kind == DDPSPY_EV_STEP;
}

static int is_file_read(const struct ev *e)
{
	return (e->kind == DDPSPY_EV_READ || e->kind == DDPSPY_EV_PREAD || e->kind == DDPSPY_EV_READV) &&
	       e->fdclass == DDPSPY_FD_FILE;
}

static void add_dirstat(struct proc *p, const char *path, const struct ev *e)
{
	const char *sl = strrchr(path, '/');
	size_t l = sl ? (size_t)(sl - path) : strlen(path);
	int j = 0;
	while (j < p->ndstat && !(strlen(p->dstat[j].dir) == l && !memcmp(p->dstat[j].dir, path, l)))
		j++;
	if (j == p->ndstat) {
		if (p->ndstat == 256) /* a few hundred directories: enough for the top three */
			return;
		struct dirstat *n = realloc(p->dstat, (size_t)(p->ndstat + 1) * sizeof *n);
		char *d = malloc(l + 1);
		if (!n || !d) {
			free(d);
			if (n)
				p->dstat = n;
			return;
		}
		p->dstat = n;
		memcpy(d, path, l);
		d[l] = 0;
		p->dstat[j] = (struct dirstat){ d, 0, 0 };
		p->ndstat++;
	}
	p->dstat[j].calls++;
	p->dstat[j].ms += MS(e->d);
}

static int pick_train(const struct proc *p)
{
	size_t best = 0;
	int train = -1;
	for (int k = 0; k < p->nthr; k++)
		if (p->thr[k].ncoll > best) {
			best = p->thr[k].ncoll;
			train = k;
		}
	for (int k = 0; train < 0 && k < p->nthr; k++) /* no collectives: the main thread */
		if (p->thr[k].tid == p->pid)
			train = k;
	return train;
}

/* Input evidence, counted for every event as it is read: file-read bytes per BIN_NS, and calls
 * and time per directory. */
static void account(struct loadctx *c, const struct ev *e)
{
	struct proc *p = c->p;
	if (e->t < c->lo)
		c->lo = e->t;
	if (e->t + e->d > c->hi)
		c->hi = e->t + e->d;
	if (e->path >= 0 && e->path < p->npaths && category(e) == CAT_DATA)
		add_dirstat(p, p->paths[e->path], e);
	if (!is_file_read(e) || e->bytes <= 0)
		return;
	int64_t b = (e->t - p->bin0) / BIN_NS;
	if (b < 0)
		b = 0;
	if ((size_t)b >= p->nbins) {
		size_t n = p->nbins ? p->nbins : 64;
		while (n <= (size_t)b)
			n *= 2;
		double *nb = realloc(p->rbins, n * sizeof *nb);
		if (!nb)
			return;
		memset(nb + p->nbins, 0, (n - p->nbins) * sizeof *nb);
		p->rbins = nb;
		p->nbins = n;
	}
	p->rbins[b] += (double)e->bytes;
}

/* After a file is read: only the training thread keeps all its events; other threads keep their
 * collectives and markers. */
static void compact(struct loadctx *c)
{
	struct proc *p = c->p;
	p->span = c->hi > c->lo ? c->hi - c->lo : 0;
	int train = p->role == DDPSPY_ROLE_RANK ? pick_train(p) : -1;
	for (int h = 0; h < p->nthr; h++) {
		struct thr *t = &p->thr[h];
		if (h == train)
			continue;
		size_t keep = 0;
		for (size_t k = 0; k < t->n; k++)
			if (is_sync(t->ev[k].kind))
				t->ev[keep++] = t->ev[k];
		t->n = keep;
		if (keep < t->cap / 2) {
			struct ev *n = realloc(t->ev, (keep ? keep : 1) * sizeof *n);
			if (n) {
				t->ev = n;
				t->cap = keep ? keep : 1;
			}
		}
	}
}

/* file-read bytes of p between aligned times t0 and t1 (whole bins) */
static double read_bytes(const struct proc *p, int64_t t0, int64_t t1)
{
	double s = 0;
	if (!p->rbins)
		return 0;
	int64_t a = (t0 - p->shift - p->bin0) / BIN_NS, b = (t1 - p->shift - p->bin0) / BIN_NS;
	for (int64_t i = a < 0 ? 0 : a; i <= b && i < (int64_t)p->nbins; i++)
		s += p->rbins[i];
	return s;
}

static int load_file(struct analysis *a, const char *path)
{
	struct trace_file f;
	struct proc *np = realloc(a->procs, (size_t)(a->nprocs + 1) * sizeof *np);
	if (!np)
		return -1;
	a->procs = np;
	struct proc *p = &a->procs[a->nprocs];
	memset(p, 0, sizeof *p);
	p->file = strdup(path);
	p->rank = -1;
	p->train = -1;
	p->role = DDPSPY_ROLE_OTHER;
	struct loadctx c = { .a = a, .p = p, .lo = INT64_MAX, .hi = INT64_MIN };
	struct trace_visitor v = { .ctx = &c, .on_header = on_header, .on_identity = on_identity,
				   .on_thread = on_thread, .on_event = on_event };
	int rc = trace_open(&f, path);
	if (rc == 0)
		rc = trace_read(&f, &v);
	if (rc < 0 || !f.have_header) {
		warn(a, "%s: unreadable (%s); left out", path, f.error[0] ? f.error : "no header");
		trace_close(&f);
		free(c.path_hash);
		free(p->file);
		for (int i = 0; i < p->nthr; i++)
			free(p->thr[i].ev);
		free(p->thr);
		for (int i = 0; i < p->npaths; i++)
			free(p->paths[i]);
		free(p->paths);
		free(p->fd_path);
		return 0;
	}
	p->events = f.events;
	p->dropped = f.dropped;
	p->ended = f.ended;
	if (rc == 2) {
		p->damaged = 1;
		snprintf(p->error, sizeof p->error, "%s at byte %zu", f.error, f.stop_offset);
		warn(a, "%s: damaged (%s); analysed up to there", path, p->error);
	} else if (rc == 1) {
		p->damaged = 1;
		snprintf(p->error, sizeof p->error, "out of memory while reading");
		warn(a, "%s: out of memory while reading; analysed what was read", path);
	}
	if (!f.ended && !p->damaged && p->role == DDPSPY_ROLE_RANK)
		warn(a, "%s: not closed by its process (killed?); events after its last flush are missing", path);
	/* the thread table also counts events per thread; sum what the file says was recorded */
	uint64_t sum = 0, dropped = 0;
	for (size_t i = 0; i < f.nthreads; i++) {
		sum += f.threads[i].events;
		dropped += f.threads[i].dropped;
	}
	if (!p->events)
		p->events = sum;
	if (dropped > p->dropped)
		p->dropped = dropped;
	trace_close(&f);
	free(c.path_hash);
	compact(&c);
	a->nprocs++;
	return 0;
}

/* ---- small helpers ---- */

static int cmp_dbl(const void *x, const void *y)
{
	double a = *(const double *)x, b = *(const double *)y;
	return (a > b) - (a < b);
}

static double quantile(double *v, size_t n, double q)
{
	if (!n)
		return 0;
	qsort(v, n, sizeof *v, cmp_dbl);
	double pos = q * (double)(n - 1);
	size_t i = (size_t)pos;
	return i + 1 < n ? v[i] + (pos - (double)i) * (v[i + 1] - v[i]) : v[i];
}

static int cmp_i64(const void *x, const void *y)
{
	int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
	return (a > b) - (a < b);
}

static int symmetric(int op)
{
	return op == DDPSPY_OP_ALLREDUCE || op == DDPSPY_OP_BARRIER || op == DDPSPY_OP_ALLGATHER ||
	       op == DDPSPY_OP_ALLGATHERV || op == DDPSPY_OP_ALLTOALL || op == DDPSPY_OP_ALLTOALLV ||
	       op == DDPSPY_OP_REDUCE_SCATTER || op == DDPSPY_OP_REDUCE_SCATTER_BLOCK;
}

/* the category of an event on the training thread */
static int category(const struct ev *e)
{
	switch (e->kind) {
	case DDPSPY_EV_MPI_COLL:
	case DDPSPY_EV_MPI_ICOLL:
	case DDPSPY_EV_MPI_P2P:
	case DDPSPY_EV_MPI_WAIT:
	case DDPSPY_EV_GLOO_COLL:
		return CAT_COMMS;
	case DDPSPY_EV_OPEN:
	case DDPSPY_EV_STAT:
	case DDPSPY_EV_FSTAT:
	case DDPSPY_EV_CLOSE:
	case DDPSPY_EV_POLL:
	case DDPSPY_EV_SELECT:
	case DDPSPY_EV_EPOLL_WAIT:
		return CAT_DATA;
	case DDPSPY_EV_READ:
	case DDPSPY_EV_PREAD:
	case DDPSPY_EV_READV:
		/* files, and the pipes and sockets input workers answer on; not devices or eventfds */
		return e->fdclass == DDPSPY_FD_DEVICE || e->fdclass == DDPSPY_FD_ANON ? CAT_HOST : CAT_DATA;
	case DDPSPY_EV_MPI_INIT:
	case DDPSPY_EV_MPI_FINALIZE:
		return CAT_COMMS;
	default:
		return CAT_HOST; /* sleeps, locks, condition variables, barriers, semaphores */
	}
}

/* ---- collective instances: (comm, seq) -> arrivals over all ranks ---- */

struct inst {
	int64_t key;          /* comm << 32 | seq; 0 free (seq 0 of comm 0 is stored as key -1) */
	int64_t min_arr, max_arr;
	int late;             /* the rank that arrived last */
	int n, op;
	int64_t bytes;
	double wait_sum;      /* ms all ranks waited for the last arrival */
	int prev_cat;         /* on the late rank: what it did right before arriving */
	int64_t prev_gap;     /* ns between that and its arrival */
};

struct itab {
	struct inst *v;
	size_t cap, n;
};

static int64_t inst_key(int comm, int seq)
{
	int64_t k = ((int64_t)(uint32_t)comm << 32) | (uint32_t)seq;
	return k ? k : -1;
}

static struct inst *inst_get(struct itab *t, int comm, int seq, int create)
{
	if (create && (t->n + 1) * 2 > t->cap) {
		size_t cap = t->cap ? t->cap * 2 : 4096;
		struct inst *v = calloc(cap, sizeof *v);
		if (!v)
			return NULL;
		for (size_t i = 0; i < t->cap; i++) {
			if (!t->v[i].key)
				continue;
			size_t k = (uint64_t)t->v[i].key * 0x9e3779b97f4a7c15ull >> 20 & (cap - 1);
			while (v[k].key)
				k = (k + 1) & (cap - 1);
			v[k] = t->v[i];
		}
		free(t->v);
		t->v = v;
		t->cap = cap;
	}
	if (!t->cap)
		return NULL;
	int64_t key = inst_key(comm, seq);
	size_t k = (uint64_t)key * 0x9e3779b97f4a7c15ull >> 20 & (t->cap - 1);
	while (t->v[k].key) {
		if (t->v[k].key == key)
			return &t->v[k];
		k = (k + 1) & (t->cap - 1);
	}
	if (!create)
		return NULL;
	struct inst *i = &t->v[k];
	i->key = key;
	i->min_arr = INT64_MAX;
	i->max_arr = INT64_MIN;
	i->late = -1;
	i->prev_cat = -1;
	t->n++;
	return i;
}

static struct thr *train_thread(struct proc *p)
{
	return p->train >= 0 ? &p->thr[p->train] : NULL;
}

/* ---- clocks ---- */

static void shift_proc(struct proc *p, int64_t by)
{
	p->shift += by;
	for (int i = 0; i < p->nthr; i++)
		for (size_t k = 0; k < p->thr[i].n; k++)
			p->thr[i].ev[k].t += by;
}

/* Realtime anchors first; then each rank's offset from the exits of symmetric blocking
 * collectives, which all ranks leave within microseconds of each other. */
static void align_clocks(struct analysis *a)
{
	for (int i = 0; i < a->nprocs; i++)
		shift_proc(&a->procs[i], a->procs[i].to_real);
	a->clock_method = "realtime";
	a->clock_residual_us = 0;
	if (a->nranks < 2)
		return;
	struct itab exits = { 0 };
	/* reference: the lowest rank's exits, keyed by instance */
	struct thr *ref = train_thread(a->ranks[0].p);
	if (!ref)
		return;
	for (size_t k = 0; k < ref->n; k++) {
		struct ev *e = &ref->ev[k];
		if ((e->kind == DDPSPY_EV_MPI_COLL && symmetric(e->op)) || e->kind == DDPSPY_EV_GLOO_COLL) {
			struct inst *in = inst_get(&exits, e->comm, e->seq, 1);
			if (in)
				in->max_arr = e->t + e->d;
		}
	}
	double worst = 0;
	int refined = 0;
	for (int r = 1; r < a->nranks; r++) {
		struct proc *p = a->ranks[r].p;
		struct thr *t = train_thread(p);
		if (!t)
			continue;
		size_t n = 0;
		int64_t *d = malloc((t->ncoll + 1) * sizeof *d);
		if (!d)
			continue;
		for (size_t k = 0; k < t->n && n <= t->ncoll; k++) {
			struct ev *e = &t->ev[k];
			if (!((e->kind == DDPSPY_EV_MPI_COLL && symmetric(e->op)) || e->kind == DDPSPY_EV_GLOO_COLL))
				continue;
			struct inst *in = inst_get(&exits, e->comm, e->seq, 0);
			if (in)
				d[n++] = e->t + e->d - in->max_arr;
		}
		if (n >= 3) {
			qsort(d, n, sizeof *d, cmp_i64);
			int64_t off = d[n / 2];
			shift_proc(p, -off);
			p->offset = -off;
			/* residual: the median distance of the exits from the reference after the shift */
			for (size_t k = 0; k < n; k++)
				d[k] = llabs(d[k] - off);
			qsort(d, n, sizeof *d, cmp_i64);
			worst = fmax(worst, (double)d[n / 2] / 1e3);
			refined++;
		}
		free(d);
	}
	free(exits.v);
	if (refined) {
		a->clock_method = "collective-exit";
		a->clock_residual_us = worst;
		/* workers share their rank's host clock */
		for (int i = 0; i < a->nprocs; i++) {
			struct proc *w = &a->procs[i];
			if (w->role != DDPSPY_ROLE_WORKER)
				continue;
			for (int r = 0; r < a->nranks; r++)
				if (a->ranks[r].p->pid == w->parent_pid && !strcmp(a->ranks[r].p->host, w->host))
					shift_proc(w, a->ranks[r].p->offset);
		}
	} else if (a->nhosts > 1) {
		warn(a, "fewer than 3 blocking collectives to align clocks with: ranks on different hosts "
			"are aligned by their CLOCK_REALTIME only");
	}
}

/* ---- steps ---- */

struct sync { /* the synchronizing calls of a training thread: collectives and their waits */
	struct ev **e;
	size_t n;
};

static void sync_list(struct thr *t, struct sync *s)
{
	s->e = malloc((t->ncoll + 1) * sizeof *s->e);
	s->n = 0;
	if (!s->e)
		return;
	for (size_t k = 0; k < t->n; k++) {
		struct ev *e = &t->ev[k];
		if (e->kind == DDPSPY_EV_MPI_COLL || e->kind == DDPSPY_EV_MPI_ICOLL || e->kind == DDPSPY_EV_GLOO_COLL ||
		    (e->kind == DDPSPY_EV_MPI_WAIT && (e->op == DDPSPY_OP_WAIT || e->op == DDPSPY_OP_WAITALL)))
			s->e[s->n++] = e;
	}
}

static int same_sig(const struct ev *x, const struct ev *y)
{
	return x->kind == y->kind && x->op == y->op && x->bytes == y->bytes;
}

/* Steps of one rank: boundaries b[0..nb) in aligned ns. From the reference rank's repeating
 * pattern of synchronizing calls, mapped to other ranks through collective sequence numbers. */
struct pattern {
	size_t period, first;   /* on the reference's sync list: the first step starts after e[first-1] */
	size_t nsteps;
	int key_comm, key_seq;  /* a seq-bearing call at or after the boundary ... */
	size_t key_delta;       /* ... this many sync calls after it */
};

static int find_pattern(struct sync *s, struct pattern *pt)
{
	size_t n = s->n, P = 0;
	for (size_t p = 1; p <= n / 3 && !P; p++) {
		size_t same = 0;
		for (size_t i = 0; i + p < n; i++)
			same += same_sig(s->e[i], s->e[i + p]);
		/* start-up and tear-down calls (a first check, a final gather) break a few matches */
		if ((double)(n - p - same) <= 0.2 * (double)(n - p) + 2.0 * (double)p && n / p >= 3)
			P = p;
	}
	if (!P)
		return -1;
	/* phase: where the gap before a call is longest (data loading and forward come first) */
	size_t best = 0;
	double best_gap = -1;
	for (size_t b = 0; b < P; b++) {
		size_t m = 0;
		double *g = malloc((n / P + 1) * sizeof *g);
		if (!g)
			return -1;
		for (size_t i = b; i < n; i += P)
			if (i > 0)
				g[m++] = (double)(s->e[i]->t - (s->e[i - 1]->t + s->e[i - 1]->d));
		double med = quantile(g, m, 0.5);
		free(g);
		if (m && med > best_gap) {
			best_gap = med;
			best = b;
		}
	}
	/* the longest run of whole periods matching the middle period's signature */
	size_t mid = best + (n / P / 2) * P;
	if (mid + P > n)
		mid = best;
	size_t first = SIZE_MAX, count = 0, run_first = 0, run = 0;
	for (size_t i = best ? best : P; i + P <= n; i += P) {
		int match = 1;
		for (size_t j = 0; j < P && match; j++)
			match = same_sig(s->e[i + j], s->e[mid + j]);
		if (match) {
			if (!run)
				run_first = i;
			run++;
			if (run > count) {
				count = run;
				first = run_first;
			}
		} else {
			run = 0;
		}
	}
	if (first == SIZE_MAX || first == 0 || count < 1)
		return -1;
	pt->period = P;
	pt->first = first;
	pt->nsteps = count;
	for (size_t j = 0; j < P; j++)
		if (s->e[first + j]->seq >= 0) {
			pt->key_comm = s->e[first + j]->comm;
			pt->key_seq = s->e[first + j]->seq;
			pt->key_delta = j;
			return 0;
		}
	return -1; /* no sequence number to map steps across ranks with */
}

/* boundaries of rank's steps; returns the number of boundaries (steps + 1), 0 when not found */
static size_t rank_bounds(struct sync *s, const struct pattern *pt, int64_t *b)
{
	size_t at = SIZE_MAX;
	for (size_t i = 0; i < s->n; i++)
		if (s->e[i]->seq == pt->key_seq && s->e[i]->comm == pt->key_comm) {
			at = i;
			break;
		}
	if (at == SIZE_MAX || at < pt->key_delta + 1)
		return 0;
	size_t first = at - pt->key_delta, nb = 0;
	for (size_t k = 0; k <= pt->nsteps; k++) {
		size_t i = first + k * pt->period;
		if (i > s->n)
			break;
		b[nb++] = s->e[i - 1]->t + s->e[i - 1]->d;
	}
	return nb;
}

/* ---- per-step split, waits and lateness ---- */

struct wait_ctx {
	struct itab *tab;
	int rank;
	int64_t pend_seq[64];
	int pend_comm[64];
	int npend;
};

/* how long e waited for the last peer, and which instance released it */
static double wait_of(struct wait_ctx *w, const struct ev *e, struct inst **rel)
{
	*rel = NULL;
	int64_t release = INT64_MIN;
	if (e->kind == DDPSPY_EV_MPI_COLL || e->kind == DDPSPY_EV_GLOO_COLL) {
		struct inst *in = inst_get(w->tab, e->comm, e->seq, 0);
		if (in && in->n > 1) {
			release = in->max_arr;
			*rel = in;
		}
	} else if (e->kind == DDPSPY_EV_MPI_WAIT && (e->op == DDPSPY_OP_WAIT || e->op == DDPSPY_OP_WAITALL)) {
		for (int i = 0; i < w->npend; i++) {
			struct inst *in = inst_get(w->tab, w->pend_comm[i], (int)w->pend_seq[i], 0);
			if (in && in->n > 1 && in->max_arr > release) {
				release = in->max_arr;
				*rel = in;
			}
		}
		w->npend = 0;
	} else if (e->kind == DDPSPY_EV_MPI_ICOLL) {
		if (w->npend < 64) {
			w->pend_comm[w->npend] = e->comm;
			w->pend_seq[w->npend++] = e->seq;
		}
	}
	if (!*rel)
		return 0;
	int64_t wt = release - e->t;
	return wt <= 0 ? 0 : MS(wt < e->d ? wt : e->d);
}

/* ---- the analysis ---- */

static int cmp_rank(const void *x, const void *y)
{
	const struct rankinfo *a = x, *b = y;
	return (a->rank > b->rank) - (a->rank < b->rank);
}

static int wanted(const struct report_options *o, int rank)
{
	if (!o->ranks)
		return 1;
	for (int i = 0; i < o->nranks; i++)
		if (o->ranks[i] == rank)
			return 1;
	return 0;
}

static void pick_training_threads(struct analysis *a)
{
	for (int i = 0; i < a->nprocs; i++)
		a->procs[i].train = pick_train(&a->procs[i]);
}

/* ---- steps: boundaries, raw splits, waits, critical path ---- */

struct stepdata {   /* scratch shared by analyse_steps and the findings */
	int R;
	size_t K;
	double *wfrom;  /* [(r * K + k) * R + L]: ms rank r waited for late rank L in step k */
	double *exc;    /* [(k * R + L) * CAT_COUNT + c]: L's excess over the median of its peers */
	struct itab tab;
	double **late;  /* per rank: lateness of each collective it entered (ms) */
	size_t *nlate;
};

static struct stepdata SD;

struct rv {
	double v;
	int r;
};

static int cmp_rv(const void *x, const void *y)
{
	double a = ((const struct rv *)x)->v, b = ((const struct rv *)y)->v;
	return (a > b) - (a < b);
}

/* For step k and category c, every rank's excess over the median of the other ranks: one sort,
 * then each rank's "others" are the sorted values without its own. */
static void excesses(struct analysis *a, size_t k, int c, struct rv *v, double *out)
{
	int R = a->nranks;
	for (int r = 0; r < R; r++) {
		v[r].v = a->ranks[r].steps ? a->ranks[r].steps[k].cat[c] : 0;
		v[r].r = r;
	}
	qsort(v, (size_t)R, sizeof *v, cmp_rv);
	for (int pos = 0; pos < R; pos++) {
		/* median of the R-1 others: positions lo and hi of the reduced array */
		int m = R - 1, lo = (m - 1) / 2, hi = m / 2;
		double a0 = v[lo < pos ? lo : lo + 1].v, a1 = v[hi < pos ? hi : hi + 1].v;
		double med = (a0 + a1) / 2;
		out[v[pos].r] = fmax(0, v[pos].v - med);
	}
}

static void windows(struct analysis *a, int64_t **b, size_t *nb, size_t K)
{
	int64_t lo = INT64_MIN, hi = INT64_MAX;
	for (int r = 0; r < a->nranks; r++) {
		struct thr *t = train_thread(a->ranks[r].p);
		if (!t || !t->n)
			continue;
		lo = t->ev[0].t > lo ? t->ev[0].t : lo;
		int64_t end = t->ev[t->n - 1].t + t->ev[t->n - 1].d;
		hi = end < hi ? end : hi;
	}
	for (int r = 0; r < a->nranks; r++) {
		nb[r] = 0;
		if (lo == INT64_MIN || hi <= lo)
			continue;
		for (size_t k = 0; k <= K; k++)
			b[r][nb[r]++] = lo + (int64_t)((double)(hi - lo) * (double)k / (double)K);
	}
}

static void add_span(struct rankstep *st, size_t nsteps, size_t *cur, int64_t t, int64_t d, int c)
{
	/* spread [t, t+d) over the steps it overlaps, from *cur on */
	while (*cur < nsteps && st[*cur].t1 <= t)
		(*cur)++;
	for (size_t k = *cur; k < nsteps && st[k].t0 < t + d; k++) {
		int64_t lo = t > st[k].t0 ? t : st[k].t0, hi = t + d < st[k].t1 ? t + d : st[k].t1;
		if (hi > lo)
			st[k].cat[c] += MS(hi - lo);
	}
}

static long step_of(const struct rankstep *st, size_t nsteps, int64_t t)
{
	size_t lo = 0, hi = nsteps;
	while (lo < hi) {
		size_t m = (lo + hi) / 2;
		if (st[m].t1 <= t)
			lo = m + 1;
		else
			hi = m;
	}
	return lo < nsteps && st[lo].t0 <= t ? (long)lo : -1;
}

/* Steps from ddpspy_step_begin()/end() markers: each step runs from its begin to the next begin,
 * the last one to its end. Returns 0 when every rank has at least one whole step. */
static int marker_bounds(struct analysis *a, int64_t **b, size_t *nb, size_t *K)
{
	for (int r = 0; r < a->nranks; r++) {
		struct proc *p = a->ranks[r].p;
		size_t n = 0, cap = 0;
		int64_t last_end = INT64_MIN;
		for (int h = 0; h < p->nthr; h++)
			for (size_t k = 0; k < p->thr[h].n; k++) {
				struct ev *e = &p->thr[h].ev[k];
				if (e->kind != DDPSPY_EV_STEP)
					continue;
				if (!e->op) {
					last_end = e->t > last_end ? e->t : last_end;
					continue;
				}
				if (n + 2 > cap) {
					cap = cap ? cap * 2 : 64;
					int64_t *nbp = realloc(b[r], cap * sizeof *nbp);
					if (!nbp)
						return -1;
					b[r] = nbp;
				}
				b[r][n++] = e->t;
			}
		if (!n)
			return -1;
		qsort(b[r], n, sizeof *b[r], cmp_i64);
		if (last_end > b[r][n - 1])
			b[r][n++] = last_end;
		nb[r] = n;
		if (n < 2)
			return -1;
		if (n - 1 < *K)
			*K = n - 1;
	}
	return 0;
}

static void analyse_steps(struct analysis *a)
{
	int R = a->nranks;
	struct sync *syn = calloc((size_t)R, sizeof *syn);
	int64_t **b = calloc((size_t)R, sizeof *b);
	size_t *nb = calloc((size_t)R, sizeof *nb);
	if (!syn || !b || !nb)
		goto out;
	/* every collective instance, from every thread of every rank */
	for (int r = 0; r < R; r++) {
		struct proc *p = a->ranks[r].p;
		for (int i = 0; i < p->nthr; i++)
			for (size_t k = 0; k < p->thr[i].n; k++) {
				struct ev *e = &p->thr[i].ev[k];
				if (e->seq < 0 || !(e->kind == DDPSPY_EV_MPI_COLL || e->kind == DDPSPY_EV_MPI_ICOLL ||
						    e->kind == DDPSPY_EV_GLOO_COLL))
					continue;
				struct inst *in = inst_get(&SD.tab, e->comm, e->seq, 1);
				if (!in)
					continue;
				in->n++;
				in->op = e->op;
				in->bytes = e->bytes;
				if (e->t < in->min_arr)
					in->min_arr = e->t;
				if (e->t > in->max_arr) {
					in->max_arr = e->t;
					in->late = r;
				}
			}
		struct thr *t = train_thread(p);
		if (t)
			sync_list(t, &syn[r]);
	}
	struct pattern pt;
	size_t K = SIZE_MAX;
	if (marker_bounds(a, b, nb, &K) == 0) {
		a->step_source = "markers";
	} else if (syn[0].n && find_pattern(&syn[0], &pt) == 0) {
		for (int r = 0; r < R; r++) {
			free(b[r]);
			b[r] = malloc((pt.nsteps + 1) * sizeof **b);
			nb[r] = b[r] ? rank_bounds(&syn[r], &pt, b[r]) : 0;
			K = nb[r] > 1 && nb[r] - 1 < K ? nb[r] - 1 : nb[r] > 1 ? K : 0;
		}
	}
	if (K != SIZE_MAX && K > 0) {
		if (strcmp(a->step_source, "markers"))
			a->step_source = "collectives";
	} else {
		K = 20;
		for (int r = 0; r < R; r++) {
			free(b[r]);
			b[r] = malloc((K + 1) * sizeof **b);
		}
		windows(a, b, nb, K);
		for (int r = 0; r < R; r++)
			if (nb[r] < 2)
				K = 0;
		a->step_source = K ? "windows" : "none";
		if (K)
			warn(a, "no repeating pattern of collectives: steps are %zu equal time windows", K);
	}
	a->steps_detected = (int)K;
	size_t skip = (size_t)a->skip;
	if (K && skip >= K) {
		warn(a, "only %zu step%s found; none skipped as warm-up", K, K == 1 ? "" : "s");
		skip = 0;
	}
	a->skip = (int)skip;
	size_t N = K - skip;
	a->nsteps = (int)N;
	if (!N)
		goto out;
	SD.R = R;
	SD.K = N;
	SD.wfrom = calloc((size_t)R * N * R, sizeof *SD.wfrom);
	SD.exc = calloc(N * R * CAT_COUNT, sizeof *SD.exc);
	SD.late = calloc((size_t)R, sizeof *SD.late);
	SD.nlate = calloc((size_t)R, sizeof *SD.nlate);
	if (!SD.wfrom || !SD.exc || !SD.late || !SD.nlate)
		goto out;
	int64_t first = INT64_MAX, last = INT64_MIN;
	for (int r = 0; r < R; r++) {
		struct rankinfo *ri = &a->ranks[r];
		ri->steps = calloc(N, sizeof *ri->steps);
		struct thr *t = train_thread(ri->p);
		if (!ri->steps || !t)
			continue;
		for (size_t k = 0; k < N; k++) {
			ri->steps[k].t0 = b[r][skip + k];
			ri->steps[k].t1 = b[r][skip + k + 1];
		}
		SD.late[r] = malloc((t->ncoll + 1) * sizeof **SD.late);
		struct wait_ctx w = { .tab = &SD.tab, .rank = r };
		size_t cur = 0;
		int prev_cat = CAT_COMPUTE;
		int64_t prev_end = INT64_MIN;
		for (size_t i = 0; i < t->n; i++) {
			struct ev *e = &t->ev[i];
			int c = category(e);
			add_span(ri->steps, N, &cur, e->t, e->d, c);
			struct inst *rel = NULL;
			double wt = is_coll(e->kind) ? wait_of(&w, e, &rel) : 0;
			long k = step_of(ri->steps, N, e->t);
			if (k >= 0 && rel && wt > 0) {
				ri->steps[k].wait += wt;
				rel->wait_sum += wt;
				if (rel->late >= 0 && rel->late != r)
					SD.wfrom[((size_t)r * N + (size_t)k) * R + rel->late] += wt;
			}
			if (e->seq >= 0 && (e->kind == DDPSPY_EV_MPI_COLL || e->kind == DDPSPY_EV_MPI_ICOLL ||
					    e->kind == DDPSPY_EV_GLOO_COLL)) {
				struct inst *in = inst_get(&SD.tab, e->comm, e->seq, 0);
				if (in && in->n > 1) {
					if (in->late == r) {
						in->prev_cat = prev_cat;
						in->prev_gap = e->t - prev_end;
					}
					if (k >= 0) {
						double late = MS(e->t - in->min_arr);
						ri->steps[k].late_max = fmax(ri->steps[k].late_max, late);
						if (SD.late[r])
							SD.late[r][SD.nlate[r]++] = late;
					}
				}
			}
			prev_cat = c;
			prev_end = e->t + e->d;
		}
		for (size_t k = 0; k < N; k++) {
			struct rankstep *st = &ri->steps[k];
			double len = MS(st->t1 - st->t0), busy = st->cat[CAT_DATA] + st->cat[CAT_COMMS] + st->cat[CAT_HOST];
			st->cat[CAT_COMPUTE] = len > busy ? len - busy : 0;
			if (st->wait > st->cat[CAT_COMMS])
				st->wait = st->cat[CAT_COMMS];
		}
		first = ri->steps[0].t0 < first ? ri->steps[0].t0 : first;
		last = ri->steps[N - 1].t1 > last ? ri->steps[N - 1].t1 : last;
	}
	/* the late ranks' excess, and the critical path: waits charged to what made the peer late */
	struct rv *rv = malloc((size_t)R * sizeof *rv);
	double *ex = malloc((size_t)R * sizeof *ex);
	for (size_t k = 0; rv && ex && R > 1 && k < N; k++)
		for (int c = 0; c < CAT_COUNT; c++) {
			if (c == CAT_COMMS)
				continue;
			excesses(a, k, c, rv, ex);
			for (int L = 0; L < R; L++)
				SD.exc[(k * R + L) * CAT_COUNT + c] = a->ranks[L].steps ? ex[L] : 0;
		}
	free(rv);
	free(ex);
	for (int r = 0; r < R; r++) {
		struct rankinfo *ri = &a->ranks[r];
		if (!ri->steps)
			continue;
		for (size_t k = 0; k < N; k++) {
			struct rankstep *st = &ri->steps[k];
			memcpy(st->crit, st->cat, sizeof st->crit);
			for (int L = 0; L < R; L++) {
				double w = SD.wfrom[((size_t)r * N + k) * R + L];
				const double *e = &SD.exc[(k * R + L) * CAT_COUNT];
				double sum = e[CAT_COMPUTE] + e[CAT_DATA] + e[CAT_HOST];
				if (w <= 0 || sum <= 0)
					continue;
				w = fmin(w, st->crit[CAT_COMMS]);
				st->crit[CAT_COMMS] -= w;
				for (int c = 0; c < CAT_COUNT; c++)
					if (c != CAT_COMMS)
						st->crit[c] += w * e[c] / sum;
			}
		}
	}
	/* per rank and job summaries */
	double *v = malloc(N * sizeof *v), tot[CAT_COUNT] = { 0 }, all = 0;
	double *job = calloc(N, sizeof *job);
	if (!v || !job) {
		free(v);
		free(job);
		goto out;
	}
	for (int r = 0; r < R; r++) {
		struct rankinfo *ri = &a->ranks[r];
		if (!ri->steps)
			continue;
		double sum = 0, cat[CAT_COUNT] = { 0 }, wait = 0;
		for (size_t k = 0; k < N; k++) {
			struct rankstep *st = &ri->steps[k];
			double len = MS(st->t1 - st->t0);
			v[k] = len;
			job[k] = fmax(job[k], len);
			sum += len;
			wait += st->wait;
			for (int c = 0; c < CAT_COUNT; c++) {
				cat[c] += st->cat[c];
				tot[c] += st->crit[c];
			}
			all += len;
		}
		ri->step_p50 = quantile(v, N, 0.5);
		ri->step_p95 = quantile(v, N, 0.95);
		for (int c = 0; c < CAT_COUNT; c++)
			ri->shares[c] = sum > 0 ? cat[c] / sum : 0;
		ri->wait_share = sum > 0 ? wait / sum : 0;
		ri->late_p50 = SD.late[r] ? quantile(SD.late[r], SD.nlate[r], 0.5) : 0;
		/* bytes per step over all of the rank's threads and its input workers */
		int64_t t0 = ri->steps[0].t0, t1 = ri->steps[N - 1].t1;
		double coll = 0, rd = 0;
		for (int i = 0; i < a->nprocs; i++) {
			struct proc *p = &a->procs[i];
			if (p != ri->p && !(p->role == DDPSPY_ROLE_WORKER && p->parent_pid == ri->p->pid))
				continue;
			rd += read_bytes(p, t0, t1);
			for (int h = 0; h < p->nthr; h++)
				for (size_t k = 0; k < p->thr[h].n; k++) {
					struct ev *e = &p->thr[h].ev[k];
					if (e->t < t0 || e->t >= t1 || e->bytes <= 0)
						continue;
					if (e->kind == DDPSPY_EV_MPI_COLL || e->kind == DDPSPY_EV_MPI_ICOLL ||
					    e->kind == DDPSPY_EV_GLOO_COLL)
						coll += (double)e->bytes;
				}
		}
		ri->coll_bytes = coll / (double)N;
		ri->read_bytes = rd / (double)N;
	}
	for (int c = 0; c < CAT_COUNT; c++)
		a->shares[c] = all > 0 ? tot[c] / all : 0;
	memcpy(v, job, N * sizeof *v);
	a->step_p50 = quantile(v, N, 0.5);
	a->step_p95 = quantile(v, N, 0.95);
	a->step_max = v[N - 1];
	(void)first;
	(void)last;
	free(v);
	free(job);
out:
	for (int r = 0; syn && r < R; r++)
		free(syn[r].e);
	for (int r = 0; b && r < R; r++)
		free(b[r]);
	free(syn);
	free(b);
	free(nb);
}

/* ---- findings ---- */

static struct finding *add_finding(struct analysis *a, const char *kind, int rank, double sev)
{
	if (a->nfindings == MAX_FINDINGS)
		return NULL;
	struct finding *f = &a->findings[a->nfindings++];
	memset(f, 0, sizeof *f);
	snprintf(f->kind, sizeof f->kind, "%s", kind);
	f->rank = rank;
	f->severity = sev < 0 ? 0 : sev > 1 ? 1 : sev;
	return f;
}

static void human_bytes(double b, char *buf, size_t n)
{
	if (b >= 1048576)
		snprintf(buf, n, "%.1f MiB", b / 1048576);
	else if (b >= 1024)
		snprintf(buf, n, "%.1f KiB", b / 1024);
	else
		snprintf(buf, n, "%.0f B", b);
}

/* s as the inside of a JSON string */
static const char *jesc(const char *s, char *buf, size_t n)
{
	size_t o = 0;
	for (; *s && o + 7 < n; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\') {
			buf[o++] = '\\';
			buf[o++] = (char)c;
		} else if (c < 0x20) {
			o += (size_t)snprintf(buf + o, n - o, "\\u%04x", c);
		} else {
			buf[o++] = (char)c;
		}
	}
	buf[o] = 0;
	return buf;
}

static const char *op_name(int op)
{
	const char *s = ddpspy_name(ddpspy_op_names, DDPSPY_OP_COUNT, op);
	return s ? s : "collective";
}

static double median_step(const struct analysis *a)
{
	return a->step_p50 > 0 ? a->step_p50 : 1;
}

/* stragglers and rank-0 serialization: one rank that the others wait for, step after step */
static void find_late_ranks(struct analysis *a)
{
	int R = a->nranks;
	size_t N = SD.K;
	if (R < 2 || !N)
		return;
	int *dom = calloc(N, sizeof *dom);
	double *g = malloc(N * sizeof *g), *w = malloc(N * sizeof *w);
	if (!dom || !g || !w)
		goto out;
	for (size_t k = 0; k < N; k++) {
		double best = 0;
		dom[k] = -1;
		for (int L = 0; L < R; L++) {
			double s = 0;
			for (int r = 0; r < R; r++)
				s += SD.wfrom[((size_t)r * N + k) * R + L];
			if (s > best) {
				best = s;
				dom[k] = L;
			}
		}
	}
	for (int L = 0; L < R; L++) {
		size_t cnt = 0;
		for (size_t k = 0; k < N; k++)
			cnt += dom[k] == L;
		/* a straggler is late nearly every step; work that varies makes a different rank late */
		if ((double)cnt < 0.7 * (double)N)
			continue;
		/* what fixing L wins: the least any other rank waited for it, per step */
		double exc[CAT_COUNT] = { 0 };
		for (size_t k = 0; k < N; k++) {
			double least = INFINITY, mean = 0;
			for (int r = 0; r < R; r++) {
				if (r == L)
					continue;
				double x = SD.wfrom[((size_t)r * N + k) * R + L];
				least = fmin(least, x);
				mean += x / (R - 1);
			}
			g[k] = least;
			w[k] = mean;
			for (int c = 0; c < CAT_COUNT; c++)
				exc[c] += SD.exc[(k * R + L) * CAT_COUNT + c] / (double)N;
		}
		double sev = quantile(g, N, 0.5) / median_step(a), wait = quantile(w, N, 0.5);
		if (sev < 0.02)
			continue;
		int cause = CAT_COMPUTE;
		for (int c = 0; c < CAT_COUNT; c++)
			if (c != CAT_COMMS && exc[c] > exc[cause])
				cause = c;
		/* host work right before the collective everyone waits at: rank-0 serialization */
		double host_before = 0, total = 0, by_op[DDPSPY_OP_COUNT] = { 0 };
		int op = -1;
		for (size_t i = 0; i < SD.tab.cap; i++) {
			struct inst *in = &SD.tab.v[i];
			if (!in->key || in->late != L || in->wait_sum <= 0)
				continue;
			total += in->wait_sum;
			if (in->prev_cat == CAT_HOST && in->prev_gap < 2000000)
				host_before += in->wait_sum;
			if (in->op >= 0 && in->op < DDPSPY_OP_COUNT)
				by_op[in->op] += in->wait_sum;
		}
		for (int o = 0; o < DDPSPY_OP_COUNT; o++) /* where the others wait the most, in all */
			if (by_op[o] > 0 && (op < 0 || by_op[o] > by_op[op]))
				op = o;
		int rank = a->ranks[L].rank;
		const char *cname = cat_names[cause];
		struct finding *f;
		if (total > 0 && host_before >= 0.5 * total) {
			f = add_finding(a, "rank0_serialization", rank, sev);
			if (!f)
				break;
			snprintf(f->title, sizeof f->title, "rank %d does %.1f ms of host work per step right before a %s "
				 "that every other rank waits at", rank, exc[CAT_HOST], op_name(op));
			f->advice[0] = "Move rank-only work (logging, metrics, checkpoint bookkeeping, evaluation setup) off "
				       "the step's critical path: run it asynchronously, every N steps, or on all ranks in parallel.";
			f->advice[1] = "Do not put a barrier or collective right after work only one rank does.";
		} else {
			f = add_finding(a, "straggler", rank, sev);
			if (!f)
				break;
			snprintf(f->title, sizeof f->title, "rank %d is late to collectives in %zu of %zu steps: the others "
				 "wait %.1f ms per step for its %s", rank, cnt, N, wait, cname);
			if (cause == CAT_DATA) {
				f->advice[0] = "Rank's input path is slower than its peers': check its storage and give its "
					       "DataLoader more workers (num_workers), prefetch_factor and pin_memory.";
			} else if (cause == CAT_HOST) {
				f->advice[0] = "Find what this rank does on the host that its peers do not (sleeps, logging, "
					       "garbage collection, preprocessing in the training loop) and move it off the step.";
			} else {
				f->advice[0] = "This rank computes longer than its peers: check for a throttled or shared "
					       "device, and for uneven work per rank (batch sizes, sequence lengths: balance "
					       "tokens, not samples).";
			}
			f->advice[1] = "Every other rank waits at the next collective for the slowest one: the job runs "
				       "at the pace of this rank.";
		}
		snprintf(f->evidence, sizeof f->evidence,
			 "\"cause\": \"%s\", \"steps_late\": %zu, \"steps\": %zu, \"late_ms_p50\": %.3f, "
			 "\"wait_ms_per_step\": %.3f, \"op\": \"%s\", \"excess_ms_per_step\": {\"compute\": %.3f, "
			 "\"data\": %.3f, \"host\": %.3f}", cname, cnt, N, a->ranks[L].late_p50, wait, op_name(op),
			 exc[CAT_COMPUTE], exc[CAT_DATA], exc[CAT_HOST]);
		snprintf(f->text, sizeof f->text, "late in %zu/%zu steps by %.1f ms (p50); others wait %.1f ms/step at "
			 "%s; its excess per step: compute %.1f ms, data %.1f ms, host %.1f ms", cnt, N,
			 a->ranks[L].late_p50, wait, op_name(op), exc[CAT_COMPUTE], exc[CAT_DATA], exc[CAT_HOST]);
	}
out:
	free(dom);
	free(g);
	free(w);
}

/* collective traffic itself: time in collectives not spent waiting for peers */
static void find_volume(struct analysis *a)
{
	size_t N = SD.K;
	double *x = malloc((size_t)a->nranks * sizeof *x);
	if (!x || !N) {
		free(x);
		return;
	}
	for (int r = 0; r < a->nranks; r++) {
		double s = 0, len = 0;
		for (size_t k = 0; a->ranks[r].steps && k < N; k++) {
			struct rankstep *st = &a->ranks[r].steps[k];
			s += st->cat[CAT_COMMS] - st->wait;
			len += MS(st->t1 - st->t0);
		}
		x[r] = len > 0 ? s / len : 0;
	}
	double sev = quantile(x, (size_t)a->nranks, 0.5);
	free(x);
	if (sev < 0.05)
		return;
	/* the biggest collectives on the lowest rank's training thread */
	struct rankinfo *ri = &a->ranks[0];
	struct thr *t = train_thread(ri->p);
	if (!t || !ri->steps)
		return;
	/* group the calls by op and size: the biggest is what to name */
	struct grp { int op; int64_t bytes; double calls, ms; } g[32];
	int ng = 0;
	double all = 0;
	int64_t t0 = ri->steps[0].t0, t1 = ri->steps[N - 1].t1;
	for (size_t i = 0; i < t->n; i++) {
		struct ev *e = &t->ev[i];
		if (e->t < t0 || e->t >= t1 || e->bytes < 0 ||
		    !(e->kind == DDPSPY_EV_MPI_COLL || e->kind == DDPSPY_EV_MPI_ICOLL || e->kind == DDPSPY_EV_GLOO_COLL))
			continue;
		all += (double)e->bytes;
		int j = 0;
		while (j < ng && !(g[j].op == e->op && g[j].bytes == e->bytes))
			j++;
		if (j == ng) {
			if (ng == 32)
				continue;
			g[ng++] = (struct grp){ e->op, e->bytes, 0, 0 };
		}
		g[j].calls++;
		g[j].ms += MS(e->d);
	}
	int top = 0;
	for (int j = 1; j < ng; j++)
		if (g[j].bytes * g[j].calls > g[top].bytes * g[top].calls)
			top = j;
	if (!ng)
		return;
	struct finding *f = add_finding(a, "collective_volume", -1, sev);
	if (!f)
		return;
	char hb[32], ha[32];
	double per = g[top].calls / (double)N, bps = (double)g[top].bytes * per;
	human_bytes((double)g[top].bytes, hb, sizeof hb);
	human_bytes(all / (double)N, ha, sizeof ha);
	double xfer_ms = sev * median_step(a);
	const char *op = op_name(g[top].op);
	if (per > 0.9 && per < 1.1)
		snprintf(f->title, sizeof f->title, "an %s of %s every step; collectives take %.0f%% of every rank's "
			 "step beyond waiting for peers", op, hb, 100 * sev);
	else
		snprintf(f->title, sizeof f->title, "%.1f %s calls of %s per step; collectives take %.0f%% of every "
			 "rank's step beyond waiting for peers", per, op, hb, 100 * sev);
	snprintf(f->evidence, sizeof f->evidence,
		 "\"op\": \"%s\", \"bytes\": %" PRId64 ", \"calls_per_step\": %.2f, \"bytes_per_step\": %.0f, "
		 "\"all_bytes_per_step\": %.0f, \"ms_per_step\": %.3f, \"op_ms_per_step\": %.3f, \"gbytes_per_s\": %.3f",
		 op, g[top].bytes, per, bps, all / (double)N, xfer_ms, g[top].ms / (double)N,
		 g[top].ms > 0 ? (double)g[top].bytes * g[top].calls / g[top].ms / 1e6 : 0);
	snprintf(f->text, sizeof f->text, "%.1f %s of %s per step, %.1f ms per step in them (%s per step in all "
		 "collectives, %.1f ms per step beyond waiting), %.2f GB/s", per, op, hb, g[top].ms / (double)N, ha,
		 xfer_ms, g[top].ms > 0 ? (double)g[top].bytes * g[top].calls / g[top].ms / 1e6 : 0);
	f->advice[0] = "Move fewer bytes per step: drop all-reduces that are not gradients (reduce metrics every N "
		       "steps), accumulate gradients over micro-batches before reducing, or reduce in bf16/fp16.";
	f->advice[1] = "Overlap what must be reduced with backward: DDP's bucket_cap_mb, or nonblocking collectives "
		       "started as gradients become ready.";
}

struct pat {
	int kind, fdclass;
	int64_t bytes;
	double calls, ms;
};

static void describe_pattern(const struct pat *p, double N, char *buf, size_t n)
{
	const char *k = ddpspy_name(ddpspy_event_names, DDPSPY_EV_COUNT, p->kind);
	const char *fc = ddpspy_name(ddpspy_fdclass_names, DDPSPY_FDCLASS_COUNT, p->fdclass);
	char hb[32];
	human_bytes((double)p->bytes, hb, sizeof hb);
	if ((p->kind == DDPSPY_EV_READ || p->kind == DDPSPY_EV_READV) &&
	    (p->fdclass == DDPSPY_FD_PIPE || p->fdclass == DDPSPY_FD_UNIX || p->fdclass == DDPSPY_FD_TCP))
		snprintf(buf, n, "waiting on a %s for input (%.0f read%s per step, %.1f ms): an input pipeline that "
			 "does not keep up", p->fdclass == DDPSPY_FD_PIPE ? "pipe" : "socket", p->calls / N,
			 p->calls / N >= 1.5 ? "s" : "", p->ms / N);
	else if (p->kind == DDPSPY_EV_READ || p->kind == DDPSPY_EV_PREAD || p->kind == DDPSPY_EV_READV)
		snprintf(buf, n, "%.0f %s calls of %s per step on %s descriptors (%.1f ms)", p->calls / N, k, hb,
			 fc ? fc : "?", p->ms / N);
	else
		snprintf(buf, n, "%.0f %s calls per step (%.1f ms)", p->calls / N, k, p->ms / N);
}

/* input: the training thread waits for files or for its input pipeline */
static void find_data(struct analysis *a)
{
	size_t N = SD.K;
	if (!N)
		return;
	int worst = 0;
	double lo = 1, hi = 0, *x = malloc((size_t)a->nranks * sizeof *x);
	if (!x)
		return;
	for (int r = 0; r < a->nranks; r++) {
		x[r] = a->ranks[r].shares[CAT_DATA];
		lo = fmin(lo, x[r]);
		if (x[r] > hi) {
			hi = x[r];
			worst = r;
		}
	}
	int all = a->nranks > 1 && lo >= 0.5 * hi;
	double sev = all ? quantile(x, (size_t)a->nranks, 0.5) : hi;
	free(x);
	if (sev < 0.05)
		return;
	struct rankinfo *ri = &a->ranks[worst];
	struct thr *t = train_thread(ri->p);
	if (!t || !ri->steps)
		return;
	struct pat pats[32];
	int np = 0;
	int64_t t0 = ri->steps[0].t0, t1 = ri->steps[N - 1].t1;
	for (size_t i = 0; i < t->n; i++) {
		struct ev *e = &t->ev[i];
		if (e->t < t0 || e->t >= t1 || category(e) != CAT_DATA)
			continue;
		/* file reads by size; waits on pipes and sockets are one pattern whatever they read */
		int64_t by = (e->kind == DDPSPY_EV_READ || e->kind == DDPSPY_EV_PREAD || e->kind == DDPSPY_EV_READV) &&
			     e->fdclass == DDPSPY_FD_FILE ? e->bytes : 0;
		int j = 0;
		while (j < np && !(pats[j].kind == e->kind && pats[j].fdclass == e->fdclass && pats[j].bytes == by))
			j++;
		if (j == np) {
			if (np == 32)
				continue;
			pats[np++] = (struct pat){ e->kind, e->fdclass, by, 0, 0 };
		}
		pats[j].calls++;
		pats[j].ms += MS(e->d);
	}
	/* top three by time */
	for (int i = 0; i < np; i++)
		for (int j = i + 1; j < np; j++)
			if (pats[j].ms > pats[i].ms) {
				struct pat tmp = pats[i];
				pats[i] = pats[j];
				pats[j] = tmp;
			}
	/* the files behind it, from every thread of the rank and its input workers: by directory,
	 * whole-run totals scaled to the analysed span */
	struct dirsum { char dir[256]; double ms, calls; } dirs[16];
	int nd = 0;
	for (int i = 0; i < a->nprocs; i++) {
		struct proc *p = &a->procs[i];
		if (p != ri->p && !(p->role == DDPSPY_ROLE_WORKER && p->parent_pid == ri->p->pid))
			continue;
		double frac = p->span > 0 ? fmin(1, (double)(t1 - t0) / (double)p->span) : 1;
		for (int k = 0; k < p->ndstat; k++) {
			const struct dirstat *ds = &p->dstat[k];
			int j = 0;
			while (j < nd && strcmp(dirs[j].dir, ds->dir))
				j++;
			if (j == nd) {
				if (nd == 16)
					continue;
				snprintf(dirs[nd].dir, sizeof dirs[nd].dir, "%s", ds->dir);
				dirs[nd].ms = dirs[nd].calls = 0;
				nd++;
			}
			dirs[j].ms += ds->ms * frac;
			dirs[j].calls += ds->calls * frac;
		}
	}
	for (int i = 0; i < nd; i++)
		for (int j = i + 1; j < nd; j++)
			if (dirs[j].ms > dirs[i].ms) {
				struct dirsum tmp = dirs[i];
				dirs[i] = dirs[j];
				dirs[j] = tmp;
			}
	struct finding *f = add_finding(a, "data_stall", all ? -1 : ri->rank, sev);
	if (!f)
		return;
	char top[300] = "no intercepted input call";
	if (np)
		describe_pattern(&pats[0], (double)N, top, sizeof top);
	double opens = 0, stats = 0, reads = 0;
	for (int i = 0; i < np; i++) {
		if (pats[i].kind == DDPSPY_EV_OPEN)
			opens += pats[i].calls;
		else if (pats[i].kind == DDPSPY_EV_STAT || pats[i].kind == DDPSPY_EV_FSTAT)
			stats += pats[i].calls;
		else if (pats[i].fdclass == DDPSPY_FD_FILE && (pats[i].kind == DDPSPY_EV_READ ||
			 pats[i].kind == DDPSPY_EV_PREAD || pats[i].kind == DDPSPY_EV_READV))
			reads += pats[i].calls;
	}
	if (opens >= 2 * (double)N && opens >= 0.8 * reads && opens <= 1.25 * reads)
		snprintf(top, sizeof top, "a file per sample: %.0f files opened%s and read per step", opens / (double)N,
			 stats >= 0.8 * opens ? ", stat'ed" : "");
	if (all)
		snprintf(f->title, sizeof f->title, "every rank waits for input %.0f%% of its step: %s", 100 * sev, top);
	else
		snprintf(f->title, sizeof f->title, "rank %d waits for input %.0f%% of its step: %s", ri->rank, 100 * sev, top);
	double dms = 0;
	for (size_t k = 0; k < N; k++)
		dms += ri->steps[k].cat[CAT_DATA] / (double)N;
	size_t off = (size_t)snprintf(f->evidence, sizeof f->evidence, "\"rank_shown\": %d, \"data_ms_per_step\": %.3f, "
				      "\"ops\": [", ri->rank, dms);
	size_t toff = (size_t)snprintf(f->text, sizeof f->text, "rank %d: %.1f ms of input wait per step", ri->rank, dms);
	for (int i = 0; i < np && i < 3 && off < sizeof f->evidence; i++) {
		char d[300];
		describe_pattern(&pats[i], (double)N, d, sizeof d);
		off += (size_t)snprintf(f->evidence + off, sizeof f->evidence - off,
					"%s{\"op\": \"%s\", \"fdclass\": \"%s\", \"bytes_per_call\": %" PRId64
					", \"calls_per_step\": %.1f, \"ms_per_step\": %.3f}", i ? ", " : "",
					ddpspy_name(ddpspy_event_names, DDPSPY_EV_COUNT, pats[i].kind),
					ddpspy_name(ddpspy_fdclass_names, DDPSPY_FDCLASS_COUNT, pats[i].fdclass),
					pats[i].bytes, pats[i].calls / (double)N, pats[i].ms / (double)N);
		if (toff < sizeof f->text)
			toff += (size_t)snprintf(f->text + toff, sizeof f->text - toff, "; %s", d);
	}
	if (off < sizeof f->evidence)
		off += (size_t)snprintf(f->evidence + off, sizeof f->evidence - off, "], \"files\": [");
	char esc[1600];
	for (int i = 0; i < nd && i < 3 && off < sizeof f->evidence; i++)
		off += (size_t)snprintf(f->evidence + off, sizeof f->evidence - off,
					"%s{\"dir\": \"%s\", \"calls_per_step\": %.1f, \"ms_per_step\": %.3f}", i ? ", " : "",
					jesc(dirs[i].dir, esc, sizeof esc), dirs[i].calls / (double)N, dirs[i].ms / (double)N);
	if (off < sizeof f->evidence)
		snprintf(f->evidence + off, sizeof f->evidence - off, "]");
	if (nd && toff < sizeof f->text)
		snprintf(f->text + toff, sizeof f->text - toff, "; files under %s (%.0f calls/step)", dirs[0].dir,
			 dirs[0].calls / (double)N);
	f->advice[0] = "Load input ahead of the step: more DataLoader workers (num_workers), a larger "
		       "prefetch_factor, persistent_workers, pin_memory.";
	f->advice[1] = "Read in large pieces: many small reads or a file (and a stat) per sample cost a syscall "
		       "each; pack samples into shards and read them whole.";
}

/* work that differs between ranks, with the slowest rank changing from step to step */
static void find_skew(struct analysis *a)
{
	size_t N = SD.K;
	int R = a->nranks;
	if (R < 2 || !N)
		return;
	int *cnt = calloc((size_t)R, sizeof *cnt), changes = 0, prev = -1;
	if (!cnt)
		return;
	double sev = 0, spread = 0;
	for (size_t k = 0; k < N; k++) {
		double mx = -1, mean = 0;
		int am = 0;
		for (int r = 0; r < R; r++) {
			double c = a->ranks[r].steps ? a->ranks[r].steps[k].cat[CAT_COMPUTE] : 0;
			mean += c / R;
			if (c > mx) {
				mx = c;
				am = r;
			}
		}
		double len = MS(a->ranks[0].steps[k].t1 - a->ranks[0].steps[k].t0);
		sev += len > 0 ? (mx - mean) / len / (double)N : 0;
		spread += (mx - mean) / (double)N;
		cnt[am]++;
		changes += prev >= 0 && am != prev;
		prev = am;
	}
	int most = 0;
	for (int r = 0; r < R; r++)
		most = cnt[r] > most ? cnt[r] : most;
	free(cnt);
	double share = (double)most / (double)N;
	/* noise on a shared machine makes one rank slower for a while; skew makes it change often */
	if (sev < 0.03 || share >= 0.6 || changes < 0.3 * (double)(N - 1))
		return;
	struct finding *f = add_finding(a, "work_skew", -1, sev);
	if (!f)
		return;
	snprintf(f->title, sizeof f->title, "compute per step differs between ranks by %.1f ms on average and the "
		 "slowest rank changes from step to step", spread);
	snprintf(f->evidence, sizeof f->evidence, "\"compute_spread_ms_per_step\": %.3f, \"slowest_rank_share\": %.3f, "
		 "\"slowest_rank_changes\": %d, \"steps\": %zu", spread, share, changes, N);
	snprintf(f->text, sizeof f->text, "the slowest rank computes %.1f ms more than the mean per step; no rank is "
		 "slowest in more than %.0f%% of steps; it changes %d times in %zu steps", spread, 100 * share, changes, N);
	f->advice[0] = "Balance work, not samples: bucket sequences by length or batch by token budget, so every "
		       "rank gets about the same number of (padded) tokens per step.";
	f->advice[1] = "Log tokens per rank per step (and the padding ratio) to confirm.";
}

/* gradient all-reduces after backward, back to back, none started during it */
static void find_overlap(struct analysis *a)
{
	size_t N = SD.K;
	struct rankinfo *ri = &a->ranks[0];
	struct thr *t = train_thread(ri->p);
	if (!N || !t || !ri->steps)
		return;
	int64_t t0 = ri->steps[0].t0, t1 = ri->steps[N - 1].t1;
	double nb = 0, bytes = 0, ms = 0, nic = 0;
	for (size_t i = 0; i < t->n; i++) {
		struct ev *e = &t->ev[i];
		if (e->t < t0 || e->t >= t1)
			continue;
		if (e->kind == DDPSPY_EV_MPI_ICOLL)
			nic++;
		if (e->kind == DDPSPY_EV_MPI_COLL && e->op == DDPSPY_OP_ALLREDUCE && e->bytes > 0 && i + 1 < t->n) {
			/* one of a run of all-reduces with next to nothing between them */
			struct ev *n = &t->ev[i + 1];
			struct ev *p = i ? &t->ev[i - 1] : NULL;
			int run = (n->kind == DDPSPY_EV_MPI_COLL && n->op == DDPSPY_OP_ALLREDUCE && n->t - (e->t + e->d) < 200000) ||
				  (p && p->kind == DDPSPY_EV_MPI_COLL && p->op == DDPSPY_OP_ALLREDUCE && e->t - (p->t + p->d) < 200000);
			if (run) {
				nb++;
				bytes += (double)e->bytes;
				ms += MS(e->d);
			}
		}
	}
	double wait = 0;
	for (size_t k = 0; k < N; k++)
		wait += ri->steps[k].wait;
	double sev = (ms - wait) / (double)N / median_step(a);
	if (nic > 0 || nb < 2 * (double)N || sev < 0.02)
		return;
	struct finding *f = add_finding(a, "no_overlap", -1, sev);
	if (!f)
		return;
	char hb[32];
	human_bytes(bytes / (double)N, hb, sizeof hb);
	snprintf(f->title, sizeof f->title, "%.0f gradient all-reduces per step (%s) run back to back after "
		 "backward, none overlapping it", nb / (double)N, hb);
	snprintf(f->evidence, sizeof f->evidence, "\"allreduces_per_step\": %.1f, \"bytes_per_step\": %.0f, "
		 "\"ms_per_step\": %.3f", nb / (double)N, bytes / (double)N, ms / (double)N);
	snprintf(f->text, sizeof f->text, "%.1f blocking all-reduces per step, %s, %.1f ms per step, no nonblocking "
		 "collective in the step", nb / (double)N, hb, ms / (double)N);
	f->advice[0] = "Start each gradient bucket's all-reduce as soon as backward has produced it (DDP does this "
		       "with bucket_cap_mb; hand-written loops can use nonblocking all-reduces).";
}

static void find_lost(struct analysis *a)
{
	for (int i = 0; i < a->nprocs; i++) {
		struct proc *p = &a->procs[i];
		if (p->role != DDPSPY_ROLE_RANK && p->role != DDPSPY_ROLE_WORKER)
			continue;
		if (!p->dropped && !p->damaged && p->ended)
			continue;
		double frac = p->events + p->dropped ? (double)p->dropped / (double)(p->events + p->dropped) : 0;
		int rank = p->role == DDPSPY_ROLE_RANK ? p->rank : p->parent_rank;
		struct finding *f = add_finding(a, "lost_events", rank >= 0 ? rank : -1, p->damaged ? fmax(frac, 0.01) : frac);
		if (!f)
			return;
		if (p->damaged)
			snprintf(f->title, sizeof f->title, "%s is damaged (%s): events after that point are missing",
				 p->file, p->error);
		else if (!p->ended)
			snprintf(f->title, sizeof f->title, "%s was not completed by its process: events after its last "
				 "flush are missing", p->file);
		else
			snprintf(f->title, sizeof f->title, "%" PRIu64 " events of pid %d were dropped (%.2f%%): its rings "
				 "were full", p->dropped, p->pid, 100 * frac);
		char esc[1024];
		snprintf(f->evidence, sizeof f->evidence, "\"file\": \"%s\", \"recorded\": %" PRIu64 ", \"dropped\": %"
			 PRIu64 ", \"complete\": %s", jesc(p->file, esc, sizeof esc), p->events, p->dropped, p->ended && !p->damaged ? "true" : "false");
		snprintf(f->text, sizeof f->text, "%" PRIu64 " recorded, %" PRIu64 " dropped%s", p->events, p->dropped,
			 p->damaged ? ", file damaged" : !p->ended ? ", file not completed" : "");
		f->advice[0] = "Dropped events: raise DDPSPY_RING_KB or lower DDPSPY_FLUSH_MS.";
		f->advice[1] = "A damaged or incomplete file: the process died before ddpspy could finish it (SIGKILL, "
			       "the OOM killer); the rest of the job is still analysed.";
	}
}

static int cmp_finding(const void *x, const void *y)
{
	const struct finding *a = x, *b = y;
	return (a->severity < b->severity) - (a->severity > b->severity);
}

static void find_all(struct analysis *a)
{
	find_lost(a);
	if (a->nsteps > 0) {
		find_late_ranks(a);
		find_volume(a);
		find_data(a);
		find_skew(a);
		find_overlap(a);
	}
	qsort(a->findings, (size_t)a->nfindings, sizeof *a->findings, cmp_finding);
	/* the verdict */
	if (!a->nsteps) {
		a->bound = "unknown";
		a->confidence = 0;
		snprintf(a->summary, sizeof a->summary, "unknown: no step could be analysed (%s)",
			 a->nwarnings ? a->warnings[0] : "no events on the training threads");
		return;
	}
	int top = 0, second = -1;
	for (int c = 1; c < CAT_COUNT; c++)
		if (a->shares[c] > a->shares[top])
			top = c;
	for (int c = 0; c < CAT_COUNT; c++)
		if (c != top && (second < 0 || a->shares[c] > a->shares[second]))
			second = c;
	a->bound = cat_names[top];
	double conf = 0.5 + (a->shares[top] - a->shares[second]);
	if (a->nsteps < 5)
		conf *= 0.6;
	if (a->events && (double)a->dropped / (double)(a->events + a->dropped) > 0.01)
		conf *= 0.7;
	a->confidence = conf > 1 ? 1 : conf;
	const struct finding *f = a->nfindings ? &a->findings[0] : NULL;
	if (f && !strcmp(f->kind, "lost_events") && a->nfindings > 1)
		f = &a->findings[1];
	if (f && f->severity >= 0.1)
		snprintf(a->summary, sizeof a->summary, "%s-bound (%.0f%% of the critical path): %s (severity %.2f)",
			 a->bound, 100 * a->shares[top], f->title, f->severity);
	else
		snprintf(a->summary, sizeof a->summary, "%s-bound: %.0f%% of the critical path is %s; no pathology costs "
			 "more than 10%% of the step", a->bound, 100 * a->shares[top], a->bound);
}

int analysis_run(struct analysis *a, char **dirs, int ndirs, const struct report_options *o,
	char *err, size_t errlen)
{
	memset(a, 0, sizeof *a);
	a->dirs = dirs;
	a->ndirs = ndirs;
	a->skip = o->skip;
	a->step_source = "none";
	a->bound = "unknown";
	a->clock_method = "none";
	int files = 0;
	for (int d = 0; d < ndirs; d++) {
		char **list;
		int n = trace_list(dirs[d], &list);
		if (n < 0) {
			warn(a, "%s: cannot be read", dirs[d]);
			continue;
		}
		if (n == 0)
			warn(a, "%s: no .ddpspy files", dirs[d]);
		for (int i = 0; i < n; i++) {
			load_file(a, list[i]);
			files++;
		}
		trace_free_list(list, n);
	}
	/* the ranks, one process each (the first file of a rank wins; duplicates are warned) */
	a->ranks = calloc((size_t)a->nprocs + 1, sizeof *a->ranks);
	if (!a->ranks)
		goto nothing;
	char hosts[64][256];
	int nh = 0;
	for (int i = 0; i < a->nprocs; i++) {
		struct proc *p = &a->procs[i];
		a->events += p->events;
		a->dropped += p->dropped;
		int seen = 0;
		for (int h = 0; h < nh; h++)
			seen |= !strcmp(hosts[h], p->host);
		if (!seen && nh < 64)
			snprintf(hosts[nh++], sizeof hosts[0], "%s", p->host);
		if (p->role != DDPSPY_ROLE_RANK || p->rank < 0 || !wanted(o, p->rank))
			continue;
		int dup = 0;
		for (int r = 0; r < a->nranks; r++)
			dup |= a->ranks[r].rank == p->rank;
		if (dup) {
			warn(a, "%s: a second file for rank %d; left out", p->file, p->rank);
			continue;
		}
		a->ranks[a->nranks].rank = p->rank;
		a->ranks[a->nranks++].p = p;
	}
	a->nhosts = nh;
	if (!a->nranks) {
		snprintf(err, errlen, "no readable rank in %s%s (%d trace file%s)", dirs[0], ndirs > 1 ? " ..." : "",
			 files, files == 1 ? "" : "s");
		return -1;
	}
	qsort(a->ranks, (size_t)a->nranks, sizeof *a->ranks, cmp_rank);
	int world = a->ranks[0].p->world;
	if (world > a->nranks && !o->ranks)
		warn(a, "%d of %d ranks have a readable file; the missing ranks are not analysed", a->nranks, world);
	pick_training_threads(a);
	align_clocks(a);
	int64_t lo = INT64_MAX, hi = INT64_MIN;
	for (int r = 0; r < a->nranks; r++)
		for (int h = 0; h < a->ranks[r].p->nthr; h++) {
			struct thr *t = &a->ranks[r].p->thr[h];
			if (!t->n)
				continue;
			lo = t->ev[0].t < lo ? t->ev[0].t : lo;
			hi = t->ev[t->n - 1].t + t->ev[t->n - 1].d > hi ? t->ev[t->n - 1].t + t->ev[t->n - 1].d : hi;
		}
	a->wall_s = hi > lo ? (double)(hi - lo) / 1e9 : 0;
	analyse_steps(a);
	find_all(a);
	return 0;
nothing:
	snprintf(err, errlen, "out of memory");
	return -1;
}

void analysis_free(struct analysis *a)
{
	for (int i = 0; i < a->nprocs; i++) {
		struct proc *p = &a->procs[i];
		free(p->file);
		for (int k = 0; k < p->nthr; k++)
			free(p->thr[k].ev);
		free(p->thr);
		for (int k = 0; k < p->npaths; k++)
			free(p->paths[k]);
		free(p->paths);
		free(p->fd_path);
		free(p->rbins);
		for (int k = 0; k < p->ndstat; k++)
			free(p->dstat[k].dir);
		free(p->dstat);
	}
	free(a->procs);
	for (int r = 0; a->ranks && r < a->nranks; r++)
		free(a->ranks[r].steps);
	free(a->ranks);
	for (int i = 0; i < a->nwarnings; i++)
		free(a->warnings[i]);
}
