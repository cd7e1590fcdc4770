/* A plain C program on CUDA's runtime API (no kernels, no nvcc): what a C library that moves data
 * to and from the GPU does. Built with cc against cuda_runtime_api.h and the shared libcudart.
 * usage: cuda_c  -> copies 8 MiB to the device and back on a stream, sets it, synchronizes; prints
 * {"ok": true} when the bytes came back. Built also as cuda_c_ctor (-DCUDA_CTOR), linked against
 * libcuda_ctor.so, whose constructor starts CUDA before a preloaded library's constructor runs. */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N (8u << 20)

#ifdef CUDA_CTOR
int cuda_ctor_linked(void); /* (cuda_c_ctor: linked against libcuda_ctor.so, which starts CUDA) */
#endif

int main(void)
{
#ifdef CUDA_CTOR
	cuda_ctor_linked();
#endif
	char *host, *back, *dev;
	cudaStream_t s;
	if (cudaMallocHost((void **)&host, N) || cudaMalloc((void **)&dev, N) || cudaStreamCreate(&s)) {
		fprintf(stderr, "cuda_c: no device\n");
		return 1;
	}
	back = malloc(N);
	memset(host, 5, N);
	int rc = cudaMemcpyAsync(dev, host, N, cudaMemcpyHostToDevice, s) || cudaStreamSynchronize(s) ||
		 cudaMemcpy(back, dev, N, cudaMemcpyDeviceToHost) || cudaMemset(dev, 0, N) || cudaDeviceSynchronize();
	int same = back && back[0] == 5 && back[N - 1] == 5;
	printf("{\"ok\": %s}\n", !rc && same ? "true" : "false");
	return !rc && same ? 0 : 1;
}
