"""The collector's layers (issue 39): no two files call each other, directly or around a loop, read
from the object files' symbols (tools/cycles.py). What every phase uses of the job's model is in
model.c and waits.c, under them all; what a part does while a file is read (the long trace's
sweep, the device's records, the CPU samples) it registers for (an_parts), so that loading never
calls it by name. No file over about 900 lines or function over 120 (tools/sizes.py), and no file
calls one of a layer above its own in docs/design.md's picture."""
import json
import os
import subprocess
from lib import *

objs = os.path.join(BUILD, "cobj")
if not os.path.isdir(os.path.join(objs, "collector")):
    skip("the collector's layers", "no object files in %s (make all builds them)" % objs)
    done()
p = subprocess.run(["python3", os.path.join(ROOT, "tools", "cycles.py"), "--objects", objs, "--json"],
                   capture_output=True, text=True, timeout=120)
g = json.loads(p.stdout) if p.returncode == 0 and p.stdout.startswith("{") else None
ok(g is not None and "collector/gpustep.c" in g["calls"] and "collector/gpu.c" in g["calls"]["collector/gpustep.c"],
   "tools/cycles.py reads the collector's call graph from its objects (gpustep.c calls gpu.c): %s" % (p.stderr[-200:]))
circles = g["circles"] if g else []
ok(g is not None and not circles, "no circle of files that call each other among the collector's and viewer's "
   "%d files: %s" % (len(g["calls"]) if g else 0, circles))
ok(all("collector/ncclplug.c" not in c for c in circles) and g and "collector/gpu.c" not in
   g["calls"].get("collector/ncclplug.c", []),
   "ncclplug.c (NCCL's profiler plugin's kernels) calls down only: never back into gpu.c")
# the layers as docs/design.md draws them: no file calls one of a layer above its own
LAYERS = [["common/format.c", "collector/json.c", "collector/cli.c", "collector/prom.c"], ["collector/trace.c", "collector/tracemeta.c", "collector/tracedir.c", "collector/tracefollow.c", "collector/elfsym.c"],
          ["collector/model.c", "collector/waits.c", "collector/stats.c", "collector/kinds.c", "collector/par.c",
           "collector/mpijob.c"],
          ["collector/load.c", "collector/loadmpi.c", "collector/proc.c", "collector/runs.c", "collector/spread.c",
           "collector/stream.c", "collector/p2p.c", "collector/hostsite.c", "collector/ranges.c", "collector/inflight.c"],
          ["collector/gpu.c", "collector/gpucover.c", "collector/gpudev.c", "collector/gpujoin.c", "collector/ncclplug.c"],
          ["collector/clocks.c"], ["collector/steps.c", "collector/sweep.c", "collector/sweepcore.c", "collector/lsweep.c",
           "collector/pattern.c"],
          ["collector/split.c", "collector/splitmpi.c", "collector/gpustep.c", "collector/gpushard.c", "collector/cpu.c"],
          ["collector/findings.c", "collector/finddata.c", "collector/findgpu.c", "collector/findhost.c", "collector/findsite.c", "collector/findphase.c", "collector/findhang.c",
           "collector/findpipe.c", "collector/findshard.c", "collector/evidence.c"],
          ["collector/verdict.c"], ["collector/analyze.c"],
          ["collector/words.c", "collector/report.c", "collector/compare.c", "viewer/html.c", "viewer/view.c", "viewer/tracks.c",
           "viewer/timeline.c"],
          ["collector/main.c", "collector/run.c", "collector/dump.c", "collector/watch.c", "collector/watchprom.c",
           "collector/watchfind.c"]]
level = {f: i for i, fs in enumerate(LAYERS) for f in fs}
calls = g["calls"] if g else {}
up = [(f, t) for f, ts in calls.items() for t in ts if f in level and t in level and level[t] > level[f]]
ok(g is not None and not up and not [f for f in calls if f not in level],
   "every file in a layer of docs/design.md's picture (none left out: %s), none calling a layer above its own: %s"
   % ([f for f in calls if f not in level], up))
# the size rule (about 900 lines a file, 120 a function): none is over it since issue 39's split,
# and none may come (a file or function named here would be let through; none is)
BIG_FILES = set()
BIG_FUNCS = set()
p = subprocess.run(["python3", os.path.join(ROOT, "tools", "sizes.py"), "--json"], capture_output=True, text=True,
                   timeout=60, cwd=ROOT)
sz = json.loads(p.stdout) if p.stdout.startswith("{") else None
new_files = [f for n, f in sz["files"] if f not in BIG_FILES] if sz else None
new_funcs = [f for n, f in sz["functions"] if f.split()[-1] not in BIG_FUNCS] if sz else None
ok(sz is not None and not new_files and not new_funcs,
   "no file over 900 lines or function over 120 joins those known (%d files, %d functions): %s %s"
   % (len(sz["files"]) if sz else 0, len(sz["functions"]) if sz else 0, new_files, new_funcs))
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
