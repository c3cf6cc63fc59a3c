"""Decode-time row-parallel GEMV + all-reduce. From vllm-project/vllm vllm/model_executor/layers/linear.py::RowParallelLinear."""

from pkroof.kernels.problems._shapes import per_rank

CATEGORY = "decode"
SOURCE = (
    "vllm-project/vllm: vllm/model_executor/layers/linear.py::RowParallelLinear.forward "
    "(input_is_parallel, reduce_results=True: tensor_model_parallel_all_reduce), at decode batch sizes"
)
# batch: tokens decoded this step (one per sequence); in_features: full K, split over ranks; out_features: N
SHAPES = {
    "small": dict(batch=4, in_features=256, out_features=128),
    "llama3-70b-tp8": dict(batch=1, in_features=28672, out_features=8192),  # MLP down projection
    "llama3-70b-tp8-bs8": dict(batch=8, in_features=28672, out_features=8192),
    "llama3-70b-tp8-o-proj": dict(batch=1, in_features=8192, out_features=8192),  # attention output
    "llama3-8b-tp2": dict(batch=8, in_features=14336, out_features=4096),
}


def inputs(rank, world_size, *, seed, device, batch, in_features, out_features):
    """x [batch, in_features/P]; weight [out_features, in_features/P] (vLLM's layout, as nn.Linear); bf16."""
    import torch

    from pkroof.kernels.problems._random import generator

    k_local = per_rank(in_features, world_size, "in_features")
    g = generator(device, seed * 1000 + rank)
    x = torch.randn(batch, k_local, generator=g, dtype=torch.bfloat16, device=device)
    # the sum over ranks is O(1)
    weight = torch.randn(out_features, k_local, generator=g, dtype=torch.bfloat16, device=device) * in_features**-0.5
    return x, weight


def reference(x, weight):
    """y [batch, out_features] = sum over ranks of x · weightᵀ, on every rank."""
    import torch
    import torch.distributed as dist

    y = torch.nn.functional.linear(x, weight)
    dist.all_reduce(y)
    return y
