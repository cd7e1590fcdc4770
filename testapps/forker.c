/* Processes: fork without exec (a DataLoader worker), exec, and _exit.
 *   forker fork K     K children each stat a path and _exit(0) (as Python's os._exit does)
 *   forker exec       stats, then execs itself as "forker after-exec" (same pid, second file)
 *   forker spin       records forever (for the SIGKILL and SIGTERM tests)
 *   forker segv       records, then dereferences NULL (a crash)
 *   forker closeall   records, closes every descriptor from 3 up (as daemons do), records */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

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
