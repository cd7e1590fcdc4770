/* The words of the findings, the renderers' first step: each kind's title, evidence line and
 * advice, composed from the typed evidence its measuring function filled (and the figures only
 * words use: hidden evidence), by one row per kind (ROWS), and the verdict's summary that quotes
 * the costliest. Every renderer (text, JSON, HTML, the Perfetto view) shows these same words; the
 * analysis (findings.c, finddata.c, findgpu.c) writes none. */
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

/* the index of name s in names (n of them), -1 when it is none */
static int name_index(const char *const *names, int n, const char *s)
{
	for (int i = 0; i < n; i++)
		if (names[i] && !strcmp(names[i], s))
			return i;
	return -1;
}

/* ---- rank0_serialization ---- */
static void rank0_words(struct finding *f)
{
	const char *op = str(f, "op");
	double host = num(f, "host_ms_per_step"), wait = num(f, "wait_ms_per_step");
	const char *site = strn(f, "top_site");
	snprintf(f->title, sizeof f->title, "rank %d does %.1f ms of host work per step right before a%s %s "
		 "that every other rank waits at%s%s", f->rank, host, strchr("aeiou", op[0]) ? "n" : "", op,
		 site ? "; most of it in " : "", site ? site : "");
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
	const char *call = strn(f, "top_call"), *frame = strn(f, "top_site");
	const struct fv *unc = ev_at(f, "severity_uncontended");
	size_t n = strlen(f->title);
	frame = frame ? frame : strn(f, "top_frame");
	if (call) /* (its host calls: the one its peers make least of, and where) */
		snprintf(f->title + n, sizeof f->title - n, " (mostly %s%s%s)", call, frame ? " at " : "", frame ? frame : "");
	else if (frame && !strcmp(cause, "compute")) /* (its compute: where the samples found it most) */
		snprintf(f->title + n, sizeof f->title - n, " (most of it in %s)", frame);
	snprintf(f->text, sizeof f->text, "late in %" PRId64 "/%" PRId64 " steps by %.1f ms (p50); others wait %.1f "
		 "ms/step at %s; its excess per step: compute %.1f ms, data %.1f ms, host %.1f ms", cnt, N,
		 num(f, "late_ms_p50"), wait, str(f, "op"), num(f, "excess_ms_per_step.compute"),
		 num(f, "excess_ms_per_step.data"), num(f, "excess_ms_per_step.host"));
	n = strlen(f->text);
	if (unc && unc->type == FV_NUM)
		snprintf(f->text + n, sizeof f->text - n, "; threads wait for a CPU %.0f%% of the step: once no thread does, "
			 "its host time would cost about %.0f%% of the step", 100 * num(f, "contention_share"), 100 * unc->v.d);
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

/* ---- host_asymmetry: the rank's extra host calls, the longest kind's stack, and what fixing them
 * wins now and once the host's CPU contention is fixed ---- */
static void host_asym_words(struct finding *f)
{
	const char *call = strn(f, "top_call"), *frame = strn(f, "top_site");
	frame = frame ? frame : strn(f, "top_frame");
	const struct fv *unc = ev_at(f, "severity_uncontended");
	double exc = num(f, "excess_ms_per_step"), waited = num(f, "waited_for_ms_per_step");
	char later[160] = "";
	if (unc && unc->type == FV_NUM)
		snprintf(later, sizeof later, "; once no thread waits for a CPU (%.0f%% of the step now) they would wait all "
			 "of it, about %.0f%% of the step", 100 * num(f, "contention_share"), 100 * unc->v.d);
	snprintf(f->title, sizeof f->title, "rank %d spends %.1f ms per step in host calls its peers do not make%s%s%s: "
		 "they wait %.1f ms per step for it now%s", f->rank, exc, call ? " (mostly " : "", call ? call : "",
		 call ? ")" : "", waited, later);
	char most[320] = "";
	if (call)
		snprintf(most, sizeof most, "; the most: %s, %.1f ms per step against its peers' %.1f%s%s", call,
			 num(f, "top_ms"), num(f, "top_peers_ms"), frame ? ", at " : "", frame ? frame : "");
	snprintf(f->text, sizeof f->text, "%.1f ms per step in host calls, %.1f ms more than its peers' median%s; "
		 "%.1f ms per step of the others' waits are for it", num(f, "host_ms_per_step"), exc, most, waited);
	f->advice[0] = "Find what this rank does on the host that its peers do not (sleeps, logging, checkpoint "
		       "writes, lock waits) and move it off the step or spread it over the ranks.";
	if (unc)
		f->advice[1] = "Fix the CPU contention first, then this: its cost grows once the other ranks no "
			       "longer wait for a CPU while it runs.";
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
	int top = name_index(an_cpu_group_names, CPU_GROUPS, str(f, "top"));
	char key[64], whose[64], cpus[64] = "";
	if (top < 0)
		top = CPU_OTHER;
	for (int g = 0; g < CPU_GROUPS; g++) {
		snprintf(key, sizeof key, "cpus_held.%s", an_cpu_group_names[g]);
		cores[g] = num(f, key);
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
	int top = name_index(cause, 5, str(f, "cause"));
	if (top < 0)
		top = 0;
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
	const char *call = strn(f, "call"), *w = strn(f, "what"), *frame = strn(f, "top_site");
	const char *how = "a synchronize";
	frame = frame ? frame : first_of(f, "stack");
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
	const char *site = strn(f, "top_site");
	size_t n = strlen(f->title);
	if (site) /* (the line that launches them, where the main thread ran Python) */
		snprintf(f->title + n, sizeof f->title - n, "; most of the host's time in %s", site);
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

/* ---- the host's collectives: the largest op's bytes (hb: "unknown size" when its calls carry
 * none, gloo's) and all of them per step (ha) ---- */
static void host_bytes(const struct finding *f, char *hb, char *ha, size_t n)
{
	const struct fv *b = ev_at(f, "bytes"), *all = ev_at(f, "all_bytes_per_step");
	snprintf(hb, n, "unknown size");
	snprintf(ha, n, "sizes unknown");
	if (b && b->type == FV_INT)
		an_human_bytes((double)b->v.i, hb, n);
	if (all && all->type == FV_NUM)
		an_human_bytes(all->v.d, ha, n);
}

static void small_work_words(struct finding *f)
{
	char hb[32], ha[32];
	double work_ms = num(f, "work_ms_per_step"), sync_ms = num(f, "ms_per_step"), per = num(f, "collectives_per_step");
	const struct fv *lat = ev_at(f, "latency_bound");
	int latency = lat && lat->type == FV_BOOL && lat->v.i;
	host_bytes(f, hb, ha, sizeof hb);
	if (latency)
		snprintf(f->title, sizeof f->title, "collectives of %s cost a fixed latency per call (%.2f ms), not their "
			 "bytes: %.1f ms of every step against %.1f ms of work on the busiest rank", hb, num(f, "call_ms"),
			 sync_ms, work_ms);
	else
		snprintf(f->title, sizeof f->title, "the busiest rank works %.1f ms per step, then every rank "
			 "synchronizes for %.1f ms: too little work per rank for what each step's synchronization costs",
			 work_ms, sync_ms);
	if (latency)
		snprintf(f->text, sizeof f->text, "%.1f ms of work (compute, input, host) on the busiest rank per step; "
			 "%.1f collectives per step, %s, %.1f ms in them beyond waiting for peers; the largest, %.1f %s of %s "
			 "per step: too few bytes for any link's bandwidth to matter, so moving fewer would not help",
			 work_ms, per, ha, sync_ms, num(f, "calls_per_step"), str(f, "op"), hb);
	else
		snprintf(f->text, sizeof f->text, "%.1f ms of work (compute, input, host) on the busiest rank per "
			 "step against %.1f ms in which no rank works; %.1f collectives per step, %s; the largest, %.1f %s "
			 "of %s per step", work_ms, sync_ms, per, ha, num(f, "calls_per_step"), str(f, "op"), hb);
	f->advice[0] = "Give each rank more work per synchronization: a larger per-rank batch, or gradient "
		       "accumulation (DDP's no_sync() for all but the last micro-batch) until compute per "
		       "all-reduce outweighs its cost.";
	f->advice[1] = "For a fixed global batch, fewer ranks may be faster: strong scaling stops paying once "
		       "per-rank compute is this small (check with ddpspy compare --strong).";
	f->advice[2] = "Drop synchronization that is not gradients from the step: metrics and loss "
		       "all-reduces every N steps, not every step.";
	if (latency && per >= 2)
		f->advice[3] = "Fuse small collectives into fewer, larger ones: flatten tensors into one buffer per "
			       "all-reduce (DDP's gradient buckets, bucket_cap_mb), all_reduce_coalesced.";
}

/* collective_volume of the host's calls: the largest op, its time per step where it blocks */
static void host_volume_words(struct finding *f)
{
	char hb[32], ha[32], rate[96] = "";
	double per = num(f, "calls_per_step");
	const char *op = str(f, "op");
	const struct fv *op_ms = ev_at(f, "op_ms_per_step"), *gbps = ev_at(f, "gbytes_per_s");
	host_bytes(f, hb, ha, sizeof hb);
	if (per > 0.9 && per < 1.1)
		snprintf(f->title, sizeof f->title, "an %s of %s every step; collectives take %.0f%% of every rank's "
			 "step beyond waiting for peers", op, hb, 100 * f->severity);
	else
		snprintf(f->title, sizeof f->title, "%.1f %s calls of %s per step; collectives take %.0f%% of every "
			 "rank's step beyond waiting for peers", per, op, hb, 100 * f->severity);
	if (op_ms && gbps) /* (blocking, its size known) */
		snprintf(rate, sizeof rate, ", %.1f ms per step in them, %.2f GB/s", op_ms->v.d, gbps->v.d);
	else if (op_ms)
		snprintf(rate, sizeof rate, ", %.1f ms per step in them", op_ms->v.d);
	snprintf(f->text, sizeof f->text, "%.1f %s of %s per step%s (%s per step in all collectives, %.1f ms per "
		 "step beyond waiting)", per, op, hb, rate, ha, num(f, "ms_per_step"));
	f->advice[0] = "Move fewer bytes per step: drop all-reduces that are not gradients (reduce metrics every N "
		       "steps), accumulate gradients over micro-batches before reducing, or reduce in bf16/fp16.";
	f->advice[1] = "Overlap what must be reduced with backward: DDP's bucket_cap_mb, or nonblocking collectives "
		       "started as gradients become ready.";
}

/* no_overlap of the host's calls: blocking gradient all-reduces back to back after backward */
static void host_overlap_words(struct finding *f)
{
	char hb[32];
	double nb = num(f, "allreduces_per_step");
	an_human_bytes(num(f, "bytes_per_step"), hb, sizeof hb);
	snprintf(f->title, sizeof f->title, "%.0f gradient all-reduces per step (%s) run back to back after "
		 "backward, none overlapping it", nb, hb);
	snprintf(f->text, sizeof f->text, "%.1f blocking all-reduces per step, %s, %.1f ms per step, no nonblocking "
		 "collective in the step", nb, hb, num(f, "ms_per_step"));
	f->advice[0] = "Start each gradient bucket's all-reduce as soon as backward has produced it (DDP does this "
		       "with bucket_cap_mb; hand-written loops can use nonblocking all-reduces).";
}

/* collective_volume and no_overlap: a GPU job's (NCCL's kernels, on_compute_stream in evidence),
 * else the host's calls' */
static void volume_words(struct finding *f)
{
	if (ev_at(f, "on_compute_stream"))
		nccl_words(f);
	else if (!strcmp(f->kind, "no_overlap"))
		host_overlap_words(f);
	else
		host_volume_words(f);
}

/* exposed_collective: a sharded job's all-gathers (reduce-scatters) exposed where they are needed */
static void exposed_words(struct finding *f)
{
	char hb[32];
	const char *op = str(f, "op");
	int gather = !strstr(op, "reduce");
	an_human_bytes(num(f, "bytes_per_step"), hb, sizeof hb);
	snprintf(f->title, sizeof f->title, "%s of %s exposed where %s: %.1f ms per step that the compute beside them "
		 "would hide", op, gather ? "parameters" : "gradients",
		 gather ? "each layer needs them, not prefetched" : "they are made, not left to run behind backward",
		 num(f, "ms_per_step"));
	snprintf(f->text, sizeof f->text, "%.1f %s kernels per step, %s, %.1f ms per step transferring with no compute "
		 "kernel running (%.1f ms more waiting for peers' kernels), %.0f%% of their transfer beside compute",
		 num(f, "calls_per_step"), op, hb, num(f, "exposed_ms_per_step"), num(f, "wait_ms_per_step"),
		 100 * num(f, "overlapped_share"));
	if (gather) {
		f->advice[0] = "Prefetch each layer's parameters while the layer before computes: FSDP's "
			       "forward_prefetch=True and backward_prefetch=BackwardPrefetch.BACKWARD_PRE (FSDP2: "
			       "set_modules_to_forward_prefetch / set_modules_to_backward_prefetch), DeepSpeed ZeRO-3's "
			       "stage3_prefetch_bucket_size.";
		f->advice[1] = "Keep what the prefetch holds bounded (FSDP's limit_all_gathers=True), and wrap larger "
			       "units if each all-gather is too short to hide behind its layer.";
	} else {
		f->advice[0] = "Reduce-scatter each layer's gradients on a stream of their own as soon as backward makes "
			       "them (FSDP does so by default), and wait for them all only before the optimizer.";
	}
}

/* ---- a pipeline's: the schedule's bubble, a stage slower than the others ---- */
static void bubble_words(struct finding *f)
{
	int S = (int)inum(f, "stages"), M = (int)inum(f, "microbatches"), M4 = 4 * S > 2 * M ? 4 * S : 2 * M;
	snprintf(f->title, sizeof f->title, "the pipeline's stages idle %.0f%% of the step filling and draining it "
		 "(%d stages, %d micro-batches: the schedule predicts %.0f%%)", 100 * num(f, "idle_share"), S, M,
		 100 * num(f, "predicted_share"));
	int dev = !strcmp(str(f, "waits_on"), "device");
	snprintf(f->text, sizeof f->text, "%d stages, %d micro-batches per step, %s schedule: the stage that sets the "
		 "pace (stage %d) waits in point-to-point %s %.0f%% of its step, where (S - 1) / (M + S - 1) = %.0f%%; "
		 "with %d micro-batches, %.0f%%", S, M, str(f, "schedule"), (int)inum(f, "pace_stage"),
		 dev ? "kernels on its GPU" : "calls", 100 * num(f, "idle_share"), 100 * num(f, "predicted_share"), M4,
		 100.0 * (S - 1) / (M4 + S - 1));
	f->advice[0] = "Cut each step into more micro-batches (the bubble shrinks as (S - 1) / (M + S - 1)); smaller "
		       "micro-batches make smaller matrix products, so stop before they slow the stages down.";
	f->advice[1] = "Use an interleaved schedule (several virtual stages per rank: Megatron-LM's virtual pipeline "
		       "stages, torch.distributed.pipelining's ScheduleInterleaved1F1B), which divides the bubble by the "
		       "virtual stages per rank; 1F1B holds fewer micro-batches' activations than GPipe at the same bubble.";
}

static void imbalance_words(struct finding *f)
{
	snprintf(f->title, sizeof f->title, "pipeline stage %d (rank %d) works %.2f ms per micro-batch against the other "
		 "stages' %.2f ms: the pipeline runs at its pace", (int)inum(f, "stage"), f->rank,
		 num(f, "work_ms_per_microbatch"), num(f, "others_ms_per_microbatch"));
	if (!strcmp(str(f, "waits_on"), "device")) /* (a kernel of a send and a receive waits for either) */
		snprintf(f->text, sizeof f->text, "%.1f ms per step of work beyond the other stages' (%d micro-batches); "
			 "the later stages' GPUs wait %.1f ms per step for it in point-to-point kernels, the earlier %.1f ms",
			 num(f, "excess_ms_per_step"), (int)inum(f, "microbatches"), num(f, "downstream_wait_ms_per_step"),
			 num(f, "upstream_wait_ms_per_step"));
	else
		snprintf(f->text, sizeof f->text, "%.1f ms per step of work beyond the other stages' (%d micro-batches); "
			 "the later stages wait %.1f ms per step for it, the earlier %.1f ms (late sender %.1f ms, late "
			 "receiver %.1f ms per step in all)", num(f, "excess_ms_per_step"), (int)inum(f, "microbatches"),
			 num(f, "downstream_wait_ms_per_step"), num(f, "upstream_wait_ms_per_step"),
			 num(f, "late_sender_ms_per_step"), num(f, "late_receiver_ms_per_step"));
	f->advice[0] = "Move layers off the slow stage: cut the model by measured time per layer, not by parameter count "
		       "(torch.distributed.pipelining's split points, DeepSpeed's partition_method), or give that stage "
		       "fewer layers.";
	f->advice[1] = "If the stage is slow for another reason (a slower device, input loading on the first stage, the "
		       "loss on the last), move that work or balance the others around it.";
}

/* ---- data_stall: the input calls' pattern (the ops of its evidence), the files, the workers ---- */
/* the i-th op of the evidence's list in words (buf); 0 when there is none */
static int describe_op(const struct finding *f, int i, char *buf, size_t n)
{
	const struct fv *v = ev_at(f, "ops");
	if (!v || v->type != FV_LIST)
		return 0;
	/* the i-th object of the list: its op, fdclass, bytes_per_call, calls_per_step, ms_per_step */
	const struct fv *end = f->ev + f->nev, *o = v + 1;
	for (int k = 0; o < end && o->type == FV_OBJ; k++) {
		const char *op = "", *fcs = NULL;
		int64_t bytes = 0;
		double calls = 0, ms = 0;
		const struct fv *x = o + 1;
		for (; x < end && x->type != FV_END; x++) {
			if (!strcmp(x->key, "op") && x->type == FV_STR)
				op = f->strs + x->v.s;
			else if (!strcmp(x->key, "fdclass") && x->type == FV_STR)
				fcs = f->strs + x->v.s;
			else if (!strcmp(x->key, "bytes_per_call"))
				bytes = x->v.i;
			else if (!strcmp(x->key, "calls_per_step"))
				calls = x->v.d;
			else if (!strcmp(x->key, "ms_per_step"))
				ms = x->v.d;
		}
		if (k == i) {
			int kind = name_index(ddpspy_event_names, DDPSPY_EV_COUNT, op);
			int fc = fcs ? name_index(ddpspy_fdclass_names, DDPSPY_FDCLASS_COUNT, fcs) : -1;
			unsigned m = kind >= 0 ? an_kind(kind)->m : 0;
			char hb[32];
			an_human_bytes((double)bytes, hb, sizeof hb);
			if ((m & DDPSPY_KM_READS) && (fc == DDPSPY_FD_PIPE || fc == DDPSPY_FD_UNIX || fc == DDPSPY_FD_TCP))
				snprintf(buf, n, "waiting on a %s for input (%.0f read%s per step, %.1f ms): an input pipeline "
					 "that does not keep up", fc == DDPSPY_FD_PIPE ? "pipe" : "socket", calls,
					 calls >= 1.5 ? "s" : "", ms);
			else if (m & DDPSPY_KM_READS)
				snprintf(buf, n, "%.0f %s calls of %s per step on %s descriptors (%.1f ms)", calls, op, hb,
					 fcs ? fcs : "?", ms);
			else if (m & DDPSPY_KM_POLLS)
				snprintf(buf, n, "waiting in %s for the input pipeline (%.0f call%s per step, %.1f ms): its "
					 "workers do not keep up", op, calls, calls >= 1.5 ? "s" : "", ms);
			else
				snprintf(buf, n, "%.0f %s calls per step (%.1f ms)", calls, op, ms);
			return 1;
		}
		o = x + 1;
	}
	return 0;
}

static void data_words(struct finding *f)
{
	char top[300] = "no intercepted input call", d[300];
	int shown = (int)inum(f, "rank_shown");
	describe_op(f, 0, top, sizeof top);
	const struct fv *per_sample = ev_at(f, "files_per_step");
	if (per_sample)
		snprintf(top, sizeof top, "a file per sample: %.0f files opened%s and read per step", per_sample->v.d,
			 inum(f, "files_statted") ? ", stat'ed" : "");
	if (f->rank < 0)
		snprintf(f->title, sizeof f->title, "every rank waits for input %.0f%% of its step: %s", 100 * f->severity, top);
	else
		snprintf(f->title, sizeof f->title, "rank %d waits for input %.0f%% of its step: %s", shown, 100 * f->severity,
			 top);
	size_t toff = (size_t)snprintf(f->text, sizeof f->text, "rank %d: %.1f ms of input wait per step", shown,
				       num(f, "data_ms_per_step"));
	for (int i = 0; i < 3 && describe_op(f, i, d, sizeof d); i++)
		if (toff < sizeof f->text)
			toff += (size_t)snprintf(f->text + toff, sizeof f->text - toff, "; %s", d);
	const char *site = strn(f, "top_site");
	if (site && toff < sizeof f->text) /* (where the training thread waits: the DataLoader's path) */
		toff += (size_t)snprintf(f->text + toff, sizeof f->text - toff, "; waiting in %s", site);
	const struct fv *files = ev_at(f, "files");
	if (files && files + 3 < f->ev + f->nev && files[1].type == FV_OBJ && files[2].type == FV_STR &&
	    toff < sizeof f->text)
		toff += (size_t)snprintf(f->text + toff, sizeof f->text - toff, "; files under %s (%.0f calls/step)",
					 f->strs + files[2].v.s, files[3].v.d);
	int transform = !strcmp(str(f, "kind"), "cpu_transform");
	const struct fv *w = ev_at(f, "input_workers");
	if (w && toff < sizeof f->text) {
		int threads = (int)inum(f, "input_workers.threads");
		snprintf(f->text + toff, sizeof f->text - toff, "; its %d input worker thread%s: %.0f%% on a CPU, %.0f%% "
			 "waiting for one, %.0f%% blocked (%.0f%% in intercepted I/O calls)", threads, threads == 1 ? "" : "s",
			 100 * num(f, "input_workers.on_cpu_share"), 100 * num(f, "input_workers.runqueue_share"),
			 100 * num(f, "input_workers.blocked_share"), 100 * num(f, "input_workers.io_call_share"));
	}
	if (transform) {
		f->advice[0] = "The input workers are busy transforming (decode, augmentation), not reading: more "
			       "workers help only up to the CPUs the ranks leave free; past that, move the transform off "
			       "the host (GPU decode, DALI) or offline (store samples decoded and preprocessed).";
		f->advice[1] = "Profile the transform itself (py-spy on a worker): a cheaper decoder or smaller "
			       "images cost less CPU per sample.";
		return;
	}
	f->advice[0] = "Load input ahead of the step: more DataLoader workers (num_workers), a larger "
		       "prefetch_factor, persistent_workers, pin_memory.";
	f->advice[1] = "Read in large pieces: many small reads or a file (and a stat) per sample cost a syscall "
		       "each; pack samples into shards and read them whole; stage the data on local disk.";
}

/* ---- lost_events: what a file lost, and why ---- */
static void lost_words(struct finding *f)
{
	uint64_t dropped = (uint64_t)inum(f, "dropped"), unwritten = (uint64_t)inum(f, "unwritten");
	uint64_t gpu = (uint64_t)inum(f, "gpu_dropped"), lost = dropped + unwritten + gpu;
	const char *file = str(f, "file"), *werr = str(f, "write_error");
	int pid = (int)inum(f, "pid"), damaged = (int)inum(f, "damaged"), ended = (int)inum(f, "ended");
	double frac = num(f, "lost_share");
	if (werr[0])
		snprintf(f->title, sizeof f->title, "%" PRIu64 " events of pid %d (%.2f%%) are missing from "
			 "%s: writing it failed (%s)", lost, pid, 100 * frac, file, werr);
	else if (damaged)
		snprintf(f->title, sizeof f->title, "%s is damaged (%s): events after that point are missing", file,
			 str(f, "error"));
	else if (!ended)
		snprintf(f->title, sizeof f->title, "%s was not completed by its process (killed, or still running): "
			 "events after its last flush are not in it", file);
	else if (!gpu)
		snprintf(f->title, sizeof f->title, "%" PRIu64 " events of pid %d were dropped (%.2f%%): its rings "
			 "were full", dropped, pid, 100 * frac);
	else
		snprintf(f->title, sizeof f->title, "%" PRIu64 " events of pid %d were lost (%.2f%%): %" PRIu64
			 " of CUPTI's records (dropped by CUPTI or without a buffer), %" PRIu64 " from full rings",
			 lost, pid, 100 * frac, gpu, dropped);
	snprintf(f->text, sizeof f->text, "%" PRIu64 " recorded, %" PRIu64 " dropped%s%s", (uint64_t)inum(f, "recorded"),
		 lost, unwritten ? " or not written" : "",
		 damaged ? ", file damaged" : !ended ? ", file not completed: more after its last flush" : "");
	f->advice[0] = gpu ? "Lost CUPTI records: at most 64 MiB of CUPTI's buffers are out at a time; lower "
		       "DDPSPY_FLUSH_MS so the writer hands them back sooner, or launch fewer kernels per second "
		       "(CUDA graphs, fused kernels)." :
		       "Dropped events: raise DDPSPY_RING_KB or lower DDPSPY_FLUSH_MS.";
	f->advice[1] = werr[0] ? "Events not written: the trace directory's filesystem refused them (full, quota); "
				 "point DDPSPY_OUT at one with room." :
				 "A damaged or incomplete file: the process died before ddpspy could finish it (SIGKILL, "
				 "the OOM killer); the rest of the job is still analysed.";
}

/* One row per kind: its words from its evidence */
/* the evidence line of a hang: each rank listed, "rank R STATE: CALL for S s (last completed #N)" */
static void hang_ranks(struct finding *f, const char *kind)
{
	const struct fv *v = ev_at(f, "ranks"), *end = f->ev + f->nev;
	size_t n = 0;
	f->text[0] = 0;
	if (kind[0])
		n = (size_t)snprintf(f->text, sizeof f->text, "%s; ", kind);
	for (v = v ? v + 1 : end; v < end && v->type == FV_OBJ && n < sizeof f->text; v++) {
		int64_t rank = -1, last = -1, called = -1;
		const char *state = "", *call = NULL;
		const struct fv *callers = NULL; /* (its first frame; the list ends at an FV_END) */
		double sec = 0;
		for (v++; v < end && v->type != FV_END; v++) {
			if (v->type == FV_LIST || v->type == FV_OBJ) { /* (a nested list: the callers' frames) */
				if (v->key && !strcmp(v->key, "callers"))
					callers = v + 1;
				for (int depth = 1; depth && ++v < end;)
					depth += (v->type == FV_LIST || v->type == FV_OBJ) - (v->type == FV_END);
				continue;
			}
			if (!v->key)
				continue;
			if (!strcmp(v->key, "rank"))
				rank = v->v.i;
			else if (!strcmp(v->key, "last_completed"))
				last = v->v.i;
			else if (!strcmp(v->key, "last_called"))
				called = v->v.i;
			else if (!strcmp(v->key, "state"))
				state = f->strs + v->v.s;
			else if (!strcmp(v->key, "call") && v->type == FV_STR)
				call = f->strs + v->v.s;
			else if (!strcmp(v->key, "for_s"))
				sec = v->v.d;
		}
		n += (size_t)snprintf(f->text + n, sizeof f->text - n, "%srank %" PRId64 " %s: ", n > 0 && f->text[n - 2] != ';' ?
				      "; " : "", rank, state);
		if (n < sizeof f->text && call) { /* (its call site, then up to 3 callers) */
			n += (size_t)snprintf(f->text + n, sizeof f->text - n, "%s", call);
			for (int k = 0; callers && k < 3 && callers[k].type == FV_STR && n < sizeof f->text; k++)
				n += (size_t)snprintf(f->text + n, sizeof f->text - n, " <- %s", f->strs + callers[k].v.s);
			if (n < sizeof f->text)
				n += (size_t)snprintf(f->text + n, sizeof f->text - n, " for %.1f s", sec);
		} else if (n < sizeof f->text)
			n += (size_t)snprintf(f->text + n, sizeof f->text - n, "no call in flight");
		if (n < sizeof f->text && last >= 0)
			n += (size_t)snprintf(f->text + n, sizeof f->text - n, " (last completed #%" PRId64 ")", last);
		else if (n < sizeof f->text && called >= 0)
			n += (size_t)snprintf(f->text + n, sizeof f->text - n, " (last called #%" PRId64 ")", called);
	}
}

/* ---- hang: by its pattern; the rank to look at and what it was doing (hidden: blame_*) ---- */
static void hang_words(struct finding *f)
{
	const char *pat = str(f, "pattern"), *state = str(f, "blame_state"), *call = strn(f, "blame_call");
	const char *op = str(f, "collective.op"), *kind = str(f, "collective.kind");
	int64_t seq = inum(f, "collective.seq");
	double waited = num(f, "waited_s"), bfor = num(f, "blame_for_s");
	char doing[300];
	if (call)
		snprintf(doing, sizeof doing, "in %.240s for %.1f s", call, bfor);
	else if (!strcmp(state, "gone"))
		snprintf(doing, sizeof doing, "gone: its file stops %.1f s before the others' with no call in flight (the "
			 "process died or was stopped%s)", num(f, "blame_behind_s"), num(f, "blame_file_ended") ? "" :
			 "; unfinished, so its calls of up to a flush before that are lost");
	else
		snprintf(doing, sizeof doing, "computing: no call in flight");
	if (!strcmp(pat, "collective"))
		snprintf(f->title, sizeof f->title, "the job hung: rank %d never reached %s #%" PRId64 ", which %" PRId64
			 " rank%s waited in for %.1f s; rank %d is %s", f->rank, op, seq, inum(f, "waiting"),
			 inum(f, "waiting") == 1 ? "" : "s", waited, f->rank, doing);
	else if (!strcmp(pat, "collective_all_in"))
		snprintf(f->title, sizeof f->title, "the job hung in %s #%" PRId64 ": every rank is in it and it has not "
			 "completed in %.1f s", op, seq, waited);
	else if (!strcmp(pat, "deadlock"))
		snprintf(f->title, sizeof f->title, "the job hung in a deadlock: each rank of a circle waits for the next "
			 "in a point-to-point call, for %.1f s; rank %d is %s", waited, f->rank, doing);
	else if (!strcmp(pat, "peer_untraced"))
		snprintf(f->title, sizeof f->title, "the job hung: point-to-point calls have waited %.1f s for rank %d, "
			 "which ddpspy did not trace", waited, f->rank);
	else if (!strcmp(pat, "peer"))
		snprintf(f->title, sizeof f->title, "the job hung: point-to-point calls have waited %.1f s for rank %d, "
			 "which is %s", waited, f->rank, doing);
	else
		snprintf(f->title, sizeof f->title, "the job hung: rank %.0f has waited %.1f s %s, for no call of its "
			 "peers that ddpspy sees", num(f, "blame_rank"), waited, doing);
	char head[160] = "";
	if (kind[0])
		snprintf(head, sizeof head, "%s #%" PRId64 " (%s, communicator %" PRId64 ")", op, seq, kind,
			 inum(f, "collective.comm"));
	hang_ranks(f, head);
	f->advice[0] = "Look at what the named rank was doing when the others stopped: its call in flight, the "
		       "descriptor and path it waits on, its call site and the callers above it are in the evidence.";
	f->advice[1] = "Make the job fail fast instead of waiting for a timeout, or forever: PyTorch's "
		       "init_process_group(timeout=...) and TORCH_NCCL_ASYNC_ERROR_HANDLING=1; Open MPI's mpirun --timeout.";
	if (!strcmp(pat, "deadlock"))
		f->advice[2] = "Order the sends and receives so that one side of each pair sends first, or use "
			       "MPI_Sendrecv / nonblocking calls completed together.";
}

static const struct row {
	const char *kind;
	void (*words)(struct finding *f);
} ROWS[] = {
	{ "hang", hang_words },
	{ "rank0_serialization", rank0_words },
	{ "straggler", straggler_words },
	{ "cpu_contention", cpu_words },
	{ "host_asymmetry", host_asym_words },
	{ "work_skew", skew_words },
	{ "lost_events", lost_words },
	{ "small_work", small_work_words },
	{ "collective_volume", volume_words },
	{ "no_overlap", volume_words },
	{ "exposed_collective", exposed_words },
	{ "pipeline_bubble", bubble_words },
	{ "stage_imbalance", imbalance_words },
	{ "data_stall", data_words },
	{ "gpu_idle", gpu_idle_words },
	{ "host_sync", host_sync_words },
	{ "launch_bound", launch_words },
	{ "pageable_memcpy", pageable_words },
};

const char *an_finding_kind(int i)
{
	return i >= 0 && (size_t)i < sizeof ROWS / sizeof *ROWS ? ROWS[i].kind : NULL;
}

/* the NVTX range a finding's cost is in (evidence.range), after its evidence line */
static void range_words(struct finding *f)
{
	const char *name = strn(f, "range.name"), *domain = strn(f, "range.domain");
	const struct fv *peers = ev_at(f, "range.peers_ms_per_step");
	size_t n = strlen(f->text);
	if (!name || n >= sizeof f->text || strstr(f->text, "; in NVTX range \"")) /* (words made again: once) */
		return;
	n += (size_t)snprintf(f->text + n, sizeof f->text - n, "; in NVTX range \"%s\"%s%s%s: %.1f ms per step", name,
			      domain ? " (domain " : "", domain ? domain : "", domain ? ")" : "", num(f, "range.ms_per_step"));
	if (n >= sizeof f->text)
		return;
	if (ev_at(f, "range.input_wait_ms_per_step"))
		snprintf(f->text + n, sizeof f->text - n, ", %.1f ms of it waiting for input",
			 num(f, "range.input_wait_ms_per_step"));
	else if (peers && peers->type == FV_NUM)
		snprintf(f->text + n, sizeof f->text - n, " against its peers' %.1f", peers->v.d);
}

void an_words(struct analysis *a)
{
	for (int i = 0; i < a->nfindings; i++) {
		for (size_t k = 0; k < sizeof ROWS / sizeof *ROWS; k++)
			if (!strcmp(ROWS[k].kind, a->findings[i].kind) && ROWS[k].words)
				ROWS[k].words(&a->findings[i]);
		range_words(&a->findings[i]);
	}
	if (a->verdict_finding >= 0 && a->verdict_finding < a->nfindings) {
		const struct finding *f = &a->findings[a->verdict_finding];
		if (!strcmp(f->kind, "hang") && !strcmp(a->bound, "unknown"))
			snprintf(a->summary, sizeof a->summary, "%s", f->title);
		else if (!strcmp(f->kind, "hang")) /* (before it hung, the job was what the shares say) */
			snprintf(a->summary, sizeof a->summary, "%s (before it hung: %s-bound)", f->title, a->bound);
		else
			snprintf(a->summary, sizeof a->summary, "%s-bound (%.0f%% of the critical path): %s (severity %.2f)",
				 a->bound, 100 * a->verdict_share, f->title, f->severity);
	}
}
