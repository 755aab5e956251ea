/*
 * mpi_net: MPI point-to-point latency and MPI_Allreduce time between two
 * ranks, for the network benchmark (bench/bench.py --net-only), where each
 * rank runs in its own network namespace.
 *
 *   ping-pong  rank 0 MPI_Send()s SIZE bytes (MPI_BYTE) to rank 1, which
 *              MPI_Recv()s them and sends them back; one-way time = half
 *              the mean round trip over ITERS round trips, after ITERS/10
 *              untimed ones.
 *   allreduce  MPI_Allreduce of SIZE/8 doubles (MPI_SUM) on MPI_COMM_WORLD;
 *              time per call = the mean over ITERS calls after ITERS/10
 *              untimed ones, the maximum over the ranks.
 * ITERS = BYTES / SIZE, at least 20 and at most MAXIT (default 2000 and
 * 16 MiB: see the arguments).
 *
 * Rank 0 prints one line per case:
 *   pingpong SIZE ITERS USEC
 *   allreduce SIZE ITERS USEC
 *
 * Usage: mpi_net [pingpong sizes, comma-separated] [allreduce sizes] [MAXIT] [BYTES]
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_SIZES 64

static long maxit = 2000, budget = 16L << 20;

static int parse_sizes(const char *arg, long *sizes)
{
	int n = 0;
	const char *p = arg;
	while (*p && n < MAX_SIZES) {
		char *end;
		long v = strtol(p, &end, 0);
		if (end == p || v < 0)
			return -1;
		sizes[n++] = v;
		if (*end == ',')
			end++;
		else if (*end)
			return -1;
		p = end;
	}
	return n;
}

static long iters_for(long size)
{
	long n = size ? budget / size : maxit;
	if (n > maxit)
		n = maxit;
	if (n < 20)
		n = 20;
	return n;
}

static double pingpong(char *buf, long size, long iters, int rank)
{
	double t0 = 0;
	long warm = iters / 10;
	for (long i = 0; i < warm + iters; i++) {
		if (i == warm) {
			MPI_Barrier(MPI_COMM_WORLD);
			t0 = MPI_Wtime();
		}
		if (rank == 0) {
			MPI_Send(buf, (int)size, MPI_BYTE, 1, 1, MPI_COMM_WORLD);
			MPI_Recv(buf, (int)size, MPI_BYTE, 1, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
		} else if (rank == 1) {
			MPI_Recv(buf, (int)size, MPI_BYTE, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
			MPI_Send(buf, (int)size, MPI_BYTE, 0, 1, MPI_COMM_WORLD);
		}
	}
	return (MPI_Wtime() - t0) / (double)iters / 2 * 1e6;
}

static double allreduce(double *in, double *out, long size, long iters)
{
	int n = (int)(size / 8 ? size / 8 : 1);
	long warm = iters / 10;
	double t0 = 0, t, tmax;
	for (long i = 0; i < warm + iters; i++) {
		if (i == warm) {
			MPI_Barrier(MPI_COMM_WORLD);
			t0 = MPI_Wtime();
		}
		MPI_Allreduce(in, out, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
	}
	t = (MPI_Wtime() - t0) / (double)iters * 1e6;
	MPI_Reduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
	return tmax;
}

int main(int argc, char **argv)
{
	long pp[MAX_SIZES], ar[MAX_SIZES], max = 8;
	int npp = 0, nar = 0, rank, nranks;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &nranks);
	if (argc > 1 && (npp = parse_sizes(argv[1], pp)) < 0)
		MPI_Abort(MPI_COMM_WORLD, 1);
	if (argc > 2 && (nar = parse_sizes(argv[2], ar)) < 0)
		MPI_Abort(MPI_COMM_WORLD, 1);
	if (argc > 3)
		maxit = atol(argv[3]);
	if (argc > 4)
		budget = atol(argv[4]);
	if (nranks < 2 || maxit < 1 || budget < 1) {
		if (rank == 0)
			fprintf(stderr, "mpi_net: needs 2 ranks or more and positive MAXIT, BYTES\n");
		MPI_Abort(MPI_COMM_WORLD, 1);
	}
	for (int i = 0; i < npp; i++)
		if (pp[i] > max)
			max = pp[i];
	for (int i = 0; i < nar; i++)
		if (ar[i] > max)
			max = ar[i];
	char *buf = malloc((size_t)max);
	double *in = malloc((size_t)max + 8), *out = malloc((size_t)max + 8);
	if (!buf || !in || !out)
		MPI_Abort(MPI_COMM_WORLD, 2);
	memset(buf, 0x5a, (size_t)max);
	for (long i = 0; i < max / 8 + 1; i++)
		in[i] = (double)(rank + i);

	for (int i = 0; i < npp; i++) {
		long it = iters_for(pp[i]);
		double us = pingpong(buf, pp[i], it, rank);
		if (rank == 0) {
			printf("pingpong %ld %ld %.3f\n", pp[i], it, us);
			fflush(stdout);
		}
	}
	for (int i = 0; i < nar; i++) {
		long it = iters_for(ar[i]);
		double us = allreduce(in, out, ar[i], it);
		if (rank == 0) {
			printf("allreduce %ld %ld %.3f\n", ar[i], it, us);
			fflush(stdout);
		}
	}
	free(buf);
	free(in);
	free(out);
	MPI_Finalize();
	return 0;
}
