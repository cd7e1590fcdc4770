// A CUDA program for the tests: kernels, copies, streams and events through the runtime API, its
// host-side timings printed as one JSON line. Built with nvcc -cudart shared (make sim), it runs on
// the simulated device (LD_LIBRARY_PATH=build/simgpu) or on a real GPU.
//
// usage: gpu_app timeline    (with SIMGPU_KERNELS=spin=5000,tick=2000 on the simulated device)
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <cuda_runtime.h>

__global__ void spin(float *a, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		a[i] = a[i] * 0.5f + 1.0f;
}

__global__ void tick(float *a, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		a[i] += 1.0f;
}

static double now_ms()
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void check(cudaError_t e, const char *what)
{
	if (e != cudaSuccess) {
		fprintf(stderr, "gpu_app: %s: %s\n", what, cudaGetErrorString(e));
		exit(1);
	}
}

// device time between two events recorded around fn's work, in ms
template <typename F> static float between(F fn)
{
	cudaEvent_t a, b;
	check(cudaEventCreate(&a), "cudaEventCreate");
	check(cudaEventCreate(&b), "cudaEventCreate");
	check(cudaEventRecord(a, 0), "cudaEventRecord");
	fn();
	check(cudaEventRecord(b, 0), "cudaEventRecord");
	check(cudaEventSynchronize(b), "cudaEventSynchronize");
	float ms = -1;
	check(cudaEventElapsedTime(&ms, a, b), "cudaEventElapsedTime");
	cudaEventDestroy(a);
	cudaEventDestroy(b);
	return ms;
}

int main(int argc, char **argv)
{
	if (argc < 2 || strcmp(argv[1], "timeline")) {
		fprintf(stderr, "usage: gpu_app timeline\n");
		return 2;
	}
	const int n = 1 << 20;
	const size_t big = 64u << 20;
	float *d, *dbig;
	check(cudaMalloc(&d, n * sizeof(float)), "cudaMalloc");
	check(cudaMalloc(&dbig, big), "cudaMalloc");
	cudaStream_t s1, s2;
	check(cudaStreamCreate(&s1), "cudaStreamCreate");
	check(cudaStreamCreate(&s2), "cudaStreamCreate");

	// a kernel: the launch returns at once, the synchronize waits for it
	double t0 = now_ms();
	spin<<<n / 256, 256, 0, s1>>>(d, n);
	double t1 = now_ms();
	check(cudaStreamSynchronize(s1), "cudaStreamSynchronize");
	double t2 = now_ms();

	// three kernels in a row on one stream; two streams side by side; a stream then stream 0
	float serial3 = between([&] { for (int i = 0; i < 3; i++) tick<<<n / 256, 256, 0, s1>>>(d, n); });
	float side = between([&] {
		spin<<<n / 256, 256, 0, s1>>>(d, n);
		spin<<<n / 256, 256, 0, s2>>>(d, n);
	});
	float legacy = between([&] {
		spin<<<n / 256, 256, 0, s1>>>(d, n);
		spin<<<n / 256, 256, 0, 0>>>(d, n);
	});

	// 64 MiB to the device from pinned and from pageable memory, asynchronously
	char *pinned, *pageable = (char *)malloc(big);
	check(cudaMallocHost(&pinned, big), "cudaMallocHost");
	memset(pinned, 7, big);
	memset(pageable, 9, big);
	double p0 = now_ms(), p1 = 0;
	float pin_ms = between([&] {
		check(cudaMemcpyAsync(dbig, pinned, big, cudaMemcpyHostToDevice, 0), "cudaMemcpyAsync");
		p1 = now_ms();
	});
	double q0 = now_ms(), q1 = 0;
	float page_ms = between([&] {
		check(cudaMemcpyAsync(dbig, pageable, big, cudaMemcpyHostToDevice, 0), "cudaMemcpyAsync");
		q1 = now_ms();
	});
	// and back: the bytes round-trip
	memset(pinned, 0, big);
	check(cudaMemcpy(pinned, dbig, big, cudaMemcpyDeviceToHost), "cudaMemcpy");
	int same = pinned[0] == 9 && pinned[big - 1] == 9;
	check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");

	printf("{\"launch_ms\": %.3f, \"sync_ms\": %.3f, \"serial3_ms\": %.3f, \"side_ms\": %.3f, \"legacy_ms\": %.3f, "
	       "\"pinned_copy_ms\": %.3f, \"pinned_host_ms\": %.3f, \"pageable_copy_ms\": %.3f, \"pageable_host_ms\": %.3f, "
	       "\"round_trip\": %s}\n", t1 - t0, t2 - t1, serial3, side, legacy, pin_ms, p1 - p0, page_ms, q1 - q0,
	       same ? "true" : "false");
	cudaFreeHost(pinned);
	free(pageable);
	cudaFree(d);
	cudaFree(dbig);
	cudaStreamDestroy(s1);
	cudaStreamDestroy(s2);
	return 0;
}
