#!/bin/sh
# Second oracle for the ABI: the installed upstream headers (Debian's
# libfabric-dev, 1.17, under /usr/include/rdma).
#
#   tests/abi/oracle_debian.sh              compare
#   tests/abi/oracle_debian.sh --self-test  also prove a difference is caught
#   KEEP=1 tests/abi/oracle_debian.sh       keep the generated files
#
# From the tables it generates a program that prints sizeof, offsetof and
# member sizes of every struct member and the value of every constant
# (gen_c_check.py --mode print).  Items the installed headers do not declare
# are dropped (compile, read the error lines, drop those items, repeat).  The
# remaining program is built and run against both header sets, and
# oracle_compare.py compares the two outputs and the tables.  Differences
# that are real API evolution between 1.17 and the tables' 2.x are listed in
# tests/abi/oracle_allow.tsv, one reason each.
#
# Exit status: 0 when everything agrees or is allowed, 1 on a mismatch,
# 2 on a setup error.  Without installed headers it says so and exits 0.

set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT" || exit 2
CC=${CC:-gcc}
PY=${PYTHON:-python3}
SYSINC=${SYSINC:-/usr/include}
ALLOW=${ALLOW:-tests/abi/oracle_allow.tsv}
GEN="$PY tests/abi/gen_c_check.py"

if [ ! -f "$SYSINC/rdma/fabric.h" ]; then
	echo "oracle: skipped, no upstream headers in $SYSINC/rdma"
	exit 0
fi

TMP=$(mktemp -d "${TMPDIR:-/tmp}/abi-oracle.XXXXXX") || exit 2
if [ "${KEEP:-0}" = 1 ]; then
	echo "generated files kept in $TMP"
else
	trap 'rm -rf "$TMP"' EXIT
fi

ALL=$($PY -c 'import sys; sys.path.insert(0, "tests/abi"); import gen_c_check as g; print(",".join(g.ALL_HEADERS))')
SYSH=""
for h in $(echo "$ALL" | tr , ' '); do
	[ -f "$SYSINC/$h" ] && SYSH="$SYSH${SYSH:+,}$h"
done

# Drop what the system headers lack, a round at a time.
: >"$TMP/skip"
round=0
while :; do
	round=$((round + 1))
	$GEN --mode print --headers "$SYSH" --skip "$TMP/skip" -o "$TMP/probe.c" || exit 2
	if $CC -std=c11 -w -fmax-errors=0 -isystem "$SYSINC" -c "$TMP/probe.c" -o "$TMP/probe.o" 2>"$TMP/probe.err"; then
		break
	fi
	# Errors inside a macro point at the macro; the notes name the line.
	grep -o 'probe\.c:[0-9]*:[0-9]*: \(error\|note\)' "$TMP/probe.err" |
		cut -d: -f2 | sort -un >"$TMP/lines"
	if [ ! -s "$TMP/lines" ] || [ "$round" -gt 20 ]; then
		echo "oracle: cannot build the probe against $SYSINC" >&2
		sed -n '1,30p' "$TMP/probe.err" >&2
		exit 2
	fi
	while read -r n; do
		sed -n "${n}p" "$TMP/probe.c" | sed -n 's|.*/\*@\(.*\)@\*/.*|\1|p'
	done <"$TMP/lines" >"$TMP/new"
	if [ ! -s "$TMP/new" ]; then
		echo "oracle: probe errors outside any item" >&2
		sed -n '1,30p' "$TMP/probe.err" >&2
		exit 2
	fi
	cat "$TMP/new" >>"$TMP/skip"
done
echo "oracle: $(wc -l <"$TMP/skip") items not in the system headers, dropped in $round rounds"

$GEN --mode expected -o "$TMP/expected.txt" || exit 2
$CC -std=c11 -w -isystem "$SYSINC" "$TMP/probe.c" -o "$TMP/print_sys" || exit 2
"$TMP/print_sys" >"$TMP/system.txt" || exit 2

# Ours: same items; all our headers (a struct may live in another header).
$GEN --mode print --skip "$TMP/skip" -o "$TMP/ours.c" || exit 2
if ! $CC -std=c11 -w -Iinclude "$TMP/ours.c" -o "$TMP/print_ours" 2>"$TMP/ours.err"; then
	echo "MISMATCH items declared by the system headers do not build against include/:"
	grep 'error:' "$TMP/ours.err" | sed -n '1,40p' | sed 's/^/     | /'
	echo "oracle: failed"
	exit 1
fi
"$TMP/print_ours" >"$TMP/ours.txt" || exit 2

$PY tests/abi/oracle_compare.py "$TMP/expected.txt" "$TMP/system.txt" "$TMP/ours.txt" "$ALLOW"
rc=$?

if [ "${1:-}" = "--self-test" ]; then
	# Change one value that agrees everywhere; the comparison must object.
	key="sizeof struct fi_msg"
	grep -q "^$key	" "$TMP/ours.txt" || { echo "self-test: $key not compared"; exit 1; }
	awk -F'\t' -v OFS='\t' -v k="$key" '$1==k {$2=$2+8} {print}' "$TMP/ours.txt" >"$TMP/ours.bad"
	if $PY tests/abi/oracle_compare.py "$TMP/expected.txt" "$TMP/system.txt" "$TMP/ours.bad" "$ALLOW" >"$TMP/self.out"; then
		echo "self-test: FAILED, an altered '$key' went unnoticed"
		rc=1
	else
		grep "MISMATCH $key" "$TMP/self.out" | sed "s/^MISMATCH /self-test: caught the altered /"
		echo "self-test: ok, the altered value was caught"
	fi
fi
exit $rc
