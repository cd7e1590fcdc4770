"""make bench, Python frames part: what a blocking call's stack costs with its Python frames
(preload/pyframes.c) beside the same stack without them (DDPSPY_PYFRAMES=0), side by side in one
run: Debian's python3 sleeps 0 s 2000 times at a depth of 5 and of 20 Python frames, every sleep
with its stack (DDPSPY_STACK_US=0), in alternating rounds; the median round's us per call, and the
difference per Python frame read. (By default a stack is taken only for a call blocking more than
1 ms: this is the most that cost can add to one.) Then the sampler's cost to the program: a Python
loop's iterations in 2 s with the main thread sampled at 100 Hz and not at all."""
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

# the sampler's cost to the program: a Python loop's work in 2 s on the main thread, sampled at 100
# Hz and not at all (DDPSPY_SAMPLE_HZ=0), both traced, in alternating rounds
LOOP = r"""
import time
def work(n):
    x = 0
    for i in range(n):
        x += i * i
    return x
def step(d):
    if d:
        return step(d - 1)
    t, n = time.monotonic(), 0
    while time.monotonic() - t < 2.0:
        work(1000)
        n += 1
    return n
def sampler_cpu_s():
    import os
    for t in os.listdir("/proc/self/task"):
        try:
            if open("/proc/self/task/%s/comm" % t).read().strip() == "ddpspy-pysample":
                return int(open("/proc/self/task/%s/schedstat" % t).read().split()[0]) / 1e9
        except OSError:
            pass
    return 0.0
t0 = time.monotonic()
n = step(18)
print(n, sampler_cpu_s() / (time.monotonic() - t0))
"""
print("Python sampler: the main thread's loop iterations in 2 s, 20 frames deep (median of %d rounds)" % rounds)
runs, cpu = {0: [], 100: []}, []
for r in range(rounds):
    for hz in (0, 100):
        env = dict(os.environ, LD_PRELOAD=LIB, DDPSPY_OUT=os.path.join(out, "s%d" % hz), DDPSPY_SAMPLE_HZ=str(hz))
        p = subprocess.run([PY, "-c", LOOP], env=env, capture_output=True, text=True, check=True)
        n, share = p.stdout.split()
        runs[hz].append(int(n))
        if hz:
            cpu.append(float(share))
        subprocess.run(["rm", "-rf", env["DDPSPY_OUT"]])
a, b = statistics.median(runs[0]), statistics.median(runs[100])
print("%-16s%12s%12s%10s" % ("", "0 Hz", "100 Hz", "cost"))
print("%-16s%12d%12d%+9.2f%%" % ("iterations", a, b, 100 * (a - b) / a))
print("the sampler thread's own CPU time (schedstat): %.2f%% of one CPU (median; its rounds %s)"
      % (100 * statistics.median(cpu), ["%.2f%%" % (100 * c) for c in cpu]))
subprocess.run(["rm", "-rf", out])
