/* What the split's files share (split.c, splitmpi.c): what one rank's split adds to other ranks'
 * figures, kept till every rank is split, and report --mpi's exchange of the splits. */
#ifndef DDPSPY_SPLIT_INT_H
#define DDPSPY_SPLIT_INT_H

#include <stdint.h>

#include "analysis_int.h"

/* What one rank's split adds to figures other ranks' splits add to as well (an instance's waits,
 * a late rank's), and what it says of the instances it was last to: kept while the ranks are split
 * on their threads (or by other processes: report --mpi) and applied after, rank by rank, so that
 * every sum is made in the same order whatever the number of threads or processes. Targets are
 * indices, the same in every process. */
enum { SH_WAIT_SUM, SH_P2PL, SH_P2POP, SH_PLATE, SH_PREV };

struct shared {
	struct sadd {
		int32_t type;
		uint32_t i;    /* the instance (in sd->tab.v), or the index into p2pL, p2pop, plate */
		double v;      /* added, appended; SH_PREV: prev_gap */
		int32_t cat;   /* SH_PREV: prev_cat */
	} *v;
	size_t n, cap;
	char *warn;
};

/* report --mpi: every process but process 0 sends the splits of its ranks (mine[0..n)) with what
 * they add (logs), process 0 takes the others' into a, sd and logs; -1 when the exchange failed */
int an_split_exchange(struct analysis *a, struct stepdata *sd, struct shared *logs, const size_t *mine, size_t n);

#endif
