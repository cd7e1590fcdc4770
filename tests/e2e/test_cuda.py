"""CUDA runtime capture (preload/cuda.c) on the simulated device: testapps/gpu_app.cu, built with
nvcc -cudart shared (and again with --default-stream per-thread), runs under the preload with
LD_LIBRARY_PATH=build/simgpu; `ddpspy dump --json` must show every copy (bytes, direction, stream,
async) and every synchronize (stream, event, device) with the host time the program itself
measured around the call, and none of the stand-in's own sleeps inside them. A process that never
uses CUDA loads no CUDA library."""
import json
import os
import shutil
import subprocess
from lib import *

need_sim("CUDA runtime capture", "cuda_runtime_api.h", "preload/cuda.c")

MIB64 = 64 << 20
page_model = (5000 + MIB64 / 6) / 1e6  # ms: 64 MiB at the stand-in's pageable 6 GB/s
d = tmpdir("cuda")


def capture(app, name):
    out = os.path.join(d, name)
    shutil.rmtree(out, ignore_errors=True)  # (a rerun reads its own run's files only)
    env = {"LD_LIBRARY_PATH": SIMDIR, "SIMGPU_KERNELS": "spin=5000,tick=2000"}
    p = traced([os.path.join(APPS, app), "timeline"], out, env=env)
    if p.returncode != 0:
        return None, [], p.stderr
    recs, rc, err = dump(out)
    return json.loads(p.stdout.splitlines()[-1]), recs, err


def check(app, name, per_thread):
    truth, recs, err = capture(app, name)
    if truth is None:
        return [(False, "%s runs under the preload on the simulated device: %s" % (app, err[-300:]))]
    main = [r for r in of(recs, "process")][0]["pid"]
    cp = [e for e in events(recs, "cuda_memcpy") if e["tid"] == main]
    sy = [e for e in events(recs, "cuda_sync") if e["tid"] == main]
    ms = lambda e: e["dur_ns"] / 1e6
    legacy = 2 if per_thread else 0  # cudaStreamPerThread, or 0: the legacy default stream
    want = [("h2d", 1, legacy), ("h2d", 1, legacy), ("d2h", 0, legacy)]
    got = [(e["dir"], e["async"], e["stream"]) for e in cp]
    checks = [(got == want and all(e["bytes"] == MIB64 for e in cp) and all(e["ret"] == 0 for e in cp),
               "%s: three 64 MiB copies, to the device twice asynchronously and back, on stream %d: %s"
               % (name, legacy, got))]
    if len(cp) == 3:
        checks += [(ms(cp[0]) <= truth["pinned_host_ms"] + 0.05,
                    "%s: the pinned asynchronous copy holds the host %.3f ms, within the %.3f ms the program measured "
                    "around it" % (name, ms(cp[0]), truth["pinned_host_ms"])),
                   (page_model - 0.05 <= ms(cp[1]) <= truth["pageable_host_ms"] + 0.05,
                    "%s: the pageable one holds it for the whole copy: %.3f ms (model %.3f, the program's %.3f)"
                    % (name, ms(cp[1]), page_model, truth["pageable_host_ms"]))]
    kinds = [e["what"] for e in sy]
    # (and the waits not called so: cudaMallocHost pins, cudaFreeHost and cudaFree may synchronize)
    checks.append((kinds == ["stream"] + ["event"] * 3 + ["pin"] + ["event"] * 2 + ["device"] + ["free"] * 3,
                   "%s: one stream, five event and one device synchronize, in order, with the pinning allocation "
                   "and the three frees: %s" % (name, kinds)))
    if kinds and kinds[0] == "stream":
        # the kernel starts 3 us into its launch call, so the wait is the 5 ms less what the launch
        # call took after that (the program measured it: launch_ms), less 0.1 ms for getting there
        low = 4.9 - truth["launch_ms"]
        checks.append((low <= ms(sy[0]) <= truth["sync_ms"] + 0.05 and sy[0]["stream"] != legacy,
                       "%s: the stream synchronize waits for the 5 ms kernel on its stream: %.3f ms (at least %.3f; "
                       "the program's %.3f)" % (name, ms(sy[0]), low, truth["sync_ms"])))
    # the stand-in sleeps inside the calls it models: the guard keeps those out
    sleeps = sum(ms(e) for e in events(recs, "sleep") if e["tid"] == main)
    checks.append((sleeps < 1, "%s: no sleep of the stand-in's inside a recorded call (%.3f ms of sleeps)" % (name, sleeps)))
    return checks


live("CUDA capture", lambda k: check("gpu_app", "legacy", False))
live("CUDA capture, per-thread default stream", lambda k: check("gpu_app_pt", "per-thread", True))

# the waits not called so: gpu_probe polls an event every 8 kernels (a run of queries of
# unfinished work is one wait, ending with the query that found it done), pins and frees memory
out = os.path.join(d, "probe")
p = traced([os.path.join(APPS, "gpu_probe")], out, env={"LD_LIBRARY_PATH": SIMDIR, "SIMGPU_KERNELS": "hold=arg,flood=30",
                                                        "SIMGPU_MOVE_BYTES": "0"})
recs = dump(out)[0]
sy = events(recs, "cuda_sync")
# (a run the thread left for more than 20 us, descheduled on a busy host, ends there, result 600,
# and the rest is a run of its own)
polls = [e for e in sy if e["what"] == "poll" and e["ret"] == 0]
cut = [e for e in sy if e["what"] == "poll" and e["ret"] != 0]
truth = {j["section"]: j for j in (json.loads(l) for l in p.stdout.splitlines() if l.startswith("{"))}
ok(p.returncode == 0 and 0 < len(polls) <= 250 and all(e["event"] for e in polls) and all(e["ret"] == 600 for e in cut)
   and truth.get("flood", {}).get("polls", 0) >= len(polls)
   and [e["what"] for e in sy if e["what"] in ("pin", "free")] == ["pin", "free", "free", "free"],
   "polling recorded as %d waits (of %d queries of unfinished work), each ending when the event was done; the pinned "
   "allocation and the three frees as waits: %s" % (len(polls), truth.get("flood", {}).get("polls", 0),
                                                     [e["what"] for e in sy if e["what"] in ("pin", "free")]))

# runs of queries that end without finding the work done: one given up (the thread went on to other
# work) names what it queried, not what the next query asks; one still going when its thread exits,
# or when the process ends, is recorded there, as waits to their last query
out = os.path.join(d, "queries")
p = traced([os.path.join(APPS, "gpu_probe"), "queries"], out, env={"LD_LIBRARY_PATH": SIMDIR,
                                                                    "SIMGPU_KERNELS": "hold=arg"})
q = next((json.loads(l) for l in p.stdout.splitlines() if l.startswith("{")), {})
recs = dump(out)[0]
main = of(recs, "process")[0]["pid"] if of(recs, "process") else -1
polls = [(e["tid"] == main, e["stream"], e["event"], e["ret"]) for e in events(recs, "cuda_sync") if e["what"] == "poll"]
want = [(True, 0, q.get("event_a"), 600), (True, q.get("stream_b"), 0, 600), (False, 0, q.get("event_b"), 600)]
ok(p.returncode == 0 and q.get("qb") == 600 and sorted(polls, key=str) == sorted(want, key=str),
   "runs of queries given up, at a thread's exit and at the process's end: each a wait of what it queried "
   "(main thread: event A, stream B; the other thread: event B): %s" % polls)

p = traced(["cat", "/proc/self/maps"], os.path.join(d, "nocuda"))
ok(p.returncode == 0 and "cuda" not in p.stdout.lower() and "cupti" not in p.stdout.lower(),
   "a process that never uses CUDA loads no CUDA library")
cleanup(d)
done()
