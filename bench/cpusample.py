"""make bench, CPU sampler part (preload/cpusample.c): its cost to the program it samples.
build/testapps/cpuhot does a fixed amount of arithmetic on its main thread (`cpuhot work N`),
traced with the main thread's native stacks sampled at 0 (DDPSPY_SAMPLE_HZ=0), 100 (the default)
and 1000 Hz, in alternating rounds (15 unless ROUNDS says); per rate the median round's CPU time of that work (the
kernel's part of a sample, taken in the thread's own time, shows there) and the sampler thread's
own CPU time (its schedstat) against the wall time: what it takes from another CPU."""
import json
import os
import statistics
import subprocess
import tempfile

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
LIB = os.path.join(ROOT, "build", "libddpspy.so")
APP = os.path.join(ROOT, "build", "testapps", "cpuhot")
# 15 rounds by default: on the 2-core VM the medians of 5 moved by up to 3% at 100 Hz, more than
# the 1% to resolve (docs/performance.md)
ROUNDS = int(os.environ.get("ROUNDS", "15"))
RATES = (0, 100, 1000)
out = tempfile.mkdtemp(prefix="ddpspy-bench-cpusample-")
runs = {hz: [] for hz in RATES}
for r in range(ROUNDS):
    for hz in RATES:
        env = dict(os.environ, LD_PRELOAD=LIB, DDPSPY_OUT=os.path.join(out, "s%d" % hz), DDPSPY_SAMPLE_HZ=str(hz))
        p = subprocess.run([APP, "work", "6000"], env=env, capture_output=True, text=True, check=True)
        runs[hz].append(json.loads(p.stdout))
        subprocess.run(["rm", "-rf", env["DDPSPY_OUT"]])
print("CPU sampler: a fixed loop's CPU time on the sampled thread, and the sampler thread's own CPU "
      "(median of %d alternating rounds)" % ROUNDS)
base = statistics.median(x["cpu_ms"] for x in runs[0])
print("%-10s%16s%10s%26s" % ("rate", "loop CPU ms", "cost", "sampler CPU (of one CPU)"))
for hz in RATES:
    c = statistics.median(x["cpu_ms"] for x in runs[hz])
    s = statistics.median(x["sampler_cpu_ms"] / x["wall_ms"] for x in runs[hz])
    print("%-10s%16.1f%+9.2f%%%25.2f%%" % ("%d Hz" % hz, c, 100 * (c - base) / base, 100 * s))
c100 = statistics.median(x["cpu_ms"] for x in runs[100])
print("target: at most 1%% of the program's CPU time at 100 Hz; measured %+.2f%% (%s)"
      % (100 * (c100 - base) / base, "met" if c100 - base <= 0.01 * base else "NOT met"))
subprocess.run(["rm", "-rf", out])
