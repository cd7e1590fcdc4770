/* A GPU job's process: the devices, contexts and threads its CUPTI records name, each kept once in
 * a small table of its gpuproc so that a record holds an index (gpu_int.h: one record a kernel and
 * one a launch, each byte of them millions of bytes), and the device its rank's split follows. */
#include <stdint.h>

#include "analysis_int.h"
#include "gpu_int.h"

/* the device of w's context, -1 none known */
int an_gpu_work_device(const struct gpuproc *g, const struct gwork *w)
{
	return w->ctx < g->nctxs ? g->ctxs[w->ctx].device : -1;
}

/* w's device and context, counted: a context is found in g's table by a walk back from the newest
 * (a process has one or a few) */
void an_gpu_on_device(struct gpuproc *g, struct gwork *w, int64_t device, int64_t ctx)
{
	int8_t dev = device >= 0 && device < MAX_GDEV ? (int8_t)device : -1;
	int i = g->nctxs - 1;
	while (i >= 0 && !(g->ctxs[i].id == (uint32_t)ctx && g->ctxs[i].device == dev))
		i--;
	if (i < 0 && g->nctxs < MAX_GCTX) {
		i = g->nctxs++;
		g->ctxs[i] = (struct gctx){ (uint32_t)ctx, dev };
	}
	w->ctx = i < 0 ? GCTX_NONE : (uint8_t)i;
	if (i >= 0 && dev >= 0) {
		g->on_dev[dev]++;
		g->nccl_on_dev[dev] += w->cls == GW_NCCL;
	}
}

int an_gpu_thread_of(const struct gpuproc *g, uint32_t id)
{
	int i = id ? g->ncthreads - 1 : -1; /* (0: CUPTI knew no thread) */
	while (i >= 0 && g->cthreads[i] != id)
		i--;
	return i;
}

/* CUPTI's id of a call's thread as its index in g's table (GTHR_NONE: unknown, or past the table) */
uint16_t an_gpu_api_thread(struct gpuproc *g, uint32_t id)
{
	int i = an_gpu_thread_of(g, id);
	if (i < 0 && id && g->ncthreads < MAX_GTHR) /* (id 0 stays unknown) */
		g->cthreads[i = g->ncthreads++] = id;
	return i < 0 ? GTHR_NONE : (uint16_t)i;
}

/* A process's work may be on several devices (a second GPU for evaluation, a model split over
 * two): its rank's split follows one, where most of its NCCL kernels ran (its communicator's
 * device), else most of its work; the rest is left out and counted (an_gpu_warn says so). */
void an_gpu_devices_chosen(struct gpuproc *g)
{
	int best = -1;
	for (int d = 0; d < MAX_GDEV; d++)
		if (g->on_dev[d] && (best < 0 || g->nccl_on_dev[d] > g->nccl_on_dev[best] ||
				     (g->nccl_on_dev[d] == g->nccl_on_dev[best] && g->on_dev[d] > g->on_dev[best])))
			best = d;
	g->device = best;
	size_t n = 0;
	g->other_dev = g->other_ctx = 0;
	if (best < 0 || g->kept_on[best] == g->nw) /* (mostly: all on one device, no walk) */
		return;
	for (size_t i = 0; i < g->nw; i++)
		if (an_gpu_work_device(g, &g->w[i]) == best) {
			if (n != i) /* (mostly all is kept: no copy onto itself) */
				g->w[n] = g->w[i];
			n++;
		} else if (g->w[i].ctx == GCTX_NONE) {
			g->other_ctx++;
		} else {
			g->other_dev++;
		}
	g->nw = n;
}
