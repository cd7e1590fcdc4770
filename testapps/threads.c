/* Concurrency stress for the rings and the registry.
 *   threads produce T N   T threads each make N recorded calls (stat of a missing path), then
 *                         print {"produced": T*N} (ring accounting: written + dropped == produced)
 *   threads reads T N     T threads each read one byte from /dev/zero N times (the fastest
 *                         recorded call: a rate test), then print {"produced": T*N}
 *   threads churn K       K short-lived threads, each recording a few events, a few at a time
 *   threads exit-from-thread   a secondary thread calls exit() while main is blocked */
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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

int main(int argc, char **argv)
{
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
	fprintf(stderr, "usage: threads produce T N | reads T N | churn K | exit-from-thread\n");
	return 2;
}
