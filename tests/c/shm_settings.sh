#!/bin/sh
# The shm provider's settings (FI_<PROV>_CMA, _EAGER_MAX, _SHARED_COPY,
# _PEER_CHECK_MS) go
# through the core's parameters: Debian's fi_info -e lists them with their
# help text, and a value that does not parse is a warning line naming the
# variable, after which the default applies and transfers still work.
#
# Usage: tests/c/shm_settings.sh LIBDIR [PROV]
#   LIBDIR  directory of the libfabric.so.1 to run on; "-" runs on the
#           system's own (no LD_LIBRARY_PATH), for a DL provider loaded
#           through FI_PROVIDER_PATH (set by the caller)
#   PROV    provider name: shm (default) or the DL build's rfshm
# Prints "N passed, N failed"; exits non-zero on a failure.
set -u
libarg=${1:?usage: shm_settings.sh LIBDIR [PROV]}
prov=${2:-shm}
if [ "$libarg" = - ]; then
	lib=""
else
	lib=$(cd "$libarg" && pwd) || { echo "0 passed, 1 failed"; exit 1; }
fi
PROV=$(echo "$prov" | tr '[:lower:]' '[:upper:]')
. "$(dirname "$0")/../free_port.sh"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
pass=0 fail=0
ok() { pass=$((pass + 1)); echo "PASS $1"; }
bad() { fail=$((fail + 1)); echo "FAIL $1"; }
# on_lib CMD...: run with our library first in the search path (or as is).
on_lib() {
	if [ -n "$lib" ]; then LD_LIBRARY_PATH=$lib "$@"; else env -u LD_LIBRARY_PATH "$@"; fi
}

command -v fi_info >/dev/null || { echo "fi_info not installed (libfabric-bin)"; echo "0 passed, 1 failed"; exit 1; }
on_lib fi_info -e >"$tmp/env" 2>&1
for v in CMA EAGER_MAX SHARED_COPY PEER_CHECK_MS; do
	var=FI_${PROV}_$v
	# -a: some providers' help text holds bytes that make grep call it binary
	if grep -a -q "^# $var: " "$tmp/env" && grep -a -A1 "^# $var: " "$tmp/env" | grep -a -q "^# $prov: .\{30,\}"; then
		ok "fi_info -e lists $var with its help: $(grep -a "^# $var: " "$tmp/env" | cut -c3-)"
	else
		bad "fi_info -e does not list $var with a help line"
	fi
done

# A pair of fi_pingpong processes with ENV... set; both must exit 0. A
# failed pair is run once more (a port taken meanwhile, or another suite's
# processes in /dev/shm), and the second result counts.
pair() {
	pair_once "$@" || { echo "  (pair failed: client rc=$crc, server rc=$src; once more)"; pair_once "$@"; }
}
pair_once() {
	port=$(free_port)
	on_lib env "$@" timeout 60 fi_pingpong -p "$prov" -e rdm -S all -c -I 5 -B "$port" >"$tmp/srv" 2>&1 &
	spid=$!
	sleep 0.3
	on_lib env "$@" timeout 60 fi_pingpong -p "$prov" -e rdm -S all -c -I 5 -P "$port" 127.0.0.1 >"$tmp/cli" 2>&1
	crc=$?
	wait "$spid"; src=$?
	[ $crc -eq 0 ] && [ $src -eq 0 ]
}

if pair FI_LOG_LEVEL=warn "FI_${PROV}_EAGER_MAX=4k" "FI_${PROV}_CMA=sometimes" "FI_${PROV}_SHARED_COPY=2" "FI_${PROV}_PEER_CHECK_MS=-5"; then
	ok "bad values: fi_pingpong -S all -c passes on the defaults"
else
	bad "bad values: fi_pingpong failed (client rc=$crc, server rc=$src)"; tail -n 5 "$tmp/cli" "$tmp/srv"
fi
for v in EAGER_MAX:4k CMA:sometimes SHARED_COPY:2 PEER_CHECK_MS:-5; do
	var=FI_${PROV}_${v%%:*}
	if grep -q "<warn> $var is not valid .*using the default" "$tmp/cli" && grep -q "<warn> $var is not valid" "$tmp/srv"; then
		ok "$var=${v#*:}: warning on both sides: $(grep -m1 "<warn> $var" "$tmp/cli" | sed 's/.*<warn> //')"
	else
		bad "$var=${v#*:}: no warning line"; grep '<warn>' "$tmp/cli" | head -n 5
	fi
done

# Good values are read (FI_LOG_LEVEL=info shows each read) and no warning.
if pair FI_LOG_LEVEL=info "FI_${PROV}_EAGER_MAX=0x1000" "FI_${PROV}_CMA=0" "FI_${PROV}_SHARED_COPY=no" "FI_${PROV}_PEER_CHECK_MS=50"; then
	if grep -q 'eager_max=4096' "$tmp/cli" && grep -q 'cma=0' "$tmp/cli" && grep -q 'shared_copy=0' "$tmp/cli" \
		&& grep -q 'peer_check_ms=50' "$tmp/cli" \
		&& ! grep -q "<warn> FI_${PROV}_" "$tmp/cli" "$tmp/srv"; then
		ok "good values read: $(grep -o 'var eager_max=[0-9]*' "$tmp/cli" | head -n1), cma=0, shared_copy=0, peer_check_ms=50"
	else
		bad "good values: read lines missing"; grep -E 'eager_max|cma|shared_copy|peer_check_ms' "$tmp/cli" | head -n 8
	fi
else
	bad "good values: fi_pingpong failed (client rc=$crc, server rc=$src)"; tail -n 5 "$tmp/cli" "$tmp/srv"
fi

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
