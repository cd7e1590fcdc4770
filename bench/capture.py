"""make bench, capture part: what a trace costs on disk and how fast the writer keeps up.
- bytes per event of the demo's rank files (tools/demo.sh's job: 4 ranks of the testbed, 30
  steps, under ddpspy): file size over the events it holds, everything in the file counted;
- step markers at a steady 5M events/s on one thread and 2M events/s on each of 8 threads for 2 s
  at the default settings (tests/capture_limits.py 0): the events dropped."""
import glob
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
B = os.path.join(ROOT, "build")
out = tempfile.mkdtemp(prefix="ddpspy-bench-capture-")
data = os.path.join(out, "data")
subprocess.run([os.path.join(B, "ddpbench"), "gen-data", data, "--samples", "4096", "--sequences", "1024"],
               check=True, capture_output=True)
root = ["--allow-run-as-root"] if os.geteuid() == 0 else []
subprocess.run([os.path.join(B, "ddpspy"), "run", "-o", os.path.join(out, "trace"), "--", "mpirun"] + root +
               ["--oversubscribe", "-np", "4", os.path.join(B, "ddpbench"), "train", "--data", data, "--steps", "30",
                "--hidden", "128", "--straggler-rank", "2", "--straggler-ms", "40"], check=True, capture_output=True)
print("trace size: the demo's rank files (4 ranks x 30 steps of the testbed)")
for f in sorted(glob.glob(os.path.join(out, "trace", "r*.ddpspy"))):
    p = subprocess.run([os.path.join(B, "ddpspy"), "dump", "--summary", "--json", f], capture_output=True, text=True)
    end = [json.loads(l) for l in p.stdout.splitlines() if '"type":"end"' in l.replace(" ", "")][0]
    size = os.path.getsize(f)
    print("  %-28s %7d bytes %6d events %5.1f bytes/event" % (os.path.basename(f), size, end["events"],
                                                              size / max(1, end["events"])))
subprocess.run(["rm", "-rf", out])
print("writer rate (step markers, default ring and flush interval)")
sys.exit(subprocess.run(["/usr/bin/python3", os.path.join(ROOT, "tests", "capture_limits.py"), "0"]).returncode)
