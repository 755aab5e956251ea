#!/bin/sh
# Our tcp built as a DL provider (librftcp-fi.so) loaded by Debian's own
# libfabric (upstream 1.17) from FI_PROVIDER_PATH: Debian's fi_info lists
# rftcp (beside Debian's own tcp), and Debian's fi_pingpong passes -S all -c
# over rftcp's RDM endpoints on loopback, msg and tagged.
# Usage: tests/dl/rftcp_debian.sh DLDIR
set -u
dl=$(cd "${1:?usage: rftcp_debian.sh DLDIR}" && pwd)
[ -e "$dl/librftcp-fi.so" ] || { echo "FAIL no librftcp-fi.so in $dl"; exit 1; }
command -v fi_pingpong >/dev/null || { echo "fi_pingpong not installed: skipped"; exit 0; }
export FI_PROVIDER_PATH=$dl FI_RFTCP_IFACE=lo
unset LD_LIBRARY_PATH
. "$(dirname "$0")/../free_port.sh"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
pass=0 fail=0
if fi_info -p rftcp >"$tmp/info" 2>&1 && grep -q "provider: rftcp" "$tmp/info"; then
	echo "PASS Debian's fi_info lists rftcp"; pass=$((pass + 1))
else
	echo "FAIL Debian's fi_info -p rftcp:"; head -5 "$tmp/info"; fail=$((fail + 1))
fi
# pingpong NAME ARGS...: a pair over rftcp's RDM endpoints.
pingpong() {
	name=$1; shift
	port=$(free_port)
	timeout 120 fi_pingpong -p rftcp -e rdm -B "$port" "$@" >"$tmp/srv" 2>&1 &
	spid=$!
	for _ in $(seq 200); do ss -Hltn "sport = :$port" 2>/dev/null | grep -q . && break; sleep 0.1; done
	timeout 120 fi_pingpong -p rftcp -e rdm -P "$port" "$@" 127.0.0.1 >"$tmp/cli" 2>&1
	crc=$?; wait $spid; src=$?
	rows=$(grep -cE '^[0-9.]+[kmg]? +[0-9.]+[kmg]? +=' "$tmp/cli")
	if [ $crc -eq 0 ] && [ $src -eq 0 ] && [ "$rows" -ge 40 ]; then
		echo "PASS $name: Debian's fi_pingpong on Debian's libfabric ($rows sizes)"; pass=$((pass + 1))
	else
		echo "FAIL $name (client rc $crc, server rc $src, $rows sizes)"; tail -n 3 "$tmp/cli" "$tmp/srv"; fail=$((fail + 1))
	fi
}
pingpong "rftcp RDM, -S all -c" -S all -c
pingpong "rftcp RDM, tagged, -S all -c" -m tagged -S all -c
LD_DEBUG=libs fi_info -p rftcp 2>&1 | grep -q "calling init: $dl/librftcp-fi.so" \
	&& { echo "PASS the DL provider was initialised from $dl"; pass=$((pass + 1)); } \
	|| { echo "FAIL librftcp-fi.so was not initialised"; fail=$((fail + 1)); }
echo "rftcp-debian: $pass passed, $fail failed"
[ $fail -eq 0 ]
