/* fi_setname on shm endpoints, through the C API only.
 *  - bad names (-FI_EINVAL), setname after fi_enable (-FI_EBUSY), one name
 *    twice in one process and a name held by a live process (-FI_EADDRINUSE);
 *  - two processes that find each other by name only (no fi_getname output
 *    exchanged): each inserts the other's name and retries its first send
 *    until the peer exists; messages both ways (eager and rendezvous sizes)
 *    with data and source checked; fi_getname / fi_av_lookup /
 *    fi_av_straddr report the name;
 *  - a name left by a process killed with SIGKILL can be taken again.
 * Prints "N passed, N failed". */
#define _GNU_SOURCE
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <signal.h>
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

struct res {
	struct fi_info *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_cq *cq;
	struct fid_av *av;
	struct fid_ep *ep;
};

/* Opens everything; the endpoint is bound but not enabled. */
static void open_res(struct res *r)
{
	struct fi_info *hints = fi_allocinfo();
	struct fi_cq_attr cq_attr = { .format = FI_CQ_FORMAT_TAGGED };
	struct fi_av_attr av_attr = { .type = FI_AV_TABLE };
	int ret;

	hints->ep_attr->type = FI_EP_RDM;
	hints->caps = FI_MSG | FI_SOURCE;
	hints->fabric_attr->prov_name = strdup("shm");
	ret = fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &r->info);
	fi_freeinfo(hints);
	if (ret) {
		printf("fi_getinfo: %d\n", ret);
		exit(2);
	}
	if (fi_fabric(r->info->fabric_attr, &r->fabric, NULL) ||
	    fi_domain(r->fabric, r->info, &r->domain, NULL) ||
	    fi_cq_open(r->domain, &cq_attr, &r->cq, NULL) ||
	    fi_av_open(r->domain, &av_attr, &r->av, NULL) ||
	    fi_endpoint(r->domain, r->info, &r->ep, NULL) ||
	    fi_ep_bind(r->ep, &r->av->fid, 0) ||
	    fi_ep_bind(r->ep, &r->cq->fid, FI_TRANSMIT | FI_RECV)) {
		printf("opening objects failed\n");
		exit(2);
	}
}

static void close_res(struct res *r)
{
	CHECK(fi_close(&r->ep->fid) == 0, "close ep");
	CHECK(fi_close(&r->cq->fid) == 0, "close cq");
	CHECK(fi_close(&r->av->fid) == 0, "close av");
	CHECK(fi_close(&r->domain->fid) == 0, "close domain");
	CHECK(fi_close(&r->fabric->fid) == 0, "close fabric");
	fi_freeinfo(r->info);
}

static int setname(struct fid_ep *ep, const char *s)
{
	return fi_setname(&ep->fid, (void *)s, strlen(s) + 1);
}

/* One completion (with its source); returns 1 or the negative error. */
static int wait_cq(struct fid_cq *cq, struct fi_cq_tagged_entry *e, fi_addr_t *src)
{
	for (long i = 0; i < 200000000L; i++) {
		ssize_t n = fi_cq_readfrom(cq, e, 1, src);
		if (n == 1)
			return 1;
		if (n != -FI_EAGAIN)
			return (int)n;
	}
	return -FI_ETIMEDOUT;
}

static void fill(char *b, size_t n, int seed)
{
	for (size_t i = 0; i < n; i++)
		b[i] = (char)(i * 7 + seed);
}

static int same(const char *b, size_t n, int seed)
{
	for (size_t i = 0; i < n; i++)
		if (b[i] != (char)(i * 7 + seed))
			return 0;
	return 1;
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static const size_t sizes[] = { 1, 100, 4096, 20000, 200000 };
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))
#define MAXSZ 200000

/* Inserts the peer's name (accepted even before the peer exists) and
 * returns its fi_addr. */
static fi_addr_t insert_name(struct res *r, const char *name)
{
	fi_addr_t a = FI_ADDR_NOTAVAIL;
	int ret = fi_av_insert(r->av, name, 1, &a, 0, NULL);
	CHECK(ret == 1 && a != FI_ADDR_NOTAVAIL, "insert %s: %d", name, ret);
	return a;
}

/* Sends, retrying while the peer's name has no live endpoint yet. */
static void send_retry(struct res *r, const char *buf, size_t len, fi_addr_t peer)
{
	struct fi_cq_tagged_entry e;
	double end = now() + 60;
	ssize_t ret;
	int ctx;

	while ((ret = fi_send(r->ep, buf, len, NULL, peer, &ctx)) == -FI_ENOENT || ret == -FI_EAGAIN) {
		fi_cq_read(r->cq, &e, 0);
		if (now() > end)
			break;
		usleep(ret == -FI_ENOENT ? 1000 : 0);
	}
	CHECK(ret == 0, "send %zu: %zd (%s)", len, ret, fi_strerror((int)-ret));
	if (ret == 0)
		CHECK(wait_cq(r->cq, &e, NULL) == 1 && e.op_context == &ctx && (e.flags & FI_SEND),
		      "send completion %zu", len);
}

static void recv_check(struct res *r, char *buf, size_t len, int seed, fi_addr_t from)
{
	struct fi_cq_tagged_entry e;
	fi_addr_t src = FI_ADDR_NOTAVAIL;
	int ctx;

	memset(buf, 0, len + 1);
	CHECK(fi_recv(r->ep, buf, MAXSZ, NULL, FI_ADDR_UNSPEC, &ctx) == 0, "recv");
	int rc = wait_cq(r->cq, &e, &src);
	CHECK(rc == 1 && e.op_context == &ctx && e.len == len, "recv %zu: rc %d len %zu", len, rc, (size_t)e.len);
	CHECK(same(buf, len, seed), "data of size %zu", len);
	CHECK(src == from, "source %llu, expected %llu", (unsigned long long)src, (unsigned long long)from);
}

/* Both sides: name ourselves, find the peer by its name, exchange. */
static void talk(const char *mine, const char *theirs, int first)
{
	struct res r;
	char *buf = malloc(MAXSZ + 1);
	char got[128];
	size_t len = sizeof(got);

	open_res(&r);
	CHECK(setname(r.ep, mine) == 0, "setname %s", mine);
	CHECK(fi_getname(&r.ep->fid, got, &len) == 0 && len == strlen(mine) + 1 && !strcmp(got, mine),
	      "getname %s", got);
	CHECK(fi_enable(r.ep) == 0, "enable");
	fi_addr_t peer = insert_name(&r, theirs);
	len = sizeof(got);
	CHECK(fi_av_lookup(r.av, peer, got, &len) == 0 && !strcmp(got, theirs), "lookup %s", got);
	len = sizeof(got);
	CHECK(!strcmp(fi_av_straddr(r.av, theirs, got, &len), theirs), "straddr %s", got);

	for (size_t i = 0; i < NSIZES; i++) {
		if (first) {
			fill(buf, sizes[i], (int)i);
			send_retry(&r, buf, sizes[i], peer);
			recv_check(&r, buf, sizes[i], (int)i + 100, peer);
		} else {
			recv_check(&r, buf, sizes[i], (int)i, peer);
			fill(buf, sizes[i], (int)i + 100);
			send_retry(&r, buf, sizes[i], peer);
		}
	}
	/* Let the peer read its last completion before our segment goes. */
	sleep(1);
	close_res(&r);
	free(buf);
}

int main(void)
{
	char pname[64], cname[64], kname[64], dup[64];
	struct res r, r2;
	int ready[2];
	pid_t child, victim;
	int status;

	snprintf(pname, sizeof(pname), "fi_shm://rftsn.%d_p", (int)getpid());
	snprintf(cname, sizeof(cname), "fi_shm://rftsn.%d_c", (int)getpid());
	snprintf(kname, sizeof(kname), "fi_shm://rftsn-%d-killed", (int)getpid());
	snprintf(dup, sizeof(dup), "fi_shm://rftsn-%d-dup", (int)getpid());

	/* The peer starts first and waits for us by name. */
	child = fork();
	if (child == 0) {
		who = "child";
		talk(cname, pname, 0);
		printf("child: %d passed, %d failed\n", passed, failed);
		fflush(stdout);
		_exit(failed ? 1 : 0);
	}
	/* A process that takes a name and is killed holding it. */
	if (pipe(ready))
		return 2;
	victim = fork();
	if (victim == 0) {
		who = "victim";
		open_res(&r);
		char c = setname(r.ep, kname) == 0 ? 'y' : 'n';
		if (write(ready[1], &c, 1) != 1)
			_exit(3);
		for (;;)
			pause();
	}

	/* Bad names. */
	open_res(&r);
	const char *bad[] = { "fi_shm://", "fi_shm://a/b", "fi_shm://a b", "fi_shm://x%y", "shm://abc",
			      "fi_shm://12345678901234567890123456789012345678901" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		CHECK(setname(r.ep, bad[i]) == -FI_EINVAL, "setname %s", bad[i]);
	CHECK(fi_setname(&r.ep->fid, (void *)"fi_shm://nonul", 14) == -FI_EINVAL, "setname without NUL");
	/* Another process's address form. */
	{
		char other[] = "fi_shm://AQAAAAEAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA";
		CHECK(setname(r.ep, other) == -FI_EINVAL, "setname with another process's address");
	}
	/* One name, one endpoint. */
	open_res(&r2);
	CHECK(setname(r.ep, dup) == 0, "setname %s", dup);
	CHECK(setname(r2.ep, dup) == -FI_EADDRINUSE, "same name twice");
	/* After fi_enable: refused. */
	CHECK(fi_enable(r.ep) == 0, "enable");
	int ret = setname(r.ep, "fi_shm://later");
	CHECK(ret == -FI_EBUSY, "setname after enable: %d", ret);

	/* A live process's name is in use; once it is killed, it is free. */
	{
		char c = 0;
		CHECK(read(ready[0], &c, 1) == 1 && c == 'y', "victim named itself");
		CHECK(setname(r2.ep, kname) == -FI_EADDRINUSE, "name of a live process");
		kill(victim, SIGKILL);
		CHECK(waitpid(victim, &status, 0) == victim && WIFSIGNALED(status), "victim killed");
		ret = setname(r2.ep, kname);
		CHECK(ret == 0, "name of a killed process taken again: %d", ret);
		char got[64];
		size_t len = sizeof(got);
		CHECK(fi_getname(&r2.ep->fid, got, &len) == 0 && !strcmp(got, kname), "getname %s", got);
	}
	close_res(&r2);
	close_res(&r);

	/* Two processes by name. */
	talk(pname, cname, 1);
	CHECK(waitpid(child, &status, 0) == child && WIFEXITED(status) && WEXITSTATUS(status) == 0,
	      "child status %d", status);
	printf("%d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}
