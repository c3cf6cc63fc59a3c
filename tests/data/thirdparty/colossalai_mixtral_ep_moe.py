# From hpcaitech/ColossalAI colossalai/shardformer/modeling/mixtral.py::EPMixtralSparseMoeBlock.forward (commit 0c10afd)
# Router, top-2, tokens sorted by expert, all_to_all_single of the counts, all_to_all_uneven of the tokens (uneven
# splits), held experts (w1, w2, w3 nn.Linear), the reverse exchange; the moe_dp all_reduce spans one rank (EP = world)
# and is left out. Deterministic routing: the gate reads features 0..experts-1; 3/4 of the tokens favour experts 0, 1.
import torch
import torch.distributed as dist
import torch.nn.functional as nnf
from torch import nn


def _expert(hidden, ffn, kw):
    shapes = dict(w1=(hidden, ffn), w2=(ffn, hidden), w3=(hidden, ffn))
    return nn.ModuleDict({name: nn.Linear(*shape, **kw) for name, shape in shapes.items()})


def inputs(rank, world_size, *, seed, device, batch=2, seq=32, hidden=64, ffn=128, experts=4):
    if experts % world_size or experts < 4 or hidden < experts:
        raise ValueError(f"experts={experts} must be at least 4, at most hidden, and divide over {world_size} ranks")
    meta = torch.device(device).type == "meta"
    g = None if meta else torch.Generator(device=device).manual_seed(seed * 1000 + rank)
    tokens, hot, kw = batch * seq, batch * seq * 3 // 4, dict(bias=False, device=device, dtype=torch.bfloat16)
    x = 0.01 * torch.randn(tokens, hidden, generator=g, device=device, dtype=torch.bfloat16)
    x[:hot, 0], x[:hot, 1], x[hot:, experts - 2], x[hot:, experts - 1] = 4.0, 3.0, 4.0, 3.0
    held = [_expert(hidden, ffn, kw) for _ in range(experts // world_size)]
    moe = nn.ModuleDict(dict(gate=nn.Linear(hidden, experts, **kw), experts=nn.ModuleList(held)))
    moe.requires_grad_(False)
    if not meta:
        for p in moe["experts"].parameters():
            p.copy_(0.05 * torch.randn(p.shape, generator=g, device=device, dtype=p.dtype))
    moe["gate"].weight.copy_(torch.eye(experts, hidden, device=device, dtype=torch.bfloat16))
    return x.view(batch, seq, hidden), moe


def reference(x, moe):
    b, s, h = x.shape
    flat, n, num_experts, top_k = x.reshape(-1, h), dist.get_world_size(), moe["gate"].out_features, 2
    logits = moe["gate"](flat)
    weights, chosen = torch.topk(nnf.softmax(logits, dim=1, dtype=torch.float), top_k, dim=-1)
    weights = (weights / weights.sum(dim=-1, keepdim=True)).to(x.dtype)
    chosen = chosen.t().reshape(-1)
    order = chosen.argsort()
    rows, send_counts = flat.repeat(top_k, 1)[order], chosen.bincount(minlength=num_experts)
    recv_counts = torch.empty_like(send_counts)
    dist.all_to_all_single(recv_counts, send_counts)
    held = num_experts // n
    send_split = send_counts.view(n, held).sum(dim=-1).tolist()
    recv_split = recv_counts.view(n, held).sum(dim=-1).tolist()
    got = rows.new_empty(sum(recv_split), h)
    dist.all_to_all_single(got, rows, recv_split, send_split)
    done = []
    for i, part in enumerate(got.split(recv_counts.tolist())):
        if part.shape[0]:
            e = moe["experts"][i % held]
            done.append(e["w2"](nnf.silu(e["w1"](part)) * e["w3"](part)))
    back = rows.new_empty(sum(send_split), h)
    dist.all_to_all_single(back, torch.cat(done) if done else got, send_split, recv_split)
    restored = torch.empty_like(back)
    restored[order] = back
    out = sum(part * weights[:, i, None] for i, part in enumerate(restored.chunk(top_k)))
    return out.view(b, s, h), logits
