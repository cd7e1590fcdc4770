"""The preload's cost on a healthy PyTorch trainer (examples/torch/train_mlp.py, DDP over gloo,
2 ranks with 2 DataLoader workers each), as the ratio of step times of two torchrun jobs run side
by side: one plain, one under libddpspy.so, which one starts first alternating; then the Python
sampler's part of that, two traced jobs side by side, sampled at 100 Hz and not. Run one after the
other, identical jobs on these VMs differ by far more than the 3% budget (bench/side_by_side.py
says why); side by side they share the machine's slow and fast phases.

Used by `make bench`; skipped, saying so, without Debian's PyTorch."""
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TORCHRUN = "/usr/bin/torchrun"
TRAIN = os.path.join(ROOT, "examples", "torch", "train_mlp.py")


def summary(text):
    for line in reversed(text.splitlines()):
        line = line.split(":", 1)[1] if line.startswith("[default0]:") else line
        if line.startswith("{"):
            return json.loads(line)
    return None


def pairs_of(d, data, tag, a_env, b_env, pairs, args):
    """pairs of torchrun jobs side by side, one with a_env and one with b_env (None: plain), which
    starts first alternating; each pair's b/a step time ratio"""
    ratios = []
    for i in range(pairs):
        procs = {}
        for b in ((False, True) if i % 2 == 0 else (True, False)):
            env = dict(os.environ)
            extra = b_env if b else a_env
            if extra is not None:
                env.update(LD_PRELOAD=os.path.join(ROOT, "build", "libddpspy.so"),
                           DDPSPY_OUT=os.path.join(d, "%s%d%d" % (tag, i, b)), **extra)
            procs[b] = subprocess.Popen([TORCHRUN, "--standalone", "--nproc_per_node=2", "--redirects", "1", "--tee", "1",
                                         TRAIN, "--data", data + ("-b" if b else "-a")] + list(args),
                                        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
        res = {b: summary(p.communicate(timeout=900)[0]) for b, p in procs.items()}
        if all(res.values()):
            ratios.append(res[True]["step_ms_p50"] / res[False]["step_ms_p50"])
            print("  pair %d: %.1f ms against %.1f ms per step: %.3f"
                  % (i + 1, res[True]["step_ms_p50"], res[False]["step_ms_p50"], ratios[-1]))
    return ratios


def main(pairs=6, args=("--steps", "30")):
    if not os.path.exists(TORCHRUN):
        print("pytorch side by side: skipped (Debian's python3-torch is not installed)")
        return 0
    d = tempfile.mkdtemp(prefix="ddpspy-torchbench-")
    data = os.path.join(d, "data")
    print("pytorch: traced against plain")
    ratios = pairs_of(d, data, "trace", None, {}, pairs, args)
    if not ratios:
        subprocess.run(["rm", "-rf", d])
        print("pytorch side by side: no pair completed")
        return 1
    # the Python sampler's part of it: both traced, its main thread sampled at 100 Hz against not at all
    print("pytorch: traced with the Python sampler at 100 Hz against traced without it (DDPSPY_SAMPLE_HZ=0)")
    sampled = pairs_of(d, data, "sample", {"DDPSPY_SAMPLE_HZ": "0"}, {"DDPSPY_SAMPLE_HZ": "100"}, pairs, args)
    m = statistics.median(ratios)
    # start-up: PyTorch dlopens its extension modules (libgloo among them), alternating runs
    t = {False: [], True: []}
    for i in range(12):
        pre = i % 2 == 1
        env = dict(os.environ)
        if pre:
            env.update(LD_PRELOAD=os.path.join(ROOT, "build", "libddpspy.so"), DDPSPY_OUT=os.path.join(d, "imp%d" % i))
        t0 = time.perf_counter()
        subprocess.run(["/usr/bin/python3", "-c", "import torch, torch.distributed"], env=env, check=True)
        t[pre].append(time.perf_counter() - t0)
    subprocess.run(["rm", "-rf", d])
    print("pytorch start-up, `import torch, torch.distributed`, median of 6 alternating runs: plain %.2f s, "
          "traced %.2f s" % (statistics.median(t[False]), statistics.median(t[True])))
    print("pytorch DDP (gloo, 2 ranks, MLP, file-backed DataLoader): traced/plain step time, median of %d "
          "side-by-side pairs: %.3f" % (len(ratios), m))
    print("budget: at most 1.03; %s" % ("met" if m <= 1.03 else "NOT met"))
    if sampled:
        print("pytorch DDP: sampled/unsampled step time (the sampler at 100 Hz), median of %d side-by-side pairs: "
              "%.3f (target: under 1.01)" % (len(sampled), statistics.median(sampled)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
