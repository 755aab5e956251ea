#!/usr/bin/env python3
"""Generate compile-time ABI checks from the tables in tests/abi/.

The tables (layout.tsv, constants.tsv, strings.tsv) record the binary
interface of upstream libfabric.  This script turns every row into a check
that a compiler evaluates against a header set:

  assert mode (default)
      A translation unit of C11 `_Static_assert`s (or C++11 `static_assert`s
      with --lang c++).  It compiles cleanly only if the headers agree with
      every row: sizeof of each struct, offsetof and size of each member, the
      member's declared type, and the value of every integer constant.
      String constants are checked for length at compile time and for content
      by `abi_check_strings()`, which returns the number of mismatches (and a
      `main` calling it is added with -DABI_CHECK_MAIN).

  print mode (--mode print)
      A C program that prints one line per item, `KEY<TAB>VALUE`, so that two
      header sets can be compared by running the program built against each.
      Every item sits on a line of its own, tagged with `/*@KEY@*/`, so that a
      driver can drop items a header set does not declare (see
      oracle_debian.sh).

Usage:
  gen_c_check.py [--lang c|c++] [--mode assert|print] [--tables DIR]
                 [--headers h1,h2,...] [--skip FILE] [--no-types] [-o OUT]

Only the Python standard library is used.
"""

import argparse
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

# Every public header, included in this order.
ALL_HEADERS = [
    "rdma/fabric.h",
    "rdma/fi_domain.h",
    "rdma/fi_endpoint.h",
    "rdma/fi_eq.h",
    "rdma/fi_cm.h",
    "rdma/fi_errno.h",
    "rdma/fi_rma.h",
    "rdma/fi_tagged.h",
    "rdma/fi_atomic.h",
    "rdma/fi_collective.h",
    "rdma/fi_trigger.h",
    "rdma/fi_ext.h",
    "rdma/fi_xpu.h",
    "rdma/providers/fi_prov.h",
    "rdma/providers/fi_log.h",
    "rdma/providers/fi_peer.h",
]

# ---------------------------------------------------------------------------
# Deliberate differences between our headers and the tables.  Each entry says
# what is checked instead, and why.
# ---------------------------------------------------------------------------

# Constants whose value is checked with a relation instead of equality.
#   name -> (operator, value, reason)
CONSTANT_RELATIONS = {
    "FI_MINOR_VERSION": (
        ">=", 6,
        "the tables were measured from a header that still said 6; we "
        "declare the API version we implement (2.8), which is at least that"),
}

# Members whose declared type differs on purpose.  Offset and size are still
# compared with the table; only the type check uses this declaration.
#   (type, member) -> (declaration, reason)
TYPE_OVERRIDES = {
    ("struct fi_xpu_ops", "import"): (
        "int (*import)(uint64_t, void *, uint64_t, uint64_t, int, void * *)",
        "the import callback takes the DMA-BUF `int fd` (FI_XPU_IMPORT_DMABUF) "
        "before dev_addr; same slot, same pointer size"),
}

# Constants of ours that the tables do not list (new with the FI_XPU work).
#   name -> (value, reason)
EXTRA_CONSTANTS = {
    "FI_XPU_IMPORT_DMABUF": (1 << 2, "import flag: fd is a DMA-BUF of the resource"),
    "FI_XPU_PROV_SHM": (2, "provider id of the shm provider's host XPU"),
}

# Only libfabric's own names are checked.  The constant table also lists a
# few PTHREAD_* enumerators that leaked in from <pthread.h>; their values
# belong to the C library, and several exist only with _GNU_SOURCE.
FOREIGN_PREFIX_OK = ("FI_",)

ANON_RE = re.compile(r"^\(anonymous ")
BITFIELD_RE = re.compile(r":\s*\d+\s*$")
IDENT_RE = re.compile(r"^[A-Za-z_][A-Za-z_0-9]*$")


def read_tsv(path):
    """Rows of a TSV file with a header line, as lists of strings."""
    rows = []
    with open(path, encoding="utf-8") as f:
        header = f.readline().rstrip("\n").split("\t")
        for lineno, line in enumerate(f, start=2):
            line = line.rstrip("\n")
            if not line.strip():
                continue
            cols = line.split("\t")
            if len(cols) < len(header):
                cols += [""] * (len(header) - len(cols))
            rows.append((lineno, cols))
    return header, rows


def c_type_name(t):
    """The table's `type` column as a C type name.

    `struct X` / `union X` / `enum X` are used as written; anything else is
    taken to be a typedef name and used bare.
    """
    t = t.strip()
    if not t:
        raise ValueError("empty type name")
    return t


def member_pointer_type(decl, member):
    """Turn a member declaration into the type of a pointer to that member.

    `uint64_t caps` -> `uint64_t (*)`; `void * ctx[4]` -> `void * (*)[4]`;
    `int (*send)(struct fid_ep *, ...)` -> `int (*(*))(struct fid_ep *, ...)`.
    Returns None when the declaration cannot be spelled as a type (unnamed
    union or struct bodies, bitfields).
    """
    if "{" in decl or BITFIELD_RE.search(decl):
        return None
    pat = re.compile(r"\b%s\b" % re.escape(member))
    matches = list(pat.finditer(decl))
    if not matches:
        return None
    # The declarator name is the first occurrence that is not a type word:
    # for function pointers it is inside `(*name)`, otherwise it is the last
    # identifier before an optional array suffix.
    fp = re.search(r"\(\s*\*\s*(%s)\s*\)" % re.escape(member), decl)
    if fp:
        start, end = fp.start(1), fp.end(1)
    else:
        m = matches[-1]
        start, end = m.start(), m.end()
    return decl[:start] + "(*)" + decl[end:]


def c_int64_literal(v):
    """A signed 64-bit value written as a C constant expression."""
    if v == -(1 << 63):
        return "(-9223372036854775807LL - 1)"
    return "%dLL" % v


def c_string_literal(s):
    out = []
    for ch in s:
        if ch in '"\\':
            out.append("\\" + ch)
        elif 32 <= ord(ch) < 127:
            out.append(ch)
        else:
            out.append("\\%03o" % ord(ch))
    return '"' + "".join(out) + '"'


class Item:
    """One check: a key, and how to express it in each mode."""

    def __init__(self, key, kind, **kw):
        self.key = key
        self.kind = kind
        self.__dict__.update(kw)


def load_items(tables, use_types=True):
    items = []
    notes = []
    _, layout = read_tsv(os.path.join(tables, "layout.tsv"))
    for lineno, cols in layout:
        typ, member, offset, size, decl = cols[:5]
        t = c_type_name(typ)
        if member == "(sizeof)":
            items.append(Item("sizeof %s" % t, "sizeof", type=t, value=int(size)))
            continue
        if ANON_RE.match(member):
            notes.append("layout.tsv:%d %s %s: anonymous member, only the "
                         "struct's sizeof is checked" % (lineno, t, member))
            continue
        if BITFIELD_RE.search(decl):
            notes.append("layout.tsv:%d %s.%s: bitfield, only the struct's "
                         "sizeof is checked" % (lineno, t, member))
            continue
        if not IDENT_RE.match(member):
            notes.append("layout.tsv:%d %s.%s: unusual member name, skipped"
                         % (lineno, t, member))
            continue
        items.append(Item("offsetof %s.%s" % (t, member), "offsetof",
                          type=t, member=member, value=int(offset)))
        flexible = decl.rstrip().endswith("[]")
        if flexible:
            notes.append("layout.tsv:%d %s.%s: flexible array, size not "
                         "checked" % (lineno, t, member))
        else:
            items.append(Item("membersize %s.%s" % (t, member), "membersize",
                              type=t, member=member, value=int(size)))
        if use_types:
            override = TYPE_OVERRIDES.get((t, member))
            d = override[0] if override else decl
            ptr = member_pointer_type(d, member)
            if ptr is not None:
                items.append(Item("type %s.%s" % (t, member), "type",
                                  type=t, member=member, ptrtype=ptr, decl=d))
    _, consts = read_tsv(os.path.join(tables, "constants.tsv"))
    for lineno, cols in consts:
        name, value = cols[0], int(cols[1])
        if not name.startswith(FOREIGN_PREFIX_OK):
            notes.append("constants.tsv:%d %s: not a libfabric name (it comes "
                         "from a system header the tables' headers pulled "
                         "in), not checked" % (lineno, name))
            continue
        rel = CONSTANT_RELATIONS.get(name)
        op = rel[0] if rel else "=="
        v = rel[1] if rel else value
        items.append(Item("const %s" % name, "const", name=name, op=op,
                          value=v))
    for name, (value, _) in sorted(EXTRA_CONSTANTS.items()):
        items.append(Item("const %s" % name, "const", name=name, op="==",
                          value=value, extra=True))
    _, strs = read_tsv(os.path.join(tables, "strings.tsv"))
    for lineno, cols in strs:
        items.append(Item("string %s" % cols[0], "string", name=cols[0],
                          value=cols[1]))
    return items, notes


def emit_prologue(out, headers, lang, mode):
    out.append("/* Generated by tests/abi/gen_c_check.py from the tables in "
               "tests/abi/; do not edit. */")
    if lang == "c":
        out.append("#include <stddef.h>")
        out.append("#include <stdint.h>")
        out.append("#include <string.h>")
        out.append("#include <stdio.h>")
    else:
        out.append("#include <cstddef>")
        out.append("#include <cstdint>")
        out.append("#include <cstring>")
        out.append("#include <cstdio>")
        out.append("#include <type_traits>")
    for h in headers:
        out.append("#include <%s>" % h)
    out.append("")
    out.append("")


def assert_line(it, lang):
    """One static assertion, written out in full (no macros) so that a
    compiler error always points at the item's own line."""
    sa = "_Static_assert" if lang == "c" else "static_assert"
    msg = c_string_literal(it.key)

    def member(t, m):
        return "(((%s *)0)->%s)" % (t, m)

    if it.kind == "sizeof":
        cond = "sizeof(%s) == %d" % (it.type, it.value)
    elif it.kind == "offsetof":
        cond = "offsetof(%s, %s) == %d" % (it.type, it.member, it.value)
    elif it.kind == "membersize":
        cond = "sizeof%s == %d" % (member(it.type, it.member), it.value)
    elif it.kind == "type":
        e = "&" + member(it.type, it.member)
        if lang == "c":
            cond = "_Generic((%s), %s: 1, default: 0)" % (e, it.ptrtype)
        else:
            cond = "std::is_same<decltype(%s), %s>::value" % (e, it.ptrtype)
        msg = c_string_literal("%s: expected %s" % (it.key, it.decl))
    elif it.kind == "const":
        cond = "(long long)(%s) %s %s" % (it.name, it.op,
                                         c_int64_literal(it.value))
    elif it.kind == "string":
        cond = "sizeof(\"\" %s) == %d" % (it.name, len(it.value.encode()) + 1)
    else:
        raise ValueError(it.kind)
    return "%s(%s, %s);" % (sa, cond, msg)


def gen_assert(items, headers, lang):
    out = []
    emit_prologue(out, headers, lang, "assert")
    for it in items:
        out.append(assert_line(it, lang))
    out.append("")
    out.append("/* Content of the string constants; returns the number of "
               "mismatches. */")
    out.append("int abi_check_strings(void);")
    out.append("int abi_check_strings(void)")
    out.append("{")
    out.append("\tint bad = 0;")
    for it in items:
        if it.kind != "string":
            continue
        out.append("\tif (strcmp(%s, %s) != 0) {" % (it.name,
                                                    c_string_literal(it.value)))
        out.append("\t\tfprintf(stderr, \"%%s: expected %%s, got %%s\\n\", "
                   "%s, %s, %s);" % (c_string_literal(it.key),
                                     c_string_literal(it.value), it.name))
        out.append("\t\tbad++;")
        out.append("\t}")
    out.append("\treturn bad;")
    out.append("}")
    out.append("")
    out.append("#ifdef ABI_CHECK_MAIN")
    out.append("int main(void)")
    out.append("{")
    out.append("\treturn abi_check_strings() != 0;")
    out.append("}")
    out.append("#endif")
    return "\n".join(out) + "\n"


def print_line(it):
    tag = "/*@%s@*/" % it.key
    k = c_string_literal(it.key + "\t")
    if it.kind == "sizeof":
        expr = "(long long)sizeof(%s)" % it.type
    elif it.kind == "offsetof":
        expr = "(long long)offsetof(%s, %s)" % (it.type, it.member)
    elif it.kind == "membersize":
        expr = "(long long)sizeof(((%s *)0)->%s)" % (it.type, it.member)
    elif it.kind == "const":
        expr = "(long long)(%s)" % it.name
    elif it.kind == "string":
        return "\tprintf(\"%%s%%s\\n\", %s, %s); %s" % (k, it.name, tag)
    else:
        return None
    return "\tprintf(\"%%s%%lld\\n\", %s, %s); %s" % (k, expr, tag)


def gen_print(items, headers, lang, skip, only=None):
    out = []
    emit_prologue(out, headers, lang, "print")
    out.append("int main(void)")
    out.append("{")
    for it in items:
        if it.key in skip or (only is not None and it.key not in only):
            continue
        line = print_line(it)
        if line is not None:
            out.append(line)
    out.append("\treturn 0;")
    out.append("}")
    return "\n".join(out) + "\n"


def expected_lines(items):
    """KEY<TAB>VALUE lines as the tables say (print-mode kinds only)."""
    lines = []
    for it in items:
        if it.kind in ("sizeof", "offsetof", "membersize"):
            lines.append("%s\t%d" % (it.key, it.value))
        elif it.kind == "const" and not getattr(it, "extra", False):
            lines.append("%s\t%d" % (it.key, it.value))
        elif it.kind == "string":
            lines.append("%s\t%s" % (it.key, it.value))
    return lines


KEY_IN_LINE = re.compile(r'"((?:sizeof|offsetof|membersize|type|const|string) [^"]*?)(?:: expected [^"]*)?"\);\s*$')
ERR_LINE = re.compile(r'^(?P<file>[^:]+):(?P<line>\d+):\d+: error: (?P<msg>.*)$')


def explain(generated, errlog):
    """Map compiler errors on a generated assert file back to table items.

    Returns (failed, broken, other): keys whose assertion failed, a dict of
    keys that could not be evaluated -> first error, and errors that belong
    to no item (in the headers themselves, for instance).
    """
    with open(generated, encoding="utf-8") as f:
        lines = f.read().split("\n")
    base = os.path.basename(generated)
    failed, broken, other = [], {}, []
    with open(errlog, encoding="utf-8", errors="replace") as f:
        for raw in f:
            m = ERR_LINE.match(raw.rstrip("\n"))
            if not m:
                continue
            msg = m.group("msg")
            key = None
            if os.path.basename(m.group("file")) == base:
                n = int(m.group("line"))
                if 1 <= n <= len(lines):
                    km = KEY_IN_LINE.search(lines[n - 1])
                    if km:
                        key = km.group(1)
            if key is None:
                if "static assertion failed" in msg:
                    km = re.search(r'static assertion failed: "?(.*?)(?:: expected .*)?"?$', msg)
                    if km:
                        key = km.group(1)
            if key is None:
                other.append(raw.rstrip("\n"))
            elif "static assertion failed" in msg:
                if key not in failed:
                    failed.append(key)
            elif key not in broken and key not in failed:
                broken[key] = msg
    return failed, broken, other


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lang", choices=("c", "c++"), default="c")
    ap.add_argument("--mode", choices=("assert", "print", "expected", "notes",
                             "explain"),
                    default="assert",
                    help="assert: static checks; print: value printer; "
                         "expected: KEY<TAB>VALUE from the tables; notes: "
                         "skipped rows and deliberate differences")
    ap.add_argument("--tables", default=HERE)
    ap.add_argument("--headers", default=",".join(ALL_HEADERS),
                    help="comma-separated list of headers to include")
    ap.add_argument("--skip", help="file of item keys to leave out (print)")
    ap.add_argument("--only", help="file of item keys to keep (print)")
    ap.add_argument("--errors", help="explain: compiler error log")
    ap.add_argument("--generated", help="explain: the generated assert file")
    ap.add_argument("--no-types", action="store_true",
                    help="do not check member types")
    ap.add_argument("-o", "--output", default="-")
    args = ap.parse_args(argv)

    headers = [h for h in args.headers.split(",") if h]
    items, notes = load_items(args.tables, use_types=not args.no_types)
    skip = set()
    if args.skip:
        with open(args.skip, encoding="utf-8") as f:
            skip = {l.rstrip("\n") for l in f if l.strip()}

    only = None
    if args.only:
        with open(args.only, encoding="utf-8") as f:
            only = {l.rstrip("\n") for l in f if l.strip()}

    if args.mode == "assert":
        text = gen_assert(items, headers, args.lang)
    elif args.mode == "print":
        text = gen_print(items, headers, args.lang, skip, only)
    elif args.mode == "explain":
        # One line per problem:  FAILED key / BROKEN key<TAB>error / OTHER line
        failed, broken, other = explain(args.generated, args.errors)
        decls = {}
        for it in items:
            if it.kind == "type":
                decls[it.key] = it.decl
        lines = ["FAILED\t%s\t%s" % (k, decls.get(k, "")) for k in failed]
        lines += ["BROKEN\t%s\t%s" % (k, v) for k, v in broken.items()]
        lines += ["OTHER\t%s" % o for o in other]
        text = "\n".join(lines) + ("\n" if lines else "")
    elif args.mode == "expected":
        text = "\n".join(expected_lines(items)) + "\n"
    else:
        lines = list(notes)
        for name, (op, v, why) in sorted(CONSTANT_RELATIONS.items()):
            lines.append("allowed: %s %s %d (%s)" % (name, op, v, why))
        for (t, m), (d, why) in sorted(TYPE_OVERRIDES.items()):
            lines.append("allowed: %s.%s declared as `%s` (%s)" % (t, m, d, why))
        for name, (v, why) in sorted(EXTRA_CONSTANTS.items()):
            lines.append("extra: %s == %d (%s)" % (name, v, why))
        text = "\n".join(lines) + "\n"

    if args.output == "-":
        sys.stdout.write(text)
    else:
        with open(args.output, "w", encoding="utf-8") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
