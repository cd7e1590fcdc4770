/* ddpspy compare --weak|--strong DIR... [--json] [--skip N]: one trace directory per world size,
 * each analysed like `report`, side by side: step time, scaling efficiency against the smallest
 * run, and the category whose time per step grew the most (schema ddpspy.compare.v1). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis.h"
#include "cli.h"
#include "trace.h"
#include "json.h"

struct run {
	char *dir;
	int ranks;
	double step, shares[CAT_COUNT], eff;
	int grew;          /* category, -1 for the base run */
	double grew_ms;
};

static void usage(FILE *to)
{
	fprintf(to, "usage: ddpspy compare --weak|--strong DIR_WS1 DIR_WS2 ... [--json] [--skip N]\n"
		    "  --weak    per-rank work fixed: efficiency T1 / TN\n"
		    "  --strong  global work fixed: efficiency T1 / (N x TN)\n"
		    "(T: step p50; 1: the run with the fewest ranks; N: ranks relative to it)\n");
}

static int cmp_run(const void *x, const void *y)
{
	const struct run *a = x, *b = y;
	return AN_ORDER(a->ranks, b->ranks);
}

int cmd_compare(int argc, char **argv)
{
	int mode = 0, json = 0, n = 0, rc = 2;
	long skip = 2;
	struct run *runs = calloc((size_t)argc + 1, sizeof *runs);
	char **dirs = calloc((size_t)argc + 1, sizeof *dirs);
	if (!runs || !dirs) {
		free(runs);
		free(dirs);
		return 2;
	}
	const struct cli_opt opts[] = {
		{ "--weak", NULL, CLI_FLAG, &mode, 0, 0, NULL, 'w' },
		{ "--strong", NULL, CLI_FLAG, &mode, 0, 0, NULL, 's' },
		{ "--json", NULL, CLI_FLAG, &json, 0, 0, NULL, 1 },
		{ "--skip", NULL, CLI_LONG, &skip, 0, 1000000, "a whole number >= 0", 0 },
		{ NULL, NULL, CLI_FLAG, NULL, 0, 0, NULL, 0 },
	};
	const struct cli cl = { "compare", opts, usage, 0 };
	int got = cli_parse(&cl, argc, argv, dirs, &n);
	for (int i = 0; i < n; i++)
		runs[i].dir = dirs[i];
	free(dirs);
	if (got) {
		rc = got > 0 ? 0 : 2;
		goto out;
	}
	if (!mode || n < 2) {
		fprintf(stderr, "ddpspy compare: needs --weak or --strong and at least two directories\n");
		usage(stderr);
		goto out;
	}
	struct report_options o = { .skip = (int)skip };
	for (int i = 0; i < n; i++) {
		struct analysis a;
		char err[512];
		if (analysis_run(&a, &runs[i].dir, 1, &o, err, sizeof err) != 0 || !a.nsteps) {
			fprintf(stderr, "ddpspy compare: %s: %s\n", runs[i].dir, a.nsteps ? err : "no step to analyse");
			analysis_free(&a);
			goto out;
		}
		runs[i].ranks = a.nranks;
		runs[i].step = a.step_p50;
		memcpy(runs[i].shares, a.shares, sizeof a.shares);
		analysis_free(&a);
	}
	sort_n(runs, (size_t)n, sizeof *runs, cmp_run);
	const struct run *b = &runs[0];
	for (int i = 0; i < n; i++) {
		struct run *r = &runs[i];
		double N = (double)r->ranks / (double)b->ranks;
		r->eff = r->step > 0 ? (mode == 'w' ? b->step / r->step : b->step / (N * r->step)) : 0;
		r->grew = -1;
		/* time per step by category against the base; strong scaling expects 1/N of it */
		double scale = mode == 'w' ? 1 : 1 / N;
		for (int c = 0; i && c < CAT_COUNT; c++) {
			double g = r->step * r->shares[c] - scale * b->step * b->shares[c];
			if (r->grew < 0 || g > r->grew_ms) {
				r->grew = c;
				r->grew_ms = g;
			}
		}
	}
	if (json) {
		struct json j;
		json_begin(&j, stdout);
		json_str(&j, "schema", "ddpspy.compare.v1");
		json_str(&j, "mode", mode == 'w' ? "weak" : "strong");
		json_arr(&j, "runs");
		for (int i = 0; i < n; i++) {
			json_obj(&j, NULL);
			json_str(&j, "dir", runs[i].dir);
			json_int(&j, "ranks", runs[i].ranks);
			json_num(&j, "step_p50_ms", runs[i].step);
			json_num(&j, "efficiency", round(runs[i].eff * 1000) / 1000);
			report_json_shares(&j, "shares", runs[i].shares);
			json_str(&j, "grew", runs[i].grew >= 0 ? ddpspy_category_names[runs[i].grew] : NULL);
			json_num(&j, "grew_ms_per_step", runs[i].grew >= 0 ? runs[i].grew_ms : 0);
			json_close(&j);
		}
		json_close(&j);
		json_end(&j);
	} else {
		printf("%s scaling against %s (%d rank%s)\n", mode == 'w' ? "weak" : "strong", b->dir, b->ranks,
		       b->ranks == 1 ? "" : "s");
		printf("ranks  step p50  efficiency  compute   data  comms   host  grew most\n");
		for (int i = 0; i < n; i++) {
			const struct run *r = &runs[i];
			printf("%5d %8.1f ms %9.1f%%  %6.0f%% %5.0f%% %5.0f%% %5.0f%%  ", r->ranks, r->step, 100 * r->eff,
			       100 * r->shares[CAT_COMPUTE], 100 * r->shares[CAT_DATA], 100 * r->shares[CAT_COMMS],
			       100 * r->shares[CAT_HOST]);
			if (r->grew >= 0)
				printf("%s %+.1f ms/step\n", ddpspy_category_names[r->grew], r->grew_ms);
			else
				printf("(base)\n");
		}
	}
	rc = 0;
out:
	free(runs);
	return rc;
}
