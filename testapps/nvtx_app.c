/* NVTX ranges as a training script annotates them (torch.cuda.nvtx, libraries' own domains), for
 * the tests: nvtx_app [STEPS [VARY_MS [OPS]]]. An "epoch" range holds STEPS "step" ranges, step k a
 * sleep of 2 ms + VARY_MS x (k % 3) (steps of unequal length: no time window matches them), then
 * OPS ranges named as torch's emit_nvtx names ops ("aten::op3, seq = 12, op_id = 19, ..."), a mark
 * after each; a start/end range "checkpoint" crosses threads (started here, ended by a
 * second thread); a domain "ddp" pushes a registered "forward" and an ASCII "backward". Uses NVTX's
 * header-only API (nvtx3), so it records nothing unless a tool is injected. Prints its own step
 * times as ddpspy bounds them from the range, each push to the next, the last to its pop:
 * {"steps": N, "step_ms": [...]} (the tests' truth, whatever a loaded host does to the sleeps). */
#include <nvtx3/nvToolsExt.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define MAX_STEPS 1024

static double now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static nvtxRangeId_t ckpt;

static void *ender(void *arg)
{
	(void)arg;
	nvtxRangeEnd(ckpt);
	return NULL;
}

int main(int argc, char **argv)
{
	int steps = argc > 1 ? atoi(argv[1]) : 3, vary = argc > 2 ? atoi(argv[2]) : 0, ops = argc > 3 ? atoi(argv[3]) : 0;
	int seq = 0;
	struct timespec two_ms = {0, 2000000};
	static double at[MAX_STEPS + 1]; /* each step's push, then the last step's pop */
	steps = steps > MAX_STEPS ? MAX_STEPS : steps;
	nvtxRangePushA("epoch");
	for (int s = 0; s < steps; s++) {
		at[s] = now_ms();
		nvtxRangePushA("step");
		struct timespec t = {0, 2000000 + 1000000L * vary * (s % 3)};
		nanosleep(&t, NULL);
		for (int k = 0; k < ops; k++) { /* (as torch's emit_nvtx names each op's range) */
			char name[96];
			snprintf(name, sizeof name, "aten::op%d, seq = %d, op_id = %d, sizes = [[4, 4]]", k, seq, seq + 7);
			seq++;
			nvtxRangePushA(name);
			nvtxRangePop();
		}
		nvtxRangePop();
		at[s + 1] = now_ms();
		nvtxMarkA("step done");
	}
	ckpt = nvtxRangeStartA("checkpoint");
	pthread_t t;
	if (pthread_create(&t, NULL, ender, NULL) == 0)
		pthread_join(t, NULL);
	nvtxDomainHandle_t ddp = nvtxDomainCreateA("ddp");
	nvtxEventAttributes_t a = {0};
	a.version = NVTX_VERSION;
	a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
	a.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
	a.message.registered = nvtxDomainRegisterStringA(ddp, "forward");
	nvtxDomainRangePushEx(ddp, &a);
	nvtxDomainRangePop(ddp);
	a.messageType = NVTX_MESSAGE_TYPE_ASCII;
	a.message.ascii = "backward";
	nvtxDomainRangePushEx(ddp, &a);
	nvtxDomainRangePop(ddp);
	nvtxRangePop();
	/* a last call after the ranges: the thread's calls span them all (a view of the whole run shows them) */
	nanosleep(&two_ms, NULL);
	printf("{\"steps\": %d, \"step_ms\": [", steps);
	for (int s = 0; s < steps; s++)
		printf("%s%.4f", s ? ", " : "", at[s + 1] - at[s]);
	printf("]}\n");
	return 0;
}
