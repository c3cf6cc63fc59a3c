"""FSDP2 reduce-scatter of one parameter group's flat gradients, averaged over ranks. From pytorch/pytorch torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py::foreach_reduce."""

from pkroof.kernels.problems._collectives import reduce_scatter_tensor

CATEGORY = "data-parallel"
SOURCE = "pytorch/pytorch: torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py::foreach_reduce"
SHAPES = {  # numel: gradients in the group (one transformer block); each rank keeps numel / world_size
    "small": dict(numel=2**19),
    # Llama-3-8B block: q,o 4096² + k,v 1024×4096 + gate,up,down 3×4096×14336 + 2 norms of 4096
    "llama3-8b-block": dict(numel=2 * 4096 * 4096 + 2 * 1024 * 4096 + 3 * 4096 * 14336 + 2 * 4096),
    # Llama-3-70B block: q,o 8192² + k,v 1024×8192 + gate,up,down 3×8192×28672 + 2 norms of 8192
    "llama3-70b-block": dict(numel=2 * 8192 * 8192 + 2 * 1024 * 8192 + 3 * 8192 * 28672 + 2 * 8192),
}


def inputs(rank, world_size, *, seed, device, numel):
    """This rank's unsharded flat bf16 gradients, already laid out rank-major (FSDP2's copy-in): (numel,)."""
    import torch

    from pkroof.kernels.problems._random import generator

    if numel % world_size:
        raise ValueError(f"fsdp-reduce-scatter-grads: numel={numel} is not divisible by the world size {world_size}")
    g = generator(device, seed * 1000 + rank)
    return (torch.randn(numel, generator=g, dtype=torch.bfloat16, device=device),)


def reference(grads):
    """This rank's shard of the mean gradient: (numel / world_size,) bf16."""
    import torch.distributed as dist

    out = grads.new_empty(grads.numel() // dist.get_world_size())
    reduce_scatter_tensor(out, grads, op=dist.ReduceOp.AVG)  # FSDP2's default for bf16 on NCCL
    return out
