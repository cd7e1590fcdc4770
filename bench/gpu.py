"""make bench, GPU part, on the simulated device (`make sim`): what GPU capture costs the host.
1. Per intercepted call with CUDA started (and, under the preload, CUPTI): build/bench/overhead mt
   cuda against build/bench/overhead mt, both traced; budget: nothing measurable (within 5 ns).
2. A launch-heavy loop (gpu_app launches: tiny kernels back to back): the host's time per launch
   plain, traced with DDPSPY_GPU=0, and traced with GPU capture; target: under 1 us added per
   launch. On the simulated device that cost is the stand-in CUPTI's record-making plus ddpspy's
   callbacks and timestamps: real CUPTI's own cost is not in it. Then with a second CUPTI client in
   torch.profiler's shape recording the whole loop (GPU_APP_CLIENT=1): alone, and with ddpspy in
   front sharing CUPTI with it (cupti/share.c copies each record the client asked for into its
   buffers).
3. A flood-shaped loop (gpu_probe flood: per kernel, as PyTorch does, cudaGetDevice,
   cudaGetLastError, cudaStreamIsCapturing, cudaPointerGetAttributes, the launch, an event record;
   no polling, which would time the device, not the host): host ns per kernel plain, under ddpspy recording every
   CUDA call (DDPSPY_GPU_API_ALL=1, as before issue 37) and under ddpspy recording the calls the
   analysis reads (the default).
4. An NCCL call (build/bench/overhead mt cuda nccl: an in-place ncclAllReduce on a communicator of
   one rank, which launches nothing): host ns a call plain, under ddpspy (the wrapper, its external
   id pushed into CUPTI and popped, and NCCL's profiler plugin), and under ddpspy without the
   plugin (DDPSPY_NCCL_PLUGIN=0). The plain figure is the stand-in NCCL's own cost, not NCCL's.
Rounds alternate between the cases, so drift on a noisy machine hits all alike; each figure is the
median over rounds of the program's median burst."""
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
B = os.path.join(ROOT, "build")
SIM = os.path.join(B, "simgpu")
APP = os.path.join(B, "testapps", "gpu_app")
PROBE = os.path.join(B, "testapps", "gpu_probe")
ROUNDS = int(os.environ.get("ROUNDS", "5"))
if not (os.path.exists(os.path.join(SIM, "libcupti.so.13")) and os.path.exists(APP)):
    print("GPU capture cost: skipped (no simulated device: make sim needs CUDA headers and nvcc)")
    sys.exit(0)


def run(argv, out, gpu=None, extra=None):
    env = dict(os.environ, LD_LIBRARY_PATH=SIM, SIMGPU_KERNEL_US="1")
    if out:
        env.update(LD_PRELOAD=os.path.join(B, "libddpspy.so"), DDPSPY_OUT=out)
    if gpu is not None:
        env["DDPSPY_GPU"] = gpu
    env.update(extra or {})
    p = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)
    if p.returncode:
        sys.exit("bench/gpu.py: %s failed: %s" % (" ".join(argv), p.stderr[-300:]))
    subprocess.run(["rm", "-rf", out or "/nonexistent"])
    return json.loads(p.stdout.splitlines()[-1])


with tempfile.TemporaryDirectory() as d:
    t = os.path.join(d, "t")
    calls = {"host only": [], "CUDA and CUPTI started": []}
    launch = {"plain": [], "ddpspy, DDPSPY_GPU=0": [], "ddpspy with GPU capture": [], "a profiler client alone": [],
              "ddpspy sharing with the client": []}
    flood = {"plain": [], "ddpspy, every CUDA call": [], "ddpspy, the calls read": []}
    nccl = {"plain": [], "ddpspy": [], "ddpspy, DDPSPY_NCCL_PLUGIN=0": []}
    ov = [os.path.join(B, "bench", "overhead"), "mt", "cuda", "nccl"]
    has_nccl = os.path.exists(os.path.join(SIM, "libnccl.so.2"))
    for _ in range(ROUNDS):
        if has_nccl:
            nccl["plain"].append(run(ov, None)["nccl_allreduce_ns"])
            nccl["ddpspy"].append(run(ov, t)["nccl_allreduce_ns"])
            nccl["ddpspy, DDPSPY_NCCL_PLUGIN=0"].append(run(ov, t, None, {"DDPSPY_NCCL_PLUGIN": "0"})["nccl_allreduce_ns"])
        nopoll = {"GPU_PROBE_POLL": "0"}
        flood["plain"].append(run([PROBE, "flood"], None, None, nopoll)["host_ns_per_kernel"])
        flood["ddpspy, every CUDA call"].append(run([PROBE, "flood"], t, None, dict(nopoll, DDPSPY_GPU_API_ALL="1"))
                                                ["host_ns_per_kernel"])
        flood["ddpspy, the calls read"].append(run([PROBE, "flood"], t, None, nopoll)["host_ns_per_kernel"])
        calls["host only"].append(run([os.path.join(B, "bench", "overhead"), "mt"], t)["sem_wait_ns"])
        calls["CUDA and CUPTI started"].append(run([os.path.join(B, "bench", "overhead"), "mt", "cuda"], t)["sem_wait_ns"])
        launch["plain"].append(run([APP, "launches"], None)["launch_ns"])
        launch["ddpspy, DDPSPY_GPU=0"].append(run([APP, "launches"], t, "0")["launch_ns"])
        launch["ddpspy with GPU capture"].append(run([APP, "launches"], t)["launch_ns"])
        client = {"GPU_APP_CLIENT": "1"}
        launch["a profiler client alone"].append(run([APP, "launches"], None, None, client)["launch_ns"])
        launch["ddpspy sharing with the client"].append(run([APP, "launches"], t, None, client)["launch_ns"])

med = {k: statistics.median(v) for k, v in list(calls.items()) + list(launch.items())}
fmed = {k: statistics.median(v) for k, v in flood.items()}
print("GPU capture's cost to the host, simulated device (ns, median of %d rounds)" % ROUNDS)
print("-- a recorded call (sem_wait, posted) in a traced process")
for k in calls:
    print("%-34s%9.1f" % (k, med[k]))
extra = med["CUDA and CUPTI started"] - med["host only"]
print("budget: CUDA loaded costs an intercepted call nothing measurable (within 5 ns); measured %+.1f ns (%s)"
      % (extra, "met" if extra <= 5 else "NOT met"))
print("-- a kernel launch (host time, launched back to back)")
for k in launch:
    print("%-34s%9.1f%+9.1f" % (k, med[k], med[k] - med["plain"]))
added = med["ddpspy with GPU capture"] - med["plain"]
print("target: under 1000 ns added per launch; measured %+.1f ns (%s)" % (added, "met" if added < 1000 else "NOT met"))
shared = med["ddpspy sharing with the client"] - med["a profiler client alone"]
print("sharing CUPTI with a torch.profiler-shaped client (every launch's records copied to it too): "
      "%+.1f ns a launch over the client alone" % shared)
print("-- a flood-shaped loop (gpu_probe flood: 5 runtime calls and a launch a kernel), host ns a kernel")
for k in flood:
    print("%-34s%9.1f%+9.1f" % (k, fmed[k], fmed[k] - fmed["plain"]))
if has_nccl:
    nmed = {k: statistics.median(v) for k, v in nccl.items()}
    print("-- an NCCL call (in-place allreduce, one rank: the stand-in's own cost plain), host ns a call")
    for k in nccl:
        print("%-34s%9.1f%+9.1f" % (k, nmed[k], nmed[k] - nmed["plain"]))
else:
    print("-- an NCCL call: skipped (no stand-in libnccl.so.2: make sim needs nccl.h)")
