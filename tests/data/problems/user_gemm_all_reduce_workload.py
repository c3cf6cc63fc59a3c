"""Row-parallel linear then all-reduce, with its workload written by hand (as a user who knows it would). From NVIDIA/Megatron-LM megatron/core/tensor_parallel/layers.py::RowParallelLinear."""

import torch
import torch.distributed as dist

from pkroof.rooflines import Workload
from pkroof.rooflines.builders import gemm_all_reduce

CATEGORY = "tp-gemm"
SOURCE = "NVIDIA/Megatron-LM: megatron/core/tensor_parallel/layers.py::RowParallelLinear"
SHAPES = {"small": dict(m=64, n=32, k=16), "wide": dict(m=128, n=256, k=64)}


def inputs(rank, world_size, *, seed, device, m, n, k):
    g = torch.Generator().manual_seed(seed * 100 + rank)
    a = torch.randn(m, k, generator=g, dtype=torch.float32)
    b = torch.randn(k, n, generator=g, dtype=torch.float32)
    return a.to(device), b.to(device)


def reference(a, b):
    out = a @ b
    dist.all_reduce(out)
    return out


def workload(world_size, *, m, n, k) -> Workload:
    return gemm_all_reduce(world_size, "fp32", m=m, n=n, k=k)
