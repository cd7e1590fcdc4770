/* The viewer: what `ddpspy view` (a Chrome Trace Event JSON for Perfetto UI and Chromium's
 * DevTools, view.c) and `ddpspy report --html` (one self-contained HTML file, html.c) draw, taken
 * from the analysis (collector/analysis_int.h) and a second reading of the rank files of a few
 * steps (timeline.c). docs/viewer.md describes both. */
#ifndef DDPSPY_VW_H
#define DDPSPY_VW_H

#include <stdint.h>
#include <stdio.h>

#include "../collector/analysis_int.h"

/* a stretch of the job's aligned clock shown: steps first..last (numbered as detected, the warm-up
 * included), their bounds the earliest start and latest end over the ranks */
struct vwin {
	int64_t t0, t1;
	int first, last;   /* step numbers */
	size_t k0, k1;     /* their indices among the analysis's kept steps (a->ranks[].steps) */
	int slowest;       /* it holds one of the slowest steps */
	int hang;          /* the hang (vw_add_hang): no steps, first and last -1 */
};

/* The windows to show: the steps of spec ("A-B" or "A", step numbers) or, spec NULL, the nslow
 * slowest steps and ntyp typical ones (those nearest the median), adjacent ones merged, in time
 * order; with no steps found, the whole run as one window. Returns the count, or -1 with err. */
int vw_windows(const struct analysis *a, const char *spec, int nslow, int ntyp, struct vwin **out, char *err,
	       size_t errlen);
/* The hang, where the report found one: a window after w's from a little before the earliest
 * call in flight that never returned (a second or more) to the latest look at one, so that the
 * view shows what each rank was in when its file ended. Returns the windows' count. */
int vw_add_hang(const struct analysis *a, struct vwin **w, int nw);
/* the step number of kept step k */
int vw_step_number(const struct analysis *a, size_t k);
/* the window that holds t (its index), -1 none: w sorted by time */
int vw_window_of(const struct vwin *w, int nw, int64_t t0, int64_t t1);

/* One reading of a process's file for the windows: every recorded call (not CUPTI's records)
 * that overlaps a window, its time on the job's clock, handed to fn with the path it read or
 * opened (NULL none) and the thread's table entry; then the calls in flight that never returned
 * (their inflight records with no event of the same start after them); thread names after it as
 * the file ends. */
struct vw_call {
	const struct trace_event *e;   /* the raw event: its kind and arguments */
	struct ev v;                   /* the same converted, aligned */
	const char *path;              /* the file it names or reads (its latest open), NULL none */
	size_t pathlen;
	int win;                       /* the window it overlaps */
	int inflight;                  /* a call in flight that never returned: v.d until the last look */
	const struct trace_stack *stack; /* its stack (its Python frames, 2.12), NULL none */
};
#define VW_FRAME 160 /* a native frame's text, "module+0xoffset (function+0xoffset)" */
#define VW_FRAMES 8  /* a sample's frames given */
struct vw_reader {
	void *ctx;
	void (*call)(void *ctx, const struct proc *p, const struct vw_call *c);
	void (*thread)(void *ctx, const struct proc *p, int tid, const char *name); /* each thread, at the end */
	/* the program's NVTX points (push, pop, start, end, mark), wherever they are: t on the job's
	 * clock (a range pushed before a window may end in it); NULL skips them */
	void (*nvtx)(void *ctx, const struct proc *p, const struct trace_event *e, int64_t t);
	/* the main thread's Python samples in a window (2.12): t on the job's clock, the stack of its
	 * Python frames; NULL skips them */
	void (*sample)(void *ctx, const struct proc *p, int tid, int64_t t, int win, const struct trace_stack *s);
	/* the main thread's native samples on a CPU in a window (2.13): t on the job's clock, its site
	 * (the innermost frame's function) and its frames as text, innermost first; NULL skips them */
	void (*cpusample)(void *ctx, const struct proc *p, int tid, int64_t t, int win, const char *site,
			  const char (*frames)[VW_FRAME], int n);
};
int vw_read(const struct proc *p, const struct vwin *w, int nw, const struct vw_reader *r);

/* Collective arrivals, for joining a collective's calls across ranks: each rank's call (host
 * collectives with a sequence number) or NCCL kernel (gpu 1) in the windows. */
struct varr {
	int rank;              /* index in a->ranks */
	int gpu;
	int32_t comm, seq;
	int op;
	int64_t t, end, bytes;
	int tid;               /* the thread (host) or the track (device) it is shown on */
	int shown;             /* its slice is in the output */
};
struct varrs {
	struct varr *v;
	size_t n, cap;
};
int vw_arr_add(struct varrs *s, const struct varr *a);
/* sorted into instances: each run of equal (gpu, comm, seq) is one, the latest arrival last */
void vw_arr_sort(struct varrs *s);
/* the end of the instance at i (its first arrival): *n its arrivals */
size_t vw_inst(const struct varrs *s, size_t i);

/* whether v, a host call, arrives at a collective instance the ranks share */
static inline int vw_is_arrival(const struct ev *v)
{
	unsigned m = an_kind(v->kind)->m;
	return v->seq >= 0 && (m & DDPSPY_KM_COLL) && !(m & DDPSPY_KM_ENQUEUES);
}

/* the rank of the job's straggler finding, -1 none */
int vw_straggler(const struct analysis *a);

/* ddpspy view */
int cmd_view(int argc, char **argv);
/* report --html: the report as one self-contained HTML file at path; -1 with err */
int html_report(const struct analysis *a, const char *path, char *err, size_t errlen);

#endif
