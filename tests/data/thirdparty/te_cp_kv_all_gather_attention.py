# From NVIDIA/TransformerEngine transformer_engine/pytorch/attention/dot_product_attention/context_parallel.py::
# AttnFuncWithCPAndKVAllGather.forward: load-balanced causal CP (rank r holds sequence chunks r and 2P-1-r, each
# s/(2P) long), gather_along_first_dim of K and of V, reorder to sequence order, then each local query chunk
# attends to the KV prefix up to its own end (get_kv_seq_info_after_all_gather), bottom-right causal. bshd.
import torch
import torch.distributed as dist
import torch.nn.functional as nnf


def inputs(rank, world_size, *, seed, device, batch=1, seq=256, heads=4, head_dim=32):
    if seq % (2 * world_size):
        raise ValueError(f"seq={seq} is not divisible by twice the world size {world_size}")
    g = None if torch.device(device).type == "meta" else torch.Generator(device=device).manual_seed(seed * 1000 + rank)
    shape = (batch, seq // world_size, heads, head_dim)
    return tuple(torch.randn(shape, generator=g, device=device, dtype=torch.bfloat16) for _ in range(3))


def _gather_in_order(x, n):  # [b, s/P, h, d] -> [s, b, h, d] in sequence order
    local = x.movedim(1, 0).contiguous()
    full = local.new_empty(n * local.shape[0], *local.shape[1:])
    dist.all_gather_into_tensor(full, local)
    where = [2 * j if j < n else 2 * (2 * n - 1 - j) + 1 for j in range(2 * n)]  # chunk j's slot in the gather
    return full.view(2 * n, local.shape[0] // 2, *local.shape[1:])[where].flatten(0, 1)


def reference(q, k, v):
    rank, n = dist.get_rank(), dist.get_world_size()
    c = q.shape[1] // 2
    k_all, v_all = _gather_in_order(k, n), _gather_in_order(v, n)
    outs = []
    for i, chunk in enumerate((rank, 2 * n - 1 - rank)):
        end = (chunk + 1) * c
        qi = q[:, i * c : (i + 1) * c].transpose(1, 2)
        ki, vi = (t[:end].movedim(0, 1).transpose(1, 2) for t in (k_all, v_all))
        mask = torch.ones(c, end, dtype=torch.bool, device=q.device).tril(end - c)
        outs.append(nnf.scaled_dot_product_attention(qi, ki, vi, attn_mask=mask).transpose(1, 2))
    return torch.cat(outs, dim=1)
