// ddpbench's GPU half (`train --gpu`): build/libddpbench_gpu.so, built with nvcc against the shared
// cudart and libnccl.so.2 when CUDA is found, and dlopened by ddpbench only when --gpu is given, so
// ddpbench itself needs no CUDA. The step's work as a GPU trainer does it: the batch copied host to
// device (from pinned or pageable memory) on the compute stream; forward, backward and optimizer
// as kernels on the compute stream; each gradient bucket all-reduced with NCCL on a communication
// stream as soon as backward has produced it (an event between the streams), or after backward on
// the compute stream (no overlap). The kernels are a cost model, like the token model on the CPU:
// each lasts the time train.c gives it (on a GPU it spins on the global timer; on the simulated
// device its first argument is its duration, SIMGPU_KERNELS="ddpbench_=arg"); they do not train.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda_runtime.h>
#include <mutex>
#include <nccl.h>
#include <unordered_map>
#include <vector>

#include "../globaltimer.cuh"
#include "../kineto_shape.h"
#include "ddpbench.h"

#define FSDP_EVENTS (2 * 4 * MAX_LAYERS) // (a step records at most 3 per layer)

// one per phase, so that a profile names them; each touches its buffer so it is real work
__global__ void ddpbench_forward(unsigned long long ns, float *p)
{
	if (threadIdx.x == 0)
		globaltimer_spin(ns);
	p[threadIdx.x] += 1.0f;
}

__global__ void ddpbench_backward(unsigned long long ns, float *p)
{
	if (threadIdx.x == 0)
		globaltimer_spin(ns);
	p[threadIdx.x] *= 0.5f;
}

__global__ void ddpbench_optimizer(unsigned long long ns, float *p)
{
	if (threadIdx.x == 0)
		globaltimer_spin(ns);
	p[threadIdx.x] -= 0.01f;
}

static struct {
	struct gpu_conf c;
	cudaStream_t compute, comm, side;
	int dev, side_dev;
	cudaEvent_t grads_ready[MAX_LAYERS], comm_done, step_end[2], loss_ready;
	// --fsdp: the compute stream's points, gathers done; enough for two steps (the host runs one
	// ahead at most), so that no event is recorded again while a wait for it may be pending
	cudaEvent_t at[FSDP_EVENTS], gathered[FSDP_EVENTS];
	int nat, ngath;
	float *shard, *whole;                                      // --fsdp: a layer's part, and the layer whole
	float *out, *in;                                           // --pipeline: a micro-batch sent, and received
	ncclComm_t nccl, dp;                                       // (dp: --pipeline, the stage's replicas)
	float *grad, *extra, *scratch, *loss_dev, *one;
	void *input_host, *input_dev, *d2d_src, *d2d_dst;
	float loss_host[4], *loss_pinned;
	int nready, step;
	char err[256];
} G;

static int cuda_failed(cudaError_t e, const char *what)
{
	if (e == cudaSuccess)
		return 0;
	snprintf(G.err, sizeof G.err, "%s: %s", what, cudaGetErrorString(e));
	return 1;
}

static int nccl_failed(ncclResult_t e, const char *what)
{
	if (e == ncclSuccess)
		return 0;
	snprintf(G.err, sizeof G.err, "%s: %s", what, ncclGetErrorString(e));
	return 1;
}

// the first call that fails stays in G.err, and the run stops at the step's end (gpu_end_step)
#define CUDA(call) (void)(G.err[0] || cuda_failed((call), #call))
#define NCCL(call) (void)(G.err[0] || nccl_failed((call), #call))

static int unique_id(void *id, size_t len)
{
	ncclUniqueId u;
	if (len < sizeof u || nccl_failed(ncclGetUniqueId(&u), "ncclGetUniqueId"))
		return -1;
	memcpy(id, &u, sizeof u);
	return (int)sizeof u;
}

static int init(const struct gpu_conf *c, const void *id, char *err, size_t len)
{
	G.c = *c;
	int n = 0;
	if (cuda_failed(cudaGetDeviceCount(&n), "cudaGetDeviceCount") || n < 1) {
		snprintf(err, len, "%s", G.err[0] ? G.err : "no CUDA device");
		return -1;
	}
	G.dev = c->local_rank % n;
	if (c->side_gpu_ms > 0) { // the next device, a stream of its own there
		G.side_dev = (G.dev + 1) % n;
		CUDA(cudaSetDevice(G.side_dev));
		CUDA(cudaStreamCreateWithFlags(&G.side, cudaStreamNonBlocking));
	}
	CUDA(cudaSetDevice(G.dev));
	CUDA(cudaStreamCreateWithFlags(&G.compute, cudaStreamNonBlocking));
	CUDA(cudaStreamCreateWithFlags(&G.comm, cudaStreamNonBlocking));
	for (int i = 0; i < MAX_LAYERS; i++)
		CUDA(cudaEventCreateWithFlags(&G.grads_ready[i], cudaEventDisableTiming));
	for (int i = 0; i < FSDP_EVENTS; i++) {
		CUDA(cudaEventCreateWithFlags(&G.at[i], cudaEventDisableTiming));
		CUDA(cudaEventCreateWithFlags(&G.gathered[i], cudaEventDisableTiming));
	}
	CUDA(cudaEventCreateWithFlags(&G.comm_done, cudaEventDisableTiming));
	CUDA(cudaEventCreateWithFlags(&G.loss_ready, cudaEventDisableTiming));
	if (c->sync_by == SYNC_BY_POLL || c->sync_by == SYNC_BY_FREE)
		CUDA(cudaMallocHost((void **)&G.loss_pinned, sizeof(float)));
	CUDA(cudaEventCreate(&G.step_end[0]));
	CUDA(cudaEventCreate(&G.step_end[1]));
	CUDA(cudaMalloc((void **)&G.grad, c->grad_floats * sizeof(float)));
	if (c->layer_floats) { // (--fsdp: the largest layer, whole and as this rank's part)
		CUDA(cudaMalloc((void **)&G.whole, c->layer_floats * sizeof(float)));
		CUDA(cudaMalloc((void **)&G.shard, (c->layer_floats / c->ws + 1) * sizeof(float)));
	}
	if (c->pipe_floats) {
		CUDA(cudaMalloc((void **)&G.out, c->pipe_floats * sizeof(float)));
		CUDA(cudaMalloc((void **)&G.in, c->pipe_floats * sizeof(float)));
	}
	CUDA(cudaMalloc((void **)&G.scratch, 1024 * sizeof(float)));
	CUDA(cudaMalloc((void **)&G.loss_dev, sizeof(float)));
	CUDA(cudaMalloc((void **)&G.one, sizeof(float)));
	if (c->extra_floats)
		CUDA(cudaMalloc((void **)&G.extra, c->extra_floats * sizeof(float)));
	CUDA(cudaMalloc(&G.input_dev, c->input_bytes));
	if (c->d2d_bytes) {
		CUDA(cudaMalloc(&G.d2d_src, c->d2d_bytes));
		CUDA(cudaMalloc(&G.d2d_dst, c->d2d_bytes));
	}
	if (!G.err[0]) {
		if (c->pageable)
			G.input_host = calloc(1, c->input_bytes);
		else
			CUDA(cudaMallocHost(&G.input_host, c->input_bytes));
		if (!G.input_host && !G.err[0])
			snprintf(G.err, sizeof G.err, "no memory for the %zu-byte input buffer", c->input_bytes);
	}
	if (!G.err[0])
		memset(G.input_host, 0, c->input_bytes);
	ncclUniqueId u;
	memcpy(&u, id, sizeof u);
	NCCL(ncclCommInitRank(&G.nccl, c->ws, u, c->rank));
	if (c->dp_color >= 0) // (--pipeline with replicas: theirs, split off the world's by stage, nccl.h)
		NCCL(ncclCommSplit(G.nccl, c->dp_color, c->rank, &G.dp, NULL));
	if (c->cupti_from >= 0 && !G.err[0] && kineto_load("ddpbench"))
		snprintf(G.err, sizeof G.err, "--cupti-client: no libcupti.so.13");
	if (G.err[0])
		snprintf(err, len, "%s", G.err);
	return G.err[0] ? -1 : 0;
}

// the batch to the device: its bytes into the host buffer (pinned: as a DataLoader's pin_memory
// thread would have; the rest of the buffer stays as it was), then one copy on the compute stream
static void upload(const void *src, size_t bytes)
{
	if (bytes > G.c.input_bytes)
		bytes = G.c.input_bytes;
	memcpy(G.input_host, src, bytes);
	CUDA(cudaMemcpyAsync(G.input_dev, G.input_host, G.c.input_bytes, cudaMemcpyHostToDevice, G.compute));
	if (G.c.d2d_bytes) // (--d2d-mb: the step's own copy on the device, at HBM speed)
		CUDA(cudaMemcpyAsync(G.d2d_dst, G.d2d_src, G.c.d2d_bytes, cudaMemcpyDeviceToDevice, G.compute));
}

// ns of one phase's work on the compute stream: one kernel, or c.kernels tiny ones (launch-bound)
static void kernel(int phase, double ns)
{
	int n = G.c.kernels > 1 ? G.c.kernels : 1;
	unsigned long long each = (unsigned long long)(ns / n);
	for (int i = 0; i < n && !G.err[0]; i++) {
		if (phase == GPU_FORWARD)
			ddpbench_forward<<<1, 32, 0, G.compute>>>(each, G.scratch);
		else if (phase == GPU_BACKWARD)
			ddpbench_backward<<<1, 32, 0, G.compute>>>(each, G.scratch);
		else
			ddpbench_optimizer<<<1, 32, 0, G.compute>>>(each, G.scratch);
		CUDA(cudaGetLastError());
	}
}

// a gradient bucket is ready: all-reduced on the communication stream once backward has made it,
// or (no overlap) on the compute stream, in order after backward
static void bucket(size_t first, size_t count)
{
	cudaStream_t s = G.compute;
	if (G.c.overlap) {
		int i = G.nready++ % MAX_LAYERS;
		CUDA(cudaEventRecord(G.grads_ready[i], G.compute));
		CUDA(cudaStreamWaitEvent(G.comm, G.grads_ready[i], 0));
		s = G.comm;
	}
	NCCL(ncclAllReduce(G.grad + first, G.grad + first, count, ncclFloat, ncclSum, G.nccl, s));
}

// the optimizer needs every bucket: the compute stream waits for the communication stream
static void grads_done(void)
{
	if (!G.c.overlap)
		return;
	CUDA(cudaEventRecord(G.comm_done, G.comm));
	CUDA(cudaStreamWaitEvent(G.compute, G.comm_done, 0));
}

static void extra(void)
{
	NCCL(ncclAllReduce(G.extra, G.extra, G.c.extra_floats, ncclFloat, ncclSum, G.nccl, G.comm));
}

// torch.distributed.barrier() on NCCL: a one-element all-reduce, and the host waits for it
static void barrier(void)
{
	NCCL(ncclAllReduce(G.one, G.one, 1, ncclFloat, ncclSum, G.nccl, G.comm));
	CUDA(cudaStreamSynchronize(G.comm));
}

// loss.item(): a blocking copy into pageable memory, which waits for everything before it; or
// (--sync-by) the same wait made another way: polling an event recorded after the copy, a
// cudaFree, a synchronous cudaMemcpy2D
static void read_loss(void)
{
	if (G.c.sync_by == SYNC_BY_2D) { // (into pageable memory: it holds the host until it is done)
		CUDA(cudaMemcpy2DAsync(G.loss_host, sizeof(float), G.loss_dev, sizeof(float), sizeof(float), 1,
				       cudaMemcpyDeviceToHost, G.compute));
		return;
	}
	// (poll, free: into pinned memory, so that the copy itself does not hold the host)
	CUDA(cudaMemcpyAsync(G.c.sync_by == SYNC_BY_COPY ? G.loss_host : G.loss_pinned, G.loss_dev, sizeof(float),
			     cudaMemcpyDeviceToHost, G.compute));
	if (G.c.sync_by == SYNC_BY_POLL) {
		CUDA(cudaEventRecord(G.loss_ready, G.compute));
		cudaError_t e;
		while ((e = cudaEventQuery(G.loss_ready)) == cudaErrorNotReady)
			;
		CUDA(e);
	} else if (G.c.sync_by == SYNC_BY_FREE) {
		void *p;
		CUDA(cudaMalloc(&p, 256));
		CUDA(cudaFree(p));
	} else {
		CUDA(cudaStreamSynchronize(G.compute));
	}
}

// ---- --cupti-client FROM:TO: a second CUPTI client in torch.profiler's shape (kineto_shape.h)
// profiles steps FROM to TO as a schedule's active steps: its kinds on as step FROM begins, an
// external id of its own pushed for each step (Kineto's for each op: step s's is s + 1), its stop
// as step TO ends (the kinds off, a forced flush where it has a buffer out, the per-thread buffers
// off). torch.profiler synchronizes the device before that stop (torch.autograd.profiler.profile's
// __exit__: torch.cuda.synchronize()); an on-demand trace (dynolog's, Kineto's own run loop) does
// not (--cupti-client-no-sync), and step TO's work may then still run: Kineto takes it untimed and
// leaves it out. What it counts is what is certain to be in its trace either way: the kernels and
// copies launched in steps FROM to TO - 1, timed, by their launching call's external id.

static struct {
	CUpti_SubscriberHandle sub;
	int subscribed, discarding, outstanding, open;
	std::mutex mu; // (the buffers complete on CUPTI's thread or the flushing one)
	std::unordered_map<uint32_t, uint64_t> ext; // correlation id: its external id of the client's kind
	std::vector<std::pair<uint32_t, bool>> work; // timed kernels and copies: correlation id, a kernel
	long records;
} KC;

static uint64_t CUPTIAPI kc_clock()
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void CUPTIAPI kc_requested(uint8_t **b, size_t *size, size_t *max)
{
	*b = (uint8_t *)aligned_alloc(8, 1 << 20);
	*size = *b ? 1 << 20 : 0;
	*max = 0;
	__atomic_add_fetch(&KC.outstanding, *b != NULL, __ATOMIC_SEQ_CST);
}

static void CUPTIAPI kc_completed(CUcontext, uint32_t, uint8_t *b, size_t, size_t valid)
{
	__atomic_sub_fetch(&KC.outstanding, 1, __ATOMIC_SEQ_CST);
	std::lock_guard<std::mutex> g(KC.mu);
	CUpti_Activity *r = NULL;
	while (!KC.discarding && K.cuptiActivityGetNextRecord(b, valid, &r) == CUPTI_SUCCESS) {
		KC.records++;
		if (r->kind == CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION) {
			auto *x = (CUpti_ActivityExternalCorrelation *)r;
			if (x->externalKind == CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0)
				KC.ext[(uint32_t)x->correlationId] = (uint64_t)x->externalId;
		} else if (r->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) {
			auto *k = (CUpti_ActivityKernel10 *)r;
			if (k->start && k->end >= k->start)
				KC.work.push_back({ (uint32_t)k->correlationId, true });
		} else if (r->kind == CUPTI_ACTIVITY_KIND_MEMCPY) {
			auto *m = (CUpti_ActivityMemcpy6 *)r;
			if (m->start && m->end >= m->start)
				KC.work.push_back({ (uint32_t)m->correlationId, false });
		}
	}
	free(b);
}

// Kineto's start of a window: subscribed at its first, its clock and buffers, its kinds, then
// clearActivities (a forced flush, if it has a buffer out, whose records it throws away)
static void kc_open()
{
	if (!KC.subscribed)
		KC.subscribed = K.cuptiSubscribe(&KC.sub, NULL, NULL) == CUPTI_SUCCESS;
	K.cuptiActivityRegisterTimestampCallback(kc_clock);
	K.cuptiActivityRegisterCallbacks(kc_requested, kc_completed);
	kineto_kinds_on(false, false);
	if (__atomic_load_n(&KC.outstanding, __ATOMIC_SEQ_CST)) {
		KC.discarding = 1;
		K.cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
		KC.discarding = 0;
	}
	KC.open = 1;
}

static void kc_close()
{
	uint64_t id;
	K.cuptiActivityPopExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, &id);
	if (G.c.cupti_sync)
		CUDA(cudaDeviceSynchronize());
	kineto_kinds_off(false);
	if (__atomic_load_n(&KC.outstanding, __ATOMIC_SEQ_CST))
		K.cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
	kineto_per_thread_off();
	KC.open = 0;
}

// step s is about to begin
static void kc_step(int s)
{
	int from = G.c.cupti_from, to = G.c.cupti_to;
	uint64_t id;
	if (from < 0 || s < from || s > to + 1)
		return;
	if (s == from)
		kc_open();
	else if (s <= to)
		K.cuptiActivityPopExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, &id);
	if (s <= to)
		K.cuptiActivityPushExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, (uint64_t)s + 1);
	else
		kc_close();
}

// what the client got (CLIENT_*), -1 with no client
static int client(long *n)
{
	if (G.c.cupti_from < 0)
		return -1;
	if (KC.open) // (the run ended inside its window)
		kc_close();
	std::lock_guard<std::mutex> g(KC.mu);
	n[CLIENT_KERNELS] = n[CLIENT_COPIES] = 0;
	for (auto &w : KC.work) {
		auto x = KC.ext.find(w.first);
		if (x != KC.ext.end() && x->second > (uint64_t)G.c.cupti_from && x->second <= (uint64_t)G.c.cupti_to)
			n[w.second ? CLIENT_KERNELS : CLIENT_COPIES]++;
	}
	n[CLIENT_RECORDS] = KC.records;
	return 0;
}

// The step's end: the host may run one step ahead of the device and no more (a trainer's queue is
// bounded: the caching allocator, the prefetcher), so it waits for the step before this one.
// Returns -1 with the first error in err.
static int end_step(char *err, size_t len)
{
	if (G.c.side_gpu_ms > 0) { // (--side-gpu-ms: the step's kernel on the other device, as the step ends)
		CUDA(cudaSetDevice(G.side_dev));
		ddpbench_forward<<<1, 32, 0, G.side>>>((unsigned long long)(G.c.side_gpu_ms * 1e6), G.scratch);
		CUDA(cudaSetDevice(G.dev));
	}
	int i = G.step++ & 1;
	CUDA(cudaEventRecord(G.step_end[i], G.compute));
	if (G.step > 1)
		CUDA(cudaEventSynchronize(G.step_end[i ^ 1]));
	kc_step(G.step);
	if (G.err[0])
		snprintf(err, len, "%s", G.err);
	return G.err[0] ? -1 : 0;
}

static void finish(void)
{
	if (G.c.side_gpu_ms > 0) {
		cudaSetDevice(G.side_dev);
		cudaDeviceSynchronize();
		cudaSetDevice(G.dev);
	}
	cudaDeviceSynchronize();
	if (G.dp)
		ncclCommDestroy(G.dp);
	if (G.nccl)
		ncclCommDestroy(G.nccl);
}

// --fsdp: the compute stream's present point, as an event the communication stream waits for
static void comm_after_compute(void)
{
	cudaEvent_t e = G.at[G.nat++ % FSDP_EVENTS];
	CUDA(cudaEventRecord(e, G.compute));
	CUDA(cudaStreamWaitEvent(G.comm, e, 0));
}

// a layer gathered on the communication stream from where the compute stream is now: issued
// before the layer before it computes, it runs beside that (prefetch); issued where the layer needs
// it, the compute stream waits for all of it
static int gather(size_t count)
{
	comm_after_compute();
	int slot = G.ngath++ % FSDP_EVENTS;
	NCCL(ncclAllGather(G.shard, G.whole, count / G.c.ws, ncclFloat, G.nccl, G.comm));
	CUDA(cudaEventRecord(G.gathered[slot], G.comm));
	return slot;
}

static void gathered(int slot)
{
	CUDA(cudaStreamWaitEvent(G.compute, G.gathered[slot % FSDP_EVENTS], 0));
}

// a layer's gradients, once backward made them, reduce-scattered behind the layers before it
static void scatter(size_t count)
{
	comm_after_compute();
	NCCL(ncclReduceScatter(G.grad, G.shard, count / G.c.ws, ncclFloat, ncclSum, G.nccl, G.comm));
}

// --pipeline: a micro-batch's activations or gradients sent to rank `to` and the next ones received
// from rank `from` (-1: none), grouped, on the compute stream, as Megatron-LM's p2p_communication
// pairs them (send_forward_recv_backward): one stream, and a 1F1B stage's send waits for a peer
// that is itself sending, so two calls ungrouped would wait for each other for good
static void p2p(int to, size_t send_count, int from, size_t recv_count)
{
	if (to < 0 && from < 0)
		return;
	NCCL(ncclGroupStart());
	if (to >= 0)
		NCCL(ncclSend(G.out, send_count, ncclFloat, to, G.nccl, G.compute));
	if (from >= 0)
		NCCL(ncclRecv(G.in, recv_count, ncclFloat, from, G.nccl, G.compute));
	NCCL(ncclGroupEnd());
}

// --pipeline with replicas: the stage's gradients all-reduced among them, before its optimizer
static void dp_reduce(size_t count)
{
	if (G.dp)
		NCCL(ncclAllReduce(G.grad, G.grad, count, ncclFloat, ncclSum, G.dp, G.compute));
}

extern "C" __attribute__((visibility("default"))) const struct gpu_ops ddpbench_gpu = {
	GPU_OPS_VERSION, unique_id, init, upload, kernel, bucket, grads_done, extra, barrier, read_loss, end_step,
	finish, gather, gathered, scatter, p2p, dp_reduce, client,
};
