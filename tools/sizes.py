#!/usr/bin/env python3
"""The collector's and viewer's files over about 900 lines and functions over about 120 (issue 39's
size rule), longest first. A function may stay longer with a comment saying why it must be one
piece: a line "(one piece: ...)" in the comment above it.

usage: tools/sizes.py [--json] [FILE ...]   (default: collector/*.c viewer/*.c)"""
import glob
import json
import os
import re
import sys

FILE_MAX, FUNC_MAX = 900, 120


def functions(src):
    """(name, first line, lines, excused) of each top-level function definition in C source src"""
    lines = src.split("\n")
    out, depth, start, name, excused = [], 0, None, None, False
    head = re.compile(r"^[A-Za-z_][\w \*]*?\b(\w+)\s*\([^;]*$")
    for i, line in enumerate(lines):
        code = re.sub(r'"(\\.|[^"\\])*"|\'(\\.|[^\'\\])*\'|//.*$', "", line)
        if depth == 0 and start is None:
            m = head.match(code)
            if m and not code.startswith(("typedef", "struct", "enum", "union", "#")) or (
                    m and code.startswith(("struct", "enum", "union")) and "(" in code):
                name, start = m.group(1), i
                above = "\n".join(lines[max(0, i - 12):i])
                excused = "(one piece:" in above
        opened, closed = code.count("{"), code.count("}")
        if start is not None and depth == 0 and opened == 0 and code.rstrip().endswith(";"):
            start = None  # a declaration, not a definition
            continue
        depth += opened - closed
        if start is not None and depth == 0 and closed:
            out.append((name, start + 1, i - start + 1, excused))
            start = None
    return out


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    files = args or sorted(glob.glob("collector/*.c") + glob.glob("viewer/*.c"))
    big_files, big_funcs = [], []
    for f in files:
        src = open(f).read()
        n = src.count("\n")
        if n > FILE_MAX:
            big_files.append((n, f))
        for name, first, length, excused in functions(src):
            if length > FUNC_MAX and not excused:
                big_funcs.append((length, "%s:%d %s" % (f, first, name)))
    big_files.sort(reverse=True)
    big_funcs.sort(reverse=True)
    if "--json" in sys.argv:
        print(json.dumps({"files": big_files, "functions": big_funcs}))
        return
    for n, f in big_files:
        print("file %5d lines  %s" % (n, f))
    for n, f in big_funcs:
        print("func %5d lines  %s" % (n, f))
    print("%d files over %d lines, %d functions over %d" % (len(big_files), FILE_MAX, len(big_funcs), FUNC_MAX))


if __name__ == "__main__":
    main()
