/* report --mpi's first reading, spread over the processes: process 0 lists the files and sends
 * the list to all; each says which it can open (and its host); process 0 gives each file to the
 * least loaded process that can open it, by size, largest first; every process reads its files
 * (load.c's reading, handed in) and sends their records to process 0, which takes them in the
 * files' order, then sends every record to every process. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "analysis_int.h"
#include "load_int.h"

/* the largest first; in the files' order among equals */
int an_cmp_bysize(const void *x, const void *y)
{
	const struct bysize *a = x, *b = y;
	if (a->bytes != b->bytes)
		return AN_ORDER(b->bytes, a->bytes);
	return AN_ORDER(a->i, b->i);
}

static void pack_slot(struct an_buf *b, uint64_t i, const struct slot *s, int whole)
{
	uint8_t ok = (uint8_t)s->ok, nw = (uint8_t)s->nwarn;
	an_put(b, &i, sizeof i);
	an_put(b, &ok, 1);
	an_put(b, &nw, 1);
	for (int w = 0; w < s->nwarn; w++)
		an_put_str(b, s->warn[w]);
	if (s->ok)
		an_pack_proc(b, &s->p, whole);
}

static int unpack_slots(struct an_buf *b, struct slot *slots, size_t files)
{
	struct an_rd r = { b->p, b->p + b->n, 0 };
	while (!r.err && r.p < r.end) {
		uint64_t i;
		uint8_t ok, nw;
		an_get(&r, &i, sizeof i);
		an_get(&r, &ok, 1);
		an_get(&r, &nw, 1);
		if (r.err || i >= files || nw > 3)
			return -1;
		struct slot *s = &slots[i];
		for (; s->nwarn < nw; s->nwarn++)
			if (!(s->warn[s->nwarn] = an_get_str(&r)))
				return -1;
		if (ok && an_unpack_proc(&r, &s->p) < 0) {
			an_proc_free(&s->p);
			return -1;
		}
		s->ok = ok;
	}
	return r.err ? -1 : 0;
}

/* which of the n files this process can open, and its host: a byte each, then the host */
static void visible(struct an_buf *b, const struct slot *slots, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		uint8_t v = access(slots[i].open ? slots[i].open : slots[i].path, R_OK) == 0;
		an_put(b, &v, 1);
	}
	char host[256] = "?";
	gethostname(host, sizeof host - 1);
	an_put_str(b, host);
}

/* the slots' records, warnings and names given back (free_slots: with their paths, which a
 * process other than process 0 holds) */
static void free_slots(struct slot *slots, size_t n, int paths)
{
	for (size_t i = 0; slots && i < n; i++) {
		if (paths)
			free((char *)slots[i].path);
		free(slots[i].open);
		for (int w = 0; w < slots[i].nwarn; w++)
			free(slots[i].warn[w]);
		if (slots[i].ok)
			an_proc_free(&slots[i].p);
	}
	free(slots);
}

/* A record's runs, device work and sweep begun, held aside while the record travels (they stay with
 * the process that read its file: what comes back has its NCCL kernels only), and given back to the
 * copy that comes back; freed when that process does not split it. */
struct heldruns {
	struct gpuproc *gpu;
	struct sweep *lsw;
	struct callrun *run;
	struct pat *rpat;
	struct owntime *own;
	size_t nrun, nrpat, nmemb;
	int held;
};

static void runs_hold(struct proc *p, struct heldruns *h)
{
	struct thr *t = p->train >= 0 ? &p->thr[p->train] : NULL;
	struct gpuproc *g = an_parts.gpu.take(p);
	*h = (struct heldruns){ .gpu = g, .lsw = p->lsw };
	p->lsw = NULL;
	if (!t || !t->runs_ok)
		return;
	*h = (struct heldruns){ g, h->lsw, t->run, t->rpat, t->own, t->nrun, t->nrpat, t->nmemb, 1 };
	t->run = NULL, t->rpat = NULL, t->own = NULL;
	an_runs_drop(t);
}

static void runs_give(struct proc *p, struct heldruns *h, int keep)
{
	struct thr *t = keep && p->train >= 0 && p->train < p->nthr ? &p->thr[p->train] : NULL;
	if (h->gpu)
		an_parts.gpu.give(keep ? p : NULL, h->gpu);
	if (keep && p && !p->lsw)
		p->lsw = h->lsw;
	else if (h->lsw)
		an_parts.sweep.free(h->lsw);
	if (t && h->held && !t->runs_ok) {
		t->run = h->run, t->rpat = h->rpat, t->own = h->own;
		t->nrun = t->crun = h->nrun, t->nrpat = t->crpat = h->nrpat, t->nmemb = h->nmemb;
		t->runs_ok = 1;
	} else {
		free(h->run);
		free(h->rpat);
		free(h->own);
	}
	*h = (struct heldruns){ 0 };
}

/* a process that is not process 0: the list, what it can open, its files, their records sent;
 * then every record, as process 0 has them (the rest of the analysis runs here too, each process
 * splitting the ranks it read): the slots (*out, *nout) and who splits each file's rank
 * (a->mpi_who) */
int an_mpi_follow(struct analysis *a, struct slot **out, size_t *nout, an_load_slots_fn *read_slots)
{
	struct an_mpi *m = a->mpi;
	struct an_buf b = { 0 };
	int rc = -1;
	struct slot *slots = NULL;
	struct heldruns *held = NULL;
	size_t *idx = NULL, n = 0, mine = 0;
	if (an_mpi_bcast(m, &b) < 0)
		goto out;
	struct an_rd r = { b.p, b.p + b.n, 0 };
	uint64_t files;
	an_get(&r, &files, sizeof files);
	if (r.err || files > (uint64_t)(r.end - r.p) || !(slots = calloc(files + 1, sizeof *slots)) ||
	    !(idx = calloc(files + 1, sizeof *idx)) || !(a->mpi_who = calloc(files + 1, sizeof *a->mpi_who)) ||
	    !(held = calloc(files + 1, sizeof *held)))
		goto out;
	for (n = 0; n < files; n++) {
		an_get(&r, &slots[n].bytes, sizeof slots[n].bytes);
		if (!(slots[n].path = an_get_str(&r)) || !(slots[n].open = an_get_str(&r))) {
			n += slots[n].path != NULL;
			goto out;
		}
	}
	b.n = 0;
	visible(&b, slots, n);
	if (b.err || an_mpi_send(m, &b) < 0 || an_mpi_bcast(m, &b) < 0 || b.n != n * sizeof(int32_t))
		goto out;
	memcpy(a->mpi_who, b.p, b.n);
	for (size_t i = 0; i < n; i++)
		if (a->mpi_who[i] == an_mpi_me(m))
			idx[mine++] = i;
	read_slots(a, slots, idx, mine);
	b.n = 0;
	for (size_t i = 0; i < mine; i++) /* (device work whole to process 0 only for --html, which draws it) */
		pack_slot(&b, idx[i], &slots[idx[i]], a->gpu_whole);
	if (b.err || an_mpi_send(m, &b) < 0)
		goto out;
	/* every record, as process 0 has them (and the runs of those read here) */
	for (size_t i = 0; i < n; i++) {
		for (int w = 0; w < slots[i].nwarn; w++)
			free(slots[i].warn[w]);
		if (slots[i].ok) {
			runs_hold(&slots[i].p, &held[i]);
			an_proc_free(&slots[i].p);
		}
		slots[i].ok = slots[i].nwarn = 0;
	}
	if (an_mpi_bcast(m, &b) < 0 || b.n < n * sizeof *a->mpi_who)
		goto out;
	memcpy(a->mpi_who, b.p, n * sizeof *a->mpi_who);
	memmove(b.p, b.p + n * sizeof *a->mpi_who, b.n - n * sizeof *a->mpi_who);
	b.n -= n * sizeof *a->mpi_who;
	if (unpack_slots(&b, slots, n) < 0)
		goto out;
	for (size_t i = 0; i < n; i++)
		if (slots[i].ok) {
			slots[i].p.open = slots[i].open;
			slots[i].open = NULL;
			runs_give(&slots[i].p, &held[i], a->mpi_who[i] == an_mpi_me(m));
		}
	*out = slots;
	*nout = n;
	slots = NULL;
	rc = 0;
out:
	for (size_t i = 0; held && i < n; i++)
		runs_give(NULL, &held[i], 0);
	free(held);
	free_slots(slots, n, 1);
	free(idx);
	free(b.p);
	return rc;
}

/* process 0: every file read by some process, its record here; warnings for files some process
 * could not open */
int an_mpi_lead(struct analysis *a, struct slot *slots, size_t files, an_load_slots_fn *read_slots)
{
	struct an_mpi *m = a->mpi;
	int P = an_mpi_np(m), rc = -1;
	struct an_buf b = { 0 };
	uint64_t n = files;
	uint8_t *vis = calloc((size_t)P * (files + 1), 1);
	uint64_t *load = calloc((size_t)P, sizeof *load);
	int32_t *who = calloc(files + 1, sizeof *who);
	size_t *idx = calloc(files + 1, sizeof *idx), mine = 0;
	struct bysize *bs = malloc((files + 1) * sizeof *bs);
	if (!vis || !load || !who || !idx || !bs)
		goto out;
	/* each file's name in the report, and where it is from / (mpirun starts a process on another
	 * host in the same directory, or else in its home) */
	an_put(&b, &n, sizeof n);
	for (size_t i = 0; i < files; i++) {
		char *abs = realpath(slots[i].path, NULL);
		an_put(&b, &slots[i].bytes, sizeof slots[i].bytes);
		an_put_str(&b, slots[i].path);
		an_put_str(&b, abs ? abs : slots[i].path);
		free(abs);
	}
	if (b.err || an_mpi_bcast(m, &b) < 0)
		goto out;
	b.n = 0;
	visible(&b, slots, files);
	for (int q = 0; q < P; q++) {
		if (q && an_mpi_recv(m, q, &b) < 0)
			goto out;
		struct an_rd r = { b.p, b.p + b.n, 0 };
		an_get(&r, vis + (size_t)q * files, files);
		char *host = an_get_str(&r);
		size_t missing = 0;
		for (size_t i = 0; i < files; i++)
			missing += !vis[(size_t)q * files + i];
		if (missing)
			an_warn(a, "--mpi: %zu of %zu files are not visible to process %d (host %s): the other "
				"processes read them", missing, files, q, host ? host : "?");
		free(host);
	}
	/* the largest first, each to the least loaded process that can open it (process 0 when none
	 * can: it will say why) */
	for (size_t i = 0; i < files; i++)
		bs[i] = (struct bysize){ slots[i].bytes, i };
	sort_n(bs, files, sizeof *bs, an_cmp_bysize);
	for (size_t k = 0; k < files; k++) {
		size_t i = bs[k].i;
		int best = -1;
		for (int q = 0; q < P; q++)
			if (vis[(size_t)q * files + i] && (best < 0 || load[q] < load[best]))
				best = q;
		best = best < 0 ? 0 : best;
		who[i] = best;
		load[best] += slots[i].bytes + 1;
		if (best == 0)
			idx[mine++] = i;
	}
	b.n = 0;
	an_put(&b, who, files * sizeof *who);
	if (b.err || an_mpi_bcast(m, &b) < 0)
		goto out;
	read_slots(a, slots, idx, mine);
	for (int q = 1; q < P; q++)
		if (an_mpi_recv(m, q, &b) < 0 || unpack_slots(&b, slots, files) < 0)
			goto out;
	/* every record to every process (of device work, only the NCCL kernels); each rank is split
	 * where its file was read, which is all its splitting reads again */
	b.n = 0;
	an_put(&b, who, files * sizeof *who);
	for (size_t i = 0; i < files; i++)
		pack_slot(&b, i, &slots[i], 0);
	if (b.err || an_mpi_bcast(m, &b) < 0)
		goto out;
	a->mpi_who = who;
	who = NULL;
	rc = 0;
out:
	free(vis);
	free(load);
	free(who);
	free(idx);
	free(bs);
	free(b.p);
	return rc;
}
