/* Step patterns: a training thread's synchronizing calls (the calls steps are found by: the
 * rank's collectives and their waits, or in a program that mostly sends and receives, its
 * point-to-point calls), the period with which they repeat (best_period's scores), where each
 * rank's steps begin by that pattern, and the time windows used where nothing repeats. Under
 * steps.c and sweep.c (steps_int.h). */
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/format.h"
#include "analysis_int.h"
#include "steps_int.h"
#include "trace.h"

/* whether e, a call of p's thread u, is one that steps are found by: the rank's synchronizing
 * calls (an_rank_sync), or in a program that communicates point to point more than it makes
 * collectives, its training thread's point-to-point calls and the waits that complete them */
int an_step_call(int p2p, const struct proc *p, const struct thr *u, const struct ev *e)
{
	if (!p2p)
		return an_rank_sync(p, u, e);
	return u == an_train_thread(p) && (an_is_msg(e) || an_completes(e));
}

static int cmp_seq(const void *x, const void *y)
{
	const struct ev *a = *(const struct ev *const *)x, *b = *(const struct ev *const *)y;
	return AN_ORDER(a->seq, b->seq) ? AN_ORDER(a->seq, b->seq) : AN_ORDER(a->t, b->t);
}

/* A library's helper threads (gloo's) start collectives the program issued one after the other at
 * nearly the same time: by their starts, two of them may swap places from one step to the next,
 * and the pattern with them. Where calls of one operation stand in time order, they are put in
 * the order they were numbered in, which is the order they were issued. */
static void issue_order(struct sync *s)
{
	const struct ev **v = malloc((s->n + 1) * sizeof *v);
	size_t *at = malloc((s->n + 1) * sizeof *at);
	for (int op = 0; v && at && op < DDPSPY_OP_COUNT; op++) {
		size_t m = 0;
		for (size_t i = 0; i < s->n; i++)
			if (s->e[i]->op == op && s->e[i]->seq >= 0 && an_blocking_coll(s->e[i])) {
				at[m] = i;
				v[m++] = s->e[i];
			}
		sort_n(v, m, sizeof *v, cmp_seq);
		for (size_t j = 0; j < m; j++)
			s->e[at[j]] = (struct ev *)v[j];
	}
	free(v);
	free(at);
}

void an_sync_list(struct proc *p, struct sync *s, int p2p)
{
	struct thr *t = an_train_thread(p);
	size_t n = 0;
	for (int h = 0; h < p->nthr; h++)
		n += p->thr[h].n;
	s->e = malloc((n + 1) * sizeof *s->e);
	s->n = 0;
	if (!s->e || !t)
		return;
	for (int h = 0; h < p->nthr; h++) {
		struct thr *u = &p->thr[h];
		if (u != t && (!p->bg || p2p))
			continue;
		for (size_t k = 0; k < u->n && s->n < n; k++)
			if (an_step_call(p2p, p, u, &u->ev[k]))
				s->e[s->n++] = &u->ev[k];
	}
	if (p->bg && !p2p) {
		sort_n(s->e, s->n, sizeof *s->e, an_cmp_evp);
		issue_order(s);
	}
	/* of threads with more calls than the prefix, only calls up to the earliest one's last kept
	 * call are all there */
	int64_t cut = INT64_MAX;
	for (int h = 0; h < p->nthr; h++) {
		const struct thr *u = &p->thr[h];
		if ((u == t || (p->bg && !p2p)) && u->n < u->nsync && u->n && u->ev[u->n - 1].t < cut)
			cut = u->ev[u->n - 1].t;
	}
	while (s->n && s->e[s->n - 1]->t > cut)
		s->n--;
}

int an_same_sig(const struct ev *x, const struct ev *y)
{
	return x->kind == y->kind && x->op == y->op && x->bytes == y->bytes;
}

/* ns between the end of sync call i - 1 and the start of call i (negative when they overlap) */
static double gap_before(const struct sync *s, size_t i)
{
	return (double)(s->e[i]->t - (s->e[i - 1]->t + s->e[i - 1]->d));
}

/* the window of calls the period is judged on: up to 2048 from the second quarter on (start-up is
 * irregular) */
static void judge_window(const struct sync *s, size_t *lo, size_t *hi)
{
	*lo = s->n / 4 ? s->n / 4 : 1;
	*hi = *lo + 2048 < s->n ? *lo + 2048 : s->n;
}

/* How clearly period p puts one long pause among the gaps before calls: the longest per-phase
 * quantile qt of the gaps (the median: 0.5) over the mean gap. A multiple of the true period
 * scores the same or, by chance, better; a wrong one, about 1. */
static double period_score(const struct sync *s, size_t p, double qt)
{
	size_t lo, hi;
	judge_window(s, &lo, &hi);
	double mx = 0, sum = 0, *g = malloc(((hi - lo) / p + 2) * sizeof *g);
	if (!g || hi <= lo)
		return free(g), 0;
	for (size_t i = lo; i < hi; i++)
		sum += fmax(0, gap_before(s, i));
	for (size_t b = 0; b < p; b++) {
		size_t m = 0;
		for (size_t i = lo + b; i < hi; i += p)
			g[m++] = fmax(0, gap_before(s, i));
		if (m)
			mx = fmax(mx, an_quantile(g, m, qt));
	}
	free(g);
	return sum > 0 ? mx / (sum / (double)(hi - lo)) : 0;
}

struct ranked { double v; size_t i; };

static int cmp_ranked(const void *x, const void *y)
{
	const struct ranked *a = x, *b = y;
	return AN_ORDER(a->v, b->v);
}

/* the upper quantile of a chi-square of k degrees of freedom z standard deviations out (Wilson and
 * Hilferty's cube-root normal approximation) */
static double chi2_upper(double k, double z)
{
	double a = 2 / (9 * k), c = 1 - a + z * sqrt(a);
	return k * c * c * c;
}

/* the standard normal's upper quantile for tail probability p (Abramowitz and Stegun 26.2.23,
 * within 4.5e-4) */
static double z_upper(double p)
{
	double t = sqrt(-2 * log(p));
	return t - (2.515517 + 0.802853 * t + 0.010328 * t * t) / (1 + 1.432788 * t + 0.189269 * t * t +
								   0.001308 * t * t * t);
}

#define PERIOD_ALPHA 1e-3 /* the chance that any of the periods tried passes when none is there */

/* The period that best explains the gaps between look-alike calls: the largest F statistic of a
 * one-way analysis of variance of the gaps' ranks grouped by phase (ranks, so that one long
 * hiccup does not decide). A multiple k*P of the true period explains no more than P does but
 * spends k times the degrees of freedom, so unlike the pause score it is not favoured by chance.
 * 0 when there is too little to judge. */
static size_t best_period(const struct sync *s, size_t maxp)
{
	size_t lo, hi;
	judge_window(s, &lo, &hi);
	size_t N = hi > lo ? hi - lo : 0, P = 0;
	struct ranked *r = N > maxp ? malloc(N * sizeof *r) : NULL;
	double *rank = r ? malloc(N * sizeof *rank) : NULL, *sum = rank ? malloc(maxp * sizeof *sum) : NULL;
	size_t *cnt = sum ? malloc(maxp * sizeof *cnt) : NULL;
	if (!cnt)
		goto out;
	for (size_t i = 0; i < N; i++)
		r[i] = (struct ranked){ fmax(0, gap_before(s, lo + i)), i };
	sort_n(r, N, sizeof *r, cmp_ranked);
	for (size_t i = 0, j; i < N; i = j) { /* ties share their mean rank (overlapping calls: many 0s) */
		for (j = i + 1; j < N && r[j].v == r[i].v; j++)
			;
		for (size_t k = i; k < j; k++)
			rank[r[k].i] = (double)(i + j - 1) / 2;
	}
	double mean = (double)(N - 1) / 2, sst = 0, bestF = -1, bestH = 0;
	for (size_t i = 0; i < N; i++)
		sst += (rank[i] - mean) * (rank[i] - mean);
	for (size_t p = 2; p <= maxp; p++) {
		memset(sum, 0, p * sizeof *sum);
		memset(cnt, 0, p * sizeof *cnt);
		for (size_t i = 0; i < N; i++) {
			sum[i % p] += rank[i];
			cnt[i % p]++;
		}
		double ssb = 0;
		for (size_t b = 0; b < p; b++)
			ssb += cnt[b] ? (sum[b] / (double)cnt[b] - mean) * (sum[b] / (double)cnt[b] - mean) * (double)cnt[b] : 0;
		double ssw = sst - ssb, F = ssw > 1e-9 * sst ? (ssb / (double)(p - 1)) / (ssw / (double)(N - p)) : INFINITY;
		if (F > bestF) {
			bestF = F;
			P = p;
			bestH = (double)(N - 1) * ssb / sst;
		}
	}
	/* Kruskal-Wallis: the gaps' ranks by phase, H = (N - 1) ssb / sst, is chi-square with P - 1
	 * degrees of freedom when the phases do not differ. The best of maxp - 1 periods passes by
	 * chance far more often than one: each is held to PERIOD_ALPHA / (maxp - 1) (Bonferroni). A
	 * step's pause is far beyond (its phase holds the top ranks), even on a long trace's first 32
	 * calls: two calls a step, 24 gaps perfectly apart, H 17.3 against 12.6 needed. */
	if (P && !(bestH >= chi2_upper((double)(P - 1), z_upper(PERIOD_ALPHA / (double)(maxp - 1)))))
		P = 0;
out:
	free(r), free(rank), free(sum), free(cnt);
	return P;
}

/* the share of calls whose signature differs from the call p later's; 2 when p cannot be the
 * period: start-up and tear-down calls (a first check, a final gather) break a few matches, up to
 * two periods' worth, but never a third of the comparisons, or a run of only three periods would
 * pass whatever its calls (irregular collectives, no pattern at all) */
static double mismatch(const struct sync *s, size_t p)
{
	size_t n = s->n, same = 0;
	if (n / p < 3)
		return 2;
	for (size_t i = 0; i + p < n; i++)
		same += an_same_sig(s->e[i], s->e[i + p]);
	double extra = fmin(2.0 * (double)p, (double)(n - p) / 3), miss = (double)(n - p - same);
	return miss <= 0.2 * (double)(n - p) + extra ? miss / (double)(n - p) : 2;
}

static int blocks(const struct ev *e)
{
	return !(an_kind(e->kind)->m & DDPSPY_KM_NONBLOCKING);
}

/* a gradient reduction started without waiting (a reduce-scatter, an all-reduce): what the
 * backward of a sharded step leaves behind it, layer by layer */
static int reduction_post(const struct ev *e)
{
	return !blocks(e) && (e->op == DDPSPY_OP_REDUCE_SCATTER || e->op == DDPSPY_OP_REDUCE_SCATTER_BLOCK ||
			      e->op == DDPSPY_OP_ALLREDUCE);
}

/* a blocking gather of parameters (an all-gather, a broadcast): what a sharded layer needs before
 * its forward or its backward, so the first of a step begins it */
static int blocking_gather(const struct ev *e)
{
	return an_blocking_coll(e) &&
	       (e->op == DDPSPY_OP_ALLGATHER || e->op == DDPSPY_OP_ALLGATHERV || e->op == DDPSPY_OP_BCAST);
}

/* The phase of a sharded step (FSDP, ZeRO-3), which blocks many times a period (each layer's
 * all-gather, or the wait for it) and so has no one blocking run: the step ends with the run of
 * blocking calls after the last gradient reduction it starts (the one the longest stretch of calls
 * follows before the next: the backward's last layer, before the optimizer and the next forward),
 * up to a blocking all-gather, which is the next step's first layer. The period's calls are
 * s->e[at ..], P of them. -1 when it starts no reduction. */
static long sharded_phase(const struct sync *s, size_t at, size_t P)
{
	long last = -1;
	size_t most = 0;
	for (size_t b = 0; b < P; b++) {
		if (!reduction_post(s->e[at + b]))
			continue;
		size_t d = 1;
		while (d < P && !reduction_post(s->e[at + (b + d) % P]))
			d++;
		if (d > most) {
			most = d;
			last = (long)b;
		}
	}
	if (last < 0)
		return -1;
	size_t b = (size_t)last + 1, end = (size_t)last + P;
	while (b < end && !blocks(s->e[at + b % P]))
		b++;
	while (b < end && blocks(s->e[at + b % P]) && !blocking_gather(s->e[at + b % P]))
		b++;
	return (long)(b % P);
}

/* The phase of a pipeline stage's step, whose micro-batches make the same point-to-point calls
 * over and over: after the one call of the period that looks like no other, where that is a wait
 * that completes requests (the stage's sends, waited for before the optimizer). The gaps alone
 * leave it to chance: the last stage's longest pause may be its first backward, after the last
 * forward. The period's calls are s->e[at ..], P of them; -1 when it is not that shape. */
static long pipeline_phase(const struct sync *s, size_t at, size_t P)
{
	long u = -1;
	int p2p = 0;
	for (size_t b = 0; b < P; b++) {
		const struct ev *e = s->e[at + b];
		size_t same = 0;
		p2p |= an_is_msg(e);
		for (size_t c = 0; c < P && !same; c++)
			same += c != b && an_same_sig(e, s->e[at + c]);
		if (!same) {
			if (u >= 0)
				return -1;
			u = (long)b;
		}
	}
	return p2p && u >= 0 && an_completes(s->e[at + (size_t)u]) ? (long)(((size_t)u + 1) % P) : -1;
}

/* A few calls that alternate (a 1F1B pipeline stage's receives and sends, its host only enqueueing
 * them) match at their alternation's period P too: the multiple of it whose pause the gaps show
 * clearly (1.4 times the mean gap), and far more clearly than at P (1.5 times), is the step; of
 * multiples that show it within 10% as well, the least. By each phase's lower quartile, not its
 * median: half a step's phase holds the pause every other time, and a median of as many pauses as
 * short gaps may be a pause. P when none; up to maxp calls a step. Only where the calls are messages
 * (a collective's period is the step, and a slower step every other one must not join two). */
static size_t paused_multiple(const struct sync *s, size_t P, size_t maxp)
{
	double best = 0, sc[129] = { 0 };
	size_t mid = (s->n / P / 2) * P;
	for (size_t b = 0; b < P; b++)
		if (mid + b >= s->n || !an_is_msg(s->e[mid + b]))
			return P;
	for (size_t q = 2 * P; q <= maxp && q / P < 129; q += P)
		best = fmax(best, sc[q / P] = period_score(s, q, 0.25));
	for (size_t q = 2 * P; q <= maxp && q / P < 129; q += P)
		if (sc[q / P] >= 0.9 * best)
			return sc[q / P] >= 1.4 && sc[q / P] >= 1.5 * period_score(s, P, 0.25) ? q : P;
	return P;
}

/* The phase of a step of P calls on s: the index (below P) of its first call, modulo P; -1 out of
 * memory. Where a period that starts nonblocking collectives also blocks in one run of calls (the
 * waits that complete them, and any blocking collective right after), the call after that run: a
 * DDP step waits for its buckets' all-reduces before the optimizer, then loads and computes the
 * next. Where it blocks in several runs and starts gradient reductions (a sharded step:
 * sharded_phase), after the run that completes the last of them; a pipeline stage's, after its one
 * call that looks like no other (pipeline_phase). Else where the gap before a call is longest
 * (data loading and forward come first). The gaps alone leave the first case to chance, and a
 * reading of the first calls only (a long trace's) to another chance: one sample per rank
 * computes about as long before its first bucket as between buckets, and a busy machine
 * stretches either. */
static long step_phase(const struct sync *s, size_t P)
{
	size_t n = s->n;
	size_t best = 0, runs = 0, mid0 = (n / P / 2) * P;
	int nonblocking = 0;
	for (size_t b = 0; P > 1 && b < P && mid0 + P <= n; b++) {
		int blk = blocks(s->e[mid0 + b]), next = blocks(s->e[mid0 + (b + 1) % P]);
		nonblocking |= !blk;
		if (blk && !next) { /* (a blocking run ends at b) */
			runs++;
			best = (b + 1) % P;
		}
	}
	double best_gap = nonblocking && runs == 1 ? INFINITY : -1;
	long sharded = nonblocking && runs > 1 ? sharded_phase(s, mid0, P) : -1, piped = -1;
	if (sharded >= 0) {
		best = (size_t)sharded;
		best_gap = INFINITY;
	} else if (P >= 3 && mid0 + P <= n && (piped = pipeline_phase(s, mid0, P)) >= 0) {
		best = (size_t)piped;
		best_gap = INFINITY;
	}
	for (size_t b = 0; best_gap < INFINITY && b < P; b++) {
		size_t m = 0;
		double *g = malloc((n / P + 1) * sizeof *g);
		if (!g)
			return -1;
		for (size_t i = b; i < n; i += P)
			if (i > 0)
				g[m++] = gap_before(s, i);
		double med = an_quantile(g, m, 0.5);
		free(g);
		if (m && med > best_gap) {
			best_gap = med;
			best = b;
		}
	}
	return (long)best;
}

int an_find_pattern(struct sync *s, struct pattern *pt)
{
	size_t n = s->n, P = 0;
	double fit = 2;
	for (size_t p = 1; p <= n / 3 && !P; p++)
		if ((fit = mismatch(s, p)) <= 1)
			P = p;
	if (!P)
		return -1;
	/* On a short list those two periods' worth let a wrong period pass before the true one (8
	 * for a halo exchange's 9 calls in 128: a third of them differ): a longer one up to twice
	 * the first that matches better is the period (its multiples match as well, not better).
	 * Twice the first one must match much better: it always matches a little better where the
	 * start-up's odd calls are most of the mismatches, since fewer comparisons reach them.
	 * (Calls that all look alike are left to their gaps, below.) */
	for (size_t p = P + 1, P1 = P; P > 1 && p <= 2 * P && p <= n / 3 && fit > 0; p++) {
		double m = mismatch(s, p);
		if (m < (p % P1 ? fit : fit / 2)) {
			fit = m;
			P = p;
		}
	}
	/* Where the first period matches only roughly, a longer one that matches almost exactly is the
	 * step: a pipeline stage makes the same calls for each of its micro-batches, so that one call
	 * a step matches but where the step's micro-batches begin and end (3 calls of 17 differ with 8
	 * micro-batches). The shortest up to 512 calls whose calls differ at most 2% and a quarter as
	 * often as the first's. */
	if (fit > 0.05)
		for (size_t p = P + 1; p <= n / 3 && p <= 512; p++) {
			double m = mismatch(s, p);
			if (m <= 0.02 && m <= fit / 4) {
				fit = m;
				P = p;
				break;
			}
		}
	size_t maxp = (n - n / 4) / 8 < 128 ? (n - n / 4) / 8 : 128;
	if (P == 1) {
		/* Calls that all look alike (gloo's carry no byte count: every all-reduce matches every
		 * other) match at every period. A step is where a long pause recurs among short gaps: the
		 * period that best explains the gaps (with 8 calls per phase to judge by), if it shows
		 * the pause clearly (1.4 times the mean gap); else one call per step. */
		size_t p = maxp >= 2 ? best_period(s, maxp) : 0;
		if (p >= 2 && period_score(s, p, 0.5) >= 1.4)
			P = p;
		else /* (a long step of alike messages: one phase of many holds the pause, too few ranks
		      * for that test; an enqueueing pipeline stage's 32 receives, then 32 sends) */
			P = paused_multiple(s, 1, maxp);
	} else if (P <= 8) {
		P = paused_multiple(s, P, maxp);
	}
	long best = step_phase(s, P);
	if (best < 0)
		return -1;
	/* the longest run of whole periods matching the middle period's signature */
	size_t mid = (size_t)best + (n / P / 2) * P;
	if (mid + P > n)
		mid = (size_t)best;
	size_t first = SIZE_MAX, count = 0, run_first = 0, run = 0;
	for (size_t i = best ? (size_t)best : P; i + P <= n; i += P) {
		int match = 1;
		for (size_t j = 0; j < P && match; j++)
			match = an_same_sig(s->e[i + j], s->e[mid + j]);
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
	if (first == SIZE_MAX || count < 1) /* (runs start at index 1 or later: e[first-1] exists) */
		return -1;
	pt->period = P;
	pt->first = first;
	pt->nsteps = count;
	pt->end = first + count * P;
	for (size_t j = 0; j < P; j++)
		if (s->e[first + j]->seq >= 0) {
			pt->key_comm = s->e[first + j]->comm;
			pt->key_seq = s->e[first + j]->seq;
			pt->key_delta = j;
			return 0;
		}
	/* (NCCL's sends and receives carry no sequence number: their messages map steps across
	 * ranks, p2p_align in steps.c; key_seq -1 maps none by collectives) */
	for (size_t j = 0; j < P; j++)
		if (an_nccl_p2p(s->e[first + j]) && s->e[first + j]->order >= 0) {
			pt->key_comm = s->e[first + j]->comm;
			pt->key_seq = -1;
			pt->key_delta = j;
			return 0;
		}
	return -1; /* no sequence number to map steps across ranks with */
}

/* boundaries of rank's steps; returns the number of boundaries (steps + 1), 0 when not found */
/* the index of the rank's first call of the first step, SIZE_MAX when its sync list does not
 * show it */
size_t an_rank_first(const struct sync *s, const struct pattern *pt)
{
	for (size_t i = 0; i < s->n; i++)
		if (s->e[i]->seq == pt->key_seq && s->e[i]->comm == pt->key_comm)
			return i < pt->key_delta + 1 ? SIZE_MAX : i - pt->key_delta;
	return SIZE_MAX;
}

size_t an_rank_bounds(struct sync *s, const struct pattern *pt, size_t first, int64_t *b)
{
	size_t nb = 0;
	if (first == SIZE_MAX)
		return 0;
	for (size_t k = 0; k <= pt->nsteps; k++) {
		size_t i = first + k * pt->period;
		if (i > s->n)
			break;
		b[nb++] = s->e[i - 1]->t + s->e[i - 1]->d;
	}
	return nb;
}

/* the time span every rank's training thread covers (lo > hi: none) */
void an_common_span(struct analysis *a, int64_t *lo, int64_t *hi)
{
	*lo = INT64_MIN;
	*hi = INT64_MAX;
	for (int r = 0; r < a->nranks; r++) {
		struct thr *t = an_train_thread(a->ranks[r].p);
		if (!t || t->first > t->last)
			continue;
		*lo = t->first > *lo ? t->first : *lo;
		*hi = t->last < *hi ? t->last : *hi;
	}
}

/* boundary k of K equal time windows over [lo, hi] */
int64_t an_window_at(int64_t lo, int64_t hi, size_t k, size_t K)
{
	return lo + (int64_t)((double)(hi - lo) * (double)k / (double)K);
}
