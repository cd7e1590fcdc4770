/* Per-call cost of intercepted calls that do not block, run with and without the preload by
 * bench/run.sh. Calls are timed in bursts short enough for the ring (ddpspy's writer drains
 * between bursts), after a warm-up that has touched every ring page: this is the steady state of
 * a long training run. Usage: overhead [mt|st [cuda [nccl]]]. Prints one JSON line: ns per call for each case
 * (median of bursts). "nccl" times an in-place ncclAllReduce on a communicator of one rank instead
 * (libnccl.so.2 from the library path: the simulated device's in make bench, which makes no CUDA
 * call for it, as NCCL 2.28.9 does not): the NCCL wrapper's cost and, under the preload, the
 * profiler plugin's. */
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define BURST 20000
#define BURSTS 15

static double now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static int devnull;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

static void op_read(void)
{
	char b[1];
	if (read(devnull, b, 0) < 0)
		abort();
}

static void op_fstat(void)
{
	struct stat st;
	if (fstat(devnull, &st) < 0)
		abort();
}

/* sem_wait on a posted semaphore: an intercepted, recorded call that never enters the kernel,
 * so the difference is ddpspy's own cost without syscall noise */
static sem_t sem;
static void op_sem(void)
{
	sem_post(&sem);
	if (sem_wait(&sem) < 0)
		abort();
}

static void op_mutex(void)
{
	pthread_mutex_lock(&mu);
	pthread_mutex_unlock(&mu);
}

/* NCCL's ABI, as nccl.h has it (not included: the bench builds without CUDA's headers) */
typedef struct { char internal[128]; } nccl_id;
static int (*nccl_all_reduce)(const void *, void *, size_t, int, int, void *, void *);
static void *nccl_comm;
static float nccl_buf[1];
static void op_nccl(void)
{
	if (nccl_all_reduce(nccl_buf, nccl_buf, 1, 7 /* ncclFloat32 */, 0 /* ncclSum */, nccl_comm, NULL) != 0)
		abort();
}

/* a communicator of this one rank; the calls found as the program's are, through the global
 * scope (under the preload, its wrappers) */
static int nccl_start(void)
{
	int (*get_id)(nccl_id *), (*init)(void **, int, nccl_id, int);
	nccl_id id;
	if (!dlopen("libnccl.so.2", RTLD_NOW | RTLD_GLOBAL) || !(*(void **)&get_id = dlsym(RTLD_DEFAULT, "ncclGetUniqueId")) ||
	    !(*(void **)&init = dlsym(RTLD_DEFAULT, "ncclCommInitRank")) ||
	    !(*(void **)&nccl_all_reduce = dlsym(RTLD_DEFAULT, "ncclAllReduce")))
		return -1;
	return get_id(&id) || init(&nccl_comm, 1, id, 0) ? -1 : 0;
}

static double measure(void (*op)(void))
{
	double t[BURSTS];
	for (int i = 0; i < 5 * BURST; i++) /* warm-up: wraps a 4 MiB ring at least once */
		op();
	usleep(150000);
	for (int b = 0; b < BURSTS; b++) {
		double t0 = now_ns();
		for (int i = 0; i < BURST; i++)
			op();
		t[b] = (now_ns() - t0) / BURST;
		usleep(120000); /* let the writer drain: steady state, not the drop path */
	}
	qsort(t, BURSTS, sizeof t[0], cmp);
	return t[BURSTS / 2];
}

static void *idle(void *arg)
{
	pause();
	return arg;
}

int main(int argc, char **argv)
{
	/* "mt": start an idle thread first. A traced process always has ddpspy's writer thread,
	 * and the kernel charges multi-threaded processes more for every fd syscall (shared file
	 * table: refcounts and f_pos locking), so the fair baseline for the wrapper's own cost is a
	 * multi-threaded program, as every training process is. */
	pthread_t th;
	if (argc > 1 && !strcmp(argv[1], "mt"))
		pthread_create(&th, NULL, idle, NULL);
	/* "cuda": start CUDA first (libcudart.so.13 from the library path: the simulated device's in
	 * make bench), as a training process has, so that the calls below run with CUDA and, under
	 * the preload, CUPTI loaded */
	if (argc > 2 && !strcmp(argv[2], "cuda")) {
		void *h = dlopen("libcudart.so.13", RTLD_NOW | RTLD_GLOBAL); /* (as linked: NCCL takes from it) */
		int (*count)(int *) = h ? (int (*)(int *))dlsym(h, "cudaGetDeviceCount") : NULL;
		int n = 0;
		if (!count || count(&n) != 0) {
			fprintf(stderr, "overhead: no CUDA runtime to start: %s\n", h ? "cudaGetDeviceCount failed" : dlerror());
			return 1;
		}
	}
	if (argc > 3 && !strcmp(argv[3], "nccl")) {
		if (nccl_start() < 0) {
			const char *e = dlerror();
			fprintf(stderr, "overhead: no NCCL communicator of one rank: %s\n", e ? e : "its creation failed");
			return 1;
		}
		printf("{\"nccl_allreduce_ns\": %.1f}\n", measure(op_nccl));
		return 0;
	}
	devnull = open("/dev/null", O_RDONLY);
	if (devnull < 0)
		return 1;
	sem_init(&sem, 0, 0);
	double s = measure(op_sem), r = measure(op_read), f = measure(op_fstat), m = measure(op_mutex);
	printf("{\"sem_wait_ns\": %.1f, \"read_ns\": %.1f, \"fstat_ns\": %.1f, \"mutex_ns\": %.1f}\n",
	       s, r, f, m);
	return 0;
}
