/* Reading one ddpspy trace file: header, calibration, threads, stacks, modules, events, losses,
 * in file order, converting raw timestamps to CLOCK_MONOTONIC nanoseconds. Memory is bounded by
 * the file's metadata (threads, stacks, calibration points), never by its number of events. */
#ifndef DDPSPY_TRACE_H
#define DDPSPY_TRACE_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "../common/evcodec.h"

/* qsort that takes an empty array at NULL (qsort(NULL, 0, ...) is undefined behaviour), and
 * leaves an array already in order as it is without sorting it (what a stable sort would leave:
 * the traces' records mostly come in order) */
static inline void sort_n(void *base, size_t n, size_t size, int (*cmp)(const void *, const void *))
{
	size_t i = 1;
	while (i < n && cmp((const char *)base + (i - 1) * size, (const char *)base + i * size) <= 0)
		i++;
	if (i < n)
		qsort(base, n, size, cmp);
}

/* the order of a and b, two numbers of one type: -1, 0 or 1, the one compare helper; comparators
 * chain their fields with GNU C's ?: (the first field that differs decides) */
#define AN_ORDER(a, b) (((a) > (b)) - ((a) < (b)))

/* an array v of n items of size bytes, with room for one more: v itself, or v grown (doubling
 * *cap from first); NULL when out of memory (v is left as it was) */
static inline void *room_for(void *v, size_t n, size_t *cap, size_t size, size_t first)
{
	if (n < *cap)
		return v;
	size_t c = *cap ? 2 * *cap : first;
	void *p = realloc(v, c * size);
	if (p)
		*cap = c;
	return p;
}

#define TRACE_MAX_ARGS 16

struct trace_calib {
	uint64_t raw;
	int64_t mono_ns, real_ns;
};

struct trace_evrec;

struct trace_module {
	char *path;
	uint64_t bias, lo, hi;
};

struct trace_stack {
	uint32_t id, n;
	uint64_t *ips;
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
	int64_t untimed;    /* since 2.6: records CUPTI gave no times, left out by the writer */
	int64_t foreign;    /* since 2.6: buffers CUPTI completed into ddpspy's callback that it had not handed out */
	char client[64];    /* since 2.7: another CUPTI client that shares ddpspy's subscription ("" none) */
	int64_t client_records, client_dropped, client_refused; /* since 2.7: records handed to it, those
			     * it asked for that found no buffer of its, kinds refused to it */
	uint64_t read;      /* CUPTI records read from the file */
	uint64_t untimed_read; /* records with a time of 0 met while reading (files before 2.6), skipped */
};

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
	/* where reading stopped early, and why (error[0] == 0: the whole file was read) */
	size_t stop_offset;
	char error[160];
	/* options, set between trace_open and trace_read */
	int only_tid;       /* > 0: "events" records of other threads are skipped without decoding */
	size_t verified;    /* frames ending at or before this offset passed an earlier read's CRC check */
	/* private */
	struct trace_evrec *evrec; /* trace_read's record state (malloc'ed) */
	const unsigned char *map;
	size_t size;
	int raw_is_ns;      /* clock "monotonic": raw values are already ns */
	size_t seg;         /* calibration segment of the last conversion */
};

/* 2.4: one thread's schedstat as the writer read it ("sched" records): CPU time and time runnable
 * but waiting for a CPU, cumulative since the thread started, at t_ns (CLOCK_MONOTONIC ns) */
struct trace_sched {
	int64_t t_ns;
	int cpus;              /* CPUs the process may run on then (-1 unknown) */
	int host_cpus;         /* the host's online CPUs (-1 unknown) */
	int64_t host_busy_ns;  /* the host's CPU time in use since boot, all CPUs (-1 unknown) */
	int tid;
	uint64_t run_ns, wait_ns, slices;
};

/* What the reader hands out, in file order. Any callback may be NULL. Returning non-zero from
 * a callback stops reading (trace_read then returns 1). */
struct trace_visitor {
	void *ctx;
	int (*on_header)(void *ctx, struct trace_file *f);
	int (*on_identity)(void *ctx, struct trace_file *f);
	int (*on_thread)(void *ctx, struct trace_file *f, const struct trace_thread *th);
	int (*on_event)(void *ctx, struct trace_file *f, const struct trace_event *ev);
	int (*on_loss)(void *ctx, struct trace_file *f, int tid, uint64_t dropped);
	int (*on_end)(void *ctx, struct trace_file *f);
	/* 2.2: CUPTI's records ("gpu_events"; DDPSPY_KM_GPU kinds), times converted to
	 * CLOCK_MONOTONIC ns, tid -1; NULL skips them without decoding */
	int (*on_gpu)(void *ctx, struct trace_file *f, const struct trace_event *ev);
	/* 2.4: each thread of a "sched" record */
	int (*on_sched)(void *ctx, struct trace_file *f, const struct trace_sched *s);
};

/* Opens and maps path. Returns 0, or -1 with f->error set (unreadable, not a ddpspy file,
 * unknown major version). Free with trace_close either way. */
int trace_open(struct trace_file *f, const char *path);

/* Reads the whole file, calling v. Returns 0 when everything was read, 1 when a callback
 * stopped it, 2 when the file is damaged: f->stop_offset and f->error say where and why, and
 * everything before that point was delivered. */
int trace_read(struct trace_file *f, const struct trace_visitor *v);

void trace_close(struct trace_file *f);

/* A file's clock conversion as a first trace_read found it (calib: malloc'ed, free it), for a
 * second reading: trace_set_clock between trace_open and trace_read spares trace_read the search
 * for calibration records. Both return -1 when out of memory. */
struct trace_clock {
	struct trace_calib *calib;
	size_t n;
	int raw_is_ns;
};
int trace_get_clock(const struct trace_file *f, struct trace_clock *c);
int trace_set_clock(struct trace_file *f, const struct trace_clock *c);

/* A reading of one thread's events that the caller pulls one at a time, so that several files
 * (or threads of one file) can be read side by side: memory is one file's mapping window. The
 * file should have been read once (trace_read): its clock is passed in, and frames before
 * verified are not checked again. want (NULL: all), indexed by event kind, selects the events
 * returned; the others are parsed past without converting their times. */
/* Decoding one "events" record: where its events are and what the next one is relative to. */
struct trace_evrec {
	const unsigned char *p, *end; /* the events not yet decoded */
	int64_t left;              /* how many */
	int tid;
	int packed;                /* 2.x: the packed encoding (common/evcodec.h); 1.x: msgpack arrays */
	int gpu;                   /* a "gpu_events" record: times are ns (trace_gpu's clock), no thread */
	uint64_t prev;             /* 1.x: the raw start of the event before; 2.x: its raw end */
	const unsigned char *na;   /* 2.x: argument counts by kind */
	uint32_t nna;
	uint64_t seen;             /* 2.x: kinds whose previous arguments are set */
	int64_t prev_args[DDPSPY_EVC_KINDS][DDPSPY_EVC_DELTA_ARGS];
};

struct trace_cursor {
	struct trace_file f;
	const uint8_t *want;
	size_t off, done;          /* the next frame; the current mapping window */
	struct trace_evrec r;      /* the current record */
	size_t seg;
	int state;                 /* 0 reading, 1 at the end, -1 damaged (f.error says why) */
};
/* tid: the thread (> 0), or 0 for every thread's events in file order */
int trace_cursor_open(struct trace_cursor *c, const char *path, int tid, const struct trace_clock *clock,
		      size_t verified, const uint8_t *want);
/* 1: *e is the next event (its string points into the file), 0: no more, -1: the file is damaged
 * there (everything before was returned) */
int trace_cursor_next(struct trace_cursor *c, struct trace_event *e);
void trace_cursor_close(struct trace_cursor *c);

/* Raw clock value to CLOCK_MONOTONIC ns, interpolating between calibration points. */
int64_t trace_raw_to_ns(const struct trace_file *f, uint64_t raw);

const struct trace_stack *trace_stack(const struct trace_file *f, uint32_t id);
/* the string table's entry id (not NUL-terminated: len bytes), NULL when absent */
const struct trace_name *trace_name(const struct trace_file *f, uint32_t id);
const struct trace_module *trace_module_of(const struct trace_file *f, uint64_t ip);
struct trace_thread *trace_thread(struct trace_file *f, int tid);

/* Lists the trace files (*.ddpspy) in dir, sorted by name; a path to a file is itself. Returns
 * the count (0: none) or -1 when path cannot be read; free with trace_free_list. */
int trace_list(const char *path, char ***out);
void trace_free_list(char **list, int n);

#endif
