#!/bin/sh
# Our rudp built as a DL provider (librfrudp-fi.so) loaded by Debian's own
# libfabric (upstream 1.17) from FI_PROVIDER_PATH: Debian's fi_info lists
# rfrudp, and Debian's fi_pingpong passes -S all -c over it on loopback.
# Usage: tests/dl/rfrudp_debian.sh DLDIR
set -u
dl=$(cd "${1:?usage: rfrudp_debian.sh DLDIR}" && pwd)
[ -e "$dl/librfrudp-fi.so" ] || { echo "FAIL no librfrudp-fi.so in $dl"; exit 1; }
command -v fi_pingpong >/dev/null || { echo "fi_pingpong not installed: skipped"; exit 0; }
export FI_PROVIDER_PATH=$dl FI_RFRUDP_IFACE=lo
unset LD_LIBRARY_PATH
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
pass=0 fail=0
if fi_info -p rfrudp >"$tmp/info" 2>&1 && grep -q "provider: rfrudp" "$tmp/info"; then
	echo "PASS Debian's fi_info lists rfrudp"; pass=$((pass + 1))
else
	echo "FAIL Debian's fi_info -p rfrudp:"; head -5 "$tmp/info"; fail=$((fail + 1))
fi
port=$((20000 + $(od -An -N2 -tu2 /dev/urandom | tr -d ' ') % 20000))
timeout 120 fi_pingpong -p rfrudp -e rdm -B "$port" -S all -c >"$tmp/srv" 2>&1 &
spid=$!
for _ in $(seq 200); do ss -Hltn "sport = :$port" 2>/dev/null | grep -q . && break; sleep 0.1; done
timeout 120 fi_pingpong -p rfrudp -e rdm -P "$port" -S all -c 127.0.0.1 >"$tmp/cli" 2>&1
crc=$?; wait $spid; src=$?
rows=$(grep -cE '^[0-9.]+[kmg]? +[0-9.]+[kmg]? +=' "$tmp/cli")
# The library each side loaded must be Debian's, the provider ours.
if [ $crc -eq 0 ] && [ $src -eq 0 ] && [ "$rows" -ge 40 ]; then
	echo "PASS Debian's fi_pingpong -p rfrudp -S all -c on Debian's libfabric ($rows sizes)"; pass=$((pass + 1))
else
	echo "FAIL fi_pingpong rfrudp (client rc $crc, server rc $src, $rows sizes)"; tail -3 "$tmp/cli" "$tmp/srv"; fail=$((fail + 1))
fi
LD_DEBUG=libs fi_info -p rfrudp 2>&1 | grep -q "calling init: $dl/librfrudp-fi.so" \
	&& { echo "PASS the DL provider was initialised from $dl"; pass=$((pass + 1)); } \
	|| { echo "FAIL librfrudp-fi.so was not initialised"; fail=$((fail + 1)); }
echo "rfrudp-debian: $pass passed, $fail failed"
[ $fail -eq 0 ]
