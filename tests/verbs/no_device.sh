#!/bin/bash
# The verbs provider on a machine without RDMA devices, through the C API:
# our fi_info and Debian's (libfabric-bin) on our libfabric.so.1, then
# Debian's libfabric loading our librfverbs-fi.so. Twice: with Debian's
# rdma-core installed (libibverbs loads, finds no device), and with
# libibverbs made unloadable in a private mount namespace (rdma-core
# absent; needs root, as the suite runs). Each time `fi_info -p verbs`
# reports nothing, FI_LOG_LEVEL=info says why in exactly one line, and
# every other provider answers as before. (Debian's libfabric links
# libibverbs, so the DL provider is checked in the first case only.)
# Usage: tests/verbs/no_device.sh LIBDIR [FI_INFO [DLDIR]]
set -u
lib=$(cd "${1:?usage: no_device.sh LIBDIR [FI_INFO [DLDIR]]}" && pwd)
root=$(cd "$(dirname "$0")/../.." && pwd)
ours=${2:-$root/target/release/fi_info}
dl=${3:-$root/build/dl}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
pass=0 fail=0
ok() { echo "PASS $*"; pass=$((pass + 1)); }
bad() { echo "FAIL $*"; fail=$((fail + 1)); }
[ -x "$ours" ] || { echo "FAIL no fi_info at $ours (make build)"; exit 1; }
command -v fi_info >/dev/null || { echo "FAIL Debian's fi_info is not installed (libfabric-bin)"; exit 1; }

# checks WHY TOOL...: one pass over one fi_info binary.
checks() {
	local why=$1 name=$2; shift 2
	local run=("$@")
	# -p verbs: nothing.
	env LD_LIBRARY_PATH="$lib" "${run[@]}" -p verbs >"$tmp/p" 2>&1
	if grep -q "^ *provider: verbs" "$tmp/p"; then bad "$name: fi_info -p verbs lists verbs entries"; else ok "$name: fi_info -p verbs reports nothing"; fi
	# The reason, once, at info level, from the verbs provider.
	env LD_LIBRARY_PATH="$lib" FI_LOG_LEVEL=info "${run[@]}" -p verbs >"$tmp/log" 2>&1
	n=$(grep -c ':verbs:core:.*<info> no verbs domains: '"$why" "$tmp/log")
	if [ "$n" = 1 ]; then ok "$name: one info line: $(grep -o 'no verbs domains: .*' "$tmp/log" | head -c 120)"
	else bad "$name: expected one 'no verbs domains: $why' line, saw $n:"; grep -i verbs "$tmp/log" | head -5; fi
	if grep -q ':verbs:.*<warn>' "$tmp/log"; then bad "$name: verbs warned:"; grep ':verbs:.*<warn>' "$tmp/log" | head -3; fi
	# Everything else unaffected: the whole list, shm, rudp, the providers list.
	env LD_LIBRARY_PATH="$lib" "${run[@]}" >"$tmp/all" 2>"$tmp/all.err"
	rc=$?
	if [ $rc = 0 ] && ! grep -q "^ *provider: verbs" "$tmp/all" && [ ! -s "$tmp/all.err" ] && grep -q "^ *provider: shm" "$tmp/all" && grep -q "^ *provider: rudp" "$tmp/all"; then
		ok "$name: fi_info lists shm and rudp, no verbs entry, nothing on stderr"
	else
		bad "$name: fi_info (rc $rc):"; head -3 "$tmp/all.err"; grep "provider:" "$tmp/all" | sort | uniq -c
	fi
	env LD_LIBRARY_PATH="$lib" "${run[@]}" -l >"$tmp/l" 2>&1
	if grep -q '^verbs:' "$tmp/l" && grep -q '^shm:' "$tmp/l"; then ok "$name: fi_info -l names verbs and shm"; else bad "$name: fi_info -l:"; cat "$tmp/l"; fi
}

# dl_checks WHY: Debian's libfabric with our DL provider.
dl_checks() {
	local why=$1
	[ -e "$dl/librfverbs-fi.so" ] || { bad "no $dl/librfverbs-fi.so (make dl)"; return; }
	env -u LD_LIBRARY_PATH FI_PROVIDER_PATH="$dl" fi_info -l >"$tmp/dl" 2>&1
	if grep -q '^rfverbs:' "$tmp/dl"; then ok "Debian's libfabric loads rfverbs"; else bad "Debian's fi_info -l:"; head "$tmp/dl"; fi
	env -u LD_LIBRARY_PATH FI_PROVIDER_PATH="$dl" FI_LOG_LEVEL=info fi_info -p rfverbs >"$tmp/dlp" 2>&1
	if grep -q "^ *provider: rfverbs" "$tmp/dlp"; then bad "rfverbs offers entries"; else ok "Debian's fi_info -p rfverbs reports nothing"; fi
	n=$(grep -c '<info> no verbs domains: '"$why" "$tmp/dlp")
	[ "$n" = 1 ] && ok "rfverbs: one info line" || { bad "rfverbs: expected one 'no verbs domains: $why' line, saw $n"; grep -i verbs "$tmp/dlp" | tail -5; }
	env -u LD_LIBRARY_PATH FI_PROVIDER_PATH="$dl" fi_info -p tcp >"$tmp/tcp" 2>&1
	grep -q "^ *provider: tcp" "$tmp/tcp" && ok "Debian's own tcp still answers beside rfverbs" || { bad "Debian's tcp:"; head -3 "$tmp/tcp"; }
}

if [ "${VERBS_NO_DEVICE_INNER:-}" != 1 ]; then
	echo "--- rdma-core installed, no RDMA device"
	why="libibverbs found no RDMA device"
	if ! [ -e /usr/lib/x86_64-linux-gnu/libibverbs.so.1 ] && ! ldconfig -p | grep -q 'libibverbs.so.1 '; then
		why="rdma-core's libibverbs is not available"
	fi
	checks "$why" ours "$ours"
	checks "$why" debian fi_info
	dl_checks "$why"
	echo "--- rdma-core absent (libibverbs.so.1 unloadable in a private mount namespace)"
	so=$(ldconfig -p | awk '/libibverbs.so.1 / {print $NF; exit}')
	if [ "$(id -u)" != 0 ] || [ -z "$so" ] || ! unshare -m sh -c "mount --bind /dev/null '$(readlink -f "$so")'" 2>/dev/null; then
		# (The Rust tests cover the missing library without a namespace.)
		echo "SKIP the absent case: needs root, mount namespaces and an installed libibverbs.so.1 to hide"
	else
		VERBS_NO_DEVICE_INNER=1 unshare -m bash -c "mount --bind /dev/null '$(readlink -f "$so")' && exec '$0' '$lib' '$ours' '$dl'" >"$tmp/inner" 2>&1
		cat "$tmp/inner"
		pass=$((pass + $(grep -c '^PASS' "$tmp/inner"))); fail=$((fail + $(grep -c '^FAIL' "$tmp/inner")))
		grep -q '^PASS' "$tmp/inner" || fail=$((fail + 1))
	fi
	echo "verbs without devices: $pass passed, $fail failed"
	[ "$fail" = 0 ]
else
	why="rdma-core's libibverbs is not available"
	checks "$why" ours "$ours"
	checks "$why" debian fi_info
	# Debian's own libfabric links libibverbs itself, so it cannot start
	# here: the DL case is for hosts with rdma-core only.
fi
