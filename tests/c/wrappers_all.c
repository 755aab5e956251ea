/*
 * Calls every static inline wrapper of the public headers the way an
 * upstream application would, so that a wrong name, parameter list or
 * return type fails to compile (C11 and C++11).  main() then runs a few
 * wrappers against hand-made ops tables to check that they reach the
 * right slot and that short tables yield -FI_ENOSYS.
 */
#include <stdio.h>
#include <string.h>
#include <rdma/fabric.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>
#include <rdma/fi_atomic.h>
#include <rdma/fi_collective.h>
#include <rdma/fi_trigger.h>
#include <rdma/fi_ext.h>
#include <rdma/fi_xpu.h>
#include <rdma/providers/fi_prov.h>
#include <rdma/providers/fi_log.h>
#include <rdma/providers/fi_peer.h>

/* Never called: only has to compile. */
long use_everything(struct fid_fabric *fab, struct fid_domain *dom,
		    struct fid_ep *ep, struct fid_pep *pep, struct fid_cq *cq,
		    struct fid_cntr *cntr, struct fid_eq *eq, struct fid_av *av,
		    struct fid_mr *mr, struct fid_wait *ws, struct fid_poll *ps,
		    struct fid_av_set *set, struct fid_mc *mc,
		    struct fid_xpu_ctx *xctx, struct fi_info *info,
		    struct fi_provider *prov);
long use_everything(struct fid_fabric *fab, struct fid_domain *dom,
		    struct fid_ep *ep, struct fid_pep *pep, struct fid_cq *cq,
		    struct fid_cntr *cntr, struct fid_eq *eq, struct fid_av *av,
		    struct fid_mr *mr, struct fid_wait *ws, struct fid_poll *ps,
		    struct fid_av_set *set, struct fid_mc *mc,
		    struct fid_xpu_ctx *xctx, struct fi_info *info,
		    struct fi_provider *prov)
{
	char buf[64] = { 0 };
	size_t len = sizeof(buf);
	uint64_t u = 0;
	fi_addr_t a = FI_ADDR_UNSPEC;
	struct iovec iov = { buf, sizeof(buf) };
	struct fi_ioc ioc = { buf, 1 };
	void *desc = NULL;
	struct fid *f = NULL;
	struct fid_ep *ep2 = NULL;
	struct fid_stx *stx = NULL;
	struct fid_domain *dom2 = NULL;
	struct fid_cq *cq2 = NULL;
	struct fid_cntr *cntr2 = NULL;
	struct fid_eq *eq2 = NULL;
	struct fid_av *av2 = NULL;
	struct fid_mr *mr2 = NULL;
	struct fid_wait *ws2 = NULL;
	struct fid_poll *ps2 = NULL;
	struct fid_pep *pep2 = NULL;
	struct fid_av_set *set2 = NULL;
	struct fid_mc *mc2 = NULL;
	struct fid_xpu_ctx *xctx2 = NULL;
	struct fi_cq_attr cq_attr;
	struct fi_cntr_attr cntr_attr;
	struct fi_eq_attr eq_attr;
	struct fi_av_attr av_attr;
	struct fi_av_set_attr set_attr;
	struct fi_wait_attr wait_attr;
	struct fi_poll_attr poll_attr;
	struct fi_mr_attr mr_attr;
	struct fi_tx_attr tx_attr;
	struct fi_rx_attr rx_attr;
	struct fi_msg msg;
	struct fi_msg_tagged tmsg;
	struct fi_msg_rma rmsg;
	struct fi_msg_atomic amsg;
	struct fi_cq_err_entry cqerr;
	struct fi_eq_err_entry eqerr;
	struct fi_atomic_attr aattr;
	struct fi_collective_attr cattr;
	struct fi_xpu_attr xattr;
	struct fi_xpu_ctx_attr xcattr;
	struct fid_xpu_ep xep;
	struct fid_xpu_cq xcq;
	struct fid_xpu_cntr xcntr;
	struct fi_info *dup;
	uint32_t event;
	long r = 0;
	int i = 0;

	memset(&cq_attr, 0, sizeof(cq_attr));
	memset(&mr_attr, 0, sizeof(mr_attr));
	(void) set_attr; (void) wait_attr; (void) poll_attr;
	(void) tx_attr; (void) rx_attr; (void) msg; (void) tmsg; (void) rmsg;
	(void) amsg; (void) cntr_attr; (void) eq_attr; (void) av_attr;

	r += fi_version() + FI_COMPILE_VERSION;
	r += FI_VERSION_GE(FI_VERSION(2, 8), FI_VERSION(1, 5));
	r += FI_MAJOR(FI_VERSION(2, 8)) + FI_MINOR(FI_VERSION(2, 8));
	dup = fi_allocinfo();
	fi_freeinfo(fi_dupinfo(dup));
	r += fi_getinfo(FI_VERSION(1, 18), NULL, NULL, 0, dup, &info);
	r += fi_fabric(info->fabric_attr, &fab, NULL);
	r += fi_fabric2(info, &fab, 0, NULL);
	r += fi_open(FI_VERSION(2, 0), "mr_cache", NULL, 0, 0, &f, NULL);
	r += (long) strlen(fi_strerror(FI_EAGAIN));
	r += (long) strlen(fi_tostr(info, FI_TYPE_INFO));
	r += (long) strlen(fi_tostr_r(buf, len, &u, FI_TYPE_CAPS));
	r += fi_tc_dscp_get(fi_tc_dscp_set(3));

	r += fi_close(&ep->fid);
	r += fi_control(&ep->fid, FI_GETWAIT, &f);
	r += fi_alias(&ep->fid, &f, 0);
	r += fi_get_val(&ep->fid, 1, &u) + fi_set_val(&ep->fid, 1, &u);
	r += fi_open_ops(&dom->fid, "x", 0, &desc, NULL);
	r += fi_set_ops(&dom->fid, FI_SET_OPS_HMEM_OVERRIDE, 0, desc, NULL);

	r += fi_domain(fab, info, &dom2, NULL);
	r += fi_domain2(fab, info, &dom2, FI_PEER, NULL);
	r += fi_domain_bind(dom, &eq->fid, 0);
	r += fi_cq_open(dom, &cq_attr, &cq2, NULL);
	r += fi_cntr_open(dom, &cntr_attr, &cntr2, NULL);
	r += fi_wait_open(fab, &wait_attr, &ws2);
	r += fi_poll_open(dom, &poll_attr, &ps2);
	r += fi_eq_open(fab, &eq_attr, &eq2, NULL);
	r += fi_mr_reg(dom, buf, len, FI_SEND, 0, 0, 0, &mr2, NULL);
	r += fi_mr_regv(dom, &iov, 1, FI_RECV, 0, 0, 0, &mr2, NULL);
	r += fi_mr_regattr(dom, &mr_attr, 0, &mr2);
	desc = fi_mr_desc(mr);
	u += fi_mr_key(mr);
	r += fi_mr_raw_attr(mr, &u, (uint8_t *) buf, &len, 0);
	r += fi_mr_map_raw(dom, u, (uint8_t *) buf, len, &u, 0);
	r += fi_mr_unmap_key(dom, u);
	r += fi_mr_bind(mr, &ep->fid, 0);
	r += fi_mr_refresh(mr, &iov, 1, 0);
	r += fi_mr_enable(mr);
	r += fi_mr_get_xpu_desc(mr, buf, &len, FI_XPU, xctx);
	r += fi_av_open(dom, &av_attr, &av2, NULL);
	r += fi_av_bind(av, &eq->fid, 0);
	r += fi_av_insert(av, buf, 1, &a, 0, NULL);
	r += fi_av_insertsvc(av, "node", "svc", &a, 0, NULL);
	r += fi_av_insertsym(av, "node", 1, "svc", 1, &a, 0, NULL);
	r += fi_av_remove(av, &a, 1, 0);
	r += fi_av_lookup(av, a, buf, &len);
	r += fi_av_lookup2(av, a, buf, &len, FI_XPU, xctx);
	r += (long) strlen(fi_av_straddr(av, buf, buf, &len));
	r += fi_av_insert_auth_key(av, buf, len, &a, 0);
	r += fi_av_lookup_auth_key(av, a, buf, &len);
	r += fi_av_set_user_id(av, a, a, 0);
	a = fi_rx_addr(a, 1, 4);

	r += fi_passive_ep(fab, info, &pep2, NULL);
	r += fi_endpoint(dom, info, &ep2, NULL);
	r += fi_endpoint2(dom, info, &ep2, FI_PEER, NULL);
	r += fi_scalable_ep(dom, info, &ep2, NULL);
	r += fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV);
	r += fi_pep_bind(pep, &eq->fid, 0);
	r += fi_scalable_ep_bind(ep, &av->fid, 0);
	r += fi_enable(ep);
	r += fi_cancel(&ep->fid, NULL);
	r += fi_setopt(&ep->fid, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV, &len,
		       sizeof(len));
	r += fi_getopt(&ep->fid, FI_OPT_ENDPOINT, FI_OPT_CM_DATA_SIZE, &len,
		       &len);
	r += fi_ep_alias(ep, &ep2, 0);
	r += fi_tx_context(ep, 0, &tx_attr, &ep2, NULL);
	r += fi_rx_context(ep, 0, &rx_attr, &ep2, NULL);
	r += fi_stx_context(dom, &tx_attr, &stx, NULL);
	r += fi_srx_context(dom, &rx_attr, &ep2, NULL);
	r += fi_ep_export_xpu(ep, 0, &xep);
	r += fi_recv(ep, buf, len, desc, a, NULL);
	r += fi_recvv(ep, &iov, &desc, 1, a, NULL);
	r += fi_recvmsg(ep, &msg, 0);
	r += fi_send(ep, buf, len, desc, a, NULL);
	r += fi_sendv(ep, &iov, &desc, 1, a, NULL);
	r += fi_sendmsg(ep, &msg, 0);
	r += fi_inject(ep, buf, len, a);
	r += fi_senddata(ep, buf, len, desc, 7, a, NULL);
	r += fi_injectdata(ep, buf, len, 7, a);

	r += fi_trywait(fab, &f, 1);
	r += fi_wait(ws, -1);
	r += fi_poll(ps, &desc, 1);
	r += fi_poll_add(ps, &cq->fid, 0) + fi_poll_del(ps, &cq->fid, 0);
	r += fi_eq_read(eq, &event, buf, len, 0);
	r += fi_eq_readerr(eq, &eqerr, 0);
	r += fi_eq_write(eq, FI_NOTIFY, buf, len, 0);
	r += fi_eq_sread(eq, &event, buf, len, -1, 0);
	r += (long) strlen(fi_eq_strerror(eq, 0, NULL, buf, len));
	r += fi_cq_read(cq, buf, 1);
	r += fi_cq_readfrom(cq, buf, 1, &a);
	r += fi_cq_readerr(cq, &cqerr, 0);
	r += fi_cq_sread(cq, buf, 1, NULL, -1);
	r += fi_cq_sreadfrom(cq, buf, 1, &a, NULL, -1);
	r += fi_cq_signal(cq);
	r += (long) strlen(fi_cq_strerror(cq, 0, NULL, buf, len));
	r += fi_cq_export_xpu(cq, 0, &xcq);
	u += fi_cntr_read(cntr) + fi_cntr_readerr(cntr);
	r += fi_cntr_add(cntr, 1) + fi_cntr_adderr(cntr, 1);
	r += fi_cntr_set(cntr, 1) + fi_cntr_seterr(cntr, 1);
	r += fi_cntr_wait(cntr, 1, -1);
	r += fi_cntr_export_xpu(cntr, 0, &xcntr);

	r += fi_setname(&ep->fid, buf, len);
	r += fi_getname(&ep->fid, buf, &len);
	r += fi_getpeer(ep, buf, &len);
	r += fi_listen(pep);
	r += fi_connect(ep, buf, NULL, 0);
	r += fi_accept(ep, NULL, 0);
	r += fi_reject(pep, info->handle, NULL, 0);
	r += fi_shutdown(ep, 0);
	r += fi_join(ep, buf, 0, &mc2, NULL);
	a = fi_mc_addr(mc);

	r += fi_read(ep, buf, len, desc, a, 0, 1, NULL);
	r += fi_readv(ep, &iov, &desc, 1, a, 0, 1, NULL);
	r += fi_readmsg(ep, &rmsg, 0);
	r += fi_write(ep, buf, len, desc, a, 0, 1, NULL);
	r += fi_writev(ep, &iov, &desc, 1, a, 0, 1, NULL);
	r += fi_writemsg(ep, &rmsg, 0);
	r += fi_inject_write(ep, buf, len, a, 0, 1);
	r += fi_writedata(ep, buf, len, desc, 7, a, 0, 1, NULL);
	r += fi_inject_writedata(ep, buf, len, 7, a, 0, 1);

	r += fi_trecv(ep, buf, len, desc, a, 1, 0, NULL);
	r += fi_trecvv(ep, &iov, &desc, 1, a, 1, 0, NULL);
	r += fi_trecvmsg(ep, &tmsg, 0);
	r += fi_tsend(ep, buf, len, desc, a, 1, NULL);
	r += fi_tsendv(ep, &iov, &desc, 1, a, 1, NULL);
	r += fi_tsendmsg(ep, &tmsg, 0);
	r += fi_tinject(ep, buf, len, a, 1);
	r += fi_tsenddata(ep, buf, len, desc, 7, a, 1, NULL);
	r += fi_tinjectdata(ep, buf, len, 7, a, 1);

	r += fi_atomic(ep, buf, 1, desc, a, 0, 1, FI_UINT64, FI_SUM, NULL);
	r += fi_atomicv(ep, &ioc, &desc, 1, a, 0, 1, FI_UINT64, FI_SUM, NULL);
	r += fi_atomicmsg(ep, &amsg, 0);
	r += fi_inject_atomic(ep, buf, 1, a, 0, 1, FI_UINT64, FI_SUM);
	r += fi_fetch_atomic(ep, buf, 1, desc, buf, desc, a, 0, 1, FI_UINT64,
			     FI_SUM, NULL);
	r += fi_fetch_atomicv(ep, &ioc, &desc, 1, &ioc, &desc, 1, a, 0, 1,
			      FI_UINT64, FI_SUM, NULL);
	r += fi_fetch_atomicmsg(ep, &amsg, &ioc, &desc, 1, 0);
	r += fi_compare_atomic(ep, buf, 1, desc, buf, desc, buf, desc, a, 0,
			       1, FI_UINT64, FI_CSWAP, NULL);
	r += fi_compare_atomicv(ep, &ioc, &desc, 1, &ioc, &desc, 1, &ioc,
				&desc, 1, a, 0, 1, FI_UINT64, FI_CSWAP, NULL);
	r += fi_compare_atomicmsg(ep, &amsg, &ioc, &desc, 1, &ioc, &desc, 1,
				  0);
	r += fi_atomicvalid(ep, FI_UINT64, FI_SUM, &len);
	r += fi_fetch_atomicvalid(ep, FI_UINT64, FI_SUM, &len);
	r += fi_compare_atomicvalid(ep, FI_UINT64, FI_CSWAP, &len);
	r += fi_query_atomic(dom, FI_UINT64, FI_SUM, &aattr, FI_FETCH_ATOMIC);

	r += fi_av_set(av, &set_attr, &set2, NULL);
	r += fi_av_set_union(set, set2) + fi_av_set_intersect(set, set2);
	r += fi_av_set_diff(set, set2);
	r += fi_av_set_insert(set, a) + fi_av_set_remove(set, a);
	r += fi_av_set_addr(set, &a);
	r += fi_join_collective(ep, a, set, 0, &mc2, NULL);
	r += fi_barrier(ep, a, NULL) + fi_barrier2(ep, a, 0, NULL);
	r += fi_broadcast(ep, buf, 1, desc, a, a, FI_UINT64, 0, NULL);
	r += fi_alltoall(ep, buf, 1, desc, buf, desc, a, FI_UINT64, 0, NULL);
	r += fi_allreduce(ep, buf, 1, desc, buf, desc, a, FI_UINT64, FI_SUM, 0,
			  NULL);
	r += fi_allgather(ep, buf, 1, desc, buf, desc, a, FI_UINT64, 0, NULL);
	r += fi_reduce_scatter(ep, buf, 1, desc, buf, desc, a, FI_UINT64,
			       FI_SUM, 0, NULL);
	r += fi_reduce(ep, buf, 1, desc, buf, desc, a, a, FI_UINT64, FI_SUM, 0,
		       NULL);
	r += fi_scatter(ep, buf, 1, desc, buf, desc, a, a, FI_UINT64, 0, NULL);
	r += fi_gather(ep, buf, 1, desc, buf, desc, a, a, FI_UINT64, 0, NULL);
	r += fi_query_collective(dom, FI_ALLREDUCE, &cattr, 0);

	memset(&xattr, 0, sizeof(xattr));
	xattr.iface = FI_HMEM_CUDA;
	r += fi_xpu_ctx(dom, &xattr, &xctx2, NULL);
	r += fi_xpu_ctx_query(xctx, &xcattr);

	r += fi_export_fid(&dom->fid, 0, &f, NULL);
	r += fi_import_fid(&dom->fid, f, 0);

	r += fi_param_define(prov, "knob", FI_PARAM_INT, "a %s knob", "test");
	r += fi_param_get_int(prov, "knob", &i);
	r += fi_param_get_bool(prov, "knob", &i);
	r += fi_param_get_size_t(prov, "knob", &len);
	r += fi_param_get_str(prov, "knob", (char **) &desc);
	FI_WARN(prov, FI_LOG_CORE, "value %d\n", i);
	FI_INFO(prov, FI_LOG_EP_DATA, "value %d\n", i);
	FI_DBG(prov, FI_LOG_CQ, "value %d\n", i);
	FI_WARN_ONCE(prov, FI_LOG_AV, "once\n");
	FI_WARN_SPARSE(prov, FI_LOG_MR, "sparse\n");
	return r + i;
}

/* ---- runtime dispatch checks ---- */

static int last_slot;

static ssize_t t_send(struct fid_ep *ep, const void *buf, size_t len,
		      void *desc, fi_addr_t dest, void *ctx)
{
	(void) ep; (void) buf; (void) desc; (void) dest; (void) ctx;
	last_slot = 1;
	return (ssize_t) len;
}

static ssize_t t_tsend(struct fid_ep *ep, const void *buf, size_t len,
		       void *desc, fi_addr_t dest, uint64_t tag, void *ctx)
{
	(void) ep; (void) buf; (void) desc; (void) dest; (void) ctx;
	last_slot = 2;
	return (ssize_t) (len + tag);
}

static int t_setopt(fid_t fid, int level, int name, const void *val,
		    size_t len)
{
	(void) fid; (void) val; (void) len;
	last_slot = 3;
	return level * 100 + name;
}

static int t_lookup(struct fid_av *av, fi_addr_t addr, void *buf,
		    size_t *len)
{
	(void) av; (void) buf;
	last_slot = 4;
	*len = (size_t) addr;
	return 0;
}

static int failures;
#define CHECK(cond) do { \
	if (!(cond)) { \
		printf("FAIL line %d: %s\n", __LINE__, #cond); \
		failures++; \
	} \
} while (0)

int main(void)
{
	struct fi_ops_msg msg_ops;
	struct fi_ops_tagged tag_ops;
	struct fi_ops_ep ep_ops;
	struct fi_ops_av av_ops;
	struct fi_ops_cntr cntr_ops;
	struct fid_ep ep;
	struct fid_av av;
	struct fid_cntr cntr;
	struct fid_xpu_ep xep;
	size_t len = 0;
	char buf[8] = { 0 };

	memset(&msg_ops, 0, sizeof(msg_ops));
	memset(&tag_ops, 0, sizeof(tag_ops));
	memset(&ep_ops, 0, sizeof(ep_ops));
	memset(&av_ops, 0, sizeof(av_ops));
	memset(&cntr_ops, 0, sizeof(cntr_ops));
	memset(&ep, 0, sizeof(ep));
	memset(&av, 0, sizeof(av));
	memset(&cntr, 0, sizeof(cntr));

	msg_ops.size = sizeof(msg_ops);
	msg_ops.send = t_send;
	tag_ops.size = sizeof(tag_ops);
	tag_ops.send = t_tsend;
	ep_ops.size = sizeof(ep_ops);
	ep_ops.setopt = t_setopt;
	ep.ops = &ep_ops;
	ep.msg = &msg_ops;
	ep.tagged = &tag_ops;

	CHECK(fi_send(&ep, buf, 5, NULL, 0, NULL) == 5 && last_slot == 1);
	CHECK(fi_tsend(&ep, buf, 5, NULL, 0, 10, NULL) == 15 &&
	      last_slot == 2);
	/* fi_setopt reaches the ops of the fid_ep that encloses the fid. */
	CHECK(fi_setopt(&ep.fid, 1, 2, &len, sizeof(len)) == 102 &&
	      last_slot == 3);
	/* export_xpu is beyond a table that stops before it: -FI_ENOSYS. */
	ep_ops.size = offsetof(struct fi_ops_ep, export_xpu);
	CHECK(fi_ep_export_xpu(&ep, 0, &xep) == -FI_ENOSYS);

	/* lookup2 missing: a plain lookup is served by lookup ... */
	av_ops.size = offsetof(struct fi_ops_av, lookup2);
	av_ops.lookup = t_lookup;
	av.ops = &av_ops;
	last_slot = 0;
	CHECK(fi_av_lookup2(&av, 42, buf, &len, 0, NULL) == 0 &&
	      last_slot == 4 && len == 42);
	/* ... but an XPU lookup is refused. */
	CHECK(fi_av_lookup2(&av, 42, buf, &len, FI_XPU, NULL) == -FI_ENOSYS);

	/* adderr present in size but empty slot: -FI_ENOSYS. */
	cntr_ops.size = sizeof(cntr_ops);
	cntr.ops = &cntr_ops;
	CHECK(fi_cntr_adderr(&cntr, 1) == -FI_ENOSYS);

	CHECK(FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION) ==
	      FI_COMPILE_VERSION);
	CHECK(FI_MAJOR(FI_VERSION(2, 8)) == 2 && FI_MINOR(FI_VERSION(2, 8)) == 8);
	CHECK(sizeof(struct fi_triggered_context) == sizeof(struct fi_context));
	CHECK(sizeof(struct fi_triggered_context2) ==
	      sizeof(struct fi_context2));
	CHECK(fi_tc_dscp_get(fi_tc_dscp_set(46)) == 46);
	CHECK(fi_tc_dscp_get(FI_TC_LOW_LATENCY) == 0);

	if (failures)
		return 1;
	printf("wrappers: all checks passed\n");
	return 0;
}
