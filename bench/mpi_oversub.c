/*
 * MPI workloads for more ranks than cores (bench/bench.py --mpi).
 *
 * Each phase runs a fixed amount of work and rank 0 prints one line,
 *   phase NAME SECONDS
 * with the time from a barrier before the phase to a barrier after it. The
 * runner starts the program under the MPICH wheel with more ranks than the
 * CPUs it may use, on our library and on the wheel's own libfabric, and
 * compares the phases' times and the processes' CPU time.
 *
 * Every phase checks its data: a wrong answer exits non-zero, so a fast
 * wrong run cannot pass for a fast right one.
 *
 * Usage: mpi_oversub [SCALE]   (SCALE multiplies every phase's iterations)
 * MPI_OVERSUB_ONLY=PREFIX runs only the phases whose names start with it.
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank, nranks;

static void die(const char *what)
{
	fprintf(stderr, "rank %d: %s\n", rank, what);
	MPI_Abort(MPI_COMM_WORLD, 2);
}

static double t0;
static const char *only; /* MPI_OVERSUB_ONLY: run just the phases whose names start so */
static int wanted(const char *name)
{
	return !only || !strncmp(name, only, strlen(only));
}
static void start(void)
{
	MPI_Barrier(MPI_COMM_WORLD);
	t0 = MPI_Wtime();
}
static void stop(const char *name)
{
	MPI_Barrier(MPI_COMM_WORLD);
	double t = MPI_Wtime() - t0;
	if (rank == 0)
		printf("phase %s %.6f\n", name, t);
	fflush(stdout);
}

/* 0 and 1 bounce a message while the other ranks wait in a barrier. */
static void pingpong(const char *name, size_t size, int iters)
{
	char *buf = malloc(size ? size : 1);
	if (!buf)
		die("malloc");
	memset(buf, 0, size ? size : 1);
	start();
	if (rank < 2) {
		int peer = 1 - rank;
		for (int i = 0; i < iters; i++) {
			if (rank == 0) {
				if (size)
					buf[0] = (char)i;
				MPI_Send(buf, (int)size, MPI_CHAR, peer, 1, MPI_COMM_WORLD);
				MPI_Recv(buf, (int)size, MPI_CHAR, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
				if (size && buf[0] != (char)(i + 1))
					die("pingpong data");
			} else {
				MPI_Recv(buf, (int)size, MPI_CHAR, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
				if (size)
					buf[0]++;
				MPI_Send(buf, (int)size, MPI_CHAR, peer, 1, MPI_COMM_WORLD);
			}
		}
	}
	stop(name);
	free(buf);
}

/* Every rank passes a token around the ring. */
static void ring(int iters)
{
	int next = (rank + 1) % nranks, prev = (rank + nranks - 1) % nranks;
	long token = 0;
	start();
	for (int i = 0; i < iters; i++) {
		if (rank == 0) {
			token = i;
			MPI_Send(&token, 1, MPI_LONG, next, 2, MPI_COMM_WORLD);
			MPI_Recv(&token, 1, MPI_LONG, prev, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
			if (token != i + nranks - 1)
				die("ring token");
		} else {
			MPI_Recv(&token, 1, MPI_LONG, prev, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
			token++;
			MPI_Send(&token, 1, MPI_LONG, next, 2, MPI_COMM_WORLD);
		}
	}
	stop("ring_8B");
}

static void allreduce(int iters)
{
	start();
	for (int i = 0; i < iters; i++) {
		long in = rank + i, out = 0;
		MPI_Allreduce(&in, &out, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
		if (out != (long)nranks * i + (long)nranks * (nranks - 1) / 2)
			die("allreduce sum");
	}
	stop("allreduce_8B");
}

static void alltoall(size_t size, int iters)
{
	char *s = malloc(size * nranks), *r = malloc(size * nranks);
	if (!s || !r)
		die("malloc");
	start();
	for (int i = 0; i < iters; i++) {
		for (int p = 0; p < nranks; p++)
			memset(s + p * size, (rank * 31 + p + i) & 0xff, size);
		MPI_Alltoall(s, (int)size, MPI_CHAR, r, (int)size, MPI_CHAR, MPI_COMM_WORLD);
		for (int p = 0; p < nranks; p++)
			if (r[p * size] != (char)((p * 31 + rank + i) & 0xff) ||
			    r[p * size + size - 1] != (char)((p * 31 + rank + i) & 0xff))
				die("alltoall data");
	}
	stop("alltoall_4KiB");
	free(s);
	free(r);
}

static void bcast(size_t size, int iters)
{
	char *b = malloc(size);
	if (!b)
		die("malloc");
	start();
	for (int i = 0; i < iters; i++) {
		if (rank == i % nranks)
			memset(b, i & 0xff, size);
		MPI_Bcast(b, (int)size, MPI_CHAR, i % nranks, MPI_COMM_WORLD);
		if (b[0] != (char)(i & 0xff) || b[size - 1] != (char)(i & 0xff))
			die("bcast data");
	}
	stop("bcast_1MiB");
	free(b);
}

/* Every rank adds to one word at rank 0; then every rank puts blocks to its
 * neighbour and gets them back. */
static void rma(int iters)
{
	long *base;
	MPI_Win win;
	size_t block = 64 * 1024;
	MPI_Win_allocate((MPI_Aint)(sizeof(long) + block), 1, MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win);
	*base = 0;
	char *src = malloc(block), *back = malloc(block);
	if (!src || !back)
		die("malloc");
	memset(src, rank + 1, block);
	MPI_Barrier(MPI_COMM_WORLD);
	MPI_Win_lock_all(0, win);
	start();
	for (int i = 0; i < iters; i++) {
		long one = 1, old;
		MPI_Fetch_and_op(&one, &old, MPI_LONG, 0, 0, MPI_SUM, win);
		MPI_Win_flush(0, win);
	}
	stop("rma_fetch_add_8B");
	int next = (rank + 1) % nranks;
	start();
	for (int i = 0; i < iters / 8; i++) {
		MPI_Put(src, (int)block, MPI_CHAR, next, sizeof(long), (int)block, MPI_CHAR, win);
		MPI_Win_flush(next, win);
		MPI_Get(back, (int)block, MPI_CHAR, next, sizeof(long), (int)block, MPI_CHAR, win);
		MPI_Win_flush(next, win);
		if (back[0] != (char)(rank + 1) || back[block - 1] != (char)(rank + 1))
			die("get after put");
	}
	stop("rma_put_get_64KiB");
	MPI_Win_unlock_all(win);
	MPI_Barrier(MPI_COMM_WORLD);
	if (rank == 0 && *base != (long)iters * nranks)
		die("fetch-and-add total");
	MPI_Win_free(&win);
	free(src);
	free(back);
}

int main(int argc, char **argv)
{
	int scale = argc > 1 ? atoi(argv[1]) : 1;
	if (scale < 1)
		scale = 1;
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &nranks);
	if (nranks < 2)
		die("needs 2 ranks or more");
	only = getenv("MPI_OVERSUB_ONLY");
	double all = MPI_Wtime();
	if (wanted("pingpong_8B"))
		pingpong("pingpong_8B", 8, 20000 * scale);
	if (wanted("pingpong_64KiB"))
		pingpong("pingpong_64KiB", 64 * 1024, 5000 * scale);
	if (wanted("ring"))
		ring(10000 * scale);
	if (wanted("allreduce"))
		allreduce(10000 * scale);
	if (wanted("alltoall"))
		alltoall(4096, 2000 * scale);
	if (wanted("bcast"))
		bcast(1 << 20, 500 * scale);
	if (wanted("rma"))
		rma(2000 * scale);
	MPI_Barrier(MPI_COMM_WORLD);
	if (rank == 0)
		printf("phase total %.6f\n", MPI_Wtime() - all);
	MPI_Finalize();
	return 0;
}
