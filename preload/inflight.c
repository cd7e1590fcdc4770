/* Calls in flight, as the writer sees them: a thread publishes the call it is in (internal.h,
 * dsp_call_begin) and clears it on return; the writer reads it here while the thread runs on, and
 * writes down a call that has been in flight long (writer.c, rec_call), so a call that never
 * returns, the rank of a hung job, is in the file. */
#include "internal.h"

#include <stdio.h>
#include <unistd.h>

/* A seqlock read with t0 as the sequence: t0, the rest, t0 again. The thread stores 0 before it
 * changes the rest and a new t0 after, so equal non-zero reads mean the rest is that call's. */
int dsp_call_read(struct dsp_thread *th, struct dsp_call *c)
{
	struct dsp_call *s = dsp_thread_call(th);
	uint64_t t0 = __atomic_load_n(&s->t0, __ATOMIC_ACQUIRE);
	if (!t0)
		return 0;
	c->site = __atomic_load_n(&s->site, __ATOMIC_RELAXED);
	c->fd = __atomic_load_n(&s->fd, __ATOMIC_RELAXED);
	c->kind = __atomic_load_n(&s->kind, __ATOMIC_RELAXED);
	c->nargs = __atomic_load_n(&s->nargs, __ATOMIC_RELAXED);
	if (c->nargs > DSP_CALL_ARGS)
		c->nargs = DSP_CALL_ARGS;
	for (uint32_t i = 0; i < c->nargs; i++)
		c->args[i] = __atomic_load_n(&s->args[i], __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
	c->t0 = t0;
	return __atomic_load_n(&s->t0, __ATOMIC_RELAXED) == t0 && c->kind < DDPSPY_EV_COUNT;
}

/* What the descriptor is now: a file's path, "pipe:[inode]", "socket:[inode]", "anon_inode:..." */
void dsp_fd_path(int64_t fd, char *buf, size_t n)
{
	char link[32];
	buf[0] = 0;
	if (fd < 0 || fd > 1 << 30 || n < 2)
		return;
	snprintf(link, sizeof link, "/proc/self/fd/%d", (int)fd);
	ssize_t got = readlink(link, buf, n - 1);
	buf[got > 0 ? got : 0] = 0;
}
