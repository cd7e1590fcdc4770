/* What the steps' files share (pattern.c: step patterns and windows; steps.c: markers, the
 * point-to-point alignment, the driver; sweep.c, lsweep.c, sweepcore.c: long traces' steps found
 * again from every call, streamed, a sample kept): a training thread's synchronizing calls, a step
 * pattern, the sweep. Private to them. */
#ifndef DDPSPY_STEPS_INT_H
#define DDPSPY_STEPS_INT_H

#include <stddef.h>
#include <stdint.h>

#include "analysis_int.h"

struct sync { /* the synchronizing calls of a training thread: collectives and their waits */
	struct ev **e;
	size_t n;
};

/* Steps of one rank: boundaries b[0..nb) in aligned ns. From the reference rank's repeating
 * pattern of synchronizing calls, mapped to other ranks through collective sequence numbers. */
struct pattern {
	size_t period, first;   /* on the reference's sync list: the first step starts after e[first-1] */
	size_t nsteps;
	size_t end;             /* where its run of whole periods ended, as found (not as aligned) */
	int key_comm, key_seq;  /* a seq-bearing call at or after the boundary ... */
	size_t key_delta;       /* ... this many sync calls after it */
};

/* ---- long traces: the steps from every call streamed again, a sample of them kept ----
 *
 * When a rank made more synchronizing calls than the prefix kept while loading, its steps are
 * found again from all of its calls, read a second time in time order (an_stream_sync), and
 * only the calls of a sample of steps are kept: blocks of SAMPLE_BLOCK consecutive steps, chosen
 * by a hash of the block's index, fewer as the trace grows (a bit more of the hash must be 0), so
 * that no rank keeps more than a->sample_max steps or SAMPLE_CALLS calls per step on average.
 * Every rank keeps the same steps. Memory then depends on the ranks, not on the trace's length;
 * below the limits every step is kept and the analysis is the same as from the prefix. */
#define SAMPLE_BLOCK 16
#define SAMPLE_CALLS 16

enum { BY_PATTERN, BY_MARKERS, BY_WINDOWS };

struct kstep { int64_t t0, t1; size_t i; };
struct kthr { struct ev *ev; size_t *step; size_t n, cap; };

struct sweep {
	struct analysis *a;
	struct proc *p;
	int mode;
	/* pattern: boundary k >= 1 ends selected call first + k * period - 1; the rank goes on while
	 * its calls match its signatures sig (when not NULL), up to maxsteps steps */
	const struct pattern *pt;
	size_t first, calls, maxsteps;
	const struct ev *sig;
	size_t smax;                  /* the sample's size (a->sample_max) */
	int share;                    /* its sample thinned with the other ranks' (a->mask_seen): not a
				       * sweep begun while reading (whose steps may not be the job's) */
	/* begun while the file was read (an_lsweep_start): the pattern and signatures it found there,
	 * whether it stopped, and its steps once the file ended (SIZE_MAX: not yet) */
	struct pattern own;
	struct ev *own_sig;
	int ended;
	size_t nend;
	/* windows: boundary k at lo + (hi - lo) * k / K */
	int64_t lo, hi;
	size_t K;
	/* times: on the file's own clock, the job's once the sweep ends (an_sweep_on_job), but for
	 * windows, on the job's clock throughout */
	int64_t lastend;              /* markers: the latest end marker */
	size_t nb;                    /* boundaries so far: step nb - 1 is open */
	int64_t b, bprev;             /* the latest two */
	uint64_t mask;
	struct kstep *ks;             /* the kept steps */
	size_t nks, cks;
	struct kthr *kt;              /* their calls, per thread */
	size_t kept;
	int64_t len_max, lm0, lm1;    /* the longest step from a->skip on: its length, start and end */
	int64_t b0, bskip;            /* where step 0 and step a->skip start */
	int p2p;                      /* steps by point-to-point calls (an_step_call) */
	int failed;
	/* the training thread's sampled blocks for the split (NULL: the split reads the thread again),
	 * when the rank's only synchronizing calls are that thread's: it is streamed alone, every
	 * event of a sampled step converted, the others' kinds but the synchronizing ones parsed past */
	struct sruns *sr;
	int th;                       /* the thread's index */
	uint8_t want[DDPSPY_EV_COUNT]; /* the kinds its stream converts now */
	int all;                      /* want has every kind */
	int on;                       /* the open step's block is kept: every event taken */
	int want_next;                /* the next event is the one after the latest block's last step */
	int stopping;                 /* the sweep ends once it is taken */
	size_t pend_blk;              /* a block that begins after it (SIZE_MAX none): its index, */
	struct ev pend_b;             /* its first call, */
	struct wait_ctx pend_w;       /* and the wait state before that call */
};

/* pattern.c: whether e, a call of p's thread u, is one steps are found by; the thread's calls
 * steps are found by, into s; whether two calls have the same signature; the repeating pattern of
 * s (0: none); the index of a rank's first call of the first step (SIZE_MAX: not shown) and its
 * boundaries (their number, steps + 1; 0 when not found); the span every rank covers; boundary k
 * of K equal windows over [lo, hi] */
int an_step_call(int p2p, const struct proc *p, const struct thr *u, const struct ev *e);
void an_sync_list(struct proc *p, struct sync *s, int p2p);
size_t an_rank_first(const struct sync *s, const struct pattern *pt);
size_t an_rank_bounds(struct sync *s, const struct pattern *pt, size_t first, int64_t *b);
int an_same_sig(const struct ev *x, const struct ev *y);
int an_find_pattern(struct sync *s, struct pattern *pt);
void an_common_span(struct analysis *a, int64_t *lo, int64_t *hi);
int64_t an_window_at(int64_t lo, int64_t hi, size_t k, size_t K);

/* sweepcore.c, the sweep's engine, for lsweep.c and sweep.c: every event of the training thread
 * the stream converts (ctx: the sweep; v on its own clock), and the next one while a block is
 * being kept (1: the sweep ends with it); the kinds the stream converts; the latest block's run
 * ended; the steps below below let go; the stream ended (the number of whole steps); the times put
 * on the job's clock; a rank streamed again whole (w set up by the caller: its whole steps); what
 * a sweep holds let go */
int an_sweep_local(void *ctx, const struct ev *v);
int an_sr_next(struct sweep *w, const struct ev *v);
void an_sr_want(struct sweep *w);
void an_sr_close(struct sruns *sr);
void an_sweep_prune(struct sweep *w, size_t below);
size_t an_sweep_finish(struct sweep *w);
void an_sweep_on_job(struct sweep *w);
size_t an_sweep_rank(struct sweep *w);
void an_sweep_drop(struct sweep *v);

/* sweep.c: every rank's steps again, streamed (*out: the sweeps; the steps every rank has, 0 when
 * that cannot be done); the sample's steps from skip on kept as the ranks' calls (their number);
 * the sweeps of R ranks freed */
size_t an_sweep_steps(struct analysis *a, struct sync *syn, int mode, struct pattern *pts, const size_t *first,
		      int p2p, struct sweep **out);
size_t an_sweep_keep_analysed(struct analysis *a, struct sweep *w, size_t skip);
void an_sweep_free(struct sweep *w, int R);

#endif
