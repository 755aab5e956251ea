/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * rfabric: tagged messages.  A receive matches a send when
 * (send_tag & ~ignore) == (recv_tag & ~ignore).
 */

#ifndef FI_TAGGED_H
#define FI_TAGGED_H

#include <rdma/fabric.h>
#include <rdma/fi_endpoint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct fi_msg_tagged {
	const struct iovec	*msg_iov;
	void	**desc;
	size_t	iov_count;
	fi_addr_t	addr;
	uint64_t	tag;
	uint64_t	ignore;
	void	*context;
	uint64_t	data;
};

struct fi_ops_tagged {
	size_t	size;
	ssize_t	(*recv)(struct fid_ep *, void *, size_t, void *, fi_addr_t,
			uint64_t, uint64_t, void *);
	ssize_t	(*recvv)(struct fid_ep *, const struct iovec *, void **,
			size_t, fi_addr_t, uint64_t, uint64_t, void *);
	ssize_t	(*recvmsg)(struct fid_ep *, const struct fi_msg_tagged *,
			uint64_t);
	ssize_t	(*send)(struct fid_ep *, const void *, size_t, void *,
			fi_addr_t, uint64_t, void *);
	ssize_t	(*sendv)(struct fid_ep *, const struct iovec *, void **,
			size_t, fi_addr_t, uint64_t, void *);
	ssize_t	(*sendmsg)(struct fid_ep *, const struct fi_msg_tagged *,
			uint64_t);
	ssize_t	(*inject)(struct fid_ep *, const void *, size_t, fi_addr_t,
			uint64_t);
	ssize_t	(*senddata)(struct fid_ep *, const void *, size_t, void *,
			uint64_t, fi_addr_t, uint64_t, void *);
	ssize_t	(*injectdata)(struct fid_ep *, const void *, size_t, uint64_t,
			fi_addr_t, uint64_t);
};

/* An MPI tag in the low 32 bits and a payload id in the next 8: the tag
 * layout that FI_TAG_MPI-style matching expects. */
static inline uint64_t fi_tag_mpi(int tag, uint8_t payload_id)
{
	return ((uint64_t) payload_id << 32) | (uint64_t) (uint32_t) tag;
}

static inline ssize_t fi_trecv(struct fid_ep *ep, void *buf, size_t len,
			       void *desc, fi_addr_t src_addr, uint64_t tag,
			       uint64_t ignore, void *context)
{
	return ep->tagged->recv(ep, buf, len, desc, src_addr, tag, ignore,
				context);
}

static inline ssize_t fi_trecvv(struct fid_ep *ep, const struct iovec *iov,
				void **desc, size_t count, fi_addr_t src_addr,
				uint64_t tag, uint64_t ignore, void *context)
{
	return ep->tagged->recvv(ep, iov, desc, count, src_addr, tag, ignore,
				 context);
}

static inline ssize_t fi_trecvmsg(struct fid_ep *ep,
				  const struct fi_msg_tagged *msg,
				  uint64_t flags)
{
	return ep->tagged->recvmsg(ep, msg, flags);
}

static inline ssize_t fi_tsend(struct fid_ep *ep, const void *buf,
			       size_t len, void *desc, fi_addr_t dest_addr,
			       uint64_t tag, void *context)
{
	return ep->tagged->send(ep, buf, len, desc, dest_addr, tag, context);
}

static inline ssize_t fi_tsendv(struct fid_ep *ep, const struct iovec *iov,
				void **desc, size_t count,
				fi_addr_t dest_addr, uint64_t tag,
				void *context)
{
	return ep->tagged->sendv(ep, iov, desc, count, dest_addr, tag,
				 context);
}

static inline ssize_t fi_tsendmsg(struct fid_ep *ep,
				  const struct fi_msg_tagged *msg,
				  uint64_t flags)
{
	return ep->tagged->sendmsg(ep, msg, flags);
}

static inline ssize_t fi_tinject(struct fid_ep *ep, const void *buf,
				 size_t len, fi_addr_t dest_addr,
				 uint64_t tag)
{
	return ep->tagged->inject(ep, buf, len, dest_addr, tag);
}

static inline ssize_t fi_tsenddata(struct fid_ep *ep, const void *buf,
				   size_t len, void *desc, uint64_t data,
				   fi_addr_t dest_addr, uint64_t tag,
				   void *context)
{
	return ep->tagged->senddata(ep, buf, len, desc, data, dest_addr, tag,
				    context);
}

static inline ssize_t fi_tinjectdata(struct fid_ep *ep, const void *buf,
				     size_t len, uint64_t data,
				     fi_addr_t dest_addr, uint64_t tag)
{
	return ep->tagged->injectdata(ep, buf, len, data, dest_addr, tag);
}

#ifdef __cplusplus
}
#endif

#endif /* FI_TAGGED_H */
