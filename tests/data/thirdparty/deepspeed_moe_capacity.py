# From deepspeedai/DeepSpeed deepspeed/moe/sharded_moe.py::MOELayer.forward with TopKGate/top1gating (k=1,
# capacity_factor=1.0, min_capacity=4): fp32 gate, capacity-limited one-hot dispatch, einsum "sec,sm->ecm", _AllToAll
# (all_to_all_single of equal [experts, capacity, model] chunks), Experts (nn.Linear FFNs), _AllToAll back, einsum
# "sec,ecm->sm". The gating's einsum("se,sc->sec") is written as the same elementwise product.
import math

import torch
import torch.distributed as dist
import torch.nn.functional as nnf
from torch import nn


def inputs(rank, world_size, *, seed, device, tokens=64, hidden=64, ffn=128, experts=4):
    if experts % world_size:
        raise ValueError(f"experts={experts} is not divisible by the world size {world_size}")
    meta = torch.device(device).type == "meta"
    g = None if meta else torch.Generator(device=device).manual_seed(seed * 1000 + rank)
    x = torch.randn(tokens, hidden, generator=g, device=device, dtype=torch.bfloat16)
    kw = dict(device=device, dtype=torch.bfloat16)
    ffns = nn.ModuleList(
        nn.Sequential(nn.Linear(hidden, ffn, **kw), nn.GELU(), nn.Linear(ffn, hidden, **kw))
        for _ in range(experts // world_size)
    )
    gate = nn.Linear(hidden, experts, bias=False, device=device, dtype=torch.float32)  # TopKGate.wg stays fp32
    moe = nn.ModuleDict(dict(wg=gate, experts=ffns))
    moe.requires_grad_(False)
    if not meta:
        for p in moe.parameters():
            p.copy_(0.05 * torch.randn(p.shape, generator=g, device=device, dtype=p.dtype))
    return x, moe


def reference(x, moe):
    s, m = x.shape
    e, n = moe["wg"].out_features, dist.get_world_size()
    cap = max(math.ceil(s / e * 1.0), 4)
    gates = nnf.softmax(moe["wg"](x.float()), dim=1)
    mask = nnf.one_hot(gates.argmax(dim=1), e)
    loc = torch.cumsum(mask, dim=0) - 1
    mask = mask * (loc < cap)
    slot = nnf.one_hot((loc * mask).sum(dim=1), cap)
    combine = (gates * mask).sum(dim=1)[:, None, None] * mask[:, :, None] * slot[:, None, :]  # [s, e, c]
    dispatched = torch.einsum("sec,sm->ecm", (combine > 0).to(x.dtype), x)
    recv = torch.empty_like(dispatched)
    dist.all_to_all_single(recv, dispatched)
    recv = recv.reshape(n, e // n, cap, m)
    out = torch.cat([f(c) for c, f in zip(recv.chunk(e // n, dim=1), moe["experts"], strict=True)], dim=1)
    back = torch.empty_like(out)
    dist.all_to_all_single(back, out.contiguous())
    return torch.einsum("sec,ecm->sm", combine.to(x.dtype), back.reshape(e, cap, m))
