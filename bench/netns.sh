#!/bin/bash
# Two hosts made of network namespaces for the network benchmark
# (bench/bench.py --net-only), and random loss in one of them.
#
#   netns.sh up          make the pair (idempotent)
#   netns.sh down        remove it
#   netns.sh loss PCT    drop PCT percent (integer 0..100) of the data
#                        packets arriving in rfbn-b (the server's side)
#   netns.sh loss off    remove the loss rules
#   netns.sh counters    what the loss rules saw and dropped, one line:
#                        udp_seen N udp_drop N tcp_seen N tcp_drop N
#   netns.sh ns HOST     the namespace of HOST (rfbn-a, rfbn-b or an address)
#   netns.sh status
#   netns.sh lo-fresh    (re)make namespace rfbn-lo: lo only, for loopback runs
#   netns.sh lo-down     remove it
#
# Hosts: namespace rfbn-a holds 10.78.0.1/24, rfbn-b holds 10.78.0.2/24, on
# a veth pair whose ends are both named rfbn0 (so FI_RUDP_IFACE=rfbn0 and
# FI_TCP_IFACE=rfbn0 hold on either side). Each has lo and that interface
# only: no route leaves the pair. MTU 1500. Segmentation and receive
# offloads (tso, gso, gro, UDP segmentation and GSO lists, set in up() below)
# are off on both ends, so a TCP segment and a UDP datagram cross the veth,
# and meet the loss rules, as one packet of at most 1500 bytes each, as on
# a wire; with them on, TCP would cross as 64 KiB super-packets and one
# drop would cost TCP 40 segments.
#
# Loss (table inet rfbnloss in rfbn-b, hook prerouting, priority raw, so
# before anything else of the kernel sees the packet; nothing in these
# namespaces loads conntrack, so IP fragments are not reassembled first):
#   - UDP: every IPv4 packet with protocol UDP arriving on rfbn0 (datagrams
#     of any kind: data, acks, handshakes, and fragments, though rudp does
#     not fragment at MTU 1500) is dropped with probability PCT/100
#     (nft numgen random mod 100 < PCT);
#   - TCP: every IPv4 TCP segment arriving on rfbn0 that carries payload
#     (IP header of 20 bytes, i.e. hdrlength 5, and IP total length > 20 +
#     the TCP header's doff*4; segments with IP options are not matched, and
#     none are sent here) is dropped with the same probability. Pure ACKs,
#     SYN, FIN and RST without payload pass (UDP has no such exemption: a
#     rudp ack or handshake arriving in rfbn-b can be dropped too).
# Packets arriving in rfbn-a are never dropped: the loss is on the way to
# the server (fi_stream's receiver, fi_pingpong's server), i.e. on the
# streaming data and on one direction of a ping-pong.
# Named counters count the candidates and the drops.
set -u
A=rfbn-a B=rfbn-b IF=rfbn0
die() { echo "netns.sh: $*" >&2; exit 1; }
nsexists() { [ -e "/var/run/netns/$1" ]; }
inns() { local ns=$1; shift; ip netns exec "$ns" "$@"; }

up() {
	if nsexists $A && nsexists $B && inns $A ip link show $IF >/dev/null 2>&1; then
		return 0
	fi
	down
	ip netns add $A && ip netns add $B || die "ip netns add failed"
	ip link add $IF netns $A type veth peer name $IF netns $B || die "ip link add failed"
	for ns in $A $B; do
		inns $ns ip link set lo up
		inns $ns ip link set $IF mtu 1500 up
		inns $ns ethtool -K $IF tso off gso off gro off >/dev/null 2>&1 ||
			die "ethtool -K $IF tso off gso off gro off failed in $ns"
		# UDP segmentation stays on with gso off: a UDP GSO send would
		# cross as one packet of up to 64 KiB (and meet the loss rules as
		# one), where TCP's segments cross one by one.
		inns $ns ethtool -K $IF tx-udp-segmentation off tx-gso-list off >/dev/null 2>&1 ||
			die "ethtool -K $IF tx-udp-segmentation off tx-gso-list off failed in $ns"
	done
	inns $A ip addr add 10.78.0.1/24 dev $IF
	inns $B ip addr add 10.78.0.2/24 dev $IF
	# wait for the link to be usable
	for _ in $(seq 50); do
		[ "$(inns $A cat /sys/class/net/$IF/operstate)" = up ] &&
			[ "$(inns $B cat /sys/class/net/$IF/operstate)" = up ] && return 0
		sleep 0.1
	done
	die "$IF did not come up"
}

down() {
	for ns in $A $B; do
		nsexists $ns && ip netns del $ns
	done
	return 0
}

# The loopback runs' namespace, made anew for each: the host's own loopback
# carries state from every earlier connection on the machine (tcp_metrics
# keeps an RTT of milliseconds for 127.0.0.1), and there 8 KiB ping-pongs
# of every library switched between about 7 and 13 us from run to run.
LO=rfbn-lo
lo_fresh() {
	lo_down
	ip netns add $LO || die "ip netns add $LO failed"
	inns $LO ip link set lo up || die "lo up in $LO failed"
}
lo_down() {
	nsexists $LO && ip netns del $LO
	return 0
}

loss() {
	local pct=$1 rules="" doff
	nsexists $B || die "no namespace $B (netns.sh up)"
	command -v nft >/dev/null || die "nft not found (apt-get install nftables)"
	inns $B nft list table inet rfbnloss >/dev/null 2>&1 && inns $B nft delete table inet rfbnloss
	[ "$pct" = off ] && return 0
	[[ $pct =~ ^[0-9]{1,3}$ ]] && [ "$pct" -le 100 ] || die "PCT must be an integer 0..100, not '$pct'"
	for doff in $(seq 5 15); do
		rules+="iifname \"$IF\" ip hdrlength 5 ip protocol tcp tcp doff $doff ip length > $((20 + 4 * doff)) counter name tcp_seen numgen random mod 100 < $pct counter name tcp_drop drop"$'\n'
	done
	inns $B nft -f - <<-EOF || die "nft failed"
	table inet rfbnloss {
		counter udp_seen { }
		counter udp_drop { }
		counter tcp_seen { }
		counter tcp_drop { }
		chain pre {
			type filter hook prerouting priority raw; policy accept;
			iifname "$IF" meta nfproto ipv4 meta l4proto udp counter name udp_seen numgen random mod 100 < $pct counter name udp_drop drop
			$rules
		}
	}
	EOF
}

counters() {
	local out
	out=$(inns $B nft list counters table inet rfbnloss 2>/dev/null) || { echo "no loss rules"; return 1; }
	awk '/counter/ {name=$2} /packets/ {for (i=1;i<=NF;i++) if ($i=="packets") printf "%s %s ", name, $(i+1)} END {print ""}' <<<"$out"
}

case ${1:-} in
up) up ;;
down) down ;;
lo-fresh) lo_fresh ;;
lo-down) lo_down ;;
loss) loss "${2:?usage: netns.sh loss PCT|off}" ;;
counters) counters ;;
ns)
	case ${2:-} in
	$A | 10.78.0.1) echo $A ;;
	$B | 10.78.0.2) echo $B ;;
	*) exit 1 ;;
	esac ;;
status)
	for ns in $A $B; do
		nsexists $ns && inns $ns ip -br addr show $IF
	done
	counters 2>/dev/null || true ;;
*) die "usage: netns.sh up|down|lo-fresh|lo-down|loss PCT|loss off|counters|ns HOST|status" ;;
esac
