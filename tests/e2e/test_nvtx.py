"""NVTX ranges (preload/nvtx.c) through NVTX's injection interface: testapps/nvtx_app.c, annotated as a
training script is (an epoch of step ranges with marks, a start/end range ended on another thread, a
domain with a registered and an ASCII message), runs under the preload. `ddpspy dump --json` must show
every push, pop, mark, start, end and domain, with its message, nesting level, range id and domain,
on the thread that made it, in order, around the program's own sleeps. DDPSPY_NVTX=0, or a program
that names its own NVTX tool, leaves NVTX alone."""
import os
from lib import *

APP = os.path.join(APPS, "nvtx_app")
CUDA = os.environ.get("CUDA_HOME", "/usr/local/cuda")
if not os.path.exists(os.path.join(CUDA, "include", "nvtx3", "nvToolsExt.h")):
    skip("NVTX ranges", "no NVTX headers in %s/include/nvtx3 (set CUDA_HOME): preload/nvtx.c is not built" % CUDA)
    done()
d = tmpdir("nvtx")
STEPS = 3

p = traced([APP, str(STEPS)], os.path.join(d, "on"))
recs, rc, err = dump(os.path.join(d, "on"))
ok(p.returncode == 0, "nvtx_app runs under the preload: %s" % p.stderr[-200:])
main = of(recs, "process")[0]["pid"] if of(recs, "process") else -1
nv = [e for e in events(recs, "nvtx")]
mine = [(e["range"], e["id"], e["domain"], e.get("message")) for e in nv if e["tid"] == main]
want = [("push", 0, 0, "epoch")]
for s in range(STEPS):
    want += [("push", 1, 0, "step"), ("pop", 1, 0, None), ("mark", 0, 0, "step done")]
want += [("start", 1, 0, "checkpoint"), ("domain", 1, 1, "ddp"), ("push", 1, 1, "forward"), ("pop", 1, 1, None),
         ("push", 1, 1, "backward"), ("pop", 1, 1, None), ("pop", 0, 0, None)]
ok(mine == want, "every push, pop, mark, start and domain of the main thread, in order, with level, range id, "
   "domain and message: %s" % mine)
other = [(e["range"], e["id"]) for e in nv if e["tid"] != main]
ok(other == [("end", 1)], "the range started on the main thread is ended on the other: %s" % other)
seq = [e["kind"] for e in events(recs) if e["tid"] == main and e["kind"] in ("nvtx", "sleep")]
inner = [seq[i - 1:i + 2] for i, k in enumerate(seq) if k == "sleep"][:STEPS]  # (then a last sleep, after the ranges)
ok(len(inner) == STEPS and all(x == ["nvtx", "sleep", "nvtx"] for x in inner),
   "each step's sleep lies between its range's push and pop")
steps = [e for e in nv if e.get("message") == "step"]
pops = [e for e in nv if e["range"] == "pop" and e["id"] == 1 and e["domain"] == 0]
lens = [(b["t_ns"] - a["t_ns"]) / 1e6 for a, b in zip(steps, pops)]
ok(len(lens) == STEPS and all(x >= 2.0 for x in lens), "each step range spans its 2 ms sleep: %s ms" % lens)

p = traced([APP, str(STEPS)], os.path.join(d, "off"), env={"DDPSPY_NVTX": "0"})
recs, rc, err = dump(os.path.join(d, "off"))
ok(p.returncode == 0 and not events(recs, "nvtx") and len(events(recs, "sleep")) == STEPS + 1,
   "DDPSPY_NVTX=0: no NVTX events, the rest as before")
sh = "echo \"[$NVTX_INJECTION64_PATH]\""
v = [traced(["sh", "-c", sh], os.path.join(d, "env%d" % i), env=e).stdout.strip()
     for i, e in enumerate([{}, {"DDPSPY_NVTX": "0"}, {"NVTX_INJECTION64_PATH": "/x/y.so"}])]
ok(v[0] == "[%s]" % os.path.realpath(LIB) and v[1] == "[]" and v[2] == "[/x/y.so]",
   "NVTX_INJECTION64_PATH names libddpspy.so unless DDPSPY_NVTX=0 or the program set its own: %s" % v)
cleanup(d)
done()
