/*
 * An MPI client of the library: point-to-point, probes, truncation,
 * collectives and one-sided operations, each result checked against data
 * every rank can recompute. Written for 4 ranks; runs on any even count
 * from 2 to 64.
 *
 * Every check prints one line ("rank R ok   NAME" or "rank R FAIL NAME: why");
 * rank 0 prints "N passed, N failed" over all ranks at the end. The exit
 * status is non-zero when any check failed on this rank (and on rank 0 when
 * any check failed anywhere).
 *
 * Options: --trunc-large adds truncation of messages over the inline size
 * (1100 B and 1 MiB into 1 KiB); --only-truncation runs just that section.
 *
 * Errors are returned, not fatal, on MPI_COMM_WORLD, so a failing call is
 * reported as a failed check with its error string instead of aborting; a
 * failed probe still receives its message so that the run can go on.
 */
#include <mpi.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int me, np;
static int n_pass, n_fail;

static void report(int ok, const char *name, const char *fmt, ...)
{
	char why[1024] = "";
	if (!ok && fmt) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(why, sizeof why, fmt, ap);
		va_end(ap);
	}
	if (ok) {
		n_pass++;
		printf("rank %d ok   %s\n", me, name);
	} else {
		n_fail++;
		printf("rank %d FAIL %s: %s\n", me, name, why);
	}
	fflush(stdout);
}

/* After MPI_ERR_IN_STATUS: which requests of rq failed and why (the first
 * few), so a failure says whether sends or receives, and with which peer. */
static void status_errors(const char *name, const MPI_Status *st, int n, int nrecv, const int *peer)
{
	int shown = 0;
	for (int i = 0; i < n && shown < 8; i++) {
		if (st[i].MPI_ERROR == MPI_SUCCESS || st[i].MPI_ERROR == MPI_ERR_PENDING)
			continue;
		char s[MPI_MAX_ERROR_STRING];
		int len = 0;
		MPI_Error_string(st[i].MPI_ERROR, s, &len);
		printf("rank %d %s: request %d (%s, peer %d): %s\n", me, name, i, i < nrecv ? "receive" : "send", peer[i], s);
		shown++;
	}
	fflush(stdout);
}

/* Report a failed MPI call; returns 1 when rc was MPI_SUCCESS. */
static int mpi_ok(int rc, const char *name)
{
	if (rc == MPI_SUCCESS)
		return 1;
	char s[MPI_MAX_ERROR_STRING];
	int len = 0, cls = 0;
	MPI_Error_string(rc, s, &len);
	MPI_Error_class(rc, &cls);
	report(0, name, "MPI error class %d: %s", cls, s);
	return 0;
}

/* The byte at offset i of a message from src with tag and size. */
static unsigned char pat(int src, int tag, size_t size, size_t i)
{
	return (unsigned char)(src * 31 + tag * 7 + size * 3 + i * 13 + (i >> 8));
}

static void fill(unsigned char *b, int src, int tag, size_t size)
{
	for (size_t i = 0; i < size; i++)
		b[i] = pat(src, tag, size, i);
}

/* Index of the first wrong byte, or -1. */
static long verify(const unsigned char *b, int src, int tag, size_t size)
{
	for (size_t i = 0; i < size; i++)
		if (b[i] != pat(src, tag, size, i))
			return (long)i;
	return -1;
}

static const size_t sizes[] = {
	0, 1, 3, 4, 8, 16, 64, 100, 256, 1000, 1024, 4095, 4096, 8193, 16384,
	65536, 65537, 262144, 1000003, 1048576, 4194304, 16777216,
};
#define NSIZES (sizeof sizes / sizeof sizes[0])
#define MAXSIZE 16777216

static unsigned char *sbuf, *rbuf;

/* Check a received message: status source/tag/count and the payload. */
static void check_msg(const char *what, size_t size, int src, int tag, MPI_Status *st, const unsigned char *b)
{
	char name[128];
	int count = -1;
	snprintf(name, sizeof name, "%s %zu B from %d", what, size, src);
	MPI_Get_count(st, MPI_BYTE, &count);
	if (st->MPI_SOURCE != src || st->MPI_TAG != tag || count != (int)size) {
		report(0, name, "status source %d tag %d count %d, expected %d %d %zu",
		       st->MPI_SOURCE, st->MPI_TAG, count, src, tag, size);
		return;
	}
	long bad = verify(b, src, tag, size);
	report(bad < 0, name, "byte %ld wrong", bad);
}

/* Blocking exchange with the partner rank (me ^ 1), lower rank first. */
static void test_blocking(int sync)
{
	const char *what = sync ? "Ssend/Recv" : "Send/Recv";
	int peer = me ^ 1;
	if (peer >= np)
		return;
	for (size_t k = 0; k < NSIZES; k++) {
		size_t n = sizes[k];
		int tag = (int)k + (sync ? 100 : 0);
		MPI_Status st;
		fill(sbuf, me, tag, n);
		memset(rbuf, 0xee, n + 1);
		int rc1, rc2;
		if (me < peer) {
			rc1 = sync ? MPI_Ssend(sbuf, (int)n, MPI_BYTE, peer, tag, MPI_COMM_WORLD)
				   : MPI_Send(sbuf, (int)n, MPI_BYTE, peer, tag, MPI_COMM_WORLD);
			rc2 = MPI_Recv(rbuf, (int)n, MPI_BYTE, peer, tag, MPI_COMM_WORLD, &st);
		} else {
			rc2 = MPI_Recv(rbuf, (int)n, MPI_BYTE, peer, tag, MPI_COMM_WORLD, &st);
			rc1 = sync ? MPI_Ssend(sbuf, (int)n, MPI_BYTE, peer, tag, MPI_COMM_WORLD)
				   : MPI_Send(sbuf, (int)n, MPI_BYTE, peer, tag, MPI_COMM_WORLD);
		}
		if (!mpi_ok(rc1, what) || !mpi_ok(rc2, what))
			continue;
		check_msg(what, n, peer, tag, &st, rbuf);
		if (rbuf[n] != 0xee)
			report(0, what, "wrote past the %zu-byte message", n);
	}
}

/* Nonblocking ring: receive from the left, send to the right, at every size. */
static void test_nonblocking_ring(void)
{
	int right = (me + 1) % np, left = (me + np - 1) % np;
	for (size_t k = 0; k < NSIZES; k++) {
		size_t n = sizes[k];
		int tag = 200 + (int)k;
		MPI_Request rq[2];
		MPI_Status st[2];
		fill(sbuf, me, tag, n);
		memset(rbuf, 0xee, n);
		int rc = MPI_Irecv(rbuf, (int)n, MPI_BYTE, left, tag, MPI_COMM_WORLD, &rq[0]);
		if (!mpi_ok(rc, "Irecv"))
			continue;
		rc = MPI_Isend(sbuf, (int)n, MPI_BYTE, right, tag, MPI_COMM_WORLD, &rq[1]);
		if (!mpi_ok(rc, "Isend")) {
			MPI_Cancel(&rq[0]);
			continue;
		}
		rc = MPI_Waitall(2, rq, st);
		if (!mpi_ok(rc, "Waitall"))
			continue;
		check_msg("Isend/Irecv ring", n, left, tag, &st[0], rbuf);
	}
}

/* Many messages in flight between every pair, same tag: arrival order kept. */
static void test_nonblocking_all(void)
{
	enum { PER = 16, SZ = 5000 };
	int npeer = np - 1, nreq = 2 * npeer * PER;
	MPI_Request *rq = calloc((size_t)nreq, sizeof *rq);
	MPI_Status *st = calloc((size_t)nreq, sizeof *st);
	unsigned char *out = malloc((size_t)npeer * PER * SZ), *in = malloc((size_t)npeer * PER * SZ);
	int *peer = calloc((size_t)nreq, sizeof *peer);
	int r = 0, p = 0;
	for (int src = 0; src < np; src++) {
		if (src == me)
			continue;
		for (int j = 0; j < PER; j++) {
			unsigned char *b = in + ((size_t)p * PER + j) * SZ;
			peer[r] = src;
			MPI_Irecv(b, SZ, MPI_BYTE, src, 300, MPI_COMM_WORLD, &rq[r++]);
		}
		p++;
	}
	p = 0;
	for (int dst = 0; dst < np; dst++) {
		if (dst == me)
			continue;
		for (int j = 0; j < PER; j++) {
			unsigned char *b = out + ((size_t)p * PER + j) * SZ;
			/* the tag in the pattern is the sequence number, so order shows */
			fill(b, me, 1000 + j, SZ - (size_t)j);
			peer[r] = dst;
			MPI_Isend(b, SZ - j, MPI_BYTE, dst, 300, MPI_COMM_WORLD, &rq[r++]);
		}
		p++;
	}
	int rc = MPI_Waitall(nreq, rq, st);
	if (rc == MPI_ERR_IN_STATUS)
		status_errors("Waitall all-pairs", st, nreq, npeer * PER, peer);
	if (mpi_ok(rc, "Waitall all-pairs")) {
		int bad = 0;
		p = 0;
		for (int src = 0; src < np; src++) {
			if (src == me)
				continue;
			for (int j = 0; j < PER; j++) {
				int idx = p * PER + j, count = -1;
				MPI_Get_count(&st[idx], MPI_BYTE, &count);
				if (st[idx].MPI_SOURCE != src || count != SZ - j ||
				    verify(in + (size_t)idx * SZ, src, 1000 + j, SZ - (size_t)j) >= 0)
					bad++;
			}
			p++;
		}
		report(bad == 0, "Isend/Irecv all pairs, 16 in flight per pair, in order", "%d messages wrong or out of order", bad);
	}
	free(peer);
	free(rq);
	free(st);
	free(out);
	free(in);
}

/* Rank 0 receives from every other rank with MPI_ANY_SOURCE / MPI_ANY_TAG. */
static void test_any(void)
{
	/* sizes per sender: small eager and one large */
	if (me == 0) {
		int seen[64] = {0};
		int ok = 1;
		for (int i = 0; i < 2 * (np - 1); i++) {
			MPI_Status st;
			int count = -1;
			memset(rbuf, 0, 1 << 20);
			if (!mpi_ok(MPI_Recv(rbuf, 1 << 20, MPI_BYTE, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st), "Recv ANY_SOURCE/ANY_TAG")) {
				ok = 0;
				break;
			}
			MPI_Get_count(&st, MPI_BYTE, &count);
			int src = st.MPI_SOURCE, tag = st.MPI_TAG;
			int second = tag >= 500;
			size_t want = second ? (size_t)(1 << 19) + (size_t)src : (size_t)src * 10;
			char name[96];
			snprintf(name, sizeof name, "Recv ANY_SOURCE/ANY_TAG #%d: source %d tag %d", i, src, tag);
			if (src < 1 || src >= np || (tag != 400 + src && tag != 500 + src) || count != (int)want) {
				report(0, name, "unexpected source/tag/count (count %d)", count);
				ok = 0;
				continue;
			}
			/* non-overtaking: the first message of a sender comes first */
			if (second != (seen[src] == 1)) {
				report(0, name, "messages from %d overtook each other", src);
				ok = 0;
			}
			seen[src]++;
			long bad = verify(rbuf, src, tag, want);
			report(bad < 0, name, "byte %ld wrong", bad);
		}
		report(ok, "ANY_SOURCE/ANY_TAG: every sender seen twice, in order", "see above");
	} else {
		fill(sbuf, me, 400 + me, (size_t)me * 10);
		mpi_ok(MPI_Send(sbuf, me * 10, MPI_BYTE, 0, 400 + me, MPI_COMM_WORLD), "Send to ANY_SOURCE");
		size_t big = (size_t)(1 << 19) + (size_t)me;
		fill(sbuf, me, 500 + me, big);
		mpi_ok(MPI_Send(sbuf, (int)big, MPI_BYTE, 0, 500 + me, MPI_COMM_WORLD), "Send to ANY_SOURCE (large)");
	}
}

/* MPI_Probe, MPI_Iprobe and MPI_Mprobe/MPI_Mrecv on rank 0, senders 1..np-1. */
static void test_probe(void)
{
	const int n1 = 777, n2 = 300001, n3 = 4242;
	if (me == 1) {
		fill(sbuf, 1, 42, (size_t)n1);
		mpi_ok(MPI_Send(sbuf, n1, MPI_BYTE, 0, 42, MPI_COMM_WORLD), "Send for Probe");
		fill(sbuf, 1, 43, (size_t)n2);
		mpi_ok(MPI_Send(sbuf, n2, MPI_BYTE, 0, 43, MPI_COMM_WORLD), "Send for Iprobe");
	} else if (me == np - 1 && np > 2) {
		fill(sbuf, me, 44, (size_t)n3);
		mpi_ok(MPI_Send(sbuf, n3, MPI_BYTE, 0, 44, MPI_COMM_WORLD), "Send for Mprobe");
	}
	if (me != 0)
		return;
	MPI_Status st;
	int count = -1;
	if (mpi_ok(MPI_Probe(1, 42, MPI_COMM_WORLD, &st), "Probe")) {
		MPI_Get_count(&st, MPI_BYTE, &count);
		report(st.MPI_SOURCE == 1 && st.MPI_TAG == 42 && count == n1, "Probe status (source, tag, count)",
		       "source %d tag %d count %d", st.MPI_SOURCE, st.MPI_TAG, count);
		unsigned char *b = malloc((size_t)count + 1);
		if (mpi_ok(MPI_Recv(b, count, MPI_BYTE, 1, 42, MPI_COMM_WORLD, &st), "Recv after Probe"))
			check_msg("Recv after Probe", (size_t)n1, 1, 42, &st, b);
		free(b);
	} else {
		/* take the message anyway so that the sender can go on */
		MPI_Recv(rbuf, n1, MPI_BYTE, 1, 42, MPI_COMM_WORLD, &st);
	}
	int flag = 0;
	double t0 = MPI_Wtime();
	while (!flag && MPI_Wtime() - t0 < 10)
		if (!mpi_ok(MPI_Iprobe(MPI_ANY_SOURCE, 43, MPI_COMM_WORLD, &flag, &st), "Iprobe"))
			break;
	if (flag) {
		MPI_Get_count(&st, MPI_BYTE, &count);
		report(st.MPI_SOURCE == 1 && count == n2, "Iprobe status (source, count)", "source %d count %d",
		       st.MPI_SOURCE, count);
		if (mpi_ok(MPI_Recv(rbuf, count, MPI_BYTE, st.MPI_SOURCE, 43, MPI_COMM_WORLD, &st), "Recv after Iprobe"))
			check_msg("Recv after Iprobe", (size_t)n2, 1, 43, &st, rbuf);
	} else {
		report(0, "Iprobe", "no message seen in 10 s");
		MPI_Recv(rbuf, n2, MPI_BYTE, 1, 43, MPI_COMM_WORLD, &st);
	}
	if (np > 2) {
		MPI_Message msg;
		if (mpi_ok(MPI_Mprobe(MPI_ANY_SOURCE, 44, MPI_COMM_WORLD, &msg, &st), "Mprobe")) {
			MPI_Get_count(&st, MPI_BYTE, &count);
			report(st.MPI_SOURCE == np - 1 && count == n3, "Mprobe status (source, count)", "source %d count %d",
			       st.MPI_SOURCE, count);
			memset(rbuf, 0, (size_t)n3);
			if (mpi_ok(MPI_Mrecv(rbuf, count, MPI_BYTE, &msg, &st), "Mrecv"))
				check_msg("Mrecv", (size_t)n3, np - 1, 44, &st, rbuf);
		} else {
			MPI_Recv(rbuf, n3, MPI_BYTE, np - 1, 44, MPI_COMM_WORLD, &st);
		}
	}
	/* nothing left over: a probe for any of these tags finds nothing */
	int left = 0;
	for (int tag = 42; tag <= 44; tag++) {
		MPI_Iprobe(MPI_ANY_SOURCE, tag, MPI_COMM_WORLD, &flag, &st);
		left += flag;
	}
	report(left == 0, "no message left after probes", "%d left", left);
}

/* A receive buffer too small: MPI_ERR_TRUNCATE, and the communicator still works. */
static void test_truncate(int large)
{
	MPI_Comm c;
	MPI_Comm_dup(MPI_COMM_WORLD, &c);
	MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN);
	/* sent, room: a message within one inline cell, one just over, one
	 * large enough for a rendezvous protocol */
	const int cases[][2] = {{100, 10}, {1100, 1024}, {1 << 20, 1024}};
	unsigned ncases = large ? 3 : 1;
	for (unsigned k = 0; k < ncases; k++) {
		int sent = cases[k][0], room = cases[k][1];
		char name[96];
		snprintf(name, sizeof name, "truncation %d B into %d B gives MPI_ERR_TRUNCATE", sent, room);
		if (me == 1) {
			fill(sbuf, 1, 50, (size_t)sent);
			int rc = MPI_Send(sbuf, sent, MPI_BYTE, 0, 50, c);
			report(rc == MPI_SUCCESS, "sender of a truncated message succeeds", "rc %d", rc);
		} else if (me == 0) {
			MPI_Status st;
			memset(rbuf, 0xee, (size_t)room + 16);
			int rc = MPI_Recv(rbuf, room, MPI_BYTE, 1, 50, c, &st);
			int cls = -1;
			MPI_Error_class(rc, &cls);
			report(cls == MPI_ERR_TRUNCATE, name, "error class %d (rc %d)", cls, rc);
			int over = 0;
			for (int i = room; i < room + 16; i++)
				over += rbuf[i] != 0xee;
			report(over == 0, "truncated receive writes nothing past the buffer", "%d bytes written past", over);
		}
		/* the communicator still carries messages */
		if (me == 1) {
			fill(sbuf, 1, 51, 64);
			mpi_ok(MPI_Send(sbuf, 64, MPI_BYTE, 0, 51, c), "Send after truncation");
		} else if (me == 0) {
			MPI_Status st;
			if (mpi_ok(MPI_Recv(rbuf, 64, MPI_BYTE, 1, 51, c, &st), "Recv after truncation"))
				check_msg("Recv after truncation", 64, 1, 51, &st, rbuf);
		}
	}
	MPI_Comm_free(&c);
}

static void test_collectives(void)
{
	char name[96];
	/* Bcast from two roots at several sizes */
	const size_t bsz[] = {1, 1000, 65536, 1 << 20, 4 << 20};
	for (int root = 0; root < np; root += np - 1) {
		for (unsigned k = 0; k < sizeof bsz / sizeof bsz[0]; k++) {
			size_t n = bsz[k];
			if (me == root)
				fill(rbuf, root, 60, n);
			else
				memset(rbuf, 0, n);
			snprintf(name, sizeof name, "Bcast %zu B from %d", n, root);
			if (mpi_ok(MPI_Bcast(rbuf, (int)n, MPI_BYTE, root, MPI_COMM_WORLD), name)) {
				long bad = verify(rbuf, root, 60, n);
				report(bad < 0, name, "byte %ld wrong", bad);
			}
		}
		if (np == 1)
			break;
	}
	/* Reduce (sum) to rank 0 and to the last rank */
	const int rcount[] = {1, 1000, 300000};
	for (unsigned k = 0; k < sizeof rcount / sizeof rcount[0]; k++) {
		int n = rcount[k], root = (int)k % np;
		long *in = malloc((size_t)n * sizeof *in), *out = malloc((size_t)n * sizeof *out);
		for (int i = 0; i < n; i++) {
			in[i] = (long)(me + 1) * (i + 1);
			out[i] = -1;
		}
		snprintf(name, sizeof name, "Reduce SUM %d longs to %d", n, root);
		if (mpi_ok(MPI_Reduce(in, out, n, MPI_LONG, MPI_SUM, root, MPI_COMM_WORLD), name) && me == root) {
			long f = (long)np * (np + 1) / 2;
			int bad = -1;
			for (int i = 0; i < n && bad < 0; i++)
				if (out[i] != f * (i + 1))
					bad = i;
			report(bad < 0, name, "element %d is %ld", bad, bad >= 0 ? out[bad] : 0);
		}
		free(in);
		free(out);
	}
	/* Allreduce: sum of ints, max and min of doubles */
	const int acount[] = {1, 4096, 262144};
	for (unsigned k = 0; k < sizeof acount / sizeof acount[0]; k++) {
		int n = acount[k];
		int *in = malloc((size_t)n * sizeof *in), *out = malloc((size_t)n * sizeof *out);
		for (int i = 0; i < n; i++)
			in[i] = me * 1000 + i % 1000;
		snprintf(name, sizeof name, "Allreduce SUM %d ints", n);
		if (mpi_ok(MPI_Allreduce(in, out, n, MPI_INT, MPI_SUM, MPI_COMM_WORLD), name)) {
			int bad = -1;
			for (int i = 0; i < n && bad < 0; i++)
				if (out[i] != 1000 * np * (np - 1) / 2 + np * (i % 1000))
					bad = i;
			report(bad < 0, name, "element %d is %d", bad, bad >= 0 ? out[bad] : 0);
		}
		free(in);
		free(out);
	}
	double d = me + 0.5, dmax = -1, dmin = -1;
	if (mpi_ok(MPI_Allreduce(&d, &dmax, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD), "Allreduce MAX double") &&
	    mpi_ok(MPI_Allreduce(&d, &dmin, 1, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD), "Allreduce MIN double"))
		report(dmax == np - 0.5 && dmin == 0.5, "Allreduce MAX/MIN double", "max %g min %g", dmax, dmin);
	/* Alltoall: block j of rank i's send buffer goes to rank j */
	const int tcount[] = {1, 1000, 65536};
	for (unsigned k = 0; k < sizeof tcount / sizeof tcount[0]; k++) {
		int n = tcount[k];
		int *in = malloc((size_t)n * np * sizeof *in), *out = malloc((size_t)n * np * sizeof *out);
		for (int j = 0; j < np; j++)
			for (int i = 0; i < n; i++)
				in[j * n + i] = me * 1000000 + j * 10000 + i % 10000;
		memset(out, 0xff, (size_t)n * np * sizeof *out);
		snprintf(name, sizeof name, "Alltoall %d ints per rank", n);
		if (mpi_ok(MPI_Alltoall(in, n, MPI_INT, out, n, MPI_INT, MPI_COMM_WORLD), name)) {
			int bad = -1;
			for (int j = 0; j < np && bad < 0; j++)
				for (int i = 0; i < n && bad < 0; i++)
					if (out[j * n + i] != j * 1000000 + me * 10000 + i % 10000)
						bad = j * n + i;
			report(bad < 0, name, "element %d is %d", bad, bad >= 0 ? out[bad] : 0);
		}
		free(in);
		free(out);
	}
	/* Allgather */
	const int gcount[] = {1, 5000, 262144};
	for (unsigned k = 0; k < sizeof gcount / sizeof gcount[0]; k++) {
		int n = gcount[k];
		int *in = malloc((size_t)n * sizeof *in), *out = malloc((size_t)n * np * sizeof *out);
		for (int i = 0; i < n; i++)
			in[i] = me * 7 + i;
		memset(out, 0xff, (size_t)n * np * sizeof *out);
		snprintf(name, sizeof name, "Allgather %d ints per rank", n);
		if (mpi_ok(MPI_Allgather(in, n, MPI_INT, out, n, MPI_INT, MPI_COMM_WORLD), name)) {
			int bad = -1;
			for (int j = 0; j < np && bad < 0; j++)
				for (int i = 0; i < n && bad < 0; i++)
					if (out[j * n + i] != j * 7 + i)
						bad = j * n + i;
			report(bad < 0, name, "element %d is %d", bad, bad >= 0 ? out[bad] : 0);
		}
		free(in);
		free(out);
	}
	/* Barrier: no rank leaves before the last one arrives. The last rank
	 * sleeps before entering; everyone else must leave after it entered. */
	double entered = 0;
	if (me == np - 1) {
		double t = MPI_Wtime();
		while (MPI_Wtime() - t < 0.2)
			;
		entered = MPI_Wtime();
	}
	int ok = mpi_ok(MPI_Barrier(MPI_COMM_WORLD), "Barrier");
	double left = MPI_Wtime();
	if (ok) {
		/* clocks may differ between processes: compare via the wall clock
		 * only when MPI says it is global; otherwise check return codes */
		int *glob = NULL, flag = 0;
		MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_WTIME_IS_GLOBAL, &glob, &flag);
		double ent = entered;
		MPI_Bcast(&ent, 1, MPI_DOUBLE, np - 1, MPI_COMM_WORLD);
		if (flag && glob && *glob)
			report(left >= ent, "Barrier holds until the last rank enters", "left %.6f before %.6f", left, ent);
		int rc = 0;
		for (int i = 0; i < 100; i++)
			rc |= MPI_Barrier(MPI_COMM_WORLD);
		report(rc == MPI_SUCCESS, "Barrier x100", "rc %d", rc);
	}
}

enum { WLEN = 1024, WBIG = 1 << 20 };

/* One-sided: MPI_Win_create over a local array; the window holds WLEN longs
 * followed by WBIG bytes. */
static void test_rma(int passive)
{
	const char *mode = passive ? "lock/unlock" : "fence";
	char name[128];
	size_t bytes = WLEN * sizeof(long) + WBIG;
	long *base = malloc(bytes);
	unsigned char *big = (unsigned char *)(base + WLEN);
	memset(base, 0, bytes);
	for (int i = 0; i < WLEN; i++)
		base[i] = -1;
	MPI_Win win;
	snprintf(name, sizeof name, "Win_create (%s)", mode);
	if (!mpi_ok(MPI_Win_create(base, (MPI_Aint)bytes, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &win), name)) {
		free(base);
		return;
	}
	MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN);
	int right = (me + 1) % np, left = (me + np - 1) % np;
	long src[64], got[64];
	for (int i = 0; i < 64; i++)
		src[i] = me * 1000 + i;

/* open and close an access epoch to one target */
#define EPOCH_OPEN(t, lt)                                                     \
	do {                                                                  \
		if (passive)                                                  \
			rc = MPI_Win_lock((lt), (t), 0, win);                 \
		else                                                          \
			rc = MPI_Win_fence(0, win);                           \
	} while (0)
#define EPOCH_CLOSE(t)                                                        \
	do {                                                                  \
		if (passive)                                                  \
			rc2 = MPI_Win_unlock((t), win);                       \
		else                                                          \
			rc2 = MPI_Win_fence(0, win);                          \
	} while (0)
/* after passive updates by others, make them visible locally */
#define SETTLE()                                                              \
	do {                                                                  \
		MPI_Barrier(MPI_COMM_WORLD);                                  \
		if (passive) {                                                \
			MPI_Win_lock(MPI_LOCK_SHARED, me, 0, win);            \
			MPI_Win_sync(win);                                    \
		}                                                             \
	} while (0)
#define SETTLE_END()                                                          \
	do {                                                                  \
		if (passive)                                                  \
			MPI_Win_unlock(me, win);                              \
		MPI_Barrier(MPI_COMM_WORLD);                                  \
	} while (0)

	int rc = 0, rc2 = 0;

	/* Put 64 longs to the right neighbour at displacement 0, and a large
	 * block into its byte area */
	fill(sbuf, me, 70, WBIG);
	EPOCH_OPEN(right, MPI_LOCK_EXCLUSIVE);
	int r1 = MPI_Put(src, 64, MPI_LONG, right, 0, 64, MPI_LONG, win);
	int r2 = MPI_Put(sbuf, WBIG, MPI_BYTE, right, WLEN * sizeof(long), WBIG, MPI_BYTE, win);
	EPOCH_CLOSE(right);
	snprintf(name, sizeof name, "Put (%s)", mode);
	if (mpi_ok(rc, name) && mpi_ok(r1, name) && mpi_ok(r2, name) && mpi_ok(rc2, name)) {
		SETTLE();
		int bad = -1;
		for (int i = 0; i < 64 && bad < 0; i++)
			if (base[i] != left * 1000 + i)
				bad = i;
		report(bad < 0, name, "element %d is %ld", bad, bad >= 0 ? base[bad] : 0);
		long b = verify(big, left, 70, WBIG);
		snprintf(name, sizeof name, "Put 1 MiB (%s)", mode);
		report(b < 0, name, "byte %ld wrong", b);
		SETTLE_END();
	}

	/* Get them back from the right neighbour: it holds what we put */
	memset(got, 0, sizeof got);
	memset(rbuf, 0, WBIG);
	EPOCH_OPEN(right, MPI_LOCK_SHARED);
	r1 = MPI_Get(got, 64, MPI_LONG, right, 0, 64, MPI_LONG, win);
	r2 = MPI_Get(rbuf, WBIG, MPI_BYTE, right, WLEN * sizeof(long), WBIG, MPI_BYTE, win);
	EPOCH_CLOSE(right);
	snprintf(name, sizeof name, "Get (%s)", mode);
	if (mpi_ok(rc, name) && mpi_ok(r1, name) && mpi_ok(r2, name) && mpi_ok(rc2, name)) {
		int bad = -1;
		for (int i = 0; i < 64 && bad < 0; i++)
			if (got[i] != src[i])
				bad = i;
		report(bad < 0, name, "element %d is %ld", bad, bad >= 0 ? got[bad] : 0);
		long b = verify(rbuf, me, 70, WBIG);
		snprintf(name, sizeof name, "Get 1 MiB (%s)", mode);
		report(b < 0, name, "byte %ld wrong", b);
	}
	MPI_Barrier(MPI_COMM_WORLD);

	/* Accumulate (sum) into every rank's elements 100..163: each origin adds
	 * (origin+1)*(i+1); reset them first */
	for (int i = 0; i < 64; i++)
		base[100 + i] = 0;
	long add[64];
	for (int i = 0; i < 64; i++)
		add[i] = (long)(me + 1) * (i + 1);
	MPI_Barrier(MPI_COMM_WORLD);
	int racc = 0, rop = 0, rclose = 0;
	if (!passive) {
		EPOCH_OPEN(0, 0);
		racc |= rc;
	}
	for (int t = 0; t < np; t++) {
		if (passive) {
			EPOCH_OPEN(t, MPI_LOCK_SHARED);
			racc |= rc;
		}
		rop |= MPI_Accumulate(add, 64, MPI_LONG, t, 100 * sizeof(long), 64, MPI_LONG, MPI_SUM, win);
		if (passive) {
			EPOCH_CLOSE(t);
			rclose |= rc2;
		}
	}
	if (!passive) {
		EPOCH_CLOSE(0);
		rclose |= rc2;
	}
	snprintf(name, sizeof name, "Accumulate SUM from all ranks (%s)", mode);
	if (mpi_ok(racc, name) && mpi_ok(rop, name) && mpi_ok(rclose, name)) {
		SETTLE();
		long f = (long)np * (np + 1) / 2;
		int bad = -1;
		for (int i = 0; i < 64 && bad < 0; i++)
			if (base[100 + i] != f * (i + 1))
				bad = i;
		report(bad < 0, name, "element %d is %ld", bad, bad >= 0 ? base[100 + bad] : 0);
		SETTLE_END();
	}

	/* Fetch_and_op: every rank adds 1 to a counter on rank 0; the values
	 * fetched are 0..np-1, each once */
	if (me == 0)
		base[200] = 0;
	MPI_Barrier(MPI_COMM_WORLD);
	long one = 1, prev = -1;
	EPOCH_OPEN(0, MPI_LOCK_SHARED);
	r1 = MPI_Fetch_and_op(&one, &prev, MPI_LONG, 0, 200 * sizeof(long), MPI_SUM, win);
	EPOCH_CLOSE(0);
	snprintf(name, sizeof name, "Fetch_and_op SUM (%s)", mode);
	if (mpi_ok(rc, name) && mpi_ok(r1, name) && mpi_ok(rc2, name)) {
		long all[64];
		MPI_Allgather(&prev, 1, MPI_LONG, all, 1, MPI_LONG, MPI_COMM_WORLD);
		unsigned long mask = 0;
		for (int i = 0; i < np; i++)
			if (all[i] >= 0 && all[i] < np)
				mask |= 1ul << all[i];
		report(mask == (1ul << np) - 1, name, "fetched values not a permutation of 0..%d (mine %ld)", np - 1, prev);
		SETTLE();
		if (me == 0)
			report(base[200] == np, "Fetch_and_op counter total", "counter is %ld", base[200]);
		SETTLE_END();
	}

	/* Compare_and_swap: every rank tries to swap its rank into a slot on the
	 * last rank that holds -1; exactly one wins, and the slot holds its rank */
	int target = np - 1;
	if (me == target)
		base[300] = -1;
	MPI_Barrier(MPI_COMM_WORLD);
	long cmp = -1, mine = me, old = -2;
	EPOCH_OPEN(target, MPI_LOCK_EXCLUSIVE);
	r1 = MPI_Compare_and_swap(&mine, &cmp, &old, MPI_LONG, target, 300 * sizeof(long), win);
	EPOCH_CLOSE(target);
	snprintf(name, sizeof name, "Compare_and_swap (%s)", mode);
	if (mpi_ok(rc, name) && mpi_ok(r1, name) && mpi_ok(rc2, name)) {
		int won = old == -1, winners = 0;
		MPI_Allreduce(&won, &winners, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
		long winner = won ? me : -1, who = -1;
		MPI_Allreduce(&winner, &who, 1, MPI_LONG, MPI_MAX, MPI_COMM_WORLD);
		report(winners == 1, name, "%d ranks saw the initial value", winners);
		/* losers saw the winner's rank */
		report(won || old == who, "Compare_and_swap loser sees the winner", "saw %ld, winner %ld", old, who);
		SETTLE();
		if (me == target)
			report(base[300] == who, "Compare_and_swap final value", "slot %ld, winner %ld", base[300], who);
		SETTLE_END();
	}

	if (!passive)
		MPI_Win_fence(0, win);
	MPI_Win_free(&win);
	free(base);
#undef EPOCH_OPEN
#undef EPOCH_CLOSE
#undef SETTLE
#undef SETTLE_END
}

static void section(const char *s)
{
	MPI_Barrier(MPI_COMM_WORLD);
	if (me == 0) {
		printf("== %s\n", s);
		fflush(stdout);
	}
}

int main(int argc, char **argv)
{
	/* --trunc-large: also truncate messages over the inline size */
	int trunc_large = 0, only_trunc = 0;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--trunc-large"))
			trunc_large = 1;
		else if (!strcmp(argv[i], "--only-truncation"))
			trunc_large = only_trunc = 1;
	}
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &me);
	MPI_Comm_size(MPI_COMM_WORLD, &np);
	MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
	if (np < 2 || np > 64 || np % 2) {
		if (me == 0)
			printf("needs an even number of ranks, 2..64 (got %d)\n0 passed, 1 failed\n", np);
		MPI_Finalize();
		return 1;
	}
	sbuf = malloc(MAXSIZE + 64);
	rbuf = malloc(MAXSIZE + 64);
	if (!sbuf || !rbuf) {
		printf("rank %d: out of memory\n", me);
		MPI_Abort(MPI_COMM_WORLD, 2);
	}

	if (only_trunc)
		goto truncation;
	section("blocking send/recv");
	test_blocking(0);
	section("synchronous send");
	test_blocking(1);
	section("nonblocking ring");
	test_nonblocking_ring();
	section("nonblocking all pairs");
	test_nonblocking_all();
	section("ANY_SOURCE / ANY_TAG");
	test_any();
	section("probe");
	test_probe();
truncation:
	section("truncation");
	test_truncate(trunc_large);
	if (only_trunc)
		goto summary;
	section("collectives");
	test_collectives();
	section("one-sided, fence");
	test_rma(0);
	section("one-sided, lock/unlock");
	test_rma(1);
summary:
	section("summary");

	int mine[2] = {n_pass, n_fail}, tot[2] = {0, 0};
	int rc = MPI_Reduce(mine, tot, 2, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
	if (me == 0) {
		if (rc != MPI_SUCCESS) {
			tot[0] = n_pass;
			tot[1] = n_fail + 1;
			printf("summary reduction failed; rank 0 only\n");
		}
		printf("%d passed, %d failed\n", tot[0], tot[1]);
		fflush(stdout);
	}
	free(sbuf);
	free(rbuf);
	MPI_Finalize();
	return (n_fail || (me == 0 && tot[1])) ? 1 : 0;
}
