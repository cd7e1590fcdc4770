/* The system ids of the threads that make CUDA calls, for a CUPTI client that asked for them
 * (cuptiSetThreadIdType(CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM): cupti/share.c). The real CUPTI
 * keeps naming threads by its default id, the low 32 bits of pthread_self(), as ddpspy's file
 * does; the client's copies are given each thread's gettid, looked up among the threads ddpspy's
 * registry knows (preload/registry.c). One default id may name several threads in turn (glibc
 * hands a gone thread's stack, and its pthread_t, to the next one): each is known from when it
 * joined the registry, and a record names the last to have joined by the record's time. */
#include "../preload/internal.h"
#include "cupti_int.h"

#include <unistd.h>

#define TIDS 4096 /* threads known (a power of two): entries are never taken back */

/* CUPTI's default id of a thread, its system id, and when it joined (dsp_mono_ns) */
static struct { uint32_t id; int tid; uint64_t since; } tids[TIDS];

static uint32_t slot(uint32_t id)
{
	return (id * 2654435761u) >> 20 & (TIDS - 1);
}

/* thread th into tids, once. A thread joins at its start where ddpspy saw it start
 * (preload/pthread.c), else at its first event; the main thread, whose pthread_t no other thread
 * had before it, counts from the start. */
static void learn(struct dsp_thread *th, void *pid)
{
	uint32_t id = (uint32_t)dsp_thread_pthread(th);
	int tid = dsp_thread_tid(th);
	for (uint32_t i = slot(id), n = 0; id && n < TIDS; i = (i + 1) & (TIDS - 1), n++) {
		if (tids[i].id == id && tids[i].tid == tid)
			return;
		if (!tids[i].id) {
			tids[i].id = id;
			tids[i].tid = tid;
			tids[i].since = tid == *(int *)pid ? 0 : dsp_thread_since(th);
			return;
		}
	}
}

void dsp_tids_learn(void)
{
	int pid = (int)getpid();
	dsp_registry_walk(learn, &pid);
}

int dsp_tid_system(uint32_t *id, uint64_t t)
{
	uint32_t tid = 0;
	uint64_t best = 0;
	for (uint32_t i = slot(*id), n = 0; *id && n < TIDS && tids[i].id; i = (i + 1) & (TIDS - 1), n++)
		if (tids[i].id == *id && tids[i].since <= t && (!tid || tids[i].since >= best)) {
			tid = (uint32_t)tids[i].tid;
			best = tids[i].since;
		}
	if (tid)
		*id = tid;
	return tid != 0;
}
