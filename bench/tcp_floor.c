/* The kernel's floor for a TCP ping-pong on this machine: two processes,
 * 8-byte messages, each side spinning on epoll_wait(timeout 0) then one
 * recv and one send per message, as a polling library does at best.
 * Prints the one-way time (half the mean round trip).
 * With "two", each side sends on one connection and receives on another
 * (one connection per direction, as the tcp provider's device has it), so
 * no reply carries the TCP acknowledgement of the message before it.
 *
 *   cc -O2 -o tcp_floor bench/tcp_floor.c
 *   taskset -c 0 ./tcp_floor server [PORT] [ITERS] [one|two] &
 *   taskset -c 1 ./tcp_floor client [PORT] [ITERS] [one|two]
 */
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static void die(const char *what)
{
	perror(what);
	exit(1);
}

int main(int argc, char **argv)
{
	if (argc < 2 || (strcmp(argv[1], "server") && strcmp(argv[1], "client"))) {
		fprintf(stderr, "usage: %s server|client [PORT] [ITERS] [one|two]\n", argv[0]);
		return 2;
	}
	int server = !strcmp(argv[1], "server");
	int port = argc > 2 ? atoi(argv[2]) : 29111;
	long iters = argc > 3 ? atol(argv[3]) : 100000;
	int two = argc > 4 && !strcmp(argv[4], "two");
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port) };
	inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
	int fds[2] = { -1, -1 }, one = 1;
	int nconn = two ? 2 : 1;
	if (server) {
		int l = socket(AF_INET, SOCK_STREAM, 0);
		setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
		if (bind(l, (struct sockaddr *)&a, sizeof a) || listen(l, 2))
			die("bind/listen");
		for (int c = 0; c < nconn; c++)
			fds[c] = accept(l, NULL, NULL);
		close(l);
	} else {
		for (int c = 0; c < nconn; c++) {
			fds[c] = socket(AF_INET, SOCK_STREAM, 0);
			for (int tries = 0; connect(fds[c], (struct sockaddr *)&a, sizeof a); tries++) {
				if (tries == 50)
					die("connect");
				usleep(20000);
			}
		}
	}
	for (int c = 0; c < nconn; c++) {
		if (fds[c] < 0)
			die("socket");
		setsockopt(fds[c], IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
		fcntl(fds[c], F_SETFL, O_NONBLOCK);
	}
	/* The client sends on the first and the server on the last. */
	int tx = server ? fds[nconn - 1] : fds[0];
	int fd = server ? fds[0] : fds[nconn - 1];
	int ep = epoll_create1(0);
	struct epoll_event ev = { .events = EPOLLIN, .data.fd = fd };
	epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
	char buf[64] = { 0 };
	long n = server ? -1 : iters; /* the server answers until the client leaves */
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (long i = 0; n < 0 || i < n; i++) {
		if (!server && send(tx, buf, 8, 0) != 8)
			die("send");
		for (size_t got = 0; got < 8;) {
			struct epoll_event e[4];
			if (epoll_wait(ep, e, 4, 0) <= 0)
				continue;
			ssize_t r = recv(fd, buf + got, 8 - got, 0);
			if (r == 0)
				return 0;
			if (r > 0)
				got += r;
		}
		if (server && send(tx, buf, 8, 0) != 8)
			die("send");
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	double ns = (t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec);
	printf("tcp floor (%s): 8 B, %ld round trips, %.2f us one-way\n", two ? "a connection per direction" : "one connection", iters, ns / iters / 2 / 1e3);
	return 0;
}
