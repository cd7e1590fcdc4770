/* Findings from the analysed steps, in the contract's vocabulary (straggler, rank0_serialization,
 * collective_volume or small_work, cpu_contention, work_skew, no_overlap, lost_events; data_stall
 * in finddata.c, the GPU's in findgpu.c): each measured into typed evidence (analysis.h), whose
 * words words.c composes, and sorted by severity. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/format.h"
#include "analysis_int.h"
#include "findings_int.h"
#include "trace.h"

static double median_step(const struct analysis *a)
{
	return a->step_p50 > 0 ? a->step_p50 : 1;
}

/* Rank-0 serialization: one collective (a barrier, a metrics all-reduce) that the same rank reaches
 * last, straight from host work, while every other rank waits there. Judged per operation, so
 * that the rest of the step (slower or noisier) does not hide it. Returns the rank's index, -1. */
static int find_serialized(struct analysis *a)
{
	struct stepdata *sd = a->sd;
	int R = a->nranks;
	size_t N = sd->K;
	if (R < 2 || !N || !a->ranks[0].steps)
		return -1;
	int64_t t0 = a->ranks[0].steps[0].t0, t1 = a->ranks[0].steps[N - 1].t1;
	/* by signature, operation and bytes: a metrics all-reduce (or NCCL's one-element barrier) is
	 * not the gradients' */
	enum { MAXSIG = 64 };
	struct sig { int op; int64_t bytes; double total; } sig[MAXSIG];
	int nsig = 0;
	double *cnt = calloc((size_t)MAXSIG * R, sizeof *cnt), *wsum = calloc((size_t)MAXSIG * R, sizeof *wsum);
	int best = -1, best_L = -1;
	if (!cnt || !wsum)
		goto out;
	for (size_t i = 0; i < sd->tab.cap; i++) {
		struct inst *in = &sd->tab.v[i];
		if (!in->key || in->n < R || in->op < 0 || in->op >= DDPSPY_OP_COUNT || in->min_arr < t0 || in->min_arr >= t1)
			continue;
		int s = 0;
		while (s < nsig && !(sig[s].op == in->op && sig[s].bytes == in->bytes))
			s++;
		if (s == MAXSIG)
			continue;
		if (s == nsig)
			sig[nsig++] = (struct sig){ in->op, in->bytes, 0 };
		sig[s].total++;
		if (in->late >= 0 && in->prev_cat == CAT_HOST && in->prev_gap < 2000000) {
			cnt[s * R + in->late]++;
			wsum[s * R + in->late] += in->wait_sum;
		}
	}
	for (int o = 0; o < nsig; o++)
		for (int L = 0; L < R; L++)
			if (sig[o].total >= 0.5 * (double)N && cnt[o * R + L] >= 0.7 * sig[o].total &&
			    (best < 0 || wsum[o * R + L] > wsum[best * R + best_L])) {
				best = o;
				best_L = L;
			}
	if (best < 0)
		goto out;
	/* what moving the work away wins: the others' mean wait there, per step */
	double wait = wsum[best * R + best_L] / (R - 1) / (double)N, sev = wait / median_step(a), host = 0;
	for (size_t k = 0; k < N; k++)
		host += sd->exc[(k * R + best_L) * CAT_COUNT + CAT_HOST] / (double)N;
	if (sev < 0.02) {
		best_L = -1;
		goto out;
	}
	int rank = a->ranks[best_L].rank, op = sig[best].op;
	struct finding *f = an_add_finding(a, "rank0_serialization", rank, sev);
	if (!f)
		goto out;
	an_ev_str(f, "op", an_op_name(op));
	an_ev_num(f, "bytes", (double)sig[best].bytes, 0);
	an_ev_num(f, "host_ms_per_step", host, 3);
	an_ev_num(f, "wait_ms_per_step", wait, 3);
	an_ev_num(f, "last_at", cnt[best * R + best_L], 0);
	an_ev_num(f, "instances", sig[best].total, 0);
	an_sites(f, a, best_L, CAT_HOST);
out:
	free(cnt);
	free(wsum);
	return best >= 0 ? best_L : -1;
}

/* the rank waited for the most in each step (dom[k], -1: none), from every rank's waits; sum:
 * room for R sums, left 0 */
static void late_each_step(const struct stepdata *sd, int R, size_t N, int *dom, double *sum)
{
	for (size_t k = 0; k < N; k++) {
		double best = 0;
		dom[k] = -1;
		for (int r = 0; r < R; r++) {
			size_t nw;
			const struct wfrom *wl = an_wfrom_step(sd, r, k, &nw);
			for (size_t i = 0; i < nw; i++)
				sum[wl[i].L] += wl[i].ms;
		}
		for (int L = 0; L < R; L++) {
			if (sum[L] > best) {
				best = sum[L];
				dom[k] = L;
			}
			sum[L] = 0;
		}
	}
}

/* stragglers: one rank that the others wait for, step after step (not the one find_serialized
 * already named, nor the ranks of a pipeline's slow stage: skip) */
static void find_late_ranks(struct analysis *a, int serialized, const char *skip)
{
	struct stepdata *sd = a->sd;
	int R = a->nranks;
	size_t N = sd->K;
	if (R < 2 || !N)
		return;
	int *dom = calloc(N, sizeof *dom);
	double *g = malloc(N * sizeof *g), *w = malloc(N * sizeof *w), *sum = calloc((size_t)R, sizeof *sum);
	if (!dom || !g || !w || !sum)
		goto out;
	late_each_step(sd, R, N, dom, sum);
	for (int L = 0; L < R; L++) {
		size_t cnt = 0;
		for (size_t k = 0; k < N; k++)
			cnt += dom[k] == L;
		/* a straggler is late nearly every step; work that varies makes a different rank late */
		if ((double)cnt < 0.7 * (double)N || L == serialized || (skip && skip[L]))
			continue;
		double by_op[DDPSPY_OP_COUNT] = { 0 };
		int op = -1;
		for (size_t i = 0; i < sd->tab.cap; i++) {
			struct inst *in = &sd->tab.v[i];
			if (in->key && in->late == L && in->wait_sum > 0 && in->op >= 0 && in->op < DDPSPY_OP_COUNT)
				by_op[in->op] += in->wait_sum;
		}
		/* waits in point-to-point calls (p2p.c): late sender, late receiver */
		double coll = 0, ls = sd->p2pL[2 * L + 1], lr = sd->p2pL[2 * L];
		for (int o = 0; o < DDPSPY_OP_COUNT; o++)
			coll += by_op[o];
		int p2p = ls + lr > coll;
		/* what fixing L wins: the least any other rank waited for it (the median over steps), as
		 * far as L's extra work (compute, input, host) over its peers explains it (its mean: a
		 * step's wait and excess vary apart, each rank's steps being its own, and the lesser of
		 * the two step by step falls short of both by that noise). A rank that is late
		 * only because its previous collective finished later (Open MPI completes a large
		 * nonblocking all-reduce on one rank well after the other) is not a straggler. When
		 * the others wait for it point to point, the mean: its neighbours wait for it directly,
		 * the others through them (p2p.c charges a wait passed on to its root), and a rank
		 * where that chain was not seen (its neighbour's own work in between ran long) does not
		 * decide alone. */
		double exc[CAT_COUNT] = { 0 };
		for (size_t k = 0; k < N; k++) {
			double least = INFINITY, mean = 0;
			for (int r = 0; r < R; r++) {
				if (r == L)
					continue;
				double x = an_wfrom(sd, r, k, L);
				least = fmin(least, x);
				mean += x / (R - 1);
			}
			const double *e = &sd->exc[(k * R + L) * CAT_COUNT];
			g[k] = p2p ? mean : least;
			w[k] = mean;
			for (int c = 0; c < CAT_COUNT; c++)
				exc[c] += e[c] / (double)N;
		}
		double sev = fmin(an_quantile(g, N, 0.5), exc[CAT_COMPUTE] + exc[CAT_DATA] + exc[CAT_HOST]) / median_step(a);
		double wait = an_quantile(w, N, 0.5);
		if (sev < 0.02)
			continue;
		int cause = CAT_COMPUTE;
		for (int c = 0; c < CAT_COUNT; c++)
			if (c != CAT_COMMS && exc[c] > exc[cause])
				cause = c;
		const double *pop = &sd->p2pop[(size_t)L * DDPSPY_OP_COUNT];
		for (int o = 0; o < DDPSPY_OP_COUNT; o++) /* where the others wait the most, in all */
			if (p2p ? pop[o] > 0 && (op < 0 || pop[o] > pop[op]) : by_op[o] > 0 && (op < 0 || by_op[o] > by_op[op]))
				op = o;
		int rank = a->ranks[L].rank;
		const char *cname = ddpspy_category_names[cause];
		const char *state = !p2p ? "collective" : ls >= lr ? "late_sender" : "late_receiver";
		struct finding *f = an_add_finding(a, "straggler", rank, sev);
		if (!f)
			break;
		an_ev_str(f, "cause", cname);
		an_ev_str(f, "wait_state", state);
		an_ev_int(f, "steps_late", (int64_t)cnt);
		an_ev_int(f, "steps", (int64_t)N);
		an_ev_num(f, "late_ms_p50", a->ranks[L].late_p50, 3);
		an_ev_num(f, "wait_ms_per_step", wait, 3);
		an_ev_str(f, "op", an_op_name(op));
		an_ev_num(f, "late_sender_ms_per_step", ls / (double)N / (R - 1), 3);
		an_ev_num(f, "late_receiver_ms_per_step", lr / (double)N / (R - 1), 3);
		an_ev_open(f, "excess_ms_per_step", FV_OBJ);
		an_ev_num(f, "compute", exc[CAT_COMPUTE], 3);
		an_ev_num(f, "data", exc[CAT_DATA], 3);
		an_ev_num(f, "host", exc[CAT_HOST], 3);
		an_ev_end(f);
		if (cause == CAT_HOST)
			an_host_calls(f, a, L);
		else if (cause == CAT_COMPUTE)
			an_sites(f, a, L, CAT_COMPUTE);
	}
out:
	free(dom);
	free(g);
	free(w);
	free(sum);
}

/* The cost of the collectives themselves: time in them not spent waiting for peers, as a share of
 * each rank's step (median over ranks). One finding names it, of one of two kinds:
 * - small_work (the strong-scaling trap) when that fixed cost is at least the rank's own work per
 *   step and is spread over the step's ordinary collectives: the batch per rank is too small for the
 *   synchronization every step pays, whatever the bytes; or when the collectives are latency-bound
 *   (below): what they cost is per call, not per byte. Its severity is the part of the step in
 *   which not even the busiest rank works, which gradient accumulation would amortize;
 * - collective_volume otherwise, or when a single call per step carries more bytes than all the
 *   other collectives of the step together (an extra all-reduce): the bytes are what to cut.
 * Latency-bound: the largest collective moves less per call than any link in use moves in its
 * own fixed latency (LATENCY_BYTES), or all of them move less than MIN_VOLUME_BPS over their time
 * beyond waiting; and a call costs no more than a collective's fixed latency can (MAX_LATENCY_MS:
 * longer is waits the collectives do not see, docs/report.md). */
#define MIN_VOLUME_BPS 1e7 /* bytes per second: slower than a 100 Mbit link at a tenth of its rate */
/* A link's half-bandwidth size, latency x bandwidth: TCP's 15 us or more at 1 GB/s or more, 15 KB;
 * InfiniBand's 2 us at 12.5 GB/s, 25 KB; NVLink's more. Below it a call is mostly fixed cost. */
#define LATENCY_BYTES 16384
#define MAX_LATENCY_MS 2.0

/* the ranks' median share of their steps in collectives beyond waiting for peers, in collectives
 * or in point-to-point calls (a pipeline's stages wait for each other there: 0: out of memory) */
static double comms_share(const struct analysis *a)
{
	size_t N = a->sd->K;
	double *x = malloc((size_t)a->nranks * sizeof *x);
	if (!x)
		return 0;
	for (int r = 0; r < a->nranks; r++) {
		double s = 0, len = 0;
		for (size_t k = 0; a->ranks[r].steps && k < N; k++) {
			struct rankstep *st = &a->ranks[r].steps[k];
			s += st->cat[CAT_COMMS] - st->wait - st->p2p[0] - st->p2p[1];
			len += MS(st->t1 - st->t0);
		}
		x[r] = len > 0 ? s / len : 0;
	}
	double sev = an_quantile(x, (size_t)a->nranks, 0.5);
	free(x);
	return sev;
}

/* The fixed cost per step, as more work per rank would amortize it: the part of the step in
 * which not even the busiest rank works (compute, input, host), against that rank's work;
 * medians over steps (a step the scheduler stalled does not decide). -1: out of memory */
static int fixed_cost(const struct analysis *a, double *sync_ms, double *work_ms)
{
	size_t N = a->sd->K;
	double *sk = malloc(2 * N * sizeof *sk), *wk;
	if (!sk)
		return -1;
	wk = sk + N;
	for (size_t k = 0; k < N; k++) {
		double len = 0, w = 0;
		for (int r = 0; r < a->nranks; r++) {
			if (!a->ranks[r].steps)
				continue;
			struct rankstep *st = &a->ranks[r].steps[k];
			len = fmax(len, MS(st->t1 - st->t0));
			w = fmax(w, st->cat[CAT_COMPUTE] + st->cat[CAT_DATA] + st->cat[CAT_HOST]);
		}
		sk[k] = fmax(0, len - w);
		wk[k] = w;
	}
	*sync_ms = an_quantile(sk, N, 0.5);
	*work_ms = an_quantile(wk, N, 0.5);
	free(sk);
	return 0;
}

/* the collectives of rank ri's training thread t (and of its helper threads when they run them)
 * in its analysed steps, in time order: *n of them (NULL: out of memory) */
static const struct ev **coll_calls(const struct rankinfo *ri, const struct thr *t, size_t N, size_t *n)
{
	int64_t t0 = ri->steps[0].t0, t1 = ri->steps[N - 1].t1;
	size_t ncall = 0, cap = 0; /* (ncall: *n) */
	for (int h = 0; h < ri->p->nthr; h++)
		cap += ri->p->thr[h].n;
	const struct ev **cl = malloc((cap + 1) * sizeof *cl);
	if (!cl)
		return NULL;
	for (int h = 0; h < ri->p->nthr; h++) {
		struct thr *u = &ri->p->thr[h];
		for (size_t i = 0; (u == t || ri->p->bg) && i < u->n && ncall < cap; i++) {
			const struct ev *e = &u->ev[i];
			if (e->t >= t0 && e->t < t1 && (an_kind(e->kind)->m & DDPSPY_KM_COLL))
				cl[ncall++] = e;
		}
	}
	sort_n(cl, ncall, sizeof *cl, an_cmp_evp);
	*n = ncall;
	return cl;
}

static void find_volume(struct analysis *a)
{
	struct stepdata *sd = a->sd;
	size_t N = sd->K;
	double sev = N ? comms_share(a) : 0;
	if (sev < 0.05)
		return;
	double sync_ms, work_ms;
	if (fixed_cost(a, &sync_ms, &work_ms) < 0)
		return;
	/* the biggest collectives of the lowest rank: its training thread's, or its helper threads'
	 * when they run them (gloo's, whose calls carry no byte count) */
	struct rankinfo *ri = &a->ranks[0];
	struct thr *t = an_train_thread(ri->p);
	if (!t || !ri->steps)
		return;
	size_t ncall;
	const struct ev **cl = coll_calls(ri, t, N, &ncall);
	if (!cl)
		return;
	/* Group the calls by op and size: the biggest is what to name. A call of unknown size
	 * (gloo's) is grouped by its place in the step instead: the third all-reduce of every step
	 * is one call site, however large. */
	struct grp { int op, blocking, nth; int64_t bytes; double calls, ms; } g[32];
	int ng = 0, unknown = 0, nth = 0;
	double all = 0, calls = 0, all_ms = 0;
	size_t k = 0;
	for (size_t i = 0; i < ncall; i++) {
		const struct ev *e = cl[i];
		size_t was = k;
		while (k + 1 < N && ri->steps[k].t1 <= e->t)
			k++;
		nth = i && k == was ? nth + 1 : 0;
		unknown |= e->bytes < 0;
		all += e->bytes > 0 ? (double)e->bytes : 0;
		all_ms += MS(e->d);
		calls++;
		int blocking = !(an_kind(e->kind)->m & DDPSPY_KM_NONBLOCKING), pos = e->bytes < 0 ? nth : -1;
		int j = 0;
		while (j < ng && !(g[j].op == e->op && g[j].bytes == e->bytes && g[j].blocking == blocking && g[j].nth == pos))
			j++;
		if (j == ng) {
			if (ng == 32)
				continue;
			g[ng++] = (struct grp){ e->op, blocking, pos, e->bytes, 0, 0 };
		}
		g[j].calls++;
		g[j].ms += MS(e->d);
	}
	free(cl);
	if (!ng)
		return;
	/* by bytes; where some are unknown, by time in them */
#define WEIGHT(x) (unknown ? (x).ms : (double)(x).bytes * (x).calls)
	int top = 0;
	for (int j = 1; j < ng; j++)
		if (WEIGHT(g[j]) > WEIGHT(g[top]))
			top = j;
	double per = g[top].calls / (double)N, top_bytes = (double)g[top].bytes * g[top].calls;
	int single = per < 1.1 && calls - g[top].calls >= 0.5 * (double)N &&
		     WEIGHT(g[top]) > (unknown ? all_ms : all) - WEIGHT(g[top]);
#undef WEIGHT
	/* A finding about bytes needs bytes that explain the time: the collectives' bytes per step over
	 * the time beyond waiting (what volume would cost) slower than MIN_VOLUME_BPS is not bandwidth
	 * but latency, or waits the collectives do not see (point-to-point, a late sender): cutting
	 * bytes would not win it back. Latency is a few such calls' fixed cost; the waits are not. */
	double coll_ms = sev * median_step(a), bps = all / (double)N / (coll_ms / 1e3);
	double call_ms = coll_ms * (double)N / calls;
	int latency = !unknown && call_ms <= MAX_LATENCY_MS &&
		      ((double)g[top].bytes < LATENCY_BYTES || bps < MIN_VOLUME_BPS);
	int small = latency || (!single && sync_ms >= work_ms);
	if (!small && !unknown && bps < MIN_VOLUME_BPS)
		return;
	/* latency-bound, the collectives' whole time beyond waiting is per-call cost that more work per
	 * call amortizes, however the step's medians split it from the work */
	double sw = sync_ms / (sync_ms + work_ms);
	struct finding *f = an_add_finding(a, small ? "small_work" : "collective_volume", -1,
					!small ? sev : latency ? fmax(sev, sw) : sw);
	if (!f)
		return;
	/* a gloo without the buffers ddpspy counts: sizes are then unknown, JSON null */
	int known = g[top].bytes >= 0;
	const char *op = an_op_name(g[top].op);
	/* a nonblocking call's own duration is only its start: time per op only for blocking ones */
	double op_ms = g[top].ms / (double)N, gbps = g[top].ms > 0 && known ? top_bytes / g[top].ms / 1e6 : 0;
	an_ev_str(f, "op", op);
	if (known)
		an_ev_int(f, "bytes", g[top].bytes);
	else
		an_ev_str(f, "bytes", NULL);
	an_ev_num(f, "calls_per_step", per, 2);
	if (known)
		an_ev_num(f, "bytes_per_step", (double)g[top].bytes * per, 0);
	else
		an_ev_str(f, "bytes_per_step", NULL);
	if (!unknown)
		an_ev_num(f, "all_bytes_per_step", all / (double)N, 0);
	else
		an_ev_str(f, "all_bytes_per_step", NULL);
	an_ev_num(f, "collectives_per_step", calls / (double)N, 2);
	an_ev_num(f, "ms_per_step", small && !latency ? sync_ms : coll_ms, 3);
	an_ev_num(f, "work_ms_per_step", work_ms, 3);
	if (g[top].blocking)
		an_ev_num(f, "op_ms_per_step", op_ms, 3);
	if (g[top].blocking && known)
		an_ev_num(f, "gbytes_per_s", gbps, 3);
	if (small) {
		an_ev_bool(f, "latency_bound", latency);
		an_ev_num(f, "call_ms", call_ms, 4);
	}
}

/* cpu_contention's severity on one rank: its training thread's share of the span runnable but
 * waiting for a CPU (runq), while it worked (working: the share not waiting for peers), in the part
 * of the CPUs' use that the job's other threads make (job, in cores) against what processes outside
 * the job make (outside) */
static double cpu_severity(double runq, double working, double job, double outside)
{
	return job + outside > 0 ? runq * working * job / (job + outside) : 0;
}

/* the finding's severity from the ranks' (x, n; reordered): the most's, *worst its index; *all 1
 * when the ranks' median is at least half of it (the job's, no one rank's) */
static double cpu_top(double *x, size_t n, int *worst, int *all)
{
	double hi = 0;
	*worst = 0;
	for (size_t r = 0; r < n; r++)
		if (x[r] > hi) {
			hi = x[r];
			*worst = (int)r;
		}
	*all = n > 1 && an_quantile(x, n, 0.5) >= 0.5 * hi; /* every rank (or most) alike: the job's */
	return hi;
}

/* CPU contention: the training thread runnable but waiting for a CPU, as far as the job's own
 * threads explain it (what they hold of the CPUs it may use, against what processes outside the
 * job hold: a host shared with another job is a warning, not a finding about this one), on the
 * rank where that is most, and who holds the CPUs */
#define MIN_CONTENTION 0.05
static void find_cpu(struct analysis *a)
{
	int worst = -1, n = 0, shared = -1;
	double *v = malloc((size_t)a->nranks * sizeof *v), *sev = calloc((size_t)a->nranks, sizeof *sev);
	if (!v || !sev) {
		free(v);
		free(sev);
		return;
	}
	for (int r = 0; r < a->nranks; r++) {
		const struct cpustat *c = &a->ranks[r].cpu;
		if (!c->have)
			continue;
		double jt = 0;
		for (int g = 0; g < CPU_GROUPS; g++)
			jt += c->cores[g];
		/* only while it works: a thread that spins in a wait for a late peer (MPI polls) and
		 * waits for a CPU meanwhile would have waited anyway */
		double working = fmax(0, 1 - a->ranks[r].wait_share - a->ranks[r].p2p_wait_share);
		sev[r] = cpu_severity(c->runq, working, jt, c->outside);
		v[n++] = sev[r];
		if (worst < 0 || sev[r] > sev[worst])
			worst = r;
		if (c->runq >= 0.1 && c->outside > jt && (shared < 0 || c->runq > a->ranks[shared].cpu.runq))
			shared = r;
	}
	int all = 0, top_i;
	double top_sev = worst >= 0 ? cpu_top(v, (size_t)n, &top_i, &all) : 0;
	free(v);
	free(sev);
	int refused = 0, first = -1;
	for (int r = 0; r < a->nranks; r++)
		if (a->ranks[r].p->sched_error[0] && (refused++, first < 0))
			first = r;
	if (refused)
		an_warn(a, "CPU contention was not measured on %d of %d ranks (rank %d: %s): ddpspy reads the threads' "
			"CPU time from a thread with a descriptor table of its own, and the process may not make one "
			"(a seccomp profile, such as Docker's default, refuses unshare)", refused, a->nranks,
			a->ranks[first].rank, a->ranks[first].p->sched_error);
	if (shared >= 0)
		an_warn(a, "the host was shared: rank %d's training thread waited for a CPU %.0f%% of its steps while processes "
			"outside the job held %.1f of %s's %d CPUs; its timings are stretched by them", a->ranks[shared].rank,
			100 * a->ranks[shared].cpu.runq, a->ranks[shared].cpu.outside, a->ranks[shared].p->host,
			a->ranks[shared].cpu.host_cpus);
	if (worst < 0 || top_sev < MIN_CONTENTION)
		return;
	const struct rankinfo *ri = &a->ranks[worst];
	const struct cpustat *c = &ri->cpu;
	int top = 0;
	double demand = c->on_cpu + c->runq;
	for (int g = 0; g < CPU_GROUPS; g++) {
		demand += c->cores[g] + c->waiting[g];
		if (c->cores[g] > c->cores[top])
			top = g;
	}
	int avail = c->process ? c->cpus : c->host_cpus;
	struct finding *f = an_add_finding(a, "cpu_contention", all ? -1 : ri->rank, top_sev);
	if (!f)
		return;
	an_ev_int(f, "rank_shown", ri->rank);
	an_ev_str(f, "host", ri->p->host);
	an_ev_str(f, "scope", c->process ? "process" : "host");
	an_ev_int(f, "cpus", avail);
	an_ev_num(f, "runqueue_share", c->runq, 3);
	an_ev_num(f, "on_cpu_share", c->on_cpu, 3);
	an_ev_str(f, "top", an_cpu_group_names[top]);
	an_ev_num(f, "cpus_wanted", demand, 2);
	an_ev_open(f, "cpus_held", FV_OBJ);
	for (int g = 0; g < CPU_GROUPS; g++)
		an_ev_num(f, an_cpu_group_names[g], c->cores[g], 2);
	an_ev_num(f, "outside_job", c->outside, 2);
	an_ev_end(f);
	an_ev_open(f, "threads", FV_OBJ);
	for (int g = 0; g < CPU_GROUPS; g++)
		an_ev_int(f, an_cpu_group_names[g], c->threads[g]);
	an_ev_end(f);
}

/* work that differs between ranks, with the slowest rank changing from step to step */
static void find_skew(struct analysis *a)
{
	struct stepdata *sd = a->sd;
	size_t N = sd->K;
	int R = a->nranks;
	if (R < 2 || !N)
		return;
	int *cnt = calloc((size_t)R, sizeof *cnt), changes = 0, pairs = 0, prev = -1;
	double *off = calloc((size_t)R, sizeof *off), *v = malloc(2 * N * sizeof *v), *mk;
	if (!cnt || !off || !v) {
		free(cnt);
		free(off);
		free(v);
		return;
	}
	mk = v + N;
	/* Skew is what varies from step to step. A rank that is steadily slower (a slower core, more
	 * data every step) is a straggler's, found by find_late_ranks: each rank's compute is first
	 * divided by its median ratio to the ranks' mean in the same step, so that it neither counts
	 * as skew nor makes that rank the slowest every step. A ratio, not a difference: where steps
	 * differ in size (length buckets), a slower core costs each step in proportion. */
#define COMP(r, k) (a->ranks[r].steps ? a->ranks[r].steps[k].cat[CAT_COMPUTE] : 0)
	for (size_t k = 0; k < N; k++) { /* the ranks' mean compute in each step */
		mk[k] = 0;
		for (int q = 0; q < R; q++)
			mk[k] += COMP(q, k) / R;
	}
	for (int r = 0; r < R; r++) {
		size_t m = 0;
		for (size_t k = 0; k < N; k++)
			if (mk[k] > 0)
				v[m++] = COMP(r, k) / mk[k];
		off[r] = m ? an_quantile(v, m, 0.5) : 1;
		if (!(off[r] > 0))
			off[r] = 1;
	}
	free(v);
	double sev = 0, spread = 0;
	for (size_t k = 0; k < N; k++) {
		double mx = -INFINITY, mean = 0;
		int am = 0;
		for (int r = 0; r < R; r++) {
			double c = COMP(r, k) / off[r];
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
		/* consecutive steps only (a sample keeps blocks of them) */
		int adjacent = k && sd->gidx[k] == sd->gidx[k - 1] + 1;
		pairs += adjacent;
		changes += adjacent && prev >= 0 && am != prev;
		prev = am;
	}
#undef COMP
	int most = 0;
	for (int r = 0; r < R; r++)
		most = cnt[r] > most ? cnt[r] : most;
	free(cnt);
	free(off);
	double share = (double)most / (double)N;
	/* Noise on a shared machine makes one rank slower for a while; skew makes the slowest change
	 * often. One rank slowest in far more steps than chance gives it (three standard deviations
	 * above N / R; with 2 ranks a coin flip, 74% of 40 steps) or in 60% of them is not skew. */
	double p = 1.0 / R, most_max = fmax(0.6, p + 3 * sqrt(p * (1 - p) / (double)N));
	if (sev < 0.03 || share >= most_max || changes < 0.3 * (double)pairs)
		return;
	struct finding *f = an_add_finding(a, "work_skew", -1, sev);
	if (!f)
		return;
	an_ev_num(f, "compute_spread_ms_per_step", spread, 3);
	an_ev_num(f, "slowest_rank_share", share, 3);
	an_ev_int(f, "slowest_rank_changes", changes);
	an_ev_int(f, "steps", (int64_t)N);
}

/* gradient all-reduces after backward, back to back, none started during it */
static void find_overlap(struct analysis *a)
{
	struct stepdata *sd = a->sd;
	size_t N = sd->K;
	struct rankinfo *ri = &a->ranks[0];
	if (!N || !ri->steps)
		return;
	const struct trainfold *tf = &sd->fold[0];
	double nb = tf->runs, bytes = tf->run_bytes, ms = tf->run_ms, nic = tf->icoll;
	double wait = 0;
	for (size_t k = 0; k < N; k++)
		wait += ri->steps[k].wait;
	double sev = (ms - wait) / (double)N / median_step(a);
	if (nic > 0 || nb < 2 * (double)N || sev < 0.02)
		return;
	struct finding *f = an_add_finding(a, "no_overlap", -1, sev);
	if (!f)
		return;
	an_ev_num(f, "allreduces_per_step", nb / (double)N, 1);
	an_ev_num(f, "bytes_per_step", bytes / (double)N, 0);
	an_ev_num(f, "ms_per_step", ms / (double)N, 3);
}

static void find_lost(struct analysis *a)
{
	for (int i = 0; i < a->nprocs; i++) {
		struct proc *p = &a->procs[i];
		if (p->role != DDPSPY_ROLE_RANK && p->role != DDPSPY_ROLE_WORKER)
			continue;
		int cut = !p->ended && !p->part.hi; /* (a span's file goes on past it: watch) */
		if (!p->dropped && !p->unwritten && !p->gpu_dropped && !p->write_error[0] && !p->damaged && !cut)
			continue;
		uint64_t lost = p->dropped + p->unwritten + p->gpu_dropped, all = p->events + p->gpu_records + lost;
		double frac = all ? (double)lost / (double)all : 0;
		int rank = p->role == DDPSPY_ROLE_RANK ? p->rank : p->parent_rank;
		struct finding *f = an_add_finding(a, "lost_events", rank >= 0 ? rank : -1,
						p->damaged || cut ? fmax(frac, 0.01) : frac);
		if (!f)
			return;
		an_ev_str(f, "file", p->file);
		an_ev_int(f, "recorded", (int64_t)p->events);
		an_ev_int(f, "dropped", (int64_t)p->dropped);
		an_ev_int(f, "unwritten", (int64_t)p->unwritten);
		an_ev_int(f, "gpu_dropped", (int64_t)p->gpu_dropped);
		an_ev_bool(f, "complete", p->ended && !p->damaged);
		an_ev_hidden_num(f, "pid", p->pid);
		an_ev_hidden_num(f, "lost_share", frac);
		an_ev_hidden_num(f, "damaged", p->damaged);
		an_ev_hidden_num(f, "ended", p->ended);
		an_ev_hidden_str(f, "write_error", p->write_error);
		an_ev_hidden_str(f, "error", p->error);
	}
}

static int cmp_finding(const void *x, const void *y)
{
	const struct finding *a = x, *b = y;
	return AN_ORDER(b->severity, a->severity);
}

void an_find_all(struct analysis *a)
{
	an_find_hang(a);
	find_lost(a);
	if (a->nsteps > 0) {
		/* (a pipeline's slow stage is its stage_imbalance, not also a straggler) */
		char *slow = calloc((size_t)a->nranks, 1);
		if (slow)
			an_find_pipeline(a, slow);
		find_late_ranks(a, find_serialized(a), slow);
		free(slow);
		an_find_data(a);
		find_cpu(a);
		an_find_host(a);
		find_skew(a);
		if (an_gpu_ranks(a)) {
			an_find_gpu(a); /* the device's timeline says what the host's enqueueing calls cannot */
			an_find_exposed(a);
		} else {
			find_volume(a);
			find_overlap(a);
		}
	}
	sort_n(a->findings, (size_t)a->nfindings, sizeof *a->findings, cmp_finding);
	/* a hang first: whatever else the steps before it say, the job no longer runs */
	for (int i = 1; i < a->nfindings; i++)
		if (!strcmp(a->findings[i].kind, "hang")) {
			struct finding h = a->findings[i];
			memmove(&a->findings[1], &a->findings[0], (size_t)i * sizeof *a->findings);
			a->findings[0] = h;
			break;
		}
}
