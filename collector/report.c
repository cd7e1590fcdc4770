/* ddpspy report DIR... [--json] [--skip N] [--fail-on KINDS] [--fail-severity X] [--ranks LIST]:
 * the verdict, per-rank table and findings of one analysis (analyze.c), as text for a terminal
 * or as JSON per the contract (schema ddpspy.report.v1). Exit 0, 2 (usage, nothing readable)
 * or 3 (a --fail-on finding at or above --fail-severity). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis.h"
#include "cli.h"
#include "analysis_int.h"
#include "json.h"

int html_report(const struct analysis *a, const char *path, char *err, size_t errlen);

static void usage(FILE *to)
{
	fprintf(to, "usage: ddpspy report DIR... [--json] [--skip N] [--fail-on KIND[,KIND...]]\n"
		    "                     [--fail-severity X] [--ranks LIST] [--html FILE] [-j N]\n"
		    "       mpirun -np P ddpspy report --mpi DIR... [options]\n"
		    "  --json            the report as JSON (schema ddpspy.report.v1)\n"
		    "  --skip N          warm-up steps left out (default 2)\n"
		    "  --fail-on KINDS   exit 3 when one of these findings has severity >= --fail-severity\n"
		    "  --fail-severity X (default 0.1)\n"
		    "  --ranks LIST      only these ranks, e.g. 0,2-3\n"
		    "  --html FILE       also the report as one self-contained HTML file (no script, nothing fetched)\n"
		    "  -j N              read and split the ranks' files on N threads (default: the CPUs this\n"
		    "                    process may use); the report is the same whatever N is\n"
		    "  --mpi             under mpirun (Open MPI): the files read by all its processes, on\n"
		    "                    every host that sees the directory; process 0 writes the report\n");
}

/* key: v where have, else null */
static void json_num_or_null(struct json *j, const char *key, int have, double v)
{
	if (have)
		json_num(j, key, v);
	else
		json_str(j, key, NULL);
}

void report_json_shares(struct json *j, const char *key, const double *s)
{
	json_obj(j, key);
	for (int c = 0; c < CAT_COUNT; c++)
		json_num(j, ddpspy_category_names[c], round(s[c] * 10000) / 10000);
	json_close(j);
}

/* a finding's evidence (analysis.h) as the members of the open object */
static void evidence_json(struct json *j, const struct finding *f)
{
	int depth = j->depth;
	for (int i = 0; i < f->nev; i++) {
		const struct fv *v = &f->ev[i];
		if (v->hidden)
			continue;
		switch (v->type) {
		case FV_INT:
			json_int(j, v->key, v->v.i);
			break;
		case FV_NUM:
			json_fixed(j, v->key, v->v.d, v->decimals);
			break;
		case FV_STR:
			json_str(j, v->key, f->strs + v->v.s);
			break;
		case FV_BOOL:
			json_bool(j, v->key, (int)v->v.i);
			break;
		case FV_NULL:
			json_null(j, v->key);
			break;
		case FV_OBJ:
			json_obj(j, v->key);
			break;
		case FV_LIST:
			json_arr(j, v->key);
			break;
		case FV_END:
			if (j->depth > depth)
				json_close(j);
			break;
		}
	}
	while (j->depth > depth) /* (left open when the evidence was full) */
		json_close(j);
}

/* every rank's GPU coverage: where its figures came from, what is missing, NCCL's plugin and its
 * check against CUPTI */
static void json_coverage(struct json *j, const struct analysis *a)
{
	json_arr(j, "coverage");
	for (int r = 0; r < a->nranks; r++) {
		struct gpucover gc;
		an_gpu_cover(a, r, &gc);
		json_obj(j, NULL);
		json_int(j, "rank", a->ranks[r].rank);
		json_str(j, "gpu", gc.source);
		if (gc.client)
			json_str(j, "client", gc.client);
		if (gc.client_api) /* (what the client's own trace lacks: calls ddpspy does not record) */
			json_str(j, "client_calls_limited", gc.client_api);
		json_str(j, "why", gc.why);
		json_arr(j, "missing");
		if (gc.kernels)
			json_str(j, NULL, "kernels");
		if (gc.copies)
			json_str(j, NULL, "copies");
		if (gc.nccl_timing)
			json_str(j, NULL, "nccl_timing");
		json_close(j);
		json_int(j, "dropped_records", (int64_t)gc.dropped);
		if (gc.stopped) { /* (CUPTI's records stopped before the run did) */
			json_obj(j, "cupti_stopped");
			json_int(j, "copies_after", gc.unrecorded);
			json_int(j, "nccl_launches_after", gc.unlaunched);
			if (gc.stopped_s < 0) /* (none of CUPTI's records came) */
				json_null(j, "seconds_before_last_copy");
			else
				json_num(j, "seconds_before_last_copy", round(gc.stopped_s * 1000) / 1000);
			json_str(j, "nccl_timing_after", gc.nccl_after);
			json_close(j);
		}
		json_str(j, "nccl_timing", gc.nccl);
		if (gc.colls) { /* what NCCL's profiler plugin told, and how its clock was found */
			json_obj(j, "nccl_plugin");
			json_int(j, "collectives", gc.colls);
			json_int(j, "unjoined", gc.unjoined);
			json_int(j, "graph_replays", gc.replays);
			json_num(j, "clock_bound_us", round(gc.bound_us * 10) / 10);
			json_num(j, "clock_shift_us", round(gc.shift_us * 10) / 10);
			json_int(j, "clock_conflicts", gc.conflicts);
			json_close(j);
		}
		if (gc.checked) { /* the same kernels from the plugin and from CUPTI */
			json_obj(j, "nccl_check");
			json_int(j, "matched", gc.matched);
			json_int(j, "cupti_only", gc.cupti_only);
			json_int(j, "plugin_only", gc.plugin_only);
			if (gc.after_stop) /* (not checked: CUPTI saw nothing then) */
				json_int(j, "after_cupti_stopped", gc.after_stop);
			json_num(j, "start_us_p50", round(gc.start_us * 10) / 10);
			json_num(j, "duration_us_p50", round(gc.dur_us * 10) / 10);
			json_num(j, "duration_us_max", round(gc.dur_us_max * 10) / 10);
			json_close(j);
		}
		json_close(j);
	}
	json_close(j);
}

/* a rank's device: the contract's shares of the device's step, then the same in ms per step */
static void json_rank_gpu(struct json *j, const struct gpustat *g)
{
	double all = 0;
	for (int c = 0; c < GP_COUNT; c++)
		all += g->part[c];
#define SH(x) (all > 0 ? round((x) / all * 10000) / 10000 : 0)
	double idle = g->part[GP_IDLE_DATA] + g->part[GP_IDLE_SYNC] + g->part[GP_IDLE_LAUNCH] +
		      g->part[GP_IDLE_COMMS] + g->part[GP_IDLE_OTHER] + g->part[GP_IDLE_PAGEABLE];
	json_obj(j, "gpu");
	json_int(j, "device", g->device);
	json_num(j, "busy_share", SH(all - idle));
	json_num(j, "compute_share", SH(g->part[GP_COMPUTE]));
	json_num(j, "copy_share", SH(g->part[GP_COPY] + g->part[GP_COPY_IN]));
	json_num(j, "nccl_share", SH(g->part[GP_NCCL_WAIT] + g->part[GP_NCCL]));
	json_num(j, "nccl_wait_share", SH(g->part[GP_NCCL_WAIT]));
	json_num(j, "idle_share", SH(idle));
	json_obj(j, "idle_by_cause");
	json_num(j, "data", SH(g->part[GP_IDLE_DATA]));
	json_num(j, "sync", SH(g->part[GP_IDLE_SYNC] + g->part[GP_IDLE_PAGEABLE]));
	json_num(j, "launch", SH(g->part[GP_IDLE_LAUNCH]));
	json_num(j, "comms", SH(g->part[GP_IDLE_COMMS]));
	json_num(j, "other", SH(g->part[GP_IDLE_OTHER]));
	json_close(j);
#undef SH
	json_num(j, "kernels_per_step", round(g->kernels * 10) / 10);
	json_num(j, "kernel_us_p50", round(g->kernel_us_p50 * 100) / 100);
	json_num(j, "launches_per_step", round(g->launches * 10) / 10);
	json_num(j, "nccl_kernels_per_step", round(g->nccl_calls * 10) / 10);
	json_num(j, "nccl_bytes_per_step", round(g->nccl_bytes));
	json_num(j, "pageable_copy_bytes_per_step", round(g->pageable_bytes));
	json_obj(j, "nccl_join");
	json_int(j, "external_id", g->nccl_join[0]);
	json_int(j, "communicator_order", g->nccl_join[1]);
	json_int(j, "order_only", g->nccl_join[2]);
	json_int(j, "graph_replay", g->nccl_join[3]);
	json_close(j);
	json_obj(j, "ms_per_step");
	for (int c = 0; c < GP_COUNT; c++)
		json_num(j, an_gpart_names[c], round(g->part[c] * 1000) / 1000);
	json_close(j);
	json_close(j);
}

/* the findings, by severity: kind, rank, severity, title, typed evidence, advice */
static void json_findings(struct json *j, const struct analysis *a)
{
	json_arr(j, "findings");
	for (int i = 0; i < a->nfindings; i++) {
		const struct finding *f = &a->findings[i];
		json_obj(j, NULL);
		json_str(j, "kind", f->kind);
		if (f->rank >= 0)
			json_int(j, "rank", f->rank);
		else
			json_null(j, "rank");
		json_num(j, "severity", round(f->severity * 1000) / 1000);
		json_str(j, "title", f->title);
		json_obj_spaced(j, "evidence");
		evidence_json(j, f);
		json_close(j);
		json_arr(j, "advice");
		for (int k = 0; k < 4 && f->advice[k]; k++)
			json_str(j, NULL, f->advice[k]);
		json_close(j);
		json_close(j);
	}
	json_close(j);
}

/* how the ranks' clocks were aligned, and how closely */
static void json_clock(struct json *j, const struct analysis *a)
{
	json_obj(j, "clock");
	json_str(j, "method", a->clock_method);
	if (isnan(a->clock_residual_us))
		json_str(j, "max_offset_us", NULL); /* not measured: null */
	else
		json_num(j, "max_offset_us", a->clock_residual_us);
	json_close(j);
}

/* a pipeline-parallel job's shape (findpipe.c): its stages and micro-batches per step */
static void json_pipeline(struct json *j, const struct analysis *a)
{
	if (!a->pipe_stages)
		return;
	json_obj(j, "pipeline");
	json_int(j, "stages", a->pipe_stages);
	json_int(j, "microbatches", a->pipe_micro);
	json_close(j);
}

/* the same in a line: each stage's ranks */
static void text_pipeline(FILE *out, const struct analysis *a)
{
	if (!a->pipe_stage)
		return;
	fprintf(out, "pipeline: %d stages, %d micro-batches per step;", a->pipe_stages, a->pipe_micro);
	for (int s = 0; s < a->pipe_stages; s++) {
		fprintf(out, " stage %d: rank", s);
		for (int r = 0, n = 0; r < a->nranks; r++)
			if (a->pipe_stage[r] == s)
				fprintf(out, "%s %d", n++ ? "," : "", a->ranks[r].rank);
		fputc(s + 1 < a->pipe_stages ? ';' : '\n', out);
	}
}

/* a rank's NCCL kernels, and where their times came from (CUPTI or NCCL's profiler plugin) */
/* rank index r's NVTX ranges on its training thread, per analysed step (findphase.c): their time,
 * calls, and the recorded calls' time in them and in none of their inner ranges by category */
#define RANGES_SHOWN 12
static void json_ranges(struct json *j, const struct analysis *a, int r)
{
	const struct nvrange *g[RANGES_SHOWN];
	int n = a->ranks[r].steps ? an_train_ranges(a, r, g, RANGES_SHOWN) : 0;
	if (!n)
		return;
	json_arr(j, "ranges");
	for (int i = 0; i < n; i++) {
		double calls, ms = an_range_ms(a, r, g[i], &calls), in = g[i]->ms > 0 ? ms / g[i]->ms : 0;
		json_obj(j, NULL);
		json_str(j, "name", g[i]->name);
		json_str(j, "domain", g[i]->domain[0] ? g[i]->domain : NULL);
		json_int(j, "depth", g[i]->depth);
		json_num(j, "ms_per_step", round(ms * 1000) / 1000);
		json_num(j, "calls_per_step", round(calls * 100) / 100);
		json_obj(j, "calls_ms_per_step");
		for (int c = CAT_DATA; c < CAT_COUNT; c++)
			json_num(j, ddpspy_category_names[c], round(g[i]->cat_ms[c] * in * 1000) / 1000);
		json_close(j);
		json_close(j);
	}
	json_close(j);
	if (a->ranks[r].p->ranges_lost)
		json_int(j, "ranges_lost", (int64_t)a->ranks[r].p->ranges_lost);
}

/* the text report's ranges: each rank's costliest few in a line */
static void text_ranges(FILE *out, const struct analysis *a)
{
	int any = 0;
	for (int r = 0; r < a->nranks; r++) {
		const struct nvrange *g[6];
		int n = a->ranks[r].steps ? an_train_ranges(a, r, g, 6) : 0;
		if (!n)
			continue;
		if (!any++)
			fputs("\nrank  NVTX ranges of its training thread, ms per step\n", out);
		fprintf(out, "%4d ", a->ranks[r].rank);
		for (int i = 0; i < n; i++) {
			fprintf(out, " %s", text_safe(g[i]->name, SIZE_MAX));
			if (g[i]->domain[0])
				fprintf(out, " (%s)", text_safe(g[i]->domain, SIZE_MAX));
			fprintf(out, " %.1f%s", an_range_ms(a, r, g[i], NULL), i + 1 < n ? "," : "\n");
		}
	}
}

static void json_rank_nccl(struct json *j, const struct gpustat *g)
{
	json_obj(j, "nccl");
	json_str(j, "source", g->nccl_src == 2 ? "nccl-plugin" : "cupti");
	if (g->nccl_src == 3) /* (CUPTI's records stopped inside the steps: the plugin's kernels after) */
		json_str(j, "after_cupti_stopped", "nccl-plugin");
	json_num(j, "kernels_per_step", round(g->nccl_calls * 10) / 10);
	json_num(j, "ms_per_step", round(g->nccl_ms * 1000) / 1000);
	json_num(j, "wait_ms_per_step", round((g->nccl_ms - g->nccl_xfer_ms) * 1000) / 1000);
	json_num(j, "bytes_per_step", round(g->nccl_bytes));
	json_num(j, "late_ms_p50", round(g->nccl_late_p50 * 1000) / 1000);
	json_close(j);
}

/* ranks[]: each rank's step, its split and the figures beside it */
static void json_ranks(struct json *j, const struct analysis *a)
{
	json_arr(j, "ranks");
	for (int r = 0; r < a->nranks; r++) {
		const struct rankinfo *ri = &a->ranks[r];
		json_obj(j, NULL);
		json_int(j, "rank", ri->rank);
		json_str(j, "host", ri->p->host);
		json_int(j, "pid", ri->p->pid);
		json_num(j, "step_p50_ms", ri->step_p50);
		json_num(j, "step_p95_ms", ri->step_p95);
		report_json_shares(j, "shares", ri->shares);
		json_num(j, "comms_wait_share", round(ri->wait_share * 10000) / 10000);
		json_num(j, "late_ms_p50", ri->late_p50);
		json_num(j, "p2p_wait_share", round(ri->p2p_wait_share * 10000) / 10000);
		json_obj(j, "p2p_wait_states");
		json_num(j, "late_sender_share", round(ri->p2p_share[1] * 10000) / 10000);
		json_num(j, "late_receiver_share", round(ri->p2p_share[0] * 10000) / 10000);
		json_close(j);
		json_obj(j, "bytes_per_step");
		json_num(j, "collective", round(ri->coll_bytes));
		json_num(j, "read", round(ri->read_bytes));
		json_close(j);
		json_num(j, "events_per_step", round(ri->events_step * 10) / 10);
		json_num_or_null(j, "overhead_share", ri->steps && ri->overhead_share >= 0, round(ri->overhead_share * 1e6) / 1e6);
		if (a->pipe_stage && a->pipe_stage[r] >= 0)
			json_int(j, "pipeline_stage", a->pipe_stage[r]);
		/* the correction at the job's start, and how it changes per second after */
		json_num(j, "clock_offset_us",
			 (double)(ri->p->offset + (int64_t)(ri->p->drift * (double)(a->t0 - ri->p->drift_ref))) / 1e3);
		json_num(j, "clock_drift_us_per_s", round(ri->p->drift * 1e7) / 10);
		json_ranges(j, a, r);
		if (ri->cpu.have) {
			/* the training thread's time on a CPU and waiting for one, of the analysed span */
			json_obj(j, "cpu");
			json_num(j, "on_cpu_share", round(ri->cpu.on_cpu * 10000) / 10000);
			json_num(j, "runqueue_share", round(ri->cpu.runq * 10000) / 10000);
			json_int(j, "cpus", ri->cpu.cpus);
			json_close(j);
		}
		if (ri->p->bg) {
			json_obj(j, "background_collectives");
			json_num(j, "ms_per_step", round(ri->bg_ms * 1000) / 1000);
			json_num(j, "overlapped_share", round(ri->bg_overlap * 10000) / 10000);
			json_close(j);
		}
		if (ri->gpu.have)
			json_rank_gpu(j, &ri->gpu);
		if (ri->gpu.nccl_src && (ri->gpu.have || ri->gpu.nccl_src >= 2))
			json_rank_nccl(j, &ri->gpu);
		json_close(j);
	}
	json_close(j);
}

static void print_json(const struct analysis *a)
{
	struct json j;
	json_begin(&j, stdout);
	json_str(&j, "schema", "ddpspy.report.v1");
	json_obj(&j, "tool");
	json_str(&j, "name", "ddpspy");
	json_str(&j, "version", DDPSPY_VERSION);
	json_close(&j);

	json_obj(&j, "job");
	json_arr(&j, "dirs");
	for (int i = 0; i < a->ndirs; i++)
		json_str(&j, NULL, a->dirs[i]);
	json_close(&j);
	json_int(&j, "ranks", a->nranks);
	json_int(&j, "hosts", a->nhosts);
	json_int(&j, "processes", a->nprocs);
	json_int(&j, "steps_detected", a->steps_detected);
	json_int(&j, "steps_analyzed", a->nsteps);
	json_int(&j, "steps_sampled", a->nsampled);
	if (a->steps_cut) /* (the steps after a rank's CUPTI records stopped) */
		json_int(&j, "steps_after_cupti_stopped", a->steps_cut);
	json_int(&j, "skipped", a->skip);
	json_str(&j, "step_source", a->step_source);
	if (a->step_range[0]) { /* (the markers are the program's NVTX range) */
		json_obj(&j, "step_range");
		json_str(&j, "name", a->step_range);
		json_str(&j, "domain", a->step_range_domain[0] ? a->step_range_domain : NULL);
		json_close(&j);
	}
	json_num(&j, "wall_s", a->wall_s);
	json_int(&j, "events", (int64_t)a->events);
	json_int(&j, "dropped_events", (int64_t)a->dropped);
	/* ddpspy's own recording, of the step: the most of any rank's (null: no file measured it) */
	json_num_or_null(&j, "overhead_share", a->nsteps > 0 && a->overhead_share >= 0, round(a->overhead_share * 1e6) / 1e6);
	json_clock(&j, a);
	json_pipeline(&j, a);
	json_arr(&j, "warnings");
	for (int i = 0; i < a->nwarnings; i++)
		json_str(&j, NULL, a->warnings[i]);
	json_close(&j);
	struct gpujob gj;
	an_gpu_job(a, &gj);
	if (gj.any) {
		json_obj(&j, "gpu");
		json_int(&j, "ranks_with_gpu", gj.ranks);
		json_str(&j, "capture", gj.capture);
		json_int(&j, "dropped_records", (int64_t)gj.dropped);
		json_int(&j, "untimed_records", (int64_t)gj.untimed);
		json_num(&j, "clock_residual_us", round(gj.lead_us * 10) / 10);
		json_close(&j);
	}
	json_close(&j);
	if (gj.any) /* where each rank's GPU figures came from */
		json_coverage(&j, a);

	json_obj(&j, "verdict");
	json_str(&j, "bound", a->bound);
	json_num(&j, "confidence", round(a->confidence * 100) / 100);
	report_json_shares(&j, "shares", a->shares);
	json_str(&j, "summary", a->summary);
	json_close(&j);

	json_obj(&j, "step");
	json_num(&j, "p50_ms", a->step_p50);
	json_num(&j, "p95_ms", a->step_p95);
	json_num(&j, "max_ms", a->step_max);
	json_close(&j);

	json_ranks(&j, a);

	json_findings(&j, a);
	json_end(&j);
}

/* whether some rank waited in point-to-point calls */
static int p2p_waits(const struct analysis *a)
{
	for (int r = 0; r < a->nranks; r++)
		if (a->ranks[r].p2p_wait_share > 0)
			return 1;
	return 0;
}

/* ddpspy's own recording: the rank where it cost the most of the step, when files said */
static void print_overhead(FILE *out, const struct analysis *a)
{
	int most = -1;
	for (int r = 0; a->nsteps > 0 && r < a->nranks; r++)
		if (a->ranks[r].steps && a->ranks[r].overhead_share >= 0 &&
		    (most < 0 || a->ranks[r].overhead_share > a->ranks[most].overhead_share))
			most = r;
	if (most >= 0)
		fprintf(out, "ddpspy's own recording: at most %.2f%% of a step (rank %d: %.0f events per step at %.0f ns "
			"each)\n", 100 * a->ranks[most].overhead_share, a->ranks[most].rank, a->ranks[most].events_step,
			a->ranks[most].p->event_ns);
}

/* the text report's GPU table: each rank's device step by part, and how its NCCL kernels were joined */
static void text_gpu(FILE *out, const struct analysis *a)
{
	int gpu = 0;
	for (int r = 0; r < a->nranks; r++)
		gpu |= a->ranks[r].gpu.have;
	if (!gpu)
		return;
	fprintf(out, "\nrank  GPU: compute  copy  nccl (wait)   idle: data  sync launch comms other   kernels/step\n");
	for (int r = 0; r < a->nranks; r++) {
		const struct gpustat *g = &a->ranks[r].gpu;
		double all = 0;
		for (int c = 0; c < GP_COUNT; c++)
			all += g->part[c];
		if (!g->have || all <= 0)
			continue;
#define P(x) (100 * (x) / all)
		fprintf(out, "%4d  %11.0f%% %4.0f%% %4.0f%% %5.0f%%  %10.0f%% %4.0f%% %5.0f%% %4.0f%% %4.0f%%   %12.0f\n",
			a->ranks[r].rank, P(g->part[GP_COMPUTE]), P(g->part[GP_COPY] + g->part[GP_COPY_IN]),
			P(g->part[GP_NCCL_WAIT] + g->part[GP_NCCL]), P(g->part[GP_NCCL_WAIT]), P(g->part[GP_IDLE_DATA]),
			P(g->part[GP_IDLE_SYNC] + g->part[GP_IDLE_PAGEABLE]), P(g->part[GP_IDLE_LAUNCH]), P(g->part[GP_IDLE_COMMS]),
			P(g->part[GP_IDLE_OTHER]), g->kernels);
#undef P
	}
	fprintf(out, "(shares of the GPU's step: busy in the first that applies, else idle by what the host did then)\n");
	for (int r = 0; r < a->nranks; r++) { /* how NCCL kernels found their calls, where not all by their id */
		const uint32_t *n = a->ranks[r].gpu.nccl_join;
		if (a->ranks[r].gpu.have && (n[1] || n[2] || n[3]))
			fprintf(out, "rank %d: NCCL kernels joined to their calls: %u by external id, %u by their "
				"communicator's order (launched by NCCL's own thread: a nonblocking communicator), "
				"%u as CUDA graphs' replays of a captured call (NCCL's profiler plugin), %u by order "
				"alone%s\n", a->ranks[r].rank, n[0], n[1], n[3], n[2],
				n[2] ? " (not matched across ranks where the process has several communicators)" : "");
	}
}

static void print_text(const struct analysis *a)
{
	FILE *out = stdout;
	fprintf(out, "verdict: %s (confidence %.2f)\n", text_safe(a->summary, SIZE_MAX), a->confidence);
	fprintf(out, "  critical path: compute %.0f%%  data %.0f%%  comms %.0f%%  host %.0f%%\n",
		100 * a->shares[CAT_COMPUTE], 100 * a->shares[CAT_DATA], 100 * a->shares[CAT_COMMS],
		100 * a->shares[CAT_HOST]);
	fprintf(out, "  step: p50 %.1f ms, p95 %.1f ms, max %.1f ms\n", a->step_p50, a->step_p95, a->step_max);
	char source[AN_RANGE_NAME + 64];
	if (a->step_range[0])
		snprintf(source, sizeof source, "NVTX range \"%s\"", text_safe(a->step_range, SIZE_MAX));
	else
		snprintf(source, sizeof source, "%s", a->step_source);
	char cut[64] = "";
	if (a->steps_cut)
		snprintf(cut, sizeof cut, ", %d after CUPTI's records stopped left out", a->steps_cut);
	fprintf(out, "job: %d rank%s on %d host%s, %d process%s; %d step%s analysed of %d (steps from %s, "
		"%d warm-up skipped%s); %.1f s, %llu events, %llu dropped; clock: %s, ",
		a->nranks, a->nranks == 1 ? "" : "s", a->nhosts, a->nhosts == 1 ? "" : "s", a->nprocs,
		a->nprocs == 1 ? "" : "es", a->nsteps, a->nsteps == 1 ? "" : "s", a->steps_detected, source,
		a->skip, cut, a->wall_s, (unsigned long long)a->events, (unsigned long long)a->dropped, a->clock_method);
	if (isnan(a->clock_residual_us))
		fprintf(out, "residual unknown\n");
	else
		fprintf(out, "residual %.1f us\n", a->clock_residual_us);
	print_overhead(out, a);
	char *cover = an_gpu_cover_line(a);
	if (cover)
		fprintf(out, "coverage: %s\n", text_safe(cover, SIZE_MAX));
	free(cover);
	for (int i = 0; i < a->nwarnings; i++)
		fprintf(out, "warning: %s\n", text_safe(a->warnings[i], SIZE_MAX));
	fputs("\n", out);
	fprintf(out, "rank  host             step p50    p95  compute   data  comms   host   wait  late p50\n");
	for (int r = 0; r < a->nranks; r++) {
		const struct rankinfo *ri = &a->ranks[r];
		fprintf(out, "%4d  %-15.15s %8.1f %6.1f  %6.0f%% %5.0f%% %5.0f%% %5.0f%% %5.0f%% %6.2f ms\n", ri->rank,
			text_safe(ri->p->host, SIZE_MAX), ri->step_p50, ri->step_p95, 100 * ri->shares[CAT_COMPUTE], 100 * ri->shares[CAT_DATA],
			100 * ri->shares[CAT_COMMS], 100 * ri->shares[CAT_HOST], 100 * (ri->wait_share + ri->p2p_wait_share),
			ri->late_p50);
	}
	fprintf(out, "(shares of each rank's own step; wait: in collectives before the last peer arrived%s)\n",
		p2p_waits(a) ? ", or in point-to-point calls for a late sender or receiver" : "");
	text_ranges(out, a);
	text_gpu(out, a);
	/* NCCL's profiler plugin: where it timed NCCL, and its check against CUPTI (the ranks' in one line) */
	unsigned ck = 0, both = 0, conly = 0, ponly = 0, after = 0;
	double ds = 0, dd = 0, dmax = 0;
	for (int r = 0; r < a->nranks; r++) {
		const struct gpustat *g = &a->ranks[r].gpu;
		struct gpucover c;
		if (g->nccl_src >= 2 && !g->have)
			fprintf(out, "rank %d: NCCL kernels (%s; no device timeline): %.1f per step, "
				"%.2f ms per step, %.2f ms of it before the last rank's kernel started; started %.2f ms "
				"after the first rank's (median)\n", a->ranks[r].rank,
				g->nccl_src == 3 ? "CUPTI's, then NCCL's profiler plugin's once CUPTI's records stopped" :
				"NCCL's profiler plugin", g->nccl_calls, g->nccl_ms, g->nccl_ms - g->nccl_xfer_ms, g->nccl_late_p50);
		if (!a->ranks[r].p->gpu)
			continue;
		an_gpu_cover(a, r, &c);
		if (!c.checked)
			continue;
		ck++, both += c.matched, conly += c.cupti_only, ponly += c.plugin_only, after += c.after_stop;
		ds = fmax(ds, c.start_us), dd = fmax(dd, c.dur_us), dmax = fmax(dmax, c.dur_us_max);
	}
	char more[64] = "";
	if (after)
		snprintf(more, sizeof more, " (and %u after CUPTI's records stopped)", after);
	if (ck)
		fprintf(out, "NCCL's profiler plugin against CUPTI on %u rank%s: %u collectives in both, %u CUPTI's only, %u "
			"the plugin's only%s; starts %.1f us apart, durations %.1f us (the ranks' largest medians; "
			"durations at most %.1f us)\n", ck, ck == 1 ? "" : "s", both, conly, ponly, more, ds, dd, dmax);
	text_pipeline(out, a);
	for (int r = 0; r < a->nranks; r++) {
		const struct rankinfo *ri = &a->ranks[r];
		if (ri->p->bg)
			fprintf(out, "rank %d: collectives on helper threads %.1f ms per step, %.0f%% overlapped with "
				"its work\n", ri->rank, ri->bg_ms, 100 * ri->bg_overlap);
	}
	/* the training threads' CPU, where one waited for a CPU a noticeable part of its steps */
	int contended = 0;
	for (int r = 0; r < a->nranks; r++)
		contended |= a->ranks[r].cpu.have && a->ranks[r].cpu.runq >= 0.05;
	for (int r = 0; contended && r < a->nranks; r++) {
		const struct cpustat *c = &a->ranks[r].cpu;
		if (c->have)
			fprintf(out, "rank %d: training thread on a CPU %.0f%%, waiting for one %.0f%% of its steps (%d CPU%s %s)\n", a->ranks[r].rank, 100 * c->on_cpu, 100 * c->runq, c->process ? c->cpus : c->host_cpus,
				(c->process ? c->cpus : c->host_cpus) == 1 ? "" : "s", c->process ? "bound" : "on its host");
	}
	if (!a->nfindings) {
		fprintf(out, "\nno findings\n");
		return;
	}
	fprintf(out, "\nfindings (severity: the fraction of the step fixing it would win back)\n");
	for (int i = 0; i < a->nfindings; i++) {
		const struct finding *f = &a->findings[i];
		fprintf(out, "%2d. [%.2f] %s", i + 1, f->severity, f->kind);
		if (f->rank >= 0)
			fprintf(out, ", rank %d", f->rank);
		fprintf(out, ": %s\n    evidence: %s\n", text_safe(f->title, SIZE_MAX), text_safe(f->text, SIZE_MAX));
		for (int k = 0; k < 4 && f->advice[k]; k++)
			fprintf(out, "    advice: %s\n", f->advice[k]);
	}
}

/* Whether every kind --fail-on names is one a report can give: a misspelt kind would turn a CI
 * gate off for good, so it is refused (exit 2), naming the kinds. */
static int fail_kinds_known(const char *list)
{
	for (const char *p = list;; p++) {
		size_t n = strcspn(p, ",");
		int known = 0;
		for (int i = 0; n && an_finding_kind(i); i++)
			known |= strlen(an_finding_kind(i)) == n && !strncmp(an_finding_kind(i), p, n);
		if (!known) {
			fprintf(stderr, "ddpspy report: --fail-on: '%.*s' is no finding kind; the kinds are", (int)n, p);
			for (int i = 0; an_finding_kind(i); i++)
				fprintf(stderr, "%s %s", i ? "," : "", an_finding_kind(i));
			fputc('\n', stderr);
			return 0;
		}
		p += n;
		if (!*p)
			return 1;
	}
}

int cmd_report(int argc, char **argv)
{
	int json = 0, rc = 2, mpi = 0;
	struct cli_ranks rk = { NULL, 0 };
	struct an_mpi *m = NULL;
	long skip = 2, jobs = 0;
	double fail_sev = 0.1;
	const char *fail_on = NULL, *html = NULL;
	char **dirs = calloc((size_t)argc + 1, sizeof *dirs);
	int ndirs = 0;
	if (!dirs)
		return 2;
	const struct cli_opt opts[] = {
		{ "--json", NULL, CLI_FLAG, &json, 0, 0, NULL, 1 },
		{ "--mpi", NULL, CLI_FLAG, &mpi, 0, 0, NULL, 1 },
		{ "--skip", NULL, CLI_LONG, &skip, 0, 1000000, "a whole number >= 0", 0 },
		{ "-j", "--jobs", CLI_LONG, &jobs, 1, 4096, "a whole number of threads from 1 to 4096", 0 },
		{ "--html", NULL, CLI_STR, &html, 0, 0, NULL, 0 },
		{ "--fail-on", NULL, CLI_STR, &fail_on, 0, 0, NULL, 0 },
		{ "--fail-severity", NULL, CLI_DOUBLE, &fail_sev, 0, 1, "a number in 0..1", 0 },
		{ "--ranks", NULL, CLI_RANKS, &rk, 0, 0, "a list like 0,2-3", 0 },
		{ NULL, NULL, CLI_FLAG, NULL, 0, 0, NULL, 0 },
	};
	const struct cli c = { "report", opts, usage, 0 };
	int got = cli_parse(&c, argc, argv, dirs, &ndirs);
	if (got) {
		rc = got > 0 ? 0 : 2;
		goto out;
	}
	if (!ndirs) {
		usage(stderr);
		goto out;
	}
	if (fail_on && !fail_kinds_known(fail_on))
		goto out;
	char err[512];
	if (mpi && !(m = an_mpi_start(err, sizeof err))) {
		fprintf(stderr, "ddpspy report: %s\n", err);
		goto out;
	}
	struct report_options o = { .skip = (int)skip, .jobs = (int)jobs, .ranks = rk.v, .nranks = rk.n, .mpi = m,
				    .gpu_whole = html != NULL };
	struct analysis a;
	int ran = analysis_run(&a, dirs, ndirs, &o, err, sizeof err);
	if (a.mpi_follower) {
		/* (a process that read files for process 0: nothing to say, process 0 says it, unless
		 * the exchange itself failed, and then process 0 would wait for it: the job ends) */
		if (!strncmp(err, "--mpi", 5)) {
			fprintf(stderr, "ddpspy report: %s\n", err);
			an_mpi_abort(m);
		}
		rc = 0;
		analysis_free(&a);
		goto out;
	}
	if (ran != 0) {
		fprintf(stderr, "ddpspy report: %s\n", text_safe(err, SIZE_MAX));
		if (m && !strncmp(err, "--mpi", 5))
			an_mpi_abort(m);
		for (int i = 0; i < a.nwarnings; i++)
			fprintf(stderr, "ddpspy report: %s\n", text_safe(a.warnings[i], SIZE_MAX));
		analysis_free(&a);
		goto out;
	}
	an_words(&a);
	if (json)
		print_json(&a);
	else
		print_text(&a);
	rc = 0;
	if (html) {
		if (html_report(&a, html, err, sizeof err) != 0) {
			fprintf(stderr, "ddpspy report: %s\n", text_safe(err, SIZE_MAX));
			rc = 2;
		} else {
			fprintf(stderr, "ddpspy report: wrote %s\n", html);
		}
	}
	if (fail_on) {
		for (int i = 0; i < a.nfindings; i++) {
			const struct finding *f = &a.findings[i];
			size_t l = strlen(f->kind);
			for (const char *p = fail_on; *p;) {
				size_t n = strcspn(p, ",");
				if (n == l && !strncmp(p, f->kind, n) && f->severity >= fail_sev) {
					if (rc != 3)
						fprintf(stderr, "ddpspy report: failing: %s%s severity %.2f >= %.2f\n", f->kind,
							f->rank >= 0 ? " on a rank," : "", f->severity, fail_sev);
					rc = 3;
				}
				p += n + (p[n] == ',');
			}
		}
	}
	analysis_free(&a);
out:
	an_mpi_end(m);
	free(rk.v);
	free(dirs);
	return rc;
}
