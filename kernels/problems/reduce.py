"""Reduce of a gradient slice to the rank that owns its partition. From deepspeedai/DeepSpeed deepspeed/runtime/zero/stage_1_and_2.py::DeepSpeedZeroOptimizer.average_tensor."""

from pkroof.rooflines import Collective, Workload
from pkroof.rooflines.builders import collective

CATEGORY = "collective"
SOURCE = "deepspeedai/DeepSpeed: deepspeed/runtime/zero/stage_1_and_2.py::DeepSpeedZeroOptimizer.average_tensor"
SHAPES = {  # size_bytes: the reduced buffer (nccl-tests' convention)
    "small": dict(size_bytes=2**20),
    # one partition's slice of DeepSpeed's default reduce_bucket_size (5e8 elements) at data-parallel size 8, bf16
    "deepspeed-bucket-slice-dp8": dict(size_bytes=500_000_000 // 8 * 2),
}


def inputs(rank, world_size, *, seed, device, size_bytes):
    """This rank's gradient slice: (size_bytes / 2,) bf16."""
    import torch

    from pkroof.kernels.problems._random import generator

    if size_bytes % 2:
        raise ValueError(f"reduce: size_bytes={size_bytes} is not a whole number of bf16 elements (2 B each)")
    g = generator(device, seed * 1000 + rank)
    return (torch.randn(size_bytes // 2, generator=g, dtype=torch.bfloat16, device=device),)


def reference(x):
    """Rank 0 returns the sum; the other ranks return an empty tensor. x is copied first: a reference must not
    change its inputs, while DeepSpeed's average_tensor and nccl-tests run NCCL in place (profiled beside as nccl-reduce-in-place)."""
    import torch.distributed as dist

    out = x.clone()
    dist.reduce(out, dst=0)
    return out if dist.get_rank() == 0 else x.new_empty(0)


def workload(world_size, *, size_bytes, dtype="bf16") -> Workload:
    return collective(Collective.REDUCE, world_size, dtype, size=size_bytes)
