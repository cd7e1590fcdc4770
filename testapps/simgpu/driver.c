/* A stand-in for the CUDA driver, libcuda.so.1, on the simulated device (testapps/simgpu/,
 * `make sim`): the simulated cudart loads it at its start, as the real one loads the driver, so
 * that the driver is among a CUDA process's loaded objects there too (what a profiler that cannot
 * use CUDA_INJECTION64_PATH watches for). It models nothing: the simulated cudart does the
 * device's work itself. A test double, never part of the product. */
#include <cuda.h>

CUresult cuDriverGetVersion(int *version)
{
	if (!version)
		return CUDA_ERROR_INVALID_VALUE;
	*version = CUDA_VERSION;
	return CUDA_SUCCESS;
}
