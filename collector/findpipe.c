/* A pipeline-parallel job's findings: pipeline_bubble (the idle its schedule leaves on each stage,
 * beside what GPipe's and 1F1B's predict for S stages and M micro-batches) and stage_imbalance (a
 * stage that works longer per micro-batch than the others, which its neighbours wait for). A job
 * is a pipeline when its steps are found from point-to-point calls and its ranks pass messages
 * along chains of the same length S >= 2, M >= 2 of them a step each way between neighbours, with
 * one end of each chain beginning its steps by sending (stage 0: the forward) and the other by
 * receiving; a halo exchange's ranks begin theirs alike. From the training threads' kept
 * point-to-point calls in the analysed steps and the split's figures. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../common/format.h"
#include "analysis_int.h"
#include "findings_int.h"

#define MIN_PIPE 0.05 /* of the step: a bubble or an imbalance smaller is not named */
#define MAX_STAGES 256

struct pipejob {
	int R, S, M, chains;
	int *stage;        /* per rank index: its stage, -1 when none */
	int *first;        /* per stage: its first rank index (of the first chain) */
	double *work;      /* per stage: ms of work per step (compute, data, host), over its ranks */
	double *idle;      /* per stage: the share of its step waiting in point-to-point calls */
	int interleaved;   /* stage 0 receives a gradient before its last forward send (1F1B) */
	int device;        /* its ranks' steps and waits are their devices' (NCCL's sends and receives) */
};

/* the index of the rank that is crank in comm, -1 none */
static int rank_in(const struct analysis *a, int32_t comm, int32_t crank)
{
	for (int q = 0; q < a->nranks; q++)
		if (an_comm_rank(a->ranks[q].p, comm) == crank)
			return q;
	return -1;
}

/* a rank's peers in point-to-point calls (a stage has two at most: the stages before and after),
 * its messages to and from each in its analysed steps; more peers: over */
struct peers {
	int n, over;
	struct peer { int q; double sent, recvd; } v[2];
};

static void peer_add(struct peers *pr, int q, int send)
{
	int i = 0;
	while (i < pr->n && pr->v[i].q != q)
		i++;
	if (i == pr->n) {
		if (pr->n == 2) {
			pr->over = 1;
			return;
		}
		pr->v[pr->n++] = (struct peer){ q, 0, 0 };
	}
	if (send)
		pr->v[i].sent++;
	else
		pr->v[i].recvd++;
}

/* Rank r's point-to-point messages in its analysed steps (as its host made them: a GPU rank's
 * calls run up to a step ahead of its device) into pr, and whether its steps begin by sending
 * (*sends_first: +1 each step that does, -1 each that receives first); *interleaved set when a
 * receive comes before the step's last send. */
static void count_msgs(const struct analysis *a, int r, struct peers *pr, int *sends_first, int *interleaved)
{
	const struct rankinfo *ri = &a->ranks[r];
	const struct thr *t = an_train_thread(ri->p);
	size_t N = a->sd->K, k = 0;
	int32_t ccomm = -1, cpeer = -1, cq = -1;
	long cur = -1;
	int first = 0;
	int64_t last_send = INT64_MIN, first_recv = INT64_MAX;
	for (size_t i = 0; t && i < t->n; i++) {
		const struct ev *e = &t->ev[i];
		while (k < N && ri->steps[k].h1 <= e->t)
			k++;
		if (k == N)
			break;
		if (e->t < ri->steps[k].h0 || !an_is_msg(e))
			continue;
		if ((long)k != cur) {
			*sends_first += first;
			*interleaved |= cur >= 0 && first_recv < last_send;
			cur = (long)k;
			first = 0;
			last_send = INT64_MIN;
			first_recv = INT64_MAX;
		}
		struct an_p2pmsg m[2];
		int nm = an_p2p_msgs(ri->p, e, m);
		for (int j = 0; j < nm; j++) {
			int32_t peer = m[j].send ? m[j].dst : m[j].src;
			if (peer != cpeer || m[j].comm != ccomm) {
				ccomm = m[j].comm;
				cpeer = peer;
				cq = rank_in(a, ccomm, cpeer);
			}
			if (cq < 0 || cq == r)
				continue;
			peer_add(pr, cq, m[j].send);
			if (!first)
				first = m[j].send ? 1 : -1;
			if (m[j].send)
				last_send = e->t;
			else if (e->t < first_recv)
				first_recv = e->t;
		}
	}
	*sends_first += first;
	*interleaved |= cur >= 0 && first_recv < last_send;
}

/* the stages of a pipeline job into pj (0: none, -1 out of memory) */
static int find_stages(const struct analysis *a, struct pipejob *pj)
{
	int R = a->nranks, rc = -1, inter = 0;
	size_t N = a->sd->K, nm = 0;
	struct peers *pr = calloc((size_t)R, sizeof *pr);
	int *sf = calloc((size_t)R, sizeof *sf), *path = malloc((size_t)R * sizeof *path);
	int *inters = calloc((size_t)R, sizeof *inters);
	double *mv = malloc((size_t)R * 2 * sizeof *mv);
	pj->stage = malloc((size_t)R * sizeof *pj->stage);
	if (!pr || !sf || !path || !mv || !inters || !pj->stage)
		goto out;
	rc = 0;
	for (int r = 0; r < R; r++) {
		pj->stage[r] = -1;
		int in = 0;
		if (a->ranks[r].steps)
			count_msgs(a, r, &pr[r], &sf[r], &in);
		inters[r] = in;
		if (pr[r].over)
			goto out;
		/* (each way with each neighbour: a stage sends activations on and gradients back) */
		for (int j = 0; j < pr[r].n; j++) {
			if (pr[r].v[j].sent <= 0 || pr[r].v[j].recvd <= 0)
				goto out;
			mv[nm++] = pr[r].v[j].recvd / (double)N;
		}
	}
	/* chains: from each end (one neighbour), the ranks in order; all of one length */
	for (int r = 0; r < R; r++) {
		if (pr[r].n != 1 || pj->stage[r] >= 0)
			continue;
		int len = 0, prev = -1, at = r;
		while (at >= 0 && len < R) {
			path[len++] = at;
			int next = -1;
			for (int j = 0; j < pr[at].n; j++)
				if (pr[at].v[j].q != prev)
					next = pr[at].v[j].q;
			prev = at;
			at = next;
		}
		int end = path[len - 1];
		if (len < 2 || (pj->S && len != pj->S) || (sf[r] > 0) == (sf[end] > 0))
			goto out;
		pj->S = len;
		pj->chains++;
		for (int i = 0; i < len; i++) /* (stage 0: the end that sends first) */
			pj->stage[path[sf[r] > 0 ? i : len - 1 - i]] = i;
		inter |= inters[sf[r] > 0 ? r : end]; /* (1F1B: stage 0 takes a gradient between forwards) */
	}
	for (int r = 0; r < R; r++)
		if (a->ranks[r].steps && pj->stage[r] < 0)
			goto out;
	pj->M = nm ? (int)lround(an_quantile(mv, nm, 0.5)) : 0;
	pj->interleaved = inter;
	pj->R = R;
	rc = pj->S >= 2 && pj->M >= 2;
out:
	free(pr);
	free(sf);
	free(inters);
	free(path);
	free(mv);
	return rc;
}

/* the share of a GPU rank's device step its sends' and receives' kernels waited for their peers
 * (its host only enqueues them: the device waits) */
static double device_idle(const struct gpustat *g)
{
	double step = 0;
	for (int c = 0; c < GP_COUNT; c++)
		step += g->part[c];
	return step > 0 ? fmin(1, g->p2p_ms[0] / step) : 0;
}

/* per stage: work per step and idle share, over its ranks; its first rank */
static int stage_figures(const struct analysis *a, struct pipejob *pj)
{
	int S = pj->S;
	size_t N = a->sd->K;
	double *cnt = calloc((size_t)S, sizeof *cnt);
	pj->work = calloc((size_t)S, sizeof *pj->work);
	pj->idle = calloc((size_t)S, sizeof *pj->idle);
	pj->first = malloc((size_t)S * sizeof *pj->first);
	if (!cnt || !pj->work || !pj->idle || !pj->first) {
		free(cnt);
		return -1;
	}
	for (int s = 0; s < S; s++)
		pj->first[s] = -1;
	for (int r = 0; r < pj->R; r++) {
		const struct rankinfo *ri = &a->ranks[r];
		int s = pj->stage[r];
		if (s < 0 || !ri->steps)
			continue;
		double w = 0;
		for (size_t k = 0; k < N; k++)
			w += (ri->steps[k].cat[CAT_COMPUTE] + ri->steps[k].cat[CAT_DATA] + ri->steps[k].cat[CAT_HOST]) / (double)N;
		pj->work[s] += w;
		pj->idle[s] += ri->gpu.have ? device_idle(&ri->gpu) : ri->p2p_wait_share;
		pj->device |= ri->gpu.have;
		cnt[s]++;
		if (pj->first[s] < 0)
			pj->first[s] = r;
	}
	for (int s = 0; s < S; s++) {
		pj->work[s] /= cnt[s] > 0 ? cnt[s] : 1;
		pj->idle[s] /= cnt[s] > 0 ? cnt[s] : 1;
	}
	free(cnt);
	return 0;
}

static double median_others(const double *v, int n, int skip)
{
	double x[MAX_STAGES];
	int m = 0;
	for (int i = 0; i < n && m < MAX_STAGES; i++)
		if (i != skip)
			x[m++] = v[i];
	return m ? an_quantile(x, (size_t)m, 0.5) : 0;
}

/* ms per step rank index L's later (downstream) and earlier (upstream) stages waited for it */
static void waits_for(const struct analysis *a, const struct pipejob *pj, int L, double *down, double *up)
{
	size_t N = a->sd->K;
	*down = *up = 0;
	for (int r = 0; r < pj->R; r++) {
		if (r == L || pj->stage[r] < 0)
			continue;
		double w = 0;
		for (size_t k = 0; k < N; k++)
			w += an_wfrom(a->sd, r, k, L) / (double)N;
		if (pj->stage[r] > pj->stage[L])
			*down += w;
		else
			*up += w;
	}
}

static void stage_list(struct finding *f, const struct analysis *a, const struct pipejob *pj)
{
	an_ev_open(f, "per_stage", FV_LIST);
	for (int s = 0; s < pj->S; s++) {
		an_ev_open(f, NULL, FV_OBJ);
		an_ev_int(f, "stage", s);
		an_ev_int(f, "rank", pj->first[s] >= 0 ? a->ranks[pj->first[s]].rank : -1);
		an_ev_num(f, "work_ms_per_step", pj->work[s], 3);
		an_ev_num(f, "idle_share", pj->idle[s], 3);
		an_ev_end(f);
	}
	an_ev_end(f);
}

int an_find_pipeline(struct analysis *a, char *skip)
{
	struct pipejob pj = { 0 };
	int slow = -1;
	if (!a->sd || !a->sd->K || strcmp(a->step_source, "p2p") || a->nranks < 2 || find_stages(a, &pj) <= 0 ||
	    pj.S > MAX_STAGES || stage_figures(a, &pj) < 0)
		goto out;
	double step = a->step_p50 > 0 ? a->step_p50 : 1;
	/* the stage that works longest per micro-batch sets the pace; the others' work against it */
	int top = 0;
	for (int s = 1; s < pj.S; s++)
		if (pj.work[s] > pj.work[top])
			top = s;
	double med = median_others(pj.work, pj.S, top), excess = pj.work[top] - med;
	double predicted = (double)(pj.S - 1) / (pj.M + pj.S - 1);
	/* What balancing it wins: its excess, less the part that fills what would be its bubble once
	 * balanced (the slow stage idles less than the schedule leaves a balanced one): with the step
	 * T, the bubble's share b and the slow stage's idle I, win = E - (b (T - win) - I), so
	 * win = (E - b T + I) / (1 - b), at most E. (GPipe, stage 1 of 2 slower by 0.3 ms a
	 * micro-batch: 1.15 ms against 1.10 measured, the excess 1.2; 1F1B, stage 0: 0.87 against 0.91,
	 * the excess 1.17.) */
	double win = fmin(excess, fmax(0, (excess - predicted * step + pj.idle[top] * step) / (1 - predicted)));
	if (win / step >= MIN_PIPE && pj.work[top] >= 1.1 * med && pj.first[top] >= 0) {
		int L = pj.first[top];
		double down, up;
		waits_for(a, &pj, L, &down, &up);
		struct finding *f = an_add_finding(a, "stage_imbalance", a->ranks[L].rank, win / step);
		if (f) {
			an_ev_int(f, "stage", top);
			an_ev_int(f, "stages", pj.S);
			an_ev_int(f, "microbatches", pj.M);
			an_ev_num(f, "work_ms_per_microbatch", pj.work[top] / pj.M, 3);
			an_ev_num(f, "others_ms_per_microbatch", med / pj.M, 3);
			an_ev_num(f, "excess_ms_per_step", excess, 3);
			an_ev_num(f, "ms_per_step", win, 3);
			an_ev_num(f, "downstream_wait_ms_per_step", down, 3);
			an_ev_num(f, "upstream_wait_ms_per_step", up, 3);
			an_ev_str(f, "waits_on", pj.device ? "device" : "host");
			if (!pj.device) { /* (a device's kernel of a send and a receive waits for either) */
				an_ev_num(f, "late_sender_ms_per_step", a->sd->p2pL[2 * L + 1] / (double)a->sd->K, 3);
				an_ev_num(f, "late_receiver_ms_per_step", a->sd->p2pL[2 * L] / (double)a->sd->K, 3);
			}
			stage_list(f, a, &pj);
		}
		slow = top;
	}
	/* (the stage that sets the pace is what its peers wait for: its imbalance, or nothing, but no
	 * straggler) */
	for (int r = 0; r < pj.R; r++)
		if (pj.stage[r] == top)
			skip[r] = 1;
	/* the bubble: what the stage that sets the pace idles, which only the schedule's fill and
	 * drain explain (the others idle more, waiting for it) */
	double bubble = pj.idle[top];
	if (bubble >= MIN_PIPE) {
		struct finding *f = an_add_finding(a, "pipeline_bubble", -1, bubble);
		if (f) {
			an_ev_int(f, "stages", pj.S);
			an_ev_int(f, "microbatches", pj.M);
			an_ev_str(f, "schedule", pj.interleaved ? "1f1b" : "gpipe");
			an_ev_num(f, "idle_share", bubble, 3);
			an_ev_num(f, "predicted_share", predicted, 3);
			an_ev_int(f, "pace_stage", top);
			an_ev_int(f, "replicas", pj.chains);
			an_ev_str(f, "waits_on", pj.device ? "device" : "host");
			stage_list(f, a, &pj);
		}
	}
	a->pipe_stages = pj.S; /* (for the renderers: the rank table, the views' stage order) */
	a->pipe_micro = pj.M;
	a->pipe_stage = pj.stage;
	pj.stage = NULL;
out:
	free(pj.stage);
	free(pj.first);
	free(pj.work);
	free(pj.idle);
	return slow;
}
