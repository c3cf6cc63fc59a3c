"""All-gather of the sequence-parallel input + column-parallel GEMM. From NVIDIA/Megatron-LM megatron/core/tensor_parallel/layers.py::ColumnParallelLinear."""

from pkroof.kernels.problems._collectives import all_gather_into_tensor
from pkroof.kernels.problems._shapes import per_rank
from pkroof.rooflines.builders import all_gather_gemm

CATEGORY = "tp-gemm"
SOURCE = (
    "NVIDIA/Megatron-LM: megatron/core/tensor_parallel/layers.py::ColumnParallelLinear "
    "(sequence_parallel=True: the input is all-gathered in linear_with_grad_accumulation_and_async_allreduce)"
)
# tokens: gathered rows (m); in_features: inner dimension (k); out_features: full N, split over ranks
SHAPES = {
    "small": dict(tokens=64, in_features=128, out_features=256),
    "llama3-70b-tp8": dict(tokens=8192, in_features=8192, out_features=2 * 28672),  # MLP gate+up, fused
    "llama3-8b-tp2": dict(tokens=8192, in_features=4096, out_features=2 * 14336),
    "deepseek-v3-dense-tp8": dict(tokens=8192, in_features=7168, out_features=2 * 18432),  # its 3 dense layers
}


def inputs(rank, world_size, *, seed, device, tokens, in_features, out_features):
    """A_shard [tokens/P, in_features] (this rank's sequence shard), B [in_features, out_features/P]; bf16."""
    import torch

    from pkroof.kernels.problems._random import generator

    m_local = per_rank(tokens, world_size, "tokens")
    n_local = per_rank(out_features, world_size, "out_features")
    g = generator(device, seed * 1000 + rank)
    a = torch.randn(m_local, in_features, generator=g, device=device)
    b = torch.randn(in_features, n_local, generator=g, device=device) * in_features**-0.5  # keeps C's entries O(1)
    return a.to(device=device, dtype=torch.bfloat16), b.to(device=device, dtype=torch.bfloat16)


def reference(a_shard, b):
    """C [tokens, out_features/P] = all_gather(A_shard) · B."""
    import torch.distributed as dist

    a = a_shard.new_empty(a_shard.shape[0] * dist.get_world_size(), a_shard.shape[1])
    all_gather_into_tensor(a, a_shard)
    return a @ b


def workload(world_size, *, tokens, in_features, out_features, dtype="bf16"):
    """The built-in all-gather-gemm: m the gathered rows, k the inner dimension, n this rank's output columns."""
    per_rank(tokens, world_size, "tokens")
    return all_gather_gemm(
        world_size,
        dtype,
        m=tokens,
        n=per_rank(out_features, world_size, "out_features"),
        k=in_features,
    )
