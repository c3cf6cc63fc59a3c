"""All-gather of sequence-parallel activations. From NVIDIA/Megatron-LM megatron/core/tensor_parallel/mappings.py::_gather_along_first_dim."""

from pkroof.kernels.problems._collectives import all_gather_into_tensor
from pkroof.rooflines import Collective, Workload
from pkroof.rooflines.builders import collective

CATEGORY = "collective"
SOURCE = "NVIDIA/Megatron-LM: megatron/core/tensor_parallel/mappings.py::_gather_along_first_dim"
SHAPES = {  # size_bytes: the gathered output (nccl-tests' convention); each rank contributes size_bytes / world_size
    "small": dict(size_bytes=2**20),
    # column-parallel input under sequence parallelism: 8192 tokens × hidden 8192 × bf16, gathered over TP=8
    "llama3-70b-tp8-activation": dict(size_bytes=8192 * 8192 * 2),
    "llama3-8b-tp2-activation": dict(size_bytes=8192 * 4096 * 2),  # 8192 tokens × hidden 4096 × bf16
}


def inputs(rank, world_size, *, seed, device, size_bytes):
    """This rank's shard: (size_bytes / 2 / world_size,) bf16."""
    import torch

    from pkroof.kernels.problems._random import generator

    if size_bytes % (2 * world_size):
        raise ValueError(
            f"all-gather: size_bytes={size_bytes} does not split into whole bf16 shards over {world_size} ranks"
        )
    g = generator(device, seed * 1000 + rank)
    return (torch.randn(size_bytes // 2 // world_size, generator=g, dtype=torch.bfloat16, device=device),)


def reference(shard):
    import torch.distributed as dist

    out = shard.new_empty(shard.numel() * dist.get_world_size())
    all_gather_into_tensor(out, shard)
    return out


def workload(world_size, *, size_bytes, dtype="bf16") -> Workload:
    return collective(Collective.ALL_GATHER, world_size, dtype, size=size_bytes)
