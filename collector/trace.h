/* Reading one ddpspy trace file: header, calibration, threads, stacks, modules, events, losses,
 * in file order, converting raw timestamps to CLOCK_MONOTONIC nanoseconds. Memory is bounded by
 * the file's metadata (threads, stacks, calibration points), never by its number of events. */
#ifndef DDPSPY_TRACE_H
#define DDPSPY_TRACE_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "../common/evcodec.h"
#include "base.h"
#include "tracefile.h"

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
	/* 2.9: each call in flight the writer recorded */
	int (*on_inflight)(void *ctx, struct trace_file *f, const struct trace_inflight *c);
	/* 2.12: each sample of the main thread's Python frames: its raw time (trace_raw_to_ns), a stack
	 * of Python frames alone (trace_stack) */
	int (*on_sample)(void *ctx, struct trace_file *f, int tid, uint64_t raw, uint32_t stack);
	/* 2.13: each sample of the main thread's native stack on a CPU: its time in CLOCK_MONOTONIC
	 * ns, a stack of native frames whose first is the sampled instruction (not a return address) */
	int (*on_cpusample)(void *ctx, struct trace_file *f, int tid, int64_t t_ns, uint32_t stack);
};

/* Opens and maps path. Returns 0, or -1 with f->error set (unreadable, not a ddpspy file,
 * unknown major version). Free with trace_close either way. */
int trace_open(struct trace_file *f, const char *path);

/* Reads the whole file, calling v. Returns 0 when everything was read, 1 when a callback
 * stopped it, 2 when the file is damaged: f->stop_offset and f->error say where and why, and
 * everything before that point was delivered. */
int trace_read(struct trace_file *f, const struct trace_visitor *v);

void trace_close(struct trace_file *f);

/* ddpspy watch (tracefollow.c): the file read on from where the last call stopped, mapped again
 * when it grew, up to its last whole frame (one being written is read by the next call); its
 * clock, stacks and threads carry over. Open it with trace_open first. 0, or 2 when damaged. */
int trace_follow(struct trace_file *f, const struct trace_visitor *v);

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
/* tid: the thread (> 0), or 0 for every thread's events in file order; span: only the events of
 * that span of the file (NULL: all) */
int trace_cursor_open(struct trace_cursor *c, const char *path, int tid, const struct trace_clock *clock,
		      size_t verified, const struct trace_span *span, const uint8_t *want);
/* 1: *e is the next event (its string points into the file), 0: no more, -1: the file is damaged
 * there (everything before was returned) */
int trace_cursor_next(struct trace_cursor *c, struct trace_event *e);
void trace_cursor_close(struct trace_cursor *c);

/* Raw clock value to CLOCK_MONOTONIC ns, interpolating between calibration points. */
int64_t trace_raw_to_ns(const struct trace_file *f, uint64_t raw);


/* Lists the trace files (*.ddpspy) in dir, sorted by name; a path to a file is itself. Returns
 * the count (0: none) or -1 when path cannot be read; free with trace_free_list. */
int trace_list(const char *path, char ***out);
void trace_free_list(char **list, int n);

#endif
