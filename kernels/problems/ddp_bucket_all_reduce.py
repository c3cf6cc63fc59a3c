"""DDP gradient bucket all-reduce, averaged over ranks. From pytorch/pytorch torch/distributed/algorithms/ddp_comm_hooks/default_hooks.py::allreduce_hook."""

from dataclasses import replace

from pkroof.rooflines import Collective
from pkroof.rooflines.builders import collective

CATEGORY = "data-parallel"
SOURCE = "pytorch/pytorch: torch/distributed/algorithms/ddp_comm_hooks/default_hooks.py::allreduce_hook"
SHAPES = {  # size_bytes: one gradient bucket
    "small": dict(size_bytes=2**20),  # also DDP's first bucket (dist._DEFAULT_FIRST_BUCKET_BYTES = 1 MiB)
    "ddp-bucket-25mb": dict(size_bytes=25 * 2**20),  # DDP's default bucket_cap_mb = 25
}


def inputs(rank, world_size, *, seed, device, size_bytes):
    """This rank's flattened gradient bucket: (size_bytes / 2,) bf16."""
    import torch

    from pkroof.kernels.problems._random import generator

    if size_bytes % 2:
        raise ValueError(f"ddp-bucket-all-reduce: size_bytes={size_bytes} is not a whole number of bf16 elements")
    g = generator(device, seed * 1000 + rank)
    return (torch.randn(size_bytes // 2, generator=g, dtype=torch.bfloat16, device=device),)


def reference(bucket):
    import torch.distributed as dist

    out = bucket / dist.get_world_size()  # the hook divides before it sums (tensor.div_ in _allreduce_fut)
    dist.all_reduce(out)
    return out


def workload(world_size, *, size_bytes, dtype="bf16"):
    """An all-reduce of the bucket (the division is elementwise: no FLOPs counted, no extra HBM pass in a fused
    kernel); size_bytes stays the bucket's bytes in any dtype, as DDP's bucket_cap_mb."""
    return replace(collective(Collective.ALL_REDUCE, world_size, dtype, size=size_bytes), name="ddp-bucket-all-reduce")
