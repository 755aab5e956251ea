/* Two processes, one shm RDM endpoint each, talking through the C API only:
 * names exchanged over a pipe, fi_send/fi_recv/fi_tsend/fi_trecv/fi_inject/
 * fi_senddata of sizes on both sides of the eager/rendezvous switch with the
 * data checked, a truncated receive, and the documented error codes for
 * bad input (ordering of fi_close, unsupported operations, bad addresses).
 * Prints "N passed, N failed". */
#define _GNU_SOURCE
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>
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
		}                                                             \
	} while (0)

struct res {
	struct fi_info *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_cq *txcq, *rxcq;
	struct fid_av *av;
	struct fid_ep *ep;
	struct fid_cntr *cntr;
	char name[128];
	size_t namelen;
};

static void open_res(struct res *r)
{
	struct fi_info *hints = fi_allocinfo();
	struct fi_cq_attr cq_attr = { .format = FI_CQ_FORMAT_TAGGED };
	struct fi_av_attr av_attr = { .type = FI_AV_TABLE };
	int ret;

	hints->ep_attr->type = FI_EP_RDM;
	hints->caps = FI_MSG | FI_TAGGED;
	hints->fabric_attr->prov_name = strdup("shm");
	ret = fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &r->info);
	fi_freeinfo(hints);
	if (ret) {
		printf("fi_getinfo: %d\n", ret);
		exit(2);
	}
	CHECK(r->info->addr_format == FI_ADDR_STR, "addr_format %u", r->info->addr_format);
	if (fi_fabric(r->info->fabric_attr, &r->fabric, NULL) ||
	    fi_domain(r->fabric, r->info, &r->domain, NULL) ||
	    fi_cq_open(r->domain, &cq_attr, &r->txcq, NULL) ||
	    fi_cq_open(r->domain, &cq_attr, &r->rxcq, NULL) ||
	    fi_av_open(r->domain, &av_attr, &r->av, NULL) ||
	    fi_cntr_open(r->domain, &(struct fi_cntr_attr){ .events = FI_CNTR_EVENTS_COMP }, &r->cntr, NULL) ||
	    fi_endpoint(r->domain, r->info, &r->ep, NULL)) {
		printf("opening objects failed\n");
		exit(2);
	}
	/* Not enabled yet: data operations are refused. */
	CHECK(fi_send(r->ep, "x", 1, NULL, 0, NULL) == -FI_EOPBADSTATE, "send before enable");
	CHECK(fi_enable(r->ep) == -FI_ENOAV, "enable without AV");
	CHECK(fi_ep_bind(r->ep, &r->txcq->fid, 0) == -FI_EBADFLAGS, "bind CQ without direction");
	CHECK(fi_ep_bind(r->ep, &r->domain->fid, 0) == -FI_EINVAL, "bind a domain");
	CHECK(fi_ep_bind(r->ep, &r->av->fid, 0) == 0, "bind av");
	CHECK(fi_ep_bind(r->ep, &r->txcq->fid, FI_TRANSMIT) == 0, "bind txcq");
	CHECK(fi_ep_bind(r->ep, &r->rxcq->fid, FI_RECV) == 0, "bind rxcq");
	CHECK(fi_ep_bind(r->ep, &r->cntr->fid, 0) == -FI_EINVAL, "bind cntr without flags");
	CHECK(fi_ep_bind(r->ep, &r->cntr->fid, FI_SEND | FI_RECV) == 0, "bind cntr");
	CHECK(fi_enable(r->ep) == 0, "enable");

	/* fi_getname: the size first, then the name (a string). */
	r->namelen = 4;
	CHECK(fi_getname(&r->ep->fid, r->name, &r->namelen) == -FI_ETOOSMALL, "getname small");
	CHECK(r->namelen > 4 && r->namelen <= FI_NAME_MAX, "getname len %zu", r->namelen);
	r->namelen = sizeof(r->name);
	CHECK(fi_getname(&r->ep->fid, r->name, &r->namelen) == 0, "getname");
	CHECK(strlen(r->name) + 1 == r->namelen && !strncmp(r->name, "fi_shm://", 9), "name %s", r->name);
}

static void close_res(struct res *r)
{
	/* Parents stay open while children live. */
	CHECK(fi_close(&r->domain->fid) == -FI_EBUSY, "close domain with children");
	CHECK(fi_close(&r->txcq->fid) == -FI_EBUSY, "close bound CQ");
	CHECK(fi_close(&r->av->fid) == -FI_EBUSY, "close bound AV");
	CHECK(fi_close(&r->cntr->fid) == -FI_EBUSY, "close bound counter");
	CHECK(fi_close(&r->ep->fid) == 0, "close ep");
	CHECK(fi_close(&r->txcq->fid) == 0, "close txcq");
	CHECK(fi_close(&r->rxcq->fid) == 0, "close rxcq");
	CHECK(fi_close(&r->av->fid) == 0, "close av");
	CHECK(fi_close(&r->cntr->fid) == 0, "close cntr");
	CHECK(fi_close(&r->fabric->fid) == -FI_EBUSY, "close fabric with domain");
	CHECK(fi_close(&r->domain->fid) == 0, "close domain");
	CHECK(fi_close(&r->fabric->fid) == 0, "close fabric");
	fi_freeinfo(r->info);
}

/* Wait for one completion; returns 1, or the negative error. */
static int wait_cq(struct fid_cq *cq, struct fi_cq_tagged_entry *e)
{
	for (long i = 0; i < 200000000L; i++) {
		ssize_t n = fi_cq_read(cq, e, 1);
		if (n == 1)
			return 1;
		if (n != -FI_EAGAIN)
			return (int)n;
	}
	return -FI_ETIMEDOUT;
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

static const size_t sizes[] = { 0, 1, 63, 4096, 4097, 65536, 1 << 20, 3 << 20 };
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))
#define MAXSZ (3 << 20)

static void sender(struct res *r, fi_addr_t peer)
{
	char *buf = malloc(MAXSZ + 1);
	struct fi_cq_tagged_entry e;
	char ack;

	for (size_t i = 0; i < NSIZES; i++) {
		fill(buf, sizes[i], (int)i);
		int ctx;
		ssize_t ret;
		while ((ret = fi_send(r->ep, buf, sizes[i], NULL, peer, &ctx)) == -FI_EAGAIN)
			fi_cq_read(r->txcq, &e, 0);
		CHECK(ret == 0, "send %zu: %zd", sizes[i], ret);
		CHECK(wait_cq(r->txcq, &e) == 1 && e.op_context == &ctx && (e.flags & FI_SEND),
		      "send completion %zu", sizes[i]);
	}
	/* Tagged, with remote CQ data; then an inject (no completion). */
	fill(buf, 5000, 42);
	CHECK(fi_tsenddata(r->ep, buf, 5000, NULL, 0xfeedULL, peer, 0x1234, buf) == 0, "tsenddata");
	CHECK(wait_cq(r->txcq, &e) == 1 && (e.flags & FI_TAGGED), "tsend completion");
	CHECK(fi_inject(r->ep, "injected", 9, peer) == 0, "inject");
	CHECK(fi_inject(r->ep, buf, 1 << 20, peer) == -FI_EINVAL, "inject too large");
	/* Truncation at the receiver: 100 bytes into a 10-byte buffer. */
	fill(buf, 100, 9);
	CHECK(fi_send(r->ep, buf, 100, NULL, peer, NULL) == 0, "send for truncation");
	CHECK(wait_cq(r->txcq, &e) == 1, "truncation send completion");
	/* Every send above (inject included) counted once. */
	CHECK(fi_cntr_read(r->cntr) == NSIZES + 3 && fi_cntr_readerr(r->cntr) == 0,
	      "send counter %llu", (unsigned long long)fi_cntr_read(r->cntr));
	/* RMA is covered by shm_rma.c; here only bad input to it. */
	CHECK(fi_write(r->ep, NULL, 8, NULL, peer, 0, 0, NULL) == -FI_EINVAL, "rma write NULL buffer");
	CHECK(fi_send(r->ep, buf, 8, NULL, 12345, NULL) == -FI_EINVAL, "send to unknown fi_addr");
	/* Wait for the receiver to finish before closing. */
	{
		ssize_t n = read(STDIN_FILENO, &ack, 1);
		CHECK(n == 1, "ack");
	}
	free(buf);
}

static void receiver(struct res *r)
{
	char *buf = malloc(MAXSZ + 1);
	struct fi_cq_tagged_entry e;
	struct fi_cq_err_entry err = { 0 };

	for (size_t i = 0; i < NSIZES; i++) {
		memset(buf, 0xff, sizes[i] + 1);
		int ctx;
		CHECK(fi_recv(r->ep, buf, MAXSZ, NULL, FI_ADDR_UNSPEC, &ctx) == 0, "recv");
		int rc = wait_cq(r->rxcq, &e);
		CHECK(rc == 1 && e.op_context == &ctx && e.len == sizes[i] && (e.flags & FI_RECV) && (e.flags & FI_MSG),
		      "recv completion %zu: rc %d len %zu", sizes[i], rc, (size_t)e.len);
		CHECK(same(buf, sizes[i], (int)i), "data of size %zu", sizes[i]);
	}
	/* Tagged receive: a non-matching tag first stays posted. */
	char other[16];
	CHECK(fi_trecv(r->ep, other, sizeof(other), NULL, FI_ADDR_UNSPEC, 0x9999, 0, other) == 0, "trecv other");
	CHECK(fi_trecv(r->ep, buf, MAXSZ, NULL, FI_ADDR_UNSPEC, 0x1234, 0, buf) == 0, "trecv");
	CHECK(wait_cq(r->rxcq, &e) == 1 && e.op_context == buf && e.tag == 0x1234 && e.len == 5000 &&
		      (e.flags & FI_REMOTE_CQ_DATA) && e.data == 0xfeed && same(buf, 5000, 42),
	      "tagged completion");
	CHECK(fi_cancel(&r->ep->fid, other) == 0, "cancel");
	CHECK(wait_cq(r->rxcq, &e) == -FI_EAVAIL, "cancel reported as error");
	CHECK(fi_cq_readerr(r->rxcq, &err, 0) == 1 && err.err == FI_ECANCELED && err.op_context == other,
	      "canceled entry");
	/* Inject. */
	CHECK(fi_recv(r->ep, buf, 64, NULL, FI_ADDR_UNSPEC, NULL) == 0, "recv inject");
	CHECK(wait_cq(r->rxcq, &e) == 1 && e.len == 9 && !strcmp(buf, "injected"), "inject data");
	/* Truncated receive. */
	CHECK(fi_recv(r->ep, buf, 10, NULL, FI_ADDR_UNSPEC, buf) == 0, "recv small");
	CHECK(wait_cq(r->rxcq, &e) == -FI_EAVAIL, "truncation is an error completion");
	memset(&err, 0, sizeof(err));
#if FI_MAJOR_VERSION >= 2
	/* The fabric was opened for API 1.17, whose fi_cq_err_entry ends
	 * before src_addr: that member must not be written. */
	err.src_addr = 0x5a5a5a5aULL;
#endif
	CHECK(fi_cq_readerr(r->rxcq, &err, 0) == 1 && err.err == FI_ETRUNC && err.olen == 90 && err.op_context == buf,
	      "truncation entry: err %d olen %zu", err.err, err.olen);
#if FI_MAJOR_VERSION >= 2
	CHECK(err.src_addr == 0x5a5a5a5aULL, "readerr wrote past a 1.17 fi_cq_err_entry");
#endif
	CHECK(same(buf, 10, 9), "truncated data");
	CHECK(fi_cntr_read(r->cntr) == NSIZES + 2 && fi_cntr_readerr(r->cntr) >= 1,
	      "receive counter %llu/%llu", (unsigned long long)fi_cntr_read(r->cntr),
	      (unsigned long long)fi_cntr_readerr(r->cntr));
	/* Bad input on the CQ and AV. */
	CHECK(fi_cq_read(r->rxcq, NULL, 1) == -FI_EINVAL, "cq_read NULL buffer");
	CHECK(fi_cq_read(r->rxcq, &e, 1) == -FI_EAGAIN, "cq empty");
	fi_addr_t bad = 0;
	CHECK(fi_av_insert(r->av, "fi_shm://garb/age", 1, &bad, 0, NULL) == 0 && bad == FI_ADDR_NOTAVAIL, "bad address");
	/* Blocking reads: a CQ with a wait object times out, then is woken by
	 * fi_cq_signal; one without a wait object cannot block. */
	struct fid_cq *wcq;
	struct fi_cq_attr wattr = { .format = FI_CQ_FORMAT_CONTEXT, .wait_obj = FI_WAIT_UNSPEC };
	CHECK(fi_cq_open(r->domain, &wattr, &wcq, NULL) == 0, "cq with wait object");
	CHECK(fi_cq_sread(wcq, &e, 1, NULL, 20) == -FI_EAGAIN, "sread timeout");
	CHECK(fi_cq_signal(wcq) == 0 && fi_cq_sread(wcq, &e, 1, NULL, -1) == -FI_EAGAIN, "signal wakes sread");
	CHECK(fi_close(&wcq->fid) == 0, "close wait cq");
	CHECK(fi_cq_sread(r->rxcq, &e, 1, NULL, 10) == -FI_ENOSYS, "sread without wait object");
	wattr.format = 77;
	CHECK(fi_cq_open(r->domain, &wattr, &wcq, NULL) == -FI_EINVAL, "bad CQ format");
	struct fid_cntr *cntr;
	struct fi_cntr_attr cattr = { .events = FI_CNTR_EVENTS_COMP };
	CHECK(fi_cntr_open(r->domain, &cattr, &cntr, NULL) == 0, "cntr_open");
	CHECK(fi_cntr_add(cntr, 5) == 0 && fi_cntr_read(cntr) == 5, "cntr add/read");
	CHECK(fi_cntr_set(cntr, 0) == 0 && fi_cntr_read(cntr) == 0, "cntr set");
	CHECK(fi_cntr_adderr(cntr, 2) == 0 && fi_cntr_readerr(cntr) == 2, "cntr adderr");
	CHECK(fi_cntr_wait(cntr, 1, 10) == -FI_EAGAIN || fi_cntr_wait(cntr, 1, 10) == -FI_ETIMEDOUT ||
		      fi_cntr_wait(cntr, 1, 10) == -FI_ENOSYS, "cntr wait times out");
	/* Bound to a live endpoint the counter cannot close. Binding after
	 * fi_enable is refused. */
	CHECK(fi_ep_bind(r->ep, &cntr->fid, FI_RECV) == -FI_EOPBADSTATE, "bind after enable");
	CHECK(fi_close(&cntr->fid) == 0, "close cntr");
	cattr.events = 99;
	CHECK(fi_cntr_open(r->domain, &cattr, &cntr, NULL) == -FI_EINVAL, "cntr bad events");
	free(buf);
}

int main(void)
{
	int to_child[2], to_parent[2];
	if (pipe(to_child) || pipe(to_parent))
		return 2;
	pid_t pid = fork();
	if (pid < 0)
		return 2;
	struct res r;
	memset(&r, 0, sizeof(r));
	char peer_name[128] = { 0 };
	fi_addr_t peer = FI_ADDR_NOTAVAIL;

	if (pid == 0) {
		who = "child";
		dup2(to_child[0], STDIN_FILENO);
	}
	open_res(&r);
	int wfd = pid == 0 ? to_parent[1] : to_child[1];
	int rfd = pid == 0 ? to_child[0] : to_parent[0];
	if (write(wfd, r.name, r.namelen) != (ssize_t)r.namelen)
		return 2;
	if (read(rfd, peer_name, r.namelen) != (ssize_t)r.namelen)
		return 2;
	CHECK(fi_av_insert(r.av, peer_name, 1, &peer, 0, NULL) == 1 && peer != FI_ADDR_NOTAVAIL, "av_insert");
	char back[128];
	size_t blen = sizeof(back);
	CHECK(fi_av_lookup(r.av, peer, back, &blen) == 0 && !strcmp(back, peer_name), "av_lookup");
	char str[128];
	size_t slen = sizeof(str);
	CHECK(fi_av_straddr(r.av, peer_name, str, &slen) == str && !strcmp(str, peer_name), "straddr");

	if (pid == 0) {
		sender(&r, peer);
	} else {
		receiver(&r);
		if (write(to_child[1], "k", 1) != 1)
			failed++;
	}
	close_res(&r);
	if (pid != 0) {
		int st;
		waitpid(pid, &st, 0);
		if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
			printf("FAIL child exited with status %d\n", st);
			failed++;
		}
		printf("%d passed, %d failed\n", passed, failed);
		return failed ? 1 : 0;
	}
	printf("child: %d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}
