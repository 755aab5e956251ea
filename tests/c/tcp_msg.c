/* The tcp provider's FI_EP_MSG endpoints through the C API, in one process
 * over loopback (FI_TCP_IFACE=lo): a passive endpoint, a client endpoint and
 * the server endpoint accepted for it.
 *   connection management: fi_passive_ep / fi_pep_bind / fi_listen /
 *   fi_getname on the passive endpoint; fi_connect with connection data,
 *   FI_CONNREQ (the data, the info's handle, src and dest addresses),
 *   fi_endpoint on that info, fi_accept with data, FI_CONNECTED on both
 *   sides (the client's with the accept data), fi_getpeer / fi_getname;
 *   fi_reject with data (the client's FI_ECONNREFUSED error event carries
 *   it as err_data); a connection to a port nobody listens on
 *   (FI_ECONNREFUSED); fi_shutdown (FI_SHUTDOWN at the peer, its posted
 *   receive cancelled); an FI_CONNREQ peeked and left unread when its EQ
 *   and passive endpoint close (the leak check sees its info freed);
 *   messages: 0 B .. 8 MiB both ways, data checked; several iovs;
 *   receives posted after the data arrived; fi_senddata (FI_REMOTE_CQ_DATA);
 *   fi_inject; truncation (FI_ETRUNC and olen);
 *   RMA (FI_MR_VIRT_ADDR | FI_MR_PROV_KEY): fi_write and fi_read of 1 B ..
 *   1 MiB read back, fi_writedata (FI_REMOTE_CQ_DATA at the target),
 *   fi_inject_write, a bad key (FI_EKEYREJECTED), beyond the region
 *   (FI_EINVAL), without remote-read access (FI_EACCES);
 *   bad input: fi_listen / fi_connect / fi_accept without an EQ
 *   (-FI_ENOEQ), fi_listen twice, fi_connect twice (-FI_EOPBADSTATE),
 *   fi_connect with a NULL address or NULL param and a length (-FI_EINVAL),
 *   fi_accept on an endpoint not opened on a request (-FI_EINVAL),
 *   fi_reject with a handle that is no request (-FI_EINVAL), fi_endpoint
 *   twice on one request (-FI_EINVAL), fi_passive_ep on an FI_EP_RDM info
 *   (-FI_EINVAL), fi_shutdown with flags (-FI_EBADFLAGS) or unconnected
 *   (-FI_EOPBADSTATE), fi_send before FI_CONNECTED (-FI_EOPBADSTATE),
 *   fi_getpeer unconnected (-FI_ENOTCONN), fi_getname with a short buffer
 *   (-FI_ETOOSMALL and the length), FI_OPT_CM_DATA_SIZE.
 * Prints "N passed, N failed"; exits non-zero on a failure. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static int passed, failed;

#define CHECK(cond, ...)                                                 \
	do {                                                             \
		if (cond) {                                              \
			passed++;                                        \
		} else {                                                 \
			failed++;                                        \
			printf("FAIL %s:%d: ", __FILE__, __LINE__);      \
			printf(__VA_ARGS__);                             \
			printf("\n");                                    \
			fflush(stdout);                                  \
		}                                                        \
	} while (0)

#define MUST(call)                                                              \
	do {                                                                    \
		int r_ = (int)(call);                                           \
		if (r_) {                                                       \
			printf("FATAL %s:%d: %s = %d (%s)\n", __FILE__, __LINE__, \
			       #call, r_, fi_strerror(-r_));                    \
			exit(1);                                                \
		}                                                               \
	} while (0)

#define EQ_TIMEOUT 10000

static struct fi_info *info;
static struct fid_fabric *fabric;
static struct fid_domain *domain;

struct cm_ev {
	struct fi_eq_cm_entry e;
	char data[256];
};

struct side {
	struct fid_eq *eq;
	struct fid_cq *cq;
	struct fid_ep *ep;
};

static void open_eq(struct fid_eq **eq)
{
	struct fi_eq_attr a = { .wait_obj = FI_WAIT_UNSPEC };
	MUST(fi_eq_open(fabric, &a, eq, NULL));
}

/* An endpoint on `dom` for `fi` with its CQ and EQ bound. */
static void open_side(struct side *s, struct fid_domain *dom, struct fi_info *fi, void *ctx)
{
	struct fi_cq_attr ca = { .format = FI_CQ_FORMAT_DATA, .size = 1024 };
	open_eq(&s->eq);
	MUST(fi_cq_open(dom, &ca, &s->cq, NULL));
	MUST(fi_endpoint(dom, fi, &s->ep, ctx));
	MUST(fi_ep_bind(s->ep, &s->eq->fid, 0));
	MUST(fi_ep_bind(s->ep, &s->cq->fid, FI_TRANSMIT | FI_RECV));
}

static void close_side(struct side *s)
{
	if (s->ep)
		MUST(fi_close(&s->ep->fid));
	MUST(fi_close(&s->cq->fid));
	MUST(fi_close(&s->eq->fid));
	memset(s, 0, sizeof *s);
}

/* The next event of `eq`: its type, or -err (the error entry in *err). */
static ssize_t next_event(struct fid_eq *eq, struct cm_ev *ev, struct fi_eq_err_entry *err, size_t *len)
{
	uint32_t event;
	ssize_t r = fi_eq_sread(eq, &event, ev, sizeof *ev, EQ_TIMEOUT, 0);
	if (r == -FI_EAVAIL) {
		memset(err, 0, sizeof *err);
		r = fi_eq_readerr(eq, err, 0);
		return r < 0 ? r : -(ssize_t)err->err;
	}
	if (r < 0)
		return r;
	if (len)
		*len = (size_t)r;
	return event;
}

/* Reads one completion of `cq`, driving progress; the error entry on
 * -FI_EAVAIL. */
static ssize_t wait_cq(struct fid_cq *cq, struct fi_cq_data_entry *c, struct fi_cq_err_entry *err)
{
	for (long i = 0; i < 200000000L; i++) {
		ssize_t r = fi_cq_read(cq, c, 1);
		if (r == -FI_EAGAIN) {
			if (i > 1000)
				usleep(10);
			continue;
		}
		if (r == -FI_EAVAIL) {
			memset(err, 0, sizeof *err);
			r = fi_cq_readerr(cq, err, 0);
			return r < 0 ? r : -(ssize_t)err->err;
		}
		return r;
	}
	return -FI_ETIMEDOUT;
}

static void fill(char *b, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		b[i] = (char)(seed * 131 + i * 7 + (i >> 9));
}

static int same(const char *b, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		if (b[i] != (char)(seed * 131 + i * 7 + (i >> 9)))
			return 0;
	return 1;
}

/* Client `c` connects to the passive endpoint at `addr` with `data`. */
static ssize_t connect_to(struct side *c, const void *addr, const char *data)
{
	return fi_connect(c->ep, addr, data, data ? strlen(data) + 1 : 0);
}

/* Accepts the next request on `peq`: the server side in `s`. */
static void accept_one(struct fid_eq *peq, struct side *s, const char *want_data, const char *reply)
{
	struct cm_ev ev;
	struct fi_eq_err_entry err;
	size_t len = 0;
	ssize_t r = next_event(peq, &ev, &err, &len);
	CHECK(r == FI_CONNREQ, "event %zd, wanted FI_CONNREQ", r);
	if (r != FI_CONNREQ)
		exit(1);
	CHECK(len == sizeof ev.e + strlen(want_data) + 1, "CONNREQ length %zu", len);
	CHECK(strcmp(ev.data, want_data) == 0, "CONNREQ data '%s'", ev.data);
	struct fi_info *ri = ev.e.info;
	CHECK(ri && ri->handle && ri->handle->fclass == FI_CLASS_CONNREQ, "info handle");
	CHECK(ri->dest_addr && ri->dest_addrlen == sizeof(struct sockaddr_in), "peer address in the info");
	CHECK(ri->src_addr && ri->src_addrlen == sizeof(struct sockaddr_in), "local address in the info");
	CHECK(ri->ep_attr->type == FI_EP_MSG, "ep type");
	open_side(s, domain, ri, s);
	/* The request now belongs to that endpoint. */
	struct fid_ep *again = NULL;
	CHECK(fi_endpoint(domain, ri, &again, NULL) == -FI_EINVAL, "fi_endpoint twice on one request");
	MUST(fi_accept(s->ep, reply, strlen(reply) + 1));
	CHECK(fi_accept(s->ep, NULL, 0) == -FI_EOPBADSTATE, "fi_accept twice");
	r = next_event(s->eq, &ev, &err, &len);
	CHECK(r == FI_CONNECTED && ev.e.fid == &s->ep->fid, "server FI_CONNECTED: %zd", r);
	fi_freeinfo(ri);
}

static void wait_connected(struct side *c, const char *want_data)
{
	struct cm_ev ev;
	struct fi_eq_err_entry err;
	size_t len = 0;
	ssize_t r = next_event(c->eq, &ev, &err, &len);
	CHECK(r == FI_CONNECTED, "client event %zd (%s)", r, r < 0 ? fi_strerror((int)-r) : "");
	if (r != FI_CONNECTED)
		exit(1);
	CHECK(ev.e.fid == &c->ep->fid, "FI_CONNECTED names the endpoint");
	CHECK(ev.e.info == NULL, "FI_CONNECTED without info");
	CHECK(len == sizeof ev.e + strlen(want_data) + 1 && strcmp(ev.data, want_data) == 0, "accept data '%s' (%zu)", ev.data, len);
}

/* One message of `n` bytes from `a` to `b`, the receive posted before or
 * after the send. */
static void one_message(struct side *a, struct side *b, size_t n, int recv_first, unsigned seed)
{
	char *sb = malloc(n + 1), *rb = malloc(n + 1);
	struct fi_cq_data_entry c;
	fill(sb, n, seed);
	memset(rb, 0, n + 1);
	if (recv_first)
		MUST(fi_recv(b->ep, rb, n, NULL, 0, rb));
	ssize_t r = fi_send(a->ep, sb, n, NULL, 0, sb);
	CHECK(r == 0, "fi_send %zu: %zd", n, r);
	if (!recv_first) {
		/* Let the data arrive (unexpected) before the receive: reads of
		 * b's queue, which holds nothing, progress b. */
		for (int i = 0; i < 100; i++) {
			r = fi_cq_read(b->cq, &c, 1);
			CHECK(r == -FI_EAGAIN, "nothing for b yet: %zd", r);
			usleep(100);
		}
		MUST(fi_recv(b->ep, rb, n, NULL, 0, rb));
	}
	/* Both queues are read: each read progresses its own side (the sender
	 * hands on what its connection took). */
	int sent = 0, got = 0;
	for (long i = 0; (!sent || !got) && i < 100000000L; i++) {
		struct side *s = (i & 1) ? b : a;
		r = fi_cq_read(s->cq, &c, 1);
		if (r == -FI_EAGAIN)
			continue;
		CHECK(r == 1, "completion for %zu bytes: %zd", n, r);
		if (r != 1)
			exit(1);
		if (c.op_context == sb) {
			CHECK(c.flags == (FI_SEND | FI_MSG), "send flags %#llx", (unsigned long long)c.flags);
			sent = 1;
		} else if (c.op_context == rb) {
			CHECK(c.len == n && c.flags == (FI_RECV | FI_MSG), "recv len %zu flags %#llx", c.len, (unsigned long long)c.flags);
			got = 1;
		} else {
			CHECK(0, "unknown context");
		}
	}
	CHECK(sent && got, "%zu bytes: sent %d got %d", n, sent, got);
	CHECK(same(rb, n, seed) && rb[n] == 0, "data of %zu bytes", n);
	free(sb);
	free(rb);
}

static void messages(struct side *c, struct side *s)
{
	static const size_t sizes[] = { 0, 1, 17, 4095, 4096, 65535, 65536, 65537, 200000, 1 << 20, 8 << 20 };
	unsigned seed = 1;
	for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
		one_message(c, s, sizes[i], 1, seed++);
		one_message(s, c, sizes[i], 1, seed++);
		one_message(c, s, sizes[i], 0, seed++);
	}

	/* Several iovs on both sides, split differently. */
	char a[3000], b[5000], x[1000], y[7000];
	fill(a, sizeof a, 40);
	fill(b, sizeof b, 41);
	struct iovec siov[2] = { { a, sizeof a }, { b, sizeof b } };
	struct iovec riov[2] = { { x, sizeof x }, { y, sizeof y } };
	MUST(fi_recvv(s->ep, riov, NULL, 2, 0, x));
	MUST(fi_sendv(c->ep, siov, NULL, 2, 0, a));
	struct fi_cq_data_entry ce;
	struct fi_cq_err_entry err;
	CHECK(wait_cq(s->cq, &ce, &err) == 1 && ce.len == 8000, "recvv length %zu", ce.len);
	CHECK(wait_cq(c->cq, &ce, &err) == 1 && ce.op_context == a, "sendv completion");
	char all[8000];
	memcpy(all, x, sizeof x);
	memcpy(all + sizeof x, y, sizeof y);
	CHECK(memcmp(all, a, sizeof a) == 0 && memcmp(all + sizeof a, b, sizeof b) == 0, "iov data");

	/* Remote CQ data. */
	char d[64] = "with data";
	MUST(fi_recv(s->ep, x, sizeof x, NULL, 0, x));
	MUST(fi_senddata(c->ep, d, sizeof d, NULL, 0xfeedbeef, 0, d));
	CHECK(wait_cq(s->cq, &ce, &err) == 1 && (ce.flags & FI_REMOTE_CQ_DATA) && ce.data == 0xfeedbeef && ce.len == sizeof d, "senddata: flags %#llx data %#llx",
	      (unsigned long long)ce.flags, (unsigned long long)ce.data);
	CHECK(wait_cq(c->cq, &ce, &err) == 1 && ce.op_context == d, "senddata completion");

	/* Inject: no completion; the buffer is reusable at once. */
	char inj[100];
	fill(inj, sizeof inj, 50);
	MUST(fi_recv(s->ep, x, sizeof x, NULL, 0, x));
	MUST(fi_inject(c->ep, inj, sizeof inj, 0));
	memset(inj, 0, sizeof inj);
	CHECK(wait_cq(s->cq, &ce, &err) == 1 && ce.len == 100 && same(x, 100, 50), "inject data");
	CHECK(fi_cq_read(c->cq, &ce, 1) == -FI_EAGAIN, "no completion for an inject");

	/* Truncation. */
	char big[300];
	fill(big, sizeof big, 60);
	memset(x, 0, sizeof x);
	MUST(fi_recv(s->ep, x, 100, NULL, 0, x));
	MUST(fi_send(c->ep, big, sizeof big, NULL, 0, big));
	ssize_t r = wait_cq(s->cq, &ce, &err);
	CHECK(r == -FI_ETRUNC && err.olen == 200 && err.len == 100 && err.op_context == x, "truncation: %zd olen %zu len %zu", r, err.olen, err.len);
	CHECK(same(x, 100, 60) && x[100] == 0, "truncated data");
	CHECK(wait_cq(c->cq, &ce, &err) == 1 && ce.op_context == big, "send of the truncated message completes");
}


/* The next completion of the initiator `a`, reading the target `b`'s queue
 * too (its reads progress it: it serves the RMA); anything that arrives on
 * b's queue goes to *bc (count in *nb). */
static ssize_t wait_rma(struct side *a, struct side *b, struct fi_cq_data_entry *c, struct fi_cq_err_entry *err,
			struct fi_cq_data_entry *bc, int *nb)
{
	for (long i = 0; i < 100000000L; i++) {
		ssize_t r = fi_cq_read(a->cq, c, 1);
		if (r == -FI_EAVAIL) {
			memset(err, 0, sizeof *err);
			r = fi_cq_readerr(a->cq, err, 0);
			return r < 0 ? r : -(ssize_t)err->err;
		}
		if (r != -FI_EAGAIN)
			return r;
		struct fi_cq_data_entry t;
		if (fi_cq_read(b->cq, &t, 1) == 1) {
			if (bc)
				*bc = t;
			if (nb)
				++*nb;
		}
	}
	return -FI_ETIMEDOUT;
}

static void rma(struct side *c, struct side *s)
{
	size_t tlen = 2 << 20;
	char *tb = calloc(1, tlen), *lb = malloc(tlen), *back = malloc(tlen);
	struct fid_mr *mr, *ro;
	MUST(fi_mr_reg(domain, tb, tlen, FI_REMOTE_WRITE | FI_REMOTE_READ, 0, 0, 0, &mr, NULL));
	MUST(fi_mr_reg(domain, tb, 4096, FI_REMOTE_WRITE, 0, 0, 0, &ro, NULL));
	uint64_t key = fi_mr_key(mr), base = (uint64_t)(uintptr_t)tb;
	struct fi_cq_data_entry ce, tc;
	struct fi_cq_err_entry err;
	int nb = 0;
	ssize_t r;
	static const size_t sizes[] = { 1, 100, 65536, 65537, 200000, 1 << 20 };
	unsigned seed = 100;
	for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++, seed++) {
		size_t n = sizes[i], off = 4096 + 13 * i;
		fill(lb, n, seed);
		MUST(fi_write(c->ep, lb, n, NULL, 0, base + off, key, lb));
		r = wait_rma(c, s, &ce, &err, NULL, &nb);
		CHECK(r == 1 && ce.op_context == lb && ce.flags == (FI_RMA | FI_WRITE), "fi_write %zu: %zd flags %#llx", n, r, (unsigned long long)ce.flags);
		CHECK(same(tb + off, n, seed), "written data, %zu bytes", n);
		memset(back, 0, n);
		MUST(fi_read(c->ep, back, n, NULL, 0, base + off, key, back));
		r = wait_rma(c, s, &ce, &err, NULL, &nb);
		CHECK(r == 1 && ce.op_context == back && ce.flags == (FI_RMA | FI_READ), "fi_read %zu: %zd", n, r);
		CHECK(same(back, n, seed), "read data, %zu bytes", n);
	}
	CHECK(nb == 0, "nothing at the target for plain writes and reads (%d)", nb);

	/* Remote CQ data: a completion at the target. */
	fill(lb, 64, 7);
	MUST(fi_writedata(c->ep, lb, 64, NULL, 0xabcdef, 0, base, key, lb));
	r = wait_rma(c, s, &ce, &err, &tc, &nb);
	CHECK(r == 1 && ce.op_context == lb, "fi_writedata completes: %zd", r);
	for (int i = 0; i < 1000 && nb == 0; i++)
		if (fi_cq_read(s->cq, &tc, 1) == 1)
			nb++;
	CHECK(nb == 1 && tc.data == 0xabcdef && (tc.flags & FI_REMOTE_CQ_DATA) && (tc.flags & FI_REMOTE_WRITE) && tc.len == 64,
	      "target completion: n %d data %#llx flags %#llx len %zu", nb, (unsigned long long)tc.data, (unsigned long long)tc.flags, tc.len);
	CHECK(same(tb, 64, 7), "writedata data");

	/* Inject: no completion; read it back. */
	char inj[32];
	fill(inj, sizeof inj, 9);
	MUST(fi_inject_write(c->ep, inj, sizeof inj, 0, base + 100, key));
	memset(inj, 0, sizeof inj);
	MUST(fi_read(c->ep, back, 32, NULL, 0, base + 100, key, back));
	r = wait_rma(c, s, &ce, &err, NULL, NULL);
	CHECK(r == 1 && ce.op_context == back && same(back, 32, 9), "inject_write then read: %zd", r);

	/* Refused at the target: the initiator gets the error. */
	MUST(fi_write(c->ep, lb, 8, NULL, 0, base, key + 1000, lb));
	r = wait_rma(c, s, &ce, &err, NULL, NULL);
	CHECK(r == -FI_EKEYREJECTED && err.op_context == lb, "bad key: %zd", r);
	MUST(fi_read(c->ep, back, 64, NULL, 0, base + tlen - 32, key, back));
	r = wait_rma(c, s, &ce, &err, NULL, NULL);
	CHECK(r == -FI_EINVAL && err.op_context == back, "read beyond the region: %zd", r);
	MUST(fi_read(c->ep, back, 8, NULL, 0, base, fi_mr_key(ro), back));
	r = wait_rma(c, s, &ce, &err, NULL, NULL);
	CHECK(r == -FI_EACCES, "read without FI_REMOTE_READ: %zd", r);
	/* The connection still works. */
	MUST(fi_write(c->ep, lb, 8, NULL, 0, base, key, lb));
	r = wait_rma(c, s, &ce, &err, NULL, NULL);
	CHECK(r == 1, "a write after the errors: %zd", r);

	MUST(fi_close(&ro->fid));
	MUST(fi_close(&mr->fid));
	free(tb);
	free(lb);
	free(back);
}

int main(void)
{
	struct fi_info *hints = fi_allocinfo();
	hints->ep_attr->type = FI_EP_MSG;
	hints->caps = FI_MSG;
	hints->fabric_attr->prov_name = strdup("tcp");
	hints->addr_format = FI_SOCKADDR_IN;
	hints->caps = FI_MSG | FI_RMA;
	hints->domain_attr->mr_mode = FI_MR_VIRT_ADDR | FI_MR_PROV_KEY;
	MUST(fi_getinfo(FI_VERSION(1, 18), "127.0.0.1", NULL, FI_SOURCE, hints, &info));
	fi_freeinfo(hints);
	MUST(fi_fabric(info->fabric_attr, &fabric, NULL));
	MUST(fi_domain(fabric, info, &domain, NULL));

	/* ---- the passive endpoint, and bad input on it */
	struct fid_pep *pep;
	struct fid_eq *peq;
	info->ep_attr->type = FI_EP_RDM;
	CHECK(fi_passive_ep(fabric, info, &pep, NULL) == -FI_EINVAL, "fi_passive_ep on an RDM info");
	info->ep_attr->type = FI_EP_MSG;
	MUST(fi_passive_ep(fabric, info, &pep, NULL));
	CHECK(fi_listen(pep) == -FI_ENOEQ, "fi_listen without an EQ");
	open_eq(&peq);
	MUST(fi_pep_bind(pep, &peq->fid, 0));
	MUST(fi_listen(pep));
	CHECK(fi_listen(pep) == -FI_EOPBADSTATE, "fi_listen twice");
	struct sockaddr_in sa;
	size_t alen = 4;
	CHECK(fi_getname(&pep->fid, &sa, &alen) == -FI_ETOOSMALL && alen == sizeof sa, "short fi_getname: %zu", alen);
	alen = sizeof sa;
	MUST(fi_getname(&pep->fid, &sa, &alen));
	CHECK(sa.sin_family == AF_INET && sa.sin_port != 0 && sa.sin_addr.s_addr == htonl(INADDR_LOOPBACK), "listening address");
	size_t cmsz = 0, olen = sizeof cmsz;
	MUST(fi_getopt(&pep->fid, FI_OPT_ENDPOINT, FI_OPT_CM_DATA_SIZE, &cmsz, &olen));
	CHECK(cmsz >= 64 && olen == sizeof cmsz, "FI_OPT_CM_DATA_SIZE %zu", cmsz);
	CHECK(fi_reject(pep, &pep->fid, NULL, 0) == -FI_EINVAL, "fi_reject with a passive endpoint as handle");
	CHECK(fi_reject(pep, NULL, NULL, 0) == -FI_EINVAL, "fi_reject with a NULL handle");

	/* ---- bad input on an active endpoint */
	struct side c = { 0 }, s = { 0 };
	struct fid_ep *bare;
	MUST(fi_endpoint(domain, info, &bare, NULL));
	CHECK(fi_connect(bare, &sa, NULL, 0) == -FI_ENOEQ, "fi_connect without an EQ");
	CHECK(fi_accept(bare, NULL, 0) == -FI_ENOEQ, "fi_accept without an EQ");
	MUST(fi_close(&bare->fid));
	open_side(&c, domain, info, &c);
	CHECK(fi_accept(c.ep, NULL, 0) == -FI_EINVAL, "fi_accept on an endpoint not opened on a request");
	CHECK(fi_connect(c.ep, NULL, NULL, 0) == -FI_EINVAL, "fi_connect to NULL");
	CHECK(fi_connect(c.ep, &sa, NULL, 5) == -FI_EINVAL, "fi_connect with NULL param and a length");
	{
		/* fi_cm(3): more than FI_OPT_CM_DATA_SIZE bytes is -FI_EINVAL */
		static char toolong[4096];
		CHECK(cmsz < sizeof toolong && fi_connect(c.ep, &sa, toolong, cmsz + 1) == -FI_EINVAL, "fi_connect with %zu bytes of data",
		      cmsz + 1);
	}
	CHECK(fi_shutdown(c.ep, 1) == -FI_EBADFLAGS, "fi_shutdown with flags");
	CHECK(fi_shutdown(c.ep, 0) == -FI_EOPBADSTATE, "fi_shutdown unconnected");
	char pb[64];
	size_t pl = sizeof pb;
	CHECK(fi_getpeer(c.ep, pb, &pl) == -FI_ENOTCONN, "fi_getpeer unconnected");
	CHECK(fi_send(c.ep, pb, 1, NULL, 0, NULL) == -FI_EOPBADSTATE, "fi_send before fi_connect");

	/* ---- connect and accept, with data both ways */
	MUST(connect_to(&c, &sa, "hello server"));
	CHECK(connect_to(&c, &sa, NULL) == -FI_EOPBADSTATE, "fi_connect twice");
	accept_one(peq, &s, "hello server", "welcome client");
	wait_connected(&c, "welcome client");
	struct sockaddr_in peer, me;
	pl = sizeof peer;
	MUST(fi_getpeer(c.ep, &peer, &pl));
	alen = sizeof me;
	MUST(fi_getname(&s.ep->fid, &me, &alen));
	CHECK(pl == sizeof peer && peer.sin_port == sa.sin_port && me.sin_port == sa.sin_port, "client's peer is the listening port");
	pl = sizeof peer;
	MUST(fi_getpeer(s.ep, &peer, &pl));
	alen = sizeof me;
	MUST(fi_getname(&c.ep->fid, &me, &alen));
	CHECK(peer.sin_port == me.sin_port, "server's peer is the client");

	messages(&c, &s);
	rma(&c, &s);

	/* ---- shutdown: the peer sees FI_SHUTDOWN, its receive is cancelled */
	char rb[16];
	MUST(fi_recv(s.ep, rb, sizeof rb, NULL, 0, rb));
	MUST(fi_shutdown(c.ep, 0));
	CHECK(fi_send(c.ep, rb, 1, NULL, 0, NULL) == -FI_ENOTCONN, "fi_send after fi_shutdown");
	struct cm_ev ev;
	struct fi_eq_err_entry eqerr;
	ssize_t r;
	for (;;) {
		/* The server notices the close by its endpoint's thread. */
		uint32_t event;
		r = fi_eq_read(s.eq, &event, &ev, sizeof ev, 0);
		if (r != -FI_EAGAIN) {
			r = r < 0 ? r : (ssize_t)event;
			break;
		}
		usleep(100);
	}
	CHECK(r == FI_SHUTDOWN && ev.e.fid == &s.ep->fid, "FI_SHUTDOWN at the peer: %zd", r);
	{
		uint32_t event;
		r = fi_eq_read(c.eq, &event, &ev, sizeof ev, 0);
		CHECK(r == sizeof ev.e && event == FI_SHUTDOWN && ev.e.fid == &c.ep->fid, "FI_SHUTDOWN at the side that shut down: %zd", r);
		CHECK(fi_shutdown(s.ep, 0) == 0, "fi_shutdown after the peer's");
	}
	struct fi_cq_data_entry ce;
	struct fi_cq_err_entry cqerr;
	r = wait_cq(s.cq, &ce, &cqerr);
	CHECK(r == -FI_ECANCELED && cqerr.op_context == rb, "posted receive cancelled: %zd", r);
	close_side(&c);
	close_side(&s);

	/* ---- reject, with data */
	open_side(&c, domain, info, &c);
	MUST(connect_to(&c, &sa, "let me in"));
	size_t len;
	r = next_event(peq, &ev, &eqerr, &len);
	CHECK(r == FI_CONNREQ && strcmp(ev.data, "let me in") == 0, "second FI_CONNREQ: %zd", r);
	if (r == FI_CONNREQ) {
		MUST(fi_reject(pep, ev.e.info->handle, "go away", 8));
		fi_freeinfo(ev.e.info);
	}
	char ed[64] = { 0 };
	memset(&eqerr, 0, sizeof eqerr);
	uint32_t event;
	r = fi_eq_sread(c.eq, &event, &ev, sizeof ev, EQ_TIMEOUT, 0);
	CHECK(r == -FI_EAVAIL, "rejected: sread %zd", r);
	eqerr.err_data = ed;
	eqerr.err_data_size = sizeof ed;
	r = fi_eq_readerr(c.eq, &eqerr, 0);
	CHECK(r > 0 && eqerr.err == FI_ECONNREFUSED && eqerr.fid == &c.ep->fid && eqerr.context == &c, "reject error entry: %zd err %d", r, eqerr.err);
	CHECK(eqerr.err_data_size == 8 && strcmp(ed, "go away") == 0, "reject data '%s' (%zu)", ed, eqerr.err_data_size);
	close_side(&c);

	/* ---- nobody listens */
	struct sockaddr_in closed = sa;
	{
		int fd = socket(AF_INET, SOCK_STREAM, 0);
		struct sockaddr_in any = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
		socklen_t sl = sizeof any;
		bind(fd, (struct sockaddr *)&any, sizeof any);
		getsockname(fd, (struct sockaddr *)&any, &sl);
		closed.sin_port = any.sin_port;
		close(fd);
	}
	open_side(&c, domain, info, &c);
	MUST(connect_to(&c, &closed, NULL));
	r = next_event(c.eq, &ev, &eqerr, NULL);
	CHECK(r == -FI_ECONNREFUSED, "connection to a closed port: %zd", r);
	close_side(&c);

	/* ---- a request peeked and never answered: freed with its queue */
	open_side(&c, domain, info, &c);
	MUST(connect_to(&c, &sa, "ignored"));
	r = fi_eq_sread(peq, &event, &ev, sizeof ev, EQ_TIMEOUT, FI_PEEK);
	CHECK(r > 0 && event == FI_CONNREQ, "peeked FI_CONNREQ: %zd", r);
	MUST(fi_close(&peq->fid));
	MUST(fi_close(&pep->fid));
	close_side(&c);

	MUST(fi_close(&domain->fid));
	MUST(fi_close(&fabric->fid));
	fi_freeinfo(info);
	printf("%d passed, %d failed\n", passed, failed);
	return failed != 0;
}
