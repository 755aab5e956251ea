#!/usr/bin/env python3
"""Compare ABI values measured from two header sets and the tables.

  oracle_compare.py EXPECTED SYSTEM OURS ALLOW

Each of EXPECTED (from the tables), SYSTEM (printed by a program built
against the installed upstream headers) and OURS (the same program built
against include/) holds `KEY<TAB>VALUE` lines.  Only keys present in SYSTEM
are compared (the driver drops the items the system headers do not declare).

A key whose value differs between SYSTEM and the tables, or between SYSTEM
and OURS, must be listed in ALLOW (`KEY<TAB>reason` lines, `#` comments):
those are the places where the API evolved between the installed upstream
release and the one the tables describe.  An allow-list entry that no longer
differs is reported as stale, and is an error too, so the list stays exact.

Exit status 0 when every difference is allowed and no entry is stale.
"""

import sys


def read_kv(path):
    out = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\n")
            if not line or line.startswith("#"):
                continue
            key, _, value = line.partition("\t")
            out[key] = value
    return out


def read_allow(path):
    allow = {}
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.rstrip("\n")
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            key, _, reason = line.partition("\t")
            if not reason.strip():
                sys.exit("%s:%d: entry without a reason: %s" % (path, n, key))
            allow[key] = reason.strip()
    return allow


def main(argv):
    if len(argv) != 4:
        sys.exit(__doc__)
    expected, system, ours, allow = (read_kv(argv[0]), read_kv(argv[1]),
                                     read_kv(argv[2]), read_allow(argv[3]))
    problems = []
    allowed_hits = set()
    compared = 0
    for key in sorted(system):
        sv = system[key]
        compared += 1
        diffs = []
        ev = expected.get(key)
        if ev is not None and ev != sv:
            diffs.append("tables %s" % ev)
        ov = ours.get(key)
        if ov is None:
            problems.append("%s: missing from our headers' output "
                            "(system %s)" % (key, sv))
            continue
        if ov != sv:
            diffs.append("ours %s" % ov)
        if not diffs:
            continue
        if key in allow:
            allowed_hits.add(key)
            print("allowed  %s: system %s, %s (%s)"
                  % (key, sv, ", ".join(diffs), allow[key]))
        else:
            problems.append("%s: system %s, %s" % (key, sv, ", ".join(diffs)))
    stale = sorted(set(allow) - allowed_hits)
    for key in stale:
        problems.append("%s: allow-list entry but no difference (stale)" % key)
    for p in problems:
        print("MISMATCH " + p)
    print("oracle: %d items compared, %d allowed differences, %d problems"
          % (compared, len(allowed_hits), len(problems)))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
