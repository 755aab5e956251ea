/* fi_getinfo's node and service on shm, through the C API only, the way
 * programs that find their peer by host and port use them:
 *  - src_addr is always set; dest_addr from node/service without FI_SOURCE;
 *    src_addr from them with FI_SOURCE (a node alone there is this host:
 *    fi_shm:// alone, an address of the endpoint's own); a node that is a
 *    fi_shm:// address is kept; addresses given in the hints are kept; a
 *    node/service that cannot name an endpoint gives -FI_ENODATA;
 *  - tx_attr/rx_attr caps carry only their own side's capabilities, and
 *    caps without direction modifiers name every direction;
 *  - a server opened from fi_getinfo(node, service, FI_SOURCE) is reached by
 *    a client opened from fi_getinfo(node, service, 0); the client's
 *    fi_getname output, sent as a message, goes into the server's AV and
 *    the server answers through it; two endpoints from one source-less
 *    fi_info live side by side; a second endpoint from the same named
 *    source gets -FI_EADDRINUSE;
 *  - an fi_writedata's remote CQ data completion carries the write's length.
 * Prints "N passed, N failed". */
#define _GNU_SOURCE
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int passed, failed;
static const char *who = "parent";

#define CHECK(cond, ...)                                                      \
	do {                                                                  \
		if (cond) {                                                   \
			passed++;                                             \
		} else {                                                      \
			failed++;                                             \
			printf("FAIL [%s] %s:%d: ", who, __FILE__, __LINE__); \
			printf(__VA_ARGS__);                                  \
			printf("\n");                                         \
		}                                                             \
	} while (0)

#define V FI_VERSION(1, 17)
#define WLEN 3000

static char node[] = "127.0.0.1";
static char service[16];

static struct fi_info *shm_hints(uint64_t caps)
{
	struct fi_info *h = fi_allocinfo();
	h->ep_attr->type = FI_EP_RDM;
	h->caps = caps;
	h->domain_attr->mr_mode = FI_MR_VIRT_ADDR | FI_MR_PROV_KEY | FI_MR_ALLOCATED;
	h->fabric_attr->prov_name = strdup("shm");
	return h;
}

static struct fi_info *getinfo(const char *n, const char *s, uint64_t flags,
			       struct fi_info *h, int *ret)
{
	struct fi_info *info = NULL;
	*ret = fi_getinfo(V, n, s, flags, h, &info);
	return *ret ? NULL : info;
}

static int addr_is(const void *addr, size_t len, const char *want)
{
	return addr && len == strlen(want) + 1 && memcmp(addr, want, len) == 0;
}

static void check_addresses(void)
{
	char named[64], other[64];
	struct fi_info *h = shm_hints(FI_MSG), *i;
	int ret;

	snprintf(named, sizeof(named), "fi_shm://%s:%s", node, service);
	i = getinfo(NULL, NULL, 0, h, &ret);
	CHECK(i && addr_is(i->src_addr, i->src_addrlen, "fi_shm://") && !i->dest_addr,
	      "no node/service: src fi_shm://, no dest (%d)", ret);
	fi_freeinfo(i);
	i = getinfo(node, service, 0, h, &ret);
	CHECK(i && addr_is(i->dest_addr, i->dest_addrlen, named) &&
	      addr_is(i->src_addr, i->src_addrlen, "fi_shm://"),
	      "node+service: dest %s (%d)", named, ret);
	fi_freeinfo(i);
	i = getinfo(node, service, FI_SOURCE, h, &ret);
	CHECK(i && addr_is(i->src_addr, i->src_addrlen, named) && !i->dest_addr,
	      "node+service+FI_SOURCE: src %s (%d)", named, ret);
	fi_freeinfo(i);
	i = getinfo(node, NULL, FI_SOURCE, h, &ret);
	CHECK(i && addr_is(i->src_addr, i->src_addrlen, "fi_shm://"),
	      "node alone + FI_SOURCE: this host, fi_shm:// (%d)", ret);
	fi_freeinfo(i);
	i = getinfo(NULL, service, FI_SOURCE, h, &ret);
	snprintf(other, sizeof(other), "fi_shm://%s", service);
	CHECK(i && addr_is(i->src_addr, i->src_addrlen, other),
	      "service alone + FI_SOURCE: %s (%d)", other, ret);
	fi_freeinfo(i);
	i = getinfo("peer7", NULL, 0, h, &ret);
	CHECK(i && addr_is(i->dest_addr, i->dest_addrlen, "fi_shm://peer7"),
	      "node alone: the name (%d)", ret);
	fi_freeinfo(i);
	i = getinfo("fi_shm://job.rank-3", NULL, 0, h, &ret);
	CHECK(i && addr_is(i->dest_addr, i->dest_addrlen, "fi_shm://job.rank-3"),
	      "node that is an address is kept (%d)", ret);
	fi_freeinfo(i);
	i = getinfo("bad/node", service, 0, h, &ret);
	CHECK(!i && ret == -FI_ENODATA, "a node that cannot be a name: %d", ret);
	i = getinfo("x", "0123456789012345678901234567890123456789", 0, h, &ret);
	CHECK(!i && ret == -FI_ENODATA, "a name that is too long: %d", ret);

	h->addr_format = FI_ADDR_STR;
	h->src_addr = strdup("fi_shm://mine");
	h->src_addrlen = strlen("fi_shm://mine") + 1;
	i = getinfo(node, service, 0, h, &ret);
	CHECK(i && addr_is(i->src_addr, i->src_addrlen, "fi_shm://mine") &&
	      addr_is(i->dest_addr, i->dest_addrlen, named),
	      "hints' src_addr kept beside a resolved dest (%d)", ret);
	fi_freeinfo(i);
	fi_freeinfo(h);

	h = shm_hints(FI_MSG | FI_RMA);
	i = getinfo(NULL, NULL, 0, h, &ret);
	CHECK(i && (i->caps & (FI_SEND | FI_RECV | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE)) ==
			   (FI_SEND | FI_RECV | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE),
	      "caps without modifiers name every direction: %d", ret);
	CHECK(i && !(i->tx_attr->caps & (FI_RECV | FI_REMOTE_READ | FI_REMOTE_WRITE | FI_LOCAL_COMM | FI_RMA_EVENT)),
	      "tx_attr caps: transmit side only");
	CHECK(i && !(i->rx_attr->caps & (FI_SEND | FI_READ | FI_WRITE | FI_LOCAL_COMM)),
	      "rx_attr caps: receive side only");
	fi_freeinfo(i);
	fi_freeinfo(h);
}

struct side {
	struct fi_info *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_cq *cq;
	struct fid_av *av;
	struct fid_ep *ep;
	struct fid_mr *mr;
	char buf[WLEN];
};

static int open_side(struct side *s, const char *n, const char *svc, uint64_t flags)
{
	struct fi_info *h = shm_hints(FI_MSG | FI_RMA);
	struct fi_cq_attr cq_attr = { .format = FI_CQ_FORMAT_DATA };
	struct fi_av_attr av_attr = { .type = FI_AV_TABLE };
	int ret;

	memset(s, 0, sizeof(*s));
	s->info = getinfo(n, svc, flags, h, &ret);
	fi_freeinfo(h);
	if (!s->info)
		return ret;
	if ((ret = fi_fabric(s->info->fabric_attr, &s->fabric, NULL)) ||
	    (ret = fi_domain(s->fabric, s->info, &s->domain, NULL)) ||
	    (ret = fi_cq_open(s->domain, &cq_attr, &s->cq, NULL)) ||
	    (ret = fi_av_open(s->domain, &av_attr, &s->av, NULL)) ||
	    (ret = fi_endpoint(s->domain, s->info, &s->ep, NULL)) ||
	    (ret = fi_ep_bind(s->ep, &s->av->fid, 0)) ||
	    (ret = fi_ep_bind(s->ep, &s->cq->fid, FI_TRANSMIT | FI_RECV)) ||
	    (ret = fi_enable(s->ep)) ||
	    (ret = fi_mr_reg(s->domain, s->buf, WLEN, FI_REMOTE_WRITE | FI_WRITE | FI_SEND | FI_RECV,
			     0, 0, 0, &s->mr, NULL)))
		return ret;
	return 0;
}

static void close_side(struct side *s)
{
	if (s->mr)
		fi_close(&s->mr->fid);
	if (s->ep)
		fi_close(&s->ep->fid);
	if (s->av)
		fi_close(&s->av->fid);
	if (s->cq)
		fi_close(&s->cq->fid);
	if (s->domain)
		fi_close(&s->domain->fid);
	if (s->fabric)
		fi_close(&s->fabric->fid);
	fi_freeinfo(s->info);
}

static int wait_cq(struct fid_cq *cq, struct fi_cq_data_entry *e)
{
	struct timespec t0, t;
	struct fi_cq_err_entry err;
	ssize_t n;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		n = fi_cq_read(cq, e, 1);
		if (n == 1)
			return 0;
		if (n == -FI_EAVAIL) {
			memset(&err, 0, sizeof(err));
			fi_cq_readerr(cq, &err, 0);
			return -err.err;
		}
		if (n != -FI_EAGAIN)
			return (int)n;
		clock_gettime(CLOCK_MONOTONIC, &t);
		if (t.tv_sec - t0.tv_sec > 30)
			return -FI_ETIMEDOUT;
	}
}

/* Server: named from node/service with FI_SOURCE; takes the client's name
 * from its first message, answers through it, then takes a write with CQ
 * data and reports its length. */
static int server(int ready_fd, int done_fd)
{
	struct side s, again;
	struct fi_cq_data_entry e;
	fi_addr_t peer = FI_ADDR_UNSPEC;
	uint64_t info[2];
	int ret;

	who = "server";
	ret = open_side(&s, node, service, FI_SOURCE);
	CHECK(ret == 0, "server opened from node/service + FI_SOURCE: %d", ret);
	if (ret)
		return 1;
	ret = open_side(&again, node, service, FI_SOURCE);
	CHECK(ret == -FI_EADDRINUSE, "a second endpoint on the same named source: %d", ret);
	close_side(&again);
	info[0] = (uint64_t)(uintptr_t)s.buf;
	info[1] = fi_mr_key(s.mr);
	CHECK(fi_recv(s.ep, s.buf, sizeof(s.buf), NULL, FI_ADDR_UNSPEC, NULL) == 0, "post recv");
	if (write(ready_fd, "r", 1) != 1)
		return 1;
	ret = wait_cq(s.cq, &e);
	CHECK(ret == 0 && e.len > 0, "client's name arrived: %d", ret);
	ret = fi_av_insert(s.av, s.buf, 1, &peer, 0, NULL);
	CHECK(ret == 1, "fi_av_insert of the name the client sent (%.*s): %d", (int)e.len, s.buf, ret);
	CHECK(fi_send(s.ep, info, sizeof(info), NULL, peer, NULL) == 0, "reply");
	ret = wait_cq(s.cq, &e);
	CHECK(ret == 0 && (e.flags & FI_SEND), "reply sent: %d", ret);
	memset(s.buf, 0, sizeof(s.buf));
	ret = wait_cq(s.cq, &e);
	CHECK(ret == 0 && (e.flags & FI_REMOTE_CQ_DATA) && e.data == 0x5eed,
	      "write with CQ data: %d flags %#lx data %#lx", ret, (unsigned long)e.flags, (unsigned long)e.data);
	CHECK(ret == 0 && e.len == WLEN, "its completion carries the write's length: %zu", e.len);
	CHECK(s.buf[0] == 'w' && s.buf[WLEN - 1] == 'w', "the written data arrived");
	/* Stay until the client has its write completion (this test is about
	 * addresses; peers that exit at once are shm_peer_errors' part). */
	char b;
	if (read(done_fd, &b, 1) != 1)
		CHECK(0, "the client did not say it was done");
	close_side(&s);
	return failed ? 1 : 0;
}

static int client(int done_fd)
{
	struct side c, c2;
	struct fi_cq_data_entry e;
	fi_addr_t srv = FI_ADDR_UNSPEC;
	char name[64];
	size_t len = sizeof(name);
	uint64_t info[2];
	int ret;

	who = "client";
	ret = open_side(&c, node, service, 0);
	CHECK(ret == 0, "client opened from node/service: %d", ret);
	if (ret)
		return 1;
	ret = open_side(&c2, node, service, 0);
	CHECK(ret == 0, "a second endpoint from a source-less fi_info: %d", ret);
	close_side(&c2);
	ret = fi_av_insert(c.av, c.info->dest_addr, 1, &srv, 0, NULL);
	CHECK(ret == 1, "fi_av_insert(dest_addr): %d", ret);
	CHECK(fi_getname(&c.ep->fid, name, &len) == 0, "fi_getname");
	CHECK(fi_recv(c.ep, info, sizeof(info), NULL, FI_ADDR_UNSPEC, NULL) == 0, "post recv");
	CHECK(fi_send(c.ep, name, len, NULL, srv, NULL) == 0, "send own name");
	ret = wait_cq(c.cq, &e);
	CHECK(ret == 0 && (e.flags & FI_SEND), "name sent: %d", ret);
	ret = wait_cq(c.cq, &e);
	CHECK(ret == 0 && (e.flags & FI_RECV) && e.len == sizeof(info), "the server answered: %d", ret);
	memset(c.buf, 'w', WLEN);
	ret = (int)fi_writedata(c.ep, c.buf, WLEN, fi_mr_desc(c.mr), 0x5eed, srv, info[0], info[1], NULL);
	CHECK(ret == 0, "fi_writedata: %d", ret);
	ret = wait_cq(c.cq, &e);
	CHECK(ret == 0 && (e.flags & FI_WRITE), "write completed: %d", ret);
	if (write(done_fd, "d", 1) != 1)
		CHECK(0, "telling the server");
	close_side(&c);
	return failed ? 1 : 0;
}

int main(void)
{
	int ready[2], done[2], status = 0;
	char b;
	pid_t pid;

	snprintf(service, sizeof(service), "%d", 20000 + getpid() % 20000);
	check_addresses();
	if (pipe(ready) || pipe(done))
		return 2;
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		close(ready[0]);
		close(done[1]);
		int r = server(ready[1], done[0]);
		printf("server: %d passed, %d failed\n", passed, failed);
		fflush(stdout);
		_exit(r);
	}
	close(ready[1]);
	close(done[0]);
	if (read(ready[0], &b, 1) != 1) {
		failed++;
		printf("FAIL server did not get ready\n");
	} else {
		client(done[1]);
	}
	close(done[1]);
	waitpid(pid, &status, 0);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "server exit status %d", status);
	printf("%d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}
