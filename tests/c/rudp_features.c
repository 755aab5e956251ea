/* The rudp provider through the C API, between two processes over loopback
 * (FI_RUDP_IFACE=lo): the parent receives and is the RMA target, the child
 * sends and initiates; phases are kept in step over pipes.
 *   messages: msg and tagged sends of 0 B .. 8 MiB (odd sizes, around one
 *   packet, around the medium/long boundary) posted before and after the
 *   data arrived, data and lengths checked; sendv/recvv with several iovs;
 *   wildcard and directed receive (FI_DIRECTED_RECV), FI_SOURCE with
 *   fi_cq_readfrom (FI_ADDR_NOTAVAIL for a sender not in the AV); the order
 *   of many same-tag messages of mixed protocols (FI_ORDER_SAS);
 *   FI_MULTI_RECV with FI_OPT_MIN_MULTI_RECV; FI_PEEK, FI_PEEK|FI_CLAIM,
 *   FI_CLAIM, FI_DISCARD; fi_cancel; truncation (FI_ETRUNC and olen, eager
 *   and long); FI_REMOTE_CQ_DATA; FI_DELIVERY_COMPLETE; fi_inject,
 *   fi_tinject, FI_INJECT; send and receive counters; fi_cq_sread on
 *   FI_WAIT_UNSPEC and FI_WAIT_FD queues (fi_trywait, poll); a pair of
 *   FI_PROGRESS_AUTO endpoints;
 *   RMA and atomics: fi_write / fi_read of 1 B .. 8 MiB read back,
 *   vectored forms, fi_writedata / fi_writemsg / fi_inject_writedata (remote
 *   CQ data at the target), fi_inject_write; fi_atomic SUM, fi_fetch_atomic,
 *   fi_compare_atomic (CSWAP) on several datatypes checked against a local
 *   computation; fi_atomicvalid & co. and fi_query_atomic;
 *   FI_MR_DMABUF (memfd) registrations: sent from, received into, and as
 *   the target of fi_write / fi_read.
 * RUDP_MR=offset: offset addressing with application keys; otherwise
 * FI_MR_VIRT_ADDR | FI_MR_PROV_KEY. Prints "N passed, N failed". */
#define _GNU_SOURCE
#include <poll.h>
#include <rdma/fabric.h>
#include <rdma/fi_atomic.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
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
static const char *who = "receiver";

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

/* Calls again while the provider says -FI_EAGAIN (its keeper thread, or the
 * call itself, makes progress meanwhile). */
#define RETRY(call)                                            \
	({                                                     \
		ssize_t r_;                                    \
		while ((r_ = (call)) == -FI_EAGAIN)            \
			usleep(20);                            \
		r_;                                            \
	})

#define CAPS (FI_MSG | FI_TAGGED | FI_RMA | FI_ATOMIC | FI_SOURCE | FI_DIRECTED_RECV | FI_MULTI_RECV)

struct res {
	struct fi_info *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_cq *txcq, *rxcq;
	struct fid_av *av;
	struct fid_ep *ep;
	struct fid_cntr *scntr, *rcntr;
	char name[64];
	size_t namelen;
};

static int virt;

static long now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000L + t.tv_nsec / 1000000;
}

static void open_res(struct res *r, enum fi_progress progress, enum fi_wait_obj txwait)
{
	struct fi_info *hints = fi_allocinfo();
	struct fi_cq_attr rx_attr = { .format = FI_CQ_FORMAT_TAGGED, .wait_obj = FI_WAIT_UNSPEC };
	struct fi_cq_attr tx_attr = { .format = FI_CQ_FORMAT_TAGGED, .wait_obj = txwait };
	struct fi_av_attr av_attr = { .type = FI_AV_TABLE };
	struct fi_cntr_attr cattr = { .events = FI_CNTR_EVENTS_COMP, .wait_obj = FI_WAIT_UNSPEC };
	int ret;

	memset(r, 0, sizeof(*r));
	hints->ep_attr->type = FI_EP_RDM;
	hints->caps = CAPS;
	hints->addr_format = FI_SOCKADDR_IN;
	hints->domain_attr->data_progress = progress;
	hints->domain_attr->mr_mode = virt ? FI_MR_VIRT_ADDR | FI_MR_PROV_KEY | FI_MR_ALLOCATED : FI_MR_ALLOCATED;
	hints->fabric_attr->prov_name = strdup(prov_name());
	ret = fi_getinfo(FI_VERSION(1, 18), NULL, NULL, 0, hints, &r->info);
	fi_freeinfo(hints);
	if (ret) {
		printf("FAIL [%s] fi_getinfo: %d\n", who, ret);
		exit(2);
	}
	CHECK(r->info->addr_format == FI_SOCKADDR_IN && (r->info->caps & CAPS) == CAPS, "info: format %u caps %#llx",
	      r->info->addr_format, (unsigned long long)r->info->caps);
	CHECK(r->info->domain_attr->data_progress == progress, "progress %d", r->info->domain_attr->data_progress);
	CHECK(!!(r->info->domain_attr->mr_mode & FI_MR_VIRT_ADDR) == virt, "mr_mode %#x", r->info->domain_attr->mr_mode);
	if (fi_fabric(r->info->fabric_attr, &r->fabric, NULL) || fi_domain(r->fabric, r->info, &r->domain, NULL) ||
	    fi_cq_open(r->domain, &tx_attr, &r->txcq, NULL) || fi_cq_open(r->domain, &rx_attr, &r->rxcq, NULL) ||
	    fi_av_open(r->domain, &av_attr, &r->av, NULL) || fi_cntr_open(r->domain, &cattr, &r->scntr, NULL) ||
	    fi_cntr_open(r->domain, &cattr, &r->rcntr, NULL) || fi_endpoint(r->domain, r->info, &r->ep, NULL)) {
		printf("FAIL [%s] opening objects failed\n", who);
		exit(2);
	}
	if (fi_ep_bind(r->ep, &r->av->fid, 0) || fi_ep_bind(r->ep, &r->txcq->fid, FI_TRANSMIT) ||
	    fi_ep_bind(r->ep, &r->rxcq->fid, FI_RECV) || fi_ep_bind(r->ep, &r->scntr->fid, FI_SEND) ||
	    fi_ep_bind(r->ep, &r->rcntr->fid, FI_RECV) || fi_enable(r->ep)) {
		printf("FAIL [%s] binding failed\n", who);
		exit(2);
	}
	r->namelen = sizeof(r->name);
	CHECK(fi_getname(&r->ep->fid, r->name, &r->namelen) == 0 && r->namelen == 16, "getname: %zu", r->namelen);
}

static void close_res(struct res *r)
{
	CHECK(fi_close(&r->ep->fid) == 0, "close ep");
	CHECK(fi_close(&r->txcq->fid) == 0 && fi_close(&r->rxcq->fid) == 0, "close cqs");
	CHECK(fi_close(&r->av->fid) == 0, "close av");
	CHECK(fi_close(&r->scntr->fid) == 0 && fi_close(&r->rcntr->fid) == 0, "close cntrs");
	CHECK(fi_close(&r->domain->fid) == 0, "close domain");
	CHECK(fi_close(&r->fabric->fid) == 0, "close fabric");
	fi_freeinfo(r->info);
}

/* One completion (1), an error waiting (-FI_EAVAIL), or -FI_ETIMEDOUT. */
static int wait_cq(struct fid_cq *cq, struct fi_cq_tagged_entry *e, int ms)
{
	long end = now_ms() + ms;
	for (long i = 0;; i++) {
		ssize_t n = fi_cq_read(cq, e, 1);
		if (n == 1)
			return 1;
		if (n != -FI_EAGAIN)
			return (int)n;
		if (now_ms() > end)
			return -FI_ETIMEDOUT;
		if (i > 1000)
			usleep(50);
	}
}

/* An error completion: its err code, or a negative value. */
static int wait_err(struct fid_cq *cq, struct fi_cq_err_entry *err, int ms)
{
	struct fi_cq_tagged_entry e;
	int rc = wait_cq(cq, &e, ms);
	if (rc != -FI_EAVAIL)
		return rc == 1 ? -1000 : rc;
	memset(err, 0, sizeof(*err));
	if (fi_cq_readerr(cq, err, 0) != 1)
		return -1001;
	return err->err;
}

/* Waits for n successful completions, stored in out; returns how many came. */
static int collect(struct fid_cq *cq, struct fi_cq_tagged_entry *out, int n, int ms)
{
	int got = 0;
	while (got < n) {
		int rc = wait_cq(cq, &out[got], ms);
		if (rc == 1) {
			got++;
			continue;
		}
		if (rc == -FI_EAVAIL) {
			struct fi_cq_err_entry err = { 0 };
			fi_cq_readerr(cq, &err, 0);
			CHECK(0, "unexpected error completion: %d (%s) ctx %p", err.err, fi_strerror(err.err), err.op_context);
			continue;
		}
		CHECK(0, "waiting for completion %d of %d: %d", got + 1, n, rc);
		break;
	}
	return got;
}

/* A position-dependent pattern that does not repeat at any small period. */
static uint8_t pat(size_t k, unsigned seed)
{
	uint32_t x = (uint32_t)(k + seed * 7919u) * 2654435761u;
	return (uint8_t)(x >> 24);
}
static void fill(void *b, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		((uint8_t *)b)[i] = pat(i, seed);
}
/* The first byte that differs, or -1. */
static long diff(const void *b, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		if (((const uint8_t *)b)[i] != pat(i, seed))
			return (long)i;
	return -1;
}

/* ------------------------------------------------------------ the two sides */

static int rfd, wfd;
static struct res R, R2; /* the child has two endpoints; the parent one */
static fi_addr_t peer = FI_ADDR_NOTAVAIL, peer2 = FI_ADDR_NOTAVAIL;
static char peer_name[64], peer2_name[64];

static void xwrite(const void *p, size_t n)
{
	if (write(wfd, p, n) != (ssize_t)n) {
		printf("FAIL [%s] pipe write\n", who);
		exit(2);
	}
}
static void xread(void *p, size_t n)
{
	size_t got = 0;
	while (got < n) {
		ssize_t k = read(rfd, (char *)p + got, n - got);
		if (k <= 0) {
			printf("FAIL [%s] pipe read (peer gone)\n", who);
			exit(2);
		}
		got += (size_t)k;
	}
}
/* Both sides reach this point. */
static void barrier(void)
{
	char c = 'b';
	xwrite(&c, 1);
	xread(&c, 1);
}

/* ---------------------------------------------------------------- sizes */

static const size_t sizes[] = { 0,     1,     7,     1000,  1383,  1384,   1385,   4095,         4096,   4097,  16383,
				16384, 16385, 65418, 65419, 65420, 65535, 65536, 65537, 100003, (1 << 20) + 5, 8 << 20 };
#define NS (sizeof(sizes) / sizeof(sizes[0]))
#define MAXSZ (8u << 20)
#define CANARY 64

/* round 0: untagged, receives posted first; 1: tagged, receives posted after
 * the data arrived, in reverse order; 2: untagged, posted after. */
static void sizes_send(int round)
{
	int tagged = round == 1;
	uint8_t *src = malloc(MAXSZ + NS);
	struct fi_context ctx[NS];
	struct fi_cq_tagged_entry e[NS];
	fill(src, MAXSZ + NS, (unsigned)round);
	barrier();
	for (size_t i = 0; i < NS; i++) {
		ssize_t ret = tagged ? RETRY(fi_tsend(R.ep, src + i, sizes[i], NULL, peer, 1000 + i, &ctx[i]))
				     : RETRY(fi_send(R.ep, src + i, sizes[i], NULL, peer, &ctx[i]));
		CHECK(ret == 0, "round %d send %zu bytes: %zd", round, sizes[i], ret);
	}
	barrier();
	int got = collect(R.txcq, e, NS, 60000);
	int seen[NS] = { 0 };
	for (int k = 0; k < got; k++) {
		long i = (struct fi_context *)e[k].op_context - ctx;
		CHECK(i >= 0 && i < (long)NS && !seen[i] && (e[k].flags & FI_SEND), "round %d send completion %d: ctx %ld flags %#llx",
		      round, k, i, (unsigned long long)e[k].flags);
		if (i >= 0 && i < (long)NS)
			seen[i]++;
	}
	CHECK(got == (int)NS, "round %d: %d send completions", round, got);
	free(src);
	barrier();
}

static void sizes_recv(int round)
{
	int tagged = round == 1, early = round == 0;
	uint8_t *buf[NS];
	struct fi_context ctx[NS];
	struct fi_cq_tagged_entry e[NS];
	for (size_t i = 0; i < NS; i++) {
		buf[i] = malloc(sizes[i] + CANARY);
		memset(buf[i], 0xee, sizes[i] + CANARY);
	}
	/* tagged: room for more than was sent; untagged: exactly, so a
	 * message matched out of order shows in the lengths */
	size_t extra = tagged ? 8 : 0;
	for (size_t k = 0; k < NS && early; k++)
		CHECK(fi_recv(R.ep, buf[k], sizes[k], NULL, FI_ADDR_UNSPEC, &ctx[k]) == 0, "post recv %zu", k);
	barrier();
	barrier();
	if (!early) {
		usleep(300 * 1000); /* the data arrives (unexpected) meanwhile */
		for (size_t k = 0; k < NS; k++) {
			size_t i = tagged ? NS - 1 - k : k;
			ssize_t ret = tagged ? fi_trecv(R.ep, buf[i], sizes[i] + extra, NULL, FI_ADDR_UNSPEC, 1000 + i, 0, &ctx[i])
					     : fi_recv(R.ep, buf[i], sizes[i], NULL, FI_ADDR_UNSPEC, &ctx[i]);
			CHECK(ret == 0, "post recv %zu: %zd", i, ret);
		}
	}
	int got = collect(R.rxcq, e, NS, 60000);
	CHECK(got == (int)NS, "round %d: %d receive completions", round, got);
	for (int k = 0; k < got; k++) {
		long i = (struct fi_context *)e[k].op_context - ctx;
		if (i < 0 || i >= (long)NS) {
			CHECK(0, "round %d: completion with a foreign context", round);
			continue;
		}
		uint64_t kind = tagged ? FI_TAGGED : FI_MSG;
		CHECK(e[k].len == sizes[i] && (e[k].flags & (FI_RECV | kind)) == (FI_RECV | kind) && (!tagged || e[k].tag == 1000 + (uint64_t)i),
		      "round %d message %ld: len %zu (sent %zu) flags %#llx tag %llu", round, i, (size_t)e[k].len, sizes[i],
		      (unsigned long long)e[k].flags, (unsigned long long)e[k].tag);
		/* message i was sent from offset i of the pattern */
		long d = -1;
		for (size_t b = 0; b < sizes[i] && d < 0; b++)
			if (buf[i][b] != pat(b + (size_t)i, (unsigned)round))
				d = (long)b;
		int canary = 1;
		for (size_t b = sizes[i]; b < sizes[i] + CANARY; b++)
			canary &= buf[i][b] == 0xee;
		CHECK(d < 0 && canary, "round %d message %ld (%zu bytes): data differs at %ld, canary %s", round, i, sizes[i], d,
		      canary ? "intact" : "overwritten");
	}
	for (size_t i = 0; i < NS; i++)
		free(buf[i]);
	barrier();
}

/* ---------------------------------------------------------------- iovs */

static void iov_send(void)
{
	struct fi_cq_tagged_entry e[3];
	static uint8_t a[3513], b[165537], c[9000];
	fill(a, sizeof(a), 11);
	fill(b, sizeof(b), 12);
	fill(c, sizeof(c), 13);
	struct iovec va[4] = { { a, 10 }, { a + 10, 1500 }, { a + 1510, 3 }, { a + 1513, 2000 } };
	struct iovec vb[4] = { { b, 70000 }, { b + 70000, 1 }, { b + 70001, 65536 }, { b + 135537, 30000 } };
	struct iovec vc[4] = { { c, 1 }, { c + 1, 4999 }, { c + 5000, 0 }, { c + 5000, 4000 } };
	struct fi_msg m = { .msg_iov = vc, .iov_count = 4, .addr = peer, .context = c, .data = 0xfeed };
	barrier();
	CHECK(RETRY(fi_sendv(R.ep, va, NULL, 4, peer, a)) == 0, "sendv 4 iovs");
	CHECK(RETRY(fi_tsendv(R.ep, vb, NULL, 4, peer, 77, b)) == 0, "tsendv 4 iovs (long)");
	CHECK(RETRY(fi_sendmsg(R.ep, &m, FI_REMOTE_CQ_DATA)) == 0, "sendmsg 4 iovs with data");
	CHECK(collect(R.txcq, e, 3, 20000) == 3, "iov sends complete");
	barrier();
}

static void iov_recv(void)
{
	struct fi_cq_tagged_entry e;
	static uint8_t a[3601], b[165537], c[9000];
	struct iovec va[3] = { { a, 1 }, { a + 1, 3000 }, { a + 3001, 600 } };
	struct iovec vb[4] = { { b, 100000 }, { b + 100000, 5 }, { b + 100005, 5 }, { b + 100010, 65527 } };
	struct iovec vc[2] = { { c, 4500 }, { c + 4500, 4500 } };
	struct fi_msg m = { .msg_iov = vc, .iov_count = 2, .addr = FI_ADDR_UNSPEC, .context = c };
	CHECK(fi_recvv(R.ep, va, NULL, 3, FI_ADDR_UNSPEC, a) == 0, "recvv 3 iovs");
	CHECK(fi_trecvv(R.ep, vb, NULL, 4, FI_ADDR_UNSPEC, 77, 0, b) == 0, "trecvv 4 iovs");
	CHECK(fi_recvmsg(R.ep, &m, 0) == 0, "recvmsg 2 iovs");
	barrier();
	for (int k = 0; k < 3; k++) {
		int rc = wait_cq(R.rxcq, &e, 20000);
		if (rc != 1) {
			CHECK(0, "iov receive %d: %d", k, rc);
			continue;
		}
		if (e.op_context == a)
			CHECK(e.len == 3513 && diff(a, 3513, 11) < 0, "recvv: len %zu, differs at %ld", (size_t)e.len, diff(a, 3513, 11));
		else if (e.op_context == b)
			CHECK(e.len == sizeof(b) && e.tag == 77 && diff(b, sizeof(b), 12) < 0, "trecvv: len %zu, differs at %ld",
			      (size_t)e.len, diff(b, sizeof(b), 12));
		else if (e.op_context == c)
			CHECK(e.len == 9000 && (e.flags & FI_REMOTE_CQ_DATA) && e.data == 0xfeed && diff(c, 9000, 13) < 0,
			      "recvmsg: len %zu flags %#llx data %#llx, differs at %ld", (size_t)e.len, (unsigned long long)e.flags,
			      (unsigned long long)e.data, diff(c, 9000, 13));
		else
			CHECK(0, "iov receive with a foreign context");
	}
	barrier();
}

/* ------------------------------------------------ directed receive, FI_SOURCE */

static void tsend_wait(struct res *r, fi_addr_t to, const char *s, uint64_t tag, int tagged)
{
	struct fi_cq_tagged_entry e;
	ssize_t ret = tagged ? RETRY(fi_tsend(r->ep, s, strlen(s) + 1, NULL, to, tag, (void *)s))
			     : RETRY(fi_send(r->ep, s, strlen(s) + 1, NULL, to, (void *)s));
	CHECK(ret == 0, "send '%s': %zd", s, ret);
	CHECK(wait_cq(r->txcq, &e, 20000) == 1 && e.op_context == s, "send '%s' completes", s);
}

static void source_send(void)
{
	/* 1. from the second endpoint, unknown to the receiver */
	barrier();
	tsend_wait(&R2, peer2, "from-b2-unknown", 30, 1);
	barrier();
	/* 2. both endpoints, the first one first: a receive directed at the
	 * second one skips the first one's message */
	barrier();
	tsend_wait(&R, peer, "from-b1", 31, 1);
	tsend_wait(&R2, peer2, "from-b2", 31, 1);
	barrier();
	/* 3. directed receives posted before: the second endpoint first */
	barrier();
	tsend_wait(&R2, peer2, "two", 32, 1);
	tsend_wait(&R, peer, "one", 32, 1);
	/* untagged */
	tsend_wait(&R, peer, "u1", 0, 0);
	tsend_wait(&R2, peer2, "u2", 0, 0);
	barrier();
	barrier();
}

/* A completion with its source. */
static int wait_from(struct fid_cq *cq, struct fi_cq_tagged_entry *e, fi_addr_t *src)
{
	long end = now_ms() + 20000;
	while (now_ms() < end) {
		ssize_t n = fi_cq_readfrom(cq, e, 1, src);
		if (n == 1)
			return 1;
		if (n != -FI_EAGAIN)
			return (int)n;
		usleep(50);
	}
	return -FI_ETIMEDOUT;
}

static void source_recv(void)
{
	char b1[32] = { 0 }, b2[32] = { 0 };
	struct fi_cq_tagged_entry e;
	fi_addr_t src = 0;
	int rc;

	CHECK(fi_trecv(R.ep, b1, sizeof(b1), NULL, FI_ADDR_UNSPEC, 30, 0, b1) == 0, "trecv tag 30");
	barrier();
	barrier();
	rc = wait_from(R.rxcq, &e, &src);
	CHECK(rc == 1 && !strcmp(b1, "from-b2-unknown") && src == FI_ADDR_NOTAVAIL,
	      "sender not in the AV: rc %d '%s' src %#llx", rc, b1, (unsigned long long)src);

	CHECK(fi_av_insert(R.av, peer2_name, 1, &peer2, 0, NULL) == 1 && peer2 != FI_ADDR_NOTAVAIL && peer2 != peer,
	      "insert the second sender");
	barrier();
	barrier();
	usleep(100 * 1000);
	memset(b1, 0, sizeof(b1));
	memset(b2, 0, sizeof(b2));
	CHECK(fi_trecv(R.ep, b2, sizeof(b2), NULL, peer2, 31, 0, b2) == 0, "directed trecv");
	CHECK(fi_trecv(R.ep, b1, sizeof(b1), NULL, FI_ADDR_UNSPEC, 31, 0, b1) == 0, "wildcard trecv");
	for (int k = 0; k < 2; k++) {
		src = 0;
		rc = wait_from(R.rxcq, &e, &src);
		if (rc == 1 && e.op_context == b2)
			CHECK(!strcmp(b2, "from-b2") && src == peer2, "directed receive got '%s' from %llu", b2, (unsigned long long)src);
		else if (rc == 1 && e.op_context == b1)
			CHECK(!strcmp(b1, "from-b1") && src == peer, "wildcard receive got '%s' from %llu", b1, (unsigned long long)src);
		else
			CHECK(0, "directed/wildcard completion %d: rc %d", k, rc);
	}

	char x[8] = { 0 }, y[8] = { 0 }, u1[8] = { 0 }, u2[8] = { 0 };
	CHECK(fi_trecv(R.ep, x, sizeof(x), NULL, peer, 32, 0, x) == 0, "directed trecv (first sender)");
	CHECK(fi_trecv(R.ep, y, sizeof(y), NULL, peer2, 32, 0, y) == 0, "directed trecv (second sender)");
	CHECK(fi_recv(R.ep, u2, sizeof(u2), NULL, peer2, u2) == 0, "directed recv (second sender)");
	barrier();
	barrier();
	for (int k = 0; k < 3; k++) {
		src = 0;
		rc = wait_from(R.rxcq, &e, &src);
		CHECK(rc == 1 && (e.op_context == x || e.op_context == y || e.op_context == u2), "directed completion %d: rc %d", k, rc);
	}
	CHECK(!strcmp(x, "one") && !strcmp(y, "two") && !strcmp(u2, "u2"), "directed receives: '%s' '%s' '%s'", x, y, u2);
	/* the first sender's untagged message waited for a receive that takes it */
	CHECK(fi_recv(R.ep, u1, sizeof(u1), NULL, FI_ADDR_UNSPEC, u1) == 0, "wildcard recv");
	rc = wait_from(R.rxcq, &e, &src);
	CHECK(rc == 1 && e.op_context == u1 && !strcmp(u1, "u1") && src == peer, "untagged from the first sender: rc %d '%s'", rc, u1);
	barrier();
}

/* ---------------------------------------------------------------- order */

#define NORD 300
static size_t ord_size(int j)
{
	static const size_t s[3] = { 8, 3000, 70000 };
	return s[j % 3];
}

static void order_send(void)
{
	uint8_t *src = malloc(70000 + NORD);
	struct fi_context *ctx = calloc(NORD, sizeof(*ctx));
	struct fi_cq_tagged_entry *e = calloc(NORD, sizeof(*e));
	fill(src, 70000 + NORD, 40);
	barrier();
	for (int j = 0; j < NORD; j++) {
		uint8_t *p = src + j;
		ssize_t ret = RETRY(fi_tsend(R.ep, p, ord_size(j), NULL, peer, 40, &ctx[j]));
		if (ret) {
			CHECK(0, "order send %d: %zd", j, ret);
			break;
		}
	}
	barrier();
	CHECK(collect(R.txcq, e, NORD, 60000) == NORD, "order sends complete");
	free(src);
	free(ctx);
	free(e);
	barrier();
}

static void order_recv(void)
{
	uint8_t *buf = malloc((size_t)NORD * 70000);
	struct fi_context *ctx = calloc(NORD, sizeof(*ctx));
	struct fi_cq_tagged_entry *e = calloc(NORD, sizeof(*e));
	for (int j = 0; j < NORD / 2; j++)
		CHECK(fi_trecv(R.ep, buf + (size_t)j * 70000, 70000, NULL, FI_ADDR_UNSPEC, 40, 0, &ctx[j]) == 0, "order trecv %d", j);
	barrier();
	barrier();
	for (int j = NORD / 2; j < NORD; j++)
		CHECK(fi_trecv(R.ep, buf + (size_t)j * 70000, 70000, NULL, FI_ADDR_UNSPEC, 40, 0, &ctx[j]) == 0, "order trecv %d", j);
	int got = collect(R.rxcq, e, NORD, 60000), bad = 0;
	CHECK(got == NORD, "order: %d receives complete", got);
	for (int k = 0; k < got; k++) {
		long j = (struct fi_context *)e[k].op_context - ctx;
		if (j < 0 || j >= NORD) {
			bad++;
			continue;
		}
		/* receive j holds message j: the same tag matches in order */
		uint8_t *p = buf + (size_t)j * 70000;
		int ok = e[k].len == ord_size((int)j);
		for (size_t b = 0; ok && b < ord_size((int)j); b++)
			ok = p[b] == pat(b + (size_t)j, 40);
		if (!ok) {
			if (bad++ < 3)
				printf("    receive %ld: len %zu\n", j, (size_t)e[k].len);
		}
	}
	CHECK(bad == 0, "order: %d receives hold another message", bad);
	free(buf);
	free(ctx);
	free(e);
	barrier();
}

/* ---------------------------------------------------------------- multi-recv */

static void multi_send(void)
{
	uint8_t b[60];
	struct fi_cq_tagged_entry e[4];
	barrier();
	for (int i = 0; i < 2; i++) {
		fill(b, 60, 50 + i);
		CHECK(RETRY(fi_send(R.ep, b, 60, NULL, peer, NULL)) == 0, "send %d for multi-recv", i);
	}
	CHECK(collect(R.txcq, e, 2, 20000) == 2, "first two complete (unexpected at the receiver)");
	barrier();
	barrier();
	for (int i = 2; i < 4; i++) {
		fill(b, 60, 50 + i);
		CHECK(RETRY(fi_send(R.ep, b, 60, NULL, peer, NULL)) == 0, "send %d for multi-recv", i);
	}
	CHECK(collect(R.txcq, e, 2, 20000) == 2, "last two complete");
	barrier();
}

static void multi_recv(void)
{
	struct fi_cq_tagged_entry e;
	size_t min = 0, optlen = sizeof(min);
	uint8_t *mbuf = malloc(256);
	barrier();
	barrier();
	min = 64;
	CHECK(fi_setopt(&R.ep->fid, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV, &min, sizeof(min)) == 0, "setopt min multi recv");
	min = 0;
	CHECK(fi_getopt(&R.ep->fid, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV, &min, &optlen) == 0 && min == 64 &&
		      optlen == sizeof(size_t),
	      "getopt min multi recv: %zu", min);
	struct iovec miov = { mbuf, 256 };
	struct fi_msg mm = { .msg_iov = &miov, .iov_count = 1, .addr = FI_ADDR_UNSPEC, .context = mbuf };
	CHECK(fi_recvmsg(R.ep, &mm, FI_MULTI_RECV) == 0, "post multi-recv");
	barrier();
	for (int i = 0; i < 4; i++) {
		int rc = wait_cq(R.rxcq, &e, 20000);
		int last = i == 3;
		CHECK(rc == 1 && e.op_context == mbuf && e.len == 60 && e.buf == mbuf + 60 * i && !!(e.flags & FI_MULTI_RECV) == last &&
			      diff(mbuf + 60 * i, 60, 50 + i) < 0,
		      "multi-recv piece %d: rc %d len %zu at %td flags %#llx", i, rc, (size_t)e.len,
		      rc == 1 ? (uint8_t *)e.buf - mbuf : -1, (unsigned long long)e.flags);
	}
	barrier();
	free(mbuf);
	min = 0;
	fi_setopt(&R.ep->fid, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV, &min, sizeof(min));
}

/* ---------------------------------------------------- peek / claim / discard */

#define PLONG 100000
static void peek_send(void)
{
	static uint8_t l3[PLONG], l4[PLONG];
	struct fi_cq_tagged_entry e[5];
	fill(l3, PLONG, 3);
	fill(l4, PLONG, 4);
	barrier();
	CHECK(RETRY(fi_tsend(R.ep, "peekme", 7, NULL, peer, 1, NULL)) == 0, "send tag 1");
	CHECK(RETRY(fi_tsend(R.ep, "discard", 8, NULL, peer, 2, NULL)) == 0, "send tag 2");
	CHECK(RETRY(fi_tsend(R.ep, l3, PLONG, NULL, peer, 3, NULL)) == 0, "send tag 3 (long)");
	CHECK(RETRY(fi_tsend(R.ep, l4, PLONG, NULL, peer, 4, NULL)) == 0, "send tag 4 (long, to be discarded)");
	CHECK(RETRY(fi_tsend(R.ep, "claim-discard", 14, NULL, peer, 5, NULL)) == 0, "send tag 5");
	barrier();
	barrier();
	/* every send completes, the discarded long one too */
	CHECK(collect(R.txcq, e, 5, 20000) == 5, "peek sends complete");
	barrier();
}

static void peek(uint64_t tag, uint64_t flags, void *ctx, void *buf, size_t len)
{
	struct iovec iov = { buf, len };
	struct fi_msg_tagged m = { .msg_iov = buf ? &iov : NULL, .iov_count = buf ? 1 : 0, .addr = FI_ADDR_UNSPEC, .tag = tag, .context = ctx };
	ssize_t ret = fi_trecvmsg(R.ep, &m, flags);
	CHECK(ret == 0, "trecvmsg tag %llu flags %#llx: %zd", (unsigned long long)tag, (unsigned long long)flags, ret);
}

static void peek_recv(void)
{
	struct fi_cq_tagged_entry e;
	struct fi_cq_err_entry err;
	struct fi_context pctx, cctx, c5;
	char buf[32];
	int rc;
	barrier();
	barrier();
	usleep(200 * 1000);
	peek(9, FI_PEEK, &pctx, NULL, 0);
	CHECK(wait_err(R.rxcq, &err, 5000) == FI_ENOMSG && err.op_context == &pctx, "peek without a match: FI_ENOMSG");
	peek(1, FI_PEEK, &pctx, NULL, 0);
	rc = wait_cq(R.rxcq, &e, 5000);
	CHECK(rc == 1 && e.op_context == &pctx && e.len == 7 && e.tag == 1 && (e.flags & FI_TAGGED), "peek tag 1: rc %d len %zu", rc,
	      (size_t)e.len);
	peek(1, FI_PEEK | FI_CLAIM, &cctx, NULL, 0);
	CHECK(wait_cq(R.rxcq, &e, 5000) == 1 && e.op_context == &cctx && e.len == 7, "peek+claim tag 1");
	peek(1, FI_PEEK, &pctx, NULL, 0);
	CHECK(wait_err(R.rxcq, &err, 5000) == FI_ENOMSG, "claimed message hidden from peek");
	memset(buf, 0, sizeof(buf));
	peek(1, FI_CLAIM, &cctx, buf, sizeof(buf));
	rc = wait_cq(R.rxcq, &e, 5000);
	CHECK(rc == 1 && e.op_context == &cctx && e.len == 7 && !strcmp(buf, "peekme"), "claim delivers: rc %d '%s'", rc, buf);
	peek(2, FI_PEEK | FI_DISCARD, &pctx, NULL, 0);
	CHECK(wait_cq(R.rxcq, &e, 5000) == 1 && e.op_context == &pctx, "peek+discard tag 2");
	peek(2, FI_PEEK, &pctx, NULL, 0);
	CHECK(wait_err(R.rxcq, &err, 5000) == FI_ENOMSG, "discarded message gone");
	/* the long one: peek, claim, receive it through three buffers */
	peek(3, FI_PEEK, &pctx, NULL, 0);
	rc = wait_cq(R.rxcq, &e, 5000);
	CHECK(rc == 1 && e.len == PLONG && e.tag == 3, "peek long message: rc %d len %zu", rc, (size_t)e.len);
	peek(3, FI_PEEK | FI_CLAIM, &cctx, NULL, 0);
	CHECK(wait_cq(R.rxcq, &e, 5000) == 1 && e.len == PLONG, "peek+claim long message");
	static uint8_t x[PLONG];
	struct iovec v3[3] = { { x, 1 }, { x + 1, 59999 }, { x + 60000, PLONG - 60000 } };
	struct fi_msg_tagged m = { .msg_iov = v3, .iov_count = 3, .addr = FI_ADDR_UNSPEC, .tag = 3, .context = &cctx };
	CHECK(fi_trecvmsg(R.ep, &m, FI_CLAIM) == 0, "claim long message into 3 iovs");
	rc = wait_cq(R.rxcq, &e, 20000);
	CHECK(rc == 1 && e.op_context == &cctx && e.len == PLONG && diff(x, PLONG, 3) < 0, "claimed long data: rc %d, differs at %ld", rc,
	      diff(x, PLONG, 3));
	/* a long message discarded: its sender still completes */
	peek(4, FI_PEEK | FI_DISCARD, &pctx, NULL, 0);
	CHECK(wait_cq(R.rxcq, &e, 5000) == 1 && e.op_context == &pctx, "peek+discard long message");
	peek(4, FI_PEEK, &pctx, NULL, 0);
	CHECK(wait_err(R.rxcq, &err, 5000) == FI_ENOMSG, "discarded long message gone");
	/* claimed, then discarded */
	peek(5, FI_PEEK | FI_CLAIM, &c5, NULL, 0);
	CHECK(wait_cq(R.rxcq, &e, 5000) == 1 && e.op_context == &c5 && e.len == 14, "peek+claim tag 5");
	peek(5, FI_CLAIM | FI_DISCARD, &c5, NULL, 0);
	CHECK(wait_cq(R.rxcq, &e, 5000) == 1 && e.op_context == &c5, "claim+discard tag 5");
	peek(5, FI_PEEK, &pctx, NULL, 0);
	CHECK(wait_err(R.rxcq, &err, 5000) == FI_ENOMSG, "claimed and discarded message gone");
	barrier();
	barrier();
}

/* ---------------------------------------------------------------- cancel */

static void cancel_recv(void)
{
	struct fi_cq_err_entry err;
	struct fi_context c1, c2;
	char buf[16];
	uint64_t errs = fi_cntr_readerr(R.rcntr);
	CHECK(fi_recv(R.ep, buf, sizeof(buf), NULL, FI_ADDR_UNSPEC, &c1) == 0, "recv to cancel");
	CHECK(fi_trecv(R.ep, buf, sizeof(buf), NULL, FI_ADDR_UNSPEC, 12345, 0, &c2) == 0, "trecv to cancel");
	CHECK(fi_cancel(&R.ep->fid, &c2) == 0, "cancel trecv");
	CHECK(fi_cancel(&R.ep->fid, &c1) == 0, "cancel recv");
	CHECK(wait_err(R.rxcq, &err, 5000) == FI_ECANCELED && err.op_context == &c2 && (err.flags & FI_TAGGED) && err.tag == 12345,
	      "canceled trecv entry: ctx %p flags %#llx", err.op_context, (unsigned long long)err.flags);
	CHECK(wait_err(R.rxcq, &err, 5000) == FI_ECANCELED && err.op_context == &c1 && (err.flags & FI_RECV), "canceled recv entry");
	CHECK(fi_cancel(&R.ep->fid, &c1) == -FI_ENOENT, "cancel twice");
	CHECK(fi_cancel(&R.ep->fid, &buf) == -FI_ENOENT, "cancel an unknown context");
	CHECK(fi_cntr_readerr(R.rcntr) == errs + 2, "canceled receives counted as errors: %llu -> %llu", (unsigned long long)errs,
	      (unsigned long long)fi_cntr_readerr(R.rcntr));
}

/* ---------------------------------------------------------------- truncation */

static void trunc_send(void)
{
	static uint8_t big[300000], small[1000];
	struct fi_cq_tagged_entry e[3];
	fill(big, sizeof(big), 60);
	fill(small, sizeof(small), 61);
	barrier();
	CHECK(RETRY(fi_send(R.ep, small, 1000, NULL, peer, small)) == 0, "send 1000 to a 100-byte receive");
	CHECK(RETRY(fi_tsend(R.ep, big, sizeof(big), NULL, peer, 60, big)) == 0, "long send to a 10000-byte receive");
	CHECK(RETRY(fi_tsend(R.ep, small, 1000, NULL, peer, 61, small + 1)) == 0, "tagged send to a 0-byte receive");
	/* truncated at the receiver, complete at the sender */
	CHECK(collect(R.txcq, e, 3, 20000) == 3, "truncated sends complete without error");
	barrier();
}

static void trunc_recv(void)
{
	static uint8_t a[100], b[10000];
	struct fi_cq_err_entry err;
	uint64_t errs = fi_cntr_readerr(R.rcntr);
	CHECK(fi_recv(R.ep, a, sizeof(a), NULL, FI_ADDR_UNSPEC, a) == 0, "recv 100");
	CHECK(fi_trecv(R.ep, b, sizeof(b), NULL, FI_ADDR_UNSPEC, 60, 0, b) == 0, "trecv 10000");
	CHECK(fi_trecv(R.ep, NULL, 0, NULL, FI_ADDR_UNSPEC, 61, 0, &errs) == 0, "trecv 0");
	barrier();
	for (int k = 0; k < 3; k++) {
		int rc = wait_err(R.rxcq, &err, 20000);
		if (rc == FI_ETRUNC && err.op_context == a)
			CHECK(err.len == 100 && err.olen == 900 && diff(a, 100, 61) < 0, "eager truncation: len %zu olen %zu",
			      (size_t)err.len, err.olen);
		else if (rc == FI_ETRUNC && err.op_context == b)
			CHECK(err.len == 10000 && err.olen == 290000 && err.tag == 60 && diff(b, 10000, 60) < 0,
			      "long truncation: len %zu olen %zu", (size_t)err.len, err.olen);
		else if (rc == FI_ETRUNC && err.op_context == &errs)
			CHECK(err.len == 0 && err.olen == 1000, "truncation to nothing: len %zu olen %zu", (size_t)err.len, err.olen);
		else
			CHECK(0, "truncation %d: %d (%s)", k, rc, rc > 0 ? fi_strerror(rc) : "-");
	}
	CHECK(fi_cntr_readerr(R.rcntr) == errs + 3, "truncations counted as errors");
	barrier();
}

/* ---------------------------------------------------------- remote CQ data */

static void data_send(void)
{
	static uint8_t big[200000], small[100];
	struct fi_cq_tagged_entry e[2];
	fill(big, sizeof(big), 70);
	fill(small, sizeof(small), 71);
	barrier();
	CHECK(RETRY(fi_senddata(R.ep, small, 100, NULL, 0x1111, peer, small)) == 0, "senddata");
	CHECK(RETRY(fi_tsenddata(R.ep, big, sizeof(big), NULL, 0x2222, peer, 70, big)) == 0, "tsenddata (long)");
	CHECK(RETRY(fi_injectdata(R.ep, small, 16, 0x3333, peer)) == 0, "injectdata");
	CHECK(RETRY(fi_tinjectdata(R.ep, small, 16, 0x4444, peer, 71)) == 0, "tinjectdata");
	CHECK(collect(R.txcq, e, 2, 20000) == 2, "data sends complete");
	barrier();
	CHECK(fi_cq_read(R.txcq, e, 1) == -FI_EAGAIN, "injects make no completion");
}

static void data_recv(void)
{
	static uint8_t a[100], b[200000], c[16], d[16];
	struct fi_cq_tagged_entry e;
	CHECK(fi_recv(R.ep, a, sizeof(a), NULL, FI_ADDR_UNSPEC, a) == 0 && fi_trecv(R.ep, b, sizeof(b), NULL, FI_ADDR_UNSPEC, 70, 0, b) == 0 &&
		      fi_recv(R.ep, c, sizeof(c), NULL, FI_ADDR_UNSPEC, c) == 0 && fi_trecv(R.ep, d, sizeof(d), NULL, FI_ADDR_UNSPEC, 71, 0, d) == 0,
	      "post receives");
	barrier();
	for (int k = 0; k < 4; k++) {
		int rc = wait_cq(R.rxcq, &e, 20000);
		if (rc != 1 || (e.op_context != a && e.op_context != b && e.op_context != c && e.op_context != d)) {
			CHECK(0, "cq data %d: rc %d", k, rc);
			continue;
		}
		uint64_t want = e.op_context == a ? 0x1111 : e.op_context == b ? 0x2222 : e.op_context == c ? 0x3333 : 0x4444;
		size_t len = e.op_context == a ? 100 : e.op_context == b ? sizeof(b) : 16;
		int ok = e.op_context == b ? diff(b, sizeof(b), 70) < 0 : diff(e.op_context, len, 71) < 0;
		CHECK(rc == 1 && (e.flags & FI_REMOTE_CQ_DATA) && e.data == want && e.len == len && ok,
		      "cq data %d: rc %d flags %#llx data %#llx len %zu", k, rc, (unsigned long long)e.flags, (unsigned long long)e.data,
		      (size_t)e.len);
	}
	barrier();
}

/* ---------------------------------------------------- FI_DELIVERY_COMPLETE */

static void dc_send(void)
{
	static uint8_t m1[500], m2[500], m3[30000];
	struct fi_context c1, c2, c3;
	struct fi_cq_tagged_entry e;
	fill(m1, sizeof(m1), 80);
	fill(m2, sizeof(m2), 81);
	fill(m3, sizeof(m3), 82);
	struct iovec v1 = { m1, sizeof(m1) }, v3 = { m3, sizeof(m3) };
	struct fi_msg_tagged t1 = { .msg_iov = &v1, .iov_count = 1, .addr = peer, .tag = 80, .context = &c1 };
	struct fi_msg_tagged t3 = { .msg_iov = &v3, .iov_count = 1, .addr = peer, .tag = 82, .context = &c3 };
	barrier();
	CHECK(RETRY(fi_tsendmsg(R.ep, &t1, FI_DELIVERY_COMPLETE)) == 0, "tsendmsg FI_DELIVERY_COMPLETE");
	CHECK(RETRY(fi_tsendmsg(R.ep, &t3, FI_DELIVERY_COMPLETE)) == 0, "tsendmsg FI_DELIVERY_COMPLETE (30000 bytes)");
	CHECK(RETRY(fi_tsend(R.ep, m2, sizeof(m2), NULL, peer, 81, &c2)) == 0, "tsend (transmit complete)");
	/* The plain send completes though nothing received it yet; the
	 * delivery-complete ones wait for the receives. */
	int rc = wait_cq(R.txcq, &e, 20000);
	CHECK(rc == 1 && e.op_context == &c2, "plain send completes first: rc %d ctx %s", rc,
	      rc != 1 ? "-" : e.op_context == &c1 ? "dc1" : e.op_context == &c3 ? "dc3" : "c2");
	usleep(300 * 1000);
	rc = wait_cq(R.txcq, &e, 10);
	CHECK(rc == -FI_ETIMEDOUT, "delivery complete waits for the receive: rc %d", rc);
	barrier();
	int got = 0;
	for (int k = 0; k < 2; k++) {
		rc = wait_cq(R.txcq, &e, 20000);
		got += rc == 1 && (e.op_context == &c1 || e.op_context == &c3);
	}
	CHECK(got == 2, "delivery complete sends complete once received: %d", got);
	barrier();
}

static void dc_recv(void)
{
	static uint8_t m1[500], m2[500], m3[30000];
	struct fi_cq_tagged_entry e[3];
	barrier();
	barrier();
	CHECK(fi_trecv(R.ep, m1, sizeof(m1), NULL, FI_ADDR_UNSPEC, 80, 0, m1) == 0 && fi_trecv(R.ep, m2, sizeof(m2), NULL, FI_ADDR_UNSPEC, 81, 0, m2) == 0 &&
		      fi_trecv(R.ep, m3, sizeof(m3), NULL, FI_ADDR_UNSPEC, 82, 0, m3) == 0,
	      "post receives");
	CHECK(collect(R.rxcq, e, 3, 20000) == 3 && diff(m1, sizeof(m1), 80) < 0 && diff(m2, sizeof(m2), 81) < 0 && diff(m3, sizeof(m3), 82) < 0,
	      "delivery complete data");
	barrier();
}

/* ---------------------------------------------------------------- inject */

static void inject_send(void)
{
	uint8_t *b = malloc(4096);
	struct fi_cq_tagged_entry e;
	fill(b, 4096, 90);
	barrier();
	CHECK(RETRY(fi_inject(R.ep, b, 4096, peer)) == 0, "inject inject_size bytes");
	memset(b, 0, 4096); /* the buffer is ours again at once */
	fill(b, 1, 91);
	CHECK(RETRY(fi_tinject(R.ep, b, 1, peer, 90)) == 0, "tinject 1 byte");
	b[0] = 0;
	CHECK(RETRY(fi_inject(R.ep, b, 0, peer)) == 0, "inject 0 bytes");
	fill(b, 100, 92);
	struct iovec v = { b, 100 };
	struct fi_msg m = { .msg_iov = &v, .iov_count = 1, .addr = peer, .context = b };
	CHECK(RETRY(fi_sendmsg(R.ep, &m, FI_INJECT)) == 0, "sendmsg FI_INJECT");
	memset(b, 0, 100);
	CHECK(wait_cq(R.txcq, &e, 20000) == 1 && e.op_context == b, "sendmsg FI_INJECT completes");
	barrier();
	CHECK(fi_cq_read(R.txcq, &e, 1) == -FI_EAGAIN, "fi_inject / fi_tinject make no completion");
	free(b);
}

static void inject_recv(void)
{
	static uint8_t a[4096], t[8], z[8], m[100];
	struct fi_cq_tagged_entry e;
	CHECK(fi_recv(R.ep, a, sizeof(a), NULL, FI_ADDR_UNSPEC, a) == 0 && fi_trecv(R.ep, t, sizeof(t), NULL, FI_ADDR_UNSPEC, 90, 0, t) == 0 &&
		      fi_recv(R.ep, z, sizeof(z), NULL, FI_ADDR_UNSPEC, z) == 0 && fi_recv(R.ep, m, sizeof(m), NULL, FI_ADDR_UNSPEC, m) == 0,
	      "post receives");
	barrier();
	for (int k = 0; k < 4; k++) {
		int rc = wait_cq(R.rxcq, &e, 20000);
		if (rc != 1)
			CHECK(0, "inject receive %d: %d", k, rc);
		else if (e.op_context == a)
			CHECK(e.len == 4096 && diff(a, 4096, 90) < 0, "inject data");
		else if (e.op_context == t)
			CHECK(e.len == 1 && diff(t, 1, 91) < 0, "tinject data");
		else if (e.op_context == z)
			CHECK(e.len == 0, "inject 0 bytes: len %zu", (size_t)e.len);
		else
			CHECK(e.op_context == m && e.len == 100 && diff(m, 100, 92) < 0, "FI_INJECT data");
	}
	barrier();
}

/* ---------------------------------------------------------------- counters */

static void cntr_send(void)
{
	static uint8_t b[200000];
	uint64_t s0 = fi_cntr_read(R.scntr);
	barrier();
	for (int i = 0; i < 4; i++)
		CHECK(RETRY(fi_send(R.ep, b, i == 3 ? sizeof(b) : 10u * i, NULL, peer, NULL)) == 0, "counted send %d", i);
	CHECK(RETRY(fi_tsend(R.ep, b, 10, NULL, peer, 5, NULL)) == 0, "counted tsend");
	CHECK(fi_cntr_wait(R.scntr, s0 + 5, 20000) == 0, "send counter reaches +5: %llu -> %llu", (unsigned long long)s0,
	      (unsigned long long)fi_cntr_read(R.scntr));
	CHECK(fi_cntr_readerr(R.scntr) == 0, "no send errors counted");
	struct fi_cq_tagged_entry e[5];
	CHECK(collect(R.txcq, e, 5, 20000) == 5, "counted sends make completions too");
	barrier();
}

static void cntr_recv(void)
{
	static uint8_t b[5][200000];
	uint64_t r0 = fi_cntr_read(R.rcntr);
	for (int i = 0; i < 4; i++)
		CHECK(fi_recv(R.ep, b[i], sizeof(b[i]), NULL, FI_ADDR_UNSPEC, NULL) == 0, "recv %d", i);
	CHECK(fi_trecv(R.ep, b[4], 10, NULL, FI_ADDR_UNSPEC, 5, 0, NULL) == 0, "trecv");
	barrier();
	CHECK(fi_cntr_wait(R.rcntr, r0 + 5, 20000) == 0, "receive counter reaches +5: %llu -> %llu", (unsigned long long)r0,
	      (unsigned long long)fi_cntr_read(R.rcntr));
	struct fi_cq_tagged_entry e[5];
	CHECK(collect(R.rxcq, e, 5, 20000) == 5, "counted receives make completions too");
	barrier();
}

/* ------------------------------------------------------------- fi_cq_sread */

static void sread_send(void)
{
	struct fi_cq_tagged_entry e;
	int fd = -1;
	char msg[] = "sread";
	CHECK(fi_control(&R.txcq->fid, FI_GETWAIT, &fd) == 0 && fd >= 0, "FI_GETWAIT on the FI_WAIT_FD queue: %d", fd);
	struct fid *fids[1] = { &R.txcq->fid };
	CHECK(fi_trywait(R.fabric, fids, 1) == 0, "trywait on an empty queue");
	barrier();
	usleep(100 * 1000);
	CHECK(RETRY(fi_send(R.ep, msg, sizeof(msg), NULL, peer, msg)) == 0, "send");
	/* Nothing here drives progress: the endpoint's own thread does. */
	struct pollfd p = { .fd = fd, .events = POLLIN };
	int pr = poll(&p, 1, 10000);
	CHECK(pr == 1 && (p.revents & POLLIN), "poll on the queue's fd: %d", pr);
	CHECK(fi_trywait(R.fabric, fids, 1) == -FI_EAGAIN, "trywait with an entry queued");
	ssize_t n = fi_cq_sread(R.txcq, &e, 1, NULL, 10000);
	CHECK(n == 1 && e.op_context == msg, "sread on the FI_WAIT_FD queue: %zd", n);
	long t0 = now_ms();
	n = fi_cq_sread(R.txcq, &e, 1, NULL, 50);
	CHECK(n == -FI_EAGAIN && now_ms() - t0 >= 40, "sread times out: %zd after %ld ms", n, now_ms() - t0);
	barrier();
}

static void sread_recv(void)
{
	struct fi_cq_tagged_entry e;
	char buf[16] = { 0 };
	long t0 = now_ms();
	ssize_t n = fi_cq_sread(R.rxcq, &e, 1, NULL, 50);
	CHECK(n == -FI_EAGAIN && now_ms() - t0 >= 40, "sread on an empty queue times out: %zd after %ld ms", n, now_ms() - t0);
	CHECK(fi_recv(R.ep, buf, sizeof(buf), NULL, FI_ADDR_UNSPEC, buf) == 0, "recv");
	barrier();
	n = fi_cq_sread(R.rxcq, &e, 1, NULL, 10000);
	CHECK(n == 1 && e.op_context == buf && !strcmp(buf, "sread"), "sread on the FI_WAIT_UNSPEC queue: %zd '%s'", n, buf);
	barrier();
}

/* --------------------------------------------------------- FI_PROGRESS_AUTO */

static void auto_pair(int sender)
{
	struct res A;
	fi_addr_t other = FI_ADDR_NOTAVAIL;
	char name[64];
	static uint8_t big[1 << 20], got[1 << 20];
	uint8_t small[10] = { 0 };
	struct fi_cq_tagged_entry e;
	open_res(&A, FI_PROGRESS_AUTO, FI_WAIT_UNSPEC);
	xwrite(A.name, A.namelen);
	xread(name, A.namelen);
	CHECK(fi_av_insert(A.av, name, 1, &other, 0, NULL) == 1, "insert auto peer");
	if (sender) {
		fill(big, sizeof(big), 100);
		fill(small, sizeof(small), 101);
		barrier();
		CHECK(RETRY(fi_tsend(A.ep, big, 200000, NULL, other, 100, big)) == 0 && RETRY(fi_send(A.ep, small, 10, NULL, other, small)) == 0,
		      "sends on auto endpoints");
		/* completions arrive without reading: the queue is not touched */
		usleep(200 * 1000);
		int ok = 0;
		for (int k = 0; k < 2; k++)
			ok += fi_cq_read(A.txcq, &e, 1) == 1;
		CHECK(ok == 2, "auto progress completed both sends before any read: %d", ok);
		memset(got, 0, sizeof(got));
		CHECK(fi_recv(A.ep, got, sizeof(got), NULL, other, got) == 0, "recv on auto endpoint");
		barrier();
		ssize_t n = fi_cq_sread(A.rxcq, &e, 1, NULL, 20000);
		CHECK(n == 1 && e.len == sizeof(got) && diff(got, sizeof(got), 102) < 0, "1 MiB back on auto endpoints: %zd", n);
	} else {
		memset(got, 0, sizeof(got));
		CHECK(fi_trecv(A.ep, got, 200000, NULL, other, 100, 0, got) == 0 && fi_recv(A.ep, small, 10, NULL, other, small) == 0,
		      "receives on auto endpoint");
		barrier();
		for (int k = 0; k < 2; k++) {
			ssize_t n = fi_cq_sread(A.rxcq, &e, 1, NULL, 20000);
			CHECK(n == 1 && (e.op_context == got ? diff(got, 200000, 100) < 0 : diff(small, 10, 101) < 0),
			      "auto receive %d: %zd", k, n);
		}
		fill(big, sizeof(big), 102);
		barrier();
		CHECK(RETRY(fi_send(A.ep, big, sizeof(big), NULL, other, big)) == 0, "send 1 MiB back");
		ssize_t n = fi_cq_sread(A.txcq, &e, 1, NULL, 20000);
		CHECK(n == 1 && e.op_context == big, "send back completes: %zd", n);
	}
	barrier();
	close_res(&A);
}

/* ---------------------------------------------------------------- RMA */

/* What the target tells the initiator. */
struct keys {
	uint64_t big, ro, atom, dma;          /* remote addresses of offset 0 */
	uint64_t big_key, ro_key, atom_key, dma_key;
};
#define BIG ((8u << 20) + 64)
#define ATOM 4096
#define DMA_LEN 40000
#define DMA_OFF (4096 + 16)
#define DMA_BASE 0x6000000000ULL

static uint64_t ra(uint64_t base, uint64_t off)
{
	return base + off;
}

/* Waits for the completion of ctx: 0, or the error code. */
static int done(void *ctx)
{
	struct fi_cq_tagged_entry e;
	struct fi_cq_err_entry err;
	int rc = wait_cq(R.txcq, &e, 30000);
	if (rc == 1)
		return e.op_context == ctx ? 0 : -1;
	if (rc == -FI_EAVAIL && fi_cq_readerr(R.txcq, &err, 0) == 1)
		return err.err;
	return rc;
}

static void rma_target(void)
{
	uint8_t *big = aligned_alloc(64, BIG), *ro = calloc(1, 4096), *atom = aligned_alloc(64, ATOM);
	struct fid_mr *mbig, *mro, *matom, *mdma;
	struct keys k;
	memset(big, 0, BIG);
	memset(atom, 0, ATOM);
	memset(ro, 0x5a, 4096);
	int mfd = memfd_create("rudp-test-target", 0);
	CHECK(mfd >= 0 && ftruncate(mfd, 1 << 16) == 0, "memfd");
	uint8_t *view = mmap(NULL, 1 << 16, PROT_READ | PROT_WRITE, MAP_SHARED, mfd, 0);
	CHECK(view != MAP_FAILED, "map memfd");
	memset(view, 0, 1 << 16);
	CHECK(fi_mr_reg(R.domain, big, BIG, FI_REMOTE_READ | FI_REMOTE_WRITE, 0, 0x100, 0, &mbig, NULL) == 0, "mr big");
	CHECK(fi_mr_reg(R.domain, ro, 4096, FI_REMOTE_READ, 0, 0x200, 0, &mro, NULL) == 0, "mr ro");
	CHECK(fi_mr_reg(R.domain, atom, ATOM, FI_REMOTE_READ | FI_REMOTE_WRITE, 0, 0x300, 0, &matom, NULL) == 0, "mr atom");
	struct fi_mr_dmabuf dmabuf = { .fd = mfd, .offset = DMA_OFF, .len = DMA_LEN, .base_addr = (void *)(uintptr_t)DMA_BASE };
	struct fi_mr_attr mattr = { .dmabuf = &dmabuf, .iov_count = 1, .access = FI_RECV | FI_REMOTE_READ | FI_REMOTE_WRITE, .requested_key = 0x400 };
	CHECK(fi_mr_regattr(R.domain, &mattr, FI_MR_DMABUF, &mdma) == 0, "dma-buf regattr");
	k.big = virt ? (uint64_t)(uintptr_t)big : 0;
	k.ro = virt ? (uint64_t)(uintptr_t)ro : 0;
	k.atom = virt ? (uint64_t)(uintptr_t)atom : 0;
	/* a dma-buf region is named by its base_addr */
	k.dma = virt ? DMA_BASE : 0;
	k.big_key = fi_mr_key(mbig);
	k.ro_key = fi_mr_key(mro);
	k.atom_key = fi_mr_key(matom);
	k.dma_key = fi_mr_key(mdma);
	CHECK(virt || (k.big_key == 0x100 && k.ro_key == 0x200 && k.atom_key == 0x300 && k.dma_key == 0x400), "application keys kept");
	xwrite(&k, sizeof(k));

	/* received into the dma-buf region */
	void *desc = fi_mr_desc(mdma);
	uint8_t *dev = (uint8_t *)(uintptr_t)DMA_BASE;
	CHECK(fi_trecv(R.ep, dev + 100, 20000, desc, FI_ADDR_UNSPEC, 110, 0, NULL) == 0, "trecv into dma-buf");
	CHECK(fi_trecv(R.ep, dev + 30000, 300, desc, FI_ADDR_UNSPEC, 111, 0, NULL) == 0, "trecv into dma-buf (small)");
	barrier();
	struct fi_cq_tagged_entry e;
	int rc = wait_cq(R.rxcq, &e, 20000);
	CHECK(rc == 1 && e.len == 20000 && e.tag == 110 && diff(view + DMA_OFF + 100, 20000, 111) < 0, "dma-buf receive: rc %d", rc);
	rc = wait_cq(R.rxcq, &e, 20000);
	CHECK(rc == 1 && e.len == 300 && e.tag == 111 && diff(view + DMA_OFF + 30000, 300, 112) < 0, "dma-buf receive (small): rc %d", rc);
	barrier();

	/* the initiator works; the keeper thread serves its requests */
	barrier();
	barrier();
	uint64_t seen = 0, sum = 0;
	int bad = 0;
	while ((rc = wait_cq(R.rxcq, &e, 200)) == 1) {
		seen++;
		sum += e.data;
		bad += e.flags != (FI_REMOTE_CQ_DATA | FI_RMA | FI_REMOTE_WRITE) || e.op_context != NULL;
		/* fi_cq(3): len is the length written */
		bad += e.len != (e.data == 0xD1 ? 100 : e.data == 0xD2 ? 200000 : e.data == 0xD3 ? 3000 : 32);
	}
	CHECK(seen == 4 && bad == 0 && sum == 0xD1 + 0xD2 + 0xD3 + 0xD4, "remote CQ data at the target: %llu entries, %d bad, sum %#llx",
	      (unsigned long long)seen, bad, (unsigned long long)sum);
	int ro_ok = 1;
	for (int i = 0; i < 4096; i++)
		ro_ok &= ro[i] == 0x5a;
	CHECK(ro_ok, "read-only region untouched");
	CHECK(virt || diff(view + DMA_OFF + 5000, 20000, 120) < 0, "fi_write into the dma-buf region landed in the memfd");
	barrier();
	CHECK(fi_close(&mbig->fid) == 0 && fi_close(&mro->fid) == 0 && fi_close(&matom->fid) == 0 && fi_close(&mdma->fid) == 0, "close mrs");
	munmap(view, 1 << 16);
	close(mfd);
	free(big);
	free(ro);
	free(atom);
}

static void atomics(const struct keys *K);

static void rma_initiator(void)
{
	struct keys K;
	struct fi_context ctx;
	uint8_t *src = malloc(BIG), *dst = malloc(BIG);
	xread(&K, sizeof(K));
	fill(src, BIG, 5);

	/* sent from a dma-buf region of our own */
	int mfd = memfd_create("rudp-test-initiator", 0);
	CHECK(mfd >= 0 && ftruncate(mfd, 1 << 16) == 0, "memfd");
	uint8_t *mine = mmap(NULL, 1 << 16, PROT_READ | PROT_WRITE, MAP_SHARED, mfd, 0);
	CHECK(mine != MAP_FAILED, "map memfd");
	fill(mine + 8192, 20000, 111);
	fill(mine + 8192 + 20000, 300, 112);
	struct fi_mr_dmabuf dmabuf = { .fd = mfd, .offset = 8192, .len = 20300, .base_addr = (void *)(uintptr_t)0x7000000000ULL };
	struct fi_mr_attr mattr = { .dmabuf = &dmabuf, .iov_count = 1, .access = FI_SEND, .requested_key = 5 };
	struct fid_mr *mr = NULL;
	CHECK(fi_mr_regattr(R.domain, &mattr, FI_MR_DMABUF, &mr) == 0, "dma-buf regattr (send)");
	void *desc = fi_mr_desc(mr);
	uint8_t *dev = (uint8_t *)(uintptr_t)0x7000000000ULL;
	CHECK(RETRY(fi_tsend(R.ep, dev, 20000, desc, peer, 110, &ctx)) == 0 && done(&ctx) == 0, "send from dma-buf memory");
	CHECK(RETRY(fi_tsend(R.ep, dev + 20000, 300, desc, peer, 111, &ctx)) == 0 && done(&ctx) == 0, "send from dma-buf memory (small)");
	barrier();
	barrier();
	CHECK(fi_close(&mr->fid) == 0, "close dma-buf mr");
	munmap(mine, 1 << 16);
	close(mfd);

	barrier();
	/* writes read back, 1 B .. 8 MiB, at an odd offset */
	static const size_t rs[] = { 1, 7, 1384, 4097, 65537, 1 << 20, 8 << 20 };
	for (size_t i = 0; i < sizeof(rs) / sizeof(rs[0]); i++) {
		int rc = -1;
		if (RETRY(fi_write(R.ep, src + i, rs[i], NULL, peer, ra(K.big, 3), K.big_key, &ctx)) == 0)
			rc = done(&ctx);
		CHECK(rc == 0, "write %zu bytes: %d", rs[i], rc);
		memset(dst, 0, rs[i]);
		rc = -1;
		if (RETRY(fi_read(R.ep, dst, rs[i], NULL, peer, ra(K.big, 3), K.big_key, &ctx)) == 0)
			rc = done(&ctx);
		CHECK(rc == 0 && !memcmp(dst, src + i, rs[i]), "read %zu bytes back: %d", rs[i], rc);
	}
	/* vectored: three pieces out, two back */
	{
		struct iovec w[3] = { { src + 100, 10 }, { src + 200, 70000 }, { src + 300000, 5 } };
		struct fi_rma_iov rv = { .addr = ra(K.big, 1000), .len = 70015, .key = K.big_key };
		CHECK(RETRY(fi_writev(R.ep, w, NULL, 3, peer, rv.addr, rv.key, &ctx)) == 0 && done(&ctx) == 0, "writev 3 iovs");
		memset(dst, 0, 70015);
		struct iovec r[2] = { { dst, 15 }, { dst + 15, 70000 } };
		struct fi_msg_rma m = { .msg_iov = r, .iov_count = 2, .addr = peer, .rma_iov = &rv, .rma_iov_count = 1, .context = &ctx };
		CHECK(RETRY(fi_readmsg(R.ep, &m, 0)) == 0 && done(&ctx) == 0, "readmsg 2 iovs");
		CHECK(!memcmp(dst, src + 100, 10) && !memcmp(dst + 10, src + 200, 70000) && !memcmp(dst + 70010, src + 300000, 5), "vectored data");
	}
	/* remote CQ data: writedata, writemsg, inject_writedata */
	CHECK(RETRY(fi_writedata(R.ep, src, 100, NULL, 0xD1, peer, ra(K.big, 0), K.big_key, &ctx)) == 0 && done(&ctx) == 0, "writedata");
	CHECK(RETRY(fi_writedata(R.ep, src, 200000, NULL, 0xD2, peer, ra(K.big, 0), K.big_key, &ctx)) == 0 && done(&ctx) == 0,
	      "writedata 200000 bytes");
	{
		struct iovec w = { src + 7, 3000 };
		struct fi_rma_iov rv = { .addr = ra(K.big, 64), .len = 3000, .key = K.big_key };
		struct fi_msg_rma m = { .msg_iov = &w, .iov_count = 1, .addr = peer, .rma_iov = &rv, .rma_iov_count = 1, .context = &ctx, .data = 0xD3 };
		CHECK(RETRY(fi_writemsg(R.ep, &m, FI_REMOTE_CQ_DATA)) == 0 && done(&ctx) == 0, "writemsg FI_REMOTE_CQ_DATA");
	}
	CHECK(RETRY(fi_inject_writedata(R.ep, src + 9, 32, 0xD4, peer, ra(K.big, 4096), K.big_key)) == 0, "inject_writedata");
	/* inject_write: the buffer is ours again at once */
	uint8_t small[64];
	memcpy(small, src + 11, 64);
	CHECK(RETRY(fi_inject_write(R.ep, small, 64, peer, ra(K.big, 8192), K.big_key)) == 0, "inject_write");
	memset(small, 0, 64);
	/* reads are ordered after the writes only once those are done: poll */
	int ok = 0;
	for (int tries = 0; tries < 200 && !ok; tries++) {
		memset(dst, 0, 64);
		if (RETRY(fi_read(R.ep, dst, 64, NULL, peer, ra(K.big, 8192), K.big_key, &ctx)) == 0 && done(&ctx) == 0)
			ok = !memcmp(dst, src + 11, 64);
		if (!ok)
			usleep(10000);
	}
	CHECK(ok, "inject_write data read back");
	ok = 0;
	for (int tries = 0; tries < 200 && !ok; tries++) {
		if (RETRY(fi_read(R.ep, dst, 32, NULL, peer, ra(K.big, 4096), K.big_key, &ctx)) == 0 && done(&ctx) == 0)
			ok = !memcmp(dst, src + 9, 32);
		if (!ok)
			usleep(10000);
	}
	CHECK(ok, "inject_writedata data read back");
	/* the read-only region */
	memset(dst, 0, 4096);
	int rc = -1;
	if (RETRY(fi_read(R.ep, dst, 4096, NULL, peer, ra(K.ro, 0), K.ro_key, &ctx)) == 0)
		rc = done(&ctx);
	int same = 1;
	for (int i = 0; i < 4096; i++)
		same &= dst[i] == 0x5a;
	CHECK(rc == 0 && same, "read the read-only region: %d", rc);
	/* the dma-buf region as a target. Only with offsets: under
	 * FI_MR_VIRT_ADDR the registration is known by the address of the
	 * provider's own mapping of the dma-buf, which the application never
	 * sees, not by base_addr */
	if (!virt) {
		fill(dst, 20000, 120);
		rc = -1;
		if (RETRY(fi_write(R.ep, dst, 20000, NULL, peer, ra(K.dma, 5000), K.dma_key, &ctx)) == 0)
			rc = done(&ctx);
		CHECK(rc == 0, "write into a dma-buf registration: %d (%s)", rc, rc > 0 ? fi_strerror(rc) : "-");
		memset(dst, 0, 20000);
		rc = -1;
		if (RETRY(fi_read(R.ep, dst, 20000, NULL, peer, ra(K.dma, 5000), K.dma_key, &ctx)) == 0)
			rc = done(&ctx);
		CHECK(rc == 0 && diff(dst, 20000, 120) < 0, "read from a dma-buf registration: %d (%s)", rc,
		      rc > 0 ? fi_strerror(rc) : "-");
	}

	atomics(&K);
	barrier();
	barrier();
	free(src);
	free(dst);
}

/* -------------------------------------------------------------- atomics */

static void atomics(const struct keys *K)
{
	struct fi_context ctx;
	size_t count = 0;
	struct fi_atomic_attr attr;
	uint8_t expect[640], got[640];
	memset(expect, 0, sizeof(expect));

	/* what is valid */
	CHECK(fi_atomicvalid(R.ep, FI_INT32, FI_SUM, &count) == 0 && count >= 4, "atomicvalid INT32 SUM: count %zu", count);
	size_t c2 = 0;
	CHECK(fi_query_atomic(R.domain, FI_INT32, FI_SUM, &attr, 0) == 0 && attr.size == 4 && attr.count == count,
	      "query_atomic INT32 SUM: size %zu count %zu (atomicvalid %zu)", attr.size, attr.count, count);
	CHECK(fi_fetch_atomicvalid(R.ep, FI_UINT64, FI_SUM, &c2) == 0 && c2 >= 1, "fetch_atomicvalid UINT64 SUM");
	CHECK(fi_compare_atomicvalid(R.ep, FI_UINT64, FI_CSWAP, &c2) == 0 && c2 >= 1, "compare_atomicvalid UINT64 CSWAP");
	CHECK(fi_query_atomic(R.domain, FI_UINT64, FI_CSWAP, &attr, FI_COMPARE_ATOMIC) == 0 && attr.size == 8 && attr.count >= 1,
	      "query_atomic UINT64 CSWAP compare");
	CHECK(fi_query_atomic(R.domain, FI_DOUBLE, FI_SUM, &attr, FI_FETCH_ATOMIC) == 0 && attr.size == 8, "query_atomic DOUBLE SUM fetch");
	CHECK(fi_atomicvalid(R.ep, FI_FLOAT, FI_BOR, &c2) == -FI_EOPNOTSUPP, "atomicvalid FLOAT BOR unsupported");
	CHECK(fi_atomicvalid(R.ep, FI_UINT64, FI_CSWAP, &c2) == -FI_EOPNOTSUPP, "CSWAP is not a plain atomic");
	CHECK(fi_compare_atomicvalid(R.ep, FI_UINT64, FI_SUM, &c2) == -FI_EOPNOTSUPP, "SUM is not a compare atomic");
	CHECK(fi_query_atomic(R.domain, FI_FLOAT, FI_BAND, &attr, 0) == -FI_EOPNOTSUPP, "query_atomic FLOAT BAND unsupported");

#define ATOMIC(what, call)                                                                    \
	do {                                                                                  \
		int rc_ = -1;                                                                 \
		if (RETRY(call) == 0)                                                         \
			rc_ = done(&ctx);                                                     \
		CHECK(rc_ == 0, "%s: %d (%s)", what, rc_, rc_ > 0 ? fi_strerror(rc_) : "-"); \
	} while (0)

	/* 0: INT32[4] SUM twice */
	int32_t i32[4] = { 1, -2, 3, -4 };
	for (int t = 0; t < 2; t++)
		ATOMIC("atomic INT32 SUM", fi_atomic(R.ep, i32, 4, NULL, peer, ra(K->atom, 0), K->atom_key, FI_INT32, FI_SUM, &ctx));
	int32_t e32[4] = { 2, -4, 6, -8 };
	memcpy(expect + 0, e32, sizeof(e32));
	/* 64: UINT64[4] SUM, then fetch-and-add returns the old values */
	uint64_t u64[4] = { 1ULL << 40, 2, 3, 4 }, ones[4] = { 1, 1, 1, 1 }, old[4] = { 0 };
	ATOMIC("atomic UINT64 SUM", fi_atomic(R.ep, u64, 4, NULL, peer, ra(K->atom, 64), K->atom_key, FI_UINT64, FI_SUM, &ctx));
	ATOMIC("fetch_atomic UINT64 SUM",
	       fi_fetch_atomic(R.ep, ones, 4, NULL, old, NULL, peer, ra(K->atom, 64), K->atom_key, FI_UINT64, FI_SUM, &ctx));
	CHECK(!memcmp(old, u64, sizeof(u64)), "fetch_atomic returns the old values: %llu %llu", (unsigned long long)old[0],
	      (unsigned long long)old[1]);
	uint64_t e64[4] = { (1ULL << 40) + 1, 3, 4, 5 };
	memcpy(expect + 64, e64, sizeof(e64));
	/* 128: INT64[2] SUM */
	int64_t i64[2] = { -5, 7 };
	ATOMIC("atomic INT64 SUM", fi_atomic(R.ep, i64, 2, NULL, peer, ra(K->atom, 128), K->atom_key, FI_INT64, FI_SUM, &ctx));
	memcpy(expect + 128, i64, sizeof(i64));
	/* 192: FLOAT[4] SUM twice */
	float f[4] = { 1.5f, 2.25f, -3.0f, 0.5f }, ef[4] = { 3.0f, 4.5f, -6.0f, 1.0f };
	for (int t = 0; t < 2; t++)
		ATOMIC("atomic FLOAT SUM", fi_atomic(R.ep, f, 4, NULL, peer, ra(K->atom, 192), K->atom_key, FI_FLOAT, FI_SUM, &ctx));
	memcpy(expect + 192, ef, sizeof(ef));
	/* 256: DOUBLE[2] fetch SUM from zero */
	double d[2] = { 1.25, -2.5 }, dold[2] = { 9, 9 };
	ATOMIC("fetch_atomic DOUBLE SUM",
	       fi_fetch_atomic(R.ep, d, 2, NULL, dold, NULL, peer, ra(K->atom, 256), K->atom_key, FI_DOUBLE, FI_SUM, &ctx));
	CHECK(dold[0] == 0 && dold[1] == 0, "fetch DOUBLE old values: %g %g", dold[0], dold[1]);
	memcpy(expect + 256, d, sizeof(d));
	/* 320: UINT64 CSWAP that swaps, then one that does not */
	uint64_t v = 77, cmp = 0, res = 99;
	ATOMIC("compare_atomic UINT64 CSWAP",
	       fi_compare_atomic(R.ep, &v, 1, NULL, &cmp, NULL, &res, NULL, peer, ra(K->atom, 320), K->atom_key, FI_UINT64, FI_CSWAP, &ctx));
	CHECK(res == 0, "CSWAP returns the old value: %llu", (unsigned long long)res);
	v = 99;
	cmp = 5;
	ATOMIC("compare_atomic UINT64 CSWAP (no swap)",
	       fi_compare_atomic(R.ep, &v, 1, NULL, &cmp, NULL, &res, NULL, peer, ra(K->atom, 320), K->atom_key, FI_UINT64, FI_CSWAP, &ctx));
	CHECK(res == 77, "CSWAP (no swap) returns the current value: %llu", (unsigned long long)res);
	uint64_t e320 = 77;
	memcpy(expect + 320, &e320, 8);
	/* 384: INT32[2] CSWAP: the first element matches, the second not */
	int32_t nv[2] = { 10, 11 }, cv[2] = { 0, 1 }, rv[2] = { 5, 5 };
	ATOMIC("compare_atomic INT32 CSWAP x2",
	       fi_compare_atomic(R.ep, nv, 2, NULL, cv, NULL, rv, NULL, peer, ra(K->atom, 384), K->atom_key, FI_INT32, FI_CSWAP, &ctx));
	CHECK(rv[0] == 0 && rv[1] == 0, "INT32 CSWAP old values: %d %d", rv[0], rv[1]);
	int32_t e384[2] = { 10, 0 };
	memcpy(expect + 384, e384, sizeof(e384));
	/* 448: UINT8[3] SUM */
	uint8_t u8[3] = { 250, 10, 1 };
	ATOMIC("atomic UINT8 SUM", fi_atomic(R.ep, u8, 3, NULL, peer, ra(K->atom, 448), K->atom_key, FI_UINT8, FI_SUM, &ctx));
	memcpy(expect + 448, u8, 3);
	/* 512: ATOMIC_WRITE, then ATOMIC_READ through a fetch */
	uint64_t w = 0x1122334455667788ULL, r = 0;
	ATOMIC("atomic UINT64 ATOMIC_WRITE", fi_atomic(R.ep, &w, 1, NULL, peer, ra(K->atom, 512), K->atom_key, FI_UINT64, FI_ATOMIC_WRITE, &ctx));
	ATOMIC("fetch_atomic UINT64 ATOMIC_READ",
	       fi_fetch_atomic(R.ep, NULL, 1, NULL, &r, NULL, peer, ra(K->atom, 512), K->atom_key, FI_UINT64, FI_ATOMIC_READ, &ctx));
	CHECK(r == w, "ATOMIC_READ: %#llx", (unsigned long long)r);
	memcpy(expect + 512, &w, 8);
	/* 576: INT32 MIN / MAX */
	int32_t mm[2] = { -3, 8 };
	ATOMIC("atomic INT32 MIN", fi_atomic(R.ep, &mm[0], 1, NULL, peer, ra(K->atom, 576), K->atom_key, FI_INT32, FI_MIN, &ctx));
	ATOMIC("atomic INT32 MAX", fi_atomic(R.ep, &mm[1], 1, NULL, peer, ra(K->atom, 580), K->atom_key, FI_INT32, FI_MAX, &ctx));
	memcpy(expect + 576, mm, sizeof(mm));

	/* the most elements fi_*atomicvalid allow, in one call */
	size_t mc = 0, mf = 0;
	CHECK(fi_compare_atomicvalid(R.ep, FI_UINT64, FI_CSWAP, &mc) == 0 && mc >= 1 && mc <= 64, "compare count %zu", mc);
	CHECK(fi_fetch_atomicvalid(R.ep, FI_INT32, FI_SUM, &mf) == 0 && mf >= 1 && mf <= 64, "fetch count %zu", mf);
	uint64_t cs_new[64], cs_cmp[64] = { 0 }, cs_old[64];
	int32_t fa[64], fold[64];
	for (size_t i = 0; i < 64; i++) {
		cs_new[i] = i + 1;
		cs_old[i] = 99;
		fa[i] = (int32_t)i - 7;
		fold[i] = 99;
	}
	ATOMIC("compare_atomic UINT64 CSWAP, the largest count",
	       fi_compare_atomic(R.ep, cs_new, mc, NULL, cs_cmp, NULL, cs_old, NULL, peer, ra(K->atom, 1024), K->atom_key, FI_UINT64,
				 FI_CSWAP, &ctx));
	ATOMIC("fetch_atomic INT32 SUM, the largest count",
	       fi_fetch_atomic(R.ep, fa, mf, NULL, fold, NULL, peer, ra(K->atom, 2048), K->atom_key, FI_INT32, FI_SUM, &ctx));
	int zero = 1;
	for (size_t i = 0; i < mc; i++)
		zero &= cs_old[i] == 0;
	for (size_t i = 0; i < mf; i++)
		zero &= fold[i] == 0;
	CHECK(zero, "largest CSWAP and fetch SUM old values");
	int rc = -1;
	memset(got, 0, sizeof(got));
	if (RETRY(fi_read(R.ep, got, 8 * mc, NULL, peer, ra(K->atom, 1024), K->atom_key, &ctx)) == 0)
		rc = done(&ctx);
	CHECK(rc == 0 && !memcmp(got, cs_new, 8 * mc), "largest CSWAP applied");
	rc = -1;
	if (RETRY(fi_read(R.ep, got, 4 * mf, NULL, peer, ra(K->atom, 2048), K->atom_key, &ctx)) == 0)
		rc = done(&ctx);
	CHECK(rc == 0 && !memcmp(got, fa, 4 * mf), "largest fetch SUM applied");

	rc = -1;
	memset(got, 0xff, sizeof(got));
	if (RETRY(fi_read(R.ep, got, sizeof(got), NULL, peer, ra(K->atom, 0), K->atom_key, &ctx)) == 0)
		rc = done(&ctx);
	int at = -1;
	for (int i = 0; i < (int)sizeof(got) && at < 0; i++)
		if (got[i] != expect[i])
			at = i;
	CHECK(rc == 0 && at < 0, "atomic results read back: rc %d, first difference at byte %d", rc, at);
#undef ATOMIC
}

/* ---------------------------------------------------------------- main */

int main(void)
{
	int to_child[2], to_parent[2];
	setvbuf(stdout, NULL, _IONBF, 0);
	setenv(pvar("IFACE"), "lo", 0);
	const char *m = getenv("RUDP_MR");
	virt = !(m && !strcmp(m, "offset"));
	printf("%s features: %s addressing\n", prov_name(), virt ? "FI_MR_VIRT_ADDR" : "offset");
	if (pipe(to_child) || pipe(to_parent))
		return 2;
	pid_t pid = fork();
	if (pid < 0)
		return 2;
	int sender = pid == 0;
	if (sender) {
		who = "sender";
		rfd = to_child[0];
		wfd = to_parent[1];
		open_res(&R, FI_PROGRESS_MANUAL, FI_WAIT_FD);
		open_res(&R2, FI_PROGRESS_MANUAL, FI_WAIT_UNSPEC);
		xwrite(R.name, R.namelen);
		xwrite(R2.name, R2.namelen);
		xread(peer_name, 16);
		CHECK(fi_av_insert(R.av, peer_name, 1, &peer, 0, NULL) == 1, "insert receiver");
		CHECK(fi_av_insert(R2.av, peer_name, 1, &peer2, 0, NULL) == 1, "insert receiver (second endpoint)");
	} else {
		rfd = to_parent[0];
		wfd = to_child[1];
		open_res(&R, FI_PROGRESS_MANUAL, FI_WAIT_UNSPEC);
		xread(peer_name, 16);
		xread(peer2_name, 16);
		xwrite(R.name, R.namelen);
		/* the second sender goes into the AV later (FI_SOURCE checks) */
		CHECK(fi_av_insert(R.av, peer_name, 1, &peer, 0, NULL) == 1, "insert sender");
	}

	static const char *names[] = { "sizes", "iovs", "directed", "order", "multi-recv", "peek", "cancel", "truncation",
				       "cq-data", "delivery-complete", "inject", "counters", "sread", "auto-progress", "rma" };
	for (int ph = 0; ph < (int)(sizeof(names) / sizeof(names[0])); ph++) {
		int f0 = failed;
		long t0 = now_ms();
		barrier();
		switch (ph) {
		case 0:
			for (int round = 0; round < 3; round++)
				sender ? sizes_send(round) : sizes_recv(round);
			break;
		case 1:
			sender ? iov_send() : iov_recv();
			break;
		case 2:
			sender ? source_send() : source_recv();
			break;
		case 3:
			sender ? order_send() : order_recv();
			break;
		case 4:
			sender ? multi_send() : multi_recv();
			break;
		case 5:
			sender ? peek_send() : peek_recv();
			break;
		case 6:
			if (!sender)
				cancel_recv();
			break;
		case 7:
			sender ? trunc_send() : trunc_recv();
			break;
		case 8:
			sender ? data_send() : data_recv();
			break;
		case 9:
			sender ? dc_send() : dc_recv();
			break;
		case 10:
			sender ? inject_send() : inject_recv();
			break;
		case 11:
			sender ? cntr_send() : cntr_recv();
			break;
		case 12:
			sender ? sread_send() : sread_recv();
			break;
		case 13:
			auto_pair(sender);
			break;
		case 14:
			sender ? rma_initiator() : rma_target();
			break;
		}
		if (!sender)
			printf("%-18s %s (%ld ms)\n", names[ph], failed == f0 ? "ok" : "FAILED", now_ms() - t0);
		else if (failed != f0)
			printf("%-18s FAILED at the sender\n", names[ph]);
	}
	barrier();
	if (sender) {
		close_res(&R2);
		close_res(&R);
		printf("sender: %d passed, %d failed\n", passed, failed);
		_exit(failed ? 1 : 0);
	}
	close_res(&R);
	int st;
	waitpid(pid, &st, 0);
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		printf("FAIL the sender exited with status %#x\n", st);
		failed++;
	}
	printf("%d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}
