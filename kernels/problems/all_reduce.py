"""All-reduce of a tensor-parallel partial sum. From NVIDIA/Megatron-LM megatron/core/tensor_parallel/mappings.py::_reduce."""

from pkroof.rooflines import Collective, Workload
from pkroof.rooflines.builders import collective

CATEGORY = "collective"
SOURCE = "NVIDIA/Megatron-LM: megatron/core/tensor_parallel/mappings.py::_reduce"
SHAPES = {  # size_bytes: the buffer every rank reduces (nccl-tests' convention)
    "small": dict(size_bytes=2**20),
    "llama3-70b-tp8-activation": dict(size_bytes=8192 * 8192 * 2),  # row-parallel output: 8192 tokens × 8192 × bf16
    "llama3-8b-tp2-activation": dict(size_bytes=8192 * 4096 * 2),  # 8192 tokens × hidden 4096 × bf16
}


def inputs(rank, world_size, *, seed, device, size_bytes):
    """This rank's partial sum: (size_bytes / 2,) bf16."""
    import torch

    from pkroof.kernels.problems._random import generator

    if size_bytes % 2:
        raise ValueError(f"all-reduce: size_bytes={size_bytes} is not a whole number of bf16 elements (2 B each)")
    g = generator(device, seed * 1000 + rank)
    return (torch.randn(size_bytes // 2, generator=g, dtype=torch.bfloat16, device=device),)


def reference(x):
    """x is copied first: a reference must not change its inputs, while Megatron's _reduce and nccl-tests run NCCL in place
    (profiled beside as nccl-all-reduce-in-place)."""
    import torch.distributed as dist

    out = x.clone()
    dist.all_reduce(out)
    return out


def workload(world_size, *, size_bytes, dtype="bf16") -> Workload:
    return collective(Collective.ALL_REDUCE, world_size, dtype, size=size_bytes)
