#!/usr/bin/env python3
"""Generate core/tests/abi_layout.rs from the ABI tables.

The generated test checks the Rust mirrors in `rfabric_core::abi` against
tests/abi/layout.tsv, layout-compat.tsv, constants.tsv and strings.tsv:

  * for every struct: its size, and for every member its offset and size;
  * for every member: its Rust type, derived from the C declaration of the
    table (a compile-time check: a wrong pointer, integer or function
    prototype fails to build);
  * for every integer constant: its value, compared as the 64-bit
    two's-complement number the table records;
  * for every string constant: its text, as `&str` and as `&CStr`.

Usage:
  python3 tests/abi/gen_rust_check.py          # rewrite core/tests/abi_layout.rs
  python3 tests/abi/gen_rust_check.py --check  # fail if the committed file is stale

Only the Python standard library is used.
"""

import argparse
import difflib
import os
import re
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
OUTPUT = os.path.join(ROOT, "core", "tests", "abi_layout.rs")

# Deliberate differences between our ABI and the reference tables.
# Constants whose value we declare differently: name -> (our value, reason).
CONSTANT_OVERRIDES = {
    "FI_MINOR_VERSION": (8, "we declare the API version we implement, 2.8; "
                            "the reference header still said 6"),
}
# Function-pointer members whose prototype differs (offset and size do not):
# (struct, member) -> (index at which a parameter is inserted, Rust type, reason).
PROTOTYPE_OVERRIDES = {
    ("fi_xpu_ops", "import"): (4, "c_int", "the FI_XPU issue adds `int fd` after `flags`"),
}
# Constants of ours that the tables do not have: name -> value.
ADDITIONS = {
    "FI_XPU_IMPORT_DMABUF": 1 << 2,
    "FI_XPU_PROV_SHM": 2,
}
# Rows of constants.tsv that are not part of the fabric API (the measuring
# compiler saw them through <pthread.h>); skipped by prefix.
SKIPPED_CONSTANT_PREFIXES = ("PTHREAD_",)

# How the Rust mirrors name things the C header leaves unnamed or that are
# Rust keywords.
RUST_KEYWORDS = {"type"}
BASE_TYPES = {
    "size_t": "usize",
    "ssize_t": "isize",
    "uint64_t": "u64",
    "uint32_t": "u32",
    "uint16_t": "u16",
    "uint8_t": "u8",
    "int": "c_int",
    "_Bool": "bool",
    "void": "c_void",
    "char": "c_char",
    "fid_t": "fid_t",
    "fi_addr_t": "fi_addr_t",
    "pthread_mutex_t": "libc::pthread_mutex_t",
    "pthread_cond_t": "libc::pthread_cond_t",
}
LIBC_STRUCTS = {"iovec": "libc::iovec", "pollfd": "libc::pollfd"}


def read_tsv(name):
    path = os.path.join(HERE, name)
    with open(path, encoding="utf-8") as f:
        lines = f.read().splitlines()
    header = lines[0].split("\t")
    rows = []
    for n, line in enumerate(lines[1:], start=2):
        cells = line.split("\t")
        if len(cells) != len(header):
            sys.exit(f"{name}:{n}: expected {len(header)} columns, got {len(cells)}")
        rows.append(dict(zip(header, cells)))
    return rows


def split_params(text):
    """Split a C parameter list at the commas that are not inside parentheses."""
    out, depth, cur = [], 0, ""
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        out.append(cur.strip())
    return [p for p in out if p != "void"]


def fn_type(ret, params):
    r = rust_type(ret)
    arrow = "" if r == "c_void" else f" -> {r}"
    return f'Option<unsafe extern "C" fn({", ".join(params)}){arrow}>'


def rust_type(ctype):
    """The Rust type our mirrors use for a C type of the tables."""
    ctype = ctype.strip()
    m = re.match(r"^(.*?)\(\*\)\((.*)\)$", ctype)  # unnamed function pointer
    if m:
        return fn_type(m.group(1), [rust_type(p) for p in split_params(m.group(2))])
    m = re.match(r"^(const\s+)?(struct\s+|enum\s+)?(\w+)\s*((?:\*\s*)*)$", ctype)
    if not m:
        raise ValueError(f"unsupported C type: {ctype!r}")
    const, keyword, name, stars = m.groups()
    keyword = (keyword or "").strip()
    if keyword == "struct":
        t = LIBC_STRUCTS.get(name, name)
    elif keyword == "enum":
        t = name
    else:
        t = BASE_TYPES[name]
    for level in range(stars.count("*")):
        t = f"*{'const' if level == 0 and const else 'mut'} {t}"
    return t


def member_field(member):
    """Rust field name for a member name of the tables."""
    m = re.match(r"^\(anonymous union #(\d+)\)$", member)
    if m:
        return f"anon{m.group(1)}"
    if member in RUST_KEYWORDS:
        return f"r#{member}"
    return member


def member_rust_type(struct, member, decl):
    """Rust type of a member from its declaration, or None for unions."""
    if decl.startswith("union"):
        return None
    m = re.match(r"^(.*?)\(\*\s*(\w+)\)\((.*)\)$", decl)
    if m:
        params = [rust_type(p) for p in split_params(m.group(3))]
        override = PROTOTYPE_OVERRIDES.get((struct, member))
        if override:
            params.insert(override[0], override[1])
        return fn_type(m.group(1), params)
    m = re.match(r"^(.*?)\s*(\w+)\s*\[(\d*)\]$", decl)
    if m:
        return f"[{rust_type(m.group(1))}; {m.group(3) or 0}]"
    m = re.match(r"^(.*?)\s*(\w+)$", decl)
    if not m or m.group(2) != member:
        raise ValueError(f"{struct}.{member}: unsupported declaration {decl!r}")
    return rust_type(m.group(1))


def c_int64(value):
    return int(value)


def group_layout(rows, source):
    structs = {}
    for r in rows:
        kind, name = r["type"].split(" ", 1)
        if kind != "struct":
            sys.exit(f"{source}: unexpected kind {kind!r} for {name}")
        s = structs.setdefault(name, {"size": None, "members": [], "source": source})
        if r["member"] == "(sizeof)":
            s["size"] = int(r["size"])
        else:
            s["members"].append((r["member"], int(r["offset"]), int(r["size"]), r["declaration"]))
    for name, s in structs.items():
        if s["size"] is None:
            sys.exit(f"{source}: {name} has no (sizeof) row")
    return structs


def rust_string(text):
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def generate():
    out = []
    w = out.append
    w("//! Layout and value checks of `rfabric_core::abi` against the ABI tables.")
    w("//!")
    w("//! GENERATED by tests/abi/gen_rust_check.py from tests/abi/layout.tsv,")
    w("//! layout-compat.tsv, constants.tsv and strings.tsv. Do not edit: change")
    w("//! the tables or the generator and run it again (CI runs it with --check).")
    w("#![allow(non_camel_case_types, non_snake_case, non_upper_case_globals)]")
    w("#![allow(clippy::all)]")
    w("#![allow(dead_code, unused_imports)]")
    w("")
    w("use core::ffi::{c_char, c_int, c_void};")
    w("use std::mem::{offset_of, size_of};")
    w("")
    w("use rfabric_core::abi::*;")
    w("")
    w("/// Size of one member, measured without building a value of the struct.")
    w("macro_rules! member_size {")
    w("    ($t:ty, $f:tt) => {{")
    w("        fn size_of_pointee<T>(_: *const T) -> usize {")
    w("            size_of::<T>()")
    w("        }")
    w("        let slot = std::mem::MaybeUninit::<$t>::uninit();")
    w("        // SAFETY: only the address of the member is formed (no read, no")
    w("        // reference), which is valid for uninitialised memory.")
    w("        size_of_pointee(unsafe { std::ptr::addr_of!((*slot.as_ptr()).$f) })")
    w("    }};")
    w("}")
    w("")
    w("/// The 64-bit two's-complement value the tables record for a constant.")
    w("fn as_table_value(v: i128) -> i64 {")
    w("    v as i64")
    w("}")
    w("")
    w("/// Fails unless a constant survives the narrowing to the table's 64 bits.")
    w("fn fits_64_bits(v: i128) -> bool {")
    w("    v >= i64::MIN as i128 && v <= u64::MAX as i128")
    w("}")
    w("")

    layouts = [
        (group_layout(read_tsv("layout.tsv"), "layout.tsv"), "layout"),
        (group_layout(read_tsv("layout-compat.tsv"), "layout-compat.tsv"), "compat"),
    ]
    for structs, prefix in layouts:
        for name, s in structs.items():
            w("#[test]")
            w(f"fn {prefix}_{name}() {{")
            w(f'    assert_eq!(size_of::<{name}>(), {s["size"]}, "sizeof(struct {name})");')
            for member, offset, size, _decl in s["members"]:
                field = member_field(member)
                w(f'    assert_eq!(offset_of!({name}, {field}), {offset}, '
                  f'"offsetof(struct {name}, {member})");')
                w(f'    assert_eq!(member_size!({name}, {field}), {size}, '
                  f'"sizeof(struct {name}.{member})");')
            w("}")
            w("")
            typed = [(member_field(m), member_rust_type(name, m, d), d)
                     for m, _o, _s, d in s["members"]]
            typed = [t for t in typed if t[1] is not None]
            if typed:
                w(f"/// Builds only if every member of `{name}` has the type its C")
                w("/// declaration maps to.")
                w(f"fn {prefix}_{name}_member_types(v: &{name}) {{")
                for field, rtype, decl in typed:
                    w(f"    // {decl}")
                    w(f"    let _: {rtype} = v.{field};")
                w("}")
                w("")

    constants = read_tsv("constants.tsv")
    skipped = [c["name"] for c in constants if c["name"].startswith(SKIPPED_CONSTANT_PREFIXES)]
    checked = [c for c in constants if not c["name"].startswith(SKIPPED_CONSTANT_PREFIXES)]
    for name in CONSTANT_OVERRIDES:
        if name not in {c["name"] for c in checked}:
            sys.exit(f"override for {name}, which constants.tsv does not have")
    w("#[test]")
    w("fn constants() {")
    for c in checked:
        name = c["name"]
        expected = c_int64(c["value"])
        note = ""
        if name in CONSTANT_OVERRIDES:
            table = expected
            expected, reason = CONSTANT_OVERRIDES[name]
            note = f" (table: {table}; {reason})"
        w(f'    assert!(fits_64_bits({name} as i128), "{name} does not fit 64 bits");')
        w(f'    assert_eq!(as_table_value({name} as i128), {expected}_i64, "{name}{note}");')
    w("}")
    w("")
    w("#[test]")
    w("fn constants_of_our_own() {")
    for name, value in ADDITIONS.items():
        w(f'    assert_eq!({name} as i128, {value}, "{name}");')
    w('    assert_eq!(FI_VERSION, fi_version(FI_MAJOR_VERSION, FI_MINOR_VERSION));')
    w('    assert_eq!(fi_major(FI_VERSION), FI_MAJOR_VERSION);')
    w('    assert_eq!(fi_minor(FI_VERSION), FI_MINOR_VERSION);')
    w("}")
    w("")
    w("#[test]")
    w("fn string_constants() {")
    for c in read_tsv("strings.tsv"):
        name, value = c["name"], c["value"]
        w(f'    assert_eq!({name}, {rust_string(value)}, "{name}");')
        w(f'    assert_eq!({name}_C.to_str().unwrap(), {rust_string(value)}, "{name}_C");')
    w("}")
    w("")
    w(f"// Rows of constants.tsv not checked (outside the fabric API): {len(skipped)},")
    w(f"// those starting with {', '.join(SKIPPED_CONSTANT_PREFIXES)}.")
    return "\n".join(out) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true",
                    help="regenerate into a temporary file and fail if it differs "
                         "from the committed core/tests/abi_layout.rs")
    args = ap.parse_args()
    text = generate()
    if args.check:
        with tempfile.NamedTemporaryFile("w", suffix=".rs", delete=False, encoding="utf-8") as tmp:
            tmp.write(text)
            tmp_path = tmp.name
        try:
            try:
                with open(OUTPUT, encoding="utf-8") as f:
                    current = f.read()
            except FileNotFoundError:
                current = ""
            with open(tmp_path, encoding="utf-8") as f:
                fresh = f.read()
        finally:
            os.unlink(tmp_path)
        if current != fresh:
            diff = difflib.unified_diff(current.splitlines(True), fresh.splitlines(True),
                                        "core/tests/abi_layout.rs (committed)",
                                        "core/tests/abi_layout.rs (regenerated)", n=1)
            sys.stdout.writelines(list(diff)[:60])
            print("\ncore/tests/abi_layout.rs is stale: run python3 tests/abi/gen_rust_check.py",
                  file=sys.stderr)
            return 1
        print("core/tests/abi_layout.rs is up to date")
        return 0
    os.makedirs(os.path.dirname(OUTPUT), exist_ok=True)
    with open(OUTPUT, "w", encoding="utf-8") as f:
        f.write(text)
    print(f"wrote {os.path.relpath(OUTPUT, ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
