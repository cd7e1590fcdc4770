/* What the viewer shows, chosen and read: the windows of steps (the slowest and typical ones by
 * default), a process's calls in them on the job's clock, and collective arrivals joined across
 * ranks (vw.h). */
#include <stdlib.h>
#include <string.h>

#include "../collector/elfsym.h"
#include "vw.h"

int vw_step_number(const struct analysis *a, size_t k)
{
	const struct stepdata *sd = a->sd;
	return a->skip + (int)(sd && sd->gidx ? sd->gidx[k] : k);
}

struct kdur {
	size_t k;
	int64_t d;
};

static int cmp_kdur(const void *x, const void *y)
{
	const struct kdur *a = x, *b = y;
	return AN_ORDER(b->d, a->d); /* longest first */
}

static int cmp_size(const void *x, const void *y)
{
	size_t a = *(const size_t *)x, b = *(const size_t *)y;
	return AN_ORDER(a, b);
}

/* kept step k's bounds over the ranks */
static void step_bounds(const struct analysis *a, size_t k, int64_t *t0, int64_t *t1)
{
	*t0 = INT64_MAX;
	*t1 = INT64_MIN;
	for (int r = 0; r < a->nranks; r++) {
		const struct rankstep *s = a->ranks[r].steps;
		if (!s)
			continue;
		if (s[k].t0 < *t0)
			*t0 = s[k].t0;
		if (s[k].t1 > *t1)
			*t1 = s[k].t1;
	}
}

static int parse_spec(const char *spec, long *lo, long *hi)
{
	char *end;
	*lo = strtol(spec, &end, 10);
	if (end == spec || *lo < 0)
		return -1;
	*hi = *lo;
	if (*end == '-') {
		const char *s = end + 1;
		*hi = strtol(s, &end, 10);
		if (end == s || *hi < *lo)
			return -1;
	}
	return *end ? -1 : 0;
}

/* one window of the whole run: from the first event of any rank's thread to the last (NULL: out
 * of memory) */
static struct vwin *whole_run(const struct analysis *a)
{
	struct vwin *w = calloc(1, sizeof *w);
	if (!w)
		return NULL;
	w->t0 = INT64_MAX;
	w->t1 = INT64_MIN;
	w->first = w->last = -1;
	for (int r = 0; r < a->nranks; r++)
		for (int h = 0; h < a->ranks[r].p->nthr; h++) {
			const struct thr *t = &a->ranks[r].p->thr[h];
			if (t->first <= t->last) {
				w->t0 = t->first < w->t0 ? t->first : w->t0;
				w->t1 = t->last > w->t1 ? t->last : w->t1;
			}
		}
	if (w->t0 > w->t1)
		w->t0 = w->t1 = 0;
	return w;
}

/* a call in flight this long or more is the hang's; the lead before it, at most */
#define HANG_MIN_NS 1000000000LL
#define HANG_LEAD_NS 1000000000LL

int vw_add_hang(const struct analysis *a, struct vwin **w, int nw)
{
	int hung = 0;
	for (int i = 0; i < a->nfindings; i++)
		hung |= !strcmp(a->findings[i].kind, "hang");
	if (!hung || (nw == 1 && (*w)[0].first < 0 && !(*w)[0].hang)) /* (the whole run shown: in it) */
		return nw;
	int64_t t0 = INT64_MAX, t1 = INT64_MIN;
	for (int r = 0; r < a->nranks; r++) {
		const struct proc *p = a->ranks[r].p;
		for (int i = 0; i < p->hang.nstuck; i++) {
			const struct ev *v = &p->hang.stuck[i].v;
			if (v->d < HANG_MIN_NS)
				continue;
			int64_t s = an_job_time(p, v->t), e = an_job_time(p, v->t + v->d);
			t0 = s < t0 ? s : t0;
			t1 = e > t1 ? e : t1;
		}
	}
	if (t0 > t1)
		return nw;
	/* two typical steps before it (the last ones the ranks made), a second at most */
	int64_t lead = a->step_p50 > 0 && 2e6 * a->step_p50 < HANG_LEAD_NS ? (int64_t)(2e6 * a->step_p50) : HANG_LEAD_NS;
	t0 -= lead;
	if (nw && t0 < (*w)[nw - 1].t1) /* (after the windows shown, in time order) */
		t0 = (*w)[nw - 1].t1;
	struct vwin *m = realloc(*w, (size_t)(nw + 1) * sizeof *m);
	if (!m || t0 >= t1)
		return m ? (*w = m, nw) : nw;
	*w = m;
	m[nw] = (struct vwin){ .t0 = t0, .t1 = t1, .first = -1, .last = -1, .k0 = 1, .k1 = 0, .hang = 1 };
	return nw + 1;
}

int vw_windows(const struct analysis *a, const char *spec, int nslow, int ntyp, struct vwin **out, char *err,
	       size_t errlen)
{
	size_t K = a->sd ? a->sd->K : 0;
	int any = 0;
	for (int r = 0; r < a->nranks; r++)
		any |= a->ranks[r].steps != NULL;
	*out = NULL;
	if (!K || !any) {
		if (spec) {
			snprintf(err, errlen, "no steps were found in this trace, so --steps cannot choose any");
			return -1;
		}
		if (!(*out = whole_run(a)))
			goto oom;
		return 1;
	}
	size_t *pick = malloc(K * sizeof *pick), np = 0;
	struct kdur *kd = malloc(K * sizeof *kd);
	if (!pick || !kd) {
		free(pick);
		free(kd);
		goto oom;
	}
	for (size_t k = 0; k < K; k++) {
		int64_t t0, t1;
		step_bounds(a, k, &t0, &t1);
		kd[k] = (struct kdur){ k, t1 - t0 };
	}
	if (spec) {
		long lo, hi;
		if (parse_spec(spec, &lo, &hi) < 0) {
			snprintf(err, errlen, "--steps needs A-B or A (step numbers), not '%s'", spec);
			goto fail;
		}
		for (size_t k = 0; k < K; k++)
			if (vw_step_number(a, k) >= lo && vw_step_number(a, k) <= hi)
				pick[np++] = k;
		if (!np) {
			snprintf(err, errlen, "no analysed step in %s: steps %d-%d were analysed (%d warm-up step%s before "
				 "them: --skip)%s", spec, vw_step_number(a, 0), vw_step_number(a, K - 1), a->skip,
				 a->skip == 1 ? "" : "s", a->nsampled < a->nsteps ? ", a sample of them kept" : "");
			goto fail;
		}
	} else {
		sort_n(kd, K, sizeof *kd, cmp_kdur);
		for (size_t i = 0; i < K && (int)np < nslow; i++)
			pick[np++] = kd[i].k;
		/* typical: nearest the median duration, not already shown */
		int64_t med = kd[K / 2].d;
		for (int n = 0; n < ntyp && np < K; n++) {
			size_t best = SIZE_MAX;
			int64_t bd = INT64_MAX;
			for (size_t i = 0; i < K; i++) {
				int taken = 0;
				for (size_t j = 0; j < np; j++)
					taken |= pick[j] == kd[i].k;
				int64_t dd = kd[i].d > med ? kd[i].d - med : med - kd[i].d;
				if (!taken && dd < bd) {
					bd = dd;
					best = kd[i].k;
				}
			}
			if (best == SIZE_MAX)
				break;
			pick[np++] = best;
		}
	}
	sort_n(pick, np, sizeof *pick, cmp_size);
	struct vwin *w = calloc(np, sizeof *w);
	int nw = 0;
	if (!w)
		goto oomf;
	for (size_t i = 0; i < np; i++) {
		size_t k = pick[i];
		int64_t t0, t1;
		step_bounds(a, k, &t0, &t1);
		int slow = 0;
		for (int s = 0; !spec && s < nslow && (size_t)s < K; s++)
			slow |= kd[s].k == k;
		int num = vw_step_number(a, k);
		if (nw && w[nw - 1].k1 + 1 == k && w[nw - 1].last + 1 == num) { /* the next step: one window */
			w[nw - 1].t1 = t1 > w[nw - 1].t1 ? t1 : w[nw - 1].t1;
			w[nw - 1].last = num;
			w[nw - 1].k1 = k;
			w[nw - 1].slowest |= slow;
			continue;
		}
		w[nw++] = (struct vwin){ t0, t1, num, num, k, k, slow, 0 };
	}
	free(pick);
	free(kd);
	*out = w;
	return nw;
oomf:
	free(pick);
	free(kd);
oom:
	snprintf(err, errlen, "out of memory");
	return -1;
fail:
	free(pick);
	free(kd);
	return -1;
}

int vw_window_of(const struct vwin *w, int nw, int64_t t0, int64_t t1)
{
	int lo = 0, hi = nw; /* the first window starting after t1 */
	while (lo < hi) {
		int m = (lo + hi) / 2;
		if (w[m].t0 <= t1)
			lo = m + 1;
		else
			hi = m;
	}
	for (int i = lo - 1; i >= 0 && i >= lo - 2; i--) /* (adjacent windows may overlap a little) */
		if (w[i].t1 >= t0)
			return i;
	return -1;
}

/* ---- reading a process's calls in the windows ---- */

struct rdctx {
	const struct proc *p;
	const struct vwin *w;
	int nw;
	const struct vw_reader *r;
	char **fdpath;      /* each descriptor's latest opened path */
	size_t *fdlen;
	int nfd;
	struct trace_inflight *fl; /* calls in flight no event has ended yet, the latest look at each */
	int nfl;
	size_t cfl;
};

#define MAX_FD 65536

static void set_path(struct rdctx *c, int64_t fd, const char *s, size_t n)
{
	if (fd < 0 || fd >= MAX_FD)
		return;
	if (fd >= c->nfd) {
		int m = c->nfd ? c->nfd : 64;
		while (m <= fd)
			m *= 2;
		char **np = realloc(c->fdpath, (size_t)m * sizeof *np);
		if (!np)
			return;
		c->fdpath = np;
		size_t *nl = realloc(c->fdlen, (size_t)m * sizeof *nl);
		if (!nl)
			return;
		c->fdlen = nl;
		memset(c->fdpath + c->nfd, 0, (size_t)(m - c->nfd) * sizeof *np);
		c->nfd = m;
	}
	free(c->fdpath[fd]);
	c->fdpath[fd] = s ? strndup(s, n) : NULL;
	c->fdlen[fd] = c->fdpath[fd] ? n : 0;
}

/* a call in flight as the writer looked at it (again: the later look) */
static int on_inflight(void *ctx, struct trace_file *f, const struct trace_inflight *ci)
{
	struct rdctx *c = ctx;
	(void)f;
	int i = 0;
	while (i < c->nfl && !(c->fl[i].ev.tid == ci->ev.tid && c->fl[i].ev.raw == ci->ev.raw))
		i++;
	if (i == c->nfl) {
		struct trace_inflight *m = room_for(c->fl, (size_t)c->nfl, &c->cfl, sizeof *m, 16);
		if (!m)
			return 0;
		c->fl = m;
		c->nfl++;
	}
	c->fl[i] = *ci;
	return 0;
}

/* the calls in flight that never returned, each as a call until the file's last look at its
 * process (its latest record, a flush of every thread: the call had not returned by then; a job
 * still hung has its calls' own looks only once, at DDPSPY_INFLIGHT_MS) */
static void unreturned(struct rdctx *c)
{
	for (int i = 0; i < c->nfl; i++) {
		struct vw_call call = { .e = &c->fl[i].ev, .inflight = 1 };
		if (c->p->hang.last - c->fl[i].ev.t_ns > c->fl[i].ev.dur_ns)
			c->fl[i].ev.dur_ns = c->p->hang.last - c->fl[i].ev.t_ns;
		int k = an_argpos(c->fl[i].ev.kind, "fdclass"); /* (the class the writer found, not the call's guess) */
		if (k >= 0 && k < c->fl[i].ev.nargs && c->fl[i].fdclass > 0)
			c->fl[i].ev.args[k] = c->fl[i].fdclass;
		if (!an_convert(call.e, &call.v))
			continue;
		call.v = an_job_ev(c->p, &call.v);
		if (c->fl[i].path[0]) {
			call.path = c->fl[i].path;
			call.pathlen = strlen(c->fl[i].path);
		}
		call.win = vw_window_of(c->w, c->nw, call.v.t, call.v.t + call.v.d);
		if (call.win >= 0)
			c->r->call(c->r->ctx, c->p, &call);
	}
}

static int on_event(void *ctx, struct trace_file *f, const struct trace_event *e)
{
	struct rdctx *c = ctx;
	struct vw_call call = { .e = e };
	for (int i = 0; i < c->nfl; i++) /* (a call in flight that returned: its event has its start) */
		if (c->fl[i].ev.tid == e->tid && c->fl[i].ev.raw == e->raw)
			c->fl[i--] = c->fl[--c->nfl];
	if (e->kind == DDPSPY_EV_NVTX && c->r->nvtx)
		c->r->nvtx(c->r->ctx, c->p, e, an_job_time(c->p, e->t_ns));
	if (!an_convert(e, &call.v))
		return 0;
	const struct kind *k = an_kind(e->kind);
	call.v.t = an_job_time(c->p, call.v.t);
	int64_t fd = k->m & DDPSPY_KM_FD_IS_RET ? an_arg(e, an_argpos(e->kind, "ret"), -1) : call.v.fd;
	if (e->str_index >= 0 && e->str_index == k->path) {
		call.path = e->str;
		call.pathlen = e->slen;
	} else if (fd >= 0 && fd < c->nfd && c->fdpath[fd]) {
		call.path = c->fdpath[fd];
		call.pathlen = c->fdlen[fd];
	}
	call.win = vw_window_of(c->w, c->nw, call.v.t, call.v.t + call.v.d);
	call.stack = e->stack ? trace_stack(f, e->stack) : NULL;
	if (call.win >= 0)
		c->r->call(c->r->ctx, c->p, &call);
	if ((k->m & DDPSPY_KM_OPENS) && fd >= 0)
		set_path(c, fd, call.path, call.pathlen);
	else if (e->kind == DDPSPY_EV_CLOSE)
		set_path(c, fd, NULL, 0);
	return 0;
}

static int on_sample(void *ctx, struct trace_file *f, int tid, uint64_t raw, uint32_t stack)
{
	struct rdctx *c = ctx;
	int64_t t = an_job_time(c->p, trace_raw_to_ns(f, raw));
	int win = vw_window_of(c->w, c->nw, t, t);
	const struct trace_stack *s = trace_stack(f, stack);
	if (win >= 0 && s && s->npy)
		c->r->sample(c->r->ctx, c->p, tid, t, win, s);
	return 0;
}

static int on_cpusample(void *ctx, struct trace_file *f, int tid, int64_t t_ns, uint32_t stack)
{
	struct rdctx *c = ctx;
	int64_t t = an_job_time(c->p, t_ns);
	int win = vw_window_of(c->w, c->nw, t, t);
	const struct trace_stack *s = trace_stack(f, stack);
	if (win < 0 || !s || !s->n)
		return 0;
	char site[VW_FRAME], fr[VW_FRAMES][VW_FRAME];
	int n = 0;
	uint32_t at = trace_sample_site(f, s);
	trace_function_text(f, s->ips[at], at > 0, site, sizeof site);
	for (; n < VW_FRAMES && (uint32_t)n < s->n; n++) /* (the first the sampled instruction itself) */
		trace_frame_text(f, s->ips[n], n > 0, fr[n], sizeof fr[n]);
	c->r->cpusample(c->r->ctx, c->p, tid, t, win, site, (const char (*)[VW_FRAME])fr, n);
	return 0;
}

int vw_read(const struct proc *p, const struct vwin *w, int nw, const struct vw_reader *r)
{
	struct trace_file f;
	struct rdctx c = { .p = p, .w = w, .nw = nw, .r = r };
	struct trace_visitor v = { .ctx = &c, .on_event = on_event, .on_inflight = on_inflight,
				   .on_sample = r->sample ? on_sample : NULL,
				   .on_cpusample = r->cpusample ? on_cpusample : NULL };
	int rc = trace_open(&f, p->file);
	if (rc == 0 && p->clock)
		rc = trace_set_clock(&f, p->clock);
	if (rc == 0) {
		f.verified = p->read_to;
		rc = trace_read(&f, &v) == 1 ? -1 : 0; /* (damage: what came before it, as the report) */
	}
	if (rc == 0)
		unreturned(&c);
	for (size_t i = 0; rc == 0 && r->thread && i < f.nthreads; i++)
		r->thread(r->ctx, p, f.threads[i].tid, f.threads[i].name);
	trace_close(&f);
	for (int i = 0; i < c.nfd; i++)
		free(c.fdpath[i]);
	free(c.fdpath);
	free(c.fdlen);
	free(c.fl);
	return rc;
}

/* ---- collective instances ---- */

int vw_arr_add(struct varrs *s, const struct varr *a)
{
	if (s->n == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 256;
		struct varr *n = realloc(s->v, cap * sizeof *n);
		if (!n)
			return -1;
		s->v = n;
		s->cap = cap;
	}
	s->v[s->n++] = *a;
	return 0;
}

static int cmp_arr(const void *x, const void *y)
{
	const struct varr *a = x, *b = y;
	if (a->gpu != b->gpu)
		return a->gpu - b->gpu;
	if (a->comm != b->comm)
		return AN_ORDER(a->comm, b->comm);
	if (a->seq != b->seq)
		return AN_ORDER(a->seq, b->seq);
	return AN_ORDER(a->t, b->t);
}

void vw_arr_sort(struct varrs *s)
{
	sort_n(s->v, s->n, sizeof *s->v, cmp_arr);
}

size_t vw_inst(const struct varrs *s, size_t i)
{
	size_t j = i + 1;
	while (j < s->n && s->v[j].gpu == s->v[i].gpu && s->v[j].comm == s->v[i].comm && s->v[j].seq == s->v[i].seq)
		j++;
	return j;
}

int vw_straggler(const struct analysis *a)
{
	for (int i = 0; i < a->nfindings; i++)
		if (!strcmp(a->findings[i].kind, "straggler") && a->findings[i].rank >= 0)
			return a->findings[i].rank;
	return -1;
}
