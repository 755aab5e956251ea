/* What one cache line costs between core 0 and core 1: two processes pass
 * a counter back and forth through two lines of a shared page, each
 * spinning on the line the other writes. Prints nanoseconds per round
 * trip (two line transfers). No library is involved, so it reads the
 * machine: on a KVM guest the two virtual CPUs may sit on host cores that
 * share a cache or not, and the reading tells which (on the AMD EPYC guest
 * of docs/PERFORMANCE.md: 110-170 ns against 430-600, changing every few
 * seconds).
 *
 *   cc -O2 -o line_pingpong bench/line_pingpong.c
 *   ./line_pingpong [ROUND_TRIPS] [RUNS]
 */
#define _GNU_SOURCE
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void pin(int cpu)
{
	cpu_set_t s;
	CPU_ZERO(&s);
	CPU_SET(cpu, &s);
	if (sched_setaffinity(0, sizeof s, &s) != 0) {
		perror("sched_setaffinity");
		exit(1);
	}
}

static double now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e9 + t.tv_nsec;
}

int main(int argc, char **argv)
{
	long iters = argc > 1 ? atol(argv[1]) : 200000;
	int runs = argc > 2 ? atoi(argv[2]) : 1;
	if (iters <= 0 || runs <= 0) {
		fprintf(stderr, "usage: %s [ROUND_TRIPS] [RUNS]\n", argv[0]);
		return 2;
	}
	for (int r = 0; r < runs; r++) {
		char *page = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
		if (page == MAP_FAILED) {
			perror("mmap");
			return 1;
		}
		/* Two lines, 128 bytes apart (no adjacent-line prefetch pairs them). */
		volatile uint64_t *ping = (volatile uint64_t *)page;
		volatile uint64_t *pong = (volatile uint64_t *)(page + 128);
		*ping = 0;
		*pong = 0;
		pid_t child = fork();
		if (child < 0) {
			perror("fork");
			return 1;
		}
		if (child == 0) {
			pin(1);
			for (uint64_t i = 1; i <= (uint64_t)iters; i++) {
				while (*ping != i)
					;
				*pong = i;
			}
			_exit(0);
		}
		pin(0);
		usleep(1000);
		double t0 = now_ns();
		for (uint64_t i = 1; i <= (uint64_t)iters; i++) {
			*ping = i;
			while (*pong != i)
				;
		}
		double t = now_ns() - t0;
		waitpid(child, NULL, 0);
		munmap(page, 4096);
		printf("%.1f\n", t / iters);
		fflush(stdout);
	}
	return 0;
}
