"""The real-hardware checks (tests/gpu/check.py, run on a machine with a GPU: docs/gpu.md) run here
on the simulated device (--sim), so that the script that has to work on a GPU machine, where a
session has little time, is itself tested: every check it makes must pass on the stand-ins."""
import os
import subprocess
from lib import *

need_sim("the GPU checks script on the simulated device", "nccl.h", "preload/nccl.c")
d = tmpdir("gpu-script")
p = subprocess.run([os.path.join(ROOT, "tests", "gpu", "run.sh"), "--sim", "--out", d], capture_output=True,
                   text=True, timeout=600)
lines = p.stdout.splitlines()
passed = [l for l in lines if l.startswith("ok ") and "# SKIP" not in l]
failed = [l for l in lines if l.startswith("not ok")]
ok(p.returncode == 0 and not failed and len(passed) >= 14,
   "tests/gpu/run.sh --sim: %d checks passed, failed: %s %s" % (len(passed), failed[:3], p.stderr[-300:]))
skips = [l for l in lines if "# SKIP" in l]
left = [x.split(" - ", 1)[-1].split(" # ")[0] for x in skips]  # (what was left, without the runner's skip mark)
# left to a GPU machine: the static-cudart program, the PyTorch jobs (capture, torch.profiler on
# training steps, verdict) and the real driver's order of constructors (test_cupti checks it on the
# simulated device; test_cupti_share the Kineto-shaped client torch.profiler stands for)
want = ["static-cudart", "PyTorch on the GPU", "torch.profiler on a training step", "verdict on PyTorch", "constructor"]
ok(len(skips) == len(want) and all(any(w in x for x in left) for w in want),
   "only these are left to a GPU machine: %s" % left)
cleanup(d)
done()
