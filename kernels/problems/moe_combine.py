"""MoE combine: expert outputs sent back over EP and gate-weighted per token. From NVIDIA/Megatron-LM megatron/core/transformer/moe/token_dispatcher.py::MoEAlltoAllTokenDispatcher."""

from pkroof.kernels.problems._shapes import per_rank

CATEGORY = "expert-parallel"
SOURCE = (
    "NVIDIA/Megatron-LM: megatron/core/transformer/moe/token_dispatcher.py::MoEAlltoAllTokenDispatcher "
    "(token_unpermutation: sort_chunks_by_idxs back, all_to_all_single with uneven splits, unpermute with probs)"
)
# tokens_per_rank: this rank's tokens; the experts split evenly over ranks, rank j holding experts [j·E/P, (j+1)·E/P).
# Router logits are drawn directly (standing in for hidden · W_router) so that every rank can know how many
# tokens it received; routing is top-k, gates the softmax over the k chosen logits (Megatron's default).
SHAPES = {
    "small": dict(tokens_per_rank=32, hidden=64, num_experts=8, topk=2),
    "mixtral-8x7b-ep8": dict(tokens_per_rank=4096, hidden=4096, num_experts=8, topk=2),
    "qwen3-30b-a3b-ep8": dict(tokens_per_rank=4096, hidden=2048, num_experts=128, topk=8),
    "deepseek-v3-ep8": dict(tokens_per_rank=4096, hidden=7168, num_experts=256, topk=8),
}


def _route(g, tokens, num_experts, topk):
    """routing_map [tokens, experts] bool and probs [tokens, experts] fp32 (zero off the map)."""
    import torch

    top = torch.topk(torch.randn(tokens, num_experts, generator=g), topk, dim=-1)
    routing_map = torch.zeros(tokens, num_experts, dtype=torch.bool).scatter_(1, top.indices, True)
    probs = torch.zeros(tokens, num_experts).scatter_(1, top.indices, torch.softmax(top.values, dim=-1))
    return routing_map, probs


def inputs(rank, world_size, *, seed, device, tokens_per_rank, hidden, num_experts, topk):
    """expert_out [received, hidden] bf16 (grouped by local expert then source rank), routing_map, probs."""
    import torch

    from pkroof.kernels.problems._random import generator

    local = per_rank(num_experts, world_size, "num_experts")
    if topk > num_experts:
        raise ValueError(f"topk={topk} is more than num_experts={num_experts}")

    def host(r):  # routing is drawn on the host: every rank redraws every other rank's, identically
        return torch.Generator(device="cpu").manual_seed(seed * 1000 + r)

    # token-expert pairs every rank routed to this rank's experts
    received = sum(
        int(_route(host(r), tokens_per_rank, num_experts, topk)[0][:, rank * local : (rank + 1) * local].sum())
        for r in range(world_size)
    )
    routing_map, probs = _route(host(rank), tokens_per_rank, num_experts, topk)
    g = generator(device, seed * 1000 + rank)
    expert_out = torch.randn(received, hidden, generator=g, dtype=torch.bfloat16, device=device)
    return expert_out, routing_map.to(device), probs.to(device)


def reference(expert_out, routing_map, probs):
    """out [tokens_per_rank, hidden] bf16: each token's expert outputs, summed in fp32 weighted by its gates."""
    import torch
    import torch.distributed as dist

    world_size = dist.get_world_size()
    num_tokens, num_experts = routing_map.shape
    local = num_experts // world_size
    send_counts = routing_map.sum(0)  # [experts]: tokens this rank dispatched to each expert
    # the dispatch's count exchange again (Megatron keeps it from the dispatch; this problem stands alone)
    recv_counts = torch.empty_like(send_counts)
    dist.all_to_all_single(recv_counts, send_counts)
    recv_counts = recv_counts.view(world_size, local)  # [source rank, local expert]
    # (expert, source rank) chunks → (source rank, expert), the order the dispatch received them in
    chunks = expert_out.split(recv_counts.t().flatten().tolist())
    send = torch.cat([chunks[e * world_size + i] for i in range(world_size) for e in range(local)])
    output_splits = send_counts.view(world_size, local).sum(1).tolist()
    back = expert_out.new_empty(sum(output_splits), expert_out.shape[1])
    dist.all_to_all_single(back, send, output_splits, recv_counts.sum(1).tolist())
    # back is in the dispatch's permuted order: expert-major, ascending token (moe_utils.unpermute)
    token_ids = torch.arange(num_tokens, device=probs.device).expand(num_experts, -1).masked_select(routing_map.t())
    gates = probs.t().masked_select(routing_map.t())
    out = torch.zeros(num_tokens, expert_out.shape[1], device=probs.device)
    out.index_add_(0, token_ids, back.float() * gates[:, None])
    return out.to(expert_out.dtype)
