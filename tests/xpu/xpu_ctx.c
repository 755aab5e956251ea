/* fi_xpu_ctx through the C API on the shm provider: FI_XPU in fi_getinfo,
 * max_xpu_ctx_cnt, the documented codes for bad attributes, query, the
 * callback shapes accepted for API 2.7 and 2.8, and close ordering (a
 * domain with a live context is busy).  Prints "N passed, N failed". */
#define _GNU_SOURCE
#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_xpu.h>
#include <rdma/fi_xpu_device.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int passed, failed;

#define CHECK(cond, ...)                                                \
	do {                                                            \
		if (cond) {                                             \
			passed++;                                       \
		} else {                                                \
			failed++;                                       \
			printf("FAIL %s:%d: ", __FILE__, __LINE__);     \
			printf(__VA_ARGS__);                            \
			printf("\n");                                   \
		}                                                       \
	} while (0)

static int calls;

static int t_alloc(uint64_t device, uint64_t size, uint64_t alignment,
		   uint64_t flags, void **addr, int *fd, uint64_t *offset)
{
	(void)device; (void)size; (void)alignment; (void)flags;
	(void)addr; (void)fd; (void)offset;
	calls++;
	return -FI_ENOMEM;
}

static int t_import(uint64_t device, void *host_addr, uint64_t size,
		    uint64_t flags, int fd, void **dev_addr)
{
	(void)device; (void)size; (void)flags; (void)fd;
	calls++;
	*dev_addr = host_addr;
	return 0;
}

static void t_free(uint64_t device, void *addr)
{
	(void)device; (void)addr;
	calls++;
}

struct res {
	struct fi_info *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
};

static int open_res(uint32_t version, uint64_t caps, struct res *r)
{
	struct fi_info *hints = fi_allocinfo();
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
	if (ret)
		return ret;
	return fi_domain(r->fabric, r->info, &r->domain, NULL);
}

static void close_res(struct res *r)
{
	CHECK(fi_close(&r->domain->fid) == 0, "close domain");
	CHECK(fi_close(&r->fabric->fid) == 0, "close fabric");
	fi_freeinfo(r->info);
}

static void plain_has_no_xpu(void)
{
	struct res r;
	int ret = open_res(FI_VERSION(2, 8), FI_MSG | FI_TAGGED, &r);

	CHECK(ret == 0, "open without FI_XPU: %d", ret);
	if (ret)
		return;
	CHECK(!(r.info->caps & FI_XPU), "FI_XPU not offered unasked");
	CHECK(r.info->domain_attr->max_xpu_ctx_cnt == 0, "max_xpu_ctx_cnt 0");
	close_res(&r);
}

/* CQ and counter exports: failing alloc (ctx), success (ctx2). */
static void exports(struct res *r, struct fid_xpu_ctx *ctx,
		    struct fid_xpu_ctx **ctx2p)
{
	struct fi_cq_attr ca = { .size = 64, .format = FI_CQ_FORMAT_TAGGED };
	struct fi_cntr_attr na = { .events = FI_CNTR_EVENTS_COMP };
	struct fid_cq *cq = NULL, *hostcq = NULL;
	struct fid_cntr *cn = NULL;
	struct fid_xpu_cq xcq;
	struct fid_xpu_cntr xcn;
	struct fi_cq_tagged_entry e;
	struct fi_cq_err_entry ee;
	int ret;

	/* The context's alloc fails: the export returns its code. */
	ca.xpu_ctx = ctx;
	ret = fi_cq_open(r->domain, &ca, &cq, NULL);
	CHECK(ret == 0, "cq with ctx: %d", ret);
	if (ret)
		return;
	ret = fi_cq_export_xpu(cq, 0, &xcq);
	CHECK(ret == -FI_ENOMEM, "export with failing alloc: %d", ret);
	na.xpu_ctx = ctx;
	ret = fi_cntr_open(r->domain, &na, &cn, NULL);
	CHECK(ret == 0, "cntr with ctx: %d", ret);
	ret = fi_cntr_export_xpu(cn, 0, &xcn);
	CHECK(ret == -FI_ENOMEM, "cntr export with failing alloc: %d", ret);
	CHECK(fi_close(&cq->fid) == 0 && fi_close(&cn->fid) == 0, "close");

	/* A host CQ cannot be exported. */
	ca.xpu_ctx = NULL;
	CHECK(fi_cq_open(r->domain, &ca, &hostcq, NULL) == 0, "host cq");
	ret = fi_cq_export_xpu(hostcq, 0, &xcq);
	CHECK(ret == -FI_EINVAL, "export of a host CQ: %d", ret);
	/* A pointer that is not a context is refused at open. */
	ca.xpu_ctx = (struct fid_xpu_ctx *)hostcq;
	ret = fi_cq_open(r->domain, &ca, &cq, NULL);
	CHECK(ret == -FI_EINVAL, "xpu_ctx that is a CQ: %d", ret);
	CHECK(fi_close(&hostcq->fid) == 0, "close host cq");

	ca.xpu_ctx = *ctx2p;
	na.xpu_ctx = *ctx2p;
	CHECK(fi_cq_open(r->domain, &ca, &cq, NULL) == 0, "cq with ctx2");
	CHECK(fi_cntr_open(r->domain, &na, &cn, NULL) == 0, "cntr with ctx2");
	ret = fi_cq_export_xpu(cq, 1, &xcq);
	CHECK(ret == -FI_EBADFLAGS, "export flags: %d", ret);
	ret = fi_cq_export_xpu(cq, 0, &xcq);
	CHECK(ret == 0, "cq export: %d", ret);
	CHECK(xcq.fid.fclass == FI_CLASS_CQ && xcq.fid.prov_id ==
	      FI_XPU_PROV_SHM && xcq.fid.prov_ctx, "cq handle");
	ret = fi_cq_export_xpu(cq, 0, &xcq);
	CHECK(ret == -FI_EALREADY, "cq exported twice: %d", ret);
	ret = fi_cntr_export_xpu(cn, 0, &xcn);
	CHECK(ret == 0, "cntr export: %d", ret);
	CHECK(xcn.fid.fclass == FI_CLASS_CNTR && xcn.fid.prov_id ==
	      FI_XPU_PROV_SHM, "cntr handle");
	ret = fi_cntr_export_xpu(cn, 0, &xcn);
	CHECK(ret == -FI_EALREADY, "cntr exported twice: %d", ret);

	/* Device side on the library's memory: empty and zero. */
	ret = (int)fi_xpu_cq_read(&xcq, &e, 1, FI_XPU_WORK_ITEM);
	CHECK(ret == -FI_EAGAIN, "device read of an empty CQ: %d", ret);
	ret = (int)fi_xpu_cq_readerr(&xcq, &ee, 0, FI_XPU_WORK_ITEM);
	CHECK(ret == -FI_EAGAIN, "device readerr of an empty CQ: %d", ret);
	CHECK(fi_xpu_cntr_read(&xcn, FI_XPU_WORK_ITEM) == 0, "cntr 0");
	ret = fi_xpu_cntr_wait(&xcn, 1, 10, FI_XPU_WORK_ITEM);
	CHECK(ret == -FI_ETIMEDOUT, "device wait: %d", ret);

	/* The context may go first: the exported memory stays usable until
	 * its object is closed. */
	CHECK(fi_close(&(*ctx2p)->fid) == 0, "close ctx2 before its objects");
	*ctx2p = NULL;
	CHECK(fi_xpu_cq_read(&xcq, &e, 1, FI_XPU_WORK_ITEM) == -FI_EAGAIN,
	      "exported CQ after its context closed");
	CHECK(fi_xpu_cntr_read(&xcn, FI_XPU_WORK_ITEM) == 0, "cntr still 0");
	CHECK(fi_close(&cq->fid) == 0, "close exported cq");
	CHECK(fi_close(&cn->fid) == 0, "close exported cntr");
}

static void contexts(uint32_t version)
{
	struct fi_xpu_ops ops = { sizeof(ops), t_alloc, t_import, t_free };
	struct fi_xpu_attr attr = { FI_HMEM_SYSTEM, 0, NULL };
	struct fi_xpu_ctx_attr q;
	struct fid_xpu_ctx *ctx = NULL, *ctx2 = NULL;
	struct res r;
	int ret, ctxval = 7;

	ret = open_res(version, FI_TAGGED | FI_XPU, &r);
	CHECK(ret == 0, "open with FI_XPU: %d", ret);
	if (ret)
		return;
	CHECK(r.info->caps & FI_XPU, "FI_XPU offered");
	CHECK(r.info->domain_attr->max_xpu_ctx_cnt > 0, "max_xpu_ctx_cnt > 0");

	ret = fi_xpu_ctx(r.domain, NULL, &ctx, NULL);
	CHECK(ret == -FI_EINVAL, "NULL attr: %d", ret);
	ret = fi_xpu_ctx(r.domain, &attr, NULL, NULL);
	CHECK(ret == -FI_EINVAL, "NULL ctx out: %d", ret);
	attr.iface = FI_HMEM_CUDA;
	ret = fi_xpu_ctx(r.domain, &attr, &ctx, NULL);
	CHECK(ret == -FI_EOPNOTSUPP, "CUDA iface: %d", ret);
	attr.iface = FI_HMEM_SYSTEM;
	attr.device = 3;
	ret = fi_xpu_ctx(r.domain, &attr, &ctx, NULL);
	CHECK(ret == -FI_EINVAL, "device 3: %d", ret);
	attr.device = 0;
	attr.ops = &ops;
	ops.size = sizeof(ops) - 8;
	ret = fi_xpu_ctx(r.domain, &attr, &ctx, NULL);
	CHECK(ret == -FI_EINVAL, "short ops->size: %d", ret);
	ops.size = 0;
	ret = fi_xpu_ctx(r.domain, &attr, &ctx, NULL);
	CHECK(ret == -FI_EINVAL, "ops->size 0: %d", ret);
	ops.size = sizeof(ops);
	ops.free = NULL;
	ret = fi_xpu_ctx(r.domain, &attr, &ctx, NULL);
	CHECK(ret == -FI_EINVAL, "alloc without free: %d", ret);
	ops.free = t_free;
	CHECK(calls == 0, "no callback called while validating (%d)", calls);

	ret = fi_xpu_ctx(r.domain, &attr, &ctx, &ctxval);
	CHECK(ret == 0 && ctx, "ctx with ops: %d", ret);
	if (ret)
		goto out;
	CHECK(ctx->fid.fclass == FI_CLASS_XPU_CTX, "fclass");
	CHECK(ctx->fid.context == &ctxval, "context stored");
	memset(&q, 0xff, sizeof(q));
	ret = fi_xpu_ctx_query(ctx, &q);
	CHECK(ret == 0, "query: %d", ret);
	CHECK(q.caps == (FI_XPU_CAP_EP | FI_XPU_CAP_CQ | FI_XPU_CAP_CNTR),
	      "caps %#llx", (unsigned long long)q.caps);
	CHECK(q.av_addr_size == 8 && q.mr_desc_size == 8, "sizes %zu %zu",
	      q.av_addr_size, q.mr_desc_size);
	ret = fi_xpu_ctx_query(ctx, NULL);
	CHECK(ret == -FI_EINVAL, "query NULL attr: %d", ret);

	attr.ops = NULL;
	ret = fi_xpu_ctx(r.domain, &attr, &ctx2, NULL);
	CHECK(ret == 0 && ctx2, "ctx without ops: %d", ret);

	exports(&r, ctx, &ctx2);

	ret = fi_close(&r.domain->fid);
	CHECK(ret == -FI_EBUSY, "domain with live contexts: %d", ret);
	CHECK(fi_close(&ctx->fid) == 0, "close ctx");
	if (ctx2)
		CHECK(fi_close(&ctx2->fid) == 0, "close ctx2");
	CHECK(calls == 2, "two failed allocs, nothing else (%d)", calls);
	calls = 0;
out:
	close_res(&r);
}

int main(void)
{
	plain_has_no_xpu();
	contexts(FI_VERSION(2, 8));
	contexts(FI_VERSION(2, 7));	/* old import shape: ctx still opens */
	printf("%d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}
