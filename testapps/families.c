/* Exercises every wrapped family once or a known number of times, so the end-to-end test can
 * check what ddpspy recorded against what happened: counts, bytes, paths and sleep lengths.
 * Usage: families DIR   (DIR: a scratch directory for its files) */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

/* pre-2.33 ABI entry points and fortified reads, as old or fortified binaries call them */
int __xstat(int ver, const char *path, struct stat *st);
int __fxstat(int ver, int fd, struct stat *st);
ssize_t __read_chk(int fd, void *buf, size_t n, size_t buflen);

#define CHECK(x)                                                                          \
	do {                                                                              \
		if (!(x)) {                                                               \
			fprintf(stderr, "families: %s failed at line %d: %s\n", #x, __LINE__, \
				strerror(errno));                                         \
			exit(1);                                                          \
		}                                                                         \
	} while (0)

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t m2 = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t c = PTHREAD_COND_INITIALIZER;
static pthread_barrier_t bar;
static sem_t sem;
static int ready;

static void *helper(void *arg)
{
	(void)arg;
	pthread_setname_np(pthread_self(), "fam-helper");
	/* hold m2 for 30 ms while main blocks on it; m is free only once main waits on c */
	pthread_mutex_lock(&m2);
	pthread_mutex_lock(&m);
	ready = 1;
	pthread_cond_signal(&c);
	pthread_mutex_unlock(&m);
	struct timespec ts = {0, 30 * 1000000};
	nanosleep(&ts, NULL);
	pthread_mutex_unlock(&m2);
	/* main waits 20 ms at the barrier for us */
	usleep(20000);
	pthread_barrier_wait(&bar);
	/* and 15 ms at the semaphore */
	usleep(15000);
	sem_post(&sem);
	return NULL;
}

int main(int argc, char **argv)
{
	char path[4096], buf[8192];
	struct stat st;
	struct statx stx;
	pthread_t th;

	CHECK(argc == 2);
	prctl(PR_SET_NAME, "fam-main");
	/* ---- sleeps: 50 ms, 20 ms, 10 ms ---- */
	struct timespec ts = {0, 50 * 1000000};
	CHECK(nanosleep(&ts, NULL) == 0);
	ts.tv_nsec = 20 * 1000000;
	CHECK(clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, NULL) == 0);
	CHECK(usleep(10000) == 0);
	CHECK(sleep(0) == 0);

	/* ---- files: write 10000 bytes with the raw syscall path (write is not wrapped) ---- */
	snprintf(path, sizeof path, "%s/data.bin", argv[1]);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	CHECK(fd >= 0);
	memset(buf, 'x', sizeof buf);
	CHECK(write(fd, buf, 8192) == 8192 && write(fd, buf, 1808) == 1808);
	CHECK(close(fd) == 0);
	fd = open(path, O_RDONLY);
	CHECK(fd >= 0);
	CHECK(read(fd, buf, 4096) == 4096);                 /* read 4096 */
	CHECK(pread(fd, buf, 1000, 9000) == 1000);          /* pread 1000 at 9000 */
	struct iovec iov[2] = {{buf, 100}, {buf + 100, 200}};
	CHECK(readv(fd, iov, 2) == 300);                    /* readv 300 */
	CHECK(preadv(fd, iov, 2, 0) == 300);                /* preadv 300 */
	CHECK(__read_chk(fd, buf, 50, sizeof buf) == 50);   /* fortified read 50 */
	CHECK(fstat(fd, &st) == 0 && st.st_size == 10000);
	CHECK(__fxstat(1, fd, &st) == 0);
	CHECK(close(fd) == 0);
	int dfd = open(argv[1], O_RDONLY | O_DIRECTORY);
	CHECK(dfd >= 0);
	fd = openat(dfd, "data.bin", O_RDONLY);
	CHECK(fd >= 0 && close(fd) == 0);
	CHECK(close(dfd) == 0);
	CHECK(stat(path, &st) == 0);
	CHECK(lstat(path, &st) == 0);
	CHECK(fstatat(AT_FDCWD, path, &st, 0) == 0);
	CHECK(statx(AT_FDCWD, path, 0, STATX_SIZE, &stx) == 0);
	CHECK(__xstat(1, path, &st) == 0);
	CHECK(stat("/nonexistent/ddpspy", &st) == -1 && errno == ENOENT); /* errno survives */

	/* ---- descriptors of each class, read once each ---- */
	int p[2];
	CHECK(pipe(p) == 0);
	CHECK(write(p[1], "pipe", 4) == 4);
	CHECK(read(p[0], buf, 4) == 4);
	/* poll with a timeout on an empty pipe: blocks 25 ms */
	struct pollfd pfd = {p[0], POLLIN, 0};
	CHECK(poll(&pfd, 1, 25) == 0);
	/* a poll with zero timeout is not recorded */
	CHECK(poll(&pfd, 1, 0) == 0);
	fd_set rs;
	FD_ZERO(&rs);
	FD_SET(p[0], &rs);
	struct timeval tv = {0, 15000};
	CHECK(select(p[0] + 1, &rs, NULL, NULL, &tv) == 0);
	int ep = epoll_create1(0);
	struct epoll_event ev = {.events = EPOLLIN};
	CHECK(ep >= 0 && epoll_ctl(ep, EPOLL_CTL_ADD, p[0], &ev) == 0);
	CHECK(epoll_wait(ep, &ev, 1, 10) == 0);
	close(ep);
	close(p[0]);
	close(p[1]);
	int sv[2];
	CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
	CHECK(write(sv[1], "unix", 4) == 4);
	CHECK(read(sv[0], buf, 4) == 4);
	close(sv[0]);
	close(sv[1]);
	int ls = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t al = sizeof a;
	CHECK(ls >= 0 && bind(ls, (struct sockaddr *)&a, sizeof a) == 0 && listen(ls, 1) == 0);
	CHECK(getsockname(ls, (struct sockaddr *)&a, &al) == 0);
	int cs = socket(AF_INET, SOCK_STREAM, 0);
	CHECK(cs >= 0 && connect(cs, (struct sockaddr *)&a, sizeof a) == 0);
	int as = accept(ls, NULL, NULL);
	CHECK(as >= 0 && write(cs, "tcp!", 4) == 4 && read(as, buf, 4) == 4);
	close(as);
	close(cs);
	close(ls);
	int dn = open("/dev/zero", O_RDONLY);
	CHECK(dn >= 0 && read(dn, buf, 64) == 64);
	close(dn);

	/* ---- threads and waits ---- */
	CHECK(pthread_barrier_init(&bar, NULL, 2) == 0);
	CHECK(sem_init(&sem, 0, 0) == 0);
	pthread_mutex_lock(&m);
	CHECK(pthread_create(&th, NULL, helper, NULL) == 0);
	while (!ready)
		pthread_cond_wait(&c, &m);     /* cond wait: helper can only signal once we wait */
	pthread_mutex_unlock(&m);
	pthread_mutex_lock(&m2);               /* blocks until helper's 30 ms are over */
	pthread_mutex_unlock(&m2);
	pthread_mutex_lock(&m);                /* uncontended: not recorded */
	pthread_mutex_unlock(&m);
	pthread_barrier_wait(&bar);            /* ~20 ms */
	CHECK(sem_wait(&sem) == 0);            /* ~15 ms */
	CHECK(pthread_join(th, NULL) == 0);
	puts("families: done");
	return 0;
}
