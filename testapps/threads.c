/* Concurrency stress for the rings and the registry.
 *   threads produce T N   T threads each make N recorded calls (stat of a missing path), then
 *                         print {"produced": T*N} (ring accounting: written + dropped == produced)
 *   threads reads T N     T threads each read one byte from /dev/zero N times (the fastest
 *                         recorded call: a rate test), then print {"produced": T*N}
 *   threads rate T R S    T threads each record R events a second (step markers: no syscall, so
 *                         the rate is the writer's to keep, not the kernel's) for S seconds,
 *                         then print {"produced": N, "per_thread_rate": achieved}
 *   threads churn K       K short-lived threads, each recording a few events, a few at a time
 *   threads exit-from-thread   a secondary thread calls exit() while main is blocked
 *   threads spin T S      T threads each busy for S seconds (a step marker every 10 ms: they are
 *                         traced threads), then print {"threads": T}: under taskset -c 0, each is
 *                         runnable but waiting for the CPU about (T-1)/T of the time */
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "../include/ddpspy.h"

static long per_thread;

static void *produce(void *arg)
{
	struct stat st;
	(void)arg;
	for (long i = 0; i < per_thread; i++)
		stat("/nonexistent/ddpspy-produce", &st);
	return NULL;
}

static void *reader(void *arg)
{
	char c;
	(void)arg;
	int fd = open("/dev/zero", O_RDONLY);
	if (fd < 0)
		return NULL;
	for (long i = 0; i < per_thread; i++)
		if (read(fd, &c, 1) != 1)
			break;
	close(fd);
	return NULL;
}

static double rate, secs;
static long rate_made[64];

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void *paced(void *arg)
{
	long *made = arg, n = 0;
	if (getenv("RATE_DELAY_MS"))
		usleep((useconds_t)atoi(getenv("RATE_DELAY_MS")) * 1000);
	double t0 = now_s(), t;
	/* what is due every 0.2 ms, then sleep (the raw syscall: not recorded), so the threads leave
	 * the CPU to the writer as a program busy elsewhere would */
	while ((t = now_s()) - t0 < secs) {
		long due = (long)((t - t0) * rate);
		for (; n < due; n++) {
			if (n & 1)
				ddpspy_step_end();
			else
				ddpspy_step_begin();
		}
		struct timespec ts = {0, 200000};
		syscall(SYS_nanosleep, &ts, NULL);
	}
	*made = n;
	return NULL;
}

static void *short_lived(void *arg)
{
	struct stat st;
	char name[16];
	snprintf(name, sizeof name, "short-%ld", (long)(intptr_t)arg);
	pthread_setname_np(pthread_self(), name);
	stat("/nonexistent/ddpspy-churn", &st);
	usleep(100);
	return NULL;
}

static void *exiter(void *arg)
{
	(void)arg;
	usleep(50000);
	stat("/nonexistent/ddpspy-exiter", &(struct stat){0});
	exit(7);
}

static double spin_secs;

static double mono_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void *spinner(void *arg)
{
	volatile double x = 0;
	double t0 = mono_s(), mark = t0;
	(void)arg;
	for (double t = t0; t - t0 < spin_secs; t = mono_s()) {
		for (int i = 0; i < 10000; i++)
			x += i;
		if (t - mark >= 0.01) {
			ddpspy_step_begin();
			mark = t;
		}
	}
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc >= 4 && !strcmp(argv[1], "spin")) {
		int t = atoi(argv[2]);
		spin_secs = atof(argv[3]);
		pthread_t th[64];
		if (t < 1 || t > 64)
			return 2;
		for (int i = 0; i < t; i++)
			pthread_create(&th[i], NULL, spinner, NULL);
		for (int i = 0; i < t; i++)
			pthread_join(th[i], NULL);
		printf("{\"threads\": %d}\n", t);
		return 0;
	}
	if (argc >= 4 && (!strcmp(argv[1], "produce") || !strcmp(argv[1], "reads"))) {
		int t = atoi(argv[2]);
		per_thread = atol(argv[3]);
		pthread_t th[64];
		if (t < 1 || t > 64)
			return 2;
		for (int i = 0; i < t; i++)
			pthread_create(&th[i], NULL, argv[1][0] == 'p' ? produce : reader, NULL);
		for (int i = 0; i < t; i++)
			pthread_join(th[i], NULL);
		printf("{\"produced\": %ld}\n", (long)t * per_thread);
		return 0;
	}
	if (argc >= 5 && !strcmp(argv[1], "rate")) {
		int t = atoi(argv[2]);
		rate = atof(argv[3]);
		secs = atof(argv[4]);
		pthread_t th[64];
		if (t < 1 || t > 64)
			return 2;
		for (int i = 0; i < t; i++)
			pthread_create(&th[i], NULL, paced, &rate_made[i]);
		long sum = 0;
		for (int i = 0; i < t; i++) {
			pthread_join(th[i], NULL);
			sum += rate_made[i];
		}
		printf("{\"produced\": %ld, \"per_thread_rate\": %.0f}\n", sum, (double)sum / t / secs);
		return 0;
	}
	if (argc >= 3 && !strcmp(argv[1], "churn")) {
		int k = atoi(argv[2]);
		for (int i = 0; i < k; i += 8) {
			pthread_t th[8];
			int n = k - i < 8 ? k - i : 8;
			for (int j = 0; j < n; j++)
				pthread_create(&th[j], NULL, short_lived, (void *)(intptr_t)(i + j));
			for (int j = 0; j < n; j++)
				pthread_join(th[j], NULL);
		}
		printf("{\"threads\": %d}\n", k);
		return 0;
	}
	if (argc >= 2 && !strcmp(argv[1], "exit-from-thread")) {
		pthread_t th;
		pthread_create(&th, NULL, exiter, NULL);
		for (;;)
			pause(); /* exit() in the other thread ends us */
	}
	fprintf(stderr, "usage: threads produce T N | reads T N | rate T R S | churn K | exit-from-thread | spin T S\n");
	return 2;
}
