# From vllm-project/vllm vllm/model_executor/models/llama.py::LlamaAttention.forward: QKVParallelLinear qkv_proj
# (heads/P query and kv_heads/P key-value heads per rank), causal attention, RowParallelLinear o_proj with
# reduce_results=True (tensor_model_parallel_all_reduce). Prefill of one sequence; the rotary embedding
# (elementwise) is left out; GQA heads are repeated for torch's SDPA.
import torch
import torch.distributed as dist
import torch.nn.functional as nnf
from torch import nn


def inputs(rank, world_size, *, seed, device, tokens=64, hidden=256, heads=8, kv_heads=4, head_dim=32):
    if heads % world_size or kv_heads % world_size or heads % kv_heads:
        raise ValueError(f"heads={heads}, kv_heads={kv_heads} do not split over {world_size} ranks")
    meta = torch.device(device).type == "meta"
    g = None if meta else torch.Generator(device=device).manual_seed(seed * 1000 + rank)
    hq, hkv = heads // world_size, kv_heads // world_size
    x = torch.randn(tokens, hidden, generator=g, device=device, dtype=torch.bfloat16)
    kw = dict(bias=False, device=device, dtype=torch.bfloat16)
    attn = nn.ModuleDict(
        dict(qkv_proj=nn.Linear(hidden, (hq + 2 * hkv) * head_dim, **kw), o_proj=nn.Linear(hq * head_dim, hidden, **kw))
    )
    attn.requires_grad_(False)
    attn.heads, attn.kv_heads, attn.head_dim = hq, hkv, head_dim
    if not meta:
        for p in attn.parameters():
            p.copy_(0.05 * torch.randn(p.shape, generator=g, device=device, dtype=p.dtype))
    return x, attn


def reference(x, attn):
    t, hq, hkv, d = x.shape[0], attn.heads, attn.kv_heads, attn.head_dim
    q, k, v = attn["qkv_proj"](x).split([hq * d, hkv * d, hkv * d], dim=-1)
    q = q.view(t, hq, d).transpose(0, 1).unsqueeze(0)
    k = k.view(t, hkv, d).transpose(0, 1).repeat_interleave(hq // hkv, dim=0).unsqueeze(0)
    v = v.view(t, hkv, d).transpose(0, 1).repeat_interleave(hq // hkv, dim=0).unsqueeze(0)
    o = nnf.scaled_dot_product_attention(q, k, v, is_causal=True)  # [1, hq, t, d]
    out = attn["o_proj"](o.squeeze(0).transpose(0, 1).reshape(t, hq * d))
    dist.all_reduce(out)
    return out
