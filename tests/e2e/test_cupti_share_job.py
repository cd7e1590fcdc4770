"""A training job profiled by a second CUPTI client while ddpspy records it (cupti/share.c), on the
simulated device: the testbed's GPU mode on 2 ranks (`ddpbench train --gpu`) with `--cupti-client
3:7`, a client in torch.profiler's shape (testapps/kineto_shape.h) that profiles steps 3 to 7 as a
schedule's active steps, pushing an external id for each step as Kineto does for each op. Ground
truth for the client is the same job without ddpspy: with ddpspy in front it must count the same
kernels and copies of its window (those launched in steps 3 to 6, timed, by their external ids).
Ground truth for ddpspy is the same job under ddpspy without the client: torch.profiler
synchronizes the device before its stop, and ddpspy's report must then be the same (steps, step
source, kernels, NCCL kernels and launch calls a step, the verdict's kind, the findings of 0.1 or
more), with no record lost. An on-demand trace (dynolog's) stops without synchronizing (--cupti-client-no-sync):
its end-of-session forced flush must still hand the client its window, as alone (a default flush
keeps back a buffer that also holds work still running), while ddpspy's records of what still ran
come back untimed, at most one step's, counted and said."""
import json
import os
import subprocess
from lib import *

need_testbed_gpu("a training job shared with a CUPTI client")

d = tmpdir("cupti-share-job")
data = bench_data(d, 2048)
SIM = SIM_TESTBED
ARGS = ["--data", data, "--gpu", "--steps", "10", "--host-ms", "5"]
CLIENT = ["--cupti-client", "3:7"]
STEPS = 4  # (steps 3 to 6: step 7's work may still run at the client's stop)


def alone(extra):
    p = subprocess.run(MPIRUN + ["-np", "2", BENCH, "train"] + ARGS + extra, capture_output=True, text=True,
                       timeout=300, env=dict(os.environ, **SIM))
    try:
        return json.loads(p.stdout.splitlines()[-1])
    except (ValueError, IndexError):
        print("# alone: rc %d %s" % (p.returncode, p.stderr[-500:]))
        return None


def clients(truth):
    return [r.get("cupti_client") for r in (truth or {}).get("ranks", [])]


def capture(j):
    """what ddpspy's report says of the job's capture and verdict (the findings of 0.1 or more, as
    test_gpu_report judges a healthy run: a busy machine's own stalls make smaller ones)"""
    return j and (j["job"].get("steps_analyzed"), j["job"].get("step_source"), j["verdict"].get("bound"),
                  [(r.get("gpu", {}).get("kernels_per_step"), r.get("gpu", {}).get("nccl_kernels_per_step"),
                    r.get("gpu", {}).get("launches_per_step")) for r in j["ranks"]],
                  sorted(f["kind"] for f in j["findings"] if f["severity"] >= 0.1))


def untimed(out):
    """each process's device records that came back without times (its file's last gpu record)"""
    last = {}
    for r in of(dump(out)[0], "gpu"):
        last[r.get("file")] = r.get("untimed", 0)
    return sorted(last.values())


# the job under ddpspy without the client: ddpspy's ground truth
base_truth, base_out = testbed(os.path.join(d, "plain"), data, ARGS[2:], 2, SIM, 300)
base = report_json(base_out) if base_truth else None
ok(base and base["verdict"].get("bound") == "compute" and all(c == "cupti" for c in
                                                              [x.get("gpu") for x in base.get("coverage", [])]),
   "the job under ddpspy alone: %s" % (capture(base),))

for case, extra in (("torch.profiler", CLIENT), ("on-demand", CLIENT + ["--cupti-client-no-sync"])):
    want = clients(alone(extra))
    truth, out = testbed(os.path.join(d, case), data, ARGS[2:] + extra, 2, SIM, 300)
    got = clients(truth)
    per_step = want[0]["kernels"] / STEPS if want and want[0] else 0
    ok(want and all(c and c["kernels"] > 0 and c["kernels"] % STEPS == 0 and c["copies"] == STEPS for c in want)
       and got == [dict(c, records=g.get("records")) for c, g in zip(want, got)],
       "%s: with ddpspy in front the client counts the kernels and copies of its window it counts alone (%g kernels "
       "a step): %s, alone %s" % (case, per_step, got, want))
    j = report_json(out) if truth else None
    lost = untimed(out)
    cov = [c.get("gpu") for c in (j or {}).get("coverage", [])]
    if case == "torch.profiler":
        ok(j and capture(j) == capture(base) and lost == [0, 0] and cov == ["cupti-shared"] * 2,
           "%s: ddpspy's report is the same as without the client, nothing untimed: %s against %s; untimed %s; "
           "coverage %s" % (case, capture(j), capture(base), lost, cov))
    else:
        warned = [w for w in (j or {}).get("job", {}).get("warnings", []) if "no times" in w]
        # (what still runs then is the last step's 20 ms of kernels, unless the host was held that long
        # between the step's end and the stop)
        ok(j and len(lost) == 2 and all(0 <= n <= per_step for n in lost) and len(warned) == (sum(lost) > 0),
           "%s: ddpspy's records of the work still running at the client's stop come back untimed, at most a step's "
           "(%g), counted and said: %s; %s" % (case, per_step, lost, warned))
done()
