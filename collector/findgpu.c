/* The GPU findings (gpu_idle with its cause, host_sync, launch_bound, pageable_memcpy, no_overlap
 * and collective_volume from the NCCL kernels), from each rank's device timeline (gpustep.c) and
 * the critical path's shares; severities as docs/report.md, section 8, says. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/format.h"
#include "analysis_int.h"
#include "findings_int.h"
#include "trace.h"

/* The share of the step in the parts of mask (1 << GP_*), over the ranks with a device: the
 * largest, which a rank's own cost sets for everyone (its peers wait for it), with *rank its
 * rank; or, where every rank has at least half of that, the mean, job-wide (*rank -1). The
 * findings' rank comes from here, their severity from the critical path (gpu_crit). */
static double gpu_share(const struct analysis *a, unsigned mask, int *rank)
{
	double mx = 0, mn = INFINITY, sum = 0;
	int n = 0, arg = -1;
	for (int r = 0; r < a->nranks; r++) {
		const struct gpustat *g = &a->ranks[r].gpu;
		if (!g->have)
			continue;
		double part = 0, all = 0;
		for (int c = 0; c < GP_COUNT; c++) {
			all += g->part[c];
			part += mask & (1u << c) ? g->part[c] : 0;
		}
		double x = all > 0 ? part / all : 0;
		if (x > mx || arg < 0) {
			mx = x;
			arg = a->ranks[r].rank;
		}
		mn = fmin(mn, x);
		sum += x;
		n++;
	}
	*rank = n > 1 && mn < 0.5 * mx ? arg : -1;
	return *rank >= 0 ? mx : n ? sum / n : 0;
}

/* a GPU part's ms per step, averaged over the ranks with a device (rank: that rank's only) */
static double gpu_ms(const struct analysis *a, int part, int rank)
{
	double s = 0;
	int n = 0;
	for (int r = 0; r < a->nranks; r++)
		if (a->ranks[r].gpu.have && (rank < 0 || a->ranks[r].rank == rank)) {
			s += part < 0 ? 0 : a->ranks[r].gpu.part[part];
			n++;
		}
	return n ? s / n : 0;
}

/* The critical path's share (the verdict's: a rank's wait for a late peer charged to what made it
 * late) of the GPU parts of mask: each part's share of its category over every rank's device
 * timeline, times that category's critical share, plus its part of the waits the critical path
 * could not charge to anyone. What fixing those parts would win. */
static double gpu_crit(const struct analysis *a, unsigned mask)
{
	static const int cat_of[GP_COUNT] = { CAT_COMPUTE, CAT_COMPUTE, CAT_DATA, CAT_COMMS, CAT_COMMS, CAT_DATA,
					      CAT_HOST, CAT_HOST, CAT_COMMS, CAT_HOST, CAT_HOST };
	double in[CAT_COUNT] = { 0 }, of[CAT_COUNT] = { 0 }, sev = 0;
	for (int r = 0; r < a->nranks; r++)
		for (int c = 0; a->ranks[r].gpu.have && c < GP_COUNT; c++) {
			of[cat_of[c]] += a->ranks[r].gpu.part[c];
			in[cat_of[c]] += mask & (1u << c) ? a->ranks[r].gpu.part[c] : 0;
		}
	for (int c = 0; c < CAT_COUNT; c++)
		sev += of[c] > 0 ? a->shares[c] * in[c] / of[c] : 0;
	/* Waits for late peers that no rank's extra work explains stay comms on the critical path:
	 * every rank slow the same way, late by turns. Such waits are the same cost seen from the
	 * peers: shared among the causes off the comms path, in proportion. */
	if (mask & ((1u << GP_NCCL_WAIT) | (1u << GP_NCCL)))
		return sev;
	double left = 0, len = 0;
	for (int r = 0; r < a->nranks; r++)
		for (size_t k = 0; a->ranks[r].steps && k < a->sd->K; k++) {
			const struct rankstep *st = &a->ranks[r].steps[k];
			left += fmax(0, st->wait - (st->cat[CAT_COMMS] - st->crit[CAT_COMMS]));
			len += MS(st->t1 - st->t0);
		}
	double off = 1 - a->shares[CAT_COMMS];
	return len > 0 && off > 0 ? sev + left / len * sev / off : sev;
}

static const struct rankinfo *gpu_rank(const struct analysis *a, int rank)
{
	for (int r = 0; r < a->nranks; r++)
		if (a->ranks[r].gpu.have && (rank < 0 || a->ranks[r].rank == rank))
			return &a->ranks[r];
	return NULL;
}

#define IDLE_MASK ((1u << GP_IDLE_DATA) | (1u << GP_IDLE_SYNC) | (1u << GP_IDLE_LAUNCH) | (1u << GP_IDLE_COMMS) | \
		   (1u << GP_IDLE_OTHER) | (1u << GP_IDLE_PAGEABLE))

static void find_gpu_idle(struct analysis *a)
{
	int rank;
	gpu_share(a, IDLE_MASK, &rank);
	double sev = gpu_crit(a, IDLE_MASK);
	if (sev < 0.05)
		return;
	/* the contract's idle causes (ranks[].gpu.idle_by_cause) */
	static const char *const cause[] = { "data", "sync", "launch", "comms", "other" };
	double ms[5], idle = 0;
	int top = 0;
	for (int c = 0; c < 5; c++) /* (a pageable copy's hold is a wait for the device: sync) */
		ms[c] = gpu_ms(a, GP_IDLE_DATA + c, rank) + (c == 1 ? gpu_ms(a, GP_IDLE_PAGEABLE, rank) : 0);
	for (int c = 0; c < 5; c++) {
		idle += ms[c];
		top = ms[c] > ms[top] ? c : top;
	}
	/* one rank's idle device that its peers wait for, while its host did other work, is that
	 * rank's finding (straggler, rank-0 work): the same time, named by what the job loses. (Idle
	 * for input, a sync or launching says more than a late rank's "host" does: it stays.) */
	for (int i = 0; rank >= 0 && top == 4 && i < a->nfindings; i++)
		if (a->findings[i].rank == rank && (!strcmp(a->findings[i].kind, "straggler") ||
						    !strcmp(a->findings[i].kind, "rank0_serialization")))
			return;
	struct finding *f = an_add_finding(a, "gpu_idle", rank, sev);
	if (!f)
		return;
	an_ev_str(f, "cause", cause[top]);
	an_ev_num(f, "idle_ms_per_step", idle, 3);
	an_ev_open(f, "by_cause_ms", FV_OBJ);
	for (int c = 0; c < 5; c++)
		an_ev_num(f, cause[c], ms[c], 3);
	an_ev_end(f);
}

static void find_host_sync(struct analysis *a)
{
	int rank;
	gpu_share(a, 1u << GP_IDLE_SYNC, &rank);
	double sev = gpu_crit(a, 1u << GP_IDLE_SYNC);
	const struct rankinfo *ri = gpu_rank(a, rank);
	if (sev < 0.03 || !ri)
		return;
	const char (*frames)[112] = NULL;
	int nf = 0, kind = 0, what = -1;
	double ms = 0, calls = 0;
	const struct pysite *py = NULL;
	const char *range = NULL;
	const char *call = an_gpu_site(ri->p, ri->gpu.site, &frames, &nf, &ms, &calls, &kind, &what, &py, &range);
	struct finding *f = an_add_finding(a, "host_sync", rank, sev);
	if (!f)
		return;
	const char *w = !call ? NULL : kind == DDPSPY_EV_CUDA_SYNC ? ddpspy_name(ddpspy_cuda_sync_names, DDPSPY_SYNC_COUNT, what) :
			ddpspy_name(ddpspy_cuda_dir_names, DDPSPY_DIR_COUNT, what);
	double steps = a->steps_detected > 0 ? a->steps_detected : 1;
	an_ev_num(f, "idle_ms_per_step", gpu_ms(a, GP_IDLE_SYNC, rank), 3);
	an_ev_str(f, "call", call);
	an_ev_str(f, "what", w);
	an_ev_num(f, "calls_per_step", calls / steps, 2);
	an_ev_num(f, "wait_ms_per_step", ms / steps, 3);
	an_ev_open(f, "stack", FV_LIST);
	for (int i = 0; i < nf; i++)
		an_ev_str(f, NULL, frames[i]);
	an_ev_end(f);
	if (call) { /* (the site, as the other findings give theirs: its Python line where it ran Python) */
		an_ev_open(f, "sites", FV_LIST);
		an_ev_site(f, py, frames, nf, ms / steps, range);
		an_ev_end(f);
		an_site_words(f, py, frames, nf, ms / steps);
	}
}

static void find_launch_bound(struct analysis *a)
{
	int rank;
	gpu_share(a, 1u << GP_IDLE_LAUNCH, &rank);
	double sev = gpu_crit(a, 1u << GP_IDLE_LAUNCH);
	const struct rankinfo *ri = gpu_rank(a, rank);
	if (sev < 0.05 || !ri)
		return;
	const struct gpustat *g = &ri->gpu;
	struct finding *f = an_add_finding(a, "launch_bound", rank, sev);
	if (!f)
		return;
	double us = g->kernels > 0 ? 1000 * g->part[GP_COMPUTE] / g->kernels : 0;
	an_ev_num(f, "kernels_per_step", g->kernels, 1);
	an_ev_num(f, "launches_per_step", g->launches, 1);
	an_ev_num(f, "kernel_us_mean", us, 2);
	an_ev_num(f, "idle_ms_per_step", gpu_ms(a, GP_IDLE_LAUNCH, rank), 3);
	/* where the host launches them from: its main thread's Python samples between its longer calls
	 * (a launch is shorter than a sample's period: the line that launches holds the samples) */
	an_sites(f, a, (int)(ri - a->ranks), CAT_COMPUTE);
}

static void find_pageable(struct analysis *a)
{
	double best = 0, worst = 0;
	const struct rankinfo *ri = NULL;
	for (int r = 0; r < a->nranks; r++) {
		const struct gpustat *g = &a->ranks[r].gpu;
		best = fmax(best, g->pinned_gbs);
		if (g->have && g->pageable_calls > 0 && g->pageable_ms > worst) {
			worst = g->pageable_ms;
			ri = &a->ranks[r];
		}
	}
	if (!ri)
		return;
	const struct gpustat *g = &ri->gpu;
	double all = 0;
	for (int c = 0; c < GP_COUNT; c++)
		all += g->part[c];
	double gbs = g->pageable_ms > 0 ? g->pageable_bytes / g->pageable_ms / 1e6 : 0;
	/* what pinning wins: the copies at the job's own pinned rate where it has one, else at three
	 * times their rate (pinned host memory is copied at about 3x pageable's rate over PCIe: NVIDIA's
	 * bandwidthTest on Gen4 and Gen5 hosts), said so in the evidence */
	int assumed = !(best > gbs);
	if (assumed)
		best = 3 * gbs;
	double won = best > gbs ? g->pageable_ms * (1 - gbs / best) : 0;
	/* and the device's idle while the copies held the host, and after, as the critical path has it */
	double sev = (all > 0 ? won / all : 0) + gpu_crit(a, 1u << GP_IDLE_PAGEABLE);
	if (sev < 0.02)
		return;
	struct finding *f = an_add_finding(a, "pageable_memcpy", -1, sev);
	if (!f)
		return;
	an_ev_num(f, "copies_per_step", g->pageable_calls, 1);
	an_ev_num(f, "bytes_per_step", g->pageable_bytes, 0);
	an_ev_num(f, "ms_per_step", g->pageable_ms, 3);
	an_ev_num(f, "gbs", gbs, 2);
	an_ev_num(f, "pinned_gbs", best, 2);
	an_ev_bool(f, "pinned_gbs_assumed", assumed);
	an_ev_hidden_num(f, "held_idle_ms_per_step", gpu_ms(a, GP_IDLE_PAGEABLE, -1));
}

/* NCCL kernels that do not overlap the computation: on the compute stream (no_overlap), or on
 * their own stream but still exposed for their bytes (collective_volume) */
static void find_nccl(struct analysis *a)
{
	int rank, on = 0, n = 0, maxop = -1;
	unsigned ops = 0;
	int64_t maxb = 0;
	double sev = gpu_share(a, 1u << GP_NCCL, &rank), calls = 0, bytes = 0, xfer = 0, left = 0, p2p = 0;
	for (int r = 0; r < a->nranks; r++) {
		const struct gpustat *g = &a->ranks[r].gpu;
		if (!g->have)
			continue;
		on |= g->nccl_on_compute;
		calls += g->nccl_calls;
		bytes += g->nccl_bytes;
		xfer += g->nccl_xfer_ms;
		p2p += g->p2p_ms[1];
		left += g->nccl_overlap_left_ms;
		ops |= g->nccl_ops;
		if (g->nccl_max_bytes > maxb) {
			maxb = g->nccl_max_bytes;
			maxop = g->nccl_max_op;
		}
		n++;
	}
	if (!n)
		return;
	calls /= n;
	bytes /= n;
	xfer /= n;
	left /= n;
	double exposed = gpu_ms(a, GP_NCCL, rank);
	/* (what prefetching a sharded job's gathers and overlapping its reduce-scatters would win is
	 * exposed_collective's: the bytes' part is what is left) */
	sev = fmax(0, gpu_crit(a, 1u << GP_NCCL) - an_shard_hideable(a));
	/* on the compute stream: what overlapping them with backward would win (gpu.c's overlap_left) */
	if (on && exposed > 0)
		sev *= fmax(0, exposed - left) / exposed;
	/* (a pipeline's sends and receives pass its micro-batches between stages: findpipe.c's) */
	if (xfer > 0)
		sev *= fmax(0, xfer - p2p / n) / xfer;
	if (sev < (on ? 0.02 : 0.05))
		return;
	double algbw = xfer > 0 ? bytes / xfer / 1e6 : 0;
	/* bus bandwidth as nccl-tests reports it, where every collective is an all-reduce */
	int world = a->ranks[0].p->world > 1 ? a->ranks[0].p->world : a->nranks;
	double busbw = ops == 1u << DDPSPY_OP_ALLREDUCE && world > 1 ? algbw * 2 * (world - 1) / world : -1;
	struct finding *f = an_add_finding(a, on ? "no_overlap" : "collective_volume", -1, sev);
	if (!f)
		return;
	an_ev_num(f, "calls_per_step", calls, 1);
	an_ev_num(f, "bytes", bytes, 0);
	an_ev_num(f, "transfer_ms_per_step", xfer, 3);
	an_ev_num(f, "exposed_ms_per_step", exposed, 3);
	an_ev_num(f, "algbw_gbs", algbw, 2);
	if (busbw >= 0)
		an_ev_num(f, "busbw_gbs", busbw, 2);
	else
		an_ev_str(f, "busbw_gbs", NULL);
	an_ev_str(f, "largest_op", an_op_name(maxop));
	an_ev_num(f, "largest_bytes", (double)maxb, 0);
	an_ev_bool(f, "on_compute_stream", on);
}

void an_find_gpu(struct analysis *a)
{
	find_gpu_idle(a);
	find_host_sync(a);
	find_launch_bound(a);
	find_pageable(a);
	find_nccl(a);
}
