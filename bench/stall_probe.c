/* Scheduling stalls of the machine: sleeps 1 ms at a time for SECONDS and
 * prints every wake-up that came more than 100 ms late, then the largest
 * gap. Run it beside a workload to see whether the workload keeps other
 * processes off the CPUs (docs/TESTING.md, rudp-ompi-2hosts).
 *
 *   cc -O2 -o stall_probe bench/stall_probe.c && ./stall_probe 120 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
	double secs = argc > 1 ? atof(argv[1]) : 60;
	double start = now(), last = start, max = 0;
	long sleeps = 0, late = 0;
	struct timespec ms = { 0, 1000000 };
	while (last < start + secs) {
		nanosleep(&ms, NULL);
		double t = now(), gap = t - last;
		if (gap > max)
			max = gap;
		if (gap > 0.1) {
			late++;
			printf("gap %.3f s at %.1f s\n", gap, t - start);
			fflush(stdout);
		}
		last = t;
		sleeps++;
	}
	printf("largest gap %.3f s over %ld sleeps, %ld over 100 ms\n", max, sleeps, late);
	return 0;
}
