/* Calls in flight, as the writer sees them: a thread publishes the call it is in (internal.h,
 * dsp_call_begin) and clears it on return; the writer reads it here while the thread runs on, and
 * writes down a call that has been in flight long (writer.c, rec_call), so a call that never
 * returns, the rank of a hung job, is in the file. */
#include "internal.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/uio.h>

/* A seqlock read with t0 as the sequence: t0, the rest, t0 again. The thread stores 0 before it
 * changes the rest and a new t0 after, so equal non-zero reads mean the rest is that call's. */
int dsp_call_read(struct dsp_thread *th, struct dsp_call *c)
{
	struct dsp_call *s = dsp_thread_call(th);
	uint64_t t0 = __atomic_load_n(&s->t0, __ATOMIC_ACQUIRE);
	if (!t0)
		return 0;
	c->site = __atomic_load_n(&s->site, __ATOMIC_RELAXED);
	c->fp = __atomic_load_n(&s->fp, __ATOMIC_RELAXED);
	c->fd = __atomic_load_n(&s->fd, __ATOMIC_RELAXED);
	c->str = __atomic_load_n(&s->str, __ATOMIC_RELAXED);
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

ssize_t dsp_peek(uintptr_t a, void *buf, size_t n)
{
	uintptr_t cut = (a | 4095) + 1; /* (the next page: a read crossing into an unmapped one stops there) */
	size_t first = cut - a < n ? cut - a : n;
	struct iovec local = { buf, n };
	struct iovec remote[2] = { { (void *)a, first }, { (void *)cut, n - first } };
	return n ? process_vm_readv(dsp_pid ? dsp_pid : getpid(), &local, 1, remote, n > first ? 2 : 1, 0) : 0;
}

/* The path a call in flight was given (c->str, read by dsp_call_read), copied without trusting
 * the address (dsp_peek), and kept only if the thread is still in that call afterwards (the path
 * was the caller's throughout). "" otherwise. */
void dsp_call_path(struct dsp_thread *th, const struct dsp_call *c, char *buf, size_t n)
{
	buf[0] = 0;
	if (!c->str || n < 2)
		return;
	ssize_t got = dsp_peek(c->str, buf, n - 1);
	if (got <= 0 || __atomic_load_n(&dsp_thread_call(th)->t0, __ATOMIC_ACQUIRE) != c->t0)
		buf[0] = 0;
	else if (!memchr(buf, 0, (size_t)got))
		buf[got] = 0; /* (a longer path: its first n - 1 bytes) */
}
