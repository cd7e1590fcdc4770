/* Declarations shared by the files of libddpspy.so: per-thread state, configuration, the raw
 * clock, symbol resolution and event recording. Nothing here is exported from the library. */
#ifndef DDPSPY_INTERNAL_H
#define DDPSPY_INTERNAL_H

#include <stdint.h>
#include <stddef.h>
#include <string.h>
#include <time.h>
#include <x86intrin.h>

#include "../common/format.h"
#include "ring.h"

#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)

/* ---- per-thread state ----
 * Initial-exec TLS: the variable sits at a fixed offset from the thread pointer, so reading it is
 * one instruction and can never call __tls_get_addr (which may allocate, and would recurse into
 * us from a wrapper). This is safe because the library is loaded with the program (LD_PRELOAD),
 * never dlopen'ed late. */
enum { TS_FRESH, TS_ACTIVE, TS_OFF };

/* The call a thread is in now, when it is one that can block (a collective, a read, a lock or
 * condition wait, a sleep, a CUDA synchronize): its kind, arguments as its event will have them
 * (ret -1), descriptor and call site, set on entry with a few stores. It lives in the thread's
 * registry entry, which only the writer frees, so the writer can read it at any flush and record
 * a call that never returns (a hang). t0 is published last and cleared on return: the writer
 * reads it before and after the rest and keeps what it read only when the two agree (inflight.c). */
#define DSP_CALL_ARGS 6
struct dsp_call {
	uint64_t t0;         /* raw time of entry; 0: no call in flight */
	uintptr_t site;      /* the wrapper's return address */
	uintptr_t fp;        /* the wrapper's frame address (its frame pointer), 0 unknown: the stack */
	int64_t fd;          /* the descriptor it waits on, -1 none */
	uintptr_t str;       /* a path it was given (open's), 0 none: the writer copies it */
	uint32_t kind, nargs;
	int64_t args[DSP_CALL_ARGS];
};

struct dsp_tls {
	struct ring *ring;   /* NULL until the thread's first event */
	int guard;           /* >0: inside ddpspy itself or inside an intercepted library call */
	int state;           /* TS_*: TS_OFF once the thread exited or could not get a ring */
	int tid;
	void *thread;        /* struct dsp_thread *, owned by registry.c */
	int unwinding;       /* inside libunwind (record.c): its pipe2 and close are its own */
	uint64_t poll_t0, poll_t1; /* a run of CUDA queries of unfinished work: its first's start, its
				    * last's end (cuda.c); poll_t0 0 when none */
	uintptr_t poll_s, poll_e;  /* and the stream and event its last query asked about */
	/* a record the thread has begun but not ended (a run of queries): made when the thread exits,
	 * or on the thread that ends the process (guard held); NULL when none */
	void (*at_exit)(struct dsp_tls *t);
	void *nccl_pctx; /* NCCL's profiler plugin context made on this thread by the call in progress
			  * (ncclprof.c), for nccl.c to name; NULL none */
	int64_t nccl_comm, nccl_seq1; /* the collective call in progress (nccl.c): its communicator's id
				       * and its number there + 1; nccl_seq1 0 none (for ncclprof.c) */
	/* the gloo buffers this thread made for its next collective (gloo.c): how many, the first's,
	 * largest and smallest sizes, and the gloo context's rank count */
	struct {
		unsigned n;  /* (wraps harmlessly: untraced stretches make buffers no one reads) */
		int ranks;
		uint64_t first, max, min;
	} gloo;
	struct dsp_call *call; /* the thread's call in flight (registry.c's entry); NULL unregistered */
	int in_call;           /* call->t0 is set: dsp_leave clears it */
};

extern __thread struct dsp_tls dsp_tls __attribute__((tls_model("initial-exec")));

/* Added to the guard while ddpspy itself calls into a library that may start threads (CUPTI):
 * pthread_create then starts them untraced (pthread.c). */
#define DSP_GUARD_OWN (1 << 16)

/* Recording is on: set once the library is initialised and the output is writable, cleared
 * when tracing is disabled. Read relaxed on every call. */
extern int dsp_on;

/* ---- configuration (config.c): every DDPSPY_* variable, read once ---- */
struct dsp_config {
	const char *out;      /* DDPSPY_OUT */
	long ring_kb;         /* DDPSPY_RING_KB */
	long flush_ms;        /* DDPSPY_FLUSH_MS */
	long stack_us;        /* DDPSPY_STACK_US; events blocking longer get a call stack */
	int pyframes;         /* DDPSPY_PYFRAMES: a stack of a thread in Python code has its Python frames */
	long sample_hz;       /* DDPSPY_SAMPLE_HZ: the main thread's Python frames sampled this often; 0 never */
	int disable;          /* DDPSPY_DISABLE */
	int log;              /* DDPSPY_LOG */
	int signals;          /* DDPSPY_SIGNALS: flush on fatal signals */
	long file_mode;       /* DDPSPY_FILE_MODE: trace files' mode (octal, default 0600) */
	const char *clock_offset; /* DDPSPY_CLOCK_OFFSET_NS: test only, see clock.c */
	int gpu;              /* DDPSPY_GPU: GPU capture through CUPTI (cupti/gpu.c) */
	const char *cupti;    /* DDPSPY_CUPTI: the libcupti to load, "" to search */
	int gpu_api_all;      /* DDPSPY_GPU_API_ALL: every CUDA runtime and driver call recorded, not the few read */
	int nvtx;             /* DDPSPY_NVTX: the program's NVTX ranges (nvtx.c) */
	int nccl_plugin;      /* DDPSPY_NCCL_PLUGIN: NCCL's profiler plugin is ddpspy (ncclprof.c) */
	long inflight_ms;     /* DDPSPY_INFLIGHT_MS: calls in flight this long are recorded; <0 never */
};
extern struct dsp_config dsp_cfg;
void dsp_config_load(void);

/* Diagnostics on stderr, errno-safe and allocation-free. dsp_warn always prints; dsp_log only
 * with DDPSPY_LOG=1. */
void dsp_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void dsp_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* ---- the raw clock (clock.c) ----
 * The TSC where it is invariant (constant_tsc + nonstop_tsc), else CLOCK_MONOTONIC through the
 * vDSO. Raw values are converted by the collector from the calibration records. */
extern int dsp_use_tsc;
void dsp_clock_init(void);
/* Test only: shifts this process's clock calibration by DDPSPY_CLOCK_OFFSET_NS (one item, or a
 * comma list indexed by rank; an item is OFFSET or OFFSET:RATE, RATE ns gained per second), as if
 * its host's clocks were that far off and drifting. Call once the rank is known, before the first
 * dsp_clock_sample. */
void dsp_clock_offset_init(int rank);
static inline uint64_t dsp_now(void)
{
	if (likely(dsp_use_tsc))
		return __rdtsc();
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}
/* CLOCK_MONOTONIC ns as this process's file states it (DDPSPY_CLOCK_OFFSET_NS included): the
 * clock GPU times are put on (cupti/gpu.c). */
int64_t dsp_mono_ns(void);
/* One calibration triple, taken as close together as the clocks allow. */
void dsp_clock_sample(uint64_t *raw, int64_t *mono_ns, int64_t *real_ns);

/* ---- real functions (resolve.c) ----
 * Looks name up after this library (RTLD_NEXT) and, failing that, in every loaded object,
 * including those dlopen'ed RTLD_LOCAL where RTLD_NEXT cannot see. hint is a substring of the
 * expected library's path, tried first (NULL for none). Returns NULL when nowhere to be found
 * (the caller then fails the call as the library would); the next call tries again. */
void *dsp_resolve(const char *name, const char *hint);

/* At load time, before any wrapper can run in an awkward place (a signal handler, a fork child),
 * each real function is looked up once with RTLD_NEXT (and dlvsym when version is given): cheap,
 * and no walk of the loaded objects. What is not found then (gloo, MPI before it is loaded) is
 * resolved on first use by dsp_resolve. */
void *dsp_resolve_early(const char *name, const char *version);

/* The address range [lo, hi) of a loaded object's PT_LOAD segments (0, 0 when it has none). */
struct dl_phdr_info;
void dsp_object_range(const struct dl_phdr_info *info, uintptr_t *lo, uintptr_t *hi);
int dsp_object_build_id(const struct dl_phdr_info *info, uint8_t *id, int cap); /* its length, 0 none */
/* the loader's counts of objects loaded and unloaded so far (they move when the objects change) */
void dsp_dl_counters(unsigned long long c[2]);

/* The same for a symbol with several versions (pthread_cond_wait has GLIBC_2.2.5 and 2.3.2:
 * plain dlsym may hand back the old one, which expects a different pthread_cond_t). */
void *dsp_resolve_v(const char *name, const char *version);

#define DSP_REAL_V(ret, name, params, version)                                            \
	static ret(*real_##name) params;                                                     \
	static inline int get_##name(void)                                                   \
	{                                                                                    \
		if (likely(real_##name != NULL))                                             \
			return 1;                                                            \
		real_##name = (ret(*) params)dsp_resolve_v(#name, version);                  \
		return real_##name != NULL;                                                  \
	}                                                                                    \
	__attribute__((constructor(101))) static void early_##name(void)                    \
	{                                                                                    \
		real_##name = (ret(*) params)dsp_resolve_early(#name, version);              \
	}

/* Declares `real_name` and a resolver `get_name()`; the resolver caches its answer. */
#define DSP_REAL(ret, name, params, hint)                                                 \
	static ret(*real_##name) params;                                                     \
	static inline int get_##name(void)                                                   \
	{                                                                                    \
		if (likely(real_##name != NULL))                                             \
			return 1;                                                            \
		real_##name = (ret(*) params)dsp_resolve(#name, hint);                       \
		return real_##name != NULL;                                                  \
	}                                                                                    \
	__attribute__((constructor(101))) static void early_##name(void)                    \
	{                                                                                    \
		real_##name = (ret(*) params)dsp_resolve_early(#name, NULL);                 \
	}

/* ---- ddpspy's own cost (selfcost.c) ---- */
/* ns per recorded event of a call that does not block, measured in a scratch ring; -1 unknown */
double dsp_event_cost_ns(void);

/* ---- recording (record.c, registry.c) ---- */

/* The thread's ring, registering the thread on its first event; NULL when this thread does not
 * record (tracing off, thread exited, no memory). */
struct ring *dsp_thread_ring_slow(struct dsp_tls *t);
static inline struct ring *dsp_thread_ring(struct dsp_tls *t)
{
	if (likely(t->ring != NULL))
		return t->ring;
	return dsp_thread_ring_slow(t);
}

/* Enter/leave a wrapper. dsp_enter returns 0 when the call must go straight through
 * (re-entered, tracing off); otherwise the guard is held until dsp_leave. */
static inline int dsp_enter(struct dsp_tls *t)
{
	if (unlikely(t->guard || !__atomic_load_n(&dsp_on, __ATOMIC_RELAXED) || t->state == TS_OFF))
		return 0;
	t->guard = 1;
	return 1;
}
static inline void dsp_leave(struct dsp_tls *t)
{
#ifndef DSP_NO_INFLIGHT
	if (t->in_call) { /* the call that was in flight returned */
		__atomic_store_n(&t->call->t0, 0, __ATOMIC_RELAXED);
		t->in_call = 0;
	}
#endif
	t->guard = 0;
}

/* A wrapper that can block calls this instead of dsp_now() for its start (guard held): the time,
 * and the call published as in flight until dsp_leave. (DSP_NO_INFLIGHT: make bench's build
 * without it, to measure its cost side by side) */
static inline uint64_t dsp_call_begin(struct dsp_tls *t, uint32_t kind, const void *site, const void *fp,
				      int64_t fd, const char *str, uint32_t nargs, const int64_t *args)
{
#ifdef DSP_NO_INFLIGHT
	(void)t, (void)kind, (void)site, (void)fp, (void)fd, (void)str, (void)nargs, (void)args;
	return dsp_now();
#endif
	struct dsp_call *c = t->call;
	if (unlikely(!c) && (!dsp_thread_ring(t) || !(c = t->call)))
		return dsp_now();
	/* the previous call's clearing of t0 before these stores (a compiler barrier on x86) */
	__atomic_thread_fence(__ATOMIC_RELEASE);
	__atomic_store_n(&c->site, (uintptr_t)site, __ATOMIC_RELAXED);
	__atomic_store_n(&c->fp, (uintptr_t)fp, __ATOMIC_RELAXED);
	__atomic_store_n(&c->fd, fd, __ATOMIC_RELAXED);
	__atomic_store_n(&c->str, (uintptr_t)str, __ATOMIC_RELAXED);
	__atomic_store_n(&c->kind, kind, __ATOMIC_RELAXED);
	nargs = nargs < DSP_CALL_ARGS ? nargs : DSP_CALL_ARGS;
	__atomic_store_n(&c->nargs, nargs, __ATOMIC_RELAXED);
	for (uint32_t i = 0; i < nargs; i++)
		__atomic_store_n(&c->args[i], args[i], __ATOMIC_RELAXED);
	uint64_t t0 = dsp_now();
	__atomic_store_n(&c->t0, t0 ? t0 : 1, __ATOMIC_RELEASE);
	t->in_call = 1;
	return t0;
}
/* In the exported wrapper itself (its return address is the program's call site, its frame the
 * way to the program's stack: blocked.c): kind, the descriptor (-1 none), then the event's
 * arguments as far as they are known on entry. */
#define DSP_CALL(t, kind, fd, nargs, ...)                                                  \
	dsp_call_begin(t, kind, __builtin_return_address(0), __builtin_frame_address(0), fd, NULL, nargs, \
		       (const int64_t[]){__VA_ARGS__})
/* the same for a call given a path and no descriptor yet (open) */
#define DSP_CALL_PATH(t, kind, path, nargs, ...)                                           \
	dsp_call_begin(t, kind, __builtin_return_address(0), __builtin_frame_address(0), -1, path, nargs, \
		       (const int64_t[]){__VA_ARGS__})

/* Records an event with nargs integer arguments (called with the guard held). */
static inline void dsp_emit(struct dsp_tls *t, int kind, uint64_t t0, uint64_t t1, int nargs,
			    const int64_t *args)
{
	struct ring *r = dsp_thread_ring(t);
	if (unlikely(!r))
		return;
	uint32_t len = (uint32_t)(sizeof(struct rec) + 8 * (unsigned)nargs);
	struct rec *e = ring_reserve(r, len);
	if (unlikely(!e))
		return;
	e->kind = (uint16_t)kind;
	e->len = (uint16_t)len;
	e->nargs = (uint8_t)nargs;
	e->flags = 0;
	e->slen = 0;
	e->t0 = t0;
	e->dur = t1 - t0;
	for (int i = 0; i < nargs; i++)
		e->args[i] = args[i];
	ring_commit(r);
}

/* The general form: an optional string (copied, cut to 4095 bytes) and, when the event blocked
 * for longer than DDPSPY_STACK_US, the caller's stack. Not inline: strings and stacks are rare. */
void dsp_emit_full(struct dsp_tls *t, int kind, uint64_t t0, uint64_t t1, int nargs,
		   const int64_t *args, const char *str, int want_stack);

/* Blocking events use this: records the stack when the event was long. */
extern uint64_t dsp_stack_ticks; /* DDPSPY_STACK_US in raw ticks; UINT64_MAX: never */
/* An unsuccessful poll (MPI_Test*) is recorded only when it took longer than this (10 us in raw
 * ticks): then it did the library's progress work, a collective's copies and reductions, which is
 * communication; the many cheap polls of an idle loop are not worth their ring space. */
#define DSP_POLL_US 10
extern uint64_t dsp_poll_ticks;
static inline void dsp_emit_wait(struct dsp_tls *t, int kind, uint64_t t0, uint64_t t1,
				 int nargs, const int64_t *args)
{
	if (unlikely(t1 - t0 > dsp_stack_ticks))
		dsp_emit_full(t, kind, t0, t1, nargs, args, NULL, 1);
	else
		dsp_emit(t, kind, t0, t1, nargs, args);
}

/* libunwind checks that memory is readable by writing it into a pipe of its own, opened on first
 * use and closed and opened again when a read from it fails: those descriptors are ddpspy's, and
 * once the program closed one and took the number, libunwind would close the program's. io.c
 * protects them like the trace file's (dsp_unwind_fd says which they are); a program that puts
 * another file at one (dup2) gets it after dsp_stack_disable, which stops unwinding for good. */
extern int dsp_unwind_fds[2];
static inline int dsp_unwind_fd(int fd)
{
	return fd >= 0 && (fd == __atomic_load_n(&dsp_unwind_fds[0], __ATOMIC_RELAXED) ||
			   fd == __atomic_load_n(&dsp_unwind_fds[1], __ATOMIC_RELAXED));
}
void dsp_stack_disable(void);

/* Call stack capture (record.c): fills up to max return addresses of the current thread, skipping
 * ddpspy's own frames; returns the count (0 when libunwind is unavailable). */
int dsp_stack_capture(void **ips, int max);
void dsp_stack_load(void);
/* fork handlers: no fork while a thread unwinds (record.c) */
void dsp_stack_atfork_prepare(void);
void dsp_stack_atfork_parent(void);
void dsp_stack_atfork_child(void);

/* Python frames (pyframes.c). dsp_py_modules_changed looks for CPython among the loaded objects
 * (constructor, writer), 1 when it settled what it found; dsp_py_capture writes the calling
 * thread's Python frames, innermost first, into out (cap bytes): u32 frame count, u32 bytes used,
 * then per frame u32 line, u16 file length, u16 function length, the file's last bytes, the
 * function's qualified name; returns the bytes (a multiple of 8), 0 none. dsp_py_state: what
 * was found (version, and why no frames are read, NULL when they are), and a count that moves
 * when it changes (0: nothing found yet). */
#define DSP_PY_FRAMES 24
#define DSP_PY_BYTES 4096
int dsp_py_modules_changed(void);
int dsp_py_capture(uint8_t *out, int cap);
unsigned dsp_py_state(const char **version, const char **why);
/* The sampler of the main thread's Python frames (DDPSPY_SAMPLE_HZ; a rank's or a lone process's,
 * not a launcher's or an input worker's): started by the writer once CPython is found; the writer
 * takes each sample (its raw time, the thread, its frames in dsp_py_capture's form: the bytes, -1
 * when none is left) and the counts of those dropped (a full queue) and torn (given up: the
 * thread's frames moved under three walks) */
void dsp_py_sampler_start(void);
int dsp_py_sample_take(uint64_t *t, int *tid, uint8_t *out, int cap);
void dsp_py_samples(uint64_t *dropped, uint64_t *torn);
void dsp_py_atfork_child(void);
/* The CPU sampler (cpusample.c): the main thread's native stacks DDPSPY_SAMPLE_HZ times a second
 * of its CPU time, from the kernel's task clock, read by a thread of ddpspy's (a rank's or a lone
 * process's); started by the writer. The writer takes each sample (its CLOCK_MONOTONIC time, its
 * frames: their count, -1 when none is left), and the counts kept and lost so far with why
 * nothing is sampled ("" sampling, NULL not started or not yet known). */
#define DSP_CPU_FRAMES 48
void dsp_cpu_sampler_start(void);
int dsp_cpu_sample_take(uint64_t *t, uintptr_t *pc, int max);
const char *dsp_cpu_samples(uint64_t *kept, uint64_t *lost);
void dsp_cpu_atfork_prepare(void); /* (a fork waits for the sampler's walk in progress) */
void dsp_cpu_atfork_parent(void);
void dsp_cpu_atfork_child(void);

/* ---- file descriptors (fdclass.c) ---- */
int dsp_fdclass_probe(int fd);  /* fstat/getsockopt: the class of fd now (a few syscalls) */
int dsp_pathclass_probe(const char *path); /* stat: the class of what path names now */
int dsp_fdclass(int fd);        /* cached class; probes (slow path) the first time */
int dsp_fdclass_cached(int fd); /* cached class or unknown: never a syscall */
void dsp_fdclass_set(int fd, int cls);
void dsp_fdclass_forget(int fd);

/* ---- process identity (identity.c) ---- */
struct dsp_identity {
	int role;             /* enum ddpspy_role */
	int rank, local_rank, world_size; /* -1 when unknown */
	int parent_rank, parent_pid;      /* workers: the rank process they belong to */
	char source[24];      /* which environment gave the rank: "torchrun", "ompi", ... */
};
/* Pure function of the environment (getenv-like lookup), argv[0] and the command line, for
 * tests. cmdline is the NUL-separated /proc/self/cmdline contents. */
void dsp_identity_detect(struct dsp_identity *id, const char *(*get)(const char *name),
			 const char *cmdline, size_t cmdline_len);

/* ---- process lifecycle (init.c) and the writer (writer.c) ---- */
/* An injection variable (CUDA_INJECTION64_PATH, NVTX_INJECTION64_PATH) names this library: set
 * now when the program had not set it (1), or already (1); 0 when it names another library. */
int dsp_inject(const char *var);
/* ncclprof.c: NCCL_PROFILER_PLUGIN named at start; a plugin context (nccl_pctx) named comm */
void dsp_ncclprof_init(void);
void dsp_ncclprof_named(void *pctx, int64_t comm, uint64_t since);
void dsp_nvtx_init(void); /* nvtx.c, when built: NVTX_INJECTION64_PATH */
extern int dsp_own_fd; /* the trace file's descriptor, -1 when none */
/* The program is about to put another file at descriptor fd, the trace file's: move the trace
 * file to another number first. Returns 1 when it moved. */
int dsp_own_fd_move(int fd);
int dsp_vfork_child(void);           /* this process is a vfork child (init.c) */
void dsp_writer_wake(void);          /* a ring is half full: drain now (ring.c's hook) */
extern struct dsp_identity dsp_id;
int dsp_writer_start(void);               /* starts the writer thread; -1 on failure */
void dsp_writer_stop_and_drain(const char *reason); /* final drain: exit, exec, signal */
void dsp_writer_flush_now(void);           /* synchronous drain with the writer paused */
void dsp_writer_identity_changed(void);    /* rank learned late: new identity record, rename */
void dsp_writer_atfork_prepare(void);
void dsp_writer_atfork_parent(void);
void dsp_writer_atfork_child(void);

/* registry.c: the live threads */
struct dsp_thread;
typedef void (*dsp_thread_fn)(struct dsp_thread *th, void *ctx);
void dsp_registry_walk(dsp_thread_fn fn, void *ctx);   /* RCU read side; the writer, and cupti/share.c */
void dsp_registry_reap(void);                          /* frees drained rings of exited threads */
void dsp_registry_init(void);
void dsp_registry_fork_prepare(void);
void dsp_registry_fork_parent(void);
void dsp_registry_fork_child(void);                    /* keep only the calling thread */
struct ring *dsp_thread_ring_of(struct dsp_thread *th);
int dsp_thread_tid(struct dsp_thread *th);
const char *dsp_thread_name(struct dsp_thread *th);
uint64_t dsp_thread_pthread(struct dsp_thread *th);
uint64_t dsp_thread_since(struct dsp_thread *th);       /* when it joined, dsp_mono_ns */
int dsp_thread_dead(struct dsp_thread *th);
/* Words of per-thread state owned by the writer: DSP_WS_DROPPED the drop count the file states,
 * DSP_WS_SEEN the count read at this flush's drain. DSP_WS_FINAL: the thread is dead and its ring
 * drained for the last time, so dsp_registry_reap may free it. DSP_WS_CALL: the start of the call
 * last recorded in flight (inflight.c). */
enum { DSP_WS_ANNOUNCED, DSP_WS_DROPPED, DSP_WS_SEEN, DSP_WS_FINAL, DSP_WS_CALL, DSP_WS_N };
uint64_t *dsp_thread_writer_state(struct dsp_thread *th);
/* inflight.c: th's call in flight, read without stopping it; 1 with *c filled when there is one
 * (and it did not change while read) */
int dsp_call_read(struct dsp_thread *th, struct dsp_call *c);
struct dsp_call *dsp_thread_call(struct dsp_thread *th);
/* the path of this process's descriptor fd (readlink of /proc/self/fd), "" when gone */
void dsp_fd_path(int64_t fd, char *buf, size_t n);
/* blocked.c: the program's stack at a call in flight, from its wrapper's frame (c->fp), into pc
 * (max): the frames read, 0 none (no frame, libunwind-x86_64 not loaded (yet), or a frame not as
 * expected). dsp_call_stack_load loads it, once: from the thread with a descriptor table of its
 * own (writer.c's load_stacks), as libunwind's own load */
int dsp_call_stack(const struct dsp_call *c, uintptr_t *pc, int max);
void dsp_call_stack_load(void);
/* blocked.c: a CPU sample's stack (cpusample.c): from its registers and the copy of its stack's
 * top (n bytes from sp), the rest of its stack up to top not read; into pc (max), innermost first
 * (the sampled instruction, then return addresses); the instruction alone until libunwind is
 * loaded. From one thread only (the CPU sampler's). */
struct dsp_sample_regs {
	uintptr_t ip, sp, bp, bx, r12_15[4];
};
int dsp_sample_stack(const struct dsp_sample_regs *s, const uint8_t *stk, size_t n, uintptr_t top, uintptr_t *pc,
		     int max);
/* n bytes at address a of this process, read through the kernel (process_vm_readv), so that a
 * bad address fails instead of faulting: the bytes read before the first page that could not be
 * read, -1 when none */
ssize_t dsp_peek(uintptr_t a, void *buf, size_t n);
extern pid_t dsp_pid; /* this process (init.c) */
/* the path a call in flight was given (c->str), copied safely; "" when none or the call ended */
void dsp_call_path(struct dsp_thread *th, const struct dsp_call *c, char *buf, size_t n);
void dsp_thread_set_name(struct dsp_tls *t, const char *name);
void dsp_registry_lock(void);
void dsp_registry_unlock(void);

/* MPI (mpi.c) tells init.c the rank once MPI_Init has run. */
void dsp_identity_from_mpi(int rank, int size);
void dsp_identity_from_comm(int rank, int size, const char *source); /* NCCL, c10d: where no launcher named it */

int dsp_gettid(void);

#endif
