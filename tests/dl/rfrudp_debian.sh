#!/bin/sh
# Our rudp built as a DL provider (librfrudp-fi.so) loaded by Debian's own
# libfabric (upstream 1.17) from FI_PROVIDER_PATH: Debian's fi_info lists
# rfrudp, and Debian's fi_pingpong passes -S all -c over it on loopback:
# rudp's own RDM endpoints (upstream's ofi_rxd, which layers RDM over any
# FI_EP_DGRAM provider and so over rudp's, is excluded: it lists first),
# then upstream's ofi_rxd over rudp's FI_EP_DGRAM endpoints.
# Usage: tests/dl/rfrudp_debian.sh DLDIR
set -u
dl=$(cd "${1:?usage: rfrudp_debian.sh DLDIR}" && pwd)
[ -e "$dl/librfrudp-fi.so" ] || { echo "FAIL no librfrudp-fi.so in $dl"; exit 1; }
command -v fi_pingpong >/dev/null || { echo "fi_pingpong not installed: skipped"; exit 0; }
export FI_PROVIDER_PATH=$dl FI_RFRUDP_IFACE=lo
unset LD_LIBRARY_PATH
. "$(dirname "$0")/../free_port.sh"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
pass=0 fail=0
if fi_info -p rfrudp >"$tmp/info" 2>&1 && grep -q "provider: rfrudp" "$tmp/info"; then
	echo "PASS Debian's fi_info lists rfrudp"; pass=$((pass + 1))
else
	echo "FAIL Debian's fi_info -p rfrudp:"; head -5 "$tmp/info"; fail=$((fail + 1))
fi
port=$(free_port)
# pingpong NAME PROVIDER_FILTER MINROWS: a pair with FI_PROVIDER set so.
pingpong() {
	port=$(free_port)
	FI_PROVIDER=$2 timeout 120 fi_pingpong -p rfrudp -e rdm -B "$port" -S all -c >"$tmp/srv" 2>&1 &
	spid=$!
	for _ in $(seq 200); do ss -Hltn "sport = :$port" 2>/dev/null | grep -q . && break; sleep 0.1; done
	FI_PROVIDER=$2 timeout 120 fi_pingpong -p rfrudp -e rdm -P "$port" -S all -c 127.0.0.1 >"$tmp/cli" 2>&1
	crc=$?; wait $spid; src=$?
	rows=$(grep -cE '^[0-9.]+[kmg]? +[0-9.]+[kmg]? +=' "$tmp/cli")
	if [ $crc -eq 0 ] && [ $src -eq 0 ] && [ "$rows" -ge "$3" ]; then
		echo "PASS $1: Debian's fi_pingpong -S all -c on Debian's libfabric ($rows sizes)"; pass=$((pass + 1))
	else
		echo "FAIL $1 (client rc $crc, server rc $src, $rows sizes)"; tail -n 25 "$tmp/cli" "$tmp/srv"; fail=$((fail + 1))
	fi
}
pingpong "rfrudp RDM" '^ofi_rxd' 40
if FI_PROVIDER=rfrudp,ofi_rxd fi_info -p rfrudp 2>/dev/null | grep -q 'provider: rfrudp;ofi_rxd'; then
	# At warn level: a failure shows what ofi_rxd and we reported. In the
	# whole suite this pair has stopped at the 384 KiB size now and then
	# (not seen when the step runs alone; cause not found), so a failed
	# pair gets one more try, its output kept above; two failures fail.
	fail0=$fail
	FI_LOG_LEVEL=warn pingpong "upstream ofi_rxd over rfrudp's FI_EP_DGRAM" 'rfrudp,ofi_rxd' 20
	if [ $fail -ne $fail0 ]; then
		echo "ofi_rxd over rfrudp's FI_EP_DGRAM: trying again once"
		fail=$fail0
		FI_LOG_LEVEL=warn pingpong "upstream ofi_rxd over rfrudp's FI_EP_DGRAM (second try)" 'rfrudp,ofi_rxd' 20
	fi
else
	echo "FAIL Debian's libfabric lists no rfrudp;ofi_rxd"; fail=$((fail + 1))
fi
LD_DEBUG=libs fi_info -p rfrudp 2>&1 | grep -q "calling init: $dl/librfrudp-fi.so" \
	&& { echo "PASS the DL provider was initialised from $dl"; pass=$((pass + 1)); } \
	|| { echo "FAIL librfrudp-fi.so was not initialised"; fail=$((fail + 1)); }
echo "rfrudp-debian: $pass passed, $fail failed"
[ $fail -eq 0 ]
