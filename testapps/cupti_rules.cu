// The rules of the real CUPTI that ddpspy's sharing of it rests on (cupti/share.c), asked of the
// library itself: one process per case sets CUPTI up as ddpspy does (a subscriber, its activity
// kinds, the API records it keeps chosen one callback id at a time, queries' sync records off), then
// makes one change a second client would make through ddpspy, and counts what CUPTI records and
// calls back before it, while it is on, after it is undone, and after ddpspy's two ways of turning
// its own API records on again. One JSON line per case (tests/gpu/check.py, docs/gpu.md).
//
// usage: cupti_rules [CASE...]   (none: every case; libcupti.so.13 found on the library path)
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <cuda_runtime.h>
#include <cupti.h>
#include <dlfcn.h>
#include <sys/wait.h>
#include <unistd.h>

static struct {
#define FN(n) decltype(&::n) n
	FN(cuptiSubscribe);
	FN(cuptiSubscribe_v2);
	FN(cuptiEnableCallback);
	FN(cuptiEnableDomain);
	FN(cuptiEnableAllDomains);
	FN(cuptiActivityRegisterCallbacks);
	FN(cuptiActivityRegisterTimestampCallback);
	FN(cuptiActivityEnable);
	FN(cuptiActivityDisable);
	FN(cuptiActivityEnableRuntimeApi);
	FN(cuptiActivityEnableDriverApi);
	FN(cuptiActivityEnableAllSyncRecords);
	FN(cuptiActivityFlushAll);
	FN(cuptiActivityGetNextRecord);
	FN(cuptiActivitySetAttribute);
	FN(cuptiActivityPushExternalCorrelationId);
	FN(cuptiActivityPopExternalCorrelationId);
#undef FN
} K;

static CUpti_SubscriberHandle sub;

// what came since the case began: records by kind, API records of launches, callbacks by domain
static struct counts {
	int launch_api, other_api, driver_api, sync, kernels, overhead, other;
	int cb_runtime, cb_driver, cb_resource, cb_getdevice;
} now, last;

static const CUpti_CallbackId KEPT[] = { CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000,
					 CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_v13000,
					 CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020,
					 CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020 };

static int kept(CUpti_CallbackId id)
{
	for (CUpti_CallbackId k : KEPT)
		if (k == id)
			return 1;
	return 0;
}

static uint64_t CUPTIAPI mono()
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void CUPTIAPI on_callback(void *, CUpti_CallbackDomain d, CUpti_CallbackId id, const void *data)
{
	if (d == CUPTI_CB_DOMAIN_RESOURCE) {
		now.cb_resource++;
		return;
	}
	const CUpti_CallbackData *cb = (const CUpti_CallbackData *)data;
	if (!cb || cb->callbackSite != CUPTI_API_EXIT)
		return;
	if (d == CUPTI_CB_DOMAIN_RUNTIME_API) {
		now.cb_runtime++;
		now.cb_getdevice += id == CUPTI_RUNTIME_TRACE_CBID_cudaGetDevice_v3020;
	} else if (d == CUPTI_CB_DOMAIN_DRIVER_API) {
		now.cb_driver++;
	}
}

static void CUPTIAPI requested(uint8_t **b, size_t *size, size_t *max)
{
	*size = 1 << 20;
	*b = (uint8_t *)aligned_alloc(8, *size);
	*max = 0;
}

static void CUPTIAPI completed(CUcontext, uint32_t, uint8_t *b, size_t, size_t valid)
{
	CUpti_Activity *r = NULL;
	while (K.cuptiActivityGetNextRecord(b, valid, &r) == CUPTI_SUCCESS) {
		switch (r->kind) {
		case CUPTI_ACTIVITY_KIND_RUNTIME:
			if (((CUpti_ActivityAPI *)r)->cbid == CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000 ||
			    ((CUpti_ActivityAPI *)r)->cbid == CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_v13000)
				now.launch_api++;
			else
				now.other_api++;
			break;
		case CUPTI_ACTIVITY_KIND_DRIVER:
			now.driver_api++;
			break;
		case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION:
			now.sync++;
			break;
		case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
			now.kernels++;
			break;
		case CUPTI_ACTIVITY_KIND_OVERHEAD:
			now.overhead++;
			break;
		default:
			now.other++;
		}
	}
	free(b);
}

__global__ void tick(float *a, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		a[i] += 1.0f;
}

static float *d, *pinned;
static cudaStream_t s;
static int first = 1;

// 10 launches, 2 cudaGetDevice, a copy, a synchronize; then what came of them, as a JSON object
static void phase(const char *name)
{
	int dev;
	for (int i = 0; i < 10; i++) {
		tick<<<4, 256, 0, s>>>(d, 1024);
		if (i < 2)
			cudaGetDevice(&dev);
	}
	cudaMemcpyAsync(pinned, d, 4096, cudaMemcpyDeviceToHost, s);
	cudaStreamSynchronize(s);
	K.cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
	struct counts c = now;
	printf("%s\"%s\": {\"launch_api\": %d, \"other_api\": %d, \"driver_api\": %d, \"sync\": %d, \"kernels\": %d, "
	       "\"overhead\": %d, \"other\": %d, \"cb_runtime\": %d, \"cb_driver\": %d, \"cb_resource\": %d, "
	       "\"cb_getdevice\": %d}",
	       first ? "" : ", ", name, c.launch_api - last.launch_api, c.other_api - last.other_api,
	       c.driver_api - last.driver_api, c.sync - last.sync, c.kernels - last.kernels, c.overhead - last.overhead,
	       c.other - last.other, c.cb_runtime - last.cb_runtime, c.cb_driver - last.cb_driver,
	       c.cb_resource - last.cb_resource, c.cb_getdevice - last.cb_getdevice);
	first = 0;
	last = c;
}

static void runtime_ids(uint8_t on) // every runtime call ddpspy does not keep (share.c's apply_api)
{
	for (CUpti_CallbackId i = 1; i < CUPTI_RUNTIME_TRACE_CBID_SIZE; i++)
		if (!kept(i) && i != CUPTI_RUNTIME_TRACE_CBID_cudaGetDevice_v3020)
			K.cuptiActivityEnableRuntimeApi(i, on);
}

static void driver_ids(uint8_t on)
{
	for (CUpti_CallbackId i = 1; i < CUPTI_DRIVER_TRACE_CBID_SIZE; i++)
		if (i != CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel)
			K.cuptiActivityEnableDriverApi(i, on);
}

static void per_thread(uint8_t v)
{
	size_t sz = sizeof v;
	if (K.cuptiActivitySetAttribute)
		K.cuptiActivitySetAttribute(CUPTI_ACTIVITY_ATTR_PER_THREAD_ACTIVITY_BUFFER, &sz, &v);
}

// one case: the change on, the "during" phase, the change off
static int change(const char *c, int on)
{
	CUpti_CallbackDomain rt = CUPTI_CB_DOMAIN_RUNTIME_API, drv = CUPTI_CB_DOMAIN_DRIVER_API;
	if (!strcmp(c, "none"))
		return 1;
	if (!strcmp(c, "runtime_ids"))
		runtime_ids(on);
	else if (!strcmp(c, "driver_ids"))
		driver_ids(on);
	else if (!strcmp(c, "runtime_kind"))
		(on ? K.cuptiActivityEnable : K.cuptiActivityDisable)(CUPTI_ACTIVITY_KIND_RUNTIME);
	else if (!strcmp(c, "driver_kind"))
		(on ? K.cuptiActivityEnable : K.cuptiActivityDisable)(CUPTI_ACTIVITY_KIND_DRIVER);
	else if (!strcmp(c, "domain_runtime"))
		K.cuptiEnableDomain(on, sub, rt);
	else if (!strcmp(c, "domain_driver"))
		K.cuptiEnableDomain(on, sub, drv);
	else if (!strcmp(c, "all_domains"))
		K.cuptiEnableAllDomains(on, sub);
	else if (!strcmp(c, "all_domains_off"))
		return on ? 1 : K.cuptiEnableAllDomains(0, sub) == CUPTI_SUCCESS;
	else if (!strcmp(c, "callback_launch"))
		K.cuptiEnableCallback(on, sub, rt, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000);
	else if (!strcmp(c, "callback_getdevice"))
		K.cuptiEnableCallback(on, sub, rt, CUPTI_RUNTIME_TRACE_CBID_cudaGetDevice_v3020);
	else if (!strcmp(c, "callback_resource"))
		K.cuptiEnableCallback(on, sub, CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_CONTEXT_CREATED);
	else if (!strcmp(c, "per_thread_0"))
		per_thread(0);
	else if (!strcmp(c, "per_thread_1"))
		per_thread(on);
	else if (!strcmp(c, "overhead"))
		(on ? K.cuptiActivityEnable : K.cuptiActivityDisable)(CUPTI_ACTIVITY_KIND_OVERHEAD);
	else if (!strcmp(c, "all_sync"))
		K.cuptiActivityEnableAllSyncRecords(on);
	else if (!strcmp(c, "timestamp"))
		K.cuptiActivityRegisterTimestampCallback(mono);
	else if (!strcmp(c, "callback_sequence") || !strcmp(c, "v2_callback_sequence")) {
		// gpu_app kineto's teardown through ddpspy: a launch callback on and off, ddpspy's
		// own calls on again, then the whole runtime domain for a call's exit
		if (on) {
			K.cuptiEnableCallback(1, sub, rt, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000);
			K.cuptiEnableCallback(0, sub, rt, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000);
			for (CUpti_CallbackId k : KEPT)
				K.cuptiActivityEnableRuntimeApi(k, 1);
		}
		K.cuptiEnableDomain(on, sub, rt);
	} else if (!strcmp(c, "getdevice_off_domain")) {
		if (on)
			K.cuptiActivityEnableRuntimeApi(CUPTI_RUNTIME_TRACE_CBID_cudaGetDevice_v3020, 0);
		K.cuptiEnableDomain(on, sub, rt);
	} else if (!strcmp(c, "driver_launches_domain")) {
		for (CUpti_CallbackId k : { CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx, CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch,
					   CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel })
			K.cuptiActivityEnableDriverApi(k, 1);
		K.cuptiEnableDomain(on, sub, rt);
	} else if (!strcmp(c, "ids_on_off_domain")) {
		// share.c's passing on of a client's RUNTIME kind: every other id on, then off; then
		// the runtime domain's callbacks for the subscriber
		if (on) {
			for (CUpti_CallbackId i = 1; i < CUPTI_RUNTIME_TRACE_CBID_SIZE; i++)
				if (!kept(i))
					K.cuptiActivityEnableRuntimeApi(i, 1);
			for (CUpti_CallbackId i = 1; i < CUPTI_RUNTIME_TRACE_CBID_SIZE; i++)
				if (!kept(i))
					K.cuptiActivityEnableRuntimeApi(i, 0);
		}
		K.cuptiEnableDomain(on, sub, rt);
	} else if (!strcmp(c, "v2_domain_runtime")) {
		K.cuptiEnableDomain(on, sub, rt);
	} else if (!strcmp(c, "kineto")) { // all of torch.profiler's changes as share.c passes them on
		runtime_ids(on);
		driver_ids(on);
		(on ? K.cuptiActivityEnable : K.cuptiActivityDisable)(CUPTI_ACTIVITY_KIND_OVERHEAD);
		K.cuptiActivityEnableAllSyncRecords(on);
		if (!on)
			per_thread(0);
	} else
		return 0;
	return 1;
}

static const char *CASES[] = { "none", "runtime_ids", "driver_ids", "runtime_kind", "driver_kind", "domain_runtime",
			       "domain_driver", "all_domains", "all_domains_off", "callback_launch",
			       "callback_getdevice", "callback_resource", "per_thread_0", "per_thread_1", "overhead",
			       "all_sync", "timestamp", "kineto", "callback_sequence", "v2_callback_sequence",
			       "getdevice_off_domain", "driver_launches_domain", "v2_domain_runtime", "ids_on_off_domain" };

static int one(const char *c)
{
	if (!dlopen("libcupti.so.13", RTLD_NOW | RTLD_GLOBAL)) {
		printf("{\"case\": \"%s\", \"error\": \"%s\"}\n", c, dlerror());
		return 1;
	}
#define SYM(n) K.n = (decltype(&::n))dlsym(RTLD_DEFAULT, #n)
	SYM(cuptiSubscribe);
	SYM(cuptiSubscribe_v2);
	SYM(cuptiEnableCallback);
	SYM(cuptiEnableDomain);
	SYM(cuptiEnableAllDomains);
	SYM(cuptiActivityRegisterCallbacks);
	SYM(cuptiActivityRegisterTimestampCallback);
	SYM(cuptiActivityEnable);
	SYM(cuptiActivityDisable);
	SYM(cuptiActivityEnableRuntimeApi);
	SYM(cuptiActivityEnableDriverApi);
	SYM(cuptiActivityEnableAllSyncRecords);
	SYM(cuptiActivityFlushAll);
	SYM(cuptiActivityGetNextRecord);
	SYM(cuptiActivitySetAttribute);
	SYM(cuptiActivityPushExternalCorrelationId);
	SYM(cuptiActivityPopExternalCorrelationId);
#undef SYM
	// as ddpspy sets CUPTI up (cupti/gpu.c's start)
	CUpti_SubscriberParams sp = {};
	sp.structSize = CUpti_SubscriberParams_STRUCT_SIZE;
	sp.subscriberName = "rules";
	if ((!strncmp(c, "v2_", 3) && K.cuptiSubscribe_v2 ? K.cuptiSubscribe_v2(&sub, on_callback, NULL, &sp)
						       : K.cuptiSubscribe(&sub, on_callback, NULL)) != CUPTI_SUCCESS) {
		printf("{\"case\": \"%s\", \"error\": \"subscribe\"}\n", c);
		return 1;
	}
	K.cuptiActivityRegisterTimestampCallback(mono);
	K.cuptiActivityRegisterCallbacks(requested, completed);
	CUpti_ActivityKind kinds[] = { CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
				       CUPTI_ACTIVITY_KIND_MEMSET, CUPTI_ACTIVITY_KIND_SYNCHRONIZATION,
				       CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION };
	for (CUpti_ActivityKind k : kinds)
		K.cuptiActivityEnable(k);
	K.cuptiActivityEnableAllSyncRecords(0);
	for (CUpti_CallbackId k : KEPT)
		K.cuptiActivityEnableRuntimeApi(k, 1);
	K.cuptiActivityEnableDriverApi(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, 1);
	cudaMalloc(&d, 4096);
	cudaMallocHost(&pinned, 4096);
	cudaStreamCreate(&s);
	printf("{\"case\": \"%s\", ", c);
	phase("before");
	if (!change(c, 1)) {
		printf("}\n");
		return 1;
	}
	phase("during");
	change(c, 0);
	phase("after");
	for (CUpti_CallbackId k : KEPT) // ddpspy's own calls on again (gpu.c's dsp_cupti_own_calls)
		K.cuptiActivityEnableRuntimeApi(k, 1);
	K.cuptiActivityEnableDriverApi(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, 1);
	phase("own_calls");
	for (CUpti_CallbackId k : KEPT) // off and on again
		K.cuptiActivityEnableRuntimeApi(k, 0);
	for (CUpti_CallbackId k : KEPT)
		K.cuptiActivityEnableRuntimeApi(k, 1);
	phase("toggled");
	printf("}\n");
	fflush(stdout);
	return 0;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? argc - 1 : (int)(sizeof CASES / sizeof *CASES);
	for (int i = 0; i < n; i++) { // each in a process of its own: CUPTI's state is per process
		const char *c = argc > 1 ? argv[i + 1] : CASES[i];
		fflush(stdout);
		pid_t p = fork();
		if (p == 0)
			_exit(one(c));
		int st = 0;
		waitpid(p, &st, 0);
		if (!WIFEXITED(st) || WEXITSTATUS(st))
			printf("{\"case\": \"%s\", \"exit\": %d}\n", c, st);
	}
	return 0;
}
