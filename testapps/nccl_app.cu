// A data-parallel training loop on NCCL for the tests, one process per rank: each step runs a
// forward and a backward kernel on a compute stream, then allreduces 32 MiB of gradients on a
// communication stream that waits for the backward kernel, and exchanges 1 MiB with its ring
// neighbours in a group (send to the next rank, receive from the one before). Rank r's host is
// r x NCCL_APP_SKEW_MS late into each step's allreduce, so the collective starts when the last rank
// is ready. Built with nvcc -cudart shared against the simulated device's libnccl.so.2 (make sim);
// it runs on the simulated device (LD_LIBRARY_PATH=build/simgpu) or on real GPUs.
//
// usage: nccl_app RANK NRANKS IDFILE [STEPS]
//   rank 0 makes the unique id and writes it to IDFILE; the others read it from there.
//   NCCL_APP_NONBLOCKING=1: the communicator is made nonblocking (ncclConfig_t.blocking = 0): every
//   call may return ncclInProgress, and the app polls ncclCommGetAsyncError until it is done.
//   NCCL_APP_OOP=1: the allreduce is out of place (into a second buffer).
//   NCCL_APP_SCALABLE=1: the communicator is made by ncclCommInitRankScalable (one id).
//   NCCL_APP_SHRINK=1: after the steps, every rank but the last makes a communicator without it
//   (ncclCommShrink) and allreduces 1 MiB on it once.
//   NCCL_APP_GROUPED=1: the ring exchange's group also allreduces two halves of a 1 MiB buffer,
//   before its send and receive (as coalesced allreduces are: one kernel for the group).
//   NCCL_APP_DLOPEN=1: ncclCommInitRank and the step's ncclAllReduce are reached through
//   dlopen("libnccl.so.2", RTLD_LOCAL) and dlsym on its handle, as a program that loads NCCL itself
//   does: the symbols of its handle's scope, never a preloaded library's wrappers.
//   NCCL_APP_TAIL=1: after each allreduce, a helper copies 4 bytes of the sum back into pinned
//   memory (cudaMemcpyAsync) and records an event it destroys at once, returning before either is
//   done (as a loss read-back and PyTorch's caching allocator's events do): both are queued behind
//   a collective that waits for a later rank.
//   NCCL_APP_GRAPH=1: the step's allreduce is captured once into a CUDA graph (cudaStreamBeginCapture
//   on the communication stream) and each step launches that graph instead (cudaGraphLaunch), as
//   a training step captured whole (torch.cuda.graphs) replays its collectives; NCCL_APP_GRAPH=2:
//   the ring exchange's group too (the graph launched; nothing else called in the steps).
//   With NCCL_APP_NONBLOCKING too, the captured call is polled to its end, as every call is, before
//   the capture ends: NCCL's own thread launches it into the capture.
//   NCCL_APP_EXT2=1: the app is also a CUPTI client (libcupti in the global scope, as a linked
//   tool's calls bind) that pushes external correlation ids of CUPTI's CUSTOM2 kind (ddpspy's kind)
//   counted from 1 (as ddpspy's NCCL calls once were) around each step's forward and backward
//   launches, and records external correlations itself; its JSON line gains "ext2": the records
//   of its own ids it got, and "ext2_other": those of ids it never pushed.
//   NCCL_APP_LATE=K: before step K, a tracer loads libcupti through a handle of its own (dlopen
//   RTLD_LOCAL, as XLA's and Paddle's profilers do), registers its activity callbacks without a
//   subscriber and turns kernels on: CUPTI has one set of callbacks a process, so a profiler in
//   front gets no more records; the tracer frees every buffer completed to it. Its JSON line gains
//   "late_kernels": the kernel records it got, and "late_rc": what the registration returned
//   (CUptiResult; nothing in cupti_activity.h says a second one is refused, nor seen on a GPU).
//   NCCL_APP_HANG=PATH: after the steps, the last rank blocks in a read of the FIFO PATH (nobody
//   writes it) while the others enqueue one more allreduce and wait for it in cudaStreamSynchronize:
//   a hang (rank 0 says "hanging" on stderr once it is about to; nothing ends it but a signal).
// Prints one JSON line: the host's time around each call it makes (CLOCK_MONOTONIC ns).
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <nccl.h>
#include <unistd.h>

#include "kineto_shape.h"

__global__ void forward(float *a, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		a[i] = a[i] * 0.5f + 1.0f;
}

__global__ void backward(float *a, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		a[i] -= 1.0f;
}

static long long now_ns()
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void cuda(cudaError_t e, const char *what)
{
	if (e != cudaSuccess) {
		fprintf(stderr, "nccl_app: %s: %s\n", what, cudaGetErrorString(e));
		exit(1);
	}
}

// (its own frame, gone by the time the device reaches the copy and the event)
static void __attribute__((noinline)) tail(const float *sum, float *host, cudaStream_t s)
{
	cudaEvent_t e;
	cuda(cudaMemcpyAsync(host, sum, sizeof *host, cudaMemcpyDeviceToHost, s), "cudaMemcpyAsync");
	cuda(cudaEventCreate(&e), "cudaEventCreate");
	cuda(cudaEventRecord(e, s), "cudaEventRecord");
	cuda(cudaEventDestroy(e), "cudaEventDestroy");
}

static ncclComm_t polled[2]; // nonblocking communicators: ncclInProgress means "poll them"

static void nccl(ncclResult_t e, const char *what)
{
	if (e == ncclInProgress) { // every one polled until it is no longer in progress
		e = ncclSuccess;
		for (int i = 0; i < 2 && e == ncclSuccess; i++) {
			ncclResult_t st = ncclInProgress;
			while (polled[i] && st == ncclInProgress) {
				ncclResult_t rc = ncclCommGetAsyncError(polled[i], &st);
				if (rc != ncclSuccess)
					st = rc;
			}
			if (polled[i])
				e = st;
		}
	}
	if (e != ncclSuccess) {
		fprintf(stderr, "nccl_app: %s: %s\n", what, ncclGetErrorString(e));
		exit(1);
	}
}

// NCCL_APP_EXT2's CUPTI client: its external correlation records, by whether it pushed their id
static int ext2_mine, ext2_other, ext2_steps;
static char ext2_summary[96];

static void CUPTIAPI ext2_requested(uint8_t **b, size_t *size, size_t *max)
{
	*b = (uint8_t *)aligned_alloc(8, 1 << 16);
	*size = 1 << 16;
	*max = 0;
}

static void CUPTIAPI ext2_completed(CUcontext, uint32_t, uint8_t *b, size_t, size_t valid)
{
	CUpti_Activity *r = NULL;
	while (K.cuptiActivityGetNextRecord(b, valid, &r) == CUPTI_SUCCESS)
		if (r->kind == CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION) {
			uint64_t id = ((CUpti_ActivityExternalCorrelation *)r)->externalId;
			int mine = ((CUpti_ActivityExternalCorrelation *)r)->externalKind ==
					   CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2 && id >= 1 && id <= (uint64_t)ext2_steps;
			ext2_mine += mine;
			ext2_other += !mine;
		}
	free(b);
}

// on: subscribe, buffers, runtime calls and their external correlations on (libcupti in the global
// scope, kineto_shape.h: a record of an id comes with a call's record); off: flushed, its counts
static void ext2_client(int on, int steps)
{
	CUpti_SubscriberHandle sub;
	ext2_steps = steps;
	if (on && (kineto_load("nccl_app") || K.cuptiSubscribe(&sub, NULL, NULL) != CUPTI_SUCCESS ||
		   K.cuptiActivityRegisterCallbacks(ext2_requested, ext2_completed) != CUPTI_SUCCESS ||
		   K.cuptiActivityEnable(CUPTI_ACTIVITY_KIND_RUNTIME) != CUPTI_SUCCESS ||
		   K.cuptiActivityEnable(CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION) != CUPTI_SUCCESS)) {
		fprintf(stderr, "nccl_app: no CUPTI client\n");
		exit(1);
	}
	if (!on) {
		K.cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
		snprintf(ext2_summary, sizeof ext2_summary, ", \"ext2\": %d, \"ext2_other\": %d", ext2_mine, ext2_other);
	}
}

// NCCL_APP_LATE's tracer: the kernel records completed to it (its own buffers, or a profiler's
// it then holds: each freed, as its own)
static int late_kernels, late_rc = -1;
static CUptiResult (*late_next)(uint8_t *, size_t, CUpti_Activity **);

static void CUPTIAPI late_completed(CUcontext, uint32_t, uint8_t *b, size_t, size_t valid)
{
	CUpti_Activity *r = NULL;
	while (late_next && late_next(b, valid, &r) == CUPTI_SUCCESS)
		late_kernels += r->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
	free(b);
}

static void late_tracer()
{
	void *h = dlopen("libcupti.so.13", RTLD_NOW | RTLD_LOCAL);
	auto reg = h ? (decltype(&cuptiActivityRegisterCallbacks))dlsym(h, "cuptiActivityRegisterCallbacks") : NULL;
	auto enable = h ? (decltype(&cuptiActivityEnable))dlsym(h, "cuptiActivityEnable") : NULL;
	late_next = h ? (decltype(late_next))dlsym(h, "cuptiActivityGetNextRecord") : NULL;
	if (!reg || !enable || !late_next) {
		fprintf(stderr, "nccl_app: no late tracer: %s\n", h ? "libcupti lacks its calls" : dlerror());
		exit(1);
	}
	if ((late_rc = (int)reg(ext2_requested, late_completed)) == CUPTI_SUCCESS)
		enable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
}

// the ring exchange's group: to the next rank, from the one before (and grp's two halves allreduced)
static void ring(ncclComm_t comm, cudaStream_t s, float *grp, float *out, float *in, int m, int rank, int nranks)
{
	nccl(ncclGroupStart(), "ncclGroupStart");
	if (grp) {
		nccl(ncclAllReduce(grp, grp, m / 2, ncclFloat, ncclSum, comm, s), "ncclAllReduce (grouped)");
		nccl(ncclAllReduce(grp + m / 2, grp + m / 2, m / 2, ncclFloat, ncclSum, comm, s), "ncclAllReduce (grouped)");
	}
	nccl(ncclSend(out, m, ncclFloat, (rank + 1) % nranks, comm, s), "ncclSend");
	nccl(ncclRecv(in, m, ncclFloat, (rank + nranks - 1) % nranks, comm, s), "ncclRecv");
	nccl(ncclGroupEnd(), "ncclGroupEnd");
}

int main(int argc, char **argv)
{
	if (argc < 4) {
		fprintf(stderr, "usage: nccl_app RANK NRANKS IDFILE [STEPS]\n");
		return 2;
	}
	int rank = atoi(argv[1]), nranks = atoi(argv[2]), steps = argc > 4 ? atoi(argv[4]) : 4;
	const char *idfile = argv[3];
	double skew_ms = getenv("NCCL_APP_SKEW_MS") ? atof(getenv("NCCL_APP_SKEW_MS")) : 2;
	ncclUniqueId id;
	if (rank == 0) {
		nccl(ncclGetUniqueId(&id), "ncclGetUniqueId");
		char tmp[4096];
		snprintf(tmp, sizeof tmp, "%s.tmp", idfile);
		FILE *f = fopen(tmp, "wb");
		if (!f || fwrite(&id, sizeof id, 1, f) != 1 || fclose(f) != 0 || rename(tmp, idfile) != 0) {
			perror("nccl_app: writing the id");
			return 1;
		}
	} else {
		FILE *f = NULL;
		for (int i = 0; i < 6000 && !(f = fopen(idfile, "rb")); i++)
			usleep(10000);
		if (!f || fread(&id, sizeof id, 1, f) != 1) {
			fprintf(stderr, "nccl_app: no id in %s\n", idfile);
			return 1;
		}
		fclose(f);
	}
	cuda(cudaSetDevice(0), "cudaSetDevice");
	ncclResult_t (*init_rank)(ncclComm_t *, int, ncclUniqueId, int) = ncclCommInitRank;
	ncclResult_t (*all_reduce)(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t,
				   cudaStream_t) = ncclAllReduce;
	if (getenv("NCCL_APP_DLOPEN")) {
		void *h = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
		*(void **)&init_rank = h ? dlsym(h, "ncclCommInitRank") : NULL;
		*(void **)&all_reduce = h ? dlsym(h, "ncclAllReduce") : NULL;
		if (!init_rank || !all_reduce) {
			fprintf(stderr, "nccl_app: libnccl.so.2 through dlopen: %s\n", dlerror());
			return 1;
		}
	}
	ncclComm_t comm;
	long long i0 = now_ns();
	if (getenv("NCCL_APP_NONBLOCKING")) {
		ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
		config.blocking = 0;
		ncclResult_t rc = ncclCommInitRankConfig(&comm, nranks, id, rank, &config);
		polled[0] = comm;
		nccl(rc, "ncclCommInitRankConfig");
	} else if (getenv("NCCL_APP_SCALABLE")) {
		nccl(ncclCommInitRankScalable(&comm, nranks, rank, 1, &id, NULL), "ncclCommInitRankScalable");
	} else {
		nccl(init_rank(&comm, nranks, id, rank), "ncclCommInitRank");
	}
	long long i1 = now_ns();
	// NCCL_APP_SPLIT=1: the even and the odd ranks also make a communicator each (ncclCommSplit)
	// and allreduce 1 MiB on it every step (NCCL_APP_SPLIT_STREAM=1: on a stream of its own)
	ncclComm_t sub = NULL;
	if (getenv("NCCL_APP_SPLIT")) {
		ncclResult_t rc = ncclCommSplit(comm, rank % 2, rank, &sub, NULL);
		if (polled[0])
			polled[1] = sub; // (it inherits its parent's nonblocking config)
		nccl(rc, "ncclCommSplit");
	}

	const int n = 8 << 20; // 32 MiB of floats
	const int m = 1 << 18; // 1 MiB
	float *grad, *out, *in, *sum;
	cuda(cudaMalloc(&grad, n * sizeof(float)), "cudaMalloc");
	sum = grad;
	if (getenv("NCCL_APP_OOP"))
		cuda(cudaMalloc(&sum, n * sizeof(float)), "cudaMalloc");
	cuda(cudaMalloc(&out, m * sizeof(float)), "cudaMalloc");
	cuda(cudaMalloc(&in, m * sizeof(float)), "cudaMalloc");
	float *grp = NULL, *host = NULL;
	if (getenv("NCCL_APP_TAIL"))
		cuda(cudaMallocHost(&host, sizeof *host), "cudaMallocHost");
	if (getenv("NCCL_APP_GROUPED"))
		cuda(cudaMalloc(&grp, m * sizeof(float)), "cudaMalloc");
	cudaStream_t compute, comms, subs;
	cudaEvent_t done;
	cuda(cudaStreamCreate(&compute), "cudaStreamCreate");
	cuda(cudaStreamCreate(&comms), "cudaStreamCreate");
	subs = comms;
	if (getenv("NCCL_APP_SPLIT_STREAM"))
		cuda(cudaStreamCreate(&subs), "cudaStreamCreate");
	cuda(cudaEventCreate(&done), "cudaEventCreate");
	cudaGraphExec_t graph = NULL;
	int whole = getenv("NCCL_APP_GRAPH") && !strcmp(getenv("NCCL_APP_GRAPH"), "2");
	if (getenv("NCCL_APP_GRAPH")) {
		cudaGraph_t g;
		cuda(cudaStreamBeginCapture(comms, cudaStreamCaptureModeGlobal), "cudaStreamBeginCapture");
		nccl(all_reduce(grad, sum, n, ncclFloat, ncclSum, comm, comms), "ncclAllReduce (captured)");
		if (whole)
			ring(comm, comms, grp, out, in, m, rank, nranks);
		cuda(cudaStreamEndCapture(comms, &g), "cudaStreamEndCapture");
		cuda(cudaGraphInstantiate(&graph, g, 0), "cudaGraphInstantiate");
		cuda(cudaGraphDestroy(g), "cudaGraphDestroy");
	}
	// (NCCL_APP_EXT2: a CUPTI client with ids of ddpspy's external correlation kind, CUSTOM2)
	int ext2 = getenv("NCCL_APP_EXT2") != NULL;
	if (ext2)
		ext2_client(1, steps);
	int late = getenv("NCCL_APP_LATE") ? atoi(getenv("NCCL_APP_LATE")) : -1;
	printf("{\"rank\": %d, \"init\": [%lld, %lld], \"steps\": [", rank, i0, i1);
	for (int s = 0; s < steps; s++) {
		if (s == late)
			late_tracer();
		long long t0 = now_ns();
		uint64_t popped;
		if (ext2)
			K.cuptiActivityPushExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2, (uint64_t)s + 1);
		forward<<<n / 1024, 1024, 0, compute>>>(grad, n);
		backward<<<n / 1024, 1024, 0, compute>>>(grad, n);
		if (ext2)
			K.cuptiActivityPopExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2, &popped);
		cuda(cudaEventRecord(done, compute), "cudaEventRecord");
		cuda(cudaStreamWaitEvent(comms, done, 0), "cudaStreamWaitEvent");
		usleep((useconds_t)(rank * skew_ms * 1000));
		long long a0 = now_ns();
		if (graph)
			cuda(cudaGraphLaunch(graph, comms), "cudaGraphLaunch");
		else
			nccl(all_reduce(grad, sum, n, ncclFloat, ncclSum, comm, comms), "ncclAllReduce");
		long long a1 = now_ns();
		if (host)
			tail(sum, host, comms);
		if (sub)
			nccl(ncclAllReduce(in, in, m, ncclFloat, ncclSum, sub, subs), "ncclAllReduce (split)");
		if (!whole)
			ring(comm, comms, grp, out, in, m, rank, nranks);
		long long g1 = now_ns();
		cuda(cudaStreamSynchronize(comms), "cudaStreamSynchronize");
		if (subs != comms)
			cuda(cudaStreamSynchronize(subs), "cudaStreamSynchronize");
		long long t1 = now_ns();
		printf("%s{\"t0\": %lld, \"allreduce\": [%lld, %lld], \"group_end\": %lld, \"t1\": %lld}", s ? ", " : "",
		       t0, a0, a1, g1, t1);
	}
	if (ext2)
		ext2_client(0, steps);
	if (late >= 0) {
		cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
		void *h = dlopen("libcupti.so.13", RTLD_NOW | RTLD_LOCAL);
		auto flush = h ? (decltype(&cuptiActivityFlushAll))dlsym(h, "cuptiActivityFlushAll") : NULL;
		if (flush)
			flush(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
	}
	printf("]%s", ext2_summary);
	if (late >= 0)
		printf(", \"late_kernels\": %d, \"late_rc\": %d", late_kernels, late_rc);
	printf("}\n");
	if (graph) // (before its communicator goes: the graph's collectives hold it)
		cuda(cudaGraphExecDestroy(graph), "cudaGraphExecDestroy");
	if (getenv("NCCL_APP_HANG")) {
		fflush(stdout);
		if (rank == 0)
			fprintf(stderr, "hanging\n");
		if (rank == nranks - 1) {
			char c;
			int fd = open(getenv("NCCL_APP_HANG"), O_RDWR);
			if (fd < 0 || read(fd, &c, 1) < 0)
				perror("nccl_app: the FIFO");
		}
		nccl(all_reduce(grad, sum, n, ncclFloat, ncclSum, comm, comms), "ncclAllReduce");
		cuda(cudaStreamSynchronize(comms), "cudaStreamSynchronize");
	}
	if (getenv("NCCL_APP_SHRINK") && nranks > 1 && rank != nranks - 1) {
		int last = nranks - 1;
		ncclComm_t shr;
		nccl(ncclCommShrink(comm, &last, 1, &shr, NULL, NCCL_SHRINK_DEFAULT), "ncclCommShrink");
		nccl(ncclAllReduce(in, in, m, ncclFloat, ncclSum, shr, comms), "ncclAllReduce (shrunk)");
		cuda(cudaStreamSynchronize(comms), "cudaStreamSynchronize");
		nccl(ncclCommDestroy(shr), "ncclCommDestroy");
	}
	if (polled[0]) { // a nonblocking communicator is finalized (polled to its end) before it is destroyed
		nccl(ncclCommFinalize(comm), "ncclCommFinalize");
		if (sub)
			nccl(ncclCommFinalize(sub), "ncclCommFinalize");
		polled[0] = polled[1] = NULL;
	}
	if (sub)
		nccl(ncclCommDestroy(sub), "ncclCommDestroy");
	nccl(ncclCommDestroy(comm), "ncclCommDestroy");
	if (host)
		cuda(cudaFreeHost(host), "cudaFreeHost");
	return 0;
}
