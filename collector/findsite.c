/* evidence.sites: the code a rank's host time (or input waits) went to, from its longest calls by
 * stack (hostsite.c): the Python function and line where the thread ran Python, else the innermost
 * native frame; or its compute, from the main thread's Python samples between calls: the
 * program's own line. The most time per analysed step first. A finding about host work (rank 0's
 * before a collective, a straggler's or an asymmetric rank's host excess), a data stall or a
 * straggler of compute says where. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "analysis_int.h"
#include "findings_int.h"

#define SITES 3        /* shown */
#define SITE_FRAMES 6  /* frames shown of each */

double an_hsite_share(const struct analysis *a, int r, const struct hsite *s)
{
	const struct proc *p = a->ranks[r].p;
	int64_t lo = an_job_time(p, s->first), hi = an_job_time(p, s->last);
	if (s->calls >= 2 && hi > lo) /* (the last call's start, and one call's spacing more) */
		hi += (int64_t)((double)(hi - lo) / (s->calls - 1));
	else
		hi = lo;
	return an_span_part(&a->sd->span[r], lo, hi);
}

/* two call sites of one place in the code: the same Python line, or with no Python frames the
 * same innermost native frame */
static int same_site(const struct hsite *x, const struct hsite *y)
{
	if (x->py.n || y->py.n)
		return an_same_pysite(&x->py, &y->py);
	return x->nframes && y->nframes && !strcmp(x->frames[0], y->frames[0]);
}

/* a place in the code and its time per step; seen: its order among those read; the range of its
 * calls with the most of that time */
struct gsum {
	const struct hsite *h;
	double ms, range_ms;
	int seen;
	const char *range;
};

/* the most time first; ties in the order read */
static int cmp_sum(const void *x, const void *y)
{
	const struct gsum *a = x, *b = y;
	return a->ms != b->ms ? (a->ms < b->ms ? 1 : -1) : AN_ORDER(a->seen, b->seen);
}

void an_sites(struct finding *f, const struct analysis *a, int L, int cat)
{
	const struct proc *p = a->ranks[L].p;
	const struct thr *t = an_train_thread(p);
	const struct span *sp = &a->sd->span[L];
	struct gsum g[AN_HSITES];
	int ng = 0;
	if (cat == CAT_DATA || f->rank >= 0) /* (a rank's excess over its peers, or its input waits) */
		an_range_evidence(f, a, L, cat);
	/* (compute: the main thread's Python samples between its calls) */
	const struct hsite *pool = cat == CAT_COMPUTE ? p->psite : p->hsite;
	int npool = cat == CAT_COMPUTE ? p->npsite : p->nhsite;
	for (int i = 0; t && sp->n > 0 && i < npool; i++) {
		const struct hsite *s = &pool[i];
		double ms = s->tid == t->tid && s->cat == cat ? s->ms * an_hsite_share(a, L, s) / sp->n : 0;
		if (ms <= 0 || (!s->py.n && !s->nframes))
			continue;
		int k = 0;
		while (k < ng && !same_site(g[k].h, s))
			k++;
		if (k == ng) {
			g[ng] = (struct gsum){s, 0, 0, ng, NULL};
			ng++;
		}
		g[k].ms += ms;
		if (ms > g[k].range_ms) { /* (the same code in two ranges: the range of more of its time) */
			g[k].range_ms = ms;
			g[k].range = s->range;
		}
	}
	sort_n(g, (size_t)ng, sizeof g[0], cmp_sum);
	if (!ng)
		return;
	an_ev_open(f, "sites", FV_LIST);
	for (int k = 0; k < ng && k < SITES; k++)
		an_ev_site(f, &g[k].h->py, g[k].h->frames, g[k].h->nframes, g[k].ms, g[k].range);
	an_ev_end(f);
	an_site_words(f, &g[0].h->py, g[0].h->frames, g[0].h->nframes, g[0].ms);
}

void an_ev_site(struct finding *f, const struct pysite *py, const char (*frames)[112], int nframes, double ms,
		const char *range)
{
	char module[112];
	an_ev_open(f, NULL, FV_OBJ);
	if (py->n) {
		an_ev_str(f, "file", py->file);
		an_ev_int(f, "line", py->line);
		an_ev_str(f, "function", py->func);
	} else { /* ("module+0xoffset (function+0xoffset)": the module, and the frame as the function) */
		snprintf(module, sizeof module, "%s", nframes ? frames[0] : "?");
		char *plus = strstr(module, "+0x"); /* (the first: a module's name may hold "+", libstdc++'s) */
		if (plus)
			*plus = 0;
		an_ev_str(f, "file", module);
		an_ev_str(f, "line", NULL);
		an_ev_str(f, "function", nframes ? frames[0] : NULL);
	}
	an_ev_num(f, "ms_per_step", ms, 3);
	an_ev_str(f, "range", range && range[0] ? range : NULL);
	an_ev_open(f, "frames", FV_LIST);
	for (int i = 0; i < (py->n ? py->n : nframes) && i < SITE_FRAMES; i++)
		an_ev_str(f, NULL, py->n ? py->frames[i] : frames[i]);
	an_ev_end(f);
	an_ev_end(f);
}

void an_site_words(struct finding *f, const struct pysite *py, const char (*frames)[112], int nframes, double ms)
{
	char top[320];
	const char *base = strrchr(py->file, '/');
	if (py->n)
		snprintf(top, sizeof top, "%s (%s:%d)", py->func, base ? base + 1 : py->file, py->line);
	else if (nframes)
		snprintf(top, sizeof top, "%s", frames[0]);
	else
		return;
	an_ev_hidden_str(f, "top_site", top);
	an_ev_hidden_num(f, "top_site_ms", ms);
}
