#!/bin/bash
# An admin puts our libfabric.so.1 in place of the system one, runs
# Debian's own Open MPI (openmpi-bin 4.1, whose libopenmpi3 links the
# system libfabric1) and Debian's fi_info on it, then undoes the swap.
#
# Usage: tests/mpi/admin_swap.sh LIBDIR MODE [run_ompi.sh options...]
#   LIBDIR  the directory with our libfabric.so.1 (build/lib)
#   MODE    ldconf: a /etc/ld.so.conf.d entry (sorted first) naming a
#                   directory that holds our library, then ldconfig
#           divert: dpkg-divert --local --rename of the system library
#                   file (its package's path), ours copied to that path,
#                   then ldconfig
# With the swap in place: the system loader resolves libfabric.so.1 (ldconfig
# -p, and ldd of Open MPI's mca_mtl_ofi.so) to our copy; Debian's fi_info
# (no LD_LIBRARY_PATH) lists our providers; tests/mpi/run_ompi.sh --system
# runs the MPI test program (its options follow MODE; e.g. --hosts two).
# Always undone at exit (also on failure or interrupt): the entry or the
# diversion removed, ldconfig run, and checked: the system library file has
# its old checksum, libfabric.so.1 resolves to it again, dpkg-divert --list
# no longer names it. Needs root. Last line "admin_swap: PASS ..." or
# "admin_swap: FAIL ...".
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
libdir=${1:?LIBDIR}; mode=${2:?MODE}; shift 2
ours=$(readlink -f "$libdir/libfabric.so.1")
arch=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || echo x86_64-linux-gnu)
mtl=/usr/lib/$arch/openmpi/lib/openmpi3/mca_mtl_ofi.so
result() { echo "admin_swap: $1 mode $mode${2:+: $2}"; }
verdict=""
fail() { verdict="FAIL $*"; [ -n "${armed:-}" ] || result FAIL "$*"; exit 1; }
[ "$(id -u)" = 0 ] || fail "needs root"
[ -f "$ours" ] || fail "no $libdir/libfabric.so.1"
[ -f "$mtl" ] || fail "no $mtl (apt-get install openmpi-bin libopenmpi-dev)"
case $mode in ldconf|divert) ;; *) fail "MODE is ldconf or divert" ;; esac
# The system library as its package ships it (usrmerge: /usr/lib/...).
syslib=$(dpkg -L libfabric1 | grep -E "/libfabric\.so\.1\.[0-9.]+$" | head -1)
[ -f "$syslib" ] || fail "libfabric1's library file not found"
sum0=$(sha256sum <"$syslib")
resolved() { ldd "$mtl" | awk '$1 == "libfabric.so.1" {print $3}' | xargs -r readlink -f; }
before=$(resolved)
[ "$before" = "$(readlink -f "$syslib")" ] || fail "before the swap mca_mtl_ofi.so resolves libfabric.so.1 to '$before', not $syslib"
[ "$(sha256sum <"$ours")" != "$sum0" ] || fail "ours and the system library are the same file"

conf=/etc/ld.so.conf.d/00-rfabric-swap.conf
swapdir=/usr/local/lib/rfabric-swap
divdir=/usr/lib/$arch/rfabric-diverted
undo() {
	case $mode in
	ldconf)
		rm -f "$conf"; rm -rf "$swapdir" ;;
	divert)
		if dpkg-divert --list "$syslib" | grep -q .; then
			rm -f "$syslib"
			dpkg-divert --local --rename --divert "$divdir/$(basename "$syslib")" --remove "$syslib" >/dev/null
			rmdir "$divdir" 2>/dev/null
		fi ;;
	esac
	ldconfig
}
check_undone() {
	local why=""
	[ "$(sha256sum <"$syslib")" = "$sum0" ] || why="$why; $syslib changed"
	[ "$(resolved)" = "$(readlink -f "$syslib")" ] || why="$why; libfabric.so.1 resolves to $(resolved)"
	dpkg-divert --list "$syslib" | grep -q . && why="$why; diversion still listed"
	[ -e "$conf" ] && why="$why; $conf still there"
	echo "${why#; }"
}
finish() {
	rc=$?
	trap - EXIT
	undo
	left=$(check_undone)
	if [ -n "$left" ]; then
		echo "undo incomplete: $left"; rc=1; verdict="FAIL undo incomplete: $left${verdict:+ (before: $verdict)}"
	else
		echo "undone: $syslib restored (sha256 unchanged), libfabric.so.1 resolves to it"
	fi
	[ -n "$verdict" ] || verdict="FAIL interrupted"
	result ${verdict%% *} "${verdict#* }"
	exit $rc
}
armed=1
trap finish EXIT
trap 'exit 130' INT TERM

case $mode in
ldconf)
	mkdir -p "$swapdir"
	cp "$ours" "$swapdir/"
	echo "$swapdir" >"$conf"
	ldconfig
	want=$swapdir/$(basename "$ours") ;;
divert)
	mkdir -p "$divdir"
	dpkg-divert --local --rename --divert "$divdir/$(basename "$syslib")" --add "$syslib" >/dev/null || fail "dpkg-divert failed"
	cp "$ours" "$syslib"
	ldconfig
	want=$syslib ;;
esac
echo "swapped ($mode): $(ldconfig -p | grep -m1 'libfabric.so.1 ')"
got=$(resolved)
[ "$got" = "$(readlink -f "$want")" ] || fail "with the swap mca_mtl_ofi.so resolves libfabric.so.1 to '$got', not $want"
cmp -s "$got" "$ours" || fail "$got is not our library"
# Debian's fi_info, no LD_LIBRARY_PATH: our provider table.
provs=$(/usr/bin/fi_info -l 2>&1)
echo "$provs" | grep -q '^rudp:' || { echo "$provs"; fail "Debian's fi_info -l does not list rudp"; }
echo "Debian fi_info -l: $(echo "$provs" | grep -c ':$') providers, $(echo "$provs" | grep ':$' | tr -d : | tr '\n' ' ')"
"$root/tests/mpi/run_ompi.sh" --system "$want" "$@" || fail "run_ompi.sh --system failed"
verdict="PASS Debian Open MPI and fi_info ran on our library in place of $syslib, then the system library was back"
