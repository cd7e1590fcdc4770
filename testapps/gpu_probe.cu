// What a real GPU job does that the first testapps did not: the behaviours issue 37 names, one
// section each, so that the real-hardware checks (tests/gpu/check.py) can see what CUDA, CUPTI and
// the driver make of them, and the simulated device can be held to the same program.
//
// usage: gpu_probe [--cupti] | gpu_probe flood   (the flood section alone, for make bench)
//        gpu_probe queries   (runs of queries that end without finding the work done: queries())
//   sections, in this order, each printing one JSON line with its host times (CLOCK_MONOTONIC ns):
//   flood    a PyTorch-shaped loop: per kernel cudaGetDevice, cudaGetLastError,
//            cudaStreamIsCapturing, cudaPointerGetAttributes, the launch and an event record; every
//            8 kernels the host polls cudaEventQuery until the event is done (GPU_PROBE_POLL=0: never,
//            so that the loop's time is the host's calls alone)
//   copies   256 MiB host to device from pinned memory (async) and from pageable memory
//            (cudaMemcpy), and 1 GiB device to device, each timed by the host
//   graph    three kernels captured from a stream into a CUDA graph, instantiated, launched 3 times
//            (GPU_PROBE_GRAPH_NODES=n: n kernels)
//   driver   a kernel launched 3 times through cuLaunchKernelEx, found with cuGetProcAddress in
//            libcuda.so.1 (as Triton launches), the function from cudaGetFuncBySymbol
//   tail     a kernel that holds the device for 300 ms, and the program exits without waiting
//            for it: a profiler's last flush meets it running
//   --cupti: the program is its own CUPTI client (no other profiler may be in the process): it
//   enables the runtime, driver, kernel, copy, set, synchronization and external correlation
//   kinds, flushes with CUPTI_ACTIVITY_FLAG_FLUSH_FORCED while the tail kernel runs, and prints
//   what came back: records per kind, records with a zero start or end, runtime API records per
//   kernel in the flood, the API call each graph and driver-launched kernel's correlation id
//   names, and each copy's device times against its host call.
// On the simulated device: SIMGPU_KERNELS=hold=arg makes the tail kernel last its argument.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <cuda.h>
#include <cuda_runtime.h>
#include <cupti.h>
#include <dlfcn.h>
#include <sys/syscall.h>
#include <pthread.h>
#include <unistd.h>

#include "globaltimer.cuh"

__global__ void flood_k(float *a)
{
	a[threadIdx.x] += 1.0f;
}

__global__ void graph_k(float *a, float v)
{
	a[threadIdx.x] = a[threadIdx.x] * v + 1.0f;
}

__global__ void tri_k(float *a, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		a[i] *= 2.0f;
}

// holds the device for ns nanoseconds (on the simulated device, SIMGPU_KERNELS=hold=arg)
__global__ void hold(unsigned long long ns)
{
	if (threadIdx.x || blockIdx.x)
		return;
	globaltimer_spin(ns);
}

static long long now_ns()
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void check(cudaError_t e, const char *what)
{
	if (e != cudaSuccess) {
		fprintf(stderr, "gpu_probe: %s: %s\n", what, cudaGetErrorString(e));
		exit(1);
	}
}

// ---- the CUPTI client (--cupti) ----

enum { MAXK = 4096, MAXA = 1 << 18 };
static struct {
	int on;
	CUptiResult (*next)(uint8_t *, size_t, CUpti_Activity **);
	CUptiResult (*name)(CUpti_CallbackDomain, CUpti_CallbackId, const char **);
	long kinds[64], zero[64];
	struct { uint32_t corr; uint64_t start, end; char name[48]; uint32_t graph; } k[MAXK];
	int nk;
	struct { uint32_t corr, cbid, tid; uint64_t start, end; int driver; } a[MAXA];
	int na;
	struct { uint32_t corr; uint64_t start, end, bytes; int kind, src, dst; } m[64];
	int nm;
	long forced_zero_kernels, forced_kernels; // what the forced flush returned for the tail kernel
	int in_forced;
} P;

static void CUPTIAPI requested(uint8_t **b, size_t *size, size_t *max)
{
	*size = 8 << 20;
	*b = (uint8_t *)aligned_alloc(8, *size);
	*max = 0;
}

static void CUPTIAPI completed(CUcontext c, uint32_t s, uint8_t *b, size_t size, size_t valid)
{
	CUpti_Activity *r = NULL;
	while (P.next(b, valid, &r) == CUPTI_SUCCESS) {
		int kind = (int)r->kind < 64 ? (int)r->kind : 63;
		P.kinds[kind]++;
		switch (r->kind) {
		case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
			CUpti_ActivityKernel10 *k = (CUpti_ActivityKernel10 *)r;
			P.zero[kind] += !k->start || !k->end;
			if (strstr(k->name, "hold") && P.in_forced) {
				P.forced_kernels++;
				P.forced_zero_kernels += !k->start || !k->end;
			}
			if (P.nk < MAXK) {
				P.k[P.nk].corr = k->correlationId;
				P.k[P.nk].start = k->start;
				P.k[P.nk].end = k->end;
				P.k[P.nk].graph = k->graphId;
				snprintf(P.k[P.nk++].name, 48, "%s", k->name);
			}
			break;
		}
		case CUPTI_ACTIVITY_KIND_RUNTIME:
		case CUPTI_ACTIVITY_KIND_DRIVER: {
			CUpti_ActivityAPI *a = (CUpti_ActivityAPI *)r;
			P.zero[kind] += !a->start || !a->end;
			if (P.na < MAXA)
				P.a[P.na++] = { a->correlationId, a->cbid, a->threadId, a->start, a->end,
						r->kind == CUPTI_ACTIVITY_KIND_DRIVER };
			break;
		}
		case CUPTI_ACTIVITY_KIND_MEMCPY: {
			CUpti_ActivityMemcpy6 *m = (CUpti_ActivityMemcpy6 *)r;
			P.zero[kind] += !m->start || !m->end;
			if (P.nm < 64)
				P.m[P.nm++] = { m->correlationId, m->start, m->end, m->bytes, m->copyKind, m->srcKind,
						m->dstKind };
			break;
		}
		case CUPTI_ACTIVITY_KIND_MEMSET: {
			CUpti_ActivityMemset4 *m = (CUpti_ActivityMemset4 *)r;
			P.zero[kind] += !m->start || !m->end;
			break;
		}
		case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: {
			CUpti_ActivitySynchronization2 *y = (CUpti_ActivitySynchronization2 *)r;
			P.zero[kind] += !y->start || !y->end;
			break;
		}
		default:
			break;
		}
	}
	free(b);
}

static uint64_t CUPTIAPI mono()
{
	return (uint64_t)now_ns();
}

static CUptiResult (*flush_all)(uint32_t);

static int cupti_on()
{
	void *h = dlopen("libcupti.so.13", RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		fprintf(stderr, "gpu_probe: %s\n", dlerror());
		return -1;
	}
#define SYM(n) auto p_##n = (decltype(&::n))dlsym(h, #n)
	SYM(cuptiSubscribe);
	SYM(cuptiActivityRegisterTimestampCallback);
	SYM(cuptiActivityRegisterCallbacks);
	SYM(cuptiActivityEnable);
#undef SYM
	P.next = (decltype(P.next))dlsym(h, "cuptiActivityGetNextRecord");
	P.name = (decltype(P.name))dlsym(h, "cuptiGetCallbackName");
	flush_all = (decltype(flush_all))dlsym(h, "cuptiActivityFlushAll");
	CUpti_SubscriberHandle sub;
	if (p_cuptiSubscribe(&sub, NULL, NULL) != CUPTI_SUCCESS) {
		fprintf(stderr, "gpu_probe: cuptiSubscribe refused\n");
		return -1;
	}
	p_cuptiActivityRegisterTimestampCallback(mono);
	p_cuptiActivityRegisterCallbacks(requested, completed);
	const CUpti_ActivityKind kinds[] = { CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_ACTIVITY_KIND_DRIVER,
					     CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
					     CUPTI_ACTIVITY_KIND_MEMSET, CUPTI_ACTIVITY_KIND_SYNCHRONIZATION,
					     CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION };
	for (CUpti_ActivityKind k : kinds)
		p_cuptiActivityEnable(k);
	P.on = 1;
	return 0;
}

static const char *api_name(int i)
{
	const char *n = NULL;
	if (P.name(P.a[i].driver ? CUPTI_CB_DOMAIN_DRIVER_API : CUPTI_CB_DOMAIN_RUNTIME_API, P.a[i].cbid, &n) !=
		    CUPTI_SUCCESS || !n)
		n = "?";
	return n;
}

static int api_of(uint32_t corr)
{
	for (int i = 0; i < P.na; i++)
		if (P.a[i].corr == corr)
			return i;
	return -1;
}

// the launching call of each kernel whose name holds sub: "name@thread", and how many kernels
static void launches_of(const char *sub)
{
	int n = 0;
	printf("\"%s\": [", sub);
	for (int i = 0; i < P.nk; i++) {
		if (!strstr(P.k[i].name, sub))
			continue;
		int a = api_of(P.k[i].corr);
		printf("%s{\"corr\": %u, \"graph\": %u, \"api\": \"%s\", \"dur_ns\": %llu}", n++ ? ", " : "", P.k[i].corr,
		       P.k[i].graph, a >= 0 ? api_name(a) : "none",
		       (unsigned long long)(P.k[i].end - P.k[i].start));
	}
	printf("]");
}

static void cupti_report(long long f0, long long f1, int flood_kernels)
{
	int api_in = 0, drv_in = 0;
	for (int i = 0; i < P.na; i++)
		if ((long long)P.a[i].start >= f0 && (long long)P.a[i].start <= f1)
			(P.a[i].driver ? drv_in : api_in)++;
	// the runtime calls of the flood, by name, most frequent first (at most 12)
	static struct { uint32_t cbid; int driver, n; } by[512];
	int nb = 0;
	for (int i = 0; i < P.na; i++) {
		if ((long long)P.a[i].start < f0 || (long long)P.a[i].start > f1)
			continue;
		int j = 0;
		while (j < nb && (by[j].cbid != P.a[i].cbid || by[j].driver != P.a[i].driver))
			j++;
		if (j == nb && nb < 512)
			by[nb++] = { P.a[i].cbid, P.a[i].driver, 0 };
		if (j < nb)
			by[j].n++;
	}
	printf("{\"section\": \"cupti\", \"kinds\": {");
	static const struct { CUpti_ActivityKind kind; const char *name; } names[] = {
		{ CUPTI_ACTIVITY_KIND_RUNTIME, "runtime" }, { CUPTI_ACTIVITY_KIND_DRIVER, "driver" },
		{ CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, "kernel" }, { CUPTI_ACTIVITY_KIND_MEMCPY, "memcpy" },
		{ CUPTI_ACTIVITY_KIND_MEMSET, "memset" }, { CUPTI_ACTIVITY_KIND_SYNCHRONIZATION, "sync" },
		{ CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION, "extcorr" } };
	int first = 1;
	for (const auto &n : names) {
		printf("%s\"%s\": [%ld, %ld]", first ? "" : ", ", n.name, P.kinds[n.kind], P.zero[n.kind]);
		first = 0;
	}
	printf("}, \"flood\": {\"kernels\": %d, \"runtime\": %d, \"driver\": %d, \"by_call\": {", flood_kernels, api_in,
	       drv_in);
	for (int shown = 0; shown < 12 && nb; shown++) {
		int best = 0;
		for (int j = 1; j < nb; j++)
			if (by[j].n > by[best].n)
				best = j;
		const char *n = NULL;
		if (P.name(by[best].driver ? CUPTI_CB_DOMAIN_DRIVER_API : CUPTI_CB_DOMAIN_RUNTIME_API, by[best].cbid, &n) !=
			    CUPTI_SUCCESS || !n)
			n = "?";
		printf("%s\"%s\": %d", shown ? ", " : "", n, by[best].n);
		by[best] = by[--nb];
	}
	printf("}}, \"tail_forced\": [%ld, %ld], ", P.forced_kernels, P.forced_zero_kernels);
	launches_of("graph_k");
	printf(", ");
	launches_of("tri_k");
	printf(", ");
	launches_of("hold");
	printf(", \"copies\": [");
	for (int i = 0; i < P.nm; i++) {
		int a = api_of(P.m[i].corr);
		printf("%s{\"kind\": %d, \"src\": %d, \"dst\": %d, \"bytes\": %llu, \"start\": %llu, \"end\": %llu, "
		       "\"api\": \"%s\", \"api_start\": %llu, \"api_end\": %llu}",
		       i ? ", " : "", P.m[i].kind, P.m[i].src, P.m[i].dst, (unsigned long long)P.m[i].bytes,
		       (unsigned long long)P.m[i].start, (unsigned long long)P.m[i].end, a >= 0 ? api_name(a) : "none",
		       a >= 0 ? (unsigned long long)P.a[a].start : 0ull, a >= 0 ? (unsigned long long)P.a[a].end : 0ull);
	}
	printf("]}\n");
}

// ---- the sections ----

static int flood(float *d, long long *f0, long long *f1)
{
	const int kernels = 2000;
	cudaStream_t s;
	cudaEvent_t e;
	check(cudaStreamCreate(&s), "cudaStreamCreate");
	check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreate");
	long polls = 0;
	int poll = !getenv("GPU_PROBE_POLL") || atoi(getenv("GPU_PROBE_POLL"));
	*f0 = now_ns();
	for (int i = 0; i < kernels; i++) {
		int dev;
		cudaStreamCaptureStatus cs;
		cudaPointerAttributes pa;
		check(cudaGetDevice(&dev), "cudaGetDevice");
		check(cudaGetLastError(), "cudaGetLastError");
		check(cudaStreamIsCapturing(s, &cs), "cudaStreamIsCapturing");
		check(cudaPointerGetAttributes(&pa, d), "cudaPointerGetAttributes");
		flood_k<<<1, 128, 0, s>>>(d);
		check(cudaEventRecord(e, s), "cudaEventRecord");
		if (poll && i % 8 == 7)
			for (cudaError_t q; (q = cudaEventQuery(e)) != cudaSuccess; polls++)
				if (q != cudaErrorNotReady)
					check(q, "cudaEventQuery");
	}
	*f1 = now_ns();
	check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
	printf("{\"section\": \"flood\", \"kernels\": %d, \"t\": [%lld, %lld], \"host_ns_per_kernel\": %.1f, "
	       "\"polls\": %ld}\n", kernels, *f0, *f1, (double)(*f1 - *f0) / kernels, polls);
	cudaEventDestroy(e);
	cudaStreamDestroy(s);
	return kernels;
}

static void copies()
{
	const size_t host = 256u << 20, dev = 1u << 30;
	char *pinned, *pageable = (char *)malloc(host), *a, *b;
	check(cudaMallocHost(&pinned, host), "cudaMallocHost");
	check(cudaMalloc(&a, dev), "cudaMalloc");
	check(cudaMalloc(&b, dev), "cudaMalloc");
	memset(pinned, 1, host);
	memset(pageable, 2, host);
	cudaStream_t s;
	check(cudaStreamCreate(&s), "cudaStreamCreate");
	long long p0 = now_ns();
	check(cudaMemcpyAsync(a, pinned, host, cudaMemcpyHostToDevice, s), "cudaMemcpyAsync (pinned)");
	long long p1 = now_ns();
	check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
	long long p2 = now_ns();
	check(cudaMemcpy(a, pageable, host, cudaMemcpyHostToDevice), "cudaMemcpy (pageable)");
	long long q1 = now_ns();
	check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
	long long q2 = now_ns();
	check(cudaMemcpyAsync(b, a, dev, cudaMemcpyDeviceToDevice, s), "cudaMemcpyAsync (device)");
	long long d1 = now_ns();
	check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
	long long d2 = now_ns();
	printf("{\"section\": \"copies\", \"pinned\": [%lld, %lld, %lld], \"pageable\": [%lld, %lld, %lld], "
	       "\"d2d\": [%lld, %lld, %lld], \"host_bytes\": %zu, \"d2d_bytes\": %zu}\n",
	       p0, p1, p2, p2, q1, q2, q2, d1, d2, host, dev);
	cudaStreamDestroy(s);
	cudaFree(a);
	cudaFree(b);
	cudaFreeHost(pinned);
	free(pageable);
}

static void graph(float *d)
{
	cudaStream_t s;
	cudaGraph_t g;
	cudaGraphExec_t x;
	check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
	const char *v = getenv("GPU_PROBE_GRAPH_NODES");
	int nodes = v && atoi(v) > 0 ? atoi(v) : 3;
	long long c0 = now_ns();
	check(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal), "cudaStreamBeginCapture");
	for (int i = 0; i < nodes; i++)
		graph_k<<<1, 128, 0, s>>>(d, 0.5f + i % 3);
	check(cudaStreamEndCapture(s, &g), "cudaStreamEndCapture");
	check(cudaGraphInstantiate(&x, g, 0), "cudaGraphInstantiate");
	long long c1 = now_ns();
	for (int i = 0; i < 3; i++)
		check(cudaGraphLaunch(x, s), "cudaGraphLaunch");
	long long c2 = now_ns();
	check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
	printf("{\"section\": \"graph\", \"nodes\": %d, \"launches\": 3, \"t\": [%lld, %lld, %lld]}\n", nodes, c0, c1, c2);
	cudaGraphExecDestroy(x);
	cudaGraphDestroy(g);
	cudaStreamDestroy(s);
}

typedef CUresult (*get_proc_t)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *);
typedef CUresult (*launch_ex_t)(const CUlaunchConfig *, CUfunction, void **, void **);

static void driver(float *d)
{
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	get_proc_t gp = h ? (get_proc_t)dlsym(h, "cuGetProcAddress_v2") : NULL;
	launch_ex_t lx = NULL;
	CUdriverProcAddressQueryResult st;
	if (!gp || gp("cuLaunchKernelEx", (void **)&lx, 12000, CU_GET_PROC_ADDRESS_DEFAULT, &st) != CUDA_SUCCESS || !lx) {
		printf("{\"section\": \"driver\", \"error\": \"no cuLaunchKernelEx through cuGetProcAddress_v2\"}\n");
		return;
	}
	cudaFunction_t f;
	check(cudaGetFuncBySymbol(&f, (const void *)tri_k), "cudaGetFuncBySymbol");
	cudaStream_t s;
	check(cudaStreamCreate(&s), "cudaStreamCreate");
	int n = 1024;
	void *args[] = { &d, &n };
	CUlaunchConfig cfg;
	memset(&cfg, 0, sizeof cfg);
	cfg.gridDimX = 4;
	cfg.gridDimY = cfg.gridDimZ = 1;
	cfg.blockDimX = 256;
	cfg.blockDimY = cfg.blockDimZ = 1;
	cfg.hStream = (CUstream)s;
	int bad = 0;
	long long t0 = now_ns();
	for (int i = 0; i < 3; i++)
		bad += lx(&cfg, (CUfunction)f, args, NULL) != CUDA_SUCCESS;
	long long t1 = now_ns();
	check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
	printf("{\"section\": \"driver\", \"launches\": 3, \"failed\": %d, \"t\": [%lld, %lld]}\n", bad, t0, t1);
	cudaStreamDestroy(s);
}

// gpu_probe queries: runs of queries of unfinished work that end without finding it done. Two
// streams each hold the device for 50 ms; the main thread polls stream A's event 5 times, leaves
// the loop (a millisecond of other work: the run given up) and queries stream B's once; then a
// thread of its own polls B's event 5 times and exits while B still runs. Prints the pointers.
static cudaEvent_t q_event_b;

static void *query_then_exit(void *)
{
	for (int i = 0; i < 5; i++)
		cudaEventQuery(q_event_b);
	return NULL;
}

static int queries()
{
	cudaStream_t a, b;
	cudaEvent_t ea;
	check(cudaStreamCreate(&a), "cudaStreamCreate");
	check(cudaStreamCreate(&b), "cudaStreamCreate");
	check(cudaEventCreate(&ea), "cudaEventCreate");
	check(cudaEventCreate(&q_event_b), "cudaEventCreate");
	hold<<<1, 32, 0, a>>>(50000000ull);
	hold<<<1, 32, 0, b>>>(50000000ull);
	check(cudaEventRecord(ea, a), "cudaEventRecord");
	check(cudaEventRecord(q_event_b, b), "cudaEventRecord");
	for (int i = 0; i < 5; i++)
		cudaEventQuery(ea);
	usleep(1000);
	cudaError_t qb = cudaStreamQuery(b); // (a run of one, of stream B: still going at exit)
	pthread_t th;
	pthread_create(&th, NULL, query_then_exit, NULL);
	pthread_join(th, NULL);
	printf("{\"section\": \"queries\", \"event_a\": %llu, \"event_b\": %llu, \"stream_b\": %llu, \"qb\": %d}\n",
	       (unsigned long long)(uintptr_t)ea, (unsigned long long)(uintptr_t)q_event_b,
	       (unsigned long long)(uintptr_t)b, (int)qb);
	fflush(stdout);
	check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
	return 0;
}

int main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "queries"))
		return queries();
	int own = argc > 1 && !strcmp(argv[1], "--cupti");
	if (own && cupti_on() < 0)
		return 1;
	float *d;
	check(cudaMalloc(&d, 1 << 20), "cudaMalloc");
	check(cudaMemset(d, 0, 1 << 20), "cudaMemset");
	check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
	long long f0, f1;
	if (argc > 1 && !strcmp(argv[1], "flood")) { // a warm-up, then the measured one
		flood(d, &f0, &f1);
		flood(d, &f0, &f1);
		return 0;
	}
	int fk = flood(d, &f0, &f1);
	copies();
	graph(d);
	driver(d);
	long long h0 = now_ns();
	hold<<<1, 32>>>(300000000ull);
	printf("{\"section\": \"tail\", \"hold_ns\": 300000000, \"t\": %lld}\n", h0);
	if (own) {
		usleep(20000);
		P.in_forced = 1;
		flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
		P.in_forced = 0;
		check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
		flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
		cupti_report(f0, f1, fk);
	}
	fflush(stdout);
	return 0; // (without --cupti: exits while the tail kernel runs)
}
