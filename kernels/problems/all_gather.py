"""All-gather of sequence-parallel activations. From NVIDIA/Megatron-LM megatron/core/tensor_parallel/mappings.py::_gather_along_first_dim."""

import torch
import torch.distributed as dist

from pkroof.kernels.problems._random import generator
from pkroof.rooflines import Workload
from pkroof.rooflines.workloads import build

CATEGORY = "collective"
SOURCE = "NVIDIA/Megatron-LM: megatron/core/tensor_parallel/mappings.py::_gather_along_first_dim"
SHAPES = {  # size_bytes: the gathered output (nccl-tests' convention); each rank contributes size_bytes / world_size
    "small": dict(size_bytes=2**20),
    # column-parallel input under sequence parallelism: 8192 tokens × hidden 8192 × bf16, gathered over TP=8
    "llama3-70b-tp8-activation": dict(size_bytes=8192 * 8192 * 2),
    "llama3-8b-tp2-activation": dict(size_bytes=8192 * 4096 * 2),  # 8192 tokens × hidden 4096 × bf16
}

# torch 2.13 renamed all_gather_into_tensor (the name Megatron calls; it now warns) to all_gather_single
_all_gather_into_tensor = getattr(dist, "all_gather_single", dist.all_gather_into_tensor)


def inputs(rank, world_size, *, seed, device, size_bytes):
    """This rank's shard: (size_bytes / 2 / world_size,) bf16."""
    if size_bytes % (2 * world_size):
        raise ValueError(
            f"all-gather: size_bytes={size_bytes} does not split into whole bf16 shards over {world_size} ranks"
        )
    g = generator(device, seed * 1000 + rank)
    return (torch.randn(size_bytes // 2 // world_size, generator=g, dtype=torch.bfloat16, device=device),)


def reference(shard):
    out = shard.new_empty(shard.numel() * dist.get_world_size())
    _all_gather_into_tensor(out, shard)
    return out


def workload(world_size, *, size_bytes, dtype="bf16") -> Workload:
    return build("all-gather", world_size, dtype, size=size_bytes)
