#!/bin/sh
# Link libfabric.so.1 from the capi static archive.
#
# A Rust cdylib cannot carry our own version nodes (rustc writes its own
# version script), so the library is linked here by the C compiler:
# the whole archive, our version script (capi/libfabric.map), the soname.
# No --gc-sections: it would drop the versioned compat aliases.
#
# Usage: capi/link.sh [ARCHIVE] [OUTDIR]
#   ARCHIVE defaults to target/release/librfabric_capi.a
#   OUTDIR  defaults to build/lib
set -eu

root=$(cd "$(dirname "$0")/.." && pwd)
archive=${1:-$root/target/release/librfabric_capi.a}
outdir=${2:-$root/build/lib}
version=${RFABRIC_VERSION:-$(sed -n 's/^version *= *"\(.*\)"/\1/p' "$root/Cargo.toml" | head -n1)}
CC=${CC:-cc}

# The real file carries the ABI series (1) and the release: libfabric.so.1.<release>.
real=libfabric.so.1.$version

[ -f "$archive" ] || { echo "link.sh: missing $archive (run cargo build --release -p rfabric-capi)" >&2; exit 1; }
mkdir -p "$outdir"

"$CC" -shared -o "$outdir/$real" \
	-Wl,--whole-archive "$archive" -Wl,--no-whole-archive \
	-Wl,--version-script="$root/capi/libfabric.map" \
	-Wl,-soname,libfabric.so.1 \
	-Wl,-z,relro,-z,now -Wl,-z,noexecstack \
	-lpthread -ldl -lm -lgcc_s -lc

ln -sf "$real" "$outdir/libfabric.so.1"
ln -sf libfabric.so.1 "$outdir/libfabric.so"
echo "linked $outdir/$real"
