/* Bad input to the objects of the shm provider, one row per case, printed
 * as the Markdown table that docs/TESTING.md carries ("Bad input, call by
 * call"): the call, the input, what the call returned (and, for an
 * operation that reports through the CQ, its completion), the code the man
 * pages document for it, and where they say so. A row whose result differs
 * from the documented code fails the test; tests/c/bad_input_table.sh
 * fails too when the table in the docs is not the one printed here.
 *
 * Classes of input: NULL pointers, foreign fids (an ops table that is not
 * ours, or one of our objects of another class), unknown flags, too many
 * iovs, zero lengths, misaligned atomics, keys of closed memory regions,
 * and addresses that are not in the AV. Not tried: any call on a closed
 * fid (in C that is a use after free, undefined behaviour, so no return
 * code can be promised for it).
 *
 * One process, two endpoints (a sends, b receives and is the RMA target)
 * on one CQ and one AV. Built against our headers with -Wall -Wextra
 * -Werror, run under ASan/UBSan or valgrind by its script. */
#define _POSIX_C_SOURCE 200809L
#include <rdma/fabric.h>
#include <rdma/fi_atomic.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rows, bad;

/* The FI_E* name of a return value (0 and counts as numbers). */
static const char *code(long rc)
{
	static char ring[8][48];
	static int next;
	static const struct { int v; const char *n; } names[] = {
		{ FI_EINVAL, "FI_EINVAL" }, { FI_EBADFLAGS, "FI_EBADFLAGS" }, { FI_ENOSYS, "FI_ENOSYS" },
		{ FI_EAGAIN, "FI_EAGAIN" }, { FI_EAVAIL, "FI_EAVAIL" }, { FI_ETOOSMALL, "FI_ETOOSMALL" },
		{ FI_EKEYREJECTED, "FI_EKEYREJECTED" }, { FI_EACCES, "FI_EACCES" }, { FI_EMSGSIZE, "FI_EMSGSIZE" },
		{ FI_EOPNOTSUPP, "FI_EOPNOTSUPP" }, { FI_ENOENT, "FI_ENOENT" }, { FI_EBUSY, "FI_EBUSY" },
		{ FI_ENOMEM, "FI_ENOMEM" }, { FI_ENODATA, "FI_ENODATA" }, { FI_EADDRNOTAVAIL, "FI_EADDRNOTAVAIL" },
		{ FI_EOTHER, "FI_EOTHER" }, { FI_EIO, "FI_EIO" }, { FI_ECANCELED, "FI_ECANCELED" },
		{ FI_ENOKEY, "FI_ENOKEY" }, { FI_EOPBADSTATE, "FI_EOPBADSTATE" }, { FI_ENOAV, "FI_ENOAV" },
		{ FI_ENOCQ, "FI_ENOCQ" }, { FI_ETRUNC, "FI_ETRUNC" }, { FI_ECONNRESET, "FI_ECONNRESET" },
	};
	char *s = ring[next++ % 8];
	size_t i;
	for (i = 0; i < sizeof names / sizeof names[0]; i++)
		if (rc == -names[i].v) {
			snprintf(s, sizeof ring[0], "-%s", names[i].n);
			return s;
		}
	snprintf(s, sizeof ring[0], "%ld", rc);
	return s;
}

/* One row: `call` | input | returned | documented | where documented. */
static void row(const char *call, const char *input, const char *got, const char *want, const char *per)
{
	rows++;
	printf("| `%s` | %s | %s | %s | %s |\n", call, input, got, want, per);
	if (strcmp(got, want)) {
		bad++;
		fprintf(stderr, "NOT AS DOCUMENTED: %s (%s): returned %s, documented %s\n", call, input, got, want);
	}
}

#define ROW(call, input, rc, want, per) row(#call, input, code(rc), want, per)

static struct fid_cq *cq;

/* Contexts whose completion was already read, and how each ended. */
#define SEEN_MAX 256
static struct { void *ctx; int err; } seen[SEEN_MAX];
static int nseen;

/* Waits for the completion of `ctx`: 0, or minus its error code. */
static int completion(void *ctx)
{
	struct fi_cq_tagged_entry e;
	struct fi_cq_err_entry err;
	long i, rc;
	for (i = 0; i < 20000000; i++) {
		int k;
		for (k = 0; k < nseen; k++)
			if (seen[k].ctx == ctx)
				return seen[k].err;
		rc = fi_cq_read(cq, &e, 1);
		if (rc == 1 && nseen < SEEN_MAX) {
			seen[nseen].ctx = e.op_context;
			seen[nseen++].err = 0;
		} else if (rc == -FI_EAVAIL) {
			memset(&err, 0, sizeof err);
			if (fi_cq_readerr(cq, &err, 0) == 1 && nseen < SEEN_MAX) {
				seen[nseen].ctx = err.op_context;
				seen[nseen++].err = -err.err;
			}
		}
	}
	return -FI_EOTHER; /* no completion: shows as a mismatch */
}

/* "0, completion X" for an operation posted with context ctx, or the
 * call's own code when it failed. */
static const char *posted(long rc, void *ctx)
{
	static char ring[8][64];
	static int next;
	char *s = ring[next++ % 8];
	if (rc != 0)
		return code(rc);
	snprintf(s, sizeof ring[0], "0, completion %s", code(completion(ctx)));
	return s;
}

#define POSTED(call, input, rc, ctx, want, per) row(#call, input, posted(rc, ctx), want, per)

/* A foreign object: a fid whose fi_ops table is not ours. */
static int foreign_close(struct fid *f)
{
	(void) f;
	return 0;
}
static struct fi_ops foreign_ops = { .size = sizeof(struct fi_ops), .close = foreign_close };

int main(void)
{
	struct fi_info *hints = fi_allocinfo(), *info = NULL;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_av *av;
	struct fid_cntr *cntr;
	struct fid_ep *a, *b, *c3;
	struct fid_mr *mr, *gone;
	struct fi_cq_attr cq_attr = { .format = FI_CQ_FORMAT_TAGGED };
	struct fi_av_attr av_attr = { .type = FI_AV_TABLE };
	struct fi_cntr_attr cntr_attr = { .events = FI_CNTR_EVENTS_COMP };
	char name_a[64], name_b[64], name_c[64], buf[256];
	size_t len_a = sizeof name_a, len_b = sizeof name_b, len_c = sizeof name_c, len;
	fi_addr_t fa, fb, fc, nowhere = 12345, unset = 777;
	static uint64_t target[64], gone_buf[8];
	static uint64_t local[16];
	uint64_t key, gone_key, base, gone_base;
	struct iovec iov[64];
	struct fi_rma_iov riov[64];
	struct fi_ioc ioc[64];
	struct fi_rma_ioc rioc[64];
	void *desc[64] = { 0 };
	int ctx[64], c = 0, i, ret;
	size_t iov_limit, rma_iov_limit;
	/* Where calls that must fail would put a new object. */
	struct {
		struct fi_info *info;
		struct fid_fabric *fabric;
		struct fid_domain *domain;
		struct fid_cq *cq;
		struct fid_av *av;
		struct fid_mr *mr;
	} o;

	setvbuf(stdout, NULL, _IONBF, 0);
	hints->ep_attr->type = FI_EP_RDM;
	hints->caps = FI_MSG | FI_TAGGED | FI_RMA | FI_ATOMIC;
	hints->domain_attr->mr_mode = FI_MR_VIRT_ADDR | FI_MR_PROV_KEY | FI_MR_ALLOCATED;
	hints->fabric_attr->prov_name = strdup("shm");
	ret = fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &info);
	if (ret || fi_fabric(info->fabric_attr, &fabric, NULL) || fi_domain(fabric, info, &domain, NULL) ||
	    fi_cq_open(domain, &cq_attr, &cq, NULL) || fi_av_open(domain, &av_attr, &av, NULL) ||
	    fi_cntr_open(domain, &cntr_attr, &cntr, NULL) || fi_endpoint(domain, info, &a, NULL) ||
	    fi_endpoint(domain, info, &b, NULL) || fi_endpoint(domain, info, &c3, NULL)) {
		fprintf(stderr, "setup failed (%d)\n", ret);
		return 2;
	}
	iov_limit = info->tx_attr->iov_limit;
	rma_iov_limit = info->tx_attr->rma_iov_limit;
	if (fi_ep_bind(a, &av->fid, 0) || fi_ep_bind(b, &av->fid, 0) ||
	    fi_ep_bind(a, &cq->fid, FI_TRANSMIT | FI_RECV) || fi_ep_bind(b, &cq->fid, FI_TRANSMIT | FI_RECV) ||
	    fi_enable(a) || fi_enable(b) || fi_getname(&a->fid, name_a, &len_a) ||
	    fi_getname(&b->fid, name_b, &len_b) || fi_getname(&c3->fid, name_c, &len_c) ||
	    fi_av_insert(av, name_a, 1, &fa, 0, NULL) != 1 || fi_av_insert(av, name_b, 1, &fb, 0, NULL) != 1 ||
	    fi_av_insert(av, name_c, 1, &fc, 0, NULL) != 1 ||
	    fi_mr_reg(domain, target, sizeof target, FI_REMOTE_READ | FI_REMOTE_WRITE, 0, 0, 0, &mr, NULL) ||
	    fi_mr_reg(domain, gone_buf, sizeof gone_buf, FI_REMOTE_READ | FI_REMOTE_WRITE, 0, 0, 0, &gone, NULL)) {
		fprintf(stderr, "setup failed\n");
		return 2;
	}
	(void) fa;
	key = fi_mr_key(mr);
	base = (uint64_t) (uintptr_t) target;
	gone_key = fi_mr_key(gone);
	gone_base = (uint64_t) (uintptr_t) gone_buf;
	if (fi_close(&gone->fid)) {
		fprintf(stderr, "closing an MR failed\n");
		return 2;
	}
	for (i = 0; i < 64; i++) {
		iov[i].iov_base = buf;
		iov[i].iov_len = 1;
		riov[i].addr = base;
		riov[i].len = 1;
		riov[i].key = key;
		ioc[i].addr = local;
		ioc[i].count = 1;
		rioc[i].addr = base;
		rioc[i].count = 1;
		rioc[i].key = key;
	}

	printf("| call | input | returns | documented | where |\n");
	printf("| --- | --- | --- | --- | --- |\n");

	/* ---- NULL pointers */
	ROW(fi_getinfo, "`info` NULL", fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, NULL), "-FI_EINVAL", "fi_errno(3): invalid argument");
	ROW(fi_fabric, "`attr` NULL", fi_fabric(NULL, &o.fabric, NULL), "-FI_EINVAL", "fi_errno(3): invalid argument");
	ROW(fi_domain, "`info` NULL", fi_domain(fabric, NULL, &o.domain, NULL), "-FI_EINVAL", "fi_errno(3): invalid argument");
	ROW(fi_endpoint, "`ep` NULL", fi_endpoint(domain, info, NULL, NULL), "-FI_EINVAL", "fi_errno(3): invalid argument");
	ROW(fi_cq_open, "`attr` NULL", fi_cq_open(domain, NULL, &o.cq, NULL), "-FI_EINVAL", "fi_errno(3): invalid argument");
	ROW(fi_av_open, "`attr` NULL", fi_av_open(domain, NULL, &o.av, NULL), "-FI_EINVAL", "fi_errno(3): invalid argument");
	ROW(fi_mr_reg, "`buf` NULL, 64 bytes", fi_mr_reg(domain, NULL, 64, FI_REMOTE_READ, 0, 0, 0, &o.mr, NULL), "-FI_EINVAL", "fi_errno(3): invalid argument");
	ROW(fi_ep_bind, "`bfid` NULL", fi_ep_bind(a, NULL, FI_TRANSMIT), "-FI_EINVAL", "fi_errno(3): invalid argument");
	ROW(fi_send, "`buf` NULL, 16 bytes", fi_send(a, NULL, 16, NULL, fb, &ctx[c++]), "-FI_EINVAL", "fi_msg(3): only a 0-byte operation may leave `buf` out");
	ROW(fi_sendmsg, "`msg` NULL", fi_sendmsg(a, NULL, 0), "-FI_EINVAL", "fi_errno(3): invalid argument");
	ROW(fi_tsend, "`buf` NULL, 16 bytes", fi_tsend(a, NULL, 16, NULL, fb, 1, &ctx[c++]), "-FI_EINVAL", "fi_tagged(3)");
	ROW(fi_sendv, "`iov` NULL, count 2", fi_sendv(a, NULL, NULL, 2, fb, &ctx[c++]), "-FI_EINVAL", "fi_msg(3): only a 0-byte operation may leave `iov` out");
	ROW(fi_write, "`buf` NULL, 16 bytes", fi_write(a, NULL, 16, NULL, fb, base, key, &ctx[c++]), "-FI_EINVAL", "fi_rma(3): only a 0-byte operation may leave `buf` out");
	ROW(fi_atomic, "`buf` NULL, count 1", fi_atomic(a, NULL, 1, NULL, fb, base, key, FI_UINT64, FI_SUM, &ctx[c++]), "-FI_EINVAL", "fi_errno(3): invalid argument");
	ROW(fi_cq_read, "`buf` NULL, count 1", fi_cq_read(cq, NULL, 1), "-FI_EINVAL", "fi_errno(3): invalid argument");
	ROW(fi_cq_readerr, "`buf` NULL", fi_cq_readerr(cq, NULL, 0), "-FI_EINVAL", "fi_errno(3): invalid argument");
	ROW(fi_av_insert, "`addr` NULL, count 1", fi_av_insert(av, NULL, 1, NULL, 0, NULL), "-FI_EINVAL", "fi_errno(3): invalid argument");
	len = 0;
	ROW(fi_getname, "`addr` NULL, `*addrlen` 0", fi_getname(&a->fid, NULL, &len), "-FI_ETOOSMALL", "fi_cm(3): a buffer too small for the address");
	row("fi_getname", "(the same call) `*addrlen` afterwards", len == len_a ? "the address length" : "wrong", "the address length", "fi_cm(3)");
	ROW(fi_getname, "`addrlen` NULL", fi_getname(&a->fid, buf, NULL), "-FI_EINVAL", "fi_errno(3): invalid argument");
	ROW(fi_setname, "`addr` NULL", fi_setname(&a->fid, NULL, 0), "-FI_EINVAL", "fi_errno(3): invalid argument");

	/* ---- foreign fids */
	{
		struct fid_cq fcq = { .fid = { .fclass = FI_CLASS_CQ, .ops = &foreign_ops }, .ops = cq->ops };
		struct fid_ep fep = { .fid = { .fclass = FI_CLASS_EP, .ops = &foreign_ops }, .ops = a->ops, .cm = a->cm,
				      .msg = a->msg, .rma = a->rma, .tagged = a->tagged, .atomic = a->atomic };
		struct fid_av fav = { .fid = { .fclass = FI_CLASS_AV, .ops = &foreign_ops }, .ops = av->ops };
		struct fid_domain fdom = { .fid = { .fclass = FI_CLASS_DOMAIN, .ops = &foreign_ops }, .ops = domain->ops, .mr = domain->mr };
		struct fid *fids[1] = { &fcq.fid };
		ROW(fi_ep_bind, "a CQ whose ops are not ours", fi_ep_bind(a, &fcq.fid, FI_TRANSMIT), "-FI_EINVAL", "fi_errno(3): invalid argument");
		ROW(fi_ep_bind, "our memory region (not bindable to an endpoint)", fi_ep_bind(a, &mr->fid, FI_TRANSMIT), "-FI_EINVAL", "fi_errno(3): invalid argument");
		ROW(fi_send, "an endpoint whose ops are not ours (our send slot)", fi_send(&fep, buf, 8, NULL, fb, &ctx[c++]), "-FI_EINVAL", "fi_errno(3): invalid argument");
		ROW(fi_send, "our CQ passed as the endpoint", a->msg->send((struct fid_ep *) cq, buf, 8, NULL, fb, &ctx[c++]), "-FI_EINVAL", "fi_errno(3): invalid argument");
		ROW(fi_tsend, "an endpoint whose ops are not ours", fi_tsend(&fep, buf, 8, NULL, fb, 1, &ctx[c++]), "-FI_EINVAL", "fi_errno(3): invalid argument");
		ROW(fi_write, "an endpoint whose ops are not ours", fi_write(&fep, buf, 8, NULL, fb, base, key, &ctx[c++]), "-FI_EINVAL", "fi_errno(3): invalid argument");
		ROW(fi_atomic, "an endpoint whose ops are not ours", fi_atomic(&fep, local, 1, NULL, fb, base, key, FI_UINT64, FI_SUM, &ctx[c++]), "-FI_EINVAL", "fi_errno(3): invalid argument");
		ROW(fi_cq_read, "a CQ whose ops are not ours (our read slot)", fi_cq_read(&fcq, buf, 1), "-FI_EINVAL", "fi_errno(3): invalid argument");
		ROW(fi_av_insert, "an AV whose ops are not ours", fi_av_insert(&fav, name_b, 1, NULL, 0, NULL), "-FI_EINVAL", "fi_errno(3): invalid argument");
		ROW(fi_mr_reg, "a domain whose ops are not ours", fi_mr_reg(&fdom, target, 64, FI_REMOTE_READ, 0, 0, 0, &o.mr, NULL), "-FI_EINVAL", "fi_errno(3): invalid argument");
		ROW(fi_trywait, "a CQ whose ops are not ours", fi_trywait(fabric, fids, 1), "-FI_EINVAL", "fi_errno(3): invalid argument");
	}

	/* ---- unknown flags */
	ROW(fi_getinfo, "flag bit 3 (not defined)", fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 1ULL << 3, hints, &o.info), "-FI_EBADFLAGS", "fi_getinfo(3)");
	ROW(fi_mr_reg, "flag bit 62 (not defined)", fi_mr_reg(domain, target, 64, FI_REMOTE_READ, 0, 0, 1ULL << 62, &o.mr, NULL), "-FI_EBADFLAGS", "fi_mr(3)");
	{
		struct fi_cq_attr bad_cq = { .format = FI_CQ_FORMAT_TAGGED, .flags = 1ULL << 40 };
		struct fi_cntr_attr bad_cntr = { .events = FI_CNTR_EVENTS_COMP, .flags = 1ULL << 40 };
		struct fid_cq *x;
		struct fid_cntr *y;
		ROW(fi_cq_open, "`attr->flags` bit 40", fi_cq_open(domain, &bad_cq, &x, NULL), "-FI_EBADFLAGS", "fi_errno(3): flags not supported");
		ROW(fi_cntr_open, "`attr->flags` bit 40", fi_cntr_open(domain, &bad_cntr, &y, NULL), "-FI_EBADFLAGS", "fi_errno(3): flags not supported");
	}
	ROW(fi_ep_bind, "CQ with flag bit 50 (endpoint not enabled)", fi_ep_bind(c3, &cq->fid, FI_TRANSMIT | (1ULL << 50)), "-FI_EBADFLAGS", "fi_errno(3): flags not supported");
	ROW(fi_ep_bind, "CQ, endpoint already enabled", fi_ep_bind(a, &cq->fid, FI_TRANSMIT), "-FI_EOPBADSTATE", "fi_endpoint(3): state does not permit it");
	{
		fi_addr_t out = 0;
		ROW(fi_av_insert, "flag bit 50", fi_av_insert(av, name_b, 1, &out, 1ULL << 50, NULL), "0", "fi_av(3): returns how many were inserted");
		row("fi_av_insert", "(the same call) `fi_addr` afterwards", out == FI_ADDR_NOTAVAIL ? "`FI_ADDR_NOTAVAIL`" : "other",
		    "`FI_ADDR_NOTAVAIL`", "fi_av(3)");
	}
	ROW(fi_av_remove, "flag bit 50", fi_av_remove(av, &fc, 1, 1ULL << 50), "-FI_EBADFLAGS", "fi_errno(3): flags not supported");
	/* Operation flags: fi_msg(3)/fi_rma(3) name the flags an operation
	 * takes and give no code for others; bits that are no flag are ignored. */
	{
		struct fi_msg rm = { .msg_iov = iov, .desc = desc, .iov_count = 1, .addr = FI_ADDR_UNSPEC, .context = &ctx[c] };
		struct fi_msg sm = { .msg_iov = iov, .desc = desc, .iov_count = 1, .addr = fb, .context = &ctx[c + 1] };
		struct fi_msg_rma wm = { .msg_iov = iov, .desc = desc, .iov_count = 1, .addr = fb, .rma_iov = riov,
					 .rma_iov_count = 1, .context = &ctx[c + 2] };
		ROW(fi_recvmsg, "flag bit 50", fi_recvmsg(b, &rm, 1ULL << 50), "0", "fi_msg(3): no code for other bits");
		POSTED(fi_sendmsg, "flag bit 50", fi_sendmsg(a, &sm, 1ULL << 50), &ctx[c + 1], "0, completion 0", "fi_msg(3): no code for other bits");
		row("fi_recvmsg", "(the receive above) its completion", code(completion(&ctx[c])), "0", "fi_msg(3)");
		POSTED(fi_writemsg, "flag bit 50", fi_writemsg(a, &wm, 1ULL << 50), &ctx[c + 2], "0, completion 0", "fi_rma(3): no code for other bits");
		c += 3;
	}

	/* ---- too many iovs */
	snprintf(buf, sizeof buf, "count = `iov_limit` + 1 (%zu)", iov_limit + 1);
	ROW(fi_sendv, buf, fi_sendv(a, iov, desc, iov_limit + 1, fb, &ctx[c++]), "-FI_EINVAL", "fi_endpoint(3) `iov_limit`");
	ROW(fi_recvv, buf, fi_recvv(b, iov, desc, iov_limit + 1, FI_ADDR_UNSPEC, &ctx[c++]), "-FI_EINVAL", "fi_endpoint(3) `iov_limit`");
	ROW(fi_tsendv, buf, fi_tsendv(a, iov, desc, iov_limit + 1, fb, 1, &ctx[c++]), "-FI_EINVAL", "fi_endpoint(3) `iov_limit`");
	ROW(fi_writev, buf, fi_writev(a, iov, desc, iov_limit + 1, fb, base, key, &ctx[c++]), "-FI_EINVAL", "fi_endpoint(3) `iov_limit`");
	ROW(fi_atomicv, buf, fi_atomicv(a, ioc, desc, iov_limit + 1, fb, base, key, FI_UINT64, FI_SUM, &ctx[c++]), "-FI_EINVAL", "fi_endpoint(3) `iov_limit`");
	{
		struct fi_msg_rma m = { .msg_iov = iov, .desc = desc, .iov_count = 1, .addr = fb, .rma_iov = riov,
					.rma_iov_count = rma_iov_limit + 1, .context = &ctx[c++] };
		struct fi_msg_atomic am = { .msg_iov = ioc, .desc = desc, .iov_count = 1, .addr = fb, .rma_iov = rioc,
					    .rma_iov_count = rma_iov_limit + 1, .datatype = FI_UINT64, .op = FI_SUM, .context = &ctx[c++] };
		snprintf(buf, sizeof buf, "`rma_iov_count` = `rma_iov_limit` + 1 (%zu)", rma_iov_limit + 1);
		ROW(fi_writemsg, buf, fi_writemsg(a, &m, 0), "-FI_EINVAL", "fi_endpoint(3) `rma_iov_limit`");
		ROW(fi_atomicmsg, buf, fi_atomicmsg(a, &am, 0), "-FI_EINVAL", "fi_endpoint(3) `rma_iov_limit`");
	}
	ROW(fi_sendv, "count `SIZE_MAX`", fi_sendv(a, iov, desc, SIZE_MAX, fb, &ctx[c++]), "-FI_EINVAL", "fi_endpoint(3) `iov_limit`");
	{
		struct fi_mr_attr ma = { .mr_iov = iov, .iov_count = info->domain_attr->mr_iov_limit + 1, .access = FI_REMOTE_READ };
		snprintf(buf, sizeof buf, "`iov_count` = `mr_iov_limit` + 1 (%zu)", info->domain_attr->mr_iov_limit + 1);
		ROW(fi_mr_regattr, buf, fi_mr_regattr(domain, &ma, 0, &o.mr), "-FI_EINVAL", "fi_domain(3) `mr_iov_limit`");
	}

	/* ---- zero lengths */
	ROW(fi_recv, "`buf` NULL, 0 bytes", fi_recv(b, NULL, 0, NULL, FI_ADDR_UNSPEC, &ctx[c]), "0", "fi_msg(3): 0-byte operations");
	POSTED(fi_send, "`buf` NULL, 0 bytes", fi_send(a, NULL, 0, NULL, fb, &ctx[c + 1]), &ctx[c + 1], "0, completion 0", "fi_msg(3): 0-byte operations");
	row("fi_recv", "(the receive above) its completion", code(completion(&ctx[c])), "0", "fi_msg(3)");
	c += 2;
	POSTED(fi_sendv, "`iov` NULL, count 0", fi_sendv(a, NULL, NULL, 0, fb, &ctx[c]), &ctx[c], "0, completion 0", "fi_msg(3): count may be 0");
	c++;
	ROW(fi_inject, "`buf` NULL, 0 bytes", fi_inject(a, NULL, 0, fb), "0", "fi_msg(3): 0-byte operations");
	POSTED(fi_write, "`buf` NULL, 0 bytes", fi_write(a, NULL, 0, NULL, fb, base, key, &ctx[c]), &ctx[c], "0, completion 0", "fi_rma(3): 0-byte operations");
	c++;
	POSTED(fi_read, "`buf` NULL, 0 bytes", fi_read(a, NULL, 0, NULL, fb, base, key, &ctx[c]), &ctx[c], "0, completion 0", "fi_rma(3): 0-byte operations");
	c++;
	ROW(fi_atomic, "count 0", fi_atomic(a, local, 0, NULL, fb, base, key, FI_UINT64, FI_SUM, &ctx[c++]), "-FI_EINVAL", "fi_errno(3): invalid argument");
	ROW(fi_cq_read, "count 0", fi_cq_read(cq, buf, 0), "0", "fi_cq(3): returns how many were read");

	/* ---- misaligned atomics: local operand at an odd address, remote
	 * element at an odd address; the value is checked too. */
	{
		static unsigned char odd[32];
		uint64_t one = 1, v;
		memcpy(odd + 1, &one, 8);
		memset(target, 0, sizeof target);
		POSTED(fi_atomic, "`FI_UINT64` `FI_SUM`, operand at an odd address", fi_atomic(a, odd + 1, 1, NULL, fb, base, key, FI_UINT64, FI_SUM, &ctx[c]), &ctx[c], "0, completion 0", "fi_atomic(3) sets no alignment rule");
		c++;
		POSTED(fi_atomic, "`FI_UINT64` `FI_SUM`, remote element at base + 9", fi_atomic(a, &one, 1, NULL, fb, base + 9, key, FI_UINT64, FI_SUM, &ctx[c]), &ctx[c], "0, completion 0", "fi_atomic(3) sets no alignment rule");
		c++;
		memcpy(&v, (unsigned char *) target + 9, 8);
		row("fi_atomic", "(the two calls above) values afterwards", target[0] == 1 && v == 1 ? "both sums applied" : "wrong",
		    "both sums applied", "fi_atomic(3)");
		POSTED(fi_fetch_atomic, "`FI_UINT32` `FI_SUM`, remote element at base + 30", fi_fetch_atomic(a, &one, 1, NULL, odd + 13, NULL, fb, base + 30, key, FI_UINT32, FI_SUM, &ctx[c]), &ctx[c], "0, completion 0", "fi_atomic(3) sets no alignment rule");
		c++;
	}

	/* ---- keys of closed memory regions */
	POSTED(fi_write, "key of a closed MR", fi_write(a, buf, 8, NULL, fb, gone_base, gone_key, &ctx[c]), &ctx[c], "0, completion -FI_EKEYREJECTED", "fi_errno(3): key rejected by the target");
	c++;
	POSTED(fi_read, "key of a closed MR", fi_read(a, buf, 8, NULL, fb, gone_base, gone_key, &ctx[c]), &ctx[c], "0, completion -FI_EKEYREJECTED", "fi_errno(3): key rejected by the target");
	c++;
	POSTED(fi_atomic, "key of a closed MR", fi_atomic(a, local, 1, NULL, fb, gone_base, gone_key, FI_UINT64, FI_SUM, &ctx[c]), &ctx[c], "0, completion -FI_EKEYREJECTED", "fi_errno(3): key rejected by the target");
	c++;
	POSTED(fi_compare_atomic, "key of a closed MR", fi_compare_atomic(a, local, 1, NULL, local + 1, NULL, local + 2, NULL, fb, gone_base, gone_key, FI_UINT64, FI_CSWAP, &ctx[c]), &ctx[c], "0, completion -FI_EKEYREJECTED", "fi_errno(3): key rejected by the target");
	c++;

	/* ---- addresses not in the AV */
	ROW(fi_send, "`dest_addr` never inserted", fi_send(a, buf, 8, NULL, nowhere, &ctx[c++]), "-FI_EINVAL", "fi_errno(3): invalid argument");
	ROW(fi_send, "`dest_addr` `FI_ADDR_NOTAVAIL`", fi_send(a, buf, 8, NULL, FI_ADDR_NOTAVAIL, &ctx[c++]), "-FI_EINVAL", "fi_errno(3): invalid argument");
	ROW(fi_tinject, "`dest_addr` never inserted", fi_tinject(a, buf, 8, nowhere, 1), "-FI_EINVAL", "fi_errno(3): invalid argument");
	ROW(fi_write, "`dest_addr` never inserted", fi_write(a, buf, 8, NULL, nowhere, base, key, &ctx[c++]), "-FI_EINVAL", "fi_errno(3): invalid argument");
	ROW(fi_atomic, "`dest_addr` never inserted", fi_atomic(a, local, 1, NULL, nowhere, base, key, FI_UINT64, FI_SUM, &ctx[c++]), "-FI_EINVAL", "fi_errno(3): invalid argument");
	len = sizeof buf;
	ROW(fi_av_lookup, "`fi_addr` never inserted", fi_av_lookup(av, unset, buf, &len), "-FI_EINVAL", "fi_av(3) fi_av_lookup");
	ROW(fi_av_remove, "`fi_addr` never inserted", fi_av_remove(av, &unset, 1, 0), "-FI_EINVAL", "fi_av(3) fi_av_remove");
	ROW(fi_av_remove, "an inserted `fi_addr`", fi_av_remove(av, &fc, 1, 0), "0", "fi_av(3)");
	ROW(fi_av_remove, "the same `fi_addr` again", fi_av_remove(av, &fc, 1, 0), "-FI_EINVAL", "fi_av(3) fi_av_remove");
	ROW(fi_send, "`dest_addr` removed from the AV", fi_send(a, buf, 8, NULL, fc, &ctx[c++]), "-FI_EINVAL", "fi_av(3): a removed address may not be used");
	ROW(fi_write, "`dest_addr` removed from the AV", fi_write(a, buf, 8, NULL, fc, base, key, &ctx[c++]), "-FI_EINVAL", "fi_av(3): a removed address may not be used");

	if (c > 64) {
		fprintf(stderr, "too many contexts\n");
		return 2;
	}
	fi_close(&a->fid);
	fi_close(&b->fid);
	fi_close(&c3->fid);
	fi_close(&mr->fid);
	fi_close(&cntr->fid);
	fi_close(&av->fid);
	fi_close(&cq->fid);
	fi_close(&domain->fid);
	fi_close(&fabric->fid);
	fi_freeinfo(info);
	fi_freeinfo(hints);
	fprintf(stderr, "bad_input_table: %d rows, %d as documented, %d not\n", rows, rows - bad, bad);
	return bad ? 1 : 0;
}
