"""Broadcast of a bucket of module states from rank 0, as DDP does at construction. From pytorch/pytorch torch/distributed/utils.py::_sync_params_and_buffers."""

from pkroof.rooflines import Collective, Workload
from pkroof.rooflines.builders import collective

CATEGORY = "collective"
# _sync_params_and_buffers broadcasts the states in buckets through dist._broadcast_coalesced: one broadcast per bucket
SOURCE = "pytorch/pytorch: torch/distributed/utils.py::_sync_params_and_buffers"
SHAPES = {  # size_bytes: the broadcast buffer (nccl-tests' convention)
    "small": dict(size_bytes=2**20),
    "ddp-broadcast-bucket-250mb": dict(size_bytes=250 * 2**20),  # DDP's broadcast_bucket_size = 250 MiB
}


def inputs(rank, world_size, *, seed, device, size_bytes):
    """A (size_bytes / 2,) bf16 buffer on every rank; rank 0's is the one broadcast."""
    import torch

    from pkroof.kernels.problems._random import generator

    if size_bytes % 2:
        raise ValueError(f"broadcast: size_bytes={size_bytes} is not a whole number of bf16 elements (2 B each)")
    g = generator(device, seed * 1000 + rank)
    return (torch.randn(size_bytes // 2, generator=g, dtype=torch.bfloat16, device=device),)


def reference(x):
    """x is copied first: a reference must not change its inputs, while DDP's parameter broadcast and nccl-tests run NCCL in place
    (profiled beside as nccl-broadcast-in-place)."""
    import torch.distributed as dist

    out = x.clone()
    dist.broadcast(out, src=0)
    return out


def workload(world_size, *, size_bytes, dtype="bf16") -> Workload:
    return collective(Collective.BROADCAST, world_size, dtype, size=size_bytes)
