// A second CUPTI client in the shape of torch.profiler's Kineto, for the test programs (gpu_app
// kineto, ddpbench --cupti-client). It links libcupti: here it loads the library into the global
// scope and takes its functions from there, as the dynamic linker binds libtorch's calls, so a
// preloaded library's definitions come first. It turns on the kinds torch.profiler turns on, in its
// order, with the calls it leaves out (CuptiActivityApi::enableCuptiActivities; PyTorch 2.11 on an
// H200, docs/gpu.md), and off again at its stop. Header-only: each program keeps its own state.
#pragma once
#include <cstdio>
#include <cupti.h>
#include <dlfcn.h>

// libcupti's functions as a linked client's calls bind to them
static struct {
#define FN(n) decltype(&::n) n
	FN(cuptiSubscribe);
	FN(cuptiUnsubscribe);
	FN(cuptiFinalize);
	FN(cuptiActivityRegisterTimestampCallback);
	FN(cuptiActivityRegisterCallbacks);
	FN(cuptiActivityEnable);
	FN(cuptiActivityDisable);
	FN(cuptiActivityEnableRuntimeApi);
	FN(cuptiActivityEnableDriverApi);
	FN(cuptiActivitySetAttribute);
	FN(cuptiActivityFlushAll);
	FN(cuptiActivityGetNumDroppedRecords);
	FN(cuptiActivityGetNextRecord);
	FN(cuptiActivityPushExternalCorrelationId);
	FN(cuptiActivityPopExternalCorrelationId);
	FN(cuptiEnableCallback);
	FN(cuptiEnableDomain);
	FN(cuptiSetThreadIdType);
	FN(cuptiGetThreadIdType);
	FN(cuptiActivityFlush);
	FN(cuptiActivityEnableAndDump);
#undef FN
} K;

// libcupti.so.13 in the global scope and K from there; -1 (said on stderr, as who) without it
static int kineto_load(const char *who)
{
	if (!dlopen("libcupti.so.13", RTLD_NOW | RTLD_GLOBAL)) {
		fprintf(stderr, "%s: %s\n", who, dlerror());
		return -1;
	}
#define SYM(n) K.n = (decltype(&::n))dlsym(RTLD_DEFAULT, #n)
	SYM(cuptiSubscribe);
	SYM(cuptiUnsubscribe);
	SYM(cuptiFinalize);
	SYM(cuptiActivityRegisterTimestampCallback);
	SYM(cuptiActivityRegisterCallbacks);
	SYM(cuptiActivityEnable);
	SYM(cuptiActivityDisable);
	SYM(cuptiActivityEnableRuntimeApi);
	SYM(cuptiActivityEnableDriverApi);
	SYM(cuptiActivitySetAttribute);
	SYM(cuptiActivityFlushAll);
	SYM(cuptiActivityGetNumDroppedRecords);
	SYM(cuptiActivityGetNextRecord);
	SYM(cuptiActivityPushExternalCorrelationId);
	SYM(cuptiActivityPopExternalCorrelationId);
	SYM(cuptiEnableCallback);
	SYM(cuptiEnableDomain);
	SYM(cuptiSetThreadIdType);
	SYM(cuptiGetThreadIdType);
	SYM(cuptiActivityFlush);
	SYM(cuptiActivityEnableAndDump);
#undef SYM
	return 0;
}

// torch.profiler's kinds, in the order it turns them on (synchronization's place aside)
static const CUpti_ActivityKind kineto_kinds[] = {
	CUPTI_ACTIVITY_KIND_MEMCPY,	     CUPTI_ACTIVITY_KIND_MEMSET,  CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
	CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION, CUPTI_ACTIVITY_KIND_SYNCHRONIZATION, CUPTI_ACTIVITY_KIND_RUNTIME,
	CUPTI_ACTIVITY_KIND_DRIVER,	     CUPTI_ACTIVITY_KIND_OVERHEAD
};

// whether it asks for kind k; device_only: no CUDA call kind (runtime, driver), as a tracer set up
// for kernels only (Kineto's activity types allow it) asks
static bool kineto_wants(CUpti_ActivityKind k, bool device_only)
{
	return !device_only || (k != CUPTI_ACTIVITY_KIND_RUNTIME && k != CUPTI_ACTIVITY_KIND_DRIVER);
}

// its kinds on (with cuptiActivityEnableAndDump where dump), each call kind without the calls
// Kineto turns off; how many kinds went on
static int kineto_kinds_on(bool dump, bool device_only)
{
	int enabled = 0;
	for (CUpti_ActivityKind k : kineto_kinds) {
		if (!kineto_wants(k, device_only))
			continue;
		enabled += (dump ? K.cuptiActivityEnableAndDump(k) : K.cuptiActivityEnable(k)) == CUPTI_SUCCESS;
		if (k == CUPTI_ACTIVITY_KIND_RUNTIME)
			K.cuptiActivityEnableRuntimeApi(CUPTI_RUNTIME_TRACE_CBID_cudaGetDevice_v3020, 0);
		if (k == CUPTI_ACTIVITY_KIND_DRIVER)
			for (CUpti_CallbackId id : { CUPTI_DRIVER_TRACE_CBID_cuKernelGetAttribute,
						     CUPTI_DRIVER_TRACE_CBID_cuDevicePrimaryCtxGetState,
						     CUPTI_DRIVER_TRACE_CBID_cuCtxGetCurrent })
				K.cuptiActivityEnableDriverApi(id, 0);
	}
	return enabled;
}

// its stop (CuptiActivityProfiler's): the kinds off
static void kineto_kinds_off(bool device_only)
{
	for (CUpti_ActivityKind k : kineto_kinds)
		if (kineto_wants(k, device_only))
			K.cuptiActivityDisable(k);
}

// CuptiActivityApi::activityBuffers after its flush: the per-thread buffers off, whatever they were
static void kineto_per_thread_off()
{
	uint8_t per_thread = 0;
	size_t size = sizeof per_thread;
	K.cuptiActivitySetAttribute(CUPTI_ACTIVITY_ATTR_PER_THREAD_ACTIVITY_BUFFER, &size, &per_thread);
}
