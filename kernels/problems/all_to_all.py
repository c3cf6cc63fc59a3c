"""All-to-all with equal splits, as in expert-parallel token dispatch. From NVIDIA/Megatron-LM megatron/core/tensor_parallel/mappings.py::all_to_all."""

from pkroof.rooflines import Collective, Workload
from pkroof.rooflines.builders import collective

CATEGORY = "collective"
SOURCE = "NVIDIA/Megatron-LM: megatron/core/tensor_parallel/mappings.py::all_to_all"
SHAPES = {  # size_bytes: one rank's send buffer (nccl-tests' convention); size_bytes / world_size goes to each peer
    "small": dict(size_bytes=2**20),
    # balanced MoE dispatch, 4096 tokens per rank × top-k × hidden × bf16 (Mixtral: top-2, 4096; DeepSeek-V3: top-8, 7168)
    "mixtral-8x7b-ep8-dispatch": dict(size_bytes=4096 * 2 * 4096 * 2),
    "deepseek-v3-ep8-dispatch": dict(size_bytes=4096 * 8 * 7168 * 2),
}


def inputs(rank, world_size, *, seed, device, size_bytes):
    """This rank's send buffer: (size_bytes / 2,) bf16, chunk j goes to rank j."""
    import torch

    from pkroof.kernels.problems._random import generator

    if size_bytes % (2 * world_size):
        raise ValueError(
            f"all-to-all: size_bytes={size_bytes} does not split into whole bf16 chunks over {world_size} ranks"
        )
    g = generator(device, seed * 1000 + rank)
    return (torch.randn(size_bytes // 2, generator=g, dtype=torch.bfloat16, device=device),)


def reference(x):
    import torch
    import torch.distributed as dist

    out = torch.empty_like(x)
    dist.all_to_all_single(out, x)  # chunk i of the output came from rank i
    return out


def workload(world_size, *, size_bytes, dtype="bf16") -> Workload:
    return collective(Collective.ALL_TO_ALL, world_size, dtype, size=size_bytes)
