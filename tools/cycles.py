#!/usr/bin/env python3
"""The call graph between the collector's (and viewer's) files, from their object files' symbols:
file A calls file B when A's object leaves undefined a function or object that B's defines. Prints
each circle (files that call each other, directly or around a loop: a strongly connected component
of more than one file) with the names that tie it, and the layer order of the rest.

usage: tools/cycles.py [--objects DIR] [--json]
  DIR: where make put the collector's objects (default build/cobj)
Exit 0 always; tests/e2e/test_tree.py holds the circles to the ones it knows (they may only
shrink: issue 39)."""
import json
import os
import subprocess
import sys


def symbols(obj):
    """(defined, undefined) global symbols of one object file"""
    out = subprocess.run(["nm", "--format=posix", obj], capture_output=True, text=True, check=True).stdout
    defined, undefined = set(), set()
    for line in out.splitlines():
        f = line.split()
        if len(f) < 2:
            continue
        name, kind = f[0], f[1]
        if kind == "U":
            undefined.add(name)
        elif kind in "TDBR":  # (global: text, data, bss, read-only)
            defined.add(name)
    return defined, undefined


def graph(root):
    """{file: {file it calls: [names]}} over the .o files under root, named by their source path"""
    objs = []
    for d, _, files in os.walk(root):
        objs += [os.path.join(d, f) for f in files if f.endswith(".o")]
    defs, undefs, owner = {}, {}, {}
    for o in sorted(objs):
        src = os.path.relpath(o, root)[:-2] + ".c"
        defs[src], undefs[src] = symbols(o)
        for s in defs[src]:
            owner.setdefault(s, src)
    g = {f: {} for f in defs}
    for f, us in undefs.items():
        for s in sorted(us):
            t = owner.get(s)
            if t and t != f:
                g[f].setdefault(t, []).append(s)
    return g


def circles(g):
    """the strongly connected components of more than one file (Tarjan's algorithm, iterative)"""
    index, low, on, stack, out, n = {}, {}, set(), [], [], [0]
    for start in sorted(g):
        if start in index:
            continue
        work = [(start, iter(sorted(g[start])))]
        index[start] = low[start] = n[0]
        n[0] += 1
        stack.append(start)
        on.add(start)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = n[0]
                    n[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(g[w]))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return sorted(out)


def main():
    args = sys.argv[1:]
    root = args[args.index("--objects") + 1] if "--objects" in args else os.path.join("build", "cobj")
    g = graph(root)
    cs = circles(g)
    if "--json" in args:
        print(json.dumps({"circles": cs, "calls": {f: sorted(t) for f, t in g.items()}}, indent=1))
        return
    for i, c in enumerate(cs):
        print("circle %d: %d files: %s" % (i + 1, len(c), " ".join(c)))
        for f in c:
            for t in sorted(g[f]):
                if t in c:
                    print("  %s -> %s: %s" % (f, t, ", ".join(g[f][t][:6]) + (" ..." if len(g[f][t]) > 6 else "")))
    if not cs:
        print("no circle among %d files" % len(g))


if __name__ == "__main__":
    main()
