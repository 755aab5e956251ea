#!/bin/sh
# Check the dynamic symbol table of libfabric.so.1 against tests/abi/symbols.tsv:
#  - every row (symbol, version node, default "@@" or compat "@") is exported
#    exactly so; objdump -T prints a compat (hidden) version in parentheses;
#  - all eleven version nodes FABRIC_1.0 ... FABRIC_1.10 are defined;
#  - nothing else is exported (no Rust symbols, no helpers).
# Usage: tests/symbols/check_symbols.sh [LIBRARY]   (default build/lib/libfabric.so.1)
set -u

root=$(cd "$(dirname "$0")/../.." && pwd)
lib=${1:-$root/build/lib/libfabric.so.1}
table=$root/tests/abi/symbols.tsv
pass=0
fail=0

ok()  { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }

if [ ! -f "$lib" ]; then
	echo "FAIL: no library at $lib"
	echo "0 passed, 1 failed"
	exit 1
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Defined dynamic symbols as "name<TAB>version<TAB>binding", binding being
# default or compat; version-node definitions go to a separate list.
objdump -T "$lib" | awk -v nodes="$tmp/nodes" '
	NF >= 6 && $0 !~ /\*UND\*/ && ($2 ~ /^[gwu]/) {
		name = $NF
		ver = $(NF - 1)
		bind = "default"
		if (ver ~ /^\(.*\)$/) { bind = "compat"; gsub(/[()]/, "", ver) }
		if ($0 ~ /\*ABS\*/ && name == ver) { print name > nodes; next }
		printf "%s\t%s\t%s\n", name, ver, bind
	}' | sort > "$tmp/actual"
[ -f "$tmp/nodes" ] || : > "$tmp/nodes"

awk -F '\t' 'NR > 1 && $1 != "" { printf "%s\t%s\t%s\n", $1, $2, $3 }' "$table" | sort > "$tmp/expected"

if [ ! -s "$tmp/expected" ]; then
	bad "no rows read from $table"
fi

# 1. Every row of the table is exported as it says.
while IFS="$(printf '\t')" read -r sym ver bind; do
	if grep -qxF "$(printf '%s\t%s\t%s' "$sym" "$ver" "$bind")" "$tmp/actual"; then
		ok
	else
		have=$(awk -F '\t' -v s="$sym" -v v="$ver" '$1 == s && $2 == v { print $3 }' "$tmp/actual")
		if [ -n "$have" ]; then
			bad "$sym@$ver is $have, expected $bind"
		else
			bad "$sym@$ver ($bind) is not exported"
		fi
	fi
done < "$tmp/expected"

# 2. All version nodes exist.
for n in 0 1 2 3 4 5 6 7 8 9 10; do
	if grep -qxF "FABRIC_1.$n" "$tmp/nodes"; then ok; else bad "version node FABRIC_1.$n missing"; fi
done
extra_nodes=$(grep -vxE 'FABRIC_1\.([0-9]|10)' "$tmp/nodes" || true)
if [ -n "$extra_nodes" ]; then bad "unexpected version nodes: $(echo $extra_nodes)"; else ok; fi

# 3. Nothing else is exported.
extra=$(comm -23 "$tmp/actual" "$tmp/expected")
if [ -n "$extra" ]; then
	n=$(printf '%s\n' "$extra" | wc -l)
	bad "$n symbol(s) exported that symbols.tsv does not list:"
	printf '%s\n' "$extra" | head -n 20 | sed 's/^/    /'
else
	ok
fi

# 4. The soname is the one programs were linked against.
soname=$(objdump -p "$lib" | awk '$1 == "SONAME" { print $2 }')
if [ "$soname" = "libfabric.so.1" ]; then ok; else bad "SONAME is '$soname', expected libfabric.so.1"; fi

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
