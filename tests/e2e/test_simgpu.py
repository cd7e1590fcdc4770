"""The simulated device (testapps/simgpu/, `make sim`): a CUDA program built with nvcc
(-cudart shared) runs on the stand-in libcudart.so.13 without a GPU, and the stand-in's time model
holds: launches and pinned copies return at once, synchronizing calls wait for the work, streams
run side by side, the legacy default stream waits for the others, pageable copies are slower and
hold the host, and the bytes of copies arrive. Device times are read through CUDA events, which the
model makes exact; host times only ever overshoot on a busy machine, so they are judged from below,
and from above with a margin, re-run when they miss (lib.live)."""
import json
import os
import subprocess
from lib import *

CUDA = os.environ.get("CUDA_HOME", "/usr/local/cuda")
SIMDIR = os.path.join(BUILD, "simgpu")
APP = os.path.join(APPS, "gpu_app")
if not os.path.exists(os.path.join(CUDA, "include", "cuda_runtime_api.h")):
    skip("the simulated device", "no CUDA headers in %s (set CUDA_HOME)" % CUDA)
    done()
if not os.path.exists(os.path.join(SIMDIR, "libcudart.so.13")) or not os.path.exists(APP):
    skip("the simulated device", "make sim did not build it (no nvcc in %s/bin?)" % CUDA)
    done()

APP_PT = os.path.join(APPS, "gpu_app_pt")  # the same, built with --default-stream per-thread
# The stand-in moves a pageable copy's bytes for real while it holds the host, so the modelled rate
# must be slower than this machine's own memory copy: at 6 GB/s, 64 MiB (11.2 ms) took 12.3-13.3 ms
# on the 2-core VM (its memmove about 5 GB/s), a miss all three attempts of a fresh-clone run; at 2
# GB/s (33.6 ms) the copy has room on any machine that copies 2 GB/s.
PAGEABLE_GBS = 2
ENV = dict(os.environ, LD_LIBRARY_PATH=SIMDIR, SIMGPU_KERNELS="spin=5000,tick=2000",
           SIMGPU_PINNED_GBS="25", SIMGPU_PAGEABLE_GBS=str(PAGEABLE_GBS))
MIB64 = 64 << 20


def run(app=APP):
    p = subprocess.run([app, "timeline"], env=ENV, capture_output=True, text=True, timeout=60)
    if p.returncode != 0:
        return None, p
    return json.loads(p.stdout.splitlines()[-1]), p


j, p = run()
ok(j is not None, "gpu_app runs on the simulated device without a GPU (rc=%d %s)" % (p.returncode, p.stderr[-300:]))
if j is None:
    done()
lib = subprocess.run(["ldd", APP], env=ENV, capture_output=True, text=True).stdout
ok(SIMDIR in lib, "the program's libcudart.so.13 is the stand-in: %s" % [l.strip() for l in lib.splitlines() if "cudart" in l])

# the model, through events: exact but for the host's enqueue delays (microseconds)
pin_model = (5000 + MIB64 / 25) / 1e6
page_model = (5000 + MIB64 / PAGEABLE_GBS) / 1e6


def model(k):
    j, _ = run()
    if j is None:
        return [(False, "gpu_app ran again")]
    return [(6.0 <= j["serial3_ms"] < 6.5, "three 2 ms kernels on one stream take 6 ms: %.3f" % j["serial3_ms"]),
            (5.0 <= j["side_ms"] < 5.5, "5 ms kernels on two streams run side by side: %.3f ms" % j["side_ms"]),
            (10.0 <= j["legacy_ms"] < 10.5, "a kernel on the legacy default stream waits for another stream's: %.3f ms"
             % j["legacy_ms"]),
            (pin_model <= j["pinned_copy_ms"] < pin_model + 0.5, "64 MiB from pinned memory at 25 GB/s: %.3f ms (model %.3f)"
             % (j["pinned_copy_ms"], pin_model)),
            (page_model <= j["pageable_copy_ms"] < page_model + 1, "64 MiB from pageable memory at %d GB/s: %.3f ms (model %.3f)"
             % (PAGEABLE_GBS, j["pageable_copy_ms"], page_model)),
            # host times: the launch and the pinned copy do not wait for the device, the rest do
            (j["launch_ms"] < 1, "a launch returns at once: %.3f ms" % j["launch_ms"]),
            (j["sync_ms"] >= 4.9, "cudaStreamSynchronize waits for the 5 ms kernel: %.3f ms" % j["sync_ms"]),
            (j["pinned_host_ms"] < pin_model, "an asynchronous copy from pinned memory returns before it ends: %.3f ms"
             % j["pinned_host_ms"]),
            (j["pageable_host_ms"] >= page_model - 0.05, "one from pageable memory holds the host until it ends: %.3f ms"
             % j["pageable_host_ms"]),
            (j["round_trip"], "the bytes copied to the device come back")]


live("simulated device", model)


# Built with --default-stream per-thread, the program's stream 0 is its thread's default stream
# (the _ptsz/_ptds entry points): events recorded there do not wait for the other streams' work,
# and a kernel there runs beside another stream's.
def per_thread(k):
    j, p = run(APP_PT)
    if j is None:
        return [(False, "gpu_app_pt runs on the simulated device (rc=%d %s)" % (p.returncode, p.stderr[-300:]))]
    return [(j["serial3_ms"] < 0.5 and j["side_ms"] < 0.5,
             "per-thread default stream: events on it do not wait for other streams (%.3f, %.3f ms)"
             % (j["serial3_ms"], j["side_ms"])),
            (5.0 <= j["legacy_ms"] < 5.5, "per-thread default stream: its kernel runs beside another stream's: %.3f ms"
             % j["legacy_ms"]),
            (j["sync_ms"] >= 4.9 and j["pageable_host_ms"] >= page_model - 0.05 and j["round_trip"],
             "per-thread default stream: synchronize, pageable copies and the bytes as before")]


live("simulated device, per-thread default stream", per_thread)


# The CUPTI stand-in, through gpu_app's small CUPTI client (dlopened, as a profiler does): real
# record structs for the workload (a 5 ms kernel under external id 42, three 2 ms kernels, a set,
# a pinned copy to the device, a stream synchronize, a copy back, a device synchronize), delivered
# from CUPTI's own thread, in the client's timebase; every record counted as dropped when the
# client's buffers are too small; no subscriber when one is taken.
def cupti(env):
    # CUPTI's thread delivers every 20 ms; the client waits 300 ms before it flushes
    p = subprocess.run([APP, "cupti"], env=dict(ENV, SIMGPU_CUPTI_FLUSH_MS="20", **env), capture_output=True, text=True,
                       timeout=60)
    return json.loads(p.stdout.splitlines()[-1]) if p.returncode == 0 and p.stdout else {"rc": p.returncode, "err": p.stderr[-300:]}


c = cupti({})
# (cupti_activity.h: registering "in the middle of the profiling session" is allowed, the records
# made before it keeping the timebase they had)
ok(c.get("subscribe") == 0 and c["timestamp_before"] == 1 and c["timestamp_after"] == 1,
   "CUPTI: subscribed; a timestamp callback is taken before any kind is enabled and after: %s" % c)
if c.get("subscribe") == 0:
    # (every runtime call, as a real CUPTI records them: the allocations and the stream's creation too)
    ok((c["api"], c["kernels"], c["memcpy"], c["memset"], c["sync"], c["ext"], c["other"]) == (12, 4, 2, 1, 2, 1, 0),
       "CUPTI: 12 runtime calls, 4 kernels, 2 copies, 1 set, 2 synchronizations, 1 external correlation, nothing else: %s" % c)
    ok(abs(c["spin_ms"] - 5) < 0.01 and abs(c["tick_ms"] - 6) < 0.01,
       "CUPTI: kernel times are the model's: spin %.3f ms (5), ticks %.3f ms (3 x 2)" % (c["spin_ms"], c["tick_ms"]))
    ok(c["launch_corr_ok"] == 4 and c["kernel_bad_time"] == 0,
       "CUPTI: each kernel carries its launch call's correlation id and starts after that call, in the client's clock")
    ok(c["ext_corr"] == 1 and c["popped"] == 42, "CUPTI: external id 42 is joined to the kernel launched under it")
    ok(c["bytes_h2d"] == 4 * (1 << 16) and c["pinned_src"] == 1, "CUPTI: the copy to the device: %d bytes, from pinned memory"
       % c["bytes_h2d"])
    ok(c["deliveries"] >= 1 and c["from_main"] == 0 and c["dropped"] == 0,
       "CUPTI: buffers come back from CUPTI's own thread (%d deliveries, %d from the program's), none dropped"
       % (c["deliveries"], c["from_main"]))
t = cupti({"GPU_APP_TINY_BUFFERS": "1"})
ok(t.get("dropped") == 22 and t.get("kernels") == 0, "CUPTI: with buffers too small every record is dropped and counted: %s" % t)
x = cupti({"SIMGPU_CUPTI_TAKEN": "1"})
ok(x.get("subscribe") == 39, "CUPTI: with the subscriber taken, cuptiSubscribe fails with 39: %s" % x)

# what an H200's CUPTI did when its API selection was pushed around (docs/gpu.md, 2026-11-28;
# testapps/cupti_rules: set up as ddpspy sets CUPTI up, one change, launch records before, during,
# after it, after the kept ids on again, after off and on)
RULES = os.path.join(APPS, "cupti_rules")
r = subprocess.run([RULES, "runtime_kind", "runtime_ids", "driver_ids", "per_thread_0", "domain_runtime"],
                   env=dict(os.environ, LD_LIBRARY_PATH=SIMDIR), capture_output=True, text=True, timeout=60)
rules = {j["case"]: j for j in map(json.loads, r.stdout.splitlines())}
seq = lambda c, k="launch_api": [rules.get(c, {}).get(p, {}).get(k) for p in ("before", "during", "after", "own_calls",
                                                                             "toggled")]
ok(seq("runtime_kind") == [10, 10, 0, 0, 0],
   "CUPTI: a RUNTIME kind's Disable ends the selection by id for good, as on the H200: %s" % seq("runtime_kind"))
ok(seq("runtime_ids") == [10] * 5 and seq("runtime_ids", "sync") == [1] * 5,
   "CUPTI: other runtime ids on and off leave the kept ones recording, as on the H200: %s" % seq("runtime_ids"))
ok(seq("driver_ids") == [10, 0, 0, 0, 0] and seq("driver_ids", "sync") == [1, 0, 0, 0, 0]
   and seq("driver_ids", "kernels") == [10] * 5,
   "CUPTI: with every driver id on one by one, API and synchronization records stop for good, kernels go on "
   "(as torch.profiler's driver kind passed on so did on the H200): %s %s" % (seq("driver_ids"), seq("driver_ids", "sync")))
ok(seq("per_thread_0") == [10, 0, 0, 0, 0],
   "CUPTI: the per-thread buffer attribute changed mid-session (undefined, cupti_activity.h) stops them too: %s"
   % seq("per_thread_0"))
ok(seq("domain_runtime", "cb_getdevice") == [0, 2, 0, 0, 0],
   "CUPTI: a subscriber's runtime domain gets each call's callback while on: %s" % seq("domain_runtime", "cb_getdevice"))
done()
