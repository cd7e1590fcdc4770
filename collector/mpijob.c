/* `mpirun -np P ddpspy report --mpi DIR`: the first reading of the ranks' files spread over P
 * processes (on as many hosts, sharing the trace directory), their process records gathered to
 * process 0, which writes the report. Open MPI is loaded when --mpi asks for it (dlopen), so that
 * ddpspy needs no MPI otherwise; its handles are pointers (MPI_COMM_WORLD is
 * &ompi_mpi_comm_world), which is all that is used of its ABI. */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis_int.h"

struct an_mpi {
	void *lib;
	int (*init)(int *, char ***, int, int *);
	int (*finalize)(void);
	int (*rank)(void *, int *);
	int (*size)(void *, int *);
	int (*bcast)(void *, int, void *, int, void *);
	int (*send)(const void *, int, void *, int, int, void *);
	int (*recv)(void *, int, void *, int, int, void *, void *);
	int (*abort)(void *, int);
	void *world, *byte;
	int me, np;
};

struct an_mpi *an_mpi_start(char *err, size_t errlen)
{
	struct an_mpi *m = calloc(1, sizeof *m);
	const char *names[] = { "libmpi.so.40", "libmpi.so" };
	for (size_t i = 0; m && !m->lib && i < sizeof names / sizeof *names; i++)
		m->lib = dlopen(names[i], RTLD_NOW | RTLD_GLOBAL);
	if (!m || !m->lib) {
		const char *why = m ? dlerror() : "out of memory";
		snprintf(err, errlen, "--mpi needs Open MPI's libmpi.so.40 (%s)", why ? why : "not found");
		free(m);
		return NULL;
	}
#define SYM(f, s) (*(void **)&m->f = dlsym(m->lib, s))
	if (!SYM(init, "MPI_Init_thread") || !SYM(finalize, "MPI_Finalize") || !SYM(rank, "MPI_Comm_rank") ||
	    !SYM(size, "MPI_Comm_size") || !SYM(bcast, "MPI_Bcast") || !SYM(send, "MPI_Send") ||
	    !SYM(recv, "MPI_Recv") || !SYM(abort, "MPI_Abort") || !(m->world = dlsym(m->lib, "ompi_mpi_comm_world")) ||
	    !(m->byte = dlsym(m->lib, "ompi_mpi_byte"))) {
#undef SYM
		const char *why = dlerror();
		snprintf(err, errlen, "--mpi needs Open MPI: its libmpi lacks %s", why ? why : "a symbol");
		dlclose(m->lib);
		free(m);
		return NULL;
	}
	/* (threads read and split files, only this one calls MPI: MPI_THREAD_FUNNELED, 1 in Open MPI's
	 * mpi.h) */
	int provided = 0;
	if (m->init(NULL, NULL, 1, &provided) != 0 || m->rank(m->world, &m->me) != 0 || m->size(m->world, &m->np) != 0) {
		snprintf(err, errlen, "--mpi: MPI_Init failed (is this process started by mpirun?)");
		free(m);
		return NULL;
	}
	return m;
}

/* the whole job ends (a process that cannot go on would leave the others waiting for it) */
void an_mpi_abort(struct an_mpi *m)
{
	m->abort(m->world, 2);
	exit(2);
}

void an_mpi_end(struct an_mpi *m)
{
	if (!m)
		return;
	m->finalize();
	free(m);
}

int an_mpi_me(const struct an_mpi *m)
{
	return m->me;
}

int an_mine(const struct analysis *a, int r)
{
	return !a->mpi || a->mpi_who[a->ranks[r].p->src] == an_mpi_me(a->mpi);
}

int an_mpi_np(const struct an_mpi *m)
{
	return m->np;
}

#define CHUNK ((size_t)1 << 30) /* (MPI counts are ints) */

/* b (root 0's) to every process: its size, then its bytes */
int an_mpi_bcast(struct an_mpi *m, struct an_buf *b)
{
	uint64_t n = b->n;
	if (m->bcast(&n, sizeof n, m->byte, 0, m->world) != 0)
		return -1;
	if (m->me != 0) {
		b->n = 0;
		char *p = realloc(b->p, n + 1);
		if (!p)
			return -1; /* (an MPI job cannot go on without it: the caller aborts) */
		b->p = p;
		b->cap = n + 1;
		b->n = n;
	}
	for (size_t off = 0; off < n; off += CHUNK) {
		size_t c = n - off < CHUNK ? n - off : CHUNK;
		if (m->bcast(b->p + off, (int)c, m->byte, 0, m->world) != 0)
			return -1;
	}
	return 0;
}

/* b from this process to process 0 */
int an_mpi_send(struct an_mpi *m, const struct an_buf *b)
{
	uint64_t n = b->n;
	if (m->send(&n, sizeof n, m->byte, 0, 1, m->world) != 0)
		return -1;
	for (size_t off = 0; off < n; off += CHUNK) {
		size_t c = n - off < CHUNK ? n - off : CHUNK;
		if (m->send(b->p + off, (int)c, m->byte, 0, 2, m->world) != 0)
			return -1;
	}
	return 0;
}

/* what process src sent to this one (process 0) into b */
int an_mpi_recv(struct an_mpi *m, int src, struct an_buf *b)
{
	uint64_t n;
	if (m->recv(&n, sizeof n, m->byte, src, 1, m->world, NULL) != 0)
		return -1;
	char *p = realloc(b->p, n + 1);
	if (!p)
		return -1;
	b->p = p;
	b->cap = n + 1;
	b->n = n;
	for (size_t off = 0; off < n; off += CHUNK) {
		size_t c = n - off < CHUNK ? n - off : CHUNK;
		if (m->recv(b->p + off, (int)c, m->byte, src, 2, m->world, NULL) != 0)
			return -1;
	}
	return 0;
}
