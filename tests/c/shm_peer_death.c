/* The peer-death campaign of the shm provider, through the C API only.
 *
 * The parent is the survivor. For each case and repetition it forks a
 * victim and a third peer, opens a fresh endpoint, drives the victim to one
 * protocol stage and kills it there with SIGKILL, chosen from outside the
 * library by what the survivor can observe: a byte on a pipe from the
 * victim, its own completion queue, a counter the victim keeps in memory
 * shared with the survivor, or a buffer shared with the victim (mapped
 * before the fork) filling up, watched by the survivor's own thread, or by
 * a second thread while the first is inside a copy. The cases:
 *   eager-ring-full   survivor sends: the receiver is stopped (SIGSTOP), a
 *                     delivery-complete send waits, eager sends fill its
 *                     queue until -FI_EAGAIN; then it dies
 *   eager-blocked     survivor receives an eager stream (1 to 3 cells per
 *                     message) and stops taking it; the sender dies while
 *                     its sends return -FI_EAGAIN
 *   eager-stream      the same, the sender killed at any point of a send,
 *                     between claiming queue cells and publishing them too
 *   rts-unmatched     survivor sends 64 MiB; the receiver is stopped with no
 *                     receive posted (between RTS and FIN), then dies
 *   pull-cut          survivor sends 64 MiB; the receiver dies while it
 *                     pulls (bounce chunks; CMA: a shared copy, both sides)
 *   send-cut          survivor receives 64 MiB; the sender dies in the
 *                     middle (bounce chunks; CMA: a shared copy)
 *   rts-dead          the sender of a queued 64 MiB message dies before the
 *                     survivor posts the receive
 *   rma-idle          survivor's write, read, atomic, fetch, compare and
 *                     writedata wait on a stopped target, which then dies
 *   rma-write-cut     survivor writes (reads) 64 MiB; the target dies while
 *   rma-read-cut      it serves the request(s)
 *   atomics-cut       600 fetching atomics; the target dies after 100
 *   target-write-cut  survivor is the target of a 64 MiB write (read) whose
 *   target-read-cut   initiator dies in the middle
 *   target-replies-queued  survivor is the target: a stopped initiator's
 *                     queue is full of the survivor's replies; the third
 *                     peer's atomic is served meanwhile; then it dies
 *   backlog           a rendezvous send, a delivery-complete send, an RMA
 *                     write and an atomic wait on a stopped peer while the
 *                     third peer has backed up the survivor's queue (1400
 *                     messages, no receive posted); then the peer dies
 * Each case runs with FI_SHM_CMA=1 and with FI_SHM_CMA=0. Checked:
 *   - the survivor's pending operations end with an error completion, err =
 *     FI_ECONNRESET, within FI_SHM_PEER_CHECK_MS (default 2) plus a slack
 *     of PEER_DEATH_SLACK_MS (default 2000) after the victim is seen dead
 *     (waitid WNOWAIT: a zombie); with a check interval of a second or
 *     more, not before that interval has passed (the setting is honoured);
 *     where the victim's copy can outrun the kill (CMA: one system call,
 *     or a shared copy), an operation may instead succeed, with every byte
 *     in place;
 *   - every message that arrives is whole and in order, none is lost;
 *   - later operations to the dead peer (eager and rendezvous sends, an
 *     RMA write, an atomic) fail: -FI_ECONNRESET (-FI_ENOENT for a peer
 *     never reached), or an FI_ECONNRESET completion; an eager send may
 *     complete into the dead peer's queue only while the survivor has not
 *     seen the death;
 *   - the third peer, alive throughout, then exchanges 21 messages each way
 *     (8 B to 1 MiB, numbered, data checked: none lost) and takes an RMA
 *     write, read and atomic;
 *   - after the survivor closed its endpoint and both children are reaped:
 *     the same number of open descriptors as before, no /dev/shm entry of
 *     the survivor, the victim or the third peer, no rfabric mapping; and
 *     from the second repetition to the last VmRSS grows by less than
 *     8 MiB (checked with 5 repetitions or more);
 *   - every case reaches its stage at least once (a case that did not
 *     in its repetitions gets up to 20 more; a copy can outrun the kill).
 *
 * PEER_DEATH_REPS (default 2) repetitions per case; PEER_DEATH_CASES a
 * comma-separated list of case names (default: all). Prints a line per
 * case and "N passed, N failed". Run by shm_peer_death.sh. */
#define _GNU_SOURCE
#include <dirent.h>
#include <poll.h>
#include <pthread.h>
#include <rdma/fabric.h>
#include <rdma/fi_atomic.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int passed, failed;
static const char *who = "survivor";

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

#define BIG (64ul << 20)    /* large transfers */
#define WATCH (8ul << 20)   /* the victim dies once this offset has landed */
#define ATOM BIG            /* offset of the atomic word in a region */
#define REGION (BIG + 4096) /* registered regions: BIG bytes + the atomic page */
#define TMAX (1ul << 20)    /* largest message to the third peer */
#define NT 21               /* messages each way with the third peer */
#define FLOOD 1400          /* backlog case: messages from the third peer */
#define NSTREAM 32          /* receives posted for the eager stream */
#define NATOMIC 600         /* atomics in the atomic case */
#define TAG_V 0x76ull
#define TAG_T 0x74ull
#define TAG_F 0x46ull

static int bounce;           /* FI_SHM_CMA=0 */
static double interval_ms;   /* FI_SHM_PEER_CHECK_MS, or its default */
static double slack_ms;      /* PEER_DEATH_SLACK_MS */
static double bound_ms;      /* interval + slack */
static int reps;

/* Shared with the children (mapped before any fork). */
static unsigned char *vbuf; /* the victim's registered region / receive buffer */
struct shctl {
	_Atomic long sent;  /* messages the victim or the third peer has sent */
	_Atomic int state;  /* the victim's operation completed (1) or failed (2) */
};
static struct shctl *ctl;
/* The survivor's own. */
static unsigned char *sbuf;  /* REGION: sends, receives, its registered region */
static unsigned char *rbuf;  /* NT * TMAX: receives from the third peer */
static unsigned char *tsbuf; /* NT * TMAX: sends to the third peer */

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* ------------------------------------------------------------ data */

static uint64_t pat(uint64_t k, uint64_t seed)
{
	return ((k + 1) * 0x9E3779B97F4A7C15ull ^ (seed + 1) * 0xD1B54A32D192ED03ull) | 1;
}
static void fill(void *p, size_t len, uint64_t seed)
{
	uint64_t *w = p;
	for (size_t k = 0; k < len / 8; k++)
		w[k] = pat(k, seed);
}
/* Offset of the first word that differs, or -1. */
static long verify(const void *p, size_t len, uint64_t seed)
{
	const uint64_t *w = p;
	for (size_t k = 0; k < len / 8; k++)
		if (w[k] != pat(k, seed))
			return (long)(k * 8);
	return -1;
}
static uint64_t word_at(const void *p, size_t off)
{
	return __atomic_load_n((const uint64_t *)((const char *)p + off), __ATOMIC_ACQUIRE);
}
/* Whether every MiB of a BIG transfer into `buf` has its last word in
 * place: a sample, read right before a kill to tell whether the victim
 * died in the middle of the transfer. */
static int all_landed(const void *buf)
{
	for (size_t m = 1; m <= BIG >> 20; m++)
		if (word_at(buf, (m << 20) - 8) == 0)
			return 0;
	return 1;
}

static void *map(size_t len, int shared)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, (shared ? MAP_SHARED : MAP_PRIVATE) | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED) {
		perror("mmap");
		exit(2);
	}
	return p;
}

/* ------------------------------------------------------------ objects */

struct mrinfo {
	uint64_t addr, key;
};

struct res {
	struct fi_info *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_cq *cq;
	struct fid_av *av;
	struct fid_ep *ep;
	struct fid_cntr *rw; /* FI_REMOTE_WRITE */
	struct fid_mr *mr;
	struct mrinfo mri;
	char name[128];
};

static int open_res(struct res *r, void *region, size_t len)
{
	struct fi_info *hints = fi_allocinfo();
	struct fi_cq_attr cq_attr = { .format = FI_CQ_FORMAT_TAGGED, .wait_obj = FI_WAIT_NONE, .size = 4096 };
	struct fi_av_attr av_attr = { .type = FI_AV_TABLE };
	struct fi_cntr_attr cattr = { .events = FI_CNTR_EVENTS_COMP };
	int ret;

	memset(r, 0, sizeof(*r));
	hints->ep_attr->type = FI_EP_RDM;
	hints->caps = FI_MSG | FI_TAGGED | FI_RMA | FI_ATOMIC | FI_RMA_EVENT;
	hints->domain_attr->mr_mode = FI_MR_VIRT_ADDR | FI_MR_PROV_KEY | FI_MR_ALLOCATED;
	hints->domain_attr->data_progress = FI_PROGRESS_MANUAL;
	hints->fabric_attr->prov_name = strdup("shm");
	ret = fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &r->info);
	fi_freeinfo(hints);
	if (ret) {
		printf("[%s] fi_getinfo: %d\n", who, ret);
		return ret;
	}
	if (fi_fabric(r->info->fabric_attr, &r->fabric, NULL) || fi_domain(r->fabric, r->info, &r->domain, NULL) ||
	    fi_cq_open(r->domain, &cq_attr, &r->cq, NULL) || fi_av_open(r->domain, &av_attr, &r->av, NULL) ||
	    fi_cntr_open(r->domain, &cattr, &r->rw, NULL) || fi_endpoint(r->domain, r->info, &r->ep, NULL)) {
		printf("[%s] opening objects failed\n", who);
		return -1;
	}
	if (fi_ep_bind(r->ep, &r->av->fid, 0) || fi_ep_bind(r->ep, &r->cq->fid, FI_TRANSMIT | FI_RECV) ||
	    fi_ep_bind(r->ep, &r->rw->fid, FI_REMOTE_WRITE) || fi_enable(r->ep)) {
		printf("[%s] binding failed\n", who);
		return -1;
	}
	if (fi_mr_reg(r->domain, region, len, FI_REMOTE_READ | FI_REMOTE_WRITE, 0, 0, 0, &r->mr, NULL)) {
		printf("[%s] fi_mr_reg failed\n", who);
		return -1;
	}
	r->mri.addr = (uint64_t)(uintptr_t)region;
	r->mri.key = fi_mr_key(r->mr);
	size_t n = sizeof(r->name);
	return fi_getname(&r->ep->fid, r->name, &n);
}

static void close_res(struct res *r)
{
	CHECK(fi_close(&r->mr->fid) == 0, "close mr");
	CHECK(fi_close(&r->ep->fid) == 0, "close ep");
	CHECK(fi_close(&r->cq->fid) == 0, "close cq");
	CHECK(fi_close(&r->rw->fid) == 0, "close counter");
	CHECK(fi_close(&r->av->fid) == 0, "close av");
	CHECK(fi_close(&r->domain->fid) == 0, "close domain");
	CHECK(fi_close(&r->fabric->fid) == 0, "close fabric");
	fi_freeinfo(r->info);
}

/* ------------------------------------------------------------ processes */

struct hello {
	char name[128];
	struct mrinfo mr;
};

struct kid {
	pid_t pid;
	int to, from; /* pipe ends: to the child, from the child */
};

static void put(int fd, char c)
{
	if (write(fd, &c, 1) != 1)
		failed++;
}
/* Waits up to ms for byte c; 0 when it came. */
static int expect_within(int fd, char c, double ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	char got = 0;
	if (poll(&p, 1, (int)ms) != 1 || read(fd, &got, 1) != 1 || got != c) {
		printf("FAIL [%s] expected '%c' from a pipe, got '%c'\n", who, c, got);
		failed++;
		return -1;
	}
	return 0;
}
static int ready(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	return poll(&p, 1, 0) == 1;
}
static void readall(int fd, void *p, size_t n)
{
	size_t got = 0;
	while (got < n) {
		ssize_t k = read(fd, (char *)p + got, n - got);
		if (k <= 0) {
			printf("[%s] pipe closed\n", who);
			_exit(3);
		}
		got += (size_t)k;
	}
}

static struct kid spawn(const char *name, void (*body)(int rfd, int wfd))
{
	int p2c[2], c2p[2];
	struct kid k = { 0 };
	if (pipe(p2c) || pipe(c2p))
		exit(2);
	k.pid = fork();
	if (k.pid < 0)
		exit(2);
	if (k.pid == 0) {
		close(p2c[1]);
		close(c2p[0]);
		who = name;
		passed = failed = 0;
		body(p2c[0], c2p[1]);
		_exit(failed ? 1 : 0);
	}
	close(p2c[0]);
	close(c2p[1]);
	k.to = p2c[1];
	k.from = c2p[0];
	return k;
}

/* A child's side of the handshake: open, register `region`, exchange
 * names and regions with the survivor, insert it. */
static void child_open(struct res *r, void *region, size_t len, int rfd, int wfd, fi_addr_t *sa, struct mrinfo *smr)
{
	struct hello mine, theirs;
	if (open_res(r, region, len))
		_exit(3);
	memset(&mine, 0, sizeof(mine));
	memcpy(mine.name, r->name, sizeof(mine.name));
	mine.mr = r->mri;
	if (write(wfd, &mine, sizeof(mine)) != (ssize_t)sizeof(mine))
		_exit(3);
	readall(rfd, &theirs, sizeof(theirs));
	if (fi_av_insert(r->av, theirs.name, 1, sa, 0, NULL) != 1)
		_exit(3);
	*smr = theirs.mr;
}

/* The survivor's side. */
static fi_addr_t meet(struct res *s, struct kid *k, struct mrinfo *mr)
{
	struct hello mine, theirs;
	fi_addr_t a = FI_ADDR_NOTAVAIL;
	struct pollfd p = { .fd = k->from, .events = POLLIN };
	if (poll(&p, 1, 60000) != 1) {
		printf("FAIL [%s] no name from child %d\n", who, (int)k->pid);
		exit(1);
	}
	readall(k->from, &theirs, sizeof(theirs));
	memset(&mine, 0, sizeof(mine));
	memcpy(mine.name, s->name, sizeof(mine.name));
	mine.mr = s->mri;
	if (write(k->to, &mine, sizeof(mine)) != (ssize_t)sizeof(mine))
		exit(2);
	CHECK(fi_av_insert(s->av, theirs.name, 1, &a, 0, NULL) == 1, "insert child");
	*mr = theirs.mr;
	return a;
}

/* Waits for a killed child to be dead (a zombie: its own library state is
 * gone and /proc says Z), without reaping it; returns that time. */
static double dead_at(pid_t pid)
{
	siginfo_t si;
	memset(&si, 0, sizeof(si));
	while (waitid(P_PID, pid, &si, WEXITED | WNOWAIT) != 0)
		;
	return now_ms();
}

static void stop(pid_t pid)
{
	siginfo_t si;
	kill(pid, SIGSTOP);
	memset(&si, 0, sizeof(si));
	waitid(P_PID, pid, &si, WSTOPPED);
}

/* Reaps a child; `killed`: it must have died of SIGKILL. */
static void reap(struct kid *k, int killed, const char *what)
{
	int st = 0;
	if (killed)
		kill(k->pid, SIGKILL);
	waitpid(k->pid, &st, 0);
	if (killed)
		CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL, "%s killed: status 0x%x", what, st);
	else
		CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s exit status 0x%x", what, st);
	close(k->to);
	close(k->from);
}

/* ------------------------------------------------------------ the survivor's completions */

enum { K_PLAIN, K_STREAM, K_TREC };

struct op {
	int kind;
	int done;
	int err; /* 0, or the error entry's err */
	double t;
	size_t len;
	void *buf;
	uint64_t res; /* fetched value */
};

/* The eager stream from the victim. */
static struct {
	struct op ops[NSTREAM];
	unsigned char *bufs;
	long next;    /* sequence number expected next */
	int bad;      /* messages out of order or damaged */
	int canceled; /* FI_ECANCELED entries */
	int stop;     /* do not post again */
	struct fid_ep *ep;
} st;
static const size_t stream_sizes[] = { 8, 40, 1000, 4000, 12000 };
#define STREAM_MAX 16384

static int unexpected_entries; /* entries without a context, or for an operation already done */

static void post_stream(int i)
{
	memset(&st.ops[i], 0, sizeof(st.ops[i]));
	st.ops[i].kind = K_STREAM;
	st.ops[i].buf = st.bufs + (size_t)i * STREAM_MAX;
	CHECK(fi_trecv(st.ep, st.ops[i].buf, STREAM_MAX, NULL, FI_ADDR_UNSPEC, TAG_V, 0, &st.ops[i]) == 0, "post stream receive");
}

static void on_entry(struct op *o, int err, size_t len)
{
	if (!o || o->done) {
		unexpected_entries++;
		return;
	}
	o->done = 1;
	o->err = err;
	o->len = len;
	o->t = now_ms();
	if (o->kind != K_STREAM)
		return;
	if (err == FI_ECANCELED) {
		st.canceled++;
		return;
	}
	uint64_t *w = o->buf;
	long seq = (long)w[0];
	size_t want = stream_sizes[seq % 5];
	if (err || seq != st.next || len != want || (len > 8 && verify(w + 1, len - 8, (uint64_t)seq) != -1)) {
		if (st.bad++ < 3)
			printf("FAIL [%s] stream message: err %d seq %ld (expected %ld) len %zu (expected %zu)\n", who, err, seq,
			       st.next, len, want);
	}
	st.next = seq + 1;
	if (!st.stop)
		post_stream((int)(o - st.ops));
}

/* Reads one entry (or error entry); 1 if there was one. */
static int pump(struct res *r)
{
	struct fi_cq_tagged_entry e;
	ssize_t n = fi_cq_read(r->cq, &e, 1);
	if (n == 1) {
		on_entry(e.op_context, 0, e.len);
		return 1;
	}
	if (n == -FI_EAVAIL) {
		struct fi_cq_err_entry err;
		memset(&err, 0, sizeof(err));
		if (fi_cq_readerr(r->cq, &err, 0) == 1) {
			on_entry(err.op_context, err.err ? err.err : -1, err.len);
			return 1;
		}
	}
	if (n != -FI_EAGAIN && n != -FI_EAVAIL)
		CHECK(0, "fi_cq_read: %zd", n);
	return 0;
}

/* Polls like an application waiting for something: busy at first, then
 * with short pauses (progress is driven by these calls). */
static long idle_polls;
static void idle(struct res *r)
{
	if (pump(r)) {
		idle_polls = 0;
		return;
	}
	if (++idle_polls > 2000)
		usleep(20);
}

static int wait_done(struct res *r, struct op *o, double deadline)
{
	while (!o->done && now_ms() < deadline)
		idle(r);
	return o->done;
}

/* Keeps polling for `polls` calls; 1 if `o` completed meanwhile. */
static int completes_within(struct res *r, struct op *o, int polls)
{
	for (int i = 0; i < polls && !o->done; i++) {
		pump(r);
		if (i > 200)
			usleep(20);
	}
	return o->done;
}

#define RETRY(r, call, deadline)                                              \
	({                                                                    \
		ssize_t rc_;                                                  \
		while ((rc_ = (call)) == -FI_EAGAIN && now_ms() < (deadline)) \
			idle(r);                                              \
		rc_;                                                          \
	})

/* ------------------------------------------------------------ accounting */

static int count_fds(void)
{
	int n = 0;
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	if (!d)
		return -1;
	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	return n - 1; /* the directory's own descriptor */
}

/* /dev/shm entries of these processes: rfabric-shm.<pid>.* */
static int count_shm(const pid_t *pids, int n)
{
	int count = 0;
	DIR *d = opendir("/dev/shm");
	struct dirent *e;
	if (!d)
		return -1;
	while ((e = readdir(d))) {
		for (int i = 0; i < n; i++) {
			char pre[64];
			snprintf(pre, sizeof(pre), "rfabric-shm.%d.", (int)pids[i]);
			if (!strncmp(e->d_name, pre, strlen(pre)))
				count++;
		}
	}
	closedir(d);
	return count;
}

static int count_maps(void)
{
	FILE *f = fopen("/proc/self/maps", "r");
	char line[512];
	int n = 0;
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		n += strstr(line, "rfabric-shm") != NULL;
	fclose(f);
	return n;
}

static long status_kb(const char *field)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	long v = -1;
	size_t fl = strlen(field);
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, field, fl) && line[fl] == ':')
			v = atol(line + fl + 1);
	fclose(f);
	return v;
}

/* ------------------------------------------------------------ one repetition */

struct ctx {
	struct res s;
	struct kid v, t;
	fi_addr_t va, ta;
	struct mrinfo vmr, tmr;
	int rep;
	double t_open;
	/* outcome of this repetition */
	int reached;  /* the victim was killed at the stage */
	int finished; /* the victim's transfer was whole before the kill */
	int failed_ops, completed_ops; /* the survivor's operations at the stage */
	int cut, whole;                /* survivor as target: the victim's transfer */
	double detect; /* ms from seen dead to the last error completion */
	char dead_ops[160];
};

/* An error completion `o` that must be FI_ECONNRESET within the bound of
 * the death at t_dead; with a long check interval, not before t_ref +
 * interval (the first check of that endpoint or operation). */
static void expect_reset(struct ctx *c, struct op *o, double t_dead, double t_ref, const char *what)
{
	int done = wait_done(&c->s, o, t_dead + bound_ms + 1000);
	CHECK(done && o->err == FI_ECONNRESET, "%s: done %d err %d (expected FI_ECONNRESET)", what, done, o->err);
	if (!done)
		return;
	c->failed_ops += o->err == FI_ECONNRESET;
	double lat = o->t - t_dead;
	if (lat > c->detect)
		c->detect = lat;
	CHECK(lat <= bound_ms, "%s: error %.1f ms after the peer died (bound %.0f ms)", what, lat, bound_ms);
	if (interval_ms >= 1000)
		CHECK(o->t - t_ref >= interval_ms - 50, "%s: error %.1f ms after the reference, before the check interval %.0f ms",
		      what, o->t - t_ref, interval_ms);
}

/* ------------------------------------------------------------ the third peer */

static size_t tsize(int i)
{
	static const size_t s[] = { 8, 1000, 4000, 20000, 70000, 300000, TMAX };
	return s[i % 7];
}

struct tctx {
	int done, err;
	uint64_t res;
};

/* The third peer's completions: one entry read, its context marked. */
static int tcount;
static void tpump(struct res *t)
{
	struct fi_cq_tagged_entry e;
	ssize_t n = fi_cq_read(t->cq, &e, 1);
	if (n == 1) {
		struct tctx *x = e.op_context;
		if (x)
			x->done = 1;
		tcount++;
	} else if (n == -FI_EAVAIL) {
		struct fi_cq_err_entry err;
		memset(&err, 0, sizeof(err));
		if (fi_cq_readerr(t->cq, &err, 0) == 1) {
			struct tctx *x = err.op_context;
			if (x) {
				x->done = 1;
				x->err = err.err;
			} else {
				printf("FAIL [%s] error entry %d without a context\n", who, err.err);
				failed++;
			}
			tcount++;
		}
	}
}
static void twait(struct res *t, int want)
{
	double end = now_ms() + 60000;
	while (tcount < want && now_ms() < end)
		tpump(t);
}

static void third(int rfd, int wfd)
{
	struct res t;
	struct mrinfo smr;
	fi_addr_t sa;
	unsigned char *tb = map(TMAX + 4096, 0);
	unsigned char *rb = map(NT * TMAX, 0), *sb = map(NT * TMAX, 0);
	static struct tctx rop[NT], sop[NT], one[2];
	child_open(&t, tb, TMAX + 4096, rfd, wfd, &sa, &smr);
	for (;;) {
		char c;
		while (!ready(rfd)) {
			tpump(&t);
			struct pollfd p = { .fd = rfd, .events = POLLIN };
			poll(&p, 1, 1);
		}
		if (read(rfd, &c, 1) != 1)
			_exit(4);
		int ok = 1;
		ssize_t rc;
		double end = now_ms() + 60000;
		tcount = 0;
		switch (c) {
		case 'h': /* one message each way */
			memset(one, 0, sizeof(one));
			CHECK(fi_trecv(t.ep, rb, 16, NULL, FI_ADDR_UNSPEC, TAG_T, 0, &one[0]) == 0, "post hello");
			while ((rc = fi_tsend(t.ep, "hello", 6, NULL, sa, TAG_T, &one[1])) == -FI_EAGAIN && now_ms() < end)
				tpump(&t);
			twait(&t, 2);
			ok = rc == 0 && tcount == 2 && !one[0].err && !one[1].err && !strcmp((char *)rb, "hello");
			put(wfd, ok ? 'k' : 'x');
			break;
		case 'f': /* NT numbered messages each way, data checked */
			memset(rop, 0, sizeof(rop));
			memset(sop, 0, sizeof(sop));
			for (int i = 0; i < NT; i++)
				CHECK(fi_trecv(t.ep, rb + i * TMAX, TMAX, NULL, FI_ADDR_UNSPEC, TAG_T, 0, &rop[i]) == 0, "post");
			for (int i = 0; i < NT; i++) {
				fill(sb + i * TMAX, tsize(i), 1000 + i);
				while ((rc = fi_tsend(t.ep, sb + i * TMAX, tsize(i), NULL, sa, TAG_T, &sop[i])) == -FI_EAGAIN &&
				       now_ms() < end)
					tpump(&t);
				if (rc) {
					printf("FAIL [%s] send %d: %zd\n", who, i, rc);
					ok = 0;
				}
			}
			twait(&t, 2 * NT);
			for (int i = 0; i < NT; i++)
				if (!rop[i].done || rop[i].err || !sop[i].done || sop[i].err ||
				    verify(rb + i * TMAX, tsize(i), 2000 + i) != -1) {
					if (ok)
						printf("FAIL [%s] message %d: received %d err %d, sent %d err %d\n", who, i, rop[i].done,
						       rop[i].err, sop[i].done, sop[i].err);
					ok = 0;
				}
			put(wfd, ok && tcount == 2 * NT ? 'k' : 'x');
			break;
		case 'F': /* a backlog: FLOOD small messages, no receive posted there yet */
			for (long i = 0; i < FLOOD; i++) {
				uint64_t m[8];
				m[0] = (uint64_t)i;
				fill(m + 1, sizeof(m) - 8, (uint64_t)i);
				while ((rc = fi_tsend(t.ep, m, sizeof(m), NULL, sa, TAG_F, NULL)) == -FI_EAGAIN && now_ms() < end) {
					tpump(&t);
					usleep(50);
				}
				if (rc) {
					printf("FAIL [%s] flood message %ld: %zd\n", who, i, rc);
					ok = 0;
					break;
				}
				atomic_store(&ctl->sent, i + 1);
			}
			twait(&t, (int)atomic_load(&ctl->sent)); /* every send's completion read */
			put(wfd, ok && tcount == (int)atomic_load(&ctl->sent) ? 'k' : 'x');
			break;
		case 'a': /* one atomic on the survivor's region */
			memset(one, 0, sizeof(one));
			{
				uint64_t add = 1;
				while ((rc = fi_fetch_atomic(t.ep, &add, 1, NULL, &one[0].res, NULL, sa, smr.addr + ATOM, smr.key,
							     FI_UINT64, FI_SUM, &one[0])) == -FI_EAGAIN &&
				       now_ms() < end)
					tpump(&t);
				twait(&t, 1);
				put(wfd, rc == 0 && one[0].done && !one[0].err ? 'k' : 'x');
			}
			break;
		case 'q':
			close_res(&t);
			_exit(failed ? 1 : 0);
		default:
			_exit(5);
		}
	}
}

static void hello_third(struct ctx *c)
{
	static struct op r, s;
	memset(&r, 0, sizeof(r));
	memset(&s, 0, sizeof(s));
	char buf[16] = { 0 };
	double end = now_ms() + 30000;
	r.buf = buf;
	CHECK(fi_trecv(c->s.ep, buf, sizeof(buf), NULL, FI_ADDR_UNSPEC, TAG_T, 0, &r) == 0, "post hello");
	put(c->t.to, 'h');
	CHECK(RETRY(&c->s, fi_tsend(c->s.ep, "hello", 6, NULL, c->ta, TAG_T, &s), end) == 0, "hello to the third peer");
	CHECK(wait_done(&c->s, &r, end) && wait_done(&c->s, &s, end) && !r.err && !s.err && !strcmp(buf, "hello"),
	      "hello with the third peer");
	while (!ready(c->t.from) && now_ms() < end)
		idle(&c->s);
	expect_within(c->t.from, 'k', 1000);
}

/* After the death: messages both ways with the third peer, none lost, data
 * checked; an RMA write, read and atomic on its region. */
static void third_check(struct ctx *c)
{
	static struct op rop[NT], sop[NT];
	static struct op w, r, a;
	memset(&w, 0, sizeof(w));
	memset(&r, 0, sizeof(r));
	memset(&a, 0, sizeof(a));
	double end = now_ms() + bound_ms + 30000;
	int ok = 1;
	for (int i = 0; i < NT; i++) {
		memset(&rop[i], 0, sizeof(rop[i]));
		memset(&sop[i], 0, sizeof(sop[i]));
		rop[i].kind = K_TREC;
		CHECK(fi_trecv(c->s.ep, rbuf + i * TMAX, TMAX, NULL, FI_ADDR_UNSPEC, TAG_T, 0, &rop[i]) == 0, "post for the third peer");
	}
	put(c->t.to, 'f');
	for (int i = 0; i < NT; i++) {
		fill(tsbuf + i * TMAX, tsize(i), 2000 + i);
		ssize_t rc = RETRY(&c->s, fi_tsend(c->s.ep, tsbuf + i * TMAX, tsize(i), NULL, c->ta, TAG_T, &sop[i]), end);
		if (rc) {
			CHECK(0, "send %d to the third peer: %zd", i, rc);
			ok = 0;
		}
	}
	for (int i = 0; i < NT; i++) {
		int got = wait_done(&c->s, &rop[i], end) && wait_done(&c->s, &sop[i], end);
		if (!got || rop[i].err || sop[i].err || rop[i].len != tsize(i) || verify(rbuf + i * TMAX, tsize(i), 1000 + i) != -1) {
			if (ok)
				printf("FAIL [%s] third peer, message %d: received %d (err %d, len %zu), sent %d (err %d)\n", who, i,
				       rop[i].done, rop[i].err, rop[i].len, sop[i].done, sop[i].err);
			ok = 0;
		}
	}
	CHECK(ok, "%d messages from the third peer, in order and intact, and %d to it", NT, NT);
	while (!ready(c->t.from) && now_ms() < end)
		idle(&c->s);
	CHECK(expect_within(c->t.from, 'k', 1000) == 0, "the third peer got every message intact");
	/* cancel the leftovers of a failed exchange before their buffers go */
	for (int i = 0; i < NT; i++)
		if (!rop[i].done)
			fi_cancel(&c->s.ep->fid, &rop[i]);

	fill(sbuf, 4096, 77);
	uint64_t add = 1;
	CHECK(RETRY(&c->s, fi_write(c->s.ep, sbuf, 4096, NULL, c->ta, c->tmr.addr, c->tmr.key, &w), end) == 0, "write to the third peer");
	CHECK(wait_done(&c->s, &w, end) && !w.err, "write to the third peer completes: err %d", w.err);
	memset(sbuf + 8192, 0, 4096);
	CHECK(RETRY(&c->s, fi_read(c->s.ep, sbuf + 8192, 4096, NULL, c->ta, c->tmr.addr, c->tmr.key, &r), end) == 0, "read");
	CHECK(wait_done(&c->s, &r, end) && !r.err && verify(sbuf + 8192, 4096, 77) == -1, "read back from the third peer: err %d", r.err);
	CHECK(RETRY(&c->s, fi_fetch_atomic(c->s.ep, &add, 1, NULL, &a.res, NULL, c->ta, c->tmr.addr + TMAX, c->tmr.key, FI_UINT64,
					   FI_SUM, &a),
		    end) == 0,
	      "atomic on the third peer");
	CHECK(wait_done(&c->s, &a, end) && !a.err && a.res == 0, "atomic on the third peer: err %d, old value %llu", a.err,
	      (unsigned long long)a.res);
}

/* Later operations to the dead peer: -FI_ECONNRESET (or -FI_ENOENT, an
 * address whose process is gone), or an FI_ECONNRESET completion; an eager
 * send may also complete (its bytes are in the dead peer's queue) while the
 * survivor has not seen the death. Never a hang. Notes what each gave. */
static const char *ops_note(ssize_t rc, struct op *o)
{
	if (rc == -FI_ECONNRESET)
		return "-ECONNRESET";
	if (rc == -FI_ENOENT)
		return "-ENOENT";
	if (rc)
		return "other";
	if (!o->done)
		return "pending";
	return o->err == FI_ECONNRESET ? "err ECONNRESET" : o->err ? "err other" : "ok";
}

static void dead_ops(struct ctx *c)
{
	static struct op o[4];
	ssize_t rc[4];
	uint64_t add = 1;
	memset(o, 0, sizeof(o));
	double end = now_ms() + bound_ms;
	rc[0] = RETRY(&c->s, fi_tsend(c->s.ep, sbuf, 64, NULL, c->va, TAG_V, &o[0]), end);
	rc[1] = RETRY(&c->s, fi_tsend(c->s.ep, sbuf, TMAX, NULL, c->va, TAG_V, &o[1]), end);
	rc[2] = RETRY(&c->s, fi_write(c->s.ep, sbuf, 4096, NULL, c->va, c->vmr.addr, c->vmr.key, &o[2]), end);
	rc[3] = RETRY(&c->s, fi_fetch_atomic(c->s.ep, &add, 1, NULL, &o[3].res, NULL, c->va, c->vmr.addr + ATOM, c->vmr.key,
					      FI_UINT64, FI_SUM, &o[3]),
		      end);
	for (int i = 0; i < 4; i++)
		if (rc[i] == 0)
			wait_done(&c->s, &o[i], end + 1000);
	static const char *names[] = { "eager send", "rendezvous send", "RMA write", "atomic" };
	c->dead_ops[0] = 0;
	/* An eager send may complete into the dead peer's queue only while the
	 * survivor has not seen that peer's death (no error completion yet). */
	int seen = c->failed_ops > 0;
	for (int i = 0; i < 4; i++) {
		int clean = rc[i] == -FI_ECONNRESET || rc[i] == -FI_ENOENT || (rc[i] == 0 && o[i].done && o[i].err == FI_ECONNRESET) ||
			    (i == 0 && !seen && rc[i] == 0 && o[i].done && o[i].err == 0);
		CHECK(clean, "%s to the dead peer: returned %zd, completion %d err %d", names[i], rc[i], o[i].done, o[i].err);
		size_t l = strlen(c->dead_ops);
		snprintf(c->dead_ops + l, sizeof(c->dead_ops) - l, "%s%s %s", i ? ", " : "", names[i], ops_note(rc[i], &o[i]));
	}
}

/* ------------------------------------------------------------ victims */

static void victim_open(struct res *r, int rfd, int wfd, fi_addr_t *sa, struct mrinfo *smr)
{
	child_open(r, vbuf, REGION, rfd, wfd, sa, smr);
}

static void vpoll(struct res *r)
{
	struct fi_cq_tagged_entry e;
	if (fi_cq_read(r->cq, &e, 1) == -FI_EAVAIL) {
		struct fi_cq_err_entry err;
		memset(&err, 0, sizeof(err));
		fi_cq_readerr(r->cq, &err, 0);
	}
}

/* Progresses forever (the survivor kills it). */
static void spin(struct res *r)
{
	for (;;) {
		struct fi_cq_tagged_entry e;
		ssize_t n = fi_cq_read(r->cq, &e, 1);
		if (n == 1)
			atomic_store(&ctl->state, 1);
		else if (n == -FI_EAVAIL) {
			struct fi_cq_err_entry err;
			memset(&err, 0, sizeof(err));
			fi_cq_readerr(r->cq, &err, 0);
			atomic_store(&ctl->state, 2);
		} else
			sched_yield();
	}
}

static void wait_go(int rfd)
{
	char c;
	if (read(rfd, &c, 1) != 1 || c != 'g')
		_exit(6);
}

/* Opens, says ready, never progresses. */
static void v_idle(int rfd, int wfd)
{
	struct res r;
	fi_addr_t sa;
	struct mrinfo smr;
	victim_open(&r, rfd, wfd, &sa, &smr);
	put(wfd, 'r');
	for (;;)
		pause();
}

/* Posts a BIG receive into the shared buffer, then progresses. */
static void v_recv(int rfd, int wfd)
{
	struct res r;
	fi_addr_t sa;
	struct mrinfo smr;
	victim_open(&r, rfd, wfd, &sa, &smr);
	if (fi_trecv(r.ep, vbuf, BIG, NULL, FI_ADDR_UNSPEC, TAG_V, 0, NULL))
		_exit(7);
	put(wfd, 'r');
	spin(&r);
}

/* Sends BIG bytes, says so, then progresses (or, v_send_still, not). */
static void send_big(int rfd, int wfd, int progress)
{
	struct res r;
	fi_addr_t sa;
	struct mrinfo smr;
	unsigned char *x = map(BIG, 0);
	fill(x, BIG, 5);
	victim_open(&r, rfd, wfd, &sa, &smr);
	wait_go(rfd);
	ssize_t rc;
	while ((rc = fi_tsend(r.ep, x, BIG, NULL, sa, TAG_V, NULL)) == -FI_EAGAIN)
		vpoll(&r);
	if (rc)
		_exit(7);
	put(wfd, 's');
	if (progress)
		spin(&r);
	for (;;)
		pause();
}
static void v_send(int rfd, int wfd)
{
	send_big(rfd, wfd, 1);
}
static void v_send_still(int rfd, int wfd)
{
	send_big(rfd, wfd, 0);
}

/* Streams numbered eager messages (1 to 3 cells) until killed. */
static void v_stream(int rfd, int wfd)
{
	struct res r;
	fi_addr_t sa;
	struct mrinfo smr;
	static uint64_t m[STREAM_MAX / 8];
	setenv("FI_SHM_EAGER_MAX", "16384", 1); /* multi-cell eager messages */
	victim_open(&r, rfd, wfd, &sa, &smr);
	wait_go(rfd);
	for (long i = 0;; i++) {
		size_t len = stream_sizes[i % 5];
		if (len > 8)
			fill(m + 1, len - 8, (uint64_t)i);
		m[0] = (uint64_t)i;
		ssize_t rc;
		long tries = 0;
		while ((rc = fi_tsend(r.ep, m, len, NULL, sa, TAG_V, NULL)) == -FI_EAGAIN) {
			vpoll(&r);
			if (++tries == 100000)
				atomic_store(&ctl->state, 3); /* blocked: the survivor's queue is full */
		}
		if (rc)
			_exit(7);
		vpoll(&r);
		atomic_store(&ctl->sent, i + 1);
	}
}

/* Serves RMA (its region is the shared buffer) until killed. */
static void v_serve(int rfd, int wfd)
{
	struct res r;
	fi_addr_t sa;
	struct mrinfo smr;
	victim_open(&r, rfd, wfd, &sa, &smr);
	put(wfd, 'r');
	spin(&r);
}

/* Writes BIG bytes into the survivor's region, then progresses. */
static void v_rma_write(int rfd, int wfd)
{
	struct res r;
	fi_addr_t sa;
	struct mrinfo smr;
	unsigned char *x = map(BIG, 0);
	fill(x, BIG, 9);
	victim_open(&r, rfd, wfd, &sa, &smr);
	wait_go(rfd);
	ssize_t rc;
	while ((rc = fi_write(r.ep, x, BIG, NULL, sa, smr.addr, smr.key, NULL)) == -FI_EAGAIN)
		vpoll(&r);
	if (rc)
		_exit(7);
	spin(&r);
}

/* Reads BIG bytes of the survivor's region into the shared buffer. */
static void v_rma_read(int rfd, int wfd)
{
	struct res r;
	fi_addr_t sa;
	struct mrinfo smr;
	victim_open(&r, rfd, wfd, &sa, &smr);
	wait_go(rfd);
	ssize_t rc;
	while ((rc = fi_read(r.ep, vbuf, BIG, NULL, sa, smr.addr, smr.key, NULL)) == -FI_EAGAIN)
		vpoll(&r);
	if (rc)
		_exit(7);
	spin(&r);
}

/* Issues 64 atomics on the survivor's region, says so, never progresses. */
static void v_atomics_still(int rfd, int wfd)
{
	struct res r;
	fi_addr_t sa;
	struct mrinfo smr;
	static uint64_t res[64];
	uint64_t add = 1;
	victim_open(&r, rfd, wfd, &sa, &smr);
	wait_go(rfd);
	for (int i = 0; i < 64; i++)
		if (fi_fetch_atomic(r.ep, &add, 1, NULL, &res[i], NULL, sa, smr.addr + ATOM, smr.key, FI_UINT64, FI_SUM, NULL))
			_exit(7);
	put(wfd, 's');
	for (;;)
		pause();
}

/* ------------------------------------------------------------ the stages */

/* A thread that kills the victim once a word of a buffer is written (for
 * stages where the survivor's own thread is inside a copy). */
struct watch {
	const unsigned char *buf;
	size_t off;
	pid_t pid;
	_Atomic int quit, fired;
	int end_written; /* the last word had landed when the victim was killed */
	double t_dead;
	pthread_t th;
};
static void *watcher(void *arg)
{
	struct watch *w = arg;
	while (!atomic_load(&w->quit)) {
		if (word_at(w->buf, w->off) != 0) {
			w->end_written = all_landed(w->buf);
			kill(w->pid, SIGKILL);
			w->t_dead = dead_at(w->pid);
			atomic_store(&w->fired, 1);
			return NULL;
		}
		sched_yield();
	}
	return NULL;
}
static void watch_start(struct watch *w, const void *buf, size_t off, pid_t pid)
{
	memset(w, 0, sizeof(*w));
	w->buf = buf;
	w->off = off;
	w->pid = pid;
	if (pthread_create(&w->th, NULL, watcher, w))
		exit(2);
}
static void watch_end(struct watch *w)
{
	atomic_store(&w->quit, 1);
	pthread_join(w->th, NULL);
}

/* Kills the victim, returns when it is dead. */
static double kill_victim(struct ctx *c)
{
	kill(c->v.pid, SIGKILL);
	return dead_at(c->v.pid);
}

/* Polls until word `off` of `buf` is written (the transfer is under way);
 * 0 if it never was. */
static int pump_until_landed(struct ctx *c, const void *buf, size_t off, struct op *o)
{
	double end = now_ms() + 60000;
	while (word_at(buf, off) == 0 && now_ms() < end && !(o && o->done))
		pump(&c->s);
	return word_at(buf, off) != 0;
}

/* A receiver that stopped (SIGSTOP) with its queue full of eager messages,
 * then dies: a delivery-complete send fails, and so do the sends after it. */
static void s_ring_full(struct ctx *c)
{
	static struct op plain[256];
	static struct op dc, next;
	memset(&dc, 0, sizeof(dc));
	memset(&next, 0, sizeof(next));
	double end = now_ms() + 30000;
	expect_within(c->v.from, 'r', 30000);
	stop(c->v.pid);
	struct iovec iov = { sbuf, 64 };
	struct fi_msg_tagged m = { .msg_iov = &iov, .iov_count = 1, .addr = c->va, .tag = TAG_V, .context = &dc };
	CHECK(RETRY(&c->s, fi_tsendmsg(c->s.ep, &m, FI_DELIVERY_COMPLETE | FI_COMPLETION), end) == 0, "delivery-complete send");
	int n = 0, eagain = 0;
	memset(plain, 0, sizeof(plain));
	while (n < 256 && eagain < 2000) {
		ssize_t rc = fi_tsend(c->s.ep, sbuf, 1000, NULL, c->va, TAG_V, &plain[n]);
		if (rc == -FI_EAGAIN) {
			eagain++;
			pump(&c->s);
			continue;
		}
		CHECK(rc == 0, "eager send %d: %zd", n, rc);
		eagain = 0;
		n++;
	}
	int ok = 1;
	for (int i = 0; i < n; i++)
		ok &= wait_done(&c->s, &plain[i], end) && !plain[i].err;
	CHECK(n > 64 && n < 256 && ok, "%d eager sends completed before the queue was full", n);
	CHECK(!dc.done, "the delivery-complete send waits for the stopped receiver");
	double t_dead = kill_victim(c);
	ssize_t rc;
	double t_rc = 0;
	while ((rc = fi_tsend(c->s.ep, sbuf, 1000, NULL, c->va, TAG_V, &next)) == -FI_EAGAIN && now_ms() < t_dead + bound_ms + 1000)
		idle(&c->s);
	t_rc = now_ms();
	CHECK(rc == -FI_ECONNRESET, "send to the full queue of the dead receiver: %zd (expected -FI_ECONNRESET)", rc);
	CHECK(t_rc - t_dead <= bound_ms, "send failed %.1f ms after the death (bound %.0f ms)", t_rc - t_dead, bound_ms);
	if (interval_ms >= 1000)
		CHECK(t_rc - c->t_open >= interval_ms - 50, "send failed %.1f ms after the endpoint opened, before the check interval",
		      t_rc - c->t_open);
	if (t_rc - t_dead > c->detect)
		c->detect = t_rc - t_dead;
	expect_reset(c, &dc, t_dead, c->t_open, "delivery-complete send");
	c->reached = 1;
}

/* The victim streams eager messages of 1 to 3 queue cells. `blocked`: the
 * survivor stops polling after 300, so the victim fills the survivor's
 * queue and keeps retrying sends that return -FI_EAGAIN; killed then.
 * Otherwise killed at whatever point of a send it is, between claiming
 * queue cells and publishing them included (the survivor then steps over
 * the dead claim). Every message that arrives is whole and in order, none
 * is lost (blocked: exactly those whose send returned 0), and the third
 * peer's messages still arrive (third_check). */
static void eager_stream(struct ctx *c, int blocked)
{
	double end = now_ms() + 60000;
	st.ep = c->s.ep;
	st.next = 0;
	st.bad = 0;
	st.canceled = 0;
	st.stop = 0;
	for (int i = 0; i < NSTREAM; i++)
		post_stream(i);
	put(c->v.to, 'g');
	while (st.next < 300 && now_ms() < end)
		idle(&c->s);
	CHECK(st.next >= 300, "stream under way: %ld messages", st.next);
	if (blocked) {
		while (atomic_load(&ctl->state) != 3 && now_ms() < end)
			usleep(100);
		CHECK(atomic_load(&ctl->state) == 3, "the sender is blocked on the survivor's full queue");
	}
	kill_victim(c);
	long sent = atomic_load(&ctl->sent);
	/* take what it published before it died */
	for (int i = 0; i < 20000; i++)
		pump(&c->s);
	CHECK(st.bad == 0, "%d damaged or out-of-order stream messages", st.bad);
	if (blocked)
		CHECK(st.next == sent, "stream: %ld received, %ld sent before the death", st.next, sent);
	else
		CHECK(st.next >= sent, "stream: %ld received, %ld sent before the death", st.next, sent);
	c->reached = 1;
}
static void s_eager_blocked(struct ctx *c)
{
	eager_stream(c, 1);
}
static void s_eager_stream(struct ctx *c)
{
	eager_stream(c, 0);
}

static void s_stream_end(struct ctx *c)
{
	/* receives still posted for the dead sender: cancelled */
	st.stop = 1;
	int posted = 0;
	for (int i = 0; i < NSTREAM; i++)
		if (!st.ops[i].done) {
			posted++;
			CHECK(fi_cancel(&c->s.ep->fid, &st.ops[i]) == 0, "cancel stream receive %d", i);
		}
	double end = now_ms() + 10000;
	while (st.canceled < posted && now_ms() < end)
		idle(&c->s);
	CHECK(st.canceled == posted, "%d of %d cancelled", st.canceled, posted);
}

/* A rendezvous send whose receiver stopped without posting a receive
 * (between RTS and FIN), then died. */
static void s_rts_unmatched(struct ctx *c)
{
	static struct op o;
	memset(&o, 0, sizeof(o));
	double end = now_ms() + 30000;
	expect_within(c->v.from, 'r', 30000);
	stop(c->v.pid);
	fill(sbuf, BIG, 3);
	CHECK(RETRY(&c->s, fi_tsend(c->s.ep, sbuf, BIG, NULL, c->va, TAG_V, &o), end) == 0, "rendezvous send");
	CHECK(!completes_within(&c->s, &o, 3000), "the send waits for the stopped receiver");
	double t_dead = kill_victim(c);
	expect_reset(c, &o, t_dead, c->t_open, "rendezvous send, receiver dead before matching");
	c->reached = 1;
}

/* Kills the victim once word WATCH of `buf` has landed. Bounce buffers:
 * the survivor's own polls move the transfer, so it stops polling there
 * (the victim cannot finish without it). CMA: the transfer runs without
 * the survivor (one system call, or a shared copy), so a thread watches
 * while the survivor keeps polling until `o` (if any) completes. Sets
 * c->reached when the kill came with part of `buf` still missing;
 * returns when the victim is dead. */
static double cut(struct ctx *c, const void *buf, struct op *o)
{
	double t_dead;
	if (bounce) {
		int landed = pump_until_landed(c, buf, WATCH, o);
		int whole = all_landed(buf);
		CHECK(landed && !whole && !(o && o->done), "the transfer is under way: landed %d, whole %d, done %d", landed, whole,
		      o ? o->done : 0);
		c->reached = landed && !whole;
		return kill_victim(c);
	}
	struct watch w;
	watch_start(&w, buf, WATCH, c->v.pid);
	double end = now_ms() + 60000;
	while (!atomic_load(&w.fired) && !(o && o->done) && now_ms() < end)
		pump(&c->s);
	if (o)
		wait_done(&c->s, o, now_ms() + 60000);
	watch_end(&w);
	if (!atomic_load(&w.fired)) {
		/* the operation completed before the watcher saw the transfer */
		CHECK(o && o->done, "the transfer never reached the watched offset");
		t_dead = kill_victim(c);
		c->finished = 1;
	} else {
		t_dead = w.t_dead;
		c->reached = !w.end_written;
		c->finished = w.end_written;
	}
	return t_dead;
}

/* The outcome of a cut transfer: an FI_ECONNRESET error within the bound,
 * or success with every byte in place (a cross-memory copy that outran
 * the kill). Bounce buffers: the error only. */
static void cut_outcome(struct ctx *c, struct op *o, double t_dead, const void *dst, uint64_t seed, const char *what)
{
	wait_done(&c->s, o, t_dead + bound_ms + 1000);
	if (bounce && o->done && !o->err)
		printf("[%s] %s: completed; victim's completion state %d, first missing byte %ld\n", who, what,
		       atomic_load(&ctl->state), verify(dst, BIG, seed));
	if (bounce || !o->done || o->err) {
		expect_reset(c, o, t_dead, c->t_open, what);
	} else {
		CHECK(verify(dst, BIG, seed) == -1, "%s: completed, so every byte is in place", what);
		c->completed_ops++;
	}
}

/* A rendezvous send whose receiver dies while it pulls the data (bounce
 * buffers, or a shared copy of the receiver and the survivor by CMA). */
static void s_pull_cut(struct ctx *c)
{
	static struct op o;
	memset(&o, 0, sizeof(o));
	double end = now_ms() + 30000;
	expect_within(c->v.from, 'r', 30000);
	fill(sbuf, BIG, 4);
	CHECK(RETRY(&c->s, fi_tsend(c->s.ep, sbuf, BIG, NULL, c->va, TAG_V, &o), end) == 0, "rendezvous send");
	double t_dead = cut(c, vbuf, &o);
	cut_outcome(c, &o, t_dead, vbuf, 4, "rendezvous send, receiver dead in the middle of the transfer");
}

/* A rendezvous receive whose sender dies in the middle (bounce buffers, or
 * a shared copy in which the sender writes chunks from the back). */
static void s_send_cut(struct ctx *c)
{
	static struct op o;
	memset(&o, 0, sizeof(o));
	memset(sbuf, 0, BIG);
	CHECK(fi_trecv(c->s.ep, sbuf, BIG, NULL, FI_ADDR_UNSPEC, TAG_V, 0, &o) == 0, "post the receive");
	put(c->v.to, 'g');
	double t_dead = cut(c, sbuf, &o);
	cut_outcome(c, &o, t_dead, sbuf, 5, "rendezvous receive, sender dead in the middle of the transfer");
}

/* The sender posted a rendezvous message (RTS queued unexpected here) and
 * dies before the receive is posted. */
static void s_rts_dead(struct ctx *c)
{
	static struct op o;
	memset(&o, 0, sizeof(o));
	put(c->v.to, 'g');
	expect_within(c->v.from, 's', 30000);
	for (int i = 0; i < 200; i++)
		pump(&c->s);
	double t_dead = kill_victim(c);
	CHECK(fi_trecv(c->s.ep, sbuf, BIG, NULL, FI_ADDR_UNSPEC, TAG_V, 0, &o) == 0, "post the receive");
	expect_reset(c, &o, t_dead, c->t_open, "receive of a dead sender's queued message");
	c->reached = 1;
}

/* RMA and atomics to a target that stopped without serving them, then died. */
static void s_rma_idle(struct ctx *c)
{
	static struct op o[6];
	uint64_t one = 1, cmp = 0, swp = 5, res[2];
	double end = now_ms() + 30000;
	memset(o, 0, sizeof(o));
	expect_within(c->v.from, 'r', 30000);
	stop(c->v.pid);
	double t0 = now_ms();
	uint64_t va = c->vmr.addr, key = c->vmr.key;
	CHECK(RETRY(&c->s, fi_write(c->s.ep, sbuf, TMAX, NULL, c->va, va, key, &o[0]), end) == 0, "write");
	CHECK(RETRY(&c->s, fi_read(c->s.ep, sbuf + TMAX, TMAX, NULL, c->va, va + TMAX, key, &o[1]), end) == 0, "read");
	CHECK(RETRY(&c->s, fi_atomic(c->s.ep, &one, 1, NULL, c->va, va + ATOM, key, FI_UINT64, FI_SUM, &o[2]), end) == 0, "atomic");
	CHECK(RETRY(&c->s, fi_fetch_atomic(c->s.ep, &one, 1, NULL, &res[0], NULL, c->va, va + ATOM, key, FI_UINT64, FI_SUM, &o[3]),
		    end) == 0,
	      "fetch atomic");
	CHECK(RETRY(&c->s, fi_compare_atomic(c->s.ep, &swp, 1, NULL, &cmp, NULL, &res[1], NULL, c->va, va + ATOM + 8, key, FI_UINT64,
					     FI_CSWAP, &o[4]),
		    end) == 0,
	      "compare atomic");
	CHECK(RETRY(&c->s, fi_writedata(c->s.ep, sbuf, 4096, NULL, 0x1234, c->va, va, key, &o[5]), end) == 0, "writedata");
	int any = 0;
	for (int i = 0; i < 6; i++)
		any |= completes_within(&c->s, &o[i], i ? 10 : 3000);
	CHECK(!any, "nothing completes while the target is stopped");
	double t_dead = kill_victim(c);
	static const char *what[] = { "RMA write", "RMA read", "atomic", "fetch atomic", "compare atomic", "writedata" };
	for (int i = 0; i < 6; i++)
		expect_reset(c, &o[i], t_dead, t0, what[i]);
	c->reached = 1;
}

/* A BIG RMA write (read) whose target dies while it serves it: bounce
 * buffers, pieces of 4016 bytes each a request; CMA, one system call by
 * the target. */
static void rma_cut(struct ctx *c, int is_read)
{
	static struct op o;
	memset(&o, 0, sizeof(o));
	double end = now_ms() + 30000;
	expect_within(c->v.from, 'r', 30000);
	unsigned char *dst = is_read ? sbuf : vbuf;
	if (is_read)
		memset(sbuf, 0, BIG);
	else
		fill(sbuf, BIG, 6);
	ssize_t rc = is_read ? RETRY(&c->s, fi_read(c->s.ep, sbuf, BIG, NULL, c->va, c->vmr.addr, c->vmr.key, &o), end)
			     : RETRY(&c->s, fi_write(c->s.ep, sbuf, BIG, NULL, c->va, c->vmr.addr, c->vmr.key, &o), end);
	CHECK(rc == 0, "BIG RMA %s: %zd", is_read ? "read" : "write", rc);
	double t_dead = cut(c, dst, &o);
	cut_outcome(c, &o, t_dead, dst, is_read ? 7 : 6,
		    is_read ? "RMA read, target dead while serving it" : "RMA write, target dead while serving it");
}
static void s_rma_write_cut(struct ctx *c)
{
	rma_cut(c, 0);
}
static void s_rma_read_cut(struct ctx *c)
{
	rma_cut(c, 1);
}

/* Many atomics on a target that dies while serving them: issued as fast
 * as the endpoint takes them; the target is killed once 100 completed. */
static void s_atomics_cut(struct ctx *c)
{
	static struct op o[NATOMIC];
	static unsigned char seen[NATOMIC + 1];
	uint64_t one = 1;
	double end = now_ms() + 60000, t_dead = 0;
	int ok = 0, reset = 0, refused = 0, other = 0, dup = 0, killed = 0;
	memset(o, 0, sizeof(o));
	memset(seen, 0, sizeof(seen));
	expect_within(c->v.from, 'r', 30000);
	for (int i = 0; i < NATOMIC; i++) {
		ssize_t rc;
		for (;;) {
			rc = fi_fetch_atomic(c->s.ep, &one, 1, NULL, &o[i].res, NULL, c->va, c->vmr.addr + ATOM, c->vmr.key, FI_UINT64,
					     FI_SUM, &o[i]);
			idle(&c->s);
			if (!killed) {
				int done = 0;
				for (int j = 0; j < i; j++)
					done += o[j].done;
				if (done >= 100) {
					t_dead = kill_victim(c);
					killed = 1;
				}
			}
			if (rc != -FI_EAGAIN || now_ms() > end)
				break;
		}
		if (rc == -FI_ECONNRESET) {
			o[i].done = 1;
			o[i].err = -1;
			refused++;
		} else if (rc) {
			CHECK(0, "atomic %d: %zd", i, rc);
			o[i].done = 1;
			o[i].err = -2;
		}
	}
	CHECK(killed, "the target was killed while atomics were outstanding");
	if (!killed)
		t_dead = kill_victim(c);
	for (int i = 0; i < NATOMIC; i++) {
		wait_done(&c->s, &o[i], t_dead + bound_ms + 1000);
		if (!o[i].done)
			other++;
		else if (!o[i].err) {
			ok++;
			if (o[i].res > NATOMIC || seen[o[i].res]++)
				dup++;
		} else if (o[i].err == FI_ECONNRESET) {
			reset++;
			if (o[i].t - t_dead > c->detect)
				c->detect = o[i].t - t_dead;
		} else if (o[i].err != -1)
			other++;
	}
	uint64_t final = word_at(vbuf, ATOM);
	CHECK(ok + reset + refused == NATOMIC && other == 0, "%d atomics: %d completed, %d FI_ECONNRESET, %d -FI_ECONNRESET, %d else",
	      NATOMIC, ok, reset, refused, other);
	CHECK(reset > 0, "some atomics were outstanding when the target died");
	CHECK(dup == 0, "every fetched value is distinct (%d repeated)", dup);
	CHECK(final >= (uint64_t)ok && final <= (uint64_t)(ok + reset), "target word %llu: between %d and %d",
	      (unsigned long long)final, ok, ok + reset);
	CHECK(c->detect <= bound_ms, "last atomic failed %.1f ms after the death (bound %.0f)", c->detect, bound_ms);
	c->reached = killed;
	c->failed_ops += reset + refused;
	c->completed_ops += ok;
}

/* The survivor as RMA target: an initiator dies in the middle of a BIG
 * write (read) into (from) the survivor's region. The survivor has no
 * operation of its own: nothing may show up in its queue, its remote-write
 * counter counts the write only if every byte arrived, and it goes on. */
static void target_cut(struct ctx *c, int is_read)
{
	const unsigned char *watched = is_read ? vbuf : sbuf;
	if (is_read)
		fill(sbuf, BIG, 8);
	else
		memset(sbuf, 0, BIG);
	put(c->v.to, 'g');
	cut(c, watched, NULL);
	for (int i = 0; i < 20000; i++)
		pump(&c->s);
	CHECK(unexpected_entries == 0, "no completion at the target: %d", unexpected_entries);
	uint64_t writes = fi_cntr_read(c->s.rw);
	if (!is_read) {
		int whole = verify(sbuf, BIG, 9) == -1;
		CHECK(writes == (uint64_t)whole || (whole && writes == 0), "remote-write counter %llu, every byte in place %d",
		      (unsigned long long)writes, whole);
		if (bounce)
			CHECK(!whole && writes == 0, "bounce buffers: the write was cut");
		c->whole += whole;
		c->cut += !whole;
	} else {
		int whole = verify(vbuf, BIG, 8) == -1;
		if (bounce)
			CHECK(!whole, "bounce buffers: the read was cut");
		c->whole += whole;
		c->cut += !whole;
	}
}
static void s_target_write_cut(struct ctx *c)
{
	target_cut(c, 0);
}
static void s_target_read_cut(struct ctx *c)
{
	target_cut(c, 1);
}

/* The survivor as RMA target with replies queued behind the full queue of
 * a stopped initiator: the third peer's atomic is served meanwhile, and
 * once the initiator dies nothing is left waiting. */
static void s_target_replies_queued(struct ctx *c)
{
	double end = now_ms() + 30000;
	put(c->v.to, 'g');
	expect_within(c->v.from, 's', 30000);
	stop(c->v.pid);
	/* fill the stopped initiator's queue */
	int n = 0, eagain = 0;
	while (eagain < 2000 && now_ms() < end) {
		static struct op filler[512];
		if (n >= 512)
			break;
		memset(&filler[n], 0, sizeof(filler[n]));
		ssize_t rc = fi_tsend(c->s.ep, sbuf, 64, NULL, c->va, TAG_V, &filler[n]);
		if (rc == -FI_EAGAIN) {
			eagain++;
			pump(&c->s);
			continue;
		}
		CHECK(rc == 0, "eager send %d: %zd", n, rc);
		n++;
		eagain = 0;
	}
	for (int i = 0; i < 20000; i++)
		pump(&c->s);
	CHECK(word_at(sbuf, ATOM) == 64, "the stopped initiator's 64 atomics were applied: %llu",
	      (unsigned long long)word_at(sbuf, ATOM));
	put(c->t.to, 'a');
	double t1 = now_ms();
	while (!ready(c->t.from) && now_ms() < t1 + bound_ms)
		idle(&c->s);
	int served = ready(c->t.from);
	CHECK(served, "the third peer's atomic is served while the stopped initiator's replies wait");
	double t_dead = kill_victim(c);
	while (!ready(c->t.from) && now_ms() < t_dead + bound_ms + 1000)
		idle(&c->s);
	double lat = now_ms() - t_dead;
	CHECK(expect_within(c->t.from, 'k', 1000) == 0, "the third peer's atomic completes");
	if (!served)
		CHECK(lat <= bound_ms, "the third peer's atomic completed %.1f ms after the death", lat);
	CHECK(word_at(sbuf, ATOM) == 65, "target word %llu", (unsigned long long)word_at(sbuf, ATOM));
	c->reached = 1;
}

/* Operations pending on a stopped peer (a rendezvous send, a
 * delivery-complete eager send, an RMA write, an atomic) while the
 * survivor's own queue is backed up by a live peer (more messages than it
 * buffers, no receive posted for them): the peer's death still fails them
 * in time, and then every backlogged message is received, in order. */
static void s_backlog(struct ctx *c)
{
	static struct op o[4];
	uint64_t one = 1;
	double end = now_ms() + 60000;
	memset(o, 0, sizeof(o));
	expect_within(c->v.from, 'r', 30000);
	stop(c->v.pid);
	atomic_store(&ctl->sent, 0);
	struct iovec iov = { sbuf, 64 };
	struct fi_msg_tagged m = { .msg_iov = &iov, .iov_count = 1, .addr = c->va, .tag = TAG_V, .context = &o[1] };
	CHECK(RETRY(&c->s, fi_tsend(c->s.ep, sbuf, TMAX, NULL, c->va, TAG_V, &o[0]), end) == 0, "rendezvous send");
	CHECK(RETRY(&c->s, fi_tsendmsg(c->s.ep, &m, FI_DELIVERY_COMPLETE | FI_COMPLETION), end) == 0, "delivery-complete send");
	CHECK(RETRY(&c->s, fi_write(c->s.ep, sbuf, 4096, NULL, c->va, c->vmr.addr, c->vmr.key, &o[2]), end) == 0, "RMA write");
	CHECK(RETRY(&c->s, fi_fetch_atomic(c->s.ep, &one, 1, NULL, &o[3].res, NULL, c->va, c->vmr.addr + ATOM, c->vmr.key,
					   FI_UINT64, FI_SUM, &o[3]),
		    end) == 0,
	      "atomic");
	put(c->t.to, 'F');
	while (atomic_load(&ctl->sent) < 1024 + 100 && now_ms() < end)
		idle(&c->s);
	CHECK(atomic_load(&ctl->sent) >= 1024 + 100, "backlog built: %ld messages", atomic_load(&ctl->sent));
	int any = 0;
	for (int i = 0; i < 4; i++)
		any |= completes_within(&c->s, &o[i], i ? 10 : 2000);
	CHECK(!any, "nothing completes while the peer is stopped");
	double t_dead = kill_victim(c);
	static const char *what[] = { "rendezvous send", "delivery-complete send", "RMA write", "atomic" };
	for (int i = 0; i < 4; i++) {
		char w[96];
		snprintf(w, sizeof(w), "%s, peer dead, own queue backed up", what[i]);
		expect_reset(c, &o[i], t_dead, c->t_open, w);
	}
	/* now take the backlog, in order */
	int bad = 0;
	for (long i = 0; i < FLOOD; i++) {
		uint64_t msg[8];
		static struct op r;
		memset(&r, 0, sizeof(r));
		CHECK(fi_trecv(c->s.ep, msg, sizeof(msg), NULL, FI_ADDR_UNSPEC, TAG_F, 0, &r) == 0, "post for the backlog");
		if (!wait_done(&c->s, &r, end) || r.err || msg[0] != (uint64_t)i || verify(msg + 1, sizeof(msg) - 8, (uint64_t)i) != -1) {
			if (!r.done) {
				fi_cancel(&c->s.ep->fid, &r);
				wait_done(&c->s, &r, now_ms() + 1000);
			}
			if (bad++ < 3)
				printf("FAIL [%s] backlog message %ld: done %d err %d seq %llu\n", who, i, r.done, r.err,
				       (unsigned long long)msg[0]);
			if (!r.done)
				break;
		}
	}
	CHECK(bad == 0, "%d backlog messages in order and intact", FLOOD);
	CHECK(expect_within(c->t.from, 'k', 30000) == 0, "the third peer sent its backlog");
	c->reached = 1;
}

/* ------------------------------------------------------------ the campaign */

struct casedef {
	const char *name;
	void (*victim)(int, int);
	void (*run)(struct ctx *);
	void (*after)(struct ctx *); /* after dead_ops and third_check */
	int shared_fill;             /* 1: vbuf zeroed, 2: vbuf filled (seed 7) */
};

static const struct casedef cases[] = {
	{ "eager-ring-full", v_idle, s_ring_full, NULL, 1 },
	{ "eager-blocked", v_stream, s_eager_blocked, s_stream_end, 1 },
	{ "eager-stream", v_stream, s_eager_stream, s_stream_end, 1 },
	{ "rts-unmatched", v_idle, s_rts_unmatched, NULL, 1 },
	{ "pull-cut", v_recv, s_pull_cut, NULL, 1 },
	{ "send-cut", v_send, s_send_cut, NULL, 1 },
	{ "rts-dead", v_send_still, s_rts_dead, NULL, 1 },
	{ "rma-idle", v_idle, s_rma_idle, NULL, 1 },
	{ "rma-write-cut", v_serve, s_rma_write_cut, NULL, 1 },
	{ "rma-read-cut", v_serve, s_rma_read_cut, NULL, 2 },
	{ "atomics-cut", v_serve, s_atomics_cut, NULL, 1 },
	{ "target-write-cut", v_rma_write, s_target_write_cut, NULL, 1 },
	{ "target-read-cut", v_rma_read, s_target_read_cut, NULL, 1 },
	{ "target-replies-queued", v_atomics_still, s_target_replies_queued, NULL, 1 },
	{ "backlog", v_idle, s_backlog, NULL, 1 },
};

static void run_case(const struct casedef *cd)
{
	int reached = 0, finished = 0, leftovers = 0, fops = 0, cops = 0, cut = 0, whole = 0;
	double detect = 0, t_case = now_ms();
	long rss_first = 0, rss_last = 0;
	char dead_ops_note[160] = "";
	int fd_bad = 0, shm_bad = 0, map_bad = 0;
	/* A transfer can be whole before the kill lands (one cross-memory
	 * copy outruns it): when no repetition reached the stage, up to
	 * EXTRA_REPS more are run before that counts as a failure. */
	enum { EXTRA_REPS = 20 };
	int done_reps = 0;
	for (int rep = 0; rep < reps || (reached == 0 && rep < reps + EXTRA_REPS); rep++) {
		done_reps = rep + 1;
		static struct ctx c;
		memset(&c, 0, sizeof(c));
		c.rep = rep;
		unexpected_entries = 0;
		int fds0 = count_fds();
		if (cd->shared_fill == 2)
			fill(vbuf, REGION, 7);
		else
			memset(vbuf, 0, REGION);
		memset(sbuf + ATOM, 0, 4096);
		atomic_store(&ctl->sent, 0);
		atomic_store(&ctl->state, 0);
		c.v = spawn("victim", cd->victim);
		c.t = spawn("third", third);
		c.t_open = now_ms();
		if (open_res(&c.s, sbuf, REGION)) {
			CHECK(0, "open the survivor's endpoint");
			exit(1);
		}
		c.va = meet(&c.s, &c.v, &c.vmr);
		c.ta = meet(&c.s, &c.t, &c.tmr);
		hello_third(&c);
		cd->run(&c);
		dead_ops(&c);
		third_check(&c);
		if (cd->after)
			cd->after(&c);
		put(c.t.to, 'q');
		pid_t pids[3] = { getpid(), c.v.pid, c.t.pid };
		reap(&c.t, 0, "third peer");
		reap(&c.v, 1, "victim");
		CHECK(unexpected_entries == 0, "%d completions with no context", unexpected_entries);
		close_res(&c.s);
		int fds = count_fds(), shm = count_shm(pids, 3), maps = count_maps();
		if (fds != fds0)
			fd_bad++;
		shm_bad += shm;
		map_bad += maps;
		CHECK(fds == fds0 && shm == 0 && maps == 0, "%s rep %d: descriptors %d (before %d), /dev/shm entries %d, mappings %d",
		      cd->name, rep, fds, fds0, shm, maps);
		leftovers += (fds != fds0) + shm + maps;
		long rss = status_kb("VmRSS");
		if (rep == (reps > 2 ? 1 : 0))
			rss_first = rss;
		rss_last = rss;
		reached += c.reached;
		finished += c.finished;
		fops += c.failed_ops;
		cops += c.completed_ops;
		cut += c.cut;
		whole += c.whole;
		if (c.detect > detect)
			detect = c.detect;
		if (rep == 0)
			snprintf(dead_ops_note, sizeof(dead_ops_note), "%s", c.dead_ops);
	}
	long growth = rss_last - rss_first;
	if (reps >= 5)
		CHECK(growth < 8192, "%s: VmRSS grew by %ld KiB over %d repetitions", cd->name, growth, reps - 2);
	CHECK(reached > 0, "%s: the stage was reached in none of %d repetitions", cd->name, done_reps);
	char outcome[96];
	if (cut + whole)
		snprintf(outcome, sizeof(outcome), "transfers into/from the survivor cut %d, whole %d", cut, whole);
	else
		snprintf(outcome, sizeof(outcome), "operations failed %d, completed %d", fops, cops);
	printf("case %-22s %s: %d reps, stage reached %d, whole before the kill %d; %s; "
	       "slowest error %.1f ms; leftovers %d (fds %d, shm %d, maps %d), VmRSS %+ld KiB; %.1f s; dead peer: %s\n",
	       cd->name, bounce ? "bounce" : "cma", done_reps, reached, finished, outcome, detect, leftovers, fd_bad, shm_bad, map_bad, growth,
	       (now_ms() - t_case) / 1e3, dead_ops_note);
}

static int want(const char *name)
{
	const char *list = getenv("PEER_DEATH_CASES");
	if (!list || !*list)
		return 1;
	size_t n = strlen(name);
	for (const char *p = list; (p = strstr(p, name)); p += n)
		if ((p == list || p[-1] == ',') && (p[n] == 0 || p[n] == ','))
			return 1;
	return 0;
}

int main(void)
{
	setvbuf(stdout, NULL, _IONBF, 0);
	signal(SIGPIPE, SIG_IGN);
	const char *v = getenv("FI_SHM_CMA");
	bounce = v && !strcmp(v, "0");
	v = getenv("FI_SHM_PEER_CHECK_MS");
	interval_ms = v && *v ? atof(v) : 2;
	v = getenv("PEER_DEATH_SLACK_MS");
	slack_ms = v && *v ? atof(v) : 2000;
	bound_ms = interval_ms + slack_ms;
	v = getenv("PEER_DEATH_REPS");
	reps = v && *v ? atoi(v) : 2;
	if (reps < 1)
		reps = 1;
	printf("mode: %s; check interval %.0f ms, bound %.0f ms; %d repetitions\n", bounce ? "bounce (FI_SHM_CMA=0)" : "CMA when permitted",
	       interval_ms, bound_ms, reps);

	vbuf = map(REGION, 1);
	ctl = map(4096, 1);
	sbuf = map(REGION, 0);
	rbuf = map(NT * TMAX, 0);
	tsbuf = map(NT * TMAX, 0);
	st.bufs = map(NSTREAM * STREAM_MAX, 0);
	pid_t me = getpid();
	int fds0 = count_fds(), shm0 = count_shm(&me, 1);
	double t0 = now_ms();
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		if (want(cases[i].name))
			run_case(&cases[i]);
	CHECK(count_fds() == fds0 && count_shm(&me, 1) == shm0 && count_maps() == 0, "nothing left at the end");
	printf("%.1f s; %d passed, %d failed\n", (now_ms() - t0) / 1e3, passed, failed);
	return failed ? 1 : 0;
}
