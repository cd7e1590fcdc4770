/* A halo-exchange stencil on MPI: the testbed of point-to-point wait states (issue 19). The ranks
 * form a 2D grid (MPI_Dims_create), each owning a block of cells of a Jacobi iteration; every
 * iteration each rank exchanges its edges with its up to four neighbours (blocking MPI_Sendrecv per
 * direction, or with --nonblocking MPI_Irecv/MPI_Isend and one MPI_Waitall), then updates its
 * block. Every --reduce-every iterations the ranks sum a residual with an 8-byte MPI_Allreduce (a
 * "thermo" reduction: collectives are rare). --heavy-rank R --heavy-factor F gives rank R F times
 * the rows of the others: it computes F times longer and its neighbours wait for it in their
 * receives (late sender). --wildcard receives with MPI_ANY_SOURCE (each direction's tag still
 * names one neighbour), as a master-worker program would: every receive when blocking, every other
 * iteration's with --nonblocking (so that receives naming their source follow ones that did not).
 * --persistent (nonblocking) makes the same requests once (MPI_Recv_init, MPI_Send_init: a set for
 * each of the two grids it alternates between) and starts them every iteration (MPI_Startall).
 * --waitany (nonblocking) completes the receives one at a time with MPI_Waitany, as a program that
 * unpacks each halo as it arrives would, then the sends with MPI_Waitall. --overlap-reduce sums
 * the previous iteration's residual with an MPI_Iallreduce posted before the exchange and waited
 * for (MPI_Wait) after the update, as a pipelined solver overlaps its dot products.
 *
 * Rank 0 prints one JSON line of ground truth: the iterations, the decomposition, and per rank
 * its cells, and per iteration its compute time and its communication time (the halo exchange,
 * waits included), medians, measured by the program around each part with CLOCK_MONOTONIC.
 *
 * usage: stencil [--iters N] [--nx X] [--ny Y] [--heavy-rank R] [--heavy-factor F]
 *                [--nonblocking] [--persistent] [--waitany] [--wildcard] [--overlap-reduce] [--reduce-every K]   (X by Y cells per rank, default
 *                256 x 256) */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int cmp_d(const void *x, const void *y)
{
	double a = *(const double *)x, b = *(const double *)y;
	return (a > b) - (a < b);
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof *v, cmp_d);
	return n ? v[n / 2] : 0;
}

int main(int argc, char **argv)
{
	int iters = 200, nx = 256, ny = 256, heavy = -1, every = 50, nonblocking = 0, wildcard = 0, waitany = 0, overlap = 0, persistent = 0;
	double factor = 1;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--iters") && i + 1 < argc)
			iters = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--nx") && i + 1 < argc)
			nx = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--ny") && i + 1 < argc)
			ny = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--heavy-rank") && i + 1 < argc)
			heavy = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--heavy-factor") && i + 1 < argc)
			factor = atof(argv[++i]);
		else if (!strcmp(argv[i], "--reduce-every") && i + 1 < argc)
			every = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--nonblocking"))
			nonblocking = 1;
		else if (!strcmp(argv[i], "--persistent"))
			nonblocking = persistent = 1;
		else if (!strcmp(argv[i], "--overlap-reduce"))
			overlap = 1;
		else if (!strcmp(argv[i], "--waitany"))
			nonblocking = waitany = 1;
		else if (!strcmp(argv[i], "--wildcard"))
			wildcard = 1;
		else {
			fprintf(stderr, "stencil: unknown argument %s\n", argv[i]);
			return 2;
		}
	}
	if (iters < 1 || nx < 4 || ny < 4 || factor < 1 || every < 1) {
		fprintf(stderr, "stencil: --iters >= 1, --nx and --ny >= 4, --heavy-factor >= 1, --reduce-every >= 1\n");
		return 2;
	}
	MPI_Init(&argc, &argv);
	int rank, size, dims[2] = { 0, 0 }, periods[2] = { 0, 0 }, coords[2];
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	MPI_Dims_create(size, 2, dims);
	MPI_Comm grid;
	MPI_Cart_create(MPI_COMM_WORLD, 2, dims, periods, 0, &grid);
	MPI_Cart_coords(grid, rank, 2, coords);
	int up, down, left, right;
	MPI_Cart_shift(grid, 0, 1, &up, &down);
	MPI_Cart_shift(grid, 1, 1, &left, &right);
	/* the sources received from: any, where the neighbour is there (MPI_PROC_NULL stays) */
	int fup = wildcard && up != MPI_PROC_NULL ? MPI_ANY_SOURCE : up;
	int fdown = wildcard && down != MPI_PROC_NULL ? MPI_ANY_SOURCE : down;
	int fleft = wildcard && left != MPI_PROC_NULL ? MPI_ANY_SOURCE : left;
	int fright = wildcard && right != MPI_PROC_NULL ? MPI_ANY_SOURCE : right;
	/* the heavy rank owns factor times the rows: its halos are the same, its compute longer */
	int rows = rank == heavy ? (int)(ny * factor) : ny, cols = nx;
	size_t w = (size_t)cols + 2, h = (size_t)rows + 2;
	double *a = calloc(w * h, sizeof *a), *b = calloc(w * h, sizeof *b);
	double *sl = malloc((size_t)rows * sizeof *sl), *sr = malloc((size_t)rows * sizeof *sr);
	double *rl = malloc((size_t)rows * sizeof *rl), *rr = malloc((size_t)rows * sizeof *rr);
	double *tc = malloc((size_t)iters * sizeof *tc), *tm = malloc((size_t)iters * sizeof *tm);
	if (!a || !b || !sl || !sr || !rl || !rr || !tc || !tm) {
		fprintf(stderr, "stencil: out of memory\n");
		MPI_Abort(MPI_COMM_WORLD, 1);
	}
	for (size_t i = 0; i < w * h; i++)
		a[i] = (double)((i * 2654435761u) % 1000) / 1000.0;
	/* the row halos go to the neighbours above and below; a neighbour's edge row has as many
	 * cells as ours (cols), the column halos carry min(rows) cells: each rank sends its first ny */
	double residual = 0, res = 0, g = 0;
	MPI_Request pq[2][8]; /* --persistent: iteration it's requests are pq[it % 2] (a, b swap) */
	for (int par = 0; persistent && par < 2; par++) {
		double *u = par ? b : a;
		MPI_Request *q = pq[par];
		MPI_Recv_init(u + 1, cols, MPI_DOUBLE, fup, 0, grid, &q[0]);
		MPI_Recv_init(u + (size_t)(rows + 1) * w + 1, cols, MPI_DOUBLE, fdown, 1, grid, &q[1]);
		MPI_Recv_init(rl, ny, MPI_DOUBLE, fleft, 2, grid, &q[2]);
		MPI_Recv_init(rr, ny, MPI_DOUBLE, fright, 3, grid, &q[3]);
		MPI_Send_init(u + w + 1, cols, MPI_DOUBLE, up, 1, grid, &q[4]);
		MPI_Send_init(u + (size_t)rows * w + 1, cols, MPI_DOUBLE, down, 0, grid, &q[5]);
		MPI_Send_init(sl, ny, MPI_DOUBLE, left, 3, grid, &q[6]);
		MPI_Send_init(sr, ny, MPI_DOUBLE, right, 2, grid, &q[7]);
	}
	for (int it = 0; it < iters; it++) {
		double t0 = now_ms();
		MPI_Request rq = MPI_REQUEST_NULL;
		if (overlap && (it + 1) % every == 0) /* the previous residual's, overlapped */
			MPI_Iallreduce(&res, &g, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &rq);
		int n = ny; /* column halo length: the same on every rank */
		for (int r = 0; r < n; r++) {
			sl[r] = a[(size_t)(r + 1) * w + 1];
			sr[r] = a[(size_t)(r + 1) * w + (size_t)cols];
		}
		double *top = a + w + 1, *bottom = a + (size_t)rows * w + 1;
		double *htop = a + 1, *hbottom = a + (size_t)(rows + 1) * w + 1;
		if (persistent) {
			MPI_Startall(8, pq[it % 2]);
			MPI_Waitall(8, pq[it % 2], MPI_STATUSES_IGNORE);
		} else if (nonblocking) {
			MPI_Request q[8];
			int k = 0;
			int any = it % 2 == 0;
			MPI_Irecv(htop, cols, MPI_DOUBLE, any ? fup : up, 0, grid, &q[k++]);
			MPI_Irecv(hbottom, cols, MPI_DOUBLE, any ? fdown : down, 1, grid, &q[k++]);
			MPI_Irecv(rl, n, MPI_DOUBLE, any ? fleft : left, 2, grid, &q[k++]);
			MPI_Irecv(rr, n, MPI_DOUBLE, any ? fright : right, 3, grid, &q[k++]);
			MPI_Isend(top, cols, MPI_DOUBLE, up, 1, grid, &q[k++]);
			MPI_Isend(bottom, cols, MPI_DOUBLE, down, 0, grid, &q[k++]);
			MPI_Isend(sl, n, MPI_DOUBLE, left, 3, grid, &q[k++]);
			MPI_Isend(sr, n, MPI_DOUBLE, right, 2, grid, &q[k++]);
			for (int i = 0; waitany && i < 4; i++) {
				int idx;
				MPI_Waitany(4, q, &idx, MPI_STATUS_IGNORE);
			}
			MPI_Waitall(waitany ? 4 : k, waitany ? q + 4 : q, MPI_STATUSES_IGNORE);
		} else {
			MPI_Sendrecv(top, cols, MPI_DOUBLE, up, 1, hbottom, cols, MPI_DOUBLE, fdown, 1, grid, MPI_STATUS_IGNORE);
			MPI_Sendrecv(bottom, cols, MPI_DOUBLE, down, 0, htop, cols, MPI_DOUBLE, fup, 0, grid, MPI_STATUS_IGNORE);
			MPI_Sendrecv(sl, n, MPI_DOUBLE, left, 3, rr, n, MPI_DOUBLE, fright, 3, grid, MPI_STATUS_IGNORE);
			MPI_Sendrecv(sr, n, MPI_DOUBLE, right, 2, rl, n, MPI_DOUBLE, fleft, 2, grid, MPI_STATUS_IGNORE);
		}
		if (left != MPI_PROC_NULL)
			for (int r = 0; r < n; r++)
				a[(size_t)(r + 1) * w] = rl[r];
		if (right != MPI_PROC_NULL)
			for (int r = 0; r < n; r++)
				a[(size_t)(r + 1) * w + (size_t)cols + 1] = rr[r];
		double t1 = now_ms();
		/* the update: a Jacobi sweep, then the residual of the block */
		double sum = 0; /* (res may be being summed: it is set after the wait) */
		for (size_t y = 1; y <= (size_t)rows; y++)
			for (size_t x = 1; x <= (size_t)cols; x++) {
				double v = 0.25 * (a[(y - 1) * w + x] + a[(y + 1) * w + x] + a[y * w + x - 1] + a[y * w + x + 1]);
				sum += (v - a[y * w + x]) * (v - a[y * w + x]);
				b[y * w + x] = v;
			}
		double *s = a;
		a = b;
		b = s;
		double t2 = now_ms();
		tm[it] = t1 - t0;
		tc[it] = t2 - t1;
		if (rq != MPI_REQUEST_NULL) {
			MPI_Wait(&rq, MPI_STATUS_IGNORE);
			residual = g;
			tm[it] += now_ms() - t2;
		}
		res = sum;
		if (!overlap && (it + 1) % every == 0) { /* the thermo reduction */
			double t3 = now_ms();
			MPI_Allreduce(&res, &g, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
			residual = g;
			tm[it] += now_ms() - t3;
		}
	}
	double mine[4] = { (double)rows * cols, median(tc, iters), median(tm, iters), 0 };
	double *all = rank == 0 ? malloc(4 * (size_t)size * sizeof *all) : NULL;
	MPI_Gather(mine, 4, MPI_DOUBLE, all, 4, MPI_DOUBLE, 0, MPI_COMM_WORLD);
	if (rank == 0) {
		printf("{\"iters\": %d, \"world_size\": %d, \"dims\": [%d, %d], \"nonblocking\": %s, \"reduce_every\": %d, "
		       "\"heavy_rank\": %d, \"heavy_factor\": %g, \"residual\": %.6g, \"ranks\": [",
		       iters, size, dims[0], dims[1], nonblocking ? "true" : "false", every, heavy, factor, residual);
		for (int r = 0; r < size; r++)
			printf("%s{\"rank\": %d, \"cells\": %.0f, \"compute_ms\": %.3f, \"comm_ms\": %.3f}", r ? ", " : "", r,
			       all[4 * r], all[4 * r + 1], all[4 * r + 2]);
		printf("]}\n");
		free(all);
	}
	for (int par = 0; persistent && par < 2; par++)
		for (int i = 0; i < 8; i++)
			MPI_Request_free(&pq[par][i]);
	free(a);
	free(b);
	free(sl);
	free(sr);
	free(rl);
	free(rr);
	free(tc);
	free(tm);
	MPI_Comm_free(&grid);
	MPI_Finalize();
	return 0;
}
