"""Top-k over vocab-parallel logits: local top-k, all-gather the candidates, global top-k. From aws-neuron/neuronx-distributed src/neuronx_distributed/operators/topk.py::topk."""

from pkroof.kernels.problems._collectives import all_gather_into_tensor

CATEGORY = "long-tail"
SOURCE = "aws-neuron/neuronx-distributed: src/neuronx_distributed/operators/topk.py::topk"
SHAPES = {  # logits (batch, vocab) split over ranks along vocab; k candidates per row
    "small": dict(batch=4, vocab=1024, k=8),
    # decode sampling: 256 sequences × Llama-3 vocab 128256 at TP=8, top_k=50 (transformers' GenerationConfig default)
    "llama3-70b-tp8-sampling": dict(batch=256, vocab=128256, k=50),
}


def inputs(rank, world_size, *, seed, device, batch, vocab, k):
    """This rank's logits, (batch, vocab / world_size) bf16, and k as a 0-d int64 tensor."""
    import torch

    from pkroof.kernels.problems._random import generator

    if vocab % world_size:
        raise ValueError(f"distributed-topk: vocab={vocab} is not divisible by the world size {world_size}")
    if k > vocab // world_size:
        raise ValueError(f"distributed-topk: k={k} exceeds the {vocab // world_size} logits per rank")
    g = generator(device, seed * 1000 + rank)
    logits = torch.randn(batch, vocab // world_size, generator=g, dtype=torch.bfloat16, device=device)
    return logits, torch.tensor(k, device=device)


def reference(logits, k):
    """torch.topk of the full logits on every rank: values (batch, k) bf16 and global vocab indices (batch, k) int64."""
    import torch
    import torch.distributed as dist

    world_size, k = dist.get_world_size(), int(k)
    batch, shard = logits.shape
    values, indices = torch.topk(logits, k, dim=-1)
    indices += dist.get_rank() * shard  # local → global vocab index
    all_values = values.new_empty(world_size * batch, k)  # rank-major: (world_size · batch, k)
    all_indices = indices.new_empty(world_size * batch, k)
    all_gather_into_tensor(all_values, values)
    all_gather_into_tensor(all_indices, indices)
    all_values = all_values.view(world_size, batch, k).permute(1, 0, 2).reshape(batch, world_size * k)
    all_indices = all_indices.view(world_size, batch, k).permute(1, 0, 2).reshape(batch, world_size * k)
    top_values, pos = torch.topk(all_values, k, dim=-1)
    return top_values, all_indices.gather(-1, pos)
