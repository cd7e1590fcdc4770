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

/* a string that may be null (NULL then) */
static const char *strn(const struct finding *f, const char *path)
{
	const struct fv *v = ev_at(f, path);
	return v && v->type == FV_STR ? f->strs + v->v.s : NULL;
}

/* the first string of the list at key, NULL when it is empty */
static const char *first_of(const struct finding *f, const char *key)
{
	const struct fv *v = ev_at(f, key);
	if (!v || v->type != FV_LIST || v + 1 >= f->ev + f->nev || v[1].type != FV_STR)
		return NULL;
	return f->strs + v[1].v.s;
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

/* ---- gpu_idle: by what the host did while the device idled ---- */
static void gpu_idle_words(struct finding *f)
{
	static const char *const cause[] = { "data", "sync", "launch", "comms", "other" };
	static const char *const why[] = { "waiting for input", "after the host waited for the device",
					   "while the host launched kernels", "while the host was in a collective of its own",
					   "while the host did other work" };
	static const char *const advice[] = {
		"The input pipeline does not keep the GPU fed: more DataLoader workers, prefetch_factor, pin_memory; "
		"the data_stall finding names what the input waits on.",
		"A call that waits for the GPU every step (a .item(), a blocking copy, a synchronize) empties its queue: "
		"the host_sync finding names it; remove it or defer it to every N steps.",
		"The host cannot launch kernels as fast as the GPU runs them: the launch_bound finding says how many; "
		"fuse them (torch.compile) or capture the step in a CUDA graph.",
		"The host waits in collectives of its own (MPI, gloo: metrics, barriers) while the GPU has nothing "
		"queued: enqueue the GPU's next work first, or reduce on the GPU with NCCL.",
		"The host is busy between the GPU's work (Python overhead, logging, checkpoint bookkeeping): move it off "
		"the training thread or overlap it with the GPU's work."
	};
	int top = 0;
	for (int c = 0; c < 5; c++)
		if (!strcmp(str(f, "cause"), cause[c]))
			top = c;
	if (f->rank >= 0)
		snprintf(f->title, sizeof f->title, "rank %d's GPU idles %.0f%% of the step, mostly %s", f->rank,
			 100 * f->severity, why[top]);
	else
		snprintf(f->title, sizeof f->title, "the GPUs idle %.0f%% of the step, mostly %s", 100 * f->severity, why[top]);
	snprintf(f->text, sizeof f->text, "%.2f ms idle per step: waiting for input %.2f, after waiting for the device "
		 "%.2f, launching %.2f, in the host's collectives %.2f, other host work %.2f", num(f, "idle_ms_per_step"),
		 num(f, "by_cause_ms.data"), num(f, "by_cause_ms.sync"), num(f, "by_cause_ms.launch"),
		 num(f, "by_cause_ms.comms"), num(f, "by_cause_ms.other"));
	f->advice[0] = advice[top];
}

/* ---- host_sync: the call that waited for the device, as its kind and what it did say ---- */
static void host_sync_words(struct finding *f)
{
	const char *call = strn(f, "call"), *w = strn(f, "what"), *frame = first_of(f, "stack");
	const char *how = "a synchronize";
	if (!call || strcmp(call, ddpspy_event_names[DDPSPY_EV_CUDA_SYNC]))
		how = "a blocking copy";
	else if (w && !strcmp(w, ddpspy_name(ddpspy_cuda_sync_names, DDPSPY_SYNC_COUNT, DDPSPY_SYNC_FREE)))
		how = "a free of device or pinned memory, which synchronizes";
	else if (w && !strcmp(w, ddpspy_name(ddpspy_cuda_sync_names, DDPSPY_SYNC_COUNT, DDPSPY_SYNC_PIN)))
		how = "a pinned host allocation";
	else if (w && !strcmp(w, ddpspy_name(ddpspy_cuda_sync_names, DDPSPY_SYNC_COUNT, DDPSPY_SYNC_POLL)))
		how = "polling an event or a stream";
	double idle = num(f, "idle_ms_per_step");
	snprintf(f->title, sizeof f->title, "the host waits for the GPU every step%s%s%s, and the GPU then idles %.1f ms "
		 "per step until the host catches up", call ? " (" : "", call ? how : "", call ? ")" : "", idle);
	snprintf(f->text, sizeof f->text, "%.2f ms idle per step after the host's waits for the device%s%s%s%s%s%s", idle,
		 call ? "; the longest: " : "", call ? call : "", w ? " " : "", w ? w : "", frame ? " at " : "",
		 frame ? frame : "");
	f->advice[0] = "Do not read device values on the host every step (loss.item(), tensor.cpu(), printing a "
		       "tensor): accumulate them on the device and read them every N steps.";
	f->advice[1] = "Copies to pageable host memory and explicit synchronizes wait for all queued work; use "
		       "non_blocking copies into pinned memory and events where a wait is needed.";
}

/* ---- launch_bound ---- */
static void launch_words(struct finding *f)
{
	double kernels = num(f, "kernels_per_step"), us = num(f, "kernel_us_mean");
	snprintf(f->title, sizeof f->title, "%.0f kernels per step of %.1f us each on average: the GPU idles %.0f%% "
		 "of the step between them while the host launches", kernels, us, 100 * f->severity);
	snprintf(f->text, sizeof f->text, "%.0f kernels and %.0f launch calls per step, %.1f us of GPU work each; "
		 "%.2f ms per step idle while launching", kernels, num(f, "launches_per_step"), us, num(f, "idle_ms_per_step"));
	f->advice[0] = "Launch fewer, larger kernels: fuse element-wise work (torch.compile), use fused optimizers "
		       "(foreach/fused Adam), and larger batches per kernel.";
	f->advice[1] = "Capture the step in a CUDA graph (torch.cuda.graphs, CUDA graph trees) so the host "
		       "launches it once.";
}

/* ---- pageable_memcpy ---- */
static void pageable_words(struct finding *f)
{
	char hb[32];
	double calls = num(f, "copies_per_step"), gbs = num(f, "gbs");
	an_human_bytes(num(f, "bytes_per_step"), hb, sizeof hb);
	snprintf(f->title, sizeof f->title, "%.1f copies per step (%s) from or to pageable host memory at %.1f GB/s; "
		 "each also holds the host until it ends", calls, hb, gbs);
	snprintf(f->text, sizeof f->text, "%.1f pageable copies per step, %s, %.2f ms on the GPU at %.1f GB/s against "
		 "%.1f GB/s pinned (%s), and %.2f ms of idle GPU while they held the host", calls, hb,
		 num(f, "ms_per_step"), gbs, num(f, "pinned_gbs"),
		 inum(f, "pinned_gbs_assumed") ? "assumed: 3x, no pinned copy of 1 MiB in the job" : "the job's fastest",
		 num(f, "held_idle_ms_per_step"));
	f->advice[0] = "Copy from pinned memory: DataLoader(pin_memory=True) and tensor.to(device, non_blocking=True), "
		       "or cudaMallocHost/cudaHostRegister for your own buffers.";
}

/* ---- NCCL's kernels on a GPU job: on the compute stream (no_overlap) or exposed for their bytes
 * (collective_volume) ---- */
static void nccl_words(struct finding *f)
{
	int on = (int)inum(f, "on_compute_stream");
	double calls = num(f, "calls_per_step"), bytes = num(f, "bytes"), xfer = num(f, "transfer_ms_per_step");
	const char *op = str(f, "largest_op");
	const struct fv *bus = ev_at(f, "busbw_gbs");
	char hb[32], hmax[32], bw[48] = "";
	an_human_bytes(bytes, hb, sizeof hb);
	an_human_bytes(num(f, "largest_bytes"), hmax, sizeof hmax);
	if (on)
		snprintf(f->title, sizeof f->title, "%.0f NCCL collectives per step (%s) run on the compute stream, after "
			 "the computation: overlapping them with it would win %.0f%% of the step", calls, hb, 100 * f->severity);
	else if (bytes <= 0) /* (kernels joined to no call: their bytes are not known) */
		snprintf(f->title, sizeof f->title, "%.0f NCCL collectives per step, of sizes not known (their kernels "
			 "are joined to no call); %.0f%% of the step the GPU only communicates", calls, 100 * f->severity);
	else
		snprintf(f->title, sizeof f->title, "%.0f NCCL collectives per step move %s (the largest: a%s %s of %s); "
			 "%.0f%% of the step the GPU only communicates", calls, hb, strchr("aeiou", op[0]) ? "n" : "", op, hmax,
			 100 * f->severity);
	if (bus && bus->type == FV_NUM)
		snprintf(bw, sizeof bw, ", bus %.1f GB/s", bus->v.d);
	if (bytes > 0)
		snprintf(f->text, sizeof f->text, "%.1f NCCL kernels per step, %s, %.2f ms transferring at %.1f GB/s "
			 "(bytes over transfer time%s), %.2f ms of it not overlapped", calls, hb, xfer, num(f, "algbw_gbs"), bw,
			 num(f, "exposed_ms_per_step"));
	else
		snprintf(f->text, sizeof f->text, "%.1f NCCL kernels per step of sizes not known, %.2f ms transferring, "
			 "%.2f ms of it not overlapped", calls, xfer, num(f, "exposed_ms_per_step"));
	if (on) {
		f->advice[0] = "All-reduce each gradient bucket on a communication stream as soon as backward has made "
			       "it (DDP does: bucket_cap_mb); the compute stream waits for it only before the optimizer.";
	} else {
		f->advice[0] = "Move fewer bytes per step: accumulate gradients over micro-batches, reduce in bf16/fp16, "
			       "drop all-reduces that are not gradients.";
		f->advice[1] = "Check the links: NCCL_DEBUG=INFO shows the transport; compare the bandwidth with "
			       "nccl-tests' busbw on this machine.";
	}
}

/* collective_volume and no_overlap: a GPU job's (NCCL's kernels, on_compute_stream in evidence),
 * else the host's calls' (whose measuring function still writes its words) */
static void volume_words(struct finding *f)
{
	if (ev_at(f, "on_compute_stream"))
		nccl_words(f);
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
	{ "collective_volume", volume_words },
	{ "no_overlap", volume_words },
	{ "data_stall", NULL },
	{ "gpu_idle", gpu_idle_words },
	{ "host_sync", host_sync_words },
	{ "launch_bound", launch_words },
	{ "pageable_memcpy", pageable_words },
};

void an_words(struct analysis *a)
{
	for (int i = 0; i < a->nfindings; i++)
		for (size_t k = 0; k < sizeof ROWS / sizeof *ROWS; k++)
			if (!strcmp(ROWS[k].kind, a->findings[i].kind) && ROWS[k].words)
				ROWS[k].words(&a->findings[i]);
}
