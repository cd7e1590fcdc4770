/* ddpspy view's output and a rank's tracks (tracks.c), for view.c: the view being written, its
 * events and metadata in Chrome Trace Event JSON, the budget of events per file, and the tracks of
 * a rank beside its threads' calls. Private to the two. */
#ifndef DDPSPY_VIEW_INT_H
#define DDPSPY_VIEW_INT_H

#include <stdint.h>
#include <stdio.h>
#include <zlib.h>

#include "vw.h"

#define CRIT_PID 2147418112  /* the critical path's process: above any pid Linux gives */
/* the tracks of a rank that are not threads, each with a tid of its own in the whole job (Linux's
 * tids stay below 2^22): rank index r's steps, then its GPU streams */
#define STEP_TID(r) (0x7f000000 + (r) * 128)
#define GPU_TID(r, s) (STEP_TID(r) + 1 + (s))
#define PIPE_TID(r) (STEP_TID(r) + 127)  /* a pipeline stage's idle (above the GPU streams') */
#define NSLOW 3               /* the default view: the slowest steps */
#define NTYP 2                /* and the most typical ones */
#define RATE_BINS 40          /* the input counter's samples per window */
#define NVTX_DEPTH 32          /* NVTX ranges open at once on a thread, kept to draw */
#define NVTX_NAME 96           /* and the bytes of their message kept */
#define MAX_STREAMS 64        /* (below 127: the tids above) */

/* the output: a file, gzip'ed when its name ends in .gz, behind one FILE (fopencookie) */
struct sink {
	FILE *f;
	gzFile gz;
	uint64_t bytes;  /* written, before gzip */
};

struct view {
	const struct analysis *a;
	FILE *o;             /* the output (struct sink behind it) */
	struct sink sink;
	struct vwin *w;
	int nw;
	int64_t base;          /* the job's start: times are from here */
	const int *show;       /* per rank index: in the output */
	int *pid;              /* per rank index: its process in the output */
	long quota, used;      /* events per file, and the current file's so far */
	uint64_t events, left_out, flows;
	int r;                 /* the rank index being read */
	int worker;            /* reading one of its input workers */
	int tids[4096], ntids; /* the threads of the current file with events in the output */
	double *bins;          /* the current rank's input bytes: RATE_BINS per window */
	struct varrs arr;
	/* the current file's NVTX ranges still open: pushed per thread, started per range id */
	struct nvthr {
		int tid, depth;
		int64_t t[NVTX_DEPTH];
		char msg[NVTX_DEPTH][NVTX_NAME];
	} *nvt;
	int nnvt;
	struct nvstart {
		int64_t id, t;
		int tid;
		char msg[NVTX_NAME];
	} *nvs;
	int nnvs;
	int oom;
	const char *argnames[DDPSPY_EV_COUNT][TRACE_MAX_ARGS];
};

/* tracks.c. The output: ns as microseconds with their nanoseconds under key (the same ns always
 * prints the same); an event's start (phase ph, on pid's track tid at t); a name's metadata (of a
 * process or a thread) and its sort index (LONG_MIN: none); a thread of the current file with
 * events in the output; whether the current rank's next event is written (exempt: a synchronizing
 * call, always; fits: it has a track). The tracks of the rank being read (v->r): the findings
 * that name rank (-1 none) as instants on pid's track tid, at ri's first step of each window (NULL:
 * the window's start); its GPU streams; an NVTX point of the file (vw_reader's nvtx); its steps
 * with their split and findings; its input read rate; a pipeline stage's idle. */
void vo_us(FILE *o, const char *key, int64_t ns);
void vo_ev(struct view *v, const char *ph, int pid, int tid, int64_t t);
void vo_meta(struct view *v, const char *what, int pid, int tid, const char *name, long sort);
void vo_seen_tid(struct view *v, int tid);
int vo_take(struct view *v, int exempt, int fits);
void vo_finding_marks(struct view *v, int pid, int tid, int rank, const struct rankinfo *ri);
void vo_gpu_tracks(struct view *v);
void vo_on_nvtx(void *ctx, const struct proc *p, const struct trace_event *e, int64_t t);
void vo_steps_track(struct view *v);
void vo_rate_track(struct view *v);
void vo_pipe_track(struct view *v);
void vo_pipe_device(struct view *v);

#endif
