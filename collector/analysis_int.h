/* Shared between the analysis's files; report.c and compare.c see only analysis.h. Internal names
 * carry the an_ prefix. The sections follow the phases in order, and each file calls only the
 * sections above its own:
 *   kinds.c, stats.c   what each event kind means; quantiles and collective instances
 *   model.c            what every phase uses of the job's model: warnings, the training thread,
 *                      the waits for late ranks, the sample's size
 *   load.c             the trace files into per-thread timelines; the ranks (beside it: runs.c,
 *                      spread.c, proc.c, loadmpi.c, stream.c)
 *   clocks.c           every process's times on the job's clock
 *   steps.c            each rank's step boundaries
 *   split.c            each step split into compute / data / comms / host, waits, critical path
 *   findings.c         the findings
 *   verdict.c          the verdict
 * analyze.c runs them in that order and frees what each made. */
#ifndef DDPSPY_ANALYSIS_INT_H
#define DDPSPY_ANALYSIS_INT_H

#include <pthread.h>
#include <string.h>

#include "../common/format.h"
#include "analysis.h"

#define MS(ns) ((double)(ns) / 1e6)

#include "trace.h"

/* ---- kinds.c ---- */

/* an event kind's meaning (common/format.h's DDPSPY_KM_*) and where its arguments are */
struct kind {
	unsigned m;
	int8_t fd, fdclass, bytes, op, comm, seq, peer, begin, path; /* argument positions, -1 none */
	int8_t tag, req, count, rpeer, rtag;
};
/* every kind's entry, built when the program starts (kinds.c), and one for unknown kinds */
extern struct kind an_kinds[DDPSPY_EV_COUNT + 1];
/* the position of argument name in kind's list (common/format.h), -1 when absent */
int8_t an_argpos(int kind, const char *name);
/* never NULL: a kind this collector does not know (a newer writer's) counts as host time */
static inline const struct kind *an_kind(int kind)
{
	return &an_kinds[(unsigned)kind < DDPSPY_EV_COUNT ? kind : DDPSPY_EV_COUNT];
}
/* The predicates the phases ask, inline: they run for every event.
 * an_category: what e's time counts as, CAT_* or DDPSPY_CAT_MARKER (a point); DDPSPY_CAT_NONE
 *   never reaches the phases (an_convert drops those records).
 * an_is_coll: a collective or a wait for one (what marks the training thread).
 * an_is_sync_kind: collectives, their waits, point-to-point calls, step markers.
 * an_completes: a wait that completes the pending nonblocking collectives.
 * an_kept_sync: the synchronizing calls the phases keep (not MPI_Test*, which only looks).
 * an_exit_aligns: every rank leaves it together, so its exit aligns clocks. */
static inline int an_category(const struct ev *e)
{
	unsigned m = an_kind(e->kind)->m;
	/* reads of a device or an eventfd are not input */
	if ((m & DDPSPY_KM_INPUT_FD) && (e->fdclass == DDPSPY_FD_DEVICE || e->fdclass == DDPSPY_FD_ANON))
		return CAT_HOST;
	return (int)DDPSPY_KM_CAT(m);
}

/* Two input calls of a thread less than this apart (ns): the time between them is the loop that
 * makes them (its bookkeeping, and ddpspy's recording of each call), counted as data by the split,
 * not as compute (docs/report.md, section 4). */
#define AN_INPUT_GAP_NS 5000

/* the part of the time between two calls, the one before of category pc ending at pend and e of
 * category c, that the split counts as data (AN_INPUT_GAP_NS): 0 or the gap */
static inline int64_t an_input_gap(int pc, int64_t pend, int c, const struct ev *e)
{
	if (pc != CAT_DATA || c != CAT_DATA)
		return 0;
	int64_t g = e->t - pend;
	return g > 0 && g < AN_INPUT_GAP_NS ? g : 0;
}

static inline int an_is_coll(int kind)
{
	return (an_kind(kind)->m & (DDPSPY_KM_COLL | DDPSPY_KM_WAITS)) != 0;
}

static inline int an_is_sync_kind(int kind)
{
	const struct kind *k = an_kind(kind);
	return (k->m & (DDPSPY_KM_COLL | DDPSPY_KM_WAITS | DDPSPY_KM_P2P)) || DDPSPY_KM_CAT(k->m) == DDPSPY_CAT_MARKER;
}

static inline int an_is_p2p(const struct ev *e)
{
	return (an_kind(e->kind)->m & DDPSPY_KM_P2P) != 0;
}

/* NCCL's ncclSend and ncclRecv: they only enqueue (the device waits, not the host), so no host
 * wait is timed from them, but they are messages between ranks all the same */
static inline int an_msg_op(int op)
{
	return op == DDPSPY_OP_SEND || op == DDPSPY_OP_RECV;
}

static inline int an_nccl_p2p(const struct ev *e)
{
	return e->kind == DDPSPY_EV_NCCL_COLL && an_msg_op(e->op);
}

/* a message between ranks, blocking or enqueued: what a step's pattern and a pipeline's stages
 * are found from */
static inline int an_is_msg(const struct ev *e)
{
	return an_is_p2p(e) || an_nccl_p2p(e);
}

/* whether e's operation has flag (DDPSPY_OPF_*) */
static inline int an_op_is(const struct ev *e, unsigned flag)
{
	return e->op >= 0 && e->op < DDPSPY_OP_COUNT && (ddpspy_op_flags[e->op] & flag);
}

static inline int an_completes(const struct ev *e)
{
	return (an_kind(e->kind)->m & DDPSPY_KM_WAITS) && an_op_is(e, DDPSPY_OPF_DONE);
}

static inline int an_kept_sync(const struct ev *e)
{
	return an_is_sync_kind(e->kind) && (!(an_kind(e->kind)->m & DDPSPY_KM_WAITS) || an_completes(e));
}

/* a synchronizing call of a rank's training thread: a collective, or a wait that completed a request */
static inline int an_train_sync(const struct ev *e)
{
	return (an_kind(e->kind)->m & DDPSPY_KM_COLL) || an_completes(e);
}

static inline int an_blocking_coll(const struct ev *e)
{
	unsigned m = an_kind(e->kind)->m;
	return (m & DDPSPY_KM_COLL) && !(m & DDPSPY_KM_NONBLOCKING);
}

/* a blocking collective with a sequence number: one whose instance other ranks' match (what a
 * rank's helper threads contribute to its synchronizing calls) */
static inline int an_numbered_coll(const struct ev *e)
{
	return e->seq >= 0 && an_blocking_coll(e);
}

static inline int an_exit_aligns(const struct ev *e)
{
	return an_numbered_coll(e) && ((an_kind(e->kind)->m & DDPSPY_KM_EXIT_ALIGNS) || an_op_is(e, DDPSPY_OPF_SYM));
}

static inline int an_is_file_read(const struct ev *e)
{
	return (an_kind(e->kind)->m & DDPSPY_KM_READS) && e->fdclass == DDPSPY_FD_FILE;
}

/* The trace reader's event as the analysis sees it (v->path -1: the caller's); 0 for records that
 * are not calls (a thread's start, exit, name). Inline too: the two readings call it for every
 * event. */
/* e's argument at position i, or def when it has none there */
static inline int64_t an_arg(const struct trace_event *e, int i, int64_t def)
{
	return i >= 0 && i < e->nargs ? e->args[i] : def;
}

static inline int an_convert(const struct trace_event *e, struct ev *v)
{
	const struct kind *k = an_kind(e->kind);
	if (DDPSPY_KM_CAT(k->m) == DDPSPY_CAT_NONE)
		return 0;
	v->t = e->t_ns;
	v->d = e->dur_ns;
	v->kind = (int16_t)e->kind;
	v->bytes = an_arg(e, k->bytes, -1);
	v->seq = (int32_t)an_arg(e, k->seq, -1);
	v->fd = (int32_t)an_arg(e, k->fd, -1);
	v->fdclass = (int8_t)an_arg(e, k->fdclass, 0);
	v->op = k->begin >= 0 ? (int8_t)(an_arg(e, k->begin, 0) != 0) : (int8_t)an_arg(e, k->op, -1); /* markers: 1 begin */
	/* one sequence space per operation where there is no communicator */
	v->comm = k->m & DDPSPY_KM_SEQ_PER_OP ? -2 - v->op : (int32_t)an_arg(e, k->comm, 0);
	v->path = -1;
	v->peer = v->tag = v->rpeer = v->rtag = v->rseq = -1;
	if (an_nccl_p2p(v))
		v->peer = (int32_t)an_arg(e, k->peer, -1);
	if (k->m & DDPSPY_KM_P2P) {
		v->peer = (int32_t)an_arg(e, k->peer, -1);
		v->tag = (int32_t)an_arg(e, k->tag, -1);
		if (v->op == DDPSPY_OP_SENDRECV) {
			v->rpeer = (int32_t)an_arg(e, k->rpeer, -1);
			v->rtag = (int32_t)an_arg(e, k->rtag, -1);
			return 1;
		}
	}
	if (k->m & (DDPSPY_KM_P2P | DDPSPY_KM_WAITS | DDPSPY_KM_NONBLOCKING)) {
		uint64_t q = (uint64_t)an_arg(e, k->req, 0);
		v->req = (uint32_t)(q ^ (q >> 32));
		v->count = (int32_t)an_arg(e, k->count, 1);
	}
	return 1;
}

/* ---- stats.c ---- */

double an_quantile(double *v, size_t n, double q); /* sorts v */
double an_quantile_select(double *v, size_t n, double q); /* the same, without sorting v (reorders it) */
int an_cmp_i64(const void *x, const void *y);
int an_cmp_evp(const void *x, const void *y); /* struct ev pointers by start time */

/* an instance's (comm, seq) as one number, comm << 32 | seq */
static inline int64_t an_inst_key(int comm, int seq)
{
	return (int64_t)((uint64_t)(uint32_t)comm << 32 | (uint32_t)seq);
}

/* one collective instance, (comm, seq), over all ranks */
struct inst {
	int64_t key;          /* comm << 32 | seq; 0 free (seq 0 of comm 0 is stored as key -1) */
	int64_t min_arr, max_arr;
	int late;             /* the rank that arrived last */
	int n, op;
	int64_t bytes;
	double wait_sum;      /* ms all ranks waited for the last arrival */
	int prev_cat;         /* on the late rank: what it did right before arriving */
	int64_t prev_gap;     /* ns between that and its arrival */
};

struct itab {
	struct inst *v;
	size_t cap, n;
};

/* the instance of (comm, seq), created when asked; NULL when absent or out of memory */
struct inst *an_inst_get(struct itab *t, int comm, int seq, int create);

/* ---- model.c: what every phase uses of the job's model (it calls no phase) ---- */

void an_warn(struct analysis *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
struct thr *an_train_thread(const struct proc *p);
/* the report's test-only knobs (docs/testing.md): a knob's value from the environment (a positive
 * number; PROGRESS_S also 0), or def when it is not set or not such a number */
enum an_knob {
	AN_KNOB_PREFIX, AN_KNOB_SAMPLE, AN_KNOB_SPREAD, AN_KNOB_GPU_KEEP, AN_KNOB_SWEEPS, AN_KNOB_PROGRESS_S, AN_KNOB_COUNT
};
double an_knob(enum an_knob k, double def);
/* the steps sampled per rank of a job of nranks */
size_t an_sample_max(size_t nranks);
/* rank r waited ms in step k for late rank L, p2p_ms of it on its device in sends and receives
 * (struct wfrom; entries of one step together, in time order, then an_wf_sort); rank r's waits for
 * late ranks in step k: *n entries from the one returned; its wait for L in step k */
struct stepdata;
struct wfrom;
void an_wf_add(struct stepdata *sd, int r, size_t k, int L, double ms, double p2p_ms);
void an_wf_sort(struct stepdata *sd, int r);
const struct wfrom *an_wfrom_step(const struct stepdata *sd, int r, size_t k, size_t *n);
double an_wfrom(const struct stepdata *sd, int r, size_t k, int L);

/* ---- load.c, and beside it runs.c, stream.c ---- */

/* every file under a->dirs into a->procs, and a->ranks; -1 when no rank is readable (err says why) */
int an_load(struct analysis *a, const struct report_options *o, char *err, size_t errlen);
void an_load_free(struct analysis *a);
/* (hostsite.c) e (v converted), a call of p's, into p's host call sites when it is one; at the
 * end of p's file (f still open) their stacks' frames, and the sites by time. an_frames: stack's
 * frames in f, innermost first, as "module+0xoffset", at most max; how many */
void an_hsite_add(struct proc *p, const struct trace_event *e, const struct ev *v);
void an_hsite_loaded(struct proc *p, const struct trace_file *f);
/* the main thread's calls as read (an_psite_call), to tell its Python samples taken in them; a
 * sample (an_psite_add: own-clock time, stack, its period) into p->psite when not in one, once
 * the thread's events have passed its time (hostsite.c) */
void an_psite_call(struct proc *p, const struct trace_file *f, int tid, const struct ev *v);
/* stack's Python frames and site into ps (own_code: the program's own line, not an installed
 * package's); its frame count, 0 none. an_same_pysite: the same place in the code */
int an_pysite(const struct trace_file *f, uint32_t stack, int own_code, struct pysite *ps);
int an_same_pysite(const struct pysite *x, const struct pysite *y);
void an_psite_add(struct proc *p, const struct trace_file *f, int64_t t, uint32_t stack, double ms);
/* a sample of the main thread's native stack on a CPU (2.13; an_psite_add's arguments) into
 * p->psite, by the function of its innermost frame outside the system's libraries, when not in a
 * recorded call: a process whose Python frames are not read gets its compute's sites so */
void an_csite_add(struct proc *p, const struct trace_file *f, int64_t t, uint32_t stack, double ms);
int an_frames(const struct trace_file *f, uint32_t stack, char (*frames)[112], int max);
/* (ranges.c) e, an "nvtx" event of p's, into p's NVTX ranges; the innermost range open on thread
 * tid now (an_range_now) or on the main thread at t (an_range_at), "" none; a call v of tid's
 * into the time of the range it runs in (an_range_call); at the end of p's file, the ranges by time */
void an_range_event(struct proc *p, const struct trace_event *e);
const char *an_range_now(struct proc *p, int tid);
const char *an_range_at(struct proc *p, int64_t t);
void an_range_call(struct proc *p, int tid, const struct ev *v);
void an_range_loaded(struct proc *p);
/* the index in p->range of thread tid's range of that domain and name, p->nrange when none */
int an_range_find(const struct proc *p, int tid, const char *domain, const char *name);
/* the key of a range's domain and name, as proc.nvmark's */
uint64_t an_range_key(const char *domain, const char *name);
/* (findphase.c) a range's time (and calls) per analysed step of rank index r; rank r's training
 * thread's ranges, the most time first, at most max; how many */
double an_range_ms(const struct analysis *a, int r, const struct nvrange *g, double *calls);
int an_train_ranges(const struct analysis *a, int r, const struct nvrange **out, int max);
/* (inflight.c) a call in flight c of p's file f into p->hang; e (v converted: NULL for records
 * that are no call), an event of p's, ending one or moving its collectives on; at the end of the
 * file, how it ended */
struct trace_inflight;
void an_stuck_add(struct proc *p, const struct trace_file *f, const struct trace_inflight *c);
void an_stuck_event(struct proc *p, const struct trace_event *e, const struct ev *v);
void an_stuck_loaded(struct proc *p, const struct trace_file *f);
/* (inflight.c) p's file was written at t (a "sched" record, one a flush): its process was alive */
void an_stuck_alive(struct proc *p, int64_t t);
/* (runs.c) t's runs given up (analysis.h's struct callrun): its calls are read again for the split */
void an_runs_drop(struct thr *t);
/* v, a call of t that is not kept, into t's current run; the run closed (a kept call comes: t->n is
 * its index) */
void an_run_add(struct thr *t, const struct ev *v);
void an_run_close(struct thr *t);
/* whether e, a call of p's thread u, is one of the rank's synchronizing calls: the training
 * thread's collectives and completing waits, or, when they run on helper threads (p->bg), those
 * threads' blocking collectives */
int an_rank_sync(const struct proc *p, const struct thr *u, const struct ev *e);
/* (stream.c) The second pass over a rank's file: every event of its training thread again, in order, times
 * aligned like the kept ones (an_stream_thread's, moved), handed to fn (non-zero stops). -1 when
 * the file cannot be read. */
int an_stream_train(const struct proc *p, int (*fn)(void *ctx, const struct ev *e), void *ctx);
/* Thread h of p again, its events converted (times on its own clock) and its point-to-point calls
 * numbered as while loading; want (the caller's, which fn may change between events) says which
 * kinds are converted, the others parsed past. an_stream_file: thread t of the file at path, its
 * clock, the bytes verified already and its span as trace_cursor_open takes them (while the file
 * is read) */
int an_stream_thread(const struct proc *p, int h, const uint8_t *want, int (*fn)(void *ctx, const struct ev *e),
		     void *ctx);
struct trace_clock;
int an_stream_file(const char *path, const struct trace_clock *clock, size_t verified, const struct trace_span *span,
		   const struct thr *t, const uint8_t *want, int (*fn)(void *ctx, const struct ev *e), void *ctx);
/* ---- The parts that read along while a file is read, and travel with a process's record under
 * report --mpi: one table, an_parts (model.c), each part's entries filled by its own file when the
 * program starts (model.c's do-nothing ones stand till then), so that loading, the process record
 * and the --mpi exchange never call a part by name.
 * sweep (lsweep.c): a long trace's steps' sweep begun once thread h's calls overflow its prefix
 * (NULL: not begun), the thread's later events given to it, its end; a thread's sampled runs
 * (struct sruns) freed.
 * gpu (gpu.c): a CUPTI record of p's file (f: its string table; keep: the records p may hold) and
 * its host events of the kinds the device part reads (v: converted; NULL for NCCL's plugin's
 * kernels, which are no call), non-zero when out of memory; p's file read (its stacks resolved
 * before f is closed); p's device records as bytes and back (!whole: its NCCL kernels only; -1:
 * damaged); set aside while the record travels and given back (p NULL: freed); freed.
 * cpu (cpu.c): a thread's CPU sample. ---- */
struct trace_file;
struct trace_event;
struct trace_sched;
struct sruns;
struct gpuproc;
struct an_buf;
struct an_rd;
struct an_parts {
	struct {
		struct sweep *(*start)(const struct analysis *a, struct proc *p, int h, struct trace_file *f,
				       const char *path, size_t prefix);
		void (*event)(struct sweep *w, const struct ev *v);
		int (*end)(struct sweep *w, int complete);
		void (*free)(struct sweep *w);
		void (*sruns_free)(struct sruns *sr);
	} sweep;
	struct {
		int (*record)(struct proc *p, const struct trace_file *f, const struct trace_event *e, size_t keep);
		int (*host)(struct proc *p, const struct trace_event *e, const struct ev *v);
		void (*loaded)(struct proc *p, const struct trace_file *f, const char *path);
		void (*pack)(struct an_buf *b, const struct proc *p, int whole);
		int (*unpack)(struct an_rd *r, struct proc *p);
		struct gpuproc *(*take)(struct proc *p);
		void (*give)(struct proc *p, struct gpuproc *g);
		void (*free)(struct proc *p);
	} gpu;
	struct {
		void (*sample)(struct thr *t, const struct trace_sched *s);
	} cpu;
};
extern struct an_parts an_parts;
struct sweep *an_lsweep_start(const struct analysis *a, struct proc *p, int h, struct trace_file *f,
			      const char *path, size_t prefix);
void an_lsweep_event(struct sweep *w, const struct ev *v);
int an_lsweep_end(struct sweep *w, int complete);
void an_lsweep_free(struct sweep *w);

/* every synchronizing call of p again, from all its threads, in time order, times on p's own clock */
int an_stream_sync(const struct proc *p, int (*fn)(void *ctx, int thr, const struct ev *e), void *ctx);
double an_read_bytes(const struct proc *p, int64_t t0, int64_t t1);

/* splitmix64's finalizer: the samples' hash (the clocks' spread, the steps' sample) */
static inline uint64_t an_mix64(uint64_t h)
{
	h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9ull;
	h = (h ^ (h >> 27)) * 0x94d049bb133111ebull;
	return h ^ (h >> 31);
}

/* a level: the trailing zeros of hash h (64 for 0) */
static inline unsigned an_level(uint64_t h)
{
	return h ? (unsigned)__builtin_ctzll(h) : 64;
}

/* The nonblocking collectives a thread posted (with a request) and no wait completed yet, the
 * latest AN_POSTS, as the clocks match a wait to what it completed: a Waitall's count requests
 * were posted in a row from its first (the last posted count, as p2p.c takes them). */
#define AN_POSTS 64
struct an_posts {
	struct ev v[AN_POSTS];
	int n;
};

/* e into p, the oldest let go when p is full */
static inline void an_posts_push(struct an_posts *p, const struct ev *e)
{
	if (p->n == AN_POSTS) {
		memmove(p->v, p->v + 1, (AN_POSTS - 1) * sizeof *p->v);
		p->n--;
	}
	p->v[p->n++] = *e;
}

/* e into p when it is such a post: 1, else 0 */
static inline int an_post(struct an_posts *p, const struct ev *e)
{
	unsigned m = an_kind(e->kind)->m;
	if (!(m & DDPSPY_KM_NONBLOCKING) || (m & DDPSPY_KM_ENQUEUES) || e->seq < 0 || !e->req)
		return 0;
	an_posts_push(p, e);
	return 1;
}

/* The posts that e, when a completing wait, completed: [*i, *last) of p, removed from p by the
 * caller (an_posts_done); 0 when none (a wait whose request a test completed already) */
static inline int an_posts_of(const struct an_posts *p, const struct ev *e, int *i, int *last)
{
	if (!an_completes(e) || !e->req)
		return 0;
	int k = p->n - 1;
	while (k >= 0 && p->v[k].req != e->req)
		k--;
	if (k < 0)
		return 0;
	int c = e->count > 1 ? e->count : 1; /* (a hostile count: no k + c overflow) */
	*i = k;
	*last = c < p->n - k ? k + c : p->n;
	return 1;
}

static inline void an_posts_done(struct an_posts *p, int i, int last)
{
	memmove(p->v + i, p->v + last, (size_t)(p->n - last) * sizeof *p->v);
	p->n -= last - i;
}

/* The nonblocking point-to-point operations that wait e completed, as p2p.c matches them: of n
 * pending in the order they were posted, req(ctx, k) the k-th's request, e's count of them from
 * the last count posted when the first of those has e's request (MPI_Waitall over this
 * iteration's requests, whatever is left from earlier), else from the latest with it on:
 * [*from, *to), 0 when none has it. */
static inline int an_p2p_completed(size_t n, uint32_t (*req)(const void *ctx, size_t k), const void *ctx,
				   const struct ev *e, size_t *from, size_t *to)
{
	size_t c = e->count > 0 ? (size_t)e->count : 1, f = SIZE_MAX;
	if (c <= n && req(ctx, n - c) == e->req)
		f = n - c;
	for (size_t j = n; f == SIZE_MAX && j-- > 0;)
		if (req(ctx, j) == e->req)
			f = j;
	if (f == SIZE_MAX)
		return 0;
	*from = f;
	*to = f + c < n ? f + c : n;
	return 1;
}

/* The clocks' spread (spread.c, kept while loading): beyond the prefix, a thread's collectives that every rank leaves
 * together, and its completed posts with their wait, are kept where the hash of their instance's
 * block of SPREAD_BLOCK has at least spk trailing zeros (its level): the same instances on every
 * rank, fewer as the trace grows (at most a->spread calls a thread), so that the clocks see the
 * whole job, not its first minutes. Its messages likewise (an_msg_level): blocking sends and
 * receives, and nonblocking ones with the wait that completed them (as p2p.c matches them). */
#define SPREAD_BLOCK 4
static inline unsigned an_spread_level(const struct ev *e)
{
	return an_level(an_mix64((uint64_t)an_inst_key(e->comm, e->seq / SPREAD_BLOCK) + 0x9e3779b97f4a7c15ull));
}
/* a call on its thread's own clock (the spread's, a long trace's streamed ones) on the job's
 * clock, its end moved with it as the clocks move the kept calls */
static inline struct ev an_job_ev(const struct proc *p, const struct ev *e)
{
	struct ev v = *e;
	v.t = an_job_time(p, e->t);
	v.d = an_job_time(p, e->t + e->d) - v.t;
	return v;
}

/* every thread's spread let go (once the clocks are aligned) */
void an_spread_free(struct analysis *a);
/* v, a synchronizing call of p's thread t beyond its prefix, kept in its spread when its level
 * says so (at most max a thread); one thread's spread let go */
void an_spread_add(const struct proc *p, struct thr *t, const struct ev *v, size_t max);
/* the prefix's pending posts, before t's first call beyond it */
void an_spread_seed(const struct proc *p, struct thr *t);
void an_spread_drop(struct thr *t);

/* ---- clocks.c ---- */

void an_align_clocks(struct analysis *a);
/* after the verdict (its summary names the first warning): a warning when nothing checked the
 * ranks' clocks against each other */
void an_clock_warning(struct analysis *a);
void an_wall_time(struct analysis *a);  /* a->wall_s, on the aligned clock */

/* ---- steps.c and split.c: what they leave for the findings (a->sd) ---- */

/* what the findings need from every event of a rank's training thread in the analysed steps,
 * folded as the split streams them */
struct pat {
	int kind, fdclass;
	int64_t bytes;
	double calls, ms; /* ms: from ns once the rank is split (whole numbers sum alike in any order) */
	int64_t ns;
};
#define MAX_PATS 32
/* the pattern input call e counts under: file reads by size; waits on pipes and sockets are one
 * pattern whatever they read */
static inline int64_t an_pat_bytes(const struct ev *e)
{
	return an_is_file_read(e) ? e->bytes : 0;
}

/* the index in v[0, n) of the pattern of kind, fdclass and bytes, n when none */
static inline size_t an_pat_find(const struct pat *v, size_t n, int kind, int fdclass, int64_t bytes)
{
	size_t j = 0;
	while (j < n && !(v[j].kind == kind && v[j].fdclass == fdclass && v[j].bytes == bytes))
		j++;
	return j;
}
struct trainfold {
	struct pat pats[MAX_PATS]; /* input calls by pattern (kind, descriptor class, file-read size) */
	int np, last;              /* last: the pattern of the latest input call */
	double runs, run_bytes, run_ms; /* blocking all-reduces run back to back */
	double icoll;              /* nonblocking collectives */
};

/* rank r waited ms for late rank L in step k: few per rank and step, so a list per rank, sorted
 * by step and late rank (a dense ranks x steps x ranks table is gigabytes at 512 ranks) */
struct wfrom {
	uint32_t k;
	int32_t L;
	double ms;
	double p2p_ms;         /* of ms, a device's in NCCL sends and receives (a pipeline's stages) */
};

/* a blocking point-to-point call (a blocking send or receive, MPI_Sendrecv, or a wait that
 * completed nonblocking ones) and its wait for a late peer (p2p.c) */
struct an_p2pblk {
	int64_t t, d;          /* the call, on the job's clock */
	int L;                 /* the late peer (index in a->ranks), -1 none */
	int64_t wait;          /* ns it waited for L */
	int late_sender;       /* 1: for L's send (late sender); 0: for L's receive (late receiver) */
	int64_t post;          /* when L posted that send or receive */
	int root;              /* L was late because it waited itself, for root (-1 none) ... */
	int64_t wroot;         /* ... and so much of the wait is root's (the rest L's) */
	int16_t kind;
	int8_t op;
	int r;                 /* the rank that made it */
};

struct stepdata {
	/* steps.c: the analysed steps kept (a->ranks[r].steps has K of them) */
	size_t K;
	size_t *gidx;   /* each kept step's index among the analysed steps (k when all are kept) */
	struct span {   /* per rank: all of its analysed steps, kept or not */
		int64_t t0, t1;
		double n;       /* how many */
		double max_ms;  /* the longest (0: taken from the kept ones) */
	} *span;
	/* split.c */
	int R;
	struct wfrom **wf; /* per rank */
	size_t *nwf, *cwf;
	double *exc;    /* [(k * R + L) * CAT_COUNT + c]: L's excess over the median of its peers */
	struct itab tab;
	double **late;  /* per rank: lateness of each collective it entered (ms) */
	size_t *nlate;
	struct trainfold *fold; /* per rank */
	struct hostlanes **lanes; /* per rank with device work: its training thread's waits (gpu.c) */
	struct waitadds {         /* per rank: what its device split (or NCCL's profiler plugin's kernels)
				   * adds to host instances' waits */
		struct waitadd {
			size_t in;        /* the instance (tab.v's index) */
			double ms;
		} *v;
		size_t n, cap;
	} *gadd;
	/* p2p.c: every rank's blocking point-to-point calls, rank r's from pbo[r] to pbo[r + 1], in
	 * time order */
	struct an_p2pblk *pblk;
	size_t npblk, *pbo;
	/* split.c, from them: per late rank L, the ms others waited for it in the analysed steps
	 * ([2 * L + late_sender]) and by the operation they waited in ([L * DDPSPY_OP_COUNT + op]);
	 * how late L was each time it was waited for (its send or receive posted after the peer
	 * blocked for it), with the collectives' lateness in late[L] */
	double *p2pL, *p2pop;
	struct dvec { double *v; size_t n, cap; } *plate;
};

/* The state of a training thread's nonblocking posts as the split follows them (split.c), which
 * a long trace's sweep (sweep.c) follows too without the instances (tab NULL) */
struct wait_ctx {
	struct itab *tab;
	int rank;
	int64_t pend_seq[64];
	int pend_comm[64];
	uint64_t pend_ord[64];
	int npend;
	/* the latest nonblocking posts, collectives and point-to-point: request, and order among all */
	uint32_t post_req[64];
	uint64_t nposts;
};
/* how long e (a collective or point-to-point call) waited for the last peer, and which instance
 * released it; w follows the posts */
double an_wait_of(struct wait_ctx *w, const struct ev *e, struct inst **rel);
/* w's posts and pending collectives kept (malloc'ed, NULL when out of memory), and back into w */
struct wsnap *an_wait_save(const struct wait_ctx *w);
void an_wait_load(struct wait_ctx *w, const struct wsnap *s);

/* A long trace's training thread, as its sweep (sweepcore.c) keeps it for the split: the calls of each
 * sampled block of steps with the runs between them (acc: ev, run, rpat as load.c keeps a
 * thread's prefix; times on the thread's own clock), so that the split need not read the thread
 * again. A block's calls begin with the call that ended the step before it and end with the
 * event after its last step's last call (what the split takes for the steps' edges), and it
 * carries the split's wait state from just before its first call. */
struct sblock {
	size_t blk;            /* its steps are blk * SAMPLE_BLOCK on (sweepcore.c) */
	size_t c0, c1, r0, r1; /* its calls acc.ev[c0, c1), runs acc.run[r0, r1) */
	int has_next;          /* its last call is the event after its last step */
	struct wsnap *w;       /* the split's wait state before its first call (split.c) */
};
struct sruns {
	struct thr acc;
	size_t *kept;          /* per call of acc.ev: the step it is kept for as the rank's own (the
	                        * sweep's kept calls, not copied), SIZE_MAX none */
	size_t id, app_id, app; /* the stream's event count; the latest event taken as a call, and where */
	struct sblock *b;
	size_t nb, cb;
	struct wait_ctx mirror; /* every post and wait of the thread followed as the split would */
	int ok;                /* 0: given up (the rank is swept again without blocks: sweep.c) */
};
void an_sruns_free(struct sruns *sr);

/* steps.c: a->sd, the boundaries in a->ranks[].steps, the step counts and source */
void an_find_steps(struct analysis *a);
void an_steps_free(struct analysis *a);

/* split.c: the steps' splits, waits, critical path, per-rank and job figures */
void an_split_steps(struct analysis *a);
void an_split_free(struct analysis *a);

/* ---- gpu.c (gpujoin.c, ncclplug.c): a GPU job's device records; gpustep.c: its device's steps ----
 * (while loading and under report --mpi: an_parts.gpu) */
/* A rank whose device work was more than its share of memory (keep records: a->gpu_keep, or by
 * the job's size) holds only what the clocks, the collectives and the host's split need of it (its
 * NCCL kernels and large pageable copies) and reads its file again for the rest, one rank at a
 * time: an_gpu_open makes p's whole work there (0, -1 when it cannot be read again), an_gpu_close
 * lets it go (no-ops for a rank that holds it all). */
int an_gpu_open(struct proc *p);
/* whether p has device work (its training thread's split follows it: an_gpu_lanes_new) */
int an_gpu_busy(const struct proc *p);
void an_gpu_close(struct proc *p);
int an_gpu_ranks(const struct analysis *a); /* ranks whose steps an_gpu_split split from their device */
/* p's NCCL kernels' ends on the job's clock so far, by collective (comm, seq): every rank's kernels
 * of one collective end together (clocks.c); *out malloc'ed */
struct gend {
	int32_t comm, seq;
	int64_t start, end;
};
size_t an_gpu_nccl_ends(const struct proc *p, struct gend **out);

/* p's device work (kernels, copies, sets) one at a time, in order of launch, times on the job's
 * clock, for the viewer: -1 past the end */
struct gpuitem {
	int64_t t, d, launch, bytes;
	uint32_t stream, corr;
	int32_t comm, seq;     /* NCCL kernels' collective (comm INT32_MIN: numbered by order) */
	int op, pageable, nccl;
	int plugin;            /* an NCCL kernel NCCL's profiler plugin timed (no stream, no name) */
	const char *cls;       /* "kernel", "copy", "copy_in" (host to device), "nccl" */
};
size_t an_gpu_nwork(const struct proc *p);
int an_gpu_work(const struct proc *p, size_t i, struct gpuitem *it);
/* the i-th work's kernel name (NULL: unknown, or not a kernel); apart, since a search */
const char *an_gpu_work_name(const struct proc *p, size_t i);

/* gpustep.c: after the host split (split.c), before the critical path: the steps of ranks rs[0, n) (those
 * split here) with device work split from the device's timeline instead (report --mpi: every
 * process its own, the job's step bounds through process 0); what they add to the host instances'
 * waits in sd->gadd, for an_gpu_adds, which adds them in rank order (on process 0, once every
 * split is there) */
void an_gpu_split(struct analysis *a, struct stepdata *sd, const size_t *rs, size_t n);
/* gpushard.c: ranks[0, n)'s all-gathers and reduce-scatters on the device into their gpustat's
 * shard (after their device split; tab: every device collective's first and last kernel start) */
void an_gpu_shards(struct analysis *a, const size_t *ranks, size_t n, struct itab *tab);
void an_gpu_adds(struct stepdata *sd);
/* gpucover.c: the warnings of GPU capture off or lossy, after the device split */
void an_gpu_warn(struct analysis *a);
/* The training thread's waits that a device's idle time is charged to, gathered while split.c
 * streams the thread (one reading serves both splits): NULL when p has no device work. */
struct hostlanes;
struct hostlanes *an_gpu_lanes_new(const struct proc *p);
void an_gpu_lanes_event(struct hostlanes *h, const struct ev *e);
void an_gpu_lanes_free(struct hostlanes *h);
/* p's call site i that waited for the device: its event kind's name (NULL: none), frames
 * (innermost first, "module+0xoffset"), time, calls, kind, what (cuda_sync "what", cuda_memcpy
 * "dir"), its Python frames and the NVTX range it waited in ("" none) */
const char *an_gpu_site(const struct proc *p, int i, const char (**frames)[112], int *nframes, double *ms,
			double *calls, int *kind, int *what, const struct pysite **py, const char **range);

/* ---- p2p.c: point-to-point wait states ----
 * an_p2p_number: while reading a thread's calls in order, number its point-to-point ones (seq,
 * and rseq for a Sendrecv's receive; NCCL's send and recv: order) by (comm, peer, tag,
 * direction), *t the thread's table (made on first use; an_p2p_num_free). an_p2p_match: after the steps are found, every rank's
 * blocking point-to-point calls and their waits for late peers into sd. */
struct p2pnum;
void an_p2p_number(struct p2pnum **t, struct ev *v);
void an_p2p_num_free(struct p2pnum *t);
/* a nonblocking wildcard receive's status (an mpi_status event): its number, -1 when it cannot be
 * resolved (recv_order in p2p.c); the caller sets the receive's peer, tag and seq */
int32_t an_p2p_resolve(struct p2pnum *t, uint32_t req, int32_t src, int32_t tag);
/* how the thread's wildcard receives were resolved, by their order: taken from t (the thread's to
 * free), and given to a second reading's numbering, which resolves them alike */
void an_p2p_num_res(struct p2pnum *t, struct an_wres **res, size_t *n);
void an_p2p_num_replay(struct p2pnum **t, const struct an_wres *res, size_t n);
/* the thread's receives with a wildcard not resolved (nonblocking) and the receives left unmatched
 * after them, added to *wilds and *after */
void an_p2p_num_wild(const struct p2pnum *t, uint64_t *wilds, uint64_t *after);
void an_p2p_match(struct analysis *a, struct stepdata *sd);
int an_comm_rank(const struct proc *p, int32_t comm); /* p's rank in comm (its mpi_comm event), -1 unknown */
/* the messages of p's point-to-point call e: its send or receive, both for a Sendrecv, keyed alike on
 * both ends (src, dst: ranks in comm; seq -1 where it cannot be matched); returns how many */
struct an_p2pmsg {
	int32_t comm, src, dst, tag, seq;
	int send;
};
int an_p2p_msgs(const struct proc *p, const struct ev *e, struct an_p2pmsg m[2]);
/* a message's level in the clocks' spread (an_spread_level's, by its block of SPREAD_BLOCK in
 * the order of its (comm, src, dst, tag)) */
static inline unsigned an_msg_level(const struct an_p2pmsg *m)
{
	uint64_t h = an_mix64(((uint64_t)(uint32_t)m->src << 32 | (uint32_t)m->dst) + 0x9e3779b97f4a7c15ull);
	h = an_mix64(h ^ ((uint64_t)(uint32_t)m->comm << 32 | (uint32_t)m->tag));
	return an_level(an_mix64(h + (uint64_t)(m->seq / SPREAD_BLOCK)));
}
/* every message matched whose receive completed in a call that blocked for it (a blocking receive,
 * MPI_Sendrecv, the wait that completed an Irecv): its sender s and when s posted the send, its
 * receiver r and when that call returned, on their clocks as they stand (clocks.c: r had it only
 * after s sent it). *out is malloc'ed (NULL when out of memory); returns how many. */
struct an_msg {
	int s, r;
	int64_t sent, recvd;
};
size_t an_p2p_messages(struct analysis *a, struct an_msg **out);

/* base's n elements of size bytes sorted by cmp, quickly when they are nearly in order already;
 * not stable: cmp must order any two elements that differ (stats.c) */
void an_sort_near(void *base, size_t n, size_t size, int (*cmp)(const void *, const void *));
/* base's first n1 and the n - n1 after them, each in order, merged into one */
void an_merge(void *base, size_t n1, size_t n, size_t size, int (*cmp)(const void *, const void *));

/* ---- par.c: the report's independent pieces of work on several threads (-j), the progress line ----
 * an_parallel: fn(ctx, i) for every i < n (order[k] the k-th taken, NULL: in turn) on jobs threads,
 * this one among them; returns when all are done. an_progress_*: a phase of items (files, ranks)
 * of so many bytes, its line on stderr when that is a terminal and the phase takes over a second;
 * an_progress_add is safe from any thread. */
int an_jobs_default(void); /* the CPUs this process may use */
void an_parallel(size_t n, int jobs, const size_t *order, void (*fn)(void *ctx, size_t i), void *ctx);
struct an_progress {
	const char *what;
	size_t items, done;
	uint64_t bytes, done_bytes, events;
	double t0, last, after;
	int tty, shown;
	pthread_mutex_t mu;
};
void an_progress_start(struct an_progress *g, const char *what, size_t items, uint64_t bytes);
void an_progress_add(struct an_progress *g, uint64_t bytes, uint64_t events);
void an_progress_end(struct an_progress *g);
/* records as bytes for another process (report --mpi): an_put* append (b->err once out of
 * memory); an_get* read back in the same order (r->err, and zeros, once past the end);
 * an_get_arr: n items of size bytes into a new array with room for at least room of them (NULL
 * for none) */
struct an_buf {
	char *p;
	size_t n, cap;
	int err;
};
struct an_rd {
	const char *p, *end;
	int err;
};
void an_put(struct an_buf *b, const void *x, size_t n);
void an_put_str(struct an_buf *b, const char *s);
int an_get(struct an_rd *r, void *x, size_t n);
char *an_get_str(struct an_rd *r);
void *an_get_arr(struct an_rd *r, size_t n, size_t size, size_t room);
/* mpijob.c: report --mpi's processes (Open MPI, loaded at run time): an_mpi_start (NULL and a
 * reason when there is no MPI job to join), an_mpi_end (MPI_Finalize); process 0 sends b to all
 * (an_mpi_bcast: b is replaced elsewhere), the others send to process 0 (an_mpi_send, an_mpi_recv) */
struct an_mpi *an_mpi_start(char *err, size_t errlen);
/* whether this process reads and splits rank r (always, without --mpi) */
int an_mine(const struct analysis *a, int r);
void an_mpi_end(struct an_mpi *m);
void an_mpi_abort(struct an_mpi *m); /* MPI_Abort: every process ends */
int an_mpi_me(const struct an_mpi *m);
int an_mpi_np(const struct an_mpi *m);
int an_mpi_bcast(struct an_mpi *m, struct an_buf *b);
int an_mpi_send(struct an_mpi *m, const struct an_buf *b);
int an_mpi_recv(struct an_mpi *m, int src, struct an_buf *b);
/* proc.c: a process record as bytes, and back (-1: damaged; free what was read with the rest);
 * everything it holds freed */
void an_proc_free(struct proc *p);
void an_pack_proc(struct an_buf *b, const struct proc *p, int whole); /* !whole: an_parts.gpu.pack's */
int an_unpack_proc(struct an_rd *r, struct proc *p);

/* ---- cpu.c: CPU time and contention, from the threads' schedstat ---- */
#define MAX_SCHED 2048 /* samples kept per thread: past that, every other one, and half as often */
void an_cpu(struct analysis *a);                                /* after the split: a->ranks[].cpu */

/* ---- findings.c: the findings, sorted by severity ---- */

void an_find_all(struct analysis *a);

/* ---- verdict.c: a->bound, confidence and summary ---- */

void an_verdict(struct analysis *a);

#endif
