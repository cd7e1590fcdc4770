/* The words of the findings: each kind's title, evidence line and advice, composed from the typed
 * evidence its measuring function filled, by one row per kind (ROWS), once the findings are
 * found and before the verdict quotes the costliest. Every renderer (text, JSON, HTML, the
 * Perfetto view) shows these same words. A kind whose row has no words yet still writes its own
 * in its measuring function (docs/design.md says which). */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "../common/format.h"
#include "analysis_int.h"
#include "findings_int.h"

/* the value at path ("key", or "object.key") of f's evidence, NULL when there is none */
static const struct fv *ev_at(const struct finding *f, const char *path)
{
	const char *dot = strchr(path, '.'), *obj = NULL, *key = dot ? dot + 1 : path;
	size_t n = dot ? (size_t)(dot - path) : 0;
	int depth = 0;
	for (int i = 0; i < f->nev; i++) {
		const struct fv *v = &f->ev[i];
		if (v->type == FV_END) {
			if (--depth == 0)
				obj = NULL;
			continue;
		}
		int here = dot ? depth == 1 && obj && !strncmp(obj, path, n) && !obj[n] : depth == 0;
		if (here && v->key && !strcmp(v->key, key))
			return v;
		if (v->type == FV_OBJ || v->type == FV_LIST) {
			if (depth++ == 0)
				obj = v->key;
		}
	}
	return NULL;
}

static double num(const struct finding *f, const char *path)
{
	const struct fv *v = ev_at(f, path);
	return !v ? 0 : v->type == FV_NUM ? v->v.d : v->type == FV_INT || v->type == FV_BOOL ? (double)v->v.i : 0;
}

static int64_t inum(const struct finding *f, const char *path)
{
	const struct fv *v = ev_at(f, path);
	return v && (v->type == FV_INT || v->type == FV_BOOL) ? v->v.i : v && v->type == FV_NUM ? (int64_t)v->v.d : 0;
}

static const char *str(const struct finding *f, const char *path)
{
	const struct fv *v = ev_at(f, path);
	return v && v->type == FV_STR ? f->strs + v->v.s : "";
}

/* ---- rank0_serialization ---- */
static void rank0_words(struct finding *f)
{
	const char *op = str(f, "op");
	double host = num(f, "host_ms_per_step"), wait = num(f, "wait_ms_per_step");
	snprintf(f->title, sizeof f->title, "rank %d does %.1f ms of host work per step right before a%s %s "
		 "that every other rank waits at", f->rank, host, strchr("aeiou", op[0]) ? "n" : "", op);
	snprintf(f->text, sizeof f->text, "last at %.0f of %.0f %s calls, straight from host work (%.1f ms more "
		 "than its peers per step); the others wait %.1f ms per step there", num(f, "last_at"),
		 num(f, "instances"), op, host, wait);
	f->advice[0] = "Move rank-only work (logging, metrics, checkpoint bookkeeping, evaluation setup) off "
		       "the step's critical path: run it asynchronously, every N steps, or on all ranks in parallel.";
	f->advice[1] = "Do not put a barrier or collective right after work only one rank does.";
}

/* ---- straggler: by its cause, and whether its peers wait for it point to point ---- */
static void straggler_words(struct finding *f)
{
	const char *state = str(f, "wait_state"), *cause = str(f, "cause");
	int p2p = strcmp(state, "collective") != 0, sends = !strcmp(state, "late_sender");
	int64_t cnt = inum(f, "steps_late"), N = inum(f, "steps");
	double wait = num(f, "wait_ms_per_step");
	if (p2p)
		snprintf(f->title, sizeof f->title, "rank %d %s late in %" PRId64 " of %" PRId64 " steps: its peers wait "
			 "%.1f ms per step in point-to-point calls (%s) for its %s", f->rank, sends ? "sends" : "receives",
			 cnt, N, wait, sends ? "late sender" : "late receiver", cause);
	else
		snprintf(f->title, sizeof f->title, "rank %d is late to collectives in %" PRId64 " of %" PRId64 " steps: "
			 "the others wait %.1f ms per step for its %s", f->rank, cnt, N, wait, cause);
	snprintf(f->text, sizeof f->text, "late in %" PRId64 "/%" PRId64 " steps by %.1f ms (p50); others wait %.1f "
		 "ms/step at %s; its excess per step: compute %.1f ms, data %.1f ms, host %.1f ms", cnt, N,
		 num(f, "late_ms_p50"), wait, str(f, "op"), num(f, "excess_ms_per_step.compute"),
		 num(f, "excess_ms_per_step.data"), num(f, "excess_ms_per_step.host"));
	if (p2p && !strcmp(cause, "compute"))
		f->advice[0] = "This rank computes longer than its peers: balance the work per rank (cells or "
			       "particles of the domain decomposition, layers per pipeline stage), or check for a "
			       "throttled or shared core.";
	else if (!strcmp(cause, "data"))
		f->advice[0] = "Rank's input path is slower than its peers': check its storage and give its "
			       "DataLoader more workers (num_workers), prefetch_factor and pin_memory.";
	else if (!strcmp(cause, "host"))
		f->advice[0] = "Find what this rank does on the host that its peers do not (sleeps, logging, "
			       "garbage collection, preprocessing in the training loop) and move it off the step.";
	else
		f->advice[0] = "This rank computes longer than its peers: check for a throttled or shared "
			       "device, and for uneven work per rank (batch sizes, sequence lengths: balance "
			       "tokens, not samples).";
	f->advice[1] = p2p ? "Its peers wait for its messages every step, and their delay passes on to "
			     "their own peers: the job runs at the pace of this rank." :
			     "Every other rank waits at the next collective for the slowest one: the job runs "
			     "at the pace of this rank.";
}

/* ---- cpu_contention: who holds the CPUs (by group), and what to change for each ---- */
static void cpu_words(struct finding *f)
{
	static const char *const who[CPU_GROUPS] = { "other ranks", "input workers", "collective threads", "other threads" };
	static const char *const advice[CPU_GROUPS] = {
		"More ranks (and their threads) than CPUs: run fewer ranks per host, or give each rank its own cores "
		"(mpirun --bind-to core, torchrun under taskset or numactl).",
		"The input workers take the CPUs the training threads need: fewer workers (num_workers up to the CPUs "
		"each rank may use, less one for training), or a cheaper transform: move decode and augmentation off "
		"the host (GPU decode, DALI) or offline.",
		"The collective library's threads take the CPUs the training threads need: fewer of them, or more "
		"CPUs per rank.",
		"Other threads of the job take the CPUs: cap intra-op and library thread pools (OMP_NUM_THREADS, "
		"torch.set_num_threads, MKL_NUM_THREADS) to the CPUs each rank may use.",
	};
	double cores[CPU_GROUPS];
	int top = CPU_OTHER;
	char key[64], whose[64], cpus[64] = "";
	for (int g = 0; g < CPU_GROUPS; g++) {
		snprintf(key, sizeof key, "cpus_held.%s", an_cpu_group_names[g]);
		cores[g] = num(f, key);
		if (!strcmp(str(f, "top"), an_cpu_group_names[g]))
			top = g;
	}
	int shown = (int)inum(f, "rank_shown"), avail = (int)inum(f, "cpus"), process = !strcmp(str(f, "scope"), "process");
	double runq = num(f, "runqueue_share"), demand = num(f, "cpus_wanted");
	if (f->rank < 0)
		snprintf(whose, sizeof whose, "every rank's");
	else
		snprintf(whose, sizeof whose, "rank %d's", shown);
	if (avail > 0)
		snprintf(cpus, sizeof cpus, " of the %d %s", avail, process ? "it is bound to" : "of its host");
	snprintf(f->title, sizeof f->title, "%s training thread waits for a CPU %.0f%% of its step: %s hold %.1f CPUs%s "
		 "(%.1f wanted)", whose, 100 * runq, who[top], cores[top], cpus, demand);
	size_t toff = (size_t)snprintf(f->text, sizeof f->text, "rank %d's training thread is on a CPU %.0f%% and runnable but "
				       "waiting %.0f%% of its steps; CPUs held: other ranks %.2f, input workers %.2f, "
				       "collective threads %.2f, other threads %.2f", shown, 100 * num(f, "on_cpu_share"),
				       100 * runq, cores[CPU_TRAIN], cores[CPU_INPUT], cores[CPU_COLL], cores[CPU_OTHER]);
	if (toff < sizeof f->text)
		snprintf(f->text + toff, sizeof f->text - toff, ", outside the job %.2f; %.1f CPUs wanted%s",
			 num(f, "cpus_held.outside_job"), demand, cpus);
	f->advice[0] = advice[top];
	f->advice[1] = "A thread waiting for a CPU delays every rank that waits for it: the job runs at the pace of "
		       "its most contended rank.";
}

/* ---- work_skew ---- */
static void skew_words(struct finding *f)
{
	double spread = num(f, "compute_spread_ms_per_step");
	snprintf(f->title, sizeof f->title, "compute per step differs between ranks by %.1f ms on average and the "
		 "slowest rank changes from step to step", spread);
	snprintf(f->text, sizeof f->text, "the slowest rank computes %.1f ms more than the mean per step; no rank is "
		 "slowest in more than %.0f%% of steps; it changes %d times in %" PRId64 " steps", spread,
		 100 * num(f, "slowest_rank_share"), (int)inum(f, "slowest_rank_changes"), inum(f, "steps"));
	f->advice[0] = "Balance work, not samples: bucket sequences by length or batch by token budget, so every "
		       "rank gets about the same number of (padded) tokens per step.";
	f->advice[1] = "Log tokens per rank per step (and the padding ratio) to confirm.";
}

/* One row per kind: its words from its evidence (NULL: its measuring function still writes them) */
static const struct row {
	const char *kind;
	void (*words)(struct finding *f);
} ROWS[] = {
	{ "rank0_serialization", rank0_words },
	{ "straggler", straggler_words },
	{ "cpu_contention", cpu_words },
	{ "work_skew", skew_words },
	{ "lost_events", NULL },
	{ "small_work", NULL },
	{ "collective_volume", NULL },
	{ "no_overlap", NULL },
	{ "data_stall", NULL },
	{ "gpu_idle", NULL },
	{ "host_sync", NULL },
	{ "launch_bound", NULL },
	{ "pageable_memcpy", NULL },
};

void an_words(struct analysis *a)
{
	for (int i = 0; i < a->nfindings; i++)
		for (size_t k = 0; k < sizeof ROWS / sizeof *ROWS; k++)
			if (!strcmp(ROWS[k].kind, a->findings[i].kind) && ROWS[k].words)
				ROWS[k].words(&a->findings[i]);
}
