"""Real PyTorch pipeline parallelism (issue 42): examples/torch/pipeline.py, two stages over gloo's
send and recv under torchrun, unmodified, traced by `ddpspy run`. c10d's point-to-point calls are
recorded (gloo_p2p, gloo_wait: format 2.10) and matched across the ranks; the report finds the
optimizer steps among the micro-batches, the bubble against the trainer's own idle and the
schedule's prediction, and a slower stage as stage_imbalance on its rank at what it costs (healthy
and slow runs side by side). Debian's PyTorch is used through /usr/bin/python3 and
/usr/bin/torchrun; the test is skipped, saying so, when it is not installed."""
import json
import os
import shutil
import statistics
import subprocess
from lib import *

SCRIPT = os.path.join(ROOT, "examples", "torch", "pipeline.py")
if not have_torch():
    skip("PyTorch pipelines under ddpspy", "Debian's python3-torch is not installed (/usr/bin/torchrun, torch with gloo)")
    done()

d = tmpdir("torch-pipeline")
# --redirects 1 --tee 1: torchrun's default fails on Python 3.11 with PyTorch 1.13 (README)
TR = [TORCHRUN, "--standalone", "--nproc_per_node=2", "--redirects", "1", "--tee", "1", SCRIPT]
n_run = 0


def traced(name, args):
    """one traced run: (the trainer's own JSON summary, the report's JSON, the trace directory)"""
    global n_run
    n_run += 1
    out = os.path.join(d, "%s-%d" % (name, n_run))
    shutil.rmtree(out, ignore_errors=True)
    p = subprocess.run([DDPSPY, "run", "-o", out, "--"] + TR + args, capture_output=True, text=True, timeout=600)
    truth = rank0_summary(p.stdout)
    if p.returncode != 0 or truth is None:
        print("# %s failed (rc=%d): %s" % (name, p.returncode, (p.stderr or p.stdout)[-800:].replace("\n", "\n# ")))
        return None, None, out
    return truth, checked_report(out)[0], out


def pace_idle(t):
    """the trainer's own bubble: the share of its step the slower stage spends blocked in recv"""
    r = max(t["ranks"], key=lambda r: r["step_ms"] - r["recv_wait_ms"])
    return r["recv_wait_ms"] / r["step_ms"]


# ---- capture: c10d's send, recv and their waits, on each rank's training thread ----
t, j, out = traced("capture", ["--microbatches", "4", "--steps", "4", "--warmup", "1"])
if ok(t is not None and j is not None, "the pipeline trainer under ddpspy run completes and is reported"):
    recs, rc, err = dump(out)
    files = {x["rank"]: x["file"] for x in of(recs, "process") if x["role"] == "rank"}
    p2p = {r: [e for e in events(recs, "gloo_p2p", file=f) if e["comm"] == 0] for r, f in files.items()}
    waits = {r: events(recs, "gloo_wait", file=f) for r, f in files.items()}
    steps, M = 5, 4
    want = {0: {("send", 1): steps * M, ("recv", 1): steps * M}, 1: {("recv", 0): steps * M, ("send", 0): steps * M}}
    got = {r: {} for r in files}
    for r, evs in p2p.items():
        for e in evs:
            got[r][(e["op"], e["peer"])] = got[r].get((e["op"], e["peer"]), 0) + 1
    ok(got == want and all(len(waits[r]) == 2 * steps * M for r in files) and
       all(e["bytes"] == 16 * 512 * 4 for r in files for e in p2p[r]) and
       {e["request"] for e in waits[0]} <= {e["request"] for e in p2p[0]},
       "dist.send and dist.recv over gloo recorded: per step and micro-batch, stage 0 sends its activations and "
       "receives their gradient, stage 1 the reverse, 16 x 512 floats each, each completed by a wait on its "
       "buffer: %s, waits %s" % (got, {r: len(w) for r, w in waits.items()}))
    ok(j["job"]["step_source"] == "p2p" and j["job"]["steps_detected"] in (3, 4, 5) and
       j["job"].get("pipeline") == {"stages": 2, "microbatches": 4},
       "the report: steps from the point-to-point calls, one per optimizer step (of 5: the first has nothing "
       "before it to begin at, and the last stage's steps, found mid-step by their gaps and moved to its peers' "
       "phase, may keep one fewer), a pipeline of 2 stages and 4 micro-batches: %s %s %s" %
       (j["job"]["step_source"], j["job"]["steps_detected"], j["job"].get("pipeline")))


# ---- the bubble: 2 and 8 micro-batches, against the trainer's own idle and the prediction ----
def bubble(k):
    checks, got, reps = [], {}, []
    for M in (2, 8):
        t, j, out = traced("bubble%d" % M, ["--microbatches", str(M)])
        if t is None or j is None:
            return [(False, "M=%d: traced and reported" % M)]
        reps.append(j)
        f = [x for x in j["findings"] if x["kind"] == "pipeline_bubble"]
        s, tr = (f[0]["severity"] if f else 0), pace_idle(t)
        got[M] = s
        checks += [(abs(s - tr) <= 0.25 * tr + 0.03 or (s == 0 and tr < 0.08),
                    "M=%d: pipeline_bubble %.3f within 25%% and 0.03 of the trainer's own, the slower stage's share of "
                    "its step blocked in recv, %.3f (predicted %.3f)" % (M, s, tr, t["bubble_predicted"]))]
    checks.append((got[8] < got[2], "8 micro-batches leave a smaller bubble than 2: %.3f against %.3f" % (got[8], got[2])))
    return busy_host(checks, *reps)


live("PyTorch pipeline bubble", bubble)


# ---- a slower stage, named at what it costs ----
def slow(k):
    loss, sev, named, reps = [], [], [], []
    for i in range(3):
        th, jh, _ = traced("healthy", ["--microbatches", "4"])
        t, j, _ = traced("slow", ["--microbatches", "4", "--slow-stage", "1", "--slow-ms", "10"])
        if th is None or t is None or j is None:
            continue
        reps.append(j)
        loss.append(1 - th["step_ms_p50"] / t["step_ms_p50"])
        f = [x for x in j["findings"] if x["kind"] == "stage_imbalance"]
        named.append([(x["rank"], x["evidence"]["stage"]) for x in f])
        sev.append(f[0]["severity"] if len(f) == 1 else 0)
    if len(sev) != 3:
        return [(False, "slow stage: three pairs traced and reported")]
    lm, sv = statistics.median(loss), statistics.median(sev)
    tol = margin(lm, 0.25, loss, sev)
    strag = [x["rank"] for j in reps for x in j["findings"] if x["kind"] == "straggler" and x["rank"] == 1 and
             x["severity"] >= 0.05]
    return busy_host([(all(x == [(1, 1)] for x in named), "slow stage 1: stage_imbalance names stage 1, rank 1: %s" % named),
                      (abs(sv - lm) <= tol, "slow stage 1: severity %.3f within %.3f (25%% and the spread) of the step "
                       "time the trainer loses to it, %.3f (pairs %s; severities %s)" %
                       (sv, tol, lm, ["%.2f" % x for x in loss], ["%.2f" % x for x in sev])),
                      (not strag, "slow stage 1: no straggler finding for the same cause: %s" % strag)], *reps)


live("PyTorch slow stage", slow)
cleanup(d)
done()
