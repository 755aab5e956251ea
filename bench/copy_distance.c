/*
 * How fast the C library's memcpy is by the distance between destination
 * and source, modulo 4 KiB: the measurement behind core/src/copy.rs.
 *
 * For each distance from -128 to 4223 bytes it times SIZE-byte copies
 * (hot in cache, one process) and prints the ranges of distances whose
 * copy took over THRESHOLD times the time at distance 0 (3 when not
 * given), then the times at distance 0 and 16, and the same copy made in
 * 2 KiB pieces at 16, as core::copy makes it.
 *
 * Usage: copy_distance [SIZE [THRESHOLD]]    (SIZE 8192 when not given)
 * Build: cc -O2 -o copy_distance bench/copy_distance.c
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#define REPS 400
#define PIECE 2048

static double now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e9 + t.tv_nsec;
}

/* The C library's memcpy, called: a compiler expands a copy of a known
 * size inline (GCC as rep movsq), which is what is not measured here. */
static void *(*volatile memcpy_fn)(void *, const void *, size_t) = memcpy;

static void copy_pieces(char *d, const char *s, size_t n)
{
	for (size_t at = 0; at < n; at += PIECE)
		memcpy_fn(d + at, s + at, n - at < PIECE ? n - at : PIECE);
}

/* ns per copy of n bytes from src to src + distance (mod 4 KiB, placed in
 * the second half of the mapping). */
static double time_copy(char *map, size_t n, long distance, int pieces)
{
	char *src = map + 4096;
	char *dst = map + (2u << 20) + 4096 + distance;
	double best = 1e30;
	for (int round = 0; round < 3; round++) {
		double t0 = now_ns();
		for (int i = 0; i < REPS; i++) {
			if (pieces)
				copy_pieces(dst, src, n);
			else
				memcpy_fn(dst, src, n);
			__asm__ volatile("" : : "r"(dst) : "memory");
		}
		double t = (now_ns() - t0) / REPS;
		if (t < best)
			best = t;
	}
	return best;
}

int main(int argc, char **argv)
{
	size_t n = argc > 1 ? strtoul(argv[1], NULL, 0) : 8192;
	double threshold = argc > 2 ? atof(argv[2]) : 3.0;
	if (n == 0 || n > (1u << 20)) {
		fprintf(stderr, "copy_distance: SIZE from 1 to 1 MiB\n");
		return 2;
	}
	char *map = mmap(NULL, 4u << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (map == MAP_FAILED) {
		perror("mmap");
		return 1;
	}
	memset(map, 1, 4u << 20);
	double base = time_copy(map, n, 0, 0);
	long first = 0;
	int in_slow = 0;
	printf("%zu-byte memcpy, distances over %.1fx the time at distance 0 (%.0f ns):\n", n, threshold, base);
	for (long d = -128; d < 4096 + 128; d++) {
		int slow = time_copy(map, n, d, 0) > threshold * base;
		if (slow && !in_slow)
			first = d;
		if (!slow && in_slow)
			printf("  %ld to %ld\n", first, d - 1);
		in_slow = slow;
	}
	if (in_slow)
		printf("  %ld to %d\n", first, 4096 + 127);
	printf("distance 0: %.0f ns; distance 16: %.0f ns; distance 16 in %d-byte pieces: %.0f ns\n",
	       base, time_copy(map, n, 16, 0), PIECE, time_copy(map, n, 16, 1));
	return 0;
}
