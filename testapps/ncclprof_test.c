/* A profiler plugin for NCCL (NVIDIA/nccl ext-profiler, version 5: common/nccl_profiler.h) that
 * writes what NCCL tells it, one line an event, to $NCCLPROF_OUT.<pid>: what the tests hold the
 * stand-in libnccl.so.2's plugin calls to (tests/e2e/test_nccl.py). Built as
 * build/testapps/libnccl-profiler-test.so (NCCL_PROFILER_PLUGIN=test finds it on the library path).
 * NCCLPROF_MASK: the activation mask it asks for (default Coll and KernelCh).
 *   init COMM NRANKS RANK            a communicator
 *   api COMM ID FUNC COUNT CAPTURED  a collective call's CollApi event (ID: from 0 in the process;
 *                                    CAPTURED 1: its stream was capturing into a CUDA graph)
 *   coll COMM SEQ FUNC COUNT TYPE API  a collective's Coll event (API: its parent CollApi's ID, -1 none)
 *   kernel COMM SEQ START END CH     a KernelCh event: GPU start and end (%globaltimer ns), channel
 *   stop COMM SEQ                    the Coll event stopped
 *   finalize COMM */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <unistd.h>

#include "../common/nccl_profiler.h"

static FILE *out;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

struct ctx { uint64_t comm; };
struct ev { uint64_t type; struct ctx *c; uint64_t seq, start, end; struct ev *parent; int channel; long id; };
static long apis; /* CollApi events so far (theirs are never freed: a Coll event names one as parent) */

static void line(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
#include <stdarg.h>
static void line(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	pthread_mutex_lock(&mu);
	if (out) {
		vfprintf(out, fmt, ap);
		fflush(out);
	}
	pthread_mutex_unlock(&mu);
	va_end(ap);
}

static int init(void **context, uint64_t comm, int *mask, const char *name, int nnodes, int nranks, int rank,
		ncclp_logger_t log)
{
	(void)name, (void)nnodes, (void)log;
	pthread_mutex_lock(&mu);
	if (!out && getenv("NCCLPROF_OUT")) {
		char path[4096];
		snprintf(path, sizeof path, "%s.%d", getenv("NCCLPROF_OUT"), (int)getpid());
		out = fopen(path, "a");
	}
	pthread_mutex_unlock(&mu);
	struct ctx *c = calloc(1, sizeof *c);
	if (!c)
		return 1;
	c->comm = comm;
	*context = c;
	*mask = getenv("NCCLPROF_MASK") ? atoi(getenv("NCCLPROF_MASK")) : NCCLP_COLL | NCCLP_KERNEL_CH;
	line("init %llu %d %d\n", (unsigned long long)comm, nranks, rank);
	return 0;
}

static int start(void *context, void **handle, ncclp_descr_v5_t *d)
{
	struct ctx *c = context;
	struct ev *e = calloc(1, sizeof *e);
	*handle = e;
	if (!e)
		return 0;
	e->type = d->type;
	e->c = c;
	if (d->type == NCCLP_COLL_API) {
		e->id = __atomic_fetch_add(&apis, 1, __ATOMIC_RELAXED);
		line("api %llu %ld %s %zu %d\n", (unsigned long long)c->comm, e->id, d->collApi.func, d->collApi.count,
		     (int)d->collApi.graphCaptured);
	} else if (d->type == NCCLP_COLL) {
		const struct ev *p = d->parentObj;
		e->seq = d->coll.seqNumber;
		line("coll %llu %llu %s %zu %s %ld\n", (unsigned long long)c->comm, (unsigned long long)e->seq, d->coll.func,
		     d->coll.count, d->coll.datatype, p && p->type == NCCLP_COLL_API ? p->id : -1L);
	} else if (d->type == NCCLP_KERNEL_CH) {
		e->parent = d->parentObj;
		e->start = d->kernelCh.pTimer;
		e->channel = d->kernelCh.channelId;
	}
	return 0;
}

static int record(void *handle, int state, ncclp_state_args_v5_t *a)
{
	struct ev *e = handle;
	if (e && e->type == NCCLP_KERNEL_CH && state == NCCLP_KERNEL_CH_STOP && a)
		e->end = a->kernelCh.pTimer;
	return 0;
}

static int stop(void *handle)
{
	struct ev *e = handle;
	if (!e)
		return 0;
	if (e->type == NCCLP_KERNEL_CH)
		line("kernel %llu %llu %llu %llu %d\n", (unsigned long long)e->c->comm,
		     (unsigned long long)(e->parent ? e->parent->seq : ~0ull), (unsigned long long)e->start,
		     (unsigned long long)e->end, e->channel);
	else if (e->type == NCCLP_COLL)
		line("stop %llu %llu\n", (unsigned long long)e->c->comm, (unsigned long long)e->seq);
	if (e->type != NCCLP_COLL_API)
		free(e);
	return 0;
}

static int finalize(void *context)
{
	struct ctx *c = context;
	line("finalize %llu\n", (unsigned long long)c->comm);
	free(c);
	return 0;
}

__attribute__((visibility("default"))) ncclp_v5_t ncclProfiler_v5 = { "ddpspy-test", init, start, stop, record,
									finalize };
