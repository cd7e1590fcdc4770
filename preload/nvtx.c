/* NVTX: the program's own ranges and marks (torch.cuda.nvtx, libraries that annotate), through
 * NVTX's injection interface. The constructor points NVTX_INJECTION64_PATH at libddpspy.so unless
 * the program set it (or DDPSPY_NVTX=0); on the program's first NVTX call, NVTX loads it and calls
 * InitializeInjectionNvtx2, which installs the functions below in NVTX's callback tables. Each
 * records an "nvtx" point event on the calling thread: a push or pop (id: the nesting level), a
 * start or end (id: the range id handed out here), a mark, or a domain created (id: the domain's).
 * Pairing pushes with pops and starts with ends is the collector's. Compiled when CUDA's NVTX
 * headers are found; a process that makes no NVTX call loads nothing and records nothing. */
#include "internal.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#define NVTX_NO_IMPL
#include <nvtx3/nvToolsExt.h>

static __thread int depth;   /* this thread's push nesting, default domain and the others alike */
static uint64_t range_ids;   /* nvtxRangeStart* ids */
static uint64_t domain_ids;  /* domains created */

static void rec(int what, int64_t id, int64_t domain, const char *message)
{
	struct dsp_tls *t = &dsp_tls;
	if (!dsp_enter(t))
		return;
	uint64_t now = dsp_now();
	int64_t a[3] = {what, id, domain};
	dsp_emit_full(t, DDPSPY_EV_NVTX, now, now, 3, a, message, 0); /* (no message: none written) */
	dsp_leave(t);
}

static int64_t domain_of(nvtxDomainHandle_t d)
{
	return (int64_t)(uintptr_t)d;
}

/* the message of an attribute structure: ASCII, or a string registered here; else none */
static const char *message_of(const nvtxEventAttributes_t *a)
{
	if (!a || a->size < offsetof(nvtxEventAttributes_t, message) + sizeof a->message)
		return NULL;
	if (a->messageType == NVTX_MESSAGE_TYPE_ASCII)
		return a->message.ascii;
	if (a->messageType == NVTX_MESSAGE_TYPE_REGISTERED)
		return (const char *)a->message.registered;
	return NULL;
}

static int push(nvtxDomainHandle_t d, const char *m)
{
	int level = depth++;
	rec(DDPSPY_NVTX_PUSH, level, domain_of(d), m);
	return level;
}

static int pop(nvtxDomainHandle_t d)
{
	if (depth <= 0)
		return -1;
	int level = --depth;
	rec(DDPSPY_NVTX_POP, level, domain_of(d), NULL);
	return level;
}

static nvtxRangeId_t start(nvtxDomainHandle_t d, const char *m)
{
	uint64_t id = __atomic_add_fetch(&range_ids, 1, __ATOMIC_RELAXED);
	rec(DDPSPY_NVTX_START, (int64_t)id, domain_of(d), m);
	return id;
}

static void NVTX_API mark_a(const char *m) { rec(DDPSPY_NVTX_MARK, 0, 0, m); }
static void NVTX_API mark_ex(const nvtxEventAttributes_t *a) { rec(DDPSPY_NVTX_MARK, 0, 0, message_of(a)); }
static nvtxRangeId_t NVTX_API start_a(const char *m) { return start(NULL, m); }
static nvtxRangeId_t NVTX_API start_ex(const nvtxEventAttributes_t *a) { return start(NULL, message_of(a)); }
static void NVTX_API end(nvtxRangeId_t id) { rec(DDPSPY_NVTX_END, (int64_t)id, 0, NULL); }
static int NVTX_API push_a(const char *m) { return push(NULL, m); }
static int NVTX_API push_ex(const nvtxEventAttributes_t *a) { return push(NULL, message_of(a)); }
static int NVTX_API pop0(void) { return pop(NULL); }

static void NVTX_API d_mark(nvtxDomainHandle_t d, const nvtxEventAttributes_t *a)
{
	rec(DDPSPY_NVTX_MARK, 0, domain_of(d), message_of(a));
}
static nvtxRangeId_t NVTX_API d_start(nvtxDomainHandle_t d, const nvtxEventAttributes_t *a)
{
	return start(d, message_of(a));
}
static void NVTX_API d_end(nvtxDomainHandle_t d, nvtxRangeId_t id) { rec(DDPSPY_NVTX_END, (int64_t)id, domain_of(d), NULL); }
static int NVTX_API d_push(nvtxDomainHandle_t d, const nvtxEventAttributes_t *a) { return push(d, message_of(a)); }
static int NVTX_API d_pop(nvtxDomainHandle_t d) { return pop(d); }

/* a domain: its id as its handle (0 is the default domain), its name recorded once */
static nvtxDomainHandle_t NVTX_API d_create(const char *name)
{
	uint64_t id = __atomic_add_fetch(&domain_ids, 1, __ATOMIC_RELAXED);
	rec(DDPSPY_NVTX_DOMAIN, (int64_t)id, (int64_t)id, name);
	return (nvtxDomainHandle_t)(uintptr_t)id;
}

/* a registered string is a copy kept for the process's life (registration is rare: once per name) */
static nvtxStringHandle_t NVTX_API d_register(nvtxDomainHandle_t d, const char *s)
{
	struct dsp_tls *t = &dsp_tls;
	t->guard++;
	char *copy = s ? strdup(s) : NULL;
	t->guard--;
	return (nvtxStringHandle_t)copy;
}

static void install(const NvtxExportTableCallbacks *etc, NvtxCallbackModule module, const int *ids, void (*const *fns)(void),
		    int n)
{
	NvtxFunctionTable table = NULL;
	unsigned int size = 0;
	if (!etc->GetModuleFunctionTable(module, &table, &size) || !table)
		return;
	for (int i = 0; i < n; i++)
		if ((unsigned)ids[i] < size && table[ids[i]])
			*table[ids[i]] = (NvtxFunctionPointer)fns[i];
}

#pragma GCC visibility push(default)
/* NVTX's injection entry point (NVTX_INJECTION64_PATH): 1 when installed */
int NVTX_API InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get)
{
	const NvtxExportTableCallbacks *etc = get ? (const NvtxExportTableCallbacks *)get(NVTX_ETID_CALLBACKS) : NULL;
	if (!etc || etc->struct_size < sizeof *etc || !__atomic_load_n(&dsp_on, __ATOMIC_RELAXED))
		return 0;
	static const int core[] = {NVTX_CBID_CORE_MarkEx, NVTX_CBID_CORE_MarkA, NVTX_CBID_CORE_RangeStartEx,
				   NVTX_CBID_CORE_RangeStartA, NVTX_CBID_CORE_RangeEnd, NVTX_CBID_CORE_RangePushEx,
				   NVTX_CBID_CORE_RangePushA, NVTX_CBID_CORE_RangePop};
	static void (*const core_fns[])(void) = {
		(void (*)(void))mark_ex, (void (*)(void))mark_a, (void (*)(void))start_ex, (void (*)(void))start_a,
		(void (*)(void))end,     (void (*)(void))push_ex, (void (*)(void))push_a, (void (*)(void))pop0};
	static const int core2[] = {NVTX_CBID_CORE2_DomainMarkEx, NVTX_CBID_CORE2_DomainRangeStartEx,
				    NVTX_CBID_CORE2_DomainRangeEnd, NVTX_CBID_CORE2_DomainRangePushEx,
				    NVTX_CBID_CORE2_DomainRangePop, NVTX_CBID_CORE2_DomainCreateA,
				    NVTX_CBID_CORE2_DomainRegisterStringA};
	static void (*const core2_fns[])(void) = {
		(void (*)(void))d_mark, (void (*)(void))d_start,  (void (*)(void))d_end,     (void (*)(void))d_push,
		(void (*)(void))d_pop,  (void (*)(void))d_create, (void (*)(void))d_register};
	install(etc, NVTX_CB_MODULE_CORE, core, core_fns, (int)(sizeof core / sizeof *core));
	install(etc, NVTX_CB_MODULE_CORE2, core2, core2_fns, (int)(sizeof core2 / sizeof *core2));
	return 1;
}
#pragma GCC visibility pop

/* Constructor: NVTX_INJECTION64_PATH names this library unless the program set it. */
void dsp_nvtx_init(void)
{
	if (dsp_cfg.nvtx)
		dsp_inject("NVTX_INJECTION64_PATH");
}
