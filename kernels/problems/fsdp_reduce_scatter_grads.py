"""FSDP2 reduce-scatter of one parameter group's flat gradients, averaged over ranks. From pytorch/pytorch torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py::foreach_reduce."""

import torch
import torch.distributed as dist

from pkroof.kernels.problems._random import generator

CATEGORY = "data-parallel"
SOURCE = "pytorch/pytorch: torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py::foreach_reduce"
SHAPES = {  # numel: gradients in the group (one transformer block); each rank keeps numel / world_size
    "small": dict(numel=2**19),
    # Llama-3-8B block: q,o 4096² + k,v 1024×4096 + gate,up,down 3×4096×14336 + 2 norms of 4096
    "llama3-8b-block": dict(numel=2 * 4096 * 4096 + 2 * 1024 * 4096 + 3 * 4096 * 14336 + 2 * 4096),
    # Llama-3-70B block: q,o 8192² + k,v 1024×8192 + gate,up,down 3×8192×28672 + 2 norms of 8192
    "llama3-70b-block": dict(numel=2 * 8192 * 8192 + 2 * 1024 * 8192 + 3 * 8192 * 28672 + 2 * 8192),
}

# torch 2.13 renamed reduce_scatter_tensor (the name FSDP2 calls; it now warns) to reduce_scatter_single
_reduce_scatter_tensor = getattr(dist, "reduce_scatter_single", dist.reduce_scatter_tensor)


def inputs(rank, world_size, *, seed, device, numel):
    """This rank's unsharded flat bf16 gradients, already laid out rank-major (FSDP2's copy-in): (numel,)."""
    if numel % world_size:
        raise ValueError(f"fsdp-reduce-scatter-grads: numel={numel} is not divisible by the world size {world_size}")
    g = generator(device, seed * 1000 + rank)
    return (torch.randn(numel, generator=g, dtype=torch.bfloat16, device=device),)


def reference(grads):
    """This rank's shard of the mean gradient: (numel / world_size,) bf16."""
    out = grads.new_empty(grads.numel() // dist.get_world_size())
    _reduce_scatter_tensor(out, grads, op=dist.ReduceOp.AVG)  # FSDP2's default for bf16 on NCCL
    return out
