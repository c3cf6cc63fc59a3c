"""Row-parallel GEMM + reduce-scatter to the sequence-parallel output. From NVIDIA/Megatron-LM megatron/core/tensor_parallel/layers.py::RowParallelLinear."""

from pkroof.kernels.problems._collectives import reduce_scatter_tensor
from pkroof.kernels.problems._shapes import per_rank
from pkroof.rooflines.builders import gemm_reduce_scatter

CATEGORY = "tp-gemm"
SOURCE = (
    "NVIDIA/Megatron-LM: megatron/core/tensor_parallel/layers.py::RowParallelLinear "
    "(sequence_parallel=True: reduce_scatter_to_sequence_parallel_region)"
)
# tokens: output rows (m), scattered over ranks; in_features: full K, split over ranks; out_features: N
SHAPES = {
    "small": dict(tokens=64, in_features=256, out_features=128),
    "llama3-70b-tp8": dict(tokens=8192, in_features=28672, out_features=8192),  # MLP down projection
    "llama3-8b-tp2": dict(tokens=8192, in_features=14336, out_features=4096),
    "deepseek-v3-dense-tp8": dict(tokens=8192, in_features=18432, out_features=7168),  # its 3 dense layers
}


def inputs(rank, world_size, *, seed, device, tokens, in_features, out_features):
    """A [tokens, in_features/P] (this rank's slice of K), B [in_features/P, out_features]; bf16."""
    import torch

    from pkroof.kernels.problems._random import generator

    per_rank(tokens, world_size, "tokens")
    k_local = per_rank(in_features, world_size, "in_features")
    g = generator(device, seed * 1000 + rank)
    a = torch.randn(tokens, k_local, generator=g, device=device)
    # b: the sum over all ranks is O(1)
    b = torch.randn(k_local, out_features, generator=g, device=device) * in_features**-0.5
    return a.to(device=device, dtype=torch.bfloat16), b.to(device=device, dtype=torch.bfloat16)


def reference(a, b):
    """C_shard [tokens/P, out_features]: this rank's rows of sum over ranks of A·B."""
    import torch.distributed as dist

    partial = a @ b
    out = partial.new_empty(partial.shape[0] // dist.get_world_size(), partial.shape[1])
    reduce_scatter_tensor(out, partial)
    return out


def workload(world_size, *, tokens, in_features, out_features, dtype="bf16"):
    """The built-in gemm-reduce-scatter: m×n the full output, k each rank's slice of the inner dimension."""
    per_rank(tokens, world_size, "tokens")
    return gemm_reduce_scatter(
        world_size,
        dtype,
        m=tokens,
        n=out_features,
        k=per_rank(in_features, world_size, "in_features"),
    )
