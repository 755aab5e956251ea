/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * "XPU kernels" for the host XPU of the shm provider: host threads that use
 * only the functions of <rdma/fi_xpu_device.h> on exported handles.  The
 * Rust harness (harness/src/lib.rs) runs the host side and checks results.
 */
#include <rdma/fi_xpu_device.h>
#include <string.h>

/* The layout the Rust host side (rfabric_core::xpu) assumes. */
_Static_assert(sizeof(struct fi_xpu_shm_wqe) == 80, "wqe size");
_Static_assert(sizeof(struct fi_xpu_shm_cqe) == 64, "cqe size");
_Static_assert(sizeof(struct fi_xpu_shm_queue) ==
	       FI_XPU_SHM_QUEUE_ENTRIES_OFFSET, "queue header size");
_Static_assert(offsetof(struct fi_xpu_shm_queue, tail) == 64, "tail");
_Static_assert(offsetof(struct fi_xpu_shm_queue, head) == 128, "head");
_Static_assert(offsetof(struct fi_xpu_shm_cntr, value) == 64, "value");
_Static_assert(sizeof(struct fi_xpu_shm_cntr) == 80, "cntr size");

/* Spin until the post is accepted; -FI_EAGAIN means the queue is full. */
#define XK_RETRY(rc, call)                  \
	do {                                \
		(rc) = (call);              \
	} while ((rc) == -FI_EAGAIN)

/*
 * Post n tagged sends of len bytes each (buffer i at bufs + i * len, tag
 * tag_base + i, context ctx_base + i).  Does not wait for completions.
 */
int xk_tsend_n(const struct fid_xpu_ep *ep, const uint64_t *dest,
	       const char *bufs, size_t len, size_t n, uint64_t tag_base,
	       uintptr_t ctx_base, int scope)
{
	size_t i;
	int rc;

	for (i = 0; i < n; i++) {
		XK_RETRY(rc, fi_xpu_tsend(ep, bufs + i * len, len, NULL, dest,
					  tag_base + i,
					  (void *)(ctx_base + i), scope));
		if (rc)
			return rc;
	}
	return 0;
}

int xk_send(const struct fid_xpu_ep *ep, const uint64_t *dest,
	    const void *buf, size_t len, uintptr_t ctx, int scope)
{
	int rc;

	XK_RETRY(rc, fi_xpu_send(ep, buf, len, NULL, dest, (void *)ctx,
				 scope));
	return rc;
}

/* n RMA writes of len bytes from src + i*len to raddr + i*len. */
int xk_write_n(const struct fid_xpu_ep *ep, const uint64_t *dest,
	       const char *src, size_t len, size_t n, uint64_t raddr,
	       uint64_t key, uintptr_t ctx_base, int scope)
{
	size_t i;
	int rc;

	for (i = 0; i < n; i++) {
		XK_RETRY(rc, fi_xpu_write(ep, src + i * len, len, &key, dest,
					  raddr + i * len, key,
					  (void *)(ctx_base + i), scope));
		if (rc)
			return rc;
	}
	return 0;
}

/*
 * Read exactly n successful completions (polling), storing their contexts
 * and tags.  Returns 0, or the first error other than -FI_EAGAIN (for
 * example -FI_EAVAIL when an error completion is at the head).
 */
int xk_cq_read_n(const struct fid_xpu_cq *cq, uint64_t *ctxs,
		 uint64_t *tags, size_t n, int scope)
{
	struct fi_cq_tagged_entry e[4];
	size_t got = 0, want;
	ssize_t r, i;

	while (got < n) {
		want = n - got < 4 ? n - got : 4;
		r = fi_xpu_cq_read(cq, e, want, scope);
		if (r == -FI_EAGAIN)
			continue;
		if (r < 0)
			return (int)r;
		for (i = 0; i < r; i++, got++) {
			ctxs[got] = (uint64_t)(uintptr_t)e[i].op_context;
			if (tags)
				tags[got] = e[i].tag;
		}
	}
	return 0;
}

/* Poll until an error completion arrives; return its err and context. */
int xk_cq_readerr(const struct fid_xpu_cq *cq, uint64_t *ctx, int scope)
{
	struct fi_cq_tagged_entry e;
	struct fi_cq_err_entry err;
	ssize_t r;

	for (;;) {
		r = fi_xpu_cq_read(cq, &e, 1, scope);
		if (r == -FI_EAVAIL)
			break;
		if (r != -FI_EAGAIN)
			return -1000;	/* a success completion was not expected */
	}
	memset(&err, 0, sizeof(err));
	r = fi_xpu_cq_readerr(cq, &err, 0, scope);
	if (r != 1)
		return (int)r;
	*ctx = (uint64_t)(uintptr_t)err.op_context;
	return err.err;
}

int xk_cntr_wait(const struct fid_xpu_cntr *c, uint64_t threshold,
		 int timeout, int scope)
{
	return fi_xpu_cntr_wait(c, threshold, timeout, scope);
}

uint64_t xk_cntr_read(const struct fid_xpu_cntr *c, int scope)
{
	return fi_xpu_cntr_read(c, scope);
}

uint64_t xk_cntr_readerr(const struct fid_xpu_cntr *c, int scope)
{
	return fi_xpu_cntr_readerr(c, scope);
}

/*
 * Bad input: a foreign provider id gives -FI_ENOSYS, a bad scope
 * -FI_EINVAL, an empty CQ -FI_EAGAIN.  Returns 0 when all hold, else the
 * number of the check that failed.
 */
int xk_bad_input(const struct fid_xpu_ep *ep, const struct fid_xpu_cq *cq,
		 const struct fid_xpu_cntr *cntr)
{
	struct fid_xpu_ep fep = *ep;
	struct fid_xpu_cq fcq = *cq;
	struct fid_xpu_cntr fcn = *cntr;
	struct fi_cq_tagged_entry e;
	struct fi_cq_err_entry err;
	uint64_t dest = 0;
	char b = 0;

	fep.fid.prov_id = FI_XPU_PROV_EFA;
	fcq.fid.prov_id = FI_XPU_PROV_EFA;
	fcn.fid.prov_id = 77;
	if (fi_xpu_send(&fep, &b, 1, NULL, &dest, NULL, FI_XPU_WORK_ITEM) !=
	    -FI_ENOSYS)
		return 1;
	if (fi_xpu_tsend(&fep, &b, 1, NULL, &dest, 1, NULL,
			 FI_XPU_WORK_ITEM) != -FI_ENOSYS)
		return 2;
	if (fi_xpu_write(&fep, &b, 1, NULL, &dest, 0, 0, NULL,
			 FI_XPU_WORK_ITEM) != -FI_ENOSYS)
		return 3;
	if (fi_xpu_cq_read(&fcq, &e, 1, FI_XPU_WORK_ITEM) != -FI_ENOSYS)
		return 4;
	if (fi_xpu_cq_readerr(&fcq, &err, 0, FI_XPU_WORK_ITEM) != -FI_ENOSYS)
		return 5;
	if (fi_xpu_cntr_wait(&fcn, 1, 0, FI_XPU_WORK_ITEM) != -FI_ENOSYS)
		return 6;
	if (fi_xpu_send(ep, &b, 1, NULL, &dest, NULL, 9) != -FI_EINVAL)
		return 7;
	if (fi_xpu_cq_read(cq, &e, 1, -1) != -FI_EINVAL)
		return 8;
	if (fi_xpu_cq_read(cq, &e, 1, FI_XPU_DEVICE) != -FI_EAGAIN)
		return 9;
	if (fi_xpu_cq_readerr(cq, &err, 0, FI_XPU_SUBGROUP) != -FI_EAGAIN)
		return 10;
	if (fi_xpu_cntr_wait(cntr, fi_xpu_cntr_read(cntr, FI_XPU_WORK_ITEM) + 1,
			     20, FI_XPU_WORK_GROUP) != -FI_ETIMEDOUT)
		return 11;
	/* A handle whose queue is of the wrong kind is refused. */
	fep.fid.prov_id = FI_XPU_PROV_SHM;
	fep.fid.prov_ctx = cq->fid.prov_ctx;
	if (fi_xpu_send(&fep, &b, 1, NULL, &dest, NULL, FI_XPU_WORK_ITEM) !=
	    -FI_EINVAL)
		return 12;
	return 0;
}
