"""Reduce-scatter of sequence-parallel partial sums. From NVIDIA/Megatron-LM megatron/core/tensor_parallel/mappings.py::_reduce_scatter_along_first_dim."""

from pkroof.kernels.problems._collectives import reduce_scatter_tensor
from pkroof.rooflines import Collective, Workload
from pkroof.rooflines.builders import collective

CATEGORY = "collective"
SOURCE = "NVIDIA/Megatron-LM: megatron/core/tensor_parallel/mappings.py::_reduce_scatter_along_first_dim"
SHAPES = {  # size_bytes: the full input on every rank (nccl-tests' convention); each rank keeps size_bytes / world_size
    "small": dict(size_bytes=2**20),
    # row-parallel output under sequence parallelism: 8192 tokens × hidden 8192 × bf16, scattered over TP=8
    "llama3-70b-tp8-activation": dict(size_bytes=8192 * 8192 * 2),
    "llama3-8b-tp2-activation": dict(size_bytes=8192 * 4096 * 2),  # 8192 tokens × hidden 4096 × bf16
}


def inputs(rank, world_size, *, seed, device, size_bytes):
    """This rank's partial sum of the whole tensor: (size_bytes / 2,) bf16."""
    import torch

    from pkroof.kernels.problems._random import generator

    if size_bytes % (2 * world_size):
        raise ValueError(
            f"reduce-scatter: size_bytes={size_bytes} does not split into whole bf16 shards over {world_size} ranks"
        )
    g = generator(device, seed * 1000 + rank)
    return (torch.randn(size_bytes // 2, generator=g, dtype=torch.bfloat16, device=device),)


def reference(x):
    import torch.distributed as dist

    out = x.new_empty(x.numel() // dist.get_world_size())
    reduce_scatter_tensor(out, x)
    return out


def workload(world_size, *, size_bytes, dtype="bf16") -> Workload:
    return collective(Collective.REDUCE_SCATTER, world_size, dtype, size=size_bytes)
