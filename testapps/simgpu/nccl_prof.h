/* The stand-in libnccl.so.2's profiler plugin calls (nccl_prof.c), for nccl.c. */
#ifndef SIMGPU_NCCL_PROF_H
#define SIMGPU_NCCL_PROF_H

#include <stddef.h>
#include <stdint.h>

/* a collective's function, as the plugin's sequence numbers count them: one counter each */
enum { PF_BROADCAST, PF_REDUCE, PF_ALLGATHER, PF_REDUCESCATTER, PF_ALLREDUCE, PF_ALLTOALL, PF_GATHER, PF_SCATTER,
       PROF_FUNCS };

struct prof_comm {            /* a communicator's part */
	void *ctx;            /* the plugin's context for it */
	int on, rank;
	uint64_t seq[PROF_FUNCS]; /* collectives launched, by function */
	int pending;          /* kernels whose events are not made yet */
};

/* at a communicator's creation (hash: the same on every rank), and at its end */
void prof_init(struct prof_comm *p, uint64_t hash, int nranks, int rank);
void prof_finalize(struct prof_comm *p);
/* a collective call, on the calling thread inside depth groups of the program's: its CollApi
 * event's handle (NULL none), under the thread's GroupApi event, started if none is; and the end of
 * the outermost group (or of an ungrouped call): that GroupApi event's stop */
void *prof_coll_api(struct prof_comm *p, int func, size_t count, const char *dtype, int root, void *stream,
		    int depth, int captured);
void prof_group_api_end(void);
/* a collective launched now, from the launching thread (replay: a graph's replay of a captured
 * one, from the device's): its Coll event under its call's CollApi event api (NULL when none) */
void *prof_coll(struct prof_comm *p, int func, const void *src, void *dst, size_t count, int root, const char *dtype,
		void *api, int replay);
/* and once launched: kernel 0 when it launched none (world size 1) */
void prof_coll_launched(struct prof_comm *p, void *coll, int kernel);
/* its kernel's run, start and end on CLOCK_MONOTONIC (the device's thread) */
void prof_coll_ran(struct prof_comm *p, void *coll, uint64_t start, uint64_t end);

#endif
