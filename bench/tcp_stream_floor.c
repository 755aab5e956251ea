/* The kernel's floor for a one-way TCP stream on loopback: a sender that
 * writes each message as one sendmsg of a HDR-byte header and SIZE bytes
 * of payload (blocking socket, TCP_NODELAY), and a receiver that reads the
 * header, then spins on non-blocking recv to read the payload straight into
 * its buffer, as our tcp reads a large packet in place. No flow control,
 * acknowledgement or completion of its own: what is left is the kernel's
 * copies and TCP. Prints payload GB/s (10^9 bytes/s) over TOTAL bytes.
 *
 *   cc -O2 -o tcp_stream_floor bench/tcp_stream_floor.c
 *   ./tcp_stream_floor [SIZE] [TOTAL] [HDR] [PORT]
 *
 * It forks: the receiver runs on core 0, the sender on core 1 (the
 * benchmark's placement), both on 127.0.0.1. Defaults: 1 MiB messages,
 * 256 MiB (the benchmark's STREAM_BYTES), a 69-byte header (our tcp's
 * frame length, kind byte and protocol header), port 23600.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void die(const char *what)
{
	perror(what);
	exit(1);
}

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec * 1e-9;
}

static void pin(int cpu)
{
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	if (sched_setaffinity(0, sizeof(set), &set))
		die("sched_setaffinity");
}

static void *buffer(size_t len, int fill)
{
	void *p = aligned_alloc(4096, (len + 4095) / 4096 * 4096);
	if (!p)
		die("aligned_alloc");
	memset(p, fill, len);
	return p;
}

static void receiver(int listener, size_t size, size_t hdr, long count)
{
	pin(0);
	int fd = accept(listener, NULL, NULL);
	if (fd < 0)
		die("accept");
	char *head = buffer(hdr ? hdr : 1, 0), *data = buffer(size, 0);
	for (long i = 0; i < count; i++) {
		for (size_t got = 0; got < hdr;) {
			ssize_t r = recv(fd, head + got, hdr - got, 0);
			if (r <= 0)
				die("recv header");
			got += r;
		}
		for (size_t got = 0; got < size;) {
			ssize_t r = recv(fd, data + got, size - got, MSG_DONTWAIT);
			if (r > 0)
				got += r;
			else if (r == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))
				die("recv payload");
		}
	}
	char done = 1;
	if (send(fd, &done, 1, 0) != 1)
		die("send done");
	close(fd);
}

static double sender(struct sockaddr_in *at, size_t size, size_t hdr, long count)
{
	pin(1);
	int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
	if (fd < 0)
		die("socket");
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (connect(fd, (struct sockaddr *)at, sizeof(*at)))
		die("connect");
	char *head = buffer(hdr ? hdr : 1, 3), *data = buffer(size, 2);
	double t0 = now();
	for (long i = 0; i < count; i++) {
		struct iovec iov[2] = { { head, hdr }, { data, size } };
		size_t left = hdr + size;
		struct msghdr m = { .msg_iov = hdr ? iov : iov + 1, .msg_iovlen = hdr ? 2 : 1 };
		while (left) {
			ssize_t r = sendmsg(fd, &m, MSG_NOSIGNAL);
			if (r < 0) {
				if (errno == EINTR)
					continue;
				die("sendmsg");
			}
			left -= r;
			/* What a short write left: skip the parts it took. */
			while (r > 0 && m.msg_iovlen) {
				if ((size_t)r >= m.msg_iov->iov_len) {
					r -= m.msg_iov->iov_len;
					m.msg_iov++;
					m.msg_iovlen--;
				} else {
					m.msg_iov->iov_base = (char *)m.msg_iov->iov_base + r;
					m.msg_iov->iov_len -= r;
					r = 0;
				}
			}
		}
	}
	char done;
	if (recv(fd, &done, 1, 0) != 1)
		die("recv done");
	double t = now() - t0;
	close(fd);
	return t;
}

int main(int argc, char **argv)
{
	size_t size = argc > 1 ? strtoul(argv[1], NULL, 0) : 1 << 20;
	long total = argc > 2 ? strtol(argv[2], NULL, 0) : 256L << 20;
	size_t hdr = argc > 3 ? strtoul(argv[3], NULL, 0) : 69;
	int port = argc > 4 ? atoi(argv[4]) : 23600;
	if (size == 0 || total < (long)size || hdr > 4096 || port <= 0 || port > 65535) {
		fprintf(stderr, "usage: %s [SIZE] [TOTAL] [HDR <= 4096] [PORT]\n", argv[0]);
		return 2;
	}
	long count = total / size;
	int listener = socket(AF_INET, SOCK_STREAM, 0), one = 1;
	if (listener < 0)
		die("socket");
	setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	struct sockaddr_in at = { .sin_family = AF_INET, .sin_port = htons(port) };
	at.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (bind(listener, (struct sockaddr *)&at, sizeof(at)) || listen(listener, 1))
		die("bind/listen");
	pid_t pid = fork();
	if (pid < 0)
		die("fork");
	if (pid == 0) {
		receiver(listener, size, hdr, count);
		_exit(0);
	}
	close(listener);
	double t = sender(&at, size, hdr, count);
	int status;
	if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status))
		return 1;
	printf("%zu %ld %.6f %.3f\n", size, count, t, (double)count * size / t / 1e9);
	return 0;
}
