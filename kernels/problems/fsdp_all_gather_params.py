"""FSDP2 all-gather of one parameter group's flat shard. From pytorch/pytorch torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py::foreach_all_gather."""

from pkroof.kernels.problems._collectives import all_gather_into_tensor

CATEGORY = "data-parallel"
SOURCE = "pytorch/pytorch: torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py::foreach_all_gather"
SHAPES = {  # numel: parameters in the group (one transformer block), numel / world_size per rank
    "small": dict(numel=2**19),
    # Llama-3-8B block: q,o 4096² + k,v 1024×4096 + gate,up,down 3×4096×14336 + 2 norms of 4096
    "llama3-8b-block": dict(numel=2 * 4096 * 4096 + 2 * 1024 * 4096 + 3 * 4096 * 14336 + 2 * 4096),
    # Llama-3-70B block: q,o 8192² + k,v 1024×8192 + gate,up,down 3×8192×28672 + 2 norms of 8192
    "llama3-70b-block": dict(numel=2 * 8192 * 8192 + 2 * 1024 * 8192 + 3 * 8192 * 28672 + 2 * 8192),
}


def inputs(rank, world_size, *, seed, device, numel):
    """This rank's flat bf16 shard of the group's parameters: (numel / world_size,)."""
    import torch

    from pkroof.kernels.problems._random import generator

    if numel % world_size:
        raise ValueError(f"fsdp-all-gather-params: numel={numel} is not divisible by the world size {world_size}")
    g = generator(device, seed * 1000 + rank)
    return (torch.randn(numel // world_size, generator=g, dtype=torch.bfloat16, device=device),)


def reference(shard):
    """The unsharded flat parameters, (numel,) bf16; unflattening them into parameters is not included."""
    import torch.distributed as dist

    world_size, rank = dist.get_world_size(), dist.get_rank()
    out = shard.new_empty(world_size * shard.numel())
    # copy-in: FSDP2 writes its shard straight into its slot of the output and all-gathers in place
    own = out.view(world_size, -1)[rank]
    own.copy_(shard)
    all_gather_into_tensor(out, own)
    return out
