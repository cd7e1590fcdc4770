/* Loading: the first phase of the analysis. Every trace file under the job's directories read
 * into its process's per-thread timelines of synchronizing calls (collectives, their waits, step
 * markers), with the input evidence (file reads, directories) counted as the events go by; the
 * ranks and their training threads. Beside it: the runs of calls between the training thread's
 * kept ones (runs.c), the clocks' spread (spread.c), the process record (proc.c), report --mpi's
 * exchange of the files (loadmpi.c) and the second reading later phases stream (stream.c). */
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../common/format.h"
#include "../common/hash.h"
#include "analysis_int.h"
#include "load_int.h"
#include "trace.h"

struct loadctx;
static void account(struct loadctx *c, const struct ev *e);

int an_rank_sync(const struct proc *p, const struct thr *u, const struct ev *e)
{
	const struct thr *t = an_train_thread(p);
	if (u != t && !p->bg)
		return 0;
	if (u != t)
		return an_numbered_coll(e);
	return an_train_sync(e);
}

struct loadctx {
	const struct analysis *a;
	struct proc *p;
	int keep;           /* this file's events are needed */
	size_t prefix;      /* synchronizing calls kept per thread */
	size_t gpu_keep;    /* device records kept (gpu.c) */
	uint32_t *path_hash; /* open addressing over p->paths, 0 empty, else index + 1 */
	size_t hash_cap;
	int last;           /* index of the previous event's thread, -1 none (thr is realloc'ed) */
	int64_t lo, hi;     /* the span of the file's events */
	int *dir_of;        /* path index -> 1 + its directory's index in p->dstat; 0 not yet, -1 none */
	size_t ndir_of;
	const char *path;   /* the file, as opened */
	int lsw_tried;      /* a sweep of its steps was begun (p->lsw, lsweep.c), or could not be */
	int lsw_h;          /* on this thread */
};

static uint64_t hash_str(const char *s, size_t n)
{
	return ddpspy_fnv_bytes(DDPSPY_FNV_SEED, s, n);
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
	t->first = INT64_MAX;
	t->last = INT64_MIN;
	t->runs_ok = t->first_on = 1;
	return t;
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
	/* about two million calls (128 MiB) per thread of the job, 2048 to 65536 per thread */
	size_t per = ((size_t)1 << 21) / (size_t)(p->world > 0 ? p->world : 1);
	c->prefix = c->a->prefix ? c->a->prefix : per < 2048 ? 2048 : per > 65536 ? 65536 : per;
	/* a GPU rank's device records: about 64M (some 5 GiB) per job, 2^18 to 2^24 per rank */
	per = ((size_t)1 << 26) / (size_t)(p->world > 0 ? p->world : 1);
	c->gpu_keep = c->a->gpu_keep ? c->a->gpu_keep : per < (1 << 18) ? (1 << 18) : per > (1 << 24) ? (1 << 24) : per;
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
	if (t) {
		snprintf(t->name, sizeof t->name, "%s", th->name);
		t->cupti_id = (uint32_t)th->pthread;
	}
	return 0;
}

/* the latest receive with request req still waiting for its status in v[0, n), searched back
 * over LOOKBACK calls at most */
#define LOOKBACK 4096
static struct ev *waiting(struct ev *v, size_t n, uint32_t req)
{
	for (size_t i = n, k = 0; i-- > 0 && k < LOOKBACK; k++)
		if (an_is_p2p(&v[i]) && v[i].op == DDPSPY_OP_RECV && v[i].req == req && v[i].seq < 0 &&
		    (v[i].peer == -1 || v[i].tag == -1))
			return &v[i];
	return NULL;
}

/* an mpi_status event: the nonblocking wildcard receive it names numbered as the source and tag it
 * took (p2p.c), where it is kept: among the calls, or the spread's pending posts */
static void resolve(struct thr *t, const struct trace_event *e)
{
	uint64_t q = (uint64_t)e->args[0];
	uint32_t req = (uint32_t)(q ^ (q >> 32));
	int32_t src = (int32_t)e->args[1], tag = (int32_t)e->args[2];
	int32_t seq = an_p2p_resolve(t->num, req, src, tag);
	if (seq < 0)
		return;
	struct ev *w = waiting(t->ev, t->n, req);
	if (!w && t->pposts)
		w = waiting(t->pposts->v, (size_t)t->pposts->n, req);
	if (w)
		w->peer = src, w->tag = tag, w->seq = seq;
}

/* Pass 1: every event is counted (account) and its thread's span noted; only the synchronizing
 * ones (collectives, their waits, step markers) are kept, the others summed into runs between them
 * (the split's; the training thread's other events are read again once the steps are known,
 * an_stream_train, when those are not enough). */
static int on_event(void *ctx, struct trace_file *f, const struct trace_event *e)
{
	struct loadctx *c = ctx;
	if (!c->keep)
		return 0;
	const struct kind *k = an_kind(e->kind);
	if (k->m & DDPSPY_KM_NAMES_THREAD) {
		struct thr *t = thread_of(c->p, (int)e->args[0] > 0 ? (int)e->args[0] : e->tid);
		if (t && e->str) {
			size_t n = e->slen < sizeof t->name - 1 ? e->slen : sizeof t->name - 1;
			memcpy(t->name, e->str, n);
			t->name[n] = 0;
		}
		return 0;
	}
	/* (an MPI communicator's first use; an NCCL one made, which the GPU part reads too: its
	 * ranks name the peers of its sends and receives) */
	if ((e->kind == DDPSPY_EV_MPI_COMM || e->kind == DDPSPY_EV_NCCL_INIT) && e->nargs >= 3) {
		struct proc *p = c->p;
		struct commrank *n = realloc(p->comms, (size_t)(p->ncomms + 1) * sizeof *n);
		if (!n)
			return 1;
		p->comms = n;
		p->comms[p->ncomms++] = (struct commrank){ (int32_t)e->args[0], (int)e->args[1], (int)e->args[2] };
		if (e->kind == DDPSPY_EV_MPI_COMM)
			return 0;
	}
	if (e->kind == DDPSPY_EV_MPI_STATUS && e->nargs >= 3) {
		struct thr *t = thread_of(c->p, e->tid);
		return t ? (resolve(t, e), 0) : 1;
	}
	if (e->kind == DDPSPY_EV_NCCL_KERNEL) /* (NCCL's profiler plugin's: no call, a kernel for the GPU part) */
		return an_parts.gpu.host(c->p, e, NULL);
	struct ev ev, *v = &ev;
	int call = an_convert(e, v);
	an_stuck_event(c->p, e, call ? v : NULL);
	if (e->kind == DDPSPY_EV_NVTX)
		an_range_event(c->p, e);
	if (!call)
		return 0;
	struct thr *t = c->last >= 0 && c->p->thr[c->last].tid == e->tid ? &c->p->thr[c->last] :
			thread_of(c->p, e->tid);
	if (!t)
		return 1;
	c->last = (int)(t - c->p->thr);
	if (an_is_msg(v)) /* (before the GPU part: NCCL's messages pair its kernels across ranks) */
		an_p2p_number(&t->num, v);
	if (an_parts.gpu.host(c->p, e, v))
		return 1;
	/* paths: named by the call, or the latest one opened on its descriptor */
	if (k->path >= 0) {
		if (e->str)
			v->path = intern_path(c, e->str, e->slen);
		if ((k->m & DDPSPY_KM_FD_IS_RET) && v->fd >= 0 && e->str)
			set_fd_path(c->p, v->fd, v->path);
	} else if (k->fd >= 0) {
		v->path = fd_path(c->p, v->fd);
	}
	if ((k->m & (DDPSPY_KM_OPENS | DDPSPY_KM_STATS)) || an_is_file_read(v))
		t->io_ns += v->d;
	if (an_is_coll(e->kind) || an_is_p2p(v))
		t->ncoll++;
	if (k->m & DDPSPY_KM_HELPER)
		t->nhelper++;
	if (v->t < t->first)
		t->first = v->t;
	if (v->t + v->d > t->last)
		t->last = v->t + v->d;
	account(c, v);
	an_hsite_add(c->p, e, v);
	an_psite_call(c->p, f, e->tid, v);
	an_range_call(c->p, e->tid, v);
	if (!an_kept_sync(v)) {
		if (t->runs_ok)
			an_run_add(t, v);
		if (c->p->lsw && c->lsw_h == c->last)
			an_parts.sweep.event(c->p->lsw, v);
		return 0;
	}
	if (t->nsync++ >= c->prefix) {
		/* (its calls from here on are not all kept: its steps are found from all of them, begun
		 * now on the first such thread of a rank) */
		if (!c->lsw_tried && c->p->role == DDPSPY_ROLE_RANK) {
			c->lsw_tried = 1;
			c->lsw_h = c->last;
			if (t->runs_ok) /* (the runs up to here: the prefix's) */
				an_run_close(t);
			c->p->lsw = an_parts.sweep.start(c->a, c->p, c->last, f, c->path, c->prefix);
		}
		if (t->runs_ok)
			an_runs_drop(t);
		if (t->nsync == c->prefix + 1)
			an_spread_seed(c->p, t);
		an_spread_add(c->p, t, v, c->a->spread);
		if (c->p->lsw && c->lsw_h == c->last)
			an_parts.sweep.event(c->p->lsw, v);
		return 0;
	}
	if (t->runs_ok)
		an_run_close(t);
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

/* a thread's schedstat (cpu.c) */
static int on_sched(void *ctx, struct trace_file *f, const struct trace_sched *s)
{
	struct loadctx *c = ctx;
	(void)f;
	if (!c->keep)
		return 0;
	struct thr *t = thread_of(c->p, s->tid);
	if (!t)
		return 1;
	an_parts.cpu.sample(t, s);
	struct proc *p = c->p;
	an_stuck_alive(p, s->t_ns);
	if (s->cpus > 0)
		p->cpus = s->cpus;
	if (s->host_cpus > 0)
		p->host_cpus = s->host_cpus;
	/* the host's, once per record (its threads' entries share the time) */
	if (s->host_busy_ns >= 0 && (!p->hostcpu.sched_seen || p->hostcpu.sched_last.t != s->t_ns)) {
		struct trace_sched h = *s;
		h.run_ns = (uint64_t)s->host_busy_ns;
		h.wait_ns = 0;
		an_parts.cpu.sample(&p->hostcpu, &h);
	}
	return 0;
}

/* a call in flight (inflight.c) */
static int on_inflight(void *ctx, struct trace_file *f, const struct trace_inflight *ci)
{
	struct loadctx *c = ctx;
	if (c->keep)
		an_stuck_add(c->p, f, ci);
	return 0;
}

/* a CUPTI record: the device's timeline, kept whole (gpu.c) */
static int on_gpu(void *ctx, struct trace_file *f, const struct trace_event *e)
{
	struct loadctx *c = ctx;
	return c->keep && c->p->role == DDPSPY_ROLE_RANK ? an_parts.gpu.record(c->p, f, e, c->gpu_keep) : 0;
}

/* the index in p->dstat of path's directory, created when new; -1 when there is no room */
static int dir_of(struct proc *p, const char *path)
{
	const char *sl = strrchr(path, '/');
	size_t l = sl ? (size_t)(sl - path) : strlen(path);
	int j = 0;
	while (j < p->ndstat && !(strlen(p->dstat[j].dir) == l && !memcmp(p->dstat[j].dir, path, l)))
		j++;
	if (j == p->ndstat) {
		if (p->ndstat == 256) /* a few hundred directories: enough for the top three */
			return -1;
		struct dirstat *n = realloc(p->dstat, (size_t)(p->ndstat + 1) * sizeof *n);
		char *d = malloc(l + 1);
		if (!n || !d) {
			free(d);
			if (n)
				p->dstat = n;
			return -1;
		}
		p->dstat = n;
		memcpy(d, path, l);
		d[l] = 0;
		p->dstat[j] = (struct dirstat){ d, 0, 0, 0 };
		p->ndstat++;
	}
	return j;
}

/* calls and time per directory, through a cache from path index to directory */
static void add_dirstat(struct loadctx *c, const struct ev *e)
{
	struct proc *p = c->p;
	if ((size_t)e->path >= c->ndir_of) {
		size_t n = c->ndir_of ? c->ndir_of : 64;
		while (n <= (size_t)e->path)
			n *= 2;
		int *m = realloc(c->dir_of, n * sizeof *m);
		if (!m)
			return;
		memset(m + c->ndir_of, 0, (n - c->ndir_of) * sizeof *m); /* 0: not looked up, else j + 1 */
		c->dir_of = m;
		c->ndir_of = n;
	}
	int *j = &c->dir_of[e->path];
	if (!*j)
		*j = dir_of(p, p->paths[e->path]) + 1;
	if (*j > 0) {
		p->dstat[*j - 1].calls++;
		p->dstat[*j - 1].ms += MS(e->d);
		if (an_is_file_read(e) && e->bytes > 0)
			p->dstat[*j - 1].bytes += (double)e->bytes;
	}
}

/* The thread that issues the most collectives (and sends and receives); the main thread when there are none, or when they
 * all run on a library's helper threads (PyTorch's ProcessGroupGloo: the Python thread enqueues
 * them and waits, p->bg). */
static int pick_train(struct proc *p)
{
	size_t best = 0;
	int train = -1, mainthr = -1;
	for (int k = 0; k < p->nthr; k++) {
		if (p->thr[k].ncoll > best) {
			best = p->thr[k].ncoll;
			train = k;
		}
		if (p->thr[k].tid == p->pid)
			mainthr = k;
	}
	if (train >= 0 && train != mainthr && mainthr >= 0 && p->thr[train].nhelper == p->thr[train].ncoll &&
	    !p->thr[mainthr].ncoll) {
		p->bg = 1;
		return mainthr;
	}
	return train >= 0 ? train : mainthr;
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
	if (e->path >= 0 && e->path < p->npaths && an_category(e) == CAT_DATA)
		add_dirstat(c, e);
	if (!an_is_file_read(e) || e->bytes <= 0)
		return;
	int64_t b = (e->t - p->bin0) / p->binw;
	if (b < 0)
		b = 0;
	while (b >= MAX_BINS) { /* a long run: bins twice as wide */
		for (size_t i = 0; i < p->nbins; i++)
			p->rbins[i / 2] = (i & 1 ? p->rbins[i / 2] : 0) + p->rbins[i];
		if (p->nbins)
			memset(p->rbins + (p->nbins + 1) / 2, 0, (p->nbins - (p->nbins + 1) / 2) * sizeof *p->rbins);
		p->binw *= 2;
		b = (e->t - p->bin0) / p->binw;
	}
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

/* array v of n items, room for *cap: given back down to n (1 at least) when it holds more than
 * twice that */
static void *trim(void *v, size_t n, size_t *cap, size_t size)
{
	if (n >= *cap / 2)
		return v;
	void *t = realloc(v, (n ? n : 1) * size);
	if (!t)
		return v;
	*cap = n ? n : 1;
	return t;
}

/* After a file is read: a rank's training thread is chosen, and the kept events' arrays trimmed */
static void compact(struct loadctx *c, int complete)
{
	struct proc *p = c->p;
	p->span = c->hi > c->lo ? c->hi - c->lo : 0;
	p->train = p->role == DDPSPY_ROLE_RANK ? pick_train(p) : -1;
	for (int h = 0; h < p->nthr; h++) {
		struct thr *t = &p->thr[h];
		free(t->rfirst);
		t->rfirst = NULL;
		t->crfirst = 0;
		t->first_on = 0;
		/* runs: the training thread's, whole (the split's), closed by the end of the file; not
		 * when they sum fewer than 4 calls per kept one (a second reading is then short, and
		 * cheaper than holding them: an input thread reads for it) */
		if (h != p->train || !complete || t->nmemb < 4 * t->n)
			an_runs_drop(t);
		else if (t->runs_ok)
			an_run_close(t);
		/* and the kept calls' own times, which the clocks will move (the split takes them as a
		 * second reading gives them) */
		if (t->runs_ok && t->n && !(t->own = malloc(t->n * sizeof *t->own)))
			an_runs_drop(t);
		for (size_t i = 0; t->runs_ok && i < t->n; i++)
			t->own[i] = (struct owntime){ t->ev[i].t, t->ev[i].d };
		t->run = trim(t->run, t->nrun, &t->crun, sizeof *t->run);
		t->ev = trim(t->ev, t->n, &t->cap, sizeof *t->ev);
	}
}

/* file-read bytes of p between aligned times t0 and t1 (whole bins) */
double an_read_bytes(const struct proc *p, int64_t t0, int64_t t1)
{
	double s = 0;
	if (!p->rbins)
		return 0;
	int64_t a = (an_file_time(p, t0) - p->bin0) / p->binw, b = (an_file_time(p, t1) - p->bin0) / p->binw;
	for (int64_t i = a < 0 ? 0 : a; i <= b && i < (int64_t)p->nbins; i++)
		s += p->rbins[i];
	return s;
}

static void slot_warn(struct slot *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void slot_warn(struct slot *s, const char *fmt, ...)
{
	char buf[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	if (s->nwarn < 3 && (s->warn[s->nwarn] = strdup(buf)))
		s->nwarn++;
}

/* a path against a span's (report_options' spans, sorted by path) */
static int cmp_span(const void *key, const void *elem)
{
	return strcmp(key, ((const struct an_span *)elem)->path);
}

/* a sample of the main thread's Python frames (2.12), at the file's sampling period */
static int on_sample(void *ctx, struct trace_file *f, int tid, uint64_t raw, uint32_t stack)
{
	struct loadctx *c = ctx;
	(void)tid;
	if (c->keep)
		an_psite_add(c->p, f, trace_raw_to_ns(f, raw), stack, f->py_sample_hz > 0 ? 1000.0 / f->py_sample_hz : 0);
	return 0;
}

/* a sample of the main thread's native stack on a CPU (2.13): a site of its compute where no
 * Python frames are read (where they are, the Python samples name the program's lines) */
static int on_cpusample(void *ctx, struct trace_file *f, int tid, int64_t t_ns, uint32_t stack)
{
	struct loadctx *c = ctx;
	(void)tid;
	if (c->keep && !(f->py_version[0] && !f->py_why[0]))
		an_csite_add(c->p, f, t_ns, stack, f->cpu_sample_hz > 0 ? 1000.0 / f->cpu_sample_hz : 0);
	return 0;
}

/* one trace file into s->p, with its rank's training thread chosen (proc.train); an unreadable
 * file is a warning, not an error (s->ok 0) */
static void load_file(const struct analysis *a, struct slot *s)
{
	const char *path = s->path;
	struct trace_file f;
	struct proc *p = &s->p;
	memset(p, 0, sizeof *p);
	p->file = strdup(path);
	p->rank = -1;
	p->train = -1;
	p->role = DDPSPY_ROLE_OTHER;
	p->binw = BIN_NS;
	p->part = s->span;
	struct loadctx c = { .a = a, .p = p, .last = -1, .lo = INT64_MAX, .hi = INT64_MIN,
			     .path = s->open ? s->open : path };
	struct trace_visitor v = { .ctx = &c, .on_header = on_header, .on_identity = on_identity,
				   .on_thread = on_thread, .on_event = on_event, .on_gpu = on_gpu,
				   .on_sched = on_sched, .on_inflight = on_inflight, .on_sample = on_sample,
				   .on_cpusample = on_cpusample };
	int rc = trace_open(&f, s->open ? s->open : path);
	f.span = p->part;
	if (rc == 0)
		rc = trace_read(&f, &v);
	if (p->lsw && an_parts.sweep.end(p->lsw, rc == 0) < 0) {
		an_parts.sweep.free(p->lsw);
		p->lsw = NULL;
	}
	an_parts.gpu.loaded(p, &f, s->open ? s->open : path);
	an_hsite_loaded(p, &f);
	an_range_loaded(p);
	an_stuck_loaded(p, &f);
	uint64_t wilds = 0, after = 0;
	for (int k = 0; k < p->nthr; k++) {
		an_p2p_num_wild(p->thr[k].num, &wilds, &after);
		an_p2p_num_res(p->thr[k].num, &p->thr[k].wres, &p->thr[k].nwres);
		an_p2p_num_free(p->thr[k].num);
		p->thr[k].num = NULL;
	}
	if (wilds && rc == 0)
		slot_warn(s, "%s: %" PRIu64 " nonblocking receives with MPI_ANY_SOURCE or MPI_ANY_TAG (their source not "
			  "recorded, or known only after a receive they could have taken a message of) and %" PRIu64 " later "
			  "receives they may have taken messages of are not matched with their sends: their waits are not "
			  "attributed, and they do not align the clocks", path, wilds, after);
	if (rc < 0 || !f.have_header) {
		slot_warn(s, "%s: unreadable (%s); left out", path, f.error[0] ? f.error : "no header");
		trace_close(&f);
		free(c.path_hash);
		free(c.dir_of);
		an_proc_free(p);
		return;
	}
	p->events = f.events;
	p->event_ns = f.event_ns;
	p->gpu_records = f.gpu.read;
	p->gpu_dropped = (uint64_t)(trace_gpu_lost(&f.gpu) - f.span_at.gpu_lost); /* (span_at: 0 without a span) */
	p->gpu_untimed = trace_gpu_untimed(&f.gpu);
	p->dropped = f.dropped;
	p->unwritten = f.unwritten - f.span_at.unwritten;
	snprintf(p->write_error, sizeof p->write_error, "%s", f.write_error);
	snprintf(p->sched_error, sizeof p->sched_error, "%s", f.sched_error);
	p->read_to = f.stop_offset;
	if (p->part.hi) /* (a frame being written that ended this reading is not in the next one either) */
		p->part.hi = f.stop_offset;
	p->clock = calloc(1, sizeof *p->clock);
	if (p->clock && trace_get_clock(&f, p->clock) < 0) {
		free(p->clock);
		p->clock = NULL;
	}
	p->ended = f.ended;
	if (rc == 2) {
		p->damaged = 1;
		snprintf(p->error, sizeof p->error, "%s at byte %zu", f.error, f.stop_offset);
		slot_warn(s, "%s: damaged (%s); analysed up to there", path, p->error);
	} else if (rc == 1) {
		p->damaged = 1;
		snprintf(p->error, sizeof p->error, "out of memory while reading");
		slot_warn(s, "%s: out of memory while reading; analysed what was read", path);
	}
	if (!f.ended && !p->damaged && p->role == DDPSPY_ROLE_RANK)
		slot_warn(s, "%s: not closed by its process (killed, or still running); events after its last flush are "
			  "not in it", path);
	/* the thread table also counts events per thread; sum what the file says was recorded */
	uint64_t sum = 0, dropped = 0;
	for (size_t i = 0; i < f.nthreads; i++) {
		sum += f.threads[i].events;
		dropped += f.threads[i].dropped - f.threads[i].dropped_lo;
	}
	if (!p->events)
		p->events = sum;
	if (dropped > p->dropped)
		p->dropped = dropped;
	trace_close(&f);
	free(c.path_hash);
	free(c.dir_of);
	compact(&c, rc == 0 || rc == 2); /* (rc 1: what was read is not what a second reading gives) */
	s->ok = 1;
}

struct loadjob {
	const struct analysis *a;
	struct slot *slots;
	struct an_progress progress;
};

static void load_one(void *ctx, size_t i)
{
	struct loadjob *j = ctx;
	struct slot *s = &j->slots[i];
	load_file(j->a, s);
	an_progress_add(&j->progress, s->bytes, s->ok ? s->p.events : 0);
}

/* the slots idx[0..n) read on a->jobs threads, the largest first */
static void load_slots(const struct analysis *a, struct slot *slots, const size_t *idx, size_t n)
{
	struct loadjob job = { .a = a, .slots = slots };
	struct bysize *bs = malloc((n + 1) * sizeof *bs);
	size_t *order = malloc((n + 1) * sizeof *order);
	uint64_t bytes = 0;
	if (!bs || !order) {
		free(bs);
		free(order);
		for (size_t i = 0; i < n; i++) /* (in turn) */
			load_file(a, &slots[idx[i]]);
		return;
	}
	for (size_t i = 0; i < n; i++) {
		bs[i] = (struct bysize){ slots[idx[i]].bytes, idx[i] };
		bytes += slots[idx[i]].bytes;
	}
	sort_n(bs, n, sizeof *bs, an_cmp_bysize);
	for (size_t i = 0; i < n; i++)
		order[i] = bs[i].i;
	free(bs);
	an_progress_start(&job.progress, "read files", n, bytes);
	an_parallel(n, a->jobs, order, load_one, &job);
	an_progress_end(&job.progress);
	free(order);
}

static int cmp_rank(const void *x, const void *y)
{
	const struct rankinfo *a = x, *b = y;
	return AN_ORDER(a->rank, b->rank);
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

/* Every trace file under a->dirs loaded (a progress line on a terminal once that takes more than a
 * second), and the ranks: one process each, in rank order. Returns 0, or -1 when no rank is
 * readable (a one-line reason in err). */
/* the ranks, one process each (the first file of a rank wins; duplicates are warned), in rank
 * order; the job's events, losses and hosts; -1 out of memory */
static int find_ranks(struct analysis *a, const struct report_options *o)
{
	a->ranks = calloc((size_t)a->nprocs + 1, sizeof *a->ranks);
	if (!a->ranks)
		return -1;
	char hosts[64][256];
	int nh = 0;
	for (int i = 0; i < a->nprocs; i++) {
		struct proc *p = &a->procs[i];
		a->events += p->events + p->gpu_records; /* (job.events and dropped_events: CUPTI's too) */
		a->dropped += p->dropped + p->unwritten + p->gpu_dropped;
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
			an_warn(a, "%s: a second file for rank %d; left out", p->file, p->rank);
			continue;
		}
		a->ranks[a->nranks].rank = p->rank;
		a->ranks[a->nranks++].p = p;
	}
	a->nhosts = nh;
	sort_n(a->ranks, (size_t)a->nranks, sizeof *a->ranks, cmp_rank);
	return 0;
}

int an_load(struct analysis *a, const struct report_options *o, char *err, size_t errlen)
{
	char **dirs = a->dirs;
	int ndirs = a->ndirs;
	int files = 0;
	*err = 0;
	char ***lists = calloc((size_t)ndirs, sizeof *lists);
	int *counts = calloc((size_t)ndirs, sizeof *counts);
	struct slot *slots = NULL;
	size_t *order = NULL;
	if (!lists || !counts)
		goto fail;
	if (a->mpi && an_mpi_me(a->mpi) != 0) {
		/* (another process: process 0's list, and every record once read) */
		size_t n = 0;
		a->mpi_follower = 1;
		if (an_mpi_follow(a, &slots, &n, load_slots) < 0) {
			snprintf(err, errlen, "--mpi: process %d could not read its files or exchange them",
				 an_mpi_me(a->mpi));
			goto fail;
		}
		files = (int)n;
	} else {
		for (int d = 0; d < ndirs; d++) {
			counts[d] = trace_list(dirs[d], &lists[d]);
			if (counts[d] < 0)
				an_warn(a, "%s: cannot be read", dirs[d]);
			else if (counts[d] == 0)
				an_warn(a, "%s: no .ddpspy files", dirs[d]);
			else
				files += counts[d];
		}
		/* every file read on its own, the largest first (the last to start are then short), on
		 * a->jobs threads (and processes: --mpi); then taken in the directories' order */
		slots = calloc((size_t)files + 1, sizeof *slots);
		order = malloc(((size_t)files + 1) * sizeof *order);
		if (!slots || !order)
			goto fail;
		for (int d = 0, i = 0; d < ndirs; d++)
			for (int k = 0; k < counts[d]; k++, i++) {
				struct stat st;
				slots[i].path = lists[d][k];
				slots[i].bytes = stat(slots[i].path, &st) == 0 ? (uint64_t)st.st_size : 0;
				const struct an_span *sp = o->nspans ? bsearch(slots[i].path, o->spans, (size_t)o->nspans,
									       sizeof *o->spans, cmp_span) : NULL;
				if (sp) {
					slots[i].span = sp->span;
					slots[i].bytes = sp->span.hi - sp->span.lo;
				}
				order[i] = (size_t)i;
			}
		if (a->mpi) {
			if (an_mpi_lead(a, slots, (size_t)files, load_slots) < 0) {
				snprintf(err, errlen, "--mpi: the other processes' records could not be gathered");
				goto fail;
			}
		} else {
			load_slots(a, slots, order, (size_t)files);
		}
	}
	a->procs = calloc((size_t)files + 1, sizeof *a->procs);
	if (!a->procs)
		goto fail;
	for (int i = 0; i < files; i++) {
		struct slot *s = &slots[i];
		for (int w = 0; w < s->nwarn; w++) {
			an_warn(a, "%s", s->warn[w]);
			free(s->warn[w]);
		}
		if (s->ok) {
			s->p.src = i;
			a->procs[a->nprocs++] = s->p;
			s->ok = 0; /* (the record is a->procs' now) */
		}
		free(s->open);
		if (a->mpi_follower)
			free((char *)s->path);
	}
	for (int d = 0; d < ndirs; d++)
		if (counts[d] > 0)
			trace_free_list(lists[d], counts[d]);
	free(lists);
	free(counts);
	free(slots);
	free(order);
	if (find_ranks(a, o) < 0)
		goto nothing;
	if (!a->nranks) {
		snprintf(err, errlen, "no readable rank in %s%s (%d trace file%s)", dirs[0], ndirs > 1 ? " ..." : "",
			 files, files == 1 ? "" : "s");
		return -1;
	}
	int world = a->ranks[0].p->world;
	if (world > a->nranks && !o->ranks)
		an_warn(a, "%d of %d ranks have a readable file; the missing ranks are not analysed", a->nranks, world);
	return 0;
fail:
	free(lists);
	free(counts);
	free(slots);
	free(order);
nothing:
	if (!*err)
		snprintf(err, errlen, "out of memory");
	return -1;
}

void an_load_free(struct analysis *a)
{
	for (int i = 0; i < a->nprocs; i++)
		an_proc_free(&a->procs[i]);
	free(a->procs);
	free(a->ranks);
	free(a->mpi_who);
	for (int i = 0; i < a->nwarnings; i++)
		free(a->warnings[i]);
}
