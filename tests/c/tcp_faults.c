/* Faults of the tcp provider's RDM layer, over loopback (FI_TCP_IFACE=lo)
 * with FI_TCP_PEER_TIMEOUT_MS short (500 unless set). The survivor (this
 * process) runs its peers as separate processes (this program again,
 * exec'd with a role), each with one endpoint that echoes ECHO_TAG
 * messages back:
 *   crossing: a fresh peer and the survivor send to each other at the same
 *     moment (neither has a connection yet: both connect at once), ten
 *     messages each way from 1 B to 1 MiB, data checked on both sides;
 *     twelve rounds, each with a new peer;
 *   stalled: a peer is stopped (SIGSTOP) and stays alive: a send with the
 *     default completion level completes (the socket took it); sends of each
 *     protocol with FI_TRANSMIT_COMPLETE to it fail with FI_ECONNRESET once it has acknowledged
 *     nothing for the peer timeout (not before), and after it is continued
 *     (SIGCONT) it notices, and messages flow both ways again; a long
 *     message it had started before (unexpected here, its data never sent)
 *     fails the receive posted for it afterwards, instead of asking the
 *     peer's new incarnation for it;
 *   killed: a peer receiving a stream of 4 MiB messages is killed (SIGKILL)
 *     after the first arrived: every send completes, the unfinished ones
 *     with FI_ECONNRESET, within the peer timeout plus a margin;
 *   reset: (RESET_CASES=1, inside a private network namespace: nftables)
 *     while 1 MiB messages stream to a peer, its connections are reset by
 *     a rule answering the survivor's segments to its port with a TCP reset
 *     (`reject with tcp reset`): what was unfinished fails with
 *     FI_ECONNRESET, nothing hangs, and without the rule messages flow
 *     both ways again;
 *   blackhole: (RESET_CASES=1) a rule drops every segment to and from the
 *     peer's port (a half-open connection: no reset, no close): a send
 *     fails once the peer timeout passes; without the rule, messages flow
 *     again.
 * Another peer is echoed before and after each case. No wait is without
 * a limit. Prints "N passed, N failed". */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

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
#define CROSS_TAG 11
#define STREAM_TAG 12
#define LONG_TAG 13
#define BIG (1 << 20)
/* over FI_TCP_MEDIUM_MAX (1 MiB): sent with a request-to-send */
#define LONG_LEN (2 * BIG)
#define NCROSS 10

static const size_t cross_len[NCROSS] = { 1, 100, 4000, 65000, 70000, 200000, 300000, 700000, 1 << 20, 33 };

static long timeout_ms, slack_ms;

static long now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000L + t.tv_nsec / 1000000;
}

struct res {
	struct fi_info *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_cq *cq;
	struct fid_av *av;
	struct fid_ep *ep;
	char name[16];
};

static void open_res(struct res *r)
{
	struct fi_info *hints = fi_allocinfo();
	struct fi_cq_attr cq_attr = { .format = FI_CQ_FORMAT_TAGGED };
	struct fi_av_attr av_attr = { .type = FI_AV_TABLE };
	memset(r, 0, sizeof(*r));
	hints->ep_attr->type = FI_EP_RDM;
	hints->caps = FI_MSG | FI_TAGGED;
	hints->addr_format = FI_SOCKADDR_IN;
	hints->fabric_attr->prov_name = strdup("tcp");
	int ret = fi_getinfo(FI_VERSION(1, 18), NULL, NULL, 0, hints, &r->info);
	fi_freeinfo(hints);
	if (ret) {
		printf("FAIL [%s] fi_getinfo: %d\n", who, ret);
		exit(2);
	}
	if (fi_fabric(r->info->fabric_attr, &r->fabric, NULL) || fi_domain(r->fabric, r->info, &r->domain, NULL) ||
	    fi_cq_open(r->domain, &cq_attr, &r->cq, NULL) || fi_av_open(r->domain, &av_attr, &r->av, NULL) ||
	    fi_endpoint(r->domain, r->info, &r->ep, NULL) || fi_ep_bind(r->ep, &r->av->fid, 0) ||
	    fi_ep_bind(r->ep, &r->cq->fid, FI_TRANSMIT | FI_RECV) || fi_enable(r->ep)) {
		printf("FAIL [%s] opening an endpoint\n", who);
		exit(2);
	}
	size_t len = sizeof(r->name);
	if (fi_getname(&r->ep->fid, r->name, &len) || len != sizeof(r->name))
		exit(2);
}

static void close_res(struct res *r)
{
	CHECK(fi_close(&r->ep->fid) == 0 && fi_close(&r->cq->fid) == 0 && fi_close(&r->av->fid) == 0 &&
		      fi_close(&r->domain->fid) == 0 && fi_close(&r->fabric->fid) == 0,
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

/* The byte at offset i of message k sent by side s (0 survivor, 1 peer). */
static char pattern(int s, int k, size_t i)
{
	return (char)(s * 101 + k * 7 + i * 13 + (i >> 9));
}

/* Outcomes of operations identified by their contexts. */
#define MAXOPS 40
struct ops {
	int n;
	const char *what[MAXOPS];
	struct fi_context ctx[MAXOPS];
	int err[MAXOPS]; /* -1 pending, 0 done, else the error */
	long at[MAXOPS];
	size_t len[MAXOPS];
};

static struct fi_context *op(struct ops *o, const char *what)
{
	o->what[o->n] = what;
	o->err[o->n] = -1;
	return &o->ctx[o->n++];
}

static int pending(const struct ops *o)
{
	int p = 0;
	for (int i = 0; i < o->n; i++)
		p += o->err[i] == -1;
	return p;
}

/* Reads one completion into o (another context's is counted in
 * `other`); 0 when there was none (after a short pause), -1 on an error. */
static int step(struct res *S, struct ops *o, int *other)
{
	struct fi_cq_tagged_entry e;
	struct fi_cq_err_entry err = { 0 };
	void *ctx;
	int code = 0;
	size_t len = 0;
	ssize_t n = fi_cq_read(S->cq, &e, 1);
	if (n == -FI_EAGAIN) {
		usleep(100);
		return 0;
	}
	if (n == 1) {
		ctx = e.op_context;
		len = e.len;
	} else if (n == -FI_EAVAIL && fi_cq_readerr(S->cq, &err, 0) == 1) {
		ctx = err.op_context;
		code = err.err;
	} else {
		CHECK(0, "cq read: %zd", n);
		return -1;
	}
	int i = o ? (int)((struct fi_context *)ctx - o->ctx) : -1;
	if (ctx && o && i >= 0 && i < o->n) {
		o->err[i] = code;
		o->at[i] = now_ms();
		o->len[i] = len;
	} else if (other) {
		(*other)++;
	}
	return 1;
}

/* Reads completions into o until every op is settled or `ms` pass. */
static void settle(struct res *S, struct ops *o, int ms, int *other)
{
	long end = now_ms() + ms;
	while (pending(o) && now_ms() <= end)
		if (step(S, o, other) < 0)
			return;
}

/* --------------------------------------------------------------- a peer */

/* argv: peer WFD RFD SURVIVOR-NAME. Writes its name, then echoes
 * ECHO_TAG messages and takes one STREAM_TAG message (then writes 'r' on
 * the pipe; 'n' posts the receive for the next one) until the pipe says
 * 'q'. 'L': sends one 1 MiB LONG_TAG message. 'g': sends NCROSS
 * CROSS_TAG messages to the survivor at once and receives as many,
 * then writes '0' (all well) or '1' on the pipe. */
static int peer_main(char **argv)
{
	int wfd = atoi(argv[2]), rfd = atoi(argv[3]);
	char sname[16];
	struct res r;
	who = "peer";
	unhex(argv[4], sname, sizeof(sname));
	open_res(&r);
	fi_addr_t s = FI_ADDR_NOTAVAIL;
	if (fi_av_insert(r.av, sname, 1, &s, 0, NULL) != 1)
		return 2;
	/* echoes go out of four buffers in turn: one may still be read while
	 * the next request arrives */
	char *buf = malloc(BIG), *sbuf = malloc(4 * BIG), *stream = malloc(4 * BIG);
	if (write(wfd, r.name, sizeof(r.name)) != sizeof(r.name))
		return 2;
	struct fi_context rctx, sctx[4], stctx, lctx;
	int next = 0;
	if (fi_trecv(r.ep, buf, BIG, NULL, FI_ADDR_UNSPEC, ECHO_TAG, 0, &rctx) ||
	    fi_trecv(r.ep, stream, 4 * BIG, NULL, FI_ADDR_UNSPEC, STREAM_TAG, 0, &stctx))
		return 2;
	for (;;) {
		struct pollfd p = { .fd = rfd, .events = POLLIN };
		if (poll(&p, 1, 1) == 1) {
			char c = 'q';
			if (read(rfd, &c, 1) != 1 || c == 'q')
				break;
			if (c == 'n' && fi_trecv(r.ep, stream, 4 * BIG, NULL, FI_ADDR_UNSPEC, STREAM_TAG, 0, &stctx))
				return 3;
			if (c == 'L' && RETRY(fi_tsend(r.ep, stream, LONG_LEN, NULL, s, LONG_TAG, &lctx)))
				return 3;
			if (c == 'g') {
				static char out[NCROSS][BIG], in[NCROSS][BIG];
				struct ops o = { 0 };
				for (int k = 0; k < NCROSS; k++)
					if (fi_trecv(r.ep, in[k], BIG, NULL, FI_ADDR_UNSPEC, CROSS_TAG + (k << 8), 0, op(&o, "recv")))
						return 3;
				for (int k = 0; k < NCROSS; k++) {
					for (size_t i = 0; i < cross_len[k]; i++)
						out[k][i] = pattern(1, k, i);
					if (RETRY(fi_tsend(r.ep, out[k], cross_len[k], NULL, s, CROSS_TAG + (k << 8), op(&o, "send"))))
						return 3;
				}
				settle(&r, &o, 30000, NULL);
				int ok = !pending(&o);
				for (int k = 0; k < 2 * NCROSS && ok; k++)
					ok = o.err[k] == 0;
				for (int k = 0; k < NCROSS && ok; k++) {
					ok = o.len[k] == cross_len[k];
					for (size_t i = 0; i < cross_len[k] && ok; i++)
						ok = in[k][i] == pattern(0, k, i);
				}
				c = ok ? '0' : '1';
				for (int k = 0; k < 2 * NCROSS && !ok; k++)
					printf("    [peer] %s %d: %s, %zu bytes\n", o.what[k], k % NCROSS,
					       o.err[k] == -1 ? "pending" : o.err[k] ? fi_strerror(o.err[k]) : "done", o.len[k]);
				if (write(wfd, &c, 1) != 1)
					return 3;
			}
		}
		struct fi_cq_tagged_entry e;
		ssize_t n = fi_cq_read(r.cq, &e, 1);
		if (n == -FI_EAVAIL) {
			struct fi_cq_err_entry err = { 0 };
			fi_cq_readerr(r.cq, &err, 0);
			/* a receive failed with its sender: post it again */
			if (err.op_context == &stctx && fi_trecv(r.ep, stream, 4 * BIG, NULL, FI_ADDR_UNSPEC, STREAM_TAG, 0, &stctx))
				return 3;
			if (err.op_context == &rctx && fi_trecv(r.ep, buf, BIG, NULL, FI_ADDR_UNSPEC, ECHO_TAG, 0, &rctx))
				return 3;
			continue;
		}
		if (n != 1)
			continue;
		if (e.op_context == &stctx) {
			char c = 'r';
			if (write(wfd, &c, 1) != 1)
				return 3;
			continue;
		}
		if (e.op_context != &rctx)
			continue;
		/* echo it back, then take the next */
		char *b = sbuf + (size_t)next * BIG;
		memcpy(b, buf, e.len);
		if (RETRY(fi_tsend(r.ep, b, e.len, NULL, s, ECHO_TAG, &sctx[next])) != 0)
			return 3;
		next = (next + 1) % 4;
		if (fi_trecv(r.ep, buf, BIG, NULL, FI_ADDR_UNSPEC, ECHO_TAG, 0, &rctx))
			return 3;
	}
	close_res(&r);
	free(buf);
	free(sbuf);
	free(stream);
	return 0;
}

/* ----------------------------------------------------------- the survivor */

struct peer {
	pid_t pid;
	int wfd, rfd; /* to it, from it */
	char name[16];
	fi_addr_t fa;
};

static const char *self;

static void spawn(struct peer *p, struct res *S)
{
	int to[2], from[2];
	if (pipe(to) || pipe(from))
		exit(2);
	char a1[16], a2[16], sname[40];
	snprintf(a1, sizeof(a1), "%d", from[1]);
	snprintf(a2, sizeof(a2), "%d", to[0]);
	hex(S->name, sizeof(S->name), sname);
	p->pid = fork();
	if (p->pid == 0) {
		close(to[1]);
		close(from[0]);
		execl(self, self, "peer", a1, a2, sname, (char *)NULL);
		_exit(127);
	}
	close(to[0]);
	close(from[1]);
	p->wfd = to[1];
	p->rfd = from[0];
	struct pollfd pf = { .fd = p->rfd, .events = POLLIN };
	if (poll(&pf, 1, 20000) != 1 || read(p->rfd, p->name, sizeof(p->name)) != sizeof(p->name)) {
		printf("FAIL [%s] a peer did not start\n", who);
		exit(2);
	}
	p->fa = FI_ADDR_NOTAVAIL;
	CHECK(fi_av_insert(S->av, p->name, 1, &p->fa, 0, NULL) == 1, "insert peer");
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

static void kill_peer(struct peer *p)
{
	kill(p->pid, SIGKILL);
	waitpid(p->pid, NULL, 0);
	close(p->wfd);
	close(p->rfd);
}

/* Reads what a peer wrote on its pipe within ms: the byte, or 0.
 * Completions meanwhile go into o. */
static char from_peer(struct res *S, struct peer *p, int ms, struct ops *o)
{
	long end = now_ms() + ms;
	while (now_ms() <= end) {
		struct pollfd pf = { .fd = p->rfd, .events = POLLIN };
		if (poll(&pf, 1, 0) == 1) {
			char c = 0;
			return read(p->rfd, &c, 1) == 1 ? c : 0;
		}
		if (step(S, o, NULL) < 0)
			return 0;
	}
	return 0;
}

/* A message of `len` bytes to p and its echo back, checked. */
static int echo(struct res *S, struct peer *p, size_t len)
{
	static char out[BIG], in[BIG];
	struct ops o = { 0 };
	for (size_t i = 0; i < len; i++)
		out[i] = (char)(i * 31 + len);
	memset(in, 0, len);
	if (fi_trecv(S->ep, in, BIG, NULL, p->fa, ECHO_TAG, 0, op(&o, "echo recv")))
		return 0;
	if (RETRY(fi_tsend(S->ep, out, len, NULL, p->fa, ECHO_TAG, op(&o, "echo send"))))
		return 0;
	settle(S, &o, 20000, NULL);
	if (pending(&o)) {
		fi_cancel(&S->ep->fid, &o.ctx[0]);
		struct ops c = o;
		settle(S, &c, 1000, NULL);
	}
	return o.err[0] == 0 && o.err[1] == 0 && o.len[0] == len && !memcmp(in, out, len);
}

/* Every op of o failed with FI_ECONNRESET or (allow_ok) succeeded, each
 * error within [lo, hi] ms of `from`; at least one failed. */
static void check_reset(struct ops *o, long from, long lo, long hi, int allow_ok, const char *when)
{
	int errs = 0;
	for (int i = 0; i < o->n; i++) {
		long ms = o->err[i] == -1 ? now_ms() - from : o->at[i] - from;
		int good = o->err[i] == FI_ECONNRESET || (allow_ok && o->err[i] == 0);
		errs += o->err[i] == FI_ECONNRESET;
		CHECK(good && (o->err[i] == 0 || (ms >= lo && ms <= hi)), "%s: %s: %s after %ld ms (bounds %ld..%ld)", when, o->what[i],
		      o->err[i] == -1 ? "still pending" : o->err[i] == 0 ? "succeeded" : fi_strerror(o->err[i]), ms, lo, hi);
	}
	CHECK(errs > 0, "%s: no operation failed", when);
}

static void nft(const char *cmd)
{
	char full[512];
	snprintf(full, sizeof(full), "nft '%s'", cmd);
	CHECK(system(full) == 0, "%s", full);
}

static void case_crossing(struct res *S0, struct peer *third)
{
	static char out[NCROSS][BIG], in[NCROSS][BIG];
	/* no peer timeout here: an endpoint of its own, and its peers, with
	 * the default one (a loaded machine must not fail a round) */
	char saved[32];
	snprintf(saved, sizeof(saved), "%s", getenv("FI_TCP_PEER_TIMEOUT_MS"));
	unsetenv("FI_TCP_PEER_TIMEOUT_MS");
	struct res S1, *S = &S1;
	open_res(S);
	for (int k = 0; k < NCROSS; k++)
		for (size_t i = 0; i < cross_len[k]; i++)
			out[k][i] = pattern(0, k, i);
	int bad = 0;
	for (int round = 0; round < 12; round++) {
		struct peer v;
		struct ops o = { 0 };
		spawn(&v, S);
		for (int k = 0; k < NCROSS; k++)
			CHECK(fi_trecv(S->ep, in[k], BIG, NULL, v.fa, CROSS_TAG + (k << 8), 0, op(&o, "recv")) == 0, "post recv");
		char g = 'g';
		CHECK(write(v.wfd, &g, 1) == 1, "pipe");
		for (int k = 0; k < NCROSS; k++)
			CHECK(RETRY(fi_tsend(S->ep, out[k], cross_len[k], NULL, v.fa, CROSS_TAG + (k << 8), op(&o, "send"))) == 0, "post send");
		settle(S, &o, 30000, NULL);
		int ok = !pending(&o);
		for (int k = 0; k < 2 * NCROSS; k++)
			ok = ok && o.err[k] == 0;
		for (int k = 0; k < NCROSS && ok; k++) {
			ok = o.len[k] == cross_len[k];
			for (size_t i = 0; i < cross_len[k] && ok; i++)
				ok = in[k][i] == pattern(1, k, i);
		}
		char c = from_peer(S, &v, 30000, &o);
		CHECK(ok && c == '0', "round %d: here %s, at the peer '%c'", round, ok ? "all well" : "FAILED", c ? c : '-');
		for (int k = 0; k < 2 * NCROSS && !ok; k++)
			printf("    %s %d: %s, %zu bytes\n", o.what[k], k % NCROSS,
			       o.err[k] == -1 ? "pending" : o.err[k] ? fi_strerror(o.err[k]) : "done", o.len[k]);
		bad += !(ok && c == '0');
		CHECK(echo(S, &v, 100), "round %d: echo after the crossing", round);
		dismiss(&v);
	}
	close_res(S);
	setenv("FI_TCP_PEER_TIMEOUT_MS", saved, 1);
	CHECK(bad == 0, "%d rounds failed", bad);
	CHECK(echo(S0, third, 100), "the third peer answers");
}

static void case_stalled(struct res *S, struct peer *third)
{
	static char small[100], big[LONG_LEN];
	struct peer v;
	struct ops o = { 0 };
	int st = 0;
	spawn(&v, S);
	CHECK(echo(S, &v, 100), "the peer answers");
	/* a long message from it, unexpected here: wait until it is announced */
	static char longbuf[LONG_LEN];
	char cmd = 'L';
	CHECK(write(v.wfd, &cmd, 1) == 1, "pipe");
	int seen = 0;
	for (long end = now_ms() + 20000; !seen && now_ms() < end;) {
		struct ops pk = { 0 };
		struct fi_msg_tagged m = { .msg_iov = NULL, .iov_count = 0, .addr = v.fa, .tag = LONG_TAG, .context = op(&pk, "peek") };
		if (fi_trecvmsg(S->ep, &m, FI_PEEK) == 0)
			settle(S, &pk, 5000, NULL);
		seen = pk.err[0] == 0;
	}
	CHECK(seen, "the long message is announced");
	/* its last packet may come before the echo ends: the timeout runs from
	 * before it */
	long t_alive = now_ms();
	CHECK(echo(S, &v, BIG), "the peer answers (1 MiB)");
	kill(v.pid, SIGSTOP);
	CHECK(waitpid(v.pid, &st, WUNTRACED) == v.pid && WIFSTOPPED(st), "peer stopped: status %#x", st);
	{
		/* the default completion level: complete once the socket took it */
		struct ops d = { 0 };
		CHECK(RETRY(fi_tsend(S->ep, small, sizeof(small), NULL, v.fa, 3, op(&d, "default send"))) == 0, "post");
		settle(S, &d, 5000, NULL);
		CHECK(d.err[0] == 0, "a send with the default completion level to a stopped peer: %s",
		      d.err[0] == -1 ? "still pending" : d.err[0] ? fi_strerror(d.err[0]) : "succeeded");
	}
	long t0 = now_ms();
	CHECK(RETRY(tsend_tc(S->ep, small, sizeof(small), v.fa, 1, op(&o, "eager send"))) == 0, "post");
	CHECK(RETRY(tsend_tc(S->ep, big, 30000, v.fa, 1, op(&o, "medium send"))) == 0, "post");
	CHECK(RETRY(tsend_tc(S->ep, big, sizeof(big), v.fa, 1, op(&o, "long send"))) == 0, "post");
	{
		struct iovec iov = { small, sizeof(small) };
		struct fi_msg_tagged m = { .msg_iov = &iov, .iov_count = 1, .addr = v.fa, .tag = 1, .context = op(&o, "delivery complete send") };
		CHECK(RETRY(fi_tsendmsg(S->ep, &m, FI_DELIVERY_COMPLETE)) == 0, "post");
	}
	CHECK(echo(S, third, 100), "the third peer answers while the victim is stopped");
	settle(S, &o, (int)(timeout_ms + slack_ms), NULL);
	check_reset(&o, t_alive, timeout_ms - 50, timeout_ms + slack_ms + (t0 - t_alive), 0, "stopped");
	kill(v.pid, SIGCONT);
	/* it notices the closed connections; then both start afresh */
	int ok = 0;
	for (int i = 0; i < 5 && !ok; i++)
		ok = echo(S, &v, 100);
	CHECK(ok && echo(S, &v, BIG), "messages flow again after the stalled peer continued");
	struct ops lo = { 0 };
	CHECK(fi_trecv(S->ep, longbuf, sizeof(longbuf), NULL, v.fa, LONG_TAG, 0, op(&lo, "receive of the lost long message")) == 0, "post");
	long t_lo = now_ms();
	settle(S, &lo, (int)(timeout_ms + slack_ms), NULL);
	CHECK(lo.err[0] == FI_ECONNRESET, "the receive of a long message whose sender was lost: %s after %ld ms",
	      lo.err[0] == -1 ? "still pending" : lo.err[0] ? fi_strerror(lo.err[0]) : "succeeded", now_ms() - t_lo);
	CHECK(echo(S, &v, 100), "and the peer still answers");
	dismiss(&v);
	CHECK(echo(S, third, 100), "the third peer answers");
}

static void case_killed(struct res *S, struct peer *third)
{
	static char big[4 * BIG];
	struct peer v;
	struct ops o = { 0 };
	spawn(&v, S);
	CHECK(echo(S, &v, 100), "the peer answers");
	/* the first is received, the others wait for receives at the peer */
	for (int i = 0; i < 16; i++)
		CHECK(RETRY(tsend_tc(S->ep, big, sizeof(big), v.fa, STREAM_TAG, op(&o, "4 MiB send"))) == 0, "post");
	CHECK(from_peer(S, &v, 20000, &o) == 'r', "the first message arrived");
	long t0 = now_ms();
	kill_peer(&v);
	settle(S, &o, (int)(timeout_ms + slack_ms), NULL);
	check_reset(&o, t0, 0, timeout_ms + slack_ms, 1, "killed mid-transfer");
	CHECK(echo(S, third, BIG), "the third peer answers (1 MiB)");
}

static void case_reset(struct res *S, struct peer *third)
{
	static char big[BIG];
	char rule[256];
	struct peer v;
	struct ops o = { 0 };
	spawn(&v, S);
	CHECK(echo(S, &v, 100), "the peer answers");
	nft("add table inet rft");
	nft("add chain inet rft in { type filter hook input priority 0; }");
	/* the first is received, the others wait for receives at the peer
	 * (and the survivor probes it meanwhile) */
	for (int i = 0; i < 8; i++)
		CHECK(RETRY(tsend_tc(S->ep, big, sizeof(big), v.fa, STREAM_TAG, op(&o, "1 MiB send"))) == 0, "post");
	CHECK(from_peer(S, &v, 20000, &o) == 'r', "the first message arrived");
	long t0 = now_ms();
	snprintf(rule, sizeof(rule), "add rule inet rft in tcp dport %d reject with tcp reset", port_of(v.name));
	nft(rule);
	settle(S, &o, (int)(timeout_ms + slack_ms), NULL);
	check_reset(&o, t0, 0, timeout_ms + slack_ms, 1, "connection reset");
	nft("delete table inet rft");
	int ok = 0;
	for (int i = 0; i < 5 && !ok; i++)
		ok = echo(S, &v, 100);
	CHECK(ok && echo(S, &v, BIG), "messages flow again without the rule");
	dismiss(&v);
	CHECK(echo(S, third, 100), "the third peer answers");
}

static void case_blackhole(struct res *S, struct peer *third)
{
	static char small[100];
	char rule[256];
	struct peer v;
	struct ops o = { 0 };
	spawn(&v, S);
	CHECK(echo(S, &v, 100), "the peer answers");
	int port = port_of(v.name);
	nft("add table inet rft");
	nft("add chain inet rft in { type filter hook input priority 0; }");
	snprintf(rule, sizeof(rule), "add rule inet rft in tcp dport %d drop", port);
	nft(rule);
	snprintf(rule, sizeof(rule), "add rule inet rft in tcp sport %d drop", port);
	nft(rule);
	long t0 = now_ms();
	CHECK(RETRY(tsend_tc(S->ep, small, sizeof(small), v.fa, 1, op(&o, "send into the void"))) == 0, "post");
	settle(S, &o, (int)(timeout_ms + slack_ms), NULL);
	check_reset(&o, t0, timeout_ms - 50, timeout_ms + slack_ms, 0, "half-open");
	nft("delete table inet rft");
	int ok = 0;
	for (int i = 0; i < 5 && !ok; i++)
		ok = echo(S, &v, 100);
	CHECK(ok, "messages flow again without the rule");
	dismiss(&v);
	CHECK(echo(S, third, 100), "the third peer answers");
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IONBF, 0);
	setenv("FI_TCP_IFACE", "lo", 0);
	setenv("FI_TCP_PEER_TIMEOUT_MS", "500", 0);
	if (argc == 5 && !strcmp(argv[1], "peer"))
		return peer_main(argv);
	self = argv[0];
	timeout_ms = atol(getenv("FI_TCP_PEER_TIMEOUT_MS"));
	slack_ms = getenv("PEER_DEATH_SLACK_MS") ? atol(getenv("PEER_DEATH_SLACK_MS")) : 5000;
	int resets = getenv("RESET_CASES") && !strcmp(getenv("RESET_CASES"), "1");
	printf("peer timeout %ld ms, slack %ld ms%s\n", timeout_ms, slack_ms, resets ? ", with nftables cases" : "");
	signal(SIGPIPE, SIG_IGN);

	struct res S;
	struct peer third;
	open_res(&S);
	spawn(&third, &S);
	static const char *names[] = { "crossing", "stalled", "killed", "reset", "blackhole" };
	int ncases = resets ? 5 : 3;
	const char *only = getenv("TCP_FAULTS_CASE"); /* one case, by name */
	for (int c = 0; c < ncases; c++) {
		if (only && strcmp(only, names[c]))
			continue;
		int f0 = failed;
		long t0 = now_ms();
		switch (c) {
		case 0:
			case_crossing(&S, &third);
			break;
		case 1:
			case_stalled(&S, &third);
			break;
		case 2:
			case_killed(&S, &third);
			break;
		case 3:
			case_reset(&S, &third);
			break;
		case 4:
			case_blackhole(&S, &third);
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
