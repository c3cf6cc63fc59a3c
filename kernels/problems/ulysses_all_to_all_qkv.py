"""DeepSpeed-Ulysses all-to-all of Q, K, V before attention. From deepspeedai/DeepSpeed deepspeed/sequence/layer.py::_SeqAllToAll."""

from pkroof.kernels.problems._shapes import per_rank

CATEGORY = "sequence-parallel"
SOURCE = (
    "deepspeedai/DeepSpeed: deepspeed/sequence/layer.py::_SeqAllToAll "
    "(DistributedAttention.forward: scatter heads, gather sequence, once each for query, key and value)"
)
# seq: full sequence, sharded over ranks; heads / kv_heads: query / key-value heads (GQA), both split over ranks
SHAPES = {
    "small": dict(seq=64, heads=8, kv_heads=4, head_dim=16),
    "llama3-70b-32k": dict(seq=32768, heads=64, kv_heads=8, head_dim=128),
    "llama3-8b-128k": dict(seq=131072, heads=32, kv_heads=8, head_dim=128),
}


def inputs(rank, world_size, *, seed, device, seq, heads, kv_heads, head_dim):
    """q [seq/P, heads, head_dim], k and v [seq/P, kv_heads, head_dim]: this rank's sequence shard; bf16."""
    import torch

    from pkroof.kernels.problems._random import generator

    s_local = per_rank(seq, world_size, "seq")
    per_rank(heads, world_size, "heads")
    per_rank(kv_heads, world_size, "kv_heads")
    g = generator(device, seed * 1000 + rank)
    q = torch.randn(s_local, heads, head_dim, generator=g, dtype=torch.bfloat16, device=device)
    k = torch.randn(s_local, kv_heads, head_dim, generator=g, dtype=torch.bfloat16, device=device)
    v = torch.randn(s_local, kv_heads, head_dim, generator=g, dtype=torch.bfloat16, device=device)
    return q, k, v


def _seq_to_heads(x):
    """[seq/P, heads, dim] → [seq, heads/P, dim]: rank j gets head group j of every sequence shard."""
    import torch
    import torch.distributed as dist

    world_size = dist.get_world_size()
    s_local, heads, dim = x.shape
    send = x.reshape(s_local, world_size, heads // world_size, dim).transpose(0, 1).contiguous()  # chunk j → rank j
    recv = torch.empty_like(send)  # chunk i: sequence shard i, this rank's heads
    dist.all_to_all_single(recv, send)
    return recv.reshape(world_size * s_local, heads // world_size, dim)


def reference(q, k, v):
    """(q, k, v), each [seq, heads/P, head_dim]: the full sequence for this rank's heads."""
    return _seq_to_heads(q), _seq_to_heads(k), _seq_to_heads(v)
