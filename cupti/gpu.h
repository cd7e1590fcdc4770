/* The GPU side (cupti/gpu.c): CUPTI activity records (kernels, copies, sets, synchronizations,
 * runtime API calls, external correlations), started on a process's first CUDA use and handed to
 * the writer as events on the GPU's timeline. Built into libddpspy.so when CUDA's headers are
 * found (DDPSPY_GPU); without them every function here is a no-op. */
#ifndef DDPSPY_CUPTI_GPU_H
#define DDPSPY_CUPTI_GPU_H

#include <stdint.h>

#define DSP_GPU_MAX_ARGS 13

/* ddpspy's external correlation ids (CUPTI's CUSTOM2 kind, pushed around each NCCL call): 0xdd5 in
 * bits 36 to 47 above a count from 1, so that another tool's ids of the same kind, counted from 1
 * as ddpspy's once were, are never taken for ddpspy's (whose NCCL calls they would name), nor
 * ddpspy's handed to it; below 2^53, so that a JSON reader keeps them exact */
#define DSP_EXT_TAG (UINT64_C(0xdd5) << 36)
static inline int dsp_ext_ours(uint64_t id)
{
	return (id >> 36) == 0xdd5;
}

/* One record, as the writer packs it. Times are ns in the clock dsp_gpu_info names. */
struct dsp_gpu_ev {
	int kind;             /* enum ddpspy_event_kind: a DDPSPY_KM_GPU kind */
	int nargs;
	uint64_t t0, dur;
	int64_t args[DSP_GPU_MAX_ARGS];
	int name_arg;         /* the argument that is name's id in the file's string table, -1: none */
	const char *name;     /* a kernel's or an API function's name, NULL when unknown */
};

enum { DSP_GPU_NONE, DSP_GPU_ON, DSP_GPU_TAKEN, DSP_GPU_UNAVAILABLE, DSP_GPU_FAILED };

/* What the file says of GPU capture (the "gpu" record's keys, docs/format.md). */
struct dsp_gpu_info {
	int state;            /* DSP_GPU_* */
	const char *why;      /* how it started, or why it did not */
	const char *lib;      /* the libcupti loaded */
	const char *holder;   /* taken: who holds CUPTI, as cuptiSubscribe_v2 names it ("" unknown) */
	uint32_t version;     /* cuptiGetVersion */
	const char *clock;    /* "monotonic" (our timestamp callback) or "realtime" (CUPTI's own) */
	uint64_t kinds;       /* bit k: event kind k enabled */
	uint64_t dropped;     /* records CUPTI dropped (no buffer space), cumulative */
	uint64_t refused;     /* buffers refused to CUPTI (over DSP_GPU_BUFFERS), cumulative */
	int api_calls;        /* runtime calls recorded one by one (their count), -1 every call, 0 none */
	uint64_t foreign;     /* buffers CUPTI completed into ddpspy's callback that it had not handed out */
	uint64_t untimed;     /* records CUPTI gave no times (start or end 0, or an end before its start):
			       * left out, cumulative */
	int64_t lead_ns;      /* the most device work started before the host call that launched it */
	uint64_t checked;     /* device records checked against their launching call */
	uint64_t stopped_ns;  /* when the last flush at exit began (CLOCK_MONOTONIC ns): the records of
			       * calls that returned after it are not collected; 0 not yet */
	const char *client;   /* another CUPTI client sharing ddpspy's subscription (share.c), NULL none */
	uint64_t client_records, client_dropped, client_refused; /* records handed to it; those it asked
			       * for that found no buffer of its or could not be put on its clock; kinds refused */
	uint64_t client_api_limited; /* its API kinds served with ddpspy's calls only: 1 runtime, 2 driver */
	uint64_t client_tid_unknown; /* records it got whose thread's system id, which it asked for, was
			       * not known: left with CUPTI's default id */
	uint64_t changes;     /* counts changes of the above: the writer writes a record when it moves */
};

enum { DSP_GPU_COLLECT, DSP_GPU_COLLECT_FORCED, DSP_GPU_COLLECT_DELIVERED };

#ifdef DDPSPY_GPU
/* Writer thread: asks CUPTI for what is complete (every second; FORCED: everything, kernels still
 * running included; DELIVERED: no call into CUPTI, only what it already handed over), then hands
 * each record to fn. Returns the number handed over. */
uint64_t dsp_gpu_collect(int mode, void (*fn)(void *ctx, const struct dsp_gpu_ev *ev), void *ctx);
/* Writer thread: starts CUPTI when the CUDA driver is among the loaded objects and no injection
 * call will come (a CUDA_INJECTION64_PATH that is not ours). */
void dsp_gpu_modules_changed(void);
void dsp_gpu_get_info(struct dsp_gpu_info *info);
/* Constructor: points CUDA_INJECTION64_PATH at this library unless the program set it. */
void dsp_gpu_init(void);
/* exit and _exit: the last call into CUPTI (a forced flush); none after it. */
void dsp_gpu_stop(void);
void dsp_gpu_atfork_child(void);
/* Around a library call that launches GPU work (NCCL's): CUPTI joins what it launches to id
 * (gpu_extcorr). No-ops unless GPU capture is on. From any thread, guard held. */
void dsp_gpu_push(uint64_t id);
void dsp_gpu_pop(void);
#else
static inline void dsp_gpu_push(uint64_t id) { (void)id; }
static inline void dsp_gpu_pop(void) {}
static inline uint64_t dsp_gpu_collect(int mode, void (*fn)(void *, const struct dsp_gpu_ev *), void *ctx)
{
	(void)mode;
	(void)fn;
	(void)ctx;
	return 0;
}
static inline void dsp_gpu_modules_changed(void) {}
static inline void dsp_gpu_get_info(struct dsp_gpu_info *info) { info->state = DSP_GPU_NONE; info->changes = 0; }
static inline void dsp_gpu_init(void) {}
static inline void dsp_gpu_stop(void) {}
static inline void dsp_gpu_atfork_child(void) {}
#endif

#endif
