/* CPU time in known places, for the CPU sampler's tests (tests/e2e/test_cpusamples.py):
 *   cpuhot STEPS A_MS B_MS SLEEP_MS
 * Each step run_step() spends A_MS of the thread's CPU time in hot_a(), B_MS in hot_b() (called
 * through b_outer(), so that its callers are known too) and sleeps SLEEP_MS (off the CPU: no
 * sample may fall there). It prints, as one JSON line, the CPU time each function really took
 * (CLOCK_THREAD_CPUTIME_ID around it), the thread's whole CPU time, and the descriptors open at
 * its end (a profiler's own must not be among them) and its threads' names.
 *   cpuhot filtered STEPS A_MS B_MS SLEEP_MS
 * runs the same after putting itself under a seccomp filter that allows every system call (and
 * exec'ing itself): ddpspy must not try perf_event_open there, and its file says why.
 *   cpuhot work N
 * does N fixed chunks of the same arithmetic and prints its CPU and wall time and the CPU time of
 * ddpspy's sampler thread (make bench: the sampler's cost to the program). */
#include <dirent.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double cpu_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
	return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static volatile double sink;

/* arithmetic until the thread has had ms more of CPU time; the clock is read every ~0.1 ms, so
 * that the system call's own time (in the kernel, not sampled) is a small part of it */
static double spin(double ms)
{
	double t0 = cpu_ms(), x = 1;
	do {
		for (int i = 0; i < 100000; i++)
			x = x * 1.0000001 + 1e-9;
		sink = x;
	} while (cpu_ms() - t0 < ms);
	return cpu_ms() - t0;
}

__attribute__((noinline)) double hot_a(double ms)
{
	return spin(ms);
}

__attribute__((noinline)) double hot_b(double ms)
{
	return spin(ms);
}

__attribute__((noinline)) double b_outer(double ms)
{
	return hot_b(ms) + 0 * sink;
}

static double a_ms, b_ms;

__attribute__((noinline)) void run_step(double a, double b, double s)
{
	a_ms += hot_a(a);
	b_ms += b_outer(b);
	struct timespec ts = { (time_t)(s / 1e3), (long)((s - (time_t)(s / 1e3) * 1e3) * 1e6) };
	nanosleep(&ts, NULL);
}

/* the CPU time of this process's thread named name (its schedstat), ms; 0 none */
static double thread_cpu_ms(const char *name)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	double ms = 0;
	while (d && (e = readdir(d))) {
		char p[300], buf[64] = "";
		snprintf(p, sizeof p, "/proc/self/task/%s/comm", e->d_name);
		FILE *f = fopen(p, "r");
		if (!f)
			continue;
		if (fgets(buf, sizeof buf, f))
			buf[strcspn(buf, "\n")] = 0;
		fclose(f);
		unsigned long long ns = 0;
		snprintf(p, sizeof p, "/proc/self/task/%s/schedstat", e->d_name);
		if (!strcmp(buf, name) && (f = fopen(p, "r"))) {
			if (fscanf(f, "%llu", &ns) == 1)
				ms += ns / 1e6;
			fclose(f);
		}
	}
	if (d)
		closedir(d);
	return ms;
}

static int work(long n)
{
	struct timespec w0, w1;
	clock_gettime(CLOCK_MONOTONIC, &w0);
	double c0 = cpu_ms(), x = 1;
	for (long k = 0; k < n; k++) {
		for (int i = 0; i < 100000; i++)
			x = x * 1.0000001 + 1e-9;
		sink = x;
	}
	double c = cpu_ms() - c0;
	clock_gettime(CLOCK_MONOTONIC, &w1);
	printf("{\"cpu_ms\": %.3f, \"wall_ms\": %.3f, \"sampler_cpu_ms\": %.3f}\n", c,
	       (w1.tv_sec - w0.tv_sec) * 1e3 + (w1.tv_nsec - w0.tv_nsec) / 1e6, thread_cpu_ms("ddpspy-cpusamp"));
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "work"))
		return work(atol(argv[2]));
	if (argc == 6 && !strcmp(argv[1], "filtered")) {
		struct sock_filter allow = BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
		struct sock_fprog prog = { 1, &allow };
		if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog)) {
			perror("cpuhot: seccomp");
			return 1;
		}
		execv("/proc/self/exe", (char *[]){ argv[0], argv[2], argv[3], argv[4], argv[5], NULL });
		perror("cpuhot: exec");
		return 1;
	}
	if (argc != 5) {
		fprintf(stderr, "usage: cpuhot STEPS A_MS B_MS SLEEP_MS\n");
		return 2;
	}
	int steps = atoi(argv[1]);
	double a = atof(argv[2]), b = atof(argv[3]), s = atof(argv[4]);
	double c0 = cpu_ms();
	for (int i = 0; i < steps; i++)
		run_step(a, b, s);
	double total = cpu_ms() - c0;
	printf("{\"steps\": %d, \"a_ms\": %.3f, \"b_ms\": %.3f, \"cpu_ms\": %.3f, \"fds\": [", steps, a_ms, b_ms, total);
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int n = 0;
	while (d && (e = readdir(d))) {
		char p[300], l[256];
		if (e->d_name[0] == '.')
			continue;
		snprintf(p, sizeof p, "/proc/self/fd/%s", e->d_name);
		ssize_t k = readlink(p, l, sizeof l - 1);
		l[k > 0 ? k : 0] = 0;
		printf("%s\"%s\"", n++ ? ", " : "", l);
	}
	if (d)
		closedir(d);
	printf("], \"threads\": [");
	n = 0;
	d = opendir("/proc/self/task");
	while (d && (e = readdir(d))) {
		char p[300], buf[64] = "";
		if (e->d_name[0] == '.')
			continue;
		snprintf(p, sizeof p, "/proc/self/task/%s/comm", e->d_name);
		FILE *f = fopen(p, "r");
		if (f && fgets(buf, sizeof buf, f))
			buf[strcspn(buf, "\n")] = 0;
		if (f)
			fclose(f);
		printf("%s\"%s\"", n++ ? ", " : "", buf);
	}
	if (d)
		closedir(d);
	printf("]}\n");
	return 0;
}
