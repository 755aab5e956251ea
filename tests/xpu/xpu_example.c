/* The host-side flow of fi_xpu(3)'s EXAMPLE, call for call and in its
 * order (steps 1 to 14), on two endpoints that send messages to each other
 * from "XPU kernels": host threads that use only <rdma/fi_xpu_device.h>.
 *
 * Each pair of endpoints is set up twice over (sides a and b, one fabric,
 * domain and XPU context each) and then both kernels run at once: each
 * posts fi_xpu_send after fi_xpu_cntr_read, waits with fi_xpu_cntr_wait
 * as the EXAMPLE's kernel does, then reads its send and receive
 * completions with fi_xpu_cq_read; the bytes received on both sides are
 * checked.  It runs for every order of the three exports of step 10 and
 * for each way of asking for an XPU object: FI_XPU in fi_cq_attr.flags /
 * fi_cntr_attr.flags with xpu_ctx, xpu_ctx alone (as step 6 writes it),
 * and fi_endpoint2 with FI_XPU or with flags 0 and xpu_ctx alone.  Once
 * more at API 2.7, the version step 1 asks for.
 *
 * Additions to the EXAMPLE's calls, each needed to run it for real:
 * fi_fabric before step 2; fi_setname after step 7, so that step 5 can
 * insert the peer's name before the peer's endpoint exists; receive
 * buffers posted on the host after step 9 (the device header has no
 * receive call); fi_close of the fabric and fi_freeinfo after step 14.
 *
 * Then bad input: the codes fi_xpu(3) documents for the flags and contexts
 * of the open calls and for the exports.  Every alloc is freed, no memfd
 * descriptor or mapping is left.  Prints "N passed, N failed". */
#define _GNU_SOURCE
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_xpu.h>
#include <rdma/fi_xpu_device.h>
#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

static int passed, failed;

#define CHECK(cond, ...)                                               \
	do {                                                           \
		if (cond) {                                            \
			passed++;                                      \
		} else {                                               \
			failed++;                                      \
			printf("FAIL %s:%d: ", __FILE__, __LINE__);    \
			printf(__VA_ARGS__);                           \
			printf("\n");                                  \
		}                                                      \
	} while (0)

/* Messages each side sends, eager to shared-copy rendezvous sizes. */
static const size_t sizes[] = { 64, 0, 4096, 70000, 300000 };
#define MSGS (sizeof(sizes) / sizeof(sizes[0]))
#define MAXLEN 300000

static unsigned char pattern(int side, size_t msg, size_t k)
{
	return (unsigned char)(side * 101 + msg * 13 + k * 7 + 1);
}

/* ------------------------------------------------------------ callbacks */

#define MAXREC 64
/* Live allocations (base NULL: a free slot); totals of alloc and free. */
static struct {
	void *base;
	size_t len;
	int fd;
} allocs[MAXREC];
static int n_alloc, n_free, fail_alloc_at;
static struct {
	void *p;
	size_t len;
} imported[MAXREC];
static int n_imported;
static pthread_mutex_t rec_lock = PTHREAD_MUTEX_INITIALIZER;

/* Device memory stands in as a memfd mapping, offered as its DMA-BUF. */
static int my_alloc(uint64_t device, uint64_t size, uint64_t alignment,
		    uint64_t flags, void **addr, int *fd, uint64_t *offset)
{
	long page = sysconf(_SC_PAGESIZE);
	size_t len = (size + (size_t)page - 1) / (size_t)page * (size_t)page;
	void *base;
	int mfd, rc = 0, slot;

	if (device != 0 || alignment == 0 || (alignment & (alignment - 1)))
		return -FI_EINVAL;
	pthread_mutex_lock(&rec_lock);
	if (fail_alloc_at && --fail_alloc_at == 0)
		rc = -FI_ENOMEM;
	for (slot = 0; slot < MAXREC && allocs[slot].base; slot++)
		;
	pthread_mutex_unlock(&rec_lock);
	if (rc || slot == MAXREC)
		return -FI_ENOMEM;
	mfd = memfd_create("xpu-example", MFD_CLOEXEC);
	if (mfd < 0)
		return -FI_ENOMEM;
	if (ftruncate(mfd, (off_t)len)) {
		close(mfd);
		return -FI_ENOMEM;
	}
	base = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, mfd, 0);
	if (base == MAP_FAILED) {
		close(mfd);
		return -FI_ENOMEM;
	}
	pthread_mutex_lock(&rec_lock);
	allocs[slot].base = base;
	allocs[slot].len = len;
	allocs[slot].fd = mfd;
	n_alloc++;
	pthread_mutex_unlock(&rec_lock);
	*addr = base;
	*fd = (flags & FI_XPU_ALLOC_DMABUF) ? mfd : -1;
	*offset = 0;
	return 0;
}

static void my_free(uint64_t device, void *addr)
{
	int i;

	(void)device;
	pthread_mutex_lock(&rec_lock);
	for (i = 0; i < MAXREC; i++) {
		if (allocs[i].base && allocs[i].base == addr) {
			munmap(allocs[i].base, allocs[i].len);
			close(allocs[i].fd);
			allocs[i].base = NULL;
			n_free++;
			break;
		}
	}
	if (i == MAXREC)
		n_free += 1000;	/* not ours: fails the count check */
	pthread_mutex_unlock(&rec_lock);
}

/* The 2.8 shape: a DMA-BUF is mapped, the in-page offset kept. */
static int my_import(uint64_t device, void *host_addr, uint64_t size,
		     uint64_t flags, int fd, void **dev_addr)
{
	long page = sysconf(_SC_PAGESIZE);
	size_t off = (uintptr_t)host_addr % (size_t)page;
	size_t len = (off + size + (size_t)page - 1) / (size_t)page *
		     (size_t)page;
	void *p;

	(void)device;
	if (!(flags & FI_XPU_IMPORT_DMABUF)) {
		*dev_addr = host_addr;
		return 0;
	}
	if (fd < 0 || n_imported == MAXREC)
		return -FI_EINVAL;
	p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED)
		return -FI_EINVAL;
	imported[n_imported].p = p;
	imported[n_imported].len = len;
	n_imported++;
	*dev_addr = (char *)p + off;
	return 0;
}

static void unmap_imported(void)
{
	int i;

	for (i = 0; i < n_imported; i++)
		munmap(imported[i].p, imported[i].len);
	n_imported = 0;
}

static int count_memfd(int maps)
{
	char line[512], path[300], target[256];
	int n = 0;

	if (maps) {
		FILE *f = fopen("/proc/self/maps", "r");

		while (f && fgets(line, sizeof(line), f))
			n += strstr(line, "/memfd:") != NULL;
		if (f)
			fclose(f);
	} else {
		DIR *d = opendir("/proc/self/fd");
		struct dirent *e;
		ssize_t l;

		while (d && (e = readdir(d))) {
			snprintf(path, sizeof(path), "/proc/self/fd/%s",
				 e->d_name);
			l = readlink(path, target, sizeof(target) - 1);
			if (l > 0) {
				target[l] = 0;
				n += !strncmp(target, "/memfd:", 7);
			}
		}
		if (d)
			closedir(d);
	}
	return n;
}

/* ------------------------------------------------------------ one side */

#define RAWMAX 64

/* What step 12 copies to the device, and the device's buffers: a mapping
 * of its own, standing for device memory. */
struct dev {
	struct fid_xpu_ep ep;
	struct fid_xpu_cq cq;
	struct fid_xpu_cntr cntr;
	unsigned char addr[RAWMAX];
	unsigned char desc[RAWMAX];
	/* Results of the kernel. */
	int rc;
	uint64_t cntr_end, cntr_err;
	size_t n_send, n_recv;
	struct fi_cq_tagged_entry send[MSGS], recv[MSGS];
	unsigned char sbuf[MSGS][MAXLEN];
	unsigned char rbuf[MSGS][MAXLEN];
};

enum spelling {
	EXAMPLE,	/* CQ, counter: xpu_ctx alone; fi_endpoint2(FI_XPU) */
	FLAGS,		/* CQ, counter: FI_XPU and xpu_ctx; fi_endpoint2(FI_XPU) */
	CTX_ONLY,	/* xpu_ctx alone everywhere; fi_endpoint2(flags 0) */
};

static const char *spelled[] = { "example", "flags", "ctx-only" };

enum obj { EP, CQ, CNTR };
static const int orders[6][3] = {
	{ EP, CQ, CNTR }, { EP, CNTR, CQ }, { CQ, EP, CNTR },
	{ CQ, CNTR, EP }, { CNTR, EP, CQ }, { CNTR, CQ, EP },
};

struct side {
	int id;
	char me[64], peer[64];
	uint32_t version;
	struct fi_xpu_ops cbs;
	struct fi_info *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_xpu_ctx *xpu_ctx;
	struct fid_av *av;
	struct fid_cq *cq;
	struct fid_cntr *cntr;
	struct fid_ep *ep;
	struct fid_mr *mr;
	fi_addr_t fi_addr;
	struct dev *dev;
};

static const char *what(int o)
{
	return o == EP ? "ep" : o == CQ ? "cq" : "cntr";
}

/* One side, up to the kernel launch: the first twelve steps of the
 * EXAMPLE, each call checked.  Returns 0 when all of them worked. */
static int setup(struct side *s, enum spelling sp, const int *order)
{
	struct fi_info *hints, *fi = NULL;
	struct fi_xpu_attr attr;
	struct fi_xpu_ctx_attr q;
	struct fi_av_attr av_attr;
	struct fi_cq_attr cq_attr;
	struct fi_cntr_attr cntr_attr;
	struct fi_mr_attr mr_attr;
	struct fid_xpu_ep h_ep;
	struct fid_xpu_cq h_cq;
	struct fid_xpu_cntr h_cntr;
	struct dev *d = s->dev;
	struct iovec iov;
	void *peer_raw, *key_raw;
	size_t addr_size, key_size, len, i;
	int ret, k;

	/* Step 1: an shm RDM answer with FI_XPU, whose domain can hold
	 * contexts (max_xpu_ctx_cnt). */
	hints = fi_allocinfo();
	hints->caps = FI_MSG | FI_RMA | FI_XPU;
	hints->ep_attr->type = FI_EP_RDM;
	hints->fabric_attr->prov_name = strdup("shm");
	ret = fi_getinfo(s->version, NULL, NULL, 0, hints, &fi);
	fi_freeinfo(hints);
	CHECK(ret == 0, "[%s] fi_getinfo: %d", s->me, ret);
	if (ret)
		return ret;
	s->info = fi;
	CHECK(fi->domain_attr->max_xpu_ctx_cnt > 0, "max_xpu_ctx_cnt");
	ret = fi_fabric(fi->fabric_attr, &s->fabric, NULL);
	CHECK(ret == 0, "fi_fabric: %d", ret);
	if (ret)
		return ret;

	/* Step 2: the domain. */
	ret = fi_domain(s->fabric, fi, &s->domain, NULL);
	CHECK(ret == 0, "fi_domain: %d", ret);
	if (ret)
		return ret;

	/* Step 3: a context for device 0 of the host XPU, lending our
	 * memory callbacks. */
	memset(&attr, 0, sizeof(attr));
	attr.iface = FI_HMEM_SYSTEM;
	attr.device = 0;
	attr.ops = &s->cbs;
	ret = fi_xpu_ctx(s->domain, &attr, &s->xpu_ctx, NULL);
	CHECK(ret == 0, "fi_xpu_ctx: %d", ret);
	if (ret)
		return ret;

	/* Step 4: what the context exports and how large its raw addresses
	 * and descriptors are. */
	ret = fi_xpu_ctx_query(s->xpu_ctx, &q);
	CHECK(ret == 0, "fi_xpu_ctx_query: %d", ret);
	CHECK((q.caps & (FI_XPU_CAP_EP | FI_XPU_CAP_CQ | FI_XPU_CAP_CNTR)) ==
	      (FI_XPU_CAP_EP | FI_XPU_CAP_CQ | FI_XPU_CAP_CNTR), "caps %#llx",
	      (unsigned long long)q.caps);
	addr_size = q.av_addr_size;
	key_size = q.mr_desc_size;
	if (ret || !addr_size || addr_size > RAWMAX || !key_size ||
	    key_size > RAWMAX) {
		CHECK(0, "sizes %zu %zu", addr_size, key_size);
		return -FI_EOTHER;
	}

	/* Step 5: an AV of the domain (no context), holding the peer by the
	 * name its endpoint will take. */
	memset(&av_attr, 0, sizeof(av_attr));
	av_attr.type = FI_AV_TABLE;
	ret = fi_av_open(s->domain, &av_attr, &s->av, NULL);
	CHECK(ret == 0, "fi_av_open: %d", ret);
	if (ret)
		return ret;
	s->fi_addr = FI_ADDR_NOTAVAIL;
	ret = fi_av_insert(s->av, s->peer, 1, &s->fi_addr, 0, NULL);
	CHECK(ret == 1, "fi_av_insert %s: %d", s->peer, ret);

	/* Step 6: the CQ (FI_CQ_FORMAT_DATA) and the completion counter,
	 * both of the context, spelled as `sp` says. */
	memset(&cq_attr, 0, sizeof(cq_attr));
	cq_attr.format = FI_CQ_FORMAT_DATA;
	cq_attr.xpu_ctx = s->xpu_ctx;
	cq_attr.flags = sp == FLAGS ? FI_XPU : 0;
	ret = fi_cq_open(s->domain, &cq_attr, &s->cq, NULL);
	CHECK(ret == 0, "fi_cq_open (%s): %d", spelled[sp], ret);
	if (ret)
		return ret;
	memset(&cntr_attr, 0, sizeof(cntr_attr));
	cntr_attr.events = FI_CNTR_EVENTS_COMP;
	cntr_attr.xpu_ctx = s->xpu_ctx;
	cntr_attr.flags = sp == FLAGS ? FI_XPU : 0;
	ret = fi_cntr_open(s->domain, &cntr_attr, &s->cntr, NULL);
	CHECK(ret == 0, "fi_cntr_open (%s): %d", spelled[sp], ret);
	if (ret)
		return ret;

	/* Step 7: the endpoint, its context in the fi_info's ep_attr; then
	 * the name the peer's AV already holds. */
	fi->ep_attr->xpu_ctx = s->xpu_ctx;
	ret = fi_endpoint2(s->domain, fi, &s->ep, sp == CTX_ONLY ? 0 : FI_XPU,
			   NULL);
	fi->ep_attr->xpu_ctx = NULL;	/* fi_freeinfo must not see it */
	CHECK(ret == 0, "fi_endpoint2 (%s): %d", spelled[sp], ret);
	if (ret)
		return ret;
	ret = fi_setname(&s->ep->fid, s->me, strlen(s->me) + 1);
	CHECK(ret == 0, "fi_setname %s: %d", s->me, ret);

	/* Step 8: the device buffers as one region, FI_SEND | FI_RECV. */
	iov.iov_base = d;
	iov.iov_len = sizeof(*d);
	memset(&mr_attr, 0, sizeof(mr_attr));
	mr_attr.mr_iov = &iov;
	mr_attr.iov_count = 1;
	mr_attr.access = FI_SEND | FI_RECV;
	ret = fi_mr_regattr(s->domain, &mr_attr, 0, &s->mr);
	CHECK(ret == 0, "fi_mr_regattr: %d", ret);
	if (ret)
		return ret;

	/* Step 9: AV, CQ for both directions, counter for sends; enable. */
	CHECK(fi_ep_bind(s->ep, &s->av->fid, 0) == 0, "bind av");
	CHECK(fi_ep_bind(s->ep, &s->cq->fid, FI_TRANSMIT | FI_RECV) == 0,
	      "bind cq");
	CHECK(fi_ep_bind(s->ep, &s->cntr->fid, FI_SEND) == 0, "bind cntr");
	ret = fi_enable(s->ep);
	CHECK(ret == 0, "fi_enable: %d", ret);
	if (ret)
		return ret;
	/* The receive buffers, while the host still owns the endpoint. */
	for (i = 0; i < MSGS; i++) {
		ret = (int)fi_recv(s->ep, d->rbuf[i], MAXLEN, fi_mr_desc(s->mr),
				   FI_ADDR_UNSPEC, (void *)(uintptr_t)(0x200 + i));
		CHECK(ret == 0, "fi_recv %zu: %d", i, ret);
	}

	/* Step 10: the three exports, in the order under test. */
	memset(&h_ep, 0, sizeof(h_ep));
	memset(&h_cq, 0, sizeof(h_cq));
	memset(&h_cntr, 0, sizeof(h_cntr));
	for (k = 0; k < 3; k++) {
		if (order[k] == EP)
			ret = fi_ep_export_xpu(s->ep, 0, &h_ep);
		else if (order[k] == CQ)
			ret = fi_cq_export_xpu(s->cq, 0, &h_cq);
		else
			ret = fi_cntr_export_xpu(s->cntr, 0, &h_cntr);
		CHECK(ret == 0, "export %s (%s first): %d", what(order[k]),
		      what(order[0]), ret);
		if (ret)
			return ret;
	}
	CHECK(h_ep.fid.fclass == FI_CLASS_EP &&
	      h_ep.fid.prov_id == FI_XPU_PROV_SHM && h_ep.fid.prov_ctx,
	      "ep handle");
	CHECK(h_cq.fid.fclass == FI_CLASS_CQ &&
	      h_cq.fid.prov_id == FI_XPU_PROV_SHM && h_cq.fid.prov_ctx,
	      "cq handle");
	CHECK(h_cntr.fid.fclass == FI_CLASS_CNTR &&
	      h_cntr.fid.prov_id == FI_XPU_PROV_SHM && h_cntr.fid.prov_ctx,
	      "cntr handle");
	/* Each export hands its handle out once, whoever made the memory. */
	CHECK(fi_ep_export_xpu(s->ep, 0, &h_ep) == -FI_EALREADY, "ep again");
	CHECK(fi_cq_export_xpu(s->cq, 0, &h_cq) == -FI_EALREADY, "cq again");
	CHECK(fi_cntr_export_xpu(s->cntr, 0, &h_cntr) == -FI_EALREADY,
	      "cntr again");

	/* Step 11: the peer's raw address and the region's raw descriptor,
	 * in buffers of the sizes step 4 gave. */
	peer_raw = malloc(addr_size);
	len = addr_size;
	ret = fi_av_lookup2(s->av, s->fi_addr, peer_raw, &len, FI_XPU,
			    s->xpu_ctx);
	CHECK(ret == 0 && len == addr_size, "fi_av_lookup2: %d %zu", ret,
	      len);
	key_raw = malloc(key_size);
	len = key_size;
	ret = fi_mr_get_xpu_desc(s->mr, key_raw, &len, FI_XPU, s->xpu_ctx);
	CHECK(ret == 0 && len == key_size, "fi_mr_get_xpu_desc: %d %zu", ret,
	      len);

	/* Step 12: all of it into device memory, where the kernel reads it
	 * (the handles are position independent). */
	memcpy(d->addr, peer_raw, addr_size);
	memcpy(d->desc, key_raw, key_size);
	memcpy(&d->ep, &h_ep, sizeof(h_ep));
	memcpy(&d->cq, &h_cq, sizeof(h_cq));
	memcpy(&d->cntr, &h_cntr, sizeof(h_cntr));
	free(peer_raw);
	free(key_raw);
	return 0;
}

/* Step 14: the closes in the EXAMPLE's order, then fabric and info. */
static void cleanup(struct side *s)
{
	if (s->ep)
		CHECK(fi_close(&s->ep->fid) == 0, "close ep");
	if (s->cq)
		CHECK(fi_close(&s->cq->fid) == 0, "close cq");
	if (s->cntr)
		CHECK(fi_close(&s->cntr->fid) == 0, "close cntr");
	if (s->mr)
		CHECK(fi_close(&s->mr->fid) == 0, "close mr");
	if (s->av)
		CHECK(fi_close(&s->av->fid) == 0, "close av");
	if (s->xpu_ctx)
		CHECK(fi_close(&s->xpu_ctx->fid) == 0, "close xpu_ctx");
	if (s->domain)
		CHECK(fi_close(&s->domain->fid) == 0, "close domain");
	if (s->fabric)
		CHECK(fi_close(&s->fabric->fid) == 0, "close fabric");
	fi_freeinfo(s->info);
	s->info = NULL;
}

/* ------------------------------------------------------------ the kernel */

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Step 13, the device kernel: only <rdma/fi_xpu_device.h>, only on what
 * step 12 copied.  Per message: read the counter, send, wait for the
 * counter to pass the value read; then every completion from the CQ. */
static void *kernel(void *p)
{
	struct dev *d = p;
	struct fi_cq_tagged_entry e[4];
	int64_t end = now_ms() + 60000;
	uint64_t prev;
	size_t i;
	ssize_t n;

	for (i = 0; i < MSGS; i++) {
		prev = fi_xpu_cntr_read(&d->cntr, FI_XPU_WORK_ITEM);
		do {
			d->rc = fi_xpu_send(&d->ep, d->sbuf[i], sizes[i],
					    d->desc, d->addr,
					    (void *)(uintptr_t)(0x100 + i),
					    FI_XPU_WORK_ITEM);
		} while (d->rc == -FI_EAGAIN && now_ms() < end);
		if (d->rc)
			return NULL;
		d->rc = fi_xpu_cntr_wait(&d->cntr, prev + 1, 60000,
					 FI_XPU_WORK_ITEM);
		if (d->rc)
			return NULL;
	}
	d->cntr_end = fi_xpu_cntr_read(&d->cntr, FI_XPU_WORK_ITEM);
	d->cntr_err = fi_xpu_cntr_readerr(&d->cntr, FI_XPU_WORK_ITEM);
	/* Its sends' completions and the peer's messages, in any order. */
	while (d->n_send + d->n_recv < 2 * MSGS) {
		n = fi_xpu_cq_read(&d->cq, e, 4, FI_XPU_WORK_ITEM);
		if (n == -FI_EAGAIN) {
			if (now_ms() > end) {
				d->rc = -FI_ETIMEDOUT;
				return NULL;
			}
			continue;
		}
		if (n < 0) {
			d->rc = (int)n;
			return NULL;
		}
		for (i = 0; i < (size_t)n; i++) {
			if ((e[i].flags & FI_SEND) && d->n_send < MSGS)
				d->send[d->n_send++] = e[i];
			else if ((e[i].flags & FI_RECV) && d->n_recv < MSGS)
				d->recv[d->n_recv++] = e[i];
			else
				d->rc = -FI_EOTHER;
		}
	}
	return NULL;
}

/* ------------------------------------------------------------ one pair */

static struct dev *dev_map(void)
{
	void *p = mmap(NULL, sizeof(struct dev), PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

static void check_side(struct side *s)
{
	struct dev *d = s->dev;
	size_t i, k, b, bad, seen;
	int peer = !s->id;

	CHECK(d->rc == 0, "[%s] kernel: %d", s->me, d->rc);
	CHECK(d->cntr_end == MSGS && d->cntr_err == 0,
	      "[%s] counter %llu, errors %llu", s->me,
	      (unsigned long long)d->cntr_end,
	      (unsigned long long)d->cntr_err);
	CHECK(d->n_send == MSGS && d->n_recv == MSGS, "[%s] %zu sends, "
	      "%zu receives completed", s->me, d->n_send, d->n_recv);
	for (i = 0, seen = 0; i < d->n_send; i++) {
		k = (size_t)(uintptr_t)d->send[i].op_context - 0x100;
		if (k < MSGS && (d->send[i].flags & FI_MSG))
			seen |= (size_t)1 << k;
	}
	CHECK(seen == ((size_t)1 << MSGS) - 1, "[%s] send contexts %#zx",
	      s->me, seen);
	/* One peer, one sender thread: message i lands in buffer i. */
	for (i = 0; i < d->n_recv; i++) {
		struct fi_cq_tagged_entry *e = &d->recv[i];

		k = (size_t)(uintptr_t)e->op_context - 0x200;
		CHECK(k < MSGS, "[%s] receive context %p", s->me,
		      e->op_context);
		if (k >= MSGS)
			continue;
		CHECK(e->len == sizes[k] && (e->flags & FI_MSG),
		      "[%s] receive %zu: len %zu flags %#llx", s->me, k,
		      e->len, (unsigned long long)e->flags);
		bad = 0;
		for (b = 0; b < sizes[k]; b++)
			bad += d->rbuf[k][b] != pattern(peer, k, b);
		CHECK(bad == 0, "[%s] message %zu (%zu bytes): %zu bytes "
		      "differ", s->me, k, sizes[k], bad);
	}
}

static void pair(uint32_t version, enum spelling sa, enum spelling sb,
		 const int *order, int run)
{
	struct fi_xpu_ops ops = { .size = sizeof(struct fi_xpu_ops),
				  .alloc = my_alloc, .import = my_import,
				  .free = my_free };
	struct side s[2];
	pthread_t th[2];
	int i, ok = 1, a0 = n_alloc, f0 = n_free, failed0 = failed;
	size_t m, k;

	if (version < FI_VERSION(2, 8))
		ops.import = NULL;	/* its import has no fd: not used */
	memset(s, 0, sizeof(s));
	for (i = 0; i < 2; i++) {
		s[i].id = i;
		s[i].version = version;
		s[i].cbs = ops;
		snprintf(s[i].me, sizeof(s[i].me), "fi_shm://xpuex-%d-%d-%c",
			 (int)getpid(), run, 'a' + i);
		snprintf(s[i].peer, sizeof(s[i].peer),
			 "fi_shm://xpuex-%d-%d-%c", (int)getpid(), run,
			 'b' - i);
		s[i].dev = dev_map();
		CHECK(s[i].dev != NULL, "device memory");
		if (!s[i].dev)
			return;
		for (m = 0; m < MSGS; m++)
			for (k = 0; k < sizes[m]; k++)
				s[i].dev->sbuf[m][k] = pattern(i, m, k);
	}
	for (i = 0; i < 2 && ok; i++)
		ok = setup(&s[i], i ? sb : sa, order) == 0;
	if (ok) {
		for (i = 0; i < 2; i++)
			pthread_create(&th[i], NULL, kernel, s[i].dev);
		for (i = 0; i < 2; i++)
			pthread_join(th[i], NULL);
		for (i = 0; i < 2; i++)
			check_side(&s[i]);
	}
	for (i = 0; i < 2; i++) {
		cleanup(&s[i]);
		munmap(s[i].dev, sizeof(struct dev));
	}
	unmap_imported();
	CHECK(n_alloc - a0 == (ok ? 6 : n_alloc - a0) &&
	      n_free - f0 == n_alloc - a0, "run %d: %d allocs, %d frees", run,
	      n_alloc - a0, n_free - f0);
	if (failed != failed0)
		printf("run %d (version %u.%u, %s/%s, %s %s %s) had failures\n",
		       run, FI_MAJOR(version), FI_MINOR(version), spelled[sa],
		       spelled[sb], what(order[0]), what(order[1]),
		       what(order[2]));
}

/* ------------------------------------------------------------ bad input */

static void bad_input(void)
{
	struct fi_xpu_ops ops = { .size = sizeof(struct fi_xpu_ops),
				  .alloc = my_alloc, .import = my_import,
				  .free = my_free };
	struct fi_xpu_attr xattr = { .iface = FI_HMEM_SYSTEM, .device = 0,
				     .ops = &ops };
	struct fi_cq_attr cq_attr = { .format = FI_CQ_FORMAT_DATA };
	struct fi_cntr_attr cntr_attr = { .events = FI_CNTR_EVENTS_COMP };
	struct fid_cq *hostcq = NULL, *cq = NULL;
	struct fid_cntr *hostcntr = NULL, *cntr = NULL;
	struct fid_ep *ep = NULL;
	struct fid_xpu_ep xep;
	struct fid_xpu_cq xcq;
	struct fid_xpu_cntr xcn;
	struct fi_cq_tagged_entry entry;
	struct side s;
	int ret, a0, f0;

	memset(&s, 0, sizeof(s));
	{
		struct fi_info *hints = fi_allocinfo();

		hints->caps = FI_MSG | FI_XPU;
		hints->ep_attr->type = FI_EP_RDM;
		hints->fabric_attr->prov_name = strdup("shm");
		ret = fi_getinfo(FI_VERSION(2, 8), NULL, NULL, 0, hints,
				 &s.info);
		fi_freeinfo(hints);
	}
	CHECK(ret == 0, "getinfo: %d", ret);
	if (ret)
		return;
	CHECK(fi_fabric(s.info->fabric_attr, &s.fabric, NULL) == 0, "fabric");
	CHECK(fi_domain(s.fabric, s.info, &s.domain, NULL) == 0, "domain");
	CHECK(fi_xpu_ctx(s.domain, &xattr, &s.xpu_ctx, NULL) == 0, "ctx");
	if (!s.xpu_ctx)
		return;

	/* CQ: FI_XPU without a context, unknown flags, a foreign context. */
	cq_attr.flags = FI_XPU;
	ret = fi_cq_open(s.domain, &cq_attr, &cq, NULL);
	CHECK(ret == -FI_EINVAL, "cq FI_XPU without xpu_ctx: %d", ret);
	cq_attr.flags = 1ULL << 62;
	cq_attr.xpu_ctx = s.xpu_ctx;
	ret = fi_cq_open(s.domain, &cq_attr, &cq, NULL);
	CHECK(ret == -FI_EBADFLAGS, "cq unknown flag: %d", ret);
	cq_attr.flags = FI_XPU | FI_PEER;
	ret = fi_cq_open(s.domain, &cq_attr, &cq, NULL);
	CHECK(ret == -FI_EBADFLAGS, "cq FI_XPU|FI_PEER: %d", ret);
	/* A host CQ: no flag, no context (FI_AFFINITY is a CQ flag). */
	cq_attr.flags = FI_AFFINITY;
	cq_attr.xpu_ctx = NULL;
	CHECK(fi_cq_open(s.domain, &cq_attr, &hostcq, NULL) == 0, "host cq");
	ret = fi_cq_export_xpu(hostcq, 0, &xcq);
	CHECK(ret == -FI_EINVAL, "export of a host cq: %d", ret);
	cq_attr.flags = FI_XPU;
	cq_attr.xpu_ctx = (struct fid_xpu_ctx *)hostcq;
	ret = fi_cq_open(s.domain, &cq_attr, &cq, NULL);
	CHECK(ret == -FI_EINVAL, "cq FI_XPU with a CQ as xpu_ctx: %d", ret);

	/* Counter: the same. */
	cntr_attr.flags = FI_XPU;
	ret = fi_cntr_open(s.domain, &cntr_attr, &cntr, NULL);
	CHECK(ret == -FI_EINVAL, "cntr FI_XPU without xpu_ctx: %d", ret);
	cntr_attr.flags = FI_XPU | (1ULL << 61);
	cntr_attr.xpu_ctx = s.xpu_ctx;
	ret = fi_cntr_open(s.domain, &cntr_attr, &cntr, NULL);
	CHECK(ret == -FI_EBADFLAGS, "cntr unknown flag: %d", ret);
	cntr_attr.flags = FI_PEER;
	ret = fi_cntr_open(s.domain, &cntr_attr, &cntr, NULL);
	CHECK(ret == -FI_EBADFLAGS, "cntr FI_PEER: %d", ret);
	cntr_attr.flags = FI_XPU;
	cntr_attr.xpu_ctx = (struct fid_xpu_ctx *)hostcq;
	ret = fi_cntr_open(s.domain, &cntr_attr, &cntr, NULL);
	CHECK(ret == -FI_EINVAL, "cntr FI_XPU with a CQ as xpu_ctx: %d", ret);
	cntr_attr.flags = 0;
	cntr_attr.xpu_ctx = NULL;
	CHECK(fi_cntr_open(s.domain, &cntr_attr, &hostcntr, NULL) == 0,
	      "host cntr");
	ret = fi_cntr_export_xpu(hostcntr, 0, &xcn);
	CHECK(ret == -FI_EINVAL, "export of a host cntr: %d", ret);

	/* Endpoint: FI_XPU without a context, unknown flags, a foreign
	 * context, a host endpoint's export. */
	ret = fi_endpoint2(s.domain, s.info, &ep, FI_XPU, NULL);
	CHECK(ret == -FI_EINVAL, "fi_endpoint2 FI_XPU without xpu_ctx: %d",
	      ret);
	s.info->ep_attr->xpu_ctx = s.xpu_ctx;
	ret = fi_endpoint2(s.domain, s.info, &ep, FI_XPU | (1ULL << 63), NULL);
	CHECK(ret == -FI_EBADFLAGS, "fi_endpoint2 unknown flag: %d", ret);
	ret = fi_endpoint2(s.domain, s.info, &ep, FI_PEER, NULL);
	CHECK(ret == -FI_EBADFLAGS, "fi_endpoint2 FI_PEER: %d", ret);
	s.info->ep_attr->xpu_ctx = (struct fid_xpu_ctx *)hostcq;
	ret = fi_endpoint2(s.domain, s.info, &ep, FI_XPU, NULL);
	CHECK(ret == -FI_EINVAL, "fi_endpoint2 with a CQ as xpu_ctx: %d",
	      ret);
	s.info->ep_attr->xpu_ctx = NULL;
	CHECK(fi_endpoint2(s.domain, s.info, &ep, 0, NULL) == 0, "host ep");
	ret = fi_ep_export_xpu(ep, 0, &xep);
	CHECK(ret == -FI_EINVAL, "export of a host ep: %d", ret);
	CHECK(fi_close(&ep->fid) == 0, "close host ep");

	/* Exports: flags, before enable; an endpoint exported first whose
	 * CQ's memory cannot be had fails and keeps nothing. */
	cq_attr.flags = FI_XPU;
	cq_attr.xpu_ctx = s.xpu_ctx;
	CHECK(fi_cq_open(s.domain, &cq_attr, &cq, NULL) == 0, "xpu cq");
	cntr_attr.flags = FI_XPU;
	cntr_attr.xpu_ctx = s.xpu_ctx;
	CHECK(fi_cntr_open(s.domain, &cntr_attr, &cntr, NULL) == 0,
	      "xpu cntr");
	s.info->ep_attr->xpu_ctx = s.xpu_ctx;
	CHECK(fi_endpoint2(s.domain, s.info, &ep, FI_XPU, NULL) == 0,
	      "xpu ep");
	s.info->ep_attr->xpu_ctx = NULL;
	if (!cq || !cntr || !ep)
		return;
	{
		struct fi_av_attr av_attr = { .type = FI_AV_TABLE };

		CHECK(fi_av_open(s.domain, &av_attr, &s.av, NULL) == 0, "av");
	}
	CHECK(fi_ep_bind(ep, &s.av->fid, 0) == 0, "bind av");
	CHECK(fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV) == 0, "bind cq");
	CHECK(fi_ep_bind(ep, &cntr->fid, FI_SEND) == 0, "bind cntr");
	ret = fi_ep_export_xpu(ep, 0, &xep);
	CHECK(ret == -FI_EOPBADSTATE, "export before enable: %d", ret);
	CHECK(fi_enable(ep) == 0, "enable");
	ret = fi_ep_export_xpu(ep, FI_XPU, &xep);
	CHECK(ret == -FI_EBADFLAGS, "ep export flags: %d", ret);
	ret = fi_cq_export_xpu(cq, 1, &xcq);
	CHECK(ret == -FI_EBADFLAGS, "cq export flags: %d", ret);
	ret = fi_cntr_export_xpu(cntr, 1, &xcn);
	CHECK(ret == -FI_EBADFLAGS, "cntr export flags: %d", ret);
	a0 = n_alloc;
	f0 = n_free;
	fail_alloc_at = 2;	/* the work queue gets memory, the CQ not */
	ret = fi_ep_export_xpu(ep, 0, &xep);
	CHECK(ret == -FI_ENOMEM, "ep export, CQ alloc fails: %d", ret);
	CHECK(n_alloc - a0 == 1 && n_free - f0 == 1,
	      "nothing kept: %d allocs, %d frees", n_alloc - a0, n_free - f0);
	fail_alloc_at = 3;	/* now the counter's */
	ret = fi_ep_export_xpu(ep, 0, &xep);
	CHECK(ret == -FI_ENOMEM, "ep export, cntr alloc fails: %d", ret);
	CHECK(n_alloc - a0 == 3 && n_free - f0 == 3,
	      "nothing kept: %d allocs, %d frees", n_alloc - a0, n_free - f0);
	fail_alloc_at = 0;
	ret = fi_ep_export_xpu(ep, 0, &xep);
	CHECK(ret == 0, "ep export: %d", ret);
	CHECK(n_alloc - a0 == 6 && n_free - f0 == 3, "three live: %d, %d",
	      n_alloc - a0, n_free - f0);
	/* The CQ and counter exports hand out what the endpoint's made. */
	CHECK(fi_cq_export_xpu(cq, 0, &xcq) == 0, "cq export after ep");
	CHECK(fi_cntr_export_xpu(cntr, 0, &xcn) == 0, "cntr export after ep");
	CHECK(n_alloc - a0 == 6, "no new memory: %d", n_alloc - a0);
	CHECK(fi_xpu_cq_read(&xcq, &entry, 1, FI_XPU_WORK_ITEM) ==
	      -FI_EAGAIN, "exported cq is empty");
	CHECK(fi_xpu_cntr_read(&xcn, FI_XPU_WORK_ITEM) == 0, "cntr 0");
	CHECK(fi_cq_export_xpu(cq, 0, &xcq) == -FI_EALREADY, "cq twice");
	CHECK(fi_cntr_export_xpu(cntr, 0, &xcn) == -FI_EALREADY, "cntr twice");

	CHECK(fi_close(&ep->fid) == 0, "close ep");
	CHECK(fi_close(&cq->fid) == 0, "close cq");
	CHECK(fi_close(&cntr->fid) == 0, "close cntr");
	CHECK(fi_close(&hostcq->fid) == 0, "close host cq");
	CHECK(fi_close(&hostcntr->fid) == 0, "close host cntr");
	CHECK(n_free - f0 == 6, "all freed: %d", n_free - f0);
	cleanup(&s);
	unmap_imported();
}

int main(void)
{
	int fds0 = count_memfd(0), maps0 = count_memfd(1);
	int o, sp, run = 0;

	/* Every order of step 10, each spelling on side a with the next one
	 * on side b. */
	for (o = 0; o < 6; o++)
		for (sp = 0; sp < 3; sp++)
			pair(FI_VERSION(2, 8), (enum spelling)sp,
			     (enum spelling)((sp + 1) % 3), orders[o], run++);
	/* The version step 1 names. */
	pair(FI_VERSION(2, 7), EXAMPLE, EXAMPLE, orders[0], run++);
	bad_input();
	CHECK(n_alloc == n_free, "%d allocs, %d frees", n_alloc, n_free);
	CHECK(count_memfd(0) == fds0, "memfd descriptors %d, were %d",
	      count_memfd(0), fds0);
	CHECK(count_memfd(1) == maps0, "memfd mappings %d, were %d",
	      count_memfd(1), maps0);
	printf("%d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}
