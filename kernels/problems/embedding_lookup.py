"""Vocab-parallel embedding: mask ids outside this rank's vocab range, look up locally, all-reduce. From NVIDIA/Megatron-LM megatron/core/tensor_parallel/layers.py::VocabParallelEmbedding.forward."""

CATEGORY = "long-tail"
SOURCE = "NVIDIA/Megatron-LM: megatron/core/tensor_parallel/layers.py::VocabParallelEmbedding.forward"
SHAPES = {  # tokens = micro-batch × sequence; the table's vocab rows are split evenly over ranks
    "small": dict(tokens=64, vocab=256, hidden=64),
    "llama3-70b-tp8": dict(tokens=8192, vocab=128256, hidden=8192),  # Llama-3 vocab 128256, hidden 8192
}


def inputs(rank, world_size, *, seed, device, tokens, vocab, hidden):
    """Token ids, (tokens,) int64, the same on every rank; this rank's rows of the table, (vocab / world_size, hidden) bf16."""
    import torch

    from pkroof.kernels.problems._random import generator

    if vocab % world_size:
        raise ValueError(f"embedding-lookup: vocab={vocab} is not divisible by the world size {world_size}")
    # the ids are drawn on the host, so that every rank holds the very same ones whatever its device
    ids = torch.randint(vocab, (tokens,), generator=torch.Generator(device="cpu").manual_seed(seed * 1000))
    g = generator(device, seed * 1000 + rank)
    weight = torch.randn(vocab // world_size, hidden, generator=g, dtype=torch.bfloat16, device=device)
    return ids.to(device), weight


def reference(ids, weight):
    """The embeddings of all ids, (tokens, hidden) bf16, on every rank."""
    import torch
    import torch.distributed as dist

    start = dist.get_rank() * weight.shape[0]  # this rank owns vocab rows [start, start + vocab / world_size)
    outside = (ids < start) | (ids >= start + weight.shape[0])
    local_ids = (ids - start).masked_fill(outside, 0)
    out = torch.nn.functional.embedding(local_ids, weight).masked_fill(outside[:, None], 0.0)
    dist.all_reduce(out)  # exactly one rank contributes a non-zero row per id
    return out
