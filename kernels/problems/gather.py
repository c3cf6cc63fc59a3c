"""Gather of vocab-parallel logits to rank 0 for sampling. From vllm-project/vllm vllm/distributed/parallel_state.py::GroupCoordinator.gather."""

from pkroof.rooflines import Collective, Workload
from pkroof.rooflines.builders import collective

CATEGORY = "collective"
SOURCE = "vllm-project/vllm: vllm/distributed/parallel_state.py::GroupCoordinator.gather"
SHAPES = {  # size_bytes: the gathered output (nccl-tests' convention); each rank sends size_bytes / world_size
    "small": dict(size_bytes=2**20),
    # decode step: 256 sequences × vocab 128256 × bf16 logits (vLLM gathers along vocab; same bytes flat)
    "llama3-70b-tp8-decode-logits": dict(size_bytes=256 * 128256 * 2),
}


def inputs(rank, world_size, *, seed, device, size_bytes):
    """This rank's shard: (size_bytes / 2 / world_size,) bf16."""
    import torch

    from pkroof.kernels.problems._random import generator

    if size_bytes % (2 * world_size):
        raise ValueError(
            f"gather: size_bytes={size_bytes} does not split into whole bf16 shards over {world_size} ranks"
        )
    g = generator(device, seed * 1000 + rank)
    return (torch.randn(size_bytes // 2 // world_size, generator=g, dtype=torch.bfloat16, device=device),)


def reference(shard):
    """Rank 0 returns the shards concatenated in rank order; the other ranks return an empty tensor."""
    import torch
    import torch.distributed as dist

    root = dist.get_rank() == 0
    gather_list = [torch.empty_like(shard) for _ in range(dist.get_world_size())] if root else None
    dist.gather(shard, gather_list, dst=0)
    return torch.cat(gather_list) if root else shard.new_empty(0)


def workload(world_size, *, size_bytes, dtype="bf16") -> Workload:
    return collective(Collective.GATHER, world_size, dtype, size=size_bytes)
