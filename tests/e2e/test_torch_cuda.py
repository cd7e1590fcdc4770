"""PyTorch on CUDA: where this machine has a GPU and a PyTorch built with CUDA, the real-hardware
checks of tests/gpu/run.sh (GPU capture on gpu_app and nccl_app, PyTorch DDP over NCCL, and the
report's verdict on examples/torch/train_mlp.py --device cuda: healthy, data-starved, host-sync).
Elsewhere (CI has no GPU) it skips, saying so; docs/gpu.md says what was verified on which GPU."""
import os
import subprocess
from lib import *

p = subprocess.run(["/usr/bin/python3", "-c", "import torch; print(torch.cuda.is_available())"], capture_output=True,
                   text=True)
if p.stdout.strip() != "True":
    skip("PyTorch on CUDA (train_mlp.py --device cuda: healthy, data-starved, host-sync verdicts)",
         "no CUDA device for /usr/bin/python3's torch here: tests/gpu/run.sh runs them on a GPU machine")
    done()
out = tmpdir("torch-cuda")
r = subprocess.run(["bash", os.path.join(ROOT, "tests", "gpu", "run.sh"), "--out", out], capture_output=True, text=True,
                   timeout=3000)
bad = [l for l in r.stdout.splitlines() if l.startswith("not ok")]
ok(r.returncode == 0 and not bad, "tests/gpu/run.sh on this machine's GPU: %s %s" % (bad[:3], r.stderr[-300:]))
cleanup(out)
done()
