/* Two-process ping-pong over the shm provider with a chosen threading
 * model: one-way latency of fi_inject + fi_cq_read + fi_recv between two
 * pinned processes (CPU 0 and 1). fi_pingpong leaves threading to the
 * provider (FI_THREAD_SAFE); this one can also ask for FI_THREAD_DOMAIN,
 * and prints tenths of nanoseconds. Each fi_cq_read asks for `entries`
 * completions (fi_pingpong asks for 1, MPICH for 8).
 *   fi_pair [safe|domain] [size] [iterations] [entries]
 */
#define _GNU_SOURCE
#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/wait.h>

#define CK(x) do { int _r = (int)(x); if (_r) { fprintf(stderr, "%s: %d (%s)\n", #x, _r, fi_strerror(-_r)); exit(1); } } while (0)
#define WARMUP 1000

static void pin(int cpu)
{
	cpu_set_t s;
	CPU_ZERO(&s);
	CPU_SET(cpu, &s);
	if (sched_setaffinity(0, sizeof(s), &s))
		perror("sched_setaffinity");
}

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e9 + t.tv_nsec;
}

static void put(int fd, const void *p, size_t n)
{
	if (write(fd, p, n) != (ssize_t)n) {
		perror("write");
		exit(1);
	}
}

static void get(int fd, void *p, size_t n)
{
	size_t got = 0;
	while (got < n) {
		ssize_t r = read(fd, (char *)p + got, n - got);
		if (r <= 0) {
			perror("read");
			exit(1);
		}
		got += (size_t)r;
	}
}

int main(int argc, char **argv)
{
	int safe = !(argc > 1 && !strcmp(argv[1], "domain"));
	size_t size = argc > 2 ? strtoul(argv[2], NULL, 0) : 8;
	long iters = argc > 3 ? atol(argv[3]) : 100000;
	size_t entries = argc > 4 ? strtoul(argv[4], NULL, 0) : 1;
	if (entries < 1 || entries > 64)
		entries = 1;
	/* to_server and to_client carry each side's name length and name. */
	int to_server[2], to_client[2];
	if (pipe(to_server) || pipe(to_client)) {
		perror("pipe");
		return 1;
	}
	pid_t pid = fork();
	if (pid < 0) {
		perror("fork");
		return 1;
	}
	int server = pid == 0;
	pin(server ? 0 : 1);

	struct fi_info *hints = fi_allocinfo(), *info;
	hints->ep_attr->type = FI_EP_RDM;
	hints->caps = FI_MSG;
	hints->domain_attr->threading = safe ? FI_THREAD_SAFE : FI_THREAD_DOMAIN;
	hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
	hints->fabric_attr->prov_name = strdup("shm");
	CK(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &info));
	struct fid_fabric *fab;
	struct fid_domain *dom;
	struct fid_av *av;
	struct fid_cq *cq;
	struct fid_ep *ep;
	struct fi_av_attr aa = { .type = FI_AV_TABLE, .count = 4 };
	struct fi_cq_attr ca = { .size = 128, .format = FI_CQ_FORMAT_DATA };
	CK(fi_fabric(info->fabric_attr, &fab, NULL));
	CK(fi_domain(fab, info, &dom, NULL));
	CK(fi_av_open(dom, &aa, &av, NULL));
	CK(fi_cq_open(dom, &ca, &cq, NULL));
	CK(fi_endpoint(dom, info, &ep, NULL));
	CK(fi_ep_bind(ep, &av->fid, 0));
	CK(fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV));
	CK(fi_enable(ep));

	char name[256], peer[256];
	size_t len = sizeof(name), plen;
	CK(fi_getname(&ep->fid, name, &len));
	put(server ? to_client[1] : to_server[1], &len, sizeof(len));
	put(server ? to_client[1] : to_server[1], name, len);
	get(server ? to_server[0] : to_client[0], &plen, sizeof(plen));
	if (plen > sizeof(peer))
		return 1;
	get(server ? to_server[0] : to_client[0], peer, plen);
	fi_addr_t dest;
	if (fi_av_insert(av, peer, 1, &dest, 0, NULL) != 1)
		return 1;

	char *buf = calloc(1, 2 * size + 64);
	struct fid_mr *mr;
	CK(fi_mr_reg(dom, buf, 2 * size + 64, FI_SEND | FI_RECV, 0, 0, 0, &mr, NULL));
	void *desc = fi_mr_desc(mr);
	CK(fi_recv(ep, buf + size, size, desc, FI_ADDR_UNSPEC, NULL));
	/* The client starts once the server's first receive is posted. */
	char go = 1;
	if (server)
		put(to_client[1], &go, 1);
	else
		get(to_client[0], &go, 1);

	struct fi_cq_data_entry e[64];
	double t0 = 0;
	for (long i = 0; i < iters + WARMUP; i++) {
		if (i == WARMUP)
			t0 = now();
		ssize_t r;
		if (!server)
			while ((r = fi_inject(ep, buf, size, dest)) == -FI_EAGAIN)
				;
		while ((r = fi_cq_read(cq, e, entries)) == -FI_EAGAIN)
			;
		if (r != 1) {
			fprintf(stderr, "fi_cq_read: %zd\n", r);
			return 1;
		}
		CK(fi_recv(ep, buf + size, size, desc, FI_ADDR_UNSPEC, NULL));
		if (server)
			while ((r = fi_inject(ep, buf, size, dest)) == -FI_EAGAIN)
				;
	}
	double ns = (now() - t0) / (double)iters / 2;
	fi_close(&ep->fid);
	fi_close(&mr->fid);
	fi_close(&cq->fid);
	fi_close(&av->fid);
	fi_close(&dom->fid);
	fi_close(&fab->fid);
	fi_freeinfo(info);
	fi_freeinfo(hints);
	free(buf);
	if (server)
		return 0;
	int status = 1;
	waitpid(pid, &status, 0);
	printf("size %zu %s: %.1f ns one way (%ld round trips, reads of %zu)\n", size, safe ? "FI_THREAD_SAFE" : "FI_THREAD_DOMAIN", ns, iters, entries);
	return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}
