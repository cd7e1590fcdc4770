"""A pipeline-parallel job on the simulated device, live (issue 42): the testbed's `--gpu --pipeline`
(each stage's micro-batches as kernels on its compute stream, activations and gradients passed by
NCCL's send and receive, a send and a receive grouped as Megatron-LM pairs them) traced under
ddpspy, its report against the testbed's own ground truth. The host only enqueues, so the steps are
found from the NCCL calls' messages and the stages' idle from their devices: the time their send and
receive kernels waited for the peer's. pipeline_bubble: the pace stage's idle share against the
testbed's (1 - its kernel time over its step) and near the schedule's (S - 1) / (M + S - 1), smaller
with more micro-batches; stage_imbalance: the slow stage's rank named, at the step time balancing it
wins (healthy and slow runs side by side), and no straggler finding for the same cause; a healthy
pipeline (16 micro-batches) has neither of 0.15 or more. On 4 ranks: 4 stages (1F1B, a slow middle
stage), and 2 stages of 2 replicas each, whose stage gradients are all-reduced on a communicator
split off by stage. Only on the simulated device (docs/gpu.md)."""
import os
from lib import *
import pipecases
from pipecases import findings

need_testbed_gpu("pipeline verdicts on the simulated device")

d = tmpdir("gpu-pipeline")
data = bench_data(d, 256)
SIM = SIM_TESTBED
# (as test_pipeline.py: 5 layers of 170 cut 2 | 3, balanced; the device's 20 ms of kernels a step
# shared by the stages as the cut shares the work)
PIPE = ["--gpu", "--hidden", "170", "--layers", "4", "--batch", "64", "--steps", "10"]
n_case = 0


def traced(name, args, np=2, stages=2):
    global n_case
    n_case += 1
    return testbed(os.path.join(d, "%s-%d" % (name, n_case)), data, PIPE + ["--pipeline", str(stages)] + args, np, SIM,
                   300)


def pace_idle(t):
    """the testbed's own bubble: the share of its step the stage with the most kernel time does not
    compute (its device waits for its neighbours; the others wait longer, for it)"""
    r = max(t["ranks"], key=lambda r: r["compute_ms"])
    return 1 - r["compute_ms"] / r["step_ms"]


def steps_found(j, what):
    return (j["job"]["step_source"] == "p2p" and j["job"]["steps_detected"] >= 11,
            "%s: the steps found from the NCCL sends and receives (%s, %d of 12)"
            % (what, j["job"]["step_source"], j["job"]["steps_detected"]))


def no_imbalance(j, t, what):
    f = [(x["rank"], x["severity"]) for x in findings(j, "stage_imbalance") if x["severity"] >= 0.15]
    return (not f, "%s: no stage_imbalance of 0.15 or more: %s" % (what, f))


def on_device(j, what):
    f = findings(j, "pipeline_bubble")
    return [(bool(f) and f[0]["evidence"]["waits_on"] == "device", "%s: a bubble measured on the devices: %s"
             % (what, f and f[0]["evidence"]["waits_on"])), steps_found(j, what)]


# ---- the bubble against the schedule's prediction: 2 and 8 micro-batches, GPipe; 4, 1F1B ----
live("gpu pipeline bubble", pipecases.bubble(traced, pace_idle, no_imbalance, 0.15,
                                             "the pace stage's share of its step not computing", on_device))


# ---- healthy: 16 micro-batches (the schedule leaves 6% idle), balanced stages: no finding at all of
# 0.15 or more ----
def quiet(j):
    big = [(x["kind"], x["severity"]) for x in j["findings"] if x["severity"] >= 0.15]
    return [(not big, "healthy: no finding of 0.15 or more: %s" % big),
            steps_found(j, "healthy")]


live("gpu healthy pipeline", pipecases.healthy(traced, pace_idle, no_imbalance, quiet))


# ---- the stages in the text, the Perfetto view and the HTML page, their waits from the devices ----
t, out = traced("views", ["--microbatches", "2"])
j, _ = checked_report(out)
if ok(j is not None and t is not None, "a pipeline of 2 stages on the device traced and reported"):
    pipecases.views(d, out, j, True)


# ---- a slow stage: its rank named, at what balancing it wins ----
# (three pairs; within 15% and the spread, as the GPU's data-parallel cases. The testbed's GPU
# stages are equal in their forwards and backwards, so that switching the slowdown off is what
# balancing the stage wins: docs/testbed.md)
def waits(name):
    def more(j):
        ev = findings(j, "stage_imbalance")
        ev = ev[0]["evidence"] if ev else {}
        return [(ev.get("waits_on") == "device" and
                 ev.get("downstream_wait_ms_per_step", 0) + ev.get("upstream_wait_ms_per_step", 0) > 0,
                 "%s: the waits it causes, measured on the other stages' devices: %s"
                 % (name, {x: ev.get(x) for x in ("waits_on", "downstream_wait_ms_per_step", "upstream_wait_ms_per_step")})),
                steps_found(j, name)]
    return more


def slow_stage(name, stage, args, np=2, stages=2):
    pipecases.slow_stage(name, stage, args, lambda n, a: traced(n, a, np, stages), 3, 0.15, 1, waits(name))


slow_stage("gpu slow last stage, gpipe", 1, ["--microbatches", "4"])
slow_stage("gpu slow first stage, 1f1b", 0, ["--microbatches", "4", "--schedule", "1f1b"])
slow_stage("gpu 4 stages, slow stage 2, 1f1b", 2, ["--microbatches", "8", "--schedule", "1f1b"], 4, 4)


# ---- 2 stages of 2 replicas: the stages and their ranks, and the bubble ----
# (the bubble is the stages' waits for their neighbours; the replicas' all-reduce of a stage's
# gradients waits for the later replica, and 4 simulated devices on 2 cores drift apart by up to a
# millisecond a step, which moves idle between the two: the bubble is checked named, not measured)
def replicas(k):
    t, out = traced("replicas", ["--microbatches", "4"], 4)
    j, _ = checked_report(out)
    if j is None or t is None:
        return [(False, "2 stages of 2 replicas traced and reported")]
    f = findings(j, "pipeline_bubble")
    s, tr = (f[0]["severity"] if f else 0), pace_idle(t)
    return busy_host([(j["job"].get("pipeline") == {"stages": 2, "microbatches": 4} and
                       [r.get("pipeline_stage") for r in j["ranks"]] == [0, 0, 1, 1],
                       "2 stages of 2 replicas: job.pipeline and each rank's stage: %s %s"
                       % (j["job"].get("pipeline"), [r.get("pipeline_stage") for r in j["ranks"]])),
                      (bool(f) and f[0]["evidence"]["replicas"] == 2 and 0.05 <= s <= tr + 0.03,
                       "2 stages of 2 replicas: a bubble named (%.3f; the testbed's stages do not compute %.3f of "
                       "their step, the all-reduce's waits with it), 2 replicas: %s"
                       % (s, tr, f and f[0]["evidence"].get("replicas"))),
                      steps_found(j, "2 stages of 2 replicas")], j)


live("gpu pipeline replicas", replicas)
cleanup(d)
done()
