/* An MPI job that hangs, on purpose, for the hang verdict's tests. Every rank runs STEPS steps of
 * about 1 ms of work, a 4 KiB MPI_Allreduce (the gradients) and a 4-byte one (the loss): two calls
 * unlike each other, so that the steps' pattern is plain whatever the gaps between calls (calls that
 * all look alike leave the steps to their gaps, which a busy machine blurs), then, by mode:
 *   fifo PATH  rank 1 opens the FIFO PATH and blocks in read() (nobody writes it); the others
 *              wait in the next all-reduce (#2 x STEPS)
 *   open PATH  rank 1 blocks in open() of the FIFO PATH for reading (nobody opens it to write)
 *   spin       rank 1 computes forever, in no call; the others wait in the next all-reduce
 *   stop       rank 1 stops itself (SIGSTOP: frozen, its file ends there); the others wait in the
 *              next all-reduce
 *   exit       rank 1 leaves at once with _exit(0), without MPI_Finalize: Open MPI ends the job
 *              (not a hang)
 *   deadlock   ranks 0 and 1 each wait in MPI_Recv from the other (tag 7)
 *   none       one more all-reduce and MPI_Finalize: no hang
 * Prints "hanging" on rank 0 once it is about to, and never ends but by a signal (except none). */
#include <fcntl.h>
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double work(double x)
{
	struct timespec a, b;
	clock_gettime(CLOCK_MONOTONIC, &a);
	do {
		for (int i = 0; i < 1000; i++)
			x = x * 1.0000001 + 1e-9;
		clock_gettime(CLOCK_MONOTONIC, &b);
	} while ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec) < 1e6);
	return x;
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: hang_mpi fifo|open|spin|stop|exit|deadlock|none STEPS [PATH]\n");
		return 2;
	}
	const char *mode = argv[1];
	int steps = atoi(argv[2]), rank, size;
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	static float in[1024], out[1024];
	float loss = 1, sum;
	double x = rank;
	for (int s = 0; s < steps; s++) {
		x = work(x);
		MPI_Allreduce(in, out, 1024, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
		MPI_Allreduce(&loss, &sum, 1, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
	}
	if (rank == 0) {
		printf("hanging\n");
		fflush(stdout);
	}
	if (!strcmp(mode, "deadlock") && rank < 2) {
		char m[64];
		MPI_Recv(m, 64, MPI_BYTE, rank ^ 1, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
	} else if (rank == 1 && !strcmp(mode, "fifo") && argc > 3) {
		char c;
		int fd = open(argv[3], O_RDWR);
		if (fd < 0 || read(fd, &c, 1) < 0)
			perror("hang_mpi: the FIFO");
	} else if (rank == 1 && !strcmp(mode, "open") && argc > 3) {
		if (open(argv[3], O_RDONLY) < 0)
			perror("hang_mpi: the FIFO");
	} else if (rank == 1 && !strcmp(mode, "spin")) {
		for (;;)
			x = work(x);
	} else if (rank == 1 && !strcmp(mode, "stop")) {
		raise(SIGSTOP);
	} else if (rank == 1 && !strcmp(mode, "exit")) {
		_exit(0);
	}
	MPI_Allreduce(in, out, 1024, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
	MPI_Finalize();
	return x == 12345.678; /* (x kept) */
}
