"""`ddpspy report` live: the testbed traced on this machine, its report against the ground truth
ddpbench itself measured in the same minutes, on 2 ranks: the verdict and findings of every
pathology, severities against the throughput loss, clock offsets injected and recovered, the
command line and its exit status, and the JSON contract (docs/report.schema.json) on every report.
The same analysis is judged on fixed traces in test_fixtures.py (identical on every run); here each
comparison is live, with margins from the spread the run measured, and a miss is run again
(lib.live) rather than failed on this machine's noise."""
import json
import os
import shutil
import statistics
import subprocess
from lib import *
from schema import report_errors

if not shutil.which("mpirun") or not os.path.exists(BENCH):
    skip("ddpspy report on the testbed", "mpirun or build/ddpbench missing (Open MPI not installed)")
    done()

d = tmpdir("report")
data = bench_data(d)
SMALL = ["--hidden", "256", "--steps", "20"]
n_case = 0


def traced(name, args, np=2, env=None):
    """Runs the testbed under ddpspy; returns (ground truth, trace dir)."""
    return testbed(os.path.join(d, name), data, args, np, env)


report = checked_report


def findings(j, kind):
    return [f for f in j["findings"] if f["kind"] == kind]


def worst(j, kind):
    f = findings(j, kind)
    return max(x["severity"] for x in f) if f else 0.0


def excess_steps(t):
    """Each rank's excess work over its peers' median, step by step, in ms: work being compute,
    input and host (not only compute, since ddpspy counts the input thread's preemption below as
    compute), from the testbed's own per-step figures (work_ms_steps)"""
    work = [r["work_ms_steps"] for r in t["ranks"]]
    R, S = len(work), len(work[0])
    return [[max(0.0, work[L][k] - statistics.median(work[q][k] for q in range(R) if q != L)) for k in range(S)]
            for L in range(R)]


def work_gaps(t):
    """Each rank's typical excess as a share of the median step (the median over steps), and the
    rank with the most. Where a rank is late every step for its work, the others' median wait for
    it, which a straggler's severity is (at most its mean excess: docs/report.md), is this; on a
    busy machine the late rank alternates from step to step, and the mean gap, which nets the
    steps out, can be a third of what a typical step loses."""
    gaps = [statistics.median(x) / t["step_ms_p50"] for x in excess_steps(t)]
    return gaps, gaps.index(max(gaps))


def explained(j, t):
    """None where each straggler of severity 0.1 or more the report names is explained by its
    rank's extra work as the testbed measured it; else each rank's excess and the stragglers. The
    severity is at most the rank's mean excess per step over the median step (docs/report.md: the
    mean, so one long step counts as what it costs), so the bound is the testbed's same figure,
    plus 0.1: a rank the others wait for without working longer is none."""
    mean = [statistics.mean(x) / t["step_ms_p50"] for x in excess_steps(t)]
    st = [(f["rank"], f["severity"]) for f in findings(j, "straggler") if f["severity"] >= 0.1]
    if all(sev <= mean[r] + 0.1 for r, sev in st):
        return None
    return (["%.2f" % m for m in mean], st)


def fixed_ratio(t):
    """The testbed's own fixed cost over its work in one run, as small_work weighs them: the step
    (its median) less the busiest rank's work (the median over steps), over that work"""
    S = len(t["ranks"][0]["work_ms_steps"])
    w = statistics.median(max(r["work_ms_steps"][k] for r in t["ranks"]) for k in range(S))
    return (t["step_ms_p50"] - w) / w


# ---- healthy ----
# This VM's two vCPUs are at times 10-40% apart in speed for seconds on end; a "healthy" 2-rank run
# then really has a straggler, which the testbed's own times show. So: no rank-0, volume or data
# finding, and a straggler finding of 0.1 or more only where the testbed itself measured one rank
# working longer, on that rank, with cause compute and about that size.
def healthy(k):
    truth_h, out = traced("healthy", SMALL)
    j, p = report(out)
    if j is None or truth_h is None:
        return [(False, "healthy run reported")]
    # On a busy machine (another process on one core) the all-reduce itself takes longer, and the
    # testbed measures it: a collective_volume finding is right there up to the testbed's own comm
    # share of the step (the least-waiting rank's) and 0.1
    comm = min(r["comm_ms"] / r["step_ms"] for r in truth_h["ranks"])
    bad = [(f["kind"], f["severity"]) for f in j["findings"]
           if (f["kind"] in ("rank0_serialization", "data_stall") and f["severity"] >= 0.1) or
           (f["kind"] == "collective_volume" and f["severity"] >= max(0.1, comm + 0.1))]
    gaps, late = work_gaps(truth_h)
    comp = [round(statistics.mean(r["work_ms_steps"]), 3) for r in truth_h["ranks"]]
    st = [f for f in findings(j, "straggler") if f["severity"] >= 0.1]
    checks = [(j["verdict"]["bound"] == "compute", "healthy: compute-bound (%s)" % j["verdict"]["summary"]),
              (not bad, "healthy: no rank-0 or data finding of severity >= 0.1, no volume finding beyond the "
               "testbed's own comm share %.2f + 0.1: %s" % (comm, bad)),
              (not st or (len(st) == 1 and st[0]["rank"] == late and st[0]["evidence"]["cause"] == "compute"
                          and abs(st[0]["severity"] - gaps[late]) <= 0.1),
               "healthy: a straggler finding only as the testbed measured one (work %s ms per rank, per-step excess "
               "%s of the step): %s" % (comp, ["%.2f" % g for g in gaps],
                                        [(f["rank"], f["evidence"]["cause"], f["severity"]) for f in st])),
              (j["job"]["step_source"] == "collectives" and j["job"]["steps_analyzed"] == 20 and j["job"]["steps_detected"] == 22,
               "healthy: 22 steps found from the collectives, 20 analysed after 2 warm-up"),
              (abs(j["step"]["p50_ms"] - truth_h["step_ms_p50"]) < 0.1 * truth_h["step_ms_p50"],
               "healthy: step p50 %.1f ms against the testbed's %.1f ms" % (j["step"]["p50_ms"], truth_h["step_ms_p50"]))]
    # The testbed's data time is its time in loader_next, and almost none of it is a wait in a
    # blocking call: the pipe write that asks the rank's input thread for the next batch wakes
    # that thread, which takes the core from the training thread (perf's sched_switch shows the
    # training thread preempted in write() once or more a step) and loads the batch meanwhile; 5%
    # of the step on a quiet machine, up to 14% with another process on one core. ddpspy sees no
    # blocking call there and counts it as compute (telling CPU contention apart is issue 19's
    # work). So compute and data are compared together, data must not be invented, and comms,
    # which both measure as time in MPI calls, is compared on its own.
    for r in j["ranks"]:
        s, t = r["shares"], truth_h["ranks"][r["rank"]]
        work = (t["compute_ms"] + t["data_ms"]) / t["step_ms"]
        checks += [(abs(sum(s.values()) - 1) <= 0.02, "rank %d's shares sum to 1: %s" % (r["rank"], s)),
                   (abs(s["compute"] + s["data"] - work) < 0.1,
                    "rank %d: compute + data share %.2f against the testbed's %.2f"
                    % (r["rank"], s["compute"] + s["data"], work)),
                   (s["data"] <= t["data_ms"] / t["step_ms"] + 0.05, "rank %d: data share %.2f, the testbed's %.2f"
                    % (r["rank"], s["data"], t["data_ms"] / t["step_ms"])),
                   (abs(s["comms"] - t["comm_ms"] / t["step_ms"]) < 0.05,
                    "rank %d: comms share %.2f against the testbed's %.2f" % (r["rank"], s["comms"], t["comm_ms"] / t["step_ms"]))]
    return checks


live("healthy", healthy)


# The straggler cases use a cache-resident model: with a larger one, the two vCPUs' shared memory
# bandwidth makes the other rank compute faster while the straggler sleeps or burns, so the wait
# ddpspy measures overstates what removing the straggler would win (lab/results.md shows it).
STRAG = ["--hidden", "128", "--steps", "12"]


def straggler_case(name, args, cause):
    # The testbed's loss against the healthy run made just before (a pair is about a second apart,
    # shorter than this VM's slow phases, which last seconds and slow it by up to 40%), as the
    # median over five pairs; the severity is the median of the five reports; they must agree
    # within 25% and the spread of the pairs (both medians' standard errors).
    def attempt(k):
        loss, sev, fs, js = [], [], [], []
        for i in range(5):
            th, _ = traced("%s-healthy%d" % (name, i), STRAG)
            truth, out = traced("%s%d" % (name, i), STRAG + args)
            j, p = report(out)
            if j is None or truth is None or th is None:
                continue
            js.append(j)
            loss.append(1 - th["step_ms_p50"] / truth["step_ms_p50"])
            f = findings(j, "straggler")
            fs.append([(x["rank"], x["evidence"]["cause"]) for x in f])
            sev.append(f[0]["severity"] if len(f) == 1 else 0)
        if len(sev) != 5:
            return [(False, "%s: five runs reported" % name)]
        lm, sv = statistics.median(loss), statistics.median(sev)
        tol = margin(lm, 0.25, loss, sev)
        # (with another process on one of the two cores, the slowed rank shares its core with it,
        # and the healthy run beside it is contended too: what removing the straggler would win
        # there is not what it wins on a free host, and the report says the host was shared)
        return busy_host([(all(f == [(1, cause)] for f in fs), "%s: a straggler finding on rank 1 with cause %s: %s"
                           % (name, cause, fs)),
                          (abs(sv - lm) <= tol, "%s: severity %.3f within %.3f (25%% and the spread of pairs and "
                           "reports) of the testbed's throughput loss %.3f (pairs: %s; severities: %s)"
                           % (name, sv, tol, lm, ["%.2f" % x for x in loss], ["%.2f" % x for x in sev]))], *js)
    live(name, attempt)


straggler_case("straggler-delay", ["--straggler-rank", "1", "--straggler-ms", "40"], "host")
# a 5x slowdown: like the 40 ms delay, large against the step, so that the healthy run's drift
# (up to 40%) moves the measured loss by a few percent only
straggler_case("straggler-slowdown", ["--straggler-rank", "1", "--straggler-slowdown", "5"], "compute")

# ---- a rank's host work masked by contention: the default model on 4 ranks, 2 cores ----
# Rank 2 sleeps 40 ms before each batch. Its core goes to the other three meanwhile, so it is not
# always the last to arrive and the straggler test may not fire; a finding must still name rank 2
# and its sleep (issue 40). Now it costs what the others wait for it; once no rank waits for a CPU
# they would wait all 40 ms: that estimate is evidence, above the cost now.
def masked(k):
    truth, out = traced("masked", ["--steps", "20", "--straggler-rank", "2", "--straggler-ms", "40"], np=4)
    j, p = report(out)
    if j is None or truth is None:
        return [(False, "masked host work reported")]
    others = sorted(r["host_ms"] for r in truth["ranks"] if r["rank"] != 2)
    ms = truth["ranks"][2]["host_ms"] - others[1]
    f = [x for x in j["findings"] if x["rank"] == 2 and x["kind"] in ("straggler", "host_asymmetry")]
    c = (f[0]["evidence"].get("calls") or [{}])[0] if f else {}
    checks = [(f and c.get("call") == "sleep" and abs(c["ms_per_step"] - ms) <= 0.15 * ms and c["stack"] and
               c["stack"][0].startswith("ddpbench+"),
               "masked: a finding names rank 2 and its sleep, %.1f ms a step in ddpbench (findings %s): %s"
               % (ms, [(x["kind"], x["rank"], round(x["severity"], 2)) for x in j["findings"]], c))]
    h = f[0] if f and f[0]["kind"] == "host_asymmetry" else None
    if h:
        e = h["evidence"]
        checks.append((h["severity"] <= e["excess_ms_per_step"] / j["step"]["p50_ms"] + 0.02 and
                       (not findings(j, "cpu_contention") or e.get("severity_uncontended", 0) >= h["severity"]),
                       "masked: its severity now at most its excess over the step, and the estimate once contention "
                       "is fixed above it: %.2f, %s" % (h["severity"], e)))
    return checks


live("masked-host-work", masked)

# ---- extra all-reduce ----
def extra(k):
    truth, out = traced("extra", ["--hidden", "256", "--steps", "10", "--extra-allreduce-mb", "64"])
    j, p = report(out)
    if j is None:
        return [(False, "extra all-reduce reported")]
    f = findings(j, "collective_volume")
    return [(j["verdict"]["bound"] == "comms", "extra all-reduce: comms-bound (%s)" % j["verdict"]["summary"]),
            (f and f[0]["evidence"]["bytes"] == 64 << 20 and abs(f[0]["evidence"]["calls_per_step"] - 1) < 0.01 and
             f[0]["evidence"]["op"] == "allreduce" and "latency_bound" not in f[0]["evidence"],
             "collective_volume names one 64 MiB allreduce per step: %s"
             % (f[0]["evidence"] if f else None)),
            (not findings(j, "small_work"), "extra all-reduce: the bytes are the cost, not small_work")]


live("extra-allreduce", extra)


# ---- latency, not bytes: a model whose gradients are 3 KiB (issue 40) ----
# Its all-reduce is one call of 3244 bytes a step, far below what any link moves in its fixed
# latency: whatever the collectives cost, fewer bytes would not win it back. Over Open MPI's shared
# memory that cost is small against even this step, so a comms finding is not required, but any is
# small_work, latency-bound, never collective_volume (tests/e2e/test_torch.py has the case where it
# dominates, over gloo).
def tiny(k):
    truth, out = traced("tiny", ["--hidden", "3", "--layers", "1", "--batch", "16", "--steps", "200"])
    j, p = report(out)
    if j is None or truth is None:
        return [(False, "tiny model reported")]
    comms = [(f["kind"], f["evidence"].get("latency_bound"), f["evidence"].get("bytes")) for f in j["findings"]
             if f["kind"] in ("small_work", "collective_volume")]
    return [(truth["grad_bytes"] < 16384 and all(c == ("small_work", True, truth["grad_bytes"]) for c in comms),
             "tiny model (%d bytes of gradients): no collective_volume; a comms finding, if any, is small_work, "
             "latency-bound, naming the all-reduce's bytes: %s" % (truth["grad_bytes"], comms))]


live("tiny-model", tiny)

# ---- small per-rank work (the strong-scaling trap) ----
# One sample per rank against 9 MiB of gradients: the step is mostly synchronization. Ground truth
# is what the fix wins: the same job accumulating 8 micro-batches per all-reduce (--accum 8), whose
# throughput gain is 1 - samples/s(1) / samples/s(8). The finding's severity (small_work's, or
# collective_volume's in a run where the sync cost came out below the work) is the limit of that
# gain (every synchronization amortized), so severity x (1 - 1/8) is compared with it, as the
# median over adjacent pairs.
# The same 9 MiB all-reduce takes about 4 ms in some runs on these VMs and 25-30 ms in others
# (measured without ddpspy too, with and without core binding and address randomization), and
# a run keeps its mode. A pair is ground truth only when both runs paid the same for it: the
# testbed's own comms time per step within 35% of each other. Pairs are run until three match.
TRAP = ["--hidden", "1024", "--global-batch", "2", "--steps", "12"]


def comm_ms(t):
    return statistics.mean(r["comm_ms"] for r in t["ranks"])


def compute_ms(t):
    return statistics.mean(r["compute_ms"] for r in t["ranks"])


def trap(attempt):
    won, sev, kinds, accum, tried, balanced, reps = [], [], [], [], [], [], []
    for k in range(8):
        if len(won) == 3:
            break
        t1, o1 = traced("trap%d" % k, TRAP)
        t8, o8 = traced("trap-accum%d" % k, TRAP + ["--accum", "8"])
        j1, _ = report(o1)
        j8, _ = report(o8)
        if None in (t1, t8, j1, j8):
            continue
        reps += [j1, j8]
        tried.append("%.1f/%.1f" % (comm_ms(t1), comm_ms(t8)))
        for t, j in ((t1, j1), (t8, j8)):
            c = [r["compute_ms"] + r["data_ms"] + r["host_ms"] for r in t["ranks"]]
            balanced.append((round(max(c) / min(c), 2), explained(j, t)))
        if abs(comm_ms(t1) - comm_ms(t8)) > 0.35 * max(comm_ms(t1), comm_ms(t8)):
            continue
        won.append(1 - t1["samples_per_s"] / t8["samples_per_s"])
        f = findings(j1, "small_work") or findings(j1, "collective_volume")
        sev.append(f[0]["severity"] if f else 0)
        kinds.append((round(fixed_ratio(t1), 2),
                      sorted((x["kind"], round(x["evidence"]["ms_per_step"], 1), round(x["evidence"]["work_ms_per_step"], 1))
                             for x in j1["findings"] if x["kind"] in ("small_work", "collective_volume"))))
        accum.append((compute_ms(t8) > comm_ms(t8), worst(j8, "small_work"),
                      max(worst(j8, "small_work"), worst(j8, "collective_volume")), worst(j1, "small_work")))
    if len(won) != 3:
        # With another job on a core, the ranks drift apart over 8 micro-batches and the
        # accumulating runs' all-reduces cost 2-3 times the others' in every pair: no ground truth
        # to judge by, which their reports say (the host was shared)
        return busy_host([(False, "strong-scaling trap: three pairs whose collectives cost the same (comms ms per "
                           "step, 1 sample/8 micro-batches: %s)" % tried)], *reps)
    # The kind follows the run's own fixed cost against its work (small_work where the cost is at
    # least the work): plain where the testbed's same figures are 20% or more to one side, either
    # kind nearer (in 9 runs with the all-reduce at 3 ms the report's share of the step in fixed
    # cost came 0.01-0.03 below the testbed's). What accumulating won does not decide it: the
    # runs of a pair are matched on comms only, and where the all-reduce takes 3 ms (Open MPI's
    # shared memory without its single-copy path, as OMPI_MCA_btl_vader_single_copy_mechanism=none
    # makes it here; CI's pairs at 3-4 ms named collective_volume where the pair won 0.5 or more)
    # a pair's gain came 0.55-0.59 from runs whose fixed cost was 0.79-0.98 of their work, where
    # 7/8 of the cost would win 0.39-0.43.
    plain = {"small_work": [x for r, x in kinds if r >= 1.2], "collective_volume": [x for r, x in kinds if r <= 1 / 1.2]}
    wm, sm = statistics.median(won), statistics.median(sev)
    tol = margin(wm, 0.25, won, [x * 7 / 8 for x in sev])
    # accumulating 8 cures the trap where the testbed computes longer than it communicates; where
    # the all-reduce is the slow kind it still outweighs 8 micro-batches: small_work, but less.
    # Open MPI finishes these nonblocking all-reduces on one rank well after the other, so one
    # rank enters the next step's collectives late without working longer: not a straggler. A
    # rank that does work longer is one, as large as its excess: with 8 micro-batches the step is
    # nearly all work, and a rank working 13% longer costs its peers about 0.12 of it (seen on CI)
    return [(all(len(x) == 1 and x[0][0] == kind for kind, xs in plain.items() for x in xs) and
             all(len(x) == 1 for r, x in kinds),
             "trap: one comms finding per run, small_work where the testbed's fixed cost is 1.2 times its work or "
             "more, collective_volume where 1/1.2 or less (%d and %d of 3 pairs) (the testbed's ratio; kind, sync "
             "and work ms per step): %s" % (len(plain["small_work"]), len(plain["collective_volume"]), kinds)),
            (abs(sm * 7 / 8 - wm) <= tol, "trap: severity %.2f (x 7/8 = %.2f) within %.2f (25%% and the pairs' spread) "
             "of what accumulating 8 micro-batches won, %.2f (pairs: %s)" % (sm, sm * 7 / 8, tol, wm,
                                                                           ["%.2f" % x for x in won])),
            (all(m is None for b, m in balanced),
             "trap: a straggler of severity >= 0.1 only as far as its rank's extra work explains it, within 0.1 "
             "(per run: work ratio, and where it differed, each rank's mean excess as a share of the step and the "
             "stragglers): %s" % balanced),
            (all((a[1] == 0) if a[0] else (0 < a[2] < a[3]) for a in accum),
             "trap with 8 micro-batches per all-reduce: no small_work where the testbed computes longer than it "
             "communicates, else a smaller comms finding: on a busy machine the all-reduce can still cost about "
             "the 8 micro-batches' work, where either kind is right (work > comms, small_work, worst comms finding, "
             "the trap's small_work): %s" % accum)]


live("trap", trap)

# ---- rank-0 work + barrier ----
def rank0(k):
    truth, out = traced("rank0", SMALL + ["--rank0-work-ms", "30"])
    j, p = report(out)
    if j is None:
        return [(False, "rank-0 work reported")]
    f = findings(j, "rank0_serialization")
    return [(f and f[0]["rank"] == 0 and f[0]["evidence"]["op"] == "barrier",
             "rank0_serialization on rank 0 before a barrier: %s" % [(x["kind"], x["rank"]) for x in j["findings"]]),
            (not findings(j, "straggler"), "and not called a straggler")]


live("rank0-work", rank0)


# ---- slow data ----
# The verdict is judged against the testbed's own split: data-bound where its data time per step
# exceeds its compute time. With 32-byte reads the two were near even (the report said data 49%,
# compute 50% on a quiet run) and a busy core stretched compute past data (34% against 59%, three
# times); 16-byte reads make data about two thirds. Where the testbed itself measured compute
# over data, nothing is judged (lib.live runs it again).
def small_reads(k):
    truth, out = traced("small-reads", ["--hidden", "128", "--steps", "10", "--slow-data", "small-reads,sync",
                                        "--read-chunk", "16"], env={"DDPSPY_RING_KB": "131072"})
    j, p = report(out)
    if j is None or truth is None:
        return [(False, "small reads reported")]
    data = statistics.mean(r["data_ms"] for r in truth["ranks"])
    comp = statistics.mean(r["compute_ms"] for r in truth["ranks"])
    if data <= comp:
        return "not judged: the testbed measured compute %.1f ms over data %.1f ms a step this time" % (comp, data)
    f = findings(j, "data_stall")
    op = f[0]["evidence"]["ops"][0] if f and f[0]["evidence"]["ops"] else {}
    return [(j["verdict"]["bound"] == "data", "small reads (the testbed's data %.1f ms over compute %.1f ms a step): "
             "data-bound (%s)" % (data, comp, j["verdict"]["summary"])),
            (op.get("op") == "pread" and op.get("bytes_per_call") == 16 and op.get("calls_per_step") == 128 * 4096 / 16,
             "data_stall names the pattern: %s" % op)]


live("small-reads", small_reads)


def read_delay(k):
    truth, out = traced("read-delay", ["--hidden", "128", "--steps", "10", "--slow-data", "delay,sync",
                                       "--read-delay-ms", "20"])
    j, p = report(out)
    if j is None:
        return [(False, "storage latency reported")]
    f = findings(j, "data_stall")
    op = f[0]["evidence"]["ops"][0] if f and f[0]["evidence"]["ops"] else {}
    return [(j["verdict"]["bound"] == "data", "storage latency on every rank: data-bound (%s)" % j["verdict"]["summary"]),
            (f and f[0]["rank"] is None and op.get("op") == "read" and op.get("fdclass") == "unix",
             "data_stall on every rank names the wait on the storage socket: %s" % op)]


live("read-delay", read_delay)

# ---- token skew: work_skew follows the testbed's own imbalance ----
# Two ranks, one per core: with four ranks on two cores the scheduler alone makes compute per rank
# differ by up to ~0.2 of a step from step to step. Live, fixed count (padded imbalance ~0.23)
# against length buckets (~0.01); the finer order of token budget (~0.04) between them is inside a
# busy machine's noise and is judged on recorded traces (test_fixtures.py, make lab).


def tokens(k):
    sev, imb = {}, {}
    for b in ("fixed", "bucket"):
        truth, out = traced("varlen-" + b, ["--varlen", "--batch", "8", "--steps", "40", "--batching", b])
        j, p = report(out)
        if j is not None and truth is not None:
            sev[b] = worst(j, "work_skew")
            imb[b] = truth["padded_imbalance"]
    if len(sev) != 2:
        return [(False, "two token runs reported")]
    return [(imb["fixed"] > imb["bucket"] and sev["fixed"] >= 0.15 and sev["fixed"] > sev["bucket"],
             "work_skew severities %s ordered like the testbed's padded imbalance %s"
             % ({k: round(v, 3) for k, v in sev.items()}, {k: round(v, 3) for k, v in imb.items()}))]


live("work-skew", tokens)


# ---- clocks: offsets of -50 ms and +50 ms injected, recovered ----
def clocks(k):
    truth, out = traced("clock", ["--hidden", "256", "--steps", "10", "--no-overlap"],
                        env={"DDPSPY_CLOCK_OFFSET_NS": "-50000000,50000000"})
    j, p = report(out)
    if j is None:
        return [(False, "offset clocks reported")]
    off = {r["rank"]: r["clock_offset_us"] for r in j["ranks"]}
    return [(abs(off[1] - off[0] - (-100000)) < 100, "rank 1's clock, 100 ms ahead of rank 0's, corrected by %.1f us"
             % (off[1] - off[0])),
            (j["job"]["clock"]["method"] == "collective-exit" and j["job"]["clock"]["max_offset_us"] < 100,
             "clock method %s, residual %.1f us" % (j["job"]["clock"]["method"], j["job"]["clock"]["max_offset_us"])),
            (j["job"]["steps_analyzed"] == 10, "steps found after the correction too")]


live("clocks", clocks)


# ---- explicit step markers (include/ddpspy.h) ----
def markers(k):
    truth, out = traced("markers", ["--hidden", "256", "--steps", "10", "--markers"])
    j, p = report(out)
    if j is None or truth is None:
        return [(False, "a run with step markers reported")]
    return [(j["job"]["step_source"] == "markers" and j["job"]["steps_detected"] == 12 and j["job"]["steps_analyzed"] == 10,
             "steps from the markers: %s, %d found" % (j["job"]["step_source"], j["job"]["steps_detected"])),
            (abs(j["step"]["p50_ms"] - truth["step_ms_p50"]) < 0.1 * truth["step_ms_p50"],
             "step p50 %.1f ms against the testbed's %.1f ms" % (j["step"]["p50_ms"], truth["step_ms_p50"]))]


live("markers", markers)
p = subprocess.run(MPIRUN + ["-np", "2", BENCH, "train", "--data", data, "--steps", "2", "--markers"], capture_output=True, text=True)
ok(p.returncode == 0, "without the preload the markers do nothing")

# (long traces, the steps found again from every call, streamed: test_fixtures.py, on the recorded
# straggler, healthy, rank-0, markers and varying-length runs: a live run on a busy machine moves
# the clock alignment from 64 kept calls by more than the comparison's 0.005, which says nothing
# about the streamed path)

# (damaged input: test_fixtures.py, on a recorded trace cut and corrupted the same way every run)

# ---- compare ----
truth1, one = traced("ws1", SMALL, np=1)
p = subprocess.run([DDPSPY, "compare", "--weak", os.path.join(d, "healthy"), one, "--json"], capture_output=True, text=True)
if ok(p.returncode == 0, "compare --weak of 1 and 2 ranks: rc=%d %s" % (p.returncode, p.stderr.strip())):
    c = json.loads(p.stdout)
    runs = c["runs"]
    ok(c["schema"] == "ddpspy.compare.v1" and c["mode"] == "weak" and [r["ranks"] for r in runs] == [1, 2] and
       runs[0]["efficiency"] == 1 and abs(runs[1]["efficiency"] - runs[0]["step_p50_ms"] / runs[1]["step_p50_ms"]) < 0.002
       and all(set(r) >= {"dir", "ranks", "step_p50_ms", "efficiency", "shares"} for r in runs),
       "runs sorted by ranks, weak efficiency T1/T2 = %.3f" % runs[1]["efficiency"])
p = subprocess.run([DDPSPY, "compare", "--strong", one], capture_output=True, text=True)
ok(p.returncode == 2, "compare with one directory: exit 2")

# ---- command line, on a recorded straggler (tests/fixtures/straggler-delay: 12 steps found) ----
src = os.path.join(ROOT, "tests", "fixtures", "straggler-delay")
empty = os.path.join(d, "empty")
os.mkdir(empty)
p = subprocess.run([DDPSPY, "report", empty], capture_output=True, text=True)
ok(p.returncode == 2 and len(p.stderr.strip().splitlines()) >= 1 and "no readable rank" in p.stderr,
   "an empty directory: exit 2, why in one line: %s" % p.stderr.strip().splitlines()[:1])
p = subprocess.run([DDPSPY, "report", os.path.join(d, "nope")], capture_output=True, text=True)
ok(p.returncode == 2, "a missing directory: exit 2")
p = subprocess.run([DDPSPY, "report", "--skip", "x", src], capture_output=True, text=True)
ok(p.returncode == 2 and "--skip" in p.stderr, "a bad --skip: exit 2")
p = subprocess.run([DDPSPY, "report", src, "--fail-on", "straggler,data_stall"], capture_output=True, text=True)
ok(p.returncode == 3 and "straggler" in p.stderr, "--fail-on straggler on a straggler: exit 3")
p = subprocess.run([DDPSPY, "report", src, "--fail-on", "data_stall"], capture_output=True, text=True)
ok(p.returncode == 0, "--fail-on data_stall without one: exit 0")
p = subprocess.run([DDPSPY, "report", src, "--fail-on", "straggler", "--fail-severity", "0.99"], capture_output=True, text=True)
ok(p.returncode == 0, "--fail-severity above the finding's: exit 0")
# a misspelt kind would turn a CI gate off for good: refused, naming the kinds
for bad in ("stragler", "straggler,", "data_stall,nonsense_kind", ""):
    p = subprocess.run([DDPSPY, "report", src, "--fail-on", bad], capture_output=True, text=True)
    ok(p.returncode == 2 and not p.stdout and "no finding kind" in p.stderr and "straggler, cpu_contention" in p.stderr,
       "--fail-on %r: exit 2 before any analysis, naming the kinds: %s" % (bad, p.stderr.strip()[:160]))
j, p = report(src, "--ranks", "1", "--skip", "5")
ok(j is not None and [r["rank"] for r in j["ranks"]] == [1] and j["job"]["steps_analyzed"] == 7,
   "--ranks 1 --skip 5: one rank, 12 - 5 = 7 steps")
p = subprocess.run([DDPSPY, "report", src], capture_output=True, text=True)
lines = p.stdout.splitlines()
ok(p.returncode == 0 and lines[0].startswith("verdict: host-bound") and any(l.startswith("rank  host") for l in lines)
   and any("straggler, rank 1" in l for l in lines), "the text report: verdict first, the rank table, the findings")
ok(max(len(l) for l in lines if not l.startswith(("verdict", "    ", " 1.", " 2.", " 3.", "job:", "warning"))) <= 100,
   "the rank table fits a terminal")
# (memory errors: test_fixtures.py runs the report under valgrind on recorded traces of the same shapes)
cleanup(d)
done()
