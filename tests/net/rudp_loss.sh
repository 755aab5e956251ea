#!/bin/bash
# Exactly-once, in-order delivery over rudp between two hosts under faults
# (tests/net/rudp_stream_check.c: N tagged messages of 0 B to 8 MiB with
# checksums, receiver in rfb, sender in rfa):
#   1. direct link, 5% of incoming UDP dropped on both hosts (nftables);
#   2. through the UDP relay: 10% reordered, 5% duplicated, 5% dropped;
#   3. IPv6, direct link, 5% loss (N/10 messages).
# Usage: tests/net/rudp_loss.sh LIBDIR [N]   (N: default 100000)
# Needs root (namespaces, nftables). Leaves nothing behind it made.
set -u
lib=$(cd "${1:?usage: rudp_loss.sh LIBDIR [N]}" && pwd)
n=${2:-100000}
root=$(cd "$(dirname "$0")/../.." && pwd)
net=$root/tests/net
tmp=$(mktemp -d)
pass=0 fail=0
cleanup() {
	"$net/loss.sh" rfa off >/dev/null 2>&1
	"$net/loss.sh" rfb off >/dev/null 2>&1
	"$net/netns.sh" down >/dev/null 2>&1
	rm -rf "$tmp"
}
trap cleanup EXIT
cc -std=c11 -O2 -Wall -Wextra -Werror -I"$root/include" -o "$tmp/check" "$net/rudp_stream_check.c" \
	-L"$lib" -l:libfabric.so.1 -Wl,-rpath,"$lib" || { echo "FAIL build"; exit 1; }

# case NAME COUNT FAMILY: one receiver/sender pair, both must print "ok".
case_run() {
	local name=$1 count=$2 fam=$3 port=$((30000 + RANDOM % 20000)) dst spid rc src
	dst=$("$net/netns.sh" addr rfb "-$fam")
	ip netns exec rfb env FI_RUDP_IFACE=rf0 FI_LOG_LEVEL=info FI_RUDP_PEER_TIMEOUT_MS=30000 \
		timeout -k 5 600 "$tmp/check" recv rudp "$dst" "$port" "$count" 11 >"$tmp/recv" 2>&1 &
	spid=$!
	for _ in $(seq 100); do grep -q ready "$tmp/recv" && break; sleep 0.1; done
	ip netns exec rfa env FI_RUDP_IFACE=rf0 FI_LOG_LEVEL=info FI_RUDP_PEER_TIMEOUT_MS=30000 \
		timeout -k 5 600 "$tmp/check" send rudp "$dst" "$port" "$count" 11 >"$tmp/send" 2>&1
	rc=$?
	wait "$spid"; src=$?
	if [ $rc -eq 0 ] && [ $src -eq 0 ] && grep -q "^ok received $count messages" "$tmp/recv"; then
		echo "PASS $name: $(grep '^ok received' "$tmp/recv")"
		grep -h 'closed:' "$tmp/send" "$tmp/recv" | sed 's/.*closed: /  /'
		pass=$((pass + 1))
	else
		echo "FAIL $name (sender rc $rc, receiver rc $src)"
		grep -hv 'core:' "$tmp/send" "$tmp/recv" | tail -8 | sed 's/^/  /'
		fail=$((fail + 1))
	fi
}

"$net/netns.sh" down >/dev/null 2>&1
"$net/netns.sh" up >/dev/null || { echo "FAIL: netns.sh up"; exit 1; }
"$net/loss.sh" rfa 5 && "$net/loss.sh" rfb 5
case_run "direct, 5% UDP loss each way, $n messages" "$n" 4
case_run "direct IPv6, 5% UDP loss each way, $((n / 10)) messages" "$((n / 10))" 6
"$net/loss.sh" rfa off; "$net/loss.sh" rfb off
"$net/netns.sh" down >/dev/null
"$net/netns.sh" up --relay 'reorder=10,dup=5,drop=5,delay=2' >/dev/null || { echo "FAIL: netns.sh up --relay"; exit 1; }
case_run "relay: 10% reordered, 5% duplicated, 5% dropped, $n messages" "$n" 4
"$net/netns.sh" status 2>/dev/null | grep -i -E 'relay|forward|reorder|dup' | head -3 | sed 's/^/  /'
echo "rudp_loss: $pass passed, $fail failed"
[ $fail -eq 0 ]
