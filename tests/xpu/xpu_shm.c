/* Accelerator-initiated communication over the shm provider, two processes.
 *
 * The parent opens an XPU context with memory callbacks that record every
 * call (memfd-backed allocations stand in for DMA-BUFs; the import callback
 * maps the descriptor it is given and checks that it shows the bytes at
 * host_addr), exports an endpoint, a CQ and a counter, and runs "XPU
 * kernels": host threads that use only <rdma/fi_xpu_device.h> to send
 * tagged messages to the child, a plain host process that receives and
 * checks them.  Completions and the counter must be exact; closing in an
 * unusual order must release every allocation, descriptor and mapping.
 * Bad input gets the codes fi_xpu(3) documents, and an application built
 * for API 2.7 (import without fd) can export CQs and counters but not the
 * endpoint.  Prints "N passed, N failed". */
#define _GNU_SOURCE
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>
#include <rdma/fi_xpu.h>
#include <rdma/fi_xpu_device.h>
#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define THREADS 4
#define PER 16
#define N (THREADS * PER)
#define LEN 1000

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

static unsigned char pattern(int t, int i, int k)
{
	return (unsigned char)(t * 37 + i * 11 + k);
}

/* ------------------------------------------------------------ callbacks */

#define MAXREC 64
static struct alloc_rec {
	void *addr, *base;
	size_t len;
	int fd;
} allocs[MAXREC];
static int n_alloc, n_free, n_import, import_rc;
static struct {
	void *p;
	size_t len;
} imported[MAXREC];
static int n_imported;
static pthread_mutex_t rec_lock = PTHREAD_MUTEX_INITIALIZER;

static int cb_alloc(uint64_t device, uint64_t size, uint64_t alignment,
		    uint64_t flags, void **addr, int *fd, uint64_t *offset)
{
	long page = sysconf(_SC_PAGESIZE);
	size_t skip = (size_t)page, len;
	void *base;
	int mfd;

	if (device != 0 || alignment == 0 || (alignment & (alignment - 1)))
		return -FI_EINVAL;
	len = (skip + size + page - 1) / page * page;
	mfd = memfd_create("xpu-test-alloc", MFD_CLOEXEC);
	if (mfd < 0 || ftruncate(mfd, (off_t)len))
		return -FI_ENOMEM;
	base = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, mfd, 0);
	if (base == MAP_FAILED) {
		close(mfd);
		return -FI_ENOMEM;
	}
	pthread_mutex_lock(&rec_lock);
	allocs[n_alloc].base = base;
	allocs[n_alloc].addr = (char *)base + skip;
	allocs[n_alloc].len = len;
	allocs[n_alloc].fd = mfd;
	n_alloc++;
	pthread_mutex_unlock(&rec_lock);
	*addr = (char *)base + skip;
	*fd = (flags & FI_XPU_ALLOC_DMABUF) ? mfd : -1;
	*offset = skip;
	return 0;
}

static void cb_free(uint64_t device, void *addr)
{
	int i;

	(void)device;
	pthread_mutex_lock(&rec_lock);
	for (i = 0; i < n_alloc; i++) {
		if (allocs[i].addr == addr && allocs[i].fd >= 0) {
			munmap(allocs[i].base, allocs[i].len);
			close(allocs[i].fd);
			allocs[i].fd = -1;
			n_free++;
			break;
		}
	}
	if (i == n_alloc)
		n_free += 1000;	/* unknown address: fails the count check */
	pthread_mutex_unlock(&rec_lock);
}

static int cb_import(uint64_t device, void *host_addr, uint64_t size,
		     uint64_t flags, int fd, void **dev_addr)
{
	long page = sysconf(_SC_PAGESIZE);
	size_t off = (uintptr_t)host_addr % (size_t)page;
	size_t len = (off + size + page - 1) / page * page;
	void *p;

	(void)device;
	n_import++;
	if (import_rc)
		return import_rc;
	if (!(flags & FI_XPU_IMPORT_DMABUF)) {
		*dev_addr = host_addr;
		return 0;
	}
	if (fd < 0)
		return -FI_EINVAL;
	p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED)
		return -FI_EINVAL;
	if (memcmp((char *)p + off, host_addr, size)) {
		munmap(p, len);
		return -FI_EIO;
	}
	imported[n_imported].p = p;
	imported[n_imported].len = len;
	n_imported++;
	*dev_addr = (char *)p + off;
	return 0;
}

/* The shape of import before API 2.8 (no fd). */
static int n_old_import;
static int cb_import_old(uint64_t device, void *host_addr, uint64_t size,
			 uint64_t flags, void **dev_addr)
{
	(void)device; (void)size;
	n_old_import++;
	if (flags & FI_XPU_IMPORT_DMABUF)
		return -FI_EINVAL;
	*dev_addr = host_addr;
	return 0;
}

static int count_memfd(const char *what)
{
	char line[512], path[300], target[256];
	int n = 0;

	if (!strcmp(what, "maps")) {
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

/* ------------------------------------------------------------ resources */

struct res {
	struct fi_info *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_av *av;
	struct fid_cq *cq;
	struct fid_cntr *cntr;
	struct fid_ep *ep;
	struct fid_xpu_ctx *ctx;
};

static int open_base(uint32_t version, uint64_t caps, struct res *r)
{
	struct fi_info *hints = fi_allocinfo();
	struct fi_av_attr av_attr = { .type = FI_AV_TABLE };
	int ret;

	memset(r, 0, sizeof(*r));
	hints->ep_attr->type = FI_EP_RDM;
	hints->caps = caps;
	hints->fabric_attr->prov_name = strdup("shm");
	ret = fi_getinfo(version, NULL, NULL, 0, hints, &r->info);
	fi_freeinfo(hints);
	if (ret)
		return ret;
	ret = fi_fabric(r->info->fabric_attr, &r->fabric, NULL);
	if (!ret)
		ret = fi_domain(r->fabric, r->info, &r->domain, NULL);
	if (!ret)
		ret = fi_av_open(r->domain, &av_attr, &r->av, NULL);
	return ret;
}

/* ------------------------------------------------------------ the child */

static int child(int wfd)
{
	struct fi_cq_attr cq_attr = { .format = FI_CQ_FORMAT_TAGGED };
	struct fi_cq_tagged_entry e;
	static char bufs[N][LEN];
	static unsigned char target[64];
	struct fid_mr *tmr = NULL;
	char name[128];
	size_t namelen = sizeof(name);
	struct res r;
	int i, k, got = 0, ret, bad = 0, seen[N] = { 0 };

	who = "child";
	ret = open_base(FI_VERSION(2, 8), FI_MSG | FI_TAGGED | FI_RMA, &r);
	CHECK(ret == 0, "open: %d", ret);
	if (ret)
		return 1;
	CHECK(fi_cq_open(r.domain, &cq_attr, &r.cq, NULL) == 0, "cq");
	CHECK(fi_endpoint(r.domain, r.info, &r.ep, NULL) == 0, "ep");
	CHECK(fi_ep_bind(r.ep, &r.cq->fid, FI_TRANSMIT | FI_RECV) == 0, "b");
	CHECK(fi_ep_bind(r.ep, &r.av->fid, 0) == 0, "bind av");
	CHECK(fi_enable(r.ep) == 0, "enable");
	for (i = 0; i < N; i++) {
		ret = (int)fi_trecv(r.ep, bufs[i], LEN, NULL, FI_ADDR_UNSPEC,
				    (uint64_t)((i / PER) * 100 + i % PER), 0,
				    (void *)(uintptr_t)(i + 1));
		CHECK(ret == 0, "trecv %d: %d", i, ret);
	}
	/* The region the parent's device kernel writes into with fi_xpu_write. */
	CHECK(fi_mr_reg(r.domain, target, sizeof(target), FI_REMOTE_WRITE, 0,
			0xbeef, 0, &tmr, NULL) == 0, "reg target");
	CHECK(fi_getname(&r.ep->fid, name, &namelen) == 0, "getname");
	if (write(wfd, &namelen, sizeof(namelen)) != sizeof(namelen) ||
	    write(wfd, name, namelen) != (ssize_t)namelen)
		return 1;
	while (got < N) {
		ret = (int)fi_cq_read(r.cq, &e, 1);
		if (ret == -FI_EAGAIN)
			continue;
		CHECK(ret == 1, "cq_read: %d", ret);
		if (ret != 1)
			break;
		i = (int)(uintptr_t)e.op_context - 1;
		CHECK(i >= 0 && i < N && !seen[i], "context %d", i);
		if (i < 0 || i >= N)
			break;
		seen[i] = 1;
		CHECK(e.len == LEN && (e.flags & FI_TAGGED) &&
		      e.tag == (uint64_t)((i / PER) * 100 + i % PER),
		      "entry %d: len %zu tag %llu", i, e.len,
		      (unsigned long long)e.tag);
		for (k = 0; k < LEN; k++)
			bad += (unsigned char)bufs[i][k] !=
			       pattern(i / PER, i % PER, k);
		got++;
	}
	CHECK(bad == 0, "%d bytes differ", bad);
	CHECK(got == N, "received %d of %d", got, N);
	/* Serve the parent's RMA write (progress is manual: read the CQ) until
	 * the bytes land, for at most about five seconds. */
	for (k = 0, bad = 1; k < 5000000 && bad; k++) {
		(void) fi_cq_read(r.cq, &e, 1);
		bad = 0;
		for (i = 0; i < 8; i++)
			bad += target[i] != (unsigned char)pattern(0, 0, i);
	}
	CHECK(bad == 0, "device RMA write landed in the target region");
	for (i = 8; i < (int)sizeof(target); i++)
		bad += target[i] != 0;
	CHECK(bad == 0, "nothing written past the 8 bytes");
	CHECK(fi_close(&tmr->fid) == 0, "close target mr");
	CHECK(fi_close(&r.ep->fid) == 0, "close ep");
	CHECK(fi_close(&r.cq->fid) == 0, "close cq");
	CHECK(fi_close(&r.av->fid) == 0, "close av");
	CHECK(fi_close(&r.domain->fid) == 0, "close domain");
	CHECK(fi_close(&r.fabric->fid) == 0, "close fabric");
	fi_freeinfo(r.info);
	printf("[child] %d passed, %d failed\n", passed, failed);
	fflush(stdout);
	return failed ? 1 : 0;
}

/* ------------------------------------------------------------ kernels */

struct kernel_arg {
	struct fid_xpu_ep ep;
	struct fid_xpu_cq cq;
	uint64_t dest;
	int t;
	int rc;
	uint64_t ctxs[PER];
	unsigned char bufs[PER][LEN];
};

/* A device thread: only fi_xpu_device.h calls. */
static void *kernel(void *p)
{
	struct kernel_arg *a = p;
	struct fi_cq_tagged_entry e[4];
	int i, got = 0;
	ssize_t n;

	for (i = 0; i < PER; i++) {
		do {
			a->rc = fi_xpu_tsend(&a->ep, a->bufs[i], LEN, NULL,
					     &a->dest,
					     (uint64_t)(a->t * 100 + i),
					     (void *)(uintptr_t)(1000 * (a->t + 1) + i),
					     FI_XPU_WORK_ITEM);
		} while (a->rc == -FI_EAGAIN);
		if (a->rc)
			return NULL;
	}
	/* Each thread takes PER completions, whichever thread's they are. */
	while (got < PER) {
		n = fi_xpu_cq_read(&a->cq, e, (size_t)(PER - got) < 4 ?
				   (size_t)(PER - got) : 4, FI_XPU_SUBGROUP);
		if (n == -FI_EAGAIN)
			continue;
		if (n < 0) {
			a->rc = (int)n;
			return NULL;
		}
		for (i = 0; i < n; i++)
			a->ctxs[got++] = (uint64_t)(uintptr_t)e[i].op_context;
	}
	return NULL;
}

/* ------------------------------------------------------------ the parent */

static void mr_desc(struct res *r)
{
	static char region[4096];
	struct fid_mr *mr = NULL;
	uint64_t d = 0;
	size_t len = 4;
	int ret;

	ret = fi_mr_reg(r->domain, region, sizeof(region), FI_SEND, 0, 0x1234,
			0, &mr, NULL);
	CHECK(ret == 0, "mr_reg: %d", ret);
	if (ret)
		return;
	ret = fi_mr_get_xpu_desc(mr, &d, &len, FI_XPU, r->ctx);
	CHECK(ret == -FI_ETOOSMALL && len == 8, "desc short: %d %zu", ret, len);
	ret = fi_mr_get_xpu_desc(mr, &d, &len, 0, r->ctx);
	CHECK(ret == -FI_EINVAL, "desc without FI_XPU: %d", ret);
	ret = fi_mr_get_xpu_desc(mr, &d, &len, FI_XPU, NULL);
	CHECK(ret == -FI_EINVAL, "desc without ctx: %d", ret);
	ret = fi_mr_get_xpu_desc(mr, &d, &len, FI_XPU, r->ctx);
	CHECK(ret == 0 && len == 8 && d == fi_mr_key(mr), "desc %d %zu %llx",
	      ret, len, (unsigned long long)d);
	CHECK(fi_close(&mr->fid) == 0, "close mr");
}

static void parent(pid_t pid, int rfd)
{
	struct fi_xpu_ops ops = { sizeof(ops), cb_alloc, cb_import, cb_free };
	struct fi_xpu_attr xattr = { FI_HMEM_SYSTEM, 0, &ops };
	struct fi_cq_attr cq_attr = { .size = 16, .format = FI_CQ_FORMAT_TAGGED };
	struct fi_cntr_attr cntr_attr = { .events = FI_CNTR_EVENTS_COMP };
	static struct kernel_arg args[THREADS];
	pthread_t th[THREADS];
	struct fid_xpu_ep xep;
	struct fid_xpu_cq xcq;
	struct fid_xpu_cntr xcn;
	struct fi_cq_tagged_entry e;
	struct fi_cq_err_entry ee;
	char name[128];
	size_t namelen, len;
	fi_addr_t peer;
	uint64_t raw = 0;
	int fds0 = count_memfd("fd"), maps0 = count_memfd("maps");
	int ret, t, i, k, seen[THREADS][PER], status;
	struct res r;

	ret = open_base(FI_VERSION(2, 8), FI_MSG | FI_TAGGED | FI_RMA | FI_XPU, &r);
	CHECK(ret == 0, "open: %d", ret);
	if (ret)
		return;
	CHECK(r.info->domain_attr->max_xpu_ctx_cnt > 0, "max_xpu_ctx_cnt");
	ret = fi_xpu_ctx(r.domain, &xattr, &r.ctx, NULL);
	CHECK(ret == 0, "xpu ctx: %d", ret);
	if (ret)
		return;
	cq_attr.xpu_ctx = r.ctx;
	cntr_attr.xpu_ctx = r.ctx;
	r.info->ep_attr->xpu_ctx = r.ctx;
	CHECK(fi_cq_open(r.domain, &cq_attr, &r.cq, NULL) == 0, "cq");
	CHECK(fi_cntr_open(r.domain, &cntr_attr, &r.cntr, NULL) == 0, "cntr");
	CHECK(fi_endpoint(r.domain, r.info, &r.ep, NULL) == 0, "ep");
	r.info->ep_attr->xpu_ctx = NULL;	/* before fi_freeinfo */
	CHECK(fi_ep_bind(r.ep, &r.cq->fid, FI_TRANSMIT | FI_RECV) == 0, "b");
	CHECK(fi_ep_bind(r.ep, &r.cntr->fid, FI_SEND) == 0, "bind cntr");
	CHECK(fi_ep_bind(r.ep, &r.av->fid, 0) == 0, "bind av");

	ret = fi_ep_export_xpu(r.ep, 0, &xep);
	CHECK(ret == -FI_EOPBADSTATE, "export before enable: %d", ret);
	CHECK(n_alloc == 0 && n_import == 0, "nothing allocated yet");
	CHECK(fi_enable(r.ep) == 0, "enable");
	/* CQ and counter first here; xpu_example.c tries every order. */
	CHECK(fi_cq_export_xpu(r.cq, 0, &xcq) == 0, "export cq");
	CHECK(fi_cntr_export_xpu(r.cntr, 0, &xcn) == 0, "export cntr");
	import_rc = -FI_EACCES;
	ret = fi_ep_export_xpu(r.ep, 0, &xep);
	CHECK(ret == -FI_EACCES, "import callback error: %d", ret);
	import_rc = 0;
	ret = fi_ep_export_xpu(r.ep, 0, &xep);
	CHECK(ret == 0, "export ep: %d", ret);
	CHECK(xep.fid.fclass == FI_CLASS_EP && xep.fid.prov_id ==
	      FI_XPU_PROV_SHM, "ep handle");
	ret = fi_ep_export_xpu(r.ep, 0, &xep);
	CHECK(ret == -FI_EALREADY, "export twice: %d", ret);
	CHECK(n_import == 2 && n_imported == 1, "doorbell imported once "
	      "(%d calls, %d mapped)", n_import, n_imported);

	if (read(rfd, &namelen, sizeof(namelen)) != sizeof(namelen) ||
	    namelen > sizeof(name) || read(rfd, name, namelen) != (ssize_t)namelen) {
		CHECK(0, "peer name");
		return;
	}
	CHECK(fi_av_insert(r.av, name, 1, &peer, 0, NULL) == 1, "av insert");
	len = 2;
	ret = fi_av_lookup2(r.av, peer, &raw, &len, FI_XPU, r.ctx);
	CHECK(ret == -FI_ETOOSMALL && len == 8, "lookup2 short: %d %zu", ret,
	      len);
	len = sizeof(raw);
	ret = fi_av_lookup2(r.av, peer, &raw, &len, FI_XPU, NULL);
	CHECK(ret == -FI_EINVAL, "lookup2 without ctx: %d", ret);
	ret = fi_av_lookup2(r.av, peer, &raw, &len, FI_XPU, r.ctx);
	CHECK(ret == 0 && len == 8, "lookup2: %d %zu", ret, len);

	mr_desc(&r);

	for (t = 0; t < THREADS; t++) {
		args[t].ep = xep;
		args[t].cq = xcq;
		args[t].dest = raw;
		args[t].t = t;
		for (i = 0; i < PER; i++)
			for (k = 0; k < LEN; k++)
				args[t].bufs[i][k] = pattern(t, i, k);
		pthread_create(&th[t], NULL, kernel, &args[t]);
	}
	for (t = 0; t < THREADS; t++)
		pthread_join(th[t], NULL);
	memset(seen, 0, sizeof(seen));
	for (t = 0; t < THREADS; t++) {
		CHECK(args[t].rc == 0, "kernel %d: %d", t, args[t].rc);
		for (i = 0; i < PER; i++) {
			uint64_t c = args[t].ctxs[i];
			int ct = (int)(c / 1000) - 1, ci = (int)(c % 1000);

			if (ct >= 0 && ct < THREADS && ci < PER)
				seen[ct][ci]++;
		}
	}
	for (t = 0; t < THREADS; t++)
		for (i = 0; i < PER; i++)
			CHECK(seen[t][i] == 1, "completion %d/%d seen %d times",
			      t, i, seen[t][i]);
	ret = fi_xpu_cntr_wait(&xcn, N, 5000, FI_XPU_DEVICE);
	CHECK(ret == 0, "counter wait: %d", ret);
	CHECK(fi_xpu_cntr_read(&xcn, FI_XPU_WORK_ITEM) == N, "counter %llu",
	      (unsigned long long)fi_xpu_cntr_read(&xcn, FI_XPU_WORK_ITEM));
	CHECK(fi_xpu_cntr_readerr(&xcn, FI_XPU_WORK_ITEM) == 0, "no errors");
	CHECK(fi_xpu_cq_read(&xcq, &e, 1, FI_XPU_WORK_ITEM) == -FI_EAGAIN,
	      "no extra completion");

	/* A key the child never registered: an error completion (first:
	 * the child stays until the good write below has landed). */
	ret = fi_xpu_write(&xep, args[0].bufs[0], 8, NULL, &raw, 0, 0xdead,
			   (void *)0x78, FI_XPU_WORK_ITEM);
	CHECK(ret == 0, "post bad-key write: %d", ret);
	do {
		ret = (int)fi_xpu_cq_read(&xcq, &e, 1, FI_XPU_WORK_ITEM);
	} while (ret == -FI_EAGAIN);
	CHECK(ret == -FI_EAVAIL, "bad key completes in error: %d", ret);
	ret = (int)fi_xpu_cq_readerr(&xcq, &ee, 0, FI_XPU_WORK_ITEM);
	CHECK(ret == 1 && ee.err == FI_EKEYREJECTED && ee.op_context == (void *)0x78,
	      "readerr: %d err %d", ret, ee.err);

	/* An RMA write from device code into the child's region (offset 0 of
	 * key 0xbeef): one success completion with the device's context. */
	ret = fi_xpu_write(&xep, args[0].bufs[0], 8, NULL, &raw, 0, 0xbeef,
			   (void *)0x77, FI_XPU_WORK_ITEM);
	CHECK(ret == 0, "post write: %d", ret);
	do {
		ret = (int)fi_xpu_cq_read(&xcq, &e, 1, FI_XPU_WORK_ITEM);
	} while (ret == -FI_EAGAIN);
	CHECK(ret == 1 && e.op_context == (void *)0x77 && (e.flags & FI_WRITE),
	      "write completes: %d", ret);
	waitpid(pid, &status, 0);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status");

	/* Close in an unusual order: the context first. */
	CHECK(fi_close(&r.ctx->fid) == 0, "close ctx");
	ret = fi_close(&r.cq->fid);
	CHECK(ret == -FI_EBUSY, "cq bound to a live ep: %d", ret);
	CHECK(fi_close(&r.ep->fid) == 0, "close ep");
	CHECK(fi_close(&r.cntr->fid) == 0, "close cntr");
	CHECK(fi_close(&r.cq->fid) == 0, "close cq");
	CHECK(fi_close(&r.av->fid) == 0, "close av");
	CHECK(fi_close(&r.domain->fid) == 0, "close domain");
	CHECK(fi_close(&r.fabric->fid) == 0, "close fabric");
	fi_freeinfo(r.info);
	CHECK(n_alloc == 3 && n_free == n_alloc, "alloc %d free %d", n_alloc,
	      n_free);
	for (i = 0; i < n_imported; i++)
		munmap(imported[i].p, imported[i].len);
	CHECK(count_memfd("fd") == fds0, "memfd descriptors %d, were %d",
	      count_memfd("fd"), fds0);
	CHECK(count_memfd("maps") == maps0, "memfd mappings %d, were %d",
	      count_memfd("maps"), maps0);
}

/* An application built for API 2.7: import has no fd. */
static void old_shape(void)
{
	struct fi_xpu_ops ops = { sizeof(ops), NULL, NULL, NULL };
	struct fi_xpu_attr xattr = { FI_HMEM_SYSTEM, 0, &ops };
	struct fi_cq_attr cq_attr = { .format = FI_CQ_FORMAT_TAGGED };
	struct fid_xpu_cq xcq;
	struct fid_xpu_ep xep;
	struct res r;
	int ret;

	/* Stored the way the older prototype was. */
	ops.import = (int (*)(uint64_t, void *, uint64_t, uint64_t, int,
			      void **))(void (*)(void))cb_import_old;
	ret = open_base(FI_VERSION(2, 7), FI_TAGGED | FI_XPU, &r);
	CHECK(ret == 0, "open 2.7: %d", ret);
	if (ret)
		return;
	CHECK(fi_xpu_ctx(r.domain, &xattr, &r.ctx, NULL) == 0, "ctx 2.7");
	cq_attr.xpu_ctx = r.ctx;
	r.info->ep_attr->xpu_ctx = r.ctx;
	CHECK(fi_cq_open(r.domain, &cq_attr, &r.cq, NULL) == 0, "cq");
	CHECK(fi_endpoint(r.domain, r.info, &r.ep, NULL) == 0, "ep");
	r.info->ep_attr->xpu_ctx = NULL;
	CHECK(fi_ep_bind(r.ep, &r.cq->fid, FI_TRANSMIT | FI_RECV) == 0, "b");
	CHECK(fi_ep_bind(r.ep, &r.av->fid, 0) == 0, "bind av");
	CHECK(fi_enable(r.ep) == 0, "enable");
	ret = fi_cq_export_xpu(r.cq, 0, &xcq);
	CHECK(ret == 0, "cq export, old shape: %d", ret);
	CHECK(n_old_import == 1, "queue memory imported by address (%d)",
	      n_old_import);
	ret = fi_ep_export_xpu(r.ep, 0, &xep);
	CHECK(ret == -FI_EOPNOTSUPP, "ep export, old shape: %d", ret);
	CHECK(n_old_import == 1, "doorbell never offered to the old shape");
	CHECK(fi_close(&r.ep->fid) == 0, "close ep");
	CHECK(fi_close(&r.cq->fid) == 0, "close cq");
	CHECK(fi_close(&r.ctx->fid) == 0, "close ctx");
	CHECK(fi_close(&r.av->fid) == 0, "close av");
	CHECK(fi_close(&r.domain->fid) == 0, "close domain");
	CHECK(fi_close(&r.fabric->fid) == 0, "close fabric");
	fi_freeinfo(r.info);
}

int main(void)
{
	int p[2];
	pid_t pid;

	if (pipe(p))
		return 2;
	pid = fork();
	if (pid == 0) {
		close(p[0]);
		_exit(child(p[1]));
	}
	close(p[1]);
	parent(pid, p[0]);
	old_shape();
	printf("%d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}
