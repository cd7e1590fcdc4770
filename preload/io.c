/* File and descriptor I/O: open, read, stat, close and the blocking waits (poll, select,
 * epoll_wait), with every ABI alias (*64, __open_2, __read_chk, the __xstat family) so fortified
 * and pre-2.33 binaries are seen too. Descriptor creators (socket, pipe, accept, dup) only keep
 * the fd class cache right; they record nothing. */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <stdarg.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

/* the wrappers below are the library's exports (exports.map); helpers are static */
#pragma GCC visibility push(default)

DSP_REAL(int, close, (int), NULL)
DSP_REAL(int, close_range, (unsigned, unsigned, int), NULL)
DSP_REAL(void, closefrom, (int), NULL)
DSP_REAL(int, socket, (int, int, int), NULL)
DSP_REAL(int, socketpair, (int, int, int, int[2]), NULL)
DSP_REAL(int, pipe, (int[2]), NULL)
DSP_REAL(int, pipe2, (int[2], int), NULL)
DSP_REAL(int, accept, (int, struct sockaddr *, socklen_t *), NULL)
DSP_REAL(int, accept4, (int, struct sockaddr *, socklen_t *, int), NULL)
DSP_REAL(int, dup, (int), NULL)
DSP_REAL(int, dup2, (int, int), NULL)
DSP_REAL(int, dup3, (int, int, int), NULL)

static int enosys(void)
{
	errno = ENOSYS;
	return -1;
}

/* ---- recording: each takes the guard from the wrapper and gives it back ---- */

/* A path-opened descriptor is a file unless the path or flags say otherwise: classifying it
 * costs no syscall. A FIFO opened by path is the exception, seen as "file". */
static int class_of_path(const char *path, int flags)
{
	if (flags & O_DIRECTORY)
		return DDPSPY_FD_DIR;
	if (path && !strncmp(path, "/dev/", 5) && strncmp(path, "/dev/shm/", 9) &&
	    strncmp(path, "/dev/fd/", 8))
		return DDPSPY_FD_DEVICE;
	return DDPSPY_FD_FILE;
}

static void rec_open(struct dsp_tls *t, uint64_t t0, int fd, int flags, const char *path)
{
	uint64_t t1 = dsp_now();
	int cls = class_of_path(path, flags);
	if (fd >= 0)
		dsp_fdclass_set(fd, cls);
	int64_t a[3] = {fd, flags, cls};
	dsp_emit_full(t, DDPSPY_EV_OPEN, t0, t1, 3, a, path ? path : "",
		      t1 - t0 > dsp_stack_ticks);
	dsp_leave(t);
}

static void rec_read(struct dsp_tls *t, int kind, uint64_t t0, int fd, int64_t bytes,
		     int64_t ret, int nextra, int64_t extra)
{
	uint64_t t1 = dsp_now();
	int64_t a[5] = {fd, dsp_fdclass(fd), bytes, ret, extra};
	dsp_emit_wait(t, kind, t0, t1, 4 + nextra, a);
	dsp_leave(t);
}

static void rec_stat(struct dsp_tls *t, uint64_t t0, int rc, const char *path)
{
	uint64_t t1 = dsp_now();
	int64_t a[1] = {rc};
	dsp_emit_full(t, DDPSPY_EV_STAT, t0, t1, 1, a, path ? path : "",
		      t1 - t0 > dsp_stack_ticks);
	dsp_leave(t);
}

static void rec_fstat(struct dsp_tls *t, uint64_t t0, int fd, int rc)
{
	uint64_t t1 = dsp_now();
	int64_t a[3] = {fd, dsp_fdclass(fd), rc};
	dsp_emit(t, DDPSPY_EV_FSTAT, t0, t1, 3, a);
	dsp_leave(t);
}

static void rec_wait(struct dsp_tls *t, int kind, uint64_t t0, int nargs, int64_t a0, int64_t a1,
		     int64_t a2, int64_t a3)
{
	uint64_t t1 = dsp_now();
	int64_t a[4] = {a0, a1, a2, a3};
	dsp_emit_wait(t, kind, t0, t1, nargs, a);
	dsp_leave(t);
}

static mode_t mode_arg(int flags, va_list ap)
{
	return flags & (O_CREAT | O_TMPFILE) ? (mode_t)va_arg(ap, int) : 0;
}

static int64_t iov_bytes(const struct iovec *iov, int n)
{
	int64_t b = 0;
	for (int i = 0; iov && i < n; i++)
		b += (int64_t)iov[i].iov_len;
	return b;
}

/* open, read, stat and the waits on descriptors, with every ABI alias: one row each in
 * tools/gen_io.py's table */
#include "io_wrappers.inc"

/* ---- close ----
 * The trace file's descriptor is never the program's to close or replace: a file the program
 * opened next could get its number, and the writer would put trace frames into it. Closing it is
 * pretended (the program cannot tell), ranges skip it, and dup2/dup3 onto it first move the trace
 * file to another number (writer.c). This holds inside intercepted library calls too; ddpspy's
 * own close clears dsp_own_fd first. */
static inline int own_fd(void)
{
	return __atomic_load_n(&dsp_own_fd, __ATOMIC_SEQ_CST);
}

/* fd is ddpspy's: the trace file's or libunwind's (from libunwind itself it is not) */
static inline int ours(int fd)
{
	return fd >= 0 && (fd == own_fd() || (dsp_unwind_fd(fd) && !dsp_tls.unwinding));
}

int close(int fd)
{
	if (!get_close())
		return enosys();
	struct dsp_tls *t = &dsp_tls;
	if (unlikely(ours(fd)))
		return 0;
	if (unlikely(t->unwinding) && dsp_unwind_fd(fd)) /* libunwind closing its pipe */
		for (int i = 0; i < 2; i++)
			if (__atomic_load_n(&dsp_unwind_fds[i], __ATOMIC_RELAXED) == fd)
				__atomic_store_n(&dsp_unwind_fds[i], -1, __ATOMIC_RELAXED);
	if (!dsp_enter(t)) {
		dsp_fdclass_forget(fd);
		return real_close(fd);
	}
	int cls = dsp_fdclass_cached(fd); /* no probe for a descriptor's last use */
	dsp_fdclass_forget(fd);            /* before the number can be handed out again */
	uint64_t t0 = dsp_now();
	int rc = real_close(fd);
	uint64_t t1 = dsp_now();
	int64_t a[3] = {fd, cls, rc};
	dsp_emit(t, DDPSPY_EV_CLOSE, t0, t1, 3, a);
	dsp_leave(t);
	return rc;
}

/* close_range(2) over ddpspy's descriptors: the ranges between them. Marking the range
 * close-on-exec passes whole (ddpspy's descriptors already are). */
static int close_gaps(unsigned lo, unsigned hi, int flags)
{
	int mine[3] = {own_fd(), -1, -1}, n = 0, rc = 0;
	if (!dsp_tls.unwinding) {
		mine[1] = __atomic_load_n(&dsp_unwind_fds[0], __ATOMIC_RELAXED);
		mine[2] = __atomic_load_n(&dsp_unwind_fds[1], __ATOMIC_RELAXED);
	}
	unsigned skip[3];
	for (int i = 0; i < 3; i++)
		if (mine[i] >= 0 && (unsigned)mine[i] >= lo && (unsigned)mine[i] <= hi)
			skip[n++] = (unsigned)mine[i];
	for (int i = 1; i < n; i++) /* (three at most: insertion sort) */
		for (int j = i; j > 0 && skip[j] < skip[j - 1]; j--) {
			unsigned x = skip[j];
			skip[j] = skip[j - 1];
			skip[j - 1] = x;
		}
	for (int i = 0; i <= n && rc == 0; i++) {
		unsigned a = i ? skip[i - 1] + 1 : lo, b = i < n ? skip[i] - 1 : hi;
		if (i < n && skip[i] == 0)
			continue;
		if (a <= b && (i == 0 || skip[i - 1] < ~0u))
			rc = real_close_range(a, b, flags);
	}
	return rc;
}

int close_range(unsigned lo, unsigned hi, int flags)
{
	if (!get_close_range())
		return enosys();
	if ((flags & CLOSE_RANGE_CLOEXEC) || lo > hi)
		return real_close_range(lo, hi, flags);
	return close_gaps(lo, hi, flags);
}

void closefrom(int lo)
{
	if (lo < 0)
		lo = 0;
	if (get_close_range() && close_gaps((unsigned)lo, ~0u, 0) == 0)
		return;
	/* no close_range (kernels before 5.9): one by one up to the highest of ours, glibc above */
	int top = own_fd();
	for (int i = 0; i < 2; i++)
		if (__atomic_load_n(&dsp_unwind_fds[i], __ATOMIC_RELAXED) > top)
			top = __atomic_load_n(&dsp_unwind_fds[i], __ATOMIC_RELAXED);
	for (int fd = lo; fd <= top; fd++)
		if (!ours(fd) && get_close())
			real_close(fd);
	if (get_closefrom())
		real_closefrom(top + 1 > lo ? top + 1 : lo);
}

/* ---- descriptor creators: keep the class cache right, record nothing ---- */
static int class_of_socket(int domain, int type)
{
	type &= ~(SOCK_NONBLOCK | SOCK_CLOEXEC);
	if (domain == AF_UNIX)
		return DDPSPY_FD_UNIX;
	if (domain == AF_INET || domain == AF_INET6)
		return type == SOCK_STREAM ? DDPSPY_FD_TCP
		       : type == SOCK_DGRAM ? DDPSPY_FD_UDP : DDPSPY_FD_SOCKET;
	return DDPSPY_FD_SOCKET;
}

int socket(int domain, int type, int proto)
{
	if (!get_socket())
		return enosys();
	int fd = real_socket(domain, type, proto);
	dsp_fdclass_set(fd, class_of_socket(domain, type));
	return fd;
}

int socketpair(int domain, int type, int proto, int sv[2])
{
	if (!get_socketpair())
		return enosys();
	int rc = real_socketpair(domain, type, proto, sv);
	if (rc == 0) {
		dsp_fdclass_set(sv[0], class_of_socket(domain, type));
		dsp_fdclass_set(sv[1], class_of_socket(domain, type));
	}
	return rc;
}

int pipe(int fds[2])
{
	if (!get_pipe())
		return enosys();
	int rc = real_pipe(fds);
	if (rc == 0) {
		dsp_fdclass_set(fds[0], DDPSPY_FD_PIPE);
		dsp_fdclass_set(fds[1], DDPSPY_FD_PIPE);
	}
	return rc;
}

int pipe2(int fds[2], int flags)
{
	if (!get_pipe2())
		return enosys();
	int rc = real_pipe2(fds, flags);
	if (rc == 0) {
		dsp_fdclass_set(fds[0], DDPSPY_FD_PIPE);
		dsp_fdclass_set(fds[1], DDPSPY_FD_PIPE);
		if (dsp_tls.unwinding) { /* libunwind's validation pipe: ddpspy's own */
			__atomic_store_n(&dsp_unwind_fds[0], fds[0], __ATOMIC_RELAXED);
			__atomic_store_n(&dsp_unwind_fds[1], fds[1], __ATOMIC_RELAXED);
		}
	}
	return rc;
}

/* An accepted or duplicated descriptor is what its origin is; an unknown origin stays unknown
 * and is probed on first use. */
static void inherit_class(int newfd, int from)
{
	int saved = errno;
	dsp_fdclass_forget(newfd);
	if (newfd >= 0 && from >= 0)
		dsp_fdclass_set(newfd, dsp_fdclass(from));
	errno = saved;
}

int accept(int fd, struct sockaddr *addr, socklen_t *len)
{
	if (!get_accept())
		return enosys();
	int rc = real_accept(fd, addr, len);
	inherit_class(rc, fd);
	return rc;
}

int accept4(int fd, struct sockaddr *addr, socklen_t *len, int flags)
{
	if (!get_accept4())
		return enosys();
	int rc = real_accept4(fd, addr, len, flags);
	inherit_class(rc, fd);
	return rc;
}

int dup(int fd)
{
	if (!get_dup())
		return enosys();
	int rc = real_dup(fd);
	inherit_class(rc, fd);
	return rc;
}

/* EBUSY from dup2/dup3 is Linux's word for "an open() is installing a file at that number right
 * now": ddpspy's own opens in the shared table (its trace file, once) must not make the program's
 * dup2 fail, so the wrapper tries again while the kernel says so, a bounded number of times. */
#define BUSY_TRIES 1000

int dup2(int fd, int newfd)
{
	if (!get_dup2())
		return enosys();
	int moved = newfd >= 0 && newfd == own_fd() && fd != newfd && dsp_own_fd_move(newfd);
	if (fd != newfd && dsp_unwind_fd(newfd) && !dsp_tls.unwinding)
		dsp_stack_disable(); /* libunwind must never touch that number again */
	int rc = real_dup2(fd, newfd);
	for (int i = 0; rc < 0 && errno == EBUSY && i < BUSY_TRIES; i++) {
		sched_yield();
		rc = real_dup2(fd, newfd);
	}
	if (rc < 0 && moved)
		real_close(newfd); /* the trace file's old number, still open: the program's again */
	if (rc >= 0 && rc != fd)
		inherit_class(rc, fd);
	return rc;
}

int dup3(int fd, int newfd, int flags)
{
	if (!get_dup3())
		return enosys();
	int moved = newfd >= 0 && newfd == own_fd() && fd != newfd && dsp_own_fd_move(newfd);
	if (fd != newfd && dsp_unwind_fd(newfd) && !dsp_tls.unwinding)
		dsp_stack_disable(); /* libunwind must never touch that number again */
	int rc = real_dup3(fd, newfd, flags);
	for (int i = 0; rc < 0 && errno == EBUSY && i < BUSY_TRIES; i++) {
		sched_yield();
		rc = real_dup3(fd, newfd, flags);
	}
	if (rc < 0 && moved)
		real_close(newfd);
	inherit_class(rc, fd);
	return rc;
}
