"""Scatter of a buffer from rank 0 in equal chunks. From pytorch/pytorch torch/distributed/distributed_c10d.py::scatter."""

from pkroof.rooflines import Collective, Workload
from pkroof.rooflines.builders import collective

CATEGORY = "collective"
SOURCE = "pytorch/pytorch: torch/distributed/distributed_c10d.py::scatter"
SHAPES = {  # size_bytes: the full input on rank 0 (nccl-tests' convention); each rank receives size_bytes / world_size
    "small": dict(size_bytes=2**20),
    "llama3-70b-tp8-activation": dict(size_bytes=8192 * 8192 * 2),  # 8192 tokens × hidden 8192 × bf16 over TP=8
}


def inputs(rank, world_size, *, seed, device, size_bytes):
    """A (size_bytes / 2,) bf16 buffer on every rank; only rank 0's is scattered."""
    import torch

    from pkroof.kernels.problems._random import generator

    if size_bytes % (2 * world_size):
        raise ValueError(
            f"scatter: size_bytes={size_bytes} does not split into whole bf16 chunks over {world_size} ranks"
        )
    g = generator(device, seed * 1000 + rank)
    return (torch.randn(size_bytes // 2, generator=g, dtype=torch.bfloat16, device=device),)


def reference(x):
    import torch.distributed as dist

    world_size = dist.get_world_size()
    out = x.new_empty(x.numel() // world_size)
    dist.scatter(out, list(x.chunk(world_size)) if dist.get_rank() == 0 else None, src=0)
    return out


def workload(world_size, *, size_bytes, dtype="bf16") -> Workload:
    return collective(Collective.SCATTER, world_size, dtype, size=size_bytes)
