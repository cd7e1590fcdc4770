/* The verdict: what bounds the job (the largest share of the critical path), how sure that is,
 * and the one-line summary (where it names the costliest finding, words.c composes it with the
 * finding's words). */
#include <stdio.h>
#include <string.h>

#include "analysis_int.h"

void an_verdict(struct analysis *a)
{
	a->verdict_finding = -1;
	if (!a->nsteps) {
		a->bound = "unknown";
		a->confidence = 0;
		snprintf(a->summary, sizeof a->summary, "unknown: no step could be analysed (%s)",
			 a->nwarnings ? a->warnings[0] : "no events on the training threads");
		if (a->nfindings && !strcmp(a->findings[0].kind, "hang")) /* (a job that hung before its steps) */
			a->verdict_finding = 0;
		return;
	}
	int top = 0, second = -1;
	for (int c = 1; c < CAT_COUNT; c++)
		if (a->shares[c] > a->shares[top])
			top = c;
	for (int c = 0; c < CAT_COUNT; c++)
		if (c != top && (second < 0 || a->shares[c] > a->shares[second]))
			second = c;
	a->bound = ddpspy_category_names[top];
	double conf = 0.5 + (a->shares[top] - a->shares[second]);
	if (a->nsteps < 5)
		conf *= 0.6;
	if (a->events && (double)a->dropped / (double)(a->events + a->dropped) > 0.01)
		conf *= 0.7;
	a->confidence = conf > 1 ? 1 : conf;
	const struct finding *f = a->nfindings ? &a->findings[0] : NULL;
	if (f && !strcmp(f->kind, "lost_events") && a->nfindings > 1 && strcmp(f->kind, "hang"))
		f = &a->findings[1];
	if (f && f->severity >= 0.1) {
		a->verdict_finding = (int)(f - a->findings);
		a->verdict_share = a->shares[top];
	} else {
		snprintf(a->summary, sizeof a->summary, "%s-bound: %.0f%% of the critical path is %s; no pathology costs "
			 "more than 10%% of the step", a->bound, 100 * a->shares[top], a->bound);
	}
}
