"""A pipeline-parallel job's verdict, live (issue 42): the testbed's --pipeline on 2 ranks, its report
against the testbed's own ground truth. pipeline_bubble: the idle its schedule leaves, near what GPipe
and 1F1B predict for S stages and M micro-batches, (S - 1) / (M + S - 1), and smaller with more
micro-batches; stage_imbalance: the slow stage's rank named, at the step time that balancing it wins
(healthy and slow runs side by side, as the straggler cases of test_report.py), and no straggler
finding for the same cause; a healthy pipeline (16 micro-batches, balanced stages) has neither of
0.15 or more. Each comparison is live,
with margins from the spread the run measured, and a miss is run again (lib.live)."""
import json
import os
import shutil
import statistics
import subprocess
from lib import *

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


def findings(j, kind):
    return [f for f in j["findings"] if f["kind"] == kind]


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
def bubble(k):
    checks, got, all_reps = [], {}, []
    for M, sched in ((2, "gpipe"), (8, "gpipe"), (4, "1f1b")):
        sev, truth, pred, reps = [], [], None, []
        for i in range(3):
            t, out = traced("bubble%d%s" % (M, sched), ["--microbatches", str(M), "--schedule", sched])
            j, _ = checked_report(out)
            if j is None or t is None:
                return [(False, "M=%d %s: traced and reported" % (M, sched))]
            pred = t["pipeline"]["bubble_predicted"]
            f = findings(j, "pipeline_bubble")
            sev.append(f[0]["severity"] if f else 0)
            truth.append(pace_idle(t))
            reps.append((j, t))
        s, tr = statistics.median(sev), statistics.median(truth)
        got[(M, sched)] = s
        tol = margin(tr, 0.25, sev, truth) + 0.02
        all_reps += [j for j, _ in reps]
        f = findings(reps[-1][0], "pipeline_bubble")
        # (a finding below 0.05 is not made: none matches a bubble that small)
        checks += [(abs(s - tr) <= tol or (s == 0 and tr < 0.05 + tol), "M=%d %s: bubble severity %.3f within %.3f (25%%, 0.02 and the spread) of the "
                    "testbed's own, the pace stage's share of its step blocked in receives, %.3f (severities %s, "
                    "testbed %s)" % (M, sched, s, tol, tr, ["%.2f" % x for x in sev], ["%.2f" % x for x in truth])),
                   (abs(s - pred) <= 0.1, "M=%d %s: bubble %.3f near the schedule's prediction (S - 1) / (M + S - 1) "
                    "= %.3f (0.1)" % (M, sched, s, pred)),
                   (not f or (f[0]["evidence"]["stages"] == 2 and f[0]["evidence"]["microbatches"] == M and
                              f[0]["evidence"]["schedule"] == sched),
                    "M=%d %s: the finding says 2 stages, %d micro-batches, schedule %s: %s"
                    % (M, sched, M, sched, f and {x: f[0]["evidence"][x] for x in ("stages", "microbatches", "schedule")})),
                   no_imbalance(reps[-1][0], reps[-1][1], "M=%d %s" % (M, sched))]
    checks.append((got[(8, "gpipe")] < got[(2, "gpipe")] - 0.1, "8 micro-batches leave a smaller bubble than 2: "
                   "%.3f against %.3f" % (got[(8, "gpipe")], got[(2, "gpipe")])))
    # (a process outside the job on one of the two cores makes the stage beside it slow, and the
    # bubble whatever that leaves: the testbed's own figures say so, the schedule's prediction not)
    return busy_host(checks, *all_reps)


live("pipeline bubble", bubble)


# ---- healthy: 16 micro-batches (the schedule leaves 6% idle), balanced stages ----
def healthy(k):
    t, out = traced("healthy", ["--microbatches", "16"])
    j, _ = checked_report(out)
    if j is None or t is None:
        return [(False, "healthy pipeline traced and reported")]
    f = [(x["kind"], x["severity"]) for x in j["findings"] if x["kind"] == "pipeline_bubble" and x["severity"] >= 0.15]
    return busy_host([(not f, "healthy (16 micro-batches, predicted 0.06, the testbed's own %.3f): no pipeline_bubble "
                       "of 0.15 or more: %s" % (pace_idle(t), f)), no_imbalance(j, t, "healthy")], j)


live("healthy pipeline", healthy)


# ---- the stages in the report's JSON and text, the Perfetto view and the HTML page ----
t, out = traced("views", ["--microbatches", "2"])
j, _ = checked_report(out)
if ok(j is not None and t is not None, "a pipeline of 2 stages traced and reported"):
    ok(j["job"].get("pipeline") == {"stages": 2, "microbatches": 2} and
       [r.get("pipeline_stage") for r in j["ranks"]] == [0, 1],
       "the JSON: job.pipeline and each rank's pipeline_stage: %s %s" %
       (j["job"].get("pipeline"), [r.get("pipeline_stage") for r in j["ranks"]]))
    p = subprocess.run([DDPSPY, "report", out], capture_output=True, text=True, timeout=120)
    ok("pipeline: 2 stages, 2 micro-batches per step; stage 0: rank 0; stage 1: rank 1" in p.stdout,
       "the text: a line with the stages and their ranks")
    view = os.path.join(d, "view.json")
    p = subprocess.run([DDPSPY, "view", out, "-o", view], capture_output=True, text=True, timeout=120)
    ev = json.load(open(view))["traceEvents"] if p.returncode == 0 else []
    names = {e["pid"]: e["args"]["name"] for e in ev if e.get("name") == "process_name"}
    sort = {e["pid"]: e["args"]["sort_index"] for e in ev if e.get("name") == "process_sort_index"}
    ranks = sorted((sort[pid], names[pid]) for pid in names if names[pid].startswith("rank"))
    idle = [e for e in ev if e.get("cat") == "idle"]
    ok([n for _, n in ranks] == ["rank 0 (stage 0)", "rank 1 (stage 1)"] and idle and
       all(e["ph"] == "X" and e["dur"] > 0 and e["args"]["waited_for_stage"] != e["args"]["stage"] for e in idle) and
       {e["args"]["stage"] for e in idle} == {0, 1},
       "the Perfetto view: each rank named with its stage, in stage order, each stage's waits for the other on "
       "its idle track: %s, %d idle slices" % ([n for _, n in ranks], len(idle)))
    page = os.path.join(d, "report.html")
    subprocess.run([DDPSPY, "report", out, "--html", page], capture_output=True, timeout=120)
    h = open(page).read() if os.path.exists(page) else ""
    ok(0 <= h.find("rank 0, stage 0") < h.find("rank 1, stage 1") and h.count('class="wait idle"') > 0,
       "the HTML page: lanes in stage order, labelled with their stage, the stages' waits for each other drawn "
       "(%d)" % h.count('class="wait idle"'))


# ---- a slow stage: its rank named, at what balancing it wins ----
def slow_stage(name, stage, args):
    # the testbed's loss against the healthy run made just before, as the median over five pairs; the
    # severity the median of the five reports; within 25% and the spread of both
    def attempt(k):
        loss, sev, named, strag, reps = [], [], [], [], []
        for i in range(5):
            th, _ = traced("%s-healthy" % name, args)
            t, out = traced(name, args + ["--slow-stage", str(stage), "--slow-stage-ms", "0.3"])
            j, _ = checked_report(out)
            if j is None or t is None or th is None:
                continue
            reps.append(j)
            loss.append(1 - th["step_ms_p50"] / t["step_ms_p50"])
            f = findings(j, "stage_imbalance")
            named.append([(x["rank"], x["evidence"]["stage"]) for x in f])
            sev.append(f[0]["severity"] if len(f) == 1 else 0)
            strag += [x["rank"] for x in findings(j, "straggler") if x["rank"] == stage and x["severity"] >= 0.05]
        if len(sev) != 5:
            return [(False, "%s: five pairs traced and reported" % name)]
        lm, sv = statistics.median(loss), statistics.median(sev)
        tol = margin(lm, 0.25, loss, sev)
        return busy_host([(all(x == [(stage, stage)] for x in named), "%s: stage_imbalance names stage %d, rank %d: %s"
                 % (name, stage, stage, named)),
                (abs(sv - lm) <= tol, "%s: severity %.3f within %.3f (25%% and the spread of pairs and reports) of "
                 "the testbed's throughput loss %.3f (pairs %s; severities %s)"
                 % (name, sv, tol, lm, ["%.2f" % x for x in loss], ["%.2f" % x for x in sev])),
                (not strag, "%s: no straggler finding on rank %d for the same cause: %s" % (name, stage, strag))],
                         *reps)
    live(name, attempt)


slow_stage("slow last stage, gpipe", 1, ["--microbatches", "4"])
slow_stage("slow first stage, 1f1b", 0, ["--microbatches", "4", "--schedule", "1f1b"])
cleanup(d)
done()
