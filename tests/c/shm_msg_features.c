/* The message-side features of the shm provider through the C API, with the
 * data checked and bad input tried:
 *   two processes (parent receives, child sends; phases kept in step over
 *   pipes): FI_PEEK / FI_CLAIM / FI_DISCARD, multi-iov sends and receives,
 *   FI_MULTI_RECV with FI_OPT_MIN_MULTI_RECV, FI_SOURCE (fi_cq_readfrom)
 *   with FI_AV_USER_ID, FI_SOURCE_ERR, FI_SELECTIVE_COMPLETION with
 *   FI_COMPLETION, FI_WAIT_FD CQs and counters with FI_GETWAIT + poll(2) +
 *   fi_trywait, counters bound to every event type, fi_cancel, fi_getopt /
 *   fi_setopt, FI_MR_DMABUF registrations (memfd) on both sides;
 *   one process: FI_THREAD_SAFE with several threads sending and reading,
 *   FI_PROGRESS_AUTO (completions without any CQ read; the thread ends at
 *   close), FI_MR_LOCAL, FI_AV_MAP;
 *   a killed peer: a pending send completes with an error.
 * Prints "N passed, N failed". */
#define _GNU_SOURCE
#include <dirent.h>
#include <poll.h>
#include <pthread.h>
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static atomic_int passed, failed;
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

struct opts {
	uint64_t caps;
	enum fi_progress progress;
	int mr_mode;
	enum fi_av_type av_type;
	enum fi_wait_obj txwait;
	uint64_t txbind;
};

struct res {
	struct fi_info *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_cq *txcq, *rxcq;
	struct fid_av *av;
	struct fid_ep *ep;
	struct fid_cntr *scntr, *rcntr;
	char name[128];
	size_t namelen;
};

static int open_res(struct res *r, const struct opts *o)
{
	struct fi_info *hints = fi_allocinfo();
	struct fi_cq_attr rx_attr = { .format = FI_CQ_FORMAT_TAGGED, .wait_obj = FI_WAIT_UNSPEC };
	struct fi_cq_attr tx_attr = { .format = FI_CQ_FORMAT_TAGGED, .wait_obj = o->txwait };
	struct fi_av_attr av_attr = { .type = o->av_type ? o->av_type : FI_AV_TABLE };
	struct fi_cntr_attr cattr = { .events = FI_CNTR_EVENTS_COMP, .wait_obj = FI_WAIT_UNSPEC };
	int ret;

	memset(r, 0, sizeof(*r));
	hints->ep_attr->type = FI_EP_RDM;
	hints->caps = o->caps ? o->caps : (FI_MSG | FI_TAGGED);
	hints->domain_attr->data_progress = o->progress;
	hints->domain_attr->threading = FI_THREAD_SAFE;
	hints->domain_attr->mr_mode = o->mr_mode;
	hints->fabric_attr->prov_name = strdup("shm");
	ret = fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &r->info);
	fi_freeinfo(hints);
	if (ret) {
		printf("fi_getinfo: %d\n", ret);
		return ret;
	}
	if (fi_fabric(r->info->fabric_attr, &r->fabric, NULL) || fi_domain(r->fabric, r->info, &r->domain, NULL) ||
	    fi_cq_open(r->domain, &tx_attr, &r->txcq, NULL) || fi_cq_open(r->domain, &rx_attr, &r->rxcq, NULL) ||
	    fi_av_open(r->domain, &av_attr, &r->av, NULL) || fi_cntr_open(r->domain, &cattr, &r->scntr, NULL) ||
	    fi_cntr_open(r->domain, &cattr, &r->rcntr, NULL) || fi_endpoint(r->domain, r->info, &r->ep, NULL)) {
		printf("opening objects failed\n");
		return -1;
	}
	if (fi_ep_bind(r->ep, &r->av->fid, 0) || fi_ep_bind(r->ep, &r->txcq->fid, FI_TRANSMIT | o->txbind) ||
	    fi_ep_bind(r->ep, &r->rxcq->fid, FI_RECV) || fi_ep_bind(r->ep, &r->scntr->fid, FI_SEND) ||
	    fi_ep_bind(r->ep, &r->rcntr->fid, FI_RECV) || fi_enable(r->ep)) {
		printf("binding failed\n");
		return -1;
	}
	r->namelen = sizeof(r->name);
	return fi_getname(&r->ep->fid, r->name, &r->namelen);
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

/* One completion or a negative error, polling for up to ~10 s. */
static int wait_cq(struct fid_cq *cq, struct fi_cq_tagged_entry *e)
{
	for (long i = 0; i < 20000000L; i++) {
		ssize_t n = fi_cq_read(cq, e, 1);
		if (n == 1)
			return 1;
		if (n != -FI_EAGAIN)
			return (int)n;
		if (i > 100000)
			usleep(1);
	}
	return -FI_ETIMEDOUT;
}

/* An error completion: its err code, or a negative value. */
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

static void fill(char *b, size_t n, int seed)
{
	for (size_t i = 0; i < n; i++)
		b[i] = (char)(i * 7 + seed);
}

static int same(const char *b, size_t n, int seed)
{
	for (size_t i = 0; i < n; i++)
		if (b[i] != (char)(i * 7 + seed))
			return 0;
	return 1;
}

/* Pipes between the two processes: one byte per step. */
static int rfd, wfd;
static void step_send(char c)
{
	if (write(wfd, &c, 1) != 1)
		failed++;
}
static void step_wait(char c)
{
	char got = 0;
	if (read(rfd, &got, 1) != 1 || got != c) {
		printf("FAIL [%s] step %c: got %c\n", who, c, got);
		failed++;
		exit(1);
	}
}

static ssize_t tsend(struct fid_ep *ep, const void *buf, size_t len, fi_addr_t to, uint64_t tag, void *ctx)
{
	ssize_t ret;
	while ((ret = fi_tsend(ep, buf, len, NULL, to, tag, ctx)) == -FI_EAGAIN)
		;
	return ret;
}

/* --------------------------------------------------------------- sender */

static void sender(struct res *r, fi_addr_t peer, const char *peer2_name)
{
	char *buf = malloc(1 << 16);
	struct fi_cq_tagged_entry e;

	/* 1. peek / claim / discard: three tagged messages wait unexpected. */
	step_wait('1');
	CHECK(tsend(r->ep, "peekme", 7, peer, 1, NULL) == 0, "send tag 1");
	CHECK(tsend(r->ep, "discard", 8, peer, 2, NULL) == 0, "send tag 2");
	fill(buf, 5000, 3);
	CHECK(tsend(r->ep, buf, 5000, peer, 3, NULL) == 0, "send tag 3 (rendezvous)");
	/* Selective completion: plain sends make no CQ entry, but count. */
	/* The two eager sends are complete; the rendezvous one waits for the
	 * receiver. */
	CHECK(fi_cntr_wait(r->scntr, 2, 10000) == 0, "send counter reaches 2: %llu",
	      (unsigned long long)fi_cntr_read(r->scntr));
	CHECK(fi_cq_read(r->txcq, &e, 1) == -FI_EAGAIN, "selective: no entry without FI_COMPLETION");
	step_send('1');

	/* 2. vectored sends: 3 buffers inline, 3 buffers of 9000 bytes. */
	step_wait('2');
	char a[10], b[50], c[40];
	fill(a, 10, 1);
	fill(b, 50, 2);
	fill(c, 40, 3);
	struct iovec iov[3] = { { a, 10 }, { b, 50 }, { c, 40 } };
	CHECK(fi_sendv(r->ep, iov, NULL, 3, peer, NULL) == 0, "sendv inline");
	char *big = malloc(9000);
	fill(big, 9000, 4);
	struct iovec biov[3] = { { big, 1000 }, { big + 1000, 3000 }, { big + 4000, 5000 } };
	void *ctx_big = big;
	struct fi_msg m = { .msg_iov = biov, .iov_count = 3, .addr = peer, .context = ctx_big };
	/* FI_COMPLETION asks for an entry despite FI_SELECTIVE_COMPLETION; the
	 * transmit CQ uses FI_WAIT_FD: fi_trywait arms it, poll sees it. */
	int fd = -1;
	CHECK(fi_control(&r->txcq->fid, FI_GETWAIT, &fd) == 0 && fd >= 0, "FI_GETWAIT on FI_WAIT_FD cq: %d", fd);
	struct fid *fids[1] = { &r->txcq->fid };
	CHECK(fi_trywait(r->fabric, fids, 1) == 0, "trywait on an empty cq");
	CHECK(fi_sendmsg(r->ep, &m, FI_COMPLETION) == 0, "sendmsg 3 iovs rendezvous");
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	int pr = 0;
	for (int i = 0; i < 2000 && pr == 0; i++) {
		/* Manual progress: something must drive it while we wait. */
		fi_cntr_read(r->scntr);
		pr = poll(&pfd, 1, 5);
	}
	CHECK(pr == 1 && (pfd.revents & POLLIN), "poll on the CQ fd: %d", pr);
	CHECK(fi_trywait(r->fabric, fids, 1) == -FI_EAGAIN, "trywait with an entry queued");
	CHECK(wait_cq(r->txcq, &e) == 1 && e.op_context == ctx_big && (e.flags & FI_SEND), "sendmsg completion");
	free(big);
	step_send('2');

	/* 3. multi-receive: four 60-byte messages. */
	step_wait('3');
	for (int i = 0; i < 4; i++) {
		fill(buf, 60, 10 + i);
		CHECK(fi_send(r->ep, buf, 60, NULL, peer, NULL) == 0, "send %d for multi-recv", i);
	}
	step_send('3');

	/* 4. sources: to the parent's first endpoint (known to it) and to its
	 * second one (which does not know us: FI_SOURCE_ERR). */
	step_wait('4');
	fi_addr_t peer2 = FI_ADDR_NOTAVAIL;
	CHECK(fi_av_insert(r->av, peer2_name, 1, &peer2, 0, NULL) == 1, "insert second endpoint");
	CHECK(fi_send(r->ep, "src", 4, NULL, peer, NULL) == 0, "send for FI_SOURCE");
	CHECK(fi_send(r->ep, "who", 4, NULL, peer2, NULL) == 0, "send to an endpoint that does not know us");
	step_send('4');

	/* 6. dma-buf: the send buffer is a registered memfd region. */
	step_wait('6');
	int mfd = memfd_create("rfabric-test-tx", 0);
	CHECK(mfd >= 0 && ftruncate(mfd, 1 << 16) == 0, "memfd");
	char *mine = mmap(NULL, 1 << 16, PROT_READ | PROT_WRITE, MAP_SHARED, mfd, 0);
	CHECK(mine != MAP_FAILED, "map memfd");
	fill(mine + 8192, 20000, 77);
	struct fi_mr_dmabuf dmabuf = { .fd = mfd, .offset = 8192, .len = 20000, .base_addr = (void *)(uintptr_t)0x7000000000ULL };
	struct fi_mr_attr mattr = { .dmabuf = &dmabuf, .iov_count = 1, .access = FI_SEND, .requested_key = 5 };
	struct fid_mr *mr = NULL;
	CHECK(fi_mr_regattr(r->domain, &mattr, FI_MR_DMABUF, &mr) == 0, "dmabuf regattr");
	/* The application names the memory by base_addr; the provider reaches
	 * it through its own mapping. */
	void *desc = fi_mr_desc(mr);
	ssize_t ret;
	while ((ret = fi_tsend(r->ep, (char *)(uintptr_t)0x7000000000ULL, 20000, desc, peer, 6, NULL)) == -FI_EAGAIN)
		;
	CHECK(ret == 0, "send from dma-buf memory: %zd", ret);
	while ((ret = fi_tsend(r->ep, (char *)(uintptr_t)0x7000000000ULL + 100, 300, desc, peer, 7, NULL)) == -FI_EAGAIN)
		;
	CHECK(ret == 0, "inline send from dma-buf memory: %zd", ret);
	CHECK(fi_cntr_wait(r->scntr, 13, 10000) == 0, "dma-buf sends complete: %llu",
	      (unsigned long long)fi_cntr_read(r->scntr));
	step_send('6');
	step_wait('7');
	CHECK(fi_close(&mr->fid) == 0, "close dmabuf mr");
	munmap(mine, 1 << 16);
	close(mfd);
	free(buf);
}

/* --------------------------------------------------------------- receiver */

static void peek(struct res *r, uint64_t tag, uint64_t flags, void *ctx, void *buf, size_t len)
{
	struct iovec iov = { buf, len };
	struct fi_msg_tagged m = { .msg_iov = buf ? &iov : NULL, .iov_count = buf ? 1 : 0, .addr = FI_ADDR_UNSPEC,
				   .tag = tag, .context = ctx };
	ssize_t ret = fi_trecvmsg(r->ep, &m, flags);
	CHECK(ret == 0, "trecvmsg flags %#llx: %zd", (unsigned long long)flags, ret);
}

static void receiver(struct res *r, struct res *r2)
{
	char *buf = malloc(1 << 16);
	struct fi_cq_tagged_entry e;
	struct fi_cq_err_entry err;
	struct fi_context pctx, cctx;
	int rc;

	/* 1. peek / claim / discard. */
	step_send('1');
	step_wait('1');
	peek(r, 9, FI_PEEK, &pctx, NULL, 0);
	CHECK(wait_err(r->rxcq, &err) == FI_ENOMSG && err.op_context == &pctx, "peek without a match: FI_ENOMSG");
	peek(r, 1, FI_PEEK, &pctx, NULL, 0);
	rc = wait_cq(r->rxcq, &e);
	CHECK(rc == 1 && e.op_context == &pctx && e.len == 7 && e.tag == 1, "peek tag 1: rc %d len %zu", rc, (size_t)e.len);
	peek(r, 1, FI_PEEK | FI_CLAIM, &cctx, NULL, 0);
	CHECK(wait_cq(r->rxcq, &e) == 1 && e.op_context == &cctx && e.len == 7, "peek+claim tag 1");
	/* Claimed: another peek no longer sees it. */
	peek(r, 1, FI_PEEK, &pctx, NULL, 0);
	CHECK(wait_err(r->rxcq, &err) == FI_ENOMSG, "claimed message hidden from peek");
	memset(buf, 0, 16);
	peek(r, 1, FI_CLAIM, &cctx, buf, 16);
	rc = wait_cq(r->rxcq, &e);
	CHECK(rc == 1 && e.op_context == &cctx && e.len == 7 && !strcmp(buf, "peekme"), "claim delivers: rc %d %s", rc, buf);
	peek(r, 1, FI_CLAIM, &cctx, buf, 16);
	CHECK(wait_err(r->rxcq, &err) == FI_ENOMSG, "claim twice");
	peek(r, 2, FI_PEEK | FI_DISCARD, &pctx, NULL, 0);
	CHECK(wait_cq(r->rxcq, &e) == 1 && e.op_context == &pctx, "peek+discard");
	peek(r, 2, FI_PEEK, &pctx, NULL, 0);
	CHECK(wait_err(r->rxcq, &err) == FI_ENOMSG, "discarded message gone");
	peek(r, 3, FI_PEEK, &pctx, NULL, 0);
	CHECK(wait_cq(r->rxcq, &e) == 1 && e.len == 5000 && e.tag == 3, "peek rendezvous message");
	{
		struct fi_msg_tagged m = { .addr = FI_ADDR_UNSPEC, .tag = 3, .context = &pctx };
		CHECK(fi_trecvmsg(r->ep, &m, FI_DISCARD) == -FI_EINVAL, "FI_DISCARD alone");
	}
	/* A rendezvous message received through three buffers. */
	char *x = malloc(5000);
	struct iovec v3[3] = { { x, 1 }, { x + 1, 2999 }, { x + 3000, 2000 } };
	CHECK(fi_trecvv(r->ep, v3, NULL, 3, FI_ADDR_UNSPEC, 3, 0, x) == 0, "trecvv");
	CHECK(wait_cq(r->rxcq, &e) == 1 && e.op_context == x && e.len == 5000 && same(x, 5000, 3), "trecvv data");
	free(x);
	/* fi_cancel: FI_ECANCELED entry and an error count. */
	uint64_t errs = fi_cntr_readerr(r->rcntr);
	CHECK(fi_recv(r->ep, buf, 8, NULL, FI_ADDR_UNSPEC, &pctx) == 0, "recv to cancel");
	CHECK(fi_cancel(&r->ep->fid, &pctx) == 0, "cancel");
	CHECK(wait_err(r->rxcq, &err) == FI_ECANCELED && err.op_context == &pctx, "canceled entry");
	CHECK(fi_cntr_readerr(r->rcntr) == errs + 1, "cancel counted as error");
	CHECK(fi_cancel(&r->ep->fid, &pctx) == -FI_ENOENT, "cancel twice");

	/* 2. vectored receives. */
	char p1[7], p2[80], p3[13];
	struct iovec riov[3] = { { p1, 7 }, { p2, 80 }, { p3, 13 } };
	CHECK(fi_recvv(r->ep, riov, NULL, 3, FI_ADDR_UNSPEC, p1) == 0, "recvv");
	char *big = calloc(1, 9000);
	struct iovec briov[4] = { { big, 10 }, { big + 10, 4000 }, { big + 4010, 4000 }, { big + 8010, 990 } };
	struct fi_msg m = { .msg_iov = briov, .iov_count = 4, .addr = FI_ADDR_UNSPEC, .context = big };
	CHECK(fi_recvmsg(r->ep, &m, 0) == 0, "recvmsg 4 iovs");
	struct iovec too_many[9];
	for (int i = 0; i < 9; i++)
		too_many[i] = (struct iovec){ buf, 1 };
	CHECK(fi_recvv(r->ep, too_many, NULL, 9, FI_ADDR_UNSPEC, NULL) == -FI_EINVAL, "too many iovs");
	step_send('2');
	rc = wait_cq(r->rxcq, &e);
	char flat[100];
	memcpy(flat, p1, 7);
	memcpy(flat + 7, p2, 80);
	memcpy(flat + 87, p3, 13);
	CHECK(rc == 1 && e.op_context == p1 && e.len == 100 && same(flat, 10, 1) && same(flat + 10, 50, 2) &&
		      same(flat + 60, 40, 3),
	      "recvv spreads the data: rc %d len %zu", rc, (size_t)e.len);
	rc = wait_cq(r->rxcq, &e);
	CHECK(rc == 1 && e.op_context == big && e.len == 9000 && same(big, 9000, 4), "rendezvous over 4 iovs: rc %d", rc);
	free(big);
	step_wait('2');

	/* 3. multi-receive: minimum 64 bytes left; 4 x 60 bytes into 256. */
	size_t min = 0, optlen = sizeof(min);
	CHECK(fi_getopt(&r->ep->fid, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV, &min, &optlen) == 0 && optlen == sizeof(size_t),
	      "getopt min multi recv");
	min = 64;
	CHECK(fi_setopt(&r->ep->fid, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV, &min, sizeof(min)) == 0, "setopt");
	CHECK(fi_setopt(&r->ep->fid, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV, &min, 2) == -FI_EINVAL, "setopt bad len");
	CHECK(fi_getopt(&r->ep->fid, FI_OPT_ENDPOINT, FI_OPT_CM_DATA_SIZE, &min, &optlen) == -FI_ENOPROTOOPT,
	      "cm data size not an option here");
	CHECK(fi_getopt(&r->ep->fid, FI_OPT_ENDPOINT, 4242, &min, &optlen) == -FI_ENOPROTOOPT, "unknown option");
	char *mbuf = malloc(256);
	struct iovec miov = { mbuf, 256 };
	struct fi_msg mm = { .msg_iov = &miov, .iov_count = 1, .addr = FI_ADDR_UNSPEC, .context = mbuf };
	struct iovec small = { mbuf, 32 };
	struct fi_msg msmall = { .msg_iov = &small, .iov_count = 1, .addr = FI_ADDR_UNSPEC, .context = mbuf };
	CHECK(fi_recvmsg(r->ep, &msmall, FI_MULTI_RECV) == -FI_EINVAL, "multi-recv buffer under the minimum");
	CHECK(fi_recvmsg(r->ep, &mm, FI_MULTI_RECV) == 0, "post multi-recv");
	step_send('3');
	for (int i = 0; i < 4; i++) {
		rc = wait_cq(r->rxcq, &e);
		int last = i == 3;
		CHECK(rc == 1 && e.op_context == mbuf && e.len == 60 && e.buf == mbuf + 60 * i &&
			      !!(e.flags & FI_MULTI_RECV) == last && same(mbuf + 60 * i, 60, 10 + i),
		      "multi-recv piece %d: rc %d len %zu buf off %td flags %#llx", i, rc, (size_t)e.len,
		      (char *)e.buf - mbuf, (unsigned long long)e.flags);
	}
	free(mbuf);
	step_wait('3');

	/* 4. FI_SOURCE with a user id; FI_SOURCE_ERR on the second endpoint. */
	fi_addr_t src = 0;
	memset(buf, 0, 8);
	CHECK(fi_recv(r->ep, buf, 8, NULL, FI_ADDR_UNSPEC, NULL) == 0, "recv for source");
	CHECK(fi_recv(r2->ep, buf + 8, 8, NULL, FI_ADDR_UNSPEC, NULL) == 0, "recv on second endpoint");
	step_send('4');
	for (long i = 0; i < 20000000L; i++) {
		ssize_t n = fi_cq_readfrom(r->rxcq, &e, 1, &src);
		if (n != -FI_EAGAIN) {
			CHECK(n == 1 && !strcmp(buf, "src") && src == 4242, "readfrom: n %zd src %llu", n,
			      (unsigned long long)src);
			break;
		}
	}
	memset(&err, 0, sizeof(err));
	char errdata[64];
	err.err_data = errdata;
	err.err_data_size = sizeof(errdata);
	rc = wait_cq(r2->rxcq, &e);
	CHECK(rc == -FI_EAVAIL && fi_cq_readerr(r2->rxcq, &err, 0) == 1 && err.err == FI_EADDRNOTAVAIL &&
		      err.err_data_size > 0 && err.len == 4 && !strcmp(buf + 8, "who"),
	      "FI_SOURCE_ERR: rc %d err %d size %zu", rc, err.err, err.err_data_size);
	step_wait('4');

	/* 5. counters and wait objects on their own. */
	struct fid_cntr *c;
	struct fi_cntr_attr cattr = { .events = FI_CNTR_EVENTS_COMP, .wait_obj = FI_WAIT_FD };
	CHECK(fi_cntr_open(r->domain, &cattr, &c, NULL) == 0, "FI_WAIT_FD counter");
	int cfd = -1;
	CHECK(fi_control(&c->fid, FI_GETWAIT, &cfd) == 0 && cfd >= 0, "counter FI_GETWAIT");
	CHECK(fi_control(&c->fid, FI_GETWAIT, NULL) == -FI_EINVAL, "FI_GETWAIT NULL");
	struct fid *cf[1] = { &c->fid };
	CHECK(fi_trywait(r->fabric, cf, 1) == 0, "trywait counter");
	struct pollfd pfd = { .fd = cfd, .events = POLLIN };
	CHECK(poll(&pfd, 1, 0) == 0, "counter fd quiet");
	CHECK(fi_cntr_add(c, 3) == 0 && poll(&pfd, 1, 1000) == 1, "counter fd readable after add");
	CHECK(fi_cntr_read(c) == 3, "read 3");
	CHECK(fi_cntr_wait(c, 3, 10) == 0, "wait reached");
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	rc = fi_cntr_wait(c, 100, 50);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	long ms = (t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000;
	CHECK(rc == -FI_ETIMEDOUT && ms >= 40, "cntr wait times out: %d after %ld ms", rc, ms);
	CHECK(fi_cntr_set(c, 7) == 0 && fi_cntr_read(c) == 7, "set");
	CHECK(fi_cntr_adderr(c, 2) == 0 && fi_cntr_seterr(c, 5) == 0 && fi_cntr_readerr(c) == 5, "adderr/seterr");
	CHECK(fi_close(&c->fid) == 0, "close fd counter");
	/* Bound to every event type of one endpoint. */
	{
		struct fid_ep *ep;
		struct fid_cntr *k;
		struct fi_cntr_attr ka = { .events = FI_CNTR_EVENTS_COMP };
		CHECK(fi_cntr_open(r->domain, &ka, &k, NULL) == 0 && fi_endpoint(r->domain, r->info, &ep, NULL) == 0,
		      "ep for counter binds");
		CHECK(fi_ep_bind(ep, &k->fid, FI_SEND | FI_RECV | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE) == 0,
		      "counter bound to every event");
		CHECK(fi_ep_bind(ep, &k->fid, FI_TAGGED) == -FI_EINVAL, "counter bad bind flag");
		CHECK(fi_close(&ep->fid) == 0 && fi_close(&k->fid) == 0, "close");
	}
	/* CQ sread with a timeout and FI_WAIT_FD CQ without an fd consumer. */
	clock_gettime(CLOCK_MONOTONIC, &t0);
	rc = (int)fi_cq_sread(r->rxcq, &e, 1, NULL, 30);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	ms = (t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000;
	CHECK(rc == -FI_EAGAIN && ms >= 20, "cq sread timeout: %d after %ld ms", rc, ms);
	int nofd = 0;
	CHECK(fi_control(&r->rxcq->fid, FI_GETWAIT, &nofd) == -FI_ENODATA, "FI_GETWAIT without an fd");

	/* 6. dma-buf receive: a memfd region, addressed by its base_addr. */
	int mfd = memfd_create("rfabric-test-rx", 0);
	CHECK(mfd >= 0 && ftruncate(mfd, 1 << 16) == 0, "memfd");
	char *view = mmap(NULL, 1 << 16, PROT_READ | PROT_WRITE, MAP_SHARED, mfd, 0);
	CHECK(view != MAP_FAILED, "map memfd");
	memset(view, 0, 1 << 16);
	/* An offset that is not page aligned. */
	struct fi_mr_dmabuf dmabuf = { .fd = mfd, .offset = 4096 + 16, .len = 40000, .base_addr = (void *)(uintptr_t)0x6000000000ULL };
	struct fi_mr_attr mattr = { .dmabuf = &dmabuf, .iov_count = 1, .access = FI_RECV, .requested_key = 9 };
	struct fid_mr *mr = NULL, *bad = NULL;
	CHECK(fi_mr_regattr(r->domain, &mattr, FI_MR_DMABUF, &mr) == 0, "dmabuf regattr");
	struct fi_mr_dmabuf badbuf = { .fd = -1, .len = 4096 };
	mattr.dmabuf = &badbuf;
	mattr.requested_key = 10;
	CHECK(fi_mr_regattr(r->domain, &mattr, FI_MR_DMABUF, &bad) == -FI_EINVAL, "dmabuf fd -1");
	int pp[2];
	CHECK(pipe(pp) == 0, "pipe");
	badbuf.fd = pp[0];
	CHECK(fi_mr_regattr(r->domain, &mattr, FI_MR_DMABUF, &bad) == -FI_EINVAL, "dmabuf fd that cannot be mapped");
	close(pp[0]);
	close(pp[1]);
	mattr.dmabuf = NULL;
	CHECK(fi_mr_regattr(r->domain, &mattr, FI_MR_DMABUF, &bad) == -FI_EINVAL, "dmabuf NULL");
	void *desc = fi_mr_desc(mr);
	char *dev = (char *)(uintptr_t)0x6000000000ULL;
	CHECK(fi_trecv(r->ep, dev + 100, 20000, desc, FI_ADDR_UNSPEC, 6, 0, NULL) == 0, "trecv into dma-buf");
	CHECK(fi_trecv(r->ep, dev + 30000, 300, desc, FI_ADDR_UNSPEC, 7, 0, NULL) == 0, "trecv inline into dma-buf");
	step_send('6');
	rc = wait_cq(r->rxcq, &e);
	CHECK(rc == 1 && e.len == 20000 && same(view + 4096 + 16 + 100, 20000, 77), "dma-buf rendezvous data: rc %d", rc);
	rc = wait_cq(r->rxcq, &e);
	CHECK(rc == 1 && e.len == 300 && same(view + 4096 + 16 + 30000, 300, (int)(77 + 700)), "dma-buf inline data: rc %d", rc);
	step_wait('6');
	step_send('7');
	CHECK(fi_close(&mr->fid) == 0, "close dmabuf mr");
	munmap(view, 1 << 16);
	close(mfd);
	free(buf);
}

/* --------------------------------------------------------------- one process */

struct thr {
	struct res *a, *b;
	fi_addr_t to_b;
	int id;
	atomic_long *got, *sum, *sent_done;
};

#define NT 2
#define NMSG 400

static void *send_thread(void *p)
{
	struct thr *t = p;
	struct fi_cq_tagged_entry e[8];
	for (long i = 0; i < NMSG; i++) {
		long v = i;
		ssize_t ret;
		while ((ret = fi_tinject(t->a->ep, &v, sizeof(v), t->to_b, (uint64_t)t->id)) == -FI_EAGAIN)
			fi_cq_read(t->a->txcq, e, 8);
		if (ret) {
			failed++;
			printf("FAIL thread send %zd\n", ret);
			break;
		}
	}
	return NULL;
}

static void *recv_thread(void *p)
{
	struct thr *t = p;
	long *bufs = calloc(NMSG, sizeof(long));
	long posted = 0;
	while (atomic_load(&t->got[t->id]) < NMSG) {
		/* Keep a few receives outstanding; completions may be read by
		 * the other receiving thread (shared CQ). */
		if (posted < NMSG && posted - atomic_load(&t->got[t->id]) < 8) {
			ssize_t ret = fi_trecv(t->b->ep, &bufs[posted], sizeof(long), NULL, FI_ADDR_UNSPEC,
					       (uint64_t)t->id, 0, &bufs[posted]);
			if (ret == 0)
				posted++;
		}
		struct fi_cq_tagged_entry e[4];
		ssize_t n = fi_cq_read(t->b->rxcq, e, 4);
		for (ssize_t i = 0; i < n; i++) {
			int owner = (int)e[i].tag;
			atomic_fetch_add(&t->got[owner], 1);
			atomic_fetch_add(&t->sum[owner], *(long *)e[i].op_context);
		}
		if (n < 0 && n != -FI_EAGAIN) {
			failed++;
			printf("FAIL thread cq read %zd\n", n);
			break;
		}
	}
	free(bufs);
	return NULL;
}

/* Threads of this process whose name starts with `prefix` (all: ""). */
static int count_threads_named(const char *prefix)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *t;
	int n = 0;
	if (!d)
		return -1;
	while ((t = readdir(d))) {
		char path[300], comm[64] = "";
		FILE *f;
		if (t->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%s/comm", t->d_name);
		if ((f = fopen(path, "r"))) {
			if (!fgets(comm, sizeof(comm), f))
				comm[0] = 0;
			fclose(f);
		}
		n += !strncmp(comm, prefix, strlen(prefix));
	}
	closedir(d);
	return n;
}
static int count_threads(void)
{
	return count_threads_named("");
}
/* Progress threads are named rfabric-shm-progress (comm keeps 15 bytes);
 * every endpoint also has its segment's rfabric-shm-fd thread. */
#define PROGRESS_THREAD "rfabric-shm-pro"

static void one_process(void)
{
	struct res a, b;
	struct opts o = { .progress = FI_PROGRESS_MANUAL, .txwait = FI_WAIT_NONE };
	fi_addr_t to_b = FI_ADDR_NOTAVAIL, to_a;
	who = "threads";
	CHECK(open_res(&a, &o) == 0 && open_res(&b, &o) == 0, "open two endpoints");
	CHECK(a.info->domain_attr->threading == FI_THREAD_SAFE, "FI_THREAD_SAFE");
	CHECK(fi_av_insert(a.av, b.name, 1, &to_b, 0, NULL) == 1 && fi_av_insert(b.av, a.name, 1, &to_a, 0, NULL) == 1,
	      "insert");
	atomic_long got[NT] = { 0 }, sum[NT] = { 0 };
	struct thr t[NT];
	pthread_t s[NT], rt[NT];
	for (int i = 0; i < NT; i++) {
		t[i] = (struct thr){ .a = &a, .b = &b, .to_b = to_b, .id = i, .got = got, .sum = sum };
		pthread_create(&s[i], NULL, send_thread, &t[i]);
		pthread_create(&rt[i], NULL, recv_thread, &t[i]);
	}
	for (int i = 0; i < NT; i++) {
		pthread_join(s[i], NULL);
		pthread_join(rt[i], NULL);
	}
	for (int i = 0; i < NT; i++)
		CHECK(got[i] == NMSG && sum[i] == (long)NMSG * (NMSG - 1) / 2, "thread %d: %ld messages, sum %ld", i,
		      (long)got[i], (long)sum[i]);
	close_res(&a);
	close_res(&b);

	/* FI_PROGRESS_AUTO: a rendezvous transfer completes with no CQ read
	 * in either endpoint; poll(2) on the receive CQ fd sees it. */
	who = "auto";
	int before = count_threads(), before_progress = count_threads_named(PROGRESS_THREAD);
	o.progress = FI_PROGRESS_AUTO;
	o.txwait = FI_WAIT_FD;
	CHECK(open_res(&a, &o) == 0 && open_res(&b, &o) == 0, "open AUTO endpoints");
	CHECK(a.info->domain_attr->data_progress == FI_PROGRESS_AUTO, "AUTO in info");
	/* A new thread names itself once it runs: give the two up to 5 s. */
	int progress_now = count_threads_named(PROGRESS_THREAD);
	for (int i = 0; i < 500 && progress_now != before_progress + 2; i++) {
		usleep(10000);
		progress_now = count_threads_named(PROGRESS_THREAD);
	}
	CHECK(progress_now == before_progress + 2, "one progress thread per endpoint: %d -> %d", before_progress,
	      progress_now);
	CHECK(fi_av_insert(a.av, b.name, 1, &to_b, 0, NULL) == 1, "insert");
	char *src = malloc(200000), *dst = calloc(1, 200000);
	fill(src, 200000, 5);
	int fd = -1;
	CHECK(fi_control(&a.txcq->fid, FI_GETWAIT, &fd) == 0, "getwait");
	struct fid *f1[1] = { &a.txcq->fid };
	CHECK(fi_trywait(a.fabric, f1, 1) == 0, "trywait");
	CHECK(fi_recv(b.ep, dst, 200000, NULL, FI_ADDR_UNSPEC, dst) == 0, "recv");
	CHECK(fi_send(a.ep, src, 200000, NULL, to_b, src) == 0, "send");
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	CHECK(poll(&pfd, 1, 5000) == 1, "send completion arrives by itself");
	CHECK(same(dst, 200000, 5), "data placed without a receive-side CQ read");
	struct fi_cq_tagged_entry e;
	CHECK(wait_cq(a.txcq, &e) == 1 && e.op_context == src, "send entry");
	int rc = wait_cq(b.rxcq, &e);
	CHECK(rc == 1 && e.op_context == dst && e.len == 200000, "recv entry: rc %d ctx %p/%p len %zu", rc, e.op_context,
	      (void *)dst, (size_t)e.len);
	free(src);
	free(dst);
	close_res(&a);
	close_res(&b);
	CHECK(count_threads() == before, "progress (and segment) threads end at close: %d -> %d", before, count_threads());

	/* FI_MR_LOCAL: descriptors required; FI_AV_MAP. */
	who = "mr-local";
	o = (struct opts){ .progress = FI_PROGRESS_MANUAL, .mr_mode = FI_MR_LOCAL | FI_MR_PROV_KEY | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED,
			   .av_type = FI_AV_MAP };
	CHECK(open_res(&a, &o) == 0, "open with FI_MR_LOCAL");
	CHECK((a.info->domain_attr->mr_mode & FI_MR_LOCAL) && (a.info->domain_attr->mr_mode & FI_MR_PROV_KEY),
	      "mr_mode kept: %#x", a.info->domain_attr->mr_mode);
	fi_addr_t self = FI_ADDR_NOTAVAIL;
	CHECK(fi_av_insert(a.av, a.name, 1, &self, 0, NULL) == 1 && self != FI_ADDR_NOTAVAIL, "FI_AV_MAP insert");
	char lb[64];
	size_t ll = sizeof(lb);
	CHECK(fi_av_lookup(a.av, self, lb, &ll) == 0 && !strcmp(lb, a.name), "FI_AV_MAP lookup");
	char sbuf[32] = "local", rbuf[32] = { 0 };
	struct fid_mr *smr, *rmr;
	CHECK(fi_mr_reg(a.domain, sbuf, sizeof(sbuf), FI_SEND, 0, 0, 0, &smr, NULL) == 0 &&
		      fi_mr_reg(a.domain, rbuf, sizeof(rbuf), FI_RECV, 0, 0, 0, &rmr, NULL) == 0,
	      "register");
	CHECK(fi_send(a.ep, sbuf, 6, NULL, self, NULL) == -FI_EINVAL, "send without desc under FI_MR_LOCAL");
	CHECK(fi_recv(a.ep, rbuf, 6, NULL, FI_ADDR_UNSPEC, NULL) == -FI_EINVAL, "recv without desc");
	CHECK(fi_recv(a.ep, rbuf, 6, (void *)&a, FI_ADDR_UNSPEC, NULL) == -FI_EINVAL, "recv with a foreign desc");
	CHECK(fi_inject(a.ep, sbuf, 6, self) == 0, "inject needs no desc");
	CHECK(fi_recv(a.ep, rbuf, 6, fi_mr_desc(rmr), FI_ADDR_UNSPEC, rbuf) == 0, "recv with desc");
	CHECK(wait_cq(a.rxcq, &e) == 1 && !strcmp(rbuf, "local"), "loopback inject data");
	CHECK(fi_send(a.ep, sbuf, 6, fi_mr_desc(smr), self, sbuf) == 0, "send with desc");
	CHECK(fi_recv(a.ep, rbuf, 6, fi_mr_desc(rmr), FI_ADDR_UNSPEC, rbuf) == 0, "recv with desc");
	CHECK(wait_cq(a.rxcq, &e) == 1 && wait_cq(a.txcq, &e) == 1, "loopback send completes");
	CHECK(fi_av_remove(a.av, &self, 1, 0) == 0 && fi_av_lookup(a.av, self, lb, &ll) != 0, "FI_AV_MAP remove");
	CHECK(fi_av_insertsvc(a.av, "node", "svc", &self, 0, NULL) == -FI_ENOSYS, "insertsvc");
	CHECK(fi_close(&smr->fid) == 0 && fi_close(&rmr->fid) == 0, "close mrs");
	close_res(&a);
}

/* A pending rendezvous send to a peer that is killed completes with an
 * error (never hangs). */
static void peer_death(void)
{
	int p2c[2], c2p[2];
	who = "death";
	if (pipe(p2c) || pipe(c2p))
		exit(2);
	pid_t pid = fork();
	if (pid == 0) {
		struct res c;
		struct opts o = { .progress = FI_PROGRESS_MANUAL };
		who = "doomed";
		if (open_res(&c, &o))
			_exit(3);
		if (write(c2p[1], c.name, c.namelen) != (ssize_t)c.namelen)
			_exit(3);
		pause();
		_exit(0);
	}
	struct res a;
	struct opts o = { .progress = FI_PROGRESS_MANUAL };
	CHECK(open_res(&a, &o) == 0, "open");
	char name[128] = { 0 };
	CHECK(read(c2p[0], name, a.namelen) == (ssize_t)a.namelen, "peer name");
	fi_addr_t to = FI_ADDR_NOTAVAIL;
	CHECK(fi_av_insert(a.av, name, 1, &to, 0, NULL) == 1, "insert");
	char *big = malloc(1 << 20);
	memset(big, 1, 1 << 20);
	CHECK(fi_send(a.ep, big, 1 << 20, NULL, to, big) == 0, "send to the doomed peer");
	struct fi_cq_tagged_entry e;
	CHECK(fi_cq_read(a.txcq, &e, 1) == -FI_EAGAIN, "still pending");
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	struct fi_cq_err_entry err;
	int rc = wait_err(a.txcq, &err);
	CHECK(rc > 0 && err.op_context == big, "pending send fails after the peer died: %d (%s)", rc,
	      rc > 0 ? fi_strerror(rc) : "-");
	CHECK(fi_cntr_readerr(a.scntr) == 1, "error counted");
	free(big);
	close_res(&a);
}

int main(void)
{
	int to_child[2], to_parent[2], names[2];
	setvbuf(stdout, NULL, _IONBF, 0);
	if (pipe(to_child) || pipe(to_parent) || pipe(names))
		return 2;
	pid_t pid = fork();
	if (pid < 0)
		return 2;
	struct res r, r2;
	char peer_name[128] = { 0 }, peer2_name[128] = { 0 };
	fi_addr_t peer = FI_ADDR_NOTAVAIL;

	if (pid == 0) {
		/* Sender: selective transmit completions, an FI_WAIT_FD tx CQ. */
		struct opts o = { .progress = FI_PROGRESS_MANUAL, .txwait = FI_WAIT_FD, .txbind = FI_SELECTIVE_COMPLETION };
		who = "child";
		rfd = to_child[0];
		wfd = to_parent[1];
		if (open_res(&r, &o))
			_exit(2);
		if (write(wfd, r.name, r.namelen) != (ssize_t)r.namelen ||
		    read(rfd, peer_name, r.namelen) != (ssize_t)r.namelen ||
		    read(rfd, peer2_name, r.namelen) != (ssize_t)r.namelen)
			_exit(2);
		CHECK(fi_av_insert(r.av, peer_name, 1, &peer, 0, NULL) == 1, "insert parent");
		sender(&r, peer, peer2_name);
		close_res(&r);
		printf("child: %d passed, %d failed\n", passed, failed);
		_exit(failed ? 1 : 0);
	}
	rfd = to_parent[0];
	wfd = to_child[1];
	struct opts o = { .progress = FI_PROGRESS_MANUAL, .caps = FI_MSG | FI_TAGGED | FI_SOURCE | FI_DIRECTED_RECV };
	struct opts o2 = { .progress = FI_PROGRESS_MANUAL, .caps = FI_MSG | FI_TAGGED | FI_SOURCE | FI_SOURCE_ERR };
	if (open_res(&r, &o) || open_res(&r2, &o2))
		return 2;
	if (read(rfd, peer_name, r.namelen) != (ssize_t)r.namelen || write(wfd, r.name, r.namelen) != (ssize_t)r.namelen ||
	    write(wfd, r2.name, r2.namelen) != (ssize_t)r2.namelen)
		return 2;
	/* FI_AV_USER_ID: the id given here is what fi_cq_readfrom reports. */
	peer = 4242;
	CHECK(fi_av_insert(r.av, peer_name, 1, &peer, FI_AV_USER_ID, NULL) == 1 && peer != 4242 && peer != FI_ADDR_NOTAVAIL,
	      "insert with a user id: %llu", (unsigned long long)peer);
	CHECK(fi_av_insert(r.av, peer_name, 1, NULL, FI_AV_USER_ID, NULL) == -FI_EINVAL, "user id without fi_addr array");
	receiver(&r, &r2);
	close_res(&r2);
	close_res(&r);
	int st;
	waitpid(pid, &st, 0);
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		printf("FAIL child exited with status %d\n", st);
		failed++;
	}
	one_process();
	peer_death();
	printf("%d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}
