"""The analysis judged on traces that do not depend on this machine's speed, so that it passes
identically on every run: the recorded fixtures of tests/fixtures/ (README.md there: the testbed
under ddpspy, each with the testbed's own ground truth, truth.json) and traces bench/gentrace writes
here. Each fixture's report must be its golden report (report.json and report.txt beside it: a
change of the analysis shows as a diff, made again with `make fixtures` once read), and must say
what the ground truth says: every verdict and every finding kind of the CPU vocabulary, each
against the testbed's own figures, and the GPU verdict on the testbed's GPU mode recorded on the
simulated device (gpu-*: host sync, a GPU straggler, launch-bound steps)."""
import glob
import json
import os
import shutil
import statistics
import subprocess
from lib import *
from schema import report_errors

FX = os.path.join(ROOT, "tests", "fixtures")
GEN = os.path.join(BUILD, "bench", "gentrace")


def report(rel):
    """The report of tests/fixtures/NAME (named from the root, as record.py names it): (JSON, text)."""
    js = subprocess.run([DDPSPY, "report", "--json", rel], capture_output=True, text=True, timeout=120, cwd=ROOT)
    tx = subprocess.run([DDPSPY, "report", rel], capture_output=True, text=True, timeout=120, cwd=ROOT)
    return js.stdout, tx.stdout


def differences(a, b, path=""):
    """Where two JSON values differ, as paths (the first few)."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for k in sorted(set(a) | set(b)):
            out += differences(a.get(k), b.get(k), path + "." + k)
        return out
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in differences(x, y, "%s[%d]" % (path, i))]
    return [] if a == b else ["%s: %s -> %s" % (path or ".", json.dumps(a)[:80], json.dumps(b)[:80])]


names = sorted(os.path.basename(os.path.dirname(p)) for p in glob.glob(os.path.join(FX, "*", "report.json")))
ok(len(names) >= 20, "%d recorded fixtures: %s" % (len(names), " ".join(names)))
rep, truth = {}, {}
for n in names:
    rel = os.path.join("tests", "fixtures", n)
    js, tx = report(rel)
    with open(os.path.join(FX, n, "report.json")) as f:
        want_js = f.read()
    with open(os.path.join(FX, n, "report.txt")) as f:
        want_tx = f.read()
    with open(os.path.join(FX, n, "truth.json")) as f:
        truth[n] = json.load(f)
    try:
        rep[n] = json.loads(js)
    except ValueError:
        rep[n] = None
    diff = differences(json.loads(want_js), rep[n]) if rep[n] is not None else ["no JSON report"]
    ok(js == want_js and tx == want_tx, "%s: the report is the golden one (report.json, report.txt)%s" % (
        n, "" if js == want_js and tx == want_tx else ": %s; if the analysis changed on purpose, read the diff of "
        "`make fixtures`" % (diff[:4] or "the text report differs")))
    errs = report_errors(rep[n]) if rep[n] is not None else ["no report"]
    ok(not errs, "%s: the report follows the contract%s" % (n, (": %s" % errs[:3]) if errs else ""))
same_reports([os.path.join(FX, n) for n in names], "the recorded fixtures")
same_reports([os.path.join(FX, n) for n in names], "the recorded fixtures, steps found again streamed, a sample",
             DDPSPY_REPORT_PREFIX="64", DDPSPY_REPORT_SAMPLE="64")
same_as_long([os.path.join(FX, n) for n in names], "the recorded fixtures")
# GPU ranks over their share of memory (the test-only DDPSPY_REPORT_GPU_KEEP: 100 device records),
# their device work read again when they are split: the golden reports all the same
gpu_fx = [n for n in names if n.startswith("gpu-")]
off = [n for n in gpu_fx if subprocess.run(
    [DDPSPY, "report", "--json", "-j", "2", os.path.join("tests", "fixtures", n)], capture_output=True, text=True,
    timeout=300, env=dict(os.environ, DDPSPY_REPORT_GPU_KEEP="100")).stdout !=
    open(os.path.join(FX, n, "report.json")).read()]
ok(gpu_fx and not off, "the GPU fixtures (%s) with their ranks over a share of 100 device records, read again when "
   "split: the golden reports%s" % (" ".join(gpu_fx), ": not %s" % off if off else ""))


def find(n, kind):
    return [f for f in rep[n]["findings"] if f["kind"] == kind] if rep.get(n) else []


def summary(n):
    j = rep.get(n)
    return "%s; %s" % (j["verdict"]["summary"], [(f["kind"], f["rank"], round(f["severity"], 3)) for f in j["findings"]]) \
        if j else "no report"


def near(x, want, rel):
    return abs(x - want) <= rel * want


def case(n):
    return rep.get(n) is not None


# ---- healthy: compute-bound, the testbed's own split ----
if case("healthy"):
    j, t = rep["healthy"], truth["healthy"]
    ok(j["verdict"]["bound"] == "compute" and not [f for f in j["findings"] if f["severity"] >= 0.1],
       "healthy: compute-bound, no finding of 0.1 or more: %s" % summary("healthy"))
    ok(j["job"]["step_source"] == "collectives" and j["job"]["steps_detected"] == 12 and j["job"]["steps_analyzed"] == 10
       and near(j["step"]["p50_ms"], t["step_ms_p50"], 0.1),
       "healthy: 12 steps from the collectives, 10 analysed, p50 %.2f ms against the testbed's %.2f"
       % (j["step"]["p50_ms"], t["step_ms_p50"]))
    got = [(r["shares"]["compute"], t["ranks"][r["rank"]]["compute_ms"] / t["ranks"][r["rank"]]["step_ms"]) for r in j["ranks"]]
    ok(all(abs(a - b) < 0.1 for a, b in got), "healthy: each rank's compute share within 0.1 of the testbed's "
       "(report, testbed): %s" % [(round(a, 3), round(b, 3)) for a, b in got])

# ---- stragglers: the late rank, what it did, and how much of the step it costs ----
for n, late, cause, key in (("straggler-delay", 1, "host", "host_ms"), ("straggler-slowdown", 1, "compute", "compute_ms"),
                            ("straggler-4ranks", 2, "host", "host_ms")):
    if not case(n):
        continue
    t, f = truth[n], find(n, "straggler")
    others = sorted(r[key] for r in t["ranks"] if r["rank"] != late)
    want = (t["ranks"][late][key] - others[len(others) // 2]) / t["step_ms_p50"]
    ok(len(f) == 1 and f[0]["rank"] == late and f[0]["evidence"]["cause"] == cause and near(f[0]["severity"], want, 0.25)
       and rep[n]["verdict"]["bound"] == cause,
       "%s: %s-bound, one straggler, rank %d, cause %s, severity within 25%% of its excess %s over the step, %.3f: %s"
       % (n, cause, late, cause, key, want, summary(n)))
    if cause == "host" and f:
        # what the host time was: the testbed's sleep (its --straggler-ms), where in the program
        c = f[0]["evidence"].get("calls") or [{}]
        ms = t["ranks"][late][key] - others[len(others) // 2]
        ok(c[0].get("call") == "sleep" and near(c[0]["ms_per_step"], ms, 0.1) and c[0]["peers_ms_per_step"] < 1 and
           c[0]["stack"][0].startswith("ddpbench+") and abs(c[0]["calls_per_step"] - 1) < 0.05,
           "%s: the straggler's host time is one sleep a step, %.1f ms, in ddpbench, that its peers do not make: %s"
           % (n, ms, c[0]))

# ---- collectives ----
if case("extra-allreduce"):
    f = find("extra-allreduce", "collective_volume")
    ok(rep["extra-allreduce"]["verdict"]["bound"] == "comms" and f and f[0]["evidence"]["bytes"] == 64 << 20 and
       abs(f[0]["evidence"]["calls_per_step"] - 1) < 0.01 and f[0]["evidence"]["op"] == "allreduce" and
       not find("extra-allreduce", "small_work"),
       "extra all-reduce: comms-bound, collective_volume names one 64 MiB allreduce per step: %s"
       % (f[0]["evidence"] if f else summary("extra-allreduce")))
if case("trap"):
    t, f = truth["trap"], find("trap", "small_work")
    want = sum(r["comm_ms"] for r in t["ranks"]) / len(t["ranks"]) / t["step_ms_p50"]
    ok(rep["trap"]["verdict"]["bound"] == "comms" and len(f) == 1 and not find("trap", "collective_volume") and
       near(f[0]["severity"], want, 0.25),
       "strong-scaling trap: small_work, severity within 25%% of the testbed's sync share of the step %.3f: %s"
       % (want, summary("trap")))
if case("no-overlap"):
    t, f = truth["no-overlap"], find("no-overlap", "no_overlap")
    ok(f and f[0]["evidence"]["allreduces_per_step"] == t["buckets"] and f[0]["evidence"]["bytes_per_step"] == t["grad_bytes"],
       "no overlap: no_overlap names the %d bucket all-reduces of %d bytes per step after backward: %s"
       % (t["buckets"], t["grad_bytes"], f[0]["evidence"] if f else summary("no-overlap")))

# ---- rank 0 works, then a barrier ----
if case("rank0-work"):
    t, f = truth["rank0-work"], find("rank0-work", "rank0_serialization")
    want = t["ranks"][0]["host_ms"] / t["step_ms_p50"]
    ok(rep["rank0-work"]["verdict"]["bound"] == "host" and f and f[0]["rank"] == 0 and f[0]["evidence"]["op"] == "barrier"
       and near(f[0]["severity"], want, 0.25) and not find("rank0-work", "straggler"),
       "rank-0 work: rank0_serialization on rank 0 at the barrier, severity within 25%% of its work over the step "
       "%.3f, and no straggler: %s" % (want, summary("rank0-work")))

# ---- input ----
if case("small-reads"):
    t, f = truth["small-reads"], find("small-reads", "data_stall")
    op = f[0]["evidence"]["ops"][0] if f and f[0]["evidence"]["ops"] else {}
    ok(rep["small-reads"]["verdict"]["bound"] == "data" and op.get("op") == "pread" and op.get("bytes_per_call") == 32
       and op.get("calls_per_step") == t["batch"] * 4096 / 32,
       "small reads: data-bound, data_stall names %d preads of 32 bytes per step: %s" % (t["batch"] * 4096 / 32, op))
    # every rank reads: the severity is the ranks' median input share, which the testbed measured
    # around its whole read loop (the calls and the loop between them, since 2026-11-26: 0.72, the
    # calls alone, against 0.82 measured)
    want = statistics.median(r["data_ms"] / r["step_ms"] for r in t["ranks"])
    ok(f and abs(f[0]["severity"] - want) <= 0.05,
       "small reads: data_stall's severity %s within 0.05 of the input share the testbed measured, %.3f"
       % (f[0]["severity"] if f else None, want))
if case("read-delay"):
    f = find("read-delay", "data_stall")
    op = f[0]["evidence"]["ops"][0] if f and f[0]["evidence"]["ops"] else {}
    ok(rep["read-delay"]["verdict"]["bound"] == "data" and f and f[0]["rank"] is None and op.get("op") == "read" and
       op.get("fdclass") == "unix", "storage latency on every rank: data-bound, data_stall on every rank names the "
       "wait on the storage socket: %s" % op)

# ---- token skew: work_skew ordered like the testbed's own padded imbalance ----
vl = {b: n for b, n in (("fixed", "varlen-fixed"), ("bucket", "varlen-bucket"), ("token-budget", "varlen-token-budget"))
      if case(n)}
if ok(len(vl) == 3, "three variable-length fixtures"):
    sev = {b: max([f["severity"] for f in find(n, "work_skew")] or [0]) for b, n in vl.items()}
    imb = {b: truth[n]["padded_imbalance"] for b, n in vl.items()}
    ok(sorted(sev, key=sev.get) == sorted(imb, key=imb.get) and sev["fixed"] >= 0.15,
       "work_skew severities %s ordered like the testbed's padded imbalance %s" % (sev, imb))

# ---- steps from markers; clocks offset by -50 and +50 ms, recovered ----
if case("markers"):
    j, t = rep["markers"], truth["markers"]
    ok(j["job"]["step_source"] == "markers" and j["job"]["steps_detected"] == 12 and j["job"]["steps_analyzed"] == 10 and
       near(j["step"]["p50_ms"], t["step_ms_p50"], 0.1), "markers: 12 steps from them, 10 analysed, p50 %.2f ms "
       "against the testbed's %.2f" % (j["step"]["p50_ms"], t["step_ms_p50"]))
if case("clock-offset"):
    j = rep["clock-offset"]
    off = {r["rank"]: r["clock_offset_us"] for r in j["ranks"]}
    ok(abs(off[1] - off[0] + 100000) < 100 and j["job"]["clock"]["method"] == "collective-exit" and
       j["job"]["clock"]["max_offset_us"] < 100 and j["job"]["steps_analyzed"] == 10,
       "rank 1's clock, 100 ms ahead of rank 0's, corrected by %.1f us (%s, residual %.1f us), and 10 steps found"
       % (off[1] - off[0], j["job"]["clock"]["method"], j["job"]["clock"]["max_offset_us"]))

# 2 ranks of one host, clocks from messages alone over 4.4 s: the drift fitted through the windows'
# wide intervals (rank 0 computes 10x, so each message bounds one way by tens of ms) is their
# noise; CLOCK_REALTIME, which no message contradicts, is kept, and the light rank's waits are what
# the program measured (stencil-one-host: once, rank 1 was moved 16 ms, severity 0.48). The same
# run again, stencil-wait-exits: 5 of its overlapped all-reduces had waits of 20-25 us on both
# ranks that found them done, 35-38 ms apart, whose exits moved rank 1 by 34 ms (severity 0.06);
# the waits do not overlap, so they measure nothing
for n in ("stencil-one-host", "stencil-wait-exits"):
    if not case(n):
        continue
    j, t = rep[n], truth[n]
    r0, r1 = t["ranks"]
    step = r0["compute_ms"] + r0["comm_ms"]
    lost = (r1["comm_ms"] - r0["comm_ms"]) / step
    f = find(n, "straggler")
    clk = [(r["clock_offset_us"], r["clock_drift_us_per_s"]) for r in j["ranks"]]
    ok(clk == [(0, 0), (0, 0)] and j["job"]["clock"]["method"] == "message-causality" and f and f[0]["rank"] == 0 and
       abs(f[0]["severity"] - lost) <= 0.1 and j["verdict"]["bound"] == "compute",
       "%s: one host's clock kept from messages alone (offsets and drifts %s, %s); straggler rank 0 at %s, within 0.1 "
       "of the step rank 1 loses waiting by the program's figures, %.2f" % (n, clk, j["job"]["clock"]["method"],
                                                                           f and (f[0]["rank"], f[0]["severity"]), lost))

# ---- what was lost: dropped events, damaged files ----
if case("dropped"):
    j, f = rep["dropped"], find("dropped", "lost_events")
    exact = all(abs(x["severity"] - x["evidence"]["dropped"] / (x["evidence"]["dropped"] + x["evidence"]["recorded"]))
                < 0.001 for x in f)
    ok(sorted(x["rank"] for x in f) == [0, 1] and exact and
       j["job"]["dropped_events"] == sum(x["evidence"]["dropped"] for x in f) > 0,
       "full rings: lost_events on both ranks, each the fraction its file says was dropped, %d events in all: %s"
       % (j["job"]["dropped_events"], [(x["rank"], x["evidence"]) for x in f]))
if case("damaged"):
    j = rep["damaged"]
    ok(len(j["job"]["warnings"]) >= 2 and sorted(x["rank"] for x in find("damaged", "lost_events")) == [0, 1] and
       j["job"]["ranks"] == 2 and j["job"]["steps_analyzed"] > 0 and find("damaged", "straggler"),
       "a truncated and a corrupt file: warnings %s, lost_events on both ranks, the readable part analysed "
       "(%d steps, the straggler still found)" % (j["job"]["warnings"], j["job"]["steps_analyzed"]))

# ---- older formats: the fixtures are 1.1 files; the same files marked 1.0 (which had no step
# kind, and these use none) must read the same: the report is the golden one ----
import struct
import zlib
d10 = tmpdir("fixtures-1.0")
src = os.path.join(FX, "straggler-delay")
for name in os.listdir(src):
    if not name.endswith(".ddpspy"):
        continue
    b = bytearray(open(os.path.join(src, name), "rb").read())
    b[10:12] = b"\x00\x00"
    n = struct.unpack_from("<I", b, 16)[0]
    body = bytes(b[24:24 + n])
    i = body.find(b"\xa6format\x92\x01\x01")
    if i >= 0:
        body = body[:i] + b"\xa6format\x92\x01\x00" + body[i + 10:]
        b[24:24 + n] = body
        struct.pack_into("<I", b, 20, zlib.crc32(body) & 0xffffffff)
    open(os.path.join(d10, name), "wb").write(b)
p = subprocess.run([DDPSPY, "report", "--json", d10], capture_output=True, text=True, timeout=120)
golden = json.load(open(os.path.join(src, "report.json")))
got = json.loads(p.stdout) if p.stdout.startswith("{") else None
ok(got is not None and got["findings"] == golden["findings"] and got["verdict"] == golden["verdict"],
   "the recorded straggler marked format 1.0: the same verdict and findings as its golden report")
cleanup(d10)

# ---- generated: no step at all is an unknown verdict, and says why ----
d = tmpdir("fixtures")
if os.path.exists(GEN):
    out = os.path.join(d, "empty")
    os.mkdir(out)
    subprocess.run([GEN, out, "2", "0"], check=True)
    p = subprocess.run([DDPSPY, "report", "--json", out], capture_output=True, text=True, timeout=60)
    j = json.loads(p.stdout) if p.stdout.startswith("{") else None
    ok(j is not None and p.returncode == 0 and j["verdict"]["bound"] == "unknown" and j["verdict"]["confidence"] == 0
       and j["job"]["steps_analyzed"] == 0 and j["job"]["warnings"] and not report_errors(j),
       "ranks with no event: verdict unknown, confidence 0, 0 steps analysed, a warning says why: %s"
       % (str((j["verdict"], j["job"]["steps_analyzed"], j["job"]["warnings"])) if j else p.stderr))
    if j is not None:
        rep["generated-empty"] = j
else:
    skip("a trace without steps", "build/bench/gentrace missing")

# ---- every verdict and every CPU finding kind is covered by the above ----
bounds = {j["verdict"]["bound"] for j in rep.values() if j}
kinds = {f["kind"] for j in rep.values() if j for f in j["findings"]}
want_kinds = {"straggler", "rank0_serialization", "collective_volume", "data_stall", "work_skew", "no_overlap",
              "small_work", "lost_events"}
ok(bounds >= {"compute", "data", "comms", "host", "unknown"} and kinds >= want_kinds,
   "every verdict (%s) and every CPU finding kind (%s) is judged on a fixed trace; missing: %s"
   % (sorted(bounds), sorted(kinds), sorted(({"compute", "data", "comms", "host", "unknown"} - bounds) |
                                            (want_kinds - kinds))))

# ---- long traces: the steps found again from every call, streamed, give the same analysis ----
diffs = {n: streamed_differences(os.path.join(FX, n)) for n in ("straggler-delay", "healthy", "rank0-work", "markers",
                                                                 "varlen-fixed", "trap", "gpu-straggler") if case(n)}
ok(len(diffs) == 7 and not any(diffs.values()), "the same report from the streamed calls as from the kept ones: %s"
   % {n: v for n, v in diffs.items() if v})

# ---- GPU jobs (the simulated device): the device's split against the testbed's plan ----
# (the testbed's compute_ms is the kernel time it planned, host_ms its own host work per step)
if case("gpu-host-sync"):
    j, t = rep["gpu-host-sync"], truth["gpu-host-sync"]
    want = statistics.mean(r["host_ms"] for r in t["ranks"]) / t["step_ms_p50"]  # exposed after each sync
    top = j["findings"][0] if j["findings"] else {"kind": None, "evidence": {}}
    hs = find("gpu-host-sync", "host_sync")
    ok(j["verdict"]["bound"] == "compute" and top["kind"] == "gpu_idle" and top["evidence"]["cause"] == "sync" and
       near(top["severity"], want, 0.15) and hs and hs[0]["evidence"]["call"] == "cuda_memcpy" and
       hs[0]["evidence"]["what"] == "d2h" and hs[0]["evidence"]["stack"][0].startswith("libddpbench_gpu.so+0x"),
       "GPU host sync: gpu_idle (cause sync) within 15%% of the host's work over the step %.3f, host_sync names the "
       "device-to-host copy and where: %s; %s" % (want, summary("gpu-host-sync"), hs[0]["evidence"] if hs else None))
    g = [r["gpu"] for r in j["ranks"]]
    ok(j["job"]["clock"]["method"] == "nccl-kernel-end" and j["job"]["gpu"]["ranks_with_gpu"] == 2 and
       all(abs(x["busy_share"] + x["idle_share"] - 1) <= 0.02 and near(x["compute_share"], 20 / t["step_ms_p50"], 0.05)
           for x in g), "GPU host sync: clocks from NCCL kernels' ends, busy + idle = 1, compute share of 20 ms of "
       "kernels per step: %s" % [(x["busy_share"], x["idle_share"], x["compute_share"]) for x in g])
if case("gpu-straggler"):
    j, t, f = rep["gpu-straggler"], truth["gpu-straggler"], find("gpu-straggler", "straggler")
    want = (t["ranks"][1]["compute_ms"] - t["ranks"][0]["compute_ms"]) / t["step_ms_p50"]
    ok(j["verdict"]["bound"] == "compute" and len(f) == 1 and f[0]["rank"] == 1 and f[0]["evidence"]["cause"] == "compute"
       and near(f[0]["severity"], want, 0.15) and j["ranks"][0]["gpu"]["nccl_wait_share"] > 0.25,
       "GPU straggler: rank 1, cause compute, severity within 15%% of its extra kernel time over the step %.3f; rank "
       "0's NCCL kernels wait for it: %s" % (want, summary("gpu-straggler")))
if case("gpu-plugin-straggler"):
    # gpu-straggler with rank 1's CUPTI held by Nsight Systems: its NCCL kernels from NCCL's profiler
    # plugin only, and still what shows rank 0 waiting for it on the device
    j, t, f = rep["gpu-plugin-straggler"], truth["gpu-plugin-straggler"], find("gpu-plugin-straggler", "straggler")
    want = (t["ranks"][1]["compute_ms"] - t["ranks"][0]["compute_ms"]) / t["step_ms_p50"]
    cov, nc = j["coverage"], [r.get("nccl") or {} for r in j["ranks"]]
    ok(j["verdict"]["bound"] == "compute" and len(f) == 1 and f[0]["rank"] == 1 and f[0]["evidence"]["cause"] == "compute"
       and near(f[0]["severity"], want, 0.15) and j["ranks"][0]["gpu"]["nccl_wait_share"] > 0.25,
       "GPU straggler, rank 1 timed by NCCL's plugin: rank 1, cause compute, severity within 15%% of its extra kernel "
       "time over the step %.3f; rank 0's NCCL kernels wait for it: %s" % (want, summary("gpu-plugin-straggler")))
    ok([c["gpu"] for c in cov] == ["cupti", "nccl-plugin"] and [x.get("source") for x in nc] == ["cupti", "nccl-plugin"]
       and nc[1]["kernels_per_step"] == t["buckets"] and nc[1]["bytes_per_step"] == nc[0]["bytes_per_step"] and
       near(j["ranks"][1]["late_ms_p50"], rep["gpu-straggler"]["ranks"][1]["late_ms_p50"], 0.1) and
       cov[0]["nccl_check"]["matched"] == t["buckets"] * (t["steps"] + t["warmup"]),
       "GPU straggler, rank 1 timed by NCCL's plugin: the coverage says so; its %d buckets per step, rank 0's bytes; "
       "its kernels late as gpu-straggler's CUPTI found them (%.2f ms) within 10%%: %s; rank 0's check %s"
       % (t["buckets"], rep["gpu-straggler"]["ranks"][1]["late_ms_p50"], nc, cov[0].get("nccl_check")))
    # the HTML page: its coverage line and each rank's NCCL times with their source
    hp = os.path.join(d, "plugin.html")
    subprocess.run([DDPSPY, "report", os.path.join(FX, "gpu-plugin-straggler"), "--html", hp], capture_output=True,
                   timeout=120)
    page = open(hp).read() if os.path.exists(hp) else ""
    tab = page[page.find('<table id="nccl">'):][:1200]
    ok("rank 1 NCCL kernel times from NCCL&#39;s profiler plugin, no CUPTI" in page.replace("'", "&#39;") and
       "<td>0</td><td>CUPTI</td><td>3.0</td>" in tab and "<td>1</td><td>NCCL&#39;s profiler plugin</td><td>3.0</td>"
       in tab.replace("'", "&#39;"),
       "GPU straggler, rank 1 timed by NCCL's plugin: the HTML page's coverage and its NCCL table name each rank's "
       "source: %s" % tab[:300])
if case("gpu-launch-bound"):
    j, t = rep["gpu-launch-bound"], truth["gpu-launch-bound"]
    want = 1 - statistics.mean(r["compute_ms"] for r in t["ranks"]) / t["step_ms_p50"]  # all but the kernels' time
    top = j["findings"][0] if j["findings"] else {"kind": None, "evidence": {}}
    lb = find("gpu-launch-bound", "launch_bound")
    ok(j["verdict"]["bound"] == "host" and top["kind"] == "gpu_idle" and top["evidence"]["cause"] == "launch" and
       near(top["severity"], want, 0.15) and lb and lb[0]["evidence"]["kernels_per_step"] == 2250,
       "GPU launch-bound: host-bound, gpu_idle (cause launch) within 15%% of the step beyond the kernels %.3f, "
       "launch_bound counts 2250 kernels per step: %s" % (want, summary("gpu-launch-bound")))

# ---- memory errors: the report under valgrind ----
if shutil.which("valgrind"):
    for n in ("healthy", "trap", "damaged", "dropped", "gpu-launch-bound", "gpu-plugin-straggler"):
        p, why = under_valgrind(["report", "--json", os.path.join(FX, n)])
        ok(p.returncode == 0, "valgrind: no memory error or leak in the report of %s (rc=%d)%s" % (n, p.returncode, why))
else:
    skip("the report under valgrind", "valgrind is not installed (.ci/deps installs it)")

cleanup(d)
done()
