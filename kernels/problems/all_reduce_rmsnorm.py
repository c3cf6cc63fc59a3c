"""All-reduce + residual add + RMSNorm (TP). From vllm-project/vllm vllm/compilation/passes/fusion/allreduce_rms_fusion.py::AllReduceFusedAddRMSNormPattern."""

CATEGORY = "tp-norm"
SOURCE = (
    "vllm-project/vllm: vllm/compilation/passes/fusion/allreduce_rms_fusion.py::AllReduceFusedAddRMSNormPattern "
    "(tensor_model_parallel_all_reduce then fused_add_rms_norm; fused by FlashInfer's trtllm_allreduce_fusion)"
)
EPS = 1e-5  # Llama 3 rms_norm_eps
SHARED = 999  # generator stream for the tensors every rank holds identically (residual, gamma)
# tokens: rows of the o_proj / down_proj output; hidden: model width (no sharding: every rank holds all of it)
SHAPES = {
    "small": dict(tokens=64, hidden=256),
    "llama3-70b-tp8": dict(tokens=8192, hidden=8192),
    "llama3-70b-tp8-decode": dict(tokens=64, hidden=8192),  # a decode batch of 64 sequences
    "llama3-8b-tp2": dict(tokens=8192, hidden=4096),
}


def inputs(rank, world_size, *, seed, device, tokens, hidden):
    """partial [tokens, hidden] (this rank's partial sum), residual [tokens, hidden], gamma [hidden]; bf16."""
    import torch

    from pkroof.kernels.problems._random import generator

    g = generator(device, seed * 1000 + rank)
    # the sum over ranks is O(1)
    partial = torch.randn(tokens, hidden, generator=g, dtype=torch.bfloat16, device=device) * world_size**-0.5
    # drawn on the host, so that every rank holds the very same values whatever its device
    shared = torch.Generator(device="cpu").manual_seed(seed * 1000 + SHARED)
    residual = torch.randn(tokens, hidden, generator=shared)
    gamma = 1 + 0.1 * torch.randn(hidden, generator=shared)
    return partial, residual.to(device=device, dtype=torch.bfloat16), gamma.to(device=device, dtype=torch.bfloat16)


def reference(partial, residual, gamma):
    """(normed, new residual), both [tokens, hidden] bf16; the norm runs in fp32 as vLLM's RMSNorm.forward_native."""
    import torch
    import torch.distributed as dist

    x = partial.clone()
    dist.all_reduce(x)
    h = x.float() + residual.float()
    normed = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + EPS)
    return normed.to(x.dtype) * gamma, h.to(x.dtype)
