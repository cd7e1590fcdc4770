"""The collector's layers (issue 39): files that call each other in a circle, from the object
files' symbols (tools/cycles.py). Today one circle of nine files remains (load, clocks, steps,
split, p2p, gpu, cpu, findings and the driver, analyze); it may only shrink: no file may join it
and no new circle may form, so every change either keeps the layers or mends them."""
import json
import os
import subprocess
from lib import *

# the circle as it stands (issue 39 removes it; shrink this list as files leave it)
KNOWN = {"collector/analyze.c", "collector/clocks.c", "collector/cpu.c", "collector/findings.c", "collector/gpu.c",
         "collector/load.c", "collector/p2p.c", "collector/split.c", "collector/steps.c"}

objs = os.path.join(BUILD, "cobj")
if not os.path.isdir(os.path.join(objs, "collector")):
    skip("the collector's layers", "no object files in %s (make all builds them)" % objs)
    done()
p = subprocess.run(["python3", os.path.join(ROOT, "tools", "cycles.py"), "--objects", objs, "--json"],
                   capture_output=True, text=True, timeout=120)
g = json.loads(p.stdout) if p.returncode == 0 and p.stdout.startswith("{") else None
ok(g is not None and "collector/gpu.c" in g["calls"] and "collector/load.c" in g["calls"]["collector/gpu.c"],
   "tools/cycles.py reads the collector's call graph from its objects (gpu.c calls load.c): %s" % (p.stderr[-200:]))
circles = g["circles"] if g else []
ok(all(set(c) <= KNOWN for c in circles) and len(circles) <= 1,
   "no file joins the collector's one known circle and no new circle forms: %s" % circles)
ok(all("collector/ncclplug.c" not in c for c in circles) and g and "collector/gpu.c" not in
   g["calls"].get("collector/ncclplug.c", []),
   "ncclplug.c (NCCL's profiler plugin's kernels) calls down only: never back into gpu.c")
# a circle made on purpose is found: two objects that call each other
d = tmpdir("layers")
os.makedirs(os.path.join(d, "x"))
for name, body in (("a", "int b(void); int a(void) { return b(); }"), ("b", "int a(void); int b(void) { return a(); }"),
                   ("c", "int a(void); int c(void) { return a(); }")):
    src = os.path.join(d, "x", name + ".c")
    with open(src, "w") as f:
        f.write(body + "\n")
    subprocess.run(["cc", "-c", "-o", os.path.join(d, "x", name + ".o"), src], check=True)
p = subprocess.run(["python3", os.path.join(ROOT, "tools", "cycles.py"), "--objects", d, "--json"],
                   capture_output=True, text=True, timeout=60)
made = json.loads(p.stdout)["circles"] if p.stdout.startswith("{") else None
ok(made == [["x/a.c", "x/b.c"]], "a circle made on purpose (a calls b, b calls a, c calls a) is found, alone: %s" % made)
cleanup(d)
done()
