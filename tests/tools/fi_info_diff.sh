#!/bin/bash
# Our fi_info against the distribution's (upstream 1.17) fi_info, both run on
# OUR libfabric.so.1. For each option set, stdout, stderr and the exit code
# must be the same. Where they differ on purpose, the case names the
# difference and its reason, both outputs are normalised for exactly that,
# and the rest must still match. Every run of the distribution's tool must
# also be free of loader warnings (e.g. "no version information").
#
# Usage: tests/tools/fi_info_diff.sh [LIBDIR] [OUR_FI_INFO]
#   LIBDIR       directory with our libfabric.so.1 (default: build/lib)
#   OUR_FI_INFO  our binary (default: $FI_INFO, else the newer of
#                target/release/fi_info and target/debug/fi_info)
# Prints "N passed, N failed"; exits non-zero on any failure.
set -u
cd "$(dirname "$0")/../.."
lib=$(cd "${1:-build/lib}" && pwd) || { echo "no library directory"; exit 1; }
ours=${2:-${FI_INFO:-}}
if [ -z "$ours" ]; then
	for c in target/release/fi_info target/debug/fi_info; do
		[ -x "$c" ] && { [ -z "$ours" ] || [ "$c" -nt "$ours" ]; } && ours=$c
	done
fi
theirs=/usr/bin/fi_info
[ -x "$theirs" ] || { echo "missing $theirs (Debian package libfabric-bin)"; echo "0 passed, 1 failed"; exit 1; }
[ -n "$ours" ] && [ -x "$ours" ] || { echo "missing our fi_info (cargo build -p rfabric-fi-info)"; echo "0 passed, 1 failed"; exit 1; }
[ -e "$lib/libfabric.so.1" ] || { echo "missing $lib/libfabric.so.1"; echo "0 passed, 1 failed"; exit 1; }
ours=$(cd "$(dirname "$ours")" && pwd)/$(basename "$ours")
echo "ours:   $ours"
echo "theirs: $theirs"
echo "lib:    $lib"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
passed=0 failed=0
CASE_ENV=()

# Both tools see argv[0] = "fi_info" (it appears in usage and getopt lines),
# the same environment, and only our library.
invoke() { # out-prefix binary args...
	local pre=$1 bin=$2; shift 2
	env -u FI_PROVIDER -u FI_LOG_LEVEL -u FI_PROVIDER_PATH LD_LIBRARY_PATH="$lib" "${CASE_ENV[@]}" \
		bash -c 'exec -a fi_info "$0" "$@"' "$bin" "$@" >"$pre.out" 2>"$pre.err"
	echo $? >"$pre.rc"
}

# check NAME NORMALISE REASON -- ARGS...
#   NORMALISE: a sed script applied to both stdouts before comparing ('' = none)
#   REASON: why the normalised part differs (shown when NORMALISE is set)
check() {
	local name=$1 norm=$2 reason=$3; shift 4
	local a=$tmp/$name.theirs b=$tmp/$name.ours ok=1 why=""
	invoke "$a" "$theirs" "$@"
	invoke "$b" "$ours" "$@"
	if grep -qi "version information\|symbol lookup error\|cannot open shared" "$a.err"; then
		ok=0; why="$why; distribution fi_info warns on our library: $(head -1 "$a.err")"
	fi
	# Upstream prints a NUL byte on each side of an unquoted -e value; ours
	# prints plain text. Drop NULs from theirs; ours must have none.
	tr -d '\000' <"$a.out" >"$a.txt"
	cp "$b.out" "$b.txt"
	if [ "$(tr -d '\000' <"$b.out" | wc -c)" != "$(wc -c <"$b.out")" ]; then
		ok=0; why="$why; our output has NUL bytes"
	fi
	if [ -n "$norm" ]; then
		sed -i -e "$norm" "$a.txt" "$b.txt"
	fi
	if ! diff -u --label "theirs $*" --label "ours $*" "$a.txt" "$b.txt" >"$tmp/$name.diff"; then
		ok=0; why="$why; stdout differs"
	fi
	if ! diff -u --label "theirs stderr" --label "ours stderr" "$a.err" "$b.err" >>"$tmp/$name.diff"; then
		ok=0; why="$why; stderr differs"
	fi
	if [ "$(cat "$a.rc")" != "$(cat "$b.rc")" ]; then
		ok=0; why="$why; exit code $(cat "$a.rc") (theirs) vs $(cat "$b.rc") (ours)"
	fi
	if [ -n "${EXPECT_RC:-}" ] && [ "$(cat "$b.rc")" != "$EXPECT_RC" ]; then
		ok=0; why="$why; exit code $(cat "$b.rc"), expected $EXPECT_RC"
	fi
	if [ -n "${EXPECT_OUT:-}" ] && ! grep -q -- "$EXPECT_OUT" "$b.out"; then
		ok=0; why="$why; output lacks '$EXPECT_OUT'"
	fi
	if [ $ok = 1 ]; then
		passed=$((passed + 1))
		printf 'ok   %-22s fi_info %s (rc %s)\n' "$name" "$*" "$(cat "$b.rc")"
		[ -n "$norm" ] && printf '     known difference: %s\n' "$reason"
	else
		failed=$((failed + 1))
		printf 'FAIL %-22s fi_info %s:%s\n' "$name" "$*" "${why#;}"
		head -40 "$tmp/$name.diff" | sed 's/^/     /'
	fi
	CASE_ENV=() EXPECT_RC="" EXPECT_OUT=""
}
CASE_ENV=() EXPECT_RC="" EXPECT_OUT=""

# What -v shows differently, and why:
#  - api_version: each tool asks fi_getinfo for the API version of its own
#    headers (1.17 for the distribution's, ours for ours);
#  - max_cntr_value / max_err_cntr_value: the distribution's binary binds
#    fi_getinfo@FABRIC_1.3, which returns the fi_info shape of that version;
#    those fields came later and read as 0 there.
verbose_norm='s/^\(\s*api_version:\) [0-9.]*$/\1 API/; /^\s*max_cntr_value:/d; /^\s*max_err_cntr_value:/d'
verbose_why="api_version is each tool's own API (1.17 vs ours); max_cntr_value/max_err_cntr_value are not in the FABRIC_1.3 struct shape the distribution's binary binds"

EXPECT_OUT="version:" check list '' '' -- -l
EXPECT_OUT="provider: shm" check default '' '' --
EXPECT_OUT="protocol: FI_PROTO_SHM" check prov-shm '' '' -- -p shm
EXPECT_OUT="fi_fabric_attr:" check prov-shm-verbose "$verbose_norm" "$verbose_why" -- -p shm -v
check list-verbose "$verbose_norm" "$verbose_why" -- -l -v
EXPECT_OUT="type: FI_EP_RDM" check rdm-msg-tagged '' '' -- -t FI_EP_RDM -c 'FI_MSG|FI_TAGGED'
check caps-mixed-case '' '' -- -c fi_msg -c 'FI_RMA||fi_tagged' -p shm
check long-options '' '' -- --provider=shm --ep_type=FI_EP_RDM --caps=FI_MSG
check abbreviated-long '' '' -- --prov shm --ep_t FI_EP_RDM
check clustered-short '' '' -- -lp shm
check modes '' '' -- -m 'FI_CONTEXT|FI_CONTEXT2' -p shm
check addr-str '' '' -- -a FI_ADDR_STR -p shm
check addr-sockaddr-in '' '' -- -a FI_SOCKADDR_IN -p shm
check domain-fabric '' '' -- -d shm -f shm
check fabric-unknown '' '' -- -f no_such_fabric
check node-port '' '' -- -n 127.0.0.1 -P 4321 -p shm
check source '' '' -- -s 127.0.0.1 -p shm
CASE_ENV=(FI_LOG_INTERVAL=2500 "FI_LOG_PROV=shm tcp"); EXPECT_OUT='^FI_LOG_PROV="shm tcp"$' \
	check env 's/^# FI_LOG_INTERVAL:/&/' "the distribution's fi_info writes a NUL byte on each side of an unquoted value; ours writes none (NULs dropped from theirs before comparing)" -- -e
CASE_ENV=("FI_LOG_PROV=^tcp" FI_LOG_INTERVAL=2500); EXPECT_OUT="^FI_LOG_INTERVAL=2500$" check getenv-log '' '' -- -g LOG
check getenv-nomatch '' '' -- -g no_such_param
check info-substr "$verbose_norm" "$verbose_why" -- -i FI_EP_RDM
check info-nomatch '' '' -- -i no_such_text
EXPECT_RC=61 check bogus-provider '' '' -- -p bogus
EXPECT_RC=1 check bad-option '' '' -- -x
EXPECT_RC=1 check bad-long-option '' '' -- --bogus
EXPECT_RC=1 check missing-argument '' '' -- -p
EXPECT_RC=1 check ambiguous-long '' '' -- --ver
EXPECT_RC=1 EXPECT_OUT="^Usage: fi_info$" check help '' '' -- -h
EXPECT_RC=1 check help-long '' '' -- --help
EXPECT_RC=22 check bad-cap '' '' -- -c 'FI_MSG|FI_BOGUS'
EXPECT_RC=22 check bad-mode '' '' -- -m FI_BOGUS
EXPECT_RC=22 check bad-ep-type '' '' -- -t FI_EP_NOPE
EXPECT_RC=22 check bad-addr-format '' '' -- -a nope

# --version: the tool's own release and API differ by design; the library
# line (from fi_tostr) must be the same.
invoke "$tmp/v.theirs" "$theirs" --version
invoke "$tmp/v.ours" "$ours" --version
want_release=$(sed -n 's/^version *= *"\(.*\)"/\1/p' Cargo.toml | head -n1)
if [ "$(sed -n 2p "$tmp/v.theirs.out")" = "$(sed -n 2p "$tmp/v.ours.out")" ] &&
	[ "$(sed -n 1p "$tmp/v.ours.out")" = "fi_info: $want_release" ] &&
	grep -qx 'libfabric api: [0-9]*\.[0-9]*' "$tmp/v.ours.out" &&
	[ "$(wc -l <"$tmp/v.ours.out")" = 3 ] && [ ! -s "$tmp/v.ours.err" ] && [ ! -s "$tmp/v.theirs.err" ] &&
	[ "$(cat "$tmp/v.ours.rc")" = 0 ]; then
	passed=$((passed + 1))
	echo "ok   version                fi_info --version (rc 0)"
	echo "     known difference: first and third lines are each tool's own release and API: $(sed -n 1p "$tmp/v.ours.out") / $(sed -n 3p "$tmp/v.ours.out")"
else
	failed=$((failed + 1))
	echo "FAIL version"; paste "$tmp/v.theirs.out" "$tmp/v.ours.out" | sed 's/^/     /'
fi

echo "fi_info: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
