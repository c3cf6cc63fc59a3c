"""Target log-prob and top-k log-probs over vocab-sharded logits. From NVIDIA-NeMo/RL nemo_rl/distributed/model_utils.py::distributed_vocab_topk."""

from pkroof.kernels.problems._shapes import per_rank

CATEGORY = "vocab-parallel"
SOURCE = (
    "NVIDIA-NeMo/RL: nemo_rl/distributed/model_utils.py::distributed_vocab_topk (top-k candidates all-gathered); "
    "volcengine/verl: verl/utils/megatron/tensor_parallel.py::vocab_parallel_log_probs_from_logits (target log-prob)"
)
TOPK = 20  # log-probs returned per token (vLLM's default max_logprobs)
SHARED = 999  # generator stream for the tensors every rank holds identically (the targets)
# tokens: rows of logits; vocab: full (padded) vocabulary, split into contiguous ranges over ranks
SHAPES = {
    "small": dict(tokens=64, vocab=512),
    "llama3-70b-tp8": dict(tokens=8192, vocab=128256),
    "llama3-8b-tp2": dict(tokens=8192, vocab=128256),
    "qwen2.5-7b-tp4": dict(tokens=8192, vocab=152064),
}


def inputs(rank, world_size, *, seed, device, tokens, vocab):
    """logits [tokens, vocab/P] bf16 (this rank's vocab range), target [tokens] int64 global token ids."""
    import torch

    from pkroof.kernels.problems._random import generator

    v_local = per_rank(vocab, world_size, "vocab")
    if v_local < TOPK:
        raise ValueError(f"vocab/P={v_local} is fewer than the {TOPK} top entries each rank nominates")
    g = generator(device, seed * 1000 + rank)
    logits = 2 * torch.randn(tokens, v_local, generator=g, dtype=torch.bfloat16, device=device)
    # the targets are drawn on the host, so that every rank holds the very same ones whatever its device
    shared = torch.Generator(device="cpu").manual_seed(seed * 1000 + SHARED)
    target = torch.randint(vocab, (tokens,), generator=shared)
    return logits, target.to(device)


def reference(logits, target):
    """(logprob [tokens] fp32 of the target, top-k log-probs [tokens, TOPK] fp32, their global ids [tokens, TOPK])."""
    import torch
    import torch.distributed as dist

    world_size = dist.get_world_size()
    z = logits.float()
    num_tokens, v_local = z.shape
    start = dist.get_rank() * v_local
    # log Z = max + log(sum exp(z - max)), both over the whole vocabulary
    z_max = z.max(dim=-1, keepdim=True).values
    dist.all_reduce(z_max, op=dist.ReduceOp.MAX)
    sum_exp = (z - z_max).exp().sum(dim=-1, keepdim=True)
    dist.all_reduce(sum_exp)
    log_z = z_max + sum_exp.log()
    # target logit: only the rank owning the target contributes it
    local = target - start
    mine = (local >= 0) & (local < v_local)
    picked = torch.where(mine, z.gather(1, torch.where(mine, local, 0)[:, None]).squeeze(1), 0.0)
    dist.all_reduce(picked)
    # top-k: each rank nominates its own top-k, every rank picks the global top-k from the P·k candidates
    values, ids = torch.topk(z, TOPK, dim=-1)
    all_values = values.new_empty(world_size * num_tokens, TOPK)
    all_ids = ids.new_empty(world_size * num_tokens, TOPK)
    dist.all_gather_into_tensor(all_values, values.contiguous())
    dist.all_gather_into_tensor(all_ids, (ids + start).contiguous())
    candidates = all_values.view(world_size, num_tokens, TOPK).transpose(0, 1).reshape(num_tokens, -1)
    candidate_ids = all_ids.view(world_size, num_tokens, TOPK).transpose(0, 1).reshape(num_tokens, -1)
    top_values, position = torch.topk(candidates, TOPK, dim=-1)
    return picked - log_z.squeeze(1), top_values - log_z, candidate_ids.gather(1, position)
