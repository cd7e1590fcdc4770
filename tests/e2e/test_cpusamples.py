"""The CPU sampler (preload/cpusample.c, format 2.13's "cpusamples"): the main thread's native
stacks DDPSPY_SAMPLE_HZ times a second of its CPU time, from the kernel's task clock, read by a
thread of ddpspy's with no signal sent to the program. Judged against build/testapps/cpuhot,
which spends known CPU time in hot_a (called from run_step) and hot_b (from b_outer) and sleeps
between: the samples' split between the two functions and their total against the CPU time the
program measured itself, no sample in a sleep, the frames by name (collector/elfsym.c), the
program's descriptors without ddpspy's perf event, DDPSPY_SAMPLE_HZ=0 for none, none under a
seccomp filter (and the file's reason); and on the
testbed, a straggler of compute named where its compute goes."""
import json
import math
import os
import subprocess
from lib import *

APP = os.path.join(APPS, "cpuhot")
d = tmpdir("cpusamples")


def run(name, args, env=None):
    out = os.path.join(d, name)
    p = traced([APP] + [str(a) for a in args], out, env=env)
    truth = json.loads(p.stdout) if p.returncode == 0 else None
    recs, rc, _ = dump(out)
    return truth, recs, out


def fn(frame):
    """the function a frame names ("module+0xoff (name+0xoff)" or "module+0xstart (name)"), None
    when unnamed"""
    return frame.split(" (", 1)[1].rstrip(")").rsplit("+0x", 1)[0] if " (" in frame else None


# (a rank of its own, for the view below)
truth, recs, out = run("hot", [30, 30, 10, 20], {"RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0"})
ss = of(recs, "cpu_sample")
summ = subprocess.run([DDPSPY, "dump", "--summary", "--json", out], capture_output=True, text=True).stdout
fl = [json.loads(l) for l in summ.splitlines() if '"cpu_samples"' in l]
why = fl[0]["cpu_samples_why"] if fl else None
if truth is not None and why:
    # (a machine that refuses perf events to this process, or runs it under a seccomp filter:
    # perf_event_paranoid 3, a container's profile; the file must say so, which it did)
    skip("CPU samples", "this machine refuses them: %s" % why)
    cleanup(d)
    done()
ok(truth is not None and len(ss) > 0, "cpuhot ran under the preload and its main thread was sampled (%d samples)" % len(ss))
ok(fl and fl[0]["cpu_samples"] == len(ss) and fl[0]["cpu_samples_lost"] == 0 and fl[0]["cpu_sample_hz"] == 100
   and fl[0]["cpu_samples_why"] is None,
   "the file counts its samples, none lost, at 100 Hz: %s" % ({k: v for k, v in fl[0].items() if k.startswith("cpu")} if fl else None))

# where: each sample's innermost function and its callers, from the program's own symbols
inner = [[fn(f) for f in s["frames"][:4]] for s in ss]
na = sum(1 for f in inner if f[:3] == ["hot_a", "run_step", "main"])
nb = sum(1 for f in inner if f[:4] == ["hot_b", "b_outer", "run_step", "main"])
ok(ss and (na + nb) >= 0.95 * len(ss), "samples fall in hot_a <- run_step <- main or hot_b <- b_outer <- run_step <- main "
   "(%d and %d of %d; others: %s)" % (na, nb, len(ss), [f for f in inner if f[0] not in ("hot_a", "hot_b")][:3]))
# the split, against the CPU time each took: a binomial's 3 standard deviations
if truth and na + nb:
    p = truth["a_ms"] / (truth["a_ms"] + truth["b_ms"])
    got = na / (na + nb)
    tol = 3 * math.sqrt(p * (1 - p) / (na + nb)) + 0.02
    ok(abs(got - p) <= tol, "hot_a's share of the samples %.3f within %.3f of its share of the CPU time %.3f"
       % (got, tol, p))
    # the total: a sample per 10 ms of the thread's CPU time (its time before main() too: the
    # loader's and ddpspy's start, a few ms), within 3 counting deviations and 2 periods
    want = truth["cpu_ms"] / 10
    tol = 3 * math.sqrt(want) + 2
    ok(abs(len(ss) - want) <= tol + 3, "%d samples for %.0f ms of CPU time: %.0f expected within %.0f"
       % (len(ss), truth["cpu_ms"], want, tol + 3))

# none while the thread sleeps (its task clock stands still): no sample in a recorded sleep
sleeps = [(e["t_ns"], e["t_ns"] + e["dur_ns"]) for e in events(recs, "sleep")]
inside = [s for s in ss if any(a + 1e6 < s["t_ns"] < b - 1e6 for a, b in sleeps)]
ok(len(sleeps) >= 28 and not inside, "no sample inside the program's %d sleeps (%d)" % (len(sleeps), len(inside)))
ok(truth and not any("perf_event" in f for f in truth["fds"]),
   "the perf event's descriptor is not in the program's table: %s" % (truth["fds"] if truth else None))

# the Perfetto view of its steps (no collectives: time windows): the samples as instants on the
# main thread, named by their function, their frames in args
vf = os.path.join(d, "hot.json")
q = subprocess.run([DDPSPY, "view", out, "-o", vf, "--steps", "0-19"], capture_output=True, text=True)
ev = json.load(open(vf))["traceEvents"] if q.returncode == 0 else []
inst = [e for e in ev if e.get("cat") == "cpu sample"]
ok(q.returncode == 0 and len(inst) >= 0.5 * len(ss) and all(e["tid"] == e["pid"] for e in inst)
   and {fn(e["name"]) for e in inst} <= {"hot_a", "hot_b", "run_step"} and all(len(e["args"]["frames"]) >= 3 for e in inst),
   "ddpspy view: %d of the %d samples as instants on the main thread, named by hot_a or hot_b (or run_step, "
   "where ddpspy recorded its sleep's stack: its own frames are passed over to the call's site): %s"
   % (len(inst), len(ss), sorted({e["name"] for e in inst})[:3]))

# off
truth0, recs0, _ = run("off", [10, 10, 5, 5], {"DDPSPY_SAMPLE_HZ": "0"})
ok(truth0 is not None and not of(recs0, "cpu_sample") and "ddpspy-cpusamp" not in truth0["threads"],
   "DDPSPY_SAMPLE_HZ=0: no samples and no sampler thread: %s" % (truth0["threads"] if truth0 else None))
ok(truth and "ddpspy-cpusamp" in truth["threads"], "sampled: the sampler is a thread of ddpspy's, named so: %s"
   % (truth["threads"] if truth else None))
# under a seccomp filter (one that allows everything: another may kill for perf_event_open) the
# sampler does not try, and the file says why
truthf, recsf, outf = run("filtered", ["filtered", 5, 5, 5, 5])
summ = subprocess.run([DDPSPY, "dump", "--summary", "--json", outf], capture_output=True, text=True).stdout
ff = [json.loads(l) for l in summ.splitlines() if '"cpu_samples"' in l]
ok(truthf is not None and ff and ff[-1]["cpu_samples"] == 0 and "seccomp" in (ff[-1]["cpu_samples_why"] or ""),
   "under a seccomp filter: no samples, and why: %s" % (ff[-1]["cpu_samples_why"] if ff else None))
# a higher rate: as many more samples, none lost
truth1, recs1, _ = run("fast", [10, 30, 10, 10], {"DDPSPY_SAMPLE_HZ": "1000"})
n1 = len(of(recs1, "cpu_sample"))
want1 = truth1["cpu_ms"] if truth1 else 0
ok(truth1 and abs(n1 - want1) <= 3 * math.sqrt(want1) + 0.05 * want1 + 5,
   "1000 Hz: %d samples for %.0f ms of CPU time" % (n1, want1))


# the testbed: rank 1 computes 5x slower; the straggler finding's sites are its compute
# (model_*: the layers' forward and backward), not its waits (MPI's progress while it waits is
# in recorded calls)
def testbed_case(k):
    data = bench_data(d) if k == 0 or not os.path.exists(os.path.join(d, "data")) else os.path.join(d, "data")
    truth, out = testbed(os.path.join(d, "slow%d" % k), data, ["--hidden", "128", "--steps", "12",
                                                             "--straggler-rank", "1", "--straggler-slowdown", "5"])
    j, _ = checked_report(out)
    f = [x for x in (j or {}).get("findings", []) if x["kind"] == "straggler" and x.get("rank") == 1]
    sites = f[0]["evidence"].get("sites", []) if f else []
    names = [[fn(x) for x in s["frames"]] for s in sites]
    return busy_host([(bool(f) and f[0]["evidence"].get("cause") == "compute", "testbed: a compute straggler on rank 1"),
                      (bool(sites) and all(any(n and n.startswith(("model_", "layer_")) for n in ns) for ns in names)
                       and not any(n and "MPI" in n for ns in names for n in ns),
                       "testbed: its sites are in the model's compute: %s" % [s["function"] for s in sites])], j)


live("cpusamples-testbed", testbed_case)
cleanup(d)
done()
