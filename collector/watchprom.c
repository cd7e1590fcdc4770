/* ddpspy watch --prometheus: the metrics of the job as watched now (watch.c keeps them), in
 * Prometheus' text format (prom.c): per rank its step times, lateness, shares, drops and the call
 * to peers in flight; per job the severity of each finding kind, the hang, events read. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "../common/format.h"
#include "watch_int.h"

const double watch_buckets[NBUCKETS] = { 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30 };

static void rank_labels(const struct wrank *r, char *rank, size_t n, const char **l)
{
	snprintf(rank, n, "%d", r->rank);
	l[0] = "rank", l[1] = rank, l[2] = "host", l[3] = r->f.host;
}

/* a family of one value per rank: what 0, the others' waits for it; 1, its events dropped; 2, how
 * long its oldest call to peers has been in flight */
static void per_rank(const struct watch *w, struct prom *p, const char *name, const char *type, const char *help,
		     int what)
{
	char rk[16];
	const char *l[4];
	double now = (double)now_real();
	prom_family(p, name, type, help);
	for (int i = 0; i < w->n; i++) {
		const struct wrank *r = &w->r[i];
		double v = what == 0 ? r->late_s : what == 1 ? (double)r->f.dropped : 0;
		for (int k = 0; what == 2 && k < r->nfl; k++)
			v = fmax(v, (now - (double)r->fl[k].t) / 1e9);
		if (r->rank < 0)
			continue;
		rank_labels(r, rk, sizeof rk, l);
		prom_sample(p, name, l, 2, v);
	}
}

void watch_metrics(const void *ctx, struct prom *p)
{
	const struct watch *w = ctx;
	char rk[16], le[32];
	const char *l[8];
	prom_family(p, "ddpspy_step_seconds", "histogram", "Each rank's step time, since ddpspy watch began.");
	for (int i = 0; i < w->n; i++) {
		const struct wrank *r = &w->r[i];
		if (r->rank < 0)
			continue;
		rank_labels(r, rk, sizeof rk, l);
		uint64_t cum = 0;
		for (size_t b = 0; b <= NBUCKETS; b++) {
			cum += r->hist[b];
			if (b < NBUCKETS)
				snprintf(le, sizeof le, "%g", watch_buckets[b]);
			l[4] = "le", l[5] = b < NBUCKETS ? le : "+Inf";
			prom_sample(p, "ddpspy_step_seconds_bucket", l, 3, (double)cum);
		}
		prom_sample(p, "ddpspy_step_seconds_sum", l, 2, r->step_s);
		prom_sample(p, "ddpspy_step_seconds_count", l, 2, (double)cum);
	}
	per_rank(w, p, "ddpspy_late_seconds_total", "counter",
		 "Time the rank's peers waited for it: it was the last to a collective, by this much after the next-last "
		 "(of collectives in flight together, what it added).", 0);
	prom_family(p, "ddpspy_time_ratio", "gauge",
		    "The share of the last interval the rank's training thread spent by category (compute: outside its calls).");
	for (int i = 0; i < w->n; i++)
		for (int c = 0; c < CAT_COUNT && w->r[i].rank >= 0; c++) {
			rank_labels(&w->r[i], rk, sizeof rk, l);
			l[4] = "category", l[5] = ddpspy_category_names[c];
			prom_sample(p, "ddpspy_time_ratio", l, 3, w->r[i].share[c]);
		}
	per_rank(w, p, "ddpspy_events_dropped_total", "counter", "Events the rank's process could not record (full rings).", 1);
	per_rank(w, p, "ddpspy_inflight_seconds", "gauge",
		 "How long the rank's oldest call to its peers has been in flight (0: none).", 2);
	prom_family(p, "ddpspy_finding_severity", "gauge",
		    "Severity of each finding kind over the last interval, as the report's analysis of what the files gained "
		    "over it finds (0: not found, or too few steps to judge); hang: 1 once the alarm was raised.");
	l[0] = "kind";
	for (int k = 0; k < w->find.nkinds; k++) {
		l[1] = wfind_kind(&w->find, k);
		prom_sample(p, "ddpspy_finding_severity", l, 1, !strcmp(l[1], "hang") ? w->hang : w->find.sev[k]);
	}
	prom_family(p, "ddpspy_hang", "gauge", "1 once a call to peers has been in flight longer than --hang-after.");
	prom_sample(p, "ddpspy_hang", NULL, 0, w->hang);
	prom_family(p, "ddpspy_watch_events_total", "counter", "Events ddpspy watch has read.");
	uint64_t ev = 0;
	for (int i = 0; i < w->n; i++)
		ev += w->r[i].events;
	prom_sample(p, "ddpspy_watch_events_total", NULL, 0, (double)ev);
}
