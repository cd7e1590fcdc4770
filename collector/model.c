/* The model of a job (analysis_int.h's structures) and what every phase uses of it: the warnings
 * the report prints, a rank's training thread, the waits a rank had on each late rank per step
 * (struct wfrom, filled by the host and device splits, read by the findings), the test-only limits
 * and the size of a long trace's sample; and the table a later phase registers in for what it does
 * while a file is read (an_sweep_part). The base layer: it calls no phase. */
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

struct an_sweep_part an_sweep_part;

/* The report's test-only knobs (docs/testing.md, "The report's test-only knobs"): each read from
 * the environment here, and nowhere else; zero: whether 0 is a value (else it must be positive) */
static const struct knob {
	const char *name;
	int zero;
} KNOBS[AN_KNOB_COUNT] = {
	[AN_KNOB_PREFIX] = { "DDPSPY_REPORT_PREFIX", 0 },       [AN_KNOB_SAMPLE] = { "DDPSPY_REPORT_SAMPLE", 0 },
	[AN_KNOB_SPREAD] = { "DDPSPY_REPORT_SPREAD", 0 },       [AN_KNOB_GPU_KEEP] = { "DDPSPY_REPORT_GPU_KEEP", 0 },
	[AN_KNOB_REREAD] = { "DDPSPY_REPORT_REREAD", 0 },       [AN_KNOB_SWEEP_AFTER] = { "DDPSPY_REPORT_SWEEP_AFTER", 0 },
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

/* rank r waited ms in step k for late rank L (analysis_int.h's struct wfrom) */
void an_wf_add(struct stepdata *sd, int r, size_t k, int L, double ms)
{
	/* the same step and late rank again: the latest entries, since events come in time order */
	for (size_t i = sd->nwf[r]; i-- > 0 && sd->wf[r][i].k == k;)
		if (sd->wf[r][i].L == L) {
			sd->wf[r][i].ms += ms;
			return;
		}
	struct wfrom *n = room_for(sd->wf[r], sd->nwf[r], &sd->cwf[r], sizeof *n, 64);
	if (n)
		(sd->wf[r] = n)[sd->nwf[r]++] = (struct wfrom){ (uint32_t)k, L, ms };
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
