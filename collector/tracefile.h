/* What a read trace file holds (trace.c reads it, tracemeta.c its records other than events), and
 * the lookups of its threads, stacks, names and modules (tracemeta.c). */
#ifndef DDPSPY_TRACEFILE_H
#define DDPSPY_TRACEFILE_H

#include <stddef.h>
#include <stdint.h>

#define TRACE_MAX_ARGS 16

struct trace_calib {
	uint64_t raw;
	int64_t mono_ns, real_ns;
};

struct trace_evrec;

/* a window of a file by offsets (trace_file's span) */
struct trace_span {
	size_t lo, hi;
};

struct trace_module {
	char *path;
	uint64_t bias, lo, hi;
	uint8_t bid[32]; /* since 2.13: its GNU build id, nbid bytes; 0 none (elfsym.c names its frames) */
	int nbid;
};

/* a Python frame of a stack (2.12): file (its last 200 bytes), line (-1 unknown), function */
struct trace_pyframe {
	char *file, *func;
	int line;
};

struct trace_stack {
	uint32_t id, n;
	uint64_t *ips;
	uint32_t npy;              /* 2.12: the thread's Python frames then, innermost first */
	struct trace_pyframe *py;
};

/* an entry of the file's string table (2.2: kernel and CUDA API names) */
struct trace_name {
	uint32_t id, len;
	char *s;
};

/* what the file says of GPU capture (its latest "gpu" record; 2.2) */
struct trace_gpu {
	int have;           /* a "gpu" record was read */
	char state[16];     /* "on", "taken", "unavailable", "failed" */
	char why[512], lib[512], clock[16];
	char api[16];       /* since 2.6: the CUDA calls recorded, "selected" or "all" ("" before) */
	char holder[64];    /* since 2.6: taken, who holds CUPTI as CUPTI names it ("" unknown) */
	int realtime;       /* CUPTI's times are CLOCK_REALTIME ns (else CLOCK_MONOTONIC) */
	int64_t version, events, dropped, refused, unwritten, lead_ns, checked;
	int64_t stopped_ns; /* since 2.15: when capture's last flush at exit began (CLOCK_MONOTONIC ns), 0 none */
	int64_t untimed;    /* since 2.6: records CUPTI gave no times, left out by the writer */
	int64_t foreign;    /* since 2.6: buffers CUPTI completed into ddpspy's callback that it had not handed out */
	char client[64];    /* since 2.7: another CUPTI client that shares ddpspy's subscription ("" none) */
	int64_t client_records, client_dropped, client_refused; /* since 2.7: records handed to it, those
			     * it asked for that found no buffer of its, kinds refused to it */
	char client_api_limited[24]; /* since 2.11: its API kinds ("runtime", "driver", both comma-joined)
				      * served with the calls ddpspy records only ("" none) */
	int64_t client_tid_unknown; /* since 2.15: records handed to it that name their thread by CUPTI's
				     * default id though it asked for system ids (a thread ddpspy did not know) */
	uint64_t read;      /* CUPTI records read from the file */
	uint64_t untimed_read; /* records with a time of 0 met while reading (files before 2.6), skipped */
};

/* CUPTI's records lost so far: dropped by it, or buffers refused */
static inline int64_t trace_gpu_lost(const struct trace_gpu *g)
{
	return (g->dropped > 0 ? g->dropped : 0) + (g->refused > 0 ? g->refused : 0);
}

/* every record of g's file with no times: left out by the writer, or met while reading */
static inline uint64_t trace_gpu_untimed(const struct trace_gpu *g)
{
	return (uint64_t)(g->untimed > 0 ? g->untimed : 0) + g->untimed_read;
}

struct trace_thread {
	int tid;
	char name[32];
	uint64_t pthread; /* 2.2: its pthread_t, 0 when not written */
	uint64_t dropped; /* cumulative, from the latest "loss" record */
	uint64_t dropped_lo; /* of them, those lost before the file's span (0 without one) */
	uint64_t events;
};

struct trace_event {
	int kind;
	int tid;
	uint64_t raw;       /* raw start */
	int64_t t_ns;       /* start, CLOCK_MONOTONIC ns */
	int64_t dur_ns;
	uint32_t stack;     /* 0: none */
	int nargs;          /* integer and string arguments, in the kind's order */
	int64_t args[TRACE_MAX_ARGS];
	const char *str;    /* the string argument, if any (not NUL-terminated) */
	uint32_t slen;
	int str_index;      /* its position among the arguments, -1 when none */
};

/* 2.9: a call in flight when the writer looked ("inflight" records): its event as far as it was
 * known on entry (ret and later arguments -1; dur_ns: in flight until at_ns), the descriptor it
 * waited on and that descriptor's path then, and whether it was the file's last look */
struct trace_inflight {
	struct trace_event ev;
	int64_t at_ns;
	uint64_t at_raw;
	int64_t fd;            /* -1 none */
	int fdclass;           /* the descriptor's class as the writer found it then, -1 unknown */
	char path[256];        /* "" unknown; "pipe:[inode]", "socket:[inode]" for those */
	int end;               /* seen by the file's last flush (the process ended with it in flight) */
};

struct trace_file {
	const char *path;
	/* header */
	int have_header;
	int major, minor;
	char host[256], exe[1024], clock[16], role[16], rank_source[24], tool[64];
	char **cmdline;
	int cmdline_n;
	int pid, ppid, rank, local_rank, world_size, parent_rank, parent_pid;
	int64_t start_mono_ns, start_real_ns;
	long ring_kb, flush_ms, stack_us;
	long inflight_ms;   /* since 2.9: calls in flight this long were recorded; -1 never (older files) */
	/* calibration: sorted by raw */
	struct trace_calib *calib;
	size_t ncalib;
	/* metadata */
	struct trace_thread *threads;
	size_t nthreads;
	struct trace_stack *stacks;
	size_t nstacks;
	struct trace_module *modules;
	size_t nmodules;
	struct trace_name *names;
	size_t nnames;
	struct trace_gpu gpu;
	/* end state */
	int ended;          /* the last record is "end" */
	char end_reason[32];
	uint64_t events, dropped, frames;
	uint64_t unwritten;      /* since 1.2: events the file did not take (a full disk, a write error) */
	char write_error[64];    /* that write's error, "" for none */
	char sched_error[64];    /* since 2.4: why no thread's schedstat was read ("" read, or none written) */
	double event_ns;         /* since 2.8: ddpspy's own cost per recorded event ("cost"), 0 unknown */
	char py_version[32];     /* since 2.12: the CPython the process ran ("python"), "" none */
	char py_why[160];        /* and why its frames were not read, "" when they were */
	/* since 2.12: the main thread's Python samples, those lost to a full queue, and those given up
	 * because the frames moved under every walk */
	uint64_t py_samples, py_samples_dropped, py_samples_torn;
	long py_sample_hz;       /* their rate (the "pysamples" record's hz), 0 unknown */
	/* since 2.13: the main thread's native samples on a CPU ("cpusamples"), those lost (the
	 * kernel's ring or the queue full), their rate, and why none were taken ("" none said) */
	uint64_t cpu_samples, cpu_samples_lost;
	long cpu_sample_hz;
	char cpu_why[96];
	/* where reading stopped early, and why (error[0] == 0: the whole file was read) */
	size_t stop_offset;
	size_t resume;      /* trace_follow: where the next reading starts (0: the file's first record) */
	char error[160];
	/* options, set between trace_open and trace_read */
	int only_tid;       /* > 0: "events" records of other threads are skipped without decoding */
	size_t verified;    /* frames ending at or before this offset passed an earlier read's CRC check */
	/* a span of a growing file (ddpspy watch: what was written over an interval): in frames
	 * before lo, events, device events, sched and inflight records are skipped undecoded (the
	 * file's other records are read: its threads, stacks, names, clock) and losses count from
	 * lo on; reading ends at the first frame at or after hi (0: the file's end) */
	struct trace_span span;
	struct { int in; uint64_t unwritten; int64_t gpu_lost; } span_at; /* (the losses before lo) */
	/* private */
	struct trace_evrec *evrec; /* trace_read's record state (malloc'ed) */
	const unsigned char *map;
	size_t size;
	int raw_is_ns;      /* clock "monotonic": raw values are already ns */
	size_t seg;         /* calibration segment of the last conversion */
};

const struct trace_stack *trace_stack(const struct trace_file *f, uint32_t id);
/* the string table's entry id (not NUL-terminated: len bytes), NULL when absent */
const struct trace_name *trace_name(const struct trace_file *f, uint32_t id);
const struct trace_module *trace_module_of(const struct trace_file *f, uint64_t ip);
struct trace_thread *trace_thread(struct trace_file *f, int tid);

#endif
