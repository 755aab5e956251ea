/* Two-process checks of the shm provider's error and completion paths:
 *   1. FI_SOURCE_ERR: a message from a sender outside the AV completes with
 *      FI_EADDRNOTAVAIL and err_data holding the sender's address string,
 *      which fi_av_insert accepts; a reply through it reaches the sender.
 *   2. FI_DELIVERY_COMPLETE: an eager send completes only after the target
 *      has processed it (buffered as unexpected, or placed into a posted
 *      receive); without the flag it completes at once; a target killed
 *      before it processes the message gives an error completion.
 *   3. Peer death at the object level: a 16 MiB send pending towards a
 *      killed receiver, and 16 MiB receives from a killed sender, complete
 *      with error entries (FI_ECONNRESET); the endpoint then works with a
 *      new peer.
 * The ordering checks rely on the peer being blocked on a pipe (manual
 * progress: it cannot process anything then), never on timing.
 * Run once with FI_SHM_CMA=1 and once with FI_SHM_CMA=0 (shm_peer_errors.sh). */
#define _GNU_SOURCE
#include <poll.h>
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static int passed, failed;
static const char *who = "parent";

#define CHECK(cond, ...)                                                      \
	do {                                                                  \
		if (cond) {                                                   \
			passed++;                                             \
		} else {                                                      \
			failed++;                                             \
			printf("FAIL [%s] %s:%d: ", who, __FILE__, __LINE__); \
			printf(__VA_ARGS__);                                  \
			printf("\n");                                         \
			fflush(stdout);                                       \
		}                                                             \
	} while (0)

#define BIG (16u << 20)

struct res {
	struct fi_info *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_cq *txcq, *rxcq;
	struct fid_av *av;
	struct fid_ep *ep;
	char name[128];
	size_t namelen;
};

static int open_res(struct res *r, uint64_t caps, uint64_t tx_op_flags)
{
	struct fi_info *hints = fi_allocinfo();
	struct fi_cq_attr cq_attr = { .format = FI_CQ_FORMAT_TAGGED, .wait_obj = FI_WAIT_NONE };
	struct fi_av_attr av_attr = { .type = FI_AV_TABLE };
	int ret;

	memset(r, 0, sizeof(*r));
	hints->ep_attr->type = FI_EP_RDM;
	hints->caps = caps;
	hints->domain_attr->data_progress = FI_PROGRESS_MANUAL;
	hints->tx_attr->op_flags = tx_op_flags;
	hints->fabric_attr->prov_name = strdup("shm");
	ret = fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &r->info);
	fi_freeinfo(hints);
	if (ret) {
		printf("[%s] fi_getinfo: %d\n", who, ret);
		return ret;
	}
	if (fi_fabric(r->info->fabric_attr, &r->fabric, NULL) || fi_domain(r->fabric, r->info, &r->domain, NULL) ||
	    fi_cq_open(r->domain, &cq_attr, &r->txcq, NULL) || fi_cq_open(r->domain, &cq_attr, &r->rxcq, NULL) ||
	    fi_av_open(r->domain, &av_attr, &r->av, NULL) || fi_endpoint(r->domain, r->info, &r->ep, NULL)) {
		printf("[%s] opening objects failed\n", who);
		return -1;
	}
	if (fi_ep_bind(r->ep, &r->av->fid, 0) || fi_ep_bind(r->ep, &r->txcq->fid, FI_TRANSMIT) ||
	    fi_ep_bind(r->ep, &r->rxcq->fid, FI_RECV) || fi_enable(r->ep)) {
		printf("[%s] binding failed\n", who);
		return -1;
	}
	r->namelen = sizeof(r->name);
	memset(r->name, 0, sizeof(r->name));
	return fi_getname(&r->ep->fid, r->name, &r->namelen);
}

static void close_res(struct res *r)
{
	CHECK(fi_close(&r->ep->fid) == 0, "close ep");
	CHECK(fi_close(&r->txcq->fid) == 0 && fi_close(&r->rxcq->fid) == 0, "close cqs");
	CHECK(fi_close(&r->av->fid) == 0, "close av");
	CHECK(fi_close(&r->domain->fid) == 0, "close domain");
	CHECK(fi_close(&r->fabric->fid) == 0, "close fabric");
	fi_freeinfo(r->info);
}

/* One completion (1), an error waiting (-FI_EAVAIL), or -FI_ETIMEDOUT after
 * a bounded number of polls (~10 s): never a hang. */
static int wait_cq(struct fid_cq *cq, struct fi_cq_tagged_entry *e)
{
	for (long i = 0; i < 1000000L; i++) {
		ssize_t n = fi_cq_read(cq, e, 1);
		if (n == 1)
			return 1;
		if (n != -FI_EAGAIN)
			return (int)n;
		if (i > 1000)
			usleep(10);
	}
	return -FI_ETIMEDOUT;
}

/* The err code of the next error entry, or a negative value. */
static int wait_err(struct fid_cq *cq, struct fi_cq_err_entry *err)
{
	struct fi_cq_tagged_entry e;
	int rc = wait_cq(cq, &e);
	if (rc != -FI_EAVAIL)
		return rc == 1 ? -1000 : rc;
	memset(err, 0, sizeof(*err));
	if (fi_cq_readerr(cq, err, 0) != 1)
		return -1001;
	return err->err;
}

/* Polls `cq` `n` times; 1 if anything (entry or error) showed up. */
static int shows_up(struct fid_cq *cq, int n)
{
	struct fi_cq_tagged_entry e;
	for (int i = 0; i < n; i++) {
		ssize_t r = fi_cq_read(cq, &e, 1);
		if (r != -FI_EAGAIN)
			return 1;
		if (i > 100)
			usleep(20);
	}
	return 0;
}

static ssize_t send_flags(struct fid_ep *ep, const void *buf, size_t len, fi_addr_t to, void *ctx, uint64_t flags)
{
	struct iovec iov = { (void *)buf, len };
	struct fi_msg m = { .msg_iov = &iov, .iov_count = 1, .addr = to, .context = ctx };
	ssize_t ret;
	while ((ret = fi_sendmsg(ep, &m, flags)) == -FI_EAGAIN)
		;
	return ret;
}

static ssize_t send_one(struct fid_ep *ep, const void *buf, size_t len, fi_addr_t to, void *ctx)
{
	ssize_t ret;
	while ((ret = fi_send(ep, buf, len, NULL, to, ctx)) == -FI_EAGAIN)
		;
	return ret;
}

/* One byte per step over a pipe. */
static void put(int fd, char c)
{
	if (write(fd, &c, 1) != 1)
		failed++;
}
static void expect(int fd, char c)
{
	char got = 0;
	if (read(fd, &got, 1) != 1 || got != c) {
		printf("FAIL [%s] step %c: got %c\n", who, c, got);
		exit(1);
	}
}
/* 1 when a byte is ready on fd (does not read it). */
static int ready(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	return poll(&p, 1, 0) == 1;
}

static int bounce_mode(void)
{
	const char *v = getenv("FI_SHM_CMA");
	return v && !strcmp(v, "0");
}

struct kid {
	pid_t pid;
	int to, from; /* pipe ends: to the child, from the child */
};

static struct kid spawn(void (*body)(int rfd, int wfd))
{
	int p2c[2], c2p[2];
	struct kid k = { 0 };
	if (pipe(p2c) || pipe(c2p))
		exit(2);
	k.pid = fork();
	if (k.pid < 0)
		exit(2);
	if (k.pid == 0) {
		close(p2c[1]);
		close(c2p[0]);
		who = "child";
		body(p2c[0], c2p[1]);
		printf("child: %d passed, %d failed\n", passed, failed);
		_exit(failed ? 1 : 0);
	}
	close(p2c[0]);
	close(c2p[1]);
	k.to = p2c[1];
	k.from = c2p[0];
	return k;
}

static void reap(struct kid *k, int killed)
{
	int st = 0;
	waitpid(k->pid, &st, 0);
	if (killed)
		CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL, "child killed: status %d", st);
	else
		CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child exit status %d", st);
	close(k->to);
	close(k->from);
}

/* Name exchange: the child writes its name; the parent answers with its own. */
static void send_name(int fd, const struct res *r)
{
	if (write(fd, r->name, sizeof(r->name)) != (ssize_t)sizeof(r->name))
		exit(3);
}
static void recv_name(int fd, char *name)
{
	size_t got = 0;
	while (got < 128) {
		ssize_t n = read(fd, name + got, 128 - got);
		if (n <= 0)
			exit(3);
		got += (size_t)n;
	}
}

/* ---------------------------------------------------------- FI_SOURCE_ERR */

static void source_err_child(int rfd, int wfd)
{
	struct res c;
	char parent[128];
	char *big = malloc(100000);
	if (!big || open_res(&c, FI_MSG, 0))
		_exit(3);
	send_name(wfd, &c);
	recv_name(rfd, parent);
	fi_addr_t to = FI_ADDR_NOTAVAIL;
	CHECK(fi_av_insert(c.av, parent, 1, &to, 0, NULL) == 1, "insert parent");
	char reply[16] = { 0 };
	CHECK(fi_recv(c.ep, reply, sizeof(reply), NULL, FI_ADDR_UNSPEC, reply) == 0, "post receive for reply");
	memset(big, 'b', 100000);
	CHECK(send_one(c.ep, "hello", 6, to, NULL) == 0, "eager send");
	CHECK(send_one(c.ep, big, 100000, to, big) == 0, "rendezvous send");
	struct fi_cq_tagged_entry e;
	int sends = 0;
	for (int i = 0; i < 2; i++)
		sends += wait_cq(c.txcq, &e) == 1;
	CHECK(sends == 2, "both sends complete");
	CHECK(wait_cq(c.rxcq, &e) == 1 && e.op_context == reply && !strcmp(reply, "reply"),
	      "reply through the address taken from err_data: '%s'", reply);
	close_res(&c);
	free(big);
}

static void source_err(void)
{
	who = "source_err";
	struct kid k = spawn(source_err_child);
	struct res p;
	char child[128];
	CHECK(open_res(&p, FI_MSG | FI_SOURCE | FI_SOURCE_ERR, 0) == 0, "open with FI_SOURCE_ERR");
	CHECK(p.info->domain_attr->max_err_data >= strlen(p.name) + 1, "max_err_data %zu",
	      p.info->domain_attr->max_err_data);
	recv_name(k.from, child);
	send_name(k.to, &p);
	char small[8], *big = malloc(100000);
	CHECK(fi_recv(p.ep, small, sizeof(small), NULL, FI_ADDR_UNSPEC, small) == 0, "post small");
	CHECK(fi_recv(p.ep, big, 100000, NULL, FI_ADDR_UNSPEC, big) == 0, "post big");

	/* Eager message: caller-provided err_data buffer. */
	struct fi_cq_err_entry err;
	struct fi_cq_tagged_entry e;
	char data[128];
	int rc = wait_cq(p.rxcq, &e);
	memset(&err, 0, sizeof(err));
	memset(data, 'x', sizeof(data));
	err.err_data = data;
	err.err_data_size = sizeof(data);
	CHECK(rc == -FI_EAVAIL && fi_cq_readerr(p.rxcq, &err, 0) == 1, "error entry for the eager message: %d", rc);
	CHECK(err.err == FI_EADDRNOTAVAIL && err.op_context == small && err.len == 6 && !strcmp(small, "hello"),
	      "eager: err %d len %zu", err.err, err.len);
	CHECK(err.err_data == data && err.err_data_size == strlen(child) + 1 && !strcmp(data, child),
	      "eager err_data is the sender's address: size %zu '%.60s' want '%s'", err.err_data_size, data, child);

	/* Rendezvous message: err_data_size 0 on input, the provider's buffer. */
	rc = wait_cq(p.rxcq, &e);
	memset(&err, 0, sizeof(err));
	CHECK(rc == -FI_EAVAIL && fi_cq_readerr(p.rxcq, &err, 0) == 1, "error entry for the rendezvous message: %d", rc);
	CHECK(err.err == FI_EADDRNOTAVAIL && err.op_context == big && err.len == 100000 && big[99999] == 'b',
	      "rendezvous: err %d len %zu", err.err, err.len);
	CHECK(err.err_data && err.err_data_size == strlen(child) + 1 && !strcmp(err.err_data, child),
	      "rendezvous err_data is the sender's address: size %zu", err.err_data_size);

	/* The string goes straight into fi_av_insert; a reply reaches the sender. */
	fi_addr_t back = FI_ADDR_NOTAVAIL;
	CHECK(err.err_data && fi_av_insert(p.av, err.err_data, 1, &back, 0, NULL) == 1 && back != FI_ADDR_NOTAVAIL,
	      "fi_av_insert of err_data");
	CHECK(send_one(p.ep, "reply", 6, back, NULL) == 0, "send reply");
	CHECK(wait_cq(p.txcq, &e) == 1, "reply completes");
	/* The sender is known now: no error entry for its next message. */
	reap(&k, 0);
	close_res(&p);
	free(big);
}

/* --------------------------------------------------- FI_DELIVERY_COMPLETE */

static void dc_child(int rfd, int wfd)
{
	struct res c;
	char parent[128];
	if (open_res(&c, FI_MSG, 0))
		_exit(3);
	send_name(wfd, &c);
	recv_name(rfd, parent); /* not inserted: acks find the sender by its key */
	struct fi_cq_tagged_entry e;

	/* Step 1: processed as unexpected. Blocked until 'G'; then progress
	 * without a receive until the parent has its completion ('C'). */
	expect(rfd, 'G');
	while (!ready(rfd))
		fi_cq_read(c.rxcq, &e, 1);
	expect(rfd, 'C');
	char a[8] = { 0 }, b[8] = { 0 }, d[8] = { 0 };
	CHECK(fi_recv(c.ep, a, sizeof(a), NULL, FI_ADDR_UNSPEC, a) == 0 && wait_cq(c.rxcq, &e) == 1 &&
		      e.op_context == a && !strcmp(a, "plain"),
	      "plain message from the unexpected queue: '%s'", a);
	CHECK(fi_recv(c.ep, b, sizeof(b), NULL, FI_ADDR_UNSPEC, b) == 0 && wait_cq(c.rxcq, &e) == 1 &&
		      e.op_context == b && !strcmp(b, "dc1"),
	      "delivery-complete message from the unexpected queue: '%s'", b);

	/* Step 2: placed into a posted receive. */
	CHECK(fi_recv(c.ep, d, sizeof(d), NULL, FI_ADDR_UNSPEC, d) == 0, "post for dc2");
	put(wfd, 'R');
	expect(rfd, 'H');
	CHECK(wait_cq(c.rxcq, &e) == 1 && e.op_context == d && !strcmp(d, "dc2"), "dc2 placed: '%s'", d);
	put(wfd, 'P');

	/* Step 3: default op_flags; progress until told to stop. */
	expect(rfd, 'I');
	while (!ready(rfd))
		fi_cq_read(c.rxcq, &e, 1);
	expect(rfd, 'J');
	char f[8] = { 0 };
	CHECK(fi_recv(c.ep, f, sizeof(f), NULL, FI_ADDR_UNSPEC, f) == 0 && wait_cq(c.rxcq, &e) == 1 && !strcmp(f, "dflt"),
	      "default-flags message: '%s'", f);

	/* Step 4: never processes the last message; killed. */
	put(wfd, 'K');
	pause();
}

static void delivery_complete(void)
{
	who = "delivery";
	struct kid k = spawn(dc_child);
	struct res p, q;
	char child[128];
	struct fi_cq_tagged_entry e;
	struct fi_cq_err_entry err;
	CHECK(open_res(&p, FI_MSG, 0) == 0, "open");
	recv_name(k.from, child);
	send_name(k.to, &p);
	fi_addr_t to = FI_ADDR_NOTAVAIL;
	CHECK(fi_av_insert(p.av, child, 1, &to, 0, NULL) == 1, "insert child");
	int c1, c2, c3, c4;

	/* Without FI_DELIVERY_COMPLETE: complete at once, the child blocked. */
	CHECK(send_one(p.ep, "plain", 6, to, &c1) == 0, "plain send");
	CHECK(fi_cq_read(p.txcq, &e, 1) == 1 && e.op_context == &c1, "plain send completes at once");

	/* With it: nothing while the child is blocked on the pipe. */
	CHECK(send_flags(p.ep, "dc1", 4, to, &c2, FI_DELIVERY_COMPLETE | FI_COMPLETION) == 0, "dc1 send");
	CHECK(!shows_up(p.txcq, 5000), "dc1 must not complete before the target processed it");
	put(k.to, 'G');
	CHECK(wait_cq(p.txcq, &e) == 1 && e.op_context == &c2 && (e.flags & FI_SEND),
	      "dc1 completes once buffered as unexpected at the target");
	put(k.to, 'C');

	expect(k.from, 'R');
	CHECK(send_flags(p.ep, "dc2", 4, to, &c3, FI_DELIVERY_COMPLETE) == 0, "dc2 send");
	CHECK(!shows_up(p.txcq, 5000), "dc2 must not complete while the target is blocked");
	put(k.to, 'H');
	CHECK(wait_cq(p.txcq, &e) == 1 && e.op_context == &c3, "dc2 completes after placement");
	expect(k.from, 'P');

	/* FI_DELIVERY_COMPLETE as the endpoint's default tx op_flags. */
	int have_q = open_res(&q, FI_MSG, FI_DELIVERY_COMPLETE) == 0;
	CHECK(have_q && (q.info->tx_attr->op_flags & FI_DELIVERY_COMPLETE), "endpoint with default FI_DELIVERY_COMPLETE");
	fi_addr_t to2 = FI_ADDR_NOTAVAIL;
	if (have_q) {
		CHECK(fi_av_insert(q.av, child, 1, &to2, 0, NULL) == 1, "insert child (2)");
		CHECK(send_one(q.ep, "dflt", 5, to2, &c4) == 0, "default-flags send");
		CHECK(!shows_up(q.txcq, 5000), "default-flags send waits for the target");
	}
	put(k.to, 'I');
	if (have_q)
		CHECK(wait_cq(q.txcq, &e) == 1 && e.op_context == &c4, "default-flags send completes");
	put(k.to, 'J');

	/* The target dies before it processes a delivery-complete message. */
	expect(k.from, 'K');
	CHECK(send_flags(p.ep, "dc3", 4, to, &c1, FI_DELIVERY_COMPLETE) == 0, "dc3 send");
	CHECK(!shows_up(p.txcq, 200), "dc3 pending");
	kill(k.pid, SIGKILL);
	reap(&k, 1);
	int rc = wait_err(p.txcq, &err);
	CHECK(rc == FI_ECONNRESET && err.op_context == &c1, "dc3 fails when the target dies: %d", rc);
	if (have_q)
		close_res(&q);
	close_res(&p);
}

/* ------------------------------------------------------------ peer death */

/* (a) receives 16 MiB, then is killed with the parent's send pending. */
static void recv_big_child(int rfd, int wfd)
{
	struct res c;
	char parent[128];
	char *buf = malloc(BIG);
	struct fi_cq_tagged_entry e;
	if (!buf || open_res(&c, FI_MSG, 0))
		_exit(3);
	send_name(wfd, &c);
	recv_name(rfd, parent);
	CHECK(fi_recv(c.ep, buf, BIG, NULL, FI_ADDR_UNSPEC, buf) == 0, "post 16 MiB receive");
	put(wfd, 'P');
	expect(rfd, 'S');
	/* Bounce mode: pull the first chunks, so the transfer is under way.
	 * CMA mode: one progress call would finish it, so none. */
	if (bounce_mode())
		for (int i = 0; i < 20; i++)
			fi_cq_read(c.rxcq, &e, 1);
	put(wfd, 'W');
	pause();
}

/* (b) sends 16 MiB, then is killed before the parent receives it. */
static void send_big_child(int rfd, int wfd)
{
	struct res c;
	char parent[128];
	char *buf = malloc(BIG);
	if (!buf || open_res(&c, FI_MSG, 0))
		_exit(3);
	memset(buf, 7, BIG);
	send_name(wfd, &c);
	recv_name(rfd, parent);
	fi_addr_t to = FI_ADDR_NOTAVAIL;
	CHECK(fi_av_insert(c.av, parent, 1, &to, 0, NULL) == 1, "insert parent");
	expect(rfd, 'S');
	CHECK(send_one(c.ep, buf, BIG, to, buf) == 0, "16 MiB send");
	put(wfd, 'W');
	pause();
}

/* (c) a healthy peer: one exchange each way, 16 MiB towards the parent. */
static void healthy_child(int rfd, int wfd)
{
	struct res c;
	char parent[128];
	char *buf = malloc(BIG);
	struct fi_cq_tagged_entry e;
	if (!buf || open_res(&c, FI_MSG, 0))
		_exit(3);
	for (size_t i = 0; i < BIG; i++)
		buf[i] = (char)(i * 13);
	send_name(wfd, &c);
	recv_name(rfd, parent);
	fi_addr_t to = FI_ADDR_NOTAVAIL;
	CHECK(fi_av_insert(c.av, parent, 1, &to, 0, NULL) == 1, "insert parent");
	char small[8] = { 0 };
	CHECK(fi_recv(c.ep, small, sizeof(small), NULL, FI_ADDR_UNSPEC, small) == 0, "post");
	CHECK(send_one(c.ep, buf, BIG, to, buf) == 0, "16 MiB send to the parent");
	CHECK(wait_cq(c.txcq, &e) == 1 && e.op_context == buf, "16 MiB send completes");
	CHECK(wait_cq(c.rxcq, &e) == 1 && !strcmp(small, "alive"), "message from the parent: '%s'", small);
	free(buf);
	close_res(&c);
}

/* (d) takes a delivery-complete message (and, with CMA, a 16 MiB
 * rendezvous message) and exits at once: its ack and its FIN are in the
 * parent's ring before the parent looks. */
static void answer_exit_child(int rfd, int wfd)
{
	struct res c;
	char parent[128], small[8] = { 0 };
	char *buf = malloc(BIG);
	struct fi_cq_tagged_entry e;
	if (!buf || open_res(&c, FI_MSG, 0))
		_exit(3);
	send_name(wfd, &c);
	recv_name(rfd, parent);
	CHECK(fi_recv(c.ep, small, sizeof(small), NULL, FI_ADDR_UNSPEC, small) == 0, "post small");
	if (!bounce_mode())
		CHECK(fi_recv(c.ep, buf, BIG, NULL, FI_ADDR_UNSPEC, buf) == 0, "post 16 MiB");
	put(wfd, 'R');
	for (int n = bounce_mode() ? 1 : 2; n > 0; n--)
		CHECK(wait_cq(c.rxcq, &e) == 1, "message %d taken", n);
	free(buf);
	close_res(&c);
}

static fi_addr_t meet(struct res *p, struct kid *k)
{
	char name[128];
	fi_addr_t a = FI_ADDR_NOTAVAIL;
	recv_name(k->from, name);
	send_name(k->to, p);
	CHECK(fi_av_insert(p->av, name, 1, &a, 0, NULL) == 1, "insert child");
	return a;
}

static void peer_death(void)
{
	who = "death";
	struct res p;
	struct fi_cq_tagged_entry e;
	struct fi_cq_err_entry err;
	char *buf = malloc(BIG);
	CHECK(buf && open_res(&p, FI_MSG, 0) == 0, "open");
	memset(buf, 3, BIG);

	/* (a) pending send, receiver killed. */
	struct kid k = spawn(recv_big_child);
	fi_addr_t to = meet(&p, &k);
	expect(k.from, 'P');
	CHECK(send_one(p.ep, buf, BIG, to, buf) == 0, "16 MiB send");
	/* One progress call: in bounce mode it fills the slot's first chunks.
	 * We then stop progressing, so the child can pull those and no more:
	 * the transfer is cut in the middle (a receiver that keeps pulling
	 * while we keep filling could finish all 16 MiB in one call). */
	CHECK(fi_cq_read(p.txcq, &e, 1) == -FI_EAGAIN, "send pending after one progress call");
	put(k.to, 'S');
	while (!ready(k.from))
		usleep(100);
	expect(k.from, 'W');
	CHECK(fi_cq_read(p.txcq, &e, 1) == -FI_EAGAIN, "send still pending");
	kill(k.pid, SIGKILL);
	reap(&k, 1);
	int rc = wait_err(p.txcq, &err);
	CHECK(rc == FI_ECONNRESET && err.op_context == buf, "(a) send fails with FI_ECONNRESET: %d", rc);

	/* (b1) sender killed, then the receive is posted. */
	k = spawn(send_big_child);
	meet(&p, &k);
	put(k.to, 'S');
	expect(k.from, 'W');
	kill(k.pid, SIGKILL);
	reap(&k, 1);
	CHECK(fi_recv(p.ep, buf, BIG, NULL, FI_ADDR_UNSPEC, buf) == 0, "post after the sender died");
	rc = wait_err(p.rxcq, &err);
	CHECK(rc == FI_ECONNRESET && err.op_context == buf, "(b1) receive fails with FI_ECONNRESET: %d", rc);

	/* (b2) receive posted first; the sender dies before we pull. */
	CHECK(fi_recv(p.ep, buf, BIG, NULL, FI_ADDR_UNSPEC, buf + 1) == 0, "post before the send");
	k = spawn(send_big_child);
	meet(&p, &k);
	put(k.to, 'S');
	expect(k.from, 'W');
	kill(k.pid, SIGKILL);
	reap(&k, 1);
	rc = wait_err(p.rxcq, &err);
	CHECK(rc == FI_ECONNRESET && err.op_context == buf + 1, "(b2) receive fails with FI_ECONNRESET: %d", rc);
	CHECK(fi_cq_read(p.rxcq, &e, 1) == -FI_EAGAIN && fi_cq_read(p.txcq, &e, 1) == -FI_EAGAIN, "nothing else queued");

	/* (c) the endpoint still works with a new peer. */
	k = spawn(healthy_child);
	to = meet(&p, &k);
	CHECK(fi_recv(p.ep, buf, BIG, NULL, FI_ADDR_UNSPEC, buf) == 0, "post for the healthy peer");
	CHECK(wait_cq(p.rxcq, &e) == 1 && e.op_context == buf && e.len == BIG, "16 MiB from the new peer");
	int good = 1;
	for (size_t i = 0; i < BIG && good; i++)
		good = buf[i] == (char)(i * 13);
	CHECK(good, "16 MiB data intact");
	CHECK(send_one(p.ep, "alive", 6, to, NULL) == 0 && wait_cq(p.txcq, &e) == 1, "send to the new peer");
	reap(&k, 0);

	/* (d) a peer that answers and exits before we look: its answers count,
	 * the sends complete without error. */
	k = spawn(answer_exit_child);
	to = meet(&p, &k);
	expect(k.from, 'R');
	CHECK(send_flags(p.ep, "dc", 3, to, buf + 2, FI_DELIVERY_COMPLETE) == 0, "delivery-complete send");
	if (!bounce_mode())
		CHECK(send_one(p.ep, buf, BIG, to, buf + 3) == 0, "16 MiB send");
	reap(&k, 0);
	usleep(20000); /* longer than any interval between liveness checks */
	for (int n = bounce_mode() ? 1 : 2; n > 0; n--) {
		rc = wait_cq(p.txcq, &e);
		CHECK(rc == 1 && (e.op_context == buf + 2 || e.op_context == buf + 3),
		      "(d) send to a peer that answered and exited completes: %d", rc);
		if (rc == -FI_EAVAIL) {
			memset(&err, 0, sizeof(err));
			fi_cq_readerr(p.txcq, &err, 0);
			printf("  error entry: err %d\n", err.err);
		}
	}
	close_res(&p);
	free(buf);
}

/* No argument: every part; else the parts named (source, delivery, death). */
static int want(int argc, char **argv, const char *part)
{
	if (argc < 2)
		return 1;
	for (int i = 1; i < argc; i++)
		if (!strcmp(argv[i], part))
			return 1;
	return 0;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IONBF, 0);
	signal(SIGPIPE, SIG_IGN);
	printf("mode: %s\n", bounce_mode() ? "bounce (FI_SHM_CMA=0)" : "CMA when permitted");
	if (want(argc, argv, "source"))
		source_err();
	if (want(argc, argv, "delivery"))
		delivery_complete();
	if (want(argc, argv, "death"))
		peer_death();
	printf("%d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}
