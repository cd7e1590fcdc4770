/* An MPI program with known traffic for the end-to-end test. Every rank:
 *   MPI_Allreduce of 1 MiB (262144 floats) x 5, MPI_Bcast of 4096 bytes from rank 0,
 *   MPI_Barrier after rank 0 sleeps 30 ms, MPI_Iallreduce of 64 KiB + MPI_Wait,
 *   MPI_Allgather of 8 ints per rank, and a ring of MPI_Send/MPI_Recv of 1000 bytes. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	int rank, size;
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	float *a = calloc(262144, sizeof(float)), *b = calloc(262144, sizeof(float));
	for (int i = 0; i < 5; i++)
		MPI_Allreduce(a, b, 262144, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
	char buf[4096] = {0};
	MPI_Bcast(buf, 4096, MPI_BYTE, 0, MPI_COMM_WORLD);
	if (rank == 0)
		usleep(30000);
	MPI_Barrier(MPI_COMM_WORLD);
	MPI_Request req;
	MPI_Iallreduce(a, b, 16384, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &req);
	MPI_Wait(&req, MPI_STATUS_IGNORE);
	int mine[8] = {0}, *all = calloc(8 * (size_t)size, sizeof(int));
	MPI_Allgather(mine, 8, MPI_INT, all, 8, MPI_INT, MPI_COMM_WORLD);
	char msg[1000] = {0};
	int to = (rank + 1) % size, from = (rank + size - 1) % size;
	if (rank % 2 == 0) {
		MPI_Send(msg, 1000, MPI_BYTE, to, 7, MPI_COMM_WORLD);
		MPI_Recv(msg, 1000, MPI_BYTE, from, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
	} else {
		MPI_Recv(msg, 1000, MPI_BYTE, from, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
		MPI_Send(msg, 1000, MPI_BYTE, to, 7, MPI_COMM_WORLD);
	}
	MPI_Finalize();
	if (rank == 0)
		printf("mpi_app: done on %d ranks\n", size);
	free(a);
	free(b);
	free(all);
	return 0;
}
