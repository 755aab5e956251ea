/*
 * Exactly-once, in-order delivery check for an RDM provider between two
 * processes, possibly on two hosts: the sender sends N tagged messages of
 * mixed sizes (0 B to 8 MiB, drawn from a seed both sides share), each
 * carrying its sequence number and a checksum of its pattern; the receiver
 * checks that message i arrives i-th (FI_ORDER_SAS), with its size, its
 * pattern and its checksum, that nothing arrives twice and nothing is
 * missing, and that every completion is a success.
 *
 *   rudp_stream_check recv PROV NODE PORT N SEED     (prints "ready" once bound)
 *   rudp_stream_check send PROV NODE PORT N SEED     (NODE:PORT is the receiver)
 *
 * Exit status 0 and a last line "ok ..." on success.
 */
#define _POSIX_C_SOURCE 200809L
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAXSZ (8u << 20)
#define WINDOW 16
#define HDR 24

#define CHECK(x) do { int rc_ = (int)(x); if (rc_) { fprintf(stderr, "%s:%d %s = %d (%s)\n", __FILE__, __LINE__, #x, rc_, fi_strerror(-rc_)); exit(2); } } while (0)

static uint64_t rng;
static uint64_t next_rand(void)
{
	rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
	return rng;
}

/* Mostly small messages, some medium, a few large, the odd 8 MiB one. */
static size_t size_of(void)
{
	uint64_t r = next_rand() % 100000, v = next_rand();
	if (r < 78000) return v % 257;
	if (r < 97800) return 257 + v % 8000;
	if (r < 99900) return 8257 + v % (120u << 10);
	if (r < 99990) return (128u << 10) + v % (896u << 10);
	if (r < 99998) return (1u << 20) + v % (7u << 20);
	return MAXSZ;
}

static uint8_t pat(uint64_t seq, size_t i) { return (uint8_t)(seq * 131 + i * 7 + (i >> 9)); }

static uint64_t sum(const uint8_t *p, size_t n)
{
	uint64_t h = 1469598103934665603ull;
	for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 1099511628211ull;
	return h;
}

static void fill(uint8_t *b, uint64_t seq, size_t len)
{
	if (len < HDR) { for (size_t i = 0; i < len; i++) b[i] = pat(seq, i); return; }
	for (size_t i = HDR; i < len; i++) b[i] = pat(seq, i);
	uint64_t h = sum(b + HDR, len - HDR), l = len;
	memcpy(b, &seq, 8); memcpy(b + 8, &l, 8); memcpy(b + 16, &h, 8);
}

static struct fid_fabric *fab; static struct fid_domain *dom; static struct fid_ep *ep;
static struct fid_cq *cq; static struct fid_av *av;

static void open_all(const char *prov, const char *node, const char *port, int source)
{
	struct fi_info *hints = fi_allocinfo(), *info;
	hints->ep_attr->type = FI_EP_RDM;
	hints->caps = FI_TAGGED;
	hints->fabric_attr->prov_name = strdup(prov);
	hints->domain_attr->mr_mode = FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
	CHECK(fi_getinfo(FI_VERSION(1, 18), node, port, source ? FI_SOURCE : 0, hints, &info));
	CHECK(fi_fabric(info->fabric_attr, &fab, NULL));
	CHECK(fi_domain(fab, info, &dom, NULL));
	struct fi_cq_attr ca = { .format = FI_CQ_FORMAT_TAGGED, .size = 4096 };
	CHECK(fi_cq_open(dom, &ca, &cq, NULL));
	struct fi_av_attr aa = { .type = FI_AV_TABLE };
	CHECK(fi_av_open(dom, &aa, &av, NULL));
	CHECK(fi_endpoint(dom, info, &ep, NULL));
	CHECK(fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV));
	CHECK(fi_ep_bind(ep, &av->fid, 0));
	CHECK(fi_enable(ep));
	if (!source) {
		fi_addr_t a;
		if (fi_av_insert(av, info->dest_addr, 1, &a, 0, NULL) != 1) { fprintf(stderr, "av insert failed\n"); exit(2); }
	}
	fi_freeinfo(info); fi_freeinfo(hints);
}

static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec / 1e9; }

static int wait_one(struct fi_cq_tagged_entry *e)
{
	for (;;) {
		ssize_t n = fi_cq_read(cq, e, 1);
		if (n == 1) return 0;
		if (n == -FI_EAVAIL) {
			struct fi_cq_err_entry err = {0};
			fi_cq_readerr(cq, &err, 0);
			fprintf(stderr, "error completion: %s (ctx %p, olen %zu)\n", fi_strerror(err.err), err.op_context, err.olen);
			return -1;
		}
		if (n != -FI_EAGAIN) { fprintf(stderr, "fi_cq_read: %zd\n", n); return -1; }
	}
}

int main(int argc, char **argv)
{
	if (argc != 7) { fprintf(stderr, "usage: %s send|recv PROV NODE PORT N SEED\n", argv[0]); return 2; }
	int sender = !strcmp(argv[1], "send");
	uint64_t n = strtoull(argv[5], NULL, 0);
	rng = strtoull(argv[6], NULL, 0) | 1;
	open_all(argv[2], argv[3], argv[4], !sender);
	double t0 = now();
	uint8_t *bufs[WINDOW];
	for (int i = 0; i < WINDOW; i++) if (!(bufs[i] = malloc(MAXSZ))) return 2;
	uint64_t bytes = 0;
	if (sender) {
		uint64_t posted = 0, done = 0;
		int slot_seq_free[WINDOW]; for (int i = 0; i < WINDOW; i++) slot_seq_free[i] = 1;
		while (done < n) {
			while (posted < n && posted - done < WINDOW) {
				int s = (int)(posted % WINDOW);
				if (!slot_seq_free[s]) break;
				size_t len = size_of();
				fill(bufs[s], posted, len);
				ssize_t r;
				do {
					r = fi_tsend(ep, bufs[s], len, NULL, 0, 7, (void *)(uintptr_t)(s + 1));
					if (r == -FI_EAGAIN) { struct fi_cq_tagged_entry e; if (fi_cq_read(cq, &e, 1) == 1) { slot_seq_free[(uintptr_t)e.op_context - 1] = 1; done++; } }
				} while (r == -FI_EAGAIN);
				CHECK(r);
				slot_seq_free[s] = 0; bytes += len; posted++;
			}
			struct fi_cq_tagged_entry e;
			if (wait_one(&e)) return 1;
			slot_seq_free[(uintptr_t)e.op_context - 1] = 1; done++;
		}
	} else {
		printf("ready\n"); fflush(stdout);
		/* Receives are posted in sequence order with the same tag: with
		 * FI_ORDER_SAS message k lands in the k-th receive posted, whatever
		 * order the completions come in. */
		size_t *want = malloc(n * sizeof *want);
		uint64_t slot_seq[WINDOW], posted = 0, got = 0;
		if (!want) return 2;
		for (uint64_t k = 0; k < n; k++) want[k] = size_of();
		for (; posted < WINDOW && posted < n; posted++) {
			slot_seq[posted] = posted;
			CHECK(fi_trecv(ep, bufs[posted], MAXSZ, NULL, FI_ADDR_UNSPEC, 7, 0, (void *)(uintptr_t)(posted + 1)));
		}
		while (got < n) {
			struct fi_cq_tagged_entry e;
			if (wait_one(&e)) return 1;
			int s = (int)((uintptr_t)e.op_context - 1);
			uint64_t k = slot_seq[s];
			if (e.len != want[k]) { fprintf(stderr, "receive %" PRIu64 ": %zu bytes, expected %zu\n", k, e.len, want[k]); return 1; }
			uint8_t *b = bufs[s];
			if (want[k] < HDR) {
				for (size_t i = 0; i < want[k]; i++) if (b[i] != pat(k, i)) { fprintf(stderr, "message %" PRIu64 ": byte %zu wrong\n", k, i); return 1; }
			} else {
				uint64_t seq, l, h;
				memcpy(&seq, b, 8); memcpy(&l, b + 8, 8); memcpy(&h, b + 16, 8);
				if (seq != k) { fprintf(stderr, "receive %" PRIu64 " got message %" PRIu64 " (duplicate or out of order)\n", k, seq); return 1; }
				if (l != want[k] || h != sum(b + HDR, want[k] - HDR)) { fprintf(stderr, "message %" PRIu64 ": checksum mismatch\n", k); return 1; }
				for (size_t i = HDR; i < want[k]; i++) if (b[i] != pat(k, i)) { fprintf(stderr, "message %" PRIu64 ": byte %zu wrong\n", k, i); return 1; }
			}
			bytes += want[k]; got++;
			if (posted < n) {
				slot_seq[s] = posted++;
				CHECK(fi_trecv(ep, bufs[s], MAXSZ, NULL, FI_ADDR_UNSPEC, 7, 0, (void *)(uintptr_t)(s + 1)));
			}
		}
		free(want);
		/* Nothing more may arrive: a duplicate would complete a receive. */
		CHECK(fi_trecv(ep, bufs[0], MAXSZ, NULL, FI_ADDR_UNSPEC, 7, 0, (void *)(uintptr_t)99));
		double until = now() + 0.5;
		while (now() < until) {
			struct fi_cq_tagged_entry e;
			ssize_t r = fi_cq_read(cq, &e, 1);
			if (r == 1) { fprintf(stderr, "an extra message arrived after all %" PRIu64 "\n", n); return 1; }
		}
	}
	double dt = now() - t0;
	fi_close(&ep->fid); fi_close(&av->fid); fi_close(&cq->fid); fi_close(&dom->fid); fi_close(&fab->fid);
	printf("ok %s %" PRIu64 " messages, %.1f MB in %.2f s\n", sender ? "sent" : "received", n, bytes / 1e6, dt);
	for (int i = 0; i < WINDOW; i++) free(bufs[i]);
	return 0;
}
