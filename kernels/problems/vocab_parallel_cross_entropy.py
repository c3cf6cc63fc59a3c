"""Vocab-parallel cross-entropy, forward. From NVIDIA/Megatron-LM megatron/core/tensor_parallel/cross_entropy.py::_VocabParallelCrossEntropy."""

from pkroof.kernels.problems._shapes import per_rank

CATEGORY = "vocab-parallel"
SOURCE = (
    "NVIDIA/Megatron-LM: megatron/core/tensor_parallel/cross_entropy.py::_VocabParallelCrossEntropy.forward "
    "(all-reduces of the row max, the target logit and the sum of exponentials)"
)
SHARED = 999  # generator stream for the tensors every rank holds identically (the targets)
# tokens: rows of logits; vocab: full (padded) vocabulary, split into contiguous ranges over ranks
SHAPES = {
    "small": dict(tokens=64, vocab=512),
    "llama3-70b-tp8": dict(tokens=8192, vocab=128256),
    "llama3-8b-tp2": dict(tokens=8192, vocab=128256),
    "deepseek-v3-tp8": dict(tokens=8192, vocab=129280),
}


def inputs(rank, world_size, *, seed, device, tokens, vocab):
    """logits [tokens, vocab/P] bf16 (this rank's vocab range), target [tokens] int64 global token ids."""
    import torch

    from pkroof.kernels.problems._random import generator

    v_local = per_rank(vocab, world_size, "vocab")
    g = generator(device, seed * 1000 + rank)
    logits = 2 * torch.randn(tokens, v_local, generator=g, dtype=torch.bfloat16, device=device)
    # the targets are drawn on the host, so that every rank holds the very same ones whatever its device
    shared = torch.Generator(device="cpu").manual_seed(seed * 1000 + SHARED)
    target = torch.randint(vocab, (tokens,), generator=shared)
    return logits, target.to(device)


def reference(logits, target):
    """loss [tokens] fp32: log(sum_v exp(z_v)) - z_target over the whole vocabulary."""
    import torch
    import torch.distributed as dist

    z = logits.float()  # a copy: Megatron subtracts the max in place, this must not touch the input
    z_max = z.max(dim=-1).values
    dist.all_reduce(z_max, op=dist.ReduceOp.MAX)
    z -= z_max[:, None]
    start = dist.get_rank() * z.shape[1]
    local = target - start
    mine = (local >= 0) & (local < z.shape[1])
    picked = z.gather(1, torch.where(mine, local, 0)[:, None]).squeeze(1)
    picked = torch.where(mine, picked, 0.0)  # only the rank owning the target contributes its logit
    dist.all_reduce(picked)
    sum_exp = z.exp().sum(dim=-1)
    dist.all_reduce(sum_exp)
    return sum_exp.log() - picked
