/* The analysis behind `ddpspy report` (analysis.h), phase after phase, each in its own file:
 *   load.c -> clocks.c -> steps.c -> p2p.c, split.c (gpustep.c) -> cpu.c -> findings.c -> verdict.c
 * with kinds.c (what each event kind means), stats.c (quantiles, collective instances), model.c
 * and waits.c (what every phase uses of the job's model) under them all. No file calls back into
 * one that calls it (tests/e2e/test_layers.py); docs/design.md follows one event through them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis_int.h"

int analysis_run(struct analysis *a, char **dirs, int ndirs, const struct report_options *o,
	char *err, size_t errlen)
{
	memset(a, 0, sizeof *a);
	a->dirs = dirs;
	a->ndirs = ndirs;
	a->skip = o->skip;
	a->step_source = "none";
	a->bound = "unknown";
	a->clock_method = "none";
	a->jobs = o->jobs > 0 ? o->jobs : an_jobs_default();
	a->mpi = o->mpi;
	a->gpu_whole = o->gpu_whole;
	a->prefix = (size_t)an_knob(AN_KNOB_PREFIX, 0); /* 0: by the job's size (load.c) */
	a->spread = (size_t)an_knob(AN_KNOB_SPREAD, 2048); /* (spread.c) */
	a->gpu_keep = (size_t)an_knob(AN_KNOB_GPU_KEEP, 0); /* (gpu.c: 0, by the job's size) */
	if (an_load(a, o, err, errlen) != 0)
		return -1;
	a->sample_max = an_sample_max((size_t)a->nranks);
	an_align_clocks(a);
	an_spread_free(a);
	an_wall_time(a);
	an_find_steps(a);
	an_split_steps(a);
	if (a->mpi_follower)
		return -1; /* (report --mpi: process 0 reports) */
	an_cpu(a);
	an_find_all(a);
	an_verdict(a);
	an_clock_warning(a);
	return 0;
}

void analysis_free(struct analysis *a)
{
	an_split_free(a);
	an_steps_free(a);
	an_load_free(a);
	free(a->pipe_stage);
	a->pipe_stage = NULL;
}
