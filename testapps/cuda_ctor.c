/* A library whose constructor starts CUDA (libcuda_ctor.so, DT_NEEDED by cuda_c_ctor): as a
 * library that initialises its device when it is loaded does. A DT_NEEDED library's constructor
 * runs before a preloaded one's, so CUDA is initialised before ddpspy's constructor has named
 * itself in CUDA_INJECTION64_PATH: the driver's cuInit never calls its InitializeInjection. */
#include <cuda_runtime_api.h>

__attribute__((constructor)) static void start_cuda(void)
{
	int n = 0;
	(void)cudaGetDeviceCount(&n);
}

int cuda_ctor_linked(void)
{
	return 1;
}
