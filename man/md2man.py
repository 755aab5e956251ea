#!/usr/bin/env python3
"""Convert the small Markdown dialect of man/*.md into roff (man macros).

  md2man.py man/fi_xpu.3.md                 write man/fi_xpu.3
  md2man.py --check man/fi_xpu.3.md         exit 1 if man/fi_xpu.3 is stale
  md2man.py --stdout man/fi_xpu.3.md        print the roff

Understood: a `---` front matter block (title, section, date, source,
manual), `#` and `##` headings, paragraphs, fenced code blocks, `- ` and
`1. ` lists, definition lists (a term line followed by `:   text` lines),
`**bold**`, `*italic*`, `` `code` `` and backslash escapes.  Only the
Python standard library is used.
"""

import os
import re
import sys


def escape(text):
    """Escape roff specials in running text."""
    text = text.replace("\\", "\\e")
    text = text.replace("-", "\\-")
    return text


def inline(text):
    """Markdown inline markup to roff font changes."""
    out = []
    i = 0
    # Markdown backslash escapes become placeholders first.
    text = re.sub(r"\\([\\*`_\-])", lambda m: "\x00%d\x00" % ord(m.group(1)),
                  text)
    pattern = re.compile(r"\*\*(.+?)\*\*|\*(.+?)\*|`(.+?)`")
    for m in pattern.finditer(text):
        out.append(escape(text[i:m.start()]))
        if m.group(1) is not None:
            out.append("\\fB" + escape(m.group(1)) + "\\fR")
        elif m.group(2) is not None:
            out.append("\\fI" + escape(m.group(2)) + "\\fR")
        else:
            out.append("\\fB" + escape(m.group(3)) + "\\fR")
        i = m.end()
    out.append(escape(text[i:]))
    s = "".join(out)

    def unplace(m):
        ch = chr(int(m.group(1)))
        return {"\\": "\\e", "-": "\\-"}.get(ch, ch)

    return re.sub(r"\x00(\d+)\x00", unplace, s)


def line_safe(s):
    """A text line must not start with a control character."""
    if s.startswith(".") or s.startswith("'"):
        return "\\&" + s
    return s


def convert(md):
    lines = md.split("\n")
    meta = {}
    i = 0
    if lines and lines[0].strip() == "---":
        i = 1
        while i < len(lines) and lines[i].strip() != "---":
            k, _, v = lines[i].partition(":")
            meta[k.strip()] = v.strip()
            i += 1
        i += 1
    out = ['.\\" Generated from %s.md by man/md2man.py; edit the Markdown.'
           % (meta.get("title", "page") + "." + meta.get("section", "3")),
           '.TH "%s" "%s" "%s" "%s" "%s"' % (
               meta.get("title", ""),
               meta.get("section", "3"), meta.get("date", ""),
               meta.get("source", ""), meta.get("manual", ""))]

    para = []

    def flush():
        if para:
            out.append(".PP")
            for p in para:
                out.append(line_safe(inline(p)))
            para.clear()

    while i < len(lines):
        ln = lines[i]
        s = ln.strip()
        if not s:
            flush()
            i += 1
            continue
        if s.startswith("```"):
            flush()
            out.append(".PP")
            out.append(".RS 4")
            out.append(".nf")
            out.append(".ft CR")
            i += 1
            while i < len(lines) and not lines[i].strip().startswith("```"):
                out.append(line_safe(escape(lines[i])))
                i += 1
            out.append(".ft R")
            out.append(".fi")
            out.append(".RE")
            i += 1
            continue
        if s.startswith("## "):
            flush()
            out.append('.SS "%s"' % inline(s[3:]))
            i += 1
            continue
        if s.startswith("# "):
            flush()
            out.append('.SH "%s"' % inline(s[2:]).upper())
            i += 1
            continue
        m = re.match(r"^(-|\d+\.)\s+(.*)$", s)
        if m and not para:
            bullet = "\\(bu" if m.group(1) == "-" else m.group(1)
            item = [m.group(2)]
            i += 1
            while i < len(lines) and lines[i].startswith("  ") and \
                    lines[i].strip():
                item.append(lines[i].strip())
                i += 1
            out.append(".IP %s 4" % bullet)
            for t in item:
                out.append(line_safe(inline(t)))
            continue
        # Definition list: a term line followed by ":   text".
        if i + 1 < len(lines) and lines[i + 1].startswith(":   ") and not para:
            out.append(".TP")
            out.append(line_safe(inline(s)))
            i += 1
            body = [lines[i][4:].strip()]
            i += 1
            while i < len(lines) and lines[i].startswith("    ") and \
                    lines[i].strip():
                body.append(lines[i].strip())
                i += 1
            for t in body:
                out.append(line_safe(inline(t)))
            continue
        para.append(s)
        i += 1
    flush()
    return "\n".join(out) + "\n"


def main(argv):
    check = "--check" in argv
    to_stdout = "--stdout" in argv
    files = [a for a in argv if not a.startswith("--")]
    if not files:
        sys.exit(__doc__)
    stale = 0
    for src in files:
        with open(src, encoding="utf-8") as f:
            roff = convert(f.read())
        dst = src[:-3] if src.endswith(".md") else src + ".roff"
        if to_stdout:
            sys.stdout.write(roff)
        elif check:
            try:
                with open(dst, encoding="utf-8") as f:
                    current = f.read()
            except FileNotFoundError:
                current = None
            if current != roff:
                print("%s is not up to date with %s (run man/md2man.py %s)"
                      % (dst, src, src))
                stale += 1
            else:
                print("%s is up to date" % dst)
        else:
            with open(dst, "w", encoding="utf-8") as f:
                f.write(roff)
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
