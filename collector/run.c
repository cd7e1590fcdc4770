/* ddpspy run -o DIR -- CMD...: runs CMD with libddpspy.so preloaded and DDPSPY_OUT set, and
 * returns CMD's exit status (128+N when a signal N ended it). */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"

static pid_t child;

static void forward(int sig)
{
	if (child > 0)
		kill(child, sig);
}

/* libddpspy.so beside this executable (build/ddpspy -> build/libddpspy.so). */
static int find_lib(char *buf, size_t n)
{
	const char *env = getenv("DDPSPY_LIB");
	if (env && *env) {
		snprintf(buf, n, "%s", env);
		return access(buf, R_OK);
	}
	ssize_t l = readlink("/proc/self/exe", buf, n - 1);
	if (l <= 0)
		return -1;
	buf[l] = 0;
	char *slash = strrchr(buf, '/');
	if (!slash || (size_t)(slash - buf) + sizeof "/libddpspy.so" > n)
		return -1;
	strcpy(slash, "/libddpspy.so");
	return access(buf, R_OK);
}

static void usage(FILE *out)
{
	fprintf(out, "usage: ddpspy run [-o DIR] -- CMD [ARGS...]\n");
}

int cmd_run(int argc, char **argv)
{
	const char *out = "ddpspy-out";
	char lib[PATH_MAX], abs_out[PATH_MAX];
	char **cmd = calloc((size_t)argc + 1, sizeof *cmd); /* (NULL-terminated, for execvp) */
	int ncmd = 0;
	if (!cmd)
		return 2;
	const struct cli_opt opts[] = {
		{ "-o", NULL, CLI_STR, &out, 0, 0, NULL, 0 },
		{ NULL, NULL, CLI_FLAG, NULL, 0, 0, NULL, 0 },
	};
	const struct cli c = { "run", opts, usage, 1 };
	int got = cli_parse(&c, argc, argv, cmd, &ncmd);
	if (got || !ncmd) {
		if (!got)
			usage(stderr);
		free(cmd);
		return got > 0 ? 0 : 2;
	}
	if (find_lib(lib, sizeof lib) < 0) {
		fprintf(stderr, "ddpspy run: cannot find libddpspy.so beside this program (set DDPSPY_LIB)\n");
		return 2;
	}
	if (out[0] == '/') {
		snprintf(abs_out, sizeof abs_out, "%s", out);
	} else {
		char cwd[PATH_MAX];
		if (!getcwd(cwd, sizeof cwd) ||
		    (size_t)snprintf(abs_out, sizeof abs_out, "%s/%s", cwd, out) >= sizeof abs_out) {
			fprintf(stderr, "ddpspy run: cannot make %s an absolute path\n", out);
			return 2;
		}
	}
	/* children that change directory must still write where the user asked */
	setenv("DDPSPY_OUT", abs_out, 1);
	const char *old = getenv("LD_PRELOAD");
	if (!old || !*old) {
		setenv("LD_PRELOAD", lib, 1);
	} else if (!strstr(old, "libddpspy.so")) {
		size_t n = strlen(lib) + strlen(old) + 2;
		char *v = malloc(n);
		if (!v)
			return 2;
		snprintf(v, n, "%s:%s", lib, old);
		setenv("LD_PRELOAD", v, 1);
		free(v);
	}
	child = fork();
	if (child < 0) {
		fprintf(stderr, "ddpspy run: fork: %s\n", strerror(errno));
		return 2;
	}
	if (child == 0) {
		execvp(cmd[0], cmd);
		fprintf(stderr, "ddpspy run: cannot run %s: %s\n", cmd[0], strerror(errno));
		_exit(127);
	}
	free(cmd);
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = forward;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	int st;
	while (waitpid(child, &st, 0) < 0)
		if (errno != EINTR)
			return 2;
	if (WIFSIGNALED(st))
		return 128 + WTERMSIG(st);
	return WEXITSTATUS(st);
}
