/* RMA and atomics over the shm provider between two processes, through the
 * C API only. The parent is the target: it registers memory, sends keys and
 * addresses over a pipe, and drives progress (manual) by reading its CQ and
 * counters until the child says it is done; then it checks the remote CQ
 * data completions and the FI_REMOTE_WRITE / FI_REMOTE_READ counters. The
 * child is the initiator: writes and reads of 1 B .. 16 MiB with the data
 * read back and checked, vector and msg forms, writedata, inject_write,
 * bad key / access / range errors as error completions, bad input codes,
 * and every atomic op x datatype that fi_*atomicvalid reports, checked
 * against a local reference computation (old values through the fetch and
 * compare forms, new values read back), and a target that dies with a
 * request outstanding (FI_ECONNRESET).
 * RMA_MR=offset selects offset addressing with application keys; anything
 * else FI_MR_VIRT_ADDR | FI_MR_PROV_KEY. Prints "N passed, N failed". */
#define _GNU_SOURCE
#include <complex.h>
#include <poll.h>
#include <rdma/fabric.h>
#include <rdma/fi_atomic.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static int passed, failed;
static const char *who = "target";

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

#define BIG (16u << 20)
#define SLACK 64
#define ATOM 4096

struct res {
	struct fi_info *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_cq *cq;
	struct fid_av *av;
	struct fid_ep *ep;
	struct fid_cntr *c1, *c2;
	char name[128];
	size_t namelen;
	int virt;
};

/* What the target tells the initiator. */
struct keys {
	uint64_t big, ro, atom;       /* remote addresses (offset 0) */
	uint64_t big_key, ro_key, atom_key;
};

/* What the initiator tells the target at the end. */
struct expect {
	uint64_t cq_data, remote_writes, remote_reads;
};

static void open_res(struct res *r, int target)
{
	struct fi_info *hints = fi_allocinfo();
	struct fi_cq_attr cq_attr = { .format = FI_CQ_FORMAT_DATA };
	struct fi_av_attr av_attr = { .type = FI_AV_TABLE };
	struct fi_cntr_attr cattr = { .events = FI_CNTR_EVENTS_COMP };
	const char *m = getenv("RMA_MR");
	int ret;

	r->virt = !(m && !strcmp(m, "offset"));
	hints->ep_attr->type = FI_EP_RDM;
	hints->caps = FI_MSG | FI_RMA | FI_ATOMIC | FI_RMA_EVENT | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;
	hints->domain_attr->mr_mode = r->virt ? FI_MR_VIRT_ADDR | FI_MR_PROV_KEY | FI_MR_ALLOCATED : FI_MR_ALLOCATED;
	hints->fabric_attr->prov_name = strdup("shm");
	ret = fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &r->info);
	fi_freeinfo(hints);
	if (ret) {
		printf("fi_getinfo: %d\n", ret);
		exit(2);
	}
	CHECK(!!(r->info->domain_attr->mr_mode & FI_MR_VIRT_ADDR) == r->virt &&
		      !!(r->info->domain_attr->mr_mode & FI_MR_PROV_KEY) == r->virt,
	      "mr_mode 0x%x", r->info->domain_attr->mr_mode);
	CHECK((r->info->caps & (FI_RMA | FI_ATOMIC | FI_RMA_EVENT)) == (FI_RMA | FI_ATOMIC | FI_RMA_EVENT), "caps");
	if (fi_fabric(r->info->fabric_attr, &r->fabric, NULL) || fi_domain(r->fabric, r->info, &r->domain, NULL) ||
	    fi_cq_open(r->domain, &cq_attr, &r->cq, NULL) || fi_av_open(r->domain, &av_attr, &r->av, NULL) ||
	    fi_cntr_open(r->domain, &cattr, &r->c1, NULL) || fi_cntr_open(r->domain, &cattr, &r->c2, NULL) ||
	    fi_endpoint(r->domain, r->info, &r->ep, NULL)) {
		printf("opening objects failed\n");
		exit(2);
	}
	CHECK(fi_ep_bind(r->ep, &r->av->fid, 0) == 0, "bind av");
	CHECK(fi_ep_bind(r->ep, &r->cq->fid, FI_TRANSMIT | FI_RECV) == 0, "bind cq");
	/* Target: remote event counters; initiator: local write/read counters. */
	CHECK(fi_ep_bind(r->ep, &r->c1->fid, target ? FI_REMOTE_WRITE : FI_WRITE) == 0, "bind c1");
	CHECK(fi_ep_bind(r->ep, &r->c2->fid, target ? FI_REMOTE_READ : FI_READ) == 0, "bind c2");
	CHECK(fi_ep_bind(r->ep, &r->c2->fid, target ? FI_REMOTE_READ : FI_READ) == -FI_EINVAL, "bind twice");
	CHECK(fi_enable(r->ep) == 0, "enable");
	r->namelen = sizeof(r->name);
	CHECK(fi_getname(&r->ep->fid, r->name, &r->namelen) == 0, "getname");
}

static void close_res(struct res *r)
{
	CHECK(fi_close(&r->ep->fid) == 0, "close ep");
	CHECK(fi_close(&r->cq->fid) == 0, "close cq");
	CHECK(fi_close(&r->av->fid) == 0, "close av");
	CHECK(fi_close(&r->c1->fid) == 0, "close c1");
	CHECK(fi_close(&r->c2->fid) == 0, "close c2");
	CHECK(fi_close(&r->domain->fid) == 0, "close domain");
	CHECK(fi_close(&r->fabric->fid) == 0, "close fabric");
	fi_freeinfo(r->info);
}

/* ---------------------------------------------------------------- target */

static void target(struct res *r, int rfd, int wfd)
{
	char *big = aligned_alloc(64, BIG + SLACK);
	char *ro = calloc(1, 4096);
	char *atom = aligned_alloc(64, ATOM);
	struct fid_mr *mbig, *mro, *matom;
	struct keys k;
	uint64_t seen_data = 0, data_sum = 0;
	int bad_flags = 0;

	memset(big, 0, BIG + SLACK);
	memset(atom, 0, ATOM);
	memset(ro, 0x5a, 4096);
	CHECK(fi_mr_reg(r->domain, big, BIG + SLACK, FI_REMOTE_READ | FI_REMOTE_WRITE, 0, 0x100, 0, &mbig, NULL) == 0, "mr big");
	CHECK(fi_mr_reg(r->domain, ro, 4096, FI_REMOTE_READ, 0, 0x200, 0, &mro, NULL) == 0, "mr ro");
	CHECK(fi_mr_reg(r->domain, atom, ATOM, FI_REMOTE_READ | FI_REMOTE_WRITE, 0, 0x300, 0, &matom, NULL) == 0, "mr atom");
	if (!r->virt) {
		struct fid_mr *dup;
		CHECK(fi_mr_reg(r->domain, ro, 16, FI_REMOTE_READ, 0, 0x200, 0, &dup, NULL) == -FI_ENOKEY, "requested key in use");
	}
	k.big = r->virt ? (uint64_t)(uintptr_t)big : 0;
	k.ro = r->virt ? (uint64_t)(uintptr_t)ro : 0;
	k.atom = r->virt ? (uint64_t)(uintptr_t)atom : 0;
	k.big_key = fi_mr_key(mbig);
	k.ro_key = fi_mr_key(mro);
	k.atom_key = fi_mr_key(matom);
	CHECK(r->virt || (k.big_key == 0x100 && k.ro_key == 0x200), "application keys kept");
	if (write(wfd, &k, sizeof(k)) != sizeof(k))
		exit(2);
	/* Serve requests until the initiator is done. */
	for (;;) {
		struct fi_cq_data_entry e;
		ssize_t n = fi_cq_read(r->cq, &e, 1);
		if (n == 1) {
			if (e.flags != (FI_REMOTE_CQ_DATA | FI_RMA | FI_REMOTE_WRITE) || e.op_context != NULL)
				bad_flags++;
			seen_data++;
			data_sum += e.data;
			continue;
		}
		if (n != -FI_EAGAIN)
			CHECK(0, "target cq_read %zd", n);
		struct pollfd p = { .fd = rfd, .events = POLLIN };
		if (poll(&p, 1, 0) == 1)
			break;
	}
	struct expect x;
	if (read(rfd, &x, sizeof(x)) != sizeof(x))
		exit(2);
	CHECK(seen_data == x.cq_data && bad_flags == 0, "remote CQ data: %llu of %llu, %d bad",
	      (unsigned long long)seen_data, (unsigned long long)x.cq_data, bad_flags);
	CHECK(data_sum == 4 * 0xC0FFEE00ULL + 0 + 1 + 2 + 3, "remote CQ data values");
	CHECK(fi_cntr_read(r->c1) == x.remote_writes, "FI_REMOTE_WRITE counter %llu, expected %llu",
	      (unsigned long long)fi_cntr_read(r->c1), (unsigned long long)x.remote_writes);
	CHECK(fi_cntr_read(r->c2) == x.remote_reads, "FI_REMOTE_READ counter %llu, expected %llu",
	      (unsigned long long)fi_cntr_read(r->c2), (unsigned long long)x.remote_reads);
	for (int i = 0; i < 4096; i++)
		if (ro[i] != 0x5a) {
			CHECK(0, "read-only region written at %d", i);
			break;
		}
	if (write(wfd, "k", 1) != 1)
		exit(2);
	CHECK(fi_close(&mbig->fid) == 0 && fi_close(&mro->fid) == 0 && fi_close(&matom->fid) == 0, "close mrs");
	free(big);
	free(ro);
	free(atom);
}

/* ---------------------------------------------------------------- initiator */

static struct res *R;
static fi_addr_t peer;
static struct keys K;
static struct expect X;

static int wait_cq(struct fi_cq_data_entry *e, struct fi_cq_err_entry *err)
{
	for (long i = 0; i < 400000000L; i++) {
		ssize_t n = fi_cq_read(R->cq, e, 1);
		if (n == 1)
			return 1;
		if (n == -FI_EAVAIL) {
			memset(err, 0, sizeof(*err));
			return fi_cq_readerr(R->cq, err, 0) == 1 ? -FI_EAVAIL : -FI_EOTHER;
		}
		if (n != -FI_EAGAIN)
			return (int)n;
	}
	return -FI_ETIMEDOUT;
}

/* One successful completion with this context and flags. */
static int ok_completion(void *ctx, uint64_t flags)
{
	struct fi_cq_data_entry e;
	struct fi_cq_err_entry err = { 0 };
	int rc = wait_cq(&e, &err);
	if (rc != 1) {
		printf("  completion rc %d err %d (%s)\n", rc, err.err, fi_strerror(err.err));
		return 0;
	}
	return e.op_context == ctx && e.flags == flags;
}

/* One error completion with this context; returns its err. */
static int err_completion(void *ctx)
{
	struct fi_cq_data_entry e;
	struct fi_cq_err_entry err = { 0 };
	int rc = wait_cq(&e, &err);
	if (rc != -FI_EAVAIL || err.op_context != ctx)
		return -1;
	return err.err;
}

static struct fi_cq_data_entry drain;

static uint64_t ra(uint64_t base, uint64_t off)
{
	return base + off;
}

static void fill(char *b, size_t n, int seed)
{
	for (size_t i = 0; i < n; i++)
		b[i] = (char)(i * 7 + seed + (i >> 12));
}

#define RETRY(call)                                              \
	({                                                       \
		ssize_t _r;                                      \
		while ((_r = (call)) == -FI_EAGAIN)              \
			fi_cq_read(R->cq, &drain, 0);            \
		_r;                                              \
	})

static void rma_sizes(void)
{
	static const size_t sizes[] = { 1, 7, 4016, 4017, 65536, 1 << 20, BIG };
	char *src = malloc(BIG), *dst = malloc(BIG);
	int ctx;
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		size_t len = sizes[i], off = (i * 13) % SLACK;
		fill(src, len, (int)i);
		memset(dst, 0, len);
		CHECK(RETRY(fi_write(R->ep, src, len, NULL, peer, ra(K.big, off), K.big_key, &ctx)) == 0, "write %zu", len);
		CHECK(ok_completion(&ctx, FI_RMA | FI_WRITE), "write completion %zu", len);
		CHECK(RETRY(fi_read(R->ep, dst, len, NULL, peer, ra(K.big, off), K.big_key, &ctx)) == 0, "read %zu", len);
		CHECK(ok_completion(&ctx, FI_RMA | FI_READ), "read completion %zu", len);
		CHECK(!memcmp(src, dst, len), "data %zu", len);
		X.remote_writes++;
		X.remote_reads++;
	}
	/* Vector and msg forms: 3 local pieces into 2 remote ranges. */
	fill(src, 30000, 77);
	struct iovec iov[3] = { { src, 1000 }, { src + 1000, 9000 }, { src + 10000, 20000 } };
	CHECK(RETRY(fi_writev(R->ep, iov, NULL, 3, peer, ra(K.big, 300000), K.big_key, &ctx)) == 0, "writev");
	CHECK(ok_completion(&ctx, FI_RMA | FI_WRITE), "writev completion");
	struct fi_rma_iov rio[2] = { { ra(K.big, 200000), 12345, K.big_key }, { ra(K.big, 5000), 17655, K.big_key } };
	struct fi_msg_rma msg = { .msg_iov = iov, .iov_count = 3, .addr = peer, .rma_iov = rio, .rma_iov_count = 2, .context = &ctx };
	CHECK(RETRY(fi_writemsg(R->ep, &msg, 0)) == 0, "writemsg");
	CHECK(ok_completion(&ctx, FI_RMA | FI_WRITE), "writemsg completion");
	X.remote_writes += 2;
	memset(dst, 0, 30000);
	struct iovec div[2] = { { dst, 12345 }, { dst + 12345, 17655 } };
	msg.msg_iov = div;
	msg.iov_count = 2;
	CHECK(RETRY(fi_readmsg(R->ep, &msg, 0)) == 0, "readmsg");
	CHECK(ok_completion(&ctx, FI_RMA | FI_READ), "readmsg completion");
	CHECK(!memcmp(src, dst, 30000), "writemsg/readmsg data");
	memset(dst, 0, 30000);
	CHECK(RETRY(fi_readv(R->ep, div, NULL, 2, peer, ra(K.big, 300000), K.big_key, &ctx)) == 0, "readv");
	CHECK(ok_completion(&ctx, FI_RMA | FI_READ), "readv completion");
	CHECK(!memcmp(src, dst, 30000), "writev/readv data");
	X.remote_reads += 2;
	/* Remote CQ data. */
	for (int i = 0; i < 3; i++) {
		CHECK(RETRY(fi_writedata(R->ep, src, i * 3000, NULL, 0xC0FFEE00ULL + i, peer, ra(K.big, 0), K.big_key, &ctx)) == 0, "writedata");
		CHECK(ok_completion(&ctx, FI_RMA | FI_WRITE), "writedata completion");
	}
	/* Injects: no completion, the write counter moves. */
	uint64_t before = fi_cntr_read(R->c1);
	char small[64];
	fill(small, 64, 5);
	CHECK(RETRY(fi_inject_writedata(R->ep, small, 64, 0xC0FFEE03ULL, peer, ra(K.big, 64), K.big_key)) == 0, "inject_writedata");
	fill(small, 64, 6);
	CHECK(RETRY(fi_inject_write(R->ep, small, 64, peer, ra(K.big, 0), K.big_key)) == 0, "inject_write");
	memset(small, 0, 64); /* the buffer is ours again at once */
	for (long i = 0; i < 100000000L && fi_cntr_read(R->c1) < before + 2; i++)
		;
	CHECK(fi_cntr_read(R->c1) == before + 2, "write counter after injects");
	X.cq_data = 4;
	X.remote_writes += 5;
	CHECK(RETRY(fi_read(R->ep, dst, 64, NULL, peer, ra(K.big, 0), K.big_key, &ctx)) == 0, "read inject");
	CHECK(ok_completion(&ctx, FI_RMA | FI_READ), "read completion");
	fill(small, 64, 6);
	CHECK(!memcmp(small, dst, 64), "inject data");
	X.remote_reads++;
	CHECK(fi_inject_write(R->ep, src, 5000, peer, ra(K.big, 0), K.big_key) == -FI_EINVAL, "inject too large");
	free(src);
	free(dst);
}

static void rma_errors(void)
{
	char buf[64] = { 0 };
	int ctx;
	uint64_t errs = fi_cntr_readerr(R->c1);
	CHECK(RETRY(fi_write(R->ep, buf, 8, NULL, peer, ra(K.big, 0), K.big_key ^ 0x5555, &ctx)) == 0, "write bad key");
	int e = err_completion(&ctx);
	CHECK(e == FI_EKEYREJECTED, "bad key: err %d", e);
	CHECK(RETRY(fi_write(R->ep, buf, 8, NULL, peer, ra(K.big, BIG + SLACK - 4), K.big_key, &ctx)) == 0, "write past end");
	e = err_completion(&ctx);
	CHECK(e == FI_EINVAL, "out of range: err %d", e);
	CHECK(RETRY(fi_write(R->ep, buf, 8, NULL, peer, ra(K.ro, 0), K.ro_key, &ctx)) == 0, "write read-only");
	e = err_completion(&ctx);
	CHECK(e == FI_EACCES, "no remote write access: err %d", e);
	CHECK(RETRY(fi_read(R->ep, buf, 8, NULL, peer, ra(K.ro, 4090), K.ro_key, &ctx)) == 0, "read past end");
	e = err_completion(&ctx);
	CHECK(e == FI_EINVAL, "read out of range: err %d", e);
	CHECK(RETRY(fi_read(R->ep, buf, 8, NULL, peer, ra(K.ro, 8), K.ro_key, &ctx)) == 0, "read read-only");
	CHECK(ok_completion(&ctx, FI_RMA | FI_READ) && buf[0] == 0x5a && buf[7] == 0x5a, "read of read-only region");
	X.remote_reads++;
	CHECK(fi_cntr_readerr(R->c1) == errs + 3, "write error counter");
	/* Bad input, refused at the call. */
	CHECK(fi_write(R->ep, NULL, 8, NULL, peer, 0, K.big_key, &ctx) == -FI_EINVAL, "NULL buffer");
	struct iovec iov[9];
	for (int i = 0; i < 9; i++)
		iov[i] = (struct iovec){ buf, 1 };
	CHECK(fi_writev(R->ep, iov, NULL, 9, peer, 0, K.big_key, &ctx) == -FI_EINVAL, "9 iovs");
	CHECK(fi_writev(R->ep, iov, NULL, 5, peer, 0, K.big_key, &ctx) == -FI_EINVAL, "over iov_limit");
	struct fi_rma_iov rio[5];
	for (int i = 0; i < 5; i++)
		rio[i] = (struct fi_rma_iov){ ra(K.big, i), 1, K.big_key };
	struct fi_msg_rma msg = { .msg_iov = iov, .iov_count = 1, .addr = peer, .rma_iov = rio, .rma_iov_count = 5, .context = &ctx };
	CHECK(fi_writemsg(R->ep, &msg, 0) == -FI_EINVAL, "over rma_iov_limit");
	msg.rma_iov_count = 2;
	CHECK(fi_writemsg(R->ep, &msg, 0) == -FI_EINVAL, "local and remote lengths differ");
	CHECK(fi_writemsg(R->ep, NULL, 0) == -FI_EINVAL, "NULL msg");
	CHECK(fi_write(R->ep, buf, 8, NULL, 999, 0, K.big_key, &ctx) == -FI_EINVAL, "unknown fi_addr");
}

/* ---------------------------------------------------------------- atomics */

#define N 4

/* Reference: apply op to t (previous values stay in old). */
#define REF_COMMON(a, b, c, T)                                                     \
	case FI_MIN: t[i] = b < a ? b : a; break;                                  \
	case FI_MAX: t[i] = b > a ? b : a; break;                                  \
	case FI_SUM: t[i] = (T)(a + b); break;                                     \
	case FI_PROD: t[i] = (T)(a * b); break;                                    \
	case FI_LOR: t[i] = (T)(a || b); break;                                    \
	case FI_LAND: t[i] = (T)(a && b); break;                                   \
	case FI_LXOR: t[i] = (T)((a && !b) || (!a && b)); break;                   \
	case FI_ATOMIC_READ: break;                                                \
	case FI_ATOMIC_WRITE: t[i] = b; break;                                     \
	case FI_CSWAP: if (c == a) t[i] = b; break;                                \
	case FI_CSWAP_NE: if (c != a) t[i] = b; break;                             \
	case FI_CSWAP_LE: if (c <= a) t[i] = b; break;                             \
	case FI_CSWAP_LT: if (c < a) t[i] = b; break;                              \
	case FI_CSWAP_GE: if (c >= a) t[i] = b; break;                             \
	case FI_CSWAP_GT: if (c > a) t[i] = b; break;

#define REF_INT(T)                                                                 \
	static void ref_##T(int op, void *tv, const void *bv, const void *cv)      \
	{                                                                          \
		T *t = tv;                                                         \
		const T *bb = bv, *cc = cv;                                        \
		for (int i = 0; i < N; i++) {                                      \
			T a = t[i], b = bb[i], c = cc[i];                          \
			switch (op) {                                              \
				REF_COMMON(a, b, c, T)                             \
			case FI_BOR: t[i] = a | b; break;                          \
			case FI_BAND: t[i] = a & b; break;                         \
			case FI_BXOR: t[i] = a ^ b; break;                         \
			case FI_MSWAP: t[i] = (T)((b & c) | (a & ~c)); break;      \
			}                                                          \
		}                                                                  \
	}
#define REF_FLT(T)                                                                 \
	static void ref_##T(int op, void *tv, const void *bv, const void *cv)      \
	{                                                                          \
		T *t = tv;                                                         \
		const T *bb = bv, *cc = cv;                                        \
		for (int i = 0; i < N; i++) {                                      \
			T a = t[i], b = bb[i], c = cc[i];                          \
			switch (op) { REF_COMMON(a, b, c, T) }                     \
		}                                                                  \
	}
#define REF_CPX(T)                                                                 \
	static void ref_c##T(int op, void *tv, const void *bv, const void *cv)      \
	{                                                                          \
		T complex *t = tv;                                                 \
		const T complex *bb = bv, *cc = cv;                                \
		for (int i = 0; i < N; i++) {                                      \
			T complex a = t[i], b = bb[i], c = cc[i];                  \
			switch (op) {                                              \
			case FI_SUM: t[i] = a + b; break;                          \
			case FI_PROD: t[i] = CMPLX(creal(a) * creal(b) - cimag(a) * cimag(b), creal(a) * cimag(b) + cimag(a) * creal(b)); break; \
			case FI_ATOMIC_WRITE: t[i] = b; break;                     \
			case FI_CSWAP: if (c == a) t[i] = b; break;                \
			case FI_CSWAP_NE: if (c != a) t[i] = b; break;             \
			}                                                          \
		}                                                                  \
	}

REF_INT(int8_t) REF_INT(uint8_t) REF_INT(int16_t) REF_INT(uint16_t) REF_INT(int32_t) REF_INT(uint32_t)
REF_INT(int64_t) REF_INT(uint64_t) REF_FLT(float) REF_FLT(double) REF_CPX(float) REF_CPX(double)

static void (*const refs[])(int, void *, const void *, const void *) = {
	ref_int8_t, ref_uint8_t, ref_int16_t, ref_uint16_t, ref_int32_t, ref_uint32_t,
	ref_int64_t, ref_uint64_t, ref_float, ref_double, ref_cfloat, ref_cdouble,
};
static const size_t dsize[] = { 1, 1, 2, 2, 4, 4, 8, 8, 4, 8, 8, 16 };

/* Small values (no signed overflow in the reference): target, operand,
 * compare chosen so that compare ops both swap and keep. */
static const int tv[N] = { 3, -4, 5, 0 }, bv[N] = { 2, 5, -3, 7 }, cv[N] = { 3, 1, 9, -2 };

static void put_vals(int dt, void *dst, const int *v)
{
	for (int i = 0; i < N; i++) {
		switch (dt) {
		case FI_INT8: ((int8_t *)dst)[i] = (int8_t)v[i]; break;
		case FI_UINT8: ((uint8_t *)dst)[i] = (uint8_t)v[i]; break;
		case FI_INT16: ((int16_t *)dst)[i] = (int16_t)v[i]; break;
		case FI_UINT16: ((uint16_t *)dst)[i] = (uint16_t)v[i]; break;
		case FI_INT32: ((int32_t *)dst)[i] = v[i]; break;
		case FI_UINT32: ((uint32_t *)dst)[i] = (uint32_t)v[i]; break;
		case FI_INT64: ((int64_t *)dst)[i] = v[i]; break;
		case FI_UINT64: ((uint64_t *)dst)[i] = (uint64_t)(int64_t)v[i]; break;
		case FI_FLOAT: ((float *)dst)[i] = (float)v[i]; break;
		case FI_DOUBLE: ((double *)dst)[i] = v[i]; break;
		case FI_FLOAT_COMPLEX: ((float complex *)dst)[i] = CMPLXF((float)v[i], (float)(v[i] - 1)); break;
		case FI_DOUBLE_COMPLEX: ((double complex *)dst)[i] = CMPLX(v[i], v[i] + 2); break;
		}
	}
}

/* Sets the remote atomic area to the initial target values. */
static void reset_remote(int dt)
{
	char init[N * 16];
	int ctx;
	put_vals(dt, init, tv);
	CHECK(RETRY(fi_write(R->ep, init, N * dsize[dt], NULL, peer, ra(K.atom, 0), K.atom_key, &ctx)) == 0, "reset");
	CHECK(ok_completion(&ctx, FI_RMA | FI_WRITE), "reset completion");
	X.remote_writes++;
}

static int check_remote(int dt, const void *want)
{
	char got[N * 16];
	int ctx;
	CHECK(RETRY(fi_read(R->ep, got, N * dsize[dt], NULL, peer, ra(K.atom, 0), K.atom_key, &ctx)) == 0, "read back");
	CHECK(ok_completion(&ctx, FI_RMA | FI_READ), "read back completion");
	X.remote_reads++;
	return !memcmp(got, want, N * dsize[dt]);
}

static void atomics(void)
{
	int tried = 0, form;
	for (form = 0; form < 3; form++) {
		for (int op = 0; op < FI_ATOMIC_OP_LAST; op++) {
			for (int dt = 0; dt < FI_DATATYPE_LAST; dt++) {
				size_t count = 0;
				int v = form == 0 ? fi_atomicvalid(R->ep, dt, op, &count)
				      : form == 1 ? fi_fetch_atomicvalid(R->ep, dt, op, &count)
						  : fi_compare_atomicvalid(R->ep, dt, op, &count);
				struct fi_atomic_attr attr = { 0 };
				int q = fi_query_atomic(R->domain, dt, op, &attr,
							form == 1 ? FI_FETCH_ATOMIC : form == 2 ? FI_COMPARE_ATOMIC : 0);
				CHECK(q == v && (v || (attr.count == count && attr.size == (dt < 12 ? dsize[dt] : 0))),
				      "query_atomic agrees with valid: form %d op %d dt %d", form, op, dt);
				if (v) {
					CHECK(v == -FI_EOPNOTSUPP, "valid form %d op %d dt %d: %d", form, op, dt, v);
					continue;
				}
				CHECK(count >= N && dt < 12, "count %zu", count);
				char t[N * 16], b[N * 16], c[N * 16], res[N * 16], old[N * 16];
				put_vals(dt, t, tv);
				put_vals(dt, b, bv);
				put_vals(dt, c, cv);
				memcpy(old, t, sizeof(old));
				refs[dt](op, t, b, c);
				reset_remote(dt);
				memset(res, 0, sizeof(res));
				int ctx;
				ssize_t ret;
				uint64_t flags = FI_ATOMIC | (form == 0 ? FI_WRITE : FI_READ);
				if (form == 0)
					ret = RETRY(fi_atomic(R->ep, b, N, NULL, peer, ra(K.atom, 0), K.atom_key, dt, op, &ctx));
				else if (form == 1)
					ret = RETRY(fi_fetch_atomic(R->ep, op == FI_ATOMIC_READ ? NULL : b, N, NULL, res, NULL, peer,
								    ra(K.atom, 0), K.atom_key, dt, op, &ctx));
				else
					ret = RETRY(fi_compare_atomic(R->ep, b, N, NULL, c, NULL, res, NULL, peer, ra(K.atom, 0),
								      K.atom_key, dt, op, &ctx));
				CHECK(ret == 0, "atomic form %d op %d dt %d: %zd", form, op, dt, ret);
				CHECK(ok_completion(&ctx, flags), "atomic completion form %d op %d dt %d", form, op, dt);
				if (op == FI_ATOMIC_READ)
					X.remote_reads++;
				else
					X.remote_writes++;
				CHECK(form == 0 || !memcmp(res, old, N * dsize[dt]), "fetched values form %d op %d dt %d", form, op, dt);
				CHECK(check_remote(dt, t), "result form %d op %d dt %d", form, op, dt);
				tried++;
			}
		}
	}
	CHECK(tried == (88 + 16 + 6) + (88 + 16 + 6 + 12) + (56 + 12 + 4), "combinations tried: %d", tried);
	printf("[initiator] %d atomic op x datatype x form combinations checked\n", tried);

	/* Vector and msg forms: fetch-add over two local iocs into two remote iocs. */
	uint64_t a1[3] = { 1, 2, 3 }, a2[2] = { 10, 20 }, r1[2], r2[3];
	uint64_t init[8] = { 100, 200, 300, 400, 500, 600, 700, 800 };
	int ctx;
	CHECK(RETRY(fi_write(R->ep, init, sizeof(init), NULL, peer, ra(K.atom, 0), K.atom_key, &ctx)) == 0, "init");
	CHECK(ok_completion(&ctx, FI_RMA | FI_WRITE), "init completion");
	struct fi_ioc ioc[2] = { { a1, 3 }, { a2, 2 } }, rioc[2] = { { r1, 2 }, { r2, 3 } };
	struct fi_rma_ioc rma[2] = { { ra(K.atom, 8), 2, K.atom_key }, { ra(K.atom, 48), 3, K.atom_key } };
	struct fi_msg_atomic m = { .msg_iov = ioc, .iov_count = 2, .addr = peer, .rma_iov = rma, .rma_iov_count = 2,
				   .datatype = FI_UINT64, .op = FI_SUM, .context = &ctx };
	CHECK(RETRY(fi_fetch_atomicmsg(R->ep, &m, rioc, NULL, 2, 0)) == 0, "fetch_atomicmsg");
	CHECK(ok_completion(&ctx, FI_ATOMIC | FI_READ), "fetch_atomicmsg completion");
	CHECK(r1[0] == 200 && r1[1] == 300 && r2[0] == 700 && r2[1] == 800 && r2[2] == 0, "fetched %llu %llu %llu",
	      (unsigned long long)r1[0], (unsigned long long)r2[0], (unsigned long long)r2[2]);
	uint64_t back[9];
	CHECK(RETRY(fi_read(R->ep, back, sizeof(back), NULL, peer, ra(K.atom, 0), K.atom_key, &ctx)) == 0, "read");
	CHECK(ok_completion(&ctx, FI_RMA | FI_READ), "read completion");
	CHECK(back[1] == 201 && back[2] == 302 && back[6] == 703 && back[7] == 810 && back[8] == 20 && back[0] == 100,
	      "atomicmsg results");
	X.remote_writes += 2;
	X.remote_reads++;
	/* atomicv and compare_atomicv. */
	uint32_t u[2] = { 1, 1 }, u2[2] = { 1, 1 }, cmp[4] = { 100, 0, 0, 0 }, got[4];
	struct fi_ioc uv[2] = { { u, 2 }, { u2, 2 } };
	CHECK(RETRY(fi_atomicv(R->ep, uv, NULL, 2, peer, ra(K.atom, 0), K.atom_key, FI_UINT32, FI_BOR, &ctx)) == 0, "atomicv");
	CHECK(ok_completion(&ctx, FI_ATOMIC | FI_WRITE), "atomicv completion");
	struct fi_ioc cv1[1] = { { cmp, 4 } }, rv[1] = { { got, 4 } };
	uint32_t nv[4] = { 7, 7, 7, 7 };
	struct fi_ioc nv1[1] = { { nv, 4 } };
	CHECK(RETRY(fi_compare_atomicv(R->ep, nv1, NULL, 1, cv1, NULL, 1, rv, NULL, 1, peer, ra(K.atom, 0), K.atom_key,
				       FI_UINT32, FI_CSWAP, &ctx)) == 0, "compare_atomicv");
	CHECK(ok_completion(&ctx, FI_ATOMIC | FI_READ), "compare_atomicv completion");
	/* Before: u32 view of {100, 201} is {100, 0, 201, 0}; BOR 1 gives
	 * {101, 1, 201, 1}; no element equals its compare value, so no swap. */
	CHECK(got[0] == 101 && got[1] == 1 && got[2] == 201, "compare fetched %u %u %u", got[0], got[1], got[2]);
	X.remote_writes += 2;
	/* Bad input. */
	uint64_t one = 1, res1;
	CHECK(fi_atomic(R->ep, &one, 0, NULL, peer, ra(K.atom, 0), K.atom_key, FI_UINT64, FI_SUM, &ctx) == -FI_EINVAL, "count 0");
	CHECK(fi_atomic(R->ep, NULL, 1, NULL, peer, ra(K.atom, 0), K.atom_key, FI_UINT64, FI_SUM, &ctx) == -FI_EINVAL, "NULL operand");
	CHECK(fi_atomic(R->ep, &one, 1, NULL, peer, ra(K.atom, 0), K.atom_key, 99, FI_SUM, &ctx) == -FI_EOPNOTSUPP, "bad datatype");
	CHECK(fi_atomic(R->ep, &one, 1, NULL, peer, ra(K.atom, 0), K.atom_key, FI_UINT64, 99, &ctx) == -FI_EOPNOTSUPP, "bad op");
	CHECK(fi_atomic(R->ep, &one, 1, NULL, peer, ra(K.atom, 0), K.atom_key, FI_DOUBLE, FI_BOR, &ctx) == -FI_EOPNOTSUPP, "BOR on double");
	CHECK(fi_atomic(R->ep, &one, 1, NULL, peer, ra(K.atom, 0), K.atom_key, FI_UINT64, FI_CSWAP, &ctx) == -FI_EOPNOTSUPP, "CSWAP via fi_atomic");
	CHECK(fi_fetch_atomic(R->ep, &one, 1, NULL, NULL, NULL, peer, ra(K.atom, 0), K.atom_key, FI_UINT64, FI_SUM, &ctx) == -FI_EINVAL, "NULL result");
	uint64_t *many = calloc(2048, 8);
	CHECK(fi_atomic(R->ep, many, 2048, NULL, peer, ra(K.atom, 0), K.atom_key, FI_UINT64, FI_SUM, &ctx) == -FI_EMSGSIZE, "count over limit");
	free(many);
	size_t cnt;
	CHECK(fi_atomicvalid(R->ep, FI_UINT64, FI_SUM, NULL) == -FI_EINVAL, "valid NULL count");
	CHECK(fi_atomicvalid(R->ep, FI_LONG_DOUBLE, FI_SUM, &cnt) == -FI_EOPNOTSUPP, "long double");
	struct fi_atomic_attr attr;
	CHECK(fi_query_atomic(R->domain, FI_INT32, FI_SUM, &attr, FI_FETCH_ATOMIC | FI_COMPARE_ATOMIC) == -FI_EINVAL, "query both flags");
	/* Errors at the target: bad key and no access. */
	CHECK(RETRY(fi_atomic(R->ep, &one, 1, NULL, peer, ra(K.atom, 0), K.atom_key ^ 0x77, FI_UINT64, FI_SUM, &ctx)) == 0, "atomic bad key");
	int e = err_completion(&ctx);
	CHECK(e == FI_EKEYREJECTED, "atomic bad key: err %d", e);
	CHECK(RETRY(fi_fetch_atomic(R->ep, &one, 1, NULL, &res1, NULL, peer, ra(K.ro, 0), K.ro_key, FI_UINT64, FI_SUM, &ctx)) == 0, "atomic ro");
	e = err_completion(&ctx);
	CHECK(e == FI_EACCES, "atomic on read-only region: err %d", e);
	CHECK(RETRY(fi_fetch_atomic(R->ep, NULL, 1, NULL, &res1, NULL, peer, ra(K.ro, 0), K.ro_key, FI_UINT64, FI_ATOMIC_READ, &ctx)) == 0, "atomic read ro");
	CHECK(ok_completion(&ctx, FI_ATOMIC | FI_READ) && res1 == 0x5a5a5a5a5a5a5a5aULL, "atomic read of read-only region");
	X.remote_reads++;
	CHECK(RETRY(fi_atomic(R->ep, &one, 1, NULL, peer, ra(K.atom, ATOM - 4), K.atom_key, FI_UINT64, FI_SUM, &ctx)) == 0, "atomic past end");
	e = err_completion(&ctx);
	CHECK(e == FI_EINVAL, "atomic out of range: err %d", e);
}

/* A target that dies with a request outstanding: the operation fails with
 * FI_ECONNRESET instead of waiting forever. */
static void dead_target(void)
{
	int go[2], name[2];
	if (pipe(go) || pipe(name))
		exit(2);
	pid_t pid = fork();
	if (pid == 0) {
		struct res t;
		memset(&t, 0, sizeof(t));
		open_res(&t, 1);
		if (write(name[1], t.name, t.namelen) != (ssize_t)t.namelen)
			_exit(2);
		char c;
		if (read(go[0], &c, 1) != 1)
			_exit(2);
		close_res(&t);
		_exit(0);
	}
	char tname[128] = { 0 };
	if (read(name[0], tname, R->namelen) != (ssize_t)R->namelen)
		exit(2);
	fi_addr_t dead;
	CHECK(fi_av_insert(R->av, tname, 1, &dead, 0, NULL) == 1, "insert short-lived target");
	char buf[16] = { 0 };
	int ctx;
	CHECK(RETRY(fi_write(R->ep, buf, sizeof(buf), NULL, dead, 0, 1, &ctx)) == 0, "write to short-lived target");
	if (write(go[1], "g", 1) != 1)
		exit(2);
	int st;
	waitpid(pid, &st, 0);
	int e = err_completion(&ctx);
	CHECK(e == FI_ECONNRESET, "write to a dead target: err %d", e);
	close(go[0]);
	close(go[1]);
	close(name[0]);
	close(name[1]);
}

static void initiator(struct res *r, int rfd, int wfd)
{
	R = r;
	who = "initiator";
	if (read(rfd, &K, sizeof(K)) != sizeof(K))
		exit(2);
	rma_sizes();
	rma_errors();
	atomics();
	dead_target();
	if (write(wfd, &X, sizeof(X)) != sizeof(X))
		exit(2);
	char ack;
	CHECK(read(rfd, &ack, 1) == 1, "ack");
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
	int wfd = pid == 0 ? to_parent[1] : to_child[1];
	int rfd = pid == 0 ? to_child[0] : to_parent[0];
	open_res(&r, pid != 0);
	if (write(wfd, r.name, r.namelen) != (ssize_t)r.namelen)
		return 2;
	if (read(rfd, peer_name, r.namelen) != (ssize_t)r.namelen)
		return 2;
	CHECK(fi_av_insert(r.av, peer_name, 1, &peer, 0, NULL) == 1, "av_insert");
	if (pid == 0)
		initiator(&r, rfd, wfd);
	else
		target(&r, rfd, wfd);
	close_res(&r);
	if (pid != 0) {
		int st;
		waitpid(pid, &st, 0);
		if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
			printf("FAIL initiator exited with status %d\n", st);
			failed++;
		}
		printf("%d passed, %d failed\n", passed, failed);
		return failed ? 1 : 0;
	}
	printf("initiator: %d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}
