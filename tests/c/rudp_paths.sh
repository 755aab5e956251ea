# Sourced by tests that check which path carried rudp traffic. Provides
# rudp_sent LOG: prints "UDP_DATAGRAMS SHM_PACKETS ENDPOINTS", the sums over
# the endpoints' close lines in LOG (written at FI_LOG_LEVEL=info): UDP
# datagrams sent, packets sent through shared memory, endpoints closed.
rudp_sent() {
	awk '/ closed: [0-9]+ datagrams sent/ { n++; for (i = 2; i <= NF; i++) if ($i == "datagrams" && $(i + 1) == "sent,") u += $(i - 1) }
	     / closed: shared memory: / { for (i = 2; i <= NF; i++) if ($i == "packets" && $(i + 1) == "sent,") s += $(i - 1) }
	     END { print u + 0, s + 0, n + 0 }' "$1"
}
