#!/bin/sh
# DL provider loading: good providers built against two ABI generations load
# and answer fi_getinfo; broken ones are skipped with a warning, never a crash.
# Usage: tests/dl/run.sh LIBDIR   (LIBDIR holds our libfabric.so.1)
set -u
lib=$(cd "${1:?usage: run.sh LIBDIR}" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
pass=0 fail=0
ok() { pass=$((pass + 1)); echo "ok   $1"; }
bad() { fail=$((fail + 1)); echo "FAIL $1"; }
CC=${CC:-cc}
build() { # name, include dir, lib dir to link against, extra flags
	out=$work/prov/lib$1-fi.so; shift
	inc=$1; ldir=$2; shift 2
	mkdir -p "$work/prov"
	$CC -shared -fPIC -Wall -Werror -I"$inc" -o "$out" -Wl,--no-as-needed "$here/fake_prov.c" -L"$ldir" -l:libfabric.so.1 "$@"
}
# A provider built against Debian's 1.17 headers and library: it binds
# fi_dupinfo@FABRIC_1.3, so it hands back lists in the 1.3 shape.
build old /usr/include /usr/lib/x86_64-linux-gnu -DFAKE_NAME='"fakeold"' || bad "build fakeold"
# One built against our headers and library: current shape.
if [ -f "$root/include/rdma/fabric.h" ]; then
	build new "$root/include" "$lib" -DFAKE_NAME='"fakenew"' -DFAKE_API='FI_VERSION(2, 8)' || bad "build fakenew"
fi
build noini /usr/include /usr/lib/x86_64-linux-gnu -DFAKE_NO_INI || bad "build noini"
build null /usr/include /usr/lib/x86_64-linux-gnu -DFAKE_NULL || bad "build null"
build noname /usr/include /usr/lib/x86_64-linux-gnu -DFAKE_NO_NAME || bad "build noname"
build newer /usr/include /usr/lib/x86_64-linux-gnu -DFAKE_NAME='"fakenewer"' -DFAKE_API='FI_VERSION(2, 99)' || bad "build newer"
build major /usr/include /usr/lib/x86_64-linux-gnu -DFAKE_NAME='"fakemajor"' -DFAKE_API='FI_VERSION(3, 0)' || bad "build major"
# Needs a library that does not exist: dlopen fails.
printf 'int rf_missing_dep_marker(void);\nint rf_missing_dep_marker(void){return 0;}\n' > "$work/dep.c"
$CC -shared -fPIC -o "$work/libgone.so" "$work/dep.c"
build missingdep /usr/include /usr/lib/x86_64-linux-gnu -L"$work" -l:libgone.so || bad "build missingdep"
rm -f "$work/libgone.so"
# Not a provider name pattern: never opened.
cp "$work/prov/libold-fi.so" "$work/prov/libnotaprovider.so"

out=$work/out err=$work/err
LD_LIBRARY_PATH=$lib FI_PROVIDER_PATH=$work/prov FI_LOG_LEVEL=warn /usr/bin/fi_info -l >"$out" 2>"$err"
rc=$?
[ $rc -eq 0 ] && ok "fi_info -l exits 0 with broken providers present" || bad "fi_info -l rc=$rc"
grep -q '^fakeold:' "$out" && ok "provider built on 1.17 listed" || bad "fakeold not listed"
if [ -f "$work/prov/libnew-fi.so" ]; then
	grep -q '^fakenew:' "$out" && ok "provider built on our headers listed" || bad "fakenew not listed"
fi
grep -q '^shm:' "$out" && ok "built-in shm still listed" || bad "shm missing"
for case in "libnoini-fi.so:no fi_prov_ini" "libnull-fi.so:returned NULL" "libnoname-fi.so:no name" \
	"libnewer-fi.so:newer than ours" "libmajor-fi.so:unsupported provider API version" \
	"libmissingdep-fi.so:dlopen failed"; do
	f=${case%%:*} why=${case#*:}
	grep "skipping DL provider" "$err" | grep "$f" | grep -q "$why" && ok "$f skipped: $why" || bad "$f: no warning containing '$why'"
done
grep -q notaprovider "$err" "$out" && bad "libnotaprovider.so was looked at" || ok "files not named lib*-fi.so ignored"
grep -q -E '^fake(newer|major):' "$out" && bad "unsupported version listed" || ok "unsupported versions not listed"

# fi_getinfo through a 1.3-shape provider: the core widens its list.
LD_LIBRARY_PATH=$lib FI_PROVIDER_PATH=$work/prov /usr/bin/fi_info -p fakeold -v >"$out" 2>"$err"
grep -q 'name: fakeold_domain' "$out" && grep -q 'max_msg_size: 1234' "$out" && grep -q 'prov_name: fakeold' "$out" \
	&& ok "1.3-shape provider's info widened and named" || bad "fakeold info wrong: $(head -c 300 "$out")"
grep -q 'mr_key_size: 7' "$out" && ok "domain attr copied" || bad "domain attr lost"
# FI_PROVIDER excludes a DL provider.
LD_LIBRARY_PATH=$lib FI_PROVIDER_PATH=$work/prov FI_PROVIDER='^fakeold' /usr/bin/fi_info -l >"$out" 2>/dev/null
grep -q '^fakeold:' "$out" && bad "FI_PROVIDER=^fakeold ignored" || ok "FI_PROVIDER=^fakeold excludes it"
LD_LIBRARY_PATH=$lib FI_PROVIDER_PATH=$work/prov FI_PROVIDER='fakeold' /usr/bin/fi_info -l >"$out" 2>/dev/null
[ "$(grep -c ':$' "$out")" = 1 ] && grep -q '^fakeold:' "$out" && ok "FI_PROVIDER=fakeold keeps only it" || bad "FI_PROVIDER=fakeold: $(cat "$out")"
# A path that does not exist is not an error.
LD_LIBRARY_PATH=$lib FI_PROVIDER_PATH=/nonexistent/dir /usr/bin/fi_info -l >"$out" 2>&1
[ $? -eq 0 ] && ok "missing FI_PROVIDER_PATH dir tolerated" || bad "missing dir broke fi_info"

echo "dl providers: $pass passed, $fail failed"
[ $fail -eq 0 ]
