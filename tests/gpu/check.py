"""GPU capture against the real libraries, on a machine with a GPU (docs/gpu.md): the checks of
tests/e2e/test_cupti.py, test_nccl.py and test_cuda.py that do not depend on the simulated device's
time model, on testapps/gpu_app.cu and testapps/nccl_app.cu built here with nvcc against the real
libcudart and libnccl, then a PyTorch job (CUDA kernels, NCCL allreduce through DDP at world size 1,
NVTX ranges) under the preload, and the report's verdict on examples/torch/train_mlp.py --device cuda
(healthy, data-starved, host-sync). --sim runs the same checks on the simulated device instead (that is
how this script is itself tested on machines without a GPU: tests/e2e/test_gpu_script.py).

usage: tests/gpu/check.py [--sim] [--out DIR] [--budget S] [--only PART,...]   (from the repository root, after `make`)
--budget S: the whole run's seconds (default 450): a part that would not fit in what is left is
skipped, saying so, so that one call on a lent GPU machine always comes back with what ran.
--only: the named parts alone (main's part names: "PyTorch", "nccl_app", ...), to rerun one that failed.
What it learns of the real libraries (records per kind, API records per kernel, zero timestamps,
NCCL kernel names, launch costs, each verdict's report) goes into DIR/facts.json and DIR/reports/.
Needs: build/libddpspy.so and build/ddpspy (the libraries they link beside them or installed: see
tests/gpu/run.sh), nvcc; for the NCCL and PyTorch parts, libnccl.so.2 and python3 with torch.
Prints TAP lines, a summary of what ran where, and exits 1 when a check failed."""
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "e2e"))
from lib import *  # noqa: E402  (ok, skip, done, dump, of, events, LIB, DDPSPY, ROOT, BUILD, SIMDIR)

SIM = "--sim" in sys.argv
OUT = sys.argv[sys.argv.index("--out") + 1] if "--out" in sys.argv else tempfile.mkdtemp(prefix="ddpspy-gpu-")
CUDA = os.environ.get("CUDA_HOME", "/usr/local/cuda")
NVCC = shutil.which("nvcc") or os.path.join(CUDA, "bin", "nvcc")
SLACK = 50000  # ns: two clocks' conversions (the host's calibration, CUPTI's GPU clock)
T0 = time.monotonic()
BUDGET = float(sys.argv[sys.argv.index("--budget") + 1]) if "--budget" in sys.argv else 450.0
FACTS = {}  # what the run learnt, written to OUT/facts.json as it goes
STOPPED = {}  # the reports whose coverage says CUPTI's records stopped before the run did


def fact(key, value):
    FACTS[key] = value
    with open(os.path.join(OUT, "facts.json"), "w") as f:
        json.dump(FACTS, f, indent=1, sort_keys=True)
    print("# fact %s: %s" % (key, json.dumps(value)[:600]), flush=True)


def fits(what, need):
    """whether a part that takes about need seconds fits in what is left of the budget; skips it if not"""
    left = BUDGET - (time.monotonic() - T0)
    if left < need:
        skip(what, "%.0f s left of the %.0f s budget, it needs about %.0f" % (left, BUDGET, need))
        return False
    return True


def report(name, out):
    """ddpspy report (text and --json) of a trace directory, kept in OUT/reports/"""
    os.makedirs(os.path.join(OUT, "reports"), exist_ok=True)
    r = subprocess.run([DDPSPY, "report", out], capture_output=True, text=True, timeout=300)
    open(os.path.join(OUT, "reports", name + ".txt"), "w").write(r.stdout + r.stderr)
    j = subprocess.run([DDPSPY, "report", "--json", out], capture_output=True, text=True, timeout=300)
    open(os.path.join(OUT, "reports", name + ".json"), "w").write(j.stdout)
    rep = json.loads(j.stdout) if j.stdout.startswith("{") else None
    for c in (rep or {}).get("coverage", []):
        if "cupti_stopped" in c:
            STOPPED[name] = c["cupti_stopped"]
    return rep


def nccl_kernel(name):
    """an NCCL kernel's name, mangled (_Z40ncclDevKernel_AllReduce_Sum_bf16_RING_LL...) or not"""
    return "ncclDevKernel" in name or "ncclKernel" in name


def per_kind(recs):
    """gpu events per kind, and how many of them have a zero or negative start or length"""
    n, zero = {}, {}
    for e in of(recs, "gpu_event"):
        n[e["kind"]] = n.get(e["kind"], 0) + 1
        zero[e["kind"]] = zero.get(e["kind"], 0) + (e["t_ns"] <= 0 or (e["kind"] != "gpu_extcorr" and e["dur_ns"] <= 0))
    return {k: [n[k], zero[k]] for k in sorted(n)}


def python_lib_dirs():
    """Where pip's CUDA wheels keep their libraries and headers (PyTorch's own), if anywhere."""
    try:
        import nvidia  # noqa
        roots = list(nvidia.__path__)
    except Exception:
        return [], []
    libs = sorted(set(glob.glob(os.path.join(roots[0], "*", "lib"))))
    incs = sorted(set(glob.glob(os.path.join(roots[0], "*", "include"))))
    return libs, incs


GPU_LIBS = os.path.join(BUILD, "gpu-libs")  # tests/gpu/run.sh --bundle


def env_for():
    e = {}
    if SIM:
        e["LD_LIBRARY_PATH"] = SIMDIR
        e["SIMGPU_KERNELS"] = "spin=5000,tick=2000,forward=2000,backward=3000,hold=arg"
    else:
        libs, _ = python_lib_dirs()
        path = [d for d in libs] + [os.path.join(CUDA, "lib64")] + os.environ.get("LD_LIBRARY_PATH", "").split(":")
        e["LD_LIBRARY_PATH"] = ":".join(p for p in path if p)
    if os.path.isdir(GPU_LIBS):
        e["LD_LIBRARY_PATH"] += ":" + GPU_LIBS
    return e


def info(recs):
    """the file's last gpu record: its last word on the capture (counts grow over the run)"""
    g = of(recs, "gpu")
    return g[-1] if g else {}


def gpu_events(recs, kind=None):
    return [r for r in of(recs, "gpu_event") if kind is None or r["kind"] == kind]


def gpu_app_checks(app):
    out = os.path.join(OUT, "gpu_app")
    shutil.rmtree(out, ignore_errors=True)
    p = traced([app, "timeline"], out, env=env_for(), timeout=300)
    recs, rc, err = dump(out)
    if not ok(p.returncode == 0 and of(recs, "process"), "gpu_app runs under the preload and leaves a trace: %s"
              % p.stderr[-300:]):
        return
    main = of(recs, "process")[0]["pid"]
    g = info(recs)
    ok(g.get("state") == "on" and g.get("clock") == "monotonic" and g.get("dropped") == 0,
       "CUPTI on at cuInit, CLOCK_MONOTONIC timestamps, nothing dropped: %s" % {k: g.get(k) for k in
                                                                              ("state", "why", "lib", "version", "clock", "dropped")})
    ok(g.get("checked", 0) >= 11 and g.get("lead_ns", 1 << 60) <= SLACK,
       "no device work starts before its launching call (checked %s, worst lead %s ns)" % (g.get("checked"), g.get("lead_ns")))
    kern = gpu_events(recs, "gpu_kernel")
    names = ["spin" if "spin" in k["kname"] else "tick" if "tick" in k["kname"] else k["kname"] for k in kern]
    ok(names == ["spin"] + ["tick"] * 3 + ["spin"] * 4, "every kernel of gpu_app, in order: %s" % names)
    api = {e["corr"]: e for e in gpu_events(recs, "cuda_api")}
    ok(kern and all(api.get(k["corr"], {}).get("thread") is not None and "aunch" in (api[k["corr"]].get("fn") or "")
                    for k in kern),
       "every kernel joins its launch call by correlation id: %s" % [(api.get(k["corr"], {}).get("fn"),
                                                                      api.get(k["corr"], {}).get("thread")) for k in kern][:3])
    threads = {api[k["corr"]]["thread"] for k in kern if k["corr"] in api}
    tids = {t["tid"] for t in of(recs, "thread")}
    low = {int(t["pthread"], 16) & 0xffffffff for t in of(recs, "thread") if t.get("pthread")}
    ok(len(threads) == 1, "CUPTI names one host thread for every launch: %s (the file's threads: %s; CUPTI's "
       "thread id is a tid: %s, the low 32 bits of a pthread_t: %s)" % (threads, sorted(tids), threads <= tids,
                                                                        threads <= low))
    cp = gpu_events(recs, "gpu_memcpy")
    got = [(e["copy"], e["src"], e["dst"], e["bytes"]) for e in cp]
    ok(got == [("htod", "pinned", "device", 64 << 20), ("htod", "pageable", "device", 64 << 20),
               ("dtoh", "device", "pinned", 64 << 20)], "the three 64 MiB copies: %s" % got)
    hs = [e for e in events(recs, "cuda_sync") if e["tid"] == main]
    if kern and hs:
        k0, s0 = kern[0], hs[0]
        end = k0["t_ns"] + k0["dur_ns"]
        # (a real kernel this small may end before the host even calls the synchronize)
        ok(end <= s0["t_ns"] + s0["dur_ns"] + SLACK,
           "the first kernel ends by the end of the cudaStreamSynchronize that waits for it: %.3f ms into a %.3f ms wait"
           % ((end - s0["t_ns"]) / 1e6, s0["dur_ns"] / 1e6))
    hc = [e for e in events(recs, "cuda_memcpy") if e["tid"] == main]
    if len(hc) == 3 and len(cp) == 3:
        h, c = hc[1], cp[1]
        # a pageable copy returns once its bytes are staged: its DMA may end after the call returns
        # (cuda_runtime_api.h, "API synchronization behavior"); it never starts before the call
        ok(h["t_ns"] - SLACK <= c["t_ns"],
           "the pageable copy's DMA starts inside the host call: GPU %.3f..%.3f ms into it, host %.3f ms"
           % ((c["t_ns"] - h["t_ns"]) / 1e6, (c["t_ns"] + c["dur_ns"] - h["t_ns"]) / 1e6, h["dur_ns"] / 1e6))
        fact("gpu_app_pageable_async_64MiB_ms", {"host_call": h["dur_ns"] / 1e6, "dma_start_after_call": (c["t_ns"] - h["t_ns"]) / 1e6,
                                                 "dma_end_after_call_end": (c["t_ns"] + c["dur_ns"] - h["t_ns"] - h["dur_ns"]) / 1e6})
    lead = [k["t_ns"] - api[k["corr"]]["t_ns"] for k in kern if k["corr"] in api]
    fact("gpu_app_kernel_lead_us", [round(x / 1e3, 1) for x in lead])
    fact("gpu_app_kernel_us", [round(k["dur_ns"] / 1e3, 1) for k in kern])
    fact("gpu_app_records", per_kind(recs))


def share_checks(app):
    """CUPTI shared with a second client in Kineto's shape (gpu_app kineto: test_cupti_share's checks):
    it gets what it gets alone, and ddpspy keeps every kernel of the run and the program's own calls.
    Also a client that subscribes before cuInit, one that asks for system thread ids (alone: does the
    real CUPTI give gettid?), with a second thread whose pthread_t the next one takes, and the
    deprecated flush and cuptiActivityEnableAndDump, one with external correlation but no CUDA call
    kind (alone: does the real CUPTI make external id records without the call's record?), and one
    that stops while a kernel runs, as an on-demand trace does"""
    same = ("subscribe", "enabled", "kernels", "ticks", "spins", "inside", "getdevice", "memcpy", "ext", "ext7", "launch_corr_ok",
            "dropped", "after", "callbacks", "finalized", "tid_type", "tid_system", "tid_default", "helper_system",
            "helper_default")
    host = None
    for case, extra in (("shared", {}), ("finalize", {"GPU_APP_FINALIZE": "1"}),
                        ("callbacks", {"GPU_APP_CALLBACK": "1", "GPU_APP_FINALIZE": "1"}), ("warmup", {"GPU_APP_WARMUP": "1"}),
                        ("early", {"GPU_APP_EARLY": "1"}), ("system-tids", {"GPU_APP_TID": "3"}),
                        ("old-flush", {"GPU_APP_OLDFLUSH": "1"}), ("enable-and-dump", {"GPU_APP_DUMP": "1"}),
                        ("device-kinds", {"GPU_APP_KINDS": "device"}), ("no-sync", {"GPU_APP_NOSYNC": "1"})):
        env = dict(env_for(), **extra)
        a = subprocess.run([app, "kineto"], env=dict(os.environ, **env), capture_output=True, text=True, timeout=120)
        out = os.path.join(OUT, "kineto-" + case)
        shutil.rmtree(out, ignore_errors=True)
        # (the callbacks case with ddpspy's log: on the H200 the client's callbacks never came, and
        # whether any reached ddpspy's subscriber was not known; docs/gpu.md)
        b = traced([app, "kineto"], out, env=dict(env, DDPSPY_LOG="1") if case == "callbacks" else env, timeout=120)
        last = lambda q: json.loads(q.stdout.splitlines()[-1]) if q.returncode == 0 and q.stdout.strip() else {"err": q.stderr[-300:]}
        alone, shared = last(a), last(b)
        recs = dump(out)[0]
        g = info(recs)
        kern = gpu_events(recs, "gpu_kernel")
        diff = {k: (alone.get(k), shared.get(k)) for k in same if alone.get(k) != shared.get(k)}
        helpers = 5 * (case == "system-tids")
        ok(alone.get("kernels") == 20 + helpers and not diff,
           "%s: the Kineto-shaped client gets with ddpspy in front what it gets alone: %s" % (case, diff or alone))
        n = 31 + 5 * (case == "warmup") + helpers
        events = len([e for e in of(recs, "event") if e.get("kind", "").startswith("cuda_")])
        host = host if host is not None else events
        known = {int(t["pthread"], 16) & 0xffffffff for t in of(recs, "thread") if t.get("pthread")}
        ids = sorted(set(e.get("thread") for e in gpu_events(recs, "cuda_api")) - known)
        ok(events == host and not ids and not g.get("client_tid_unknown"),
           "%s: ddpspy records the program's own CUDA calls as in the first case (%d events, against %d), its API records "
           "under CUPTI's default thread ids (of no thread: %s; the client's left unnamed: %s)"
           % (case, events, host, ids, g.get("client_tid_unknown")))
        # ("no-sync": the client stops while a 200 ms kernel runs; its forced flush then hands
        # ddpspy that kernel untimed, and the client its window, which a default flush keeps back)
        nosync = int(case == "no-sync")
        nl = len([e for e in gpu_events(recs, "cuda_api") if "aunch" in (e.get("fn") or "")])
        ok(len(kern) == n and nl == n + nosync and g.get("untimed", 0) == nosync and g.get("client")
           and g.get("client_dropped") == 0
           and g.get("client_api_limited") == ("" if case == "device-kinds" else "runtime,driver"),
           "%s: ddpspy keeps all %d kernels, timed, and their launch calls (%d), and names the client and what of its "
           "calls it got: %d, %s" % (case, n, nl, len(kern), {k: g.get(k) for k in (
               "client", "client_records", "client_dropped", "untimed", "client_api_limited")}))
        log = [l for l in (b.stderr or "").splitlines() if "CUPTI" in l][:60] if case == "callbacks" else None
        fact("share_" + case, {"alone": alone, "shared": shared, "ddpspy_kernels": len(kern), "log": log,
                               "gpu": {k: g.get(k) for k in ("state", "why", "client", "client_records", "client_dropped",
                                                             "client_tid_unknown")}})
    # a holder that reached CUPTI through its own handle before cuInit (as nsys's injection does): it
    # keeps CUPTI and its records, ddpspy records host events and says CUPTI is taken
    a = subprocess.run([app, "cupti"], env=dict(os.environ, **env_for()), capture_output=True, text=True, timeout=120)
    out = os.path.join(OUT, "cupti-holder")
    shutil.rmtree(out, ignore_errors=True)
    b = traced([app, "cupti"], out, env=env_for(), timeout=120)
    last = lambda q: json.loads(q.stdout.splitlines()[-1]) if q.returncode == 0 and q.stdout.strip() else {"err": q.stderr[-300:]}
    alone, held = last(a), last(b)
    recs = dump(out)[0]
    g = info(recs)
    fact("share_holder", {"alone": alone, "under_ddpspy": held, "gpu": {k: g.get(k) for k in ("state", "why", "holder")}})
    ok(alone.get("kernels") == held.get("kernels") == 4 and alone.get("api") == held.get("api") and g.get("state") == "taken"
       and not gpu_events(recs, "gpu_kernel"),
       "a holder through its own handle keeps CUPTI (%s kernels, alone %s); ddpspy's file: %s, %s"
       % (held.get("kernels"), alone.get("kernels"), g.get("state"), (g.get("why") or "")[:90]))
    # the same through its own handle 2.2 s after a first kernel, with no subscriber: it takes CUPTI's
    # callbacks, and the buffers ddpspy had handed out complete into its callback, which frees them
    # (the program must run on); the report says CUPTI's records stopped
    env = dict(env_for(), GPU_APP_LATE="2", RANK="0", WORLD_SIZE="1")
    a = subprocess.run([app, "cupti"], env=dict(os.environ, **env), capture_output=True, text=True, timeout=120)
    out = os.path.join(OUT, "cupti-late-handle")
    shutil.rmtree(out, ignore_errors=True)
    b = traced([app, "cupti"], out, env=env, timeout=120)
    alone, late = last(a), last(b)
    rep = report("late-handle", out) or {}
    stop = (rep.get("coverage") or [{}])[0].get("cupti_stopped")
    fact("share_late_handle", {"alone": alone, "under_ddpspy": late, "rc": b.returncode, "cupti_stopped": stop})
    ok(b.returncode == 0 and late.get("kernels", 0) >= alone.get("kernels", 1) and stop and stop.get("copies_after", 0) >= 2,
       "a tracer through its own handle after ddpspy started: the program runs on (rc %s), the tracer gets its kernels "
       "(%s, alone %s), and the report says CUPTI's records stopped: %s"
       % (b.returncode, late.get("kernels"), alone.get("kernels"), stop))


def rules_checks(app):
    """the real CUPTI's rules that cupti/share.c rests on, asked of libcupti alone (testapps/cupti_rules:
    one process per case, set up as ddpspy sets CUPTI up, one change a client could make): a kind's
    Disable ends a selection by callback id for good, so a client's API kind is never passed on; other
    ids turned on and off leave ddpspy's on; a subscriber gets its domain's callbacks"""
    p = subprocess.run([app], capture_output=True, text=True, timeout=120, env=dict(os.environ, **env_for()))
    cases = {}
    for line in p.stdout.splitlines():
        try:
            j = json.loads(line)
        except ValueError:
            continue
        cases[j.get("case")] = j
    fact("cupti_rules", cases)
    launches = lambda c: [cases.get(c, {}).get(ph, {}).get("launch_api") for ph in ("before", "during", "after",
                                                                                  "own_calls", "toggled")]
    ok(launches("runtime_kind") == [10, 10, 0, 0, 0],
       "a RUNTIME kind's Disable ends the selection of calls by id for good (launch records before, during, after, "
       "after the ids on again, after off and on): %s" % launches("runtime_kind"))
    ok(launches("runtime_ids") == [10] * 5,
       "every other runtime id on and off leaves the kept ones recording: %s" % launches("runtime_ids"))
    cb = [cases.get(c, {}).get("during", {}).get("cb_getdevice") for c in ("domain_runtime", "callback_getdevice",
                                                                            "callback_sequence")]
    ok(cb == [2, 2, 2], "a subscriber's runtime domain or one id gets the calls' callbacks (2 cudaGetDevice "
       "each): %s" % cb)


def static_checks(built):
    """nvcc's default, static cudart: no wrapper sees its calls; CUPTI sees its kernels and calls."""
    if SIM:
        skip("a static-cudart program", "the simulated device has no CUDA driver for a static cudart to load")
        return
    app = os.path.join(OUT, "bin", "gpu_app_static")
    if not built:
        return
    out = os.path.join(OUT, "gpu_app_static")
    shutil.rmtree(out, ignore_errors=True)
    p = traced([app, "timeline"], out, env=env_for(), timeout=300)
    recs, rc, err = dump(out)
    kern = gpu_events(recs, "gpu_kernel")
    api = {e["corr"]: e for e in gpu_events(recs, "cuda_api")}
    ok(p.returncode == 0 and info(recs).get("state") == "on" and len(kern) == 8
       and all(k["corr"] in api for k in kern) and len(gpu_events(recs, "gpu_memcpy")) == 3,
       "static cudart: CUPTI sees all 8 kernels, each with its runtime launch call, and the 3 copies "
       "(%d kernels, %d copies, host cuda_memcpy events: %d)" % (len(kern), len(gpu_events(recs, "gpu_memcpy")),
                                                                 len(events(recs, "cuda_memcpy"))))


def nccl_run(app, name, n, extra=None, truth=None):
    """nccl_app on n ranks under the preload (on a real GPU every rank on the one device, each its own
    NCCL_HOSTID so that NCCL takes them for two hosts, over sockets on lo): its records, or None;
    each rank's JSON line appended to truth, where given"""
    out = os.path.join(OUT, "nccl-" + name)
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    env = dict(os.environ, LD_PRELOAD=LIB, DDPSPY_OUT=out, **env_for())
    env.update(extra or {})
    if not SIM:
        env.update(NCCL_P2P_DISABLE="1", NCCL_SHM_DISABLE="1", NCCL_SOCKET_IFNAME="lo")
    idfile = os.path.join(out, "id")
    ps = [subprocess.Popen([app, str(r), str(n), idfile, "4"], env=dict(env, NCCL_HOSTID="ddpspy-host%d" % r, RANK=str(r),
                                                                      LOCAL_RANK=str(r), WORLD_SIZE=str(n)),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for r in range(n)]
    try:
        res = [p.communicate(timeout=60) for p in ps]
    except subprocess.TimeoutExpired:
        for p in ps:
            p.kill()
        res = [p.communicate() for p in ps]
    recs, rc, err = dump(out)
    if not ok(all(p.returncode == 0 for p in ps), "nccl_app %s, %d rank(s), runs under the preload: %s"
              % (name, n, [e[-300:] for o, e in res])):
        return None
    for o, e in res if truth is not None else ():
        try:
            truth.append(json.loads(o.splitlines()[-1]))
        except (ValueError, IndexError):
            pass
    return recs


def ext_corrs(recs):
    """(pid, external id) -> the correlation ids of every CUDA call made while it was pushed (an NCCL
    call makes several: its launch among them)"""
    ext = {}
    for e in gpu_events(recs, "gpu_extcorr"):
        ext.setdefault((e["pid"], e["ext_id"]), set()).add(e["corr"])
    return ext


def cupti_thread(recs):
    """CUPTI's threadId -> the host thread's tid: on a real GPU it is the low 32 bits of the
    thread's pthread_t (seen on an H200, CUPTI 13.0), not its tid"""
    m = {}
    for t in of(recs, "thread"):
        m[(t["pid"], t["tid"])] = t["tid"]
        if t.get("pthread"):
            m[(t["pid"], int(t["pthread"], 16) & 0xffffffff)] = t["tid"]
    return m


def nccl_facts(name, recs):
    """what NCCL's kernels and launches looked like: names, the launching calls and threads, joins"""
    kern = gpu_events(recs, "gpu_kernel")
    api = {(e["pid"], e["corr"]): e for e in gpu_events(recs, "cuda_api")}
    calls = [e for e in events(recs, "nccl_coll")] + [e for e in events(recs, "nccl_group") if e.get("begin") == 0]
    ext = ext_corrs(recs)
    nk = [k for k in kern if nccl_kernel(k["kname"])]
    joined = sum(1 for c in calls if any((c["pid"], k["corr"]) in {(k["pid"], x) for x in ext.get((c["pid"], c.get("ext")), ())}
                                         for k in nk if k["pid"] == c["pid"]))
    callers = {(e["pid"], e["tid"]) for e in calls}
    th = cupti_thread(recs)
    launchers = {(k["pid"], th.get((k["pid"], api[(k["pid"], k["corr"])]["thread"]))) for k in nk if (k["pid"], k["corr"]) in api}
    f = {"kernels": sorted({k["kname"] for k in nk})[:6], "nccl_kernels": len(nk),
         "other_kernels": sorted({k["kname"][:60] for k in kern if not nccl_kernel(k["kname"])})[:6],
         "launch_calls": sorted({api[(k["pid"], k["corr"])]["fn"] for k in nk if (k["pid"], k["corr"]) in api}),
         "calls": len(calls), "calls_joined_by_ext_id": joined,
         "launch_thread_is_caller": sorted(t in callers for t in launchers),
         "memcpy": sorted({(m["copy"], m["bytes"]) for m in gpu_events(recs, "gpu_memcpy")})[:8],
         "init": [(e["comm_rank"], e["ret"]) for e in events(recs, "nccl_init")],
         "records": per_kind(recs)}
    fact("nccl_" + name, f)
    return f


def nccl_checks(app):
    n = 2
    recs = nccl_run(app, "blocking", n)
    if recs is not None:
        inits = [e for e in events(recs, "nccl_init")]
        ok(len(inits) == n and len({e["comm"] for e in inits}) == 1 and all(e["ret"] == 0 for e in inits),
           "%d ranks: ncclCommInitRank recorded, one communicator id: %s" % (n, [(e["comm_rank"], e["comm"]) for e in inits]))
        ar = [e for e in events(recs, "nccl_coll") if e["op"] == "allreduce"]
        ok(len(ar) == 4 * n and sorted({e["seq"] for e in ar}) == [0, 1, 2, 3] and all(e["bytes"] == 32 << 20 for e in ar),
           "%d ranks: every allreduce with its sequence number and bytes" % n)
        ext = ext_corrs(recs)
        kern = {(k["pid"], k["corr"]): k for k in gpu_events(recs, "gpu_kernel")}
        joined = [([kern[(a["pid"], c)]["kname"] for c in ext.get((a["pid"], a["ext"]), ()) if (a["pid"], c) in kern] + [""])[0]
                  for a in ar]
        ok(all(nccl_kernel(k) for k in joined), "%d ranks: each allreduce joins an NCCL kernel through its external id "
           "(%d of %d; names by substring: %s)" % (n, sum(map(nccl_kernel, joined)), len(ar), sorted(set(joined))[:2]))
        # NCCL's profiler plugin (ddpspy, preload/ncclprof.c): each allreduce's kernel channels, against
        # CUPTI's record of the same kernel (joined by the call: communicator and sequence number)
        pk = events(recs, "nccl_kernel")
        cu = {(a["pid"], a["seq"]): kern[(a["pid"], c)] for a in ar for c in ext.get((a["pid"], a["ext"]), ())
              if (a["pid"], c) in kern and nccl_kernel(kern[(a["pid"], c)]["kname"])}
        span = {}
        for k in pk:
            if k["op"] == "allreduce":
                s0, e0 = span.get((k["pid"], k["seq"]), (k["gpu_start"], k["gpu_end"]))
                span[(k["pid"], k["seq"])] = (min(s0, k["gpu_start"]), max(e0, k["gpu_end"]))
        pairs = [(span[x], cu[x]) for x in span if x in cu]
        offs = [s0 - c["t_ns"] for (s0, e0), c in pairs]
        durs = [(e0 - s0) - c["dur_ns"] for (s0, e0), c in pairs]
        fact("nccl_plugin", {"events": len(pk), "channels": sorted({k["channel"] for k in pk}), "pairs": len(pairs),
                             "offset_spread_us": (max(offs) - min(offs)) / 1e3 if offs else None,
                             # the plugin's %globaltimer against the trace's clock: Unix-epoch ns or not
                             "offset_s_first": offs[0] / 1e9 if offs else None,
                             "gpu_start_first": pk[0]["gpu_start"] if pk else None,
                             "duration_diff_us": [round(x / 1e3, 1) for x in durs[:8]]})
        ok(len(span) == len(ar) and len(pairs) == len(ar) and max(map(abs, durs)) <= 20000,
           "%d ranks: NCCL's profiler plugin times each allreduce's kernel as CUPTI does (%d of %d; duration differences "
           "%s us; clock offset spread %s us)" % (n, len(pairs), len(ar), [round(x / 1e3, 1) for x in durs[:4]],
                                                  (max(offs) - min(offs)) / 1e3 if offs else None))
        nccl_facts("blocking", recs)
    for name in ("blocking",):
        j = report("nccl-" + name, os.path.join(OUT, "nccl-" + name))
        fact("nccl_%s_report" % name, j and {"clock": j["job"]["clock"], "join": [r.get("gpu", {}).get("nccl_join") for r in j["ranks"]]})
        # the report's own check of the plugin's kernels against CUPTI's (collector/ncclplug.c)
        chk = [(c.get("nccl_check"), c.get("nccl_plugin")) for c in (j or {}).get("coverage", [])]
        fact("nccl_plugin_check", chk)
        ok(j is not None and len(chk) == n and all(c and c["matched"] == 4 and c["plugin_only"] == 0 and
                                                   c["duration_us_max"] <= 20 for c, p in chk),
           "%d ranks: the report's check of NCCL's profiler plugin against CUPTI: every allreduce in both, durations "
           "within 20 us: %s" % (n, chk))
    # no CUPTI (DDPSPY_GPU=0): NCCL's kernels from the plugin alone, the coverage saying so
    recs = nccl_run(app, "plugin-only", n, {"DDPSPY_GPU": "0"})
    if recs is not None:
        j = report("nccl-plugin-only", os.path.join(OUT, "nccl-plugin-only"))
        cov = [(c["gpu"], c.get("nccl_plugin")) for c in (j or {}).get("coverage", [])]
        nc = [r.get("nccl") for r in (j or {}).get("ranks", [])]
        fact("nccl_plugin_only", {"coverage": cov, "nccl": nc})
        ok(j is not None and [c for c, p in cov] == ["nccl-plugin"] * n and
           all(x and x["source"] == "nccl-plugin" and x["kernels_per_step"] >= 1 for x in nc),
           "%d ranks without CUPTI: NCCL's kernels timed by NCCL's profiler plugin, the coverage says so: %s %s"
           % (n, cov, nc))
    recs = nccl_run(app, "nonblocking", n, {"NCCL_APP_NONBLOCKING": "1"})
    if recs is not None:
        j = report("nccl-nonblocking", os.path.join(OUT, "nccl-nonblocking"))
        joins = [r.get("gpu", {}).get("nccl_join") for r in j["ranks"]] if j else None
        fact("nccl_nonblocking_report", j and {"clock": j["job"]["clock"], "join": joins})
        ok(j is not None and all(x and x["communicator_order"] == 8 and x["order_only"] == 0 for x in joins),
           "nonblocking: the report joins each rank's NCCL kernels to their calls by the communicator's order: %s" % joins)
        chk = [c.get("nccl_check") for c in (j or {}).get("coverage", [])]
        fact("nccl_plugin_check_nonblocking", chk)
        ok(len(chk) == n and all(c and c["matched"] == 4 and c["plugin_only"] == 0 and c["duration_us_max"] <= 20 for c in chk),
           "nonblocking: the plugin's kernels join their calls and match CUPTI's: %s" % chk)
        f = nccl_facts("nonblocking", recs)
        ok(f["nccl_kernels"] >= 4 * n, "nonblocking communicator: its kernels recorded (%d; joined by external id: %d of %d "
           "calls; launched from the caller's thread: %s)" % (f["nccl_kernels"], f["calls_joined_by_ext_id"], f["calls"],
                                                              f["launch_thread_is_caller"]))
    # a nonblocking communicator without CUPTI: its kernels through the plugin alone, joined to the calls
    recs = nccl_run(app, "nonblocking-plugin", n, {"NCCL_APP_NONBLOCKING": "1", "DDPSPY_GPU": "0"})
    if recs is not None:
        j = report("nccl-nonblocking-plugin", os.path.join(OUT, "nccl-nonblocking-plugin"))
        cov = [(c["gpu"], c.get("nccl_plugin")) for c in (j or {}).get("coverage", [])]
        nc = [r.get("nccl") for r in (j or {}).get("ranks", [])]
        fact("nccl_nonblocking_plugin_only", {"coverage": cov, "nccl": nc})
        ok(j is not None and [c for c, p in cov] == ["nccl-plugin"] * n and all(p and p["unjoined"] == 0 and p["collectives"] == 4
                                                                              for c, p in cov) and
           all(x and x["source"] == "nccl-plugin" and x["kernels_per_step"] >= 1 for x in nc),
           "nonblocking without CUPTI: every collective's kernel from the plugin, joined to its call: %s %s" % (cov, nc))
    # the step's allreduce captured into a CUDA graph, launched each step beside the group's two
    # eager allreduces: NCCL numbers each launch as it runs, under the captured call's CollApi event
    recs = nccl_run(app, "graph", n, {"NCCL_APP_GRAPH": "1", "NCCL_APP_GROUPED": "1"})
    if recs is not None:
        j = report("nccl-graph", os.path.join(OUT, "nccl-graph"))
        pk = [k for k in events(recs, "nccl_kernel") if k["channel"] == 0]
        pids = sorted({k["pid"] for k in pk})
        seen = {p: [(k["seq"], k["call"], k["replay"]) for k in pk if k["pid"] == p] for p in pids}
        cov = [(c.get("nccl_plugin"), c.get("nccl_check")) for c in (j or {}).get("coverage", [])]
        joins = [r.get("gpu", {}).get("nccl_join") for r in (j or {}).get("ranks", [])]
        fact("nccl_graph", {"plugin_events": {str(p): v[:12] for p, v in seen.items()}, "coverage": cov, "join": joins,
                            "nccl": [r.get("nccl") for r in (j or {}).get("ranks", [])]})
        ok(len(seen) == n and all(sum(1 for q, c, r in v if r == 1) == 4 and
                                  len({c for q, c, r in v if r == 1}) == 1 for v in seen.values()),
           "graph: each of the 4 launches' kernels told to the plugin under the one captured call: %s" % seen)
        ok(j is not None and len(cov) == n and
           all(p and p["unjoined"] == 0 and p["graph_replays"] == 4 and c and c["plugin_only"] == 0 and
               c["matched"] == 8 and c["duration_us_max"] <= 20 for p, c in cov) and
           all(x and x["graph_replay"] == 4 for x in joins),
           "graph: the report joins every collective, CUPTI's graph kernels the plugin's replays, checked against "
           "each other: %s %s" % (cov, joins))
    # CUPTI alone (no plugin): the captured call's launch under its external id ran no kernel of it,
    # and each graph launch runs one kernel of each captured call: joined by that place
    recs = nccl_run(app, "graph-noplugin", n, {"NCCL_APP_GRAPH": "1", "NCCL_APP_GROUPED": "1", "DDPSPY_NCCL_PLUGIN": "0"})
    if recs is not None:
        j = report("nccl-graph-noplugin", os.path.join(OUT, "nccl-graph-noplugin"))
        joins = [r.get("gpu", {}).get("nccl_join") for r in (j or {}).get("ranks", [])]
        nc = [r.get("nccl") for r in (j or {}).get("ranks", [])]
        fact("nccl_graph_noplugin", {"join": joins, "nccl": nc})
        ok(j is not None and len(joins) == n and
           all(x and x["graph_replay"] == 4 and x["external_id"] == 4 and x["order_only"] == 0 for x in joins),
           "graph without the plugin: CUPTI's graph kernels joined to the captured call by their place in each "
           "launch: %s" % joins)
    # the same on a nonblocking communicator: NCCL's own thread launches the captured call into the
    # capture as it launches the eager groups (src/group.cc); CUPTI's graph kernels known by their
    # launching call, a graph launch (the fact's launch_calls)
    recs = nccl_run(app, "graph-nonblocking", n, {"NCCL_APP_GRAPH": "1", "NCCL_APP_GROUPED": "1",
                                                  "NCCL_APP_NONBLOCKING": "1"})
    if recs is not None:
        j = report("nccl-graph-nonblocking", os.path.join(OUT, "nccl-graph-nonblocking"))
        cov = [(c.get("nccl_plugin"), c.get("nccl_check")) for c in (j or {}).get("coverage", [])]
        joins = [r.get("gpu", {}).get("nccl_join") for r in (j or {}).get("ranks", [])]
        f = nccl_facts("graph_nonblocking", recs)
        fact("nccl_graph_nonblocking_report", {"coverage": cov, "join": joins})
        ok(j is not None and len(cov) == n and
           all(p and p["unjoined"] == 0 and p["graph_replays"] == 4 and c and c["plugin_only"] == 0 and
               c["matched"] == 8 for p, c in cov) and
           all(x and x["graph_replay"] == 4 and x["communicator_order"] == 4 and x["order_only"] == 0 for x in joins),
           "graph on a nonblocking communicator: the eager groups' kernels by the communicator's order, the graph's "
           "the replays (launching calls %s): %s %s" % (f["launch_calls"], cov, joins))
    # a tracer that takes CUPTI's callbacks through a libcupti handle of its own before step 2 (as
    # XLA's profiler loads it): the report must say where ddpspy's records stopped, and NCCL's
    # kernels after that come from the profiler plugin, which is not CUPTI's
    truth = []
    recs = nccl_run(app, "late-tracer", n, {"NCCL_APP_LATE": "2", "NCCL_APP_TAIL": "1"}, truth)
    if recs is not None:
        j = report("nccl-late-tracer", os.path.join(OUT, "nccl-late-tracer")) or {}
        cov = [(c.get("cupti_stopped"), c.get("nccl_timing"), (c.get("nccl_plugin") or {}).get("collectives"),
                c.get("missing")) for c in j.get("coverage", [])]
        rcs = [t.get("late_rc") for t in truth]
        fact("nccl_late_tracer", {"registered": rcs, "tracer_kernels": [t.get("late_kernels") for t in truth],
                                  "coverage": cov, "steps_cut": j.get("job", {}).get("steps_after_cupti_stopped"),
                                  "nccl": [r.get("nccl") for r in j.get("ranks", [])]})
        if rcs and all(rc not in (0, None) for rc in rcs):  # (the real CUPTI refused the second set: ddpspy keeps all)
            ok(len(cov) == n and not any(s for s, t, k, m in cov),
               "a tracer through its own handle: CUPTI refused its callbacks (%s), and no report says the records "
               "stopped: %s" % (rcs, cov))
        else:
            ok(len(cov) == n and all(s and s.get("nccl_timing_after") == "nccl-plugin" and (k or 0) >= 4
                                     for s, t, k, m in cov),
               "a tracer through its own handle before step 2 of 4 (its registration: %s): each rank's records "
               "stopped, said, and its NCCL kernels after that from the plugin: %s" % (rcs, cov))
    for name, extra in (("ws1-inplace", {}), ("ws1-outofplace", {"NCCL_APP_OOP": "1"})):
        recs = nccl_run(app, name, 1, extra)
        if recs is not None:
            f = nccl_facts(name, recs)
            ar = [k for k in f["kernels"] if "AllReduce" in k]
            ok(not ar, "world size 1, %s: no allreduce kernel (NCCL kernels %s; copies %s)" % (name, f["kernels"], f["memcpy"]))


def probe_checks(app):
    """testapps/gpu_probe.cu: the API flood, three kinds of copies, a CUDA graph, a Triton-style
    driver launch, and work still running at exit; under ddpspy, then as its own CUPTI client"""
    out = os.path.join(OUT, "probe")
    shutil.rmtree(out, ignore_errors=True)
    # (on the simulated device: the tail kernel lasts its argument, and no bytes move for real)
    penv = dict(env_for(), **({"SIMGPU_KERNELS": "hold=arg", "SIMGPU_MOVE_BYTES": "0"} if SIM else {}))
    p = traced([app], out, env=penv, timeout=120)
    recs, rc, err = dump(out)
    lines = {j["section"]: j for j in (json.loads(l) for l in p.stdout.splitlines() if l.startswith("{"))}
    if not ok(p.returncode == 0 and of(recs, "process"), "gpu_probe runs under the preload: %s" % p.stderr[-300:]):
        return
    g = info(recs)
    fact("probe_gpu_record", {k: g.get(k) for k in ("state", "why", "lib", "version", "dropped", "refused", "events",
                                                     "untimed", "api", "foreign", "lead_ns", "checked")})
    # the kernel still running at exit comes with no times: left out and counted, never a time
    timed = [e for e in gpu_events(recs) if e["kind"] != "gpu_extcorr"]
    ok(g.get("untimed", 0) >= 1 and g.get("lead_ns", 1 << 60) <= SLACK and all(e["t_ns"] > 0 for e in timed),
       "the kernel running at exit: %s record(s) with no times left out, none at time 0, the launch-order check "
       "clean (lead %s ns)" % (g.get("untimed"), g.get("lead_ns")))
    fns = {}
    for e in gpu_events(recs, "cuda_api"):
        fns[e.get("fn")] = fns.get(e.get("fn"), 0) + 1
    flood_calls = [f for f in fns if f and f.startswith(("cudaGetDevice", "cudaGetLastError", "cudaStreamIsCapturing",
                                                         "cudaPointerGetAttributes", "cudaEventRecord"))]
    ok(g.get("api") == "selected" and not flood_calls,
       "CUPTI records the calls the analysis reads (api %s), none of the flood's: %s" % (g.get("api"),
                                                                                        sorted(fns.items(), key=lambda x: -x[1])[:8]))
    polls = [e for e in events(recs, "cuda_sync") if e["what"] == "poll"]
    frees = [e["what"] for e in events(recs, "cuda_sync") if e["what"] in ("pin", "free")]
    fact("probe_host_waits", {"polls": len(polls), "pin_free": frees,
                              "sync_types": sorted({(e["sync"], e.get("ret")) for e in gpu_events(recs, "gpu_sync")})})
    fact("probe_records", per_kind(recs))
    kern = gpu_events(recs, "gpu_kernel")
    api = {e["corr"]: e for e in gpu_events(recs, "cuda_api")}
    fl = lines.get("flood", {})
    if fl:
        n = [e for e in gpu_events(recs, "cuda_api") if fl["t"][0] <= e["t_ns"] <= fl["t"][1]]
        fact("probe_flood_under_ddpspy", {"kernels": fl["kernels"], "api_records": len(n),
                                          "host_ns_per_kernel": fl["host_ns_per_kernel"], "polls": fl["polls"]})
    gk = [k for k in kern if "graph_k" in k["kname"]]
    ok(len(gk) == 9, "graph: its 3 kernels x 3 launches recorded (%d), launched by %s" %
       (len(gk), sorted({api.get(k["corr"], {}).get("fn") for k in gk}, key=str)))
    tk = [k for k in kern if "tri_k" in k["kname"]]
    ok(len(tk) == 3 and all(api.get(k["corr"], {}).get("driver") == 1 for k in tk),
       "cuLaunchKernelEx through cuGetProcAddress: 3 kernels, each joined to its driver launch (%s)" %
       [api.get(k["corr"], {}).get("fn") for k in tk])
    hk = [k for k in kern if "hold" in k["kname"]]
    fact("probe_tail_kernel_under_ddpspy", [(k["t_ns"], k["dur_ns"]) for k in hk])
    cp = lines.get("copies")
    if cp:
        got = {}
        for m in gpu_events(recs, "gpu_memcpy"):
            for name in ("pinned", "pageable", "d2d"):
                t = cp[name]
                if t[0] - SLACK <= m["t_ns"] <= t[2] + SLACK and m["bytes"] in (cp["host_bytes"], cp["d2d_bytes"]):
                    got[name] = {"copy": m["copy"], "src": m["src"], "dst": m["dst"], "GBps": round(m["bytes"] / max(m["dur_ns"], 1), 1),
                                 "dma_end_after_call_ms": round((m["t_ns"] + m["dur_ns"] - t[1]) / 1e6, 3),
                                 "call_ms": round((t[1] - t[0]) / 1e6, 3)}
        fact("probe_copies", got)
        ok(len(got) == 3, "the pinned, pageable and device-to-device copies recorded: %s" % sorted(got))
    # the program as its own CUPTI client: what CUPTI itself hands out, with no ddpspy in the process
    q = subprocess.run([app, "--cupti"], capture_output=True, text=True, timeout=120, env=dict(os.environ, **penv))
    raw = [json.loads(l) for l in q.stdout.splitlines() if l.startswith('{"section": "cupti"')]
    if ok(q.returncode == 0 and raw, "gpu_probe as its own CUPTI client: %s" % q.stderr[-300:]):
        fact("probe_cupti_raw", raw[0])


TORCH = r'''
import os, time, torch, torch.distributed as dist
os.environ.setdefault("MASTER_ADDR", "127.0.0.1"); os.environ.setdefault("MASTER_PORT", "29533")
dist.init_process_group("nccl", rank=0, world_size=1)
m = torch.nn.Linear(4096, 4096).cuda()
ddp = torch.nn.parallel.DistributedDataParallel(m)
opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
x = torch.randn(256, 4096, device="cuda")
for step in range(5):
    torch.cuda.nvtx.range_push("step")
    opt.zero_grad(); ddp(x).sum().backward(); opt.step()
    torch.cuda.nvtx.range_pop()
torch.cuda.synchronize()
y = torch.ones(1, device="cuda")
def loop():
    for i in range(20000):
        y.add_(1)
    torch.cuda.synchronize()
loop()  # warm-up
t0 = time.perf_counter()
if os.environ.get("CHECK_KINETO"):  # the same loop under torch.profiler (Kineto's CUPTI)
    from torch.profiler import profile, ProfilerActivity
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        t0 = time.perf_counter()
        loop()
        t1 = time.perf_counter()
    print("kineto_kernels %d" % sum(1 for e in prof.events() if e.device_type.name == "CUDA"))
else:
    loop()
    t1 = time.perf_counter()
print("launch_us %.3f" % ((t1 - t0) / 20000 * 1e6))
dist.destroy_process_group()
'''


def torch_here(what, instead):
    """whether PyTorch with CUDA is here (never on the simulated device); else what is skipped,
    saying so (instead: what checks it on the simulated device)"""
    try:
        import torch  # noqa
        have = torch.cuda.is_available()
    except Exception:
        have = False
    if SIM or not have:
        skip(what, ("simulated device" + (" (%s)" % instead if instead else "")) if SIM else "no torch with CUDA here")
    return have and not SIM


def torch_checks():
    if not torch_here("PyTorch on the GPU", None):
        return
    out = os.path.join(OUT, "torch")
    shutil.rmtree(out, ignore_errors=True)
    script = os.path.join(OUT, "ddp.py")
    open(script, "w").write(TORCH)
    plain = subprocess.run([sys.executable, script], capture_output=True, text=True, timeout=120)
    kineto = subprocess.run([sys.executable, script], capture_output=True, text=True, timeout=120,
                            env=dict(os.environ, CHECK_KINETO="1"))
    p = traced([sys.executable, script], out, timeout=120)
    every = traced([sys.executable, script], os.path.join(OUT, "torch-all"), timeout=120, env={"DDPSPY_GPU_API_ALL": "1"})
    both = traced([sys.executable, script], os.path.join(OUT, "torch-kineto"), timeout=120, env={"CHECK_KINETO": "1"})
    recs, rc, err = dump(out)
    if not ok(p.returncode == 0, "a PyTorch DDP job (NCCL, world size 1) runs under the preload: %s" % p.stderr[-400:]):
        return
    g = info(recs)
    ok(g.get("state") == "on" and g.get("dropped") == 0, "PyTorch: CUPTI on, nothing dropped: %s" %
       {k: g.get(k) for k in ("state", "why", "lib", "clock", "dropped", "refused", "lead_ns", "checked")})
    kern = gpu_events(recs, "gpu_kernel")
    ok(len(kern) > 100, "PyTorch: its kernels recorded (%d; e.g. %s)" % (len(kern), sorted({k["kname"][:50] for k in kern})[:4]))
    ar = [e for e in events(recs, "nccl_coll") if e["op"] == "allreduce"]
    ok(len(ar) >= 5, "PyTorch: DDP's NCCL allreduces recorded (%d)" % len(ar))
    # (at world size 1 NCCL launches nothing for an in-place allreduce: seen on an H200, NCCL 2.28.9)
    ext = ext_corrs(recs)
    kc = {k["corr"]: k for k in kern}
    j = [[kc[c]["kname"][:40] for c in ext.get((a["pid"], a["ext"]), ()) if c in kc and nccl_kernel(kc[c]["kname"])] for a in ar]
    ok(ar and not any(j), "PyTorch at world size 1: no allreduce launches an NCCL kernel: %s" % j[:3])
    nv = [e for e in events(recs, "nvtx") if e.get("message") == "step"]
    ok(len(nv) == 5, "PyTorch: torch.cuda.nvtx ranges recorded (%d of 5)" % len(nv))
    cm = events(recs, "cuda_memcpy")
    api = gpu_events(recs, "cuda_api")
    byfn = {}
    for e in api:
        byfn[e.get("fn")] = byfn.get(e.get("fn"), 0) + 1
    fact("torch_records", {"per_kind": per_kind(recs), "kernels": len(kern), "api": len(api),
                           "api_per_kernel": round(len(api) / max(len(kern), 1), 2), "host_cuda_memcpy": len(cm),
                           "api_by_call": dict(sorted(byfn.items(), key=lambda x: -x[1])[:15]),
                           "gpu_record": {k: g.get(k) for k in ("state", "lib", "version", "dropped", "refused", "events", "lead_ns", "checked")}})
    pick = lambda q: [l for l in q.stdout.splitlines() if l.startswith(("launch_us", "kineto_kernels"))]
    fact("torch_launch_us", {"plain": pick(plain), "under_torch_profiler": pick(kineto), "under_ddpspy": pick(p),
                             "under_ddpspy_every_call": pick(every)})
    krecs = dump(os.path.join(OUT, "torch-kineto"))[0]
    kg = of(krecs, "gpu")[-1] if of(krecs, "gpu") else {}
    fact("torch_profiler_under_ddpspy", {"exit": both.returncode, "out": pick(both), "err": both.stderr[-600:],
                                         "ddpspy_gpu": {k: kg.get(k) for k in ("state", "why", "events", "dropped", "client",
                                                                               "client_records", "client_dropped", "client_refused")}})
    # torch.profiler keeps its CUDA kernels under ddpspy (cupti/share.c), and ddpspy its own
    count = lambda q: int(next((l.split()[1] for l in q.stdout.splitlines() if l.startswith("kineto_kernels")), "-1"))
    ok(count(kineto) >= 20000 and count(both) == count(kineto),
       "torch.profiler's trace has its CUDA kernels alone (%d) and under ddpspy (%d)" % (count(kineto), count(both)))
    nk = len(gpu_events(krecs, "gpu_kernel"))
    ok(both.returncode == 0 and kg.get("state") == "on" and kg.get("client") and abs(nk - len(kern)) <= len(kern) // 100,
       "and ddpspy's trace under torch.profiler has the kernels it has without (%d, %d without), sharing CUPTI with "
       "%s" % (nk, len(kern), kg.get("client")))
    # (the script passes its rank to init_process_group, no RANK in its environment: the rank comes
    # from its NCCL communicator)
    r1, r2 = report("torch", out), report("torch-kineto", os.path.join(OUT, "torch-kineto"))
    # (this script has no step structure: its steps are time windows, whose per-step figures follow
    # the run's length, which the profiler stretches; profiler_checks compares training steps)
    v = lambda r: r and (r["verdict"].get("bound"), r["job"].get("steps_analyzed"), [f["kind"] for f in r["findings"]])
    fact("torch_report_with_and_without_profiler", [v(r1), v(r2)])
    ok(r1 and v(r1) == v(r2), "ddpspy's verdict, steps and findings are the same with and without torch.profiler: %s, %s"
       % (v(r1), v(r2)))


def mlp_command():
    """examples/torch/train_mlp.py on the GPU, DDP over NCCL at world size 1: the command and its switches"""
    train = os.path.join(ROOT, "examples", "torch", "train_mlp.py")
    data = os.path.join(OUT, "mlp-data")
    base = ["--data", data, "--samples", "8192", "--hidden", "8192", "--layers", "6", "--batch", "512",
            "--workers", "6", "--steps", "30", "--device", "cuda"]
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=1", train], base


def truth(p):
    """the trainer's own JSON line (its ground truth)"""
    lines = [l for l in p.stdout.splitlines() if l.startswith("{")]
    return json.loads(lines[-1]) if lines else None


def profiler_checks():
    """torch.profiler on training steps (train_mlp.py --torch-profiler 10, scheduled as users write
    it) with and without ddpspy in front: the profiler's window holds the same CUDA events under
    ddpspy as alone (cupti/share.c), and ddpspy's report is the same with the profiler as without"""
    if not torch_here("torch.profiler on a training step", "test_cupti_share's Kineto-shaped client"):
        return
    run, base = mlp_command()
    prof = ["--torch-profiler", "10"]
    alone = subprocess.run(run + base + prof, capture_output=True, text=True, timeout=150, env=env_for_torch())
    outs = {name: os.path.join(OUT, "torch-" + name) for name in ("train", "train-profiled")}
    for o in outs.values():
        shutil.rmtree(o, ignore_errors=True)
    plain = traced(run + base, outs["train"], timeout=150)
    both = traced(run + base + prof, outs["train-profiled"], timeout=150)
    ta, tp, tb = truth(alone), truth(plain), truth(both)
    pa, pb = (ta or {}).get("torch_profiler", {}), (tb or {}).get("torch_profiler", {})
    recs = {name: dump(o)[0] for name, o in outs.items()}
    g = info(recs["train-profiled"])

    def launches(rs):  # ddpspy's launch records, and how far their times reach (s from the first)
        t = sorted(e["t_ns"] for e in gpu_events(rs, "cuda_api") if "aunch" in (e.get("fn") or ""))
        return [len(t), round((t[-1] - t[0]) / 1e9, 3) if t else None]
    fact("torch_profiler_training", {"alone": pa, "under_ddpspy": pb, "step_ms_p50": [t and t["step_ms_p50"] for t in (ta, tp, tb)],
                                     "ddpspy_gpu": {k: g.get(k) for k in ("state", "clock", "client", "client_records", "client_dropped",
                                                                          "client_refused", "client_api_limited", "untimed",
                                                                          "dropped")},
                                     # (what ddpspy's file holds with and without the profiler: records per kind, launch calls)
                                     "records": {n: per_kind(r) for n, r in recs.items()},
                                     "launch_calls": {n: launches(r) for n, r in recs.items()}})
    # (how much of the step before the window still runs when it opens varies from run to run, the
    # host being one step ahead: the counts of two runs agree within one step's events)
    ok(pa.get("cuda_events", 0) > 100 and abs(pb.get("cuda_events", 0) - pa["cuda_events"]) <= pa["cuda_events"] // 10,
       "torch.profiler's 10 training steps hold the CUDA events under ddpspy that they hold alone, within one step's: "
       "%s, %s (%s)" % (pa, pb, both.stderr[-300:] if tb is None else ""))
    ok(not g.get("untimed") and not g.get("dropped") and not g.get("client_dropped"),
       "and ddpspy loses none of its own records to the profiler's flushes: %s" % {k: g.get(k) for k in ("untimed", "dropped",
                                                                                                   "client_dropped")})
    r1, r2 = report("torch-train", outs["train"]), report("torch-train-profiled", outs["train-profiled"])
    # ddpspy's capture is the same with the profiler as without. Its verdict need not be: the
    # profiler's own stop (Kineto gathers its trace on the training thread) stalls a step for
    # hundreds of ms, seen on an H100 (a 271 ms and a 414 ms step against 27 ms), and the report
    # rightly counts that idle GPU.
    v = lambda r: r and (r["job"].get("steps_analyzed"), r["job"].get("step_source"),
                         r["ranks"][0].get("gpu", {}).get("kernels_per_step"), r["ranks"][0].get("gpu", {}).get("launches_per_step"))
    w = lambda r: r and (r["verdict"].get("summary"), r["step"], [(f["kind"], f["severity"]) for f in r["findings"]])
    cov = [c.get("gpu") for c in (r2 or {}).get("coverage", [])]
    fact("torch_profiler_training_report", {"without": v(r1), "with": v(r2), "coverage_with": cov,
                                            "verdict_without": w(r1), "verdict_with": w(r2)})
    ok(r1 and v(r1) == v(r2) and cov == ["cupti-shared"],
       "ddpspy's capture of the training run is the same with torch.profiler as without (steps, step source, kernels "
       "and launch calls a step): %s, %s; coverage with it: %s" % (v(r1), v(r2), cov))


def verdict_checks():
    """examples/torch/train_mlp.py --device cuda (DDP over NCCL, world size 1) under ddpspy: the
    verdict and top finding of the healthy, data-starved and host-sync cases, each against the
    trainer's own step time beside the healthy run, and the overhead (traced vs plain step)"""
    if not torch_here("the GPU verdict on PyTorch", "the testbed's GPU cases: tests/e2e/test_gpu_report.py"):
        return
    run, base = mlp_command()

    def case(name, extra):
        out = os.path.join(OUT, "torch-" + name)
        shutil.rmtree(out, ignore_errors=True)
        p = traced(run + base + extra, out, timeout=150)
        j = report("torch-" + name, out)
        fact("verdict_" + name, {"truth": truth(p), "verdict": j and j["verdict"].get("summary"),
                                 "findings": j and [(f["kind"], f["severity"]) for f in j["findings"]]})
        return truth(p), j, p

    if not fits("the GPU verdict on PyTorch (4 runs)", 150):
        return
    plain = subprocess.run(run + base, capture_output=True, text=True, timeout=150, env=env_for_torch())
    th, jh, p = case("healthy", [])
    if not ok(th is not None and jh is not None, "PyTorch on CUDA under ddpspy: healthy run reported: %s" % p.stderr[-300:]):
        return
    tp = truth(plain)
    if tp:
        print("# PyTorch on CUDA, step p50: plain %.2f ms, under ddpspy %.2f ms (overhead %.1f%%)"
              % (tp["step_ms_p50"], th["step_ms_p50"], 100 * (th["step_ms_p50"] / tp["step_ms_p50"] - 1)))
    data_share = th["ranks"][0]["data_ms"] / th["step_ms_p50"]
    top = lambda j: (j["findings"][0]["kind"], j["findings"][0]["evidence"].get("cause")) if j["findings"] else (None, None)
    print("# healthy: %s; GPU %s; findings %s" % (jh["verdict"]["summary"], jh["ranks"][0].get("gpu"),
                                                  [(f["kind"], f["severity"]) for f in jh["findings"]]))
    ok(jh["verdict"]["bound"] == "compute" or data_share > 0.1,
       "healthy: compute-bound (%s; the trainer waited for data %.0f%% of its step)" % (jh["verdict"]["summary"], 100 * data_share))
    for name, extra, kinds, cause in (("data-starved", ["--slow-data", "2", "--workers", "2"], ("gpu_idle", "data_stall"), "data"),
                                      ("host-sync", ["--host-sync"], ("gpu_idle", "host_sync"), "sync")):
        t, j, p = case(name, extra)
        if not ok(t is not None and j is not None, "PyTorch on CUDA: %s run reported: %s" % (name, p.stderr[-300:])):
            continue
        loss = 1 - th["step_ms_p50"] / t["step_ms_p50"]
        k, c = top(j)
        f = j["findings"][0] if j["findings"] else {"severity": 0}
        print("# %s: %s; loss %.3f against healthy; findings %s" % (name, j["verdict"]["summary"], loss,
                                                                  [(x["kind"], x["severity"]) for x in j["findings"]]))
        ok(k in kinds and (k != "gpu_idle" or c == cause) and abs(f["severity"] - loss) <= 0.15 * loss + 0.02,
           "%s: top finding %s (cause %s), severity %.3f against the trainer's loss %.3f" % (name, k, c, f["severity"], loss))


def env_for_torch():
    e = dict(os.environ)
    e.update(env_for())
    return e


def ctor_checks(bin_):
    """a library whose constructor starts CUDA before ddpspy's (DT_NEEDED): capture starts in
    ddpspy's constructor and says so"""
    if SIM:
        skip("CUDA started by a library's constructor", "tested on the simulated device by test_cupti")
        return
    lib = os.path.join(bin_, "libcuda_ctor.so")
    app = os.path.join(bin_, "cuda_c_ctor")
    b1 = subprocess.run([NVCC, "-O2", "-cudart", "shared", "-Xcompiler", "-fPIC", "-shared", "-o", lib,
                         os.path.join(ROOT, "testapps", "cuda_ctor.c")], capture_output=True, text=True)
    b2 = subprocess.run([NVCC, "-O2", "-cudart", "shared", "-DCUDA_CTOR", "-o", app, os.path.join(ROOT, "testapps", "cuda_c.c"),
                         "-L" + bin_, "-lcuda_ctor", "-Xlinker", "-rpath," + bin_], capture_output=True, text=True)
    if not ok(b1.returncode == 0 and b2.returncode == 0, "cuda_c_ctor builds: %s" % (b1.stderr + b2.stderr)[-300:]):
        return
    out = os.path.join(OUT, "ctor")
    shutil.rmtree(out, ignore_errors=True)
    p = traced([app], out, env=env_for(), timeout=60)
    recs = dump(out)[0]
    g = info(recs)
    fact("ctor", {"state": g.get("state"), "why": g.get("why"), "memcpy": len(gpu_events(recs, "gpu_memcpy"))})
    ok(p.returncode == 0 and g.get("state") == "on" and "constructor" in g.get("why", "") and len(gpu_events(recs, "gpu_memcpy")) == 2,
       "CUDA started by a library's constructor: capture starts at ddpspy's (%s), the copies recorded" % g.get("why"))


ONLY = sys.argv[sys.argv.index("--only") + 1].split(",") if "--only" in sys.argv else None


def part(name, fn, *args):
    """one part of the run; an exception (a timeout, a program that printed nothing) fails that part
    alone, saying so, and the run goes on with the next (--only NAME,...: those parts alone)"""
    if ONLY and name not in ONLY:
        return
    try:
        fn(*args)
    except Exception as e:  # noqa: BLE001 (whatever it was, the other parts still run)
        ok(False, "%s: %s: %s" % (name, type(e).__name__, str(e)[:300]))


def launch_cost(app):
    """host ns per launch of a tiny kernel (gpu_app launches), plain and under ddpspy, alternated"""
    plain, traced_, every, client, shared = [], [], [], [], []
    env = dict(env_for(), **({"SIMGPU_KERNELS": "tick=1"} if SIM else {}))  # (a 1 us kernel on the simulated device)
    cl = dict(env, GPU_APP_CLIENT="1")  # a torch.profiler-shaped client profiling the launches (bench/gpu.py)
    for i in range(3):
        q = subprocess.run([app, "launches"], capture_output=True, text=True, timeout=60, env=dict(os.environ, **env))
        t = traced([app, "launches"], os.path.join(OUT, "launches"), env=env, timeout=60)
        a = traced([app, "launches"], os.path.join(OUT, "launches-all"), env=dict(env, DDPSPY_GPU_API_ALL="1"), timeout=60)
        c = subprocess.run([app, "launches"], capture_output=True, text=True, timeout=60, env=dict(os.environ, **cl))
        b = traced([app, "launches"], os.path.join(OUT, "launches-client"), env=cl, timeout=60)
        for r, into in ((q, plain), (t, traced_), (a, every), (c, client), (b, shared)):
            line = [l for l in r.stdout.splitlines() if l.startswith("{")]
            if line:
                into.append(json.loads(line[-1])["launch_ns"])
    fact("gpu_app_launch_ns", {"plain": plain, "under_ddpspy": traced_, "under_ddpspy_every_call": every,
                               "client_alone": client, "ddpspy_sharing_with_client": shared})
    ok(len(plain) == 3 and len(traced_) == 3 and len(client) == 3 and len(shared) == 3,
       "host ns per launch, plain %s, under ddpspy %s (every call recorded: %s); a profiler client alone %s, "
       "ddpspy sharing with it %s" % (plain, traced_, every, client, shared))


def main():
    os.makedirs(OUT, exist_ok=True)
    where = "the simulated device" if SIM else "this machine's GPU"
    smi = "" if SIM else subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                                        capture_output=True, text=True).stdout.strip()
    print("# GPU capture checks on %s %s" % (where, smi))
    torch_v = "" if SIM else subprocess.run([sys.executable, "-c", "import torch; print(torch.__version__, torch.version.cuda, "
                                             "torch.cuda.nccl.version())"], capture_output=True, text=True).stdout.strip()
    fact("machine", {"where": where, "gpu": smi, "torch": torch_v, "nvcc": subprocess.run(
        [NVCC, "--version"], capture_output=True, text=True).stdout.strip().splitlines()[-1:]})
    bin_ = os.path.join(OUT, "bin")
    os.makedirs(bin_, exist_ok=True)
    libs, incs = python_lib_dirs()
    nccl_h = [i for i in incs + [os.path.join(CUDA, "include")] if os.path.exists(os.path.join(i, "nccl.h"))]
    nccl_so = ([os.path.join(SIMDIR, "libnccl.so.2")] if SIM else
               [os.path.join(d, "libnccl.so.2") for d in libs + [os.path.join(CUDA, "lib64")]
                if os.path.exists(os.path.join(d, "libnccl.so.2"))])
    fact("libraries", {"lib_dirs": libs, "nccl_h": nccl_h[:1], "nccl_so": nccl_so[:1]})
    # every program built at once (nvcc takes seconds each)
    todo = {"gpu_app": ("gpu_app.cu", [], "shared"), "gpu_probe": ("gpu_probe.cu", [], "shared"),
            "cupti_rules": ("cupti_rules.cu", [], "shared")}
    if not SIM:
        todo["gpu_app_static"] = ("gpu_app.cu", [], "static")
    if nccl_h and nccl_so:
        todo["nccl_app"] = ("nccl_app.cu", ["-I" + nccl_h[0], "-Xlinker", nccl_so[0]], "shared")
    if ONLY and not set(ONLY) & {"gpu_app", "sharing CUPTI", "CUPTI's rules", "gpu_probe", "static cudart", "nccl_app",
                                 "launch cost"}:
        todo = {}  # (--only parts that need none of them)
    procs = {n: subprocess.Popen([NVCC, "-O2", "-std=c++17", "-cudart", c, "-o", os.path.join(bin_, n),
                                  os.path.join(ROOT, "testapps", src)] + x, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 text=True) for n, (src, x, c) in todo.items()}
    built = {}
    for n, p in procs.items():
        o, e = p.communicate(timeout=300)
        built[n] = ok(p.returncode == 0, "%s builds with nvcc: %s" % (n, e[-400:]))
    app = os.path.join(bin_, "gpu_app")
    if built.get("gpu_app"):
        part("gpu_app", gpu_app_checks, app)
    if built.get("gpu_app") and fits("sharing CUPTI", 20):
        part("sharing CUPTI", share_checks, app)
    if built.get("cupti_rules") and fits("CUPTI's rules", 30):
        part("CUPTI's rules", rules_checks, os.path.join(bin_, "cupti_rules"))
    if built.get("gpu_probe") and fits("gpu_probe", 30):
        part("gpu_probe", probe_checks, os.path.join(bin_, "gpu_probe"))
    part("static cudart", static_checks, built.get("gpu_app_static"))
    if fits("constructor", 20):
        part("constructor", ctor_checks, bin_)
    if "nccl_app" not in todo and (not ONLY or "nccl_app" in ONLY):
        skip("NCCL on the GPU", "no nccl.h and libnccl.so.2 found (pip's nvidia-nccl, or $CUDA_HOME)")
    elif built.get("nccl_app") and fits("nccl_app", 60):
        part("nccl_app", nccl_checks, os.path.join(bin_, "nccl_app"))
    if built.get("gpu_app") and fits("launch cost", 30):
        part("launch cost", launch_cost, app)
    if fits("PyTorch on the GPU", 90):
        part("PyTorch", torch_checks)
    if fits("torch.profiler on a training step", 60):
        part("torch.profiler", profiler_checks)
    part("the verdict on PyTorch", verdict_checks)
    # (every copy call has a CUPTI record of its call: a report that says otherwise of a run where
    # no other tool took CUPTI's callbacks is a false alarm)
    ok(not {k: v for k, v in STOPPED.items() if k not in ("late-handle", "nccl-late-tracer")},
       "no report says CUPTI's records stopped but the late tracers': %s" % STOPPED)
    print("# traces in %s; %.0f s" % (OUT, time.monotonic() - T0))
    done()


main()
