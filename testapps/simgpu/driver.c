/* A stand-in for the CUDA driver, libcuda.so.1, on the simulated device (testapps/simgpu/,
 * `make sim`): the simulated cudart loads it at its start, as the real one loads the driver, so
 * that the driver is among a CUDA process's loaded objects there too (what a profiler that cannot
 * use CUDA_INJECTION64_PATH watches for). It models little: the simulated cudart does the device's
 * work. What it has is what Triton does with the real one: cuGetProcAddress_v2 (the entry point
 * programs find driver functions by, cuda.h) hands out cuLaunchKernelEx, which launches a kernel
 * from cudaGetFuncBySymbol as a driver call that CUPTI records (cupti_driver_cbid.h's
 * cuLaunchKernelEx) and its kernel joins by correlation id, as on an H200 (docs/gpu.md). A test
 * double, never part of the product. */
#include <cuda.h>
#include <cupti_driver_cbid.h>
#include <dlfcn.h>
#include <string.h>

#include "simgpu.h"

static int initialised;

/* cuInit: the simulated cudart calls it once, at its start */
CUresult cuInit(unsigned int flags)
{
	__atomic_store_n(&initialised, 1, __ATOMIC_RELEASE);
	return CUDA_SUCCESS;
}

/* CUDA_ERROR_NOT_INITIALIZED before cuInit, as the driver says (cuda.h); one context after */
CUresult cuCtxGetCurrent(CUcontext *ctx)
{
	static int one;
	if (!__atomic_load_n(&initialised, __ATOMIC_ACQUIRE))
		return CUDA_ERROR_NOT_INITIALIZED;
	if (ctx)
		*ctx = (CUcontext)&one;
	return CUDA_SUCCESS;
}

CUresult cuDriverGetVersion(int *version)
{
	if (!version)
		return CUDA_ERROR_INVALID_VALUE;
	*version = CUDA_VERSION;
	return CUDA_SUCCESS;
}

#undef cuLaunchKernelEx
CUresult cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction f, void **params, void **extra)
{
	static int (*launch)(void *, const unsigned[3], const unsigned[3], void **, void *, int);
	if (!launch)
		*(void **)&launch = dlsym(RTLD_DEFAULT, "simgpu_driver_launch");
	if (!config)
		return CUDA_ERROR_INVALID_VALUE;
	if (!launch)
		return CUDA_ERROR_NOT_INITIALIZED;
	const unsigned grid[3] = { config->gridDimX, config->gridDimY, config->gridDimZ };
	const unsigned block[3] = { config->blockDimX, config->blockDimY, config->blockDimZ };
	return (CUresult)launch(f, grid, block, params, config->hStream, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx);
}

#undef cuGetProcAddress
#undef cuGetProcAddress_v2
CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version, cuuint64_t flags,
			     CUdriverProcAddressQueryResult *status)
{
	static const struct { const char *name; void *fn; } known[] = {
		{ "cuLaunchKernelEx", (void *)cuLaunchKernelEx },
		{ "cuGetProcAddress", (void *)cuGetProcAddress_v2 },
		{ "cuDriverGetVersion", (void *)cuDriverGetVersion },
	};
	if (!symbol || !pfn)
		return CUDA_ERROR_INVALID_VALUE;
	for (size_t i = 0; i < sizeof known / sizeof *known; i++)
		if (!strcmp(symbol, known[i].name)) {
			*pfn = known[i].fn;
			if (status)
				*status = CU_GET_PROC_ADDRESS_SUCCESS;
			return CUDA_SUCCESS;
		}
	*pfn = NULL;
	if (status)
		*status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
	return CUDA_ERROR_NOT_FOUND;
}
