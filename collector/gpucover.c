/* A GPU job's coverage: per rank, where its GPU figures came from (CUPTI, shared with another
 * client or not; NCCL's profiler plugin; its host's calls only), what is missing because of it,
 * and whether CUPTI's records stopped before the run did (docs/gpu.md); the job's capture in
 * sum. For the report's coverage block and line (report.c), and the warnings of GPU capture off or
 * lossy (split.c). */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis_int.h"
#include "gpu_int.h"

void an_gpu_job(const struct analysis *a, struct gpujob *j)
{
	memset(j, 0, sizeof *j);
	j->capture = "host-only";
	for (int r = 0; r < a->nranks; r++) {
		const struct gpuproc *g = a->ranks[r].p->gpu;
		if (!g)
			continue;
		j->ranks += g->nall > 0;
		j->any |= g->nall > 0 || g->state[0] || g->nccl_src == NSRC_PLUGIN;
		if (!strcmp(g->state, "on"))
			j->capture = "cupti";
		j->dropped += g->dropped > 0 ? (uint64_t)g->dropped : 0;
		j->untimed += a->ranks[r].p->gpu_untimed;
		j->lead_us = fmax(j->lead_us, (double)g->lead_ns / 1e3);
	}
}

double an_gpu_stopped_s(const struct gpuproc *g)
{
	int64_t last = g->cupti_end;
	if (!last) /* (no record of CUPTI's at all) */
		return -1;
	for (uint32_t i = 0; i < g->copies && i < COPY_RING; i++) /* (their ends) */
		last = g->copy_at[i] > last ? g->copy_at[i] : last;
	for (uint32_t i = 0; i < g->launches && i < COPY_RING; i++)
		last = g->launch_at[i] > last ? g->launch_at[i] : last;
	return (double)(last - g->cupti_end) / 1e9;
}

void an_gpu_cover(const struct analysis *a, int r, struct gpucover *c)
{
	const struct gpuproc *g = a->ranks[r].p->gpu;
	int on = g && (!strcmp(g->state, "on") || (!g->state[0] && g->nall > 0)); /* (files before 2.2: no state) */
	int plug = g && g->nccl_src == NSRC_PLUGIN;
	int stopped = on && an_gpu_cupti_stopped(g);
	int none = !on || (stopped && !g->nall); /* (no device timeline: or none of CUPTI's records came) */
	*c = (struct gpucover){ .source = on ? (g->client[0] ? "cupti-shared" : "cupti") : plug ? "nccl-plugin" : "host-only",
				.client = on && g->client[0] ? g->client : NULL,
				.client_api = on && g->client[0] && g->client_api[0] ? g->client_api : NULL,
				.why = g && g->why[0] ? g->why : "no GPU capture recorded in this rank's file",
				.kernels = none, .copies = none, .nccl_timing = none && !plug,
				.dropped = g && g->dropped > 0 ? (uint64_t)g->dropped : 0,
				.stopped = stopped, .unrecorded = on ? g->unrecorded : 0, .unlaunched = on ? g->unlaunched : 0,
				.stopped_s = on ? an_gpu_stopped_s(g) : 0,
				.nccl = plug ? "nccl-plugin" : g && an_gpu_nccl_cupti(g) ? "cupti" : "none",
				.nccl_after = !stopped ? NULL : g->nccl_src == NSRC_BOTH || plug ? "nccl-plugin" : "none" };
	if (!g || !g->pstat.colls)
		return;
	const struct plugstat *s = &g->pstat;
	c->colls = s->colls, c->unjoined = s->unjoined, c->conflicts = s->conflicts, c->bound_us = s->bound_us;
	c->replays = s->replays;
	c->shift_us = (double)g->shift / 1e3;
	if (an_gpu_nccl_cupti(g)) {
		c->checked = 1;
		c->matched = s->matched, c->cupti_only = s->cupti_only, c->plugin_only = s->plugin_only;
		c->after_stop = s->after_stop;
		c->start_us = s->start_us, c->dur_us = s->dur_us, c->dur_us_max = s->dur_us_max;
	}
}

int an_gpu_stopped_inside(const struct analysis *a, int r)
{
	const struct rankinfo *ri = &a->ranks[r];
	return ri->p->gpu_stop && a->sd && a->sd->K && ri->steps &&
	       an_job_time(ri->p, ri->p->gpu_stop) < ri->steps[a->sd->K - 1].h1;
}

void an_gpu_warn(struct analysis *a)
{
	uint64_t untimed = 0;
	for (int r = 0; r < a->nranks; r++) {
		const struct gpuproc *g = a->ranks[r].p->gpu;
		if (g && g->state[0] && strcmp(g->state, "on"))
			an_warn(a, "rank %d: GPU capture %s (%s): its device's timeline is not recorded, only its host calls%s",
				a->ranks[r].rank, g->state, g->why,
				g->nccl_src == NSRC_PLUGIN ? " and, from NCCL's profiler plugin, its NCCL kernels' times" : "");
		if (g && g->pstat.conflicts)
			an_warn(a, "rank %d: %u of the %u NCCL kernels NCCL's profiler plugin told of have no GPU clock "
				"offset that fits their calls and their ends (the GPU's clock moved against the host's?): "
				"their times are the bounds' middle", a->ranks[r].rank, g->pstat.conflicts, g->pstat.colls);
		untimed += a->ranks[r].p->gpu_untimed;
		if (a->sd && a->sd->K && a->ranks[r].p->gpu_dropped && g && g->nall)
			an_warn(a, "rank %d: CUPTI lost %" PRIu64 " of its records: its device's timeline has holes, so its "
				"steps are split from its host's calls, as without GPU capture (the other ranks' from "
				"their devices')", a->ranks[r].rank, a->ranks[r].p->gpu_dropped);
		if (g && (g->other_dev || g->other_ctx)) /* (so g->device is one: devices_chosen) */
			an_warn(a, "rank %d: %" PRIu64 " records of device work on other devices than device %d (where its %s "
				"ran) or in contexts past its first %d are left out of its split", a->ranks[r].rank,
				g->other_dev + g->other_ctx, g->device, g->nccl_on_dev[g->device] ? "NCCL kernels" : "most work", MAX_GCTX);
		if (g && an_gpu_cupti_stopped(g)) {
			char calls[96];
			if (g->unrecorded && g->unlaunched)
				snprintf(calls, sizeof calls, "%u of its last CUDA copy calls and %u of its last NCCL launches",
					 g->unrecorded, g->unlaunched);
			else if (g->unrecorded)
				snprintf(calls, sizeof calls, "%u of its last CUDA copy calls", g->unrecorded);
			else
				snprintf(calls, sizeof calls, "%u of its last NCCL launches", g->unlaunched);
			an_warn(a, "rank %d: CUPTI's records stopped before %s: another CUPTI client took CUPTI's callbacks "
				"(docs/gpu.md); its device's timeline after that is not recorded%s", a->ranks[r].rank, calls,
				!a->ranks[r].p->gpu_stop ? "" : an_gpu_stopped_inside(a, r) ? ", so its steps are split from its "
				"host's calls, as without GPU capture" : "");
		}
		if (a->ranks[r].gpu.reread_failed)
			an_warn(a, "rank %d: %s could not be read again for its device's work: its steps are split from its "
				"host calls", a->ranks[r].rank, a->ranks[r].p->file);
	}
	if (untimed)
		an_warn(a, "CUPTI gave %" PRIu64 " device record%s no times (work still running when it was flushed "
			"whole: at exit, or as another CUPTI client ended its session): left out", untimed,
			untimed == 1 ? "" : "s");
}

/* one group of alike ranks [r0, r1] into the line */
static void cover_group(FILE *f, const struct analysis *a, int r0, int r1, const struct gpucover *c, int first)
{
	fprintf(f, "%s", first ? "" : "; ");
	if (r0 == r1)
		fprintf(f, "rank %d ", a->ranks[r0].rank);
	else
		fprintf(f, "ranks %d-%d ", a->ranks[r0].rank, a->ranks[r1].rank);
	if (c->stopped && c->stopped_s < 0)
		fprintf(f, "CUPTI on, but none of its records came (another CUPTI client took CUPTI's callbacks?)%s",
			!strcmp(c->nccl, "nccl-plugin") ? ": NCCL kernel times from NCCL's profiler plugin" : "");
	else if (c->stopped)
		fprintf(f, "CUPTI until %.1f s before its last CUDA copy or NCCL launch (another CUPTI client took "
			"CUPTI's callbacks?)%s", c->stopped_s, !strcmp(c->nccl_after, "nccl-plugin") ? ", NCCL kernel times from NCCL's profiler "
			"plugin after that" : "");
	else if (c->client)
		fprintf(f, "CUPTI, shared with another client (%s%s)", c->client,
			c->client_api ? "; of the CUDA calls it gets only those ddpspy records" : "");
	else if (c->kernels && !c->nccl_timing)
		fprintf(f, "NCCL kernel times from NCCL's profiler plugin, no CUPTI (%s): no kernels or copies", c->why);
	else if (c->kernels)
		fprintf(f, "host calls only (%s): no kernels, copies or NCCL kernel times", c->why);
	else if (!strcmp(c->nccl, "nccl-plugin"))
		fprintf(f, "CUPTI, NCCL kernel times from NCCL's profiler plugin");
	else
		fprintf(f, "CUPTI");
}

char *an_gpu_cover_line(const struct analysis *a)
{
	struct gpujob j;
	struct gpucover c, d;
	an_gpu_job(a, &j);
	if (!a->nranks || !j.any)
		return NULL;
	an_gpu_cover(a, 0, &c);
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	if (!f)
		return NULL;
	uint64_t dropped = c.dropped;
	int r0 = 0;
	for (int r = 1; r <= a->nranks; r++) {
		if (r < a->nranks)
			an_gpu_cover(a, r, &d);
		int same = r < a->nranks && !strcmp(d.source, c.source) &&
			   (!c.kernels || !strcmp(d.why, c.why)) && (!c.client || !strcmp(d.client, c.client)) &&
			   !d.client_api == !c.client_api && !d.stopped == !c.stopped &&
			   !strcmp(d.nccl, c.nccl) && !d.nccl_after == !c.nccl_after &&
			   (!c.nccl_after || !strcmp(d.nccl_after, c.nccl_after));
		if (same) {
			dropped += d.dropped;
			continue;
		}
		cover_group(f, a, r0, r - 1, &c, r0 == 0);
		if (r < a->nranks) {
			c = d;
			dropped += d.dropped;
			r0 = r;
		}
	}
	if (dropped)
		fprintf(f, "; %" PRIu64 " CUPTI records lost (holes in the device timeline)", dropped);
	return fclose(f) == 0 ? buf : (free(buf), NULL);
}
