"""GPU capture through CUPTI (cupti/gpu.c) on the simulated device: testapps/gpu_app.cu runs under the
preload with LD_LIBRARY_PATH=build/simgpu, where the stand-in cudart plays the driver's part at cuInit
(CUDA_INJECTION64_PATH) and the stand-in CUPTI delivers real record structs. `ddpspy dump --json` must
show every kernel (its modelled duration, stream, grid, name) and copy (bytes, direction, pinned or
pageable) joined to the runtime call that launched it; GPU times on the host's clock, inside the host
calls that waited for them; the subscriber-taken, dropped-records and late-start paths; nothing at all
with DDPSPY_GPU=0."""
import json
import os
import shutil
import subprocess
from lib import *

need_sim("GPU capture (CUPTI)", "cupti.h", "cupti/gpu.c")

MIB64 = 64 << 20
SLACK = 20000  # ns: the host clock's conversion (calibration) against CLOCK_MONOTONIC, with room
d = tmpdir("cupti")


def capture(name, extra=None, app="gpu_app"):
    out = os.path.join(d, name)
    shutil.rmtree(out, ignore_errors=True)  # (a rerun reads its own run's files only)
    env = {"LD_LIBRARY_PATH": SIMDIR, "SIMGPU_KERNELS": "spin=5000,tick=2000"}
    env.update(extra or {})
    p = traced([os.path.join(APPS, app), "timeline"], out, env=env)
    recs, rc, err = dump(out)
    return p, recs


def gpu_events(recs, kind=None):
    return [r for r in of(recs, "gpu_event") if kind is None or r["kind"] == kind]


def info(recs):
    g = of(recs, "gpu")
    return g[0] if g else {}


p, recs = capture("on")
ok(p.returncode == 0, "gpu_app runs under the preload on the simulated device: %s" % p.stderr[-300:])
main = of(recs, "process")[0]["pid"] if of(recs, "process") else -1
g = info(recs)
ok(g.get("state") == "on" and g.get("clock") == "monotonic" and g.get("why", "").startswith("started at cuInit")
   and g.get("lib", "").endswith("simgpu/libcupti.so.13") and g.get("version") == 130001,
   "CUPTI starts at cuInit through CUDA_INJECTION64_PATH, from next to the program's libcudart, with its "
   "timestamps on CLOCK_MONOTONIC: %s" % g)
ok(g.get("dropped") == 0 and g.get("refused") == 0 and g.get("unwritten") == 0 and g.get("events") == g.get("read") > 0,
   "nothing lost, and the file holds every record it says it wrote: %s" % g)

kern = gpu_events(recs, "gpu_kernel")
api = {e["corr"]: e for e in gpu_events(recs, "cuda_api")}
names = [e["kname"] for e in kern]
ok(names == ["_Z4spinPfi"] + ["_Z4tickPfi"] * 3 + ["_Z4spinPfi"] * 4,
   "every kernel, in launch order, its name whole: %s" % names)
durs = [e["dur_ns"] for e in kern]
ok(len(kern) == 8 and all(abs(e["dur_ns"] - (5000000 if "spin" in e["kname"] else 2000000)) <= 1000 for e in kern),
   "each kernel's GPU time is its modelled one (spin 5 ms, tick 2 ms): %s" % durs)
streams = [e["stream"] for e in kern]
ok(len(set(streams[:5])) == 1 and streams[5] != streams[4] and streams[7] not in (streams[0], streams[5])
   and streams[6] == streams[0],
   "streams: five kernels on the first, one on a second, one on the legacy default stream: %s" % streams)
ok(all(e["grid_x"] == 4096 and e["block_x"] == 256 and e["grid_y"] == 1 and e["block_z"] == 1 for e in kern),
   "grid and block dimensions as launched (<<<4096, 256>>>)")
joined = [api.get(e["corr"], {}) for e in kern]
# CUPTI names a thread by the low 32 bits of its pthread_t, not its tid (so on an H200: docs/gpu.md)
low = {int(t["pthread"], 16) & 0xffffffff: t["tid"] for t in of(recs, "thread") if t.get("pthread")}
ok(all("LaunchKernel" in (a.get("fn") or "") and low.get(a.get("thread")) == main for a in joined),
   "every kernel joins, by correlation id, the launch call the main thread made (CUPTI's thread id the low half "
   "of its pthread_t): %s" % [(a.get("fn"), a.get("thread"), low.get(a.get("thread"))) for a in joined])
ok(all(a and a["t_ns"] <= e["t_ns"] for a, e in zip(joined, kern)) and g.get("lead_ns") == 0 and g.get("checked") == 11,
   "no kernel or copy starts before the call that launched it (the writer checked %s of them, lead %s ns)"
   % (g.get("checked"), g.get("lead_ns")))

cp = gpu_events(recs, "gpu_memcpy")
got = [(e["copy"], e["src"], e["dst"], e["async"], e["bytes"]) for e in cp]
want = [("htod", "pinned", "device", 1, MIB64), ("htod", "pageable", "device", 1, MIB64),
        ("dtoh", "device", "pinned", 0, MIB64)]
ok(got == want, "the three 64 MiB copies with direction, pinned or pageable, async: %s" % got)
ok(all("Memcpy" in (api.get(e["corr"], {}).get("fn") or "") for e in cp),
   "each copy joins its cudaMemcpy/cudaMemcpyAsync call")
host_cp = [e for e in events(recs, "cuda_memcpy") if e["tid"] == main]
if len(cp) == 3 and len(host_cp) == 3:
    # the pageable copy holds the host for the copy: the GPU's copy lies inside the host's call, but
    # for its last chunk's DMA (11 us: below), within the clocks' slack
    h, gp = host_cp[1], cp[1]
    ok(h["t_ns"] - SLACK <= gp["t_ns"] and gp["t_ns"] + gp["dur_ns"] <= h["t_ns"] + h["dur_ns"] + SLACK,
       "the pageable copy's GPU time lies inside the host call that waited for it, on one clock: GPU %.3f..%.3f ms, "
       "host %.3f..%.3f ms" % (ms(gp["t_ns"] - h["t_ns"]), ms(gp["t_ns"] + gp["dur_ns"] - h["t_ns"]), 0,
                               ms(h["dur_ns"])))
else:
    ok(False, "three copies on each side: %d on the GPU, %d host calls" % (len(cp), len(host_cp)))

hs = [e for e in events(recs, "cuda_sync") if e["tid"] == main and e["what"] in ("device", "stream", "event")]
gs = gpu_events(recs, "gpu_sync")
ok([e["sync"] for e in gs] == ["stream_synchronize"] + ["event_synchronize"] * 5 + ["context_synchronize"],
   "CUPTI's synchronization records: one stream, five event, one context: %s" % [e["sync"] for e in gs])
inside = [h["t_ns"] - SLACK <= y["t_ns"] and y["t_ns"] + y["dur_ns"] <= h["t_ns"] + h["dur_ns"] + SLACK
          for h, y in zip(hs, gs)]
ok(len(hs) == len(gs) == 7 and all(inside),
   "each synchronization CUPTI saw lies inside the one the preload recorded around the same call (%s)" % inside)
if kern and hs:
    k0, s0 = kern[0], hs[0]
    end = k0["t_ns"] + k0["dur_ns"]
    ok(s0["t_ns"] <= end <= s0["t_ns"] + s0["dur_ns"] + SLACK,
       "the first kernel ends while the host waits for it in cudaStreamSynchronize: %.3f ms into a %.3f ms wait"
       % (ms(end - s0["t_ns"]), ms(s0["dur_ns"])))
text = subprocess.run([DDPSPY, "dump", os.path.join(d, "on")], capture_output=True, text=True).stdout
ok('kname="_Z4spinPfi"' in text and "gpu on: started at cuInit" in text,
   "the text dump names kernels and says how GPU capture started")

# a host whose clock is off (test-only DDPSPY_CLOCK_OFFSET_NS): GPU times are put on the same
# shifted clock as the host's events, so they still line up
p, recs = capture("offset", {"DDPSPY_CLOCK_OFFSET_NS": "5000000000"})
hc, gc = events(recs, "cuda_memcpy"), gpu_events(recs, "gpu_memcpy")
ok(p.returncode == 0 and len(hc) == 3 and len(gc) == 3 and hc[1]["t_ns"] - SLACK <= gc[1]["t_ns"]
   and gc[1]["t_ns"] + gc[1]["dur_ns"] <= hc[1]["t_ns"] + hc[1]["dur_ns"] + SLACK,
   "with the host's clock 5 s off, the pageable copy's GPU time still lies inside its host call")

# built with --default-stream per-thread: the _ptsz launches, and the kernels on the thread's own
# default stream instead of the legacy one
p, recs = capture("per-thread", app="gpu_app_pt")
kern = gpu_events(recs, "gpu_kernel")
api = {e["corr"]: e for e in gpu_events(recs, "cuda_api")}
fns = sorted({api.get(k["corr"], {}).get("fn") for k in kern})
st = [k["stream"] for k in kern]
ok(p.returncode == 0 and len(kern) == 8 and fns == ["cudaLaunchKernel_ptsz_v7000"] and st[7] not in (7, st[0], st[5]),
   "per-thread default stream: every launch a _ptsz one (%s), the last kernel on the thread's own default stream, "
   "not the legacy one: %s" % (fns, st))

# another profiler holds the subscriber: said once, host capture goes on, the program unchanged
p, recs = capture("taken", {"SIMGPU_CUPTI_TAKEN": "1"})
g = info(recs)
ok(p.returncode == 0 and '"round_trip": true' in p.stdout, "with CUPTI taken, the program runs as before")
ok(g.get("state") == "taken" and p.stderr.count("another profiler holds CUPTI") == 1 and not gpu_events(recs),
   "CUPTI taken: said once on stderr and in the file, no GPU records: %s / %r" % (g.get("state"), p.stderr[-200:]))
ok(len(events(recs, "cuda_memcpy")) == 3 and len(events(recs, "cuda_sync")) == 11,
   "CUPTI taken: the host-side CUDA calls are still recorded")

# cuptiSubscribe_v2: ddpspy subscribes by name, and a refusal names who holds CUPTI
p, recs = capture("taken-named", {"SIMGPU_CUPTI_TAKEN": "Nsight Systems"})
g = info(recs)
ok(p.returncode == 0 and g.get("state") == "taken" and g.get("holder") == "Nsight Systems"
   and g.get("why", "").startswith("Nsight Systems holds CUPTI") and p.stderr.count("Nsight Systems holds CUPTI") == 1,
   "CUPTI taken by a named subscriber: the file and stderr name it (%s / %s)" % (g.get("holder"), g.get("why")))
# a buffer CUPTI completes into ddpspy's callback that ddpspy never handed out (another client's) is
# neither read nor written, only counted; its own records are all there
p, recs = capture("foreign", {"SIMGPU_CUPTI_FOREIGN": "1"})
g = info(recs)
ok(p.returncode == 0 and g.get("foreign", 0) > 0 and len(gpu_events(recs, "gpu_kernel")) == 8
   and not [e for e in gpu_events(recs, "cuda_api") if not e.get("fn")],
   "buffers ddpspy did not hand out are left alone (%s of them), its own records whole" % g.get("foreign"))

# a libcupti the process loaded already (PyTorch links Kineto's) is the one used: a second copy
# would be a second CUPTI in one process
alt = os.path.join(d, "alt")
os.makedirs(alt, exist_ok=True)
shutil.copy(os.path.join(SIMDIR, "libcupti.so.13"), alt)
p, recs = capture("loaded", {"LD_PRELOAD": LIB + ":" + os.path.join(alt, "libcupti.so.13")})
ok(p.returncode == 0 and info(recs).get("lib") == os.path.join(alt, "libcupti.so.13")
   and len(gpu_events(recs, "gpu_kernel")) == 8,
   "the libcupti already in the process is used, not another copy: %s" % info(recs).get("lib"))

# An asynchronous copy from pageable memory returns once its last chunk is staged: that chunk's DMA
# ends after the call returned ("the DMA to final destination may not have completed",
# cuda_runtime_api.h; 12 us after, for 64 MiB on an H200), by about a 64 KiB chunk's time at 6 GB/s
# (11 us). Seen in CUPTI's own records: the copy's end against its runtime call's (no bytes moved
# for real: this machine's own copying of 64 MiB would hold the call past the modelled end).
def pageable_tail(k):
    p, recs = capture("pageable-tail", {"SIMGPU_MOVE_BYTES": "0"})
    api = {e["corr"]: e for e in gpu_events(recs, "cuda_api")}
    c = [e for e in gpu_events(recs, "gpu_memcpy") if e["src"] == "pageable" and e["async"]]
    a = api.get(c[0]["corr"]) if c else None
    tail = (c[0]["t_ns"] + c[0]["dur_ns"]) - (a["t_ns"] + a["dur_ns"]) if a else None
    return [(tail is not None and 5000 <= tail <= 20000,
             "the pageable asynchronous copy's DMA ends %s us after its call returned (a 64 KiB chunk: 11 us)"
             % (tail / 1e3 if tail is not None else None))]


live("pageable tail", pageable_tail)

# records CUPTI had no buffer for: counted into the file
total = info(capture("count")[1]).get("read", 0)
p, recs = capture("drops", {"SIMGPU_CUPTI_MAX_RECORDS": "10"})
g = info(recs)
ok(g.get("read") == 10 and g.get("dropped") == total - 10 and total > 10,
   "records CUPTI dropped are stated: %s read + %s dropped = %s made" % (g.get("read"), g.get("dropped"), total))

# records CUPTI could not time (start and end 0, CUPTI_TIMESTAMP_UNKNOWN): the kernel still running
# at the forced flush at exit, as an H200 gave it, and every third kernel on request. Left out and
# counted, never a time: no event at 0, and the launch-order check sees no lead from them
for name, extra, want, kernels in (("untimed-exit", {"GPU_APP_END": "running", "SIMGPU_KERNELS": "spin=50000,tick=2000"}, 1, 8),
                                   ("untimed-every3", {"SIMGPU_CUPTI_UNTIMED": "3"}, 2, 6)):
    p, recs = capture(name, extra)
    g = info(recs)
    kern = gpu_events(recs, "gpu_kernel")
    timed = [e for e in gpu_events(recs) if e["kind"] != "gpu_extcorr"]
    ok(p.returncode == 0 and g.get("untimed") == want and len(kern) == kernels and all(e["t_ns"] > 0 for e in timed)
       and g.get("lead_ns") == 0 and g.get("checked") == kernels + 3,
       "%s: %d record(s) with no times left out and counted (untimed %s), %d kernels kept, none at time 0, the "
       "launch-order check clean (lead %s ns over %s)" % (name, want, g.get("untimed"), len(kern), g.get("lead_ns"),
                                                          g.get("checked")))
    if name == "untimed-exit":  # the report says so, and takes the rest as it is
        out = os.path.join(d, "untimed-report")
        shutil.rmtree(out, ignore_errors=True)
        traced([os.path.join(APPS, "gpu_app"), "timeline"], out, env=dict(extra, LD_LIBRARY_PATH=SIMDIR, RANK="0",
                                                                           WORLD_SIZE="1"))
        r = subprocess.run([DDPSPY, "report", "--json", out], capture_output=True, text=True)
        j = json.loads(r.stdout) if r.stdout.startswith("{") else {}
        gj = j.get("job", {}).get("gpu", {})
        t = subprocess.run([DDPSPY, "report", out], capture_output=True, text=True).stdout
        ok(gj.get("untimed_records") == 1 and gj.get("dropped_records") == 0 and "1 device record no times" in t,
           "the report counts it (job.gpu %s) and says so: %s" % (gj, [l for l in t.splitlines() if "no times" in l]))

# a copy after ddpspy's last flush at exit (an atexit handler registered before CUDA started runs
# after ddpspy's): its call has no CUPTI record, as none made then is collected; the report does
# not take that for CUPTI's records having stopped early (another client taking its callbacks)
out = os.path.join(d, "late-copy")
shutil.rmtree(out, ignore_errors=True)
p = traced([os.path.join(APPS, "gpu_app"), "timeline"], out, env={"GPU_APP_END": "late-copy", "LD_LIBRARY_PATH": SIMDIR,
                                                                   "RANK": "0", "WORLD_SIZE": "1"})
recs, rc, err = dump(out)
g = info(recs)
copies = events(recs, "cuda_memcpy")
r = subprocess.run([DDPSPY, "report", "--json", out], capture_output=True, text=True)
j = json.loads(r.stdout) if r.stdout.startswith("{") else {}
late = [c for c in copies if g.get("stopped_ns") and c["t_ns"] > g["stopped_ns"]]
ok(p.returncode == 0 and len(late) == 1 and not [c for c in j.get("coverage", []) if "cupti_stopped" in c],
   "a copy after ddpspy's last flush at exit (%d, stopped_ns %s) is not taken for CUPTI's records stopping early: %s"
   % (len(late), g.get("stopped_ns"), j.get("coverage")))

# The CUDA calls recorded are those the analysis reads (launches, copies, sets, synchronizes and
# queries, graph launches, allocations), selected by callback id, not the flood a PyTorch step makes
# (4 of its 5.1 records a kernel on an H200); queries of unfinished work make no synchronization
# records. DDPSPY_GPU_API_ALL=1 records every call. testapps/gpu_probe's PyTorch-shaped loop, its
# graph and its driver launches: kernels joined to their launching calls either way.
probe_env = {"LD_LIBRARY_PATH": SIMDIR, "SIMGPU_KERNELS": "hold=arg", "SIMGPU_MOVE_BYTES": "0", "SIMGPU_KERNEL_US": "2"}
for name, extra in (("calls-selected", {}), ("calls-all", {"DDPSPY_GPU_API_ALL": "1"}),
                    ("graph-replay", {"GPU_PROBE_GRAPH_NODES": "20000"})):
    out = os.path.join(d, name)
    shutil.rmtree(out, ignore_errors=True)
    p = traced([os.path.join(APPS, "gpu_probe")], out, env=dict(probe_env, **extra))
    recs, rc, err = dump(out)
    fns = {}
    for e in gpu_events(recs, "cuda_api"):
        fns[e["fn"]] = fns.get(e["fn"], 0) + 1
    flood = ("cudaGetDevice_v3020", "cudaGetLastError_v3020", "cudaStreamIsCapturing_v10000",
             "cudaPointerGetAttributes_v4000", "cudaEventRecord_v3020")
    api = {e["corr"]: e["fn"] for e in gpu_events(recs, "cuda_api")}
    kern = gpu_events(recs, "gpu_kernel")
    unjoined = [k["kname"] for k in kern if k["corr"] not in api]
    pending = [e for e in gpu_events(recs, "gpu_sync") if e.get("ret")]
    g = info(recs)
    if name == "calls-selected":
        ok(p.returncode == 0 and g.get("api") == "selected" and not any(f in fns for f in flood)
           and g.get("dropped") == 0 and g.get("refused") == 0
           and fns.get("cudaLaunchKernel_v7000", 0) >= 2000 and fns.get("cudaGraphLaunch_v10000") == 3
           and fns.get("cuLaunchKernelEx") == 3 and fns.get("cudaEventQuery_v3020", 0) > 0 and not pending
           and len(kern) == 2012 and not unjoined,
           "only the calls the analysis reads are recorded (api %s): %s; every kernel joins its launch (%d unjoined); "
           "no synchronization record of a query of unfinished work (%d)" % (g.get("api"), sorted(fns.items())[:12],
                                                                              len(unjoined), len(pending)))
    elif name == "calls-all":
        ok(p.returncode == 0 and g.get("api") == "all" and all(fns.get(f, 0) >= 2000 for f in flood) and not unjoined,
           "DDPSPY_GPU_API_ALL=1: every call recorded (api %s): %s" % (g.get("api"), {f: fns.get(f) for f in flood}))
    else:  # a graph of 20,000 kernels replayed 3 times: 60,000 kernel records at once, none lost
        gk = [k for k in kern if "graph_k" in k["kname"]]
        ok(p.returncode == 0 and len(gk) == 60000 and g.get("dropped") == 0 and g.get("refused") == 0 and not unjoined,
           "a graph replay of 60,000 kernels: all recorded (%d), each with its cudaGraphLaunch's correlation id, none "
           "dropped (%s) or refused (%s)" % (len(gk), g.get("dropped"), g.get("refused")))

# A wait no wrapper sees (the synchronize called through libcudart's own symbol, as a program that
# loaded its cudart itself, or nvcc's static one, calls it): CUPTI's record of the call on the
# training thread (its pthread_t's low half) is the host's wait, and the device's idle after it is
# charged to it, as the wrapper's would be: 20 steps of a 5 ms kernel waited for, then 3 ms of host work
for name, extra in (("steps-wrapped", {}), ("steps-dlsym", {"GPU_APP_DLSYM": "1"})):
    out = os.path.join(d, name)
    shutil.rmtree(out, ignore_errors=True)
    p = traced([os.path.join(APPS, "gpu_app"), "steps"], out, env=dict(extra, LD_LIBRARY_PATH=SIMDIR, RANK="0",
                                                                        WORLD_SIZE="1", SIMGPU_KERNELS="spin=5000"))
    recs = dump(out)[0]
    r = subprocess.run([DDPSPY, "report", "--json", out], capture_output=True, text=True)
    j = json.loads(r.stdout) if r.stdout.startswith("{") else {}
    idle = j["ranks"][0]["gpu"]["idle_by_cause"] if j.get("ranks") else {}
    ok(p.returncode == 0 and len(events(recs, "cuda_sync")) == (0 if "dlsym" in name else 20)
       and idle.get("sync", 0) > 0.3 and idle.get("other", 1) < 0.05,
       "%s: the device's idle after the host's waits is charged to them (%s; wrapper events %d)"
       % (name, idle, len(events(recs, "cuda_sync"))))

# CUDA_INJECTION64_PATH is another library's: the writer starts CUPTI when it sees the driver, at
# its next flush (every 10 ms here: the program's first copy comes some 50 ms after the driver
# loads, which the default 100 ms did not always beat)
p, recs = capture("late", {"CUDA_INJECTION64_PATH": "/nonexistent/libother.so", "DDPSPY_FLUSH_MS": "10"})
g = info(recs)
ok(p.returncode == 0 and g.get("state") == "on" and "driver was loaded" in g.get("why", "")
   and len(gpu_events(recs, "gpu_memcpy")) == 3,
   "with another injection library named, CUPTI starts once the driver is loaded, and records from then on: %s, "
   "%d copies" % (g.get("why"), len(gpu_events(recs, "gpu_memcpy"))))

# a child forked after CUDA started: no CUPTI there (its CUDA is unusable), a complete file of its own
p, recs = capture("fork", {"GPU_APP_FORK": "1"})
procs = of(recs, "process")
child = [r for r in procs if r["ppid"] != os.getpid()]
ends = {r["pid"]: r for r in of(recs, "end")}
gpu_pids = {r["pid"] for r in of(recs, "gpu")}
ok(p.returncode == 0 and len(procs) == 2 and len(child) == 1 and ends.get(child[0]["pid"], {}).get("complete") == 1
   and child[0]["pid"] not in gpu_pids and len(gpu_events(recs, "gpu_kernel")) == 8,
   "a child forked after CUDA started writes a complete file without GPU records; the parent keeps all 8 kernels "
   "(%d processes, gpu records from %s)" % (len(procs), sorted(gpu_pids)))

# exec and a fatal signal: the file is complete; before exec CUPTI is asked for everything
p, recs = capture("exec", {"GPU_APP_END": "exec"})
ends = of(recs, "end")
files = {r["file"] for r in of(recs, "process")}
first = [e for e in ends if e["reason"] == "exec"]
ok(p.returncode == 0 and len(files) == 1 and len(first) == 1 and first[0]["complete"] == 1  # (/bin/true records nothing)
   and len(gpu_events(recs, "gpu_kernel")) == 8 and info(recs).get("events") == total,
   "exec: the CUDA image's file ends with reason exec and holds every one of its %s CUPTI records (%s)"
   % (total, info(recs).get("events")))
p, recs = capture("segv", {"GPU_APP_END": "segv"})
ends = of(recs, "end")
ok(p.returncode != 0 and len(ends) == 1 and ends[0]["complete"] == 1 and ends[0]["reason"] == "signal 11"
   and info(recs).get("state") == "on" and info(recs).get("events", -1) >= 0,
   "SIGSEGV: the file is complete (signal 11), with what CUPTI had delivered (%s records)" % info(recs).get("events"))

# a C program on the runtime API (cc, no nvcc): its copies, set and synchronizes, both sides
out = os.path.join(d, "c")
p = traced([os.path.join(APPS, "cuda_c")], out, env={"LD_LIBRARY_PATH": SIMDIR})
recs = dump(out)[0]
gc = [(e["copy"], e["bytes"]) for e in gpu_events(recs, "gpu_memcpy")]
ok(p.returncode == 0 and '"ok": true' in p.stdout and gc == [("htod", 8 << 20), ("dtoh", 8 << 20)]
   and len(gpu_events(recs, "gpu_memset")) == 1 and len(events(recs, "cuda_memcpy")) == 2
   and [e["what"] for e in events(recs, "cuda_sync")] == ["pin", "stream", "device"],
   "a C program on the runtime API: both copies and the set on the GPU, the copies and synchronizes on the host: %s" % gc)

# CUDA 12: gpu_app linked against the CUDA 12 stand-ins (libcudart.so.12 and libcupti.so.12, CUPTI
# API version 26, CUDA 12's record structs, whose fields ddpspy reads sit where CUDA 13's do):
# the same kernels, copies and synchronizations as on CUDA 13, each joined to its call, through
# libcupti.so.12 (before, GPU capture was "unavailable" for a CUDA 12 runtime)
out = os.path.join(d, "cuda12")
shutil.rmtree(out, ignore_errors=True)
p = traced([os.path.join(APPS, "gpu_app12"), "timeline"], out,
           env={"LD_LIBRARY_PATH": SIMDIR + "12", "SIMGPU_KERNELS": "spin=5000,tick=2000"})
recs = dump(out)[0]
g = info(recs)
kern = gpu_events(recs, "gpu_kernel")
api = {e["corr"]: e for e in gpu_events(recs, "cuda_api")}
cp = [(e["copy"], e["src"], e["dst"], e["bytes"]) for e in gpu_events(recs, "gpu_memcpy")]
ok(p.returncode == 0 and g.get("state") == "on" and g.get("lib", "").endswith("simgpu12/libcupti.so.12")
   and g.get("version") == 26 and [k["kname"] for k in kern] == ["_Z4spinPfi"] + ["_Z4tickPfi"] * 3 + ["_Z4spinPfi"] * 4
   and all("Launch" in (api.get(k["corr"], {}).get("fn") or "") for k in kern)
   and cp == [("htod", "pinned", "device", MIB64), ("htod", "pageable", "device", MIB64), ("dtoh", "device", "pinned", MIB64)]
   and [e["ret"] for e in gpu_events(recs, "gpu_sync")] == [-1] * 7,
   "CUDA 12: captured through %s (CUPTI %s): 8 kernels joined to their launches, 3 copies, 7 synchronizations (no "
   "result in CUDA 12's record): %s" % (g.get("lib"), g.get("version"), cp))

# a library whose constructor starts CUDA (DT_NEEDED: its constructor runs before the preloaded
# ddpspy's, so cuInit reads CUDA_INJECTION64_PATH before ddpspy set it and calls nobody): GPU
# capture starts in ddpspy's constructor and says so, where before the file said nothing of the GPU
out = os.path.join(d, "ctor")
p = traced([os.path.join(APPS, "cuda_c_ctor")], out, env={"LD_LIBRARY_PATH": SIMDIR})
recs = dump(out)[0]
g = info(recs)
ok(p.returncode == 0 and g.get("state") == "on" and "after a library's constructor had initialised CUDA" in g.get("why", "")
   and [(e["copy"], e["bytes"]) for e in gpu_events(recs, "gpu_memcpy")] == [("htod", 8 << 20), ("dtoh", 8 << 20)],
   "CUDA started by a library's constructor before ddpspy's: capture starts at ddpspy's and says so (%s), the "
   "program's copies recorded" % g.get("why"))

# nvcc's default static cudart: no wrapper sees its calls, and without a driver (this machine; the
# simulated device cannot stand in for the driver a static cudart loads: docs/gpu.md) it fails as it
# would without ddpspy, which records nothing of it
static = os.path.join(APPS, "gpu_app_static")
if not os.path.exists(static):
    skip("a static-cudart program", "make sim did not build gpu_app_static")
    static = None
else:
    e = dict(os.environ)
    e.pop("LD_LIBRARY_PATH", None)
    plain = subprocess.run([static, "timeline"], env=e, capture_output=True, text=True, timeout=120)
    if plain.returncode == 0:  # a real driver and GPU: tests/gpu/check.py checks it there
        skip("a static-cudart program without a driver", "this machine has a CUDA driver that runs it")
        static = None
if static:
    out = os.path.join(d, "static")
    p = traced([static, "timeline"], out, env={"LD_LIBRARY_PATH": ""})
    ok(p.returncode == plain.returncode and p.stderr == plain.stderr and p.stdout == plain.stdout
       and not (os.path.isdir(out) and os.listdir(out)),
       "a static-cudart program with no driver fails as it does without ddpspy (%d, %r), and leaves no trace"
       % (plain.returncode, plain.stderr.strip()[-80:]))

# a child that inherited the injection variables but not LD_PRELOAD: the driver and NVTX load the
# library late; it stays off, and the program runs as without it
out = os.path.join(d, "late-load")
e = dict(os.environ, LD_LIBRARY_PATH=SIMDIR, CUDA_INJECTION64_PATH=LIB, NVTX_INJECTION64_PATH=LIB, DDPSPY_OUT=out)
e.pop("LD_PRELOAD", None)
p = subprocess.run([os.path.join(APPS, "gpu_app"), "timeline"], env=e, capture_output=True, text=True, timeout=120)
ok(p.returncode == 0 and '"round_trip": true' in p.stdout and not os.path.exists(out) and not p.stderr,
   "libddpspy.so loaded late by the CUDA driver (no LD_PRELOAD) records nothing and changes nothing: %r"
   % p.stderr[-200:])

# DDPSPY_GPU=0: nothing attempted, the environment untouched
p, recs = capture("off", {"DDPSPY_GPU": "0"})
ok(p.returncode == 0 and not of(recs, "gpu") and not gpu_events(recs) and len(events(recs, "cuda_memcpy")) == 3,
   "DDPSPY_GPU=0: no GPU capture, host capture as before")
sh = "echo \"[$CUDA_INJECTION64_PATH]\""
v = [traced(["sh", "-c", sh], os.path.join(d, "env%d" % i), env=e).stdout.strip()
     for i, e in enumerate([{}, {"DDPSPY_GPU": "0"}, {"CUDA_INJECTION64_PATH": "/x/y.so"}])]
ok(v[0] == "[%s]" % os.path.realpath(LIB) and v[1] == "[]" and v[2] == "[/x/y.so]",
   "CUDA_INJECTION64_PATH names libddpspy.so unless DDPSPY_GPU=0 or the program set its own: %s" % v)
cleanup(d)
done()
