# From feifeibear/long-context-attention yunchang/ulysses/attn_layer.py::UlyssesAttention.forward (commit 807fc24),
# with SeqAllToAll4D / all_to_all_4D (yunchang/comm/all_to_all.py): all_to_all_single of q, k and v from
# [b, s/P, h, d] to [b, s, h/P, d], causal attention (torch SDPA in place of flash-attn), and back.
import torch
import torch.distributed as dist
import torch.nn.functional as nnf


def inputs(rank, world_size, *, seed, device, batch=2, seq=128, heads=8, head_dim=32):
    if seq % world_size or heads % world_size:
        raise ValueError(f"seq={seq} and heads={heads} must both divide over {world_size} ranks")
    g = None if torch.device(device).type == "meta" else torch.Generator(device=device).manual_seed(seed * 1000 + rank)
    shape = (batch, seq // world_size, heads, head_dim)
    return tuple(torch.randn(shape, generator=g, device=device, dtype=torch.bfloat16) for _ in range(3))


def _heads_to_seq(x, n):  # [b, s/P, h, d] -> [b, s, h/P, d]
    b, sl, h, d = x.shape
    t = x.reshape(b, sl, n, h // n, d).transpose(0, 2).contiguous()  # [P, s/P, b, h/P, d]
    o = torch.empty_like(t)
    dist.all_to_all_single(o, t)
    return o.reshape(n * sl, b, h // n, d).transpose(0, 1).contiguous()


def _seq_to_heads(x, n):  # [b, s, h/P, d] -> [b, s/P, h, d]
    b, s, hl, d = x.shape
    t = x.reshape(b, n, s // n, hl, d).permute(1, 3, 2, 0, 4).contiguous()  # [P, h/P, s/P, b, d]
    o = torch.empty_like(t)
    dist.all_to_all_single(o, t)
    return o.reshape(n * hl, s // n, b, d).permute(2, 1, 0, 3).contiguous()


def reference(q, k, v):
    n = dist.get_world_size()
    q, k, v = (_heads_to_seq(t, n).transpose(1, 2) for t in (q, k, v))  # [b, h/P, s, d]
    o = nnf.scaled_dot_product_attention(q, k, v, is_causal=True)
    return _seq_to_heads(o.transpose(1, 2), n)
