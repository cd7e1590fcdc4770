/* ddpspy report --html FILE: the report as one self-contained HTML file. No JavaScript and
 * nothing fetched (a Content-Security-Policy of default-src 'none'; inline CSS and SVG only,
 * tooltips as SVG title elements): the verdict and the critical-path bar, each rank's step as a
 * stacked bar, a timeline of the slowest and a typical step across the ranks with the waits for
 * late peers and the late rank marked, the findings with their evidence and advice, the job's
 * facts and warnings. Every string from a trace (paths, thread and kernel names, hosts) passes
 * html_put: it stays text. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../collector/json.h"
#include "vw.h"

#define W 960          /* the drawings' width */
#define LABEL 150      /* the rank labels' column */
#define MAX_SEGS 4096  /* per rank and window: neighbours closer than a pixel merge */
#define MAX_LANES 48   /* ranks drawn in a timeline: the late ones, then evenly spaced */

static const char *const cat_color[CAT_COUNT] = { "#4caf50", "#2196f3", "#ff9800", "#9e9e9e" };
#define WAIT_COLOR "#e53935"

#define H(s) html_put(out, (s), SIZE_MAX)

/* ---- the timeline: each rank's training thread in a window ---- */

struct seg {
	int64_t t0, t1;
	int8_t cat;        /* CAT_*, or -1 a device's work */
	int8_t gpu;        /* 0 host; device: 1 compute, 2 copy, 3 NCCL */
};

struct lane {
	struct seg *s;
	int n, cap;
	struct seg *g;     /* the device's work */
	int ng, cg;
};

struct tl {
	const struct analysis *a;
	const struct vwin *w;
	int nw;
	struct lane *lanes; /* [rank * nw + window] */
	struct varrs arr;
	int r;
	int64_t pix;        /* ns per pixel of the narrowest window, for merging */
};

static void lane_add(struct seg **v, int *n, int *cap, struct seg s, int64_t pix)
{
	/* (the device's work comes in launch order, its streams interleaved: only what starts after the
	 * last segment's start merges with it) */
	if (*n && (*v)[*n - 1].cat == s.cat && (*v)[*n - 1].gpu == s.gpu && s.t0 >= (*v)[*n - 1].t0 &&
	    s.t0 - (*v)[*n - 1].t1 < pix) {
		if (s.t1 > (*v)[*n - 1].t1)
			(*v)[*n - 1].t1 = s.t1;
		return;
	}
	if (*n >= MAX_SEGS)
		return;
	if (*n == *cap) {
		int c = *cap ? *cap * 2 : 64;
		struct seg *nv = realloc(*v, (size_t)c * sizeof *nv);
		if (!nv)
			return;
		*v = nv;
		*cap = c;
	}
	(*v)[(*n)++] = s;
}

static int on_train(void *ctx, const struct ev *e)
{
	struct tl *t = ctx;
	int win = vw_window_of(t->w, t->nw, e->t, e->t + e->d);
	if (win < 0)
		return 0;
	int cat = an_category(e);
	if (vw_is_arrival(e)) {
		struct varr a = { .rank = t->r, .comm = e->comm, .seq = e->seq, .op = e->op, .t = e->t, .end = e->t + e->d };
		vw_arr_add(&t->arr, &a);
	}
	if (cat < 0 || cat >= CAT_COUNT || cat == CAT_COMPUTE || e->d <= 0)
		return 0; /* compute is the gaps */
	struct lane *l = &t->lanes[t->r * t->nw + win];
	lane_add(&l->s, &l->n, &l->cap, (struct seg){ e->t, e->t + e->d, (int8_t)cat, 0 }, t->pix);
	return 0;
}

static void gather(struct tl *t)
{
	const struct analysis *a = t->a;
	t->pix = INT64_MAX;
	for (int w = 0; w < t->nw; w++) {
		int64_t p = (t->w[w].t1 - t->w[w].t0) / (W - LABEL);
		t->pix = p < t->pix ? p : t->pix;
	}
	for (int r = 0; r < a->nranks; r++) {
		t->r = r;
		an_stream_train(a->ranks[r].p, on_train, t);
		an_gpu_open(a->ranks[r].p); /* (a rank over its share: its work read again; else what it holds) */
		for (size_t i = 0; i < an_gpu_nwork(a->ranks[r].p); i++) {
			struct gpuitem g;
			an_gpu_work(a->ranks[r].p, i, &g);
			int win = vw_window_of(t->w, t->nw, g.t, g.t + g.d);
			if (win < 0)
				continue;
			struct lane *l = &t->lanes[r * t->nw + win];
			int8_t k = g.nccl ? 3 : !strcmp(g.cls, "kernel") ? 1 : 2;
			lane_add(&l->g, &l->ng, &l->cg, (struct seg){ g.t, g.t + g.d, -1, k }, t->pix);
			if (g.nccl && g.seq >= 0) {
				struct varr v = { .rank = r, .gpu = 1, .comm = g.comm, .seq = g.seq, .op = g.op, .t = g.t,
						  .end = g.t + g.d };
				vw_arr_add(&t->arr, &v);
			}
		}
		an_gpu_close(a->ranks[r].p);
	}
	vw_arr_sort(&t->arr);
}

static double X(const struct vwin *w, int64_t t)
{
	double x = LABEL + (double)(t - w->t0) / (double)(w->t1 - w->t0 > 0 ? w->t1 - w->t0 : 1) * (W - LABEL - 10);
	return x < LABEL ? LABEL : x > W - 10 ? W - 10 : x;
}

/* rank index r's lane of window wi at y: its label (marked: the late rank or the straggler), its
 * steps, its calls and its device's work */
static void draw_lane(FILE *out, const struct tl *t, int wi, int r, int y, int marked)
{
	const struct analysis *a = t->a;
	const struct vwin *w = &t->w[wi];
	const struct rankinfo *ri = &a->ranks[r];
	const struct lane *l = &t->lanes[r * t->nw + wi];
	const struct thr *th = an_train_thread(ri->p);
	fprintf(out, "<g class=\"lane%s\" data-rank=\"%d\">", marked ? " late" : "", ri->rank);
	fprintf(out, "<text x=\"4\" y=\"%d\" class=\"lbl\">rank %d", y + 12, ri->rank);
	if (a->pipe_stage && a->pipe_stage[r] >= 0)
		fprintf(out, ", stage %d", a->pipe_stage[r]);
	if (marked)
		fprintf(out, " &#9650; late");
	fprintf(out, "<title>rank %d on ", ri->rank);
	H(ri->p->host);
	fprintf(out, ", pid %d, thread ", ri->p->pid);
	H(th ? th->name : "?");
	fprintf(out, "</title></text>\n");
	/* the step (compute where nothing else is recorded), then the calls over it */
	if (ri->steps && w->first >= 0) {
		int64_t s0 = ri->steps[w->k0].t0, s1 = ri->steps[w->k1].t1;
		fprintf(out, "<rect x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"14\" fill=\"%s\"><title>rank %d: steps "
			     "%d-%d, %.1f ms; compute where no call is drawn</title></rect>\n",
			X(w, s0), y, X(w, s1) - X(w, s0), cat_color[CAT_COMPUTE], ri->rank, w->first, w->last, MS(s1 - s0));
	}
	for (int i = 0; i < l->n; i++) {
		const struct seg *s = &l->s[i];
		double x0 = X(w, s->t0), x1 = X(w, s->t1);
		fprintf(out, "<rect x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"14\" fill=\"%s\"><title>%s %.3f ms</title></rect>\n",
			x0, y, x1 - x0 < 0.5 ? 0.5 : x1 - x0, cat_color[s->cat], ddpspy_category_names[s->cat], MS(s->t1 - s->t0));
	}
	for (int i = 0; i < l->ng; i++) {
		const struct seg *s = &l->g[i];
		static const char *const gc[4] = { "", "#2e7d32", "#00acc1", "#8e24aa" };
		static const char *const gn[4] = { "", "GPU compute", "GPU copy", "NCCL kernel" };
		double x0 = X(w, s->t0), x1 = X(w, s->t1);
		fprintf(out, "<rect x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"10\" fill=\"%s\"><title>%s %.3f ms</title></rect>\n",
			x0, y + 16, x1 - x0 < 0.5 ? 0.5 : x1 - x0, gc[s->gpu], gn[s->gpu], MS(s->t1 - s->t0));
	}
	fprintf(out, "</g>\n");
}

/* a pipeline's lanes (lane[r]: rank index r's row, -1 not drawn) in stage order, then by rank */
static void pipe_order(const struct analysis *a, int *lane)
{
	if (!a->pipe_stage)
		return;
	int row = 0;
	for (int s = -1; s < a->pipe_stages; s++)
		for (int r = 0; r < a->nranks; r++)
			if (lane[r] >= 0 && a->pipe_stage[r] == s)
				lane[r] = row++;
}

/* A pipeline stage's waits for another stage in point-to-point calls (collector/p2p.c), over its
 * lane: the bubble, and the waits for a slower stage */
static void pipe_waits(FILE *out, const struct analysis *a, const struct vwin *w, const int *lane, int row)
{
	const struct stepdata *sd = a->sd;
	for (int r = 0; a->pipe_stage && sd && sd->pblk && r < a->nranks; r++)
		for (size_t i = sd->pbo[r]; lane[r] >= 0 && i < sd->pbo[r + 1]; i++) {
			const struct an_p2pblk *b = &sd->pblk[i];
			int64_t s0 = b->t, s1 = b->t + b->wait;
			if (b->L < 0 || b->wait <= 0 || s1 <= w->t0 || s0 >= w->t1)
				continue;
			fprintf(out, "<rect class=\"wait idle\" x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"14\" fill=\"%s\"><title>"
				     "stage %d (rank %d) idle %.3f ms, waiting for stage %d (rank %d, late %s)</title></rect>\n",
				X(w, s0), 24 + lane[r] * row, X(w, s1) - X(w, s0) < 0.5 ? 0.5 : X(w, s1) - X(w, s0), WAIT_COLOR,
				a->pipe_stage[r], a->ranks[r].rank, MS(b->wait), a->pipe_stage[b->L], a->ranks[b->L].rank,
				b->late_sender ? "sender" : "receiver");
		}
}

static void timeline(FILE *out, struct tl *t, int wi, int straggler)
{
	const struct analysis *a = t->a;
	const struct vwin *w = &t->w[wi];
	int gpu = 0;
	for (int r = 0; r < a->nranks; r++)
		gpu |= t->lanes[r * t->nw + wi].ng > 0;
	int row = gpu ? 34 : 20;
	/* the rank that arrived last at most of the window's collectives */
	int *lastn = calloc((size_t)a->nranks, sizeof *lastn), late = -1;
	for (size_t i = 0; lastn && i < t->arr.n;) {
		size_t j = vw_inst(&t->arr, i);
		const struct varr *L = &t->arr.v[j - 1];
		if (j - i > 1 && L->t >= w->t0 && L->t <= w->t1 && L->gpu == gpu)
			lastn[L->rank]++;
		i = j;
	}
	for (int r = 0; lastn && r < a->nranks; r++)
		if (lastn[r] && (late < 0 || lastn[r] > lastn[late]))
			late = r;
	/* the lanes: every rank, or on a large job the late one, the straggler and evenly spaced ranks;
	 * lane[r] is rank index r's row, -1 not drawn */
	int *lane = malloc((size_t)a->nranks * sizeof *lane), nl = 0;
	if (!lane) {
		free(lastn);
		return;
	}
	for (int r = 0; r < a->nranks; r++) {
		int keep = a->nranks <= MAX_LANES || r == late || a->ranks[r].rank == straggler ||
			   (long)r * (MAX_LANES - 2) / a->nranks != (long)(r + 1) * (MAX_LANES - 2) / a->nranks;
		lane[r] = keep ? nl++ : -1;
	}
	pipe_order(a, lane);
	int h = 24 + nl * row + 8;
	fprintf(out, "<figure class=\"timeline\" data-first-step=\"%d\" data-last-step=\"%d\" data-late-rank=\"%d\">\n",
		w->first, w->last, late >= 0 ? a->ranks[late].rank : -1);
	if (w->first < 0)
		fprintf(out, "<figcaption>The whole run (no steps were found)");
	else if (w->first == w->last)
		fprintf(out, "<figcaption>Step %d%s", w->first, w->slowest ? " (one of the slowest)" : " (a typical step)");
	else
		fprintf(out, "<figcaption>Steps %d&ndash;%d%s", w->first, w->last, w->slowest ? " (the slowest among them)" : "");
	fprintf(out, ", %.1f ms from the first rank's start to the last rank's end", MS(w->t1 - w->t0));
	if (late >= 0)
		fprintf(out, "; rank %d arrived last at %d of its collectives", a->ranks[late].rank, lastn[late]);
	if (nl < a->nranks)
		fprintf(out, "; %d of the %d ranks drawn (the late ones and evenly spaced others)", nl, a->nranks);
	if (a->pipe_stage)
		fprintf(out, "; a pipeline of %d stages in order, %d micro-batches a step, each stage's waits for another "
			     "in red (the bubble, and the waits for a slower stage)", a->pipe_stages, a->pipe_micro);
	fprintf(out, ".</figcaption>\n<svg width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" role=\"img\">\n", W, h, W, h);
	/* a time axis: 0 and the window's length */
	fprintf(out, "<text x=\"%d\" y=\"14\" class=\"axis\">0 ms</text><text x=\"%d\" y=\"14\" class=\"axis\" "
		     "text-anchor=\"end\">%.1f ms</text>\n", LABEL, W - 10, MS(w->t1 - w->t0));
	for (int r = 0; r < a->nranks; r++)
		if (lane[r] >= 0)
			draw_lane(out, t, wi, r, 24 + lane[r] * row, r == late || a->ranks[r].rank == straggler);
	/* the waits: a rank's comms time between its arrival and the last rank's, over its lane; and
	 * the last arrival marked on the late rank's lane */
	for (size_t i = 0; i < t->arr.n;) {
		size_t j = vw_inst(&t->arr, i);
		const struct varr *L = &t->arr.v[j - 1];
		if (j - i < 2 || L->t < w->t0 || L->t > w->t1 || L->gpu != gpu) {
			i = j;
			continue;
		}
		const char *op = L->op >= 0 && L->op < DDPSPY_OP_COUNT ? ddpspy_op_names[L->op] : "collective";
		for (size_t m = i; m + 1 < j; m++) {
			const struct varr *r = &t->arr.v[m];
			if (r->rank == L->rank || r->t >= L->t || lane[r->rank] < 0)
				continue;
			int y = 24 + lane[r->rank] * row;
			if (gpu) { /* on the device: the NCCL kernel's start to the last one's */
				fprintf(out, "<rect class=\"wait\" x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"10\" fill=\"%s\"><title>rank %d "
					     "waited %.3f ms in %s %d for rank %d</title></rect>\n", X(w, r->t), y + 16,
					X(w, L->t) - X(w, r->t), WAIT_COLOR, a->ranks[r->rank].rank, MS(L->t - r->t), op, L->seq,
					a->ranks[L->rank].rank);
				continue;
			}
			const struct lane *l = &t->lanes[r->rank * t->nw + wi];
			for (int s = 0; s < l->n; s++) {
				int64_t s0 = l->s[s].t0 > r->t ? l->s[s].t0 : r->t, s1 = l->s[s].t1 < L->t ? l->s[s].t1 : L->t;
				if (l->s[s].cat != CAT_COMMS || s1 <= s0)
					continue;
				fprintf(out, "<rect class=\"wait\" x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"14\" fill=\"%s\"><title>rank "
					     "%d waited %.3f ms for rank %d (%s %d)</title></rect>\n", X(w, s0), y,
					X(w, s1) - X(w, s0) < 0.5 ? 0.5 : X(w, s1) - X(w, s0), WAIT_COLOR, a->ranks[r->rank].rank,
					MS(s1 - s0), a->ranks[L->rank].rank, op, L->seq);
			}
		}
		if (lane[L->rank] >= 0)
			fprintf(out, "<path class=\"arrival\" d=\"M%.1f %d l-4 -6 h8 z\" fill=\"#000\"><title>rank %d arrived last at "
				     "%s %d</title></path>\n", X(w, L->t), 24 + lane[L->rank] * row + (gpu ? 16 : 0),
				a->ranks[L->rank].rank, op, L->seq);
		i = j;
	}
	pipe_waits(out, a, w, lane, row);
	fprintf(out, "</svg>\n</figure>\n");
	free(lastn);
	free(lane);
}

/* ---- the rest of the page ---- */

static void legend(FILE *out)
{
	fprintf(out, "<p class=\"legend\">");
	for (int c = 0; c < CAT_COUNT; c++)
		fprintf(out, "<span><i style=\"background:%s\"></i>%s</span> ", cat_color[c], ddpspy_category_names[c]);
	fprintf(out, "<span><i style=\"background:%s\"></i>waiting for a late peer</span></p>\n", WAIT_COLOR);
}

/* a stacked bar of shares at (x, y), len pixels for all of them */
static void bar(FILE *out, const double *sh, double wait, double x, int y, double len, int hgt, const char *who)
{
	double at = x;
	for (int c = 0; c < CAT_COUNT; c++) {
		double wd = len * (sh[c] > 0 ? sh[c] : 0);
		if (wd <= 0)
			continue;
		fprintf(out, "<rect class=\"share\" data-cat=\"%s\" x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"%d\" fill=\"%s\">"
			     "<title>%s: %s %.1f%%</title></rect>", ddpspy_category_names[c], at, y, wd, hgt, cat_color[c], who,
			ddpspy_category_names[c], 100 * sh[c]);
		if (c == CAT_COMMS && wait > 0) { /* the part of comms spent waiting for late peers */
			double ww = len * wait < wd ? len * wait : wd;
			fprintf(out, "<rect class=\"wait\" x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"%d\" fill=\"%s\"><title>%s: "
				     "waiting for late peers %.1f%%</title></rect>", at, y, ww, hgt, WAIT_COLOR, who, 100 * wait);
		}
		at += wd;
	}
}

static void evidence(FILE *out, const struct finding *f)
{
	char stack[MAX_EVIDENCE];
	int d = 0;
	fprintf(out, "<dl class=\"evidence\">");
	stack[d++] = 'o';
	for (int i = 0; i < f->nev; i++) {
		const struct fv *v = &f->ev[i];
		if (v->hidden)
			continue;
		int inlist = stack[d - 1] == 'l';
		if (v->type == FV_END) {
			if (d > 1) {
				d--;
				fprintf(out, stack[d] == 'l' ? "</ol>" : "</dl>");
				fprintf(out, stack[d - 1] == 'l' ? "</li>" : "</dd>");
			}
			continue;
		}
		if (inlist)
			fprintf(out, "<li>");
		else {
			fprintf(out, "<dt>");
			H(v->key);
			fprintf(out, "</dt><dd>");
		}
		switch (v->type) {
		case FV_INT:
			fprintf(out, "%lld", (long long)v->v.i);
			break;
		case FV_NUM:
			fprintf(out, "%.*f", v->decimals, v->v.d);
			break;
		case FV_STR:
			H(f->strs + v->v.s);
			break;
		case FV_BOOL:
			fprintf(out, v->v.i ? "yes" : "no");
			break;
		case FV_NULL:
			fprintf(out, "&mdash;");
			break;
		case FV_OBJ:
		case FV_LIST:
			if (d < MAX_EVIDENCE) {
				stack[d++] = v->type == FV_LIST ? 'l' : 'o';
				fprintf(out, v->type == FV_LIST ? "<ol>" : "<dl>");
			}
			continue;
		}
		fprintf(out, inlist ? "</li>" : "</dd>");
	}
	while (d > 1) {
		d--;
		fprintf(out, stack[d] == 'l' ? "</ol>" : "</dl>");
		fprintf(out, stack[d - 1] == 'l' ? "</li>" : "</dd>");
	}
	fprintf(out, "</dl>\n");
}

static const char CSS[] =
	"body{font:14px/1.45 system-ui,sans-serif;margin:24px auto;max-width:1000px;color:#222;padding:0 12px}"
	"h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #ddd}"
	"h3{font-size:15px;margin:0 0 4px}.dirs{color:#666;margin:0}"
	".verdict{font-size:17px;padding:10px 12px;border-left:6px solid #444;background:#f6f6f6}"
	".bound-compute{border-color:#4caf50}.bound-data{border-color:#2196f3}.bound-comms{border-color:#ff9800}"
	".bound-host{border-color:#9e9e9e}.legend span{margin-right:14px}"
	".legend i{display:inline-block;width:11px;height:11px;margin-right:4px;vertical-align:-1px}"
	"svg text{font:12px system-ui,sans-serif;fill:#222}svg .axis{fill:#777;font-size:11px}"
	".late .lbl,.late text{fill:#c62828;font-weight:600}"
	"ol.findings{padding-left:0;list-style:none}li.finding{border:1px solid #ddd;border-left:6px solid #e53935;"
	"padding:8px 12px;margin:0 0 12px;background:#fff}.sev{font-variant-numeric:tabular-nums;color:#c62828}"
	"dl.evidence{display:grid;grid-template-columns:max-content auto;gap:2px 12px;margin:6px 0;font-size:13px}"
	"dl.evidence dt{color:#555}dl.evidence dd{margin:0;overflow-wrap:anywhere}dl.evidence dl{display:grid;"
	"grid-template-columns:max-content auto;gap:0 10px;margin:0}dl.evidence ol{margin:0;padding-left:18px}"
	".advice{margin:4px 0 0;padding-left:18px}.advice li{color:#1b5e20}"
	"table{border-collapse:collapse;font-size:13px}td,th{padding:3px 10px;border-bottom:1px solid #eee;text-align:right}"
	"th:first-child,td:first-child{text-align:left}dl.facts{display:grid;grid-template-columns:max-content auto;"
	"gap:2px 14px}dl.facts dd{margin:0}.warn li{color:#8d6e00}figure{margin:12px 0}.wide{overflow-x:auto}figcaption{color:#444;margin:4px 0}";

/* the tables of the ranks' devices (ms per step by part) and of their NCCL kernels (and where
 * their times came from), where there are any */
static void gpu_tables(FILE *out, const struct analysis *a)
{
	int anygpu = 0;
	for (int r = 0; r < a->nranks; r++)
		anygpu |= a->ranks[r].gpu.have;
	if (anygpu) {
		fprintf(out, "<div class=\"wide\"><table id=\"gpu\"><tr><th>rank</th>");
		for (int c = 0; c < GP_COUNT; c++)
			fprintf(out, "<th>%s</th>", an_gpart_names[c]);
		fprintf(out, "<th>kernels per step</th></tr>\n");
		for (int r = 0; r < a->nranks; r++) {
			const struct gpustat *g = &a->ranks[r].gpu;
			if (!g->have)
				continue;
			fprintf(out, "<tr><td>%d</td>", a->ranks[r].rank);
			for (int c = 0; c < GP_COUNT; c++)
				fprintf(out, "<td>%.2f</td>", g->part[c]);
			fprintf(out, "<td>%.0f</td></tr>\n", g->kernels);
		}
		fprintf(out, "</table></div>\n<p>The device's step in ms per step: busy in the first that applies, else idle by what "
			     "the host did then.</p>\n");
	}
	int anynccl = 0; /* each rank's NCCL kernels, and where their times came from */
	for (int r = 0; r < a->nranks; r++)
		anynccl |= a->ranks[r].gpu.nccl_src && (a->ranks[r].gpu.have || a->ranks[r].gpu.nccl_src >= 2);
	if (anynccl) {
		fprintf(out, "<div class=\"wide\"><table id=\"nccl\"><tr><th>rank</th><th>NCCL times from</th>"
			     "<th>kernels per step</th><th>ms per step</th><th>waiting (ms)</th><th>MiB per step</th>"
			     "<th>late p50 (ms)</th></tr>\n");
		for (int r = 0; r < a->nranks; r++) {
			const struct gpustat *g = &a->ranks[r].gpu;
			if (!g->nccl_src || (!g->have && g->nccl_src < 2))
				continue;
			fprintf(out, "<tr><td>%d</td><td>%s</td><td>%.1f</td><td>%.2f</td><td>%.2f</td><td>%.1f</td>"
				     "<td>%.2f</td></tr>\n", a->ranks[r].rank,
				g->nccl_src == 3 ? "CUPTI, then NCCL's profiler plugin" : g->nccl_src == 2 ? "NCCL's profiler plugin" : "CUPTI",
				g->nccl_calls, g->nccl_ms, g->nccl_ms - g->nccl_xfer_ms, g->nccl_bytes / 1048576, g->nccl_late_p50);
		}
		fprintf(out, "</table></div>\n<p>NCCL's kernels on the GPU: waiting is their time before the last rank's "
			     "kernel of the same collective started; late, how long after the first rank's they started.</p>\n");
	}
}

/* each rank's NVTX ranges on its training thread, per analysed step (ranks[].ranges) */
static void range_table(FILE *out, const struct analysis *a)
{
	int any = 0;
	for (int r = 0; r < a->nranks; r++) {
		const struct nvrange *g[12];
		int n = a->ranks[r].steps ? an_train_ranges(a, r, g, 12) : 0;
		if (n && !any++)
			fprintf(out, "<div class=\"wide\"><table id=\"ranges\"><tr><th>rank</th><th>NVTX range</th><th>domain</th>"
				     "<th>level</th><th>ms per step</th><th>calls per step</th><th>in its calls: data</th>"
				     "<th>comms</th><th>host (ms)</th></tr>\n");
		for (int i = 0; i < n; i++) {
			double calls, ms = an_range_ms(a, r, g[i], &calls), in = g[i]->ms > 0 ? ms / g[i]->ms : 0;
			fprintf(out, "<tr><td>%d</td><td>", a->ranks[r].rank);
			H(g[i]->name);
			fprintf(out, "</td><td>");
			H(g[i]->domain[0] ? g[i]->domain : "-");
			fprintf(out, "</td><td>%d</td><td>%.2f</td><td>%.2f</td><td>%.2f</td><td>%.2f</td><td>%.2f</td></tr>\n",
				g[i]->depth, ms, calls, g[i]->cat_ms[CAT_DATA] * in, g[i]->cat_ms[CAT_COMMS] * in,
				g[i]->cat_ms[CAT_HOST] * in);
		}
	}
	if (any)
		fprintf(out, "</table></div>\n<p>The program's own phases (its NVTX ranges) on each rank's training thread: "
			     "their time per step, and the recorded calls in them and in none of their inner ranges.</p>\n");
}

/* the slowest step and a typical one, across the ranks */
static void timelines(FILE *out, const struct analysis *a, int straggler)
{
	struct vwin *w = NULL;
	char e2[256];
	int nw = vw_windows(a, NULL, 1, 1, &w, e2, sizeof e2);
	fprintf(out, "<section id=\"timeline\"><h2>Steps across the ranks</h2>\n<p>Each rank's training thread on the "
		     "job's aligned clock: input (data), collectives (comms), other waits (host), compute between them; red where "
		     "it waited for a late peer; &#9660; where the last rank arrived at a collective.</p>\n");
	if (nw > 0) {
		struct tl t = { .a = a, .w = w, .nw = nw };
		t.lanes = calloc((size_t)a->nranks * (size_t)nw, sizeof *t.lanes);
		if (t.lanes) {
			gather(&t);
			for (int i = 0; i < nw; i++)
				timeline(out, &t, i, straggler);
			for (int i = 0; i < a->nranks * nw; i++) {
				free(t.lanes[i].s);
				free(t.lanes[i].g);
			}
		}
		free(t.lanes);
		free(t.arr.v);
		legend(out);
	}
	free(w);
	fprintf(out, "</section>\n");
}

/* the findings, by severity, each with its evidence and advice */
static void findings(FILE *out, const struct analysis *a)
{
	fprintf(out, "<section id=\"findings\"><h2>Findings</h2>\n");
	if (!a->nfindings)
		fprintf(out, "<p>No findings.</p>\n");
	else
		fprintf(out, "<p>Severity: the fraction of the step that fixing it would win back.</p>\n<ol class=\"findings\">\n");
	for (int i = 0; i < a->nfindings; i++) {
		const struct finding *f = &a->findings[i];
		fprintf(out, "<li class=\"finding\" data-kind=\"");
		H(f->kind);
		fprintf(out, "\" data-rank=\"%d\"><h3><span class=\"sev\">[%.2f]</span> ", f->rank, f->severity);
		H(f->kind);
		if (f->rank >= 0)
			fprintf(out, ", rank %d", f->rank);
		fprintf(out, ": ");
		H(f->title);
		fprintf(out, "</h3>\n<p>");
		H(f->text);
		fprintf(out, "</p>\n");
		evidence(out, f);
		fprintf(out, "<ul class=\"advice\">");
		for (int k = 0; k < 4 && f->advice[k]; k++) {
			fprintf(out, "<li>");
			H(f->advice[k]);
			fprintf(out, "</li>");
		}
		fprintf(out, "</ul></li>\n");
	}
	if (a->nfindings)
		fprintf(out, "</ol>\n");
	fprintf(out, "</section>\n");
}

/* the job: ranks, hosts, steps, run, clock, training threads, GPU coverage, warnings */
static void job(FILE *out, const struct analysis *a)
{
	char cut[64] = "";
	if (a->steps_cut)
		snprintf(cut, sizeof cut, "; %d after CUPTI's records stopped left out", a->steps_cut);
	fprintf(out, "<section id=\"job\"><h2>The job</h2>\n<dl class=\"facts\">"
		     "<dt>ranks</dt><dd>%d on %d host%s (%d process%s)</dd>"
		     "<dt>steps</dt><dd>%d analysed of %d found (from %s; %d warm-up skipped%s)</dd>"
		     "<dt>run</dt><dd>%.1f s, %llu events, %llu dropped</dd><dt>clock</dt><dd>",
		a->nranks, a->nhosts, a->nhosts == 1 ? "" : "s", a->nprocs, a->nprocs == 1 ? "" : "es", a->nsteps,
		a->steps_detected, a->step_source, a->skip, cut, a->wall_s, (unsigned long long)a->events,
		(unsigned long long)a->dropped);
	H(a->clock_method);
	if (isnan(a->clock_residual_us))
		fprintf(out, ", residual unknown</dd><dt>hosts</dt><dd>");
	else
		fprintf(out, ", residual %.1f us</dd><dt>hosts</dt><dd>", a->clock_residual_us);
	for (int r = 0; r < a->nranks; r++) {
		int dup = 0;
		for (int q = 0; q < r; q++)
			dup |= !strcmp(a->ranks[q].p->host, a->ranks[r].p->host);
		if (dup)
			continue;
		fprintf(out, r ? ", " : "");
		H(a->ranks[r].p->host);
	}
	fprintf(out, "</dd><dt>training threads</dt><dd>");
	for (int r = 0; r < a->nranks; r++) {
		const struct thr *th = an_train_thread(a->ranks[r].p);
		fprintf(out, "%srank %d: ", r ? ", " : "", a->ranks[r].rank);
		H(th ? th->name : "none");
	}
	char *cover = an_gpu_cover_line(a);
	if (cover) { /* where the GPU figures came from */
		fprintf(out, "</dd><dt>GPU coverage</dt><dd>");
		H(cover);
	}
	free(cover);
	fprintf(out, "</dd></dl>\n");
	if (a->nwarnings) {
		fprintf(out, "<h3>Warnings</h3>\n<ul class=\"warn\">");
		for (int i = 0; i < a->nwarnings; i++) {
			fprintf(out, "<li>");
			H(a->warnings[i]);
			fprintf(out, "</li>");
		}
		fprintf(out, "</ul>\n");
	}
}

int html_report(const struct analysis *a, const char *path, char *err, size_t errlen)
{
	FILE *out = fopen(path, "w");
	if (!out) {
		snprintf(err, errlen, "cannot write %s: %s", path, strerror(errno));
		return -1;
	}
	int straggler = vw_straggler(a);
	fprintf(out, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
		     "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">\n"
		     "<meta name=\"generator\" content=\"ddpspy %s\">\n<title>ddpspy report: ", DDPSPY_VERSION);
	H(a->bound);
	fprintf(out, "-bound</title>\n<style>%s</style></head>\n<body>\n<header><h1>ddpspy report</h1><p class=\"dirs\">",
		CSS);
	for (int i = 0; i < a->ndirs; i++) {
		H(a->dirs[i]);
		fprintf(out, i + 1 < a->ndirs ? ", " : "");
	}
	fprintf(out, "</p></header>\n");

	/* the verdict and the critical path */
	fprintf(out, "<section id=\"verdict\"><h2>Verdict</h2>\n<p class=\"verdict bound-");
	H(a->bound);
	fprintf(out, "\">");
	H(a->summary);
	fprintf(out, " <span class=\"conf\">(confidence %.2f)</span></p>\n", a->confidence);
	fprintf(out, "<p>The critical path: what the job's step is made of once every wait for a late peer is charged to "
		     "what made that peer late.</p>\n<svg id=\"critbar\" width=\"%d\" height=\"30\" viewBox=\"0 0 %d 30\" role=\"img\">",
		W, W);
	bar(out, a->shares, 0, 0, 2, W, 26, "critical path");
	fprintf(out, "</svg>\n");
	legend(out);
	fprintf(out, "<p>Step: p50 %.1f ms, p95 %.1f ms, max %.1f ms.</p></section>\n", a->step_p50, a->step_p95, a->step_max);

	/* each rank's step, to scale */
	double longest = 0;
	for (int r = 0; r < a->nranks; r++)
		longest = fmax(longest, a->ranks[r].step_p50);
	int rh = 22, h = a->nranks * rh + 4;
	fprintf(out, "<section id=\"ranks\"><h2>Each rank's step</h2>\n<p>Its median step split by what its training "
		     "thread did, to scale; red: waiting for a late peer, in collectives or point to point.</p>\n"
		     "<svg width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" role=\"img\">\n", W, h, W, h);
	for (int r = 0; r < a->nranks; r++) {
		const struct rankinfo *ri = &a->ranks[r];
		int y = 2 + r * rh, late = ri->rank == straggler;
		char who[32];
		snprintf(who, sizeof who, "rank %d", ri->rank);
		fprintf(out, "<g class=\"rank-bar%s\" data-rank=\"%d\"><text x=\"4\" y=\"%d\" class=\"lbl\">rank %d%s<title>",
			late ? " late straggler" : "", ri->rank, y + 13, ri->rank, late ? " &#9650; straggler" : "");
		H(ri->p->host);
		fprintf(out, ", pid %d: step p50 %.1f ms, p95 %.1f ms</title></text>", ri->p->pid, ri->step_p50, ri->step_p95);
		bar(out, ri->shares, ri->wait_share + ri->p2p_wait_share, LABEL, y, longest > 0 ? (W - LABEL - 70) * ri->step_p50 / longest : 0, 16,
		    who);
		fprintf(out, "<text x=\"%.1f\" y=\"%d\">%.1f ms</text></g>\n",
			LABEL + (longest > 0 ? (W - LABEL - 70) * ri->step_p50 / longest : 0) + 6, y + 13, ri->step_p50);
	}
	fprintf(out, "</svg>\n");
	legend(out);
	gpu_tables(out, a);
	range_table(out, a);
	fprintf(out, "</section>\n");

	timelines(out, a, straggler);
	findings(out, a);
	job(out, a); /* (its section closed below, before the footer) */
	fprintf(out, "</section>\n<footer><p>ddpspy %s</p></footer>\n</body></html>\n", DDPSPY_VERSION);
	if (ferror(out) | (fclose(out) != 0)) {
		snprintf(err, errlen, "writing %s failed: %s", path, strerror(errno));
		return -1;
	}
	return 0;
}
