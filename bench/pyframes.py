"""make bench, Python frames part: what a blocking call's stack costs with its Python frames
(preload/pyframes.c) beside the same stack without them (DDPSPY_PYFRAMES=0), side by side in one
run: Debian's python3 sleeps 0 s 2000 times at a depth of 5 and of 20 Python frames, every sleep
with its stack (DDPSPY_STACK_US=0), in alternating rounds; the median round's us per call, and the
difference per Python frame read. (By default a stack is taken only for a call blocking more than
1 ms: this is the most that cost can add to one.)"""
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
LIB = os.path.join(ROOT, "build", "libddpspy.so")
PY = "/usr/bin/python3"
PROG = r"""
import sys, time
def d(n):
    if n:
        return d(n - 1)
    t = time.perf_counter_ns()
    for i in range(2000):
        time.sleep(0)
    return (time.perf_counter_ns() - t) / 2000
print(d(int(sys.argv[1]) - 2))
"""
if not os.path.exists(PY) or subprocess.run([PY, "-c", "import sys; sys.exit(sys.version_info[:2] != (3, 11))"]).returncode:
    print("Python frames: skipped (no CPython 3.11 at %s)" % PY)
    sys.exit(0)
out = tempfile.mkdtemp(prefix="ddpspy-bench-py-")
rounds = int(os.environ.get("ROUNDS", "5"))
print("Python frames: a blocking call's stack with and without them (us per call, median of %d rounds)" % rounds)
print("%-8s%12s%12s%10s%14s" % ("depth", "no frames", "frames", "extra", "per frame"))
for depth in (5, 20):
    runs = {0: [], 1: []}
    for r in range(rounds):
        for on in (0, 1):
            env = dict(os.environ, LD_PRELOAD=LIB, DDPSPY_OUT=os.path.join(out, "t%d%d" % (depth, on)),
                       DDPSPY_STACK_US="0", DDPSPY_PYFRAMES=str(on))
            p = subprocess.run([PY, "-c", PROG, str(depth)], env=env, capture_output=True, text=True, check=True)
            runs[on].append(float(p.stdout) / 1000)
            subprocess.run(["rm", "-rf", env["DDPSPY_OUT"]])
    a, b = statistics.median(runs[0]), statistics.median(runs[1])
    print("%-8d%12.1f%12.1f%+10.1f%14.2f" % (depth, a, b, b - a, (b - a) / depth))
subprocess.run(["rm", "-rf", out])
