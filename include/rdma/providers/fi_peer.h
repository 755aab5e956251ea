/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * rfabric: peer provider interfaces.  One provider (the owner) shares
 * its AV, CQ, counter, domain, EQ or shared receive context with another
 * (the peer) by passing one of the *_context structures below as the
 * context argument of the peer's open call together with FI_PEER.
 */

#ifndef FI_PEER_H
#define FI_PEER_H

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>

#ifdef __cplusplus
extern "C" {
#endif

struct fid_peer_av;
struct fid_peer_av_set;
struct fi_peer_av_set;
struct fid_peer_cq;
struct fid_peer_cntr;
struct fid_peer_srx;
struct fi_peer_rx_entry;
struct fi_peer_match_attr;

/* Address vectors */
struct fi_ops_av_owner {
	size_t	size;
	int	(*query)(struct fid_peer_av *, struct fi_av_attr *);
	fi_addr_t	(*ep_addr)(struct fid_peer_av *, struct fid_ep *);
};

struct fid_peer_av {
	struct fid	fid;
	struct fi_ops_av_owner	*owner_ops;
};

struct fi_peer_av_context {
	size_t	size;
	struct fid_peer_av	*av;
};

/* Address vector sets */
struct fi_ops_av_set_owner {
	size_t	size;
	int	(*members)(struct fid_peer_av_set *, fi_addr_t *, size_t *);
};

struct fid_peer_av_set {
	struct fid	fid;
	struct fi_ops_av_set_owner	*owner_ops;
};

struct fi_peer_av_set_context {
	size_t	size;
	struct fi_peer_av_set	*av_set;
};

/* Completion queues: the peer writes its completions into the owner's. */
struct fi_ops_cq_owner {
	size_t	size;
	ssize_t	(*write)(struct fid_peer_cq *, void *, uint64_t, size_t,
			void *, uint64_t, uint64_t, fi_addr_t);
	ssize_t	(*writeerr)(struct fid_peer_cq *,
			const struct fi_cq_err_entry *);
};

struct fid_peer_cq {
	struct fid	fid;
	struct fi_ops_cq_owner	*owner_ops;
};

struct fi_peer_cq_context {
	size_t	size;
	struct fid_peer_cq	*cq;
};

/* Counters */
struct fi_ops_cntr_owner {
	size_t	size;
	void	(*inc)(struct fid_peer_cntr *);
	void	(*incerr)(struct fid_peer_cntr *);
};

struct fid_peer_cntr {
	struct fid	fid;
	struct fi_ops_cntr_owner	*owner_ops;
};

struct fi_peer_cntr_context {
	size_t	size;
	struct fid_peer_cntr	*cntr;
};

/* Domains and event queues */
struct fi_peer_domain_context {
	size_t	size;
	struct fid_domain	*domain;
};

struct fi_peer_eq_context {
	size_t	size;
	struct fid_eq	*eq;
};

/* Shared receive contexts: one posted-receive queue for both providers. */
struct fi_peer_rx_entry {
	struct fid_peer_srx	*srx;
	fi_addr_t	addr;
	size_t	msg_size;
	uint64_t	tag;
	uint64_t	cq_data;
	uint64_t	flags;
	void	*context;
	size_t	count;
	void	**desc;
	void	*peer_context;
	void	*owner_context;
	struct iovec	*iov;
};

struct fi_peer_match_attr {
	fi_addr_t	addr;
	size_t	msg_size;
	uint64_t	tag;
};

struct fi_ops_srx_owner {
	size_t	size;
	int	(*get_msg)(struct fid_peer_srx *, struct fi_peer_match_attr *,
			struct fi_peer_rx_entry **);
	int	(*get_tag)(struct fid_peer_srx *, struct fi_peer_match_attr *,
			struct fi_peer_rx_entry **);
	int	(*queue_msg)(struct fi_peer_rx_entry *);
	int	(*queue_tag)(struct fi_peer_rx_entry *);
	void	(*foreach_unspec_addr)(struct fid_peer_srx *,
			fi_addr_t (*)(struct fi_peer_rx_entry *));
	void	(*free_entry)(struct fi_peer_rx_entry *);
};

struct fi_ops_srx_peer {
	size_t	size;
	int	(*start_msg)(struct fi_peer_rx_entry *);
	int	(*start_tag)(struct fi_peer_rx_entry *);
	int	(*discard_msg)(struct fi_peer_rx_entry *);
	int	(*discard_tag)(struct fi_peer_rx_entry *);
};

struct fid_peer_srx {
	struct fid_ep	ep_fid;
	struct fi_ops_srx_owner	*owner_ops;
	struct fi_ops_srx_peer	*peer_ops;
};

struct fi_peer_srx_context {
	size_t	size;
	struct fid_peer_srx	*srx;
};

/* Transfers completed by a peer on the owner's behalf. */
struct fi_ops_transfer_peer {
	size_t	size;
	ssize_t	(*complete)(struct fid_ep *, struct fi_cq_tagged_entry *,
			fi_addr_t);
	ssize_t	(*comperr)(struct fid_ep *, struct fi_cq_err_entry *);
};

struct fi_peer_transfer_context {
	size_t	size;
	struct fi_info	*info;
	struct fid_ep	*ep;
	struct fi_ops_transfer_peer	*peer_ops;
};

#ifdef __cplusplus
}
#endif

#endif /* FI_PEER_H */
