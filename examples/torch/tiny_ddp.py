"""A tiny data-parallel job for ddpspy's PyTorch examples: DistributedDataParallel over gloo of one
20 -> 1 linear layer, a batch of 32 samples per rank made in memory, so that each step's gradient
all-reduce moves 84 bytes against well under a millisecond of work. Its collectives cost their
fixed latency, not their bytes (the strong-scaling trap of seed 001). --extra-allreduce MB adds an
all-reduce of MB MiB every step, whose bytes are then the cost. Nothing in it knows about ddpspy:

    torchrun --standalone --nproc_per_node=2 --redirects 1 --tee 1 tiny_ddp.py [--steps N]

Rank 0 prints, as its last line, a JSON summary measured by the job itself: the step time, the
time in the step's all-reduces, and their bytes.
"""
import argparse
import json
import statistics
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=300, help="steps measured, after --warmup")
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--batch", type=int, default=32, help="samples per rank per step")
    p.add_argument("--features", type=int, default=20)
    p.add_argument("--accum", type=int, default=1, metavar="K",
                   help="K micro-batches per step, gradients all-reduced once (no_sync for the others)")
    p.add_argument("--extra-allreduce", type=float, default=0, metavar="MB",
                   help="an extra all-reduce of MB MiB every step")
    a = p.parse_args()
    if a.steps < 1 or a.warmup < 0 or a.batch < 1 or a.features < 1 or a.accum < 1 or a.extra_allreduce < 0:
        p.error("--steps, --batch, --features and --accum must be positive; --warmup and --extra-allreduce not negative")
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(rank)
    model = DDP(torch.nn.Linear(a.features, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(a.batch, a.features), torch.randn(a.batch, 1)
    extra = torch.zeros(int(a.extra_allreduce * (1 << 20)) // 4) if a.extra_allreduce > 0 else None
    steps, extras = [], []
    for s in range(a.warmup + a.steps):
        t0 = time.perf_counter()
        opt.zero_grad()
        for _ in range(a.accum - 1):
            with model.no_sync():
                torch.nn.functional.mse_loss(model(x), y).backward()
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()
        t1 = time.perf_counter()
        if extra is not None:
            dist.all_reduce(extra)
        t2 = time.perf_counter()
        if s >= a.warmup:
            steps.append((t2 - t0) * 1000)
            extras.append((t2 - t1) * 1000)
    grad_bytes = sum(q.numel() * q.element_size() for q in model.parameters())
    if rank == 0:
        print(json.dumps({
            "world_size": world, "steps": a.steps, "batch": a.batch, "accum": a.accum,
            "step_ms_p50": round(statistics.median(steps), 4),
            "samples_per_s": round(world * a.batch * a.accum * 1000 / statistics.median(steps), 1),
            "grad_bytes": grad_bytes, "extra_bytes": extra.numel() * 4 if extra is not None else 0,
            "extra_ms_p50": round(statistics.median(extras), 4),
        }), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
