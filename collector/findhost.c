/* host_asymmetry: a rank that spends a share of its step in host calls its peers do not make
 * (sleeps, lock waits, reads of devices), named even where it is not the last to arrive (on an
 * oversubscribed host its CPU goes to the others while it sleeps, and something else dominates):
 * what it does, where (its calls' stacks), what fixing it wins now, and what it would win once the
 * host's CPU contention is fixed. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/format.h"
#include "analysis_int.h"
#include "findings_int.h"

#define MIN_EXCESS 0.05 /* of the step: less is noise on a shared host */

/* per analysed step, the time rank r's training thread spent in host calls of each kind (and
 * sites, into ms and calls[DDPSPY_EV_COUNT] (calls may be NULL)) */
static void kind_ms(const struct analysis *a, int r, double *ms, double *calls)
{
	const struct proc *p = a->ranks[r].p;
	const struct thr *t = an_train_thread(p);
	const struct span *sp = &a->sd->span[r];
	memset(ms, 0, DDPSPY_EV_COUNT * sizeof *ms);
	if (calls)
		memset(calls, 0, DDPSPY_EV_COUNT * sizeof *calls);
	for (int i = 0; t && sp->n > 0 && i < p->nhsite; i++) {
		const struct hsite *s = &p->hsite[i];
		if (s->tid != t->tid || s->cat != CAT_HOST || s->kind < 0 || s->kind >= DDPSPY_EV_COUNT)
			continue;
		double in = an_hsite_share(a, r, s) / sp->n;
		ms[s->kind] += s->ms * in;
		if (calls)
			calls[s->kind] += s->calls * in;
	}
}

/* the finding that already names rank for a late arrival, NULL none */
static struct finding *named(struct analysis *a, int rank)
{
	for (int i = 0; i < a->nfindings; i++)
		if (a->findings[i].rank == rank &&
		    (!strcmp(a->findings[i].kind, "straggler") || !strcmp(a->findings[i].kind, "rank0_serialization")))
			return &a->findings[i];
	return NULL;
}

/* the share of the step lost to waiting for a CPU (cpu_contention's severity), 0 none */
static double contention(const struct analysis *a)
{
	double c = 0;
	for (int i = 0; i < a->nfindings; i++)
		if (!strcmp(a->findings[i].kind, "cpu_contention"))
			c = fmax(c, a->findings[i].severity);
	return c;
}

/* per kind, L's time per step beyond its peers' median (extra) and that median (peers), from every
 * rank's kind_ms; -1 when out of memory */
static int beyond_peers(const struct analysis *a, double (*km)[DDPSPY_EV_COUNT], int L, double *extra, double *peers)
{
	double *peer = malloc((size_t)a->nranks * sizeof *peer);
	if (!peer)
		return -1;
	for (int k = 0; k < DDPSPY_EV_COUNT; k++) {
		int n = 0;
		for (int r = 0; r < a->nranks; r++)
			if (r != L)
				peer[n++] = km[r][k];
		peers[k] = an_quantile(peer, (size_t)n, 0.5);
		extra[k] = km[L][k] - peers[k];
	}
	free(peer);
	return 0;
}

/* L's calls of the kinds it spends more time in than its peers' median, as evidence: kind, time,
 * peers' time, calls per step and the stack of its longest site of that kind (km: every rank's
 * kind_ms) */
static void calls_evidence(struct finding *f, const struct analysis *a, int L, double (*km)[DDPSPY_EV_COUNT])
{
	const struct proc *p = a->ranks[L].p;
	const struct thr *t = an_train_thread(p);
	double extra[DDPSPY_EV_COUNT], peers[DDPSPY_EV_COUNT], ms[DDPSPY_EV_COUNT], calls[DDPSPY_EV_COUNT];
	if (beyond_peers(a, km, L, extra, peers) < 0)
		return;
	kind_ms(a, L, ms, calls);
	const char *top_call = NULL, *top_frame = NULL;
	double top_ms = 0, top_peers = 0;
	an_ev_open(f, "calls", FV_LIST);
	for (int shown = 0; shown < 3; shown++) {
		int k = -1;
		for (int j = 0; j < DDPSPY_EV_COUNT; j++)
			if (extra[j] > 0 && (k < 0 || extra[j] > extra[k]))
				k = j;
		if (k < 0)
			break;
		const struct hsite *top = NULL; /* (the most time in the analysed steps) */
		double top_in = 0;
		for (int i = 0; i < p->nhsite; i++) {
			double in = p->hsite[i].ms * an_hsite_share(a, L, &p->hsite[i]);
			if (t && p->hsite[i].tid == t->tid && p->hsite[i].cat == CAT_HOST && p->hsite[i].kind == k && in > top_in) {
				top = &p->hsite[i];
				top_in = in;
			}
		}
		const char *name = ddpspy_name(ddpspy_event_names, DDPSPY_EV_COUNT, k);
		if (!shown) {
			top_call = name;
			top_frame = top && top->nframes ? top->frames[0] : NULL;
			top_ms = km[L][k];
			top_peers = peers[k];
		}
		an_ev_open(f, NULL, FV_OBJ);
		an_ev_str(f, "call", name);
		an_ev_num(f, "ms_per_step", km[L][k], 3);
		an_ev_num(f, "peers_ms_per_step", peers[k], 3);
		an_ev_num(f, "calls_per_step", calls[k], 2);
		an_ev_open(f, "stack", FV_LIST);
		for (int i = 0; top && i < top->nframes; i++)
			an_ev_str(f, NULL, top->frames[i]);
		an_ev_end(f);
		an_ev_end(f);
		extra[k] = 0;
	}
	an_ev_end(f);
	/* (for the words: the first call and its innermost frame) */
	an_ev_hidden_str(f, "top_call", top_call);
	an_ev_hidden_str(f, "top_frame", top_frame);
	an_ev_hidden_num(f, "top_ms", top_ms);
	an_ev_hidden_num(f, "top_peers_ms", top_peers);
	an_sites(f, a, L, CAT_HOST);
}

/* every rank's kind_ms (NULL: out of memory) */
static double (*all_kind_ms(const struct analysis *a))[DDPSPY_EV_COUNT]
{
	double (*km)[DDPSPY_EV_COUNT] = calloc((size_t)a->nranks, sizeof *km);
	for (int r = 0; km && r < a->nranks; r++)
		if (a->ranks[r].steps)
			kind_ms(a, r, km[r], NULL);
	return km;
}

void an_host_calls(struct finding *f, const struct analysis *a, int L)
{
	double (*km)[DDPSPY_EV_COUNT] = all_kind_ms(a);
	if (km)
		calls_evidence(f, a, L, km);
	free(km);
}

void an_find_host(struct analysis *a)
{
	struct stepdata *sd = a->sd;
	int R = a->nranks;
	size_t N = sd->K;
	double step = a->step_p50 > 0 ? a->step_p50 : 1, c = contention(a);
	if (R < 2 || !N)
		return;
	double (*km)[DDPSPY_EV_COUNT] = all_kind_ms(a), *waits = calloc((size_t)R, sizeof *waits);
	if (!km || !waits) {
		free(km);
		free(waits);
		return;
	}
	/* how long the others waited for each rank, per step and other rank: every rank's waits once */
	for (int r = 0; r < R; r++)
		for (size_t k = 0; k < N; k++) {
			size_t nw;
			const struct wfrom *wl = an_wfrom_step(sd, r, k, &nw);
			for (size_t i = 0; i < nw; i++)
				if (wl[i].L >= 0 && wl[i].L < R && wl[i].L != r)
					waits[wl[i].L] += wl[i].ms / (double)N / (R - 1);
		}
	for (int L = 0; L < R; L++) {
		struct finding *late = named(a, a->ranks[L].rank);
		if (!a->ranks[L].steps || (late && (c <= 0 || strcmp(late->kind, "straggler"))))
			continue;
		/* its host time beyond its peers' median, and how long the others wait for it now */
		double exc = 0, waited = waits[L], own = 0;
		for (size_t k = 0; k < N; k++) {
			exc += sd->exc[(k * R + L) * CAT_COUNT + CAT_HOST] / (double)N;
			own += a->ranks[L].steps[k].cat[CAT_HOST] / (double)N;
		}
		/* and named: its host calls beyond its peers' explain at least half of it */
		double extra[DDPSPY_EV_COUNT], peers[DDPSPY_EV_COUNT], named_ms = 0;
		if (exc < MIN_EXCESS * step || beyond_peers(a, km, L, extra, peers) < 0)
			continue;
		for (int k = 0; k < DDPSPY_EV_COUNT; k++)
			named_ms += fmax(0, extra[k]);
		if (named_ms < 0.5 * exc)
			continue;
		/* Now: what the others wait for it, as far as its excess explains it. Once no thread waits
		 * for a CPU: the others' step shrinks by the contention's share, less the waits for L that
		 * it holds, and L's excess is then what each of them waits for it. */
		double now = fmin(waited, exc) / step, unc_step = fmax(step * (1 - c) - fmin(waited, exc), 0) + exc;
		if (late) { /* a straggler for its host calls on a contended host: what it costs once fixed */
			an_ev_num(late, "contention_share", c, 3);
			an_ev_num(late, "severity_uncontended", exc / unc_step, 3);
			continue;
		}
		struct finding *f = an_add_finding(a, "host_asymmetry", a->ranks[L].rank, now);
		if (!f)
			break;
		an_ev_num(f, "host_ms_per_step", own, 3);
		an_ev_num(f, "excess_ms_per_step", exc, 3);
		an_ev_num(f, "waited_for_ms_per_step", waited, 3);
		if (c > 0) {
			an_ev_num(f, "contention_share", c, 3);
			an_ev_num(f, "severity_uncontended", exc / unc_step, 3);
		}
		calls_evidence(f, a, L, km);
	}
	free(km);
	free(waits);
}
