"""A PyTorch job over gloo that hangs, on purpose, for the hang verdict's tests: STEPS all-reduces
of a 1024-float tensor, then rank 1 blocks in a read of the FIFO PATH (nobody writes it) before its
next all-reduce, which rank 0 waits in. Rank 0 prints "hanging" once it is about to.

    torchrun --standalone --nproc_per_node=2 --redirects 1 --tee 1 hang_gloo.py STEPS PATH
"""
import os
import sys

import torch
import torch.distributed as dist


def main():
    steps, path = int(sys.argv[1]), sys.argv[2]
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    t = torch.ones(1024)
    for _ in range(steps):
        dist.all_reduce(t)
    if rank == 0:
        print("hanging", flush=True)
    if rank == 1:
        fd = os.open(path, os.O_RDWR)
        os.read(fd, 1)
    dist.all_reduce(t)


if __name__ == "__main__":
    main()
