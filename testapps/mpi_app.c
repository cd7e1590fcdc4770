/* An MPI program with known traffic for the end-to-end test. Every rank:
 *   MPI_Allreduce of 1 MiB (262144 floats) x 5, MPI_Bcast of 4096 bytes from rank 0,
 *   MPI_Barrier after rank 0 sleeps 30 ms, MPI_Iallreduce of 64 KiB + MPI_Wait,
 *   MPI_Allgather of 8 ints per rank, and a ring of MPI_Send/MPI_Recv of 1000 bytes.
 * Then the rest of what ddpspy records: MPI_Scan and MPI_Exscan of one int, MPI_Alltoallw of 2 ints
 * to each rank, and with its partner (rank ^ 1, when there is one) each of the other sends and
 * completions, a tag each: MPI_Ssend of 2000 bytes (tag 11), MPI_Bsend of 1500 (12), MPI_Rsend of
 * 500 to a posted receive (13), MPI_Issend + MPI_Irecv of 300 completed by two MPI_Waitany (14), an
 * MPI_Isend + MPI_Irecv of 200 by MPI_Waitsome (15), of 100 by MPI_Testany (16) and of 50 by
 * MPI_Testsome (17), and a 40-byte message (18) that the higher rank waits for in MPI_Probe while
 * the lower one sleeps 20 ms before sending it; then persistent requests (MPI_Recv_init and
 * MPI_Send_init, 64 bytes, tag 19) started three times, by MPI_Startall twice and MPI_Start, each
 * time completed by MPI_Waitall, then freed; then two receives from MPI_ANY_SOURCE: one of 8 bytes
 * (tag 21) completed by MPI_Wait, one (tag 20) followed by a receive naming the partner with the
 * same tag before both are completed by MPI_Waitall. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

/* the requests q[0], q[1] completed by the call of tag's exchange */
static void complete(int tag, MPI_Request q[2])
{
	int done = 0, n, idx[2], flag;
	while (done < 2) {
		if (tag == 14) {
			MPI_Waitany(2, q, idx, MPI_STATUS_IGNORE);
			done++;
		} else if (tag == 15) {
			MPI_Waitsome(2, q, &n, idx, MPI_STATUSES_IGNORE);
			done += n;
		} else if (tag == 16) {
			MPI_Testany(2, q, idx, &flag, MPI_STATUS_IGNORE);
			done += flag;
		} else {
			MPI_Testsome(2, q, &n, idx, MPI_STATUSES_IGNORE);
			done += n;
		}
	}
}

static void rest(int rank, int size)
{
	int one = 1, sum = 0;
	MPI_Scan(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
	MPI_Exscan(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
	int *cnt = malloc(2 * sizeof(int) * (size_t)size), *disp = cnt + size, *sb = calloc(4 * (size_t)size, sizeof(int));
	MPI_Datatype *ty = malloc(sizeof *ty * (size_t)size);
	for (int i = 0; i < size; i++)
		cnt[i] = 2, disp[i] = 8 * i, ty[i] = MPI_INT;
	MPI_Alltoallw(sb, cnt, disp, ty, sb + 2 * size, cnt, disp, ty, MPI_COMM_WORLD);
	free(cnt);
	free(sb);
	free(ty);
	int peer = rank ^ 1, low = rank < peer;
	if (peer >= size)
		return;
	static char m[2000], r[2000], bb[4096 + MPI_BSEND_OVERHEAD];
	if (low)
		MPI_Ssend(m, 2000, MPI_BYTE, peer, 11, MPI_COMM_WORLD);
	else
		MPI_Recv(r, 2000, MPI_BYTE, peer, 11, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
	MPI_Buffer_attach(bb, sizeof bb);
	if (low)
		MPI_Bsend(m, 1500, MPI_BYTE, peer, 12, MPI_COMM_WORLD);
	else
		MPI_Recv(r, 1500, MPI_BYTE, peer, 12, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
	void *p;
	int sz;
	MPI_Buffer_detach(&p, &sz);
	/* a ready send needs its receive posted: the higher rank posts it, then says so */
	MPI_Request q[2];
	if (!low)
		MPI_Irecv(r, 500, MPI_BYTE, peer, 13, MPI_COMM_WORLD, &q[0]);
	MPI_Sendrecv(NULL, 0, MPI_BYTE, peer, 99, NULL, 0, MPI_BYTE, peer, 99, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
	if (low)
		MPI_Rsend(m, 500, MPI_BYTE, peer, 13, MPI_COMM_WORLD);
	else
		MPI_Wait(&q[0], MPI_STATUS_IGNORE);
	static const int bytes[] = { 300, 200, 100, 50 };
	for (int tag = 14; tag <= 17; tag++) {
		MPI_Irecv(r, bytes[tag - 14], MPI_BYTE, peer, tag, MPI_COMM_WORLD, &q[0]);
		if (tag == 14)
			MPI_Issend(m, bytes[tag - 14], MPI_BYTE, peer, tag, MPI_COMM_WORLD, &q[1]);
		else
			MPI_Isend(m, bytes[tag - 14], MPI_BYTE, peer, tag, MPI_COMM_WORLD, &q[1]);
		complete(tag, q);
	}
	if (low) {
		usleep(20000);
		MPI_Send(m, 40, MPI_BYTE, peer, 18, MPI_COMM_WORLD);
	} else {
		MPI_Status st;
		MPI_Probe(peer, 18, MPI_COMM_WORLD, &st);
		MPI_Recv(r, 40, MPI_BYTE, peer, 18, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
	}
	MPI_Recv_init(r, 64, MPI_BYTE, peer, 19, MPI_COMM_WORLD, &q[0]);
	MPI_Send_init(m, 64, MPI_BYTE, peer, 19, MPI_COMM_WORLD, &q[1]);
	for (int k = 0; k < 3; k++) {
		if (k < 2) {
			MPI_Startall(2, q);
		} else {
			MPI_Start(&q[0]);
			MPI_Start(&q[1]);
		}
		MPI_Waitall(2, q, MPI_STATUSES_IGNORE);
	}
	MPI_Request_free(&q[0]);
	MPI_Request_free(&q[1]);
	MPI_Request w[3];
	MPI_Irecv(r, 8, MPI_BYTE, MPI_ANY_SOURCE, 21, MPI_COMM_WORLD, &w[0]);
	MPI_Send(m, 8, MPI_BYTE, peer, 21, MPI_COMM_WORLD);
	MPI_Wait(&w[0], MPI_STATUS_IGNORE);
	MPI_Irecv(r, 8, MPI_BYTE, MPI_ANY_SOURCE, 20, MPI_COMM_WORLD, &w[1]);
	MPI_Irecv(r + 8, 8, MPI_BYTE, peer, 20, MPI_COMM_WORLD, &w[2]);
	MPI_Send(m, 8, MPI_BYTE, peer, 20, MPI_COMM_WORLD);
	MPI_Send(m, 8, MPI_BYTE, peer, 20, MPI_COMM_WORLD);
	MPI_Waitall(2, w + 1, MPI_STATUSES_IGNORE);
}

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
	rest(rank, size);
	MPI_Finalize();
	if (rank == 0)
		printf("mpi_app: done on %d ranks\n", size);
	free(a);
	free(b);
	free(all);
	return 0;
}
