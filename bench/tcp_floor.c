/* The kernel's floor for a TCP ping-pong on this machine: two processes,
 * 8-byte messages (or SIZE bytes), each side spinning on epoll_wait
 * (timeout 0) then one recv and one send per message, as a polling library
 * does at best. Prints the one-way time (half the mean round trip).
 * With "two", each side sends on one connection and receives on another
 * (one connection per direction, as the tcp provider's device had it), so
 * no reply carries the TCP acknowledgement of the message before it.
 * With "bare", one connection, in no epoll set, and each side spins on
 * recv itself (as our tcp reads a lone connection). With "poll", as "bare"
 * but each recv waits for poll (timeout 0) to say readable: poll takes no
 * socket lock, a failed recv does.
 * With TURN (nanoseconds), each side spins that long on the clock between
 * a message received whole and its next send: a library's user-space work
 * per message (its turnaround) added to the floor, so that
 * `bench/net.py calibrate` can tell what a library's latency is worth in
 * turnaround.
 *
 *   cc -O2 -o tcp_floor bench/tcp_floor.c
 *   taskset -c 0 ./tcp_floor server [PORT] [ITERS] [one|two|bare|poll] [SIZE] [TURN] &
 *   taskset -c 1 ./tcp_floor client [PORT] [ITERS] [one|two|bare|poll] [SIZE] [TURN]
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static long elapsed_ns(const struct timespec *a, const struct timespec *b)
{
	return (b->tv_sec - a->tv_sec) * 1000000000L + (b->tv_nsec - a->tv_nsec);
}

/* The stand-in for a library's work between a receive and the answer. */
static void spin_ns(long ns)
{
	struct timespec a, b;
	clock_gettime(CLOCK_MONOTONIC, &a);
	do
		clock_gettime(CLOCK_MONOTONIC, &b);
	while (elapsed_ns(&a, &b) < ns);
}

static void die(const char *what)
{
	perror(what);
	exit(1);
}

/* A non-blocking socket takes a large message in parts. */
static void send_all(int fd, const char *buf, size_t len)
{
	for (size_t done = 0; done < len;) {
		ssize_t r = send(fd, buf + done, len - done, 0);
		if (r > 0)
			done += r;
		else if (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
			die("send");
	}
}

int main(int argc, char **argv)
{
	if (argc < 2 || (strcmp(argv[1], "server") && strcmp(argv[1], "client"))) {
		fprintf(stderr, "usage: %s server|client [PORT] [ITERS] [one|two|bare|poll] [SIZE] [TURN]\n", argv[0]);
		return 2;
	}
	int server = !strcmp(argv[1], "server");
	int port = argc > 2 ? atoi(argv[2]) : 29111;
	long iters = argc > 3 ? atol(argv[3]) : 100000;
	int two = argc > 4 && !strcmp(argv[4], "two");
	int polled = argc > 4 && !strcmp(argv[4], "poll");
	int bare = polled || (argc > 4 && !strcmp(argv[4], "bare"));
	size_t size = argc > 5 ? strtoul(argv[5], NULL, 0) : 8;
	long turn = argc > 6 ? atol(argv[6]) : 0;
	if (size == 0)
		size = 8;
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
	if (!bare)
		epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
	char *buf = calloc(1, size);
	if (!buf)
		die("calloc");
	long n = server ? -1 : iters; /* the server answers until the client leaves */
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (long i = 0; n < 0 || i < n; i++) {
		if (!server)
			send_all(tx, buf, size);
		for (size_t got = 0; got < size;) {
			struct epoll_event e[4];
			if (!bare && epoll_wait(ep, e, 4, 0) <= 0)
				continue;
			struct pollfd pf = { .fd = fd, .events = POLLIN };
			if (polled && poll(&pf, 1, 0) <= 0)
				continue;
			ssize_t r = recv(fd, buf + got, size - got, 0);
			if (r == 0)
				return 0;
			if (r > 0)
				got += r;
		}
		if (turn > 0)
			spin_ns(turn);
		if (server)
			send_all(tx, buf, size);
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	double ns = (double)elapsed_ns(&t0, &t1);
	printf("tcp floor (%s%s): %zu B, %ld round trips, %.2f us one-way\n", two ? "a connection per direction" : polled ? "one connection, poll then recv" : bare ? "one connection, recv polled" : "one connection", turn > 0 ? ", turnaround added" : "", size, iters, ns / iters / 2 / 1e3);
	return 0;
}
