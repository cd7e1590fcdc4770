/* exposed_collective: a sharded job's (FSDP, ZeRO-3) all-gathers of parameters and reduce-scatters
 * of gradients exposed on the device (transferring while no compute kernel runs) where the work
 * beside them could have hidden them: a layer's gather started while the layer before it
 * computed (prefetch), a reduction left to run behind the layers after it. From each GPU rank's
 * figures (gpushard.c, at its device split). GPU jobs only: on the CPU an all-gather's transfer is
 * its ranks' own copy, which no prefetch hides (docs/testbed.md). */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "../common/format.h"
#include "analysis_int.h"
#include "findings_int.h"

#define MIN_EXPOSED 0.05 /* of the step */

static const char *class_op(const struct gpushard *c)
{
	int op = -1;
	for (int o = 0; o < DDPSPY_OP_COUNT; o++)
		if (c->opbytes[o] > 0 && (op < 0 || c->opbytes[o] > c->opbytes[op]))
			op = o;
	return op >= 0 ? an_op_name(op) : NULL;
}

/* one class's figures per step (the ranks' mean, over N steps) */
static void class_evidence(struct finding *f, const struct gpushard *m, double N)
{
	an_ev_str(f, "op", class_op(m));
	an_ev_num(f, "calls_per_step", m->calls / N, 2);
	an_ev_num(f, "bytes_per_step", m->bytes / N, 0);
	an_ev_num(f, "exposed_ms_per_step", m->exposed / N, 3);
	an_ev_num(f, "hideable_ms_per_step", m->hideable / N, 3);
	an_ev_num(f, "wait_ms_per_step", m->waited / N, 3);
	an_ev_num(f, "overlapped_share", m->xfer > 0 ? fmax(0, 1 - m->exposed / m->xfer) : 0, 3);
}

/* the ranks' mean over their analysed steps (m: SHARD_CLASSES of them; 0 when no rank has any) */
static double mean_shards(const struct analysis *a, struct gpushard *m)
{
	double with = 0;
	memset(m, 0, SHARD_CLASSES * sizeof *m);
	for (int r = 0; r < a->nranks; r++) {
		const struct gpushard *s = a->ranks[r].gpu.shard;
		if (!a->ranks[r].gpu.have || !a->ranks[r].steps)
			continue;
		with++;
		for (int c = 0; c < SHARD_CLASSES; c++) {
			m[c].calls += s[c].calls;
			m[c].bytes += s[c].bytes;
			m[c].exposed += s[c].exposed;
			m[c].waited += s[c].waited;
			m[c].hideable += s[c].hideable;
			m[c].xfer += s[c].xfer;
			for (int o = 0; o < DDPSPY_OP_COUNT; o++)
				m[c].opbytes[o] += s[c].opbytes[o];
		}
	}
	for (int c = 0; with && c < SHARD_CLASSES; c++) {
		m[c].calls /= with;
		m[c].bytes /= with;
		m[c].exposed /= with;
		m[c].waited /= with;
		m[c].hideable /= with;
		m[c].xfer /= with;
	}
	return with;
}

double an_shard_hideable(const struct analysis *a)
{
	struct gpushard m[SHARD_CLASSES];
	double N = a->sd ? (double)a->sd->K : 0, step = a->step_p50 > 0 ? a->step_p50 : 1;
	if (!N || !mean_shards(a, m))
		return 0;
	return (m[SHARD_GATHER].hideable + m[SHARD_REDUCE].hideable) / N / step;
}

void an_find_exposed(struct analysis *a)
{
	double N = a->sd ? (double)a->sd->K : 0;
	struct gpushard m[SHARD_CLASSES];
	if (!N || a->nranks < 2 || !mean_shards(a, m) || (!m[SHARD_GATHER].calls && !m[SHARD_REDUCE].calls))
		return;
	double hide = m[SHARD_GATHER].hideable + m[SHARD_REDUCE].hideable;
	double step = a->step_p50 > 0 ? a->step_p50 : 1, sev = hide / N / step;
	if (sev < MIN_EXPOSED)
		return;
	int top = m[SHARD_REDUCE].hideable > m[SHARD_GATHER].hideable ? SHARD_REDUCE : SHARD_GATHER;
	struct finding *f = an_add_finding(a, "exposed_collective", -1, sev);
	if (!f)
		return;
	class_evidence(f, &m[top], N);
	an_ev_num(f, "ms_per_step", hide / N, 3);
	an_ev_open(f, "ops", FV_LIST);
	for (int c = 0; c < SHARD_CLASSES; c++) {
		if (!m[c].calls)
			continue;
		an_ev_open(f, NULL, FV_OBJ);
		an_ev_str(f, "role", c == SHARD_GATHER ? "parameters" : "gradients");
		class_evidence(f, &m[c], N);
		an_ev_end(f);
	}
	an_ev_end(f);
}
