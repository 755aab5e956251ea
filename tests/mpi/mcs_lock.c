/* An MCS queue lock built on MPI one-sided atomics, used the way
 * applications use it: every rank enqueues itself with MPI_Fetch_and_op on
 * rank 0's tail word, links itself behind its predecessor with an
 * accumulate, and spins on its own window memory (atomic reads of its own
 * words, MPI_Win_flush, MPI_Win_sync) until the predecessor hands the lock
 * over. Inside the lock each rank increments a counter on rank 0 with a
 * plain MPI_Get / MPI_Put pair: the final value is exact only if the lock
 * excluded every other rank.
 *
 * Usage: mcs_lock [iterations]   (default 300)
 * Prints "mcs_lock: N passed, N failed" on rank 0. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

enum { NEXT = 0, BLOCKED = 1, TAIL = 2, COUNTER = 3, NWORDS = 4 };

static MPI_Win win;
static int rank;

static int read_own(int word)
{
	int v, dummy = 0;
	MPI_Fetch_and_op(&dummy, &v, MPI_INT, rank, word, MPI_NO_OP, win);
	MPI_Win_flush(rank, win);
	return v;
}

static void write_at(int target, int word, int value)
{
	MPI_Accumulate(&value, 1, MPI_INT, target, word, 1, MPI_INT, MPI_REPLACE, win);
	MPI_Win_flush(target, win);
}

static void acquire(void)
{
	int prev;

	write_at(rank, BLOCKED, 1);
	write_at(rank, NEXT, -1);
	MPI_Fetch_and_op(&rank, &prev, MPI_INT, 0, TAIL, MPI_REPLACE, win);
	MPI_Win_flush(0, win);
	if (prev == -1)
		return;
	write_at(prev, NEXT, rank);
	while (read_own(BLOCKED) == 1)
		MPI_Win_sync(win);
}

static void release(void)
{
	int next = read_own(NEXT), none = -1, tail;

	if (next == -1) {
		MPI_Compare_and_swap(&none, &rank, &tail, MPI_INT, 0, TAIL, win);
		MPI_Win_flush(0, win);
		if (tail == rank)
			return;
		/* a successor is linking itself in */
		while ((next = read_own(NEXT)) == -1)
			MPI_Win_sync(win);
	}
	write_at(next, BLOCKED, 0);
}

int main(int argc, char **argv)
{
	int size, iters = argc > 1 ? atoi(argv[1]) : 300, *mem, i, failed = 0, passed = 0;
	int counter;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	MPI_Win_allocate(NWORDS * sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &mem, &win);
	mem[NEXT] = -1;
	mem[BLOCKED] = 0;
	mem[TAIL] = -1;
	mem[COUNTER] = 0;
	MPI_Barrier(MPI_COMM_WORLD);
	MPI_Win_lock_all(0, win);

	for (i = 0; i < iters; i++) {
		acquire();
		MPI_Get(&counter, 1, MPI_INT, 0, COUNTER, 1, MPI_INT, win);
		MPI_Win_flush(0, win);
		counter++;
		MPI_Put(&counter, 1, MPI_INT, 0, COUNTER, 1, MPI_INT, win);
		MPI_Win_flush(0, win);
		release();
	}

	MPI_Win_unlock_all(win);
	MPI_Barrier(MPI_COMM_WORLD);
	if (rank == 0) {
		MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win);
		counter = mem[COUNTER];
		MPI_Win_unlock(0, win);
		if (counter == size * iters) {
			passed++;
		} else {
			failed++;
			printf("FAIL counter %d, expected %d\n", counter, size * iters);
		}
		printf("mcs_lock: %d ranks x %d acquisitions, counter %d\n", size, iters, counter);
		printf("mcs_lock: %d passed, %d failed\n", passed, failed);
	}
	MPI_Win_free(&win);
	MPI_Finalize();
	return failed ? 1 : 0;
}
