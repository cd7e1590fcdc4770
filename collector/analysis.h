/* The analysis behind `ddpspy report`: every rank's file loaded into per-thread timelines,
 * clocks aligned, steps found, each step split into compute / data / comms / host, waits for
 * late peers measured per collective, and the verdict and findings derived from them. The text
 * and JSON reports (report.c) are two views of one struct analysis. */
#ifndef DDPSPY_ANALYSIS_H
#define DDPSPY_ANALYSIS_H

#include <stddef.h>
#include <stdint.h>

#include "../common/format.h"
#include "tracefile.h"

struct trace_clock;
struct gpuproc;
struct pat;

/* what a step's time is split into: the first four categories of common/format.h, whose names are
 * ddpspy_category_names */
enum cat {
	CAT_COMPUTE = DDPSPY_CAT_COMPUTE,
	CAT_DATA = DDPSPY_CAT_DATA,
	CAT_COMMS = DDPSPY_CAT_COMMS,
	CAT_HOST = DDPSPY_CAT_HOST,
	CAT_COUNT
};

struct ev {                /* one recorded call, times aligned to the job's clock (ns) */
	int64_t t, d;
	int64_t bytes;         /* collectives: payload; reads: requested bytes; -1 unknown */
	int32_t comm, seq;     /* collectives; seq -1 when none. Point-to-point calls: seq is the call's
	                        * order among its thread's calls of the same comm, peer, tag and direction
	                        * (an_p2p_number), what matches a send with its receive; -1 unnumbered */
	int32_t fd;            /* I/O; -1 when none */
	int32_t path;          /* index into the process's path table, -1 when none */
	int32_t peer, tag;     /* point-to-point: its send's or receive's; -1 none */
	union {
		struct { int32_t rpeer, rtag, rseq; }; /* op sendrecv: its receive's peer, tag, order */
		struct { uint32_t req; int32_t count; int32_t order; }; /* other point-to-point calls,
		                        * nonblocking collectives and waits: the (first) request, folded to 32
		                        * bits, 0 none; how many. NCCL's send and recv: order, the call's among
		                        * its thread's of the same communicator, peer and direction (what pairs
		                        * a send with its receive: an_p2p_number), -1 none */
	};
	int16_t kind;
	int8_t op, fdclass;
};

/* The calls of a thread between two of its kept synchronizing calls (or before the first, after
 * the last), summed while loading (runs.c): what the split needs of them, so that a training
 * thread whose synchronizing calls were all kept is not read a second time (split.c). Only runs
 * of one call or more are kept; times are on the thread's own clock. */
struct callrun {
	int64_t tmin;          /* the earliest start among them */
	uint32_t tmax, tl, end; /* the latest start, the last one's start, the latest end: ns after tmin */
	uint32_t dl;           /* the last one's duration */
	uint32_t ns[CAT_COUNT - 1]; /* their time as data, comms, host (compute is what the split leaves) */
	uint32_t before;       /* the kept call they came before (thr.n: after the last) */
	uint32_t pat;          /* their input calls by pattern (the split's fold): thr.rpat[pat, pat + npat) */
	uint8_t npat;
	int8_t cat;            /* the last one's category */
	uint8_t nopat;         /* their input calls were not taken (before the thread's first kept call:
	                        * the split reads the thread again if a step holds them) */
};

/* a run while it is summed (runs.c) */
struct runacc {
	int64_t tmin, tmax, tl, dl, end, ns[CAT_COUNT];
	uint32_t pat, npat, n;
	int cat, nopat;
};

struct thr {
	int tid;
	char name[32];
	uint32_t cupti_id;     /* CUPTI's id of the thread: the low 32 bits of its pthread_t (0 unknown) */
	struct ev *ev;         /* the synchronizing calls only: collectives, their waits, step markers; the
	                        * first of them after loading (a prefix: load.c), those of the analysed steps after
	                        * the step analysis when there were more (an_stream_sync) */
	size_t n, cap;
	size_t nsync;          /* synchronizing calls in all (n < nsync: more than the prefix) */
	size_t ncoll;          /* collective and point-to-point events: the training thread has the most */
	size_t nhelper;        /* of which a library may run on its helper threads (gloo's) */
	int64_t first, last;   /* the span of all its events, aligned like ev (first > last: none) */
	struct p2pnum *num;    /* while loading: its point-to-point calls' numbering (p2p.c) */
	struct an_wres { int32_t src, tag; } *wres; /* its nonblocking wildcard receives, in order: the
	                        * source and tag their status named (src -1: not resolved; p2p.c) */
	size_t nwres;
	int64_t io_ns;         /* in file input calls (read, pread, readv of files, open, stat): an input thread */
	/* runs: the calls between kept ones, in order; only while runs_ok (every synchronizing call
	 * kept, memory enough, runs shorter than 4 s, at most MAX_PATS input patterns in one) */
	struct callrun *run;
	size_t nrun, crun;
	struct runacc cur;
	struct owntime { int64_t t, d; } *own; /* ev's times on the thread's own clock (n of them) */
	size_t nmemb;          /* the calls in its runs */
	struct pat *rpat;      /* the runs' input calls by pattern (analysis_int.h), pooled */
	size_t nrpat, crpat;
	int runs_ok;
	struct ev *rfirst;     /* while its file is read (first_on): each run's first call (a sweep begun
	                        * may need it, steps.c), crfirst of room */
	size_t crfirst;
	int first_on;
	struct sruns *sr;      /* a long trace's sampled blocks, for the split (sweepcore.c, analysis_int.h) */
	/* the clocks' spread (analysis_int.h): beyond the prefix, calls kept by their instance's level,
	 * times on the thread's own clock; spk the level kept, posts those not yet completed */
	struct ev *spr;
	uint8_t *slv;          /* each one's level */
	size_t nspr, cspr;
	unsigned spk;
	struct an_posts *posts, *pposts; /* (collectives', point-to-point operations') */
	/* its schedstat (cpu.c): cumulative ns on a CPU and runnable waiting for one, at t (its
	 * process's clock); the first and latest samples, and at most 2048 between */
	struct schedpt { int64_t t; uint64_t run, wait; } *sched, sched_first, sched_last;
	size_t nsched, sched_seen, sched_stride;
};

#define AN_HSITES 16
#define AN_FRAMES 8
#define AN_RANGES 24      /* NVTX ranges kept per process, by thread, domain and name */
#define AN_RANGE_NAME 64
#define AN_RANGE_ENDS 8
#define AN_NVMARKS 65536
#define AN_HSITE_NS 100000 /* 0.1 ms */
#define AN_STUCK 8         /* calls in flight kept per process (the earliest started) */
#define AN_STUCK_CALLERS 7 /* and the frames of each one's stack kept above its call site */
#define AN_SPACES 16       /* collective sequence spaces followed per process */

/* What a process's file says of its calls that did not return (format 2.9's "inflight" records)
 * and of its collectives, for the hang verdict (inflight.c loads it; findhang.c judges). Times
 * on the file's own clock. Inline in struct proc: report --mpi sends it with the rest. */
struct an_stuck {          /* a call in flight that no later event of its thread ended */
	struct ev v;           /* as known on entry; v.d: in flight until its latest look */
	uint64_t raw;          /* its raw start: the event that ends it starts there too */
	int tid, end;          /* end: seen by the file's last flush */
	char path[96];         /* its descriptor's path then ("" none) */
	char site[112];        /* its call site, "module+0xoffset" ("" unknown) */
	char callers[AN_STUCK_CALLERS][112]; /* the frames above it where the writer read the stack */
	int ncallers;
};
struct an_space {          /* a collective sequence space: a communicator, or a gloo operation */
	int32_t comm;          /* as struct ev's */
	int16_t kind;          /* the kind of its calls */
	int8_t done_op;        /* the last completed one's op */
	int8_t issued_op;      /* the last called one's */
	int32_t done, issued;  /* the highest sequence number completed, and called (returned or not) */
	int64_t done_t;        /* when the last completed one ended */
};
struct an_hang {
	int64_t last;          /* the file's latest time: an event's end, a look at a call in flight */
	int64_t comms_max;     /* the longest completed blocking comms call, ns */
	char end_reason[32];   /* the file's end record's ("" none: the process did not finish it) */
	struct an_stuck stuck[AN_STUCK];
	int nstuck;
	int stuck_over;        /* calls in flight left out (more than AN_STUCK) */
	struct an_space space[AN_SPACES];
	int nspace;
};

/* A call site's Python frames (trace format 2.12), from its stack: the site, its innermost frame
 * outside Python's own library (or outside installed packages too: the program's own line), and
 * that frame and its callers, innermost first, "function (file:line)"; n 0: none (hostsite.c) */
struct pysite {
	int n, line;
	char file[160], func[96];
	char frames[AN_FRAMES][160];
};

struct proc {
	char *file, host[256];
	char *open;            /* report --mpi, another process: the file by process 0's absolute path (NULL: file) */
	int src;               /* its file's place among the job's files (report --mpi: who read it) */
	int pid, ppid, role, rank, world, parent_rank, parent_pid;
	int64_t to_real;       /* CLOCK_REALTIME - CLOCK_MONOTONIC at the first calibration */
	int64_t offset;        /* added to to_real by the collective refinement */
	uint64_t events, dropped;
	uint64_t gpu_records;  /* CUPTI's records read from its file (not in events) */
	uint64_t gpu_dropped;  /* CUPTI's records lost: dropped by CUPTI, or no buffer for them */
	uint64_t gpu_untimed;  /* CUPTI's records with no times (work running at the last flush): left out */
	int64_t gpu_stop;      /* where CUPTI's records stopped before the run did (another client took its
			        * callbacks): its last record's end (process clock), 0 they did not */
	uint64_t unwritten;    /* events its file did not take (write_error: why) */
	double event_ns;       /* ddpspy's own cost per event it recorded (its file's "cost"), 0 unknown */
	char write_error[64];
	char sched_error[64];  /* why no schedstat was read (trace.h) */
	size_t read_to;        /* where the first reading stopped; the frames before it are checked */
	struct trace_span part; /* the part of its file analysed (report_options' spans), 0 0: all */
	struct trace_clock *clock; /* its clock conversion, for the second reading */
	int damaged, ended;
	char error[200];
	struct gpuproc *gpu;   /* what CUPTI and the NCCL calls say of its device (gpu.c), NULL none */
	struct commrank { int32_t comm; int rank, size; } *comms; /* its MPI communicators (mpi_comm) */
	int cpus;              /* CPUs it may run on (its affinity, from "sched" records), 0 unknown */
	int host_cpus;         /* its host's online CPUs, 0 unknown */
	struct thr hostcpu;    /* its host's CPU time in use (all CPUs) as samples: run = busy ns */
	int ncomms;
	struct thr *thr;
	int nthr;
	int train;             /* index of the training thread in thr, -1 none */
	int bg;                /* its collectives run on helper threads (gloo's): it waits for them */
	char **paths;          /* path table; fd_path maps a descriptor to its latest open path */
	int npaths, cpaths;
	int32_t *fd_path;
	int nfd;
	/* input evidence, aggregated at load time over every thread (helper threads' events other
	 * than collectives are not kept): file-read bytes per BIN_NS of the process's clock, and
	 * calls and time per directory over the whole run */
	int64_t shift;         /* added to the process's times so far (realtime, offset) */
	double drift;          /* then the clock's drift: + drift x (time - drift_ref) (clocks.c) */
	int64_t drift_ref;
	unsigned spk;          /* the level of the clocks' spread over the job (analysis_int.h; 0: every call) */
	int64_t bin0, span;    /* first event (own clock) and the span of its events */
	double *rbins;         /* at most MAX_BINS of binw ns each: two merge into one when full */
	size_t nbins;
	int64_t binw;
	struct dirstat { char *dir; double calls, ms, bytes; } *dstat;
	int ndstat;
	struct sweep *lsw;     /* the steps' sweep begun while the file was read (lsweep.c), till taken */
	/* its longest host calls (sleeps, lock and condition waits, reads of devices) and input calls of
	 * AN_HSITE_NS or more, by thread, kind, category and stack, over the whole run, the most time first once read: what a
	 * rank does that its peers do not (findings.c). Inline: report --mpi sends it with the rest. */
	struct hsite {
		int tid;
		uint32_t stack;
		int16_t kind;
		int8_t cat;                  /* CAT_HOST or CAT_DATA */
		int nframes;
		double ms, calls;
		int64_t first, last;         /* its first and last call's start (the file's clock) */
		char frames[AN_FRAMES][112]; /* innermost first, "module+0xoffset (function+0xoffset)" */
		struct pysite py; /* where the thread ran Python (hostsite.c) */
		char range[AN_RANGE_NAME]; /* the innermost NVTX range open on its thread when its calls
					    * began (or its samples were taken), "" none (ranges.c) */
	} hsite[AN_HSITES];
	int nhsite;
	/* 2.12: the main thread's Python samples taken outside its recorded calls (its time on a CPU
	 * between calls, or waiting for one), by the innermost frame of the program's own code (not
	 * Python's library or an installed package), cat CAT_COMPUTE, kind -1, ms a sample's period
	 * each; the most time first once read (hostsite.c). 2.13, where no Python frames are read:
	 * its native samples on a CPU the same way, by function (py.n 0, frames[0] the function) */
	struct hsite psite[AN_HSITES];
	int npsite;
	void *recent; /* (while read: the main thread's latest calls, to tell samples in them) */
	/* the program's NVTX ranges (ranges.c), by thread, domain and name (the message, cut before
	 * torch's ", seq = " and its like): a push-pop range's nesting level (the least seen), its time
	 * over the whole run, and the recorded calls' time in it and in none of its inner ranges by
	 * category; a start-end range counts on the thread that started it (depth -1). The most time
	 * first once read; ranges_lost: ranges not counted (more names than AN_RANGES, or deeper than
	 * ranges.c follows) */
	struct nvrange {
		int tid, depth;
		char name[AN_RANGE_NAME], domain[32]; /* (domain: its name, "" NVTX's default one) */
		double ms, calls, cat_ms[CAT_COUNT];
		int64_t first, last;         /* its first and last start (the file's clock) */
		/* its first AN_RANGE_ENDS and latest AN_RANGE_ENDS (a ring, at calls % AN_RANGE_ENDS) as
		 * start and duration: the warm-up's and the end's, told from the analysed steps exactly */
		struct { int64_t t, d; } head[AN_RANGE_ENDS], tail[AN_RANGE_ENDS];
	} range[AN_RANGES];
	int nrange;
	uint64_t ranges_lost;
	/* its push-pop ranges of nesting level 0 or 1 as they closed, by thread and an_range_key of
	 * their domain and name (ranges.c): a range that repeats once a step marks the steps where
	 * collectives do not (steps.c); at most AN_NVMARKS (nvmark_over: there were more) */
	struct an_nvmark { int64_t t0, t1; uint64_t key; int tid; } *nvmark;
	size_t nnvmark, cnvmark;
	int nvmark_over;
	void *nvload; /* (while read: the threads' open ranges, the main thread's latest closed ones) */
	struct an_hang hang;   /* calls in flight and the last collectives (inflight.c) */
};

/* A time of p's file (ns, its own clock) on the job's clock, and back: the constant shift
 * (CLOCK_REALTIME's anchor, the measured offset), then the drift's correction (clocks.c). */
static inline int64_t an_job_time(const struct proc *p, int64_t t)
{
	int64_t u = t + p->shift;
	return p->drift != 0 ? u + (int64_t)(p->drift * (double)(u - p->drift_ref)) : u;
}

static inline int64_t an_file_time(const struct proc *p, int64_t t)
{
	int64_t u = p->drift != 0 ? p->drift_ref + (int64_t)((double)(t - p->drift_ref) / (1 + p->drift)) : t;
	return u - p->shift;
}

#define BIN_NS 100000000 /* the first width of a read-bytes bin */
#define MAX_BINS 4096

struct rankstep {          /* one analysed step of one rank */
	int64_t t0, t1;
	int64_t h0, h1;        /* its training thread's, as the steps were found (a GPU rank's t0, t1
	                        * become its device's: gpustep.c) */
	double cat[CAT_COUNT]; /* ms, raw split of the training thread */
	double wait;           /* ms of comms spent before the last peer arrived */
	double crit[CAT_COUNT];/* ms, with waits for late peers charged to the late rank's cause */
	double late_max;       /* ms, the latest this rank entered a collective of the step */
	double p2p[2];         /* ms of point-to-point calls waiting for a late receiver [0], sender [1] */
};

/* A finding's evidence: typed values in order, lists and objects opened by FV_LIST / FV_OBJ and
 * ended by FV_END, so that every view (JSON, text, HTML) renders the same data. */
enum fv_type { FV_INT, FV_NUM, FV_STR, FV_BOOL, FV_NULL, FV_OBJ, FV_LIST, FV_END };

struct fv {
	const char *key;       /* a string literal; NULL in a list and for FV_END */
	uint8_t type;          /* enum fv_type */
	uint8_t decimals;      /* FV_NUM: digits after the point */
	uint8_t hidden;        /* a figure only the finding's words use (words.c): no renderer shows it */
	union {
		int64_t i;         /* FV_INT, FV_BOOL */
		double d;          /* FV_NUM */
		uint32_t s;        /* FV_STR: offset of the string in the finding's strs */
	} v;
};

#define MAX_EVIDENCE 160

struct finding {
	char kind[32];
	int rank;              /* -1: null */
	double severity;
	char title[512];
	char text[1024];       /* the evidence in one sentence, for the text report */
	const char *advice[4];
	struct fv ev[MAX_EVIDENCE];
	int nev;
	char strs[8192];       /* the evidence's strings, each NUL-terminated */
	uint32_t nstrs;
};

/* A rank's device timeline, per analysed step, on GPU jobs (collector/gpu.c): what the device was
 * busy with (in that order when several overlap) or, idle, what the training thread did */
#define GPU_PARTS(X)                                                                     \
	X(GP_COMPUTE, "compute")            /* compute kernels */                                \
	X(GP_COPY, "copy")                  /* copies and sets other than input */               \
	X(GP_COPY_IN, "copy_in")            /* host-to-device copies */                          \
	X(GP_NCCL_WAIT, "nccl_wait")        /* NCCL kernels before the last rank's started */    \
	X(GP_NCCL, "nccl_transfer")         /* NCCL kernels, the rest */                         \
	X(GP_IDLE_DATA, "idle_data")        /* idle, the host waiting for input */               \
	X(GP_IDLE_SYNC, "idle_sync")        /* idle, the host waiting for the device or after it */ \
	X(GP_IDLE_LAUNCH, "idle_launch")    /* idle, the host launching kernels */               \
	X(GP_IDLE_COMMS, "idle_comms")      /* idle, the host in a collective of its own (MPI, gloo) */ \
	X(GP_IDLE_OTHER, "idle_other")      /* idle, the host doing anything else */             \
	X(GP_IDLE_PAGEABLE, "idle_pageable") /* idle, the host held by a pageable copy or after it (in \
	                                      * the contract's sync) */
enum gpart {
#define X(e, s) e,
	GPU_PARTS(X)
#undef X
	GP_COUNT
};
extern const char *const an_gpart_names[GP_COUNT];

struct gpustat {
	int have;
	double part[GP_COUNT];     /* ms per step */
	double kernels, launches;  /* compute kernels, launch calls: per step */
	double nccl_ms, nccl_bytes, nccl_calls; /* NCCL kernels per step: time (with waits), bytes, count */
	double nccl_xfer_ms;       /* NCCL kernels per step: their time after the last rank's started */
	double nccl_overlap_left_ms; /* on the compute stream: what overlapping backward would leave */
	unsigned nccl_ops;         /* the operations of its NCCL kernels (1 << op; bit 31: unknown) */
	int64_t nccl_max_bytes;    /* its largest NCCL collective, and that one's operation */
	int nccl_max_op;
	int nccl_on_compute;       /* NCCL kernels ran on a stream that also ran compute kernels */
	double pageable_bytes, pageable_calls, pageable_ms; /* copies from or to pageable memory, per step */
	double pinned_gbs;         /* the fastest copy between the device and pinned host memory of 1 MiB or
				    * more (GB/s), 0 none */
	double kernel_us_p50;      /* compute kernels' median duration */
	int device;                /* the device its work ran on (the first one seen) */
	int site;                  /* the training thread's longest wait for the device (an_gpu_site) */
	int reread_failed;         /* its device's work (over its share) could not be read again */
	uint32_t nccl_join[4];     /* its NCCL kernels joined to their calls: by external id, by their
				    * communicator's order (nonblocking), by order alone (gpu.c), as a CUDA
				    * graph's replays of a captured call (NCCL's plugin: ncclplug.c) */
	int nccl_src;              /* where its NCCL kernels' times came from: 0 none, 1 CUPTI, 2 NCCL's
				    * profiler plugin (then, without CUPTI, have is 0 and of the above only
				    * the nccl_ figures are set, over its host's steps), 3 CUPTI's until its
				    * records stopped inside the steps, the plugin's after (have 0, as 2) */
	double nccl_late_p50;      /* its NCCL kernels' start after the first rank's, median (ms) */
	double p2p_ms[2];          /* its NCCL sends' and receives' kernels per step: their time before the
				    * peer's kernel started (a pipeline stage's device waiting for its
				    * neighbour), and the rest (their transfer) */
	/* a sharded job's all-gathers of parameters and reduce-scatters of gradients (SHARD_*), over
	 * its analysed steps (gpushard.c): kernels, bytes; ms transferring with no compute kernel
	 * running, waiting for peers' kernels before, transferring in all; ms of the exposed the
	 * compute beside them could have hidden; bytes by operation */
	struct gpushard {
		double calls, bytes, exposed, waited, xfer, hideable;
		double opbytes[DDPSPY_OP_COUNT];
	} shard[2];
};
enum { SHARD_GATHER, SHARD_REDUCE, SHARD_CLASSES };

/* A rank's CPU time over its analysed steps (cpu.c): its training thread's time on a CPU and
 * runnable but waiting for one, as shares of the span; on its host, the other threads' CPU time and
 * run-queue time in cores (CPU seconds per second) by group; its input threads' and workers' time
 * over the whole run (ns): on a CPU, waiting for one, in file input calls, alive */
enum { CPU_TRAIN, CPU_INPUT, CPU_COLL, CPU_OTHER, CPU_GROUPS };
extern const char *const an_cpu_group_names[CPU_GROUPS];
struct cpustat {
	int have, cpus, host_cpus;
	int process;           /* the rank is bound to fewer CPUs than its host has: only its own
	                        * process and its workers' compete for them (mpirun --bind-to core) */
	double on_cpu, runq;
	double outside;        /* in cores: the host's CPU time in use that no traced thread of the
	                        * job held (bound: the part on its CPUs, taken as spread evenly) */
	double cores[CPU_GROUPS], waiting[CPU_GROUPS];
	int threads[CPU_GROUPS];
	int in_threads;
	double in_run, in_wait, in_io, in_life;
};

struct rankinfo {
	int rank;
	struct proc *p;
	struct rankstep *steps; /* nsteps of the analysis */
	double step_p50, step_p95, shares[CAT_COUNT], wait_share, late_p50;
	double p2p_wait_share, p2p_share[2]; /* waits in point-to-point calls: all; for a late receiver, sender */
	double coll_bytes, read_bytes; /* per step */
	/* ddpspy's own recording in its process: events per step, and their cost (events per step
	 * times the file's cost per event) as a share of its step, -1 when its file did not say */
	double events_step, overhead_share;
	/* collectives on helper threads (p->bg), per step: their time (the union of their spans), and
	 * the part of it the training thread kept computing through instead of waiting */
	double bg_ms, bg_overlap;
	struct gpustat gpu;        /* GPU jobs: the device's split */
	struct cpustat cpu;        /* CPU time and contention (cpu.c) */
};

#define MAX_FINDINGS 32
#define MAX_WARNINGS 32

struct analysis {
	char **dirs;
	int ndirs;
	struct proc *procs;
	int nprocs, nhosts;
	struct rankinfo *ranks;
	int nranks;
	int skip;
	size_t prefix;                 /* synchronizing calls kept per thread while loading (0: by world size) */
	size_t spread;                 /* and beyond them, at most, for the clocks (analysis_int.h) */
	int swept_while_read;          /* ranks whose steps were (report --mpi: of this process's) */
	size_t gpu_keep;               /* device records kept per rank while loading (0: by world size; gpu.c) */
	size_t sample_max;             /* steps whose per-step figures are kept per rank, at most */
	uint64_t mask_seen;            /* the thinnest sample a rank's sweep has come to so far (sweep.c) */
	int steps_detected, nsteps;
	int nsampled;                  /* of nsteps, those the per-step figures come from */
	int steps_cut;                 /* steps found after a rank's CUPTI records stopped, left out (steps.c) */
	const char *step_source;       /* collectives, markers, windows, none */
	/* markers that are the program's NVTX range (steps.c): its name and domain ("" default); name ""
	 * none */
	char step_range[AN_RANGE_NAME], step_range_domain[32];
	double wall_s;
	int64_t t0;            /* the job's start on its clock: its ranks' first event */
	uint64_t events, dropped;
	const char *clock_method;
	double clock_residual_us;
	int clock_unmeasured;          /* ranks the clock signal did not reach (their realtime kept) */
	int jobs;                      /* threads the reading and the split run on */
	struct an_mpi *mpi;            /* report --mpi: the processes the readings are spread over */
	int mpi_follower;              /* this process reads and splits files for process 0, which reports */
	int32_t *mpi_who;              /* report --mpi: the process that reads each file and splits its rank (proc.src) */
	int gpu_whole;                 /* report --mpi: every rank's device work to process 0 (--html draws it) */
	double step_p50, step_p95, step_max;
	double overhead_share;         /* the most of any rank's (rankinfo), -1 when no file said */
	double shares[CAT_COUNT];      /* critical-path verdict shares */
	const char *bound;
	double confidence;
	char summary[1024];            /* (quoting a finding: composed with its words, words.c) */
	int verdict_finding;           /* the finding the summary quotes, -1 none */
	double verdict_share;          /* the bound's share of the critical path */
	/* a pipeline-parallel job (findpipe.c): its stages, its micro-batches per step, each rank's
	 * stage (per a->ranks index, -1 none); 0, 0 and NULL for any other job */
	int pipe_stages, pipe_micro;
	int *pipe_stage;
	struct finding findings[MAX_FINDINGS];
	int nfindings;
	char *warnings[MAX_WARNINGS];
	int nwarnings;
	struct stepdata *sd;           /* private to the analysis (analysis_int.h) */
};

struct report_options {
	int skip;            /* warm-up steps to skip */
	int jobs;            /* threads (0: the CPUs this process may use) */
	struct an_mpi *mpi;  /* report --mpi (an_mpi_start), NULL: this process alone */
	int gpu_whole;       /* report --mpi: process 0 gets every rank's device work, not only the NCCL
			      * kernels (the HTML report draws it) */
	const int *ranks;    /* only these ranks (NULL: all) */
	int nranks;
	/* ddpspy watch: what each file (named as the directory's listing names it; sorted by path,
	 * as trace_list gives them) had gained over the last interval; the analysis is then of that
	 * span of each file alone (trace_file's span), a file not named read whole. NULL: every
	 * file whole. */
	const struct an_span *spans;
	int nspans;
};
struct an_span {
	const char *path;
	struct trace_span span;
};

/* Loads every trace file under dirs and analyses the job. Returns 0, or -1 when nothing
 * readable was found (a one-line reason in err). Free with analysis_free either way. */
int analysis_run(struct analysis *a, char **dirs, int ndirs, const struct report_options *o,
	char *err, size_t errlen);
void analysis_free(struct analysis *a);
/* every finding's title, evidence line and advice, from its kind's row, and the summary that
 * quotes the costliest (words.c): a renderer's first step, before it shows any */
void an_words(struct analysis *a);
/* the finding kinds a report can give, i from 0; NULL past the last (words.c's table) */
const char *an_finding_kind(int i);

/* GPU capture over the job (collector/gpu.c) */
struct gpujob {
	int any;               /* a rank recorded GPU capture's state or device work */
	int ranks;             /* ranks with device work */
	const char *capture;   /* "cupti" where some rank's capture was on, else "host-only" */
	uint64_t dropped;      /* CUPTI's records lost (dropped by it, or buffers refused) */
	uint64_t untimed;      /* CUPTI's records that came with no times, left out */
	double lead_us;        /* the most device work started before its launching call: clock error */
};
void an_gpu_job(const struct analysis *a, struct gpujob *j);

/* Where one rank's GPU figures came from (the report's coverage), and what is missing because of it */
struct gpucover {
	const char *source;   /* "cupti", "cupti-shared" (with another CUPTI client), "host-only" */
	const char *client;   /* cupti-shared: the other client, as the rank's file names it; else NULL */
	const char *client_api; /* its CUDA call kinds ("runtime,driver") served with ddpspy's calls
				 * only (cupti/share.c); NULL none */
	const char *why;      /* how capture started, or why it did not */
	int kernels, copies, nccl_timing; /* 1: missing (no device timeline: only host calls) */
	uint64_t dropped;     /* CUPTI's records lost on this rank: holes in what it has */
	int stopped;          /* CUPTI's records stopped before the run did (another client took its
			       * callbacks): its last calls that have a CUPTI record inside came after the last */
	unsigned unrecorded;  /* of those, its last CUDA copy calls (of 8) ... */
	unsigned unlaunched;  /* ... and its last NCCL calls that launched (of 8) */
	double stopped_s;     /* then: how long before the last of them they stopped */
	const char *nccl;     /* where its NCCL kernels' times came from: "cupti", "nccl-plugin", "none" */
	const char *nccl_after; /* where CUPTI's records stopped (stopped): where they came from after
				 * that, "nccl-plugin" or "none"; else NULL */
	/* NCCL's profiler plugin: its collectives, those not joined to a call, the clock mapping's
	 * median width (how late its times may be) and crossings, the CUDA graphs' replays of
	 * captured calls among them (ncclplug.c) */
	unsigned colls, unjoined, conflicts, replays;
	double bound_us, shift_us; /* (shift: how late the plugin's clock ran where CUPTI checked it,
				    * taken off this rank's plugin kernels; 0 none) */
	/* checked (CUPTI timed the same kernels): collectives in both, in one only; the medians of
	 * |plugin - CUPTI| of starts and durations, the durations' largest */
	int checked;
	unsigned matched, cupti_only, plugin_only;
	unsigned after_stop; /* the plugin's after CUPTI's records stopped: not checked */
	double start_us, dur_us, dur_us_max;
};
/* rank index r's coverage (of a GPU job: an_gpu_job's any) */
void an_gpu_cover(const struct analysis *a, int r, struct gpucover *c);
/* every rank's coverage in a line, ranks alike grouped (malloc'ed; NULL when not a GPU job) */
char *an_gpu_cover_line(const struct analysis *a);

/* report.c: shares as a JSON member {"compute", "data", "comms", "host"}, rounded to 1e-4 */
struct json;
void report_json_shares(struct json *j, const char *key, const double *s);

#endif
