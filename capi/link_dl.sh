#!/bin/sh
# Link a DL provider, lib<name>-fi.so, from a capi static archive built with
# `--no-default-features --features dl,<provider>`.
#
# The library exports fi_prov_ini alone (capi/dl.map) and needs no
# libfabric.so.1: it carries its own copy of the core and reaches the
# loading library's logging and parameters at run time (capi/src/prov_ini.rs).
# -z nodelete: a host's dlclose at exit leaves the code mapped, so threads
# or handles that outlive the host's cleanup never run unmapped code.
#
# Usage: capi/link_dl.sh ARCHIVE OUTFILE
set -eu

root=$(cd "$(dirname "$0")/.." && pwd)
archive=${1:?usage: link_dl.sh ARCHIVE OUTFILE}
out=${2:?usage: link_dl.sh ARCHIVE OUTFILE}
CC=${CC:-cc}

[ -f "$archive" ] || { echo "link_dl.sh: missing $archive" >&2; exit 1; }
case $(basename "$out") in
lib*-fi.so) ;;
*) echo "link_dl.sh: $out: a DL provider is named lib<name>-fi.so" >&2; exit 1 ;;
esac
mkdir -p "$(dirname "$out")"

"$CC" -shared -o "$out.tmp" \
	-Wl,--whole-archive "$archive" -Wl,--no-whole-archive \
	-Wl,--version-script="$root/capi/dl.map" \
	-Wl,--gc-sections \
	-Wl,-z,relro,-z,now -Wl,-z,noexecstack -Wl,-z,nodelete \
	-lpthread -ldl -lm -lgcc_s -lc

# Exactly one exported function: fi_prov_ini.
exports=$(nm -D --defined-only "$out.tmp" | awk '$2 ~ /^[A-Z]$/ {print $3}' | sort | tr '\n' ' ')
if [ "$exports" != "fi_prov_ini " ]; then
	echo "link_dl.sh: $out exports more than fi_prov_ini: $exports" >&2
	rm -f "$out.tmp"; exit 1
fi
mv "$out.tmp" "$out"
echo "linked $out"
