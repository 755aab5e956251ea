/* One-process, one-thread ping-pong between two shm endpoints (or two of
 * the provider named by RF_SELFLOOP_PROV, e.g. tcp with FI_TCP_IFACE=lo,
 * where each send runs the kernel's loopback delivery too): measures the
 * CPU cost of the object layer (fi_send/fi_recv/fi_cq_read and progress)
 * without scheduling effects between processes, so it stays usable on a
 * loaded machine. Prints the best (minimum) nanoseconds per one-way message
 * over several batches.
 *   fi_selfloop [size] [safe|domain] [inject|poll]
 *
 * "poll" times an fi_cq_read that finds nothing (what a receiver spins on
 * while it waits), in ns per call.
 */
#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CK(x) do { int _r = (int)(x); if (_r) { fprintf(stderr, "%s: %d (%s)\n", #x, _r, fi_strerror(-_r)); exit(1); } } while (0)

static struct fid_cq *cq[2];
static struct fid_ep *ep[2];
static fi_addr_t peer[2];

static void wait_one(int i)
{
	struct fi_cq_data_entry e;
	for (;;) {
		ssize_t r = fi_cq_read(cq[i], &e, 1);
		if (r == 1)
			return;
		if (r != -FI_EAGAIN) {
			fprintf(stderr, "fi_cq_read: %zd\n", r);
			exit(1);
		}
	}
}

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e9 + t.tv_nsec;
}

int main(int argc, char **argv)
{
	size_t size = argc > 1 ? strtoul(argv[1], NULL, 0) : 8;
	int safe = argc > 2 && !strcmp(argv[2], "safe");
	int inject = argc > 3 && !strcmp(argv[3], "inject");
	int poll = argc > 3 && !strcmp(argv[3], "poll");
	struct fi_info *hints = fi_allocinfo(), *info;
	hints->ep_attr->type = FI_EP_RDM;
	hints->caps = FI_MSG;
	hints->domain_attr->threading = safe ? FI_THREAD_SAFE : FI_THREAD_DOMAIN;
	hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
	const char *prov = getenv("RF_SELFLOOP_PROV");
	hints->fabric_attr->prov_name = strdup(prov && *prov ? prov : "shm");
	CK(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &info));
	struct fid_fabric *fab;
	struct fid_domain *dom;
	struct fid_av *av;
	CK(fi_fabric(info->fabric_attr, &fab, NULL));
	CK(fi_domain(fab, info, &dom, NULL));
	struct fi_av_attr aa = { .type = FI_AV_TABLE, .count = 4 };
	CK(fi_av_open(dom, &aa, &av, NULL));
	char *buf[2];
	struct fid_mr *mr[2];
	char names[2][256];
	for (int i = 0; i < 2; i++) {
		struct fi_cq_attr ca = { .size = 128, .format = FI_CQ_FORMAT_DATA };
		CK(fi_cq_open(dom, &ca, &cq[i], NULL));
		CK(fi_endpoint(dom, info, &ep[i], NULL));
		CK(fi_ep_bind(ep[i], &av->fid, 0));
		CK(fi_ep_bind(ep[i], &cq[i]->fid, FI_TRANSMIT | FI_RECV));
		CK(fi_enable(ep[i]));
		size_t len = sizeof(names[i]);
		CK(fi_getname(&ep[i]->fid, names[i], &len));
		buf[i] = calloc(1, 2 * size + 64);
		CK(fi_mr_reg(dom, buf[i], 2 * size + 64, FI_SEND | FI_RECV, 0, 0, 0, &mr[i], NULL));
	}
	for (int i = 0; i < 2; i++)
		if (fi_av_insert(av, names[1 - i], 1, &peer[i], 0, NULL) != 1)
			return 1;
	double best = 1e30;
	const int iters = 2000;
	if (poll) {
		struct fi_cq_data_entry e;
		for (int b = 0; b < 100; b++) {
			double t0 = now();
			for (int k = 0; k < 10 * iters; k++)
				if (fi_cq_read(cq[0], &e, 1) != -FI_EAGAIN)
					return 1;
			double ns = (now() - t0) / (10.0 * iters);
			if (ns < best)
				best = ns;
		}
		printf("empty fi_cq_read %s: %.1f ns per call (best of 100 x %d)\n",
		       safe ? "FI_THREAD_SAFE" : "FI_THREAD_DOMAIN", best, 10 * iters);
		return 0;
	}
	for (int b = 0; b < 100; b++) {
		double t0 = now();
		for (int k = 0; k < iters; k++) {
			for (int s = 0; s < 2; s++) {
				int r = 1 - s;
				CK(fi_recv(ep[r], buf[r] + size, size, fi_mr_desc(mr[r]), FI_ADDR_UNSPEC, NULL));
				if (inject)
					CK(fi_inject(ep[s], buf[s], size, peer[s]));
				else {
					CK(fi_send(ep[s], buf[s], size, fi_mr_desc(mr[s]), peer[s], NULL));
					wait_one(s);
				}
				wait_one(r);
			}
		}
		double ns = (now() - t0) / (2.0 * iters);
		if (ns < best)
			best = ns;
	}
	printf("size %zu %s%s: %.1f ns per message (best of 100 x %d)\n", size, safe ? "FI_THREAD_SAFE" : "FI_THREAD_DOMAIN",
	       inject ? " inject" : "", best, 2 * iters);
	for (int i = 0; i < 2; i++) {
		fi_close(&ep[i]->fid);
		fi_close(&mr[i]->fid);
		fi_close(&cq[i]->fid);
	}
	fi_close(&av->fid);
	fi_close(&dom->fid);
	fi_close(&fab->fid);
	fi_freeinfo(info);
	fi_freeinfo(hints);
	return 0;
}
