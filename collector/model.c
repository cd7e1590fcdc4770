/* The model of a job (analysis_int.h's structures) and what every phase uses of it: the warnings
 * the report prints, a rank's training thread, the waits a rank had on each late rank per step
 * (struct wfrom, filled by the host and device splits, read by the findings), the test-only knobs
 * and the size of a long trace's sample; and the table the parts that read along while a file is
 * read register in (an_parts: the sweep, the device's records, the CPU samples). The base layer:
 * it calls no phase. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis_int.h"
#include "trace.h"

void an_warn(struct analysis *a, const char *fmt, ...)
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

struct thr *an_train_thread(const struct proc *p)
{
	return p->train >= 0 ? &p->thr[p->train] : NULL;
}

/* The parts that read along while a file is read (analysis_int.h): each fills its own entries when
 * the program starts; till then, or in a program without it, these do nothing (no sweep begun, no
 * device work, no CPU samples) */
static struct sweep *no_sweep(const struct analysis *a, struct proc *p, int h, struct trace_file *f, const char *path,
			      size_t prefix)
{
	(void)a, (void)p, (void)h, (void)f, (void)path, (void)prefix;
	return NULL;
}
static int no_record(struct proc *p, const struct trace_file *f, const struct trace_event *e, size_t keep)
{
	(void)p, (void)f, (void)e, (void)keep;
	return 0;
}
static int no_host(struct proc *p, const struct trace_event *e, const struct ev *v)
{
	(void)p, (void)e, (void)v;
	return 0;
}
static void no_loaded(struct proc *p, const struct trace_file *f, const char *path)
{
	(void)p, (void)f, (void)path;
}
static void no_pack(struct an_buf *b, const struct proc *p, int whole)
{
	(void)b, (void)p, (void)whole;
}
static int no_unpack(struct an_rd *r, struct proc *p)
{
	(void)r, (void)p;
	return 0;
}
static struct gpuproc *no_take(struct proc *p)
{
	(void)p;
	return NULL;
}
static void no_give(struct proc *p, struct gpuproc *g)
{
	(void)p, (void)g;
}
static void no_free(struct proc *p)
{
	(void)p;
}
static void no_sample(struct thr *t, const struct trace_sched *s)
{
	(void)t, (void)s;
}
struct an_parts an_parts = {
	.sweep = { .start = no_sweep }, /* (the rest is called only for a sweep start made) */
	.gpu = { no_record, no_host, no_loaded, no_pack, no_unpack, no_take, no_give, no_free },
	.cpu = { no_sample },
};

/* The report's test-only knobs (docs/testing.md, "The report's test-only knobs"): each read from
 * the environment here, and nowhere else; zero: whether 0 is a value (else it must be positive) */
static const struct knob {
	const char *name;
	int zero;
} KNOBS[AN_KNOB_COUNT] = {
	[AN_KNOB_PREFIX] = { "DDPSPY_REPORT_PREFIX", 0 },       [AN_KNOB_SAMPLE] = { "DDPSPY_REPORT_SAMPLE", 0 },
	[AN_KNOB_SPREAD] = { "DDPSPY_REPORT_SPREAD", 0 },       [AN_KNOB_GPU_KEEP] = { "DDPSPY_REPORT_GPU_KEEP", 0 },
	[AN_KNOB_SWEEPS] = { "DDPSPY_REPORT_SWEEPS", 0 },       [AN_KNOB_PROGRESS_S] = { "DDPSPY_REPORT_PROGRESS_S", 1 },
};

double an_knob(enum an_knob k, double def)
{
	const char *v = getenv(KNOBS[k].name);
	char *end;
	double n = v && *v ? strtod(v, &end) : 0;
	return v && *v && !*end && (n > 0 || (KNOBS[k].zero && n == 0)) ? n : def;
}

size_t an_sample_max(size_t nranks)
{
	/* about a million rank-steps in all (some 400 MiB at most), between 512 and 8192 per rank */
	size_t per = ((size_t)1 << 20) / (nranks ? nranks : 1);
	size_t n = (size_t)an_knob(AN_KNOB_SAMPLE, (double)(per < 512 ? 512 : per > 8192 ? 8192 : per));
	return n < 64 ? 64 : n;
}

/* rank r waited ms in step k for late rank L, p2p_ms of it in a device's sends and receives
 * (analysis_int.h's struct wfrom) */
void an_wf_add(struct stepdata *sd, int r, size_t k, int L, double ms, double p2p_ms)
{
	/* the same step and late rank again: the latest entries, since events come in time order */
	for (size_t i = sd->nwf[r]; i-- > 0 && sd->wf[r][i].k == k;)
		if (sd->wf[r][i].L == L) {
			sd->wf[r][i].ms += ms;
			sd->wf[r][i].p2p_ms += p2p_ms;
			return;
		}
	struct wfrom *n = room_for(sd->wf[r], sd->nwf[r], &sd->cwf[r], sizeof *n, 64);
	if (n)
		(sd->wf[r] = n)[sd->nwf[r]++] = (struct wfrom){ (uint32_t)k, L, ms, p2p_ms };
}

static int cmp_wf(const void *x, const void *y)
{
	const struct wfrom *a = x, *b = y;
	return a->k != b->k ? AN_ORDER(a->k, b->k) : AN_ORDER(a->L, b->L);
}

void an_wf_sort(struct stepdata *sd, int r)
{
	sort_n(sd->wf[r], sd->nwf[r], sizeof *sd->wf[r], cmp_wf);
}

const struct wfrom *an_wfrom_step(const struct stepdata *sd, int r, size_t k, size_t *n)
{
	const struct wfrom *v = sd->wf[r];
	size_t lo = 0, hi = sd->nwf[r];
	while (lo < hi) {
		size_t m = (lo + hi) / 2;
		if (v[m].k < k)
			lo = m + 1;
		else
			hi = m;
	}
	size_t end = lo;
	while (end < sd->nwf[r] && v[end].k == k)
		end++;
	*n = end - lo;
	return v ? v + lo : v; /* (none at all: NULL, and no arithmetic on it) */
}

double an_wfrom(const struct stepdata *sd, int r, size_t k, int L)
{
	size_t n;
	const struct wfrom *w = an_wfrom_step(sd, r, k, &n);
	for (size_t i = 0; i < n; i++)
		if (w[i].L == L)
			return w[i].ms;
	return 0;
}
