"""ddpspy states its own cost (issue 40): each process's file says what one recorded event costs,
measured by its writer thread at start (preload/selfcost.c), and the report turns it into a share
of each rank's step (ranks[i].overhead_share, job.overhead_share). Checked: the measure against
`make bench`'s own figure, the extra ns a recorded call that does not block costs
(build/bench/overhead, plain and traced side by side in this run), within a factor of 2 and the
spread the rounds measured; and the
report's share against its own events per step, cost and step time."""
import json
import os
import resource
import shutil
import statistics
import subprocess
import time
from lib import *

d = tmpdir("selfcost")
OVERHEAD = os.path.join(BUILD, "bench", "overhead")


def cost_of(out):
    """the event_ns every file under out states (dump's end records)"""
    recs = dump(out)[0]
    return [r["event_ns"] for r in recs if r.get("type") == "end" and r.get("event_ns")]


def host_busy_s():
    """the host's CPU time in use since boot, all CPUs (/proc/stat's user, nice, system, irq, softirq
    and steal), in seconds"""
    v = [int(x) for x in open("/proc/stat").readline().split()[1:]]
    return (v[0] + v[1] + v[2] + v[5] + v[6] + (v[7] if len(v) > 7 else 0)) / os.sysconf("SC_CLK_TCK")


def outside(run):
    """run() and the CPUs that processes other than its own held meanwhile (CPU seconds per second)"""
    w0, h0, c0 = time.time(), host_busy_s(), resource.getrusage(resource.RUSAGE_CHILDREN)
    r = run()
    w1, h1, c1 = time.time(), host_busy_s(), resource.getrusage(resource.RUSAGE_CHILDREN)
    ours = c1.ru_utime + c1.ru_stime - c0.ru_utime - c0.ru_stime
    return r, max(0.0, h1 - h0 - ours) / max(w1 - w0, 1e-3)


def side_by_side(k):
    """bench/run.sh's comparison, 3 rounds alternating plain and traced: the extra ns of a recorded
    sem_wait that does not block, and the cost the traced runs' files state. Not judged where
    another process held a quarter of a CPU or more while a traced round ran (lib.busy_host's
    rule): on 2 cores the writer thread then shares the program's core, and a traced round took
    240 to 630 ns a call with `yes` on the other (a busy fresh-clone run, 2026-11-28)"""
    plain, traced, stated, held = [], [], [], 0.0
    for i in range(3):
        p = subprocess.run([OVERHEAD, "mt"], capture_output=True, text=True, timeout=120)
        out = os.path.join(d, "bench%d-%d" % (k, i))
        shutil.rmtree(out, ignore_errors=True)
        t, cpus = outside(lambda: subprocess.run([OVERHEAD, "mt"], capture_output=True, text=True, timeout=120,
                                                 env=dict(os.environ, LD_PRELOAD=LIB, DDPSPY_OUT=out)))
        held = max(held, cpus)
        if p.returncode or t.returncode:
            return [(False, "bench/overhead ran: %s %s" % (p.stderr[-200:], t.stderr[-200:]))]
        plain.append(json.loads(p.stdout)["sem_wait_ns"])
        traced.append(json.loads(t.stdout)["sem_wait_ns"])
        stated += cost_of(out)
    extra = statistics.median(traced) - statistics.median(plain)
    ns = statistics.median(stated) if stated else 0
    # (the live measure's own spread widens the comparison, as lib.margin does for every live one:
    # a traced process's rounds swing 70-200 ns apart at times on this VM, docs/performance.md)
    m = margin(extra, 0, traced, plain)
    good = len(stated) == 3 and extra > 0 and (extra - m) / 2 <= ns <= 2 * (extra + m)
    if not good and held >= 0.25:
        return "not judged, the host was busy with other work: processes outside the bench held %.2f CPUs " \
               "while a traced round ran (%.1f ns stated, %.1f measured)" % (held, ns, extra)
    return [(good, "the cost each file states, %.1f ns per event (%s), within a factor of 2 (and the rounds' spread, "
             "%.1f ns) of what a recorded call costs beside the plain one, %.1f ns (traced %s, plain %s)"
             % (ns, stated, m, extra, traced, plain))]


live("selfcost-bench", side_by_side)

# the report: each rank's share is its events per step at the stated cost over its step
if shutil.which("mpirun") and os.path.exists(BENCH):
    data = os.path.join(d, "data")
    subprocess.run([BENCH, "gen-data", data, "--samples", "512"], check=True, stdout=subprocess.DEVNULL)
    truth, out = testbed(os.path.join(d, "run"), data, ["--hidden", "256", "--steps", "20"])
    j = json.loads(subprocess.run([DDPSPY, "report", "--json", out], capture_output=True, text=True).stdout)
    ns = {r["pid"]: r["event_ns"] for r in dump(out)[0] if r.get("type") == "end" and r.get("event_ns")}
    want = [r["events_per_step"] * ns.get(r["pid"], 0) / 1e6 / r["step_p50_ms"] for r in j["ranks"]]
    got = [r["overhead_share"] for r in j["ranks"]]
    ok(truth and all(g is not None and abs(g - w) <= 1e-6 + 0.01 * w for g, w in zip(got, want)) and
       j["job"]["overhead_share"] == max(got) and all(r["events_per_step"] > 50 for r in j["ranks"]),
       "each rank's overhead_share is its events per step x its file's cost per event over its step, the job's "
       "the most of them: %s against %s, job %s" % (got, want, j["job"].get("overhead_share")))
    # an older file that states no cost: null, not 0
    old = os.path.join(ROOT, "tests", "fixtures", "straggler-4ranks")
    j = json.loads(subprocess.run([DDPSPY, "report", "--json", old], capture_output=True, text=True).stdout)
    ok(j["job"]["overhead_share"] is None and all(r["overhead_share"] is None for r in j["ranks"]),
       "files before format 2.8 state no cost: overhead_share null in the job and every rank")
else:
    skip("overhead_share in a report", "mpirun or build/ddpbench missing")

cleanup(d)
done()
