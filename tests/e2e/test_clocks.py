"""Clocks across hosts: every rank's clock shifted and drifting as if its host's were off (the
test-only DDPSPY_CLOCK_OFFSET_NS, items OFFSET:RATE in ns and ns per second), and the report's
correction judged against that known truth over the whole job: in the testbed's default mode
(bucket all-reduces as Iallreduce + Testall/Waitall, nothing blocking), --no-overlap, --markers,
2 and 4 ranks, with the straggler, rank-0 and volume findings what the testbed injected; the
halo-exchange stencil, whose point-to-point messages are its only signal, blocking and not, 2
and 4 ranks; an NCCL-only job on the simulated device.

Truth: rank r's file reads true CLOCK_MONOTONIC m plus k_r(m) = OFFSET_r + RATE_r (m - m0_r), m0_r
its start (the process record's start_mono_ns, knob included); the correction that puts rank r on
the lowest rank's clock is k_0(m) - k_r(m). The report gives it at the job's start
(ranks[].clock_offset_us) and its change per second (clock_drift_us_per_s); both ends of the job
are compared. A live run: a busy host spreads the exits, the report's residual says by how much,
and a run whose residual is past the 100 us the check needs is run again (lib.live), then skipped
with that reason."""
import json
import os
import shutil
import subprocess
from lib import *
from schema import report_errors

if not shutil.which("mpirun") or not os.path.exists(BENCH):
    skip("clocks on the testbed", "mpirun or build/ddpbench missing (Open MPI not installed)")
    done()

d = tmpdir("clocks")
data = bench_data(d, 64)
TOL_US = 100  # the bound: every rank's correction within 100 us of the truth
MS500 = 500000000


def knob(items):
    return ",".join("%d:%d" % kr for kr in items)


def report(out, env=None):
    p = subprocess.run([DDPSPY, "report", "--json", out], capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, **(env or {})))
    try:
        j = json.loads(p.stdout)
    except ValueError:
        return None
    errs = report_errors(j)
    ok(not errs, "%s: the report follows the contract%s" % (os.path.basename(out), (": %s" % errs[:3]) if errs else ""))
    return j


def errors(out, j, items):
    """every rank's correction error (us) at the job's start and end, against the knob's truth"""
    recs, rc, _ = dump(out)
    rank_of = {p["file"]: p for p in of(recs, "process") if p["role"] == "rank"}
    first = {}
    for e in of(recs, "event"):
        p = rank_of.get(e["file"])
        if p:
            first[p["rank"]] = min(first.get(p["rank"], e["t_ns"]), e["t_ns"])
    m0 = {p["rank"]: p["start_mono_ns"] - items[p["rank"]][0] for p in rank_of.values()}

    def k(r, m):
        return items[r][0] + items[r][1] * (m - m0[r]) / 1e9

    start = min(first[r] - items[r][0] for r in first)  # the job's start, true monotonic time
    end = start + j["job"]["wall_s"] * 1e9
    err = {}
    for rk in j["ranks"]:
        r = rk["rank"]
        err[r] = [rk["clock_offset_us"] + rk["clock_drift_us_per_s"] * (m - start) / 1e9 - (k(0, m) - k(r, m)) / 1e3
                  for m in (start, end)]
    return err


def bench(out, np, args, env):
    return testbed(out, data, ["--hidden", "256"] + args, np, env)


def stencil(out, np, args, env):
    """the halo-exchange stencil (test_stencil), its point-to-point messages the only signal: no
    all-reduce within its iterations"""
    shutil.rmtree(out, ignore_errors=True)
    p = subprocess.run([DDPSPY, "run", "-o", out, "--"] + MPIRUN + ["-np", str(np), os.path.join(APPS, "stencil"),
                       "--reduce-every", "1000000"] + args, capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, **env))
    if p.returncode != 0:
        print("# %s failed: %s" % (os.path.basename(out), p.stderr[-800:].replace("\n", "\n# ")))
        return None, out
    return json.loads(p.stdout.splitlines()[-1]), out


def lengthened(args, wall, min_s):
    """args with its --steps or --iters made as many more as a job of wall seconds needs to last
    min_s and a quarter more"""
    a = list(args)
    for i, x in enumerate(a[:-1]):
        if x in ("--steps", "--iters"):
            a[i + 1] = str(int(int(a[i + 1]) * min_s * 1.25 / max(wall, 0.1)) + 1)
    return a


def case(name, np, items, args, expect=None, need=TOL_US, env=None, method="collective-exit", run=bench, prefix=None,
         spread=None, min_s=None):
    """one live case: items the knob per rank, expect the findings (kind, rank) the program
    injected; corrections within need us of the truth wherever the residual lets that be judged.
    prefix: the same trace reported again as a long one (DDPSPY_REPORT_PREFIX: the first prefix
    synchronizing calls of each thread kept; DDPSPY_REPORT_SPREAD: spread calls beyond them for
    the clocks, 4 x prefix unless given, fewer than the trace has: a sample), judged alike.
    min_s: a drift is measured over 4 s of a job or more (docs/report.md, section 2), so a job
    that ran shorter than min_s (a faster machine: 400 steps took 3.9 s here on 2026-11-28, the
    drift went unmeasured and the ends were 100 us off) is run again with more steps"""
    spread = spread or 4 * prefix if prefix else None
    def attempt(k):
        knobs = dict(env or {}, DDPSPY_CLOCK_OFFSET_NS=knob(items))
        truth, out = run(os.path.join(d, name), np, args, knobs)
        j = report(out) if truth else None
        if j is not None and min_s and j["job"]["wall_s"] < min_s:
            longer = lengthened(args, j["job"]["wall_s"], min_s)
            print("# %s: the job ran %.1f s, under the %.1f s its drift needs: again with %s" %
                  (name, j["job"]["wall_s"], min_s, " ".join(longer)), flush=True)
            truth, out = run(os.path.join(d, name), np, longer, knobs)
            j = report(out) if truth else None
        if j is None:
            return [(False, "%s: ran and reported" % name)]
        res = j["job"]["clock"]["max_offset_us"]
        if res is None or res > need:
            return ("not judged: the signal leaves %s us (within %d needed): the host was too busy to measure "
                    "the clocks that closely" % (res, need))
        err = errors(out, j, items)
        worst = max(abs(e) for v in err.values() for e in v)
        checks = [(j["job"]["clock"]["method"] == method and worst <= need,
                   "%s: %s, every rank's correction within %d us of the truth at both ends of the job: errors %s us "
                   "(residual %.1f us, drift %s us/s)" % (name, j["job"]["clock"]["method"], need, {r: [round(e) for e in v] for r, v in err.items()},
                                                          res, [rk["clock_drift_us_per_s"] for rk in j["ranks"]]))]
        for kind, rank in expect or []:
            got = [(f["kind"], f["rank"]) for f in j["findings"] if f["severity"] >= 0.05]
            checks.append(((kind, rank) in got, "%s: the %s finding%s is there after the correction: %s"
                           % (name, kind, " on rank %d" % rank if rank is not None else "", got)))
        if prefix:
            jl = report(out, {"DDPSPY_REPORT_PREFIX": str(prefix), "DDPSPY_REPORT_SPREAD": str(spread)})
            errl = errors(out, jl, items) if jl else {}
            worstl = max((abs(e) for v in errl.values() for e in v), default=float("inf"))
            checks.append((jl is not None and worstl <= need,
                           "%s, as a long trace (the first %d synchronizing calls of each thread kept, "
                           "%d beyond for the clocks): every correction within %d us at both ends: errors "
                           "%s us (drift %s us/s)" % (name, prefix, spread, need, {r: [round(e) for e in v] for r, v in errl.items()},
                                                      [rk["clock_drift_us_per_s"] for rk in jl["ranks"]] if jl else None)))
        # (a miss while another job held the host's CPUs says nothing of the alignment: the exits
        # spread with it, e.g. four ranks 7 ms apart with one core taken)
        return busy_host(checks, j)
    live(name, attempt)


# the default mode: nothing blocking, the bucket all-reduces' Waitall exits align the clocks;
# 400 steps (over 4 s) show a drift of 50 us/s; and again as a trace whose prefix holds its first
# 64 steps (under a second, too short to show a drift): a sample of the 336 steps after it, the
# clocks' spread, shows it
case("overlapped-drift", 2, [(0, 0), (-MS500, 50000)], ["--steps", "400"], prefix=128, min_s=5)
# the reference rank itself off and drifting, blocking all-reduces, a straggler
case("no-overlap-straggler", 2, [(MS500, -50000), (0, 0)],
     ["--steps", "30", "--no-overlap", "--straggler-rank", "1", "--straggler-ms", "10"], [("straggler", 1)])
case("markers", 2, [(-MS500, 0), (MS500, 0)], ["--steps", "30", "--markers"])
case("rank0-volume", 2, [(0, 0), (MS500, 50000)],
     ["--steps", "30", "--rank0-work-ms", "10", "--extra-allreduce-mb", "16"],
     [("rank0_serialization", 0), ("collective_volume", None)])
# four ranks on two cores: four ranks spinning in their waits take turns on the cores, and one can
# leave every collective milliseconds after the others (measured: one rank 0.5 to 10 ms late in
# each of 42 steps, never first). The median of its exits is then that far off: 3.4 ms in the run
# that set this bound, which is NOT the 100 us (docs/report.md, "Limits"); what is judged
# here is the +-500 ms offsets recovered to within 5 ms and the straggler found on the right rank.
case("four-ranks", 4, [(0, 0), (MS500, 50000), (-MS500, -50000), (MS500 // 2, 50000)],
     ["--steps", "40", "--straggler-rank", "3", "--straggler-ms", "30"], [("straggler", 3)], need=5000)

# programs that only send and receive: each message bounds its two ranks' clocks (its receive
# returned after its send started); a halo exchange's messages go both ways, and the estimate is
# the middle of what they leave. Blocking MPI_Sendrecv, a heavy rank, the reference rank off and
# drifting, 5 s (the drift measured from the messages)
case("stencil-drift", 2, [(MS500, -50000), (0, 0)], ["--iters", "2000", "--nx", "1024", "--ny", "1024",
     "--heavy-rank", "1", "--heavy-factor", "2"], [("straggler", 1)], method="message-causality", run=stencil,
     prefix=256, min_s=5)
# nonblocking, balanced, rank 1 off and drifting, 7-8 s; and as a long trace, whose spread keeps the
# receives with the Waitall that completed them
case("stencil-nonblocking", 2, [(0, 0), (-MS500, 50000)], ["--iters", "6000", "--nx", "1024", "--ny", "1024",
     "--nonblocking"], method="message-causality", run=stencil, prefix=256, spread=2048, min_s=5)
case("stencil-4", 4, [(0, 0), (MS500, 0), (-MS500, 0), (MS500 // 2, 0)], ["--iters", "400", "--nx", "512", "--ny", "512"],
     method="message-causality", run=stencil)

# a GPU job on the simulated device: NCCL calls return at enqueue, nothing on the host is blocking;
# the NCCL kernels' ends on the device align the clocks
if os.path.exists(os.path.join(BUILD, "libddpbench_gpu.so")):
    case("nccl-only", 2, [(0, 0), (MS500, 50000)], ["--gpu", "--steps", "40", "--straggler-rank", "1",
                                                     "--straggler-slowdown", "2"], [("straggler", 1)],
         env={"LD_LIBRARY_PATH": SIMDIR, "SIMGPU_KERNELS": "ddpbench_=arg", "SIMGPU_MOVE_BYTES": "0"},
         method="nccl-kernel-end")
else:
    skip("clocks of an NCCL-only job", "build/libddpbench_gpu.so missing (nvcc absent)")

# the knob's own form is checked: a malformed item is refused with a warning, not half-read
p = traced(["/bin/true"], os.path.join(d, "bad"), env={"DDPSPY_CLOCK_OFFSET_NS": "5:x"})
ok("not a comma list of OFFSET or OFFSET:RATE" in p.stderr, "DDPSPY_CLOCK_OFFSET_NS=5:x is refused: %s"
   % p.stderr.strip()[:200])
cleanup(d)
done()
