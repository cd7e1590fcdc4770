/* Loading: the first phase of the analysis. Every trace file under the job's directories read
 * into its process's per-thread timelines of synchronizing calls (collectives, their waits, step
 * markers), with the input evidence (file reads, directories) counted as the events go by; the
 * ranks and their training threads, with the runs of calls between the training thread's kept
 * ones (struct callrun); and the second reading of a rank's file that later phases stream. */
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
	int lsw_tried;      /* a sweep of its steps was begun (p->lsw, sweep.c), or could not be */
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

/* ---- runs (analysis.h's struct callrun): the calls between kept synchronizing calls, summed ---- */

_Static_assert(CAT_COUNT == 4 && CAT_COMPUTE == 0, "struct callrun's ns: data, comms, host");

/* calls before a thread's first synchronizing one beyond which its runs are given up: an input
 * thread's reads need none, and a training thread that made so many is read again */
#define RUN_FIRST_MAX 16384

void an_runs_drop(struct thr *t)
{
	free(t->run);
	free(t->rpat);
	free(t->own);
	free(t->rfirst);
	t->run = NULL;
	t->rpat = NULL;
	t->own = NULL;
	t->rfirst = NULL;
	t->nrun = t->crun = t->nrpat = t->crpat = t->crfirst = 0;
	t->runs_ok = 0;
}

/* v, the first call of t's run nrun, kept in t->rfirst (its path as a second reading gives it:
 * none); -1 out of memory (t's runs are given up) */
static int run_first(struct thr *t, const struct ev *v)
{
	struct ev *n = room_for(t->rfirst, t->nrun, &t->crfirst, sizeof *n, 64);
	if (!n) {
		an_runs_drop(t);
		return -1;
	}
	t->rfirst = n;
	t->rfirst[t->nrun] = *v;
	t->rfirst[t->nrun].path = -1;
	return 0;
}

/* v, a call of t that is not kept, into its current run; its input patterns as the split's fold
 * takes them (split.c) */
void an_run_add(struct thr *t, const struct ev *v)
{
	struct runacc *u = &t->cur;
	int c = an_category(v);
	if (c < 0 || c >= CAT_COUNT) { /* (a point in time not kept: the split needs it) */
		an_runs_drop(t);
		return;
	}
	if (!u->n++) {
		u->tmin = u->tmax = v->t;
		u->end = INT64_MIN;
		u->pat = (uint32_t)t->nrpat;
		u->nopat = !t->n; /* (a thread's calls before its first kept one: every call of threads that
				   * never make one, an input thread's reads, which the split will not need) */
		if (t->first_on && run_first(t, v) < 0)
			return;
	} else if (u->nopat && u->n > RUN_FIRST_MAX) { /* most likely not a training thread: given up */
		an_runs_drop(t);
		return;
	}
	t->nmemb++;
	if (u->n > 1) /* (the call before it in the run: tl, dl, cat) */
		u->ns[CAT_DATA] += an_input_gap(u->cat, u->tl + u->dl, c, v);
	u->tmin = v->t < u->tmin ? v->t : u->tmin; /* (calls come in order of their ends: nested ones first) */
	u->tmax = v->t > u->tmax ? v->t : u->tmax;
	u->tl = v->t;
	u->dl = v->d;
	if (v->t + v->d > u->end)
		u->end = v->t + v->d;
	u->ns[c] += v->d;
	u->cat = c;
	if (c != CAT_DATA || u->nopat)
		return;
	int64_t by = an_pat_bytes(v);
	/* (its patterns are the pool's last) */
	size_t j = u->pat + (u->npat ? an_pat_find(&t->rpat[u->pat], u->npat, v->kind, v->fdclass, by) : 0);
	if (j == (size_t)u->pat + u->npat) {
		struct pat *n = u->npat < MAX_PATS ? room_for(t->rpat, t->nrpat, &t->crpat, sizeof *n, 64) : NULL;
		if (!n || t->nrpat >= UINT32_MAX) {
			an_runs_drop(t);
			return;
		}
		t->rpat = n;
		t->rpat[t->nrpat++] = (struct pat){ v->kind, v->fdclass, by, 0, 0, 0 };
		u->npat++;
	}
	t->rpat[j].calls++;
	t->rpat[j].ns += v->d;
}

/* t's current run ends (a kept call, or the end of the file): kept when it has calls, in the
 * narrower form (what does not fit in it is read again instead) */
void an_run_close(struct thr *t)
{
	const struct runacc *u = &t->cur;
	if (!u->n)
		return;
	const uint32_t M = UINT32_MAX;
	struct callrun *n = room_for(t->run, t->nrun, &t->crun, sizeof *n, 64);
	if (!n || u->end - u->tmin > M || u->dl > M || t->n > M || u->ns[CAT_DATA] > M || u->ns[CAT_COMMS] > M ||
	    u->ns[CAT_HOST] > M) {
		if (n)
			t->run = n;
		an_runs_drop(t);
		return;
	}
	t->run = n;
	t->run[t->nrun++] = (struct callrun){ .tmin = u->tmin, .tmax = (uint32_t)(u->tmax - u->tmin),
					     .tl = (uint32_t)(u->tl - u->tmin), .end = (uint32_t)(u->end - u->tmin),
					     .dl = (uint32_t)u->dl, .ns = { (uint32_t)u->ns[CAT_DATA],
									    (uint32_t)u->ns[CAT_COMMS], (uint32_t)u->ns[CAT_HOST] },
					     .before = (uint32_t)t->n, .pat = u->pat, .npat = (uint8_t)u->npat,
					     .cat = (int8_t)u->cat, .nopat = (uint8_t)u->nopat };
	memset(&t->cur, 0, sizeof t->cur);
}

/* ---- the clocks' spread (analysis_int.h) ---- */

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
static void spread_add(const struct proc *p, struct thr *t, const struct ev *v, size_t max)
{
	int i = 0, last = 0;
	if (an_exit_aligns(v)) {
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
		else if ((lv = msg_level(p, v)) >= 0)
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
	for (int j = i; coll && !p2p && j < last; j++) {
		int l = (int)an_spread_level(&t->posts->v[j]);
		lv = l > lv ? l : lv;
	}
	for (size_t j = from; !coll && p2p && j < to; j++) {
		int l = msg_level(p, &t->pposts->v[j]);
		lv = l > lv ? l : lv;
	}
	if (lv >= 0) {
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

static void spread_drop(struct thr *t)
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
			spread_drop(&a->procs[i].thr[h]);
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
	if (e->kind == DDPSPY_EV_MPI_COMM && e->nargs >= 3) {
		struct proc *p = c->p;
		struct commrank *n = realloc(p->comms, (size_t)(p->ncomms + 1) * sizeof *n);
		if (!n)
			return 1;
		p->comms = n;
		p->comms[p->ncomms++] = (struct commrank){ (int32_t)e->args[0], (int)e->args[1], (int)e->args[2] };
		return 0;
	}
	if (e->kind == DDPSPY_EV_MPI_STATUS && e->nargs >= 3) {
		struct thr *t = thread_of(c->p, e->tid);
		return t ? (resolve(t, e), 0) : 1;
	}
	if (e->kind == DDPSPY_EV_NCCL_KERNEL) /* (NCCL's profiler plugin's: no call, a kernel for the GPU part) */
		return an_gpu_host(c->p, e, NULL);
	struct ev ev, *v = &ev;
	if (!an_convert(e, v))
		return 0;
	struct thr *t = c->last >= 0 && c->p->thr[c->last].tid == e->tid ? &c->p->thr[c->last] :
			thread_of(c->p, e->tid);
	if (!t)
		return 1;
	c->last = (int)(t - c->p->thr);
	if (an_gpu_host(c->p, e, v))
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
	if (k->m & DDPSPY_KM_P2P)
		an_p2p_number(&t->num, v);
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
	if (!an_kept_sync(v)) {
		if (t->runs_ok)
			an_run_add(t, v);
		if (c->p->lsw && c->lsw_h == c->last)
			an_sweep_part.event(c->p->lsw, v);
		return 0;
	}
	if (t->nsync++ >= c->prefix) {
		/* (its calls from here on are not all kept: its steps are found from all of them, begun
		 * now on the first such thread of a rank) */
		if (!c->lsw_tried && c->p->role == DDPSPY_ROLE_RANK && !c->a->reread && !c->a->sweep_after) {
			c->lsw_tried = 1;
			c->lsw_h = c->last;
			if (t->runs_ok) /* (the runs up to here: the prefix's) */
				an_run_close(t);
			c->p->lsw = an_sweep_part.start ? an_sweep_part.start(c->a, c->p, c->last, f, c->path, c->prefix) : NULL;
		}
		if (t->runs_ok)
			an_runs_drop(t);
		spread_add(c->p, t, v, c->a->spread);
		if (c->p->lsw && c->lsw_h == c->last)
			an_sweep_part.event(c->p->lsw, v);
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
	an_cpu_sample(t, s);
	struct proc *p = c->p;
	if (s->cpus > 0)
		p->cpus = s->cpus;
	if (s->host_cpus > 0)
		p->host_cpus = s->host_cpus;
	/* the host's, once per record (its threads' entries share the time) */
	if (s->host_busy_ns >= 0 && (!p->hostcpu.sched_seen || p->hostcpu.sched_last.t != s->t_ns)) {
		struct trace_sched h = *s;
		h.run_ns = (uint64_t)s->host_busy_ns;
		h.wait_ns = 0;
		an_cpu_sample(&p->hostcpu, &h);
	}
	return 0;
}

/* a CUPTI record: the device's timeline, kept whole (gpu.c) */
static int on_gpu(void *ctx, struct trace_file *f, const struct trace_event *e)
{
	struct loadctx *c = ctx;
	return c->keep && c->p->role == DDPSPY_ROLE_RANK ? an_gpu_record(c->p, f, e, c->gpu_keep) : 0;
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

static void proc_free(struct proc *p)
{
	free(p->file);
	free(p->open);
	if (p->lsw) /* (made by the sweep: an_sweep_part is filled) */
		an_sweep_part.free(p->lsw);
	an_gpu_free(p);
	if (p->clock)
		free(p->clock->calib);
	free(p->clock);
	for (int k = 0; k < p->nthr; k++) {
		free(p->thr[k].ev);
		free(p->thr[k].sched);
		free(p->thr[k].run);
		free(p->thr[k].rpat);
		free(p->thr[k].own);
		free(p->thr[k].rfirst);
		if (p->thr[k].sr) /* (the sweep's) */
			an_sweep_part.sruns_free(p->thr[k].sr);
		free(p->thr[k].wres);
		spread_drop(&p->thr[k]);
	}
	free(p->thr);
	free(p->hostcpu.sched);
	free(p->comms);
	for (int k = 0; k < p->npaths; k++)
		free(p->paths[k]);
	free(p->paths);
	free(p->fd_path);
	free(p->rbins);
	for (int k = 0; k < p->ndstat; k++)
		free(p->dstat[k].dir);
	free(p->dstat);
}

/* ---- a process record as bytes, and back (report --mpi: records read by other processes) ---- */

static void pack_thr(struct an_buf *b, const struct thr *t)
{
	an_put(b, t, sizeof *t);
	an_put(b, t->ev, t->n * sizeof *t->ev);
	an_put(b, t->sched, t->sched ? t->nsched * sizeof *t->sched : 0);
	an_put(b, t->spr, t->nspr * sizeof *t->spr);
	an_put(b, t->slv, t->nspr);
	an_put(b, t->wres, t->nwres * sizeof *t->wres);
	/* (not its runs: they stay with the process that read the file, which splits its rank) */
}

static int unpack_thr(struct an_rd *r, struct thr *t)
{
	if (an_get(r, t, sizeof *t) < 0)
		return -1;
	int sched = t->sched != NULL;
	t->ev = NULL, t->sched = NULL, t->num = NULL, t->run = NULL, t->rpat = NULL, t->own = NULL, t->rfirst = NULL;
	t->nrun = t->crun = t->nrpat = t->crpat = t->crfirst = 0;
	t->first_on = 0;
	t->runs_ok = 0;
	t->sr = NULL;
	t->spr = NULL, t->slv = NULL, t->posts = NULL, t->pposts = NULL;
	t->ev = an_get_arr(r, t->n, sizeof *t->ev, 0);
	t->cap = t->n;
	if (sched) /* (room for as many samples as cpu.c keeps) */
		t->sched = an_get_arr(r, t->nsched, sizeof *t->sched, MAX_SCHED);
	t->spr = an_get_arr(r, t->nspr, sizeof *t->spr, 0);
	t->slv = an_get_arr(r, t->nspr, 1, 0);
	t->cspr = t->nspr;
	t->wres = an_get_arr(r, t->nwres, sizeof *t->wres, 0);
	return r->err ? -1 : 0;
}

void an_pack_proc(struct an_buf *b, const struct proc *p, int whole)
{
	an_put(b, p, sizeof *p);
	an_put_str(b, p->file);
	if (p->clock) {
		an_put(b, p->clock, sizeof *p->clock);
		an_put(b, p->clock->calib, p->clock->n * sizeof *p->clock->calib);
	}
	an_gpu_pack(b, p, whole);
	an_put(b, p->comms, (size_t)p->ncomms * sizeof *p->comms);
	pack_thr(b, &p->hostcpu);
	for (int k = 0; k < p->nthr; k++)
		pack_thr(b, &p->thr[k]);
	for (int k = 0; k < p->npaths; k++)
		an_put_str(b, p->paths[k]);
	an_put(b, p->fd_path, (size_t)p->nfd * sizeof *p->fd_path);
	an_put(b, p->rbins, p->nbins * sizeof *p->rbins);
	for (int k = 0; k < p->ndstat; k++) {
		an_put(b, &p->dstat[k], sizeof p->dstat[k]);
		an_put_str(b, p->dstat[k].dir);
	}
}

int an_unpack_proc(struct an_rd *r, struct proc *p)
{
	if (an_get(r, p, sizeof *p) < 0)
		return -1;
	/* every pointer of the sender's is replaced before anything can fail, so that proc_free
	 * frees only what was made here */
	int clock = p->clock != NULL, nthr = p->nthr, npaths = p->npaths, ndstat = p->ndstat;
	p->file = NULL, p->open = NULL, p->clock = NULL, p->gpu = NULL, p->comms = NULL, p->thr = NULL, p->paths = NULL;
	p->fd_path = NULL, p->rbins = NULL, p->dstat = NULL, p->hostcpu.ev = NULL, p->hostcpu.sched = NULL, p->lsw = NULL;
	p->nthr = p->npaths = p->ndstat = 0;
	p->file = an_get_str(r);
	if (clock && (p->clock = calloc(1, sizeof *p->clock))) {
		an_get(r, p->clock, sizeof *p->clock);
		p->clock->calib = NULL;
		p->clock->calib = an_get_arr(r, p->clock->n, sizeof *p->clock->calib, 0);
	}
	if (!p->file || (clock && !p->clock) || an_gpu_unpack(r, p) < 0)
		return -1;
	p->comms = an_get_arr(r, (size_t)p->ncomms, sizeof *p->comms, 0);
	if (unpack_thr(r, &p->hostcpu) < 0)
		return -1;
	if (nthr < 0 || (size_t)nthr > (size_t)(r->end - r->p) / sizeof *p->thr ||
	    !(p->thr = calloc((size_t)nthr + 1, sizeof *p->thr)))
		return -1;
	for (; p->nthr < nthr; p->nthr++)
		if (unpack_thr(r, &p->thr[p->nthr]) < 0) {
			p->nthr++; /* (what it read is freed with the rest) */
			return -1;
		}
	if (npaths < 0 || (size_t)npaths > (size_t)(r->end - r->p) / 8 ||
	    !(p->paths = calloc((size_t)npaths + 1, sizeof *p->paths)))
		return -1;
	for (; p->npaths < npaths; p->npaths++)
		if (!(p->paths[p->npaths] = an_get_str(r)))
			return -1;
	p->cpaths = p->npaths;
	p->fd_path = an_get_arr(r, (size_t)p->nfd, sizeof *p->fd_path, 0);
	p->rbins = an_get_arr(r, p->nbins, sizeof *p->rbins, 0);
	if (r->err || ndstat < 0 || (size_t)ndstat > (size_t)(r->end - r->p) / sizeof *p->dstat ||
	    !(p->dstat = calloc((size_t)ndstat + 1, sizeof *p->dstat)))
		return -1;
	for (; p->ndstat < ndstat; p->ndstat++) {
		an_get(r, &p->dstat[p->ndstat], sizeof p->dstat[p->ndstat]);
		if (!(p->dstat[p->ndstat].dir = an_get_str(r)))
			return -1;
	}
	return r->err ? -1 : 0;
}

/* a file being read, on whichever thread: its process, and what the report will say of it (in
 * the files' order, whatever order they were read in) */
struct slot {
	const char *path;   /* as the report names it */
	char *open;         /* as this process opens it (report --mpi: process 0's absolute path), NULL: path */
	uint64_t bytes;
	struct proc p;
	int ok;
	char *warn[3];
	int nwarn;
};

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
	struct loadctx c = { .a = a, .p = p, .last = -1, .lo = INT64_MAX, .hi = INT64_MIN,
			     .path = s->open ? s->open : path };
	struct trace_visitor v = { .ctx = &c, .on_header = on_header, .on_identity = on_identity,
				   .on_thread = on_thread, .on_event = on_event, .on_gpu = on_gpu,
				   .on_sched = on_sched };
	int rc = trace_open(&f, s->open ? s->open : path);
	if (rc == 0)
		rc = trace_read(&f, &v);
	if (p->lsw && an_sweep_part.end(p->lsw, rc == 0) < 0) {
		an_sweep_part.free(p->lsw);
		p->lsw = NULL;
	}
	an_gpu_loaded(p, &f, s->open ? s->open : path);
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
		proc_free(p);
		return;
	}
	p->events = f.events;
	p->gpu_records = f.gpu.read;
	p->gpu_dropped = (uint64_t)(f.gpu.dropped > 0 ? f.gpu.dropped : 0) + (uint64_t)(f.gpu.refused > 0 ? f.gpu.refused : 0);
	p->gpu_untimed = trace_gpu_untimed(&f.gpu);
	p->dropped = f.dropped;
	p->unwritten = f.unwritten;
	snprintf(p->write_error, sizeof p->write_error, "%s", f.write_error);
	snprintf(p->sched_error, sizeof p->sched_error, "%s", f.sched_error);
	p->read_to = f.stop_offset;
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
		slot_warn(s, "%s: not closed by its process (killed?); events after its last flush are missing", path);
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

struct bysize {
	uint64_t bytes;
	size_t i;
};

/* the largest first; in the files' order among equals */
static int cmp_bysize(const void *x, const void *y)
{
	const struct bysize *a = x, *b = y;
	if (a->bytes != b->bytes)
		return AN_ORDER(b->bytes, a->bytes);
	return AN_ORDER(a->i, b->i);
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
	sort_n(bs, n, sizeof *bs, cmp_bysize);
	for (size_t i = 0; i < n; i++)
		order[i] = bs[i].i;
	free(bs);
	an_progress_start(&job.progress, "read files", n, bytes);
	an_parallel(n, a->jobs, order, load_one, &job);
	an_progress_end(&job.progress);
	free(order);
}

/* ---- report --mpi: the first reading spread over the processes ----
 * Process 0 lists the files and sends the list to all; each says which it can open (and its
 * host); process 0 gives each file to the least loaded process that can open it, by size, largest
 * first; every process reads its files and sends their records to process 0, which takes them in
 * the files' order. */

static void pack_slot(struct an_buf *b, uint64_t i, const struct slot *s, int whole)
{
	uint8_t ok = (uint8_t)s->ok, nw = (uint8_t)s->nwarn;
	an_put(b, &i, sizeof i);
	an_put(b, &ok, 1);
	an_put(b, &nw, 1);
	for (int w = 0; w < s->nwarn; w++)
		an_put_str(b, s->warn[w]);
	if (s->ok)
		an_pack_proc(b, &s->p, whole);
}

static int unpack_slots(struct an_buf *b, struct slot *slots, size_t files)
{
	struct an_rd r = { b->p, b->p + b->n, 0 };
	while (!r.err && r.p < r.end) {
		uint64_t i;
		uint8_t ok, nw;
		an_get(&r, &i, sizeof i);
		an_get(&r, &ok, 1);
		an_get(&r, &nw, 1);
		if (r.err || i >= files || nw > 3)
			return -1;
		struct slot *s = &slots[i];
		for (; s->nwarn < nw; s->nwarn++)
			if (!(s->warn[s->nwarn] = an_get_str(&r)))
				return -1;
		if (ok && an_unpack_proc(&r, &s->p) < 0) {
			proc_free(&s->p);
			return -1;
		}
		s->ok = ok;
	}
	return r.err ? -1 : 0;
}

/* which of the n files this process can open, and its host: a byte each, then the host */
static void visible(struct an_buf *b, const struct slot *slots, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		uint8_t v = access(slots[i].open ? slots[i].open : slots[i].path, R_OK) == 0;
		an_put(b, &v, 1);
	}
	char host[256] = "?";
	gethostname(host, sizeof host - 1);
	an_put_str(b, host);
}

/* the slots' records, warnings and names given back (free_slots: with their paths, which a
 * process other than process 0 holds) */
static void free_slots(struct slot *slots, size_t n, int paths)
{
	for (size_t i = 0; slots && i < n; i++) {
		if (paths)
			free((char *)slots[i].path);
		free(slots[i].open);
		for (int w = 0; w < slots[i].nwarn; w++)
			free(slots[i].warn[w]);
		if (slots[i].ok)
			proc_free(&slots[i].p);
	}
	free(slots);
}

/* A record's runs, device work and sweep begun, held aside while the record travels (they stay with
 * the process that read its file: what comes back has its NCCL kernels only), and given back to the
 * copy that comes back; freed when that process does not split it. */
struct heldruns {
	struct gpuproc *gpu;
	struct sweep *lsw;
	struct callrun *run;
	struct pat *rpat;
	struct owntime *own;
	size_t nrun, nrpat, nmemb;
	int held;
};

static void runs_hold(struct proc *p, struct heldruns *h)
{
	struct thr *t = p->train >= 0 ? &p->thr[p->train] : NULL;
	struct gpuproc *g = an_gpu_take(p);
	*h = (struct heldruns){ .gpu = g, .lsw = p->lsw };
	p->lsw = NULL;
	if (!t || !t->runs_ok)
		return;
	*h = (struct heldruns){ g, h->lsw, t->run, t->rpat, t->own, t->nrun, t->nrpat, t->nmemb, 1 };
	t->run = NULL, t->rpat = NULL, t->own = NULL;
	an_runs_drop(t);
}

static void runs_give(struct proc *p, struct heldruns *h, int keep)
{
	struct thr *t = keep && p->train >= 0 && p->train < p->nthr ? &p->thr[p->train] : NULL;
	if (h->gpu)
		an_gpu_give(keep ? p : NULL, h->gpu);
	if (keep && p && !p->lsw)
		p->lsw = h->lsw;
	else if (h->lsw)
		an_sweep_part.free(h->lsw);
	if (t && h->held && !t->runs_ok) {
		t->run = h->run, t->rpat = h->rpat, t->own = h->own;
		t->nrun = t->crun = h->nrun, t->nrpat = t->crpat = h->nrpat, t->nmemb = h->nmemb;
		t->runs_ok = 1;
	} else {
		free(h->run);
		free(h->rpat);
		free(h->own);
	}
	*h = (struct heldruns){ 0 };
}

/* a process that is not process 0: the list, what it can open, its files, their records sent;
 * then every record, as process 0 has them (the rest of the analysis runs here too, each process
 * splitting the ranks it read): the slots (*out, *nout) and who splits each file's rank
 * (a->mpi_who) */
static int mpi_follow(struct analysis *a, struct slot **out, size_t *nout)
{
	struct an_mpi *m = a->mpi;
	struct an_buf b = { 0 };
	int rc = -1;
	struct slot *slots = NULL;
	struct heldruns *held = NULL;
	size_t *idx = NULL, n = 0, mine = 0;
	if (an_mpi_bcast(m, &b) < 0)
		goto out;
	struct an_rd r = { b.p, b.p + b.n, 0 };
	uint64_t files;
	an_get(&r, &files, sizeof files);
	if (r.err || files > (uint64_t)(r.end - r.p) || !(slots = calloc(files + 1, sizeof *slots)) ||
	    !(idx = calloc(files + 1, sizeof *idx)) || !(a->mpi_who = calloc(files + 1, sizeof *a->mpi_who)) ||
	    !(held = calloc(files + 1, sizeof *held)))
		goto out;
	for (n = 0; n < files; n++) {
		an_get(&r, &slots[n].bytes, sizeof slots[n].bytes);
		if (!(slots[n].path = an_get_str(&r)) || !(slots[n].open = an_get_str(&r))) {
			n += slots[n].path != NULL;
			goto out;
		}
	}
	b.n = 0;
	visible(&b, slots, n);
	if (b.err || an_mpi_send(m, &b) < 0 || an_mpi_bcast(m, &b) < 0 || b.n != n * sizeof(int32_t))
		goto out;
	memcpy(a->mpi_who, b.p, b.n);
	for (size_t i = 0; i < n; i++)
		if (a->mpi_who[i] == an_mpi_me(m))
			idx[mine++] = i;
	load_slots(a, slots, idx, mine);
	b.n = 0;
	for (size_t i = 0; i < mine; i++) /* (device work whole to process 0 only for --html, which draws it) */
		pack_slot(&b, idx[i], &slots[idx[i]], a->gpu_whole);
	if (b.err || an_mpi_send(m, &b) < 0)
		goto out;
	/* every record, as process 0 has them (and the runs of those read here) */
	for (size_t i = 0; i < n; i++) {
		for (int w = 0; w < slots[i].nwarn; w++)
			free(slots[i].warn[w]);
		if (slots[i].ok) {
			runs_hold(&slots[i].p, &held[i]);
			proc_free(&slots[i].p);
		}
		slots[i].ok = slots[i].nwarn = 0;
	}
	if (an_mpi_bcast(m, &b) < 0 || b.n < n * sizeof *a->mpi_who)
		goto out;
	memcpy(a->mpi_who, b.p, n * sizeof *a->mpi_who);
	memmove(b.p, b.p + n * sizeof *a->mpi_who, b.n - n * sizeof *a->mpi_who);
	b.n -= n * sizeof *a->mpi_who;
	if (unpack_slots(&b, slots, n) < 0)
		goto out;
	for (size_t i = 0; i < n; i++)
		if (slots[i].ok) {
			slots[i].p.open = slots[i].open;
			slots[i].open = NULL;
			runs_give(&slots[i].p, &held[i], a->mpi_who[i] == an_mpi_me(m));
		}
	*out = slots;
	*nout = n;
	slots = NULL;
	rc = 0;
out:
	for (size_t i = 0; held && i < n; i++)
		runs_give(NULL, &held[i], 0);
	free(held);
	free_slots(slots, n, 1);
	free(idx);
	free(b.p);
	return rc;
}

/* process 0: every file read by some process, its record here; warnings for files some process
 * could not open */
static int mpi_lead(struct analysis *a, struct slot *slots, size_t files)
{
	struct an_mpi *m = a->mpi;
	int P = an_mpi_np(m), rc = -1;
	struct an_buf b = { 0 };
	uint64_t n = files;
	uint8_t *vis = calloc((size_t)P * (files + 1), 1);
	uint64_t *load = calloc((size_t)P, sizeof *load);
	int32_t *who = calloc(files + 1, sizeof *who);
	size_t *idx = calloc(files + 1, sizeof *idx), mine = 0;
	struct bysize *bs = malloc((files + 1) * sizeof *bs);
	if (!vis || !load || !who || !idx || !bs)
		goto out;
	/* each file's name in the report, and where it is from / (mpirun starts a process on another
	 * host in the same directory, or else in its home) */
	an_put(&b, &n, sizeof n);
	for (size_t i = 0; i < files; i++) {
		char *abs = realpath(slots[i].path, NULL);
		an_put(&b, &slots[i].bytes, sizeof slots[i].bytes);
		an_put_str(&b, slots[i].path);
		an_put_str(&b, abs ? abs : slots[i].path);
		free(abs);
	}
	if (b.err || an_mpi_bcast(m, &b) < 0)
		goto out;
	b.n = 0;
	visible(&b, slots, files);
	for (int q = 0; q < P; q++) {
		if (q && an_mpi_recv(m, q, &b) < 0)
			goto out;
		struct an_rd r = { b.p, b.p + b.n, 0 };
		an_get(&r, vis + (size_t)q * files, files);
		char *host = an_get_str(&r);
		size_t missing = 0;
		for (size_t i = 0; i < files; i++)
			missing += !vis[(size_t)q * files + i];
		if (missing)
			an_warn(a, "--mpi: %zu of %zu files are not visible to process %d (host %s): the other "
				"processes read them", missing, files, q, host ? host : "?");
		free(host);
	}
	/* the largest first, each to the least loaded process that can open it (process 0 when none
	 * can: it will say why) */
	for (size_t i = 0; i < files; i++)
		bs[i] = (struct bysize){ slots[i].bytes, i };
	sort_n(bs, files, sizeof *bs, cmp_bysize);
	for (size_t k = 0; k < files; k++) {
		size_t i = bs[k].i;
		int best = -1;
		for (int q = 0; q < P; q++)
			if (vis[(size_t)q * files + i] && (best < 0 || load[q] < load[best]))
				best = q;
		best = best < 0 ? 0 : best;
		who[i] = best;
		load[best] += slots[i].bytes + 1;
		if (best == 0)
			idx[mine++] = i;
	}
	b.n = 0;
	an_put(&b, who, files * sizeof *who);
	if (b.err || an_mpi_bcast(m, &b) < 0)
		goto out;
	load_slots(a, slots, idx, mine);
	for (int q = 1; q < P; q++)
		if (an_mpi_recv(m, q, &b) < 0 || unpack_slots(&b, slots, files) < 0)
			goto out;
	/* every record to every process (of device work, only the NCCL kernels); each rank is split
	 * where its file was read, which is all its splitting reads again */
	b.n = 0;
	an_put(&b, who, files * sizeof *who);
	for (size_t i = 0; i < files; i++)
		pack_slot(&b, i, &slots[i], 0);
	if (b.err || an_mpi_bcast(m, &b) < 0)
		goto out;
	a->mpi_who = who;
	who = NULL;
	rc = 0;
out:
	free(vis);
	free(load);
	free(who);
	free(idx);
	free(bs);
	free(b.p);
	return rc;
}

struct aligned {
	const struct proc *p;
	int (*fn)(void *ctx, const struct ev *e);
	void *ctx;
};

static int align_one(void *ctx, const struct ev *v)
{
	const struct aligned *x = ctx;
	struct ev e = *v;
	e.t = an_job_time(x->p, v->t);
	return x->fn(x->ctx, &e);
}

int an_stream_train(const struct proc *p, int (*fn)(void *ctx, const struct ev *e), void *ctx)
{
	struct aligned x = { p, fn, ctx };
	return p->train < 0 ? -1 : an_stream_thread(p, p->train, NULL, align_one, &x);
}

int an_stream_file(const char *path, const struct trace_clock *clock, size_t verified, const struct thr *t,
		   const uint8_t *want, int (*fn)(void *ctx, const struct ev *e), void *ctx)
{
	struct trace_cursor c;
	struct trace_event e;
	struct p2pnum *num = NULL;
	if (t->nwres)
		an_p2p_num_replay(&num, t->wres, t->nwres);
	int rc = trace_cursor_open(&c, path, t->tid, clock, verified, want);
	while (rc == 0 && trace_cursor_next(&c, &e) > 0) {
		struct ev v;
		if (!an_convert(&e, &v))
			continue;
		if (an_kind(v.kind)->m & DDPSPY_KM_P2P)
			an_p2p_number(&num, &v);
		if (fn(ctx, &v))
			break;
	}
	trace_cursor_close(&c);
	an_p2p_num_free(num);
	return rc;
}

int an_stream_thread(const struct proc *p, int h, const uint8_t *want, int (*fn)(void *ctx, const struct ev *e),
		     void *ctx)
{
	/* (damage where the first reading stopped ends this one there too) */
	return an_stream_file(p->open ? p->open : p->file, p->clock, p->read_to, &p->thr[h], want, fn, ctx);
}

/* Every synchronizing call of p again (collectives, their waits, step markers), from every
 * thread that made any, in order of start time (by thread, in the order of p->thr, when equal),
 * on the file's own clock; fn gets the thread's index too. */
int an_stream_sync(const struct proc *p, int (*fn)(void *ctx, int thr, const struct ev *e), void *ctx)
{
	uint8_t want[DDPSPY_EV_COUNT] = { 0 };
	for (int k = 0; k < DDPSPY_EV_COUNT; k++)
		want[k] = (uint8_t)an_is_sync_kind(k);
	struct trace_cursor *c = calloc((size_t)p->nthr + 1, sizeof *c);
	struct ev *head = calloc((size_t)p->nthr + 1, sizeof *head);
	struct p2pnum **num = calloc((size_t)p->nthr + 1, sizeof *num); /* numbered again, as while loading */
	int *live = calloc((size_t)p->nthr + 1, sizeof *live), rc = c && head && live && num ? 0 : -1;
	/* one cursor per thread with synchronizing calls, and its next call */
	for (int h = 0; rc == 0 && h < p->nthr; h++) {
		if (!p->thr[h].nsync)
			continue;
		if (p->thr[h].nwres) /* (its wildcard receives resolved as the first reading did) */
			an_p2p_num_replay(&num[h], p->thr[h].wres, p->thr[h].nwres);
		if (trace_cursor_open(&c[h], p->open ? p->open : p->file, p->thr[h].tid, p->clock, p->read_to, want) < 0) {
			trace_cursor_close(&c[h]);
			rc = -1;
			break;
		}
		live[h] = 1;
	}
	for (int h = 0; rc == 0 && h < p->nthr; h++) {
		struct trace_event e;
		while (live[h] == 1) {
			if (trace_cursor_next(&c[h], &e) <= 0)
				live[h] = 2; /* ended: closed below */
			else if (an_convert(&e, &head[h]) && (an_p2p_number(&num[h], &head[h]), an_kept_sync(&head[h])))
				live[h] = 3;
		}
		if (h == p->nthr - 1) { /* every head read: deliver the earliest, read its thread's next */
			int best = -1;
			for (int k = 0; k < p->nthr; k++)
				if (live[k] == 3 && (best < 0 || head[k].t < head[best].t))
					best = k;
			if (best < 0)
				break;
			if (fn(ctx, best, &head[best]))
				break;
			live[best] = 1;
			h = best - 1;
		}
	}
	for (int h = 0; c && live && h < p->nthr; h++)
		if (live[h])
			trace_cursor_close(&c[h]);
	for (int h = 0; num && h < p->nthr; h++)
		an_p2p_num_free(num[h]);
	free(num);
	free(c);
	free(head);
	free(live);
	return rc;
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
		if (mpi_follow(a, &slots, &n) < 0) {
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
				order[i] = (size_t)i;
			}
		if (a->mpi) {
			if (mpi_lead(a, slots, (size_t)files) < 0) {
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
	/* the ranks, one process each (the first file of a rank wins; duplicates are warned) */
	a->ranks = calloc((size_t)a->nprocs + 1, sizeof *a->ranks);
	if (!a->ranks)
		goto nothing;
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
	if (!a->nranks) {
		snprintf(err, errlen, "no readable rank in %s%s (%d trace file%s)", dirs[0], ndirs > 1 ? " ..." : "",
			 files, files == 1 ? "" : "s");
		return -1;
	}
	sort_n(a->ranks, (size_t)a->nranks, sizeof *a->ranks, cmp_rank);
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
		proc_free(&a->procs[i]);
	free(a->procs);
	free(a->ranks);
	free(a->mpi_who);
	for (int i = 0; i < a->nwarnings; i++)
		free(a->warnings[i]);
}
