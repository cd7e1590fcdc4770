/* The kinds table (common/format.h's fourth column) as the collector reads it (collector/kinds.c):
 * every kind's meaning is consistent with its argument names, so that a new kind added as one
 * line gives the analysis what it needs; and trace events convert to the analysis's fields. */
#include <string.h>

#include "../../collector/analysis_int.h"
#include "../../collector/trace.h"
#include "tap.h"

static struct trace_event event(int kind, int n, const int64_t *args)
{
	struct trace_event e;
	memset(&e, 0, sizeof e);
	e.kind = kind;
	e.t_ns = 1000;
	e.dur_ns = 50;
	e.nargs = n;
	e.str_index = -1;
	memcpy(e.args, args, (size_t)n * sizeof *args);
	return e;
}

int main(void)
{
	int bad = 0;
	for (int k = 0; k < DDPSPY_EV_COUNT; k++) {
		const struct kind *d = an_kind(k);
		unsigned m = d->m, cat = DDPSPY_KM_CAT(m);
		const char *name = ddpspy_event_names[k], *why = NULL;
		if (cat >= DDPSPY_CAT_COUNT)
			why = "no category";
		else if ((m & DDPSPY_KM_COLL) && (d->op < 0 || d->seq < 0 || (d->comm < 0 && !(m & DDPSPY_KM_SEQ_PER_OP))))
			why = "a collective without op, seq and comm (or SEQ_PER_OP)";
		else if ((m & DDPSPY_KM_NONBLOCKING) && !(m & DDPSPY_KM_COLL))
			why = "NONBLOCKING without COLL";
		else if ((m & DDPSPY_KM_WAITS) && d->op < 0)
			why = "WAITS without an op to say whether it completes";
		else if ((m & DDPSPY_KM_READS) && (d->fd < 0 || d->fdclass < 0 || d->bytes < 0))
			why = "READS without fd, fdclass and bytes";
		else if ((m & DDPSPY_KM_INPUT_FD) && d->fdclass < 0)
			why = "INPUT_FD without fdclass";
		else if ((m & DDPSPY_KM_FD_IS_RET) && d->fd < 0)
			why = "FD_IS_RET without ret";
		else if (cat == DDPSPY_CAT_MARKER && d->begin < 0)
			why = "a marker without begin";
		else if ((m & DDPSPY_KM_NAMES_THREAD) && cat != DDPSPY_CAT_NONE)
			why = "NAMES_THREAD on a call";
		else if ((m & (DDPSPY_KM_COLL | DDPSPY_KM_WAITS)) && cat != DDPSPY_CAT_COMMS)
			why = "a collective or wait that is not comms";
		if (why) {
			ok(0, "kind %s: %s", name, why);
			bad++;
		}
	}
	ok(!bad, "every one of the %d kinds' meaning agrees with its arguments", DDPSPY_EV_COUNT);

	struct ev v;
	int64_t coll[6] = {DDPSPY_OP_ALLREDUCE, 7, 42, 4096, -1, 0};
	struct trace_event e = event(DDPSPY_EV_MPI_COLL, 6, coll);
	ok(an_convert(&e, &v) && v.op == DDPSPY_OP_ALLREDUCE && v.comm == 7 && v.seq == 42 && v.bytes == 4096 &&
	   v.fd == -1 && v.t == 1000 && v.d == 50, "mpi_coll: op, comm, seq and bytes from their positions");
	ok(an_category(&v) == CAT_COMMS && an_blocking_coll(&v) && an_exit_aligns(&v) && an_kept_sync(&v),
	   "an all-reduce is comms, blocking, kept, and aligns clocks");
	coll[0] = DDPSPY_OP_BCAST;
	e = event(DDPSPY_EV_MPI_COLL, 6, coll);
	an_convert(&e, &v);
	ok(!an_exit_aligns(&v), "a broadcast's exits do not align clocks (its root leaves first)");

	int64_t gloo[4] = {DDPSPY_OP_BCAST, 3, -1, 0};
	e = event(DDPSPY_EV_GLOO_COLL, 4, gloo);
	int conv = an_convert(&e, &v);
	ok(conv && v.comm == -2 - DDPSPY_OP_BCAST && v.seq == 3 && an_exit_aligns(&v),
	   "gloo_coll: a sequence space per op (comm %d), its exits align clocks", v.comm);

	int64_t wait[4] = {DDPSPY_OP_TESTALL, 3, 0, 0};
	e = event(DDPSPY_EV_MPI_WAIT, 4, wait);
	an_convert(&e, &v);
	int test_kept = an_kept_sync(&v);
	wait[0] = DDPSPY_OP_WAITALL;
	e = event(DDPSPY_EV_MPI_WAIT, 4, wait);
	an_convert(&e, &v);
	ok(!test_kept && an_kept_sync(&v) && an_completes(&v), "MPI_Testall is not kept, MPI_Waitall completes");
	int kept[4];
	static const int any[4] = {DDPSPY_OP_WAITANY, DDPSPY_OP_WAITSOME, DDPSPY_OP_TESTANY, DDPSPY_OP_PROBE};
	for (int i = 0; i < 4; i++) {
		wait[0] = any[i];
		e = event(DDPSPY_EV_MPI_WAIT, 4, wait);
		an_convert(&e, &v);
		kept[i] = an_kept_sync(&v) && an_completes(&v) && an_category(&v) == CAT_COMMS;
	}
	ok(kept[0] && kept[1] && !kept[2] && !kept[3],
	   "MPI_Waitany and Waitsome complete (their request), MPI_Testany and MPI_Probe do not");
	coll[0] = DDPSPY_OP_ALLTOALLW;
	e = event(DDPSPY_EV_MPI_COLL, 6, coll);
	an_convert(&e, &v);
	int w = an_exit_aligns(&v);
	coll[0] = DDPSPY_OP_SCAN;
	e = event(DDPSPY_EV_MPI_COLL, 6, coll);
	an_convert(&e, &v);
	ok(w && !an_exit_aligns(&v), "MPI_Alltoallw's exits align clocks, MPI_Scan's do not (rank 0 needs no one)");

	int64_t open[3] = {5, 0, DDPSPY_FD_FILE};
	e = event(DDPSPY_EV_OPEN, 3, open);
	ok(an_convert(&e, &v) && v.fd == 5 && v.fdclass == DDPSPY_FD_FILE && an_category(&v) == CAT_DATA &&
	   an_kind(e.kind)->path >= 0, "open: its descriptor is its return value; data; has a path");

	int64_t rd[4] = {5, DDPSPY_FD_DEVICE, 64, 64};
	e = event(DDPSPY_EV_READ, 4, rd);
	an_convert(&e, &v);
	int dev = an_category(&v);
	rd[1] = DDPSPY_FD_FILE;
	e = event(DDPSPY_EV_READ, 4, rd);
	an_convert(&e, &v);
	ok(dev == CAT_HOST && an_category(&v) == CAT_DATA && an_is_file_read(&v) && v.bytes == 64,
	   "a read is data from a file, host from a device");

	int64_t step[1] = {1};
	e = event(DDPSPY_EV_STEP, 1, step);
	ok(an_convert(&e, &v) && an_category(&v) == DDPSPY_CAT_MARKER && v.op == 1 && an_kept_sync(&v),
	   "a step marker: a kept point, op 1 at a begin");

	int64_t name[2] = {0, 0};
	e = event(DDPSPY_EV_THREAD_NAME, 2, name);
	ok(!an_convert(&e, &v), "a thread's name is not a call");

	e = event(DDPSPY_EV_COUNT + 5, 6, coll);
	ok(an_convert(&e, &v) && an_category(&v) == CAT_HOST && v.bytes == -1 && v.seq == -1 && !an_is_coll(e.kind),
	   "a kind from a newer writer is host time with no arguments read");

	e = event(DDPSPY_EV_MPI_COLL, 2, coll); /* a damaged event: fewer arguments than the kind has */
	ok(an_convert(&e, &v) && v.op == coll[0] && v.comm == 7 && v.seq == -1 && v.bytes == -1,
	   "arguments past an event's last are unknown, not read");
	return done_testing();
}
