/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * rfabric: accelerator (XPU) initiated communication, host side.
 *
 * An application creates an XPU context on a domain for one accelerator
 * device, asks it which objects can be driven from device code, and then
 * exports endpoints, completion queues and counters as small handles
 * (struct fid_xpu_*) that it copies into device memory.
 */

#ifndef FI_XPU_H
#define FI_XPU_H

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Which device threads cooperate in issuing one operation. */
enum {
	FI_XPU_WORK_ITEM,
	FI_XPU_SUBGROUP,
	FI_XPU_WORK_GROUP,
	FI_XPU_DEVICE,
};

/* fi_xpu_ops.alloc flag: the memory must be exportable as a dma-buf. */
#define FI_XPU_ALLOC_DMABUF	(1ULL << 0)

/* fi_xpu_ops.import flags. */
#define FI_XPU_IMPORT_IOMEMORY	(1ULL << 0)	/* host_addr is device MMIO */
#define FI_XPU_IMPORT_DEVICEMAP	(1ULL << 1)	/* result used by kernels */
#define FI_XPU_IMPORT_DMABUF	(1ULL << 2)	/* fd names a dma-buf to map */

/*
 * Memory callbacks the application may lend the provider.  import takes
 * the extra fd argument: with FI_XPU_IMPORT_DMABUF it is the dma-buf to
 * map, otherwise it is -1.
 */
struct fi_xpu_ops {
	size_t	size;
	int	(*alloc)(uint64_t device, uint64_t size, uint64_t alignment,
			 uint64_t flags, void **addr, int *fd,
			 uint64_t *offset);
	int	(*import)(uint64_t device, void *host_addr, uint64_t size,
			  uint64_t flags, int fd, void **dev_addr);
	void	(*free)(uint64_t device, void *addr);
};

/* Input to fi_xpu_ctx(): the accelerator API and device to serve. */
struct fi_xpu_attr {
	enum fi_hmem_iface	iface;
	uint64_t	device;
	struct fi_xpu_ops	*ops;
};

/* fi_xpu_ctx_attr.caps bits. */
#define FI_XPU_CAP_EP		(1ULL << 0)
#define FI_XPU_CAP_CQ		(1ULL << 1)
#define FI_XPU_CAP_CNTR		(1ULL << 2)

/* Output of fi_xpu_ctx_query(). */
struct fi_xpu_ctx_attr {
	uint64_t	caps;
	size_t	av_addr_size;
	size_t	mr_desc_size;
};

struct fi_ops_xpu_ctx {
	size_t	size;
	int	(*query)(struct fid_xpu_ctx *, struct fi_xpu_ctx_attr *);
};

struct fid_xpu_ctx {
	struct fid	fid;
	struct fi_ops_xpu_ctx	*ops;
};

/* Provider ids stored in fid_xpu.prov_id for device-side dispatch. */
enum fi_xpu_provider {
	FI_XPU_PROV_EFA	= 1,
	FI_XPU_PROV_SHM	= 2,	/* rfabric extension */
};

/* Header of every exported handle, filled in by the export call. */
struct fid_xpu {
	uint32_t	fclass;
	uint32_t	prov_id;
	uint64_t	prov_ctx;
};

struct fid_xpu_ep {
	struct fid_xpu	fid;
};

struct fid_xpu_cq {
	struct fid_xpu	fid;
};

struct fid_xpu_cntr {
	struct fid_xpu	fid;
};

static inline int fi_xpu_ctx(struct fid_domain *domain,
			     struct fi_xpu_attr *attr,
			     struct fid_xpu_ctx **ctx, void *context)
{
	if (!FI_CHECK_OP(domain->ops, struct fi_ops_domain, xpu_ctx))
		return -FI_ENOSYS;
	return domain->ops->xpu_ctx(domain, attr, ctx, context);
}

static inline int fi_xpu_ctx_query(struct fid_xpu_ctx *ctx,
				   struct fi_xpu_ctx_attr *attr)
{
	return ctx->ops->query(ctx, attr);
}

#ifdef __cplusplus
}
#endif

#endif /* FI_XPU_H */
