/*
 * A program written the way applications of upstream libfabric are written:
 * it goes through the static inline wrappers of the rdma/ headers, so compiling it
 * proves that our headers offer those wrappers with compatible signatures.
 *
 * It is compiled (tests/abi/check_headers.sh), never run.  With
 * -DSAMPLE_NO_XPU the XPU part is left out, so the same file also compiles
 * against an upstream 1.x header set, which keeps the sample honest.
 */
#define _POSIX_C_SOURCE 200809L

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include <rdma/fabric.h>
#include <rdma/fi_atomic.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>
#include <rdma/fi_trigger.h>
#ifndef SAMPLE_NO_XPU
#include <rdma/fi_xpu.h>
#endif

#define CHECK(call)                                                        \
	do {                                                               \
		int ret_ = (int)(call);                                    \
		if (ret_ < 0) {                                            \
			fprintf(stderr, "%s: %s\n", #call,                 \
				fi_strerror(-ret_));                       \
			goto out;                                          \
		}                                                          \
	} while (0)

struct app {
	struct fi_info *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_eq *eq;
	struct fid_av *av;
	struct fid_cq *cq;
	struct fid_cntr *cntr;
	struct fid_ep *ep;
	struct fid_mr *mr;
	fi_addr_t peer;
	char buf[4096];
	uint64_t operand;
	uint64_t result;
};

static void close_fid(struct fid *f)
{
	if (f)
		(void)fi_close(f);
}

static int wait_one(struct app *a)
{
	struct fi_cq_tagged_entry comp;
	struct fi_cq_err_entry err;
	ssize_t n;

	do {
		n = fi_cq_read(a->cq, &comp, 1);
	} while (n == -FI_EAGAIN);
	if (n == -FI_EAVAIL) {
		memset(&err, 0, sizeof(err));
		if (fi_cq_readerr(a->cq, &err, 0) > 0)
			fprintf(stderr, "completion error: %s\n",
				fi_cq_strerror(a->cq, err.prov_errno,
					       err.err_data, NULL, 0));
		return -FI_EIO;
	}
	return n < 0 ? (int)n : 0;
}

static int data_path(struct app *a)
{
	struct iovec iov = { a->buf, sizeof(a->buf) };
	void *desc = fi_mr_desc(a->mr);
	uint64_t key = fi_mr_key(a->mr);
	struct fi_msg msg = {
		.msg_iov = &iov,
		.desc = &desc,
		.iov_count = 1,
		.addr = a->peer,
		.context = NULL,
		.data = 0,
	};
	struct fi_ioc ioc = { &a->operand, 1 };
	struct fi_ioc res = { &a->result, 1 };
	size_t count = 0;

	CHECK(fi_recv(a->ep, a->buf, sizeof(a->buf), desc, FI_ADDR_UNSPEC,
		      NULL));
	CHECK(fi_send(a->ep, a->buf, 64, desc, a->peer, NULL));
	CHECK(fi_sendmsg(a->ep, &msg, FI_COMPLETION));
	CHECK(fi_inject(a->ep, a->buf, 8, a->peer));
	CHECK(fi_senddata(a->ep, a->buf, 8, desc, 42, a->peer, NULL));
	CHECK(fi_trecv(a->ep, a->buf, sizeof(a->buf), desc, FI_ADDR_UNSPEC,
		       0x1234, 0, NULL));
	CHECK(fi_tsend(a->ep, a->buf, 64, desc, a->peer, 0x1234, NULL));
	CHECK(fi_tinject(a->ep, a->buf, 8, a->peer, 0x99));
	CHECK(fi_write(a->ep, a->buf, 64, desc, a->peer, 0, key, NULL));
	CHECK(fi_read(a->ep, a->buf, 64, desc, a->peer, 0, key, NULL));
	CHECK(fi_writedata(a->ep, a->buf, 64, desc, 7, a->peer, 0, key,
			   NULL));
	CHECK(fi_atomicvalid(a->ep, FI_UINT64, FI_SUM, &count));
	CHECK(fi_atomic(a->ep, &a->operand, 1, desc, a->peer, 0, key,
			FI_UINT64, FI_SUM, NULL));
	CHECK(fi_fetch_atomic(a->ep, &a->operand, 1, desc, &a->result, desc,
			      a->peer, 0, key, FI_UINT64, FI_SUM, NULL));
	CHECK(fi_compare_atomic(a->ep, &a->operand, 1, desc, &a->operand,
				desc, &a->result, desc, a->peer, 0, key,
				FI_UINT64, FI_CSWAP, NULL));
	(void)ioc;
	(void)res;
	CHECK(wait_one(a));
	printf("completed %llu, errors %llu\n",
	       (unsigned long long)fi_cntr_read(a->cntr),
	       (unsigned long long)fi_cntr_readerr(a->cntr));
	CHECK(fi_cntr_wait(a->cntr, 1, 1000));
	return 0;
out:
	return -1;
}

#ifndef SAMPLE_NO_XPU
static int my_alloc(uint64_t device, uint64_t size, uint64_t alignment,
		    uint64_t flags, void **addr, int *fd, uint64_t *offset)
{
	(void)device;
	(void)flags;
	if (posix_memalign(addr, alignment ? alignment : 64, size))
		return -FI_ENOMEM;
	*fd = -1;
	*offset = 0;
	return 0;
}

/* Takes the DMA-BUF fd that comes with FI_XPU_IMPORT_DMABUF. */
static int my_import(uint64_t device, void *host_addr, uint64_t size,
		     uint64_t flags, int fd, void **dev_addr)
{
	(void)device;
	(void)size;
	if ((flags & FI_XPU_IMPORT_DMABUF) && fd < 0)
		return -FI_EINVAL;
	*dev_addr = host_addr;
	return 0;
}

static void my_free(uint64_t device, void *addr)
{
	(void)device;
	free(addr);
}

static int xpu_path(struct app *a)
{
	struct fi_xpu_ops ops = {
		.size = sizeof(struct fi_xpu_ops),
		.alloc = my_alloc,
		.import = my_import,
		.free = my_free,
	};
	struct fi_xpu_attr attr = {
		.iface = FI_HMEM_SYSTEM,
		.device = 0,
		.ops = &ops,
	};
	struct fi_xpu_ctx_attr ctx_attr;
	struct fid_xpu_ctx *ctx = NULL;
	struct fid_xpu_ep xep;
	struct fid_xpu_cq xcq;
	struct fid_xpu_cntr xcntr;
	uint8_t raw_addr[64];
	uint8_t raw_desc[64];
	size_t len;
	int ret = -1;

	if (!a->info->domain_attr->max_xpu_ctx_cnt)
		return 0;
	CHECK(fi_xpu_ctx(a->domain, &attr, &ctx, NULL));
	CHECK(fi_xpu_ctx_query(ctx, &ctx_attr));
	if (ctx_attr.av_addr_size > sizeof(raw_addr) ||
	    ctx_attr.mr_desc_size > sizeof(raw_desc))
		goto out;
	if (ctx_attr.caps & FI_XPU_CAP_EP)
		CHECK(fi_ep_export_xpu(a->ep, 0, &xep));
	if (ctx_attr.caps & FI_XPU_CAP_CQ)
		CHECK(fi_cq_export_xpu(a->cq, 0, &xcq));
	if (ctx_attr.caps & FI_XPU_CAP_CNTR)
		CHECK(fi_cntr_export_xpu(a->cntr, 0, &xcntr));
	len = sizeof(raw_addr);
	CHECK(fi_av_lookup2(a->av, a->peer, raw_addr, &len, FI_XPU, ctx));
	len = sizeof(raw_desc);
	CHECK(fi_mr_get_xpu_desc(a->mr, raw_desc, &len, FI_XPU, ctx));
	printf("xpu provider %u\n", (unsigned)xep.fid.prov_id);
	ret = 0;
out:
	close_fid(ctx ? &ctx->fid : NULL);
	return ret;
}
#endif

int main(int argc, char **argv)
{
	struct app a;
	struct fi_info *hints;
	struct fi_cq_attr cq_attr;
	struct fi_av_attr av_attr;
	struct fi_cntr_attr cntr_attr;
	struct fi_eq_attr eq_attr;
	char name[64];
	size_t namelen = sizeof(name);
	char straddr[128];
	size_t strlen_ = sizeof(straddr);
	int ret = 1;

	memset(&a, 0, sizeof(a));
	hints = fi_allocinfo();
	if (!hints)
		return 1;
	hints->caps = FI_MSG | FI_TAGGED | FI_RMA | FI_ATOMIC;
	hints->ep_attr->type = FI_EP_RDM;
	hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR |
				      FI_MR_ALLOCATED | FI_MR_PROV_KEY;
	hints->mode = FI_CONTEXT;
	hints->fabric_attr->prov_name = strdup(argc > 1 ? argv[1] : "shm");

	CHECK(fi_getinfo(FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION), NULL,
			 NULL, 0, hints, &a.info));
	printf("%s", fi_tostr(a.info, FI_TYPE_INFO));
	CHECK(fi_fabric(a.info->fabric_attr, &a.fabric, NULL));

	memset(&eq_attr, 0, sizeof(eq_attr));
	eq_attr.wait_obj = FI_WAIT_UNSPEC;
	CHECK(fi_eq_open(a.fabric, &eq_attr, &a.eq, NULL));
	CHECK(fi_domain(a.fabric, a.info, &a.domain, NULL));

	memset(&cq_attr, 0, sizeof(cq_attr));
	cq_attr.format = FI_CQ_FORMAT_TAGGED;
	cq_attr.size = 128;
	CHECK(fi_cq_open(a.domain, &cq_attr, &a.cq, NULL));

	memset(&av_attr, 0, sizeof(av_attr));
	av_attr.type = FI_AV_TABLE;
	CHECK(fi_av_open(a.domain, &av_attr, &a.av, NULL));

	memset(&cntr_attr, 0, sizeof(cntr_attr));
	cntr_attr.events = FI_CNTR_EVENTS_COMP;
	CHECK(fi_cntr_open(a.domain, &cntr_attr, &a.cntr, NULL));

	CHECK(fi_mr_reg(a.domain, a.buf, sizeof(a.buf),
			FI_SEND | FI_RECV | FI_READ | FI_WRITE |
				FI_REMOTE_READ | FI_REMOTE_WRITE,
			0, 0, 0, &a.mr, NULL));

	CHECK(fi_endpoint(a.domain, a.info, &a.ep, NULL));
	CHECK(fi_ep_bind(a.ep, &a.av->fid, 0));
	CHECK(fi_ep_bind(a.ep, &a.cq->fid, FI_TRANSMIT | FI_RECV));
	CHECK(fi_ep_bind(a.ep, &a.cntr->fid, FI_SEND | FI_WRITE | FI_READ));
	CHECK(fi_enable(a.ep));
	CHECK(fi_getname(&a.ep->fid, name, &namelen));
	CHECK(fi_av_insert(a.av, name, 1, &a.peer, 0, NULL));
	(void)fi_av_straddr(a.av, name, straddr, &strlen_);
	printf("self at %s\n", straddr);

	CHECK(data_path(&a));
#ifndef SAMPLE_NO_XPU
	CHECK(xpu_path(&a));
#endif
	ret = 0;
out:
	close_fid(a.ep ? &a.ep->fid : NULL);
	close_fid(a.mr ? &a.mr->fid : NULL);
	close_fid(a.cntr ? &a.cntr->fid : NULL);
	close_fid(a.av ? &a.av->fid : NULL);
	close_fid(a.cq ? &a.cq->fid : NULL);
	close_fid(a.domain ? &a.domain->fid : NULL);
	close_fid(a.eq ? &a.eq->fid : NULL);
	close_fid(a.fabric ? &a.fabric->fid : NULL);
	fi_freeinfo(a.info);
	fi_freeinfo(hints);
	return ret;
}
