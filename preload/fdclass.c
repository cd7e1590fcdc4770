/* What kind of thing a file descriptor is: file, pipe, local or network socket, device.
 * Wrappers that create descriptors (open, socket, pipe, accept) fill the cache for free;
 * anything else is probed once, on its first use, and forgotten at close. */
#include "internal.h"

#include <errno.h>
#include <sys/socket.h>
#include <sys/stat.h>

#define FD_CACHE 65536

/* class + 1, so 0 means "not known yet"; byte stores, races between threads are benign
 * (two probes of the same fd agree) */
static unsigned char cache[FD_CACHE];

/* the class a file's mode says; DDPSPY_FD_SOCKET for any socket */
static int class_of_mode(mode_t m)
{
	switch (m & S_IFMT) {
	case S_IFREG:
		return DDPSPY_FD_FILE;
	case S_IFDIR:
		return DDPSPY_FD_DIR;
	case S_IFIFO:
		return DDPSPY_FD_PIPE;
	case S_IFCHR:
	case S_IFBLK:
		return DDPSPY_FD_DEVICE;
	case S_IFSOCK:
		return DDPSPY_FD_SOCKET;
	default:
		return DDPSPY_FD_ANON; /* eventfd, epoll, timerfd...: mode 0 anonymous inodes */
	}
}

static int probe(int fd)
{
	struct stat st;
	int v;
	socklen_t len = sizeof v;

	if (fstat(fd, &st) < 0)
		return DDPSPY_FD_UNKNOWN;
	int c = class_of_mode(st.st_mode);
	if (c != DDPSPY_FD_SOCKET)
		return c;
	if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &v, &len) < 0)
		return DDPSPY_FD_SOCKET;
	if (v == AF_UNIX)
		return DDPSPY_FD_UNIX;
	if (v != AF_INET && v != AF_INET6)
		return DDPSPY_FD_SOCKET;
	len = sizeof v;
	if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &v, &len) < 0)
		return DDPSPY_FD_SOCKET;
	return v == SOCK_STREAM ? DDPSPY_FD_TCP : v == SOCK_DGRAM ? DDPSPY_FD_UDP : DDPSPY_FD_SOCKET;
}

int dsp_fdclass_probe(int fd)
{
	struct dsp_tls *t = &dsp_tls;
	int saved = errno;
	t->guard++; /* our fstat is not the program's: not recorded */
	int c = probe(fd);
	t->guard--;
	errno = saved;
	return c;
}

int dsp_pathclass_probe(const char *path)
{
	struct dsp_tls *t = &dsp_tls;
	struct stat st;
	int saved = errno;
	t->guard++; /* our stat is not the program's: not recorded */
	int c = stat(path, &st) < 0 ? DDPSPY_FD_UNKNOWN : class_of_mode(st.st_mode);
	t->guard--;
	errno = saved;
	return c == DDPSPY_FD_SOCKET ? DDPSPY_FD_UNIX : c; /* (a socket with a path is a local one) */
}

int dsp_fdclass(int fd)
{
	if (fd < 0)
		return DDPSPY_FD_UNKNOWN;
	if (fd >= FD_CACHE)
		return dsp_fdclass_probe(fd);
	int c = __atomic_load_n(&cache[fd], __ATOMIC_RELAXED);
	if (likely(c))
		return c - 1;
	c = dsp_fdclass_probe(fd);
	__atomic_store_n(&cache[fd], (unsigned char)(c + 1), __ATOMIC_RELAXED);
	return c;
}

int dsp_fdclass_cached(int fd)
{
	if (fd < 0 || fd >= FD_CACHE)
		return DDPSPY_FD_UNKNOWN;
	int c = __atomic_load_n(&cache[fd], __ATOMIC_RELAXED);
	return c ? c - 1 : DDPSPY_FD_UNKNOWN;
}

void dsp_fdclass_set(int fd, int cls)
{
	if (fd >= 0 && fd < FD_CACHE)
		__atomic_store_n(&cache[fd], (unsigned char)(cls + 1), __ATOMIC_RELAXED);
}

void dsp_fdclass_forget(int fd)
{
	if (fd >= 0 && fd < FD_CACHE)
		__atomic_store_n(&cache[fd], 0, __ATOMIC_RELAXED);
}
