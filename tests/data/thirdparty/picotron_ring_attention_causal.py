# From huggingface/picotron picotron/context_parallel/context_parallel.py::RingAttentionFunc.forward (commit 12e81c3)
# Causal ring attention: every step but the last, ContextCommunicate queues send/recv of K and of V and commits
# them in one batch_isend_irecv; a rank computes a block only if step <= rank (rank r computes r + 1 blocks, the
# first with the causal mask), and merges blocks with update_out_and_lse. Sequence split contiguously over ranks.
import torch
import torch.distributed as dist
import torch.nn.functional as nnf


def inputs(rank, world_size, *, seed, device, batch=1, heads=4, seq=128, head_dim=32):
    if seq % world_size:
        raise ValueError(f"seq={seq} is not divisible by the world size {world_size}")
    g = None if torch.device(device).type == "meta" else torch.Generator(device=device).manual_seed(seed * 1000 + rank)
    shape = (batch, heads, seq // world_size, head_dim)
    return tuple(torch.randn(shape, generator=g, device=device, dtype=torch.bfloat16) for _ in range(3))


def _block(q, k, v, causal):
    s = torch.matmul(q, k.transpose(-2, -1)) * q.shape[-1] ** -0.5
    if causal:
        s = s.masked_fill(torch.ones(s.shape[-2:], dtype=torch.bool, device=s.device).triu(1), float("-inf"))
    lse = torch.logsumexp(s.float(), dim=-1, keepdim=True)
    return torch.matmul(torch.exp(s.float() - lse).to(v.dtype), v).float(), lse


def reference(q, k, v):
    rank, n = dist.get_rank(), dist.get_world_size()
    out = lse = None
    for step in range(n):
        if step + 1 < n:
            nk, nv = torch.empty_like(k), torch.empty_like(v)
            ops = [dist.P2POp(dist.isend, k, (rank + 1) % n), dist.P2POp(dist.irecv, nk, (rank - 1) % n)]
            ops += [dist.P2POp(dist.isend, v, (rank + 1) % n), dist.P2POp(dist.irecv, nv, (rank - 1) % n)]
            reqs = dist.batch_isend_irecv(ops)
        if step <= rank:
            bo, bl = _block(q, k, v, causal=step == 0)
            if out is None:
                out, lse = bo, bl
            else:
                out = out - torch.sigmoid(bl - lse) * (out - bo)
                lse = lse - nnf.logsigmoid(lse - bl)
        if step + 1 < n:
            for r in reqs:
                r.wait()
            k, v = nk, nv
    return out.to(q.dtype)
