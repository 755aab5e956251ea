/* Turnaround of a ping-pong: how long a process takes, in user space, from
 * a receive that returned data to its next send. Loaded with LD_PRELOAD
 * into both sides of a ping-pong, it wraps the socket calls a library makes
 * (through the C library's wrappers, or through syscall(2) as our tcp
 * provider does) and, at exit, prints to stderr the count, mean and median
 * of those intervals. In a ping-pong each message waits for one turnaround
 * of the side that answers it, so the difference between two libraries'
 * turnarounds adds to their one-way latencies one for one; what is left of
 * the difference is in how quickly each notices a message (its polling).
 *
 *   cc -O2 -shared -fPIC -o turnaround.so bench/turnaround.c -ldl
 *   LD_PRELOAD=$PWD/turnaround.so taskset -c 0 fi_pingpong -p tcp -e rdm -S 64 -I 100000 -B 23111 &
 *   LD_PRELOAD=$PWD/turnaround.so taskset -c 1 fi_pingpong -p tcp -e rdm -S 64 -I 100000 -P 23111 127.0.0.1
 *
 * With TURNAROUND_OUT set, the line is appended to that file instead
 * (`python3 bench/net.py turnaround` collects both sides' lines so).
 *
 * The clock is read twice per interval (about 20 ns each through the vDSO),
 * so a program with nothing between its receive and its send (the floor,
 * bench/tcp_floor.c) reads about 50 ns.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

/* Intervals in BIN_NS bins up to BINS * BIN_NS, the last one open. */
#define BIN_NS 10
#define BINS 2000

static long long last_rx_ns, sum_ns, count, bins[BINS];

static long long now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000000000LL + t.tv_nsec;
}

static void received(long r)
{
	if (r > 0)
		last_rx_ns = now_ns();
}

static void sending(void)
{
	if (!last_rx_ns)
		return;
	long long d = now_ns() - last_rx_ns;
	long long b = d / BIN_NS;
	sum_ns += d;
	count++;
	bins[b < BINS ? b : BINS - 1]++;
	last_rx_ns = 0;
}

__attribute__((destructor)) static void report(void)
{
	if (!count)
		return;
	long long seen = 0;
	int median = 0;
	for (int i = 0; i < BINS; i++) {
		seen += bins[i];
		if (2 * seen >= count) {
			median = i;
			break;
		}
	}
	const char *path = getenv("TURNAROUND_OUT");
	FILE *out = path ? fopen(path, "a") : NULL;
	fprintf(out ? out : stderr, "turnaround pid %d: %lld, mean %.0f ns, median %d ns\n", (int)getpid(), count,
		(double)sum_ns / count, median * BIN_NS);
	if (out)
		fclose(out);
}

long syscall(long nr, ...)
{
	static long (*real)(long, ...);
	if (!real)
		real = (long (*)(long, ...))dlsym(RTLD_NEXT, "syscall");
	va_list ap;
	va_start(ap, nr);
	long a[6];
	for (int i = 0; i < 6; i++)
		a[i] = va_arg(ap, long);
	va_end(ap);
	if (nr == SYS_sendto || nr == SYS_sendmsg || nr == SYS_writev || nr == SYS_write)
		sending();
	long r = real(nr, a[0], a[1], a[2], a[3], a[4], a[5]);
	if (nr == SYS_recvfrom || nr == SYS_recvmsg || nr == SYS_readv || nr == SYS_read)
		received(r);
	return r;
}

#define RECEIVE(name, params, args)                                  \
	ssize_t name params                                          \
	{                                                            \
		static ssize_t(*real) params;                        \
		if (!real)                                           \
			real = (ssize_t(*) params)dlsym(RTLD_NEXT, #name); \
		ssize_t r = real args;                               \
		received(r);                                         \
		return r;                                            \
	}
#define SEND(name, params, args)                                     \
	ssize_t name params                                          \
	{                                                            \
		static ssize_t(*real) params;                        \
		if (!real)                                           \
			real = (ssize_t(*) params)dlsym(RTLD_NEXT, #name); \
		sending();                                           \
		return real args;                                    \
	}

RECEIVE(recv, (int fd, void *b, size_t l, int f), (fd, b, l, f))
RECEIVE(recvfrom, (int fd, void *b, size_t l, int f, struct sockaddr *a, socklen_t *al), (fd, b, l, f, a, al))
RECEIVE(recvmsg, (int fd, struct msghdr *m, int f), (fd, m, f))
RECEIVE(readv, (int fd, const struct iovec *v, int c), (fd, v, c))
SEND(send, (int fd, const void *b, size_t l, int f), (fd, b, l, f))
SEND(sendto, (int fd, const void *b, size_t l, int f, const struct sockaddr *a, socklen_t al), (fd, b, l, f, a, al))
SEND(sendmsg, (int fd, const struct msghdr *m, int f), (fd, m, f))
SEND(writev, (int fd, const struct iovec *v, int c), (fd, v, c))
