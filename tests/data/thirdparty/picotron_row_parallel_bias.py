# From huggingface/picotron picotron/tensor_parallel/tensor_parallel.py::RowParallelLinear.forward (commit 5809434)
# nnf.linear on this rank's input slice, ReduceFromModelParallelRegion (an in-place all_reduce), then the bias
# (held whole on every rank) added once, after the reduction.
import torch
import torch.distributed as dist
import torch.nn.functional as nnf
from torch import nn


def inputs(rank, world_size, *, seed, device, batch=2, seq=32, in_features=256, out_features=128):
    if in_features % world_size:
        raise ValueError(f"in_features={in_features} is not divisible by the world size {world_size}")
    meta = torch.device(device).type == "meta"
    g = None if meta else torch.Generator(device=device).manual_seed(seed * 1000 + rank)
    x = torch.randn(batch, seq, in_features // world_size, generator=g, device=device, dtype=torch.bfloat16)
    proj = nn.Linear(in_features // world_size, out_features, bias=True, device=device, dtype=torch.bfloat16)
    proj.requires_grad_(False)
    if not meta:
        for p in proj.parameters():
            p.copy_(0.02 * torch.randn(p.shape, generator=g, device=device, dtype=p.dtype))
    return x, proj


def reference(x, proj):
    partial = nnf.linear(x, proj.weight)  # X_i W_i^T, a partial sum of the output
    dist.all_reduce(partial)
    return partial + proj.bias
