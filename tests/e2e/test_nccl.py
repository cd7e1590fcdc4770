"""NCCL capture (preload/nccl.c) with CUPTI (cupti/gpu.c) on the simulated device: testapps/nccl_app.cu,
a data-parallel loop (forward and backward kernels, a 32 MiB allreduce on a stream that waits for
them, a ring exchange in a group), runs as 2 and then 4 ranks on the stand-in libnccl.so.2, whose
collectives transfer once the last rank is ready and end together. `ddpspy dump --json` of every rank
must show every NCCL call with its communicator (equal on every rank), per-communicator sequence
number, bytes, peer and stream, inside the host time the program measured around it; and, from
CUPTI, each NCCL kernel joined to the call that launched it (external correlation, driver launch),
ending at the same time on every rank, the stand-in's bus-bandwidth model after the last rank's
kernel started and not before any rank called the collective, each starting after the backward
kernel it waits for ended."""
import json
import os
import shutil
import subprocess
import time
from lib import *

need_sim("NCCL capture", "nccl.h", "preload/nccl.c")
APP = os.path.join(APPS, "nccl_app")
if not os.path.exists(APP):
    skip("NCCL capture", "make sim did not build nccl_app")
    done()

STEPS = 4
GRAD, RING = 32 << 20, 1 << 20
SLACK = 20000   # ns: the host clock's conversion against CLOCK_MONOTONIC, with room
TOGETHER = 5000  # ns: the stand-in CUPTI reads two clocks to put a time on the client's clock
d = tmpdir("nccl")


def run(n, split=False, extra=None, name=None, rank_env=True):
    out = os.path.join(d, name or "r%d%s" % (n, "-split" if split else ""))
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    env = dict(os.environ, LD_PRELOAD=LIB, DDPSPY_OUT=out, LD_LIBRARY_PATH=SIMDIR,
               SIMGPU_KERNELS="forward=2000,backward=3000", NCCL_APP_SKEW_MS="2", **(extra or {}))
    if split:
        env["NCCL_APP_SPLIT"] = "1"
    idfile = os.path.join(out, "id")
    # (each a rank to the preload, for the report: RANK, WORLD_SIZE; rank_env=False: none, as mp.spawn)
    ps = [subprocess.Popen([APP, str(r), str(n), idfile, str(STEPS)],
                           env=dict(env, RANK=str(r), WORLD_SIZE=str(n)) if rank_env else env,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for r in range(n)]
    res = [p.communicate(timeout=120) for p in ps]
    truth = {}
    for p, (o, e) in zip(ps, res):
        if p.returncode == 0 and o.strip():
            t = json.loads(o.splitlines()[-1])
            truth[t["rank"]] = t
    recs, rc, err = dump(out)
    return ps, res, truth, recs, out


def model(n, factor, nbytes):
    return 10000 + factor * nbytes / 100.0  # SIMGPU_NCCL_US 10, SIMGPU_NCCL_GBS 100


def check(n):
    ps, res, truth, recs, out = run(n)
    if not ok(all(p.returncode == 0 for p in ps) and len(truth) == n,
              "%d ranks run nccl_app under the preload on the simulated device: %s" % (n, [e[-200:] for o, e in res])):
        return
    procs = of(recs, "process")
    pid_rank = {}
    for p in procs:  # the rank is nccl_app's first argument
        pid_rank[p["pid"]] = int(p["cmdline"][1])
    ev = {r: [e for e in events(recs) if pid_rank.get(e["pid"]) == r] for r in range(n)}
    gev = {r: [e for e in of(recs, "gpu_event") if pid_rank.get(e["pid"]) == r] for r in range(n)}

    inits = [[e for e in ev[r] if e["kind"] == "nccl_init"] for r in range(n)]
    ok(all(len(i) == 1 and i[0]["comm_rank"] == r and i[0]["nranks"] == n and i[0]["ret"] == 0 for r, i in enumerate(inits))
       and len({i[0]["comm"] for i in inits if i}) == 1 and inits[0][0]["comm"] >= 0,
       "%d ranks: each rank's ncclCommInitRank, with its rank, the size, and one communicator id on all: %s"
       % (n, [(i[0]["comm_rank"], i[0]["comm"]) for i in inits if i]))
    comm = inits[0][0]["comm"] if inits[0] else None

    ars = {r: [e for e in ev[r] if e["kind"] == "nccl_coll" and e["op"] == "allreduce"] for r in range(n)}
    ok(all([(e["seq"], e["comm"], e["bytes"], e["ret"]) for e in ars[r]] == [(s, comm, GRAD, 0) for s in range(STEPS)]
           for r in range(n)),
       "%d ranks: every allreduce, numbered 0..%d on its communicator, 32 MiB each" % (n, STEPS - 1))
    inside = [truth[r]["steps"][s]["allreduce"][0] - SLACK <= e["t_ns"] and
              e["t_ns"] + e["dur_ns"] <= truth[r]["steps"][s]["allreduce"][1] + SLACK
              for r in range(n) for s, e in enumerate(ars[r]) if s < STEPS]
    ok(len(inside) == n * STEPS and all(inside),
       "%d ranks: each allreduce's host time lies within what the program measured around the call" % n)
    p2p = {r: [(e["op"], e["peer"], e["bytes"], e["seq"]) for e in ev[r] if e["kind"] == "nccl_coll"
               and e["op"] in ("send", "recv")] for r in range(n)}
    ok(all(p2p[r] == [("send", (r + 1) % n, RING, -1), ("recv", (r - 1) % n, RING, -1)] * STEPS for r in range(n)),
       "%d ranks: the ring exchange's sends and receives with their peers and bytes" % n)
    groups = {r: [e["begin"] for e in ev[r] if e["kind"] == "nccl_group"] for r in range(n)}
    ok(all(groups[r] == [1, 0] * STEPS for r in range(n)), "%d ranks: every group start and end" % n)

    # CUPTI: the NCCL kernels, joined to their calls
    joined = True
    starts, why = {}, []
    for r in range(n):
        ext_of = {e["corr"]: e["ext_id"] for e in gev[r] if e["kind"] == "gpu_extcorr"}
        launch = {e["corr"] for e in gev[r] if e["kind"] == "cuda_api" and e["driver"] == 1 and e["fn"] == "cuLaunchKernelEx"}
        ends = [e for e in ev[r] if e["kind"] == "nccl_group" and e["begin"] == 0]
        # (NCCL 2.28's kernel names are mangled: _Z22ncclDevKernel_SendRecv24ncclDevKernelArgsStorageILm4096EE)
        kern = [e for e in gev[r] if e["kind"] == "gpu_kernel" and "ncclDevKernel_" in e["kname"]]
        ark = [k for k in kern if "AllReduce" in k["kname"]]
        srk = [k for k in kern if "ncclDevKernel_SendRecv" in k["kname"]]
        # (as NCCL 2.28's, mangled, of the operation, reduction and type)
        this_names = ({k["kname"] for k in ark} == {"_Z39ncclDevKernel_AllReduce_Sum_f32_RING_LL24ncclDevKernelArgsStorageILm4096EE"}
                      and {k["kname"] for k in srk} == {"_Z22ncclDevKernel_SendRecv24ncclDevKernelArgsStorageILm4096EE"})
        this = [len(ark) == STEPS and len(srk) == STEPS and this_names, all(k["corr"] in launch for k in kern),
                [ext_of.get(k["corr"]) for k in ark] == [e["ext"] for e in ars[r]],
                [ext_of.get(k["corr"]) for k in srk] == [e["ext"] for e in ends]]
        if not all(this):
            why.append("rank %d: %d allreduce and %d group kernels of %d, launches found %s, allreduce ids %s, group "
                       "ids %s; gpu record %s" % (r, len(ark), len(srk), STEPS, this[1], this[2], this[3],
                                                  {k: g.get(k) for g in of(recs, "gpu") if pid_rank.get(g.get("pid")) == r
                                                   for k in ("state", "events", "dropped", "refused", "unwritten")}))
        joined &= all(this)
        starts[r] = ark
    ok(joined, "%d ranks: each allreduce's and each group's kernel joins its call (external id) and its driver launch%s"
       % (n, ": %s" % why if why else ""))
    if not joined:
        return
    # as NCCL's kernels: each starts when its stream could (after the backward kernel it waits
    # for), waits in it for the last rank, and all end together, the bus model's time after the
    # last one started
    end = lambda k: k["t_ns"] + k["dur_ns"]
    spread_ns = [max(end(starts[r][s]) for r in range(n)) - min(end(starts[r][s]) for r in range(n)) for s in range(STEPS)]
    ok(max(spread_ns) <= TOGETHER, "%d ranks: each allreduce ends on every rank together (spread %s ns)" % (n, spread_ns))
    last = [max(starts[r][s]["t_ns"] for r in range(n)) for s in range(STEPS)]
    late = [last[s] + TOGETHER >= max(ars[r][s]["t_ns"] for r in range(n)) for s in range(STEPS)]
    ok(all(late), "%d ranks: no allreduce transfers before the last rank called it" % n)
    bwd = {r: [e for e in gev[r] if e["kind"] == "gpu_kernel" and "backward" in e["kname"]] for r in range(n)}
    after = [starts[r][s]["t_ns"] >= bwd[r][s]["t_ns"] + bwd[r][s]["dur_ns"] for r in range(n) for s in range(STEPS)]
    ok(all(after), "%d ranks: each allreduce starts after the backward kernel its stream waits for" % n)
    want = model(n, 2 * (n - 1) / n, GRAD)
    durs = sorted({end(starts[r][s]) - last[s] for r in range(n) for s in range(STEPS)})
    ok(all(abs(x - want) <= 1000 for x in durs),
       "%d ranks: each allreduce ends the bus model's 10 us + 2(n-1)/n x 32 MiB at 100 GB/s = %.1f us after the last "
       "rank's kernel started: %s" % (n, want / 1e3, [x / 1e3 for x in durs]))
    g = of(recs, "gpu")
    ok(len(g) == n and all(x["state"] == "on" and x["dropped"] == 0 and x["lead_ns"] == 0 for x in g),
       "%d ranks: GPU capture on in every rank, nothing dropped, no device work before its launch" % n)


def check_split(n):
    """ncclCommSplit into the even and the odd ranks: each half names its communicator alike, the
    two halves differently, and numbers its collectives from 0"""
    ps, res, truth, recs, out = run(n, split=True)
    if not ok(all(p.returncode == 0 for p in ps), "%d ranks split in two run: %s" % (n, [e[-200:] for o, e in res])):
        return
    rank_of = {p["pid"]: int(p["cmdline"][1]) for p in of(recs, "process")}
    inits = sorted((rank_of[e["pid"]], e["comm"], e["comm_rank"], e["nranks"]) for e in events(recs, "nccl_init"))
    world = {c for r, c, cr, nr in inits if nr == n}
    halves = {r % 2: c for r, c, cr, nr in inits if nr == n // 2}
    subs = [(r, c, cr, nr) for r, c, cr, nr in inits if nr == n // 2]
    ok(len(inits) == 2 * n and len(world) == 1 and len(subs) == n and len(set(halves.values())) == 2
       and all(c == halves[r % 2] and cr == r // 2 for r, c, cr, nr in subs) and not world & set(halves.values()),
       "%d ranks: ncclCommSplit recorded; each half names its communicator alike, rank r as r/2 of %d, the halves "
       "and the world differently: %s" % (n, n // 2, subs))
    sub_ar = {}
    for e in events(recs, "nccl_coll"):
        if e["op"] == "allreduce" and e["comm"] in halves.values():
            sub_ar.setdefault(rank_of[e["pid"]], []).append((e["seq"], e["bytes"]))
    ok(sorted(sub_ar) == list(range(n)) and all(v == [(s, RING) for s in range(STEPS)] for v in sub_ar.values()),
       "%d ranks: the allreduces on each half numbered 0..%d on it, 1 MiB each" % (n, STEPS - 1))


def report(out):
    p = subprocess.run([DDPSPY, "report", "--json", out], capture_output=True, text=True, timeout=120)
    return json.loads(p.stdout) if p.stdout.startswith("{") else {}


def check_nonblocking():
    """A nonblocking communicator (ncclConfig_t.blocking = 0), as NCCL 2.28 on an H200: its creation
    and calls say ncclInProgress, its kernels are launched by a thread of NCCL's own after the call
    returned, without the caller's external id. Recorded as nonblocking; its kernels joined to its
    calls by the communicator's own order, and so to the other rank's"""
    ps, res, truth, recs, out = run(2, extra={"NCCL_APP_NONBLOCKING": "1"}, name="nonblocking")
    if not ok(all(p.returncode == 0 for p in ps), "nonblocking: 2 ranks run: %s" % [e[-200:] for o, e in res]):
        return
    inits = events(recs, "nccl_init")
    ok(len(inits) == 2 and all(e["blocking"] == 0 and e["ret"] == 7 for e in inits),
       "nonblocking: the communicator recorded as nonblocking, made in progress (7): %s"
       % [(e["blocking"], e["ret"]) for e in inits])
    low = {(t["pid"], int(t["pthread"], 16) & 0xffffffff): t["tid"] for t in of(recs, "thread") if t.get("pthread")}
    callers = {(e["pid"], e["tid"]) for e in events(recs, "nccl_coll")}
    api = {(e["pid"], e["corr"]): e for e in of(recs, "gpu_event") if e["kind"] == "cuda_api"}
    kern = [e for e in of(recs, "gpu_event") if e["kind"] == "gpu_kernel" and "ncclDevKernel_" in e["kname"]]
    launchers = {(k["pid"], low.get((k["pid"], api.get((k["pid"], k["corr"]), {}).get("thread")))) for k in kern}
    xc = {(e["pid"], e["corr"]) for e in of(recs, "gpu_event") if e["kind"] == "gpu_extcorr"}
    ok(len(kern) == 4 * STEPS and not launchers & callers and None not in {t for p, t in launchers}
       and not any((k["pid"], k["corr"]) in xc for k in kern),
       "nonblocking: its %d kernels launched by threads not the callers' (%s), none with an external id"
       % (len(kern), sorted(launchers)))
    j = report(out)
    joins = [r["gpu"]["nccl_join"] for r in j.get("ranks", [])]
    ok(joins == [{"external_id": 0, "communicator_order": 2 * STEPS, "order_only": 0, "graph_replay": 0}] * 2
       and j["job"]["clock"]["method"] == "nccl-kernel-end",
       "nonblocking: the report joins every NCCL kernel by its communicator's order (%s), and the ranks' clocks "
       "by their ends (%s)" % (joins, j.get("job", {}).get("clock")))
    blocking = report(os.path.join(d, "r2"))
    bj = [r["gpu"]["nccl_join"] for r in blocking.get("ranks", [])]
    ok(bj == [{"external_id": 2 * STEPS, "communicator_order": 0, "order_only": 0, "graph_replay": 0}] * 2,
       "blocking: every NCCL kernel joined by its external id: %s" % bj)
    # two nonblocking communicators launching on one stream: no order pairs them with their calls
    ps, res, truth, recs, out = run(4, split=True, extra={"NCCL_APP_NONBLOCKING": "1"}, name="nonblocking-split")
    if not ok(all(p.returncode == 0 for p in ps), "nonblocking, split: 4 ranks run: %s" % [e[-200:] for o, e in res]):
        return
    j = report(out)
    joins = [r["gpu"]["nccl_join"] for r in j.get("ranks", [])]
    ok(joins == [{"external_id": 0, "communicator_order": 0, "order_only": 3 * STEPS, "graph_replay": 0}] * 4
       and j["job"]["clock"]["method"] != "nccl-kernel-end",
       "two nonblocking communicators on one stream: their kernels joined by order alone (%s), and then never "
       "matched across ranks (clock: %s)" % (joins, j.get("job", {}).get("clock")))
    # on streams of their own, 2 launches a step on one and 1 on the other: each stream's count pairs
    # it with one communicator, whose calls its kernels are in order
    ps, res, truth, recs, out = run(4, split=True, extra={"NCCL_APP_NONBLOCKING": "1", "NCCL_APP_SPLIT_STREAM": "1"},
                                    name="nonblocking-split-streams")
    if not ok(all(p.returncode == 0 for p in ps), "nonblocking, split, two streams: 4 ranks run: %s"
              % [e[-200:] for o, e in res]):
        return
    j = report(out)
    joins = [r["gpu"]["nccl_join"] for r in j.get("ranks", [])]
    ok(joins == [{"external_id": 0, "communicator_order": 3 * STEPS, "order_only": 0, "graph_replay": 0}] * 4,
       "two nonblocking communicators on streams of their own: every kernel joined by its communicator's order, "
       "the stream paired with it by count (%s)" % joins)


def check_world1():
    """World size 1, as NCCL 2.28 on an H200: an in-place allreduce launches nothing; an
    out-of-place one is one device-to-device copy of its bytes, under the call's external id"""
    for name, extra in (("inplace", {}), ("outofplace", {"NCCL_APP_OOP": "1"})):
        ps, res, truth, recs, out = run(1, extra=extra, name="ws1-" + name)
        if not ok(all(p.returncode == 0 for p in ps), "world size 1, %s: runs: %s" % (name, [e[-200:] for o, e in res])):
            continue
        gev = of(recs, "gpu_event")
        ar = [k for k in gev if k["kind"] == "gpu_kernel" and "AllReduce" in k["kname"]]
        ext = {e["corr"]: e["ext_id"] for e in gev if e["kind"] == "gpu_extcorr"}
        calls = [e["ext"] for e in events(recs, "nccl_coll") if e["op"] == "allreduce"]
        copies = [(m["copy"], m["bytes"], ext.get(m["corr"])) for m in gev if m["kind"] == "gpu_memcpy"]
        want = [] if name == "inplace" else [("dtod", GRAD, x) for x in calls]
        ok(not ar and copies == want, "world size 1, %s: no allreduce kernel (%d), copies %s" % (name, len(ar), copies))


def check_made():
    """ncclCommInitRankScalable and ncclCommShrink: recorded with a communicator id equal on its ranks"""
    ps, res, truth, recs, out = run(3, extra={"NCCL_APP_SCALABLE": "1", "NCCL_APP_SHRINK": "1"}, name="scalable-shrink")
    if not ok(all(p.returncode == 0 for p in ps), "scalable, shrink: 3 ranks run: %s" % [e[-200:] for o, e in res]):
        return
    inits = sorted((e["nranks"], e["comm_rank"], e["comm"], e["blocking"]) for e in events(recs, "nccl_init"))
    first = [x for x in inits if x[0] == 3]
    shrunk = [x for x in inits if x[0] == 2]
    ok(len(first) == 3 and len({x[2] for x in first}) == 1 and len(shrunk) == 2 and len({x[2] for x in shrunk}) == 1
       and shrunk[0][2] != first[0][2] and [x[1] for x in shrunk] == [0, 1] and all(x[3] == 1 for x in inits),
       "ncclCommInitRankScalable (3 ranks) and ncclCommShrink (2 left) recorded, each one id on its ranks: %s" % inits)
    ar = [e for e in events(recs, "nccl_coll") if e["op"] == "allreduce" and e["comm"] == (shrunk or [(0, 0, 0)])[0][2]]
    ok(len(ar) == 2 and all(e["seq"] == 0 for e in ar), "the shrunk communicator's allreduce, numbered 0 on it: %d" % len(ar))


def check_profiler_plugin():
    """The stand-in libnccl.so.2 loads a profiler plugin as NCCL 2.28.9 does (testapps/simgpu/nccl_prof.c),
    told here to the test plugin (libnccl-profiler-test.so): without ddpspy, the simulated device's own
    behaviour. NCCL_PROFILER_PLUGIN=test (libnccl-profiler-test.so on the library path) and a path
    give one init per rank, each allreduce's Coll event numbered per function and the same on both
    ranks, a KernelCh event per channel (SIMGPU_NCCL_CHANNELS, 2 by default) whose first start and
    last end are its kernel's on the GPU's clock (the model's duration, the same end on both ranks),
    stopped after its channels' events, and a finalize; "none" loads nothing."""
    plug = os.path.join(APPS, "libnccl-profiler-test.so")
    got = {}
    for how, value in (("name", "test"), ("path", plug), ("none", "none")):
        out = os.path.join(d, "prof-" + how)
        shutil.rmtree(out, ignore_errors=True)
        os.makedirs(out)
        env = dict(os.environ, LD_LIBRARY_PATH=SIMDIR + ":" + APPS, SIMGPU_KERNELS="forward=2000,backward=3000",
                   NCCL_PROFILER_PLUGIN=value, NCCLPROF_OUT=os.path.join(out, "events"))
        idfile = os.path.join(out, "id")
        ps = [subprocess.Popen([APP, str(r), "2", idfile, str(STEPS)], env=dict(env, RANK=str(r)), stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True) for r in range(2)]
        res = [p.communicate(timeout=120) for p in ps]
        files = sorted(f for f in os.listdir(out) if f.startswith("events."))
        lines = [[l.split() for l in open(os.path.join(out, f))] for f in files]
        got[how] = (all(p.returncode == 0 for p in ps), lines, [e[-200:] for o, e in res])
    ran, lines, errs = got["name"]
    by = [{k: [l[1:] for l in f if l[0] == k] for k in ("init", "coll", "kernel", "stop", "finalize")} for f in lines]
    dur = model(2, 1.0, GRAD)  # allreduce over 2 ranks: 2(n-1)/n = 1 of its bytes
    ok(ran and len(by) == 2 and all(len(b["init"]) == 1 and len(b["finalize"]) == 1 for b in by) and
       len({b["init"][0][0] for b in by}) == 1 and sorted(b["init"][0][2] for b in by) == ["0", "1"],
       "profiler plugin by name: loaded in both ranks, one init each for one communicator (its hash the same), "
       "a finalize: %s %s" % ([b["init"] for b in by], errs))
    colls = [[(c[1], c[2], c[3], c[4]) for c in b["coll"] if c[2] == "AllReduce"] for b in by]
    want = [(str(i), "AllReduce", str(GRAD // 4), "ncclFloat32") for i in range(STEPS)]
    ok(len(colls) == 2 and colls[0] == colls[1] == want,
       "each allreduce's Coll event: sequence numbers 0..%d of its function, count and datatype as NCCL names them: %s"
       % (STEPS - 1, colls[:1]))
    ks = [{} for b in by]  # each collective's channels merged: the first start, the last end
    for k, b in zip(ks, by):
        for e in b["kernel"]:
            s0, e0 = k.get(e[1], (1 << 63, 0))
            k[e[1]] = (min(s0, int(e[2])), max(e0, int(e[3])))
    chans = [sorted({(e[1], e[4]) for e in b["kernel"]}) for b in by]
    ok(len(by) == 2 and all(c == [(str(q), str(ch)) for q in range(STEPS) for ch in range(2)] for c in chans) and
       all(len(b["kernel"]) == 2 * STEPS for b in by),
       "each allreduce's kernel as one KernelCh event per channel, channels 0 and 1: %s" % [c[:4] for c in chans])
    lens = [e - s for k in ks for (s, e) in k.values()]
    ends = [ks[0][q][1] - ks[1][q][1] for q in ks[0] if q in ks[1]] if len(ks) == 2 else []
    # (a kernel starts when its stream reaches it and waits in it for the other rank: the model's
    # time is from the later rank's start to the common end)
    last = [max(ks[0][q][0], ks[1][q][0]) for q in ks[0] if q in ks[1]] if len(ks) == 2 else []
    ok(len(ks) == 2 and all(len(k) == STEPS for k in ks) and all(x >= dur - 1000 for x in lens) and
       ends and all(abs(x) <= 1000 for x in ends) and
       all(abs(ks[0][q][1] - t - dur) <= 1000 for q, t in zip(sorted(ks[0]), last)),
       "each allreduce's KernelCh event: its kernel's start and end on the GPU's clock, ending together on both ranks "
       "(%s ns apart) the model's %.1f us after the later rank's start (kernels %s us)"
       % (ends, dur / 1e3, sorted({round(x / 1e3, 1) for x in lens})))
    order = [[l[0] for l in f if l[0] in ("kernel", "stop")] for f in lines]
    ok(all(o == ["kernel", "kernel", "stop"] * STEPS for o in order) and all(len(b["stop"]) == STEPS for b in by),
       "each Coll event stopped after its channels' events: %s" % [o[:6] for o in order])
    ran, lines, errs = got["path"]
    ok(ran and len(lines) == 2 and all(sum(1 for l in f if l[0] == "kernel") == 2 * STEPS for f in lines),
       "profiler plugin by path: the same events (%s)" % [len(f) for f in lines])
    ran, lines, errs = got["none"]
    ok(ran and not lines, "NCCL_PROFILER_PLUGIN=none: no plugin loaded (%d files)" % len(lines))


def check_plugin_capture():
    """ddpspy as NCCL's profiler plugin (preload/ncclprof.c): each allreduce's kernel as NCCL tells it
    (one event per channel), joined to its call by communicator, operation and sequence number;
    checked against CUPTI's record of the same kernel (the same duration, one offset between the two
    clocks), and the report's check of one against the other; where another tool holds CUPTI, the
    report's NCCL kernel times are the plugin's, on the host's clock within the bounds it reports; a
    nonblocking communicator (made on a thread of NCCL's own: the plugin cannot name it) and NCCL
    reached through a dlopen handle (no call recorded) still joined across ranks; a group's
    collectives the group's one kernel, as CUPTI sees it; none with
    DDPSPY_NCCL_PLUGIN=0 or the program's own choice of plugin."""
    def kernels(recs):
        """each rank's collectives from the plugin's events, channels merged: (first start, last end)"""
        procs = {p["pid"]: int(p["cmdline"][1]) for p in of(recs, "process")}
        ks = {}
        for e in events(recs, "nccl_kernel"):
            r = procs.get(e["pid"])
            k = ks.setdefault(r, {}).setdefault(e["seq"], dict(e, channels=0))
            k["gpu_start"], k["gpu_end"] = min(k["gpu_start"], e["gpu_start"]), max(k["gpu_end"], e["gpu_end"])
            k["t_ns"] = max(k["t_ns"], e["t_ns"])  # (when NCCL told of its last channel)
            k["channels"] += 1
        ks = {r: [v[q] for q in sorted(v)] for r, v in ks.items()}
        cu = {r: [e for e in of(recs, "gpu_event") if e["kind"] == "gpu_kernel" and procs.get(e["pid"]) == r
                  and "AllReduce" in e.get("kname", "")] for r in set(procs.values())}
        inits = {procs.get(e["pid"]): e["comm"] for e in events(recs, "nccl_init")}
        return ks, cu, inits
    ps, res, truth, recs, out = run(2, name="plugin")
    ks, cu, inits = kernels(recs)
    ok(all(p.returncode == 0 for p in ps) and len(ks) == 2 and
       all([(k["op"], k["seq"], k["comm"], k["comm_rank"], k["channels"]) for k in ks[r]] ==
           [("allreduce", i, inits[r], r, 2) for i in range(STEPS)] for r in ks),
       "NCCL's plugin events in ddpspy's files: each allreduce's kernel on its 2 channels, with nccl_init's "
       "communicator id and its sequence number: %s" % {r: [(k["op"], k["seq"], k["channels"]) for k in ks[r]] for r in ks})
    offs = [k["gpu_start"] - c["t_ns"] for r in ks for k, c in zip(ks[r], cu.get(r, []))]
    durs = [(k["gpu_end"] - k["gpu_start"]) - c["dur_ns"] for r in ks for k, c in zip(ks[r], cu.get(r, []))]
    ok(len(offs) == 2 * STEPS and max(offs) - min(offs) <= 2000 and all(abs(x) <= 1000 for x in durs),
       "checked against CUPTI's records of the same kernels: the same durations (within %s ns), one offset between "
       "the GPU's %%globaltimer and the trace's clock (spread %s ns)" % (max(map(abs, durs or [0])),
                                                                      max(offs or [0]) - min(offs or [0])))
    # the report's own check: the plugin's kernels, put on the host's clock by their bounds alone,
    # against CUPTI's (which time the report's figures): every allreduce in both, the same
    # durations, starts apart by no more than the bounds' width
    j = report(out)
    cov = j.get("coverage", [])
    chk = [c.get("nccl_check", {}) for c in cov]
    plug = [c.get("nccl_plugin", {}) for c in cov]
    ok(len(cov) == 2 and all(c["gpu"] == "cupti" and c["nccl_timing"] == "cupti" for c in cov) and
       all(x.get("matched") == STEPS and x["cupti_only"] == 0 and x["plugin_only"] == 0 and
           x["duration_us_max"] <= 1.0 and x["start_us_p50"] <= p["clock_bound_us"] + 1 for x, p in zip(chk, plug)) and
       all(p.get("collectives") == STEPS and p["unjoined"] == 0 and p["clock_conflicts"] == 0 for p in plug) and
       [r.get("nccl", {}).get("source") for r in j["ranks"]] == ["cupti"] * 2,
       "the report checks the plugin's kernels against CUPTI's: every allreduce in both, durations within 1 us, "
       "starts within the clock's bounds; NCCL's figures from CUPTI: %s %s" % (chk, plug))
    ps, res, truth, recs, out = run(2, name="plugin-taken", extra={"SIMGPU_CUPTI_TAKEN": "Nsight Systems"})
    ks, cu, inits = kernels(recs)
    dur = model(2, 1.0, GRAD)
    ok(all(p.returncode == 0 for p in ps) and not any(cu.values()) and
       all(len(ks[r]) == STEPS and all(k["gpu_end"] - k["gpu_start"] >= dur - 1000 for k in ks[r]) for r in ks),
       "CUPTI held by another tool: no CUPTI kernels, NCCL's kernels still timed on the GPU through its plugin "
       "(%s per rank, each at least the model's %.1f us)" % ([len(v) for v in ks.values()], dur / 1e3))
    taken(out, ks, "CUPTI held by another tool")
    # the view: the plugin's kernels on a track of their own per rank, named by their operation
    view = os.path.join(out, "view.json")
    subprocess.run([DDPSPY, "view", out, "-o", view], capture_output=True, timeout=120)
    vj = json.load(open(view)) if os.path.exists(view) else {}
    ev = vj.get("traceEvents", []) if isinstance(vj, dict) else vj
    tracks = [e["args"]["name"] for e in ev if e.get("name") == "thread_name" and "profiler plugin" in e["args"]["name"]]
    ks_v = [e for e in ev if e.get("cat") == "gpu" and e.get("args", {}).get("source") == "nccl-plugin"]
    ok(len(tracks) == 2 and ks_v and all(e["name"] == "NCCL allreduce" for e in ks_v),
       "the view: the plugin's NCCL kernels on a track of their own on each rank (%s), %d kernels named by their "
       "operation" % (tracks, len(ks_v)))
    txt = subprocess.run([DDPSPY, "report", out], capture_output=True, text=True, timeout=120).stdout
    ok("coverage: ranks 0-1 NCCL kernel times from NCCL's profiler plugin, no CUPTI (Nsight Systems" in txt and
       "rank 1: NCCL kernels (NCCL's profiler plugin; no device timeline): 1.0 per step" in txt,
       "the text report says where NCCL's times came from: %s" % [l for l in txt.splitlines() if "plugin" in l][:3])
    # a nonblocking communicator: the plugin's context made on NCCL's own thread, unnamed (comm -1);
    # its kernels joined to the calls by the communicator the others leave, with CUPTI and without
    ps, res, truth, recs, out = run(2, name="plugin-nonblocking", extra={"NCCL_APP_NONBLOCKING": "1"})
    ks, cu, inits = kernels(recs)
    j = report(out)
    chk = [c.get("nccl_check", {}) for c in j.get("coverage", [])]
    ok(all(p.returncode == 0 for p in ps) and len(ks) == 2 and all(k["comm"] == -1 for r in ks for k in ks[r]) and
       len(chk) == 2 and all(x.get("matched") == STEPS and x["plugin_only"] == 0 and x["duration_us_max"] <= 1.0
                             for x in chk),
       "nonblocking: the plugin's events name no communicator (%s); the report joins them to the calls, the same "
       "collectives as CUPTI's kernels joined by the communicator's order: %s"
       % (sorted({k["comm"] for r in ks for k in ks[r]}), chk))
    ps, res, truth, recs, out = run(2, name="plugin-nonblocking-taken",
                                    extra={"NCCL_APP_NONBLOCKING": "1", "SIMGPU_CUPTI_TAKEN": "Nsight Systems"})
    ks, cu, inits = kernels(recs)
    taken(out, ks, "nonblocking, CUPTI held by another tool", joined=True)
    # NCCL through a dlopen handle: no call recorded, the plugin its only account (and the hash of
    # its communicator what names each collective on both ranks)
    ps, res, truth, recs, out = run(2, name="plugin-dlopen", extra={"NCCL_APP_DLOPEN": "1",
                                                                    "SIMGPU_CUPTI_TAKEN": "Nsight Systems"})
    ks, cu, inits = kernels(recs)
    ok(all(p.returncode == 0 for p in ps) and not events(recs, "nccl_init") and
       not [e for e in events(recs, "nccl_coll") if e["op"] == "allreduce"] and all(len(ks[r]) == STEPS for r in ks),
       "NCCL through a dlopen handle: no communicator or allreduce call recorded, every allreduce's kernel from "
       "the plugin (%s)" % [len(v) for v in ks.values()])
    taken(out, ks, "NCCL through a dlopen handle", joined=False)
    # two allreduces in the ring exchange's group: NCCL tells of each, the group launches one kernel,
    # as CUPTI records it: the two are that kernel (joined to the group's end), with CUPTI and without
    ps, res, truth, recs, out = run(2, name="plugin-grouped", extra={"NCCL_APP_GROUPED": "1"})
    j = report(out)
    cov = j.get("coverage", [])
    ok(all(p.returncode == 0 for p in ps) and len(cov) == 2 and
       all(c["nccl_plugin"]["collectives"] == 3 * STEPS and c["nccl_plugin"]["unjoined"] == 0 and
           c["nccl_check"]["matched"] == 2 * STEPS and c["nccl_check"]["plugin_only"] == 0 and
           c["nccl_check"]["cupti_only"] == 0 and c["nccl_check"]["duration_us_max"] <= 1 for c in cov),
       "grouped allreduces: the plugin's 3 collectives a step are CUPTI's 2 kernels (the group's one): %s"
       % [(c.get("nccl_plugin"), c.get("nccl_check")) for c in cov])
    ps, res, truth, recs, out = run(2, name="plugin-grouped-taken", extra={"NCCL_APP_GROUPED": "1",
                                                                           "SIMGPU_CUPTI_TAKEN": "Nsight Systems"})
    j, jc = report(out), j
    nc = [r.get("nccl") or {} for r in j.get("ranks", [])]
    want = [r.get("nccl") or {} for r in jc.get("ranks", [])]
    ok(len(nc) == 2 and all(x.get("source") == "nccl-plugin" and x["kernels_per_step"] == 2 for x in nc) and
       [x["bytes_per_step"] for x in nc] == [x.get("bytes_per_step") for x in want],
       "grouped allreduces, CUPTI held by another tool: 2 NCCL kernels a step from the plugin, with the bytes CUPTI's "
       "run joined to them: %s against %s" % (nc, want))
    # no CUPTI at all (DDPSPY_GPU=0): the plugin still times NCCL
    ps, res, truth, recs, out = run(2, name="plugin-gpu-off", extra={"DDPSPY_GPU": "0"})
    ks, cu, inits = kernels(recs)
    taken(out, ks, "DDPSPY_GPU=0", why="no GPU capture recorded")
    for name, extra in (("plugin-off", {"DDPSPY_NCCL_PLUGIN": "0"}), ("plugin-program", {"NCCL_PROFILER_PLUGIN": "none"})):
        ps, res, truth, recs, out = run(2, name=name, extra=extra)
        ok(all(p.returncode == 0 for p in ps) and not events(recs, "nccl_kernel") and events(recs, "nccl_coll"),
           "%s: no plugin events, the NCCL calls recorded as before" % name)


def check_plugin_graph():
    """A collective captured into a CUDA graph (NCCL_APP_GRAPH: the step's allreduce captured once,
    the graph launched each step, beside the ring exchange's group of two allreduces). The stand-in
    alone (the test plugin), as NCCL 2.28.9 does (src/enqueue.cc, src/plugin/profiler.cc): each
    collective call's CollApi event, graphCaptured on the captured one; no Coll event at the capture;
    one at each of the graph's launches, its parent the captured call's CollApi event, numbered in
    the communicator's sequence when the plugin asked for KernelCh, and repeating the next number when
    it did not; its kernel's channel events. Then ddpspy as the plugin: each replay names its
    captured call, and the report joins every collective (the old join by order lost 5 of 18 and
    crossed every clock bound), counts the replays, gives CUPTI's graph kernels their collective (the
    same bytes as a run without the graph), and without CUPTI has the same NCCL figures."""
    extra = {"NCCL_APP_GRAPH": "1", "NCCL_APP_GROUPED": "1"}
    plug = os.path.join(APPS, "libnccl-profiler-test.so")
    got = {}
    for how, mask in (("kernelch", None), ("coll-only", "2")):
        out = os.path.join(d, "prof-graph-" + how)
        shutil.rmtree(out, ignore_errors=True)
        os.makedirs(out)
        env = dict(os.environ, LD_LIBRARY_PATH=SIMDIR + ":" + APPS, SIMGPU_KERNELS="forward=2000,backward=3000",
                   NCCL_PROFILER_PLUGIN=plug, NCCLPROF_OUT=os.path.join(out, "events"), **extra)
        if mask:
            env["NCCLPROF_MASK"] = mask
        idfile = os.path.join(out, "id")
        ps = [subprocess.Popen([APP, str(r), "2", idfile, str(STEPS)], env=dict(env, RANK=str(r)), stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True) for r in range(2)]
        res = [p.communicate(timeout=120) for p in ps]
        files = sorted(f for f in os.listdir(out) if f.startswith("events."))
        got[how] = (all(p.returncode == 0 for p in ps), [[l.split() for l in open(os.path.join(out, f))] for f in files],
                    [e[-200:] for o, e in res])
    ran, lines, errs = got["kernelch"]
    grad = str(GRAD // 4)
    apis = [[l[2:] for l in f if l[0] == "api"] for f in lines]
    ok(ran and len(apis) == 2 and all([a[1:] for a in x] == [["AllReduce", grad, "1"]] +
                                      [["AllReduce", str(RING // 8), "0"]] * (2 * STEPS) for x in apis),
       "graph, the stand-in: each allreduce call's CollApi event, the captured one graphCaptured, the grouped ones "
       "not: %s %s" % ([x[:3] for x in apis], errs))
    colls = [[l[2:] for l in f if l[0] == "coll" and l[3] == "AllReduce"] for f in lines]
    cap = [x[0][0] if x else None for x in apis]
    reps = [[int(c[0]) for c in x if c[4] == k] for x, k in zip(colls, cap)]
    eager = [sorted(int(c[0]) for c in x if c[4] != k) for x, k in zip(colls, cap)]
    ok(len(colls) == 2 and all(len(r) == STEPS for r in reps) and
       all(sorted(r + e) == list(range(3 * STEPS)) for r, e in zip(reps, eager)) and
       all(c[2] == grad for x, k in zip(colls, cap) for c in x if c[4] == k),
       "graph, the stand-in: no Coll event at the capture, one at each of the %d launches, under the captured call's "
       "CollApi event, numbered in the communicator's allreduces with the grouped ones (replays %s)" % (STEPS, reps))
    kern = [[l for l in f if l[0] == "kernel"] for f in lines]
    ok(all(sum(1 for k in x if int(k[2]) in set(r)) == 2 * STEPS for x, r in zip(kern, reps)),
       "graph, the stand-in: each launch's kernel as its 2 channels' events")
    ran, lines, errs = got["coll-only"]
    colls = [[l[2:] for l in f if l[0] == "coll" and l[3] == "AllReduce"] for f in lines]
    apis = [[l[2:] for l in f if l[0] == "api"] for f in lines]
    cap = [x[0][0] if x else None for x in apis]
    reps = [[int(c[0]) for c in x if c[4] == k] for x, k in zip(colls, cap)]
    eager = [sorted(int(c[0]) for c in x if c[4] != k) for x, k in zip(colls, cap)]
    ok(ran and len(colls) == 2 and all(e == list(range(2 * STEPS)) and len(r) == STEPS and
                                       all(0 <= q <= 2 * STEPS for q in r) for r, e in zip(reps, eager)),
       "graph, the stand-in, KernelCh not asked for: the launches are not counted (each repeats the next number, "
       "as NCCL leaves graph-captured collectives out of its count for RAS): eager %s, replays %s"
       % (eager[:1], reps[:1]))

    # ddpspy as the plugin
    ps, res, truth, recs, out = run(2, name="plugin-graph", extra=extra)
    procs = {p["pid"]: int(p["cmdline"][1]) for p in of(recs, "process")}
    ev = [e for e in events(recs, "nccl_kernel") if e["channel"] == 0]
    capd = {r: [e for e in events(recs, "nccl_coll") if procs.get(e["pid"]) == r and e["op"] == "allreduce"] for r in (0, 1)}
    first = {r: capd[r][0]["seq"] if capd[r] else None for r in capd}
    rep = {r: [e for e in ev if procs.get(e["pid"]) == r and e["replay"] == 1] for r in (0, 1)}
    own = {r: [e for e in ev if procs.get(e["pid"]) == r and e["replay"] == 0] for r in (0, 1)}
    ok(all(p.returncode == 0 for p in ps) and
       all(len(rep[r]) == STEPS and all(e["call"] == first[r] and e["call_comm"] == capd[r][0]["comm"] for e in rep[r])
           for r in (0, 1)) and
       all(sorted(e["call"] for e in own[r]) == sorted(c["seq"] for c in capd[r][1:]) for r in (0, 1)),
       "graph, ddpspy's plugin events: each launch's kernel names the captured call (seq %s), every other its own "
       "call: %s" % (first, {r: [(e["seq"], e["call"], e["replay"]) for e in ev if procs.get(e["pid"]) == r][:6]
                             for r in (0, 1)}))
    j = report(out)
    ps, res, truth, recs, plain = run(2, name="plugin-graph-plain", extra={"NCCL_APP_GROUPED": "1"})
    jp = report(plain)
    cov, bj = j.get("coverage", []), [r.get("gpu", {}).get("nccl_join") for r in j.get("ranks", [])]
    want = [r.get("nccl", {}).get("bytes_per_step") for r in jp.get("ranks", [])]
    nc = [r.get("nccl") or {} for r in j.get("ranks", [])]
    ok(len(cov) == 2 and
       all(c["nccl_plugin"]["collectives"] == 3 * STEPS and c["nccl_plugin"]["unjoined"] == 0 and
           c["nccl_plugin"]["graph_replays"] == STEPS and c["nccl_plugin"]["clock_conflicts"] == 0 and
           c["nccl_check"]["matched"] == 2 * STEPS and c["nccl_check"]["plugin_only"] == 0 and
           c["nccl_check"]["cupti_only"] == 0 and c["nccl_check"]["duration_us_max"] <= 1 for c in cov) and
       bj == [{"external_id": STEPS, "communicator_order": 0, "order_only": 0, "graph_replay": STEPS}] * 2 and
       [x.get("bytes_per_step") for x in nc] == want and all(x.get("kernels_per_step") == 2 for x in nc),
       "graph, the report: every collective joined, %d replays, CUPTI's graph kernels the replays (joins %s), the "
       "two checked against each other, the bytes of a run without the graph (%s against %s): %s"
       % (STEPS, bj, [x.get("bytes_per_step") for x in nc], want,
          [(c.get("nccl_plugin"), c.get("nccl_check")) for c in cov]))
    ps, res, truth, recs, out = run(2, name="plugin-graph-taken", extra=dict(extra, SIMGPU_CUPTI_TAKEN="Nsight Systems"))
    jt = report(out)
    cov = jt.get("coverage", [])
    nt = [r.get("nccl") or {} for r in jt.get("ranks", [])]
    ok(len(cov) == 2 and all(c["nccl_timing"] == "nccl-plugin" and c["nccl_plugin"]["unjoined"] == 0 and
                             c["nccl_plugin"]["graph_replays"] == STEPS and c["nccl_plugin"]["clock_conflicts"] == 0
                             for c in cov) and
       all(x.get("source") == "nccl-plugin" and x.get("kernels_per_step") == 2 for x in nt) and
       [x.get("bytes_per_step") for x in nt] == want,
       "graph, CUPTI held by another tool: 2 NCCL kernels a step from the plugin, the replays joined to their "
       "captured call, the bytes of a run without the graph: %s against %s" % (nt, want))
    # the ring exchange's group captured too (NCCL_APP_GRAPH=2): its two allreduces' launches are the
    # group's one kernel at each launch, as CUPTI sees it
    ps, res, truth, recs, out = run(2, name="plugin-graph-group", extra=dict(extra, NCCL_APP_GRAPH="2"))
    jg = report(out)
    cov, bj = jg.get("coverage", []), [r.get("gpu", {}).get("nccl_join") for r in jg.get("ranks", [])]
    ok(len(cov) == 2 and all(c["nccl_plugin"]["collectives"] == 3 * STEPS and c["nccl_plugin"]["unjoined"] == 0 and
                             c["nccl_plugin"]["graph_replays"] == 3 * STEPS and c["nccl_check"]["matched"] == 2 * STEPS
                             and c["nccl_check"]["plugin_only"] == 0 and c["nccl_check"]["cupti_only"] == 0 for c in cov)
       and bj == [{"external_id": 0, "communicator_order": 0, "order_only": 0, "graph_replay": 2 * STEPS}] * 2,
       "graph with the group captured too: every launch's 3 collectives joined, the group's two one kernel, CUPTI's "
       "2 graph kernels a launch named by them: %s %s" % ([(c.get("nccl_plugin"), c.get("nccl_check")) for c in cov], bj))
    # a nonblocking communicator's captured allreduce: NCCL's own thread launches it into the
    # capture (src/group.cc), as it launches the eager groups. The captured call is no launching
    # call of the communicator's order (it launches nothing itself), and CUPTI's graph kernels,
    # told by their graph launch, are the replays (before: 8 of 8 by order alone, no bytes, 0
    # checked against the plugin)
    ps, res, truth, recs, out = run(2, name="plugin-graph-nonblocking", extra=dict(extra, NCCL_APP_NONBLOCKING="1"))
    jn = report(out)
    cov, bj = jn.get("coverage", []), [r.get("gpu", {}).get("nccl_join") for r in jn.get("ranks", [])]
    nn = [r.get("nccl") or {} for r in jn.get("ranks", [])]
    ok(all(p.returncode == 0 for p in ps) and len(cov) == 2 and
       all(c["nccl_plugin"]["collectives"] == 3 * STEPS and c["nccl_plugin"]["unjoined"] == 0 and
           c["nccl_plugin"]["graph_replays"] == STEPS and c["nccl_check"]["matched"] == 2 * STEPS and
           c["nccl_check"]["plugin_only"] == 0 and c["nccl_check"]["cupti_only"] == 0 for c in cov) and
       bj == [{"external_id": 0, "communicator_order": STEPS, "order_only": 0, "graph_replay": STEPS}] * 2 and
       [x.get("bytes_per_step") for x in nn] == want,
       "graph on a nonblocking communicator: the eager groups' kernels joined by the communicator's order, the "
       "captured call not among them, the graph kernels the replays, the bytes of a run without the graph (%s "
       "against %s): %s %s" % ([x.get("bytes_per_step") for x in nn], want, bj,
                               [(c.get("nccl_plugin"), c.get("nccl_check")) for c in cov]))
    # without the plugin nothing says which call was captured: the communicator's calls outnumber its
    # eager kernels, and none is joined by a count that does not pair
    ps, res, truth, recs, out = run(2, name="graph-nonblocking-noplugin",
                                    extra=dict(extra, NCCL_APP_NONBLOCKING="1", DDPSPY_NCCL_PLUGIN="0"))
    bj = [r.get("gpu", {}).get("nccl_join") for r in report(out).get("ranks", [])]
    ok(bj == [{"external_id": 0, "communicator_order": 0, "order_only": 2 * STEPS, "graph_replay": 0}] * 2,
       "graph on a nonblocking communicator, no plugin: every kernel joined by order alone, none wrongly: %s" % bj)
    # CUPTI alone (no plugin): a blocking communicator's captured call made its launch call under its
    # external id and ran no kernel of it; at each graph launch one kernel of each such call, in
    # capture order, under the launch's correlation id. The same joins and bytes as the plugin's
    # (before: the graph kernels by order alone, no bytes: 3 MiB a step, not 36.7 MB)
    for name, more, joins in (("graph-noplugin", {}, {"external_id": STEPS, "graph_replay": STEPS}),
                              ("graph-group-noplugin", {"NCCL_APP_GRAPH": "2"}, {"external_id": 0, "graph_replay": 2 * STEPS})):
        ps, res, truth, recs, out = run(2, name=name, extra=dict(extra, DDPSPY_NCCL_PLUGIN="0", **more))
        jc = report(out)
        bj = [r.get("gpu", {}).get("nccl_join") for r in jc.get("ranks", [])]
        nc = [r.get("nccl") or {} for r in jc.get("ranks", [])]
        ok(all(p.returncode == 0 for p in ps) and not events(recs, "nccl_kernel") and
           bj == [dict(joins, communicator_order=0, order_only=0)] * 2 and
           (more or [x.get("bytes_per_step") for x in nc] == want) and all(x.get("kernels_per_step") == 2 for x in nc
                                                                        if not more),
           "%s: CUPTI's graph kernels joined to their captured calls by their place in each graph launch (%s), "
           "the bytes of a run without the graph (%s against %s; with the group captured the steps are windows, "
           "not compared)" % (name, bj, [x.get("bytes_per_step") for x in nc], want))
    # the step's allreduce and its ring exchange (sends and receives alone) captured: CUPTI joins
    # both (the ring's kernel as its message's replay, the instance its peer's kernel has too); the
    # plugin, told of collectives only, checks the allreduce's (before: 8 of 8 by order alone, 0
    # checked)
    ps, res, truth, recs, out = run(2, name="plugin-graph-p2p", extra={"NCCL_APP_GRAPH": "2"})
    jq = report(out)
    cov, bj = jq.get("coverage", []), [r.get("gpu", {}).get("nccl_join") for r in jq.get("ranks", [])]
    ok(all(p.returncode == 0 for p in ps) and len(cov) == 2 and
       all(c["nccl_plugin"]["graph_replays"] == STEPS and c["nccl_plugin"]["unjoined"] == 0 and
           c["nccl_check"]["matched"] == STEPS and c["nccl_check"]["plugin_only"] == 0 for c in cov) and
       bj == [{"external_id": 0, "communicator_order": 0, "order_only": 0, "graph_replay": 2 * STEPS}] * 2,
       "graph with the ring's sends and receives captured: the allreduce's and the SendRecv graph kernels the "
       "replays, the allreduce's checked against the plugin: %s %s"
       % (bj, [(c.get("nccl_plugin"), c.get("nccl_check")) for c in cov]))
    # no NCCL call left in the steps: they are time windows, and stay so on the device (mapped to
    # where the device drained, each window after its step's kernels closed to 0 ms, all of them)
    rk = jg.get("ranks", [])
    ok(jg.get("job", {}).get("step_source") == "windows" and len(rk) == 2 and
       all(r["step_p50_ms"] > 0.5 and r.get("gpu", {}).get("busy_share", 0) > 0.3 for r in rk),
       "graph with the group captured too: steps are time windows, split on the device as they are (the device "
       "runs 5 ms of kernels a 5.5 ms step): %s" % [(r["step_p50_ms"], r.get("gpu", {}).get("busy_share")) for r in rk])


def taken(out, ks, what, joined=True, why="Nsight Systems"):
    """The report of a run whose CUPTI another tool held: coverage nccl-plugin on both ranks, the
    collectives (joined to calls or not) matched across the ranks, and the NCCL figures the
    plugin's: kernel time per step the events' durations, the wait before the later rank's kernel
    started the difference of the two ranks' starts (the clock put on each rank apart)."""
    j = report(out)
    cov = j.get("coverage", [])
    nc = {r["rank"]: r.get("nccl") for r in j.get("ranks", [])}
    plug = [c.get("nccl_plugin", {}) for c in cov]
    ok(len(cov) == 2 and all(c["gpu"] == "nccl-plugin" and c["nccl_timing"] == "nccl-plugin" and
                             c["missing"] == ["kernels", "copies"] and why in c["why"] for c in cov) and
       all(p.get("collectives") == STEPS and p["unjoined"] == (0 if joined else STEPS) for p in plug),
       "%s: each rank's coverage says its NCCL kernel times came from NCCL's profiler plugin, its kernels and "
       "copies missing: %s" % (what, [(c["gpu"], c["missing"], c.get("nccl_plugin")) for c in cov]))
    if not (len(ks) == 2 and all(nc.get(r) for r in (0, 1))):
        ok(False, "%s: NCCL figures on both ranks: %s" % (what, nc))
        return
    # ground truth from the events: each collective's duration, and the later rank's start
    durs = {r: [(k["gpu_end"] - k["gpu_start"]) / 1e6 for k in ks[r]] for r in ks}
    waits = {r: [max(0, (b["gpu_start"] - a["gpu_start"]) / 1e6) for a, b in
                 zip(ks[r], ks[1 - r])] for r in ks}
    # (with its calls the steps are the allreduces', one each; without them time windows, whose
    # rounded counts divide badly: the sum over the job's steps instead)
    steps = j["job"]["steps_analyzed"]
    ok(all(nc[r]["source"] == "nccl-plugin" for r in (0, 1)) and
       (all(nc[r]["kernels_per_step"] == 1 and min(durs[r]) - 0.001 <= nc[r]["ms_per_step"] <= max(durs[r]) + 0.001
            for r in (0, 1)) if joined else
        all(nc[r]["ms_per_step"] * steps <= sum(durs[r]) + 0.001 * steps and
            nc[r]["ms_per_step"] * steps >= (len(durs[r]) - 2) * min(durs[r]) - 0.001 * steps for r in (0, 1))),
       "%s: NCCL kernel time per step from the plugin's kernels' durations (%s ms): %s"
       % (what, {r: (round(min(v), 3), round(max(v), 3)) for r, v in durs.items()}, nc))
    # (both ranks' %globaltimer is the host's wall clock here, so the events' starts compare
    # directly; the report's clock for each rank comes from its own bounds, within their width)
    # Each rank's clock is late by its quickest notice of a kernel's end (when NCCL told the plugin,
    # the trace's CLOCK_MONOTONIC, less the kernel's end, the stand-in's %globaltimer being the wall
    # clock); a wait, one rank's start against the other's, is off by the two notices' difference,
    # measured here, so a busy host's slow notices widen the margin with them. The report's steps
    # hold some of the kernels: its mean wait lies within theirs.
    wall = time.clock_gettime_ns(time.CLOCK_REALTIME) - time.clock_gettime_ns(time.CLOCK_MONOTONIC)
    notice = {r: min(k["t_ns"] - (k["gpu_end"] - wall) for k in ks[r]) / 1e6 for r in ks}
    tol = abs(notice[0] - notice[1]) + 0.05

    def within(r):
        w = waits[r]
        if joined:
            per = nc[r]["wait_ms_per_step"] / nc[r]["kernels_per_step"]
            return min(w) - tol <= per <= max(w) + tol
        return nc[r]["wait_ms_per_step"] * steps <= sum(w) + tol * len(w)
    ok(all(within(r) for r in (0, 1)),
       "%s: the wait before the later rank's kernel started, per kernel, within the events' starts' (%s ms, "
       "and %.3f ms: the ranks' notices %s ms apart, and 0.05): %s"
       % (what, {r: [round(x, 3) for x in v] for r, v in waits.items()}, tol,
          {r: round(x, 3) for r, x in notice.items()}, {r: nc[r]["wait_ms_per_step"] for r in nc}))


def check_deferred_memory():
    """The stand-in under valgrind, without the preload: while an allreduce waits for the later rank,
    a helper's asynchronous copy into pinned memory and an event it recorded and destroyed queue
    behind it, and the helper returns. The device thread must write neither into the helper's dead
    frame (the copy's end: it corrupted the program's stack, a SIGSEGV in a later wait on 1 run in
    about 50 of the 4-rank testbed) nor into the freed event (cuda_runtime_api.h, cudaEventDestroy:
    released "asynchronously at completion")."""
    if not shutil.which("valgrind"):
        skip("the stand-in's deferred work under valgrind", "valgrind is not installed (.ci/deps installs it)")
        return
    out = os.path.join(d, "deferred")
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    env = dict(os.environ, LD_LIBRARY_PATH=SIMDIR, SIMGPU_KERNELS="forward=2000,backward=3000",
               NCCL_APP_SKEW_MS="20", NCCL_APP_TAIL="1")
    env.pop("LD_PRELOAD", None)
    ps = [subprocess.Popen(["valgrind", "-q", "--error-exitcode=9", APP, str(r), "2", os.path.join(out, "id"), "4"],
                           env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for r in range(2)]
    res = []
    for p in ps:
        try:
            res.append(p.communicate(timeout=300))
        except subprocess.TimeoutExpired:  # (a rank whose peer died waits in the collective)
            p.kill()
            res.append(p.communicate())
    ok(all(p.returncode == 0 for p in ps),
       "2 ranks under valgrind: a copy and a destroyed event queued behind the collective, no memory error "
       "(rc %s)%s" % ([p.returncode for p in ps],
                      "".join(": " + e[-600:].replace("\n", " | ") for p, (o, e) in zip(ps, res) if p.returncode)))


def check_rank_from_comm(n):
    """no launcher's environment (mp.spawn's children, a script that passes its rank to
    init_process_group): each process takes its rank and the world's size from the largest
    communicator it joins, not from the split's (preload/init.c, dsp_identity_from_comm)"""
    ps, res, truth, recs, out = run(n, split=True, name="r%d-noenv" % n, rank_env=False)
    if not ok(all(p.returncode == 0 for p in ps), "%d ranks, no RANK in the environment: nccl_app runs: %s"
              % (n, [e[-200:] for o, e in res])):
        return
    got = sorted((int(p["cmdline"][1]), p["role"], p["rank"], p["world_size"], p.get("rank_source")) for p in who(recs).values())
    ok(got == [(r, "rank", r, n, "nccl") for r in range(n)],
       "%d ranks, no RANK in the environment: each file's rank and world size from the world's communicator, not "
       "the split's: %s" % (n, got))
    r = subprocess.run([DDPSPY, "report", "--json", out], capture_output=True, text=True, timeout=120)
    j = json.loads(r.stdout) if r.stdout.startswith("{") else {}
    ok([x["rank"] for x in j.get("ranks", [])] == list(range(n)) and j.get("verdict", {}).get("bound"),
       "and the report reads them as the job's %d ranks: %s %s" % (n, [x["rank"] for x in j.get("ranks", [])],
                                                                 r.stderr[-200:]))


def check_other_custom2():
    """a tool in the process that pushes its own external ids of ddpspy's kind (CUPTI's CUSTOM2),
    counted from 1, around its compute kernels' launches, and records external correlations itself
    (nccl_app NCCL_APP_EXT2=1: a CUPTI client ddpspy shares its subscription with): its ids are never
    taken for ddpspy's NCCL calls' (before, its compute kernels became NCCL kernels: compute-bound
    at 92% turned comms-bound with no compute), and it gets the records of its own ids, as alone (2
    a step, the forward and backward launches), and none of ddpspy's"""
    plain = report(run(2, name="custom2-plain")[4])
    ps, res, truth, recs, out = run(2, name="custom2", extra={"NCCL_APP_EXT2": "1"})
    if not ok(all(p.returncode == 0 for p in ps) and len(truth) == 2,
              "another tool's CUSTOM2 ids: nccl_app runs: %s" % [e[-200:] for o, e in res]):
        return
    j = report(out)
    # (ground truth: each step's forward and backward kernels run 2 + 3 ms on the simulated device,
    # whatever the host's timing; a compute kernel taken for an NCCL one leaves none)
    fig = lambda r: [(x["rank"], x.get("gpu", {}).get("kernels_per_step"), x.get("gpu", {}).get("nccl_join"))
                     for x in r.get("ranks", [])]
    ms = [x.get("gpu", {}).get("ms_per_step", {}).get("compute", 0) for x in j.get("ranks", [])]
    ok(fig(j) == fig(plain) and len(ms) == 2 and all(abs(m - 5) <= 0.25 for m in ms),
       "another tool's CUSTOM2 ids: the report's compute kernels and NCCL joins are those of the run without them, "
       "and each device computes its 5 ms a step (%s): %s, against %s" % (ms, fig(j), fig(plain)))
    got = [(truth[r].get("ext2"), truth[r].get("ext2_other")) for r in sorted(truth)]
    ext = [e for e in of(recs, "gpu_event") if e["kind"] == "gpu_extcorr"]
    ok(got == [(2 * STEPS, 0)] * 2 and ext and all(e["ext_id"] >> 36 == 0xdd5 for e in ext),
       "another tool's CUSTOM2 ids: it gets the %d records of its own ids on each rank and none of ddpspy's "
       "(own, other: %s); ddpspy's file holds its own ids only (%d, tagged 0xdd5)" % (2 * STEPS, got, len(ext)))


check(2)
check(4)
check_other_custom2()
check_rank_from_comm(4)
check_profiler_plugin()
check_plugin_capture()
check_plugin_graph()
check_split(4)
check_nonblocking()
check_world1()
check_made()
check_deferred_memory()
cleanup(d)
done()
