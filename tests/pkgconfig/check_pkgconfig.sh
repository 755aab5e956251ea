#!/bin/sh
# Check an installed prefix: pkg-config answers, and a C program built with
# its flags links against libfabric.so and runs.
# Usage: tests/pkgconfig/check_pkgconfig.sh PREFIX
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
prefix=$(cd "${1:?usage: $0 PREFIX}" && pwd)
CC=${CC:-cc}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
flags=$(pkg-config --cflags --libs libfabric)
echo "pkg-config: $flags"
[ "$(pkg-config --modversion libfabric)" = "${RFABRIC_VERSION:-2.8.0}" ] || { echo "FAIL: modversion"; exit 1; }
case "$flags" in *"-I$prefix/include"*"-L$prefix/lib"*"-lfabric"*) ;; *) echo "FAIL: flags"; exit 1 ;; esac
# shellcheck disable=SC2086
"$CC" -o "$tmp/smoke" "$root/tests/pkgconfig/smoke.c" $flags
LD_LIBRARY_PATH="$prefix/lib" "$tmp/smoke"
echo "pkg-config check passed"

# The DL providers make install puts in <libdir>/libfabric/ load with no
# FI_PROVIDER_PATH: the installed fi_info lists them beside the built-ins.
for so in "$prefix"/lib/libfabric/lib*-fi.so; do
	[ -e "$so" ] || { echo "FAIL: no DL provider in $prefix/lib/libfabric/"; exit 1; }
	name=$(basename "$so" -fi.so); name=${name#lib}
	env -u FI_PROVIDER_PATH -u FI_PROVIDER LD_LIBRARY_PATH="$prefix/lib" "$prefix/bin/fi_info" -l >"$tmp/l"
	grep -qx "$name:" "$tmp/l" || { echo "FAIL: installed fi_info -l does not list $name from $so"; cat "$tmp/l"; exit 1; }
	echo "installed DL provider $name loads from $prefix/lib/libfabric/"
done
