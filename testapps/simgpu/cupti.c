/* A stand-in for libcupti.so.13 on the simulated device (testapps/simgpu/, `make sim`): CUPTI's
 * activity API with the real ABI (compiled against the installed cupti headers), delivering real
 * record structs for what the simulated cudart tells it (simgpu.h): runtime API calls, kernels,
 * copies, sets and synchronizations, and external correlations. A test double, never part of the
 * product.
 *
 * As the real one: records go into buffers the client hands out (its buffer-requested callback)
 * and come back through its buffer-completed callback from a thread of CUPTI's own: a full buffer
 * at once, a partly filled one only at cuptiActivityFlushAll, whose caller waits while CUPTI's
 * thread delivers ("Periodic flush can return only those activity buffers which are full",
 * cupti_activity.h, cuptiActivityFlushPeriod; on an H100, CUDA 13.0: a torch.profiler window of
 * 10 steps got no partly filled buffer of ddpspy's in 270 ms, and a client's flushed buffer came
 * from a thread not the caller's; docs/gpu.md). SIMGPU_CUPTI_FLUSH_MS=n, a test's knob, not the
 * real default: partly filled buffers also every n ms. A record that finds no buffer is dropped and counted
 * (cuptiActivityGetNumDroppedRecords); times are CLOCK_REALTIME ns unless a timestamp callback was
 * registered, whose timebase the records made after it use; one subscriber per
 * process, and none at all with SIMGPU_CUPTI_TAKEN=1 (as under nsys), or =NAME (a holder so
 * named), or =NAME@r (only in the process of rank r).
 * SIMGPU_CUPTI_MAX_RECORDS=n: the records after the first n find no buffer (dropped and counted,
 * as when a client's buffers run out); n@r: only in the process of rank r (OMPI_COMM_WORLD_RANK,
 * else RANK).
 *
 * Unfinished work, as the real one: a buffer that holds a kernel, copy or set still running is
 * not handed back by the periodic delivery (a real CUPTI makes such a record when the work
 * completes); a forced flush (CUPTI_ACTIVITY_FLAG_FLUSH_FORCED) hands it back with start and end 0,
 * "timestamp information could not be collected" (cupti_activity.h, CUpti_ActivityKernel10's start
 * and end; CUPTI_TIMESTAMP_UNKNOWN), and that record never comes again: on an H200 (CUDA 13.0) the
 * kernel still running at the forced flush came once, with both times 0 (docs/gpu.md).
 * SIMGPU_CUPTI_UNTIMED=k: besides, every k-th kernel record comes with start and end 0.
 * SIMGPU_CUPTI_FOREIGN=1: each delivery also completes a buffer the client never handed out (as
 * when another client's buffers and callbacks are mixed up with its own), freed after.
 *
 * API records, as cupti_activity.h says: CUPTI_ACTIVITY_KIND_RUNTIME (DRIVER) records every runtime
 * (driver) call; cuptiActivityEnableRuntimeApi (DriverApi) turns one callback id on or off, and a
 * later cuptiActivityEnable or Disable of the kind overrides those choices. An external
 * correlation record comes with each API record made while an id is pushed, one for each kind with
 * an id pushed, each kind's ids a stack of the calling thread's (cupti_activity.h,
 * cuptiActivityPushExternalCorrelationId; an NCCL call on an H200 made about 20, every one joined
 * to its id: docs/gpu.md), and only with one (assumed: not seen on a GPU with calls left out). Synchronization records come for every query too (a
 * cudaEventQuery of unfinished work: result 600, CUDA_ERROR_NOT_READY, as on an H200) unless
 * cuptiActivityEnableAllSyncRecords(0) leaves those of unfinished work out. cuptiGetCallbackName
 * names every callback id of the installed headers (cupti_runtime_cbid.h, cupti_driver_cbid.h).
 * An API record names its thread by the low 32 bits of its pthread_t, or by its gettid for the
 * records made after cuptiSetThreadIdType(CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM) (as tracers that
 * match the system's thread ids ask). cuptiActivityFlush is cuptiActivityFlushAll (deprecated; its context and stream
 * ignored), cuptiActivityEnableAndDump cuptiActivityEnable for the kinds the stand-in makes.
 * cuptiSubscribe_v2 takes a subscriber name; a refused one gets the holder's, "CUPTI for <name>"
 * (cupti_callbacks.h, CUpti_SubscriberParams), or SIMGPU_CUPTI_TAKEN's value when that is not 1.
 *
 * What an H200's CUPTI did when its API selection was pushed around (CUDA 13.0, docs/gpu.md,
 * 2026-11-28, testapps/cupti_rules and torch.profiler under ddpspy), modelled so:
 * - once a kind's Disable ended a selection by callback id (RUNTIME or DRIVER), turning ids of
 *   that domain on again one by one recorded nothing more, nor did turning them off and on;
 * - with a client's CUDA_DRIVER kind passed on as every driver call's id but three (some 690 ids
 *   on one by one), the process's API and synchronization records stopped for good some 270 ms
 *   later, none counted as dropped; what triggers it is not known (all ids on and off in one
 *   thread of a small program did not), modelled as: more than 64 driver ids on by id at once;
 * - the per-thread activity buffer attribute changed after a kind was enabled: "undefined
 *   behavior" (cupti_activity.h, CUPTI_ACTIVITY_ATTR_PER_THREAD_ACTIVITY_BUFFER), modelled as the
 *   same stop of API and synchronization records. */
#include <cupti.h>
#include <cupti_runtime_cbid.h>
#include <cupti_driver_cbid.h>
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "simgpu.h"

/* SIMGPU_MAJOR 12: the stand-in is CUDA 12's libcupti.so.12, CUPTI API version 26 (CUDA 12.8,
 * cupti_version.h), writing its records in CUDA 12's structs (cupti_activity_deprecated.h:
 * Kernel9, Memcpy5, Memset3, Synchronization, which has no returnValue) */
#ifndef SIMGPU_MAJOR
#define SIMGPU_MAJOR 13
#endif

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wake = PTHREAD_COND_INITIALIZER;
static int subscribed;
static uint64_t enabled;                 /* bit k: CUpti_ActivityKind k */
static int8_t rt_sel[CUPTI_RUNTIME_TRACE_CBID_SIZE], drv_sel[CUPTI_DRIVER_TRACE_CBID_SIZE]; /* 1 on, -1 off, 0 the kind's */
static int all_sync = 1;                 /* cuptiActivityEnableAllSyncRecords */
static int sel_ended[2];                 /* runtime, driver: a selection by id ended by its kind's Disable */
static int host_off;                     /* API and synchronization records stopped for good */
static char holder[64];                  /* the subscriber's name, as cuptiSubscribe_v2 gave it */
static CUpti_BuffersCallbackRequestFunc requested;
static CUpti_BuffersCallbackCompleteFunc completed;
static CUpti_TimestampCallbackFunc timestamp;
static CUpti_CallbackFunc sub_cb;        /* the subscriber's callback, and what it gets with it */
static void *sub_ud;
static uint8_t cb_rt[CUPTI_RUNTIME_TRACE_CBID_SIZE], cb_drv[CUPTI_DRIVER_TRACE_CBID_SIZE]; /* enabled ids */
static size_t dropped;
static CUpti_ActivityThreadIdType tid_type; /* how API records name their thread (cuptiSetThreadIdType) */

static uint8_t *buf;                     /* the buffer being filled */
static size_t buf_size, buf_used;
static struct full { uint8_t *b; size_t size, used; struct full *next; } *fulls, **fulls_tail = &fulls;
static pthread_t thread;
static int thread_started;
static pid_t thread_pid;                 /* (a fork child has no CUPTI thread) */
static pthread_cond_t delivered = PTHREAD_COND_INITIALIZER;
static uint64_t flush_asked, flush_done; /* cuptiActivityFlushAll's requests to CUPTI's thread */

static uint64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t read_other(void);
static uint64_t offset_at; /* when cupti_offset last measured; 0: never (or the timebase changed) */

/* what to add to a CLOCK_MONOTONIC time for CUPTI's timebase: CLOCK_REALTIME, or the client's.
 * Measured once a second, the tightest of three readings, and kept in between, as a real CUPTI
 * keeps its conversion of the GPU's clock: records keep their distances and their order exactly. */
static int64_t cupti_offset(void)
{
	static int64_t off;
	uint64_t t = mono_ns();
	if (offset_at && t - offset_at < 1000000000u)
		return off;
	uint64_t best = UINT64_MAX;
	for (int i = 0; i < 3; i++) {
		uint64_t a = mono_ns(), other = read_other(), b = mono_ns();
		if (b - a < best) {
			best = b - a;
			off = (int64_t)(other - (a + (b - a) / 2));
		}
	}
	offset_at = t;
	return off;
}

/* CUPTI's timebase now: the client's timestamp callback, or CLOCK_REALTIME */
static uint64_t read_other(void)
{
	uint64_t other;
	if (timestamp) {
		other = timestamp();
	} else {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		other = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
	}
	return other;
}

static size_t record_size(CUpti_ActivityKind kind)
{
	switch (kind) {
	case CUPTI_ACTIVITY_KIND_RUNTIME:
	case CUPTI_ACTIVITY_KIND_DRIVER:
		return sizeof(CUpti_ActivityAPI);
	case CUPTI_ACTIVITY_KIND_KERNEL:
	case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
		return SIMGPU_MAJOR == 12 ? sizeof(CUpti_ActivityKernel9) : sizeof(CUpti_ActivityKernel10);
	case CUPTI_ACTIVITY_KIND_MEMCPY:
		return SIMGPU_MAJOR == 12 ? sizeof(CUpti_ActivityMemcpy5) : sizeof(CUpti_ActivityMemcpy6);
	case CUPTI_ACTIVITY_KIND_MEMSET:
		return SIMGPU_MAJOR == 12 ? sizeof(CUpti_ActivityMemset3) : sizeof(CUpti_ActivityMemset4);
	case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION:
		return SIMGPU_MAJOR == 12 ? sizeof(CUpti_ActivitySynchronization) : sizeof(CUpti_ActivitySynchronization2);
	case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION:
		return sizeof(CUpti_ActivityExternalCorrelation);
	default:
		return 0;
	}
}

/* the kernels, copies and sets in b[0, used) still running at CUPTI's now: how many; zero: give
 * them start and end 0 (a forced flush) */
static int running(uint8_t *b, size_t used, int zero)
{
	uint64_t now = mono_ns() + (uint64_t)cupti_offset();
	int n = 0;
	for (size_t at = 0; b && at + sizeof(CUpti_Activity) <= used;) {
		CUpti_Activity *r = (CUpti_Activity *)(b + at);
		size_t sz = record_size(r->kind);
		uint64_t *start = NULL, *end = NULL;
		if (!sz)
			break;
		if (r->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL || r->kind == CUPTI_ACTIVITY_KIND_KERNEL) {
			CUpti_ActivityKernel10 *k = (CUpti_ActivityKernel10 *)r;
			start = &k->start, end = &k->end;
			if (zero && k->end > now)
				k->completed = 0;
		} else if (r->kind == CUPTI_ACTIVITY_KIND_MEMCPY) {
			start = &((CUpti_ActivityMemcpy6 *)r)->start, end = &((CUpti_ActivityMemcpy6 *)r)->end;
		} else if (r->kind == CUPTI_ACTIVITY_KIND_MEMSET) {
			start = &((CUpti_ActivityMemset4 *)r)->start, end = &((CUpti_ActivityMemset4 *)r)->end;
		}
		if (end && *end > now) {
			n++;
			if (zero)
				*start = *end = 0;
		}
		at += sz;
	}
	return n;
}

/* the filled buffer goes to the queue of completed ones; under lock */
static void retire(void)
{
	struct full *f = buf ? malloc(sizeof *f) : NULL;
	if (!f)
		return;
	*f = (struct full){ buf, buf_size, buf_used, NULL };
	*fulls_tail = f;
	fulls_tail = &f->next;
	buf = NULL;
	buf_size = buf_used = 0;
	pthread_cond_broadcast(&wake);
}

/* room for n bytes of records, from the client's buffers; NULL (the record dropped) without.
 * Under lock: the client's buffer-requested callback (and its timestamp callback, cupti_offset) run
 * with it held, so they must not call back into CUPTI, which a real client never does either. */
static void *room(size_t n)
{
	if (buf && buf_used + n > buf_size)
		retire();
	if (!buf) {
		size_t max = 0;
		requested(&buf, &buf_size, &max);
		buf_used = 0;
		if (!buf || buf_size < n) {
			buf = NULL;
			return NULL;
		}
	}
	void *p = buf + buf_used;
	buf_used += n;
	memset(p, 0, n);
	return p;
}

/* whether an API record of this callback id is wanted (under lock) */
static int api_wanted(int driver, int cbid)
{
	int sel = driver ? (cbid >= 0 && cbid < CUPTI_DRIVER_TRACE_CBID_SIZE ? drv_sel[cbid] : 0) :
			   (cbid >= 0 && cbid < CUPTI_RUNTIME_TRACE_CBID_SIZE ? rt_sel[cbid] : 0);
	return !host_off &&
	       (sel ? sel > 0 : (enabled & (1ull << (driver ? CUPTI_ACTIVITY_KIND_DRIVER : CUPTI_ACTIVITY_KIND_RUNTIME))) != 0);
}

/* room for a record of kind, enabled or not (under lock) */
static void *add_any(CUpti_ActivityKind kind)
{
	static long made, max = -1;
	if (!requested)
		return NULL;
	if (max < 0) {
		const char *v = getenv("SIMGPU_CUPTI_MAX_RECORDS"), *at = v ? strchr(v, '@') : NULL;
		const char *me = getenv("OMPI_COMM_WORLD_RANK") ? getenv("OMPI_COMM_WORLD_RANK") : getenv("RANK");
		max = v && *v ? atol(v) : 0;
		if (at && (!me || atoi(me) != atoi(at + 1)))
			max = 0; /* (another rank's) */
	}
	CUpti_Activity *r = max && made >= max ? NULL : room(record_size(kind));
	made++;
	if (!r) {
		dropped++;
		return NULL;
	}
	r->kind = kind;
	return r;
}

static void *add(CUpti_ActivityKind kind)
{
	return enabled & (1ull << kind) ? add_any(kind) : NULL;
}

/* ---- what the simulated cudart tells (simgpu.h) ---- */

/* the calling thread's external ids, a stack of each kind ("for the calling thread", cupti_activity.h) */
#define EXT_DEPTH 16
static __thread uint64_t ext[CUPTI_EXTERNAL_CORRELATION_KIND_SIZE][EXT_DEPTH];
static __thread int next_ext[CUPTI_EXTERNAL_CORRELATION_KIND_SIZE];
static int64_t grids;

static const char *callback_name(int driver, int cbid);

static void observe(const struct simgpu_item *it)
{
	static uint32_t pid; /* (a fork child has no CUPTI: the stand-in's pid never changes) */
	if (!pid)
		pid = (uint32_t)getpid();
	if (it->what == SIMGPU_API && sub_cb) { /* (the callback API: at the call's exit) */
		pthread_mutex_lock(&lock);
		int on = it->driver ? (it->cbid >= 0 && it->cbid < CUPTI_DRIVER_TRACE_CBID_SIZE && cb_drv[it->cbid])
				    : (it->cbid >= 0 && it->cbid < CUPTI_RUNTIME_TRACE_CBID_SIZE && cb_rt[it->cbid]);
		CUpti_CallbackFunc cb = on ? sub_cb : NULL;
		void *ud = sub_ud;
		pthread_mutex_unlock(&lock);
		if (cb) {
			CUpti_CallbackData data = { .callbackSite = CUPTI_API_EXIT,
						    .functionName = callback_name(it->driver, it->cbid),
						    .correlationId = it->correlation };
			cb(ud, it->driver ? CUPTI_CB_DOMAIN_DRIVER_API : CUPTI_CB_DOMAIN_RUNTIME_API,
			   (CUpti_CallbackId)it->cbid, &data);
		}
	}
	pthread_mutex_lock(&lock);
	uint64_t off = (uint64_t)cupti_offset();
	switch (it->what) {
	case SIMGPU_API: {
		int want = api_wanted(it->driver, it->cbid);
		/* "preceded by a CUpti_ActivityExternalCorrelation record for each
		 * CUpti_ExternalCorrelationKind" (cupti_activity.h): each kind's innermost id */
		for (int k = 0; want && k < CUPTI_EXTERNAL_CORRELATION_KIND_SIZE; k++) {
			CUpti_ActivityExternalCorrelation *x = next_ext[k] > 0 && next_ext[k] <= EXT_DEPTH ?
				add(CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION) : NULL;
			if (x) {
				x->externalKind = (CUpti_ExternalCorrelationKind)k;
				x->externalId = ext[k][next_ext[k] - 1];
				x->correlationId = it->correlation;
			}
		}
		CUpti_ActivityAPI *a = want ? add_any(it->driver ? CUPTI_ACTIVITY_KIND_DRIVER : CUPTI_ACTIVITY_KIND_RUNTIME) : NULL;
		if (a) {
			a->cbid = (CUpti_CallbackId)it->cbid;
			a->start = it->start + off;
			a->end = it->end + off;
			a->processId = pid;
			/* (API items are told on their calling thread: simgpu.h) */
			a->threadId = tid_type == CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM ? (uint32_t)syscall(SYS_gettid) : it->tid;
			a->correlationId = it->correlation;
			a->returnValue = (uint32_t)it->ret;
		}
		break;
	}
	case SIMGPU_KERNEL: {
		CUpti_ActivityKernel10 *k = add(enabled & (1ull << CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) ?
						CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL : CUPTI_ACTIVITY_KIND_KERNEL);
		static long kernels, every = -1;
		if (every < 0) {
			const char *v = getenv("SIMGPU_CUPTI_UNTIMED");
			every = v && atol(v) > 0 ? atol(v) : 0;
		}
		if (k) {
			int zero = every && ++kernels % every == 0;
			k->start = zero ? 0 : it->start + off;
			k->end = zero ? 0 : it->end + off;
			k->completed = k->end;
			k->deviceId = (uint32_t)it->device;
			k->contextId = (uint32_t)it->device + 1;
			k->streamId = it->stream;
			k->gridX = (int32_t)it->grid[0];
			k->gridY = (int32_t)it->grid[1];
			k->gridZ = (int32_t)it->grid[2];
			k->blockX = (int32_t)it->block[0];
			k->blockY = (int32_t)it->block[1];
			k->blockZ = (int32_t)it->block[2];
			k->correlationId = it->correlation;
			k->gridId = ++grids;
			k->name = it->name;
			k->graphId = it->graph;
			k->graphNodeId = it->graph_node;
		}
		break;
	}
	case SIMGPU_MEMCPY: {
		CUpti_ActivityMemcpy6 *m = add(CUPTI_ACTIVITY_KIND_MEMCPY);
		static const uint8_t mem[] = { [SIMGPU_PAGEABLE] = CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE,
					       [SIMGPU_DEVICE] = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE,
					       [SIMGPU_PINNED] = CUPTI_ACTIVITY_MEMORY_KIND_PINNED };
		if (m) {
			m->copyKind = it->copy_kind == 1 ? CUPTI_ACTIVITY_MEMCPY_KIND_HTOD :
				      it->copy_kind == 2 ? CUPTI_ACTIVITY_MEMCPY_KIND_DTOH :
				      it->copy_kind == 3 ? CUPTI_ACTIVITY_MEMCPY_KIND_DTOD : CUPTI_ACTIVITY_MEMCPY_KIND_HTOH;
			m->srcKind = mem[it->src];
			m->dstKind = mem[it->dst];
			m->flags = it->async ? CUPTI_ACTIVITY_FLAG_MEMCPY_ASYNC : 0;
			m->bytes = it->bytes;
			m->start = it->start + off;
			m->end = it->end + off;
			m->deviceId = (uint32_t)it->device;
			m->contextId = (uint32_t)it->device + 1;
			m->streamId = it->stream;
			m->correlationId = it->correlation;
		}
		break;
	}
	case SIMGPU_MEMSET: {
		CUpti_ActivityMemset4 *m = add(CUPTI_ACTIVITY_KIND_MEMSET);
		if (m) {
			m->bytes = it->bytes;
			m->start = it->start + off;
			m->end = it->end + off;
			m->deviceId = (uint32_t)it->device;
			m->contextId = (uint32_t)it->device + 1;
			m->streamId = it->stream;
			m->correlationId = it->correlation;
			m->memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
		}
		break;
	}
	case SIMGPU_SYNC: {
		CUpti_ActivitySynchronization2 *y =
			!host_off && (all_sync || !it->ret) ? add(CUPTI_ACTIVITY_KIND_SYNCHRONIZATION) : NULL;
		if (y) {
			y->type = (CUpti_ActivitySynchronizationType)it->sync;
			y->start = it->start + off;
			y->end = it->end + off;
			y->correlationId = it->correlation;
			y->contextId = 1;
			y->streamId = it->stream;
			y->cudaEventId = UINT32_MAX;
#if SIMGPU_MAJOR >= 13
			y->returnValue = (uint32_t)it->ret;
#endif
		}
		break;
	}
	}
	pthread_mutex_unlock(&lock);
}

/* ---- delivery ---- */

/* hands every completed buffer to the client; under lock, which it drops around each callback */
static void deliver(void)
{
	static int foreign = -1;
	if (foreign < 0) {
		const char *v = getenv("SIMGPU_CUPTI_FOREIGN");
		foreign = v && *v == '1';
	}
	if (foreign && fulls) {
		size_t n = sizeof(CUpti_ActivityAPI);
		uint8_t *other = calloc(1, n);
		if (other) {
			((CUpti_Activity *)other)->kind = CUPTI_ACTIVITY_KIND_RUNTIME;
			pthread_mutex_unlock(&lock);
			completed(NULL, 0, other, n, n);
			pthread_mutex_lock(&lock);
			free(other);
		}
	}
	while (fulls) {
		struct full *f = fulls;
		fulls = f->next;
		if (!fulls)
			fulls_tail = &fulls;
		pthread_mutex_unlock(&lock);
		completed(NULL, 0, f->b, f->size, f->used);
		free(f);
		pthread_mutex_lock(&lock);
	}
}

static void *cupti_thread(void *arg)
{
	const char *v = getenv("SIMGPU_CUPTI_FLUSH_MS");
	long ms = v && atol(v) > 0 ? atol(v) : 0;
	pthread_mutex_lock(&lock);
	for (;;) {
		if (!fulls && flush_done == flush_asked) {
			if (ms) {
				struct timespec until;
				clock_gettime(CLOCK_REALTIME, &until);
				until.tv_sec += ms / 1000;
				until.tv_nsec += (ms % 1000) * 1000000L;
				if (until.tv_nsec >= 1000000000L) {
					until.tv_sec++;
					until.tv_nsec -= 1000000000L;
				}
				if (pthread_cond_timedwait(&wake, &lock, &until) == ETIMEDOUT && buf && buf_used &&
				    !running(buf, buf_used, 0))
					retire();
			} else {
				pthread_cond_wait(&wake, &lock);
			}
		}
		uint64_t asked = flush_asked;
		if (completed) /* (none after cuptiFinalize) */
			deliver();
		if (flush_done != asked) {
			flush_done = asked;
			pthread_cond_broadcast(&delivered);
		}
	}
	return NULL;
}

/* ---- the API ---- */

/* SIMGPU_CUPTI_TAKEN's holder in this process: its value, or before "@r" when this is rank r's
 * (OMPI_COMM_WORLD_RANK, else RANK), NULL when none */
static const char *taken_here(char *into, size_t n)
{
	const char *v = getenv("SIMGPU_CUPTI_TAKEN"), *at = v ? strchr(v, '@') : NULL;
	const char *me = getenv("OMPI_COMM_WORLD_RANK") ? getenv("OMPI_COMM_WORLD_RANK") : getenv("RANK");
	if (!v || !*v || (at && (!me || atoi(me) != atoi(at + 1))))
		return NULL;
	snprintf(into, n, "%.*s", at ? (int)(at - v) : (int)strlen(v), v);
	return into;
}

/* one subscriber a process: the refused get the holder's name ("" when unnamed) */
static CUptiResult subscribe(CUpti_SubscriberHandle *subscriber, const char *name, char *old, size_t oldsz)
{
	char tbuf[64];
	const char *taken = taken_here(tbuf, sizeof tbuf);
	if (!subscriber)
		return CUPTI_ERROR_INVALID_PARAMETER;
	if ((taken && *taken) || __atomic_exchange_n(&subscribed, 1, __ATOMIC_ACQ_REL)) {
		if (old && oldsz)
			snprintf(old, oldsz, "%s", taken && *taken ? (strcmp(taken, "1") ? taken : "") : holder);
		return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
	}
	if (name && *name)
		snprintf(holder, sizeof holder, "CUPTI for %.53s", name);
	else
		holder[0] = 0;
	*subscriber = (CUpti_SubscriberHandle)&subscribed;
	return CUPTI_SUCCESS;
}

/* the subscriber's callback, once it holds CUPTI */
static CUptiResult subscribed_with(CUptiResult r, CUpti_CallbackFunc callback, void *userdata)
{
	if (r == CUPTI_SUCCESS) {
		pthread_mutex_lock(&lock);
		sub_cb = callback;
		sub_ud = userdata;
		memset(cb_rt, 0, sizeof cb_rt);
		memset(cb_drv, 0, sizeof cb_drv);
		pthread_mutex_unlock(&lock);
	}
	return r;
}

CUptiResult cuptiSubscribe(CUpti_SubscriberHandle *subscriber, CUpti_CallbackFunc callback, void *userdata)
{
	return subscribed_with(subscribe(subscriber, NULL, NULL, 0), callback, userdata);
}

CUptiResult cuptiSubscribe_v2(CUpti_SubscriberHandle *subscriber, CUpti_CallbackFunc callback, void *userdata,
			      CUpti_SubscriberParams *params)
{
	int have = params && params->structSize >= CUpti_SubscriberParams_STRUCT_SIZE;
	return subscribed_with(subscribe(subscriber, have ? params->subscriberName : NULL,
					 have ? params->oldSubscriberName : NULL, have ? params->oldSubscriberSize : 0),
			       callback, userdata);
}

static void hook(void);

/* The callback API, for the runtime and driver domains, at each call's exit (its entry is not
 * modelled): the subscriber's callback with CUpti_CallbackData (cupti_callbacks.h), called
 * without any lock held, as a real CUPTI calls it from the calling thread */
static CUptiResult enable_ids(uint32_t enable, CUpti_SubscriberHandle sub, CUpti_CallbackDomain d, int one,
			      CUpti_CallbackId id)
{
	if (sub != (CUpti_SubscriberHandle)&subscribed || !__atomic_load_n(&subscribed, __ATOMIC_ACQUIRE))
		return CUPTI_ERROR_INVALID_PARAMETER;
	uint8_t *ids = d == CUPTI_CB_DOMAIN_RUNTIME_API ? cb_rt : d == CUPTI_CB_DOMAIN_DRIVER_API ? cb_drv : NULL;
	size_t n = d == CUPTI_CB_DOMAIN_RUNTIME_API ? CUPTI_RUNTIME_TRACE_CBID_SIZE : CUPTI_DRIVER_TRACE_CBID_SIZE;
	if (!ids) /* (other domains: accepted, never called) */
		return CUPTI_SUCCESS;
	if (one && id >= n)
		return CUPTI_ERROR_INVALID_PARAMETER;
	pthread_mutex_lock(&lock);
	if (one)
		ids[id] = enable != 0;
	else
		memset(ids, enable != 0, n);
	pthread_mutex_unlock(&lock);
	hook();
	return CUPTI_SUCCESS;
}

CUptiResult cuptiEnableCallback(uint32_t enable, CUpti_SubscriberHandle sub, CUpti_CallbackDomain d, CUpti_CallbackId id)
{
	return enable_ids(enable, sub, d, 1, id);
}

CUptiResult cuptiEnableDomain(uint32_t enable, CUpti_SubscriberHandle sub, CUpti_CallbackDomain d)
{
	return enable_ids(enable, sub, d, 0, 0);
}

CUptiResult cuptiEnableAllDomains(uint32_t enable, CUpti_SubscriberHandle sub)
{
	CUptiResult r = enable_ids(enable, sub, CUPTI_CB_DOMAIN_RUNTIME_API, 0, 0);
	return r == CUPTI_SUCCESS ? enable_ids(enable, sub, CUPTI_CB_DOMAIN_DRIVER_API, 0, 0) : r;
}

CUptiResult cuptiUnsubscribe(CUpti_SubscriberHandle subscriber)
{
	if (subscriber != (CUpti_SubscriberHandle)&subscribed)
		return CUPTI_ERROR_INVALID_PARAMETER;
	pthread_mutex_lock(&lock);
	sub_cb = NULL;
	pthread_mutex_unlock(&lock);
	__atomic_store_n(&subscribed, 0, __ATOMIC_RELEASE);
	return CUPTI_SUCCESS;
}

CUptiResult cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc req, CUpti_BuffersCallbackCompleteFunc comp)
{
	if (!req || !comp)
		return CUPTI_ERROR_INVALID_PARAMETER;
	pthread_mutex_lock(&lock);
	requested = req;
	completed = comp;
	if (!thread_started && (thread_started = pthread_create(&thread, NULL, cupti_thread, NULL) == 0))
		thread_pid = getpid();
	pthread_mutex_unlock(&lock);
	return thread_started ? CUPTI_SUCCESS : CUPTI_ERROR_UNKNOWN;
}

/* Taken at any time: "should be done before any of the CUPTI activity kinds are enabled ...
 * Changing the timestamp callback function ... in the middle of the profiling session can cause
 * records generated prior to the change to report timestamps through previous timestamp method"
 * (cupti_activity.h, CUDA 13). Not refused: the records made after it are in the new timebase. */
CUptiResult cuptiActivityRegisterTimestampCallback(CUpti_TimestampCallbackFunc fn)
{
	if (!fn)
		return CUPTI_ERROR_INVALID_PARAMETER;
	pthread_mutex_lock(&lock);
	timestamp = fn;
	offset_at = 0;
	pthread_mutex_unlock(&lock);
	return CUPTI_SUCCESS;
}

/* the simulated cudart told to tell this stand-in what it does */
static void hook(void)
{
	/* the program's cudart: the simulated one tells what it does, a real one nothing (no GPU);
	 * where a library loaded it RTLD_LOCAL (a dlopened module), by its name */
	void *fn = dlsym(RTLD_DEFAULT, "simgpu_observe");
	void *h = fn ? NULL : dlopen(SIMGPU_MAJOR == 12 ? "libcudart.so.12" : "libcudart.so.13", RTLD_LAZY | RTLD_NOLOAD);
	if (h) {
		fn = dlsym(h, "simgpu_observe");
		dlclose(h);
	}
	void (*observe_fn)(void (*)(const struct simgpu_item *)) = (void (*)(void (*)(const struct simgpu_item *)))fn;
	if (observe_fn)
		observe_fn(observe);
}

/* a kind on or off: for the API kinds, the callback ids' own choices are overridden */
static void kind_set(CUpti_ActivityKind kind, int on)
{
	pthread_mutex_lock(&lock);
	enabled = on ? enabled | 1ull << kind : enabled & ~(1ull << kind);
	int api = kind == CUPTI_ACTIVITY_KIND_RUNTIME ? 0 : kind == CUPTI_ACTIVITY_KIND_DRIVER ? 1 : -1;
	if (api == 0)
		memset(rt_sel, 0, sizeof rt_sel);
	if (api == 1)
		memset(drv_sel, 0, sizeof drv_sel);
	if (api >= 0 && !on)
		sel_ended[api] = 1;
	pthread_mutex_unlock(&lock);
}

CUptiResult cuptiActivityEnable(CUpti_ActivityKind kind)
{
	if (!record_size(kind))
		return CUPTI_ERROR_INVALID_KIND;
	kind_set(kind, 1);
	hook();
	return CUPTI_SUCCESS;
}

CUptiResult cuptiActivityDisable(CUpti_ActivityKind kind)
{
	kind_set(kind, 0);
	return CUPTI_SUCCESS;
}

/* one callback id's API records on or off, whatever its kind says (until the kind is set again) */
static CUptiResult select_api(int8_t *sel, uint32_t size, CUpti_CallbackId cbid, uint8_t enable)
{
	if (cbid >= size)
		return CUPTI_ERROR_INVALID_PARAMETER;
	pthread_mutex_lock(&lock);
	int driver = sel == drv_sel, on = 0;
	if (!sel_ended[driver] || !enable)
		sel[cbid] = enable ? 1 : -1;
	for (uint32_t i = 0; driver && i < size; i++)
		on += sel[i] > 0;
	host_off |= on > 64;
	pthread_mutex_unlock(&lock);
	hook();
	return CUPTI_SUCCESS;
}

CUptiResult cuptiActivityEnableRuntimeApi(CUpti_CallbackId cbid, uint8_t enable)
{
	return select_api(rt_sel, CUPTI_RUNTIME_TRACE_CBID_SIZE, cbid, enable);
}

CUptiResult cuptiActivityEnableDriverApi(CUpti_CallbackId cbid, uint8_t enable)
{
	return select_api(drv_sel, CUPTI_DRIVER_TRACE_CBID_SIZE, cbid, enable);
}

/* sizes are taken and ignored; the per-thread buffer attribute changed once a kind is on stops
 * API and synchronization records (above) */
CUptiResult cuptiActivitySetAttribute(CUpti_ActivityAttribute attr, size_t *size, void *value)
{
	if (!size || !value)
		return CUPTI_ERROR_INVALID_PARAMETER;
	pthread_mutex_lock(&lock);
	host_off |= attr == CUPTI_ACTIVITY_ATTR_PER_THREAD_ACTIVITY_BUFFER && enabled;
	pthread_mutex_unlock(&lock);
	return CUPTI_SUCCESS;
}

CUptiResult cuptiActivityEnableAllSyncRecords(uint8_t enable)
{
	pthread_mutex_lock(&lock);
	all_sync = enable != 0;
	pthread_mutex_unlock(&lock);
	return CUPTI_SUCCESS;
}

CUptiResult cuptiActivityFlushAll(uint32_t flag)
{
	pthread_mutex_lock(&lock);
	int forced = (flag & CUPTI_ACTIVITY_FLAG_FLUSH_FORCED) != 0;
	for (struct full *f = fulls; forced && f; f = f->next)
		running(f->b, f->used, 1);
	if (buf && buf_used && (forced ? running(buf, buf_used, 1) >= 0 : !running(buf, buf_used, 0)))
		retire();
	if (thread_started && thread_pid == getpid() && !pthread_equal(pthread_self(), thread)) {
		/* ("a blocking call": the caller waits while CUPTI's thread delivers) */
		uint64_t want = ++flush_asked;
		pthread_cond_broadcast(&wake);
		while (flush_done < want)
			pthread_cond_wait(&delivered, &lock);
	} else if (completed) {
		deliver();
	}
	pthread_mutex_unlock(&lock);
	return CUPTI_SUCCESS;
}

/* Deprecated: "CONTEXT and STREAMID will be ignored. Use cuptiActivityFlushAll to flush all data"
 * (cupti_activity.h, CUDA 13) */
CUptiResult cuptiActivityFlush(CUcontext context, uint32_t streamId, uint32_t flag)
{
	(void)context;
	(void)streamId;
	return cuptiActivityFlushAll(flag);
}

/* "For other activities, the behavior is similar to the API cuptiActivityEnable" (cupti_activity.h);
 * the records it dumps for resources that already exist (devices, contexts, streams, NVLink, PCIe)
 * are kinds the stand-in does not make, refused as cuptiActivityEnable refuses them */
CUptiResult cuptiActivityEnableAndDump(CUpti_ActivityKind kind)
{
	return cuptiActivityEnable(kind);
}

/* How records name a host thread (cupti_activity.h, CUpti_ActivityThreadIdType): DEFAULT, POSIX
 * pthread_self() (its low 32 bits, as seen on an H200: docs/gpu.md); SYSTEM, gettid. Taken at any
 * time, for the records made after it, whatever was made before ("Thread id type must not be
 * changed during the profiling session to avoid thread-id value mismatch across activity
 * records"). */
CUptiResult cuptiSetThreadIdType(CUpti_ActivityThreadIdType type)
{
	if ((unsigned)type >= CUPTI_ACTIVITY_THREAD_ID_TYPE_SIZE)
		return CUPTI_ERROR_NOT_SUPPORTED;
	pthread_mutex_lock(&lock);
	tid_type = type;
	pthread_mutex_unlock(&lock);
	return CUPTI_SUCCESS;
}

CUptiResult cuptiGetThreadIdType(CUpti_ActivityThreadIdType *type)
{
	if (!type)
		return CUPTI_ERROR_INVALID_PARAMETER;
	pthread_mutex_lock(&lock);
	*type = tid_type;
	pthread_mutex_unlock(&lock);
	return CUPTI_SUCCESS;
}

CUptiResult cuptiActivityGetNextRecord(uint8_t *buffer, size_t valid, CUpti_Activity **record)
{
	if (!buffer || !record)
		return CUPTI_ERROR_INVALID_PARAMETER;
	size_t at = *record ? (size_t)((uint8_t *)*record - buffer) + record_size((*record)->kind) : 0;
	if (at + sizeof(CUpti_Activity) > valid)
		return CUPTI_ERROR_MAX_LIMIT_REACHED;
	CUpti_Activity *r = (CUpti_Activity *)(buffer + at);
	size_t n = record_size(r->kind);
	if (!n || at + n > valid)
		return CUPTI_ERROR_INVALID_KIND;
	*record = r;
	return CUPTI_SUCCESS;
}

CUptiResult cuptiActivityGetNumDroppedRecords(CUcontext context, uint32_t streamId, size_t *n)
{
	if (!n)
		return CUPTI_ERROR_INVALID_PARAMETER;
	pthread_mutex_lock(&lock);
	*n = dropped;
	dropped = 0;
	pthread_mutex_unlock(&lock);
	return CUPTI_SUCCESS;
}

CUptiResult cuptiActivityPushExternalCorrelationId(CUpti_ExternalCorrelationKind kind, uint64_t id)
{
	if (kind <= CUPTI_EXTERNAL_CORRELATION_KIND_INVALID || kind >= CUPTI_EXTERNAL_CORRELATION_KIND_SIZE)
		return CUPTI_ERROR_INVALID_PARAMETER;
	if (next_ext[kind] < EXT_DEPTH)
		ext[kind][next_ext[kind]] = id;
	next_ext[kind]++;
	return CUPTI_SUCCESS;
}

CUptiResult cuptiActivityPopExternalCorrelationId(CUpti_ExternalCorrelationKind kind, uint64_t *lastId)
{
	if (kind <= CUPTI_EXTERNAL_CORRELATION_KIND_INVALID || kind >= CUPTI_EXTERNAL_CORRELATION_KIND_SIZE)
		return CUPTI_ERROR_INVALID_PARAMETER;
	if (!next_ext[kind])
		return CUPTI_ERROR_QUEUE_EMPTY;
	next_ext[kind]--;
	if (lastId && next_ext[kind] < EXT_DEPTH)
		*lastId = ext[kind][next_ext[kind]];
	return CUPTI_SUCCESS;
}

CUptiResult cuptiGetTimestamp(uint64_t *t)
{
	if (!t)
		return CUPTI_ERROR_INVALID_PARAMETER;
	pthread_mutex_lock(&lock);
	*t = mono_ns() + (uint64_t)cupti_offset();
	pthread_mutex_unlock(&lock);
	return CUPTI_SUCCESS;
}

/* "Detach CUPTI from the running process ... destroys and cleans up all the resources associated
 * with CUPTI in the current process" (cupti_activity.h): what is complete is delivered first, then
 * every kind and callback id is off, the subscriber and the callbacks are gone, and the next
 * client starts from nothing. */
CUptiResult cuptiFinalize(void)
{
	pthread_mutex_lock(&lock);
	if (buf && buf_used)
		retire();
	if (completed)
		deliver();
	enabled = 0;
	memset(rt_sel, 0, sizeof rt_sel);
	memset(drv_sel, 0, sizeof drv_sel);
	sel_ended[0] = sel_ended[1] = host_off = 0; /* (assumed: a finalized CUPTI starts afresh) */
	all_sync = 1;
	requested = NULL;
	completed = NULL;
	timestamp = NULL;
	offset_at = 0;
	holder[0] = 0;
	sub_cb = NULL;
	memset(cb_rt, 0, sizeof cb_rt);
	memset(cb_drv, 0, sizeof cb_drv);
	__atomic_store_n(&subscribed, 0, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&lock);
	return CUPTI_SUCCESS;
}

CUptiResult cuptiGetResultString(CUptiResult result, const char **str)
{
	if (!str)
		return CUPTI_ERROR_INVALID_PARAMETER;
	*str = result == CUPTI_SUCCESS ? "CUPTI_SUCCESS" :
	       result == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED ? "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED" :
	       "CUPTI_ERROR (simulated)";
	return CUPTI_SUCCESS;
}

CUptiResult cuptiGetVersion(uint32_t *version)
{
	if (!version)
		return CUPTI_ERROR_INVALID_PARAMETER;
	*version = SIMGPU_MAJOR == 12 ? 26 : CUPTI_API_VERSION;
	return CUPTI_SUCCESS;
}

/* every callback id's name, as cupti_runtime_cbid.h and cupti_driver_cbid.h name them (the
 * build's cbid_names.h, made from those headers) */
static const char *const rt_names[CUPTI_RUNTIME_TRACE_CBID_SIZE] = {
#define RT(n, v) [v] = #n,
#define DRV(n, v)
#include "cbid_names.h"
#undef RT
#undef DRV
};
static const char *const drv_names[CUPTI_DRIVER_TRACE_CBID_SIZE] = {
#define RT(n, v)
#define DRV(n, v) [v] = #n,
#include "cbid_names.h"
#undef RT
#undef DRV
};

static const char *callback_name(int driver, int cbid)
{
	return driver ? (cbid >= 0 && cbid < CUPTI_DRIVER_TRACE_CBID_SIZE ? drv_names[cbid] : NULL)
		      : (cbid >= 0 && cbid < CUPTI_RUNTIME_TRACE_CBID_SIZE ? rt_names[cbid] : NULL);
}

CUptiResult cuptiGetCallbackName(CUpti_CallbackDomain domain, uint32_t cbid, const char **name)
{
	if (!name)
		return CUPTI_ERROR_INVALID_PARAMETER;
	*name = domain == CUPTI_CB_DOMAIN_RUNTIME_API && cbid < CUPTI_RUNTIME_TRACE_CBID_SIZE ? rt_names[cbid] :
		domain == CUPTI_CB_DOMAIN_DRIVER_API && cbid < CUPTI_DRIVER_TRACE_CBID_SIZE ? drv_names[cbid] : NULL;
	return *name ? CUPTI_SUCCESS : CUPTI_ERROR_INVALID_PARAMETER;
}
