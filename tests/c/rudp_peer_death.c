/* Peers of the rudp provider that die (SIGKILL) with work outstanding
 * towards them, over loopback (FI_RUDP_IFACE=lo), FI_RUDP_PEER_TIMEOUT_MS
 * short (500 unless set). The survivor (this process) runs its peers as
 * separate processes (this program again, exec'd with a role), each with
 * one endpoint that echoes what it is sent and serves RMA:
 *   stopped: a peer is stopped (SIGSTOP), then sends of each protocol
 *     (eager, medium, long, delivery complete), writes, reads and a fetch
 *     atomic are posted to it, and it is killed: each completes with
 *     FI_ECONNRESET, not before the peer timeout and within it plus a
 *     margin, counted as errors; a send posted afterwards fails the same
 *     way; a third process keeps working with the survivor throughout;
 *   waiting: work the peer has taken and not answered yet (a long send it
 *     has no receive for, a delivery-complete send waiting in its
 *     unexpected queue) when it is killed: FI_ECONNRESET as well;
 *   leftovers: what a dead peer sent before it died is still received (an
 *     eager message), and a receive matched to its unfinished long message
 *     fails with FI_ECONNRESET;
 *   restart: a peer killed with work outstanding and started again at the
 *     same address (same port): the survivor (here with a peer timeout of
 *     60 s) takes the new process for a new peer at once (its connection
 *     id): the old work fails well before the timeout, and messages flow
 *     both ways with the new process under the old fi_addr.
 * Peers on loopback go through shared memory unless FI_RUDP_ENABLE_SHM=0:
 * then a killed peer is seen as soon as its process is gone, so "stopped"
 * has no lower bound (over UDP it cannot fail before the peer timeout).
 * No case may hang: every wait has a limit. Prints "N passed, N failed". */
#define _GNU_SOURCE
#include <netinet/in.h>
#include <poll.h>
#include <rdma/fabric.h>
#include <rdma/fi_atomic.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* The provider under test: RF_PROV (rudp unless set; tcp runs the same
 * cases), and the name of its setting NAME (FI_RUDP_NAME, FI_TCP_NAME). */
static const char *prov_name(void)
{
	const char *p = getenv("RF_PROV");
	return p && *p ? p : "rudp";
}

static const char *pvar(const char *name)
{
	static char buf[8][64];
	static int next;
	char *b = buf[next++ % 8];
	int n = snprintf(b, 64, "FI_%s_%s", prov_name(), name);
	for (int i = 0; i < n && i < 63; i++)
		if (b[i] >= 'a' && b[i] <= 'z')
			b[i] -= 'a' - 'A';
	return b;
}

static int passed, failed;
static const char *who = "survivor";

#define CHECK(cond, ...)                                                      \
	do {                                                                  \
		if (cond) {                                                   \
			passed++;                                             \
		} else {                                                      \
			failed++;                                             \
			printf("FAIL [%s] %s:%d: ", who, __FILE__, __LINE__); \
			printf(__VA_ARGS__);                                  \
			printf("\n");                                         \
		}                                                             \
	} while (0)
#define RETRY(call)                                 \
	({                                          \
		ssize_t r_;                         \
		while ((r_ = (call)) == -FI_EAGAIN) \
			usleep(20);                 \
		r_;                                 \
	})

/* A tagged send that completes only once the peer has the data
 * (FI_TRANSMIT_COMPLETE): a send with the default completion level may
 * complete as soon as the transport took it (tcp: written to the socket),
 * which a peer's death does not undo. */
static ssize_t tsend_tc(struct fid_ep *ep, const void *buf, size_t len, fi_addr_t dest, uint64_t tag, void *ctx)
{
	struct iovec iov = { (void *)buf, len };
	struct fi_msg_tagged m = { .msg_iov = &iov, .iov_count = 1, .addr = dest, .tag = tag, .context = ctx };
	return fi_tsendmsg(ep, &m, FI_TRANSMIT_COMPLETE);
}

#define ECHO_TAG 7
#define HELLO_TAG 9
#define BIG (1 << 20)
/* a long message: over every provider's medium limit (tcp's is 1 MiB) */
#define LONG_LEN (2 * BIG)

struct res {
	struct fi_info *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_cq *cq;
	struct fid_av *av;
	struct fid_ep *ep;
	struct fid_cntr *cntr;
	char name[16];
};

static long timeout_ms, slack_ms;
static int connected;
/* the earliest a killed peer's work may fail (from posting it) */
static long dead_lo_ms;

static long now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000L + t.tv_nsec / 1000000;
}

/* An endpoint; `port` binds it to that port (0: any). */
static void open_res(struct res *r, int port)
{
	struct fi_info *hints = fi_allocinfo();
	struct fi_cq_attr cq_attr = { .format = FI_CQ_FORMAT_TAGGED };
	struct fi_av_attr av_attr = { .type = FI_AV_TABLE };
	struct fi_cntr_attr cattr = { .events = FI_CNTR_EVENTS_COMP };
	char service[16];
	memset(r, 0, sizeof(*r));
	hints->ep_attr->type = FI_EP_RDM;
	hints->caps = FI_MSG | FI_TAGGED | FI_RMA | FI_ATOMIC | FI_SOURCE;
	hints->addr_format = FI_SOCKADDR_IN;
	hints->domain_attr->mr_mode = FI_MR_VIRT_ADDR | FI_MR_PROV_KEY | FI_MR_ALLOCATED;
	hints->fabric_attr->prov_name = strdup(prov_name());
	snprintf(service, sizeof(service), "%d", port);
	int ret = fi_getinfo(FI_VERSION(1, 18), NULL, port ? service : NULL, port ? FI_SOURCE : 0, hints, &r->info);
	fi_freeinfo(hints);
	if (ret) {
		printf("FAIL [%s] fi_getinfo: %d\n", who, ret);
		exit(2);
	}
	if (fi_fabric(r->info->fabric_attr, &r->fabric, NULL) || fi_domain(r->fabric, r->info, &r->domain, NULL) ||
	    fi_cq_open(r->domain, &cq_attr, &r->cq, NULL) || fi_av_open(r->domain, &av_attr, &r->av, NULL) ||
	    fi_cntr_open(r->domain, &cattr, &r->cntr, NULL) || fi_endpoint(r->domain, r->info, &r->ep, NULL) ||
	    fi_ep_bind(r->ep, &r->av->fid, 0) || fi_ep_bind(r->ep, &r->cq->fid, FI_TRANSMIT | FI_RECV) ||
	    fi_ep_bind(r->ep, &r->cntr->fid, FI_SEND | FI_RECV | FI_WRITE | FI_READ) || fi_enable(r->ep)) {
		printf("FAIL [%s] opening an endpoint (port %d)\n", who, port);
		exit(2);
	}
	size_t len = sizeof(r->name);
	if (fi_getname(&r->ep->fid, r->name, &len) || len != sizeof(r->name))
		exit(2);
}

static void close_res(struct res *r)
{
	CHECK(fi_close(&r->ep->fid) == 0 && fi_close(&r->cq->fid) == 0 && fi_close(&r->av->fid) == 0 &&
		      fi_close(&r->cntr->fid) == 0 && fi_close(&r->domain->fid) == 0 && fi_close(&r->fabric->fid) == 0,
	      "close");
	fi_freeinfo(r->info);
}

static int port_of(const char *name)
{
	struct sockaddr_in a;
	memcpy(&a, name, sizeof(a));
	return ntohs(a.sin_port);
}

static void hex(const char *b, size_t n, char *out)
{
	for (size_t i = 0; i < n; i++)
		sprintf(out + 2 * i, "%02x", (unsigned char)b[i]);
}
static void unhex(const char *s, char *b, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		unsigned v = 0;
		sscanf(s + 2 * i, "%2x", &v);
		b[i] = (char)v;
	}
}

/* --------------------------------------------------------------- a peer */

/* What a peer tells the survivor once it is up. */
struct hello {
	char name[16];
	uint64_t addr, key;
};

/* argv: peer WFD RFD SURVIVOR-NAME PORT. Writes its struct hello, then
 * echoes ECHO_TAG messages to the survivor and serves RMA until the pipe
 * says 'q' (or closes). 'h': sends a HELLO_TAG message to the survivor. */
static int peer_main(char **argv)
{
	int wfd = atoi(argv[2]), rfd = atoi(argv[3]), port = atoi(argv[5]);
	char sname[16];
	struct res r;
	who = "peer";
	unhex(argv[4], sname, sizeof(sname));
	open_res(&r, port);
	fi_addr_t s = FI_ADDR_NOTAVAIL;
	if (fi_av_insert(r.av, sname, 1, &s, 0, NULL) != 1)
		return 2;
	char *mem = calloc(1, BIG), *buf = malloc(LONG_LEN);
	struct fid_mr *mr;
	if (fi_mr_reg(r.domain, mem, BIG, FI_REMOTE_READ | FI_REMOTE_WRITE, 0, 0, 0, &mr, NULL))
		return 2;
	struct hello h = { .addr = (uintptr_t)mem, .key = fi_mr_key(mr) };
	memcpy(h.name, r.name, sizeof(h.name));
	if (write(wfd, &h, sizeof(h)) != sizeof(h))
		return 2;
	struct fi_context rctx, sctx;
	if (fi_trecv(r.ep, buf, LONG_LEN, NULL, FI_ADDR_UNSPEC, ECHO_TAG, 0, &rctx))
		return 2;
	for (;;) {
		struct pollfd p = { .fd = rfd, .events = POLLIN };
		if (poll(&p, 1, 1) == 1) {
			char c = 'q';
			if (read(rfd, &c, 1) != 1 || c == 'q')
				break;
			if (c == 'h' && RETRY(fi_tsend(r.ep, "hello", 6, NULL, s, HELLO_TAG, &sctx)) != 0)
				return 3;
		}
		struct fi_cq_tagged_entry e;
		ssize_t n = fi_cq_read(r.cq, &e, 1);
		if (n == -FI_EAVAIL) {
			struct fi_cq_err_entry err = { 0 };
			fi_cq_readerr(r.cq, &err, 0);
			continue;
		}
		if (n != 1 || e.op_context != &rctx)
			continue;
		/* echo it back, then wait for the next one */
		if (RETRY(fi_tsend(r.ep, buf, e.len, NULL, s, ECHO_TAG, &sctx)) != 0)
			return 3;
		if (fi_trecv(r.ep, buf, LONG_LEN, NULL, FI_ADDR_UNSPEC, ECHO_TAG, 0, &rctx))
			return 3;
	}
	fi_close(&mr->fid);
	close_res(&r);
	free(mem);
	free(buf);
	return 0;
}

/* ----------------------------------------------------------- the survivor */

struct peer {
	pid_t pid;
	int wfd, rfd; /* to it, from it */
	struct hello h;
	fi_addr_t fa;
};

static const char *self;

static void spawn(struct peer *p, struct res *S, int port)
{
	int to[2], from[2];
	if (pipe(to) || pipe(from))
		exit(2);
	char a1[16], a2[16], a4[16], sname[40];
	snprintf(a1, sizeof(a1), "%d", from[1]);
	snprintf(a2, sizeof(a2), "%d", to[0]);
	snprintf(a4, sizeof(a4), "%d", port);
	hex(S->name, sizeof(S->name), sname);
	p->pid = fork();
	if (p->pid == 0) {
		close(to[1]);
		close(from[0]);
		execl(self, self, "peer", a1, a2, sname, a4, (char *)NULL);
		_exit(127);
	}
	close(to[0]);
	close(from[1]);
	p->wfd = to[1];
	p->rfd = from[0];
	struct pollfd pf = { .fd = p->rfd, .events = POLLIN };
	if (poll(&pf, 1, 20000) != 1 || read(p->rfd, &p->h, sizeof(p->h)) != sizeof(p->h)) {
		printf("FAIL [%s] a peer did not start\n", who);
		exit(2);
	}
	p->fa = FI_ADDR_NOTAVAIL;
	CHECK(fi_av_insert(S->av, p->h.name, 1, &p->fa, 0, NULL) == 1, "insert peer");
}

/* Tells a peer to leave; its exit status must be 0. */
static void dismiss(struct peer *p)
{
	char c = 'q';
	int st = -1;
	if (write(p->wfd, &c, 1) != 1)
		CHECK(0, "pipe");
	for (int i = 0; i < 2000 && waitpid(p->pid, &st, WNOHANG) == 0; i++)
		usleep(10000);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "peer %d exits cleanly: status %#x", p->pid, st);
	close(p->wfd);
	close(p->rfd);
}

/* Stops a peer; returns once all its threads are stopped. */
static void stop_peer(struct peer *p)
{
	int st = 0;
	kill(p->pid, SIGSTOP);
	CHECK(waitpid(p->pid, &st, WUNTRACED) == p->pid && WIFSTOPPED(st), "peer stopped: status %#x", st);
}

static void kill_peer(struct peer *p)
{
	kill(p->pid, SIGKILL);
	waitpid(p->pid, NULL, 0);
	close(p->wfd);
	close(p->rfd);
}

/* Outcomes of operations identified by their contexts. */
#define MAXOPS 16
struct ops {
	int n;
	const char *what[MAXOPS];
	struct fi_context ctx[MAXOPS];
	int err[MAXOPS]; /* -1 pending, 0 done, else the error */
	long at[MAXOPS];
	uint64_t flags[MAXOPS];
};

static struct fi_context *op(struct ops *o, const char *what)
{
	o->what[o->n] = what;
	o->err[o->n] = -1;
	return &o->ctx[o->n++];
}

/* Reads completions into o until every op is settled or `ms` pass;
 * completions of other contexts go to `other` (counted). */
static void settle(struct res *S, struct ops *o, int ms, int *other)
{
	long end = now_ms() + ms;
	for (;;) {
		int pending = 0;
		for (int i = 0; i < o->n; i++)
			pending += o->err[i] == -1;
		if (!pending || now_ms() > end)
			return;
		struct fi_cq_tagged_entry e;
		struct fi_cq_err_entry err = { 0 };
		void *ctx;
		int code = 0;
		uint64_t flags;
		ssize_t n = fi_cq_read(S->cq, &e, 1);
		if (n == -FI_EAGAIN) {
			usleep(200);
			continue;
		}
		if (n == 1) {
			ctx = e.op_context;
			flags = e.flags;
		} else if (n == -FI_EAVAIL && fi_cq_readerr(S->cq, &err, 0) == 1) {
			ctx = err.op_context;
			code = err.err;
			flags = err.flags;
		} else {
			CHECK(0, "cq read: %zd", n);
			return;
		}
		int i = (int)((struct fi_context *)ctx - o->ctx);
		if (ctx && i >= 0 && i < o->n) {
			o->err[i] = code;
			o->at[i] = now_ms();
			o->flags[i] = flags;
		} else if (other) {
			(*other)++;
		}
	}
}

/* A message to p and its echo back. */
static int echo(struct res *S, struct peer *p, size_t len)
{
	static char out[BIG], in[BIG];
	struct ops o = { 0 };
	for (size_t i = 0; i < len; i++)
		out[i] = (char)(i * 13 + len);
	memset(in, 0, len);
	if (fi_trecv(S->ep, in, len, NULL, p->fa, ECHO_TAG, 0, op(&o, "echo recv")) ||
	    RETRY(fi_tsend(S->ep, out, len, NULL, p->fa, ECHO_TAG, op(&o, "echo send"))))
		return 0;
	int other = 0;
	settle(S, &o, 20000, &other);
	CHECK(other == 0, "%d completions of other operations while exchanging with a peer", other);
	return o.err[0] == 0 && o.err[1] == 0 && !memcmp(in, out, len);
}

/* Every op failed with FI_ECONNRESET between from + lo and from + hi ms. */
static void all_reset(struct ops *o, long from, long lo, long hi, const char *when)
{
	for (int i = 0; i < o->n; i++) {
		long ms = o->err[i] == -1 ? now_ms() - from : o->at[i] - from;
		CHECK(o->err[i] == FI_ECONNRESET && ms >= lo && ms <= hi, "%s: %s: %s after %ld ms (bounds %ld..%ld)", when, o->what[i],
		      o->err[i] == -1 ? "still pending" : o->err[i] == 0 ? "succeeded" : fi_strerror(o->err[i]), ms, lo, hi);
	}
}

static void case_stopped(struct res *S, struct peer *third)
{
	struct peer v;
	static char big[LONG_LEN], mid[30000], small[100], rd[65536];
	uint64_t res = 0, one = 1;
	struct ops o = { 0 };
	spawn(&v, S, 0);
	CHECK(echo(S, &v, 100) && echo(S, third, 100), "both peers answer");
	uint64_t errs0 = fi_cntr_readerr(S->cntr);
	stop_peer(&v);
	long t0 = now_ms();
	CHECK(RETRY(tsend_tc(S->ep, small, sizeof(small), v.fa, 1, op(&o, "eager send"))) == 0, "post eager send");
	CHECK(RETRY(tsend_tc(S->ep, mid, sizeof(mid), v.fa, 1, op(&o, "medium send"))) == 0, "post medium send");
	CHECK(RETRY(tsend_tc(S->ep, big, sizeof(big), v.fa, 1, op(&o, "long send"))) == 0, "post long send");
	{
		struct iovec iov = { small, sizeof(small) };
		struct fi_msg_tagged m = { .msg_iov = &iov, .iov_count = 1, .addr = v.fa, .tag = 1, .context = op(&o, "delivery complete send") };
		CHECK(RETRY(fi_tsendmsg(S->ep, &m, FI_DELIVERY_COMPLETE)) == 0, "post delivery complete send");
	}
	CHECK(RETRY(fi_write(S->ep, big, 65536, NULL, v.fa, v.h.addr, v.h.key, op(&o, "write"))) == 0, "post write");
	CHECK(RETRY(fi_read(S->ep, rd, sizeof(rd), NULL, v.fa, v.h.addr, v.h.key, op(&o, "read"))) == 0, "post read");
	CHECK(RETRY(fi_fetch_atomic(S->ep, &one, 1, NULL, &res, NULL, v.fa, v.h.addr, v.h.key, FI_UINT64, FI_SUM, op(&o, "fetch atomic"))) == 0,
	      "post fetch atomic");
	/* the third peer is served meanwhile; nothing towards the stopped one
	 * completes */
	CHECK(echo(S, third, 5000), "the third peer answers while the victim is stopped");
	int early = 0;
	for (int i = 0; i < o.n; i++)
		early += o.err[i] != -1;
	CHECK(early == 0, "%d operations towards the stopped peer completed", early);
	kill_peer(&v);
	settle(S, &o, (int)(timeout_ms + slack_ms), NULL);
	all_reset(&o, t0, dead_lo_ms, timeout_ms + slack_ms, "stopped then killed");
	CHECK(o.flags[0] & FI_SEND && o.flags[4] & FI_WRITE && o.flags[5] & FI_READ, "error completion flags %#llx %#llx %#llx",
	      (unsigned long long)o.flags[0], (unsigned long long)o.flags[4], (unsigned long long)o.flags[5]);
	CHECK(fi_cntr_readerr(S->cntr) == errs0 + 7, "errors counted: %llu", (unsigned long long)(fi_cntr_readerr(S->cntr) - errs0));

	/* a send to the dead address afterwards fails the same way */
	struct ops o2 = { 0 };
	t0 = now_ms();
	CHECK(RETRY(tsend_tc(S->ep, small, sizeof(small), v.fa, 1, op(&o2, "send after the death"))) == 0, "post");
	settle(S, &o2, (int)(timeout_ms + slack_ms), NULL);
	all_reset(&o2, t0, dead_lo_ms, timeout_ms + slack_ms, "dead address");
	CHECK(echo(S, third, BIG), "the third peer still answers (1 MiB)");
}

static void case_waiting(struct res *S, struct peer *third)
{
	struct peer v;
	static char big[LONG_LEN], small[100];
	struct ops o = { 0 };
	spawn(&v, S, 0);
	CHECK(echo(S, &v, 100), "the peer answers");
	/* taken by the peer, unanswered: it has no receive for tag 2 */
	CHECK(RETRY(tsend_tc(S->ep, big, sizeof(big), v.fa, 2, op(&o, "long send, no receive"))) == 0, "post long send");
	struct iovec iov = { small, sizeof(small) };
	struct fi_msg_tagged m = { .msg_iov = &iov, .iov_count = 1, .addr = v.fa, .tag = 2, .context = op(&o, "delivery complete, unexpected") };
	CHECK(RETRY(fi_tsendmsg(S->ep, &m, FI_DELIVERY_COMPLETE)) == 0, "post delivery complete send");
	usleep(200 * 1000); /* the peer has the packets (acknowledged) */
	settle(S, &o, 0, NULL);
	CHECK(o.err[0] == -1 && o.err[1] == -1, "both wait for the peer");
	kill_peer(&v);
	long t0 = now_ms();
	settle(S, &o, (int)(timeout_ms + slack_ms), NULL);
	all_reset(&o, t0, 0, timeout_ms + slack_ms, "waiting on the peer when killed");
	CHECK(echo(S, third, 100), "the third peer still answers");
}

static void case_leftovers(struct res *S, struct peer *third)
{
	struct peer v;
	static char in[LONG_LEN];
	char small[16] = { 0 };
	struct ops o = { 0 };
	int other = 0;
	spawn(&v, S, 0);
	/* the peer echoes an eager message and a long one; we receive the
	 * eager one only after its death, and post the long one's receive
	 * then too */
	static char out[LONG_LEN];
	memset(out, 'L', sizeof(out));
	CHECK(RETRY(fi_tsend(S->ep, "left", 5, NULL, v.fa, ECHO_TAG, op(&o, "send 1"))) == 0 &&
		      RETRY(fi_tsend(S->ep, out, sizeof(out), NULL, v.fa, ECHO_TAG, op(&o, "send 2"))) == 0,
	      "post sends");
	settle(S, &o, 20000, NULL);
	CHECK(o.err[0] == 0 && o.err[1] == 0, "sends to the peer complete: %d %d", o.err[0], o.err[1]);
	usleep(300 * 1000); /* its echoes arrive: unexpected here */
	kill_peer(&v);
	struct ops r = { 0 };
	CHECK(fi_trecv(S->ep, small, sizeof(small), NULL, FI_ADDR_UNSPEC, ECHO_TAG, 0, op(&r, "eager from the dead")) == 0, "recv");
	settle(S, &r, 5000, &other);
	CHECK(r.err[0] == 0 && !strcmp(small, "left"), "a message that arrived before the death is received: %d '%s'", r.err[0], small);
	struct ops r2 = { 0 };
	long t0 = now_ms();
	CHECK(fi_trecv(S->ep, in, sizeof(in), NULL, FI_ADDR_UNSPEC, ECHO_TAG, 0, op(&r2, "long from the dead")) == 0, "recv");
	settle(S, &r2, (int)(timeout_ms + slack_ms), &other);
	all_reset(&r2, t0, 0, timeout_ms + slack_ms, "receive matched to a dead peer's long message");
	CHECK(other == 0, "%d stray completions", other);
	CHECK(echo(S, third, 100), "the third peer still answers");
}

static void case_restart(void)
{
	struct res S;
	struct peer v, v2;
	static char big[LONG_LEN], small[100], hello[16];
	struct ops o = { 0 };
	/* a peer timeout no case here may reach */
	setenv(pvar("PEER_TIMEOUT_MS"), "60000", 1);
	open_res(&S, 0);
	spawn(&v, &S, 0);
	CHECK(echo(&S, &v, 100), "the peer answers");
	int port = port_of(v.h.name);
	stop_peer(&v);
	long t0 = now_ms();
	CHECK(RETRY(tsend_tc(S.ep, small, sizeof(small), v.fa, 1, op(&o, "eager send"))) == 0, "post eager send");
	CHECK(RETRY(tsend_tc(S.ep, big, sizeof(big), v.fa, 1, op(&o, "long send"))) == 0, "post long send");
	CHECK(RETRY(fi_write(S.ep, big, 65536, NULL, v.fa, v.h.addr, v.h.key, op(&o, "write"))) == 0, "post write");
	usleep(100 * 1000);
	kill_peer(&v);
	/* the same address, a new process: it says hello first */
	spawn(&v2, &S, port);
	CHECK(port_of(v2.h.name) == port && v2.fa == v.fa, "restarted at port %d (now %d), fi_addr %llu (was %llu)", port,
	      port_of(v2.h.name), (unsigned long long)v2.fa, (unsigned long long)v.fa);
	struct ops h = { 0 };
	memset(hello, 0, sizeof(hello));
	CHECK(fi_trecv(S.ep, hello, sizeof(hello), NULL, FI_ADDR_UNSPEC, HELLO_TAG, 0, op(&h, "hello")) == 0, "post hello receive");
	char c = 'h';
	CHECK(write(v2.wfd, &c, 1) == 1, "pipe");
	settle(&S, &o, 20000, NULL);
	all_reset(&o, t0, 0, 20000, "old process replaced");
	settle(&S, &h, 20000, NULL);
	CHECK(h.err[0] == 0 && !strcmp(hello, "hello"), "the new process's message arrives: %d '%s'", h.err[0], hello);
	CHECK(echo(&S, &v2, 100) && echo(&S, &v2, BIG), "messages both ways with the new process");
	CHECK(RETRY(fi_write(S.ep, big, 65536, NULL, v2.fa, v2.h.addr, v2.h.key, op(&o, "write to the new process"))) == 0, "post write");
	settle(&S, &o, 20000, NULL);
	CHECK(o.err[o.n - 1] == 0, "write to the new process: %d", o.err[o.n - 1]);
	dismiss(&v2);
	close_res(&S);
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IONBF, 0);
	setenv(pvar("IFACE"), "lo", 0);
	setenv(pvar("PEER_TIMEOUT_MS"), "500", 0);
	if (argc == 6 && !strcmp(argv[1], "peer"))
		return peer_main(argv);
	self = argv[0];
	timeout_ms = atol(getenv(pvar("PEER_TIMEOUT_MS")));
	/* Over connections a killed peer's sockets are reset at once: its
	 * operations fail from then on, not only after the peer timeout. */
	connected = !strcmp(prov_name(), "tcp");
	slack_ms = getenv("PEER_DEATH_SLACK_MS") ? atol(getenv("PEER_DEATH_SLACK_MS")) : 5000;
	const char *shm = getenv("FI_RUDP_ENABLE_SHM");
	int shm_on = !connected && (!shm || !(!strcmp(shm, "0") || !strcasecmp(shm, "false") || !strcasecmp(shm, "no") || !strcasecmp(shm, "off")));
	dead_lo_ms = connected || shm_on ? 0 : timeout_ms - 50;
	printf("peer timeout %ld ms, slack %ld ms, local peers through %s\n", timeout_ms, slack_ms,
	       connected ? "connections" : shm_on ? "shared memory" : "UDP");
	signal(SIGPIPE, SIG_IGN);

	struct res S;
	struct peer third;
	open_res(&S, 0);
	spawn(&third, &S, 0);
	static const char *names[] = { "stopped", "waiting", "leftovers", "restart" };
	for (int c = 0; c < 4; c++) {
		int f0 = failed;
		long t0 = now_ms();
		switch (c) {
		case 0:
			case_stopped(&S, &third);
			break;
		case 1:
			case_waiting(&S, &third);
			break;
		case 2:
			case_leftovers(&S, &third);
			break;
		case 3:
			case_restart();
			break;
		}
		printf("%-10s %s (%ld ms)\n", names[c], failed == f0 ? "ok" : "FAILED", now_ms() - t0);
	}
	CHECK(echo(&S, &third, 100), "the third peer answers at the end");
	dismiss(&third);
	close_res(&S);
	printf("%d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}
