#!/bin/bash
# MPICH (the PyPI wheel, ch4 device, ofi netmod) between the two hosts of
# tests/net/netns.sh: tests/mpi/p2p_coll_rma.c on 4 ranks, 2 on rfa and 2 on
# rfb, mpiexec started on rfa, remote ranks through hydra's ssh launcher with
# tests/net/nsexec as the ssh program.
#
# Usage: tests/net/mpich_netns.sh [OPTIONS] PROV
#   PROV              FI_PROVIDER (tcp, 'tcp;ofi_rxm', rudp, ...)
# Options:
#   --lib LIBDIR      LD_LIBRARY_PATH=LIBDIR (LIBDIR/libfabric.so.1) for the
#                     ranks; default: the wheel's own libfabric
#   --np N            ranks, N/2 on each host (default 4; even)
#   --relay SPEC      the relay topology (netns.sh up --relay SPEC)
#   --loss PCT        drop PCT% of incoming UDP in rfa and rfb (loss.sh)
#   --timeout S       limit for the run (default 300)
#   --keep            leave the topology up at exit
#   -- ARGS           arguments for the program (e.g. --only-truncation)
# The caller's environment reaches every rank (hydra forwards it), so
# FI_LOG_LEVEL, FI_TCP_IFACE=rf0, FI_RUDP_* ... can simply be exported.
#   MPICH_VENV        the venv holding the wheel (default: .venv in the repo)
#
# Checks: exit status 0 and rank 0's "N passed, 0 failed"; MPICH's debug
# summary names provider PROV; every rank initialised the expected
# libfabric.so.1 (LD_DEBUG=libs) and mapped it (/proc/PID/maps, sampled by
# tests/net/ranks.py), and N/2 ranks ran in each namespace.
# With PROV=rudp (FI_LOG_LEVEL=info for the close lines): every rank sent
# through shared memory (its peer on the same host) and through UDP (the
# others), or with FI_RUDP_ENABLE_SHM=0 nothing through shared memory.
# Last line: "mpich_netns: PASS ..." or "mpich_netns: FAIL ..."; exit 0 on PASS.
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
. "$root/tests/c/rudp_paths.sh"
lib="" np=4 relay="" loss="" limit=300 keep=0
usage() { sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2; }
while [ $# -gt 0 ]; do
	case $1 in
	--lib) lib=$(cd "${2:?}" && pwd) || exit 2; shift 2 ;;
	--np) np=${2:?}; shift 2 ;;
	--relay) relay=${2:?}; shift 2 ;;
	--loss) loss=${2:?}; shift 2 ;;
	--timeout) limit=${2:?}; shift 2 ;;
	--keep) keep=1; shift ;;
	-h|--help) usage ;;
	--) break ;;
	-*) echo "unknown option $1" >&2; usage ;;
	*) break ;;
	esac
done
[ $# -ge 1 ] && [ "$1" != -- ] || usage
prov=$1; shift
[ "${1:-}" = -- ] && shift
progargs=("$@")
[ $((np % 2)) = 0 ] && [ "$np" -ge 2 ] || usage
venv=${MPICH_VENV:-$root/.venv}
desc="FI_PROVIDER=$prov, $np ranks on rfa+rfb${relay:+, relay($relay)}${loss:+, loss ${loss}%}, lib=${lib:-wheel}"
result() { echo "mpich_netns: $1 $desc${2:+: $2}"; }
fail() { result FAIL "$*"; exit 1; }

for t in mpicc mpiexec; do
	[ -x "$venv/bin/$t" ] || fail "no $venv/bin/$t (python3 -m venv .venv && .venv/bin/pip install mpich)"
done
if [ -n "$lib" ]; then
	[ -e "$lib/libfabric.so.1" ] || fail "no libfabric.so.1 in $lib"
	want=$(readlink -f "$lib/libfabric.so.1")
else
	want=$(readlink -f "$venv/lib/mpich/libfabric.so.1") || fail "the wheel has no lib/mpich/libfabric.so.1"
fi

tmp=$(mktemp -d)
made=0 lossset="" rpid="" wpid=""
cleanup() {
	[ -n "$rpid" ] && kill "$rpid" 2>/dev/null && wait "$rpid" 2>/dev/null
	[ -n "$wpid" ] && kill "$wpid" 2>/dev/null && wait "$wpid" 2>/dev/null
	for ns in $lossset; do "$here/loss.sh" "$ns" off >/dev/null; done
	[ $made = 1 ] && [ $keep = 0 ] && "$here/netns.sh" down >/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

prog=$tmp/p2p_coll_rma
"$venv/bin/mpicc" -O2 -Wall -Wextra -Werror -o "$prog" "$root/tests/mpi/p2p_coll_rma.c" 2>"$tmp/cc" \
	|| { cat "$tmp/cc"; fail "p2p_coll_rma.c does not build with the wheel's mpicc"; }

if [ -n "$relay" ]; then
	wantstate="relay 1500 $relay"; upargs=(--relay "$relay")
else
	wantstate="direct 1500 -"; upargs=()
fi
if [ "$(cat "${RFNET_RUN:-/run/rfnet}/state" 2>/dev/null)" != "$wantstate" ] || ! "$here/netns.sh" status >/dev/null; then
	made=1
	"$here/netns.sh" up "${upargs[@]}" >"$tmp/up" 2>&1 || { cat "$tmp/up"; fail "netns.sh up failed"; }
fi
a=$("$here/netns.sh" addr rfa) && b=$("$here/netns.sh" addr rfb) || fail "no addresses"
if [ -n "$loss" ]; then
	for ns in rfa rfb; do
		"$here/loss.sh" "$ns" "$loss" >/dev/null || fail "loss.sh $ns $loss failed"
		lossset="$lossset $ns"
	done
fi

stats() { cat "${RFNET_RUN:-/run/rfnet}/relay.stats" 2>/dev/null; }
stat_of() { echo "$1" | tr ' ' '\n' | sed -n "s/^$2=//p"; }
[ -n "$relay" ] && { sleep 1.1; before=$(stats); }

log=$tmp/run.log
half=$((np / 2))
envs=(MPIR_CVAR_CH4_NETMOD=ofi MPIR_CVAR_NOLOCAL=1 MPIR_CVAR_DEBUG_SUMMARY=1 "FI_PROVIDER=$prov"
	LD_DEBUG=libs "LD_DEBUG_OUTPUT=$tmp/ld")
[ -n "$lib" ] && envs+=("LD_LIBRARY_PATH=$lib")
[ "$prov" = rudp ] && envs+=(FI_LOG_LEVEL=info)
echo "on rfa: ${envs[*]} mpiexec -launcher ssh -launcher-exec $here/nsexec -hosts $a:$half,$b:$half -n $np p2p_coll_rma ${progargs[*]}"
t0=$(date +%s)
env "${envs[@]}" "$here/onhost" rfa timeout -k 10 "$limit" "$venv/bin/mpiexec" \
	-launcher ssh -launcher-exec "$here/nsexec" -hosts "$a:$half,$b:$half" -n "$np" \
	"$prog" "${progargs[@]}" >"$log" 2>&1 &
rpid=$!
python3 "$here/ranks.py" --root "$rpid" --exe "$prog" --out "$tmp/ranks" &
wpid=$!
wait "$rpid"; rc=$?; rpid=""
wait "$wpid"; wpid=""
secs=$(($(date +%s) - t0))

why=""
case $rc in 0) ;; 124|137) why="timed out after ${limit}s" ;; *) why="exit status $rc" ;; esac
summary=$(grep -aE '^[0-9]+ passed, [0-9]+ failed$' "$log" | tail -1)
[ -n "$summary" ] && [ "${summary#* passed, }" = "0 failed" ] || why="$why; ${summary:-no summary line}"
grep -aq "^libfabric provider: $prov\( \|$\)" "$log" \
	&& echo "MPICH: $(grep -a -m1 '^libfabric provider:' "$log")" \
	|| why="$why; no 'libfabric provider: $prov' in MPICH's debug summary"
# libfabric initialised by the ranks (the LD_DEBUG record of each process
# that loaded the program)
inits=$(grep -l "initialize program: $prog\$" "$tmp"/ld.* 2>/dev/null | xargs -r cat | sed -n 's/.*calling init: \(.*libfabric\.so[.0-9]*\)$/\1/p' | xargs -r readlink -f | sort | uniq -c)
echo "ranks initialised: $(echo $inits)"
ninit=$(echo "$inits" | awk -v w="$want" '$2 == w {n += $1} END {print n + 0}')
nother=$(echo "$inits" | awk -v w="$want" 'NF == 2 && $2 != w' | wc -l)
[ "$ninit" -eq "$np" ] && [ "$nother" -eq 0 ] || why="$why; $ninit of $np ranks initialised $want${nother:+ ($nother other copies)}"
# placement and mapped libraries, from /proc
echo "ranks seen in /proc:"; sed 's/^/  /' "$tmp/ranks"
for ns in rfa rfb; do
	n=$(grep -c " ns=$ns " "$tmp/ranks")
	[ "$n" -eq "$half" ] || why="$why; $n ranks seen in $ns, not $half"
done
read -r nmap nbad < <(awk -v w="$want" '{
	sub(/.* libs=/, ""); n = split($0, l, ","); has = 0; other = 0
	for (i = 1; i <= n; i++) { if (l[i] == w) has = 1; else if (l[i] ~ /\/libfabric\.so[^\/]*$/) other = 1 }
	if (has) nm++; if (other) nb++
} END { print nm + 0, nb + 0 }' "$tmp/ranks")
[ "$nbad" -eq 0 ] || why="$why; $nbad ranks mapped another libfabric.so"
[ "$nmap" -ge 1 ] || why="$why; no rank seen with $want mapped"
echo "$nmap of $np ranks seen with $want mapped, $nbad with another libfabric.so"
if [ -n "$relay" ]; then
	sleep 1.1; after=$(stats); line=""
	for k in rx tx dropped reordered duplicated errors; do
		line="$line $k=$(($(stat_of "$after" $k) - $(stat_of "$before" $k)))"
	done
	echo "relay during the run (UDP only; TCP is forwarded by the kernel):$line"
fi
if [ "$prov" = rudp ]; then
	read -r neps nboth < <(rudp_both "$log")
	read -r nudp nshm _ < <(rudp_sent "$log")
	echo "rudp: $neps endpoints closed, $nboth sent through both paths; $nudp UDP datagrams, $nshm shared-memory packets in all"
	case ${FI_RUDP_ENABLE_SHM:-1} in
	0|no|false|off) [ "$neps" -eq "$np" ] && [ "$nshm" -eq 0 ] || why="$why; rudp used shared memory though turned off" ;;
	*) [ "$neps" -eq "$np" ] && [ "$nboth" -eq "$np" ] || why="$why; $nboth of $np rudp endpoints sent through both shared memory and UDP" ;;
	esac
fi
for ns in $lossset; do echo "loss $ns: $(ip netns exec $ns nft list chain inet rfloss pre | grep -o 'counter packets [0-9]*')"; done
why="${why#; }"
if [ -n "$why" ]; then
	grep -aE ' FAIL |Fatal error|OFI call|<warn>|<crit>|Abort' "$log" | sort | uniq -c | sort -rn | head -n 15 | sed 's/^/  /'
	cp "$log" "${TMPDIR:-/tmp}/mpich_netns.last.log" && echo "  (full output: ${TMPDIR:-/tmp}/mpich_netns.last.log)"
	fail "$why (${secs}s)"
fi
result PASS "$summary, ${secs}s, libfabric $want"
