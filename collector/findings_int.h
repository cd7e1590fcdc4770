/* What the finding families share (findings.c: the driver, the host's families; finddata.c: the
 * input's; findgpu.c: the GPU's): a new finding, and its evidence as typed values appended in order (evidence.c; analysis.h's
 * struct fv; one that does not fit is left out, and a view closes what is left open). */
#ifndef DDPSPY_FINDINGS_INT_H
#define DDPSPY_FINDINGS_INT_H

#include <stddef.h>
#include <stdint.h>

#include "analysis_int.h"

/* a finding of kind on rank (-1: none) with severity sev (clamped to [0, 1]); NULL when full */
struct finding *an_add_finding(struct analysis *a, const char *kind, int rank, double sev);
void an_ev_int(struct finding *f, const char *key, int64_t i);
void an_ev_num(struct finding *f, const char *key, double d, int decimals);
void an_ev_bool(struct finding *f, const char *key, int b);
/* a string (NULL: null), cut to what room is left in the finding's strings */
void an_ev_str(struct finding *f, const char *key, const char *s);
/* a number or a string for the finding's words alone (words.c), which no renderer shows */
void an_ev_hidden_num(struct finding *f, const char *key, double d);
void an_ev_hidden_str(struct finding *f, const char *key, const char *s);
/* a list or an object (type FV_LIST, FV_OBJ), up to the next an_ev_end */
void an_ev_open(struct finding *f, const char *key, int type);
void an_ev_end(struct finding *f);
/* b bytes for a sentence ("1.5 MiB"); an operation's name ("collective" when unknown) */
void an_human_bytes(double b, char *buf, size_t n);
const char *an_op_name(int op);

/* findgpu.c: the GPU families, for a job with ranks split from their device; finddata.c:
 * data_stall; findhost.c: host_asymmetry (after the late ranks and cpu_contention, which it reads) */
void an_find_gpu(struct analysis *a);
void an_find_data(struct analysis *a);
void an_find_host(struct analysis *a);
/* findshard.c: exposed_collective, a sharded job's all-gathers and reduce-scatters exposed on
 * the device where the work beside them could have hidden them (GPU jobs) */
void an_find_exposed(struct analysis *a);
/* the part of the step that prefetching and overlapping them would win (what the NCCL kernels'
 * collective_volume leaves to exposed_collective) */
double an_shard_hideable(const struct analysis *a);
/* findpipe.c: pipeline_bubble and stage_imbalance, a pipeline-parallel job's; the ranks of the
 * stage that sets its pace get skip[r] set (no straggler finding for them); returns the slow
 * stage, -1 none */
int an_find_pipeline(struct analysis *a, char *skip);
/* findhang.c: a job that stopped making progress (its ranks' calls in flight), with or without steps */
void an_find_hang(struct analysis *a);
/* into f, a finding about rank index L: "calls", L's host calls its peers do not make, with stacks */
void an_host_calls(struct finding *f, const struct analysis *a, int L);
/* findsite.c: into f, a finding about rank index L, "sites": the code L's training thread spent its
 * calls of category cat (CAT_HOST: host calls; CAT_DATA: input) in (Python function and line where
 * it ran Python, else its native frame), or CAT_COMPUTE its time between calls (the main thread's
 * Python samples), the most time per analysed step first; an_hsite_share:
 * the share of site s's calls in rank r's analysed steps */
void an_sites(struct finding *f, const struct analysis *a, int L, int cat);
/* one site of "sites" (an object: the Python site py, else the native frames), ms per step; and
 * the words' top_site from it */
void an_ev_site(struct finding *f, const struct pysite *py, const char (*frames)[112], int nframes, double ms,
		const char *range);
void an_site_words(struct finding *f, const struct pysite *py, const char (*frames)[112], int nframes, double ms);
double an_hsite_share(const struct analysis *a, int r, const struct hsite *s);
/* (findphase.c) the part of [lo, hi) (the job's clock) in the analysed steps' span sp; an empty one: 1 when lo is
 * in it, else 0 */
double an_span_part(const struct span *sp, int64_t lo, int64_t hi);
/* findphase.c: into f, evidence.range: the NVTX range rank index L's cost of category cat is in
 * (CAT_DATA: its input waits; else its excess over its peers), none when no range holds enough */
void an_range_evidence(struct finding *f, const struct analysis *a, int L, int cat);

#endif
