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
ENV = dict(os.environ, LD_LIBRARY_PATH=SIMDIR, SIMGPU_KERNELS="spin=5000,tick=2000",
           SIMGPU_PINNED_GBS="25", SIMGPU_PAGEABLE_GBS="6")
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
page_model = (5000 + MIB64 / 6) / 1e6


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
            (page_model <= j["pageable_copy_ms"] < page_model + 1, "64 MiB from pageable memory at 6 GB/s: %.3f ms (model %.3f)"
             % (j["pageable_copy_ms"], page_model)),
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
done()
