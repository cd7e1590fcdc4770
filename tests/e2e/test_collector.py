"""The collector on synthetic traces whose split is known exactly (bench/gentrace: 40 ms steps, the
training thread reading its 128 samples itself, three Iallreduces and a Waitall): the shares it
computes, and its memory, which must not grow with the length of the trace. The training thread's
events are read a second time instead of being kept, so a trace four times as long may only add
what its collectives take."""
import json
import os
import subprocess
from lib import *

GEN = os.path.join(ROOT, "build", "bench", "gentrace")
if not os.path.exists(GEN):
    skip("the collector on synthetic traces", "build/bench/gentrace missing (make build/bench/gentrace)")
    done()

d = tmpdir("collector")


def measured(path):
    """Runs the report as a child of its own so its peak memory is its own."""
    code = ("import json, resource, subprocess, sys\n"
            "p = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
            "print(json.dumps({'rc': p.returncode, 'out': p.stdout, 'err': p.stderr,\n"
            "                  'rss': resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss}))\n")
    p = subprocess.run(["/usr/bin/python3", "-c", code, DDPSPY, "report", "--json", path],
                       capture_output=True, text=True, timeout=300)
    r = json.loads(p.stdout)
    return json.loads(r["out"]) if r["rc"] == 0 else None, r["rss"], r["err"]


runs = {}
for n in (200000, 800000):
    out = os.path.join(d, "sync%d" % n)
    os.mkdir(out)
    subprocess.run([GEN, out, "2", str(n), "sync"], check=True)
    runs[n] = measured(out)

j, rss_small, err = runs[200000]
if ok(j is not None, "report of 2 ranks x 200k events (rc=0) %s" % err[-300:]):
    # per step of 40 ms: 128 preads of 1.5 us (data), 3 Iallreduce starts of 50 us and a Waitall of
    # 2 ms less 1 us per rank (comms), the rest compute
    r0 = j["ranks"][0]
    want = {"data": 128 * 1.5e-3 / 40, "comms": (3 * 0.05 + 2.0) / 40}
    got = {k: r0["shares"][k] for k in want}
    ok(all(abs(got[k] - want[k]) < 2e-4 for k in want) and abs(r0["step_p50_ms"] - 40) < 0.01,
       "rank 0's split from the streamed events: %s, step %.3f ms (exactly: %s, 40 ms)"
       % (got, r0["step_p50_ms"], {k: round(v, 5) for k, v in want.items()}))
    pats = [f for f in j["findings"] if f["kind"] == "data_stall"]
    ok(not pats and j["verdict"]["bound"] == "compute", "compute-bound, no data stall at 0.5%% data: %s"
       % [(f["kind"], f["severity"]) for f in j["findings"]])

j4, rss_big, err = runs[800000]
if ok(j4 is not None, "report of 2 ranks x 800k events (rc=0) %s" % err[-300:]):
    a, b = j4["ranks"][0]["shares"], j["ranks"][0]["shares"]
    ok(all(abs(a[k] - b[k]) < 2e-4 for k in a) and j4["job"]["steps_analyzed"] > 3 * j["job"]["steps_analyzed"],
       "four times the trace, the same split: %s, %d against %d steps"
       % (j4["ranks"][0]["shares"], j4["job"]["steps_analyzed"], j["job"]["steps_analyzed"]))
    # keeping the training thread's events would take 48 bytes each: 2 x 600k more events, 55 MiB
    kept = 2 * 600000 * 48 / 1024
    grown = rss_big - rss_small
    ok(grown < 0.1 * kept, "peak memory %d KiB at 200k events per rank, %d KiB at 800k: grew %d KiB, under a "
       "tenth of the %d KiB that keeping the training thread's events would add" % (rss_small, rss_big, grown, kept))

cleanup(d)
done()
