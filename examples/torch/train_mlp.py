"""A data-parallel MLP trainer for ddpspy's PyTorch examples: DistributedDataParallel over gloo
(CPU) or, with --device cuda, NCCL (one GPU per rank), samples read from one file each by a
DataLoader, and switches that reproduce the pathologies of the seeds (000, 001) on demand. Nothing
in it knows about ddpspy; run it as

    torchrun --standalone --nproc_per_node=2 --redirects 1 --tee 1 train_mlp.py --data DIR [switches]
    LD_PRELOAD=build/libddpspy.so DDPSPY_OUT=out torchrun ... (the same)

(--redirects 1 --tee 1: Debian's PyTorch 1.13 on Python 3.11 fails with torchrun's default.)
The samples are written to DIR first if it has none. Rank 0 prints, as its last line, a JSON
summary measured by the trainer itself (the ground truth a profiler's verdict is checked against).
"""
import argparse
import importlib
import json
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler

FEATURES = 1024  # float32 per sample: 4 KiB files
CLASSES = 10


class FileSamples(Dataset):
    """One file per sample: 4 KiB of float32 features; the label is derived from them."""

    def __init__(self, root, delay_ms=0.0, import_every=0):
        self.paths = sorted(os.path.join(root, f) for f in os.listdir(root) if f.endswith(".bin"))
        self.delay = delay_ms / 1000.0
        self.import_every, self.calls = import_every, 0

    def __len__(self):
        return len(self.paths)

    def __getitem__(self, i):
        if self.delay:
            time.sleep(self.delay)  # slow storage or decoding in the input pipeline
        if self.import_every and self.calls % self.import_every == 0:
            # a module imported on first use (a decoder plugin), a new one each time: more bytes
            # than the samples, read fast from the page cache
            importlib.import_module("plugin%04d" % (self.calls // self.import_every))
        self.calls += 1
        with open(self.paths[i], "rb") as f:
            x = torch.frombuffer(bytearray(f.read()), dtype=torch.float32)
        return x, int(x[:CLASSES].argmax())


def make_data(root, n):
    os.makedirs(root, exist_ok=True)
    if any(f.endswith(".bin") for f in os.listdir(root)):
        return
    g = torch.Generator().manual_seed(1)
    for i in range(n):
        with open(os.path.join(root, "s%06d.bin" % i), "wb") as f:
            f.write(torch.randn(FEATURES, generator=g).numpy().tobytes())


def make_modules(root, n):
    """n modules of 384 KiB each, for --import-modules"""
    os.makedirs(root, exist_ok=True)
    for i in range(n):
        path = os.path.join(root, "plugin%04d.py" % i)
        if not os.path.exists(path):
            with open(path + ".tmp", "w") as f:
                f.write("TABLE = %r\n" % ("%04d" % i * 98304))
            os.rename(path + ".tmp", path)


def log_metrics(step, ms):
    """rank 0's bookkeeping of a step (--rank0-log): a report to a metrics service that answers in
    ms milliseconds; the ms spent"""
    time.sleep(ms / 1000.0)  # (waiting for the service's answer)
    return ms


def fetch_shard_index(ms):
    """the straggler's extra host work of a step (--straggler-delay): a lookup that takes ms
    milliseconds; the ms spent"""
    time.sleep(ms / 1000.0)
    return ms


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data", required=True, help="directory of sample files (written when empty)")
    p.add_argument("--samples", type=int, default=2048, help="samples to write when DIR is empty")
    p.add_argument("--steps", type=int, default=30, help="steps measured, after --warmup")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--batch", type=int, default=32, help="samples per rank per step")
    p.add_argument("--hidden", type=int, default=1024)
    p.add_argument("--layers", type=int, default=3)
    p.add_argument("--workers", type=int, default=2, help="DataLoader worker processes per rank")
    p.add_argument("--straggler-rank", type=int, default=1)
    p.add_argument("--straggler-delay", type=float, default=0, metavar="MS",
                   help="that rank sleeps MS ms in every step (host)")
    p.add_argument("--straggler-compute", type=int, default=0, metavar="K",
                   help="that rank runs its forward and backward K extra times per step (compute)")
    p.add_argument("--extra-allreduce", type=float, default=0, metavar="MB",
                   help="every rank all-reduces MB more per step (metrics done wrong)")
    p.add_argument("--rank0-work", type=float, default=0, metavar="MS",
                   help="rank 0 spends MS ms per step on host bookkeeping (waiting on a metrics or "
                        "checkpoint service: a sleep), then every rank meets it at a barrier")
    p.add_argument("--rank0-log", type=float, default=0, metavar="MS",
                   help="the same in a named function: rank 0's log_metrics() waits MS ms per step on a "
                        "(simulated) metrics service, then every rank meets it at a barrier")
    p.add_argument("--slow-data", type=float, default=0, metavar="MS",
                   help="each sample takes MS ms to load (a starved DataLoader)")
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                   help="cuda: the model on this rank's GPU (LOCAL_RANK), DDP over NCCL, pinned batches")
    p.add_argument("--host-sync", action="store_true",
                   help="read the loss on the host every step (loss.item(): the host waits for the GPU)")
    p.add_argument("--import-modules", type=int, default=0, metavar="K",
                   help="the DataLoader's workers import about K new modules of 384 KiB per step "
                        "(from DATA-modules/, written first)")
    p.add_argument("--torch-profiler", type=int, default=0, metavar="N",
                   help="profile N steps after the warm-up with torch.profiler (CPU and CUDA activities, "
                        "a schedule as users write it); the JSON line gains what it recorded")
    a = p.parse_args()
    if a.batch < 1 or a.steps < 1 or a.warmup < 0 or a.workers < 0 or a.hidden < 1 or a.layers < 1:
        p.error("--batch, --steps, --hidden and --layers must be positive; --warmup and --workers not negative")

    cuda = a.device == "cuda"
    if cuda:
        if not torch.cuda.is_available():
            p.error("--device cuda: this PyTorch has no CUDA device")
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    dev = torch.device("cuda" if cuda else "cpu")
    dist.init_process_group("nccl" if cuda else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    mods = a.data.rstrip("/") + "-modules"
    if rank == 0:
        make_data(a.data, a.samples)
        if a.import_modules:
            make_modules(mods, (a.warmup + a.steps + 4) * a.import_modules)  # and batches prefetched
    dist.barrier()
    if a.import_modules:
        sys.path.insert(0, mods)

    ds = FileSamples(a.data, a.slow_data, max(1, a.batch // a.import_modules) if a.import_modules > 0 else 0)
    sampler = DistributedSampler(ds, num_replicas=world, rank=rank, shuffle=True, seed=0)
    dl = DataLoader(ds, batch_size=a.batch, sampler=sampler, num_workers=a.workers, drop_last=True,
                    persistent_workers=a.workers > 0, pin_memory=cuda)
    dims = [FEATURES] + [a.hidden] * a.layers
    layers = []
    for i in range(len(dims) - 1):
        layers += [torch.nn.Linear(dims[i], dims[i + 1]), torch.nn.ReLU()]
    model = DDP(torch.nn.Sequential(*layers, torch.nn.Linear(dims[-1], CLASSES)).to(dev),
                device_ids=[torch.cuda.current_device()] if cuda else None)
    # Ground truth for a profiler: when this rank's backward finished computing, i.e. handed its
    # last gradient bucket to the all-reduce. Backward ends at the first layer; the others wait
    # there for a late rank, however it came to be late (a sleep, more work, a slower CPU).
    handed = [0.0]

    def grad_done(grad):
        handed[0] = time.time()

    hooks = [prm.register_hook(grad_done) for prm in layers[0].parameters()]
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_fn = torch.nn.CrossEntropyLoss()
    extra = torch.zeros(int(a.extra_allreduce * (1 << 20)) // 4, device=dev) if a.extra_allreduce > 0 else None
    # On the GPU the host only enqueues: a step's time is its device's, so each step ends by
    # waiting for the step before it (the host runs at most one step ahead, as a bounded queue
    # would let it), and the loss is read on the host at the end unless --host-sync.
    ends = [torch.cuda.Event(), torch.cuda.Event()] if cuda else None
    straggler = rank == a.straggler_rank

    prof, got = None, {}
    if a.torch_profiler > 0:
        from torch.profiler import ProfilerActivity, profile, schedule

        def ready(pr):  # the profiler's own record of its window: CUDA events (kernels, copies) and CPU ops
            ev = pr.events()
            got.update(cuda_events=sum(1 for e in ev if e.device_type.name == "CUDA"), cpu_ops=len(ev))
        prof = profile(activities=[ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else []),
                       schedule=schedule(wait=a.warmup, warmup=1, active=a.torch_profiler, repeat=1), on_trace_ready=ready)
        prof.start()

    it, epoch = iter(dl), 0
    steps, t_data, t_host, t_fwd, t_last, losses = [], [], [], [], [], []
    for s in range(a.warmup + a.steps):
        t0 = time.perf_counter()
        try:
            x, y = next(it)
        except StopIteration:
            epoch += 1
            sampler.set_epoch(epoch)
            it = iter(dl)
            x, y = next(it)
        t1 = time.perf_counter()  # (on the GPU: when the batch is on the host, pinned)
        if cuda:
            x, y = x.to(dev, non_blocking=True), y.to(dev, non_blocking=True)
        host = 0.0
        if straggler and a.straggler_delay:
            host += fetch_shard_index(a.straggler_delay)
        if straggler and a.straggler_compute:
            with model.no_sync():  # extra work, not extra gradients to reduce
                for _ in range(a.straggler_compute):
                    loss_fn(model(x), y).backward()
        opt.zero_grad()
        tf = time.perf_counter()
        out = model(x)
        fwd = time.perf_counter() - tf  # compute only: DDP's backward also waits for all-reduces
        loss = loss_fn(out, y)
        loss.backward()
        opt.step()
        if extra is not None:
            dist.all_reduce(extra)
        if a.rank0_work:
            if rank == 0:
                time.sleep(a.rank0_work / 1000.0)
                host += a.rank0_work
            dist.barrier()
        if a.rank0_log:
            if rank == 0:
                host += log_metrics(s, a.rank0_log)
            dist.barrier()
        if cuda:
            ends[s % 2].record()
            if s:
                ends[(s - 1) % 2].synchronize()
        lv = float(loss) if a.host_sync or not cuda else loss.detach()
        t2 = time.perf_counter()
        if s >= a.warmup:
            steps.append((t2 - t0) * 1000)
            t_data.append((t1 - t0) * 1000)
            t_host.append(host)
            t_fwd.append(fwd * 1000)
            t_last.append(handed[0])
            losses.append(lv)
        if prof is not None:
            prof.step()
    if prof is not None:
        prof.stop()

    for h in hooks:
        h.remove()
    losses = [float(v) for v in losses]
    mine = torch.tensor([statistics.median(steps), statistics.mean(t_data), statistics.mean(t_host),
                         statistics.median(t_fwd)], device=dev)
    every = [torch.zeros(4, device=dev) for _ in range(world)]
    dist.all_gather(every, mine)
    # how late each rank finished its backward, behind the earliest rank, per step (one host's
    # clock; float64: epoch seconds)
    last = [torch.zeros(len(t_last), dtype=torch.float64, device=dev) for _ in range(world)]
    dist.all_gather(last, torch.tensor(t_last, dtype=torch.float64, device=dev))
    late = [statistics.median(float(last[r][s] - min(last[q][s] for q in range(world))) * 1000
                              for s in range(len(t_last))) for r in range(world)]
    if rank == 0:
        p50 = statistics.median(steps)
        print(json.dumps({
            "world_size": world, "steps": a.steps, "warmup": a.warmup, "batch": a.batch,
            "step_ms_p50": round(p50, 3), "samples_per_s": round(world * a.batch * 1000 / p50, 1),
            "loss_first": round(losses[0], 5), "loss_last": round(losses[-1], 5),
            "ranks": [{"rank": r, "step_ms": round(float(v[0]), 3), "data_ms": round(float(v[1]), 3),
                       "host_ms": round(float(v[2]), 3), "forward_ms": round(float(v[3]), 3),
                       "backward_late_ms": round(late[r], 3)}
                      for r, v in enumerate(every)],
            **({"torch_profiler": got} if prof is not None else {}),
        }), flush=True)
    del it, dl  # the DataLoader's worker processes are shut down and joined here
    dist.destroy_process_group()
    # PyTorch 1.13 can hang at exit once Python hooks were registered on a DDP model's parameters
    # (even removed): destroying the model joins gloo's threads while holding the GIL that one of
    # them waits for (1 exit in 8 here). Everything is written and flushed: leave without teardown.
    os._exit(0)


if __name__ == "__main__":
    main()
