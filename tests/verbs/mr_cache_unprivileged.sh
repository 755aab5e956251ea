#!/bin/sh
# The registration cache's tests (core/src/objects/mr_cache_tests.rs:
# mmap, munmap, a new mapping at the same address, mremap,
# madvise(MADV_DONTNEED), fork) as an unprivileged user, where the kernel
# hides page frame numbers and vm.unprivileged_userfaultfd is usually 0:
# the userfaultfd monitor (UFFD_USER_MODE_ONLY) must still work. The
# pagemap monitor's tests are left out there
# (RFABRIC_TEST_MR_CACHE_NO_PAGEMAP=1), and it must be unavailable.
# Run as root, it drops to nobody with setpriv; run as another user, it
# runs as that user.
# Usage: tests/verbs/mr_cache_unprivileged.sh
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root" || exit 1
exe=$(cargo test -j2 -p rfabric-core --lib --no-run 2>&1 | sed -n 's/.*Executable .*(\(.*\))$/\1/p' | tail -n 1)
[ -n "$exe" ] && [ -x "$exe" ] || { echo "FAIL could not build the core's test binary"; exit 1; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cp "$exe" "$tmp/core-tests" && chmod 755 "$tmp" "$tmp/core-tests"
if [ "$(id -u)" = 0 ]; then
	as="setpriv --reuid=65534 --regid=65534 --clear-groups"
else
	as=""
fi
echo "vm.unprivileged_userfaultfd = $(cat /proc/sys/vm/unprivileged_userfaultfd 2>/dev/null || echo '?')"
cd "$tmp" || exit 1
fail=0
# One test thread: the tests take turns anyway (a lock), and a harness
# thread started meanwhile could map its stack at an address a test has
# just freed and maps again (MAP_FIXED_NOREPLACE then fails: seen once in
# mremap_invalidates).
if env RFABRIC_TEST_MR_CACHE_NO_PAGEMAP=1 $as ./core-tests mr_cache --test-threads=1 >out.txt 2>&1 && grep -q 'test result: ok' out.txt; then
	echo "PASS the cache's tests unprivileged: $(grep 'test result' out.txt)"
else
	echo "FAIL the cache's tests unprivileged:"; tail -30 out.txt; fail=1
fi
# Without the opt-out, the pagemap tests must fail there: frame numbers
# are hidden from unprivileged processes, and the cache must see that.
if $as ./core-tests mr_cache::tests::a_second_registration >pm.txt 2>&1; then
	echo "FAIL the pagemap monitor claimed frame numbers unprivileged"; fail=1
elif grep -q 'monitor Pagemap unavailable' pm.txt; then
	echo "PASS the pagemap monitor is unavailable unprivileged (frame numbers hidden)"
else
	echo "FAIL unexpected failure:"; tail -10 pm.txt; fail=1
fi
exit $fail
