#!/bin/sh
# Build tests/c/bad_input_table.c against our headers (-Wall -Wextra -Werror,
# ASan and UBSan, or valgrind: tests/c/check_mode.sh) and run it on the
# library in LIBDIR. It prints the bad-input table of docs/TESTING.md and
# fails when a call does not return its documented code; this script fails
# too when the table in the docs differs from the printed one.
#   tests/c/bad_input_table.sh LIBDIR            check
#   tests/c/bad_input_table.sh LIBDIR --update   rewrite the table in the docs
set -eu
lib=$(cd "${1:?usage: bad_input_table.sh LIBDIR [--update]}" && pwd)
cd "$(dirname "$0")/../.."
. tests/c/check_mode.sh
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cc -std=c11 -Wall -Wextra -Werror -Iinclude $SAN_CFLAGS \
	-o "$tmp/bad_input_table" tests/c/bad_input_table.c -L"$lib" -l:libfabric.so.1 -Wl,-rpath,"$lib"
rc=0
rf_run 120 "$tmp/bad_input_table" >"$tmp/printed" || rc=$?
docs=docs/TESTING.md
begin='<!-- bad-input-table: printed by tests/c/bad_input_table.c, checked by tests/c/bad_input_table.sh -->'
end='<!-- end of bad-input-table -->'
awk -v b="$begin" -v e="$end" '$0 == e { p = 0 } p { print } $0 == b { p = 1 }' "$docs" >"$tmp/documented"
if [ "${2:-}" = --update ]; then
	grep -qxF "$begin" "$docs" && grep -qxF "$end" "$docs" || { echo "markers missing in $docs"; exit 1; }
	awk -v b="$begin" -v e="$end" -v t="$tmp/printed" '
		$0 == b { print; while ((getline l < t) > 0) print l; skip = 1; next }
		$0 == e { skip = 0 }
		!skip { print }' "$docs" >"$tmp/new" && cat "$tmp/new" >"$docs"
	cp "$tmp/printed" "$tmp/documented"
fi
if ! diff -u "$tmp/documented" "$tmp/printed"; then
	echo "the bad-input table in $docs is not what tests/c/bad_input_table.c prints:"
	echo "rerun tests/c/bad_input_table.sh LIBDIR --update and review the difference"
	exit 1
fi
echo "bad_input_table: $(grep -c '^| `' "$tmp/printed") rows, the table in $docs is current"
exit "$rc"
