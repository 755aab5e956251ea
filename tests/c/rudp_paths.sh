# Sourced by tests that check which path carried rudp traffic. Provides
# rudp_sent LOG: prints "UDP_DATAGRAMS SHM_PACKETS ENDPOINTS", the sums over
# the endpoints' close lines in LOG (written at FI_LOG_LEVEL=info): UDP
# datagrams sent, packets sent through shared memory, endpoints closed.
rudp_sent() {
	awk '/ closed: [0-9]+ datagrams sent/ { n++; for (i = 2; i <= NF; i++) if ($i == "datagrams" && $(i + 1) ~ /^sent,?$/) u += $(i - 1) }
	     / closed: shared memory: / { for (i = 2; i <= NF; i++) if ($i == "packets" && $(i + 1) == "sent,") s += $(i - 1) }
	     END { print u + 0, s + 0, n + 0 }' "$1"
}

# rudp_both LOG: prints "ENDPOINTS BOTH", the endpoints with a close line in
# LOG and those of them that sent both UDP datagrams and shared-memory
# packets (a local peer and a remote one).
rudp_both() {
	awk 'function ep() { for (i = 1; i < NF; i++) if ($i == "endpoint") return $(i + 1) }
	     function before(w1, w2) { for (i = 2; i < NF; i++) if ($i == w1 && $(i + 1) ~ w2) return $(i - 1) }
	     / closed: [0-9]+ datagrams sent/ { u[ep()] = before("datagrams", "^sent,?$") }
	     / closed: shared memory: / { s[ep()] = before("packets", "^sent,$") }
	     END { for (e in u) { n++; if (u[e] > 0 && s[e] > 0) b++ } print n + 0, b + 0 }' "$1"
}

# rudp_shm_refused LOG: packets the endpoints' engines refused (no room)
# on the shared-memory path, summed over LOG's close lines.
rudp_shm_refused() {
	awk '/ closed: shared memory: / { for (i = 2; i <= NF; i++) if ($i == "refused" && $(i + 1) == "for") r += $(i - 1) } END { print r + 0 }' "$1"
}

# rudp_reads LOG: long messages the endpoints read from their senders'
# memory (FI_RUDP_SHM_READ), summed over LOG's close lines.
rudp_reads() {
	awk '/ closed: [0-9]+ datagrams sent/ { for (i = 2; i < NF; i++) if ($i == "long" && $(i + 1) == "messages" && $(i + 2) == "read") r += $(i - 1) } END { print r + 0 }' "$1"
}
