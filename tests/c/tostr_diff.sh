#!/bin/sh
# Differential test of fi_tostr / fi_tostr_r / fi_strerror: the same program,
# built against the system's libfabric 1.x headers, runs once on the system
# library and once on ours; every case must print the same text, except the
# intended differences listed in tostr_allow.txt.
#
# usage: tests/c/tostr_diff.sh <directory holding our libfabric.so.1>
# RF_CHECK=valgrind runs it on ours under valgrind (tests/c/check_mode.sh).
set -u
. "$(dirname "$0")/check_mode.sh"
ours=${1:?usage: $0 <dir with our libfabric.so.1>}
here=$(cd "$(dirname "$0")" && pwd)
syslib=${SYSTEM_LIBFABRIC_DIR:-/usr/lib/x86_64-linux-gnu}
[ -e "$ours/libfabric.so.1" ] || { echo "no libfabric.so.1 in $ours"; exit 2; }
[ -e "$syslib/libfabric.so.1" ] || { echo "system libfabric.so.1 not found in $syslib"; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

cc -O0 -o "$work/tostr_diff" "$here/tostr_diff.c" -L"$syslib" -l:libfabric.so.1 || exit 2
LD_LIBRARY_PATH=$syslib "$work/tostr_diff" > "$work/expected" || { echo "run on system library failed"; exit 2; }
LD_LIBRARY_PATH=$ours rf_run 120 "$work/tostr_diff" > "$work/actual" 2> "$work/actual.err" || {
    echo "run on our library failed:"; cat "$work/actual.err"; exit 1; }

# Same-sized, same-order case lists are compared case by case.
awk -v allow="$here/tostr_allow.txt" -v expf="$work/expected" -v actf="$work/actual" '
function load(file, arr, names,    n, line, name) {
    n = 0
    while ((getline line < file) > 0) {
        if (line ~ /^== /) { name = substr(line, 4); names[++n] = name; arr[name] = ""; continue }
        arr[name] = arr[name] line "\n"
    }
    return n
}
BEGIN {
    while ((getline line < allow) > 0) {
        if (line ~ /^skip /) skip[substr(line, 6)] = 1
        else if (line ~ /^drop /) drops[++nd] = substr(line, 6)
    }
    ne = load(expf, E, en); na = load(actf, A, an)
    pass = fail = 0
    for (i = 1; i <= ne; i++) {
        name = en[i]
        if (name in skip) continue
        if (!(name in A)) { print "MISSING case: " name; fail++; continue }
        # drop allowed extra lines from ours
        nl = split(A[name], lines, "\n"); got = ""
        for (j = 1; j < nl; j++) {
            keep = 1
            for (d = 1; d <= nd; d++) if (lines[j] ~ drops[d]) keep = 0
            if (keep) got = got lines[j] "\n"
        }
        if (got == E[name]) pass++
        else {
            fail++
            if (shown++ < 10) printf "FAIL %s\n--- expected\n%s--- got\n%s\n", name, E[name], got
        }
    }
    if (na != ne) { print "case count differs: " ne " vs " na; fail++ }
    printf "%d passed, %d failed\n", pass, fail
    exit fail != 0
}'
