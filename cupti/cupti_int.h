/* What cupti/gpu.c (ddpspy's own CUPTI capture) and cupti/share.c (CUPTI shared with another
 * client in the process) have in common. gpu.c owns the real library and the one subscription;
 * share.c stands between a second client and them, and registers for what it needs (hooks) rather
 * than being called by name. */
#ifndef DDPSPY_CUPTI_INT_H
#define DDPSPY_CUPTI_INT_H

#include <cupti.h>
#include <stddef.h>
#include <stdint.h>

#include "gpu.h"

/* the real CUPTI's functions, from the library gpu.c dlopened (set once it started) */
struct dsp_cupti_fns {
	void *handle;
	__typeof__(cuptiGetVersion) *GetVersion;
	__typeof__(cuptiSubscribe) *Subscribe;
	__typeof__(cuptiSubscribe_v2) *Subscribe_v2;
	__typeof__(cuptiUnsubscribe) *Unsubscribe;
	__typeof__(cuptiActivityRegisterCallbacks) *RegisterCallbacks;
	__typeof__(cuptiActivityRegisterTimestampCallback) *RegisterTimestampCallback;
	__typeof__(cuptiActivityEnable) *Enable;
	__typeof__(cuptiActivityDisable) *Disable;
	__typeof__(cuptiActivityFlushAll) *FlushAll;
	__typeof__(cuptiActivityGetNextRecord) *GetNextRecord;
	__typeof__(cuptiActivityGetNumDroppedRecords) *GetNumDroppedRecords;
	__typeof__(cuptiGetCallbackName) *GetCallbackName;
	__typeof__(cuptiGetResultString) *GetResultString;
	__typeof__(cuptiActivityPushExternalCorrelationId) *Push;
	__typeof__(cuptiActivityPopExternalCorrelationId) *Pop;
	__typeof__(cuptiActivityEnableRuntimeApi) *EnableRuntimeApi;
	__typeof__(cuptiActivityEnableDriverApi) *EnableDriverApi;
	__typeof__(cuptiActivityEnableAllSyncRecords) *EnableAllSyncRecords;
	__typeof__(cuptiEnableCallback) *EnableCallback;
	__typeof__(cuptiEnableDomain) *EnableDomain;
	__typeof__(cuptiEnableAllDomains) *EnableAllDomains;
};
extern struct dsp_cupti_fns dsp_cupti;

/* What share.c registers with gpu.c (dsp_cupti_hooks), all NULL until another client calls CUPTI:
 * seen: each buffer CUPTI completed into ddpspy's callback, before ddpspy reads it (any thread,
 *   guard held); forward: each callback CUPTI makes to ddpspy's subscriber; info: its part of the
 *   "gpu" record (client name and counts), and how often it changed. */
struct dsp_cupti_hooks {
	void (*seen)(const uint8_t *buf, size_t valid);
	void (*forward)(void *ud, CUpti_CallbackDomain d, CUpti_CallbackId id, const void *data);
	uint64_t (*info)(struct dsp_gpu_info *g); /* (its client fields) */
};
extern struct dsp_cupti_hooks dsp_cupti_hooks;

/* Whether ddpspy holds CUPTI, starting it first if it has not tried yet (a client's first call
 * may come before cuInit: Kineto's own early load, or a daemon-started profiler); why: the
 * client's call, for the file's "why". Then ddpspy's subscriber is *sub. */
int dsp_cupti_claim(const char *why, CUpti_SubscriberHandle *sub);
/* ddpspy's external ids: of CUPTI's CUSTOM2 kind, tagged (gpu.h's DSP_EXT_TAG) */
#define DSP_EXT_KIND CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2
static inline int dsp_ext_record_ours(const CUpti_ActivityExternalCorrelation *x)
{
	return x->externalKind == DSP_EXT_KIND && dsp_ext_ours(x->externalId);
}
/* tids.c, for share.c (callers serialize): the threads ddpspy's registry knows now, learnt; *id,
 * CUPTI's default id of the thread of a record made at t (ddpspy's clock), made that thread's
 * system id (gettid), or 0 where the thread was not known then (*id left as it was) */
void dsp_tids_learn(void);
int dsp_tid_system(uint32_t *id, uint64_t t);
/* whether ddpspy itself records this activity kind, or this API call (driver: 1 for the driver's) */
int dsp_cupti_own_kind(CUpti_ActivityKind kind);
int dsp_cupti_own_api(int driver, uint32_t cbid);

#endif
