/*
 * Soak test of an MPI library over libfabric: for a given time, rounds of
 * random point-to-point traffic and one-sided operations on every rank,
 * every byte checked, while each rank samples its own resident memory and
 * open descriptors.
 *
 * Usage: mpiexec -n 4 soak [SECONDS]      (any count from 2 to 16 ranks)
 *   SOAK_SECONDS      run time when no argument is given (default 60)
 *   SOAK_SEED         base seed (default: from the clock; printed)
 *   SOAK_ROUNDS       run exactly this many rounds instead of for a time
 *                     (with SOAK_SEED, replays a failed run's traffic)
 *   SOAK_WARMUP       seconds excluded from the resource check (default
 *                     10% of the run)
 *   SOAK_RSS_BOUND_KB allowed VmRSS growth after warm-up (default 8192)
 *   SOAK_ROUND_LIMIT  seconds a round may take before the rank reports
 *                     what it waits for and exits 3 (default 120)
 *   SOAK_WIN_ROUNDS   rounds between window re-creations (default 25;
 *                     0: one window for the whole run)
 *   SOAK_RMA          0: no one-sided phase (point-to-point only); fence
 *                     or lock: only that half of it
 *   SOAK_P2P          0: no point-to-point phase (one-sided only)
 *   SOAK_SAMPLES      a path prefix: each rank writes its samples to
 *                     PREFIX.RANK (seconds, round, VmRSS, RssAnon,
 *                     RssShmem in KiB, descriptors; one line each)
 *   SOAK_INJECT       a fault for checking the checks, made by rank 1 from
 *                     round 3 on: corrupt (one byte of a message, once),
 *                     drop (a message to rank 2 not sent, once), dup (a
 *                     small message to rank 2 sent twice, once), leak (64 KiB of
 *                     memory kept every round), fdleak (a descriptor kept
 *                     every round)
 *
 * Rounds. Round r is planned from the base seed and r alone, and every
 * rank computes the whole plan, so each receiver knows how many messages
 * to expect from whom, their sizes, tags and how they are sent and
 * received. Every pair of ranks exchanges 1 to 8 messages each way per
 * round, 0 B to 8 MiB, most of them small (see pick_size). A rank
 *   1. posts its nonblocking receives (MPI_Irecv: by source and tag, or
 *      with MPI_ANY_SOURCE and/or MPI_ANY_TAG);
 *   2. sends in plan order with MPI_Isend, MPI_Issend, MPI_Send or
 *      MPI_Ssend; a blocking send goes only to a receive of step 1;
 *   3. receives the rest with blocking MPI_Recv, MPI_Probe + MPI_Recv or
 *      MPI_Mprobe + MPI_Mrecv; those were sent nonblocking;
 *   4. completes its requests with MPI_Waitall, MPI_Waitany or MPI_Testsome.
 * No step waits for a later step of another rank, so a round cannot
 * deadlock. The one-sided phase (fences, a barrier) and a reduction of the
 * failure count end every round on all ranks together, and rounds alternate
 * between two pairs of communicators (one for receives by source and tag,
 * one for wildcards), so even a message delivered late could not match a
 * receive of the next round. Within a round ranks run at their own pace,
 * so a message may arrive before its receive is posted. Tags are unique per sender and receiver within a
 * round, except that some messages to receives by source and tag repeat
 * the tag of the previous one, and wildcard receives by tag (MPI_ANY_SOURCE
 * alone) use four tags: MPI's non-overtaking rule then fixes which receive
 * gets which, and the test checks that (for MPI_ANY_TAG receives too).
 *
 * Checks. Messages of 48 B or more start with a header (magic, source,
 * destination, round, index, size, seed, and a checksum of the rest:
 * FNV-1a over 64-bit words); the rest is a pattern from the message's seed.
 * The receiver checks the status (source, tag, count), the header, the
 * checksum and every byte against the pattern, and that each expected
 * message arrived exactly once: a lost message shows as a round that does
 * not finish (each rank reports the operations it has not seen complete
 * and exits 3), a misdelivered or duplicated one as a header naming another
 * message, a wildcard receive no message was expected for, or a message
 * left over after the last round (every communicator is probed then), a
 * corrupted one by its checksum and first wrong byte.
 *
 * One-sided, every round, on a window over memory allocated once (the
 * window is freed and created again every 25 rounds, so registrations come
 * and go): under fence, every rank puts 0 B to 1 MiB into its slot of every
 * window and accumulates (MPI_SUM, uint64) 16 values into all of them; each
 * rank checks its window, then gets two slots from other ranks and checks
 * them. Under lock (shared or exclusive, per the plan) each rank does 1 to
 * 6 operations: MPI_Fetch_and_op(SUM) on a target's counter (the value
 * fetched must lie in the range the plan allows and grow), MPI_Put +
 * MPI_Win_flush + MPI_Get of its own slot (read back equal), MPI_Accumulate
 * + flush, and MPI_Compare_and_swap on its own word (the old value must be
 * the one it last stored). After a barrier each rank checks its counter and
 * sums.
 *
 * Resources: once a second (at the end of a round) each rank records
 * VmRSS (/proc/self/status) and the number of entries of /proc/self/fd.
 * After warm-up the first sample, the last and the maximum are reported;
 * the rank fails if the last VmRSS exceeds the first by more than
 * SOAK_RSS_BOUND_KB or if any sample's descriptor count differs from the
 * first. The bound is one largest message (8 MiB): buffers the MPI library
 * or the provider keep at a high-water mark (an unexpected message held
 * once more, a bigger bounce allocation) may add that much once, while a
 * leak of anything per message or per round grows without end and crosses
 * it (a 10-minute run does thousands of rounds and tens of thousands of
 * messages per rank). The memory the test itself uses is allocated and
 * touched before the first sample. Buffers that are touched for the first
 * time bit by bit grow VmRSS until they are all in: MPICH's active-message
 * receive buffers (8 x 2 MiB by default, filled front to back through
 * FI_MULTI_RECV, about 1.4 KiB a round) are one; run_soak.sh makes them
 * small enough to be all in within the first minute.
 *
 * Output: "soak: seed S" and "rank R: pid P, seed S_R, libfabric PATH" at
 * the start; a progress line from rank 0 every 30 s; any failure as a line
 * "soak FAIL rank R round N: ..." followed by a replay line; at the end one
 * "soak resources rank R: ..." line per rank and "soak: PASS ..." or
 * "soak: FAIL ..." from rank 0. Exit status 0 only on PASS.
 */
#define _GNU_SOURCE
#include <mpi.h>
#include <dirent.h>
#include <dlfcn.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum {
	MAXNP = 16,
	MAX_PER_PAIR = 8,
	HDR = 48,
	SLOT = 1 << 20,		/* RMA bytes per origin slot */
	NACC = 16,		/* uint64 accumulated under fence */
	NACC2 = 4,		/* uint64 accumulated under lock */
	MAX_POPS = 6,		/* passive operations per origin and round */
};
#define MAX_MSG ((size_t)8 << 20)
#define PAIR_BUDGET ((size_t)12 << 20)	/* bytes per pair and round */
#define WILD_EXTRA ((size_t)16 << 20)	/* receive arena beyond the pair budgets */
#define MAGIC 0x4b414f53u		/* "SOAK" */

enum smode { S_ISEND, S_ISSEND, S_SEND, S_SSEND };
enum rmode { R_IRECV, R_WILD, R_RECV, R_PROBE, R_MPROBE };
enum wmode { W_ANY_BOTH, W_ANY_SRC, W_ANY_TAG };
static const char *sname[] = { "Isend", "Issend", "Send", "Ssend" };
static const char *rname[] = { "Irecv", "Irecv(wildcard)", "Recv", "Probe+Recv", "Mprobe+Mrecv" };
static const char *wname[] = { "ANY_SOURCE+ANY_TAG", "ANY_SOURCE", "ANY_TAG" };

struct msg {
	int src, dst, idx, tag;
	size_t size;
	uint64_t seed;
	enum smode sm;
	enum rmode rm;
	size_t soff;	/* offset in the sender's arena */
	int taken;	/* receiver: matched once */
};

enum pop_kind { P_FOP, P_PUTGET, P_ACC, P_CAS };
struct pop {
	enum pop_kind kind;
	int target, excl;
	size_t size;
	uint64_t val;
};

static int me, np;
static const char *inject = "";
static uint64_t base_seed;
static long round_no;
static int failed;

/* ---------- random numbers ---------- */

static uint64_t splitmix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

struct rng {
	uint64_t s;
};
static uint64_t rnd(struct rng *r)
{
	r->s += 0x9e3779b97f4a7c15ull;
	return splitmix(r->s);
}
static uint64_t below(struct rng *r, uint64_t n)
{
	return n ? rnd(r) % n : 0;
}
static uint64_t mix(uint64_t a, uint64_t b, uint64_t c, uint64_t d)
{
	return splitmix(splitmix(splitmix(splitmix(a) ^ b) ^ c) ^ d);
}

/* A message size: 3% empty, 42% up to 256 B, 25% up to 16 KiB, 15% up to
 * 512 KiB, 11% up to 4 MiB, 4% up to 8 MiB (8 MiB itself one time in 1000);
 * log-uniform within the middle classes so every power of two shows up. */
static size_t log_uniform(struct rng *r, int lo, int hi)
{
	int e = lo + (int)below(r, (uint64_t)(hi - lo));
	size_t a = (size_t)1 << e;
	return a + below(r, a);
}
static size_t pick_size(struct rng *r)
{
	unsigned u = (unsigned)below(r, 1000);
	if (u < 30)
		return 0;
	if (u < 450)
		return 1 + below(r, 256);
	if (u < 700)
		return log_uniform(r, 8, 14);
	if (u < 850)
		return log_uniform(r, 14, 19);
	if (u < 960)
		return log_uniform(r, 19, 22);
	if (u == 999)
		return MAX_MSG;
	return ((size_t)4 << 20) + below(r, (size_t)4 << 20);
}
/* an RMA size, 0 B to 1 MiB, skewed the same way */
static size_t pick_rma_size(struct rng *r)
{
	size_t s = pick_size(r);
	return s > SLOT ? SLOT - below(r, 4096) : s;
}

/* ---------- the plan of a round (identical on every rank) ---------- */

static struct msg plan_msg[MAXNP][MAXNP][MAX_PER_PAIR];
static int plan_n[MAXNP][MAXNP];
static enum wmode plan_w[MAXNP];		/* wildcard mode per receiver */
static size_t plan_put[MAXNP][MAXNP];		/* fence put size [origin][target] */
static struct pop plan_pop[MAXNP][MAX_POPS];
static int plan_npop[MAXNP];
static uint64_t plan_accval[MAXNP][NACC];	/* fence accumulate values per origin */

static size_t send_arena_size, recv_arena_size;

/* receive buffer needed by wildcard receives of dst under its mode */
static size_t wild_need(int dst)
{
	size_t total = 0, maxall = 0;
	size_t bysrc[MAXNP] = { 0 };
	int nsrc[MAXNP] = { 0 }, nall = 0;
	size_t bytag[64] = { 0 };
	int ntag[64] = { 0 };
	for (int s = 0; s < np; s++)
		for (int k = 0; k < plan_n[s][dst]; k++) {
			struct msg *m = &plan_msg[s][dst][k];
			if (m->rm != R_WILD)
				continue;
			nall++;
			if (m->size > maxall)
				maxall = m->size;
			nsrc[s]++;
			if (m->size > bysrc[s])
				bysrc[s] = m->size;
			int t = m->tag & 63;
			ntag[t]++;
			if (m->size > bytag[t])
				bytag[t] = m->size;
		}
	switch (plan_w[dst]) {
	case W_ANY_BOTH:
		total = (size_t)nall * maxall;
		break;
	case W_ANY_TAG:
		for (int s = 0; s < np; s++)
			total += (size_t)nsrc[s] * bysrc[s];
		break;
	case W_ANY_SRC:
		for (int t = 0; t < 64; t++)
			total += (size_t)ntag[t] * bytag[t];
		break;
	}
	return total;
}

static size_t specific_need(int dst)
{
	size_t total = 0;
	for (int s = 0; s < np; s++)
		for (int k = 0; k < plan_n[s][dst]; k++)
			if (plan_msg[s][dst][k].rm != R_WILD)
				total += plan_msg[s][dst][k].size;
	return total;
}

static void plan(long r)
{
	struct rng g = { mix(base_seed, 0x50a4, (uint64_t)r, 1) };
	for (int d = 0; d < np; d++)
		plan_w[d] = (enum wmode)below(&g, 3);
	for (int s = 0; s < np; s++)
		for (int d = 0; d < np; d++) {
			plan_n[s][d] = 0;
			if (s == d)
				continue;
			int n = 1;
			while (n < MAX_PER_PAIR && below(&g, 100) < 55)
				n++;
			size_t used = 0;
			for (int k = 0; k < n; k++) {
				struct msg *m = &plan_msg[s][d][k];
				memset(m, 0, sizeof *m);
				m->src = s;
				m->dst = d;
				m->idx = k;
				m->size = pick_size(&g);
				if (used + m->size > PAIR_BUDGET) {
					size_t room = PAIR_BUDGET - used;
					m->size = below(&g, (room < 65536 ? room : 65536) + 1);
				}
				used += m->size;
				m->seed = mix(base_seed, (uint64_t)r, (uint64_t)(s * MAXNP + d), (uint64_t)k);
				unsigned u = (unsigned)below(&g, 100);
				m->rm = u < 35 ? R_IRECV : u < 65 ? R_WILD : u < 80 ? R_RECV : u < 90 ? R_PROBE : R_MPROBE;
				if (m->rm == R_WILD && plan_w[d] == W_ANY_SRC)
					m->tag = 8192 + (int)below(&g, 4);	/* few tags: classes */
				else
					m->tag = (int)below(&g, 1024) * MAX_PER_PAIR + k;
				/* some preposted specific receives repeat the previous
				 * message's tag: then order alone tells them apart */
				if (m->rm == R_IRECV && k > 0 && plan_msg[s][d][k - 1].rm == R_IRECV && below(&g, 100) < 40)
					m->tag = plan_msg[s][d][k - 1].tag;
				/* a blocking send only towards a preposted receive */
				u = (unsigned)below(&g, 100);
				if (m->rm == R_IRECV || m->rm == R_WILD)
					m->sm = u < 40 ? S_ISEND : u < 55 ? S_ISSEND : u < 85 ? S_SEND : S_SSEND;
				else
					m->sm = u < 75 ? S_ISEND : S_ISSEND;
			}
			plan_n[s][d] = n;
		}
	/* keep each receiver's wildcard buffers within its arena: the largest
	 * wildcard messages become receives by source and tag */
	for (int d = 0; d < np; d++) {
		while (specific_need(d) + wild_need(d) > recv_arena_size) {
			struct msg *big = NULL;
			for (int s = 0; s < np; s++)
				for (int k = 0; k < plan_n[s][d]; k++) {
					struct msg *m = &plan_msg[s][d][k];
					if (m->rm == R_WILD && (!big || m->size > big->size))
						big = m;
				}
			big->rm = R_IRECV;
			/* its tag may come from the small class range: unique again */
			big->tag = 16384 + big->idx;
		}
	}
	/* one-sided */
	for (int o = 0; o < np; o++) {
		for (int t = 0; t < np; t++)
			plan_put[o][t] = pick_rma_size(&g);
		for (int i = 0; i < NACC; i++)
			plan_accval[o][i] = rnd(&g) & 0xffffff;
		plan_npop[o] = 1 + (int)below(&g, MAX_POPS);
		for (int i = 0; i < plan_npop[o]; i++) {
			struct pop *p = &plan_pop[o][i];
			p->kind = (enum pop_kind)below(&g, 4);
			p->target = (int)below(&g, (uint64_t)np);
			p->excl = below(&g, 100) < 30;
			p->size = pick_rma_size(&g);
			p->val = rnd(&g) & 0xffffff;
		}
	}
}

/* ---------- payloads ---------- */

struct hdr {
	uint32_t magic;
	uint16_t src, dst;
	uint32_t round, idx;
	uint64_t size, seed, csum;
	uint64_t pad;
};
_Static_assert(sizeof(struct hdr) == HDR, "header size");

/* FNV-1a over 64-bit words (the tail byte by byte) */
static uint64_t fnv(const unsigned char *p, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ull, w;
	size_t i = 0;
	for (; i + 8 <= n; i += 8) {
		memcpy(&w, p + i, 8);
		h = (h ^ w) * 0x100000001b3ull;
	}
	for (; i < n; i++)
		h = (h ^ p[i]) * 0x100000001b3ull;
	return h;
}

/* the pattern: byte i is byte i%8 of splitmix(seed + i/8) */
static void pattern(unsigned char *b, size_t n, uint64_t seed)
{
	size_t w = n / 8;
	for (size_t i = 0; i < w; i++) {
		uint64_t v = splitmix(seed + i);
		memcpy(b + 8 * i, &v, 8);
	}
	if (n % 8) {
		uint64_t v = splitmix(seed + w);
		memcpy(b + 8 * w, &v, n % 8);
	}
}
/* first offset >= from where b differs from the pattern, or -1 */
static long pattern_diff(const unsigned char *b, size_t n, uint64_t seed, size_t from, unsigned *got, unsigned *want)
{
	for (size_t i = from / 8 * 8; i < n; i += 8) {
		uint64_t v = splitmix(seed + i / 8);
		unsigned char e[8];
		memcpy(e, &v, 8);
		size_t lim = n - i < 8 ? n - i : 8;
		for (size_t j = 0; j < lim; j++)
			if (i + j >= from && b[i + j] != e[j]) {
				*got = b[i + j];
				*want = e[j];
				return (long)(i + j);
			}
	}
	return -1;
}

static void fill_msg(unsigned char *b, const struct msg *m, long r)
{
	pattern(b, m->size, m->seed);
	if (m->size >= HDR) {
		struct hdr h = { MAGIC, (uint16_t)m->src, (uint16_t)m->dst, (uint32_t)r, (uint32_t)m->idx,
				 m->size, m->seed, fnv(b + HDR, m->size - HDR), 0 };
		memcpy(b, &h, HDR);
	}
}

static void fail(const char *fmt, ...)
{
	char s[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(s, sizeof s, fmt, ap);
	va_end(ap);
	printf("soak FAIL rank %d round %ld: %s\n", me, round_no, s);
	fflush(stdout);
	failed++;
}

static const char *describe(const struct msg *m)
{
	static char s[256];
	snprintf(s, sizeof s, "message %d from rank %d to rank %d (tag %d, %zu B, %s -> %s%s%s)", m->idx, m->src,
		 m->dst, m->tag, m->size, sname[m->sm], rname[m->rm], m->rm == R_WILD ? " " : "",
		 m->rm == R_WILD ? wname[plan_w[m->dst]] : "");
	return s;
}

/* check a received message against what was expected (count from status) */
static void check_msg(const unsigned char *b, int count, const struct msg *m, long r)
{
	if (count < 0 || (size_t)count != m->size) {
		fail("%s: received %d bytes", describe(m), count);
		return;
	}
	size_t from = 0;
	if (m->size >= HDR) {
		struct hdr h;
		memcpy(&h, b, HDR);
		if (h.magic != MAGIC || h.src != m->src || h.dst != m->dst || h.round != (uint32_t)r ||
		    h.idx != (uint32_t)m->idx || h.size != m->size || h.seed != m->seed) {
			fail("%s: header names magic %#x, message %u from rank %u to rank %u of round %u, %llu B: "
			     "another message was delivered here (or the header is corrupted)",
			     describe(m), h.magic, h.idx, h.src, h.dst, h.round, (unsigned long long)h.size);
			return;
		}
		uint64_t c = fnv(b + HDR, m->size - HDR);
		if (c != h.csum)
			fail("%s: checksum %016llx, header says %016llx", describe(m), (unsigned long long)c,
			     (unsigned long long)h.csum);
		from = HDR;
	}
	unsigned got = 0, want = 0;
	long d = pattern_diff(b, m->size, m->seed, from, &got, &want);
	if (d >= 0)
		fail("%s: corrupted from byte %ld (0x%02x, expected 0x%02x)", describe(m), d, got, want);
}

/* ---------- resources ---------- */

struct sample {
	double t;
	long round;
	long rss_kb, anon_kb, shmem_kb;
	int fds;
};
static struct sample *samples;
static int nsamples, maxsamples;

static long status_kb(const char *text, const char *key)
{
	const char *p = strstr(text, key);
	return p ? atol(p + strlen(key)) : -1;
}

static void take_sample(double t)
{
	char text[4096];
	FILE *f = fopen("/proc/self/status", "r");
	size_t n = f ? fread(text, 1, sizeof text - 1, f) : 0;
	if (f)
		fclose(f);
	text[n] = 0;
	int fds = -1;
	DIR *d = opendir("/proc/self/fd");
	if (d) {
		struct dirent *e;
		fds = 0;
		while ((e = readdir(d)))
			if (e->d_name[0] != '.')
				fds++;
		fds--; /* the directory's own descriptor */
		closedir(d);
	}
	if (nsamples < maxsamples)
		samples[nsamples++] = (struct sample){ t, round_no, status_kb(text, "VmRSS:"), status_kb(text, "RssAnon:"),
						       status_kb(text, "RssShmem:"), fds };
}

/* ---------- watchdog ---------- */

/* what the rank waits for, for the SIGALRM report of a round that does not
 * finish: a phase and the operations not yet seen complete */
static const char *phase = "start";
static struct msg *pend_msg[2 * MAXNP * MAX_PER_PAIR];
static char pend_kind[2 * MAXNP * MAX_PER_PAIR];	/* 's' send, 'r' receive */
static char pend_done[2 * MAXNP * MAX_PER_PAIR];
static int npend, blocked_in = -1;	/* the blocking call's operation */
static unsigned round_limit = 120;
static long win_rounds = 25;
static int do_rma = 1, do_p2p = 1;

static void on_alarm(int sig)
{
	(void)sig;
	char s[512];
	int n = snprintf(s, sizeof s,
			 "soak FAIL rank %d round %ld: no progress for %u s in phase '%s'; this round's operations not "
			 "seen complete:\n",
			 me, round_no, round_limit, phase);
	if (write(1, s, (size_t)n) < 0)
		_exit(3);
	for (int i = 0; i < npend; i++) {
		if (pend_done[i])
			continue;
		n = snprintf(s, sizeof s, "soak pending rank %d: %s%s %s\n", me, i == blocked_in ? "(blocked in) " : "",
			     pend_kind[i] == 's' ? "send of" : "receive of", describe(pend_msg[i]));
		if (write(1, s, (size_t)n) < 0)
			break;
	}
	n = snprintf(s, sizeof s, "soak: replay with SOAK_SEED=%llu SOAK_ROUNDS=%ld\n", (unsigned long long)base_seed,
		     round_no + 1);
	if (write(1, s, (size_t)n) < 0)
		_exit(3);
	_exit(3);
}

/* ---------- MPI helpers ---------- */

static void mpi_check(int rc, const char *what)
{
	if (rc == MPI_SUCCESS)
		return;
	char s[MPI_MAX_ERROR_STRING];
	int len = 0;
	MPI_Error_string(rc, s, &len);
	printf("soak FAIL rank %d round %ld: %s: %s\n", me, round_no, what, s);
	printf("soak: replay with SOAK_SEED=%llu SOAK_ROUNDS=%ld\n", (unsigned long long)base_seed, round_no + 1);
	fflush(stdout);
	MPI_Abort(MPI_COMM_WORLD, 2);
}

/* ---------- totals ---------- */

enum { T_MSGS, T_BYTES, T_PUT, T_PUTB, T_GET, T_GETB, T_ACC, T_FOP, T_CAS, T_ROUNDS, T_WINS, NT };
static long long tot[NT];

/* ---------- the round's traffic ---------- */

static unsigned char *sarena, *rarena;
static MPI_Comm comm_s[2], comm_w[2];
static MPI_Request reqs[2 * MAXNP * MAX_PER_PAIR];
static MPI_Status stats[2 * MAXNP * MAX_PER_PAIR];

struct wrecv {
	unsigned char *buf;
	int src_filter, tag_filter;
	size_t cap;
};

static void traffic(long r, struct rng *lr)
{
	MPI_Comm cs = comm_s[r & 1], cw = comm_w[r & 1];
	int nreq = 0;
	npend = 0;

	/* my messages: fill them in the send arena */
	size_t off = 0;
	for (int d = 0; d < np; d++)
		for (int k = 0; k < plan_n[me][d]; k++) {
			struct msg *m = &plan_msg[me][d][k];
			m->soff = off;
			fill_msg(sarena + off, m, r);
			off += m->size;
		}

	/* 1. preposted receives: by source and tag first, then wildcards */
	phase = "posting receives";
	size_t roff = 0;
	int rreq_of[MAXNP][MAX_PER_PAIR];
	size_t rbuf_of[MAXNP][MAX_PER_PAIR];
	for (int s = 0; s < np; s++)
		for (int k = 0; k < plan_n[s][me]; k++) {
			struct msg *m = &plan_msg[s][me][k];
			rreq_of[s][k] = -1;
			rbuf_of[s][k] = roff;
			if (m->rm == R_WILD)
				continue;
			roff += m->size;
			if (m->rm != R_IRECV)
				continue;
			rreq_of[s][k] = nreq;
			pend_msg[npend] = m, pend_kind[npend] = 'r', pend_done[npend++] = 0;
			mpi_check(MPI_Irecv(rarena + rbuf_of[s][k], (int)m->size, MPI_BYTE, s, m->tag, cs, &reqs[nreq++]),
				  "MPI_Irecv");
		}
	/* wildcard receives, in an order fixed by the mode */
	enum wmode wm = plan_w[me];
	struct wrecv wr[MAXNP * MAX_PER_PAIR];
	int nw = 0, wfirst = nreq;
	size_t maxall = 0, bysrc[MAXNP] = { 0 }, bytag[64] = { 0 };
	for (int s = 0; s < np; s++)
		for (int k = 0; k < plan_n[s][me]; k++) {
			struct msg *m = &plan_msg[s][me][k];
			if (m->rm != R_WILD)
				continue;
			if (m->size > maxall)
				maxall = m->size;
			if (m->size > bysrc[s])
				bysrc[s] = m->size;
			if (m->size > bytag[m->tag & 63])
				bytag[m->tag & 63] = m->size;
		}
	for (int s = 0; s < np; s++)
		for (int k = 0; k < plan_n[s][me]; k++) {
			struct msg *m = &plan_msg[s][me][k];
			if (m->rm != R_WILD)
				continue;
			struct wrecv *w = &wr[nw++];
			w->src_filter = wm == W_ANY_TAG ? s : MPI_ANY_SOURCE;
			w->tag_filter = wm == W_ANY_SRC ? m->tag : MPI_ANY_TAG;
			w->cap = wm == W_ANY_BOTH ? maxall : wm == W_ANY_TAG ? bysrc[s] : bytag[m->tag & 63];
			w->buf = rarena + roff;
			roff += w->cap;
			pend_msg[npend] = m, pend_kind[npend] = 'r', pend_done[npend++] = 0;
			mpi_check(MPI_Irecv(w->buf, (int)w->cap, MPI_BYTE, w->src_filter, w->tag_filter, cw, &reqs[nreq++]),
				  "MPI_Irecv (wildcard)");
		}

	/* SOAK_INJECT: one fault, made once by rank 1 */
	static int injected;
	int fault = !injected && me == 1 && r >= 3 && np > 2;
	if (fault && !strcmp(inject, "corrupt"))
		for (int k = 0; k < plan_n[me][2] && !injected; k++)
			if (plan_msg[me][2][k].size > 100) {
				sarena[plan_msg[me][2][k].soff + 100] ^= 1;
				injected = 1;
			}

	/* 2. sends, in plan order per destination, destinations interleaved */
	phase = "sending";
	for (int k = 0; k < MAX_PER_PAIR; k++)
		for (int j = 1; j < np; j++) {
			int d = (me + j) % np;
			if (k >= plan_n[me][d])
				continue;
			struct msg *m = &plan_msg[me][d][k];
			MPI_Comm c = m->rm == R_WILD ? cw : cs;
			unsigned char *b = sarena + m->soff;
			int n = (int)m->size;
			tot[T_MSGS]++;
			tot[T_BYTES] += (long long)m->size;
			if (fault && !injected && d == 2 && m->sm == S_ISEND && !strcmp(inject, "drop")) {
				injected = 1;
				continue;
			}
			if (fault && !injected && d == 2 && m->sm == S_ISEND && m->size < 16384 && !strcmp(inject, "dup")) {
				injected = 1;
				mpi_check(MPI_Send(b, n, MPI_BYTE, d, m->tag, c), "MPI_Send (injected duplicate)");
			}
			pend_msg[npend] = m, pend_kind[npend] = 's';
			switch (m->sm) {
			case S_ISEND:
				pend_done[npend++] = 0;
				mpi_check(MPI_Isend(b, n, MPI_BYTE, d, m->tag, c, &reqs[nreq++]), "MPI_Isend");
				break;
			case S_ISSEND:
				pend_done[npend++] = 0;
				mpi_check(MPI_Issend(b, n, MPI_BYTE, d, m->tag, c, &reqs[nreq++]), "MPI_Issend");
				break;
			case S_SEND:
				pend_done[npend] = 0;
				blocked_in = npend++;
				mpi_check(MPI_Send(b, n, MPI_BYTE, d, m->tag, c), "MPI_Send");
				pend_done[blocked_in] = 1;
				blocked_in = -1;
				break;
			case S_SSEND:
				pend_done[npend] = 0;
				blocked_in = npend++;
				mpi_check(MPI_Ssend(b, n, MPI_BYTE, d, m->tag, c), "MPI_Ssend");
				pend_done[blocked_in] = 1;
				blocked_in = -1;
				break;
			}
		}

	/* 3. blocking receives, sources in a random order */
	phase = "blocking receives";
	int first = (int)below(lr, (uint64_t)np);
	for (int j = 0; j < np; j++) {
		int s = (first + j) % np;
		for (int k = 0; k < plan_n[s][me]; k++) {
			struct msg *m = &plan_msg[s][me][k];
			if (m->rm == R_IRECV || m->rm == R_WILD)
				continue;
			unsigned char *b = rarena + rbuf_of[s][k];
			MPI_Status st;
			int count = -1;
			pend_msg[npend] = m, pend_kind[npend] = 'r', pend_done[npend] = 0;
			blocked_in = npend++;
			if (m->rm == R_PROBE) {
				mpi_check(MPI_Probe(s, m->tag, cs, &st), "MPI_Probe");
				MPI_Get_count(&st, MPI_BYTE, &count);
				if (count < 0 || (size_t)count != m->size)
					fail("%s: MPI_Probe reports %d bytes", describe(m), count);
				mpi_check(MPI_Recv(b, (int)m->size, MPI_BYTE, s, m->tag, cs, &st), "MPI_Recv after MPI_Probe");
			} else if (m->rm == R_MPROBE) {
				MPI_Message mh;
				mpi_check(MPI_Mprobe(s, m->tag, cs, &mh, &st), "MPI_Mprobe");
				MPI_Get_count(&st, MPI_BYTE, &count);
				if (count < 0 || (size_t)count != m->size)
					fail("%s: MPI_Mprobe reports %d bytes", describe(m), count);
				mpi_check(MPI_Mrecv(b, (int)m->size, MPI_BYTE, &mh, &st), "MPI_Mrecv");
			} else {
				mpi_check(MPI_Recv(b, (int)m->size, MPI_BYTE, s, m->tag, cs, &st), "MPI_Recv");
			}
			pend_done[blocked_in] = 1;
			blocked_in = -1;
			MPI_Get_count(&st, MPI_BYTE, &count);
			if (st.MPI_SOURCE != s || st.MPI_TAG != m->tag)
				fail("%s: status names rank %d tag %d", describe(m), st.MPI_SOURCE, st.MPI_TAG);
			check_msg(b, count, m, r);
			m->taken = 1;
			tot[T_MSGS]++;
			tot[T_BYTES] += (long long)m->size;
		}
	}

	/* 4. complete the requests; pend index i <-> request i for requests */
	phase = "completing requests";
	int map[2 * MAXNP * MAX_PER_PAIR]; /* request -> pend index */
	for (int i = 0, q = 0; i < npend; i++)
		if (!pend_done[i] && q < nreq)
			map[q++] = i;
	unsigned style = (unsigned)below(lr, 4);
	if (style == 0) {
		mpi_check(MPI_Waitall(nreq, reqs, stats), "MPI_Waitall");
		for (int q = 0; q < nreq; q++)
			pend_done[map[q]] = 1;
	} else if (style == 1) {
		for (int left = nreq; left > 0; left--) {
			int q = MPI_UNDEFINED;
			MPI_Status st;
			mpi_check(MPI_Waitany(nreq, reqs, &q, &st), "MPI_Waitany");
			if (q == MPI_UNDEFINED)
				break;
			stats[q] = st;
			pend_done[map[q]] = 1;
		}
	} else {
		int left = nreq, idx[2 * MAXNP * MAX_PER_PAIR], outc = 0;
		MPI_Status st[2 * MAXNP * MAX_PER_PAIR];
		while (left > 0) {
			mpi_check(MPI_Testsome(nreq, reqs, &outc, idx, st), "MPI_Testsome");
			if (outc == MPI_UNDEFINED)
				break;
			for (int i = 0; i < outc; i++) {
				stats[idx[i]] = st[i];
				pend_done[map[idx[i]]] = 1;
			}
			left -= outc;
		}
	}

	/* check the preposted receives by source and tag */
	phase = "checking";
	for (int s = 0; s < np; s++)
		for (int k = 0; k < plan_n[s][me]; k++) {
			struct msg *m = &plan_msg[s][me][k];
			if (m->rm != R_IRECV)
				continue;
			MPI_Status *st = &stats[rreq_of[s][k]];
			int count = -1;
			MPI_Get_count(st, MPI_BYTE, &count);
			if (st->MPI_SOURCE != s || st->MPI_TAG != m->tag)
				fail("%s: status names rank %d tag %d", describe(m), st->MPI_SOURCE, st->MPI_TAG);
			check_msg(rarena + rbuf_of[s][k], count, m, r);
			m->taken = 1;
			tot[T_MSGS]++;
			tot[T_BYTES] += (long long)m->size;
		}
	/* identify each wildcard receive's message by the status: the first
	 * message not yet taken from that source with that tag (messages of one
	 * source and tag match receives in order) */
	int lastidx[MAXNP];
	for (int s = 0; s < np; s++)
		lastidx[s] = -1;
	for (int i = 0; i < nw; i++) {
		MPI_Status *st = &stats[wfirst + i];
		int s = st->MPI_SOURCE, count = -1;
		MPI_Get_count(st, MPI_BYTE, &count);
		struct msg *m = NULL;
		if (s >= 0 && s < np)
			for (int k = 0; k < plan_n[s][me] && !m; k++) {
				struct msg *c = &plan_msg[s][me][k];
				if (c->rm == R_WILD && !c->taken && c->tag == st->MPI_TAG)
					m = c;
			}
		if (!m) {
			fail("wildcard receive %d (%s, source filter %d, tag filter %d) got %d bytes from rank %d with tag %d: "
			     "no such message is expected (lost one duplicated, or misdelivered)",
			     i, wname[wm], wr[i].src_filter, wr[i].tag_filter, count, s, st->MPI_TAG);
			continue;
		}
		m->taken = 1;
		/* ANY_TAG receives take a source's messages in the order sent */
		if (wm != W_ANY_SRC) {
			if (m->idx < lastidx[s])
				fail("%s overtook message %d of the same source (wildcard receive %d)", describe(m),
				     lastidx[s], i);
			lastidx[s] = m->idx;
		}
		check_msg(wr[i].buf, count, m, r);
		tot[T_MSGS]++;
		tot[T_BYTES] += (long long)m->size;
	}
	for (int s = 0; s < np; s++)
		for (int k = 0; k < plan_n[s][me]; k++)
			if (!plan_msg[s][me][k].taken)
				fail("%s never arrived", describe(&plan_msg[s][me][k]));
}

/* ---------- one-sided ---------- */

/* window layout: [np put slots][np lock slots][counter][acc NACC][acc2 NACC2][cas np] */
static unsigned char *wmem;
static size_t wsize;
static MPI_Win win;
static size_t off_lock, off_ctr, off_acc, off_acc2, off_cas;
static unsigned char *obuf, *gbuf;	/* origin and result buffers, SLOT each */
static uint64_t exp_ctr[MAXNP];		/* counter of each rank, after all rounds so far */
static uint64_t exp_acc[NACC], exp_acc2[MAXNP][NACC2];
static uint64_t cas_last[MAXNP];	/* what I last stored in my word at each target */

static void win_open(void)
{
	mpi_check(MPI_Win_create(wmem, (MPI_Aint)wsize, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &win), "MPI_Win_create");
	MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN);
	tot[T_WINS]++;
}

static uint64_t rd64(size_t off)
{
	uint64_t v;
	memcpy(&v, wmem + off, 8);
	return v;
}

static void rma(long r)
{
	/* fence: put into my slot everywhere, accumulate everywhere */
	phase = "RMA fence epoch";
	if (!(do_rma & 1))
		goto passive;
	mpi_check(MPI_Win_fence(MPI_MODE_NOPRECEDE, win), "MPI_Win_fence (open)");
	for (int j = 0; j < np; j++) {
		int t = (me + j) % np;
		size_t n = plan_put[me][t];
		pattern(obuf + (size_t)t * SLOT, n, mix(base_seed, (uint64_t)r, (uint64_t)(me * MAXNP + t), 0xf00));
		mpi_check(MPI_Put(obuf + (size_t)t * SLOT, (int)n, MPI_BYTE, t, (MPI_Aint)me * SLOT, (int)n, MPI_BYTE, win),
			  "MPI_Put");
		mpi_check(MPI_Accumulate(plan_accval[me], NACC, MPI_UINT64_T, t, (MPI_Aint)off_acc, NACC, MPI_UINT64_T,
					 MPI_SUM, win),
			  "MPI_Accumulate");
		tot[T_PUT]++;
		tot[T_PUTB] += (long long)n;
		tot[T_ACC]++;
	}
	mpi_check(MPI_Win_fence(0, win), "MPI_Win_fence (puts)");
	for (int o = 0; o < np; o++) {
		size_t n = plan_put[o][me];
		unsigned got = 0, want = 0;
		long d = pattern_diff(wmem + (size_t)o * SLOT, n, mix(base_seed, (uint64_t)r, (uint64_t)(o * MAXNP + me), 0xf00),
				      0, &got, &want);
		if (d >= 0)
			fail("MPI_Put of %zu B from rank %d under fence: byte %ld is 0x%02x, expected 0x%02x", n, o, d, got,
			     want);
	}
	for (int i = 0; i < NACC; i++) {
		for (int o = 0; o < np; o++)
			exp_acc[i] += plan_accval[o][i];
		if (rd64(off_acc + 8 * (size_t)i) != exp_acc[i])
			fail("MPI_Accumulate(SUM) under fence: element %d is %llu, expected %llu", i,
			     (unsigned long long)rd64(off_acc + 8 * (size_t)i), (unsigned long long)exp_acc[i]);
	}
	/* get two slots back from two other ranks */
	int gt[2], go[2];
	for (int j = 0; j < 2; j++) {
		gt[j] = (me + 1 + (int)((r + j) % (np - 1))) % np;
		go[j] = (int)((me + r + j) % np);
		size_t n = plan_put[go[j]][gt[j]];
		mpi_check(MPI_Get(gbuf + (size_t)j * (SLOT / 2), (int)(n < SLOT / 2 ? n : SLOT / 2), MPI_BYTE, gt[j],
				  (MPI_Aint)go[j] * SLOT, (int)(n < SLOT / 2 ? n : SLOT / 2), MPI_BYTE, win),
			  "MPI_Get");
		tot[T_GET]++;
		tot[T_GETB] += (long long)(n < SLOT / 2 ? n : SLOT / 2);
	}
	mpi_check(MPI_Win_fence(MPI_MODE_NOSUCCEED, win), "MPI_Win_fence (gets)");
	for (int j = 0; j < 2; j++) {
		size_t n = plan_put[go[j]][gt[j]];
		n = n < SLOT / 2 ? n : SLOT / 2;
		unsigned got = 0, want = 0;
		long d = pattern_diff(gbuf + (size_t)j * (SLOT / 2), n,
				      mix(base_seed, (uint64_t)r, (uint64_t)(go[j] * MAXNP + gt[j]), 0xf00), 0, &got, &want);
		if (d >= 0)
			fail("MPI_Get of %zu B from rank %d (slot of rank %d) under fence: byte %ld is 0x%02x, expected 0x%02x",
			     n, gt[j], go[j], d, got, want);
	}

	/* passive target: the counters before this round bound the values fetched */
passive:
	phase = "RMA passive target";
	if (!(do_rma & 2))
		return;
	uint64_t ctr_lo[MAXNP], ctr_hi[MAXNP], last_fetch[MAXNP];
	for (int t = 0; t < np; t++) {
		ctr_lo[t] = exp_ctr[t];
		last_fetch[t] = 0;
	}
	for (int o = 0; o < np; o++)
		for (int i = 0; i < plan_npop[o]; i++) {
			struct pop *p = &plan_pop[o][i];
			if (p->kind == P_FOP)
				exp_ctr[p->target] += p->val % 7 + 1;
			if (p->kind == P_ACC)
				for (int e = 0; e < NACC2; e++)
					exp_acc2[p->target][e] += p->val + (uint64_t)e;
		}
	for (int t = 0; t < np; t++)
		ctr_hi[t] = exp_ctr[t];
	int fetched[MAXNP] = { 0 };
	for (int i = 0; i < plan_npop[me]; i++) {
		struct pop *p = &plan_pop[me][i];
		int t = p->target;
		mpi_check(MPI_Win_lock(p->excl ? MPI_LOCK_EXCLUSIVE : MPI_LOCK_SHARED, t, 0, win), "MPI_Win_lock");
		switch (p->kind) {
		case P_FOP: {
			uint64_t add = p->val % 7 + 1, old = 0;
			mpi_check(MPI_Fetch_and_op(&add, &old, MPI_UINT64_T, t, (MPI_Aint)off_ctr, MPI_SUM, win),
				  "MPI_Fetch_and_op");
			mpi_check(MPI_Win_flush(t, win), "MPI_Win_flush");
			if (old < ctr_lo[t] || old + add > ctr_hi[t] || (fetched[t] && old <= last_fetch[t]))
				fail("MPI_Fetch_and_op(SUM %llu) on rank %d fetched %llu: outside [%llu, %llu) or not above "
				     "my previous fetch %llu",
				     (unsigned long long)add, t, (unsigned long long)old, (unsigned long long)ctr_lo[t],
				     (unsigned long long)ctr_hi[t], (unsigned long long)last_fetch[t]);
			fetched[t] = 1;
			last_fetch[t] = old;
			tot[T_FOP]++;
			break;
		}
		case P_PUTGET: {
			uint64_t sd = mix(base_seed, (uint64_t)r, (uint64_t)(me * MAXNP + t), 0x10c + (uint64_t)i);
			size_t n = p->size;
			pattern(obuf, n, sd);
			memset(gbuf, 0, n);
			mpi_check(MPI_Put(obuf, (int)n, MPI_BYTE, t, (MPI_Aint)(off_lock + (size_t)me * SLOT), (int)n, MPI_BYTE,
					  win),
				  "MPI_Put (lock)");
			mpi_check(MPI_Win_flush(t, win), "MPI_Win_flush");
			mpi_check(MPI_Get(gbuf, (int)n, MPI_BYTE, t, (MPI_Aint)(off_lock + (size_t)me * SLOT), (int)n, MPI_BYTE,
					  win),
				  "MPI_Get (lock)");
			mpi_check(MPI_Win_flush(t, win), "MPI_Win_flush");
			unsigned got = 0, want = 0;
			long d = pattern_diff(gbuf, n, sd, 0, &got, &want);
			if (d >= 0)
				fail("MPI_Put + flush + MPI_Get of %zu B on rank %d under %s lock: byte %ld read back 0x%02x, "
				     "put 0x%02x",
				     n, t, p->excl ? "an exclusive" : "a shared", d, got, want);
			tot[T_PUT]++;
			tot[T_PUTB] += (long long)n;
			tot[T_GET]++;
			tot[T_GETB] += (long long)n;
			break;
		}
		case P_ACC: {
			uint64_t v[NACC2];
			for (int e = 0; e < NACC2; e++)
				v[e] = p->val + (uint64_t)e;
			mpi_check(MPI_Accumulate(v, NACC2, MPI_UINT64_T, t, (MPI_Aint)off_acc2, NACC2, MPI_UINT64_T, MPI_SUM,
						 win),
				  "MPI_Accumulate (lock)");
			mpi_check(MPI_Win_flush(t, win), "MPI_Win_flush");
			tot[T_ACC]++;
			break;
		}
		case P_CAS: {
			uint64_t cmp = cas_last[t], nv = cas_last[t] + p->val + 1, old = ~0ull;
			mpi_check(MPI_Compare_and_swap(&nv, &cmp, &old, MPI_UINT64_T, t, (MPI_Aint)(off_cas + 8 * (size_t)me),
						       win),
				  "MPI_Compare_and_swap");
			mpi_check(MPI_Win_flush(t, win), "MPI_Win_flush");
			if (old != cmp)
				fail("MPI_Compare_and_swap on my word at rank %d: old value %llu, I last stored %llu", t,
				     (unsigned long long)old, (unsigned long long)cmp);
			else
				cas_last[t] = nv;
			tot[T_CAS]++;
			break;
		}
		}
		mpi_check(MPI_Win_unlock(t, win), "MPI_Win_unlock");
	}
	mpi_check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
	/* my counter and sums, read under a lock on myself */
	mpi_check(MPI_Win_lock(MPI_LOCK_SHARED, me, 0, win), "MPI_Win_lock (self)");
	mpi_check(MPI_Win_sync(win), "MPI_Win_sync");
	if (rd64(off_ctr) != exp_ctr[me])
		fail("MPI_Fetch_and_op counter is %llu, expected %llu", (unsigned long long)rd64(off_ctr),
		     (unsigned long long)exp_ctr[me]);
	for (int e = 0; e < NACC2; e++)
		if (rd64(off_acc2 + 8 * (size_t)e) != exp_acc2[me][e])
			fail("MPI_Accumulate(SUM) under lock: element %d is %llu, expected %llu", e,
			     (unsigned long long)rd64(off_acc2 + 8 * (size_t)e), (unsigned long long)exp_acc2[me][e]);
	mpi_check(MPI_Win_unlock(me, win), "MPI_Win_unlock (self)");
}

/* ---------- main ---------- */

static double envnum(const char *name, double dflt)
{
	const char *v = getenv(name);
	return v && *v ? atof(v) : dflt;
}

int main(int argc, char **argv)
{
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &me);
	MPI_Comm_size(MPI_COMM_WORLD, &np);
	MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
	if (np < 2 || np > MAXNP) {
		if (me == 0)
			printf("soak FAIL: needs 2 to %d ranks, not %d\n", MAXNP, np);
		MPI_Finalize();
		return 1;
	}
	double seconds = argc > 1 ? atof(argv[1]) : envnum("SOAK_SECONDS", 60);
	long rounds = (long)envnum("SOAK_ROUNDS", 0);
	double warmup = envnum("SOAK_WARMUP", seconds / 10);
	long rss_bound = (long)envnum("SOAK_RSS_BOUND_KB", 8192);
	round_limit = (unsigned)envnum("SOAK_ROUND_LIMIT", 120);
	win_rounds = (long)envnum("SOAK_WIN_ROUNDS", 25);
	const char *rv = getenv("SOAK_RMA");
	do_rma = !rv || !*rv ? 3 : !strcmp(rv, "fence") ? 1 : !strcmp(rv, "lock") ? 2 : atoi(rv) ? 3 : 0;
	do_p2p = envnum("SOAK_P2P", 1) != 0;
	if (getenv("SOAK_INJECT"))
		inject = getenv("SOAK_INJECT");
	unsigned long long seed = 0;
	if (me == 0) {
		const char *v = getenv("SOAK_SEED");
		seed = v && *v ? strtoull(v, NULL, 0) : splitmix((uint64_t)MPI_Wtime() ^ ((uint64_t)getpid() << 32));
	}
	MPI_Bcast(&seed, 1, MPI_UNSIGNED_LONG_LONG, 0, MPI_COMM_WORLD);
	base_seed = seed;
	uint64_t my_seed = mix(base_seed, 0x7a4c, (uint64_t)me, 0);
	struct rng lr = { my_seed };

	/* which libfabric this process uses */
	Dl_info di = { 0 };
	void *sym = dlsym(RTLD_DEFAULT, "fi_getinfo");
	const char *lib = sym && dladdr(sym, &di) && di.dli_fname ? di.dli_fname : "(none found)";
	if (me == 0) {
		printf("soak: seed %llu (replay: SOAK_SEED=%llu), %d ranks, ", seed, seed, np);
		if (rounds)
			printf("%ld rounds\n", rounds);
		else
			printf("%.0f s, warm-up %.0f s, VmRSS bound %ld KiB\n", seconds, warmup, rss_bound);
	}
	fflush(stdout);
	MPI_Barrier(MPI_COMM_WORLD);
	printf("rank %d: pid %d, seed %llu, libfabric %s\n", me, (int)getpid(), (unsigned long long)my_seed, lib);
	fflush(stdout);

	/* memory, all allocated and touched now */
	send_arena_size = (size_t)(np - 1) * PAIR_BUDGET;
	recv_arena_size = (size_t)(np - 1) * PAIR_BUDGET + WILD_EXTRA;
	off_lock = (size_t)np * SLOT;
	off_ctr = 2 * (size_t)np * SLOT;
	off_acc = off_ctr + 64;
	off_acc2 = off_acc + 8 * NACC;
	off_cas = off_acc2 + 8 * NACC2;
	wsize = off_cas + 8 * (size_t)np;
	sarena = malloc(send_arena_size);
	rarena = malloc(recv_arena_size);
	wmem = malloc(wsize);
	obuf = malloc((size_t)np * SLOT);
	gbuf = malloc(SLOT);
	maxsamples = (int)(rounds ? 100000 : seconds * 2 + 1000);
	samples = calloc((size_t)maxsamples, sizeof *samples);
	if (!sarena || !rarena || !wmem || !obuf || !gbuf || !samples) {
		printf("soak FAIL rank %d: out of memory\n", me);
		MPI_Abort(MPI_COMM_WORLD, 2);
	}
	memset(sarena, 0, send_arena_size);
	memset(rarena, 0, recv_arena_size);
	memset(wmem, 0, wsize);
	memset(obuf, 0, (size_t)np * SLOT);
	memset(gbuf, 0, SLOT);
	memset(samples, 0, (size_t)maxsamples * sizeof *samples);
	for (int i = 0; i < 2; i++) {
		MPI_Comm_dup(MPI_COMM_WORLD, &comm_s[i]);
		MPI_Comm_dup(MPI_COMM_WORLD, &comm_w[i]);
		MPI_Comm_set_errhandler(comm_s[i], MPI_ERRORS_RETURN);
		MPI_Comm_set_errhandler(comm_w[i], MPI_ERRORS_RETURN);
	}
	win_open();
	signal(SIGALRM, on_alarm);

	double t0 = MPI_Wtime(), last_sample = -1, last_progress = 0;
	for (round_no = 0;; round_no++) {
		int go;
		if (me == 0)
			go = rounds ? round_no < rounds : MPI_Wtime() - t0 < seconds;
		mpi_check(MPI_Bcast(&go, 1, MPI_INT, 0, MPI_COMM_WORLD), "MPI_Bcast");
		if (!go)
			break;
		alarm(round_limit);
		plan(round_no);
		if (do_p2p)
			traffic(round_no, &lr);
		if (do_rma)
			rma(round_no);
		if (win_rounds > 0 && (round_no + 1) % win_rounds == 0) {
			phase = "re-creating the window";
			mpi_check(MPI_Win_free(&win), "MPI_Win_free");
			win_open();
		}
		tot[T_ROUNDS]++;
		if (me == 1 && round_no >= 3 && !strcmp(inject, "leak"))
			memset(malloc(65536), 1, 65536);
		if (me == 1 && round_no >= 3 && !strcmp(inject, "fdleak") && dup(1) < 0)
			fail("dup: %m");
		int bad = failed, anybad = 0;
		mpi_check(MPI_Allreduce(&bad, &anybad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD), "MPI_Allreduce");
		alarm(0);
		double now = MPI_Wtime() - t0;
		if (last_sample < 0 || now - last_sample >= 1.0) {
			take_sample(now);
			last_sample = now;
		}
		if (anybad) {
			if (me == 0)
				printf("soak: replay with SOAK_SEED=%llu SOAK_ROUNDS=%ld\n", seed, round_no + 1);
			break;
		}
		if (me == 0 && now - last_progress >= 30) {
			printf("soak: %.0f s, %ld rounds, rank 0 moved %lld messages\n", now, round_no + 1, tot[T_MSGS]);
			fflush(stdout);
			last_progress = now;
		}
	}
	double elapsed = MPI_Wtime() - t0;
	int stopped = failed || (rounds ? round_no < rounds : elapsed < seconds);
	phase = "finishing";
	alarm(round_limit);

	/* anything left over in a communicator was never expected */
	MPI_Barrier(MPI_COMM_WORLD);
	for (int pass = 0; pass < 50; pass++) {
		for (int i = 0; i < 4; i++) {
			MPI_Comm c = i < 2 ? comm_s[i] : comm_w[i - 2];
			int flag = 0;
			MPI_Status st;
			MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, c, &flag, &st);
			if (flag) {
				int count = -1;
				MPI_Get_count(&st, MPI_BYTE, &count);
				fail("a message nobody expected is left over after the last round: %d bytes from rank %d, tag %d",
				     count, st.MPI_SOURCE, st.MPI_TAG);
				char *b = malloc(count > 0 ? (size_t)count : 1);
				MPI_Recv(b, count, MPI_BYTE, st.MPI_SOURCE, st.MPI_TAG, c, MPI_STATUS_IGNORE);
				free(b);
			}
		}
		usleep(2000);
	}
	MPI_Win_free(&win);
	for (int i = 0; i < 2; i++) {
		MPI_Comm_free(&comm_s[i]);
		MPI_Comm_free(&comm_w[i]);
	}

	/* resources after warm-up */
	int first = -1;
	for (int i = 0; i < nsamples; i++)
		if (samples[i].t >= warmup) {
			first = i;
			break;
		}
	long r_first = 0, r_last = 0, r_max = 0, a_first = 0, a_last = 0, s_first = 0, s_last = 0;
	int f_first = 0, f_last = 0, f_max = 0, f_min = 0, fd_changes = 0;
	if (first < 0 || nsamples - first < 2) {
		if (!rounds && !stopped)
			fail("fewer than two resource samples after the %.0f s warm-up (%d samples in all)", warmup, nsamples);
	} else {
		struct sample *a = &samples[first], *z = &samples[nsamples - 1];
		r_first = a->rss_kb, r_last = z->rss_kb, r_max = a->rss_kb;
		a_first = a->anon_kb, a_last = z->anon_kb, s_first = a->shmem_kb, s_last = z->shmem_kb;
		f_first = a->fds, f_last = z->fds, f_max = f_min = a->fds;
		for (int i = first; i < nsamples; i++) {
			if (samples[i].rss_kb > r_max)
				r_max = samples[i].rss_kb;
			if (samples[i].fds > f_max)
				f_max = samples[i].fds;
			if (samples[i].fds < f_min)
				f_min = samples[i].fds;
			if (samples[i].fds != f_first)
				fd_changes++;
		}
		if (!rounds && r_last - r_first > rss_bound)
			fail("VmRSS grew by %ld KiB after warm-up (%ld -> %ld KiB, max %ld), more than the %ld KiB allowed",
			     r_last - r_first, r_first, r_last, r_max, rss_bound);
		if (!rounds && fd_changes)
			fail("open descriptors changed after warm-up: first %d, last %d, between %d and %d (%d of %d samples "
			     "differ)",
			     f_first, f_last, f_min, f_max, fd_changes, nsamples - first);
	}
	const char *sp = getenv("SOAK_SAMPLES");
	if (sp && *sp) {
		char path[4096];
		snprintf(path, sizeof path, "%s.%d", sp, me);
		FILE *f = fopen(path, "w");
		for (int i = 0; f && i < nsamples; i++)
			fprintf(f, "%.1f %ld %ld %ld %ld %d\n", samples[i].t, samples[i].round, samples[i].rss_kb,
				samples[i].anon_kb, samples[i].shmem_kb, samples[i].fds);
		if (f)
			fclose(f);
		else
			fail("cannot write %s: %m", path);
	}
	struct sample s0 = nsamples ? samples[0] : (struct sample){ 0 };
	printf("soak resources rank %d: %d samples, %d after warm-up; VmRSS KiB at start %ld, after warm-up first %ld "
	       "last %ld max %ld (growth %+ld; RssAnon %ld -> %ld, RssShmem %ld -> %ld); fds at start %d, after warm-up "
	       "first %d last %d max %d\n",
	       me, nsamples, first < 0 ? 0 : nsamples - first, s0.rss_kb, r_first, r_last, r_max, r_last - r_first, a_first,
	       a_last, s_first, s_last, s0.fds, f_first, f_last, f_max);
	fflush(stdout);

	long long all[NT];
	MPI_Reduce(tot, all, NT, MPI_LONG_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
	int bad = failed, anybad = 0;
	MPI_Allreduce(&bad, &anybad, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
	alarm(0);
	if (me == 0) {
		/* each message was counted by its sender and its receiver */
		printf("soak: %s after %.0f s: %lld rounds, %lld messages, %.1f GiB (point-to-point); RMA: %lld puts "
		       "(%.1f GiB), %lld gets (%.1f GiB), %lld accumulates, %lld fetch-and-ops, %lld compare-and-swaps, "
		       "%lld windows; %d failure(s); seed %llu\n",
		       anybad ? "FAIL" : "PASS", elapsed, all[T_ROUNDS] / np, all[T_MSGS] / 2,
		       (double)all[T_BYTES] / 2 / (1 << 30), all[T_PUT], (double)all[T_PUTB] / (1 << 30), all[T_GET],
		       (double)all[T_GETB] / (1 << 30), all[T_ACC], all[T_FOP], all[T_CAS], all[T_WINS] / np, anybad,
		       seed);
		fflush(stdout);
	}
	MPI_Finalize();
	return anybad ? 1 : 0;
}
