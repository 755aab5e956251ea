#!/bin/sh
# Whether a release build used pgo/'s profile as made (make check-pgo).
#
# Usage: scripts/pgo-check.sh BUILD-LOG ARCHIVE
#   BUILD-LOG  cargo's output for the release build of rfabric-capi (cargo
#              shows a fresh crate's warnings again, so a build with
#              nothing to do still lists them)
#   ARCHIVE    the librfabric_capi.a it made
#
# Fails when a function the training ran has changed since (rustc warns
# "hash mismatch ... up to N count discarded" with N > 0: its counts no
# longer fit and it is compiled as without a profile), or when nothing in
# the archive is laid out as hot (the profile was not read at all, e.g.
# after a version change renamed every function), or when the C edge's
# fi_cq_read, the hottest call of a polling application, is not among the
# hot functions.
set -eu
log=$1
archive=$2
[ -f "$log" ] && [ -f "$archive" ] || { echo "pgo-check.sh: usage: pgo-check.sh BUILD-LOG ARCHIVE" >&2; exit 2; }

stale=$(grep -o 'hash mismatch) [^ ]* Hash = [0-9]* up to [0-9]* count discarded' "$log" \
	| awk '$(NF-2) > 0 { print $3 "  (" $(NF-2) " counts)" }' | sort -u)
hot=$(objdump -h "$archive" | awk '$2 ~ /^\.text\.hot\./ { print $2 }')
nhot=$(printf '%s\n' "$hot" | grep -c . || true)
status=0
if [ -n "$stale" ]; then
	echo "check-pgo: $(printf '%s\n' "$stale" | wc -l) function(s) the training ran changed since the profile was made (make pgo-profile):"
	printf '%s\n' "$stale" | { c++filt 2>/dev/null || cat; } | sed 's/^/  /'
	status=1
fi
if [ "$nhot" -eq 0 ]; then
	echo "check-pgo: no function laid out as hot: the build did not use the profile (make pgo-profile)"
	status=1
elif ! printf '%s\n' "$hot" | grep -q 'cq_read'; then
	echo "check-pgo: $nhot hot functions, but the C edge's cq_read is not one of them"
	status=1
fi
[ $status -eq 0 ] && echo "check-pgo: the profile applies: $nhot hot functions, none the training ran has changed"
exit $status
