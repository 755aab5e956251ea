/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * rfabric: accelerator (XPU) initiated communication, device side.
 *
 * Functions that device code calls on the handles filled by
 * fi_ep_export_xpu(), fi_cq_export_xpu() and fi_cntr_export_xpu().  Each
 * dispatches on fid_xpu.prov_id; this header implements FI_XPU_PROV_SHM
 * (the shm provider, whose "device" is the host: device code is ordinary
 * host threads) and answers -FI_ENOSYS for any other provider id.
 *
 * The shm objects are plain-memory queues that the provider places in
 * memory reachable from the device (obtained through fi_xpu_ops.alloc or,
 * without callbacks, from the provider's own shared mappings):
 *
 *   endpoint  a bounded multi-producer work queue: device threads claim a
 *             slot by advancing `tail` with compare-and-swap, fill it, and
 *             publish it by storing the slot's sequence number with release
 *             order; then they add one to the context's doorbell word (also
 *             release).  The host proxy reads the sequence with acquire
 *             order, so every byte of the entry written before the publish
 *             is visible to it, runs the operation on the real endpoint and
 *             hands the slot back by storing seq = position + capacity
 *             (release).
 *   CQ        the same queue in the other direction: the host proxy is the
 *             producer, device threads are consumers that claim an entry by
 *             advancing `head` with compare-and-swap after seeing its
 *             sequence (acquire), copy it out, and return the slot (release).
 *   counter   two 64-bit words the host proxy increases with release order;
 *             device code reads them with acquire order, so data written by
 *             the operations a counter value accounts for is visible once
 *             that value is seen.
 *
 * Memory ordering summary: every publish is a release store, every observe
 * an acquire load, claims are relaxed compare-and-swap on the queue indices
 * (ordering is carried by the per-slot sequence number, not by the index).
 * A buffer passed to fi_xpu_send/tsend/write must not be modified until its
 * completion (CQ entry or counter increment) has been observed.
 *
 * Without an accelerator compiler FI_XPU_FUNC is `static inline` and the
 * atomics are C11 <stdatomic.h> (GCC/Clang __atomic builtins in C++).  An accelerator toolchain supplies its own
 * FI_XPU_FUNC and FI_XPU_ATOMIC_* macros before including this header.
 */

#ifndef FI_XPU_DEVICE_H
#define FI_XPU_DEVICE_H

#include <stddef.h>
#include <stdint.h>
#include <rdma/fi_xpu.h>
#include <rdma/fi_errno.h>

#ifndef FI_XPU_FUNC
#if defined(__CUDACC__) || defined(__HIPCC__)
#define FI_XPU_FUNC static inline __device__
#else
#define FI_XPU_FUNC static inline
#endif
#endif

#if !defined(FI_XPU_ATOMIC_LOAD) && defined(__cplusplus)
/* C++ (GCC, Clang): the same operations through the __atomic builtins on
 * plain 64-bit words, which have the layout of the C11 _Atomic ones. */
#include <time.h>
#define FI_XPU_MO_relaxed __ATOMIC_RELAXED
#define FI_XPU_MO_acquire __ATOMIC_ACQUIRE
#define FI_XPU_MO_release __ATOMIC_RELEASE
#define FI_XPU_ATOMIC_U64 uint64_t
#define FI_XPU_ATOMIC_LOAD(p, mo) __atomic_load_n((p), FI_XPU_MO_##mo)
#define FI_XPU_ATOMIC_STORE(p, v, mo) \
	__atomic_store_n((p), (v), FI_XPU_MO_##mo)
#define FI_XPU_ATOMIC_ADD(p, v, mo) \
	__atomic_fetch_add((p), (v), FI_XPU_MO_##mo)
#define FI_XPU_ATOMIC_CAS(p, expected, desired) \
	__atomic_compare_exchange_n((p), (expected), (desired), 1, \
		__ATOMIC_RELAXED, __ATOMIC_RELAXED)
#endif

#ifndef FI_XPU_ATOMIC_LOAD
#include <stdatomic.h>
#include <time.h>
#define FI_XPU_ATOMIC_U64 _Atomic uint64_t
#define FI_XPU_ATOMIC_LOAD(p, mo) atomic_load_explicit((p), memory_order_##mo)
#define FI_XPU_ATOMIC_STORE(p, v, mo) \
	atomic_store_explicit((p), (v), memory_order_##mo)
#define FI_XPU_ATOMIC_ADD(p, v, mo) \
	atomic_fetch_add_explicit((p), (v), memory_order_##mo)
#define FI_XPU_ATOMIC_CAS(p, expected, desired) \
	atomic_compare_exchange_weak_explicit((p), (expected), (desired), \
		memory_order_relaxed, memory_order_relaxed)
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ---- shm queue layout (shared with the provider; version 1) ---------- */

#define FI_XPU_SHM_EP_MAGIC	0x3170655f75707866ULL	/* "fxpu_ep1" */
#define FI_XPU_SHM_CQ_MAGIC	0x3171635f75707866ULL	/* "fxpu_cq1" */
#define FI_XPU_SHM_CNTR_MAGIC	0x3163635f75707866ULL	/* "fxpu_cc1" */

/* Work request opcodes. */
#define FI_XPU_SHM_OP_SEND	1
#define FI_XPU_SHM_OP_TSEND	2
#define FI_XPU_SHM_OP_WRITE	3

/* One work request (80 bytes). */
struct fi_xpu_shm_wqe {
	FI_XPU_ATOMIC_U64	seq;
	uint32_t	op;
	uint32_t	flags;
	uint64_t	buf;		/* source address */
	uint64_t	len;
	uint64_t	dest;		/* raw address from fi_av_lookup2 */
	uint64_t	tag;
	uint64_t	raddr;		/* RMA target address */
	uint64_t	key;		/* RMA key */
	uint64_t	context;	/* op_context of the completion */
	uint64_t	desc;		/* raw descriptor (first 8 bytes) */
};

/* One completion (64 bytes): fi_cq_tagged_entry plus an error code. */
struct fi_xpu_shm_cqe {
	FI_XPU_ATOMIC_U64	seq;
	uint64_t	op_context;
	uint64_t	flags;
	uint64_t	len;
	uint64_t	buf;
	uint64_t	data;
	uint64_t	tag;
	int32_t		err;		/* 0, or a positive FI_E* value */
	int32_t		prov_errno;
};

/* Queue indices, each on its own cache line. */
struct fi_xpu_shm_queue {
	uint64_t	magic;
	uint64_t	mask;		/* capacity - 1, capacity a power of two */
	uint64_t	doorbell;	/* device address of the doorbell word (EP) */
	uint64_t	reserved[5];
	FI_XPU_ATOMIC_U64	tail;	/* next position producers claim */
	uint64_t	pad0[7];
	FI_XPU_ATOMIC_U64	head;	/* next position consumers claim */
	uint64_t	pad1[7];
	/* capacity entries follow at offset 192 */
};

#define FI_XPU_SHM_QUEUE_ENTRIES_OFFSET	192

struct fi_xpu_shm_cntr {
	uint64_t	magic;
	uint64_t	reserved[7];
	FI_XPU_ATOMIC_U64	value;
	FI_XPU_ATOMIC_U64	err;
};

FI_XPU_FUNC struct fi_xpu_shm_wqe *
fi_xpu_shm_wqe_at(struct fi_xpu_shm_queue *q, uint64_t pos)
{
	return (struct fi_xpu_shm_wqe *)((char *)q +
		FI_XPU_SHM_QUEUE_ENTRIES_OFFSET) + (pos & q->mask);
}

FI_XPU_FUNC struct fi_xpu_shm_cqe *
fi_xpu_shm_cqe_at(struct fi_xpu_shm_queue *q, uint64_t pos)
{
	return (struct fi_xpu_shm_cqe *)((char *)q +
		FI_XPU_SHM_QUEUE_ENTRIES_OFFSET) + (pos & q->mask);
}

FI_XPU_FUNC int fi_xpu_scope_ok(int scope)
{
	return scope >= FI_XPU_WORK_ITEM && scope <= FI_XPU_DEVICE;
}

/*
 * Post one work request.  On the host XPU every calling thread is its own
 * group, so each call posts exactly one request whatever the scope.
 */
FI_XPU_FUNC int fi_xpu_shm_post(const struct fid_xpu_ep *ep, uint32_t op,
				const void *buf, size_t len, uint64_t desc,
				uint64_t dest, uint64_t tag, uint64_t raddr,
				uint64_t key, void *context)
{
	struct fi_xpu_shm_queue *q =
		(struct fi_xpu_shm_queue *)(uintptr_t)ep->fid.prov_ctx;
	struct fi_xpu_shm_wqe *e;
	uint64_t pos, seq;

	if (!q || q->magic != FI_XPU_SHM_EP_MAGIC)
		return -FI_EINVAL;
	pos = FI_XPU_ATOMIC_LOAD(&q->tail, relaxed);
	for (;;) {
		e = fi_xpu_shm_wqe_at(q, pos);
		seq = FI_XPU_ATOMIC_LOAD(&e->seq, acquire);
		if (seq == pos) {
			if (FI_XPU_ATOMIC_CAS(&q->tail, &pos, pos + 1))
				break;	/* slot is ours */
			/* pos was reloaded by the failed exchange */
		} else if ((int64_t)(seq - pos) < 0) {
			return -FI_EAGAIN;	/* full: host has not drained */
		} else {
			pos = FI_XPU_ATOMIC_LOAD(&q->tail, relaxed);
		}
	}
	e->op = op;
	e->flags = 0;
	e->buf = (uint64_t)(uintptr_t)buf;
	e->len = len;
	e->dest = dest;
	e->tag = tag;
	e->raddr = raddr;
	e->key = key;
	e->context = (uint64_t)(uintptr_t)context;
	e->desc = desc;
	/* Publish the entry, then ring the doorbell. */
	FI_XPU_ATOMIC_STORE(&e->seq, pos + 1, release);
	if (q->doorbell)
		FI_XPU_ATOMIC_ADD((FI_XPU_ATOMIC_U64 *)(uintptr_t)q->doorbell,
				  1, release);
	return 0;
}

FI_XPU_FUNC uint64_t fi_xpu_shm_desc(const void *desc)
{
	uint64_t d = 0;
	const unsigned char *s = (const unsigned char *)desc;
	unsigned i;

	if (!desc)
		return 0;
	for (i = 0; i < sizeof(d); i++)
		d |= (uint64_t)s[i] << (8 * i);
	return d;
}

FI_XPU_FUNC uint64_t fi_xpu_shm_addr(const void *dest_addr)
{
	return fi_xpu_shm_desc(dest_addr);
}

/*
 * fi_xpu_send: post a message send of len bytes at buf to dest_addr (the
 * raw address fi_av_lookup2 wrote, av_addr_size bytes).  desc is the raw
 * descriptor from fi_mr_get_xpu_desc or NULL.  Returns 0, -FI_EAGAIN when
 * the work queue is full, -FI_EINVAL for a bad handle or scope,
 * -FI_ENOSYS for a provider this header does not implement.
 */
FI_XPU_FUNC int fi_xpu_send(const struct fid_xpu_ep *ep, const void *buf,
			    size_t len, const void *desc,
			    const void *dest_addr, void *context, int scope)
{
	if (ep->fid.prov_id != FI_XPU_PROV_SHM)
		return -FI_ENOSYS;
	if (!fi_xpu_scope_ok(scope))
		return -FI_EINVAL;
	return fi_xpu_shm_post(ep, FI_XPU_SHM_OP_SEND, buf, len,
			       fi_xpu_shm_desc(desc),
			       fi_xpu_shm_addr(dest_addr), 0, 0, 0, context);
}

/* fi_xpu_tsend: as fi_xpu_send, carrying tag. */
FI_XPU_FUNC int fi_xpu_tsend(const struct fid_xpu_ep *ep, const void *buf,
			     size_t len, const void *desc,
			     const void *dest_addr, uint64_t tag,
			     void *context, int scope)
{
	if (ep->fid.prov_id != FI_XPU_PROV_SHM)
		return -FI_ENOSYS;
	if (!fi_xpu_scope_ok(scope))
		return -FI_EINVAL;
	return fi_xpu_shm_post(ep, FI_XPU_SHM_OP_TSEND, buf, len,
			       fi_xpu_shm_desc(desc),
			       fi_xpu_shm_addr(dest_addr), tag, 0, 0, context);
}

/* fi_xpu_write: RMA write of len bytes at buf to (addr, key) at dest_addr. */
FI_XPU_FUNC int fi_xpu_write(const struct fid_xpu_ep *ep, const void *buf,
			     size_t len, const void *desc,
			     const void *dest_addr, uint64_t addr,
			     uint64_t key, void *context, int scope)
{
	if (ep->fid.prov_id != FI_XPU_PROV_SHM)
		return -FI_ENOSYS;
	if (!fi_xpu_scope_ok(scope))
		return -FI_EINVAL;
	return fi_xpu_shm_post(ep, FI_XPU_SHM_OP_WRITE, buf, len,
			       fi_xpu_shm_desc(desc),
			       fi_xpu_shm_addr(dest_addr), 0, addr, key,
			       context);
}

/*
 * Claim the next completion when want_err says it is of the wanted kind
 * (0: success entry, 1: error entry).  Returns 1 with *out filled, 0 when
 * the queue is empty, -FI_EAVAIL / -FI_EAGAIN when the next entry is of the
 * other kind.
 */
FI_XPU_FUNC int fi_xpu_shm_cq_take(const struct fid_xpu_cq *cq, int want_err,
				   struct fi_xpu_shm_cqe *out)
{
	struct fi_xpu_shm_queue *q =
		(struct fi_xpu_shm_queue *)(uintptr_t)cq->fid.prov_ctx;
	struct fi_xpu_shm_cqe *e;
	uint64_t pos, seq;

	if (!q || q->magic != FI_XPU_SHM_CQ_MAGIC)
		return -FI_EINVAL;
	pos = FI_XPU_ATOMIC_LOAD(&q->head, relaxed);
	for (;;) {
		e = fi_xpu_shm_cqe_at(q, pos);
		seq = FI_XPU_ATOMIC_LOAD(&e->seq, acquire);
		if (seq == pos + 1) {
			/*
			 * The entry is published and cannot be reused before
			 * some consumer returns it, which needs head to move
			 * past pos first: reading err here is race free.
			 */
			if ((e->err != 0) != (want_err != 0))
				return want_err ? -FI_EAGAIN : -FI_EAVAIL;
			if (FI_XPU_ATOMIC_CAS(&q->head, &pos, pos + 1))
				break;
		} else if ((int64_t)(seq - (pos + 1)) < 0) {
			return 0;	/* empty */
		} else {
			pos = FI_XPU_ATOMIC_LOAD(&q->head, relaxed);
		}
	}
	out->op_context = e->op_context;
	out->flags = e->flags;
	out->len = e->len;
	out->buf = e->buf;
	out->data = e->data;
	out->tag = e->tag;
	out->err = e->err;
	out->prov_errno = e->prov_errno;
	/* Hand the slot back to the producer. */
	FI_XPU_ATOMIC_STORE(&e->seq, pos + q->mask + 1, release);
	return 1;
}

/*
 * fi_xpu_cq_read: read up to count completions into buf, an array of
 * struct fi_cq_tagged_entry.  Returns the number read, -FI_EAGAIN when
 * none is ready, -FI_EAVAIL when the next one is an error (read it with
 * fi_xpu_cq_readerr).
 */
FI_XPU_FUNC ssize_t fi_xpu_cq_read(const struct fid_xpu_cq *cq, void *buf,
				   size_t count, int scope)
{
	struct fi_cq_tagged_entry *out = (struct fi_cq_tagged_entry *)buf;
	struct fi_xpu_shm_cqe e;
	size_t n = 0;
	int rc = 0;

	if (cq->fid.prov_id != FI_XPU_PROV_SHM)
		return -FI_ENOSYS;
	if (!fi_xpu_scope_ok(scope))
		return -FI_EINVAL;
	while (n < count) {
		rc = fi_xpu_shm_cq_take(cq, 0, &e);
		if (rc <= 0)
			break;
		out[n].op_context = (void *)(uintptr_t)e.op_context;
		out[n].flags = e.flags;
		out[n].len = e.len;
		out[n].buf = (void *)(uintptr_t)e.buf;
		out[n].data = e.data;
		out[n].tag = e.tag;
		n++;
	}
	if (n)
		return (ssize_t)n;
	return rc < 0 ? rc : -FI_EAGAIN;
}

/*
 * fi_xpu_cq_readerr: read one error completion.  Returns 1, or -FI_EAGAIN
 * when the next completion is not an error (or there is none).  err_data
 * is not provided on the host XPU (err_data_size 0).
 */
FI_XPU_FUNC ssize_t fi_xpu_cq_readerr(const struct fid_xpu_cq *cq,
				      struct fi_cq_err_entry *buf,
				      uint64_t flags, int scope)
{
	struct fi_xpu_shm_cqe e;
	int rc;

	(void)flags;
	if (cq->fid.prov_id != FI_XPU_PROV_SHM)
		return -FI_ENOSYS;
	if (!fi_xpu_scope_ok(scope))
		return -FI_EINVAL;
	rc = fi_xpu_shm_cq_take(cq, 1, &e);
	if (rc <= 0)
		return rc < 0 ? rc : -FI_EAGAIN;
	buf->op_context = (void *)(uintptr_t)e.op_context;
	buf->flags = e.flags;
	buf->len = e.len;
	buf->buf = (void *)(uintptr_t)e.buf;
	buf->data = e.data;
	buf->tag = e.tag;
	buf->olen = 0;
	buf->err = e.err;
	buf->prov_errno = e.prov_errno;
	buf->err_data = NULL;
	buf->err_data_size = 0;
	return 1;
}

/* fi_xpu_cntr_read: the counter's value (acquire). */
FI_XPU_FUNC uint64_t fi_xpu_cntr_read(const struct fid_xpu_cntr *cntr,
				      int scope)
{
	struct fi_xpu_shm_cntr *c =
		(struct fi_xpu_shm_cntr *)(uintptr_t)cntr->fid.prov_ctx;

	(void)scope;
	if (cntr->fid.prov_id != FI_XPU_PROV_SHM || !c ||
	    c->magic != FI_XPU_SHM_CNTR_MAGIC)
		return 0;
	return FI_XPU_ATOMIC_LOAD(&c->value, acquire);
}

/* fi_xpu_cntr_readerr: the counter's error count (acquire). */
FI_XPU_FUNC uint64_t fi_xpu_cntr_readerr(const struct fid_xpu_cntr *cntr,
					 int scope)
{
	struct fi_xpu_shm_cntr *c =
		(struct fi_xpu_shm_cntr *)(uintptr_t)cntr->fid.prov_ctx;

	(void)scope;
	if (cntr->fid.prov_id != FI_XPU_PROV_SHM || !c ||
	    c->magic != FI_XPU_SHM_CNTR_MAGIC)
		return 0;
	return FI_XPU_ATOMIC_LOAD(&c->err, acquire);
}

#ifndef FI_XPU_NOW_MS
FI_XPU_FUNC int64_t fi_xpu_now_ms(void)
{
	struct timespec ts;

#ifdef CLOCK_MONOTONIC
	clock_gettime(CLOCK_MONOTONIC, &ts);
#else
	timespec_get(&ts, TIME_UTC);	/* strict ISO C: no POSIX clocks */
#endif
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}
#define FI_XPU_NOW_MS() fi_xpu_now_ms()
#endif

/*
 * fi_xpu_cntr_wait: wait until the counter reaches threshold.  timeout in
 * milliseconds, negative to wait forever.  Returns 0, -FI_ETIMEDOUT, or
 * -FI_EAVAIL when the error count moved while waiting.
 */
FI_XPU_FUNC int fi_xpu_cntr_wait(const struct fid_xpu_cntr *cntr,
				 uint64_t threshold, int timeout, int scope)
{
	struct fi_xpu_shm_cntr *c =
		(struct fi_xpu_shm_cntr *)(uintptr_t)cntr->fid.prov_ctx;
	uint64_t err0;
	int64_t end = 0;

	if (cntr->fid.prov_id != FI_XPU_PROV_SHM)
		return -FI_ENOSYS;
	if (!fi_xpu_scope_ok(scope) || !c || c->magic != FI_XPU_SHM_CNTR_MAGIC)
		return -FI_EINVAL;
	err0 = FI_XPU_ATOMIC_LOAD(&c->err, acquire);
	if (timeout >= 0)
		end = FI_XPU_NOW_MS() + timeout;
	for (;;) {
		if (FI_XPU_ATOMIC_LOAD(&c->value, acquire) >= threshold)
			return 0;
		if (FI_XPU_ATOMIC_LOAD(&c->err, acquire) != err0)
			return -FI_EAVAIL;
		if (timeout >= 0 && FI_XPU_NOW_MS() >= end)
			return -FI_ETIMEDOUT;
	}
}

#ifdef __cplusplus
}
#endif

#endif /* FI_XPU_DEVICE_H */
