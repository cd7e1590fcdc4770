"""A data-parallel transformer trainer on variable-length sequences for ddpspy's PyTorch examples:
DistributedDataParallel over gloo (CPU) or, with --device cuda, NCCL (one GPU per rank), batches
padded to their longest sequence, and the choice
of how sequences are batched, which is what decides whether ranks get equal work (seed 000):

  --batching fixed    a fixed number of sequences per rank per step, in random order: ranks pad to
                      different lengths and the one with the longest sequence sets the step
  --batching bucket   every rank draws its sequences of a step from the same length bucket

Nothing in it knows about ddpspy; run it as

    torchrun --standalone --nproc_per_node=2 --redirects 1 --tee 1 train_transformer.py [switches]

Rank 0 prints, as its last line, a JSON summary measured by the trainer itself, with the padded
tokens per rank per step and their imbalance (the ground truth for ddpspy's work_skew).
"""
import argparse
import json
import os
import random
import statistics
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

VOCAB = 1000


class Model(torch.nn.Module):
    def __init__(self, dim, layers):
        super().__init__()
        self.emb = torch.nn.Embedding(VOCAB, dim)
        layer = torch.nn.TransformerEncoderLayer(dim, nhead=4, dim_feedforward=2 * dim, batch_first=True)
        self.enc = torch.nn.TransformerEncoder(layer, layers)
        self.out = torch.nn.Linear(dim, 2)

    def forward(self, x, pad):
        h = self.enc(self.emb(x), src_key_padding_mask=pad)
        h = h.masked_fill(pad.unsqueeze(-1), 0).sum(1) / (~pad).sum(1, keepdim=True)
        return self.out(h)


def lengths(n, lo, hi, seed):
    """Sequence lengths with a long tail, like text: most short, a few near hi."""
    r = random.Random(seed)
    return [max(lo, min(hi, int(r.lognormvariate(4.0, 0.7)))) for _ in range(n)]


def batches(lens, rank, world, batch, mode, steps, seed):
    """This rank's list of sequence indices for each step."""
    r = random.Random(seed)
    order = list(range(len(lens)))
    out = []
    if mode == "fixed":
        while len(out) < steps:
            r.shuffle(order)
            per = world * batch
            for s in range(0, len(order) - per + 1, per):
                out.append(order[s + rank * batch:s + (rank + 1) * batch])
    else:  # bucket: sort by length, cut into steps of world * batch neighbours, shuffle the steps
        order.sort(key=lambda i: lens[i])
        per = world * batch
        groups = [order[s:s + per] for s in range(0, len(order) - per + 1, per)]
        while len(out) < steps:
            r.shuffle(groups)
            for g in groups:
                out.append(g[rank::world])
    return out[:steps]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--batching", choices=("fixed", "bucket"), default="fixed")
    p.add_argument("--sequences", type=int, default=4096)
    p.add_argument("--min-len", type=int, default=8)
    p.add_argument("--max-len", type=int, default=256)
    p.add_argument("--batch", type=int, default=8, help="sequences per rank per step")
    p.add_argument("--dim", type=int, default=64)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--steps", type=int, default=30, help="steps measured, after --warmup")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--straggler-rank", type=int, default=1)
    p.add_argument("--straggler-delay", type=float, default=0, metavar="MS",
                   help="that rank sleeps MS ms in every step (host)")
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                   help="cuda: the model on this rank's GPU (LOCAL_RANK), DDP over NCCL")
    a = p.parse_args()
    if a.batch < 1 or a.steps < 1 or a.warmup < 0 or not 1 <= a.min_len <= a.max_len or a.dim % 4:
        p.error("--batch and --steps must be positive, --warmup not negative, 1 <= --min-len <= --max-len, "
                "--dim a multiple of 4")

    cuda = a.device == "cuda"
    if cuda:
        if not torch.cuda.is_available():
            p.error("--device cuda: this PyTorch has no CUDA device")
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    dev = torch.device("cuda" if cuda else "cpu")
    dist.init_process_group("nccl" if cuda else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    lens = lengths(a.sequences, a.min_len, a.max_len, seed=1)
    if a.sequences < world * a.batch:
        p.error("--sequences must be at least world size x --batch")
    plan = batches(lens, rank, world, a.batch, a.batching, a.warmup + a.steps, seed=2)
    gen = torch.Generator().manual_seed(3 + rank)
    model = DDP(Model(a.dim, a.layers).to(dev), device_ids=[torch.cuda.current_device()] if cuda else None)
    # on the GPU a step's time is its device's: each step waits for the one before it to end
    ends = [torch.cuda.Event(), torch.cuda.Event()] if cuda else None
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    loss_fn = torch.nn.CrossEntropyLoss()

    steps, padded, tokens = [], [], []
    for s, idx in enumerate(plan):
        t0 = time.perf_counter()
        L = max(lens[i] for i in idx)
        x = torch.randint(0, VOCAB, (len(idx), L), generator=gen)
        pad = torch.arange(L).unsqueeze(0) >= torch.tensor([lens[i] for i in idx]).unsqueeze(1)
        y = (x[:, 0] % 2)
        if cuda:
            x, pad, y = x.to(dev, non_blocking=True), pad.to(dev, non_blocking=True), y.to(dev, non_blocking=True)
        if rank == a.straggler_rank and a.straggler_delay:
            time.sleep(a.straggler_delay / 1000.0)
        opt.zero_grad()
        loss = loss_fn(model(x, pad), y)
        loss.backward()
        opt.step()
        if cuda:
            ends[s % 2].record()
            if s:
                ends[(s - 1) % 2].synchronize()
        if s >= a.warmup:
            steps.append((time.perf_counter() - t0) * 1000)
            padded.append(len(idx) * L)
            tokens.append(sum(lens[i] for i in idx))

    mine = torch.tensor([statistics.median(steps)] + padded + tokens, dtype=torch.float64, device=dev)
    every = [torch.zeros_like(mine) for _ in range(world)]
    dist.all_gather(every, mine)
    if rank == 0:
        n = a.steps

        def imbalance(off):  # mean over steps of (max - mean) / mean over ranks
            v = []
            for k in range(n):
                row = [float(e[off + k]) for e in every]
                m = statistics.mean(row)
                v.append((max(row) - m) / m if m else 0.0)
            return statistics.mean(v)

        p50 = statistics.median(steps)
        print(json.dumps({
            "world_size": world, "steps": n, "warmup": a.warmup, "batching": a.batching, "batch": a.batch,
            "step_ms_p50": round(p50, 3), "samples_per_s": round(world * a.batch * 1000 / p50, 1),
            "padded_imbalance": round(imbalance(1), 4), "token_imbalance": round(imbalance(1 + n), 4),
            "padding_ratio": round(1 - sum(float(e[1 + n + k]) for e in every for k in range(n)) /
                                   sum(float(e[1 + k]) for e in every for k in range(n)), 4),
            "ranks": [{"rank": r, "step_ms": round(float(e[0]), 3),
                       "padded_tokens_per_step": round(statistics.mean(float(e[1 + k]) for k in range(n)), 1)}
                      for r, e in enumerate(every)],
        }), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
