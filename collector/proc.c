/* A process record (struct proc): freed, and packed into bytes and back for report --mpi, whose
 * processes send each other the records of the files they read. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "analysis_int.h"

void an_proc_free(struct proc *p)
{
	free(p->file);
	free(p->open);
	if (p->lsw) /* (made by the sweep: an_parts.sweep is filled) */
		an_parts.sweep.free(p->lsw);
	an_parts.gpu.free(p);
	if (p->clock)
		free(p->clock->calib);
	free(p->clock);
	for (int k = 0; k < p->nthr; k++) {
		free(p->thr[k].ev);
		free(p->thr[k].sched);
		free(p->thr[k].run);
		free(p->thr[k].rpat);
		free(p->thr[k].own);
		free(p->thr[k].rfirst);
		if (p->thr[k].sr) /* (the sweep's) */
			an_parts.sweep.sruns_free(p->thr[k].sr);
		free(p->thr[k].wres);
		an_spread_drop(&p->thr[k]);
	}
	free(p->thr);
	free(p->hostcpu.sched);
	free(p->comms);
	for (int k = 0; k < p->npaths; k++)
		free(p->paths[k]);
	free(p->paths);
	free(p->fd_path);
	free(p->rbins);
	for (int k = 0; k < p->ndstat; k++)
		free(p->dstat[k].dir);
	free(p->dstat);
	free(p->nvmark);
}

/* ---- a process record as bytes, and back (report --mpi: records read by other processes) ---- */

static void pack_thr(struct an_buf *b, const struct thr *t)
{
	an_put(b, t, sizeof *t);
	an_put(b, t->ev, t->n * sizeof *t->ev);
	an_put(b, t->sched, t->sched ? t->nsched * sizeof *t->sched : 0);
	an_put(b, t->spr, t->nspr * sizeof *t->spr);
	an_put(b, t->slv, t->nspr);
	an_put(b, t->wres, t->nwres * sizeof *t->wres);
	/* (not its runs: they stay with the process that read the file, which splits its rank) */
}

static int unpack_thr(struct an_rd *r, struct thr *t)
{
	if (an_get(r, t, sizeof *t) < 0)
		return -1;
	int sched = t->sched != NULL;
	t->ev = NULL, t->sched = NULL, t->num = NULL, t->run = NULL, t->rpat = NULL, t->own = NULL, t->rfirst = NULL;
	t->nrun = t->crun = t->nrpat = t->crpat = t->crfirst = 0;
	t->first_on = 0;
	t->runs_ok = 0;
	t->sr = NULL;
	t->spr = NULL, t->slv = NULL, t->posts = NULL, t->pposts = NULL;
	t->ev = an_get_arr(r, t->n, sizeof *t->ev, 0);
	t->cap = t->n;
	if (sched) /* (room for as many samples as cpu.c keeps) */
		t->sched = an_get_arr(r, t->nsched, sizeof *t->sched, MAX_SCHED);
	t->spr = an_get_arr(r, t->nspr, sizeof *t->spr, 0);
	t->slv = an_get_arr(r, t->nspr, 1, 0);
	t->cspr = t->nspr;
	t->wres = an_get_arr(r, t->nwres, sizeof *t->wres, 0);
	return r->err ? -1 : 0;
}

void an_pack_proc(struct an_buf *b, const struct proc *p, int whole)
{
	an_put(b, p, sizeof *p);
	an_put_str(b, p->file);
	if (p->clock) {
		an_put(b, p->clock, sizeof *p->clock);
		an_put(b, p->clock->calib, p->clock->n * sizeof *p->clock->calib);
	}
	an_parts.gpu.pack(b, p, whole);
	an_put(b, p->comms, (size_t)p->ncomms * sizeof *p->comms);
	pack_thr(b, &p->hostcpu);
	for (int k = 0; k < p->nthr; k++)
		pack_thr(b, &p->thr[k]);
	for (int k = 0; k < p->npaths; k++)
		an_put_str(b, p->paths[k]);
	an_put(b, p->fd_path, (size_t)p->nfd * sizeof *p->fd_path);
	an_put(b, p->rbins, p->nbins * sizeof *p->rbins);
	an_put(b, p->nvmark, p->nnvmark * sizeof *p->nvmark);
	for (int k = 0; k < p->ndstat; k++) {
		an_put(b, &p->dstat[k], sizeof p->dstat[k]);
		an_put_str(b, p->dstat[k].dir);
	}
}

int an_unpack_proc(struct an_rd *r, struct proc *p)
{
	if (an_get(r, p, sizeof *p) < 0)
		return -1;
	/* every pointer of the sender's is replaced before anything can fail, so that proc_free
	 * frees only what was made here */
	int clock = p->clock != NULL, nthr = p->nthr, npaths = p->npaths, ndstat = p->ndstat;
	p->file = NULL, p->open = NULL, p->clock = NULL, p->gpu = NULL, p->comms = NULL, p->thr = NULL, p->paths = NULL;
	p->fd_path = NULL, p->rbins = NULL, p->dstat = NULL, p->hostcpu.ev = NULL, p->hostcpu.sched = NULL, p->lsw = NULL;
	p->nvmark = NULL, p->nvload = NULL, p->recent = NULL;
	p->nthr = p->npaths = p->ndstat = 0;
	p->file = an_get_str(r);
	if (clock && (p->clock = calloc(1, sizeof *p->clock))) {
		an_get(r, p->clock, sizeof *p->clock);
		p->clock->calib = NULL;
		p->clock->calib = an_get_arr(r, p->clock->n, sizeof *p->clock->calib, 0);
	}
	if (!p->file || (clock && !p->clock) || an_parts.gpu.unpack(r, p) < 0)
		return -1;
	p->comms = an_get_arr(r, (size_t)p->ncomms, sizeof *p->comms, 0);
	if (unpack_thr(r, &p->hostcpu) < 0)
		return -1;
	if (nthr < 0 || (size_t)nthr > (size_t)(r->end - r->p) / sizeof *p->thr ||
	    !(p->thr = calloc((size_t)nthr + 1, sizeof *p->thr)))
		return -1;
	for (; p->nthr < nthr; p->nthr++)
		if (unpack_thr(r, &p->thr[p->nthr]) < 0) {
			p->nthr++; /* (what it read is freed with the rest) */
			return -1;
		}
	if (npaths < 0 || (size_t)npaths > (size_t)(r->end - r->p) / 8 ||
	    !(p->paths = calloc((size_t)npaths + 1, sizeof *p->paths)))
		return -1;
	for (; p->npaths < npaths; p->npaths++)
		if (!(p->paths[p->npaths] = an_get_str(r)))
			return -1;
	p->cpaths = p->npaths;
	p->fd_path = an_get_arr(r, (size_t)p->nfd, sizeof *p->fd_path, 0);
	p->rbins = an_get_arr(r, p->nbins, sizeof *p->rbins, 0);
	p->nvmark = an_get_arr(r, p->nnvmark, sizeof *p->nvmark, 0);
	p->cnvmark = p->nnvmark;
	if (r->err || ndstat < 0 || (size_t)ndstat > (size_t)(r->end - r->p) / sizeof *p->dstat ||
	    !(p->dstat = calloc((size_t)ndstat + 1, sizeof *p->dstat)))
		return -1;
	for (; p->ndstat < ndstat; p->ndstat++) {
		an_get(r, &p->dstat[p->ndstat], sizeof p->dstat[p->ndstat]);
		if (!(p->dstat[p->ndstat].dir = an_get_str(r)))
			return -1;
	}
	return r->err ? -1 : 0;
}
