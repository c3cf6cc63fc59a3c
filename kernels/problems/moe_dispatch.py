"""MoE token dispatch over expert parallelism (all-to-all-v). From NVIDIA/Megatron-LM megatron/core/transformer/moe/token_dispatcher.py::MoEAlltoAllTokenDispatcher."""

from pkroof.kernels.problems._shapes import per_rank

CATEGORY = "expert-parallel"
SOURCE = (
    "NVIDIA/Megatron-LM: megatron/core/transformer/moe/token_dispatcher.py::MoEAlltoAllTokenDispatcher "
    "(permute, exchange of token counts, all_to_all_single with uneven splits, sort_chunks_by_idxs)"
)
SHARED = 999  # generator stream for the tensors every rank holds identically (the router weight)
# tokens_per_rank: this rank's tokens; the experts split evenly over ranks, rank j holding experts [j·E/P, (j+1)·E/P).
# Routing is Megatron's default top-k of fp32 router logits; DeepSeek-V3's group-limited routing is not modelled.
SHAPES = {
    "small": dict(tokens_per_rank=32, hidden=64, num_experts=8, topk=2),
    "mixtral-8x7b-ep8": dict(tokens_per_rank=4096, hidden=4096, num_experts=8, topk=2),
    "qwen3-30b-a3b-ep8": dict(tokens_per_rank=4096, hidden=2048, num_experts=128, topk=8),
    "deepseek-v3-ep8": dict(tokens_per_rank=4096, hidden=7168, num_experts=256, topk=8),
}


def inputs(rank, world_size, *, seed, device, tokens_per_rank, hidden, num_experts, topk):
    """hidden [tokens_per_rank, hidden] bf16 and its routing_map [tokens_per_rank, num_experts] bool (topk per row)."""
    import torch

    from pkroof.kernels.problems._random import generator

    per_rank(num_experts, world_size, "num_experts")
    if topk > num_experts:
        raise ValueError(f"topk={topk} is more than num_experts={num_experts}")
    g = generator(device, seed * 1000 + rank)
    x = torch.randn(tokens_per_rank, hidden, generator=g, dtype=torch.bfloat16, device=device)
    # the router weight is drawn on the host, so that every rank holds the very same one whatever its device
    shared = torch.Generator(device="cpu").manual_seed(seed * 1000 + SHARED)
    router = (torch.randn(num_experts, hidden, generator=shared) * hidden**-0.5).to(device)  # logits O(1)
    experts = torch.topk(x.float() @ router.t(), topk, dim=-1).indices  # the router: fp32 logits, top-k
    routing_map = torch.zeros(tokens_per_rank, num_experts, dtype=torch.bool, device=device)
    return x, routing_map.scatter_(1, experts, True)


def reference(hidden, routing_map):
    """(tokens [received, hidden] grouped by local expert then source rank, count per local expert [E/P] int64)."""
    import torch
    import torch.distributed as dist

    world_size = dist.get_world_size()
    num_tokens, num_experts = routing_map.shape
    local = num_experts // world_size
    # permute: expert-major, ascending token within each expert (moe_utils.permute)
    token_ids = torch.arange(num_tokens, device=hidden.device).expand(num_experts, -1).masked_select(routing_map.t())
    send = hidden.index_select(0, token_ids)
    send_counts = routing_map.sum(0)  # [experts]: tokens this rank sends to each expert
    # Megatron all-gathers the whole [P, E] count table; an all-to-all carries just the part each rank needs
    recv_counts = torch.empty_like(send_counts)  # from rank i for local expert e, at i·E/P + e
    dist.all_to_all_single(recv_counts, send_counts)
    recv_counts = recv_counts.view(world_size, local)
    output_splits = recv_counts.sum(1).tolist()
    recv = hidden.new_empty(sum(output_splits), hidden.shape[1])
    dist.all_to_all_single(recv, send, output_splits, send_counts.view(world_size, local).sum(1).tolist())
    # (source rank, expert) chunks → (expert, source rank), ready for a grouped GEMM
    chunks = recv.split(recv_counts.flatten().tolist())
    tokens = torch.cat([chunks[i * local + e] for e in range(local) for i in range(world_size)])
    return tokens, recv_counts.sum(0)
