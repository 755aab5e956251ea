#!/bin/bash
# Two hosts made of network namespaces, for network providers between hosts.
#
#   netns.sh up [--mtu N] [--relay SPEC]   make the topology (idempotent)
#   netns.sh down                          remove everything up made
#   netns.sh status                        what is up, addresses, relay counters
#   netns.sh addr HOST [-4|-6]             the address of HOST (rfa or rfb)
#   netns.sh ns ADDR                       the namespace holding ADDR
#
# Hosts are the namespaces rfa and rfb; each has lo and one interface named
# rf0 (the same name on both ends, so FI_TCP_IFACE=rf0 or FI_RUDP_IFACE=rf0
# holds on either host, in either mode).
#
# direct (default): a veth pair rfa:rf0 <-> rfb:rf0
#   rfa 10.77.0.1/24 fd77::1/64     rfb 10.77.0.2/24 fd77::2/64
# relay (--relay SPEC): a third namespace rfr routes between the two
#   rfa 10.77.1.1/24 fd77:1::1/64 -- rfr:rfra 10.77.1.254 fd77:1::fe
#   rfb 10.77.2.2/24 fd77:2::2/64 -- rfr:rfrb 10.77.2.254 fd77:2::fe
#   The kernel of rfr forwards everything (TCP, ICMP) except UDP between
#   the two subnets, which nftables TPROXY hands to tests/net/udp_relay.py;
#   the relay sends each datagram on with its original source and
#   destination (a transparent socket bound to the source), after its
#   reorder/duplicate/drop decisions. Endpoints keep their real addresses.
#   SPEC: comma-separated key=value, keys reorder, dup, drop (percent),
#   delay (ms, the window a reordered or duplicated datagram is held in),
#   seed; e.g. 'reorder=10,dup=5,drop=0,delay=2'.
#
# Host names: /etc/netns/{rfa,rfb,rfr}/hosts (mounted over /etc/hosts by
# `ip netns exec`) name rfa and rfb (IPv4), rfa6 and rfb6 (IPv6); tests/net/onhost runs a command with
# the namespace name as host name.
# IPv6 addresses are added with nodad (usable at once). Nothing is routed
# outside these namespaces: no interface of the calling namespace is
# touched, and the hosts have no route but their own subnets (and, with the
# relay, the other end's subnet through rfr).
# State (mode, relay pid, log, counters) is kept in $RFNET_RUN
# (default /run/rfnet).
set -u
A=rfa B=rfb R=rfr
run=${RFNET_RUN:-/run/rfnet}
here=$(cd "$(dirname "$0")" && pwd)
relay_port=7777
mark="written by tests/net/netns.sh"

die() { echo "netns.sh: $*" >&2; exit 1; }
nsexists() { [ -e "/var/run/netns/$1" ]; }
inns() { local ns=$1; shift; ip netns exec "$ns" "$@"; }

# the state file holds one line: MODE MTU SPEC
state() { cat "$run/state" 2>/dev/null; }

# the relay's pid, when the process recorded is still our relay
relay_pid() {
	local pid
	pid=$(cat "$run/relay.pid" 2>/dev/null) || return 1
	[ -n "$pid" ] && grep -qa udp_relay.py "/proc/$pid/cmdline" 2>/dev/null && echo "$pid"
}
relay_alive() { relay_pid >/dev/null; }

down() {
	local pid
	if pid=$(relay_pid); then
		kill "$pid" 2>/dev/null
		for _ in $(seq 30); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
		kill -9 "$pid" 2>/dev/null
	fi
	rm -f "$run/relay.pid"
	for ns in $A $B $R; do
		nsexists $ns && ip netns del $ns
	done
	# the hosts files netns.sh wrote (they carry its mark), nothing else
	for ns in $A $B $R; do
		if grep -qs "^# $mark" "/etc/netns/$ns/hosts"; then
			rm -f "/etc/netns/$ns/hosts"
			rmdir "/etc/netns/$ns" 2>/dev/null
		fi
	done
	rmdir /etc/netns 2>/dev/null
	rm -f "$run/state" "$run/relay.stats"
	return 0
}

# /etc/netns/NS/hosts: `ip netns exec` mounts it over /etc/hosts in NS, so
# the host names rfa and rfb resolve there (tests/net/onhost sets them)
hosts_files() {
	local mode=$1 ns
	for ns in $A $B $R; do
		nsexists $ns || continue
		[ -e "/etc/netns/$ns/hosts" ] && ! grep -qs "^# $mark" "/etc/netns/$ns/hosts" && continue
		mkdir -p "/etc/netns/$ns"
		{
			echo "# $mark ($mode)"
			echo "127.0.0.1 localhost"
			echo "::1 localhost ip6-localhost ip6-loopback"
			for h in $A $B; do
				echo "$(addr_of "$mode" $h 4) $h"
				echo "$(addr_of "$mode" $h 6) ${h}6"
			done
		} >"/etc/netns/$ns/hosts"
	done
}

# addresses per mode: addr_of MODE HOST FAMILY
addr_of() {
	case $1/$2/$3 in
	direct/$A/4) echo 10.77.0.1 ;;
	direct/$B/4) echo 10.77.0.2 ;;
	direct/$A/6) echo fd77::1 ;;
	direct/$B/6) echo fd77::2 ;;
	relay/$A/4) echo 10.77.1.1 ;;
	relay/$B/4) echo 10.77.2.2 ;;
	relay/$A/6) echo fd77:1::1 ;;
	relay/$B/6) echo fd77:2::2 ;;
	*) return 1 ;;
	esac
}

host_common() { # NS: lo up, no forwarding out of it
	inns "$1" ip link set lo up
	inns "$1" sysctl -qw net.ipv6.conf.all.accept_dad=0 net.ipv6.conf.default.accept_dad=0
}

up_direct() {
	local mtu=$1
	ip netns add $A && ip netns add $B || return 1
	host_common $A; host_common $B
	ip link add rf0 netns $A type veth peer name rf0 netns $B || return 1
	for ns in $A $B; do
		inns $ns ip link set rf0 mtu "$mtu" up
	done
	inns $A ip addr add 10.77.0.1/24 dev rf0
	inns $B ip addr add 10.77.0.2/24 dev rf0
	inns $A ip -6 addr add fd77::1/64 dev rf0 nodad
	inns $B ip -6 addr add fd77::2/64 dev rf0 nodad
}

up_relay() {
	local mtu=$1 spec=$2 pid
	ip netns add $A && ip netns add $B && ip netns add $R || return 1
	host_common $A; host_common $B; host_common $R
	ip link add rf0 netns $A type veth peer name rfra netns $R || return 1
	ip link add rf0 netns $B type veth peer name rfrb netns $R || return 1
	inns $A ip link set rf0 mtu "$mtu" up
	inns $B ip link set rf0 mtu "$mtu" up
	inns $R ip link set rfra mtu "$mtu" up
	inns $R ip link set rfrb mtu "$mtu" up
	inns $A ip addr add 10.77.1.1/24 dev rf0
	inns $A ip -6 addr add fd77:1::1/64 dev rf0 nodad
	inns $A ip route add 10.77.2.0/24 via 10.77.1.254
	inns $A ip -6 route add fd77:2::/64 via fd77:1::fe
	inns $B ip addr add 10.77.2.2/24 dev rf0
	inns $B ip -6 addr add fd77:2::2/64 dev rf0 nodad
	inns $B ip route add 10.77.1.0/24 via 10.77.2.254
	inns $B ip -6 route add fd77:1::/64 via fd77:2::fe
	inns $R ip addr add 10.77.1.254/24 dev rfra
	inns $R ip addr add 10.77.2.254/24 dev rfrb
	inns $R ip -6 addr add fd77:1::fe/64 dev rfra nodad
	inns $R ip -6 addr add fd77:2::fe/64 dev rfrb nodad
	inns $R sysctl -qw net.ipv4.ip_forward=1 net.ipv6.conf.all.forwarding=1
	# UDP between the two subnets goes to the relay (TPROXY marks it 1,
	# and mark 1 is routed to the local stack); the rest is forwarded.
	inns $R nft -f - <<-EOF || return 1
	table inet rfrelay {
		chain pre {
			type filter hook prerouting priority mangle; policy accept;
			ip saddr { 10.77.1.0/24, 10.77.2.0/24 } ip daddr { 10.77.1.0/24, 10.77.2.0/24 } ip daddr != { 10.77.1.254, 10.77.2.254 } meta l4proto udp tproxy ip to 127.0.0.1:$relay_port meta mark set 1 accept
			ip6 saddr { fd77:1::/64, fd77:2::/64 } ip6 daddr { fd77:1::/64, fd77:2::/64 } ip6 daddr != { fd77:1::fe, fd77:2::fe } meta l4proto udp tproxy ip6 to [::1]:$relay_port meta mark set 1 accept
		}
	}
	EOF
	inns $R ip rule add fwmark 1 lookup 100
	inns $R ip route add local 0.0.0.0/0 dev lo table 100
	inns $R ip -6 rule add fwmark 1 lookup 100
	inns $R ip -6 route add local ::/0 dev lo table 100
	rm -f "$run/relay.stats" "$run/relay.pid"
	# setsid: the relay outlives this script and any caller's terminal; it
	# writes its own pid
	setsid ip netns exec $R python3 "$here/udp_relay.py" --port $relay_port --spec "$spec" \
		--stats "$run/relay.stats" --pidfile "$run/relay.pid" </dev/null >"$run/relay.log" 2>&1 &
	pid=$!
	# ready once it has written its first counters
	for _ in $(seq 100); do
		[ -s "$run/relay.stats" ] && relay_alive && return 0
		kill -0 "$pid" 2>/dev/null || relay_alive || break
		sleep 0.1
	done
	echo "netns.sh: the relay did not start:" >&2
	sed 's/^/  /' "$run/relay.log" >&2
	return 1
}

# probe ADDR_A ADDR_B: a UDP datagram from rfa to rfb and back, each side
# seeing the other's real address (what the relay must keep), then a TCP
# connection attempt (refused: nothing listens) through the same route.
probe() {
	local a=$1 b=$2 port=47999 spid rc
	inns $B timeout 10 python3 -c '
import socket, sys
b, port = sys.argv[1], int(sys.argv[2])
s = socket.socket(socket.AF_INET6 if ":" in b else socket.AF_INET, socket.SOCK_DGRAM)
s.bind((b, port))
while True:  # until stopped: the echo of a first datagram may be lost
    d, src = s.recvfrom(100)
    s.sendto(d, src)
' "$b" $port &
	spid=$!
	inns $A timeout 10 python3 -c '
import socket, sys, time
a, b, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
fam = socket.AF_INET6 if ":" in b else socket.AF_INET
s = socket.socket(fam, socket.SOCK_DGRAM)
s.bind((a, 0))
s.settimeout(0.3)
for _ in range(25):
    s.sendto(b"probe", (b, port))
    try:
        d, src = s.recvfrom(100)
    except socket.timeout:
        continue
    if src[0] != b or src[1] != port:
        sys.exit(f"probe: reply from {src}, not {b}:{port}")
    break
else:
    sys.exit(f"probe: no UDP reply from {b}:{port}")
t = socket.socket(fam, socket.SOCK_STREAM)
t.settimeout(3)
try:
    t.connect((b, port))
except ConnectionRefusedError:
    sys.exit(0)
except OSError as e:
    sys.exit(f"probe: TCP to {b}: {e}")
' "$a" "$b" $port
	rc=$?
	kill $spid 2>/dev/null; wait $spid 2>/dev/null
	return $rc
}

healthy() { # MODE: every namespace and (relay) the relay process there
	nsexists $A && nsexists $B || return 1
	[ "$1" = direct ] && ! nsexists $R && return 0
	[ "$1" = relay ] && nsexists $R && relay_alive
}

up() {
	local mtu=1500 spec="" mode=direct want
	while [ $# -gt 0 ]; do
		case $1 in
		--mtu) mtu=${2:?--mtu N}; shift 2 ;;
		--relay) spec=${2:?--relay SPEC}; mode=relay; shift 2 ;;
		*) die "up: unknown option $1" ;;
		esac
	done
	case $mtu in ''|*[!0-9]*) die "--mtu wants a number" ;; esac
	[ "$mode" = relay ] && [ -z "$spec" ] && spec=none
	[ "$mode" = direct ] && spec=-
	want="$mode $mtu $spec"
	if [ "$(state)" = "$want" ] && healthy "$mode"; then
		hosts_files "$mode"
		echo "netns: already up ($want)"
		return 0
	fi
	mkdir -p "$run"
	down
	if [ "$mode" = relay ]; then
		# the relay parses the spec itself; a bad one fails here, before anything is made
		python3 "$here/udp_relay.py" --check-spec "$spec" || die "bad relay spec '$spec'"
		up_relay "$mtu" "$spec" || { down; die "up --relay failed"; }
	else
		up_direct "$mtu" || { down; die "up failed"; }
	fi
	hosts_files "$mode"
	echo "$want" >"$run/state"
	# each end reaches the other (IPv4 and IPv6, UDP and TCP)
	for f in 4 6; do
		probe "$(addr_of "$mode" $A $f)" "$(addr_of "$mode" $B $f)" \
			|| { down; die "up: $A and $B cannot talk over IPv$f"; }
	done
	echo "netns: up ($want): $A $(addr_of "$mode" $A 4) $(addr_of "$mode" $A 6), $B $(addr_of "$mode" $B 4) $(addr_of "$mode" $B 6)"
}

status() {
	local st mode
	st=$(state)
	if [ -z "$st" ]; then
		echo "netns: down"
		for ns in $A $B $R; do nsexists $ns && echo "  (namespace $ns exists without state)"; done
		return 1
	fi
	mode=${st%% *}
	echo "netns: up ($st)"
	for ns in $A $B $R; do
		[ $ns = $R ] && [ "$mode" != relay ] && continue
		nsexists $ns || { echo "  $ns: missing"; continue; }
		echo "  $ns: $(inns $ns ip -br addr show | awk '$1 != "lo" {$2=""; print}' | tr -s ' ' | paste -sd';')"
	done
	if [ "$mode" = relay ]; then
		if relay_alive; then
			echo "  relay pid $(relay_pid): $(cat "$run/relay.stats" 2>/dev/null)"
		else
			echo "  relay: not running (log $run/relay.log)"
			return 1
		fi
	fi
	healthy "$mode"
}

addr() {
	local host=${1:?addr HOST [-4|-6]} fam=${2:--4} st
	st=$(state) || true
	[ -n "$st" ] || die "not up"
	addr_of "${st%% *}" "$host" "${fam#-}" || die "no address for '$host' ${fam}"
}

# ns ADDR: the namespace (of ours) that holds ADDR, or ADDR itself when it
# names one of our namespaces
ns_of() {
	local a=${1:?ns ADDR}
	a=${a#[}; a=${a%]}
	case $a in $A|$B|$R) nsexists "$a" && { echo "$a"; return 0; } ;; esac
	for ns in $A $B; do
		nsexists $ns || continue
		inns $ns ip -o addr show | awk '{print $4}' | sed 's,/.*,,' | grep -qxF -- "$a" && { echo $ns; return 0; }
	done
	return 1
}

[ "$(id -u)" = 0 ] || die "needs root (ip netns, nft)"
cmd=${1:-status}; shift || true
case $cmd in
up) up "$@" ;;
down) down; echo "netns: down" ;;
status) status ;;
addr) addr "$@" ;;
ns) ns_of "$@" ;;
*) die "usage: netns.sh up [--mtu N] [--relay SPEC] | down | status | addr HOST [-4|-6] | ns ADDR" ;;
esac
