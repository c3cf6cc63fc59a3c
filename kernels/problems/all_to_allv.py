"""MoE token dispatch: all-to-all of per-expert counts, then all-to-all-v of the tokens. From pytorch/torchtitan torchtitan/distributed/expert_parallel.py::ExpertParallel._token_dispatch."""

CATEGORY = "expert-parallel"
SOURCE = "pytorch/torchtitan: torchtitan/distributed/expert_parallel.py::ExpertParallel._token_dispatch"
SHAPES = {  # tokens: routed rows per rank (tokens × top-k); experts: routed experts in all, experts / world_size per rank
    "small": dict(tokens=256, hidden=128, experts=8),
    "mixtral-8x7b-ep8": dict(tokens=4096 * 2, hidden=4096, experts=8),  # 4096 tokens × top-2, hidden 4096
    "deepseek-v3-ep8": dict(tokens=4096 * 8, hidden=7168, experts=256),  # 4096 tokens × top-8 of 256, hidden 7168
}


def inputs(rank, world_size, *, seed, device, tokens, hidden, experts):
    """Rows sorted by expert, (tokens, hidden) bf16, and how many rows go to each expert, (experts,) int64.

    The split is uneven: each row's expert is drawn uniformly from the seed and rank, as a router's top-k would.
    """
    import torch

    from pkroof.kernels.problems._random import generator

    if experts % world_size:
        raise ValueError(f"all-to-allv: {experts} experts do not divide over {world_size} ranks")
    g = generator(device, seed * 1000 + rank)
    x = torch.randn(tokens, hidden, generator=g, dtype=torch.bfloat16, device=device)
    # the counts are drawn on the host: bincount's output size depends on the values, which the meta device lacks
    host = torch.Generator(device="cpu").manual_seed(seed * 1000 + rank)
    num_tokens_per_expert = torch.bincount(torch.randint(experts, (tokens,), generator=host), minlength=experts)
    return x, num_tokens_per_expert.to(device)


def reference(x, num_tokens_per_expert):
    """Returns the rows this rank's experts receive, in source-rank order, and their counts per (source rank, expert)."""
    import torch
    import torch.distributed as dist

    world_size = dist.get_world_size()
    # step 1: counts; entry (s, e) of the result is how many rows source rank s sends to local expert e
    num_tokens_per_expert_group = torch.empty_like(num_tokens_per_expert)
    dist.all_to_all_single(num_tokens_per_expert_group, num_tokens_per_expert)
    input_splits = (
        num_tokens_per_expert.view(world_size, -1).sum(dim=1).tolist()
    )  # device-to-host sync, as in torchtitan
    output_splits = num_tokens_per_expert_group.view(world_size, -1).sum(dim=1).tolist()
    # step 2: the rows themselves, uneven splits
    out = x.new_empty(sum(output_splits), x.shape[1])
    dist.all_to_all_single(out, x, output_splits, input_splits)
    return out, num_tokens_per_expert_group
