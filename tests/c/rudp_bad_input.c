/* Bad input to the rudp provider over loopback (FI_RUDP_IFACE=lo), one
 * process with two endpoints A and B: every call returns its documented
 * -FI_E* (or the operation completes with an error), nothing crashes or
 * hangs.
 *   API: fi_getinfo / fi_endpoint for FI_EP_MSG (refused) and FI_EP_DGRAM; fi_av_insert of addresses
 *   of the wrong family, port 0, the any-address (count 0, FI_ADDR_NOTAVAIL,
 *   FI_SYNC_ERR codes per address in context) and a mixed batch; sends, RMA and atomics to an
 *   fi_addr that is not in the AV (or was removed); too many iovs; injects
 *   larger than inject_size; atomics too large or of unsupported types; RMA
 *   and atomics with a bad key, out of range, or without the access they
 *   need (error completions at the initiator, nothing at the target);
 *   a send to an address nobody listens on (FI_ECONNRESET after
 *   FI_RUDP_PEER_TIMEOUT_MS).
 *   Wire: datagrams forged from plain UDP sockets: garbage, truncated
 *   headers, a bad version, an unknown kind, a zero connection id, data
 *   from an address that never said hello, and, after a handshake done by
 *   hand, a wrong connection id either way, a sequence number out of the
 *   window, and a duplicate of a packet already taken. A still works with B
 *   afterwards, and the counters it logs when closed (FI_LOG_LEVEL=info)
 *   show exactly those drops. The wire layout used here is the one
 *   providers/rudp/src/wire.rs documents.
 * RF_PROV=tcp runs the API cases on the tcp provider (FI_TCP_*; it has no
 * FI_EP_DGRAM, and nobody listening is a refused connection, an error at
 * once), and forges TCP connections instead: a length beyond the largest
 * packet, a first message that is no hello, a hello with a bad address, and
 * after a good hello (from an address that is not in the AV) a packet the
 * endpoint acknowledges, then an acknowledgement where none belongs, which
 * closes the connection. The framing is the one providers/tcp/src/tcp.rs
 * and device.rs document.
 * Prints "N passed, N failed". */
#define _GNU_SOURCE
#include <arpa/inet.h>
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
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* The provider under test: RF_PROV (rudp unless set), and the name of its
 * setting NAME (FI_RUDP_NAME, FI_TCP_NAME). */
static const char *prov_name(void)
{
	const char *p = getenv("RF_PROV");
	return p && *p ? p : "rudp";
}

static int is_tcp(void)
{
	return !strcmp(prov_name(), "tcp");
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

#define CHECK(cond, ...)                                        \
	do {                                                    \
		if (cond) {                                     \
			passed++;                               \
		} else {                                        \
			failed++;                               \
			printf("FAIL %s:%d: ", __FILE__, __LINE__); \
			printf(__VA_ARGS__);                    \
			printf("\n");                           \
		}                                               \
	} while (0)
/* A call that must return exactly `want`. */
#define RC(call, want)                                                                    \
	do {                                                                              \
		long rc_ = (long)(call);                                                  \
		CHECK(rc_ == (long)(want), "%s: got %ld (%s), want %ld", #call, rc_,      \
		      rc_ < 0 ? fi_strerror((int)-rc_) : "-", (long)(want));              \
	} while (0)
#define RETRY(call)                                 \
	({                                          \
		ssize_t r_;                         \
		while ((r_ = (call)) == -FI_EAGAIN) \
			usleep(20);                 \
		r_;                                 \
	})

#define CAPS (FI_MSG | FI_TAGGED | FI_RMA | FI_ATOMIC | FI_SOURCE | FI_DIRECTED_RECV)
#define TIMEOUT_MS 500

struct res {
	struct fi_info *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_cq *cq;
	struct fid_av *av;
	struct fid_ep *ep;
	char name[64];
	size_t namelen;
};

static long now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000L + t.tv_nsec / 1000000;
}

static struct fi_info *rudp_info(enum fi_ep_type type)
{
	struct fi_info *hints = fi_allocinfo(), *info = NULL;
	hints->ep_attr->type = type;
	hints->caps = CAPS;
	hints->addr_format = FI_SOCKADDR_IN;
	hints->domain_attr->mr_mode = FI_MR_VIRT_ADDR | FI_MR_PROV_KEY | FI_MR_ALLOCATED;
	hints->fabric_attr->prov_name = strdup(prov_name());
	int ret = fi_getinfo(FI_VERSION(1, 18), NULL, NULL, 0, hints, &info);
	fi_freeinfo(hints);
	return ret ? NULL : info;
}

static void open_res(struct res *r)
{
	struct fi_cq_attr cq_attr = { .format = FI_CQ_FORMAT_TAGGED };
	struct fi_av_attr av_attr = { .type = FI_AV_TABLE };
	memset(r, 0, sizeof(*r));
	r->info = rudp_info(FI_EP_RDM);
	if (!r->info || fi_fabric(r->info->fabric_attr, &r->fabric, NULL) || fi_domain(r->fabric, r->info, &r->domain, NULL) ||
	    fi_cq_open(r->domain, &cq_attr, &r->cq, NULL) || fi_av_open(r->domain, &av_attr, &r->av, NULL) ||
	    fi_endpoint(r->domain, r->info, &r->ep, NULL) || fi_ep_bind(r->ep, &r->av->fid, 0) ||
	    fi_ep_bind(r->ep, &r->cq->fid, FI_TRANSMIT | FI_RECV) || fi_enable(r->ep)) {
		printf("FAIL opening an endpoint\n");
		exit(2);
	}
	r->namelen = sizeof(r->name);
	if (fi_getname(&r->ep->fid, r->name, &r->namelen) || r->namelen != sizeof(struct sockaddr_in))
		exit(2);
}

static void close_res(struct res *r)
{
	if (r->ep)
		CHECK(fi_close(&r->ep->fid) == 0, "close ep");
	CHECK(fi_close(&r->cq->fid) == 0 && fi_close(&r->av->fid) == 0 && fi_close(&r->domain->fid) == 0 &&
		      fi_close(&r->fabric->fid) == 0,
	      "close objects");
	fi_freeinfo(r->info);
}

/* One completion (1), an error waiting (-FI_EAVAIL), or -FI_ETIMEDOUT. */
static int wait_cq(struct fid_cq *cq, struct fi_cq_tagged_entry *e, int ms)
{
	long end = now_ms() + ms;
	for (;;) {
		ssize_t n = fi_cq_read(cq, e, 1);
		if (n == 1)
			return 1;
		if (n != -FI_EAGAIN)
			return (int)n;
		if (now_ms() > end)
			return -FI_ETIMEDOUT;
		usleep(50);
	}
}

/* The error of the next completion of ctx (0: it succeeded). */
static int wait_err(struct fid_cq *cq, void *ctx, uint64_t *flags, int ms)
{
	struct fi_cq_tagged_entry e;
	int rc = wait_cq(cq, &e, ms);
	if (rc == 1)
		return e.op_context == ctx ? 0 : -1000;
	if (rc != -FI_EAVAIL)
		return rc;
	struct fi_cq_err_entry err = { 0 };
	if (fi_cq_readerr(cq, &err, 0) != 1)
		return -1001;
	if (flags)
		*flags = err.flags;
	return err.op_context == ctx ? err.err : -1002;
}

/* ------------------------------------------------------------ the API */

static void av_checks(struct res *A, const struct res *B)
{
	struct sockaddr_in good, bad;
	fi_addr_t out[3];
	memcpy(&good, B->name, sizeof(good));

	bad = good;
	bad.sin_family = AF_INET6;
	out[0] = 0;
	RC(fi_av_insert(A->av, &bad, 1, out, 0, NULL), 0);
	CHECK(out[0] == FI_ADDR_NOTAVAIL, "AF_INET6 family in an FI_SOCKADDR_IN AV: fi_addr %#llx", (unsigned long long)out[0]);
	bad = good;
	bad.sin_family = AF_UNIX;
	RC(fi_av_insert(A->av, &bad, 1, out, 0, NULL), 0);
	bad = good;
	bad.sin_port = 0;
	RC(fi_av_insert(A->av, &bad, 1, out, 0, NULL), 0);
	bad = good;
	bad.sin_addr.s_addr = htonl(INADDR_ANY);
	RC(fi_av_insert(A->av, &bad, 1, out, 0, NULL), 0);
	CHECK(out[0] == FI_ADDR_NOTAVAIL, "any-address: fi_addr %#llx", (unsigned long long)out[0]);
	/* FI_SYNC_ERR: context is an array of per-address results (fi_av(3)):
	 * 0 for the good address, an FI_E* code for the bad one */
	int errs[3] = { -1, 0, -1 };
	bad.sin_family = 0;
	{
		struct sockaddr_in pair[2] = { good, bad };
		pair[0].sin_port = htons(ntohs(good.sin_port) ^ 2);
		long r = fi_av_insert(A->av, pair, 2, out, FI_SYNC_ERR, errs);
		CHECK(r == 1 && errs[0] == 0 && errs[1] != 0 && out[0] != FI_ADDR_NOTAVAIL && out[1] == FI_ADDR_NOTAVAIL,
		      "FI_SYNC_ERR insert of a good and a bad address: %ld, codes %d %d", r, errs[0], errs[1]);
		if (r == 1)
			RC(fi_av_remove(A->av, out, 1, 0), 0);
		RC(fi_av_insert(A->av, pair, 2, out, FI_SYNC_ERR, NULL), -FI_EINVAL);
	}
	/* a batch of good, bad, good */
	struct sockaddr_in batch[3] = { good, bad, good };
	batch[2].sin_port = htons(ntohs(good.sin_port) ^ 1);
	RC(fi_av_insert(A->av, batch, 3, out, 0, NULL), 2);
	CHECK(out[0] != FI_ADDR_NOTAVAIL && out[1] == FI_ADDR_NOTAVAIL && out[2] != FI_ADDR_NOTAVAIL, "mixed batch: %#llx %#llx %#llx",
	      (unsigned long long)out[0], (unsigned long long)out[1], (unsigned long long)out[2]);
	RC(fi_av_remove(A->av, out, 1, 0), 0);
	RC(fi_av_remove(A->av, &out[2], 1, 0), 0);
	RC(fi_av_insert(A->av, NULL, 1, out, 0, NULL), -FI_EINVAL);
	RC(fi_av_insert(A->av, &good, 1, out, 1ULL << 50, NULL), -FI_EBADFLAGS);
	char str[64];
	size_t len = sizeof(str);
	CHECK(fi_av_straddr(A->av, &good, str, &len) != NULL && strstr(str, "127.0.0.1") != NULL, "straddr: %s", str);
}

static void api_checks(struct res *A, struct res *B, fi_addr_t to_b)
{
	static char buf[8192];
	struct fi_context ctx;
	struct fi_cq_tagged_entry e;
	struct iovec iov[5];
	for (int i = 0; i < 5; i++)
		iov[i] = (struct iovec){ buf + i, 1 };

	/* endpoint types other than RDM */
	{
		struct fi_info *msg = rudp_info(FI_EP_MSG);
		CHECK(msg == NULL, "fi_getinfo offers %s for FI_EP_MSG", prov_name());
		fi_freeinfo(msg);
		struct fi_info *i2 = fi_dupinfo(A->info);
		struct fid_ep *ep = NULL;
		i2->ep_attr->type = FI_EP_MSG;
		RC(fi_endpoint(A->domain, i2, &ep, NULL), -FI_EINVAL);
		CHECK(ep == NULL, "no endpoint handed out");
		/* rudp offers FI_EP_DGRAM: the same domain opens one; tcp has none. */
		i2->ep_attr->type = FI_EP_DGRAM;
		RC(fi_endpoint(A->domain, i2, &ep, NULL), is_tcp() ? -FI_EINVAL : 0);
		if (ep) {
			/* a datagram carries the payload only: no remote CQ data */
			struct fi_info *dh = fi_allocinfo(), *dg = NULL;
			dh->ep_attr->type = FI_EP_DGRAM;
			dh->caps = FI_MSG;
			dh->fabric_attr->prov_name = strdup(prov_name());
			RC(fi_getinfo(FI_VERSION(1, 18), NULL, NULL, 0, dh, &dg), 0);
			CHECK(dg && dg->domain_attr->cq_data_size == 0, "FI_EP_DGRAM offer: cq_data_size %zu", dg ? dg->domain_attr->cq_data_size : 99);
			{
				/* fi_endpoint(3): FI_OPT_INJECT_MSG_SIZE defaults to tx_attr->inject_size */
				size_t v = 0, vl = sizeof v;
				RC(fi_getopt(&ep->fid, FI_OPT_ENDPOINT, FI_OPT_INJECT_MSG_SIZE, &v, &vl), 0);
				CHECK(v == i2->tx_attr->inject_size && vl == sizeof v, "FI_OPT_INJECT_MSG_SIZE %zu, inject_size %zu", v, i2->tx_attr->inject_size);
				vl = 1;
				RC(fi_getopt(&ep->fid, FI_OPT_ENDPOINT, FI_OPT_INJECT_MSG_SIZE, &v, &vl), -FI_ETOOSMALL);
			}
			dh->domain_attr->cq_data_size = 4;
			struct fi_info *none = NULL;
			RC(fi_getinfo(FI_VERSION(1, 18), NULL, NULL, 0, dh, &none), -FI_ENODATA);
			fi_freeinfo(none);
			fi_freeinfo(dg);
			fi_freeinfo(dh);
			struct fid_cq *dcq = NULL;
			struct fi_cq_attr ca = { .format = FI_CQ_FORMAT_DATA };
			RC(fi_cq_open(A->domain, &ca, &dcq, NULL), 0);
			RC(fi_ep_bind(ep, &A->av->fid, 0), 0);
			RC(fi_ep_bind(ep, &dcq->fid, FI_TRANSMIT | FI_RECV), 0);
			RC(fi_enable(ep), 0);
			RC(fi_close(&ep->fid), 0);
			RC(fi_close(&dcq->fid), 0);
		}
		fi_freeinfo(i2);
	}

	/* destinations not in the AV */
	fi_addr_t nowhere = 99;
	RC(fi_send(A->ep, buf, 8, NULL, nowhere, &ctx), -FI_EINVAL);
	RC(fi_tsend(A->ep, buf, 8, NULL, nowhere, 1, &ctx), -FI_EINVAL);
	RC(fi_inject(A->ep, buf, 8, nowhere), -FI_EINVAL);
	RC(fi_send(A->ep, buf, 8, NULL, FI_ADDR_UNSPEC, &ctx), -FI_EINVAL);
	RC(fi_send(A->ep, buf, 8, NULL, FI_ADDR_NOTAVAIL, &ctx), -FI_EINVAL);
	RC(fi_write(A->ep, buf, 8, NULL, nowhere, 0, 0, &ctx), -FI_EINVAL);
	RC(fi_read(A->ep, buf, 8, NULL, nowhere, 0, 0, &ctx), -FI_EINVAL);
	RC(fi_atomic(A->ep, buf, 1, NULL, nowhere, 0, 0, FI_UINT64, FI_SUM, &ctx), -FI_EINVAL);
	{
		/* an entry removed */
		struct sockaddr_in other;
		fi_addr_t tmp = FI_ADDR_NOTAVAIL, again = FI_ADDR_NOTAVAIL;
		memcpy(&other, B->name, sizeof(other));
		other.sin_port = htons(ntohs(other.sin_port) ^ 2);
		RC(fi_av_insert(A->av, &other, 1, &tmp, 0, NULL), 1);
		/* the same address again: the same entry, held twice */
		RC(fi_av_insert(A->av, &other, 1, &again, 0, NULL), 1);
		CHECK(again == tmp, "one entry per address: %llu %llu", (unsigned long long)tmp, (unsigned long long)again);
		RC(fi_av_remove(A->av, &tmp, 1, 0), 0);
		RC(fi_av_remove(A->av, &tmp, 1, 0), 0);
		RC(fi_send(A->ep, buf, 8, NULL, tmp, &ctx), -FI_EINVAL);
		RC(fi_write(A->ep, buf, 8, NULL, tmp, 0, 0, &ctx), -FI_EINVAL);
	}
	CHECK(wait_cq(A->cq, &e, 100) == -FI_ETIMEDOUT, "refused calls make no completion");

	/* too many iovs (iov_limit 4, rma_iov_limit 1) */
	CHECK(A->info->tx_attr->iov_limit == 4 && A->info->rx_attr->iov_limit == 4 && A->info->tx_attr->rma_iov_limit == 1,
	      "iov limits %zu %zu %zu", A->info->tx_attr->iov_limit, A->info->rx_attr->iov_limit, A->info->tx_attr->rma_iov_limit);
	RC(fi_sendv(A->ep, iov, NULL, 5, to_b, &ctx), -FI_EINVAL);
	RC(fi_tsendv(A->ep, iov, NULL, 5, to_b, 1, &ctx), -FI_EINVAL);
	RC(fi_recvv(A->ep, iov, NULL, 5, FI_ADDR_UNSPEC, &ctx), -FI_EINVAL);
	RC(fi_trecvv(A->ep, iov, NULL, 5, FI_ADDR_UNSPEC, 1, 0, &ctx), -FI_EINVAL);
	RC(fi_writev(A->ep, iov, NULL, 5, to_b, 0, 0, &ctx), -FI_EINVAL);
	RC(fi_readv(A->ep, iov, NULL, 5, to_b, 0, 0, &ctx), -FI_EINVAL);
	{
		struct fi_rma_iov rv[2] = { { 0, 1, 0 }, { 1, 1, 0 } };
		struct fi_msg_rma m = { .msg_iov = iov, .iov_count = 2, .addr = to_b, .rma_iov = rv, .rma_iov_count = 2, .context = &ctx };
		RC(fi_writemsg(A->ep, &m, 0), -FI_EINVAL);
		RC(fi_readmsg(A->ep, &m, 0), -FI_EINVAL);
	}
	/* local and remote lengths that differ */
	{
		struct fi_rma_iov rv = { 0, 3, 0 };
		struct fi_msg_rma m = { .msg_iov = iov, .iov_count = 2, .addr = to_b, .rma_iov = &rv, .rma_iov_count = 1, .context = &ctx };
		RC(fi_writemsg(A->ep, &m, 0), -FI_EINVAL);
	}

	/* injects larger than inject_size */
	size_t inj = A->info->tx_attr->inject_size;
	CHECK(inj > 0 && inj < sizeof(buf), "inject_size %zu", inj);
	ssize_t r1 = fi_inject(A->ep, buf, inj + 1, to_b), r2 = fi_tinject(A->ep, buf, inj + 1, to_b, 1),
		r3 = fi_injectdata(A->ep, buf, inj + 1, 5, to_b), r4 = fi_inject_write(A->ep, buf, inj + 1, to_b, 0, 0);
	struct iovec big = { buf, inj + 1 };
	struct fi_msg bm = { .msg_iov = &big, .iov_count = 1, .addr = to_b, .context = &ctx };
	ssize_t r5 = fi_sendmsg(A->ep, &bm, FI_INJECT);
#define TOO_BIG(r) ((r) == -FI_EINVAL || (r) == -FI_EMSGSIZE)
	CHECK(TOO_BIG(r1) && TOO_BIG(r2) && TOO_BIG(r3) && TOO_BIG(r4) && TOO_BIG(r5),
	      "inject of inject_size + 1: inject %zd tinject %zd injectdata %zd inject_write %zd sendmsg(FI_INJECT) %zd", r1, r2, r3, r4, r5);
	CHECK(wait_cq(A->cq, &e, 100) == -FI_ETIMEDOUT, "refused injects make no completion");

	/* atomics: too many elements, unsupported types */
	size_t most = 0;
	CHECK(fi_atomicvalid(A->ep, FI_UINT64, FI_SUM, &most) == 0 && most > 0 && most < sizeof(buf) / 8, "atomicvalid: %zu", most);
	ssize_t ra = fi_atomic(A->ep, buf, most + 1, NULL, to_b, 0, 0, FI_UINT64, FI_SUM, &ctx),
		rf = fi_fetch_atomic(A->ep, buf, most + 1, NULL, buf + 4096, NULL, to_b, 0, 0, FI_UINT64, FI_SUM, &ctx),
		rc = fi_compare_atomic(A->ep, buf, most + 1, NULL, buf, NULL, buf + 4096, NULL, to_b, 0, 0, FI_UINT64, FI_CSWAP, &ctx);
	CHECK(TOO_BIG(ra) && TOO_BIG(rf) && TOO_BIG(rc), "atomics of fi_atomicvalid's count + 1: %zd %zd %zd", ra, rf, rc);
	RC(fi_atomic(A->ep, buf, 1, NULL, to_b, 0, 0, FI_FLOAT, FI_BOR, &ctx), -FI_EOPNOTSUPP);
	RC(fi_atomic(A->ep, buf, 1, NULL, to_b, 0, 0, (enum fi_datatype)200, FI_SUM, &ctx) < 0, 1);
	RC(fi_atomic(A->ep, buf, 1, NULL, to_b, 0, 0, FI_UINT64, FI_CSWAP, &ctx) < 0, 1);
	CHECK(wait_cq(A->cq, &e, 100) == -FI_ETIMEDOUT, "refused atomics make no completion");
}

/* RMA errors reported by the target: error completions at the initiator. */
static void rma_errors(struct res *A, struct res *B, fi_addr_t to_b)
{
	static uint64_t rw[512], ro[512], wo[512], local[512];
	struct fid_mr *mrw, *mro, *mwo;
	struct fi_context ctx;
	uint64_t fl = 0;
	struct fi_cq_tagged_entry e;
	CHECK(fi_mr_reg(B->domain, rw, sizeof(rw), FI_REMOTE_READ | FI_REMOTE_WRITE, 0, 0, 0, &mrw, NULL) == 0 &&
		      fi_mr_reg(B->domain, ro, sizeof(ro), FI_REMOTE_READ, 0, 0, 0, &mro, NULL) == 0 &&
		      fi_mr_reg(B->domain, wo, sizeof(wo), FI_REMOTE_WRITE, 0, 0, 0, &mwo, NULL) == 0,
	      "register target memory");
	uint64_t krw = fi_mr_key(mrw), kro = fi_mr_key(mro), kwo = fi_mr_key(mwo);
	uint64_t arw = (uintptr_t)rw, aro = (uintptr_t)ro, awo = (uintptr_t)wo;
	memset(ro, 0x5a, sizeof(ro));

#define REMOTE_ERR(what, call, want)                                                                              \
	do {                                                                                                      \
		ssize_t ret_ = RETRY(call);                                                                       \
		int err_ = ret_ == 0 ? wait_err(A->cq, &ctx, &fl, 10000) : (int)ret_;                             \
		CHECK(err_ == (want), "%s: %d (%s), want %d (%s)", what, err_, err_ > 0 ? fi_strerror(err_) : "-", \
		      want, fi_strerror(want));                                                                   \
	} while (0)

	/* it works with the right key, range and access */
	REMOTE_ERR("write", fi_write(A->ep, local, 64, NULL, to_b, arw, krw, &ctx), 0);
	REMOTE_ERR("write with a bad key", fi_write(A->ep, local, 64, NULL, to_b, arw, krw ^ 0x5555, &ctx), FI_EKEYREJECTED);
	REMOTE_ERR("read with a bad key", fi_read(A->ep, local, 64, NULL, to_b, arw, krw ^ 0x5555, &ctx), FI_EKEYREJECTED);
	REMOTE_ERR("write past the end", fi_write(A->ep, local, 64, NULL, to_b, arw + sizeof(rw) - 8, krw, &ctx), FI_EINVAL);
	REMOTE_ERR("write before the start", fi_write(A->ep, local, 8, NULL, to_b, arw - 8, krw, &ctx), FI_EINVAL);
	REMOTE_ERR("read past the end", fi_read(A->ep, local, 4096, NULL, to_b, arw + 8, krw, &ctx), FI_EINVAL);
	REMOTE_ERR("write at a huge address", fi_write(A->ep, local, 8, NULL, to_b, UINT64_MAX - 3, krw, &ctx), FI_EINVAL);
	REMOTE_ERR("write 4096 bytes past the end (several packets)",
		   fi_write(A->ep, local, 4096, NULL, to_b, arw + 8, krw, &ctx), FI_EINVAL);
	REMOTE_ERR("write without FI_REMOTE_WRITE", fi_write(A->ep, local, 64, NULL, to_b, aro, kro, &ctx), FI_EACCES);
	CHECK(fl & FI_RMA && fl & FI_WRITE, "error completion flags %#llx", (unsigned long long)fl);
	REMOTE_ERR("writedata without FI_REMOTE_WRITE", fi_writedata(A->ep, local, 64, NULL, 7, to_b, aro, kro, &ctx), FI_EACCES);
	REMOTE_ERR("read without FI_REMOTE_READ", fi_read(A->ep, local, 64, NULL, to_b, awo, kwo, &ctx), FI_EACCES);
	CHECK(fl & FI_RMA && fl & FI_READ, "error completion flags %#llx", (unsigned long long)fl);
	REMOTE_ERR("atomic without FI_REMOTE_WRITE", fi_atomic(A->ep, local, 1, NULL, to_b, aro, kro, FI_UINT64, FI_SUM, &ctx), FI_EACCES);
	REMOTE_ERR("fetch atomic without FI_REMOTE_READ",
		   fi_fetch_atomic(A->ep, local, 1, NULL, local + 1, NULL, to_b, awo, kwo, FI_UINT64, FI_SUM, &ctx), FI_EACCES);
	REMOTE_ERR("atomic with a bad key", fi_atomic(A->ep, local, 1, NULL, to_b, arw, krw + 1, FI_UINT64, FI_SUM, &ctx), FI_EKEYREJECTED);
	REMOTE_ERR("atomic out of range", fi_atomic(A->ep, local, 2, NULL, to_b, arw + sizeof(rw) - 8, krw, FI_UINT64, FI_SUM, &ctx), FI_EINVAL);
	/* an inject write has no completion; its failure may still show as
	 * an error entry without a context */
	CHECK(RETRY(fi_inject_write(A->ep, local, 8, to_b, aro, kro)) == 0, "inject_write to a read-only region is taken");
	int rc = wait_cq(A->cq, &e, 1000);
	if (rc == -FI_EAVAIL) {
		struct fi_cq_err_entry err = { 0 };
		CHECK(fi_cq_readerr(A->cq, &err, 0) == 1 && err.err == FI_EACCES && err.op_context == NULL,
		      "failed inject_write: err %d ctx %p", err.err, err.op_context);
	} else {
		CHECK(rc == -FI_ETIMEDOUT, "failed inject_write makes no successful completion: %d", rc);
	}
	int same = 1;
	for (int i = 0; i < 512; i++)
		same &= ro[i] == 0x5a5a5a5a5a5a5a5aULL;
	CHECK(same, "the read-only region is untouched");
	/* the target saw nothing of all this */
	CHECK(wait_cq(B->cq, &e, 100) == -FI_ETIMEDOUT, "no completion at the target");
	REMOTE_ERR("write after the errors", fi_write(A->ep, local, 64, NULL, to_b, arw, krw, &ctx), 0);
	CHECK(fi_close(&mrw->fid) == 0 && fi_close(&mro->fid) == 0 && fi_close(&mwo->fid) == 0, "close mrs");
	/* a closed registration */
	REMOTE_ERR("write to a closed registration", fi_write(A->ep, local, 64, NULL, to_b, arw, krw, &ctx), FI_EKEYREJECTED);
#undef REMOTE_ERR
}

/* A send to an address nobody listens on fails after the peer timeout. */
static void nobody(struct res *A)
{
	int s = socket(AF_INET, SOCK_DGRAM, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t al = sizeof(a);
	if (s < 0 || bind(s, (struct sockaddr *)&a, sizeof(a)) || getsockname(s, (struct sockaddr *)&a, &al))
		exit(2);
	close(s); /* the port is free now, and nobody answers there */
	fi_addr_t to = FI_ADDR_NOTAVAIL;
	struct fi_context ctx;
	RC(fi_av_insert(A->av, &a, 1, &to, 0, NULL), 1);
	long t0 = now_ms();
	RC(fi_send(A->ep, "x", 2, NULL, to, &ctx), 0);
	int err = wait_err(A->cq, &ctx, NULL, 20000);
	long ms = now_ms() - t0;
	long lo = is_tcp() ? 0 : TIMEOUT_MS - 50; /* tcp: the connection is refused */
	CHECK(err == FI_ECONNRESET && ms >= lo && ms < TIMEOUT_MS + 5000, "send to nobody: %d (%s) after %ld ms", err,
	      err > 0 ? fi_strerror(err) : "-", ms);
	RC(fi_av_remove(A->av, &to, 1, 0), 0);
}

/* ------------------------------------------------------------ the wire */

enum { HELLO = 3, HELLO_ACK = 4, DATA = 1, ACK = 2 };
#define MAGIC 0xa7
#define DEV_HDR 32
#define PROTO_HDR 64

static void le32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}
static void le64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}
static uint32_t rd32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
/* The device header (32 bytes): magic, version, kind, flags, src_conn,
 * dst_conn, seq, ack, sack (64 bits), highest sequence seen. */
static void dev_hdr(uint8_t *b, uint8_t kind, uint32_t src, uint32_t dst, uint32_t seq)
{
	memset(b, 0, DEV_HDR);
	b[0] = MAGIC;
	b[1] = 1;
	b[2] = kind;
	le32(b + 4, src);
	le32(b + 8, dst);
	le32(b + 12, seq);
}
/* A protocol header of a one-packet tagged message: pkt 1 (Msg), flags 1
 * (tagged), msg_id, tag, total, offset 0. */
static void msg_hdr(uint8_t *b, uint32_t msg_id, uint64_t tag, uint64_t total)
{
	memset(b, 0, PROTO_HDR);
	b[0] = 1;
	b[1] = 1;
	le32(b + 8, msg_id);
	le64(b + 24, tag);
	le64(b + 40, total);
}

static int udp_socket(void)
{
	int s = socket(AF_INET, SOCK_DGRAM, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	if (s < 0 || bind(s, (struct sockaddr *)&a, sizeof(a)))
		exit(2);
	return s;
}

static void to_ep(int s, const struct res *r, const void *b, size_t n)
{
	if (sendto(s, b, n, 0, (const struct sockaddr *)r->name, sizeof(struct sockaddr_in)) != (ssize_t)n)
		CHECK(0, "sendto");
}

struct drops {
	unsigned long malformed, unknown, conn, window, dup;
};

static void forge(struct res *A, struct drops *want)
{
	uint8_t b[256];
	int s1 = udp_socket(), s2 = udp_socket(), s3 = udp_socket();
	memset(want, 0, sizeof(*want));

	/* malformed, from anywhere */
	to_ep(s3, A, b, 0);
	want->malformed++;
	for (int i = 0; i < 100; i++)
		b[i] = (uint8_t)(i * 37 + 1);
	to_ep(s3, A, b, 100); /* garbage */
	want->malformed++;
	dev_hdr(b, DATA, 0x1234, 0x5678, 0);
	to_ep(s3, A, b, 10); /* a truncated device header */
	want->malformed++;
	to_ep(s3, A, b, DEV_HDR + 10); /* data shorter than both headers */
	want->malformed++;
	dev_hdr(b, HELLO, 0x1234, 0, 0);
	b[1] = 2;
	to_ep(s3, A, b, DEV_HDR); /* another wire version */
	want->malformed++;
	dev_hdr(b, 9, 0x1234, 0, 0);
	to_ep(s3, A, b, DEV_HDR); /* an unknown kind */
	want->malformed++;
	dev_hdr(b, HELLO, 0, 0, 0);
	to_ep(s3, A, b, DEV_HDR); /* a zero connection id */
	want->malformed++;

	/* data, an ack and a hello-ack from an address that never said hello */
	dev_hdr(b, DATA, 0x4321, 0x1111, 0);
	msg_hdr(b + DEV_HDR, 0, 0x77, 4);
	memcpy(b + DEV_HDR + PROTO_HDR, "bad", 4);
	to_ep(s2, A, b, DEV_HDR + PROTO_HDR + 4);
	dev_hdr(b, ACK, 0x4321, 0x1111, 0);
	to_ep(s2, A, b, DEV_HDR);
	dev_hdr(b, HELLO_ACK, 0x4321, 0x1111, 0);
	to_ep(s2, A, b, DEV_HDR);
	want->unknown += 3;

	/* a handshake by hand: hello, and A answers with its connection id */
	uint32_t mine = 0x00c0ffee, conn = 0;
	dev_hdr(b, HELLO, mine, 0, 0);
	to_ep(s1, A, b, DEV_HDR);
	struct pollfd p = { .fd = s1, .events = POLLIN };
	uint8_t r[256];
	ssize_t n = -1;
	if (poll(&p, 1, 5000) == 1)
		n = recv(s1, r, sizeof(r), 0);
	CHECK(n >= DEV_HDR && r[0] == MAGIC && r[2] == HELLO_ACK && rd32(r + 8) == mine && rd32(r + 4) != 0,
	      "hello-ack: %zd bytes, kind %d, dst_conn %#x", n, n > 2 ? r[2] : -1, n >= 12 ? rd32(r + 8) : 0);
	conn = rd32(r + 4);

	/* wrong connection ids either way */
	dev_hdr(b, DATA, mine, conn ^ 0x10, 0);
	msg_hdr(b + DEV_HDR, 0, 0x77, 4);
	memcpy(b + DEV_HDR + PROTO_HDR, "bad", 4);
	to_ep(s1, A, b, DEV_HDR + PROTO_HDR + 4);
	dev_hdr(b, DATA, mine ^ 0x10, conn, 0);
	msg_hdr(b + DEV_HDR, 0, 0x77, 4);
	to_ep(s1, A, b, DEV_HDR + PROTO_HDR + 4);
	want->conn += 2;
	/* a sequence number far out of the window */
	dev_hdr(b, DATA, mine, conn, 100000);
	msg_hdr(b + DEV_HDR, 0, 0x77, 4);
	to_ep(s1, A, b, DEV_HDR + PROTO_HDR + 4);
	want->window++;
	/* a well-formed message: taken once; the same packet again is a
	 * duplicate, dropped (and acknowledged again) */
	dev_hdr(b, DATA, mine, conn, 0);
	msg_hdr(b + DEV_HDR, 0, 0x77, 5);
	memcpy(b + DEV_HDR + PROTO_HDR, "good", 5);
	char got[16] = { 0 };
	struct fi_context ctx;
	struct fi_cq_tagged_entry e;
	fi_addr_t src = 0;
	RC(fi_trecv(A->ep, got, sizeof(got), NULL, FI_ADDR_UNSPEC, 0x77, 0, &ctx), 0);
	to_ep(s1, A, b, DEV_HDR + PROTO_HDR + 5);
	long end = now_ms() + 5000;
	ssize_t k;
	while ((k = fi_cq_readfrom(A->cq, &e, 1, &src)) == -FI_EAGAIN && now_ms() < end)
		usleep(100);
	CHECK(k == 1 && e.op_context == &ctx && !strcmp(got, "good") && e.len == 5 && src == FI_ADDR_NOTAVAIL,
	      "the hand-made message arrives once: %zd '%s' src %#llx", k, got, (unsigned long long)src);
	memset(got, 0, sizeof(got));
	to_ep(s1, A, b, DEV_HDR + PROTO_HDR + 5);
	want->dup++;
	/* its acknowledgement comes back: cumulative ack 1 */
	int acked = 0;
	end = now_ms() + 5000;
	while (!acked && now_ms() < end && poll(&p, 1, 100) >= 0) {
		n = recv(s1, r, sizeof(r), MSG_DONTWAIT);
		acked = n >= DEV_HDR && r[2] == ACK && rd32(r + 4) == conn && rd32(r + 8) == mine && rd32(r + 16) == 1;
	}
	CHECK(acked, "the endpoint acknowledges the hand-made packet");
	CHECK(wait_cq(A->cq, &e, 200) == -FI_ETIMEDOUT && got[0] == 0, "the duplicate is not delivered");
	close(s1);
	close(s2);
	close(s3);
}

/* ------------------------------------------------- the wire, over TCP */

enum { T_HELLO = 1, T_DATA = 2, T_ACK = 3 };

/* A plain TCP connection to A's listener. */
static int tcp_to(const struct res *A)
{
	int s = socket(AF_INET, SOCK_STREAM, 0);
	if (s < 0 || connect(s, (const struct sockaddr *)A->name, sizeof(struct sockaddr_in)))
		exit(2);
	return s;
}

/* One framed message: 4-byte little-endian length, then the bytes. */
static void tcp_msg(int s, const void *b, uint32_t n)
{
	uint8_t h[4];
	le32(h, n);
	if (write(s, h, 4) != 4 || (n && write(s, b, n) != (ssize_t)n))
		CHECK(0, "write");
}

/* Reads up to n bytes from s within ms, driving A's progress meanwhile;
 * the bytes read, or -1 at end of file. */
static int tcp_read(int s, struct res *A, uint8_t *b, int n, int ms)
{
	long end = now_ms() + ms;
	int got = 0;
	while (got < n && now_ms() < end) {
		struct fi_cq_tagged_entry e;
		(void)fi_cq_read(A->cq, &e, 1);
		struct pollfd p = { .fd = s, .events = POLLIN };
		if (poll(&p, 1, 1) == 1) {
			ssize_t r = read(s, b + got, n - got);
			if (r == 0)
				return got ? got : -1;
			if (r < 0)
				return -1;
			got += r;
		}
	}
	return got;
}

static void forge_tcp(struct res *A, struct drops *want)
{
	uint8_t b[256];
	memset(want, 0, sizeof(*want));
	int s1 = tcp_to(A), s2 = tcp_to(A), s3 = tcp_to(A), s4 = tcp_to(A);

	/* a length beyond the largest packet */
	le32(b, 0x7fffffff);
	CHECK(write(s1, b, 4) == 4, "write");
	want->malformed++;
	/* a first message that is no hello */
	b[0] = T_DATA;
	memset(b + 1, 0, 64);
	tcp_msg(s2, b, 65);
	want->malformed++;
	/* a hello with a bad address */
	b[0] = T_HELLO;
	le64(b + 1, 42);
	memset(b + 9, 0xab, 3);
	tcp_msg(s3, b, 12);
	want->malformed++;
	for (int s = 0; s < 3; s++)
		CHECK(tcp_read((int[]){ s1, s2, s3 }[s], A, b, 1, 5000) == -1, "forged connection %d closed by the endpoint", s + 1);

	/* a good hello (port 9 of loopback, not in the AV), a packet the
	 * engine drops (too short for its header) and acknowledges, then an
	 * acknowledgement on the peer's own connection: it is closed */
	struct sockaddr_in me = { .sin_family = AF_INET, .sin_port = htons(9), .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	b[0] = T_HELLO;
	le64(b + 1, 42);
	memcpy(b + 9, &me, sizeof(me));
	tcp_msg(s4, b, 9 + sizeof(me));
	b[0] = T_DATA;
	b[1] = 0xee;
	tcp_msg(s4, b, 2);
	uint8_t ack[9];
	int n = tcp_read(s4, A, ack, 9, 5000);
	CHECK(n == 9 && rd32(ack) == 5 && ack[4] == T_ACK && rd32(ack + 5) == 1, "the endpoint acknowledges the hand-made packet (%d bytes)", n);
	b[0] = T_ACK;
	le32(b + 1, 1);
	tcp_msg(s4, b, 5);
	want->malformed++;
	CHECK(tcp_read(s4, A, b, 1, 5000) == -1, "the connection with a stray acknowledgement is closed");
	close(s1);
	close(s2);
	close(s3);
	close(s4);
}

/* Exchanges messages both ways, short and long. */
static void still_works(struct res *A, fi_addr_t to_b, struct res *B, fi_addr_t to_a)
{
	static char x[200000], y[200000];
	struct fi_cq_tagged_entry e;
	struct fi_context c1, c2;
	for (int round = 0; round < 2; round++) {
		struct res *s = round ? B : A, *d = round ? A : B;
		fi_addr_t to = round ? to_a : to_b;
		size_t len = round ? sizeof(x) : 100;
		memset(x, 'a' + round, sizeof(x));
		memset(y, 0, sizeof(y));
		RC(fi_recv(d->ep, y, sizeof(y), NULL, FI_ADDR_UNSPEC, &c2), 0);
		RC(RETRY(fi_send(s->ep, x, len, NULL, to, &c1)), 0);
		int a = wait_cq(d->cq, &e, 10000);
		CHECK(a == 1 && e.op_context == &c2 && e.len == len && y[0] == 'a' + round && y[len - 1] == 'a' + round,
		      "message %d after the forgeries: %d", round, a);
		a = wait_cq(s->cq, &e, 10000);
		CHECK(a == 1 && e.op_context == &c1, "its send completes: %d", a);
	}
}

/* Closes A's endpoint with stderr caught, and reads its drop counters. */
static int close_and_count(struct res *A, struct drops *got)
{
	char want[64], line[1024];
	struct sockaddr_in me;
	memcpy(&me, A->name, sizeof(me));
	snprintf(want, sizeof(want), "endpoint 127.0.0.1:%u closed:", ntohs(me.sin_port));
	fflush(stderr);
	FILE *t = tmpfile();
	int saved = dup(2);
	if (!t || saved < 0 || dup2(fileno(t), 2) < 0)
		return 0;
	int rc = fi_close(&A->ep->fid);
	A->ep = NULL;
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	CHECK(rc == 0, "close A");
	rewind(t);
	int found = 0;
	while (fgets(line, sizeof(line), t)) {
		char *at = strstr(line, want), *d = at ? strstr(at, "dropped: ") : NULL;
		if (!d)
			continue;
		printf("    %s", at);
		found = sscanf(d, "dropped: %lu malformed, %lu from unknown peers, %lu with a wrong connection id, %lu out of window, %lu duplicates",
			       &got->malformed, &got->unknown, &got->conn, &got->window, &got->dup) == 5;
	}
	fclose(t);
	return found;
}

int main(void)
{
	struct res A, B;
	setvbuf(stdout, NULL, _IONBF, 0);
	setenv(pvar("IFACE"), "lo", 0);
	setenv(pvar("PEER_TIMEOUT_MS"), "500", 1);
	/* the counters an endpoint logs when it closes */
	setenv("FI_LOG_LEVEL", "info", 1);
	setenv("FI_LOG_PROV", prov_name(), 1);
	setenv("FI_LOG_SUBSYS", "ep_ctrl", 1);

	open_res(&A);
	open_res(&B);
	fi_addr_t to_b = FI_ADDR_NOTAVAIL, to_a = FI_ADDR_NOTAVAIL;
	CHECK(fi_av_insert(A.av, B.name, 1, &to_b, 0, NULL) == 1 && fi_av_insert(B.av, A.name, 1, &to_a, 0, NULL) == 1, "insert");

	int f0 = failed;
	av_checks(&A, &B);
	printf("av:            %s\n", failed == f0 ? "ok" : "FAILED");
	f0 = failed;
	api_checks(&A, &B, to_b);
	printf("api:           %s\n", failed == f0 ? "ok" : "FAILED");
	f0 = failed;
	still_works(&A, to_b, &B, to_a);
	rma_errors(&A, &B, to_b);
	printf("remote errors: %s\n", failed == f0 ? "ok" : "FAILED");
	f0 = failed;
	nobody(&A);
	printf("no listener:   %s\n", failed == f0 ? "ok" : "FAILED");
	f0 = failed;
	struct drops want, got = { 0 };
	if (is_tcp())
		forge_tcp(&A, &want);
	else
		forge(&A, &want);
	still_works(&A, to_b, &B, to_a);
	CHECK(close_and_count(&A, &got), "A logged its counters when closed");
	CHECK(got.malformed == want.malformed && got.unknown == want.unknown && got.conn == want.conn && got.window == want.window &&
		      got.dup >= want.dup,
	      "drops counted: malformed %lu/%lu, unknown peers %lu/%lu, connection id %lu/%lu, window %lu/%lu, duplicates %lu/%lu+",
	      got.malformed, want.malformed, got.unknown, want.unknown, got.conn, want.conn, got.window, want.window, got.dup, want.dup);
	printf("forged:        %s\n", failed == f0 ? "ok" : "FAILED");
	close_res(&A);
	close_res(&B);
	printf("%d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}
