"""Reduce-scatter + residual add + RMSNorm on the token shard (SP). From NVIDIA/Megatron-LM megatron/core/transformer/transformer_layer.py::TransformerLayer."""

from pkroof.kernels.problems._collectives import reduce_scatter_tensor
from pkroof.kernels.problems._shapes import per_rank

CATEGORY = "tp-norm"
SOURCE = (
    "NVIDIA/Megatron-LM: megatron/core/transformer/transformer_layer.py::TransformerLayer "
    "(linear_proj's reduce_scatter_to_sequence_parallel_region, self_attn_bda residual add, pre_mlp_layernorm)"
)
EPS = 1e-5  # Llama 3 rms_norm_eps
SHARED = 999  # generator stream for the tensors every rank holds identically (gamma)
# tokens: full sequence, scattered over ranks; hidden: model width
SHAPES = {
    "small": dict(tokens=64, hidden=256),
    "llama3-70b-tp8": dict(tokens=8192, hidden=8192),
    "llama3-8b-tp2": dict(tokens=8192, hidden=4096),
    "deepseek-v3-tp8": dict(tokens=8192, hidden=7168),
}


def inputs(rank, world_size, *, seed, device, tokens, hidden):
    """partial [tokens, hidden] (row-parallel partial sum), residual [tokens/P, hidden] (this rank's shard), gamma."""
    import torch

    from pkroof.kernels.problems._random import generator

    t_local = per_rank(tokens, world_size, "tokens")
    g = generator(device, seed * 1000 + rank)
    # the sum over ranks is O(1)
    partial = torch.randn(tokens, hidden, generator=g, dtype=torch.bfloat16, device=device) * world_size**-0.5
    residual = torch.randn(t_local, hidden, generator=g, dtype=torch.bfloat16, device=device)
    # gamma is drawn on the host, so that every rank holds the very same one whatever its device
    gamma = 1 + 0.1 * torch.randn(hidden, generator=torch.Generator(device="cpu").manual_seed(seed * 1000 + SHARED))
    return partial, residual, gamma.to(device=device, dtype=torch.bfloat16)


def reference(partial, residual, gamma):
    """(normed, new residual), both [tokens/P, hidden] bf16; the add is bf16 (bias_dropout_add), the norm fp32."""
    import torch

    reduced = residual.new_empty(residual.shape)
    reduce_scatter_tensor(reduced, partial)
    h = reduced + residual
    hf = h.float()
    normed = hf * torch.rsqrt(hf.pow(2).mean(-1, keepdim=True) + EPS) * gamma.float()  # as Transformer Engine's RMSNorm
    return normed.to(h.dtype), h
