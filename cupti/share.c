/* CUPTI shared with another client in the process: torch.profiler's Kineto, or any tool that calls
 * CUPTI through its exported symbols (docs/gpu.md, "Sharing CUPTI").
 *
 * CUPTI has one subscriber, one pair of buffer callbacks and one timestamp callback a process. A
 * client that links libcupti (Kineto, through libtorch) reaches these definitions first, since
 * libddpspy.so is preloaded; ddpspy then keeps the real subscription and stands in for CUPTI:
 * - the client's subscriber is a stand-in handle: its callback ids are enabled on ddpspy's
 *   subscriber, and each callback that comes is passed on to it;
 * - its activity kinds are enabled on the real CUPTI where ddpspy does not record them already,
 *   and disabled again only where ddpspy does not want them; its API records (the RUNTIME and
 *   DRIVER kinds, their callback ids) are copies of the calls ddpspy records, and no further call
 *   is turned on for it: on an H200 that stopped CUPTI's API and synchronization records for the
 *   whole process (api_limited, below; docs/gpu.md);
 * - every record of a buffer CUPTI completes into ddpspy's callback is copied into the client's
 *   own buffers (its buffer-requested callback) when the client had that kind on when the work was
 *   launched (an API call's start; device work: its launching call's start when that record was
 *   seen, else its own start), with its times put on the client's clock (its timestamp callback,
 *   else CUPTI's default, CLOCK_REALTIME: cupti_activity.h), and completed to it when full or when
 *   it flushes;
 * - while the client has a kind on, one of its buffers is out, as with the real CUPTI, whose
 *   records wait in the client's buffers: Kineto takes no GPU records at all when it has none out
 *   at its stop (CuptiActivityApi::activityBuffers), and ddpspy's own buffers come back late;
 * - the client's forced flush while it has a kind on is a default one for the real CUPTI, which
 *   would otherwise hand ddpspy the work still running with no times, once (cupti_activity.h,
 *   cuptiActivityFlushAll); the records of that work are not the client's afterwards, as its
 *   forced flush would have given it them untimed. With no kind on it ends the client's session
 *   and is passed on forced, so that the client gets its window now (flush_for_client);
 * - the client's cuptiFinalize ends the client's part only (its kinds, callbacks and subscriber),
 *   never ddpspy's capture;
 * - the client's thread id type is its own: the real CUPTI keeps the default (the low 32 bits of
 *   pthread_self(), which the file's thread records carry), and a client that asked for system
 *   ids (gettid) gets them in its copies, looked up among the threads ddpspy knows;
 * - the deprecated cuptiActivityFlush is the client's flush, cuptiActivityEnableAndDump its
 *   cuptiActivityEnable: passed on as they came, they would reach the real CUPTI past the client's
 *   part (its buffer never completed to it, its kinds never known).
 * Kinds whose times ddpspy cannot put on the client's clock are refused to it
 * (CUPTI_ERROR_NOT_SUPPORTED) and counted. Where ddpspy does not hold CUPTI (it is off, CUPTI was
 * taken first, no usable library) every call goes to the real CUPTI as it came. ddpspy's own calls
 * go to the real library through its handle, never through these. */
#include "../preload/internal.h"
#include "gpu.h"
#include "cupti_int.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#define C dsp_cupti
#define HIST 256     /* the client's changes of kinds remembered, for records delivered late */
#define LAUNCHES 4096 /* recent API calls' starts by correlation id: when device work was launched */
#define CUTS 16       /* the client's recent forced flushes */

/* CUDA 12's records put these times where CUDA 13's do (gpu.c checks the other fields) */
_Static_assert(offsetof(CUpti_ActivityKernel9, completed) == offsetof(CUpti_ActivityKernel10, completed) &&
		       offsetof(CUpti_ActivityKernel9, queued) == offsetof(CUpti_ActivityKernel10, queued) &&
		       offsetof(CUpti_ActivityKernel9, submitted) == offsetof(CUpti_ActivityKernel10, submitted) &&
		       offsetof(CUpti_ActivityOverhead2, start) == offsetof(CUpti_ActivityOverhead3, start) &&
		       offsetof(CUpti_ActivityOverhead2, end) == offsetof(CUpti_ActivityOverhead3, end),
	       "a time field moved between CUDA 12's and 13's records");

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;     /* S's state */
static pthread_mutex_t fan_lock = PTHREAD_MUTEX_INITIALIZER; /* the copying into the client's buffers */
static struct {
	int on;                  /* the client has called while ddpspy holds CUPTI */
	CUpti_SubscriberHandle real; /* ddpspy's subscriber */
	char name[64];           /* the client's name (cuptiSubscribe_v2), "" unnamed */
	int subscribed;
	CUpti_CallbackFunc cb;
	void *ud;
	CUpti_BuffersCallbackRequestFunc req;
	CUpti_BuffersCallbackCompleteFunc comp;
	CUpti_TimestampCallbackFunc ts; /* the client's clock; NULL: CLOCK_REALTIME */
	uint64_t kinds;          /* CUpti_ActivityKind bits the client has on */
	int8_t rt[CUPTI_RUNTIME_TRACE_CBID_SIZE], drv[CUPTI_DRIVER_TRACE_CBID_SIZE]; /* 1 on, -1 off, 0 the kind's */
	int all_sync;            /* cuptiActivityEnableAllSyncRecords, as the client set it (CUPTI's default: 1) */
	int real_sync;           /* as the real CUPTI has it: ddpspy's 0 unless the client's records need 1 */
	struct { uint64_t t, kinds; } hist[HIST]; /* its kinds from t on (ddpspy's clock) */
	int nhist;
	uint8_t *buf;            /* the client's buffer being filled */
	size_t size, used;
	uint64_t records, dropped, unread, refused, changes;
	uint64_t limited;        /* bits RUNTIME, DRIVER: API kinds it asked for, served with ddpspy's calls */
	CUpti_ActivityThreadIdType tid_type; /* how its records name a thread (cuptiSetThreadIdType) */
	uint64_t tid_unknown;    /* records copied to it whose thread's system id ddpspy did not know */
	uint64_t cut[CUTS];      /* the client's forced flushes (ddpspy's clock); fan_lock */
	int ncut;
} S;
/* recent API records by correlation id: their start (when device work was launched) and call */
static struct {
	uint32_t corr, cbid;
	uint64_t start;
	uint8_t driver;
} launched[LAUNCHES];

static const CUpti_ActivityKind SHAREABLE[] = {
	CUPTI_ACTIVITY_KIND_MEMCPY,	     CUPTI_ACTIVITY_KIND_MEMSET,   CUPTI_ACTIVITY_KIND_KERNEL,
	CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_RUNTIME,  CUPTI_ACTIVITY_KIND_DRIVER,
	CUPTI_ACTIVITY_KIND_SYNCHRONIZATION, CUPTI_ACTIVITY_KIND_OVERHEAD, CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION,
};

static int shareable(CUpti_ActivityKind k)
{
	for (size_t i = 0; i < sizeof SHAREABLE / sizeof *SHAREABLE; i++)
		if (SHAREABLE[i] == k)
			return 1;
	return 0;
}

/* the real function name, when ddpspy has not opened CUPTI: where the client's calls would go */
static void *real(void *have, const char *name)
{
	return have ? have : dsp_resolve(name, "libcupti");
}

#define REAL(fn, name) ((__typeof__(&fn))real(C.handle ? dlsym(C.handle, name) : NULL, name))

static uint64_t mono(void)
{
	return (uint64_t)dsp_mono_ns();
}

/* the client's clock now: its timestamp callback, else CUPTI's default (CLOCK_REALTIME) */
static uint64_t client_now(void)
{
	if (S.ts)
		return S.ts();
	struct timespec t;
	clock_gettime(CLOCK_REALTIME, &t);
	return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* what to add to a time of ddpspy's (CLOCK_MONOTONIC) for the client's clock: both in ns
 * (cupti_activity.h: "The returned timestamp must be in nanoseconds"), the tightest of three */
static int64_t client_offset(void)
{
	uint64_t best = UINT64_MAX;
	int64_t off = 0;
	for (int i = 0; i < 3; i++) {
		uint64_t a = mono(), c = client_now(), b = mono();
		if (b - a < best) {
			best = b - a;
			off = (int64_t)(c - (a + (b - a) / 2));
		}
	}
	return off;
}

/* ---- the client's kinds and calls, and what the real CUPTI is asked for: both sides' ---- */

static void hist_add(void)
{
	if (S.nhist == HIST) { /* (the older half: their records were delivered long since) */
		memmove(S.hist, S.hist + HIST / 2, HIST / 2 * sizeof *S.hist);
		S.nhist = HIST / 2;
	}
	S.hist[S.nhist].t = mono();
	S.hist[S.nhist++].kinds = S.kinds;
}

static uint64_t kinds_at(uint64_t t)
{
	for (int i = S.nhist; i-- > 0;)
		if (S.hist[i].t <= t)
			return S.hist[i].kinds;
	return 0;
}

static int client_api(int driver, uint32_t cbid, uint64_t kinds)
{
	int sel = driver ? (cbid < CUPTI_DRIVER_TRACE_CBID_SIZE ? S.drv[cbid] : 0)
			 : (cbid < CUPTI_RUNTIME_TRACE_CBID_SIZE ? S.rt[cbid] : 0);
	CUpti_ActivityKind k = driver ? CUPTI_ACTIVITY_KIND_DRIVER : CUPTI_ACTIVITY_KIND_RUNTIME;
	return sel ? sel > 0 : (kinds >> k & 1) != 0;
}

/* A client's API kinds and callback ids change nothing in the real CUPTI: it gets copies of the
 * calls ddpspy records (gpu.c's selection), those it asked for. On an H200 with torch.profiler
 * (docs/gpu.md, 2026-11-28), passing its CUDA_DRIVER kind on as every driver call's id but the
 * three it turns off stopped all of the process's API and synchronization records some 270 ms
 * into its window, for the rest of the run, none counted as dropped; passing its runtime kind so
 * lost a sixth of ddpspy's API records; and the kind itself cannot be passed on, as disabling it
 * ends ddpspy's selection by id for good (testapps/cupti_rules). The client asked for kind k's
 * calls: its bit in S.limited where ddpspy records them one by one, none where it records them
 * all (DDPSPY_GPU_API_ALL); under lock. */
static void api_limited(CUpti_ActivityKind k)
{
	uint64_t was = S.limited;
	S.limited |= dsp_cupti_own_kind(k) ? 0 : k == CUPTI_ACTIVITY_KIND_RUNTIME ? 1 : 2;
	S.changes += S.limited != was; /* (the gpu record says it) */
}

/* the records of queries of unfinished work: on in the real CUPTI while the client records
 * synchronizations and has not turned them off itself (ddpspy's reading leaves them out); under lock */
static void apply_sync(void)
{
	int want = (S.kinds >> CUPTI_ACTIVITY_KIND_SYNCHRONIZATION & 1) && S.all_sync;
	if (want != S.real_sync && C.EnableAllSyncRecords && C.EnableAllSyncRecords((uint8_t)want) == CUPTI_SUCCESS)
		S.real_sync = want;
}

/* the client's kind k on or off; under lock */
static CUptiResult set_kind(CUpti_ActivityKind k, int on)
{
	if ((unsigned)k >= 64 || (on && !shareable(k))) {
		S.refused += on;
		S.changes++;
		return CUPTI_ERROR_NOT_SUPPORTED;
	}
	CUptiResult r = CUPTI_SUCCESS;
	int api = k == CUPTI_ACTIVITY_KIND_RUNTIME || k == CUPTI_ACTIVITY_KIND_DRIVER;
	if (api) { /* (the kind's on or off overrides the callback ids' own choices: cupti_activity.h) */
		memset(k == CUPTI_ACTIVITY_KIND_RUNTIME ? S.rt : S.drv, 0,
		       k == CUPTI_ACTIVITY_KIND_RUNTIME ? sizeof S.rt : sizeof S.drv);
		if (on)
			api_limited(k);
	} else if (!dsp_cupti_own_kind(k) && (on ? C.Enable : C.Disable))
		r = (on ? C.Enable : C.Disable)(k);
	if (r == CUPTI_SUCCESS) {
		__atomic_store_n(&S.kinds, on ? S.kinds | 1ull << k : S.kinds & ~(1ull << k), __ATOMIC_RELEASE);
		hist_add();
		apply_sync();
	}
	return r;
}

/* ---- the client's records: copied out of ddpspy's buffers ---- */

/* Whether an external id's record, of a kind the client has on, goes to it. Not one ddpspy pushed
 * (around an NCCL call): the client never pushed it, and Kineto counts one of another kind as an
 * invalid event (CuptiActivityProfiler::handleCorrelationActivity). And only with its call's
 * record, which it "precedes" (cupti_activity.h, cuptiActivityPushExternalCorrelationId): the real
 * CUPTI makes one only where it makes that call's record, so none for a call that only ddpspy
 * records (a client with external correlation but no CUDA call kind, or PyTorch 2.0's Kineto, which
 * had no driver kind, got the ids of ddpspy's driver launches); kinds: the client's at the call's
 * start. Where the call's record is not in this buffer, by its kind alone. */
static int ext_wanted(const CUpti_ActivityExternalCorrelation *x, uint64_t kinds)
{
	uint32_t i = x->correlationId % LAUNCHES;
	if (dsp_ext_record_ours(x))
		return 0;
	if (!x->correlationId || launched[i].corr != x->correlationId)
		return 1;
	return client_api(launched[i].driver, launched[i].cbid, kinds);
}

/* when the work of record r was launched, on ddpspy's clock (last: the record before's) */
static uint64_t launch_time(const CUpti_Activity *r, uint64_t last)
{
	uint32_t corr = 0;
	uint64_t t = last;
	switch (r->kind) {
	case CUPTI_ACTIVITY_KIND_RUNTIME:
	case CUPTI_ACTIVITY_KIND_DRIVER: {
		const CUpti_ActivityAPI *p = (const void *)r;
		__typeof__(launched[0]) *l = &launched[p->correlationId % LAUNCHES];
		l->corr = p->correlationId;
		l->cbid = p->cbid;
		l->start = p->start;
		l->driver = r->kind == CUPTI_ACTIVITY_KIND_DRIVER;
		return p->start;
	}
	case CUPTI_ACTIVITY_KIND_KERNEL:
	case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
		corr = ((const CUpti_ActivityKernel10 *)(const void *)r)->correlationId;
		t = ((const CUpti_ActivityKernel10 *)(const void *)r)->start;
		break;
	case CUPTI_ACTIVITY_KIND_MEMCPY:
		corr = ((const CUpti_ActivityMemcpy6 *)(const void *)r)->correlationId;
		t = ((const CUpti_ActivityMemcpy6 *)(const void *)r)->start;
		break;
	case CUPTI_ACTIVITY_KIND_MEMSET:
		corr = ((const CUpti_ActivityMemset4 *)(const void *)r)->correlationId;
		t = ((const CUpti_ActivityMemset4 *)(const void *)r)->start;
		break;
	case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION:
		return ((const CUpti_ActivitySynchronization2 *)(const void *)r)->start;
	case CUPTI_ACTIVITY_KIND_OVERHEAD:
		return ((const CUpti_ActivityOverhead3 *)(const void *)r)->start;
	case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: /* (its call's, which may come after it) */
		corr = ((const CUpti_ActivityExternalCorrelation *)(const void *)r)->correlationId;
		break;
	default:
		return last;
	}
	if (corr && launched[corr % LAUNCHES].corr == corr)
		return launched[corr % LAUNCHES].start;
	return t ? t : last;
}

static void shift(uint64_t *t, int64_t off)
{
	if (*t != CUPTI_TIMESTAMP_UNKNOWN)
		*t += (uint64_t)off;
}

/* a copied record on the client's clock, naming threads as it asked (system: by system id); 0
 * where its thread could not be so named; fan_lock */
#define SPAN(T) (shift(&((T *)(void *)r)->start, off), shift(&((T *)(void *)r)->end, off))
static int to_client(CUpti_Activity *r, int64_t off, int system)
{
	uint64_t t = 0; /* (when it was made, on ddpspy's clock) */
	switch (r->kind) {
	case CUPTI_ACTIVITY_KIND_KERNEL:
	case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
		CUpti_ActivityKernel10 *k = (void *)r;
		shift(&k->start, off), shift(&k->end, off), shift(&k->completed, off);
		shift(&k->queued, off), shift(&k->submitted, off);
		break;
	}
	case CUPTI_ACTIVITY_KIND_MEMCPY:
		SPAN(CUpti_ActivityMemcpy6);
		break;
	case CUPTI_ACTIVITY_KIND_MEMSET:
		SPAN(CUpti_ActivityMemset4);
		break;
	case CUPTI_ACTIVITY_KIND_RUNTIME:
	case CUPTI_ACTIVITY_KIND_DRIVER:
		t = ((CUpti_ActivityAPI *)(void *)r)->start;
		SPAN(CUpti_ActivityAPI);
		return !system || dsp_tid_system(&((CUpti_ActivityAPI *)(void *)r)->threadId, t);
	case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION:
		SPAN(CUpti_ActivitySynchronization2);
		break;
	case CUPTI_ACTIVITY_KIND_OVERHEAD: {
		CUpti_ActivityOverhead3 *o = (void *)r;
		t = o->start;
		SPAN(CUpti_ActivityOverhead3);
		return !system || o->objectKind != CUPTI_ACTIVITY_OBJECT_THREAD || dsp_tid_system(&o->objectId.pt.threadId, t);
	}
	default:
		break;
	}
	return 1;
}

/* when the work or call of record r ended (ddpspy's clock), 0 unknown */
static uint64_t end_time(const CUpti_Activity *r)
{
	switch (r->kind) {
	case CUPTI_ACTIVITY_KIND_KERNEL:
	case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
		return ((const CUpti_ActivityKernel10 *)(const void *)r)->end;
	case CUPTI_ACTIVITY_KIND_MEMCPY:
		return ((const CUpti_ActivityMemcpy6 *)(const void *)r)->end;
	case CUPTI_ACTIVITY_KIND_MEMSET:
		return ((const CUpti_ActivityMemset4 *)(const void *)r)->end;
	case CUPTI_ACTIVITY_KIND_RUNTIME:
	case CUPTI_ACTIVITY_KIND_DRIVER:
		return ((const CUpti_ActivityAPI *)(const void *)r)->end;
	case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION:
		return ((const CUpti_ActivitySynchronization2 *)(const void *)r)->end;
	case CUPTI_ACTIVITY_KIND_OVERHEAD:
		return ((const CUpti_ActivityOverhead3 *)(const void *)r)->end;
	default:
		return 0;
	}
}

/* whether work launched at t and ended at end was running at one of the client's forced flushes,
 * which would have handed it to the client untimed; fan_lock held */
static int cut(uint64_t t, uint64_t end)
{
	for (int i = 0; i < S.ncut; i++)
		if (t < S.cut[i] && end > S.cut[i])
			return 1;
	return 0;
}

/* the client's buffer, full or flushed, back to it; fan_lock held */
static void complete(void)
{
	if (S.buf && S.comp)
		S.comp(NULL, 0, S.buf, S.size, S.used);
	S.buf = NULL;
	S.size = S.used = 0;
}

/* room for n bytes in the client's buffer (records 8-byte aligned: ACTIVITY_RECORD_ALIGNMENT), from
 * its buffer-requested callback; NULL when it gave none that holds them; fan_lock held */
static uint8_t *room(size_t n)
{
	size_t at = (S.used + 7) & ~(size_t)7;
	if (S.buf && at + n > S.size) {
		complete();
		at = 0;
	}
	if (!S.buf) {
		size_t max = 0;
		if (!S.req)
			return NULL;
		S.req(&S.buf, &S.size, &max);
		at = 0;
		if (!S.buf || S.size < n) {
			S.buf = NULL;
			return NULL;
		}
	}
	S.used = at + n;
	return S.buf + at;
}

/* one of the client's buffers out while it has a kind on (the real CUPTI holds one wherever the
 * client's records wait: Kineto looks for one before it flushes); fan_lock held */
static void keep_buffer(void)
{
	if (S.buf || !S.req || !__atomic_load_n(&S.kinds, __ATOMIC_ACQUIRE))
		return;
	size_t max = 0;
	S.req(&S.buf, &S.size, &max);
	S.used = 0;
	if (!S.buf)
		S.size = 0;
}

/* every record of a buffer CUPTI completed into ddpspy's callback that the client asked for, into
 * the client's buffers (gpu.c, before ddpspy reads it) */
static void seen(const uint8_t *b, size_t valid)
{
	if (!C.GetNextRecord || !__atomic_load_n(&S.on, __ATOMIC_ACQUIRE))
		return;
	pthread_mutex_lock(&fan_lock);
	int64_t off = client_offset();
	uint64_t last = 0, n = 0, lost = 0, unnamed = 0;
	int system = __atomic_load_n(&S.tid_type, __ATOMIC_ACQUIRE) == CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM;
	if (system) /* (the threads known now: those that made the calls of this buffer, and earlier ones) */
		dsp_tids_learn();
	CUpti_Activity *r = NULL, *next;
	/* the launching calls first: a kernel's record may come before its call's in a buffer */
	while (C.GetNextRecord((uint8_t *)b, valid, &r) == CUPTI_SUCCESS)
		if (r->kind == CUPTI_ACTIVITY_KIND_RUNTIME || r->kind == CUPTI_ACTIVITY_KIND_DRIVER)
			launch_time(r, 0);
	r = NULL;
	if (C.GetNextRecord((uint8_t *)b, valid, &r) != CUPTI_SUCCESS)
		r = NULL;
	for (; r; r = next) {
		next = r;
		if (C.GetNextRecord((uint8_t *)b, valid, &next) != CUPTI_SUCCESS)
			next = NULL;
		size_t size = (size_t)((next ? (const uint8_t *)next : b + valid) - (const uint8_t *)r);
		uint64_t t = launch_time(r, last);
		last = t;
		pthread_mutex_lock(&lock);
		uint64_t k = kinds_at(t);
		int want = (unsigned)r->kind < 64 && (k >> r->kind & 1);
		if (r->kind == CUPTI_ACTIVITY_KIND_RUNTIME || r->kind == CUPTI_ACTIVITY_KIND_DRIVER) {
			const CUpti_ActivityAPI *p = (const void *)r;
			want = client_api(r->kind == CUPTI_ACTIVITY_KIND_DRIVER, p->cbid, k);
		} else if (want && r->kind == CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION) {
			want = ext_wanted((const CUpti_ActivityExternalCorrelation *)(const void *)r, k);
		}
		pthread_mutex_unlock(&lock);
		if (!want || (S.ncut && cut(t, end_time(r))))
			continue;
		uint8_t *to = room(size);
		if (!to) {
			lost++;
			continue;
		}
		memcpy(to, r, size);
		unnamed += !to_client((CUpti_Activity *)(void *)to, off, system);
		n++;
	}
	pthread_mutex_lock(&lock);
	S.records += n;
	S.dropped += lost;
	S.tid_unknown += unnamed;
	S.changes += n || lost;
	pthread_mutex_unlock(&lock);
	pthread_mutex_unlock(&fan_lock);
}

/* CUPTI's callbacks to ddpspy's subscriber, passed on to the client's */
static void forward(void *ud, CUpti_CallbackDomain d, CUpti_CallbackId id, const void *data)
{
	(void)ud;
	CUpti_CallbackFunc cb = S.subscribed ? S.cb : NULL;
	if (cb)
		cb(S.ud, d, id, data);
}

static uint64_t info(struct dsp_gpu_info *g)
{
	pthread_mutex_lock(&lock);
	g->client = S.name[0] ? S.name : "unnamed";
	g->client_records = S.records;
	g->client_dropped = S.dropped;
	g->client_refused = S.refused;
	g->client_api_limited = S.limited;
	g->client_tid_unknown = S.tid_unknown;
	uint64_t c = S.changes;
	pthread_mutex_unlock(&lock);
	return c;
}

/* Whether the client's call fn is answered here: ddpspy holds CUPTI (started now if it had not
 * tried). The first such call registers what gpu.c passes on. */
static int shared(const char *fn)
{
	CUpti_SubscriberHandle sub = NULL;
	if (!dsp_cupti_claim(fn, &sub)) /* (not in a fork child, where ddpspy's CUPTI is off) */
		return 0;
	pthread_mutex_lock(&lock);
	if (!S.on) {
		S.real = sub;
		S.all_sync = 1;
		dsp_cupti_hooks.info = info;
		__atomic_store_n(&dsp_cupti_hooks.forward, forward, __ATOMIC_RELEASE);
		__atomic_store_n(&dsp_cupti_hooks.seen, seen, __ATOMIC_RELEASE);
		S.changes++;
		__atomic_store_n(&S.on, 1, __ATOMIC_RELEASE);
		dsp_log("CUPTI shared with another client (its first call: %s)", fn);
	}
	pthread_mutex_unlock(&lock);
	return 1;
}

/* ---- the client's calls (exported: they interpose on libcupti's) ---- */

#define ENTER() dsp_tls.guard += DSP_GUARD_OWN
#define LEAVE(r) (dsp_tls.guard -= DSP_GUARD_OWN, (r))
/* the guard held (what CUPTI does for the call is not recorded); the call passed on unchanged
 * where ddpspy does not hold CUPTI (failed as CUPTI fails it, never the process, when no libcupti
 * defines it) */
#define SHARED_OR_PASS(fn, ...)                                        \
	do {                                                           \
		ENTER();                                               \
		if (!shared(#fn)) {                                    \
			__typeof__(&fn) real_fn = REAL(fn, #fn);       \
			return LEAVE(real_fn ? real_fn(__VA_ARGS__)    \
					     : CUPTI_ERROR_UNKNOWN);   \
		}                                                      \
	} while (0)

#pragma GCC visibility push(default)

static CUptiResult subscribe(CUpti_SubscriberHandle *h, CUpti_CallbackFunc cb, void *ud, const char *name,
			     char *old, size_t oldsz)
{
	if (!h)
		return CUPTI_ERROR_INVALID_PARAMETER;
	pthread_mutex_lock(&lock);
	int taken = S.subscribed;
	if (taken && old && oldsz)
		snprintf(old, oldsz, "CUPTI for %s", S.name[0] ? S.name : "another client");
	dsp_log("CUPTI client: cuptiSubscribe%s", taken ? " refused: the client has one" : "");
	if (!taken) {
		S.subscribed = 1;
		S.cb = cb;
		S.ud = ud;
		snprintf(S.name, sizeof S.name, "%s", name ? name : "");
		S.changes++;
		*h = (CUpti_SubscriberHandle)(void *)&S;
	}
	pthread_mutex_unlock(&lock);
	return taken ? CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED : CUPTI_SUCCESS;
}

CUptiResult cuptiSubscribe(CUpti_SubscriberHandle *h, CUpti_CallbackFunc cb, void *ud)
{
	SHARED_OR_PASS(cuptiSubscribe, h, cb, ud);
	return LEAVE(subscribe(h, cb, ud, NULL, NULL, 0));
}

CUptiResult cuptiSubscribe_v2(CUpti_SubscriberHandle *h, CUpti_CallbackFunc cb, void *ud, CUpti_SubscriberParams *p)
{
	SHARED_OR_PASS(cuptiSubscribe_v2, h, cb, ud, p);
	int have = p && p->structSize >= CUpti_SubscriberParams_STRUCT_SIZE;
	return LEAVE(subscribe(h, cb, ud, have ? p->subscriberName : NULL, have ? p->oldSubscriberName : NULL,
			       have ? p->oldSubscriberSize : 0));
}

/* the client's subscriber and its callbacks gone; under lock */
static void unsubscribe(void)
{
	if (S.subscribed && C.EnableAllDomains) /* (ddpspy enables none of its own) */
		C.EnableAllDomains(0, S.real);
	S.subscribed = 0;
	S.cb = NULL;
	S.changes++;
}

CUptiResult cuptiUnsubscribe(CUpti_SubscriberHandle h)
{
	SHARED_OR_PASS(cuptiUnsubscribe, h);
	dsp_log("CUPTI client: cuptiUnsubscribe");
	pthread_mutex_lock(&lock);
	int mine = S.subscribed && h == (CUpti_SubscriberHandle)(void *)&S;
	if (mine)
		unsubscribe();
	pthread_mutex_unlock(&lock);
	return LEAVE(mine ? CUPTI_SUCCESS : CUPTI_ERROR_INVALID_PARAMETER);
}

CUptiResult cuptiEnableCallback(uint32_t enable, CUpti_SubscriberHandle h, CUpti_CallbackDomain d, CUpti_CallbackId id)
{
	SHARED_OR_PASS(cuptiEnableCallback, enable, h, d, id);
	if (h != (CUpti_SubscriberHandle)(void *)&S || !S.subscribed || !C.EnableCallback)
		return LEAVE(CUPTI_ERROR_INVALID_PARAMETER);
	CUptiResult r = C.EnableCallback(enable, S.real, d, id);
	dsp_log("CUPTI client: cuptiEnableCallback(%u, domain %d, id %u): %d", enable, (int)d, id, (int)r);
	return LEAVE(r);
}

CUptiResult cuptiEnableDomain(uint32_t enable, CUpti_SubscriberHandle h, CUpti_CallbackDomain d)
{
	SHARED_OR_PASS(cuptiEnableDomain, enable, h, d);
	if (h != (CUpti_SubscriberHandle)(void *)&S || !S.subscribed || !C.EnableDomain)
		return LEAVE(CUPTI_ERROR_INVALID_PARAMETER);
	CUptiResult r = C.EnableDomain(enable, S.real, d);
	dsp_log("CUPTI client: cuptiEnableDomain(%u, domain %d): %d", enable, (int)d, (int)r);
	return LEAVE(r);
}

CUptiResult cuptiEnableAllDomains(uint32_t enable, CUpti_SubscriberHandle h)
{
	SHARED_OR_PASS(cuptiEnableAllDomains, enable, h);
	if (h != (CUpti_SubscriberHandle)(void *)&S || !S.subscribed || !C.EnableAllDomains)
		return LEAVE(CUPTI_ERROR_INVALID_PARAMETER);
	CUptiResult r = C.EnableAllDomains(enable, S.real);
	dsp_log("CUPTI client: cuptiEnableAllDomains(%u): %d", enable, (int)r);
	return LEAVE(r);
}

CUptiResult cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc req, CUpti_BuffersCallbackCompleteFunc comp)
{
	SHARED_OR_PASS(cuptiActivityRegisterCallbacks, req, comp);
	if (!req || !comp)
		return LEAVE(CUPTI_ERROR_INVALID_PARAMETER);
	pthread_mutex_lock(&fan_lock);
	S.req = req;
	S.comp = comp;
	keep_buffer();
	pthread_mutex_unlock(&fan_lock);
	return LEAVE(CUPTI_SUCCESS);
}

CUptiResult cuptiActivityRegisterTimestampCallback(CUpti_TimestampCallbackFunc fn)
{
	SHARED_OR_PASS(cuptiActivityRegisterTimestampCallback, fn);
	dsp_log("CUPTI client: cuptiActivityRegisterTimestampCallback");
	if (!fn)
		return LEAVE(CUPTI_ERROR_INVALID_PARAMETER);
	pthread_mutex_lock(&fan_lock);
	S.ts = fn;
	pthread_mutex_unlock(&fan_lock);
	return LEAVE(CUPTI_SUCCESS);
}

CUptiResult cuptiGetTimestamp(uint64_t *t)
{
	SHARED_OR_PASS(cuptiGetTimestamp, t);
	if (!t)
		return LEAVE(CUPTI_ERROR_INVALID_PARAMETER);
	*t = client_now();
	return LEAVE(CUPTI_SUCCESS);
}

static CUptiResult enable_kind(CUpti_ActivityKind k, const char *fn)
{
	pthread_mutex_lock(&lock);
	CUptiResult r = set_kind(k, 1);
	pthread_mutex_unlock(&lock);
	dsp_log("CUPTI client: %s(%d): %d", fn, (int)k, (int)r);
	pthread_mutex_lock(&fan_lock);
	keep_buffer();
	pthread_mutex_unlock(&fan_lock);
	return r;
}

CUptiResult cuptiActivityEnable(CUpti_ActivityKind k)
{
	SHARED_OR_PASS(cuptiActivityEnable, k);
	return LEAVE(enable_kind(k, "cuptiActivityEnable"));
}

/* "For other activities, the behavior is similar to the API cuptiActivityEnable" (cupti_activity.h);
 * those it dumps records of (devices, contexts, streams, NVLink, PCIe) are not shareable, and are
 * refused as cuptiActivityEnable refuses them */
CUptiResult cuptiActivityEnableAndDump(CUpti_ActivityKind k)
{
	SHARED_OR_PASS(cuptiActivityEnableAndDump, k);
	return LEAVE(enable_kind(k, "cuptiActivityEnableAndDump"));
}

CUptiResult cuptiActivityDisable(CUpti_ActivityKind k)
{
	SHARED_OR_PASS(cuptiActivityDisable, k);
	pthread_mutex_lock(&lock);
	CUptiResult r = (unsigned)k < 64 && (S.kinds >> k & 1) ? set_kind(k, 0) : CUPTI_SUCCESS;
	pthread_mutex_unlock(&lock);
	dsp_log("CUPTI client: cuptiActivityDisable(%d): %d", (int)k, (int)r);
	return LEAVE(r);
}

static CUptiResult select_api(int driver, CUpti_CallbackId id, uint8_t enable)
{
	uint32_t size = driver ? CUPTI_DRIVER_TRACE_CBID_SIZE : CUPTI_RUNTIME_TRACE_CBID_SIZE;
	if (id >= size)
		return CUPTI_ERROR_INVALID_PARAMETER;
	pthread_mutex_lock(&lock);
	(driver ? S.drv : S.rt)[id] = enable ? 1 : -1;
	if (enable)
		api_limited(driver ? CUPTI_ACTIVITY_KIND_DRIVER : CUPTI_ACTIVITY_KIND_RUNTIME);
	hist_add();
	pthread_mutex_unlock(&lock);
	dsp_log("CUPTI client: cuptiActivityEnable%sApi(%u, %u)", driver ? "Driver" : "Runtime", id, enable);
	return CUPTI_SUCCESS;
}

CUptiResult cuptiActivityEnableRuntimeApi(CUpti_CallbackId id, uint8_t enable)
{
	SHARED_OR_PASS(cuptiActivityEnableRuntimeApi, id, enable);
	return LEAVE(select_api(0, id, enable));
}

CUptiResult cuptiActivityEnableDriverApi(CUpti_CallbackId id, uint8_t enable)
{
	SHARED_OR_PASS(cuptiActivityEnableDriverApi, id, enable);
	return LEAVE(select_api(1, id, enable));
}

/* The client may want the records of queries of unfinished work, which ddpspy leaves out (gpu.c
 * drops them from its own reading). */
CUptiResult cuptiActivityEnableAllSyncRecords(uint8_t enable)
{
	SHARED_OR_PASS(cuptiActivityEnableAllSyncRecords, enable);
	dsp_log("CUPTI client: cuptiActivityEnableAllSyncRecords(%u)", enable);
	pthread_mutex_lock(&lock);
	S.all_sync = enable != 0;
	apply_sync();
	pthread_mutex_unlock(&lock);
	return LEAVE(C.EnableAllSyncRecords ? CUPTI_SUCCESS : CUPTI_ERROR_NOT_SUPPORTED);
}

/* The client's flush: the real one (ddpspy's buffers come back through gpu.c, and the client's
 * records in them are copied out), then the client's buffer to it, and another out while it has
 * kinds on. A forced flush while the client has kinds on (Kineto's as its window opens) is a default
 * one for the real CUPTI, which hands back only the buffers whose work has ended, so that ddpspy
 * keeps the times of what still runs; it is remembered: what was running then is not the client's
 * afterwards. A forced flush with none on ends the client's session (Kineto turns its kinds off,
 * then flushes) and is passed on forced: a default one would keep back every buffer that also
 * holds work still running ("It doesn't return buffers which have one or more incomplete records",
 * cupti_activity.h, cuptiActivityFlushAll), and with it the records of the client's window, which
 * it takes now or never. ddpspy's records of what still runs then come back untimed, and are
 * counted; a program that synchronizes before the stop, as torch.profiler does, has none. */
static void flush_for_client(uint32_t flag)
{
	int ends = (flag & CUPTI_ACTIVITY_FLAG_FLUSH_FORCED) && !__atomic_load_n(&S.kinds, __ATOMIC_ACQUIRE);
	if (flag & CUPTI_ACTIVITY_FLAG_FLUSH_FORCED) {
		pthread_mutex_lock(&fan_lock);
		if (S.ncut == CUTS) /* (the oldest: its work has long ended) */
			memmove(S.cut, S.cut + 1, (CUTS - 1) * sizeof *S.cut);
		S.cut[S.ncut < CUTS ? S.ncut++ : CUTS - 1] = mono();
		pthread_mutex_unlock(&fan_lock);
	}
	if (C.FlushAll)
		C.FlushAll(ends ? CUPTI_ACTIVITY_FLAG_FLUSH_FORCED : 0);
	pthread_mutex_lock(&fan_lock);
	if (S.used)
		complete();
	keep_buffer();
	pthread_mutex_unlock(&fan_lock);
}

CUptiResult cuptiActivityFlushAll(uint32_t flag)
{
	SHARED_OR_PASS(cuptiActivityFlushAll, flag);
	dsp_log("CUPTI client: cuptiActivityFlushAll(%u)", flag);
	flush_for_client(flag);
	return LEAVE(CUPTI_SUCCESS);
}

/* Deprecated: "CONTEXT and STREAMID will be ignored. Use cuptiActivityFlushAll to flush all data"
 * (cupti_activity.h, CUDA 13) */
CUptiResult cuptiActivityFlush(CUcontext ctx, uint32_t stream, uint32_t flag)
{
	SHARED_OR_PASS(cuptiActivityFlush, ctx, stream, flag);
	dsp_log("CUPTI client: cuptiActivityFlush(%u)", flag);
	flush_for_client(flag);
	return LEAVE(CUPTI_SUCCESS);
}

/* How the client's records name a thread (cupti_activity.h, CUpti_ActivityThreadIdType): DEFAULT,
 * pthread_self(); SYSTEM, gettid (tracers that match the system's thread ids ask for it). Not
 * passed on: "Thread id type must not be changed during the profiling session to avoid thread-id
 * value mismatch across activity records", and ddpspy's session names threads by the default (the
 * file's thread records carry it). The client's copies are given the type it asked for. */
CUptiResult cuptiSetThreadIdType(CUpti_ActivityThreadIdType type)
{
	SHARED_OR_PASS(cuptiSetThreadIdType, type);
	dsp_log("CUPTI client: cuptiSetThreadIdType(%d)", (int)type);
	if ((unsigned)type >= CUPTI_ACTIVITY_THREAD_ID_TYPE_SIZE)
		return LEAVE(CUPTI_ERROR_NOT_SUPPORTED);
	__atomic_store_n(&S.tid_type, type, __ATOMIC_RELEASE);
	return LEAVE(CUPTI_SUCCESS);
}

CUptiResult cuptiGetThreadIdType(CUpti_ActivityThreadIdType *type)
{
	SHARED_OR_PASS(cuptiGetThreadIdType, type);
	if (!type)
		return LEAVE(CUPTI_ERROR_INVALID_PARAMETER);
	*type = __atomic_load_n(&S.tid_type, __ATOMIC_ACQUIRE);
	return LEAVE(CUPTI_SUCCESS);
}

CUptiResult cuptiActivityGetNumDroppedRecords(CUcontext ctx, uint32_t stream, size_t *n)
{
	SHARED_OR_PASS(cuptiActivityGetNumDroppedRecords, ctx, stream, n);
	if (!n)
		return LEAVE(CUPTI_ERROR_INVALID_PARAMETER);
	pthread_mutex_lock(&lock);
	*n = (size_t)(S.dropped - S.unread);
	S.unread = S.dropped;
	pthread_mutex_unlock(&lock);
	return LEAVE(CUPTI_SUCCESS);
}

/* An attribute of the activity API. Device buffer and semaphore sizes are CUPTI's and passed on.
 * Per-thread activity buffers are not: "changing this attribute in the middle of the profiling
 * session will result in undefined behavior" (cupti_activity.h, default 1), and Kineto sets 0 at
 * each profile's end (CuptiActivityApi::activityBuffers), in the middle of ddpspy's session (on an
 * H200 withholding it was not what kept ddpspy's API records: docs/gpu.md). How CUPTI fills its
 * own buffers is not the client's concern here: its records come in buffers of its own (seen()). */
CUptiResult cuptiActivitySetAttribute(CUpti_ActivityAttribute a, size_t *size, void *value)
{
	SHARED_OR_PASS(cuptiActivitySetAttribute, a, size, value);
	CUptiResult r;
	if (!size || !value) {
		r = CUPTI_ERROR_INVALID_PARAMETER;
	} else if (a == CUPTI_ACTIVITY_ATTR_PER_THREAD_ACTIVITY_BUFFER) {
		r = *size == sizeof(uint8_t) ? CUPTI_SUCCESS : CUPTI_ERROR_INVALID_PARAMETER;
	} else {
		__typeof__(&cuptiActivitySetAttribute) real_fn = REAL(cuptiActivitySetAttribute, "cuptiActivitySetAttribute");
		r = real_fn ? real_fn(a, size, value) : CUPTI_ERROR_UNKNOWN;
	}
	dsp_log("CUPTI client: cuptiActivitySetAttribute(%d, %zu bytes): %d", (int)a, size ? *size : 0, (int)r);
	return LEAVE(r);
}

/* The client detaches: what was copied for it is delivered, then its kinds, callback ids,
 * callbacks and subscriber are gone, as a real cuptiFinalize would leave it; ddpspy's capture
 * goes on. No flush of CUPTI's own: the client flushes before ("CUPTI client needs to make sure
 * that required CUDA synchronization and CUPTI activity buffer flush is done before calling the
 * API", cupti_activity.h), and Kineto calls this from inside an API callback. */
CUptiResult cuptiFinalize(void)
{
	SHARED_OR_PASS(cuptiFinalize);
	dsp_log("CUPTI client: cuptiFinalize");
	pthread_mutex_lock(&fan_lock);
	if (S.buf) /* (an empty one too: the client's memory back to it) */
		complete();
	pthread_mutex_unlock(&fan_lock);
	pthread_mutex_lock(&lock);
	for (unsigned k = 0; k < 64; k++)
		if (S.kinds >> k & 1)
			set_kind((CUpti_ActivityKind)k, 0);
	memset(S.rt, 0, sizeof S.rt);
	memset(S.drv, 0, sizeof S.drv);
	S.all_sync = 1;
	__atomic_store_n(&S.tid_type, CUPTI_ACTIVITY_THREAD_ID_TYPE_DEFAULT, __ATOMIC_RELEASE);
	apply_sync();
	unsubscribe();
	pthread_mutex_unlock(&lock);
	pthread_mutex_lock(&fan_lock);
	S.req = NULL;
	S.comp = NULL;
	S.ts = NULL;
	pthread_mutex_unlock(&fan_lock);
	return LEAVE(CUPTI_SUCCESS);
}

#pragma GCC visibility pop
