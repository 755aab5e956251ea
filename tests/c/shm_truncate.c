/* A process of the same user that truncates the shm provider's shared
 * objects must not be able to kill its peers.
 *
 * Three processes: the parent (endpoint A), a child (endpoint B, and later
 * B2) and an attacker. Until told to stop, the attacker opens every
 * /dev/shm/rfabric-shm.* entry and ftruncates it (to 0, 1, 64, 4096, 8192
 * and 1 MiB in turn), and reopens every descriptor of the parent and the
 * child that refers to an rfabric object (/proc/<pid>/fd/N) to truncate it,
 * grow it and add a seal to it.
 * Meanwhile A and B ping-pong messages of 1 B to 1 MiB with the data
 * checked; halfway the child opens a second endpoint B2, whose address A
 * inserts and exchanges messages with, so segments are also found and
 * mapped during the attack. Every operation must complete; nobody may die
 * of a signal (a mapping of a shrunk file raises SIGBUS); the attacker must
 * have truncated files, and must never have changed the size or the seals
 * of a segment's memory.
 * Run with FI_SHM_CMA=1 and with FI_SHM_CMA=0 (shm_truncate.sh). */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef F_ADD_SEALS
#define F_ADD_SEALS 1033
#endif
#ifndef F_SEAL_FUTURE_WRITE
#define F_SEAL_FUTURE_WRITE 0x0010
#endif

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
			fflush(stdout);                                       \
		}                                                             \
	} while (0)

#define ROUNDS 1200
#define HALF (ROUNDS / 2)
#define B2_MSGS 12
#define MAXLEN (1u << 20)
static const size_t sizes[] = { 1, 64, 4096, 4097, 65536, MAXLEN };
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))

/* ------------------------------------------------------------ attacker */

struct tally {
	long files;      /* rfabric entries in /dev/shm opened */
	long files_cut;  /* ... and resized */
	long mem_seen;   /* rfabric objects reached through /proc/<pid>/fd */
	long mem_cut;    /* ... truncated */
	long mem_grown;  /* ... grown */
	long mem_sealed; /* ... given one more seal */
};

static void attack_files(struct tally *t, long round)
{
	static const off_t cut[] = { 0, 1, 64, 4096, 8192, 1 << 20 };
	DIR *d = opendir("/dev/shm");
	struct dirent *e;
	if (!d)
		return;
	while ((e = readdir(d))) {
		int fd;
		if (strncmp(e->d_name, "rfabric-shm.", 12))
			continue;
		fd = openat(dirfd(d), e->d_name, O_RDWR | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY);
		if (fd < 0)
			continue;
		t->files++;
		if (ftruncate(fd, cut[round % 6]) == 0)
			t->files_cut++;
		close(fd);
	}
	closedir(d);
}

static void attack_fds(struct tally *t, pid_t pid)
{
	char dir[64], path[384], link[512];
	DIR *d;
	struct dirent *e;
	snprintf(dir, sizeof(dir), "/proc/%d/fd", (int)pid);
	d = opendir(dir);
	if (!d)
		return;
	while ((e = readdir(d))) {
		struct stat st;
		ssize_t n;
		int fd;
		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		n = readlink(path, link, sizeof(link) - 1);
		if (n <= 0)
			continue;
		link[n] = 0;
		if (!strstr(link, "rfabric-shm"))
			continue;
		fd = open(path, O_RDWR | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
		if (fd < 0)
			continue;
		if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
			t->mem_seen++;
			if (ftruncate(fd, 0) == 0)
				t->mem_cut++;
			if (ftruncate(fd, st.st_size + 4096) == 0)
				t->mem_grown++;
			if (fcntl(fd, F_ADD_SEALS, F_SEAL_FUTURE_WRITE) == 0)
				t->mem_sealed++;
		}
		close(fd);
	}
	closedir(d);
}

struct attacker {
	pid_t pid;
	int stop;  /* write a byte: stop */
	int tally; /* read a struct tally */
};

static struct attacker start_attacker(pid_t a, pid_t b)
{
	int s[2], r[2];
	struct attacker at = { 0 };
	if (pipe(s) || pipe(r))
		exit(2);
	at.pid = fork();
	if (at.pid < 0)
		exit(2);
	if (at.pid == 0) {
		struct tally t = { 0 };
		struct pollfd p = { .fd = s[0], .events = POLLIN };
		close(s[1]);
		close(r[0]);
		for (long round = 0; poll(&p, 1, 0) == 0; round++) {
			attack_files(&t, round);
			attack_fds(&t, a);
			attack_fds(&t, b);
		}
		if (write(r[1], &t, sizeof(t)) != (ssize_t)sizeof(t))
			_exit(3);
		_exit(0);
	}
	close(s[0]);
	close(r[1]);
	at.stop = s[1];
	at.tally = r[0];
	return at;
}

/* ------------------------------------------------------------ endpoints */

struct res {
	struct fi_info *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_cq *txcq, *rxcq;
	struct fid_av *av;
	struct fid_ep *ep;
	char name[128];
	size_t namelen;
};

static int open_res(struct res *r)
{
	struct fi_info *hints = fi_allocinfo();
	struct fi_cq_attr cq_attr = { .format = FI_CQ_FORMAT_TAGGED, .wait_obj = FI_WAIT_NONE };
	struct fi_av_attr av_attr = { .type = FI_AV_TABLE };
	int ret;

	memset(r, 0, sizeof(*r));
	hints->ep_attr->type = FI_EP_RDM;
	hints->caps = FI_MSG;
	hints->domain_attr->data_progress = FI_PROGRESS_MANUAL;
	hints->fabric_attr->prov_name = strdup("shm");
	ret = fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &r->info);
	fi_freeinfo(hints);
	if (ret) {
		printf("[%s] fi_getinfo: %d\n", who, ret);
		return ret;
	}
	if (fi_fabric(r->info->fabric_attr, &r->fabric, NULL) || fi_domain(r->fabric, r->info, &r->domain, NULL) ||
	    fi_cq_open(r->domain, &cq_attr, &r->txcq, NULL) || fi_cq_open(r->domain, &cq_attr, &r->rxcq, NULL) ||
	    fi_av_open(r->domain, &av_attr, &r->av, NULL) || fi_endpoint(r->domain, r->info, &r->ep, NULL)) {
		printf("[%s] opening objects failed\n", who);
		return -1;
	}
	if (fi_ep_bind(r->ep, &r->av->fid, 0) || fi_ep_bind(r->ep, &r->txcq->fid, FI_TRANSMIT) ||
	    fi_ep_bind(r->ep, &r->rxcq->fid, FI_RECV) || fi_enable(r->ep)) {
		printf("[%s] binding failed\n", who);
		return -1;
	}
	r->namelen = sizeof(r->name);
	return fi_getname(&r->ep->fid, r->name, &r->namelen);
}

static void close_res(struct res *r)
{
	CHECK(fi_close(&r->ep->fid) == 0, "close ep");
	CHECK(fi_close(&r->txcq->fid) == 0 && fi_close(&r->rxcq->fid) == 0, "close cqs");
	CHECK(fi_close(&r->av->fid) == 0, "close av");
	CHECK(fi_close(&r->domain->fid) == 0, "close domain");
	CHECK(fi_close(&r->fabric->fid) == 0, "close fabric");
	fi_freeinfo(r->info);
}

static fi_addr_t insert(struct res *r, const char *name)
{
	fi_addr_t a = FI_ADDR_UNSPEC;
	int n = fi_av_insert(r->av, name, 1, &a, 0, NULL);
	CHECK(n == 1, "[%s] fi_av_insert: %d", who, n);
	return a;
}

/* The parent watches its child, the child its parent: a peer that died (of SIGBUS, say) ends the
 * waits at once instead of after the timeout. */
static pid_t watch, parent_pid;
static int watch_status = -1;

static int peer_gone(void)
{
	if (parent_pid)
		return getppid() != parent_pid;
	if (watch > 0 && watch_status == -1 && waitpid(watch, &watch_status, WNOHANG) != watch)
		watch_status = -1;
	return watch_status != -1;
}

/* 0 on a completion; otherwise the error code (or -FI_ETIMEDOUT after about
 * 60 s of polling), never a hang. */
static int wait_cq(struct fid_cq *cq, size_t *len)
{
	struct fi_cq_tagged_entry e;
	for (long i = 0; i < 6000000L; i++) {
		if (i % 4096 == 4095 && peer_gone())
			return -FI_ECONNRESET;
		ssize_t n = fi_cq_read(cq, &e, 1);
		if (n == 1) {
			if (len)
				*len = e.len;
			return 0;
		}
		if (n == -FI_EAVAIL) {
			struct fi_cq_err_entry err = { 0 };
			fi_cq_readerr(cq, &err, 0);
			return err.err ? -err.err : -FI_EOTHER;
		}
		if (n != -FI_EAGAIN)
			return (int)n;
		if (i > 1000)
			usleep(10);
	}
	return -FI_ETIMEDOUT;
}

static int send_msg(struct res *r, const void *buf, size_t len, fi_addr_t to)
{
	ssize_t ret;
	long tries = 0;
	while ((ret = fi_send(r->ep, buf, len, NULL, to, NULL)) == -FI_EAGAIN) {
		/* Replies to our earlier sends free ring cells only when read. */
		if (++tries > 1000)
			usleep(10);
		if (tries % 4096 == 0 && peer_gone())
			return -FI_ECONNRESET;
		if (tries > 6000000L)
			return -FI_ETIMEDOUT;
	}
	if (ret)
		return (int)ret;
	return wait_cq(r->txcq, NULL);
}

static void fill(unsigned char *b, size_t len, unsigned seed)
{
	for (size_t i = 0; i < len; i++)
		b[i] = (unsigned char)((i * 2654435761u >> 7) ^ seed);
}

static int same(const unsigned char *b, size_t len, unsigned seed)
{
	for (size_t i = 0; i < len; i++)
		if (b[i] != (unsigned char)((i * 2654435761u >> 7) ^ seed))
			return 0;
	return 1;
}

/* Receives one message into buf and sends it back with every byte
 * complemented. 0 on success. */
static int echo_one(struct res *r, unsigned char *buf, fi_addr_t to, unsigned seed, size_t want)
{
	size_t len = 0;
	int rc;
	if ((rc = (int)fi_recv(r->ep, buf, MAXLEN, NULL, FI_ADDR_UNSPEC, NULL)))
		return rc;
	if ((rc = wait_cq(r->rxcq, &len)))
		return rc;
	if (len != want || !same(buf, len, seed))
		return -FI_EIO;
	for (size_t i = 0; i < len; i++)
		buf[i] = (unsigned char)~buf[i];
	return send_msg(r, buf, len, to);
}

/* Sends len bytes and checks the complemented echo. 0 on success. */
static int ping_one(struct res *r, unsigned char *out, unsigned char *in, fi_addr_t to, unsigned seed, size_t len)
{
	size_t got = 0;
	int rc;
	fill(out, len, seed);
	if ((rc = (int)fi_recv(r->ep, in, MAXLEN, NULL, FI_ADDR_UNSPEC, NULL)))
		return rc;
	if ((rc = send_msg(r, out, len, to)))
		return rc;
	if ((rc = wait_cq(r->rxcq, &got)))
		return rc;
	if (got != len)
		return -FI_EIO;
	for (size_t i = 0; i < len; i++)
		if (in[i] != (unsigned char)~out[i])
			return -FI_EIO;
	return 0;
}

/* ------------------------------------------------------------ processes */

static void read_all(int fd, void *p, size_t n)
{
	size_t got = 0;
	while (got < n) {
		ssize_t k = read(fd, (char *)p + got, n - got);
		if (k <= 0) {
			printf("FAIL [%s] pipe closed\n", who);
			exit(3);
		}
		got += (size_t)k;
	}
}

static void write_all(int fd, const void *p, size_t n)
{
	if (write(fd, p, n) != (ssize_t)n) {
		printf("FAIL [%s] pipe write: %s\n", who, strerror(errno));
		exit(3);
	}
}

static void child(int rfd, int wfd)
{
	struct res b, b2;
	char parent[128];
	unsigned char *buf = malloc(MAXLEN);
	fi_addr_t pa, pa2;

	who = "child";
	if (!buf || open_res(&b))
		_exit(3);
	write_all(wfd, b.name, sizeof(b.name));
	read_all(rfd, parent, sizeof(parent));
	pa = insert(&b, parent);
	for (unsigned i = 0; i < ROUNDS; i++) {
		int rc;
		if (i == HALF) {
			/* A new endpoint during the attack: both sides find and map
			 * each other's segment now. */
			CHECK(open_res(&b2) == 0, "second endpoint");
			pa2 = insert(&b2, parent);
			write_all(wfd, b2.name, sizeof(b2.name));
			for (unsigned j = 0; j < B2_MSGS; j++) {
				rc = echo_one(&b2, buf, pa2, 1000 + j, sizes[j % NSIZES]);
				CHECK(rc == 0, "B2 echo %u: %d", j, rc);
			}
			close_res(&b2);
		}
		rc = echo_one(&b, buf, pa, i, sizes[i % NSIZES]);
		if (rc) {
			CHECK(0, "echo round %u (%zu B): %d", i, sizes[i % NSIZES], rc);
			break;
		}
	}
	close_res(&b);
	free(buf);
	printf("child: %d passed, %d failed\n", passed, failed);
	_exit(failed ? 1 : 0);
}

static void report_status(const char *what, int st)
{
	if (WIFSIGNALED(st))
		CHECK(0, "%s killed by signal %d (%s)", what, WTERMSIG(st), strsignal(WTERMSIG(st)));
	else
		CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s exit status %d", what, WEXITSTATUS(st));
}

int main(void)
{
	int p2c[2], c2p[2], st = 0;
	unsigned done = 0;
	struct res a;
	char name[128];
	unsigned char *out = malloc(MAXLEN), *in = malloc(MAXLEN);
	struct attacker at;
	struct tally t = { 0 };
	fi_addr_t ca, ca2;
	pid_t kid;
	const char *cma = getenv("FI_SHM_CMA");

	setvbuf(stdout, NULL, _IONBF, 0);
	signal(SIGPIPE, SIG_IGN);
	printf("mode: %s\n", cma && !strcmp(cma, "0") ? "bounce (FI_SHM_CMA=0)" : "CMA when permitted");
	if (!out || !in || pipe(p2c) || pipe(c2p))
		return 2;
	kid = fork();
	if (kid < 0)
		return 2;
	if (kid == 0) {
		parent_pid = getppid();
		close(p2c[1]);
		close(c2p[0]);
		child(p2c[0], c2p[1]);
	}
	close(p2c[0]);
	close(c2p[1]);
	if (open_res(&a))
		return 2;
	read_all(c2p[0], name, sizeof(name));
	write_all(p2c[1], a.name, sizeof(a.name));
	ca = insert(&a, name);

	watch = kid;
	at = start_attacker(getpid(), kid);
	for (; done < ROUNDS; done++) {
		unsigned i = done;
		int rc;
		if (i == HALF) {
			read_all(c2p[0], name, sizeof(name));
			ca2 = insert(&a, name);
			for (unsigned j = 0; j < B2_MSGS; j++) {
				rc = ping_one(&a, out, in, ca2, 1000 + j, sizes[j % NSIZES]);
				CHECK(rc == 0, "B2 message %u: %d", j, rc);
			}
		}
		rc = ping_one(&a, out, in, ca, i, sizes[i % NSIZES]);
		if (rc) {
			CHECK(0, "round %u (%zu B): %d", i, sizes[i % NSIZES], rc);
			break;
		}
	}
	printf("parent: %u rounds done\n", done);
	if (waitpid(at.pid, &st, WNOHANG) == at.pid) {
		/* Gone before it was told to stop: say how it ended. */
		report_status("attacker", st);
		CHECK(0, "the attacker ran until it was told to stop");
		printf("%d passed, %d failed\n", passed, failed);
		return 1;
	}
	write_all(at.stop, "x", 1);
	read_all(at.tally, &t, sizeof(t));
	waitpid(at.pid, &st, 0);
	report_status("attacker", st);
	printf("attacker: %ld files opened, %ld resized; %ld shared objects reached through /proc, "
	       "%ld truncated, %ld grown, %ld sealed\n",
	       t.files, t.files_cut, t.mem_seen, t.mem_cut, t.mem_grown, t.mem_sealed);
	CHECK(t.files_cut > 0, "the attacker resized files");
	CHECK(t.mem_cut == 0 && t.mem_grown == 0 && t.mem_sealed == 0, "segment memory kept its size and seals");
	if (!peer_gone())
		waitpid(kid, &watch_status, 0);
	report_status("child", watch_status);
	close_res(&a);
	free(out);
	free(in);
	printf("%d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}
