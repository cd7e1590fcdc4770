/* Processes: fork without exec (a DataLoader worker), exec, and _exit.
 *   forker fork K     K children each stat a path and _exit(0) (as Python's os._exit does)
 *   forker exec       stats, then execs itself as "forker after-exec" (same pid, second file)
 *   forker spin       records forever (for the SIGKILL and SIGTERM tests)
 *   forker segv       records, then dereferences NULL (a crash)
 *   forker closeall   records, closes every descriptor from 3 up (as daemons do), records
 *   forker fdgame HOW FILE  records, takes the descriptor numbers from 3 up away in one of three
 *                     ways, then writes 40 lines to FILE over 0.4 s while recording: FILE must
 *                     hold exactly those lines. HOW: closerange (close_range(3, ~0U, 0)), rawclose
 *                     (the close_range syscall, past any wrapper), dup2 (FILE's descriptor duplicated
 *                     onto every number from 3 to 63)
 *   forker forkunwind N  two threads block 1.2 ms at a time (each gets a call stack, which walks
 *                        the loaded objects) while the main thread forks N children that walk
 *                        the loaded objects and exec /bin/true, as mpirun's children do
 *   forker forkearly     forks at once, while ddpspy's writer thread is still starting (it
 *                        loads libunwind then); the child walks the loaded objects and execs
 *   forker fdlowest S    records and starts eight threads that block 1.2 ms at a time, then waits
 *                        0.3 s: ddpspy's descriptors in the program's table (the trace file,
 *                        libunwind's pipe) are opened once, by then. For S seconds the main
 *                        thread then opens /dev/null,
 *                        closes it, opens it again and must get the same number (the lowest
 *                        free), dup2s it onto the next number and must find /dev/null there;
 *                        prints how often each failed and exits 1 if any did
 *   forker noshare CMD...  execs CMD under a seccomp filter that refuses unshare(2) with EPERM
 *                          (as Docker's default profile does)
 *   forker spawns N      N children that must find their descriptors as their parent set them:
 *                        a shell running cat with its output redirected (by posix_spawn, by vfork
 *                        and exec, by system()) and a fork child that dup2s /dev/null onto 1 and 2
 *                        and execs cat, in turn; prints one JSON line, exits 1 if any child failed
 *                        (cat found "standard output: Bad file descriptor" once under the preload) */
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <pthread.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static volatile int stop;

static void *blocker(void *arg)
{
	(void)arg;
	while (!stop) {
		struct timespec ts = {0, 1200000};
		nanosleep(&ts, NULL);
	}
	return NULL;
}

static int count_object(struct dl_phdr_info *info, size_t size, void *n)
{
	(void)info;
	(void)size;
	++*(int *)n;
	return 0;
}

/* after fork: the child walks the loaded objects and execs /bin/true; the parent returns 0 when
 * the child exited 0 */
static int walk_and_exec(pid_t p)
{
	if (p == 0) {
		int n = 0;
		dl_iterate_phdr(count_object, &n);
		execl("/bin/true", "true", (char *)NULL);
		_exit(n > 0 ? 0 : 1);
	}
	int status;
	return p > 0 && waitpid(p, &status, 0) == p && WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}

/* forker spawns N (above): the i-th child's exit status, or -1 when it could not be started */
static int spawn_one(int i)
{
	extern char **environ;
	static const char *const cmds[] = {
		"cat /etc/hostname > /dev/null",
		"exec 3>/dev/null; cat /etc/hostname 1>&3 2>&3",
		"exec 0</dev/null; cat /etc/hostname >/dev/null 2>/dev/null",
	};
	const char *cmd = cmds[i % 3];
	char *argv[] = { "sh", "-c", (char *)cmd, NULL };
	pid_t pid = -1;
	int st = 0;
	switch (i % 4) {
	case 0:
		if (posix_spawn(&pid, "/bin/sh", NULL, NULL, argv, environ) != 0)
			return -1;
		break;
	case 1:
		pid = vfork();
		if (pid == 0) {
			execve("/bin/sh", argv, environ);
			_exit(127);
		}
		break;
	case 2:
		st = system(cmd);
		return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
	default:
		pid = fork();
		if (pid == 0) {
			int fd = open("/dev/null", O_WRONLY);
			if (fd < 0 || dup2(fd, 1) < 0 || dup2(fd, 2) < 0)
				_exit(126);
			close(fd);
			execl("/bin/cat", "cat", "/etc/hostname", (char *)NULL);
			_exit(127);
		}
	}
	if (pid < 0 || waitpid(pid, &st, 0) != pid)
		return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

int main(int argc, char **argv)
{
	struct stat st;
	if (argc >= 3 && !strcmp(argv[1], "fork")) {
		int k = atoi(argv[2]);
		stat("/nonexistent/ddpspy-parent", &st);
		for (int i = 0; i < k; i++) {
			pid_t p = fork();
			if (p == 0) {
				for (int j = 0; j < 10; j++)
					stat("/nonexistent/ddpspy-child", &st);
				usleep(20000);
				_exit(0);
			}
		}
		for (int i = 0; i < k; i++)
			wait(NULL);
		stat("/nonexistent/ddpspy-parent", &st);
		return 0;
	}
	if (argc >= 2 && !strcmp(argv[1], "forkearly")) {
		pid_t p = fork();
		return walk_and_exec(p);
	}
	if (argc >= 3 && !strcmp(argv[1], "forkunwind")) {
		pthread_t th[2];
		for (int i = 0; i < 2; i++)
			pthread_create(&th[i], NULL, blocker, NULL);
		int k = atoi(argv[2]), ok = 0;
		for (int i = 0; i < k; i++) {
			struct timespec ts = {0, 300000 + 97000 * (i % 10)}; /* land at varied phases */
			nanosleep(&ts, NULL);
			ok += walk_and_exec(fork()) == 0;
		}
		stop = 1;
		for (int i = 0; i < 2; i++)
			pthread_join(th[i], NULL);
		printf("%d of %d children exited\n", ok, k);
		return ok == k ? 0 : 1;
	}
	if (argc >= 2 && !strcmp(argv[1], "exec")) {
		stat("/nonexistent/ddpspy-before-exec", &st);
		execl("/proc/self/exe", "forker", "after-exec", (char *)NULL);
		return 1;
	}
	if (argc >= 2 && !strcmp(argv[1], "after-exec")) {
		stat("/nonexistent/ddpspy-after-exec", &st);
		return 0;
	}
	if (argc >= 2 && !strcmp(argv[1], "segv")) {
		stat("/nonexistent/ddpspy-before-crash", &st);
		*(volatile int *)(uintptr_t)(argc - 2) = 1; /* argc is 2: a NULL store */
		return 0;
	}
	if (argc >= 2 && !strcmp(argv[1], "closeall")) {
		stat("/nonexistent/ddpspy-before-closeall", &st);
		usleep(300000); /* the writer has created its file by now */
		for (int fd = 3; fd < 1024; fd++)
			close(fd);
		int fd = open("/dev/null", O_RDONLY); /* would take the trace file's number */
		stat("/nonexistent/ddpspy-after-closeall", &st);
		close(fd);
		return 0;
	}
	if (argc >= 4 && !strcmp(argv[1], "fdgame")) {
		const char *how = argv[2];
		stat("/nonexistent/ddpspy-before-fdgame", &st);
		usleep(300000); /* the writer has created its file by now */
		int fd = -1;
		if (!strcmp(how, "closerange") || !strcmp(how, "rawclose")) {
			int rc = !strcmp(how, "closerange") ? close_range(3, ~0U, 0)
							   : (int)syscall(SYS_close_range, 3, ~0U, 0);
			if (rc != 0) {
				perror("close_range");
				return 1;
			}
			fd = open(argv[3], O_WRONLY | O_CREAT | O_TRUNC, 0644); /* the trace file's number */
		} else if (!strcmp(how, "dup2")) {
			int f = open(argv[3], O_WRONLY | O_CREAT | O_TRUNC, 0644);
			for (int n = 3; n < 64; n++)
				if (n != f && dup2(f, n) != n) {
					perror("dup2");
					return 1;
				}
			fd = 63;
		}
		if (fd < 0) {
			perror(argv[3]);
			return 1;
		}
		for (int i = 0; i < 40; i++) {
			char line[64];
			int n = snprintf(line, sizeof line, "line %d of the program's own output\n", i);
			stat("/nonexistent/ddpspy-during-fdgame", &st);
			if (write(fd, line, (size_t)n) != n) {
				perror("write");
				return 1;
			}
			usleep(10000); /* several writer flushes happen meanwhile */
		}
		return 0;
	}
	if (argc >= 3 && !strcmp(argv[1], "fdlowest")) {
		pthread_t idle[8];
		stat("/nonexistent/ddpspy-before-fdlowest", &st);
		for (int i = 0; i < 8; i++)
			pthread_create(&idle[i], NULL, blocker, NULL);
		usleep(300000);
		struct stat null;
		stat("/dev/null", &null);
		struct timespec t0, now;
		clock_gettime(CLOCK_MONOTONIC, &t0);
		long rounds = 0, moved = 0, busy = 0, lost = 0;
		do {
			int a = open("/dev/null", O_RDONLY);
			close(a);
			int b = open("/dev/null", O_RDONLY);
			moved += b != a;
			if (dup2(b, b + 1) != b + 1)
				busy += errno == EBUSY;
			else {
				struct stat there;
				lost += fstat(b + 1, &there) != 0 || there.st_rdev != null.st_rdev;
				close(b + 1);
			}
			close(b);
			rounds++;
			clock_gettime(CLOCK_MONOTONIC, &now);
		} while (now.tv_sec - t0.tv_sec + (now.tv_nsec - t0.tv_nsec) * 1e-9 < atof(argv[2]));
		stop = 1;
		for (int i = 0; i < 8; i++)
			pthread_join(idle[i], NULL);
		printf("%ld rounds: %ld reopened elsewhere, %ld dup2 EBUSY, %ld dup2 targets lost\n", rounds, moved, busy, lost);
		return moved || busy || lost;
	}
	if (argc >= 3 && !strcmp(argv[1], "spawns")) {
		int n = atoi(argv[2]), failed = 0, first = -1, rc0 = 0;
		for (int i = 0; i < n; i++) {
			int rc = spawn_one(i);
			if (rc != 0 && !failed++) {
				first = i;
				rc0 = rc;
			}
		}
		printf("{\"spawns\": %d, \"failed\": %d, \"first\": %d, \"first_status\": %d}\n", n, failed, first, rc0);
		return failed != 0;
	}
	if (argc >= 3 && !strcmp(argv[1], "noshare")) {
		struct sock_filter f[] = {
			BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
			BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_unshare, 0, 1),
			BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
			BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		};
		struct sock_fprog prog = {sizeof f / sizeof f[0], f};
		if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog)) {
			perror("seccomp");
			return 1;
		}
		execvp(argv[2], argv + 2);
		perror(argv[2]);
		return 127;
	}
	if (argc >= 2 && !strcmp(argv[1], "spin")) {
		printf("spinning\n");
		fflush(stdout);
		for (;;) {
			stat("/nonexistent/ddpspy-spin", &st);
			struct timespec ts = {0, 1000000};
			nanosleep(&ts, NULL);
		}
	}
	fprintf(stderr, "usage: forker fork K | exec | spin\n");
	return 2;
}
