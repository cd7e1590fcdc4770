/* A GPU job's coverage: per rank, where its GPU figures came from (CUPTI, shared with another
 * client or not; NCCL's profiler plugin; its host's calls only), what is missing because of it,
 * and whether CUPTI's records stopped before the run did (docs/gpu.md); the job's capture in
 * sum. For the report's coverage block and line (report.c). */
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
	return (double)(last - g->cupti_end) / 1e9;
}

void an_gpu_cover(const struct analysis *a, int r, struct gpucover *c)
{
	const struct gpuproc *g = a->ranks[r].p->gpu;
	int on = g && (!strcmp(g->state, "on") || (!g->state[0] && g->nall > 0)); /* (files before 2.2: no state) */
	int plug = g && g->nccl_src == NSRC_PLUGIN;
	*c = (struct gpucover){ .source = on ? (g->client[0] ? "cupti-shared" : "cupti") : plug ? "nccl-plugin" : "host-only",
				.client = on && g->client[0] ? g->client : NULL,
				.client_api = on && g->client[0] && g->client_api[0] ? g->client_api : NULL,
				.why = g && g->why[0] ? g->why : "no GPU capture recorded in this rank's file",
				.kernels = !on, .copies = !on, .nccl_timing = !on && !plug,
				.dropped = g && g->dropped > 0 ? (uint64_t)g->dropped : 0,
				.unrecorded = on ? g->unrecorded : 0, .stopped_s = on ? an_gpu_stopped_s(g) : 0,
				.nccl = plug ? "nccl-plugin" : g && g->nccl_src == NSRC_CUPTI ? "cupti" : "none" };
	if (!g || !g->pstat.colls)
		return;
	const struct plugstat *s = &g->pstat;
	c->colls = s->colls, c->unjoined = s->unjoined, c->conflicts = s->conflicts, c->bound_us = s->bound_us;
	c->replays = s->replays;
	c->shift_us = (double)g->shift / 1e3;
	if (g->nccl_src == NSRC_CUPTI) {
		c->checked = 1;
		c->matched = s->matched, c->cupti_only = s->cupti_only, c->plugin_only = s->plugin_only;
		c->start_us = s->start_us, c->dur_us = s->dur_us, c->dur_us_max = s->dur_us_max;
	}
}

/* one group of alike ranks [r0, r1] into the line */
static void cover_group(FILE *f, const struct analysis *a, int r0, int r1, const struct gpucover *c, int first)
{
	fprintf(f, "%s", first ? "" : "; ");
	if (r0 == r1)
		fprintf(f, "rank %d ", a->ranks[r0].rank);
	else
		fprintf(f, "ranks %d-%d ", a->ranks[r0].rank, a->ranks[r1].rank);
	if (c->unrecorded && c->stopped_s < 0)
		fprintf(f, "CUPTI on, but none of its records came (another CUPTI client took CUPTI's callbacks?)");
	else if (c->unrecorded)
		fprintf(f, "CUPTI until %.1f s before its last CUDA copy (another CUPTI client took CUPTI's callbacks?)",
			c->stopped_s);
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
			   !d.client_api == !c.client_api && !d.unrecorded == !c.unrecorded &&
			   !strcmp(d.nccl, c.nccl);
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
