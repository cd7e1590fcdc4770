"""A pipeline-parallel MLP trainer for ddpspy's PyTorch examples: the model's layers in stages, one
rank a stage, each step's batch cut into micro-batches whose activations go forward and whose
gradients come back with torch.distributed.send and recv over gloo (CPU), a GPipe or 1F1B schedule,
and a switch that makes one stage slower than the others. Nothing in it knows about ddpspy; run it as

    torchrun --standalone --nproc_per_node=2 --redirects 1 --tee 1 pipeline.py [switches]
    LD_PRELOAD=build/libddpspy.so DDPSPY_OUT=out torchrun ... (the same)

Rank 0 prints, as its last line, a JSON summary measured by the trainer itself: per rank its stage,
step time, and time blocked in recv (the ground truth a profiler's bubble and imbalance are checked
against), and the bubble GPipe and 1F1B predict for equal stages, (S - 1) / (M + S - 1).
"""
import argparse
import json
import statistics
import time

import torch
import torch.distributed as dist
import torch.nn as nn


def burn(ms):
    """ms of arithmetic on this rank's CPU: a slower stage's extra work"""
    end = time.perf_counter() + ms / 1000.0
    a = torch.ones(64, 64)
    while time.perf_counter() < end:
        a = torch.mm(a, a) * 1e-3


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=20, help="steps measured, after --warmup")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--batch", type=int, default=64, help="samples per step")
    p.add_argument("--microbatches", type=int, default=4)
    p.add_argument("--schedule", choices=("gpipe", "1f1b"), default="gpipe")
    p.add_argument("--hidden", type=int, default=512)
    p.add_argument("--layers", type=int, default=4, help="hidden layers per stage")
    p.add_argument("--slow-stage", type=int, default=-1, help="this stage works --slow-ms more per micro-batch")
    p.add_argument("--slow-ms", type=float, default=0.0)
    a = p.parse_args()
    dist.init_process_group("gloo")
    rank, S = dist.get_rank(), dist.get_world_size()
    M = a.microbatches
    if a.batch % M:
        raise SystemExit("--batch must be a multiple of --microbatches")
    torch.set_num_threads(1)
    torch.manual_seed(rank)
    stage, first, last = rank, rank == 0, rank == S - 1
    # the stages' work equal: the first stage computes no gradient at its input, so its first layer
    # takes half again as many inputs as the others do (two products of 1.5 H x H cost what a hidden
    # layer's three do); the last stage's head and loss are small beside them
    width = 3 * a.hidden // 2
    layers = []
    for i in range(a.layers):
        layers += [nn.Linear(width if first and i == 0 else a.hidden, a.hidden), nn.ReLU()]
    if last:
        layers.append(nn.Linear(a.hidden, 10))
    model = nn.Sequential(*layers)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    slow = a.slow_ms if stage == a.slow_stage else 0.0
    rows = a.batch // M
    data = torch.Generator().manual_seed(1)  # (the first and last stages draw the same batches)
    step_ms, wait_ms = [], []

    def recv(shape, src):
        t = torch.empty(shape)
        t0 = time.perf_counter()
        dist.recv(t, src)
        waited[0] += time.perf_counter() - t0
        return t

    for step in range(a.warmup + a.steps):
        t0 = time.perf_counter()
        waited = [0.0]
        x = torch.randn(a.batch, width, generator=data)
        y = torch.randint(0, 10, (a.batch,), generator=data)
        opt.zero_grad()
        ins, outs, losses = [None] * M, [None] * M, [None] * M

        def forward(m):
            if first:
                ins[m] = x[m * rows:(m + 1) * rows]
            else:
                ins[m] = recv((rows, a.hidden), rank - 1).requires_grad_()
            outs[m] = model(ins[m])
            burn(slow / 2)
            if last:
                losses[m] = nn.functional.cross_entropy(outs[m], y[m * rows:(m + 1) * rows]) / M
            else:
                dist.send(outs[m].detach(), rank + 1)

        def backward(m):
            if last:
                losses[m].backward()
            else:
                outs[m].backward(recv(outs[m].shape, rank + 1))
            burn(slow / 2)
            if not first:
                dist.send(ins[m].grad, rank - 1)

        warm = M if a.schedule == "gpipe" else min(S - stage - 1, M)
        for m in range(warm):
            forward(m)
        for m in range(warm, M):  # 1F1B's steady state
            forward(m)
            backward(m - warm)
        for m in range(M - warm, M):
            backward(m)
        opt.step()
        if step >= a.warmup:
            step_ms.append((time.perf_counter() - t0) * 1e3)
            wait_ms.append(waited[0] * 1e3)
    mine = {"rank": rank, "stage": stage, "step_ms": statistics.median(step_ms),
            "recv_wait_ms": statistics.median(wait_ms)}
    every = [None] * S
    dist.all_gather_object(every, mine)
    if rank == 0:
        print(json.dumps({"steps": a.steps, "stages": S, "microbatches": M, "schedule": a.schedule,
                          "bubble_predicted": round((S - 1) / (M + S - 1), 4), "slow_stage": a.slow_stage,
                          "slow_ms": a.slow_ms, "step_ms_p50": statistics.median(r["step_ms"] for r in every),
                          "ranks": every}), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
