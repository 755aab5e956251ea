#!/bin/bash
# Debian's fi_pingpong between the two hosts of tests/net/netns.sh: server
# in rfb, client in rfa, every size (-S all), data checked (-c).
#
# Usage: tests/net/fi_pingpong_netns.sh [OPTIONS] PROV EPTYPE
#   PROV      fi_pingpong -p (e.g. 'tcp;ofi_rxm', 'udp;ofi_rxd', udp, rudp)
#   EPTYPE    fi_pingpong -e (rdm, dgram, msg)
# Options:
#   --lib LIBDIR      LD_LIBRARY_PATH=LIBDIR (LIBDIR/libfabric.so.1) on both
#                     sides; default: the system's (Debian's) libfabric
#   --provider-path D FI_PROVIDER_PATH=D on both sides (a DL provider)
#   --relay SPEC      the relay topology (netns.sh up --relay SPEC), e.g.
#                     'reorder=10,dup=5,drop=0'
#   --loss PCT        drop PCT% of incoming UDP in rfa and in rfb (loss.sh)
#   --mtu N           MTU of the links (default 1500)
#   --ipv6            IPv6 addresses (fi_pingpong -6)
#   --iters N         fi_pingpong -I (default 10)
#   --size S          fi_pingpong -S (default all)
#   --mode M          fi_pingpong -m (msg|tagged)
#   --no-check        without -c
#   --timeout S       limit for each side, seconds (default 180)
#   --keep            leave the topology up at exit
# Extra environment for both sides (FI_LOG_LEVEL, FI_RUDP_IFACE, ...) is
# taken from the caller's.
#
# The topology is made if it is not up as asked, and removed at exit when
# this script made it; loss rules it set are removed at exit; the server is
# stopped at exit. Which libfabric.so.1 each side initialised is read from
# the loader (LD_DEBUG=libs) and must be the one asked for.
# Last line: "fi_pingpong_netns: PASS ..." or "fi_pingpong_netns: FAIL ...";
# exit status 0 on PASS.
set -u
here=$(cd "$(dirname "$0")" && pwd)
lib="" ppath="" relay="" loss="" mtu=1500 fam=4 iters=10 size=all mode="" check=-c limit=180 keep=0
usage() { sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2; }
while [ $# -gt 0 ]; do
	case $1 in
	--lib) lib=$(cd "${2:?}" && pwd) || exit 2; shift 2 ;;
	--provider-path) ppath=$(cd "${2:?}" && pwd) || exit 2; shift 2 ;;
	--relay) relay=${2:?}; shift 2 ;;
	--loss) loss=${2:?}; shift 2 ;;
	--mtu) mtu=${2:?}; shift 2 ;;
	--ipv6) fam=6; shift ;;
	--iters) iters=${2:?}; shift 2 ;;
	--size) size=${2:?}; shift 2 ;;
	--mode) mode=${2:?}; shift 2 ;;
	--no-check) check=""; shift ;;
	--timeout) limit=${2:?}; shift 2 ;;
	--keep) keep=1; shift ;;
	-h|--help) usage ;;
	-*) echo "unknown option $1" >&2; usage ;;
	*) break ;;
	esac
done
[ $# -eq 2 ] || usage
prov=$1 ep=$2
desc="-p '$prov' -e $ep${relay:+ relay($relay)}${loss:+ loss ${loss}%} IPv$fam lib=${lib:-system}"
result() { echo "fi_pingpong_netns: $1 $desc${2:+: $2}"; }
fail() { result FAIL "$*"; exit 1; }

pp=$(command -v fi_pingpong) || fail "fi_pingpong not found (Debian package libfabric-bin)"
if [ -n "$lib" ]; then
	want=$(readlink -f "$lib/libfabric.so.1") || true
	[ -e "$lib/libfabric.so.1" ] || fail "no libfabric.so.1 in $lib"
else
	want=$(readlink -f "$(ldd "$pp" | awk '$1 == "libfabric.so.1" {print $3}')")
fi

. "$here/../free_port.sh"
tmp=$(mktemp -d)
made=0 lossset="" spid=""
cleanup() {
	[ -n "$spid" ] && kill "$spid" 2>/dev/null && wait "$spid" 2>/dev/null
	for ns in $lossset; do "$here/loss.sh" "$ns" off >/dev/null; done
	[ $made = 1 ] && [ $keep = 0 ] && "$here/netns.sh" down >/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# the topology as asked (state line of netns.sh: MODE MTU SPEC)
if [ -n "$relay" ]; then
	wantstate="relay $mtu $relay"; upargs=(--mtu "$mtu" --relay "$relay")
else
	wantstate="direct $mtu -"; upargs=(--mtu "$mtu")
fi
if [ "$(cat "${RFNET_RUN:-/run/rfnet}/state" 2>/dev/null)" != "$wantstate" ] || ! "$here/netns.sh" status >/dev/null; then
	made=1
	"$here/netns.sh" up "${upargs[@]}" >"$tmp/up" 2>&1 || { cat "$tmp/up"; fail "netns.sh up failed"; }
fi
srv=$("$here/netns.sh" addr rfb "-$fam") || fail "no address for rfb"
if [ -n "$loss" ]; then
	for ns in rfa rfb; do
		"$here/loss.sh" "$ns" "$loss" >/dev/null || fail "loss.sh $ns $loss failed"
		lossset="$lossset $ns"
	done
fi
stats() { cat "${RFNET_RUN:-/run/rfnet}/relay.stats" 2>/dev/null; }
stat_of() { echo "$1" | tr ' ' '\n' | sed -n "s/^$2=//p"; }
[ -n "$relay" ] && { sleep 1.1; before=$(stats); }

args=(-p "$prov" -e "$ep" -S "$size" -I "$iters" $check)
[ -n "$mode" ] && args+=(-m "$mode")
[ $fam = 6 ] && args+=(-6)
port=$(free_port)
envs=(LD_DEBUG=libs)
[ -n "$lib" ] && envs+=("LD_LIBRARY_PATH=$lib")
[ -n "$ppath" ] && envs+=("FI_PROVIDER_PATH=$ppath")

echo "server (rfb): ${envs[*]} fi_pingpong ${args[*]@Q} -B $port"
env "${envs[@]}" LD_DEBUG_OUTPUT="$tmp/ld.srv" ip netns exec rfb timeout -k 5 "$limit" "$pp" "${args[@]}" -B "$port" >"$tmp/srv" 2>&1 &
spid=$!
# the client connects once: wait until the server listens, in its namespace
for _ in $(seq 300); do
	ip netns exec rfb ss -Hltn "sport = :$port" | grep -q . && break
	kill -0 "$spid" 2>/dev/null || break
	sleep 0.1
done
ip netns exec rfb ss -Hltn "sport = :$port" | grep -q . || { sed 's/^/  server: /' "$tmp/srv"; fail "the server never listened on port $port"; }

echo "client (rfa): ${envs[*]} fi_pingpong ${args[*]@Q} -P $port $srv"
t0=$(date +%s)
env "${envs[@]}" LD_DEBUG_OUTPUT="$tmp/ld.cli" ip netns exec rfa timeout -k 5 "$limit" "$pp" "${args[@]}" -P "$port" "$srv" >"$tmp/cli" 2>&1
crc=$?
# the server ends with the client; give it 20 s more, not the whole limit
for _ in $(seq 200); do kill -0 "$spid" 2>/dev/null || break; sleep 0.1; done
kill -0 "$spid" 2>/dev/null && { echo "the server is still running 20 s after the client: stopped"; kill "$spid"; }
wait "$spid"; src=$?; spid=""
secs=$(($(date +%s) - t0))

# which libfabric.so.1 (and DL providers) each side initialised
loaded() { cat "$tmp/ld.$1".* 2>/dev/null | sed -n 's/.*calling init: \(.*\(libfabric\.so[.0-9]*\|-fi\.so\)\)$/\1/p' | sort -u; }
bad=""
for side in cli srv; do
	l=$(loaded $side)
	name=$([ $side = cli ] && echo client || echo server)
	echo "$name initialised: $(echo $l)"
	got=$(echo "$l" | grep 'libfabric\.so[.0-9]*$')
	if [ -z "$got" ]; then
		bad="$bad; the $name's loader record shows no libfabric.so.1"
	elif [ "$(echo "$got" | wc -l)" -ne 1 ] || [ "$(readlink -f "$got")" != "$want" ]; then
		bad="$bad; the $name loaded $(echo $got), not $want"
	fi
done

rows() { grep -cE '^[0-9.]+[kmg]? +[0-9]+ +=[0-9]+ ' "$tmp/$1"; }
rc_=$(rows cli) rs_=$(rows srv)
echo "--- client output (last lines)"; tail -n 4 "$tmp/cli"
if [ -n "$relay" ]; then
	sleep 1.1; after=$(stats)
	line=""
	for k in rx tx dropped reordered duplicated errors; do
		line="$line $k=$(($(stat_of "$after" $k) - $(stat_of "$before" $k)))"
	done
	echo "relay during the run:$line"
	relayed=$(($(stat_of "$after" rx) - $(stat_of "$before" rx)))
fi
for ns in $lossset; do echo "loss $(ip netns exec $ns nft list chain inet rfloss pre | grep -o 'numgen.*drop' | sed "s/^/$ns: /")"; done

why=""
case $crc in 0) ;; 124|137) why="client timed out after ${limit}s" ;; *) why="client exit status $crc" ;; esac
case $src in 0) ;; 124|137) why="$why; server timed out after ${limit}s" ;; *) why="$why; server exit status $src" ;; esac
[ "$rc_" -gt 0 ] && [ "$rc_" -eq "$rs_" ] || why="$why; size rows client $rc_, server $rs_"
why="${why#; }$bad"
why="${why#; }"
if [ -n "$why" ]; then
	echo "--- server output (last lines)"; tail -n 6 "$tmp/srv"
	grep -h -m3 -iE 'error|fail|warn' "$tmp/cli" | sed 's/^/  client: /'
	fail "$why (${secs}s)"
fi
extra=""
if [ -n "$relay" ]; then
	extra=", $relayed datagrams through the relay"
	case $prov in tcp*|*verbs*) ;; *) [ "$relayed" -gt 0 ] || fail "no datagram went through the relay" ;; esac
fi
result PASS "$rc_ sizes, ${secs}s, libfabric $want$extra"
