/* Foreign fids: every slot of every ops table of every handle type the
 * library hands out (fabric, domain with its MR slots, CQ, counter, EQ, AV,
 * MR, endpoint with all seven of its tables, XPU context, and a tcp passive
 * endpoint with its three), called on a fid
 * that is not one of ours, must answer -FI_EINVAL (NULL for the slots that
 * return a string, 0 for fi_cntr_read/readerr) and touch nothing.
 *
 * Two kinds of foreign fid per handle type:
 *  - alien: another class and an ops table that is not ours;
 *  - lookalike: a byte copy of the real handle's C struct (same class, same
 *    per-type ops pointers) whose fi_ops pointer is a copy of ours: the
 *    same function pointers at another address.
 * Both sit in zeroed memory far larger than any handle, so a trampoline that
 * casts without checking reads zeros instead of running off the end (and
 * typically crashes on them, which fails the test as it should).
 * A foreign fid passed as the second object (fi_ep_bind, fi_trywait, an
 * xpu_ctx in an attribute) is refused the same way.
 *
 * Built with -Wall -Wextra -Werror, ASan and UBSan by tests/c/foreign_fid.sh. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <rdma/fabric.h>
#include <rdma/fi_atomic.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_collective.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>
#include <rdma/fi_xpu.h>

static int passed, failed;
static const char *kind_name;

#define CHECK(cond, what) do { if (cond) { passed++; } else { failed++; \
	printf("FAIL %s: %s (line %d)\n", kind_name, what, __LINE__); } } while (0)
/* A call that must answer -FI_EINVAL. */
#define EINVAL_(call) do { long r_ = (long) (call); CHECK(r_ == -FI_EINVAL, #call); \
	if (r_ != -FI_EINVAL) printf("     got %ld\n", r_); } while (0)
#define NULL_(call) CHECK((call) == NULL, #call " is NULL")
#define ZERO_(call) CHECK((call) == 0, #call " is 0")

/* Zeroed room for one fake handle of each kind. */
static _Alignas(64) unsigned char fake_mem[2][1 << 16];
static struct fi_ops copied_fi_ops;

static int alien_called;
static int alien_close(struct fid *f) { (void) f; alien_called++; return 4242; }
static struct fi_ops alien_fi_ops = { .size = sizeof(struct fi_ops), .close = alien_close };

/* A fake of `real` (a handle `size` bytes long): kind 0 alien, 1 lookalike. */
static void *fake(int kind, const struct fid *real, size_t size)
{
	memset(fake_mem[kind], 0, sizeof(fake_mem[kind]));
	struct fid *f = (struct fid *) fake_mem[kind];
	if (kind == 0) {
		kind_name = "alien";
		f->fclass = 0x7777;
		f->ops = &alien_fi_ops;
	} else {
		kind_name = "lookalike";
		memcpy(f, real, size);
		copied_fi_ops = *real->ops;
		f->ops = &copied_fi_ops;
	}
	return f;
}

static char buf[256], cmp[256], res[256];

/* The fi_ops slots on `f` (the table of `real`). */
static void fid_slots(const struct fid *real, struct fid *f, struct fid *other)
{
	struct fi_ops *o = real->ops;
	void *p = NULL;
	int arg = 0;
	EINVAL_(o->close(f));
	EINVAL_(o->bind(f, other, 0));
	EINVAL_(o->control(f, FI_GETWAIT, &arg));
	EINVAL_(o->control(f, FI_ENABLE, NULL));
	EINVAL_(o->ops_open(f, "x", 0, &p, NULL));
	EINVAL_(o->tostr(f, buf, sizeof(buf)));
	EINVAL_(o->ops_set(f, "x", 0, NULL, NULL));
}

/* A passive endpoint of the tcp provider (FI_EP_MSG on loopback): every
 * slot of its fi_ops, fi_ops_ep and fi_ops_cm, on fakes of it; fi_pep_bind
 * of a fake EQ; fi_reject with a fake request. */
static void passive_endpoint(void)
{
	struct fi_info *hints = fi_allocinfo(), *info = NULL;
	struct fid_fabric *fab;
	struct fid_eq *eq;
	struct fid_pep *pep;
	struct fi_eq_attr ea = { .size = 8 };
	hints->ep_attr->type = FI_EP_MSG;
	hints->fabric_attr->prov_name = strdup("tcp");
	int rc = fi_getinfo(FI_VERSION(2, 8), "127.0.0.1", NULL, FI_SOURCE, hints, &info);
	fi_freeinfo(hints);
	kind_name = "pep";
	CHECK(rc == 0, "fi_getinfo tcp msg");
	if (rc)
		return;
	if (fi_fabric(info->fabric_attr, &fab, NULL) || fi_eq_open(fab, &ea, &eq, NULL) ||
	    fi_passive_ep(fab, info, &pep, NULL)) {
		CHECK(0, "opening the passive endpoint");
		return;
	}
	size_t len;
	for (int k = 0; k < 2; k++) {
		struct fid_pep *fp = fake(k, &pep->fid, sizeof(*pep));
		fid_slots(&pep->fid, &fp->fid, &eq->fid);
		len = sizeof(buf);
		EINVAL_(pep->ops->getopt(&fp->fid, FI_OPT_ENDPOINT, FI_OPT_CM_DATA_SIZE, buf, &len));
		EINVAL_(pep->ops->setopt(&fp->fid, FI_OPT_ENDPOINT, FI_OPT_CM_DATA_SIZE, &len, sizeof(len)));
		EINVAL_(pep->ops->cancel(&fp->fid, NULL));
		EINVAL_(pep->ops->rx_size_left((struct fid_ep *) fp));
		EINVAL_(pep->ops->tx_size_left((struct fid_ep *) fp));
		EINVAL_(pep->cm->setname(&fp->fid, buf, 16));
		len = sizeof(buf);
		EINVAL_(pep->cm->getname(&fp->fid, buf, &len));
		len = sizeof(buf);
		EINVAL_(pep->cm->getpeer((struct fid_ep *) fp, buf, &len));
		EINVAL_(pep->cm->connect((struct fid_ep *) fp, buf, NULL, 0));
		EINVAL_(pep->cm->listen(fp));
		EINVAL_(pep->cm->accept((struct fid_ep *) fp, NULL, 0));
		EINVAL_(pep->cm->reject(fp, &pep->fid, NULL, 0));
		EINVAL_(pep->cm->shutdown((struct fid_ep *) fp, 0));
		/* Foreign objects as arguments of the real passive endpoint. */
		struct fid_eq *fe = fake(k, &eq->fid, sizeof(*eq));
		EINVAL_(fi_pep_bind(pep, &fe->fid, 0));
		struct fid *fr = fake(k, &eq->fid, sizeof(*eq));
		fr->fclass = FI_CLASS_CONNREQ;
		EINVAL_(fi_reject(pep, fr, NULL, 0));
	}
	kind_name = "pep";
	CHECK(fi_close(&pep->fid) == 0, "close pep");
	CHECK(fi_close(&eq->fid) == 0, "close eq (pep)");
	CHECK(fi_close(&fab->fid) == 0, "close fabric (pep)");
	fi_freeinfo(info);
}

int main(void)
{
	struct fi_info *hints = fi_allocinfo(), *info = NULL;
	struct fid_fabric *fab;
	struct fid_domain *dom;
	struct fid_cq *cq;
	struct fid_cntr *cntr;
	struct fid_eq *eq;
	struct fid_av *av;
	struct fid_mr *mr;
	struct fid_ep *ep;
	struct fid_xpu_ctx *xctx;
	struct fid_domain *d2 = NULL;
	struct fid_cq *cq2 = NULL;
	struct fid_cntr *cntr2 = NULL;
	struct fid_eq *eq2 = NULL;
	struct fid_av *av2 = NULL;
	struct fid_mr *mr2 = NULL;
	struct fid_ep *ep2 = NULL;
	struct fid_pep *pep2 = NULL;
	struct fid_wait *wait2 = NULL;
	struct fid_poll *poll2 = NULL;
	struct fid_stx *stx2 = NULL;
	struct fid_xpu_ctx *xctx2 = NULL;
	int rc;

	setvbuf(stdout, NULL, _IONBF, 0);
	hints->ep_attr->type = FI_EP_RDM;
	hints->caps = FI_MSG | FI_TAGGED | FI_RMA | FI_ATOMIC;
	hints->fabric_attr->prov_name = strdup("shm");
	rc = fi_getinfo(FI_VERSION(2, 8), NULL, NULL, 0, hints, &info);
	if (rc) {
		printf("fi_getinfo: %d\n", rc);
		return 1;
	}
	struct fi_cq_attr cqa = { .format = FI_CQ_FORMAT_DATA, .size = 16 };
	struct fi_cntr_attr ca = { .events = FI_CNTR_EVENTS_COMP };
	struct fi_eq_attr ea = { .size = 8 };
	struct fi_av_attr aa = { .type = FI_AV_TABLE, .count = 4 };
	struct fi_xpu_attr xa = { .iface = FI_HMEM_SYSTEM, .device = 0 };
	if (fi_fabric(info->fabric_attr, &fab, NULL) || fi_domain(fab, info, &dom, NULL) ||
	    fi_cq_open(dom, &cqa, &cq, NULL) || fi_cntr_open(dom, &ca, &cntr, NULL) ||
	    fi_eq_open(fab, &ea, &eq, NULL) || fi_av_open(dom, &aa, &av, NULL) ||
	    fi_mr_reg(dom, buf, sizeof(buf), FI_SEND | FI_RECV, 0, 1, 0, &mr, NULL) ||
	    fi_endpoint(dom, info, &ep, NULL) || fi_xpu_ctx(dom, &xa, &xctx, NULL)) {
		printf("opening the objects failed\n");
		return 1;
	}

	struct iovec iov = { buf, 8 };
	void *desc = NULL;
	struct fi_rma_iov riov = { 0, 8, 1 };
	struct fi_ioc ioc = { buf, 1 }, cioc = { cmp, 1 }, rioc = { res, 1 };
	struct fi_rma_ioc rioc_r = { 0, 1, 1 };
	struct fi_msg msg = { .msg_iov = &iov, .desc = &desc, .iov_count = 1 };
	struct fi_msg_tagged tmsg = { .msg_iov = &iov, .desc = &desc, .iov_count = 1 };
	struct fi_msg_rma rmsg = { .msg_iov = &iov, .desc = &desc, .iov_count = 1, .rma_iov = &riov, .rma_iov_count = 1 };
	struct fi_msg_atomic amsg = { .msg_iov = &ioc, .desc = &desc, .iov_count = 1, .rma_iov = &rioc_r,
				      .rma_iov_count = 1, .datatype = FI_UINT64, .op = FI_SUM };
	struct fi_msg_atomic cmsg = amsg;
	cmsg.op = FI_CSWAP;
	struct fi_msg_collective colmsg = { 0 };
	struct fi_cq_data_entry cqe[2];
	struct fi_cq_err_entry cqerr = { 0 };
	struct fi_eq_err_entry eqerr = { 0 };
	struct fi_atomic_attr atattr;
	struct fi_collective_attr colattr = { 0 };
	struct fi_mr_attr mra = { .mr_iov = &iov, .iov_count = 1, .access = FI_SEND };
	struct fi_xpu_ctx_attr xqa;
	struct fid_xpu_cq xcq;
	struct fid_xpu_cntr xcn;
	struct fid_xpu_ep xep;
	struct fi_tx_attr txa = { 0 };
	struct fi_rx_attr rxa = { 0 };
	struct fi_wait_attr wa = { .wait_obj = FI_WAIT_UNSPEC };
	struct fi_poll_attr pa = { 0 };
	struct fi_av_set_attr asa = { 0 };
	struct fid_av_set *aset = NULL;
	struct fid_mc *mc = NULL;
	fi_addr_t addr = 0;
	size_t len = sizeof(buf), count = 0;
	uint32_t event;

	for (int k = 0; k < 2; k++) {
		/* fabric */
		struct fid_fabric *ff = fake(k, &fab->fid, sizeof(*fab));
		fid_slots(&fab->fid, &ff->fid, &eq->fid);
		EINVAL_(fab->ops->domain(ff, info, &d2, NULL));
		EINVAL_(fab->ops->passive_ep(ff, info, &pep2, NULL));
		EINVAL_(fab->ops->eq_open(ff, &ea, &eq2, NULL));
		EINVAL_(fab->ops->wait_open(ff, &wa, &wait2));
		{
			struct fid *one = &cq->fid;
			EINVAL_(fab->ops->trywait(ff, &one, 1));
		}
		EINVAL_(fab->ops->domain2(ff, info, &d2, 0, NULL));

		/* domain (fi_ops_domain and fi_ops_mr) */
		struct fid_domain *fd = fake(k, &dom->fid, sizeof(*dom));
		fid_slots(&dom->fid, &fd->fid, &eq->fid);
		EINVAL_(dom->ops->av_open(fd, &aa, &av2, NULL));
		EINVAL_(dom->ops->cq_open(fd, &cqa, &cq2, NULL));
		EINVAL_(dom->ops->endpoint(fd, info, &ep2, NULL));
		EINVAL_(dom->ops->scalable_ep(fd, info, &ep2, NULL));
		EINVAL_(dom->ops->cntr_open(fd, &ca, &cntr2, NULL));
		EINVAL_(dom->ops->poll_open(fd, &pa, &poll2));
		EINVAL_(dom->ops->stx_ctx(fd, &txa, &stx2, NULL));
		EINVAL_(dom->ops->srx_ctx(fd, &rxa, &ep2, NULL));
		EINVAL_(dom->ops->query_atomic(fd, FI_UINT64, FI_SUM, &atattr, 0));
		EINVAL_(dom->ops->query_collective(fd, FI_BARRIER, &colattr, 0));
		EINVAL_(dom->ops->endpoint2(fd, info, &ep2, 0, NULL));
		EINVAL_(dom->ops->xpu_ctx(fd, &xa, &xctx2, NULL));
		EINVAL_(dom->mr->reg(&fd->fid, buf, sizeof(buf), FI_SEND, 0, 2, 0, &mr2, NULL));
		EINVAL_(dom->mr->regv(&fd->fid, &iov, 1, FI_SEND, 0, 2, 0, &mr2, NULL));
		EINVAL_(dom->mr->regattr(&fd->fid, &mra, 0, &mr2));

		/* CQ */
		struct fid_cq *fq = fake(k, &cq->fid, sizeof(*cq));
		fid_slots(&cq->fid, &fq->fid, &eq->fid);
		EINVAL_(cq->ops->read(fq, cqe, 1));
		EINVAL_(cq->ops->readfrom(fq, cqe, 1, &addr));
		EINVAL_(cq->ops->readerr(fq, &cqerr, 0));
		EINVAL_(cq->ops->sread(fq, cqe, 1, NULL, 0));
		EINVAL_(cq->ops->sreadfrom(fq, cqe, 1, &addr, NULL, 0));
		EINVAL_(cq->ops->signal(fq));
		NULL_(cq->ops->strerror(fq, FI_EIO, NULL, buf, sizeof(buf)));
		EINVAL_(cq->ops->export_xpu(fq, 0, &xcq));

		/* counter */
		struct fid_cntr *fc = fake(k, &cntr->fid, sizeof(*cntr));
		fid_slots(&cntr->fid, &fc->fid, &eq->fid);
		ZERO_(cntr->ops->read(fc));
		ZERO_(cntr->ops->readerr(fc));
		EINVAL_(cntr->ops->add(fc, 1));
		EINVAL_(cntr->ops->set(fc, 1));
		EINVAL_(cntr->ops->wait(fc, 1, 0));
		EINVAL_(cntr->ops->adderr(fc, 1));
		EINVAL_(cntr->ops->seterr(fc, 1));
		EINVAL_(cntr->ops->export_xpu(fc, 0, &xcn));

		/* EQ */
		struct fid_eq *fe = fake(k, &eq->fid, sizeof(*eq));
		fid_slots(&eq->fid, &fe->fid, &cq->fid);
		EINVAL_(eq->ops->read(fe, &event, buf, sizeof(buf), 0));
		EINVAL_(eq->ops->readerr(fe, &eqerr, 0));
		EINVAL_(eq->ops->write(fe, FI_NOTIFY, buf, 8, 0));
		EINVAL_(eq->ops->sread(fe, &event, buf, sizeof(buf), 0, 0));
		NULL_(eq->ops->strerror(fe, FI_EIO, NULL, buf, sizeof(buf)));

		/* AV */
		struct fid_av *fa = fake(k, &av->fid, sizeof(*av));
		fid_slots(&av->fid, &fa->fid, &eq->fid);
		EINVAL_(av->ops->insert(fa, buf, 1, &addr, 0, NULL));
		EINVAL_(av->ops->insertsvc(fa, "node", "service", &addr, 0, NULL));
		EINVAL_(av->ops->insertsym(fa, "node", 1, "service", 1, &addr, 0, NULL));
		EINVAL_(av->ops->remove(fa, &addr, 1, 0));
		len = sizeof(buf);
		EINVAL_(av->ops->lookup(fa, 0, buf, &len));
		len = sizeof(res);
		NULL_(av->ops->straddr(fa, buf, res, &len));
		EINVAL_(av->ops->av_set(fa, &asa, &aset, NULL));
		EINVAL_(av->ops->insert_auth_key(fa, buf, 8, &addr, 0));
		len = sizeof(buf);
		EINVAL_(av->ops->lookup_auth_key(fa, 0, buf, &len));
		EINVAL_(av->ops->set_user_id(fa, 0, 1, 0));
		len = sizeof(buf);
		EINVAL_(av->ops->lookup2(fa, 0, buf, &len, 0, NULL));

		/* MR */
		struct fid_mr *fm = fake(k, &mr->fid, sizeof(*mr));
		fid_slots(&mr->fid, &fm->fid, &eq->fid);

		/* XPU context */
		struct fid_xpu_ctx *fx = fake(k, &xctx->fid, sizeof(*xctx));
		fid_slots(&xctx->fid, &fx->fid, &eq->fid);
		EINVAL_(xctx->ops->query(fx, &xqa));
		{
			/* ... and as the context named in an attribute. */
			struct fi_cq_attr xcqa = cqa;
			xcqa.flags = FI_XPU;
			xcqa.xpu_ctx = fx;
			EINVAL_(fi_cq_open(dom, &xcqa, &cq2, NULL));
			len = sizeof(buf);
			EINVAL_(fi_av_lookup2(av, 0, buf, &len, FI_XPU, fx));
		}

		/* endpoint: fi_ops, ep, cm, msg, tagged, rma, atomic, collective */
		struct fid_ep *fp = fake(k, &ep->fid, sizeof(*ep));
		fid_slots(&ep->fid, &fp->fid, &cq->fid);
		EINVAL_(ep->ops->cancel(&fp->fid, NULL));
		len = sizeof(buf);
		EINVAL_(ep->ops->getopt(&fp->fid, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV, buf, &len));
		EINVAL_(ep->ops->setopt(&fp->fid, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV, &len, sizeof(len)));
		EINVAL_(ep->ops->tx_ctx(fp, 0, &txa, &ep2, NULL));
		EINVAL_(ep->ops->rx_ctx(fp, 0, &rxa, &ep2, NULL));
		EINVAL_(ep->ops->rx_size_left(fp));
		EINVAL_(ep->ops->tx_size_left(fp));
		EINVAL_(ep->ops->export_xpu(fp, 0, &xep));
		EINVAL_(ep->cm->setname(&fp->fid, buf, 16));
		len = sizeof(buf);
		EINVAL_(ep->cm->getname(&fp->fid, buf, &len));
		len = sizeof(buf);
		EINVAL_(ep->cm->getpeer(fp, buf, &len));
		EINVAL_(ep->cm->connect(fp, buf, NULL, 0));
		EINVAL_(ep->cm->listen((struct fid_pep *) fp));
		EINVAL_(ep->cm->accept(fp, NULL, 0));
		EINVAL_(ep->cm->reject((struct fid_pep *) fp, &ep->fid, NULL, 0));
		EINVAL_(ep->cm->shutdown(fp, 0));
		EINVAL_(ep->cm->join(fp, buf, 0, &mc, NULL));
		EINVAL_(ep->msg->recv(fp, buf, 8, NULL, 0, NULL));
		EINVAL_(ep->msg->recvv(fp, &iov, &desc, 1, 0, NULL));
		EINVAL_(ep->msg->recvmsg(fp, &msg, 0));
		EINVAL_(ep->msg->send(fp, buf, 8, NULL, 0, NULL));
		EINVAL_(ep->msg->sendv(fp, &iov, &desc, 1, 0, NULL));
		EINVAL_(ep->msg->sendmsg(fp, &msg, 0));
		EINVAL_(ep->msg->inject(fp, buf, 8, 0));
		EINVAL_(ep->msg->senddata(fp, buf, 8, NULL, 1, 0, NULL));
		EINVAL_(ep->msg->injectdata(fp, buf, 8, 1, 0));
		EINVAL_(ep->tagged->recv(fp, buf, 8, NULL, 0, 1, 0, NULL));
		EINVAL_(ep->tagged->recvv(fp, &iov, &desc, 1, 0, 1, 0, NULL));
		EINVAL_(ep->tagged->recvmsg(fp, &tmsg, 0));
		EINVAL_(ep->tagged->send(fp, buf, 8, NULL, 0, 1, NULL));
		EINVAL_(ep->tagged->sendv(fp, &iov, &desc, 1, 0, 1, NULL));
		EINVAL_(ep->tagged->sendmsg(fp, &tmsg, 0));
		EINVAL_(ep->tagged->inject(fp, buf, 8, 0, 1));
		EINVAL_(ep->tagged->senddata(fp, buf, 8, NULL, 1, 0, 1, NULL));
		EINVAL_(ep->tagged->injectdata(fp, buf, 8, 1, 0, 1));
		EINVAL_(ep->rma->read(fp, buf, 8, NULL, 0, 0, 1, NULL));
		EINVAL_(ep->rma->readv(fp, &iov, &desc, 1, 0, 0, 1, NULL));
		EINVAL_(ep->rma->readmsg(fp, &rmsg, 0));
		EINVAL_(ep->rma->write(fp, buf, 8, NULL, 0, 0, 1, NULL));
		EINVAL_(ep->rma->writev(fp, &iov, &desc, 1, 0, 0, 1, NULL));
		EINVAL_(ep->rma->writemsg(fp, &rmsg, 0));
		EINVAL_(ep->rma->inject(fp, buf, 8, 0, 0, 1));
		EINVAL_(ep->rma->writedata(fp, buf, 8, NULL, 1, 0, 0, 1, NULL));
		EINVAL_(ep->rma->injectdata(fp, buf, 8, 1, 0, 0, 1));
		EINVAL_(ep->atomic->write(fp, buf, 1, NULL, 0, 0, 1, FI_UINT64, FI_SUM, NULL));
		EINVAL_(ep->atomic->writev(fp, &ioc, &desc, 1, 0, 0, 1, FI_UINT64, FI_SUM, NULL));
		EINVAL_(ep->atomic->writemsg(fp, &amsg, 0));
		EINVAL_(ep->atomic->inject(fp, buf, 1, 0, 0, 1, FI_UINT64, FI_SUM));
		EINVAL_(ep->atomic->readwrite(fp, buf, 1, NULL, res, NULL, 0, 0, 1, FI_UINT64, FI_SUM, NULL));
		EINVAL_(ep->atomic->readwritev(fp, &ioc, &desc, 1, &rioc, &desc, 1, 0, 0, 1, FI_UINT64, FI_SUM, NULL));
		EINVAL_(ep->atomic->readwritemsg(fp, &amsg, &rioc, &desc, 1, 0));
		EINVAL_(ep->atomic->compwrite(fp, buf, 1, NULL, cmp, NULL, res, NULL, 0, 0, 1, FI_UINT64, FI_CSWAP, NULL));
		EINVAL_(ep->atomic->compwritev(fp, &ioc, &desc, 1, &cioc, &desc, 1, &rioc, &desc, 1, 0, 0, 1,
					       FI_UINT64, FI_CSWAP, NULL));
		EINVAL_(ep->atomic->compwritemsg(fp, &cmsg, &cioc, &desc, 1, &rioc, &desc, 1, 0));
		EINVAL_(ep->atomic->writevalid(fp, FI_UINT64, FI_SUM, &count));
		EINVAL_(ep->atomic->readwritevalid(fp, FI_UINT64, FI_SUM, &count));
		EINVAL_(ep->atomic->compwritevalid(fp, FI_UINT64, FI_CSWAP, &count));
		EINVAL_(ep->collective->barrier(fp, 0, NULL));
		EINVAL_(ep->collective->broadcast(fp, buf, 1, NULL, 0, 0, FI_UINT64, 0, NULL));
		EINVAL_(ep->collective->alltoall(fp, buf, 1, NULL, res, NULL, 0, FI_UINT64, 0, NULL));
		EINVAL_(ep->collective->allreduce(fp, buf, 1, NULL, res, NULL, 0, FI_UINT64, FI_SUM, 0, NULL));
		EINVAL_(ep->collective->allgather(fp, buf, 1, NULL, res, NULL, 0, FI_UINT64, 0, NULL));
		EINVAL_(ep->collective->reduce_scatter(fp, buf, 1, NULL, res, NULL, 0, FI_UINT64, FI_SUM, 0, NULL));
		EINVAL_(ep->collective->reduce(fp, buf, 1, NULL, res, NULL, 0, 0, FI_UINT64, FI_SUM, 0, NULL));
		EINVAL_(ep->collective->scatter(fp, buf, 1, NULL, res, NULL, 0, 0, FI_UINT64, 0, NULL));
		EINVAL_(ep->collective->gather(fp, buf, 1, NULL, res, NULL, 0, 0, FI_UINT64, 0, NULL));
		EINVAL_(ep->collective->msg(fp, &colmsg, &rioc, &desc, 1, 0));
		EINVAL_(ep->collective->barrier2(fp, 0, 0, NULL));

		/* A foreign fid as the second object. */
		{
			struct fid *other = fake(k, &cq->fid, sizeof(*cq));
			EINVAL_(fi_ep_bind(ep, other, FI_TRANSMIT));
			EINVAL_(fi_trywait(fab, &other, 1));
			other = fake(k, &cntr->fid, sizeof(*cntr));
			EINVAL_(fi_ep_bind(ep, other, FI_SEND));
			other = fake(k, &av->fid, sizeof(*av));
			EINVAL_(fi_ep_bind(ep, other, 0));
			other = fake(k, &eq->fid, sizeof(*eq));
			EINVAL_(fi_ep_bind(ep, other, 0));
		}
	}
	kind_name = "after";
	CHECK(alien_called == 0, "no slot called through the alien ops table");
	CHECK(!d2 && !cq2 && !cntr2 && !eq2 && !av2 && !mr2 && !ep2 && !pep2 && !wait2 && !poll2 &&
	      !stx2 && !xctx2 && !aset && !mc, "no object was opened on a foreign fid");

	/* The real objects are untouched and close in order. */
	passive_endpoint();
	CHECK(fi_close(&ep->fid) == 0, "close ep");
	CHECK(fi_close(&xctx->fid) == 0, "close xpu ctx");
	CHECK(fi_close(&mr->fid) == 0, "close mr");
	CHECK(fi_close(&av->fid) == 0, "close av");
	CHECK(fi_close(&eq->fid) == 0, "close eq");
	CHECK(fi_close(&cntr->fid) == 0, "close cntr");
	CHECK(fi_close(&cq->fid) == 0, "close cq");
	CHECK(fi_close(&dom->fid) == 0, "close domain");
	CHECK(fi_close(&fab->fid) == 0, "close fabric");
	fi_freeinfo(info);
	fi_freeinfo(hints);
	printf("foreign_fid: %d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}
