"""The capture's limits, at full size (make stress runs this; make test runs smaller versions in
tests/e2e/test_threads.py): 8 threads x 1M one-byte reads at the default settings, RUNS times in a
row, each file read to its end with written + dropped == produced exactly; then step markers at a
steady 5M events/s on one thread and 2M events/s on each of 8 threads for 2 s (the threads sleep
between bursts, leaving the CPU to the writer), with the drops counted.
usage: capture_limits.py [RUNS]"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
LIB, DDPSPY, THREADS = (os.path.join(ROOT, "build", p) for p in ("libddpspy.so", "ddpspy", "testapps/threads"))


def traced(argv, out):
    p = subprocess.run(argv, env=dict(os.environ, LD_PRELOAD=LIB, DDPSPY_OUT=out), capture_output=True, text=True)
    q = subprocess.run([DDPSPY, "dump", "--summary", "--json", out], capture_output=True, text=True)
    recs = [json.loads(line) for line in q.stdout.splitlines() if line.strip()]
    whole = q.returncode == 0 and not [r for r in recs if r["type"] == "error"]
    return json.loads(p.stdout or "{}"), recs, whole


runs = int(sys.argv[1]) if len(sys.argv) > 1 else 20
tmp = tempfile.mkdtemp(prefix="ddpspy-limits-")
exact = 0
for i in range(runs):
    out = os.path.join(tmp, "reads-%d" % i)
    _, recs, whole = traced([THREADS, "reads", "8", "1000000"], out)
    pid = [r for r in recs if r["type"] == "process"][0]["pid"]
    loss = [r for r in recs if r["type"] == "loss" and r["tid"] != pid]
    end = [r for r in recs if r["type"] == "end"][0]
    w, d = sum(x["events"] for x in loss), sum(x["dropped"] for x in loss)
    good = whole and w + d == 8 * 1000004 and end["dropped"] == d and end["complete"] == 1
    exact += good
    print("8 x 1M reads, run %d: written %d + dropped %d %s produced %d" % (i + 1, w, d, "==" if good else "!=", 8 * 1000004))
    shutil.rmtree(out)
print("%d of %d runs exact" % (exact, runs))
bad = exact != runs
for t, rate in [(1, 5000000), (8, 2000000)]:
    out = os.path.join(tmp, "rate-%d" % t)
    made, recs, whole = traced([THREADS, "rate", str(t), str(rate), "2"], out)
    end = [r for r in recs if r["type"] == "end"][0]
    print("%d thread(s) x %.1fM events/s for 2 s (achieved %.2fM/s each): %d events, %d dropped (%.2f%%)%s"
          % (t, rate / 1e6, made["per_thread_rate"] / 1e6, end["events"], end["dropped"],
             100.0 * end["dropped"] / max(1, end["events"] + end["dropped"]), "" if whole else "; FILE DAMAGED"))
    bad |= not whole
shutil.rmtree(tmp)
sys.exit(1 if bad else 0)
