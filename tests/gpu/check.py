"""GPU capture against the real libraries, on a machine with a GPU (docs/gpu.md): the checks of
tests/e2e/test_cupti.py, test_nccl.py and test_cuda.py that do not depend on the simulated device's
time model, on testapps/gpu_app.cu and testapps/nccl_app.cu built here with nvcc against the real
libcudart and libnccl, then a PyTorch job (CUDA kernels, NCCL allreduce through DDP at world size 1,
NVTX ranges) under the preload, and the report's verdict on examples/torch/train_mlp.py --device cuda
(healthy, data-starved, host-sync). --sim runs the same checks on the simulated device instead (that is
how this script is itself tested on machines without a GPU: tests/e2e/test_gpu_script.py).

usage: tests/gpu/check.py [--sim] [--out DIR]    (from the repository root, after `make`)
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

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "e2e"))
from lib import *  # noqa: E402  (ok, skip, done, dump, of, events, LIB, DDPSPY, ROOT, BUILD, SIMDIR)

SIM = "--sim" in sys.argv
OUT = sys.argv[sys.argv.index("--out") + 1] if "--out" in sys.argv else tempfile.mkdtemp(prefix="ddpspy-gpu-")
CUDA = os.environ.get("CUDA_HOME", "/usr/local/cuda")
NVCC = shutil.which("nvcc") or os.path.join(CUDA, "bin", "nvcc")
SLACK = 50000  # ns: two clocks' conversions (the host's calibration, CUPTI's GPU clock)


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
        e["SIMGPU_KERNELS"] = "spin=5000,tick=2000,forward=2000,backward=3000"
    else:
        libs, _ = python_lib_dirs()
        path = [d for d in libs] + [os.path.join(CUDA, "lib64")] + os.environ.get("LD_LIBRARY_PATH", "").split(":")
        e["LD_LIBRARY_PATH"] = ":".join(p for p in path if p)
    if os.path.isdir(GPU_LIBS):
        e["LD_LIBRARY_PATH"] += ":" + GPU_LIBS
    return e


def build(src, out, extra=(), cudart="shared"):
    cmd = [NVCC, "-O2", "-std=c++17", "-cudart", cudart, "-o", out, src] + list(extra)
    p = subprocess.run(cmd, capture_output=True, text=True)
    return p.returncode == 0, p.stderr[-400:]


def info(recs):
    g = of(recs, "gpu")
    return g[0] if g else {}


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
        ok(s0["t_ns"] - SLACK <= end <= s0["t_ns"] + s0["dur_ns"] + SLACK,
           "the first kernel ends while the host waits for it in cudaStreamSynchronize: %.3f ms into a %.3f ms wait"
           % ((end - s0["t_ns"]) / 1e6, s0["dur_ns"] / 1e6))
    hc = [e for e in events(recs, "cuda_memcpy") if e["tid"] == main]
    if len(hc) == 3 and len(cp) == 3:
        h, c = hc[1], cp[1]
        ok(h["t_ns"] - SLACK <= c["t_ns"] and c["t_ns"] + c["dur_ns"] <= h["t_ns"] + h["dur_ns"] + SLACK,
           "the pageable copy's GPU time lies inside the host call that waited for it: GPU %.3f..%.3f ms into it, "
           "host %.3f ms" % ((c["t_ns"] - h["t_ns"]) / 1e6, (c["t_ns"] + c["dur_ns"] - h["t_ns"]) / 1e6, h["dur_ns"] / 1e6))
    lead = [k["t_ns"] - api[k["corr"]]["t_ns"] for k in kern if k["corr"] in api]
    print("# gpu_app: kernel start minus its launch call's start, us: %s" % [round(x / 1e3, 1) for x in lead])
    print("# gpu_app: kernel durations, us: %s" % [round(k["dur_ns"] / 1e3, 1) for k in kern])


def static_checks():
    """nvcc's default, static cudart: no wrapper sees its calls; CUPTI sees its kernels and calls."""
    if SIM:
        skip("a static-cudart program", "the simulated device has no CUDA driver for a static cudart to load")
        return
    app = os.path.join(OUT, "bin", "gpu_app_static")
    built, why = build(os.path.join(ROOT, "testapps", "gpu_app.cu"), app, cudart="static")
    if not ok(built, "gpu_app builds with nvcc's default static cudart: %s" % why):
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


def nccl_checks(app, n):
    out = os.path.join(OUT, "nccl%d" % n)
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    env = dict(os.environ, LD_PRELOAD=LIB, DDPSPY_OUT=out, **env_for())
    idfile = os.path.join(out, "id")
    ps = [subprocess.Popen([app, str(r), str(n), idfile, "4"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True) for r in range(n)]
    res = [p.communicate(timeout=300) for p in ps]
    recs, rc, err = dump(out)
    if not ok(all(p.returncode == 0 for p in ps), "nccl_app, %d rank(s), runs under the preload: %s"
              % (n, [e[-300:] for o, e in res])):
        return
    inits = [e for e in events(recs, "nccl_init")]
    ok(len(inits) == n and len({e["comm"] for e in inits}) == 1 and all(e["ret"] == 0 for e in inits),
       "%d rank(s): ncclCommInitRank recorded, one communicator id: %s" % (n, [(e["comm_rank"], e["comm"]) for e in inits]))
    ar = [e for e in events(recs, "nccl_coll") if e["op"] == "allreduce"]
    ok(len(ar) == 4 * n and sorted({e["seq"] for e in ar}) == [0, 1, 2, 3] and all(e["bytes"] == 32 << 20 for e in ar),
       "%d rank(s): every allreduce with its sequence number and bytes" % n)
    joined = 0
    pids = {e["pid"] for e in ar}
    for pid in pids:
        g = [e for e in gpu_events(recs) if e["pid"] == pid]
        ext = {e["ext_id"]: e["corr"] for e in g if e["kind"] == "gpu_extcorr"}
        kern = {e["corr"]: e for e in g if e["kind"] == "gpu_kernel"}
        for a in (e for e in ar if e["pid"] == pid):
            k = kern.get(ext.get(a["ext"]))
            joined += bool(k and k["kname"].startswith(("ncclDevKernel", "ncclKernel")))
    ok(joined == len(ar), "%d rank(s): each allreduce joins an NCCL kernel through its external id (%d of %d)"
       % (n, joined, len(ar)))
    names = sorted({e["kname"][:60] for e in gpu_events(recs, "gpu_kernel") if "nccl" in e["kname"].lower()})
    drv = sorted({e["fn"] for e in gpu_events(recs, "cuda_api") if e.get("driver") == 1})
    print("# nccl_app %d rank(s): NCCL kernels %s; driver launches kept: %s" % (n, names, drv))


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


def torch_checks():
    try:
        import torch  # noqa
        have = torch.cuda.is_available()
    except Exception:
        have = False
    if SIM or not have:
        skip("PyTorch on the GPU", "simulated device" if SIM else "no torch with CUDA here")
        return
    out = os.path.join(OUT, "torch")
    shutil.rmtree(out, ignore_errors=True)
    script = os.path.join(OUT, "ddp.py")
    open(script, "w").write(TORCH)
    plain = subprocess.run([sys.executable, script], capture_output=True, text=True, timeout=600)
    kineto = subprocess.run([sys.executable, script], capture_output=True, text=True, timeout=600,
                            env=dict(os.environ, CHECK_KINETO="1"))
    p = traced([sys.executable, script], out, timeout=600)
    both = traced([sys.executable, script], os.path.join(OUT, "torch-kineto"), timeout=600, env={"CHECK_KINETO": "1"})
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
    ext = {e["ext_id"]: e["corr"] for e in gpu_events(recs, "gpu_extcorr")}
    kc = {k["corr"]: k for k in kern}
    j = [kc.get(ext.get(a["ext"]), {}).get("kname", "")[:40] for a in ar]
    ok(ar and all(x.startswith(("ncclDevKernel", "ncclKernel")) for x in j), "PyTorch: each allreduce joins its NCCL kernel: %s" % j[:3])
    nv = [e for e in events(recs, "nvtx") if e.get("message") == "step"]
    ok(len(nv) == 5, "PyTorch: torch.cuda.nvtx ranges recorded (%d of 5)" % len(nv))
    cm = events(recs, "cuda_memcpy")
    print("# PyTorch: %d kernels, %d runtime API records, %d host cudaMemcpy* events" %
          (len(kern), len(gpu_events(recs, "cuda_api")), len(cm)))
    pick = lambda q: [l for l in q.stdout.splitlines() if l.startswith(("launch_us", "kineto_kernels"))]
    print("# PyTorch launch-heavy loop (y.add_(1) x 20000), host us per launch: plain %s; under torch.profiler %s; "
          "under ddpspy %s" % (pick(plain), pick(kineto), pick(p)))
    print("# torch.profiler under ddpspy (ddpspy holds CUPTI from cuInit): exit %d, %s; ddpspy's gpu record: %s"
          % (both.returncode, pick(both) or both.stderr[-300:], info(dump(os.path.join(OUT, "torch-kineto"))[0]).get("state")))


def verdict_checks():
    """examples/torch/train_mlp.py --device cuda (DDP over NCCL, world size 1) under ddpspy: the
    verdict and top finding of the healthy, data-starved and host-sync cases, each against the
    trainer's own step time beside the healthy run, and the overhead (traced vs plain step)"""
    try:
        import torch  # noqa
        have = torch.cuda.is_available()
    except Exception:
        have = False
    if SIM or not have:
        skip("the GPU verdict on PyTorch", "simulated device (the testbed's GPU cases: tests/e2e/test_gpu_report.py)"
             if SIM else "no torch with CUDA here")
        return
    train = os.path.join(ROOT, "examples", "torch", "train_mlp.py")
    data = os.path.join(OUT, "mlp-data")
    base = ["--data", data, "--samples", "8192", "--hidden", "8192", "--layers", "6", "--batch", "512",
            "--workers", "6", "--steps", "30", "--device", "cuda"]
    run = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=1", train]

    def truth(p):
        lines = [l for l in p.stdout.splitlines() if l.startswith("{")]
        return json.loads(lines[-1]) if lines else None

    def case(name, extra):
        out = os.path.join(OUT, "torch-" + name)
        shutil.rmtree(out, ignore_errors=True)
        p = traced(run + base + extra, out, timeout=900)
        r = subprocess.run([DDPSPY, "report", "--json", out], capture_output=True, text=True)
        j = json.loads(r.stdout) if r.stdout.startswith("{") else None
        return truth(p), j, p

    plain = subprocess.run(run + base, capture_output=True, text=True, timeout=900, env=env_for_torch())
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


def main():
    os.makedirs(OUT, exist_ok=True)
    where = "the simulated device" if SIM else "this machine's GPU"
    smi = "" if SIM else subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                                        capture_output=True, text=True).stdout.strip()
    print("# GPU capture checks on %s %s" % (where, smi))
    os.makedirs(os.path.join(OUT, "bin"), exist_ok=True)
    app = os.path.join(OUT, "bin", "gpu_app")
    built, why = build(os.path.join(ROOT, "testapps", "gpu_app.cu"), app)
    if ok(built, "gpu_app builds with nvcc -cudart shared: %s" % why):
        gpu_app_checks(app)
    static_checks()
    libs, incs = python_lib_dirs()
    nccl_h = [i for i in incs + [os.path.join(CUDA, "include")] if os.path.exists(os.path.join(i, "nccl.h"))]
    nccl_so = ([os.path.join(SIMDIR, "libnccl.so.2")] if SIM else
               [os.path.join(d, "libnccl.so.2") for d in libs + [os.path.join(CUDA, "lib64")]
                if os.path.exists(os.path.join(d, "libnccl.so.2"))])
    if nccl_h and nccl_so:
        napp = os.path.join(OUT, "bin", "nccl_app")
        built, why = build(os.path.join(ROOT, "testapps", "nccl_app.cu"), napp,
                           ["-I" + nccl_h[0], "-Xlinker", nccl_so[0]])
        if ok(built, "nccl_app builds: %s" % why):
            nccl_checks(napp, 2 if SIM else 1)
    else:
        skip("NCCL on the GPU", "no nccl.h and libnccl.so.2 found (pip's nvidia-nccl, or $CUDA_HOME)")
    torch_checks()
    verdict_checks()
    print("# traces in %s" % OUT)
    done()


main()
