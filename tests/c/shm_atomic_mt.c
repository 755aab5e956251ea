/* Remote atomics on one target from many initiators at once, through the C
 * API only. The parent is the target: FI_THREAD_SAFE, FI_PROGRESS_AUTO,
 * TARGET_EPS endpoints (each served by its own progress thread), one
 * registered region. It never reads a CQ: the progress threads serve every
 * request. INITIATORS child processes, each with INIT_EPS endpoints in its
 * own FI_THREAD_SAFE / FI_PROGRESS_AUTO domain and one thread per endpoint,
 * aim every endpoint at a different target endpoint and run, on words of
 * the one region:
 *   - fi_fetch_atomic FI_SUM FI_UINT64 +1 on an aligned word (several in
 *     flight per thread);
 *   - fi_compare_atomic FI_CSWAP FI_UINT64 increments of a second word
 *     (retried with the value fetched until each succeeds);
 *   - fi_atomic FI_SUM FI_DOUBLE_COMPLEX (1, 2) on a 16-byte element;
 *   - fi_fetch_atomic FI_SUM FI_UINT64 +1 on a word at an odd address;
 * Every update must land: the final values are exact, and the old values
 * that fetch-add and the successful compare-swaps returned are each
 * 0 .. total-1 once (their sums are checked). Two target endpoints serving
 * the same word at once used to race (atomics ran under each endpoint's
 * own lock). Prints "N passed, N failed". */
#define _GNU_SOURCE
#include <complex.h>
#include <pthread.h>
#include <rdma/fabric.h>
#include <rdma/fi_atomic.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define TARGET_EPS 4
#define INITIATORS 3
#define INIT_EPS 2
#define THREADS (INITIATORS * INIT_EPS)
#define WINDOW 32

/* Offsets of the words in the target's region. */
#define OFF_FADD 0
#define OFF_CSWAP 8
#define OFF_COMPLEX 16
#define OFF_ODD 41

static int passed, failed;
static const char *who = "target";
static long rounds = 2000;

#define CHECK(cond, ...)                                                      \
	do {                                                                  \
		if (cond) {                                                   \
			__atomic_add_fetch(&passed, 1, __ATOMIC_RELAXED);     \
		} else {                                                      \
			__atomic_add_fetch(&failed, 1, __ATOMIC_RELAXED);     \
			printf("FAIL [%s] %s:%d: ", who, __FILE__, __LINE__); \
			printf(__VA_ARGS__);                                  \
			printf("\n");                                         \
		}                                                             \
	} while (0)

/* Shared between the processes (an anonymous shared mapping made before
 * fork). */
struct board {
	char names[TARGET_EPS][128];
	size_t namelens[TARGET_EPS];
	uint64_t addr, key;
	/* Per initiator thread: sums of the old values it was handed. */
	uint64_t fadd_sum[THREADS], cswap_sum[THREADS], odd_sum[THREADS];
	uint64_t cswap_retries[THREADS];
};

static struct board *board;

static struct fi_info *get_info(void)
{
	struct fi_info *hints = fi_allocinfo(), *info = NULL;
	int ret;

	hints->ep_attr->type = FI_EP_RDM;
	hints->caps = FI_ATOMIC | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;
	hints->domain_attr->mr_mode = FI_MR_VIRT_ADDR | FI_MR_PROV_KEY | FI_MR_ALLOCATED;
	hints->domain_attr->threading = FI_THREAD_SAFE;
	hints->domain_attr->data_progress = FI_PROGRESS_AUTO;
	hints->fabric_attr->prov_name = strdup("shm");
	ret = fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &info);
	fi_freeinfo(hints);
	if (ret) {
		printf("[%s] fi_getinfo: %d\n", who, ret);
		exit(2);
	}
	CHECK(info->domain_attr->threading == FI_THREAD_SAFE, "threading %d", info->domain_attr->threading);
	CHECK(info->domain_attr->data_progress == FI_PROGRESS_AUTO, "data_progress %d", info->domain_attr->data_progress);
	return info;
}

struct ep {
	struct fid_ep *ep;
	struct fid_cq *cq;
	struct fid_av *av;
};

static void open_ep(struct fid_domain *d, struct fi_info *info, struct ep *e)
{
	struct fi_cq_attr cq_attr = { .format = FI_CQ_FORMAT_CONTEXT, .size = 64 };
	struct fi_av_attr av_attr = { .type = FI_AV_TABLE };

	if (fi_cq_open(d, &cq_attr, &e->cq, NULL) || fi_av_open(d, &av_attr, &e->av, NULL) ||
	    fi_endpoint(d, info, &e->ep, NULL)) {
		printf("[%s] opening an endpoint failed\n", who);
		exit(2);
	}
	CHECK(fi_ep_bind(e->ep, &e->av->fid, 0) == 0, "bind av");
	CHECK(fi_ep_bind(e->ep, &e->cq->fid, FI_TRANSMIT | FI_RECV) == 0, "bind cq");
	CHECK(fi_enable(e->ep) == 0, "enable");
}

static void close_ep(struct ep *e)
{
	CHECK(fi_close(&e->ep->fid) == 0, "close ep");
	CHECK(fi_close(&e->cq->fid) == 0, "close cq");
	CHECK(fi_close(&e->av->fid) == 0, "close av");
}

/* ---------------------------------------------------------------- target */

static int target(int go[INITIATORS], pid_t kids[INITIATORS])
{
	struct fi_info *info = get_info();
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_mr *mr;
	struct ep eps[TARGET_EPS];
	uint8_t *region = aligned_alloc(64, 4096);
	int bad_kids = 0;

	memset(region, 0, 4096);
	if (fi_fabric(info->fabric_attr, &fabric, NULL) || fi_domain(fabric, info, &domain, NULL)) {
		printf("[target] fabric/domain failed\n");
		exit(2);
	}
	for (int i = 0; i < TARGET_EPS; i++) {
		open_ep(domain, info, &eps[i]);
		board->namelens[i] = sizeof(board->names[i]);
		CHECK(fi_getname(&eps[i].ep->fid, board->names[i], &board->namelens[i]) == 0, "getname");
	}
	CHECK(fi_mr_reg(domain, region, 4096, FI_REMOTE_READ | FI_REMOTE_WRITE, 0, 0, 0, &mr, NULL) == 0, "mr_reg");
	board->addr = (uint64_t)(uintptr_t)region;
	board->key = fi_mr_key(mr);
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	for (int c = 0; c < INITIATORS; c++) {
		if (write(go[c], "g", 1) != 1)
			exit(2);
		close(go[c]);
	}
	/* No CQ read here: the endpoints' progress threads serve everything. */
	for (int c = 0; c < INITIATORS; c++) {
		int st = 0;
		if (waitpid(kids[c], &st, 0) != kids[c] || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
			printf("[target] initiator %d ended with status %#x\n", c, st);
			bad_kids++;
		}
	}
	CHECK(bad_kids == 0, "%d initiators failed", bad_kids);

	uint64_t total = (uint64_t)THREADS * rounds, fadd, cswap, odd;
	double complex z;
	memcpy(&fadd, region + OFF_FADD, 8);
	memcpy(&cswap, region + OFF_CSWAP, 8);
	memcpy(&z, region + OFF_COMPLEX, 16);
	memcpy(&odd, region + OFF_ODD, 8);
	CHECK(fadd == total, "fetch-add word %llu, expected %llu", (unsigned long long)fadd, (unsigned long long)total);
	CHECK(cswap == total, "compare-swap word %llu, expected %llu", (unsigned long long)cswap, (unsigned long long)total);
	CHECK(creal(z) == (double)total && cimag(z) == 2.0 * total, "complex sum %g%+gi, expected %llu+%llui",
	      creal(z), cimag(z), (unsigned long long)total, 2 * (unsigned long long)total);
	CHECK(odd == total, "word at an odd address %llu, expected %llu", (unsigned long long)odd, (unsigned long long)total);
	uint64_t fs = 0, cs = 0, os = 0, retries = 0;
	for (int t = 0; t < THREADS; t++) {
		fs += board->fadd_sum[t];
		cs += board->cswap_sum[t];
		os += board->odd_sum[t];
		retries += board->cswap_retries[t];
	}
	uint64_t want = total * (total - 1) / 2;
	CHECK(fs == want, "sum of fetched fetch-add values %llu, expected %llu", (unsigned long long)fs, (unsigned long long)want);
	CHECK(cs == want, "sum of successful compare-swap values %llu, expected %llu", (unsigned long long)cs, (unsigned long long)want);
	CHECK(os == want, "sum of fetched odd-word values %llu, expected %llu", (unsigned long long)os, (unsigned long long)want);
	printf("[target] %llu updates of each kind from %d threads in %d processes over %d target endpoints; %llu compare-swap retries\n",
	       (unsigned long long)total, THREADS, INITIATORS, TARGET_EPS, (unsigned long long)retries);

	CHECK(fi_close(&mr->fid) == 0, "close mr");
	for (int i = 0; i < TARGET_EPS; i++)
		close_ep(&eps[i]);
	CHECK(fi_close(&domain->fid) == 0, "close domain");
	CHECK(fi_close(&fabric->fid) == 0, "close fabric");
	fi_freeinfo(info);
	free(region);
	return 0;
}

/* ---------------------------------------------------------------- initiator */

struct worker {
	struct ep *e;
	fi_addr_t dest;
	int slot; /* index into the board's per-thread sums */
};

/* Waits for one completion of `w`; returns its context. */
static void *wait_one(struct worker *w)
{
	struct fi_cq_entry c;
	for (;;) {
		ssize_t n = fi_cq_read(w->e->cq, &c, 1);
		if (n == 1)
			return c.op_context;
		if (n == -FI_EAGAIN)
			continue;
		if (n == -FI_EAVAIL) {
			struct fi_cq_err_entry err = { 0 };
			fi_cq_readerr(w->e->cq, &err, 0);
			CHECK(0, "error completion %d (%s)", err.err, fi_strerror(err.err));
			return err.op_context;
		}
		CHECK(0, "fi_cq_read %zd", n);
		return NULL;
	}
}

/* Posts with retries on -FI_EAGAIN (the CQ is read meanwhile). */
#define POST(w, call)                                                         \
	do {                                                                  \
		ssize_t r_;                                                   \
		while ((r_ = (call)) == -FI_EAGAIN)                           \
			;                                                     \
		CHECK(r_ == 0, "%s: %zd", #call, r_);                         \
	} while (0)

/* Several fetch-adds of 1 in flight at `off`; returns the sum of the old
 * values. */
static uint64_t fetch_adds(struct worker *w, uint64_t off)
{
	uint64_t one = 1, old[WINDOW], sum = 0;
	struct fi_context ctx[WINDOW];
	long posted = 0, done = 0;

	while (done < rounds) {
		while (posted < rounds && posted - done < WINDOW) {
			int s = posted % WINDOW;
			POST(w, fi_fetch_atomic(w->e->ep, &one, 1, NULL, &old[s], NULL, w->dest, board->addr + off,
						board->key, FI_UINT64, FI_SUM, &ctx[s]));
			posted++;
		}
		struct fi_context *c = wait_one(w);
		if (c < ctx || c >= ctx + WINDOW)
			return sum;
		sum += old[c - ctx];
		done++;
	}
	return sum;
}

static void *initiator_thread(void *arg)
{
	struct worker *w = arg;
	struct fi_context ctx[WINDOW];

	board->fadd_sum[w->slot] = fetch_adds(w, OFF_FADD);
	board->odd_sum[w->slot] = fetch_adds(w, OFF_ODD);

	/* Compare-swap increments, each retried with the value it fetched. */
	uint64_t expect = 0, sum = 0, retries = 0;
	for (long i = 0; i < rounds;) {
		uint64_t want = expect + 1, got = 0;
		POST(w, fi_compare_atomic(w->e->ep, &want, 1, NULL, &expect, NULL, &got, NULL, w->dest,
					  board->addr + OFF_CSWAP, board->key, FI_UINT64, FI_CSWAP, &ctx[0]));
		if (wait_one(w) != &ctx[0])
			break;
		if (got == expect) {
			sum += expect;
			expect++;
			i++;
		} else {
			expect = got;
			retries++;
		}
	}
	board->cswap_sum[w->slot] = sum;
	board->cswap_retries[w->slot] = retries;

	/* Double-complex sums (no hardware atomic for 16 bytes). */
	double complex z = 1.0 + 2.0 * I;
	long posted = 0, done = 0;
	while (done < rounds) {
		while (posted < rounds && posted - done < WINDOW) {
			POST(w, fi_atomic(w->e->ep, &z, 1, NULL, w->dest, board->addr + OFF_COMPLEX, board->key,
					  FI_DOUBLE_COMPLEX, FI_SUM, &ctx[posted % WINDOW]));
			posted++;
		}
		if (!wait_one(w))
			break;
		done++;
	}
	return NULL;
}

static int initiator(int idx, int go)
{
	char c;
	static char name[16];

	snprintf(name, sizeof(name), "initiator %d", idx);
	who = name;
	if (read(go, &c, 1) != 1)
		return 2;
	close(go);

	struct fi_info *info = get_info();
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct ep eps[INIT_EPS];
	struct worker ws[INIT_EPS];
	pthread_t th[INIT_EPS];

	if (fi_fabric(info->fabric_attr, &fabric, NULL) || fi_domain(fabric, info, &domain, NULL)) {
		printf("[%s] fabric/domain failed\n", who);
		return 2;
	}
	for (int j = 0; j < INIT_EPS; j++) {
		int slot = idx * INIT_EPS + j, t = slot % TARGET_EPS;
		open_ep(domain, info, &eps[j]);
		ws[j] = (struct worker){ .e = &eps[j], .slot = slot };
		CHECK(fi_av_insert(eps[j].av, board->names[t], 1, &ws[j].dest, 0, NULL) == 1, "av_insert");
	}
	for (int j = 0; j < INIT_EPS; j++)
		CHECK(pthread_create(&th[j], NULL, initiator_thread, &ws[j]) == 0, "pthread_create");
	for (int j = 0; j < INIT_EPS; j++)
		pthread_join(th[j], NULL);
	for (int j = 0; j < INIT_EPS; j++)
		close_ep(&eps[j]);
	CHECK(fi_close(&domain->fid) == 0, "close domain");
	CHECK(fi_close(&fabric->fid) == 0, "close fabric");
	fi_freeinfo(info);
	printf("[%s] %d passed, %d failed\n", who, passed, failed);
	return failed ? 1 : 0;
}

int main(void)
{
	int go[INITIATORS];
	pid_t kids[INITIATORS];
	const char *r = getenv("ATOMIC_ROUNDS");

	setvbuf(stdout, NULL, _IONBF, 0);
	if (r && atol(r) > 0)
		rounds = atol(r);
	board = mmap(NULL, sizeof(*board), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (board == MAP_FAILED)
		return 2;
	memset(board, 0, sizeof(*board));
	/* Fork before the library is touched; each child waits for its go. */
	for (int c = 0; c < INITIATORS; c++) {
		int p[2];
		if (pipe(p))
			return 2;
		kids[c] = fork();
		if (kids[c] < 0)
			return 2;
		if (kids[c] == 0) {
			close(p[1]);
			exit(initiator(c, p[0]));
		}
		close(p[0]);
		go[c] = p[1];
	}
	target(go, kids);
	printf("[target] %d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}
