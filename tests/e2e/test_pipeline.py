"""A pipeline-parallel job's verdict, live (issue 42): the testbed's --pipeline on 2 ranks, its report
against the testbed's own ground truth. pipeline_bubble: the idle its schedule leaves, near what GPipe
and 1F1B predict for S stages and M micro-batches, (S - 1) / (M + S - 1), and smaller with more
micro-batches; stage_imbalance: the slow stage's rank named, at the step time that balancing it wins
(healthy and slow runs side by side, as the straggler cases of test_report.py), and no straggler
finding for the same cause; a healthy pipeline (16 micro-batches, balanced stages) has neither of
0.15 or more. Each comparison is live,
with margins from the spread the run measured, and a miss is run again (lib.live)."""
import os
import shutil
from lib import *
import pipecases
from pipecases import findings

if not shutil.which("mpirun") or not os.path.exists(BENCH):
    skip("pipeline verdicts on the testbed", "mpirun or build/ddpbench missing (Open MPI not installed)")
    done()

d = tmpdir("pipeline")
data = bench_data(d)
# Two stages of equal work: with 170 wide layers the first layer's two products (no gradient at the
# input) cost what a hidden layer's three do, so 5 layers cut 2 | 3 are balanced within 3%
PIPE = ["--pipeline", "2", "--hidden", "170", "--layers", "4", "--batch", "64", "--steps", "20"]
n_case = 0


def traced(name, args):
    global n_case
    n_case += 1
    return testbed(os.path.join(d, "%s-%d" % (name, n_case)), data, PIPE + args)


def pace_idle(t):
    """the testbed's own bubble: the share of its step the stage with the most work spends blocked in
    receives (the stages the slower one holds up wait longer)"""
    r = max(t["ranks"], key=lambda r: r["compute_ms"] + r["data_ms"])
    return r["recv_wait_ms"] / r["step_ms"]


def no_imbalance(j, t, what):
    """no stage_imbalance of 0.15 or more on balanced stages, unless the testbed itself measured that
    stage working 10% longer than the other (this VM's two vCPUs run 10-40% apart for seconds at times:
    then the pipeline really runs at the slower one's pace)"""
    work = [r["compute_ms"] + r["data_ms"] for r in t["ranks"]]
    f = [(x["rank"], x["severity"]) for x in j["findings"] if x["kind"] == "stage_imbalance" and x["severity"] >= 0.15]
    slow = work.index(max(work))
    return (not f or (f == [(slow, f[0][1])] and max(work) >= 1.1 * min(work)),
            "%s: no stage_imbalance of 0.15 or more but as the testbed measured one (work %s ms per step): %s"
            % (what, ["%.2f" % w for w in work], f))


# ---- the bubble against the schedule's prediction: 2 and 8 micro-batches, GPipe; 4, 1F1B ----
live("pipeline bubble", pipecases.bubble(traced, pace_idle, no_imbalance, 0.25,
                                         "the pace stage's share of its step blocked in receives"))


# ---- healthy: 16 micro-batches (the schedule leaves 6% idle), balanced stages ----
live("healthy pipeline", pipecases.healthy(traced, pace_idle, no_imbalance))


# ---- the stages in the report's JSON and text, the Perfetto view and the HTML page ----
t, out = traced("views", ["--microbatches", "2"])
j, _ = checked_report(out)
if ok(j is not None and t is not None, "a pipeline of 2 stages traced and reported"):
    pipecases.views(d, out, j, False)


# ---- a slow stage: its rank named, at what balancing it wins (five pairs; 25% as the straggler
# cases of test_report.py) ----
def slow_stage(name, stage, args):
    pipecases.slow_stage(name, stage, args, traced, 5, 0.25, 0.3)


slow_stage("slow last stage, gpipe", 1, ["--microbatches", "4"])
slow_stage("slow first stage, 1f1b", 0, ["--microbatches", "4", "--schedule", "1f1b"])
cleanup(d)
done()
