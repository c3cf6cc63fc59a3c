"""An all-reduce, then each row summed term by term in the inputs' dtype: in bf16 the running sum rounds at every
step, so the reference itself is a few percent off the exact sum, and an implementation that accumulates in fp32
is closer to the exact answer than the reference is. The profiler's oracle (the reference rerun in fp32) decides."""

import torch
import torch.distributed as dist

SHAPES = {"small": dict(rows=64, cols=512)}


def inputs(rank, world_size, *, seed, device, rows, cols):
    g = torch.Generator().manual_seed(seed * 100 + rank)
    return (torch.rand(rows, cols, generator=g).to(torch.bfloat16).to(device),)


def reference(x):
    y = x.clone()
    dist.all_reduce(y)
    acc = torch.zeros(y.shape[0], dtype=y.dtype, device=y.device)
    for j in range(y.shape[1]):
        acc = acc + y[:, j]
    return acc


def fp32_accumulation(x):  # the same sums, accumulated in fp32 and rounded once: closer to exact than the reference
    y = x.clone()
    dist.all_reduce(y)
    return y.float().sum(dim=1).to(x.dtype)


def three_percent_high(x):  # wrong: 3% above the exact sums
    return (fp32_accumulation(x).float() * 1.03).to(x.dtype)
