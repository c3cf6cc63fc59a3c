"""Row-parallel GEMM + all-reduce (no sequence parallelism). From NVIDIA/Megatron-LM megatron/core/tensor_parallel/layers.py::RowParallelLinear."""

from pkroof.kernels.problems._shapes import per_rank
from pkroof.rooflines.builders import gemm_all_reduce

CATEGORY = "tp-gemm"
SOURCE = (
    "NVIDIA/Megatron-LM: megatron/core/tensor_parallel/layers.py::RowParallelLinear "
    "(sequence_parallel=False: reduce_from_tensor_model_parallel_region)"
)
# tokens: output rows (m); in_features: full K, split over ranks; out_features: N
SHAPES = {
    "small": dict(tokens=64, in_features=256, out_features=128),
    "llama3-70b-tp8": dict(tokens=8192, in_features=28672, out_features=8192),  # MLP down projection
    "llama3-70b-tp8-o-proj": dict(tokens=8192, in_features=8192, out_features=8192),  # attention output
    "llama3-8b-tp2": dict(tokens=8192, in_features=14336, out_features=4096),
}


def inputs(rank, world_size, *, seed, device, tokens, in_features, out_features):
    """A [tokens, in_features/P] (this rank's slice of K), B [in_features/P, out_features]; bf16."""
    import torch

    from pkroof.kernels.problems._random import generator

    k_local = per_rank(in_features, world_size, "in_features")
    g = generator(device, seed * 1000 + rank)
    a = torch.randn(tokens, k_local, generator=g, device=device)
    # b: the sum over all ranks is O(1)
    b = torch.randn(k_local, out_features, generator=g, device=device) * in_features**-0.5
    return a.to(device=device, dtype=torch.bfloat16), b.to(device=device, dtype=torch.bfloat16)


def reference(a, b):
    """C [tokens, out_features] = sum over ranks of A·B, on every rank."""
    import torch.distributed as dist

    out = a @ b
    dist.all_reduce(out)
    return out


def workload(world_size, *, tokens, in_features, out_features, dtype="bf16"):
    """The built-in gemm-all-reduce: m×n the full output, k each rank's slice of the inner dimension."""
    return gemm_all_reduce(
        world_size,
        dtype,
        m=tokens,
        n=out_features,
        k=per_rank(in_features, world_size, "in_features"),
    )
