"""NVTX ranges as the program's own phases (collector/ranges.c, findphase.c): the testbed annotated
as torch.cuda.nvtx would annotate a trainer (ddpbench --nvtx: step, and in it prepare, data,
forward, backward, optimizer, log), each pathology injected in one phase; the report must name
that phase in the finding (evidence.range, the sites' range, the text) and give each rank's ranges
per step (ranks[i].ranges) as the testbed measured them. testapps/nvtx_app: pushes and pops paired
per domain, a start-end range ended on another thread, nesting levels."""
import json
import os
import shutil
import statistics
import subprocess
from lib import *

CUDA = os.environ.get("CUDA_HOME", "/usr/local/cuda")
if not os.path.exists(os.path.join(CUDA, "include", "nvtx3", "nvToolsExt.h")):
    skip("NVTX ranges as phases", "no NVTX headers in %s/include/nvtx3 (set CUDA_HOME): ddpbench --nvtx and "
         "preload/nvtx.c are not built" % CUDA)
    done()
if not shutil.which("mpirun") or not os.path.exists(BENCH):
    skip("NVTX ranges as phases", "mpirun or build/ddpbench missing (Open MPI not installed)")
    done()

d = tmpdir("ranges")
data = bench_data(d)
TINY = ["--hidden", "128", "--steps", "12", "--nvtx"]


def finding(j, kind):
    return next((f for f in (j or {}).get("findings", []) if f["kind"] == kind), None)


def ranges(j, r):
    return {g["name"]: g for g in j["ranks"][r].get("ranges", [])}


def case(name, args, kind, want_range, truth):
    """the testbed with args injected; kind's finding must name want_range; truth(summary, report)
    gives the figures' checks against the testbed's own"""
    def attempt(k):
        s, out = testbed(os.path.join(d, name), data, TINY + args)
        j, p = checked_report(out) if s else (None, None)
        f = finding(j, kind)
        if not f:  # (on a host another job holds, not judged: busy_host)
            return busy_host([(False, "%s: a %s finding (%s)" % (name, kind, [x["kind"] for x in (j or {}).get("findings", [])]))], j)
        rg = f["evidence"].get("range") or {}
        sites = f["evidence"].get("sites", [])
        checks = [(rg.get("name") == want_range, "%s: the %s finding's evidence.range is %r (%s)" % (name, kind, want_range, rg)),
                  (not sites or sites[0]["range"] == want_range,
                   "%s: its top site ran in %r (%s)" % (name, want_range, sites[:1]))]
        text = subprocess.run([DDPSPY, "report", out], capture_output=True, text=True, timeout=120).stdout
        checks.append(('in NVTX range "%s"' % want_range in text and "NVTX ranges of its training thread" in text,
                       "%s: the text report names the range in the finding and lists the ranks' ranges" % name))
        return busy_host(checks + truth(s, j, rg), j)
    live(name, attempt)


def host_truth(r):
    """rank r's host work per step, all in one range: the range's time is the testbed's host time"""
    def truth(s, j, rg):
        want = s["ranks"][r]["host_ms"]
        got = rg.get("ms_per_step", -1)
        exc = rg.get("excess_ms_per_step", -1)
        m = 0.1 * want + 1.0
        return [(abs(got - want) <= m, "the range's %.1f ms per step is rank %d's host time, %.1f (+-%.1f)" % (got, r, want, m)),
                (abs(exc - (want - s["ranks"][1 - r]["host_ms"])) <= m,
                 "its excess over its peer, %.1f ms, is the testbed's (%.1f)" % (exc, want - s["ranks"][1 - r]["host_ms"]))]
    return truth


# ---- a straggler's host delay, in "prepare" ----
case("straggler", ["--straggler-rank", "1", "--straggler-ms", "30"], "straggler", "prepare", host_truth(1))

# ---- rank 0's logging before a barrier, in "log" ----
case("rank0", ["--rank0-work-ms", "40"], "rank0_serialization", "log", host_truth(0))


# ---- a straggler of compute: its excess is in backward (twice forward's), not the whole step ----
def compute_truth(s, j, rg):
    mine, peer = ranges(j, 1), ranges(j, 0)
    ratio = [mine[n]["ms_per_step"] / max(peer[n]["ms_per_step"], 1e-3) for n in ("forward", "backward")]
    return [(all(1.8 <= x <= 5 for x in ratio),
             "forward and backward take about 3x its peer's on the slowed rank (%.2f, %.2f)" % tuple(ratio)),
            (rg.get("excess_ms_per_step", 0) > mine["forward"]["ms_per_step"] - peer["forward"]["ms_per_step"],
             "backward's excess is more than forward's")]


case("slowdown", ["--straggler-rank", "1", "--straggler-slowdown", "3", "--hidden", "384"], "straggler", "backward",
     compute_truth)


# ---- input waits, in "data": the range's wait is the testbed's data time ----
def data_truth(s, j, rg):
    want = max(x["data_ms"] for x in s["ranks"])
    got = rg.get("input_wait_ms_per_step", -1)
    m = 0.15 * want + 1.0
    return [(abs(got - want) <= m, "the range's input wait, %.1f ms per step, is the testbed's data time %.1f (+-%.1f)"
             % (got, want, m))]


case("input", ["--slow-data", "delay", "--read-delay-ms", "20"], "data_stall", "data", data_truth)


# ---- every rank's ranges per step, against the testbed's phases; and none without NVTX ----
def per_rank(k):
    s, out = testbed(os.path.join(d, "plain"), data, TINY)
    j, p = checked_report(out) if s else (None, None)
    if not j:
        return [(False, "the annotated testbed ran and was reported")]
    checks = [(j["job"]["step_source"] == "collectives" and "step_range" not in j["job"],
               "where collectives give the steps, they do, not the range (%s)" % j["job"]["step_source"])]
    for r in range(2):
        g = ranges(j, r)
        checks.append((set(g) >= {"step", "prepare", "data", "forward", "backward", "optimizer"},
                       "rank %d: its ranges are the testbed's phases (%s)" % (r, sorted(g))))
        if "step" not in g:
            continue
        # (the testbed's own means over the same steps: a range's time is its mean, not a median)
        step, data_ms = s["ranks"][r]["step_ms"], s["ranks"][r]["data_ms"]
        checks.append((abs(g["step"]["ms_per_step"] - step) <= 0.1 * step + 0.5,
                       "rank %d: \"step\" takes its step's time, %.1f ms against the testbed's %.1f"
                       % (r, g["step"]["ms_per_step"], step)))
        checks.append((abs(g["data"]["ms_per_step"] - data_ms) <= 0.15 * data_ms + 0.5,
                       "rank %d: \"data\" takes its input's time, %.2f ms against the testbed's %.2f"
                       % (r, g["data"]["ms_per_step"], data_ms)))
        checks.append((g["step"]["depth"] == 0 and g["forward"]["depth"] == 1 and abs(g["step"]["calls_per_step"] - 1) < 0.05,
                       "rank %d: \"step\" once per step at level 0, its phases at level 1 (%s)" % (r, g["step"])))
        checks.append((g["backward"]["calls_ms_per_step"]["comms"] > 0 and g["step"]["calls_ms_per_step"]["comms"] > 0,
                       "rank %d: the calls in a range count in the innermost: the all-reduces started in backward "
                       "there, their wait after it in step (%s, %s)"
                       % (r, g["backward"]["calls_ms_per_step"], g["step"]["calls_ms_per_step"])))
    html = os.path.join(d, "plain.html")
    subprocess.run([DDPSPY, "report", "--html", html, out], capture_output=True, timeout=120)
    page = open(html).read() if os.path.exists(html) else ""
    checks.append(('<table id="ranges">' in page and "<td>backward</td>" in page,
                   "the HTML report has the ranks' ranges table"))
    return busy_host(checks, j)


live("per-rank", per_rank)
s, out = testbed(os.path.join(d, "none"), data, ["--hidden", "128", "--steps", "8", "--straggler-rank", "1",
                                                  "--straggler-ms", "30"])
j, p = checked_report(out) if s else (None, None)
f = finding(j, "straggler")
ok(j and not any("ranges" in r for r in j["ranks"]) and f and "range" not in f["evidence"] and
   all(x["range"] is None for x in f["evidence"].get("sites", [])),
   "a program without NVTX: no ranges, no evidence.range, sites in no range")

# ---- on the simulated device: the host's wait for the GPU in the range that reads the loss back ----
if os.path.exists(os.path.join(SIMDIR, "libcupti.so.13")) and os.path.exists(os.path.join(BUILD, "libddpbench_gpu.so")):
    def host_sync(k):
        s, out = testbed(os.path.join(d, "gpu"), data, ["--gpu", "--steps", "10", "--host-sync", "--host-ms", "8", "--nvtx"],
                         env={"LD_LIBRARY_PATH": SIMDIR, "SIMGPU_KERNELS": "ddpbench_=arg", "SIMGPU_MOVE_BYTES": "0"})
        j, p = checked_report(out) if s else (None, None)
        f = finding(j, "host_sync")
        sites = f["evidence"].get("sites", []) if f else []
        return [(sites and sites[0]["range"] == "loss", "host_sync's site is in the range that reads the loss back: %s"
                 % sites[:1])]
    live("host-sync", host_sync)
else:
    skip("host_sync's range", "make sim did not build the simulated device and the testbed's GPU half")

# ---- no collectives: the program's "step" range marks the steps (steps of 2, 6 and 10 ms in turn,
# which no time window matches); their times against the program's own clock of the same bounds
# (each push to the next, the last to its pop), whatever a loaded host makes of the sleeps ----
def steps(k):
    out = os.path.join(d, "steps")
    shutil.rmtree(out, ignore_errors=True)  # (a rerun's file alone)
    p = traced([os.path.join(APPS, "nvtx_app"), "9", "4"], out, env={"RANK": "0", "WORLD_SIZE": "1"})
    j, _ = checked_report(out) if p.returncode == 0 else (None, None)
    job, st = (j or {}).get("job", {}), (j or {}).get("step", {})
    own = json.loads(p.stdout.splitlines()[-1])["step_ms"] if p.returncode == 0 else []
    mine = own[job.get("skipped", 0):]
    want = (statistics.median(mine), max(mine)) if mine else (0, 0)  # (an_quantile's p50)
    got = (st.get("p50_ms", 0), st.get("max_ms", 0))
    # (2% or 0.1 ms: the program reads its clock just outside the push; a preemption between the
    # two on a loaded host is a miss run again)
    return [(job.get("step_source") == "markers" and job.get("step_range") == {"name": "step", "domain": None}
             and job.get("steps_detected") == 9,
             "no collectives: the steps are the NVTX range \"step\", 9 of them (%s, %s, %s)"
             % (job.get("step_source"), job.get("step_range"), job.get("steps_detected"))),
            (mine and all(abs(g - w) <= max(0.1, 0.02 * w) for g, w in zip(got, want)),
             "their times are the program's: p50 %.2f and max %.2f ms against its own %.2f and %.2f (steps of "
             "2, 6 and 10 ms in turn, %d analysed)" % (got + want + (len(mine),)))]


live("nvtx-steps", steps)

# ---- 30 op ranges a step named as torch's emit_nvtx names them: one name an op, the table of 24
# names full (what gave way counted), the steps still from "step" ----
out = os.path.join(d, "ops")
p = traced([os.path.join(APPS, "nvtx_app"), "9", "4", "30"], out, env={"RANK": "0", "WORLD_SIZE": "1"})
j, _ = checked_report(out) if p.returncode == 0 else (None, None)
r0 = j["ranks"][0] if j else {}
names = [g["name"] for g in r0.get("ranges", [])]
ok(j and j["job"].get("step_range", {}).get("name") == "step" and "step" in names and
   all("," not in n for n in names) and any(n.startswith("aten::op") for n in names) and r0.get("ranges_lost", 0) > 0,
   "emit_nvtx's op names cut before \", seq = \" (%s), the names past 24 counted lost (%s), the steps still from "
   "\"step\"" % (names[:6], r0.get("ranges_lost")))

# ---- nvtx_app: domains, a start-end range ended on another thread, nesting ----
app = os.path.join(APPS, "nvtx_app")
out = os.path.join(d, "app")
p = traced([app, "5"], out, env={"RANK": "0", "WORLD_SIZE": "1"})
j, _ = checked_report(out) if p.returncode == 0 else (None, None)
g = ranges(j, 0) if j else {}
ok({n: (g[n]["domain"], g[n]["depth"]) for n in g} ==
   {"epoch": (None, 0), "step": (None, 1), "checkpoint": (None, -1), "forward": ("ddp", 1), "backward": ("ddp", 1)},
   "nvtx_app: each range by name with its domain and level (a start-end range: -1): %s"
   % {n: (g[n]["domain"], g[n]["depth"]) for n in g})
ok(j and "ranges_lost" not in j["ranks"][0], "nvtx_app: no range lost")
cleanup(d)
done()
