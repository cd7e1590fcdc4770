/* What loading and its --mpi exchange share (load.c, loadmpi.c): a trace file's slot, read into
 * its process record with what the report will say of it. */
#ifndef DDPSPY_LOAD_INT_H
#define DDPSPY_LOAD_INT_H

#include <stdint.h>

#include "analysis_int.h"

/* a file being read, on whichever thread: its process, and what the report will say of it (in
 * the files' order, whatever order they were read in) */
struct slot {
	const char *path;   /* as the report names it */
	char *open;         /* as this process opens it (report --mpi: process 0's absolute path), NULL: path */
	uint64_t bytes;
	struct trace_span span; /* (report_options') */
	struct proc p;
	int ok;
	char *warn[3];
	int nwarn;
};

/* a file's size, for reading the largest first (an_cmp_bysize: the largest first; in the files'
 * order among equals) */
struct bysize {
	uint64_t bytes;
	size_t i;
};
int an_cmp_bysize(const void *x, const void *y);

/* the slots idx[0..n) read (load.c's, handed to the exchange below) */
typedef void an_load_slots_fn(const struct analysis *a, struct slot *slots, const size_t *idx, size_t n);

/* report --mpi's first reading (loadmpi.c). an_mpi_lead, process 0: every file read by some
 * process, its record here. an_mpi_follow, any other: the list, its files read and sent, then
 * every record as process 0 has them (*out, *nout) and who splits each file's rank (a->mpi_who).
 * -1 when the exchange failed. */
int an_mpi_lead(struct analysis *a, struct slot *slots, size_t files, an_load_slots_fn *read_slots);
int an_mpi_follow(struct analysis *a, struct slot **out, size_t *nout, an_load_slots_fn *read_slots);

#endif
