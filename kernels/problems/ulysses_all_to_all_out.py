"""DeepSpeed-Ulysses all-to-all of the attention output. From deepspeedai/DeepSpeed deepspeed/sequence/layer.py::_SeqAllToAll."""

from pkroof.kernels.problems._shapes import per_rank

CATEGORY = "sequence-parallel"
SOURCE = (
    "deepspeedai/DeepSpeed: deepspeed/sequence/layer.py::_SeqAllToAll "
    "(DistributedAttention.forward, after attention: scatter sequence, gather heads)"
)
# seq: full sequence; heads: attention heads, split over ranks during attention
SHAPES = {
    "small": dict(seq=64, heads=8, head_dim=16),
    "llama3-70b-32k": dict(seq=32768, heads=64, head_dim=128),
    "llama3-8b-128k": dict(seq=131072, heads=32, head_dim=128),
}


def inputs(rank, world_size, *, seed, device, seq, heads, head_dim):
    """o [seq, heads/P, head_dim]: attention output for the full sequence and this rank's heads; bf16."""
    import torch

    from pkroof.kernels.problems._random import generator

    per_rank(seq, world_size, "seq")
    h_local = per_rank(heads, world_size, "heads")
    g = generator(device, seed * 1000 + rank)
    return (torch.randn(seq, h_local, head_dim, generator=g, dtype=torch.bfloat16, device=device),)


def reference(o):
    """[seq/P, heads, head_dim]: this rank's sequence shard with every head."""
    import torch
    import torch.distributed as dist

    world_size = dist.get_world_size()
    seq, h_local, dim = o.shape
    send = o.reshape(world_size, seq // world_size, h_local, dim)  # chunk j: sequence shard j → rank j
    recv = torch.empty_like(send)  # chunk i: this rank's sequence shard, head group i
    dist.all_to_all_single(recv, send)
    return recv.transpose(0, 1).reshape(seq // world_size, world_size * h_local, dim)
