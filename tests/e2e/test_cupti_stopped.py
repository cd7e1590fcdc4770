"""CUPTI's records stop in the middle of an NCCL job (docs/gpu.md, "One that comes through its own
handle after ddpspy started"), on the simulated device: nccl_app on 2 ranks with NCCL_APP_LATE, a
tracer that loads libcupti through a handle of its own before a given step and registers its
activity callbacks, which CUPTI has one set of: ddpspy gets no more records. Its profiler plugin
still tells NCCL's kernels.

Ground truth: the simulated device runs each step's forward and backward kernels for exactly
SIMGPU_KERNELS' 300 + 400 us, and each step allreduces 32 MiB and exchanges 1 MiB each way with
the other rank (34 MiB, 2 NCCL kernels); the tracer starts before step LATE, so no step from there
on has ddpspy's records. The same job without the tracer is the other reference.

- Records came for a first part (CUPTI hands a full buffer back at once): the report analyses only
  the steps they cover (before, every step after the stop was an empty device step: step p50 0.0
  ms, 1 NCCL kernel and 13.6 MiB a step) and its figures are those of the job without the tracer.
  The plugin's kernels after the stop are not counted as disagreeing with CUPTI's. Without any
  CUDA copy call, the NCCL calls that launched after CUPTI's last record say the same.
- Analysed steps all after the stop (--skip past it): the ranks are split from their hosts, their
  NCCL kernels timed by CUPTI, then by the plugin.
- None came (the tracer at step 4 of 12, before any buffer filled): no kernels or copies, NCCL
  timed by the plugin, and the coverage says what is missing."""
import json
import os
import shutil
import subprocess
from lib import *
from schema import report_errors

need_sim("CUPTI's records stopping in an NCCL job", "nccl.h", "preload/nccl.c")
APP = os.path.join(APPS, "nccl_app")
if not os.path.exists(APP):
    skip("CUPTI's records stopping in an NCCL job", "make sim did not build nccl_app")
    done()

STEPS, LATE = 2000, 1200
COMPUTE_MS = 0.7           # forward 300 us + backward 400 us on the simulated device
NCCL_MIB = 34             # 32 MiB allreduced, 1 MiB sent and 1 received
d = tmpdir("cupti-stopped")


def run(name, steps, extra=None):
    out = os.path.join(d, name)
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    env = dict(os.environ, LD_PRELOAD=LIB, DDPSPY_OUT=out, LD_LIBRARY_PATH=SIMDIR,
               SIMGPU_KERNELS="forward=300,backward=400", NCCL_APP_SKEW_MS="0.5", WORLD_SIZE="2")
    env.update(extra if extra is not None else {"NCCL_APP_TAIL": "1"})
    idfile = os.path.join(out, "id")
    # (its line of step times into a file: a pipe read one rank after the other would fill and hold
    # the other rank in its collective)
    logs = [(open(os.path.join(out, "stdout.%d" % r), "w+"), open(os.path.join(out, "stderr.%d" % r), "w+"))
            for r in range(2)]
    ps = [subprocess.Popen([APP, str(r), "2", idfile, str(steps)], env=dict(env, RANK=str(r)), stdout=o, stderr=e,
                           text=True) for r, (o, e) in enumerate(logs)]
    for p in ps:
        p.wait(timeout=300)
    res = []
    for o, e in logs:
        o.seek(0), e.seek(0)
        res.append((o.read(), e.read()))
        o.close(), e.close()
    truth = [json.loads(o.splitlines()[-1]) if p.returncode == 0 and o.strip() else None
             for p, (o, e) in zip(ps, res)]
    return out, truth, [e[-200:] for o, e in res]


def report(out, *args):
    p = subprocess.run([DDPSPY, "report", "--json", out] + list(args), capture_output=True, text=True, timeout=300)
    return json.loads(p.stdout) if p.stdout.startswith("{") else {}


def text(out, *args):
    return subprocess.run([DDPSPY, "report", out] + list(args), capture_output=True, text=True, timeout=300).stdout


def figures(j):
    """each rank's device figures: compute ms, kernels and NCCL kernels a step, NCCL's bytes a step"""
    return [(round(r.get("gpu", {}).get("ms_per_step", {}).get("compute", 0), 2),
             r.get("gpu", {}).get("kernels_per_step"), r.get("nccl", {}).get("kernels_per_step"),
             round(r.get("nccl", {}).get("bytes_per_step", 0) / 2 ** 20, 3)) for r in j.get("ranks", [])]


plain_out, plain_truth, errs = run("plain", STEPS)
late_out, late_truth, late_errs = run("late", STEPS, {"NCCL_APP_LATE": str(LATE), "NCCL_APP_TAIL": "1"})
ok(all(plain_truth) and all(late_truth) and all(t.get("late_kernels", 0) > 0 for t in late_truth),
   "nccl_app runs %d steps on 2 ranks, alone and with a tracer that takes CUPTI's callbacks before step %d "
   "(the tracer's kernel records: %s): %s %s" % (STEPS, LATE, [t and t.get("late_kernels") for t in late_truth],
                                                 errs, late_errs))
plain, late = report(plain_out), report(late_out)
job = late.get("job", {})
cov = late.get("coverage", [])
cut = job.get("steps_after_cupti_stopped", 0)
skip_n = job.get("steps_detected", 0) - job.get("steps_analyzed", 0) - cut
ok(not report_errors(late) and all("cupti_stopped" in c for c in cov) and cut > 0 and skip_n == 2 and
   # (every step from LATE on has no record of ddpspy's; step k is analysed step k - 2)
   0 < job.get("steps_analyzed", 0) <= LATE - 2,
   "the report leaves out the steps after CUPTI's records stopped: %s analysed, %s after the stop left out, of %s "
   "found (the tracer came before step %d)" % (job.get("steps_analyzed"), cut, job.get("steps_detected"), LATE))
want = [(COMPUTE_MS, 2, 2, NCCL_MIB)] * 2
ok(figures(late) == figures(plain) == want,
   "each rank's device figures over the steps CUPTI covered are the job's without the tracer, and the simulated "
   "device's (compute ms, kernels, NCCL kernels, NCCL bytes a step): %s; without the tracer %s; truth %s"
   % (figures(late), figures(plain), want))
p50, plain_p50 = late.get("step", {}).get("p50_ms", 0), plain.get("step", {}).get("p50_ms", 0)
ok(p50 >= COMPUTE_MS and plain_p50 >= COMPUTE_MS,
   "a step lasts at least its compute on the device: p50 %s ms (without the tracer %s; before, the empty steps "
   "after the stop made it 0.0)" % (p50, plain_p50))
chk = [c.get("nccl_check", {}) for c in cov]
ok(all(c.get("nccl_timing") == "cupti" and c.get("cupti_stopped", {}).get("nccl_timing_after") == "nccl-plugin"
       for c in cov) and
   all(k.get("plugin_only") == 0 and k.get("cupti_only") == 0 and k.get("matched", 0) > 0 and
       k.get("matched", 0) + k.get("after_cupti_stopped", 0) == c.get("nccl_plugin", {}).get("collectives")
       for k, c in zip(chk, cov)),
   "the plugin's NCCL kernels agree with CUPTI's where both saw them; those after the stop are the plugin's "
   "alone, not counted as disagreeing: %s" % [(c.get("nccl_timing"), c.get("cupti_stopped"), k) for k, c in zip(chk, cov)])
t = text(late_out)
line = next((x for x in t.splitlines() if x.startswith("coverage: ")), "")
jl = next((x for x in t.splitlines() if x.startswith("job: ")), "")
ok("left out" in jl and "CUPTI until" in line and "profiler plugin after that" in line and
   sum("CUPTI's records stopped" in w for w in job.get("warnings", [])) == 3,
   "the text says it: %s; %s" % (jl[:160], line))

# no CUDA copy call at all (NCCL_APP_TAIL off): the NCCL calls that launched on the blocking
# communicator tell it (each has its driver launch's record inside it); before, nothing did, and the
# report had the empty steps with no word of why
bare_out, bare_truth, errs = run("no-copies", STEPS, {"NCCL_APP_LATE": str(LATE)})
bare = report(bare_out)
stops = [c.get("cupti_stopped", {}) for c in bare.get("coverage", [])]
ok(all(bare_truth) and not report_errors(bare) and len(stops) == 2 and
   all(x.get("copies_after") == 0 and x.get("nccl_launches_after", 0) > 0 for x in stops) and
   bare.get("job", {}).get("steps_after_cupti_stopped", 0) > 0 and figures(bare) == want,
   "no copy calls: the NCCL launches after CUPTI's last record say it stopped (%s), the steps after it are left "
   "out (%s), and the figures are the run's without the tracer: %s %s"
   % (stops, bare.get("job", {}).get("steps_after_cupti_stopped"), figures(bare), errs))

# every analysed step after the stop: no device timeline to split, NCCL timed by CUPTI then by the
# plugin (which is not told of sends and receives: the allreduce's kernel alone, 32 MiB)
after = report(late_out, "--skip", str(LATE + 100))
ranks = after.get("ranks", [])
ok(not report_errors(after) and len(ranks) == 2 and all("gpu" not in r for r in ranks) and
   [(r.get("nccl", {}).get("source"), r.get("nccl", {}).get("after_cupti_stopped"), r.get("nccl", {}).get("kernels_per_step"),
     round(r.get("nccl", {}).get("bytes_per_step", 0) / 2 ** 20, 3)) for r in ranks] == [("cupti", "nccl-plugin", 1, 32)] * 2 and
   sum("split from its host" in w for w in after.get("job", {}).get("warnings", [])) == 2,
   "analysed steps all after the stop: each rank split from its host, its NCCL kernels from CUPTI, then from "
   "the plugin: %s" % [(r.get("gpu"), r.get("nccl")) for r in ranks])

# the tracer before any of ddpspy's buffers filled: none of its records came
none_out, none_truth, errs = run("none", 12, {"NCCL_APP_LATE": "4", "NCCL_APP_TAIL": "1"})
j = report(none_out)
cov = j.get("coverage", [])
ok(all(none_truth) and len(cov) == 2 and
   all(c.get("missing") == ["kernels", "copies"] and c.get("nccl_timing") == "nccl-plugin" and
       c.get("cupti_stopped", {}).get("seconds_before_last_copy", 0) is None and
       c.get("cupti_stopped", {}).get("nccl_timing_after") == "nccl-plugin" for c in cov) and
   [r.get("nccl", {}).get("source") for r in j.get("ranks", [])] == ["nccl-plugin"] * 2,
   "none of CUPTI's records came: no kernels or copies, NCCL kernels from the plugin, and the coverage says so: %s %s"
   % ([(c.get("missing"), c.get("nccl_timing")) for c in cov], errs))
cleanup(d)
done()
