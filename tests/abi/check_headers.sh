#!/bin/sh
# Check the public headers in include/ against the ABI tables in tests/abi/.
#
#   tests/abi/check_headers.sh            run every check
#   PEDANTIC=1 tests/abi/check_headers.sh also require -pedantic-errors to pass
#   PEDANTIC=0 tests/abi/check_headers.sh do not try -pedantic-errors at all
#   KEEP=1 ...                            keep the generated files (path shown)
#   PARTIAL=1 ...                         include only the headers that exist yet
#
# What is checked:
#   - every public header resolves inside include/ (never the system's copy)
#   - every public header compiles on its own, as C11 and as C++11
#   - the generated static checks (gen_c_check.py) compile with
#     gcc -std=c11 -Wall -Wextra -Werror and g++ -std=c++11 -Wall -Wextra -Werror
#   - the string constants have the table's content (a tiny program is run)
#   - tests/c/compile_sample.c, an upstream-style program, compiles as C11
#   - the checks can fail: a copy of the tables with one size and one
#     constant altered must make the generated file fail to compile
# Prints one line per check and a summary "N passed, N failed, N skipped";
# exits non-zero if anything failed.

set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT" || exit 2
CC=${CC:-gcc}
CXX=${CXX:-g++}
PY=${PYTHON:-python3}
GEN="$PY tests/abi/gen_c_check.py"
PEDANTIC=${PEDANTIC:-auto}
WARN="-Wall -Wextra -Werror"

TMP=$(mktemp -d "${TMPDIR:-/tmp}/abi-check.XXXXXX") || exit 2
if [ "${KEEP:-0}" = 1 ]; then
	echo "generated files kept in $TMP"
else
	trap 'rm -rf "$TMP"' EXIT
fi

PASS=0
FAIL=0
SKIP=0
pass() { PASS=$((PASS + 1)); echo "ok   $1"; }
fail() { FAIL=$((FAIL + 1)); echo "FAIL $1"; }
skip() { SKIP=$((SKIP + 1)); echo "skip $1"; }
# show the first lines of a log, indented
show() { [ -f "$1" ] || return 0; sed -n '1,40p' "$1" | sed 's/^/     | /'; }

# Explain a failed compile of generated checks: $1 generated file, $2 error log.
# Mismatches get the value our headers actually have (a small program prints
# it); items that could not be evaluated are grouped by the compiler's reason.
explain() {
	$GEN --mode explain --generated "$1" --errors "$2" >"$TMP/explain" || return
	grep '^FAILED' "$TMP/explain" | cut -f2 >"$TMP/failed"
	got=""
	if [ -s "$TMP/failed" ] &&
		$GEN --mode print --only "$TMP/failed" -o "$TMP/got.c" &&
		$CC -std=c11 -w -Iinclude "$TMP/got.c" -o "$TMP/got" 2>/dev/null &&
		"$TMP/got" >"$TMP/got.txt"; then
		got="$TMP/got.txt"
	fi
	$GEN --mode expected -o "$TMP/expected.txt"
	grep '^FAILED' "$TMP/explain" | cut -f2- | while IFS='	' read -r key decl; do
		case "$key" in
		type\ *)
			echo "     | mismatch: $key: member type differs from the table's \`$decl\`"
			continue ;;
		esac
		exp=$(grep -F "$key	" "$TMP/expected.txt" | head -1 | cut -f2)
		have=""
		[ -n "$got" ] && have=$(grep -F "$key	" "$got" | head -1 | cut -f2)
		echo "     | mismatch: $key: expected ${exp:-?}, got ${have:-?}"
	done
	grep '^BROKEN' "$TMP/explain" | cut -f3 | sort | uniq -c | sort -rn |
		sed -n '1,40p' | awk '{ n = $1; $1 = ""; printf "     | not evaluable (%d items):%s\n", n, $0 }'
	grep '^OTHER' "$TMP/explain" | cut -f2 | sed -n '1,20p' | sed 's/^/     | other: /'
}

HEADERS=$($PY -c 'import sys; sys.path.insert(0, "tests/abi"); import gen_c_check as g; print(" ".join(g.ALL_HEADERS))')
# PARTIAL=1: while include/ is being written, generate the checks against the
# headers that exist so far (a missing header still counts as a failure).
GENH=""
if [ "${PARTIAL:-0}" = 1 ]; then
	for h in $HEADERS; do
		[ -f "include/$h" ] && GENH="$GENH${GENH:+,}$h"
	done
	GEN="$GEN --headers $GENH"
fi

# 1. Headers exist and resolve into include/.
missing=""
for h in $HEADERS; do
	[ -f "include/$h" ] || missing="$missing $h"
done
if [ -n "$missing" ]; then
	fail "public headers present in include/ (missing:$missing)"
else
	pass "public headers present in include/"
fi

$GEN -o "$TMP/abi_check.c" || { fail "generate C checks"; }
$GEN --lang c++ -o "$TMP/abi_check.cc" || { fail "generate C++ checks"; }

if $CC -std=c11 -Iinclude -M "$TMP/abi_check.c" >"$TMP/deps" 2>"$TMP/deps.err"; then
	leaks=$(tr ' \\' '\n\n' <"$TMP/deps" | grep '/rdma/' | grep -v "^$ROOT/include/\|^include/" | sort -u)
	if [ -n "$leaks" ]; then
		fail "headers resolve inside include/ (system copies used: $(echo $leaks))"
	else
		pass "headers resolve inside include/"
	fi
else
	fail "headers resolve inside include/ (preprocessing failed)"
	show "$TMP/deps.err"
fi

# 2. Each header on its own, C and C++.
for h in $HEADERS rdma/fi_xpu_device.h; do
	[ -f "include/$h" ] || continue
	printf '#include <%s>\nint abi_standalone_dummy;\n' "$h" >"$TMP/one.c"
	if $CC -std=c11 $WARN -Iinclude -c "$TMP/one.c" -o "$TMP/one.o" 2>"$TMP/one.err"; then
		pass "standalone C11: $h"
	else
		fail "standalone C11: $h"; show "$TMP/one.err"
	fi
	if $CXX -std=c++11 $WARN -Iinclude -x c++ -c "$TMP/one.c" -o "$TMP/one.o" 2>"$TMP/one.err"; then
		pass "standalone C++11: $h"
	else
		fail "standalone C++11: $h"; show "$TMP/one.err"
	fi
done

# 3. Generated checks.
if $CC -std=c11 $WARN -Iinclude -c "$TMP/abi_check.c" -o "$TMP/abi_check.o" 2>"$TMP/c.err"; then
	pass "layout/constant checks, gcc -std=c11 $WARN ($(grep -c "^_Static_assert" "$TMP/abi_check.c") asserts)"
else
	fail "layout/constant checks, gcc -std=c11 $WARN ($(grep -c 'error:' "$TMP/c.err") errors)"
	explain "$TMP/abi_check.c" "$TMP/c.err"
fi
if [ "$PEDANTIC" != 0 ] && [ ! -s "$TMP/c.err" ] || [ "$PEDANTIC" = 1 ]; then
	if $CC -std=c11 $WARN -pedantic-errors -Iinclude -c "$TMP/abi_check.c" -o "$TMP/abi_check.o" 2>"$TMP/cp.err"; then
		pass "layout/constant checks, gcc -std=c11 -pedantic-errors"
	elif [ "$PEDANTIC" = 1 ]; then
		fail "layout/constant checks, gcc -std=c11 -pedantic-errors"; show "$TMP/cp.err"
	else
		skip "gcc -pedantic-errors (headers not pedantic-clean; PEDANTIC=1 makes this a failure)"
		grep 'error:' "$TMP/cp.err" | sed -n '1,10p' | sed 's/^/     | /'
	fi
fi
if $CXX -std=c++11 $WARN -Iinclude -c "$TMP/abi_check.cc" -o "$TMP/abi_check.o" 2>"$TMP/cc.err"; then
	pass "layout/constant checks, g++ -std=c++11 $WARN"
else
	fail "layout/constant checks, g++ -std=c++11 $WARN ($(grep -c 'error:' "$TMP/cc.err") errors)"
	explain "$TMP/abi_check.cc" "$TMP/cc.err"
fi

# 4. String constants: content, at run time.
if [ -s "$TMP/c.err" ]; then
	skip "string constants (the generated checks do not compile yet)"
elif $CC -std=c11 $WARN -Iinclude -DABI_CHECK_MAIN "$TMP/abi_check.c" -o "$TMP/abi_strings" 2>"$TMP/s.err" &&
	"$TMP/abi_strings" 2>"$TMP/s.out"; then
	pass "string constants"
else
	fail "string constants"; show "$TMP/s.err"; show "$TMP/s.out"
fi

# 5. The upstream-style sample program.
if $CC -std=c11 $WARN -Iinclude -c tests/c/compile_sample.c -o "$TMP/sample.o" 2>"$TMP/sample.err"; then
	pass "tests/c/compile_sample.c, gcc -std=c11 $WARN"
else
	fail "tests/c/compile_sample.c, gcc -std=c11 $WARN"; show "$TMP/sample.err"
fi
if $CXX -std=c++11 $WARN -Iinclude -x c++ -c tests/c/compile_sample.c -o "$TMP/sample.o" 2>"$TMP/sample.err"; then
	pass "tests/c/compile_sample.c, g++ -std=c++11 $WARN"
else
	fail "tests/c/compile_sample.c, g++ -std=c++11 $WARN"; show "$TMP/sample.err"
fi
# The sample must be genuine upstream usage: without its XPU part it has to
# build against the system's upstream headers too.
if [ -f /usr/include/rdma/fabric.h ]; then
	if $CC -std=c11 $WARN -DSAMPLE_NO_XPU -c tests/c/compile_sample.c -o "$TMP/sample.o" 2>"$TMP/sample.err"; then
		pass "tests/c/compile_sample.c against /usr/include/rdma (no XPU part)"
	else
		fail "tests/c/compile_sample.c against /usr/include/rdma (no XPU part)"; show "$TMP/sample.err"
	fi
else
	skip "sample against system headers (none installed)"
fi

# The roff man pages must be rebuilt from their Markdown sources.
for md in man/*.md; do
	[ -f "$md" ] || continue
	if $PY man/md2man.py --check "$md" >"$TMP/man.out" 2>&1; then
		pass "${md%.md} up to date with $md"
	else
		fail "${md%.md} up to date with $md"; show "$TMP/man.out"
	fi
done

# 6. The checks can fail: alter one struct size and one constant in a copy of
# the tables; each must break the build.
mkdir -p "$TMP/bad"
mutant() { # $1 = key of the altered item, $2 = awk program, $3 = table
	cp tests/abi/*.tsv "$TMP/bad/"
	awk -F'\t' -v OFS='\t' "$2" "tests/abi/$3" >"$TMP/bad/$3"
	if cmp -s "tests/abi/$3" "$TMP/bad/$3"; then
		fail "mutation of $1 (table not altered)"
		return
	fi
	if ! $GEN --tables "$TMP/bad" -o "$TMP/bad/abi_check.c"; then
		fail "mutation of $1 (generator failed)"
		return
	fi
	$CC -std=c11 -Iinclude -c "$TMP/bad/abi_check.c" -o "$TMP/bad/x.o" 2>"$TMP/bad/err"
	# The altered item must fail in the mutant and not already in the real run.
	if grep -q "static assertion failed: \"$1\"" "$TMP/bad/err" &&
		! grep -q "static assertion failed: \"$1\"" "$TMP/c.err"; then
		pass "mutation of $1 detected"
	else
		fail "mutation of $1 not detected"
	fi
}
mutant "sizeof struct fi_info" '$1=="struct fi_info" && $2=="(sizeof)" {$4=$4+8} {print}' layout.tsv
mutant "offsetof struct fi_xpu_ops.import" '$1=="struct fi_xpu_ops" && $2=="import" {$3=$3+8} {print}' layout.tsv
mutant "membersize struct fi_cq_attr.xpu_ctx" '$1=="struct fi_cq_attr" && $2=="xpu_ctx" {$4=4} {print}' layout.tsv
mutant "const FI_XPU_IMPORT_DEVICEMAP" '$1=="FI_XPU_IMPORT_DEVICEMAP" {$2=$2*2} {print}' constants.tsv

echo "header checks: $PASS passed, $FAIL failed, $SKIP skipped"
[ "$FAIL" -eq 0 ]
