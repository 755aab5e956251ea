#!/bin/sh
# make demo on a machine without the peers of its comparison (Debian's
# libfabric-bin, libfabric1, libfabric-dev, UCX's ucx-utils): the demo's
# commands (scripts/demo.sh on an installed prefix) must still succeed,
# print our own latency and bandwidth by size, and say how to get the
# peers. The peers are hidden: PATH holds every tool of the system but
# fi_* and ucx_*, and bench.py is pointed at directories without Debian's
# library or upstream's headers. Then, with the peers visible (when this
# machine has them), their columns are there.
#
# Usage: tests/tools/demo_no_peers.sh PREFIX   (an installed prefix: make install)
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
prefix=$(cd "${1:?usage: demo_no_peers.sh PREFIX}" && pwd) || exit 1
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
pass=0 fail=0
ok() { pass=$((pass + 1)); echo "PASS $1"; }
bad() { fail=$((fail + 1)); echo "FAIL $1"; }

mkdir "$tmp/bin" "$tmp/nolib" "$tmp/noinclude"
for d in /usr/local/bin /usr/bin /bin; do
	for f in "$d"/*; do
		n=$(basename "$f")
		case $n in fi_*|ucx_*) continue ;; esac
		[ -e "$tmp/bin/$n" ] || ln -s "$f" "$tmp/bin/$n"
	done
done
PATH=$tmp/bin RFABRIC_BENCH_DEBIAN_LIBDIR=$tmp/nolib RFABRIC_BENCH_UPSTREAM_INCLUDE=$tmp/noinclude \
	"$root/scripts/demo.sh" "$prefix" >"$tmp/out" 2>&1
rc=$?
cat "$tmp/out"
echo "---"
[ $rc -eq 0 ] && ok "demo exits 0 without the peers" || bad "demo exits $rc without the peers"
grep -q '^rfshm:$' "$tmp/out" && grep -q '^shm:$' "$tmp/out" && ok "installed fi_info -l lists shm and rfshm" || bad "fi_info -l output"
lat=$(grep -cE '^\| [0-9]+ (B|KiB|MiB) \| [0-9.]+ \|$' "$tmp/out")
bw=$(grep -cE '^\| [0-9]+ (B|KiB|MiB) \| [0-9.]+ \| [0-9.]+ \|$' "$tmp/out")
[ "$lat" -eq 4 ] && ok "our latency for 4 sizes, no peer columns" || bad "latency rows: $lat"
[ "$bw" -eq 4 ] && ok "our bandwidth and message rate for 4 sizes" || bad "bandwidth rows: $bw"
grep -q 'no fi_pingpong here' "$tmp/out" && ok "our latency measured by bench/fi_stream -l" || bad "latency tool not named"
grep -q 'apt-get install libfabric1 libfabric-bin libfabric-dev' "$tmp/out" && grep -q 'apt-get install ucx-utils' "$tmp/out" \
	&& ok "says how to get the peers" || bad "no install hint for the peers"
grep -q 'n/a' "$tmp/out" && bad "a cell of ours reads n/a" || ok "no n/a cell"

# The peers back (where installed here): their columns appear.
if command -v fi_pingpong >/dev/null && command -v ucx_perftest >/dev/null && [ -e /usr/include/rdma/fabric.h ]; then
	"$root/scripts/demo.sh" "$prefix" >"$tmp/out2" 2>&1
	rc=$?
	[ $rc -eq 0 ] && grep -q '^| size | ours | Debian | UCX | ours÷best |$' "$tmp/out2" \
		&& ok "with the peers installed: Debian and UCX columns" || { bad "with the peers: rc=$rc"; tail -n 20 "$tmp/out2"; }
else
	echo "SKIP the peers are not installed here: their columns not checked"
fi
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
