/*
 * fi_stream: streaming bandwidth and message rate over an RDM endpoint.
 *
 * Two processes: the receiver (no address argument) listens on a TCP port
 * on loopback, or on the address -s names; the sender connects to it. The
 * TCP socket carries only the two endpoint names; everything else goes
 * through libfabric. The provider (-p) is any RDM provider, e.g. shm,
 * rudp, "tcp;ofi_rxm" or "udp;ofi_rxd"; which interface a network
 * provider uses is its own setting (FI_RUDP_IFACE, FI_TCP_IFACE, ...), and
 * each side sends the other the name fi_getname gives it.
 *
 * For each message size, one round is:
 *   receiver: posts WINDOW receives, then sends a small "go" message;
 *   sender:   on "go", starts the clock and keeps up to WINDOW sends in
 *             flight until COUNT messages have been sent;
 *   receiver: reposts a receive for each completion until COUNT messages
 *             have arrived (each must carry SIZE bytes), then sends "done";
 *   sender:   stops the clock on "done".
 * One untimed warm-up round precedes each timed round. The sender prints
 * one line per size: bytes, messages, seconds, GB/s (10^9), Mmsg/s.
 *
 * With -l it measures latency instead: per size, a ping-pong of
 * ITERS = bytes_per_round / size messages (at least 50, at most max_msgs)
 * after ITERS/10 untimed ones; the side with the address sends and waits
 * for the echo. It prints one line per size: bytes, iterations, one-way
 * microseconds (half the mean round trip), as fi_pingpong's usec/xfer.
 *
 * Built against the upstream headers only, so the same binary runs on any
 * libfabric.so.1 chosen with LD_LIBRARY_PATH.
 *
 * With -o OFFSET the data buffer starts OFFSET bytes (mod 4096) past a
 * page boundary instead of on one.
 *
 * Usage: fi_stream [-l] [-p prov] [-w window] [-n max_msgs] [-b bytes_per_round]
 *                  [-S size[,size...]] [-P port] [-s listen_ip] [-o offset]
 *                  [receiver_ip]
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>

#define MAX_WINDOW 1024
#define MAX_SIZES 64
#define CTRL_LEN 8

static struct fi_info *info;
static struct fid_fabric *fabric;
static struct fid_domain *domain;
static struct fid_ep *ep;
static struct fid_cq *cq;
static struct fid_av *av;
static struct fid_mr *data_mr, *ctrl_mr;
static void *data_desc, *ctrl_desc;
static fi_addr_t peer;

static char *data_buf, *data_mem;
/* -o: where the data buffer starts past a page boundary (where a payload
 * lies against the provider's buffers changes how fast it is copied). */
static size_t data_offset;
static char ctrl_rx[CTRL_LEN], ctrl_tx[CTRL_LEN];
static struct fi_context data_ctx[MAX_WINDOW];
static struct fi_context ctrl_rx_ctx, ctrl_tx_ctx;

static int window = 64;
static long max_msgs = 20000;
static long round_bytes = 256L << 20;

#define CHECK(call)                                                          \
	do {                                                                 \
		int rc_ = (int)(call);                                       \
		if (rc_) {                                                   \
			fprintf(stderr, "%s:%d %s: %d (%s)\n", __FILE__,     \
				__LINE__, #call, rc_, fi_strerror(-rc_));    \
			exit(2);                                             \
		}                                                            \
	} while (0)

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void die(const char *what)
{
	perror(what);
	exit(2);
}

static void write_all(int fd, const void *p, size_t n)
{
	const char *c = p;
	while (n) {
		ssize_t w = write(fd, c, n);
		if (w <= 0) {
			if (w < 0 && errno == EINTR)
				continue;
			die("write");
		}
		c += w;
		n -= (size_t)w;
	}
}

static void read_all(int fd, void *p, size_t n)
{
	char *c = p;
	while (n) {
		ssize_t r = read(fd, c, n);
		if (r <= 0) {
			if (r < 0 && errno == EINTR)
				continue;
			fprintf(stderr, "control socket closed\n");
			exit(2);
		}
		c += r;
		n -= (size_t)r;
	}
}

/* TCP rendezvous: the sender connects to dst, the receiver listens on src
 * (default loopback). Returns a connected socket. */
static int oob_connect(const char *dst, const char *src, int port)
{
	struct sockaddr_in sa;
	int one = 1, fd;

	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_port = htons((uint16_t)port);
	if (dst) {
		if (inet_pton(AF_INET, dst, &sa.sin_addr) != 1) {
			fprintf(stderr, "bad address %s\n", dst);
			exit(2);
		}
		for (int tries = 0;; tries++) {
			fd = socket(AF_INET, SOCK_STREAM, 0);
			if (fd < 0)
				die("socket");
			if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0)
				break;
			close(fd);
			if (tries > 200)
				die("connect");
			usleep(20000);
		}
	} else {
		int lfd = socket(AF_INET, SOCK_STREAM, 0);
		if (lfd < 0)
			die("socket");
		setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		if (src && inet_pton(AF_INET, src, &sa.sin_addr) != 1) {
			fprintf(stderr, "bad address %s\n", src);
			exit(2);
		}
		if (bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) || listen(lfd, 1))
			die("bind/listen");
		fd = accept(lfd, NULL, NULL);
		if (fd < 0)
			die("accept");
		close(lfd);
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return fd;
}

static void exchange_names(int fd)
{
	char name[512];
	size_t len = sizeof(name);
	uint32_t n, peer_len;

	CHECK(fi_getname(&ep->fid, name, &len));
	n = (uint32_t)len;
	write_all(fd, &n, sizeof(n));
	write_all(fd, name, len);
	read_all(fd, &peer_len, sizeof(peer_len));
	if (peer_len == 0 || peer_len > sizeof(name)) {
		fprintf(stderr, "bad peer name length %u\n", peer_len);
		exit(2);
	}
	read_all(fd, name, peer_len);
	if (fi_av_insert(av, name, 1, &peer, 0, NULL) != 1) {
		fprintf(stderr, "fi_av_insert failed\n");
		exit(2);
	}
}

static void setup(const char *prov, size_t max_size)
{
	struct fi_info *hints = fi_allocinfo();
	struct fi_cq_attr cq_attr = { 0 };
	struct fi_av_attr av_attr = { 0 };

	if (!hints)
		exit(2);
	hints->ep_attr->type = FI_EP_RDM;
	hints->caps = FI_MSG;
	hints->mode = FI_CONTEXT;
	hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR |
				      FI_MR_ALLOCATED | FI_MR_PROV_KEY;
	hints->domain_attr->threading = FI_THREAD_DOMAIN;
	hints->fabric_attr->prov_name = strdup(prov);
	CHECK(fi_getinfo(FI_VERSION(1, 9), NULL, NULL, 0, hints, &info));
	fi_freeinfo(hints);

	CHECK(fi_fabric(info->fabric_attr, &fabric, NULL));
	CHECK(fi_domain(fabric, info, &domain, NULL));
	cq_attr.format = FI_CQ_FORMAT_MSG;
	cq_attr.size = 4 * MAX_WINDOW;
	cq_attr.wait_obj = FI_WAIT_NONE;
	CHECK(fi_cq_open(domain, &cq_attr, &cq, NULL));
	av_attr.type = FI_AV_MAP;
	av_attr.count = 4;
	CHECK(fi_av_open(domain, &av_attr, &av, NULL));
	CHECK(fi_endpoint(domain, info, &ep, NULL));
	CHECK(fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV));
	CHECK(fi_ep_bind(ep, &av->fid, 0));
	CHECK(fi_enable(ep));

	if (posix_memalign((void **)&data_mem, 4096, data_offset + (max_size ? max_size : 1)))
		exit(2);
	data_buf = data_mem + data_offset;
	memset(data_buf, 0xa5, max_size ? max_size : 1);
	if (info->domain_attr->mr_mode & FI_MR_LOCAL) {
		CHECK(fi_mr_reg(domain, data_buf, max_size ? max_size : 1,
				FI_SEND | FI_RECV, 0, 1, 0, &data_mr, NULL));
		CHECK(fi_mr_reg(domain, ctrl_rx, sizeof(ctrl_rx) + sizeof(ctrl_tx),
				FI_SEND | FI_RECV, 0, 2, 0, &ctrl_mr, NULL));
		data_desc = fi_mr_desc(data_mr);
		ctrl_desc = fi_mr_desc(ctrl_mr);
	}
}

static void teardown(void)
{
	if (data_mr)
		fi_close(&data_mr->fid);
	if (ctrl_mr)
		fi_close(&ctrl_mr->fid);
	fi_close(&ep->fid);
	fi_close(&av->fid);
	fi_close(&cq->fid);
	fi_close(&domain->fid);
	fi_close(&fabric->fid);
	fi_freeinfo(info);
	free(data_mem);
}

/*
 * Read completions; counts data completions into *data and returns 1 for each
 * control message received (0 if none in this batch). Exits on errors and on
 * a data receive of the wrong length.
 */
static int poll_cq(long *data, size_t want_len)
{
	struct fi_cq_msg_entry e[64];
	int ctrl = 0;
	ssize_t n = fi_cq_read(cq, e, 64);

	if (n == -FI_EAGAIN)
		return 0;
	if (n < 0) {
		struct fi_cq_err_entry err = { 0 };
		if (n == -FI_EAVAIL && fi_cq_readerr(cq, &err, 0) > 0)
			fprintf(stderr, "completion error %d (%s)\n", err.err,
				fi_strerror(err.err));
		else
			fprintf(stderr, "fi_cq_read: %zd\n", n);
		exit(2);
	}
	for (ssize_t i = 0; i < n; i++) {
		if (e[i].op_context == &ctrl_rx_ctx) {
			ctrl++;
		} else if (e[i].op_context == &ctrl_tx_ctx) {
			/* control send done */
		} else {
			if ((e[i].flags & FI_RECV) && e[i].len != want_len) {
				fprintf(stderr, "received %zu bytes, expected %zu\n",
					e[i].len, want_len);
				exit(2);
			}
			(*data)++;
		}
	}
	return ctrl;
}

static void post_ctrl_recv(void)
{
	ssize_t r;
	while ((r = fi_recv(ep, ctrl_rx, CTRL_LEN, ctrl_desc, peer,
			    &ctrl_rx_ctx)) == -FI_EAGAIN) {
		long d = 0;
		poll_cq(&d, 0);
	}
	CHECK(r);
}

static void send_ctrl(char what)
{
	ssize_t r;
	long dummy = 0;
	memset(ctrl_tx, what, CTRL_LEN);
	while ((r = fi_send(ep, ctrl_tx, CTRL_LEN, ctrl_desc, peer,
			    &ctrl_tx_ctx)) == -FI_EAGAIN)
		poll_cq(&dummy, 0);
	CHECK(r);
}

static long count_for(size_t size)
{
	long n = size ? (long)(round_bytes / (long)size) : max_msgs;
	if (n > max_msgs)
		n = max_msgs;
	if (n < 2L * window)
		n = 2L * window;
	return n;
}

/* Sender side of one round; returns elapsed seconds. */
static double send_round(size_t size, long count)
{
	long posted = 0, done = 0;
	int got = 0;
	double t0;

	while (!got)
		got = poll_cq(&done, size);
	if (ctrl_rx[0] != 'G') {
		fprintf(stderr, "expected go, got %c\n", ctrl_rx[0]);
		exit(2);
	}
	post_ctrl_recv(); /* for "done" */
	t0 = now();
	got = 0;
	while (posted < count) {
		while (posted < count && posted - done < window) {
			ssize_t r = fi_send(ep, data_buf, size, data_desc, peer,
					    &data_ctx[posted % window]);
			if (r == -FI_EAGAIN)
				break;
			CHECK(r);
			posted++;
		}
		got += poll_cq(&done, size);
	}
	while (done < count || !got)
		got += poll_cq(&done, size);
	double t = now() - t0;
	if (ctrl_rx[0] != 'D') {
		fprintf(stderr, "expected done, got %c\n", ctrl_rx[0]);
		exit(2);
	}
	post_ctrl_recv(); /* for the next "go" */
	return t;
}

static void recv_round(size_t size, long count)
{
	long posted = 0, done = 0;

	while (posted < count && posted < window) {
		CHECK(fi_recv(ep, data_buf, size, data_desc, peer,
			      &data_ctx[posted % window]));
		posted++;
	}
	send_ctrl('G');
	while (done < count) {
		long before = done;
		poll_cq(&done, size);
		for (long k = before; k < done && posted < count; k++) {
			ssize_t r;
			while ((r = fi_recv(ep, data_buf, size, data_desc, peer,
					    &data_ctx[posted % window])) == -FI_EAGAIN) {
				long extra = 0;
				poll_cq(&extra, size);
				done += extra;
			}
			CHECK(r);
			posted++;
		}
	}
	send_ctrl('D');
}

static long lat_iters(size_t size)
{
	long n = size ? (long)(round_bytes / (long)size) : max_msgs;
	if (n > max_msgs)
		n = max_msgs;
	if (n < 50)
		n = 50;
	return n;
}

static void wait_data(long *done, long target, size_t size)
{
	while (*done < target)
		poll_cq(done, size);
}

/* One ping-pong round trip: the initiator posts the receive of the echo,
 * sends and waits for both; the other side receives and echoes. */
static void bounce(size_t size, int initiator, long *done)
{
	ssize_t r;

	CHECK(fi_recv(ep, data_buf, size, data_desc, peer, &data_ctx[0]));
	if (!initiator)
		wait_data(done, *done + 1, size);
	while ((r = fi_send(ep, data_buf, size, data_desc, peer,
			    &data_ctx[1])) == -FI_EAGAIN)
		poll_cq(done, size);
	CHECK(r);
	wait_data(done, *done + (initiator ? 2 : 1), size);
}

/* Latency of one size; returns one-way microseconds (initiator only). */
static double latency_round(size_t size, int initiator)
{
	long iters = lat_iters(size), warm = iters / 10, done = 0;
	double t0;

	for (long i = 0; i < warm; i++)
		bounce(size, initiator, &done);
	t0 = now();
	for (long i = 0; i < iters; i++)
		bounce(size, initiator, &done);
	return (now() - t0) / (double)iters / 2 * 1e6;
}

static int parse_sizes(const char *arg, size_t *sizes)
{
	int n = 0;
	const char *p = arg;
	while (*p && n < MAX_SIZES) {
		char *end;
		unsigned long long v = strtoull(p, &end, 0);
		if (end == p)
			return -1;
		if (*end == 'k' || *end == 'K')
			v <<= 10, end++;
		else if (*end == 'm' || *end == 'M')
			v <<= 20, end++;
		sizes[n++] = (size_t)v;
		if (*end == ',')
			end++;
		else if (*end)
			return -1;
		p = end;
	}
	return n;
}

int main(int argc, char **argv)
{
	const char *prov = "shm", *dst = NULL, *src = NULL;
	size_t sizes[MAX_SIZES], max_size = 0;
	int nsizes = 0, port = 47800, opt, fd, latency = 0;

	for (size_t s = 8; s <= (4u << 20) && nsizes < MAX_SIZES; s <<= 1)
		sizes[nsizes++] = s;
	while ((opt = getopt(argc, argv, "lp:w:n:b:S:P:s:o:h")) != -1) {
		switch (opt) {
		case 'l': latency = 1; break;
		case 'p': prov = optarg; break;
		case 'w': window = atoi(optarg); break;
		case 'n': max_msgs = atol(optarg); break;
		case 'b': round_bytes = atol(optarg); break;
		case 'S':
			nsizes = parse_sizes(optarg, sizes);
			if (nsizes <= 0) {
				fprintf(stderr, "bad size list %s\n", optarg);
				return 1;
			}
			break;
		case 'P': port = atoi(optarg); break;
		case 's': src = optarg; break;
		case 'o': data_offset = strtoul(optarg, NULL, 0) % 4096; break;
		default:
			fprintf(stderr,
				"usage: %s [-l] [-p prov] [-w window] [-n max_msgs] "
				"[-b bytes_per_round] [-S size,...] [-P port] [-s listen_ip] "
				"[receiver_ip]\n",
				argv[0]);
			return opt == 'h' ? 0 : 1;
		}
	}
	if (window < 1 || window > MAX_WINDOW || max_msgs < 1 || round_bytes < 1 ||
	    port <= 0 || port > 65535) {
		fprintf(stderr, "bad option value\n");
		return 1;
	}
	if (optind < argc)
		dst = argv[optind];
	for (int i = 0; i < nsizes; i++)
		if (sizes[i] > max_size)
			max_size = sizes[i];

	setup(prov, max_size);
	fd = oob_connect(dst, src, port);
	exchange_names(fd);

	if (latency) {
		if (dst)
			printf("%-10s %-8s %-10s\n", "bytes", "iters", "usec");
		for (int i = 0; i < nsizes; i++) {
			double us = latency_round(sizes[i], dst != NULL);
			if (dst) {
				printf("%-10zu %-8ld %-10.3f\n", sizes[i], lat_iters(sizes[i]), us);
				fflush(stdout);
			}
		}
		nsizes = 0;
	} else if (dst) {
		post_ctrl_recv();
		printf("%-10s %-8s %-10s %-10s %-10s\n", "bytes", "msgs",
		       "seconds", "GB/s", "Mmsg/s");
		fflush(stdout);
	}
	for (int i = 0; i < nsizes; i++) {
		long count = count_for(sizes[i]);
		long warm = count / 10 < window ? window : count / 10;
		if (dst) {
			send_round(sizes[i], warm);
			double t = send_round(sizes[i], count);
			printf("%-10zu %-8ld %-10.6f %-10.5g %-10.5g\n", sizes[i],
			       count, t, (double)sizes[i] * count / t / 1e9,
			       count / t / 1e6);
			fflush(stdout);
		} else {
			recv_round(sizes[i], warm);
			recv_round(sizes[i], count);
		}
	}
	/* Drain the last control send before closing. */
	{
		char b;
		if (dst)
			write_all(fd, "x", 1);
		else
			read_all(fd, &b, 1);
	}
	close(fd);
	teardown();
	return 0;
}
