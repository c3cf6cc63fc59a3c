"""Ring attention forward, non-causal. From zhuzilin/ring-flash-attention ring_flash_attn/ring_flash_attn.py::ring_flash_attn_forward."""

from pkroof.kernels.problems._shapes import per_rank

CATEGORY = "sequence-parallel"
SOURCE = (
    "zhuzilin/ring-flash-attention: ring_flash_attn/ring_flash_attn.py::ring_flash_attn_forward "
    "(RingComm.send_recv of K and V with batch_isend_irecv, update_out_and_lse); non-causal only"
)
# seq: full sequence, one contiguous chunk per rank; heads / kv_heads: query / key-value heads (GQA, not sharded).
# The reference materialises [heads, seq/P, seq/P] fp32 scores per step (4.3 GB for llama3-70b-32k at P=8).
SHAPES = {
    "small": dict(seq=64, heads=4, kv_heads=2, head_dim=16),
    "llama3-70b-32k": dict(seq=32768, heads=64, kv_heads=8, head_dim=128),
    "llama3-8b-32k": dict(seq=32768, heads=32, kv_heads=8, head_dim=128),
}


def inputs(rank, world_size, *, seed, device, seq, heads, kv_heads, head_dim):
    """q [seq/P, heads, head_dim], k and v [seq/P, kv_heads, head_dim]: this rank's sequence chunk; bf16."""
    import torch

    from pkroof.kernels.problems._random import generator

    s_local = per_rank(seq, world_size, "seq")
    if heads % kv_heads:
        raise ValueError(f"heads={heads} is not a multiple of kv_heads={kv_heads}")
    g = generator(device, seed * 1000 + rank)
    q = torch.randn(s_local, heads, head_dim, generator=g, dtype=torch.bfloat16, device=device)
    k = torch.randn(s_local, kv_heads, head_dim, generator=g, dtype=torch.bfloat16, device=device)
    v = torch.randn(s_local, kv_heads, head_dim, generator=g, dtype=torch.bfloat16, device=device)
    return q, k, v


def _attend(q, k, v):
    """Softmax attention of q [heads, s_q, d] (fp32) over one K/V chunk [s_k, kv_heads, d]: (out, lse) in fp32."""
    import torch

    groups = q.shape[0] // k.shape[1]
    k = k.float().repeat_interleave(groups, dim=1).transpose(0, 1)  # [heads, s_k, d]
    v = v.float().repeat_interleave(groups, dim=1).transpose(0, 1)
    scores = q @ k.transpose(1, 2) * q.shape[-1] ** -0.5  # [heads, s_q, s_k]
    lse = torch.logsumexp(scores, dim=-1, keepdim=True)
    return torch.exp(scores - lse) @ v, lse


def reference(q, k, v):
    """out [seq/P, heads, head_dim] bf16: this rank's queries attending to the whole sequence."""
    import torch
    import torch.distributed as dist

    world_size, rank = dist.get_world_size(), dist.get_rank()
    send_to, recv_from = (rank + 1) % world_size, (rank - 1) % world_size
    qf = q.float().transpose(0, 1)  # [heads, seq/P, d]
    out = torch.zeros_like(qf)
    lse = torch.full((*qf.shape[:2], 1), float("-inf"), device=q.device)
    for step in range(world_size):
        if step + 1 < world_size:  # start passing this K/V chunk on while attending to it
            next_k, next_v = torch.empty_like(k), torch.empty_like(v)
            requests = dist.batch_isend_irecv(
                [
                    dist.P2POp(dist.isend, k, send_to),
                    dist.P2POp(dist.isend, v, send_to),
                    dist.P2POp(dist.irecv, next_k, recv_from),
                    dist.P2POp(dist.irecv, next_v, recv_from),
                ]
            )
        block_out, block_lse = _attend(qf, k, v)
        new_lse = torch.logaddexp(lse, block_lse)  # online softmax: rescale both partial outputs to the new total
        out = out * torch.exp(lse - new_lse) + block_out * torch.exp(block_lse - new_lse)
        lse = new_lse
        if step + 1 < world_size:
            for request in requests:
                request.wait()
            k, v = next_k, next_v
    return out.transpose(0, 1).to(q.dtype)
