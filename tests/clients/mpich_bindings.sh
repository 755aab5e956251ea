#!/bin/sh
# The MPICH wheel's libmpi.so.12 (linked against upstream's versioned
# libfabric) must resolve every libfabric symbol from our library, and the
# upstream-built DL providers it ships must load through our core.
# Usage: tests/clients/mpich_bindings.sh LIBDIR MPICH_LIBDIR
set -u
lib=$(cd "${1:?usage: LIBDIR MPICH_LIBDIR}" && pwd)
mlib=$(cd "${2:?usage: LIBDIR MPICH_LIBDIR}" && pwd)
pass=0 fail=0
ok() { pass=$((pass + 1)); echo "ok   $1"; }
bad() { fail=$((fail + 1)); echo "FAIL $1"; }
mpi=$mlib/libmpi.so.12
[ -f "$mpi" ] || { echo "no $mpi"; echo "mpich bindings: 0 passed, 1 failed"; exit 1; }

needed=$(objdump -T "$mpi" | awk '/\*UND\*/ && $NF ~ /^fi_/ {print $NF}' | sort -u)
[ -n "$needed" ] && ok "libmpi.so.12 needs $(echo $needed | wc -w) libfabric symbols" || bad "found no fi_ symbols in libmpi"
log=$(mktemp)
LD_LIBRARY_PATH=$lib LD_DEBUG=bindings LD_DEBUG_OUTPUT=$log ldd -r "$mpi" >/dev/null 2>&1
for s in $needed; do
	if cat "$log".* 2>/dev/null | grep "binding file $mpi" | grep -F "to $lib/libfabric.so.1" | grep -q "symbol \`$s'"; then
		ok "$s bound to our library ($(cat "$log".* | grep "binding file $mpi" | grep "symbol \`$s'" | head -1 | sed 's/.*\[\(FABRIC[^]]*\)\]/\1/'))"
	else
		bad "$s not bound to our library"
	fi
done
rm -f "$log" "$log".*
undef=$(LD_LIBRARY_PATH=$lib ldd -r "$mpi" 2>&1 | grep -c 'undefined symbol')
[ "$undef" = 0 ] && ok "ldd -r: no undefined symbols" || bad "ldd -r: $undef undefined symbols"

# Upstream-built DL providers shipped in the wheel load through our core;
# with no RDMA device they answer no data, and fi_info still works.
fi_info=${FI_INFO:-/usr/bin/fi_info}
out=$(LD_LIBRARY_PATH=$lib FI_PROVIDER_PATH=$mlib/mpich/libfabric FI_LOG_LEVEL=warn "$fi_info" -l 2>/tmp/mpich_dl_err.$$)
rc=$?
[ $rc -eq 0 ] && ok "fi_info -l with the wheel's DL providers exits 0" || bad "fi_info -l rc=$rc"
for p in verbs efa; do
	echo "$out" | grep -q "^$p:" && ok "upstream-built $p DL provider listed" || bad "$p not listed: $(cat /tmp/mpich_dl_err.$$ | head -3)"
done
LD_LIBRARY_PATH=$lib FI_PROVIDER_PATH=$mlib/mpich/libfabric "$fi_info" -p verbs >/dev/null 2>&1
rc=$?
[ $rc -ne 139 ] && [ $rc -ne 134 ] && ok "fi_info -p verbs without a device ends cleanly (rc=$rc)" || bad "fi_info -p verbs crashed (rc=$rc)"
rm -f /tmp/mpich_dl_err.$$
echo "mpich bindings: $pass passed, $fail failed"
[ $fail -eq 0 ]
