"""Megatron MLP block, TP with sequence parallelism: all-gather, gate+up GEMM, SwiGLU, down GEMM, reduce-scatter. From NVIDIA/Megatron-LM megatron/core/transformer/mlp.py::MLP."""

from pkroof.kernels.problems._collectives import all_gather_into_tensor, reduce_scatter_tensor
from pkroof.kernels.problems._shapes import per_rank

CATEGORY = "tp-gemm"
SOURCE = (
    "NVIDIA/Megatron-LM: megatron/core/transformer/mlp.py::MLP.forward "
    "(linear_fc1 ColumnParallelLinear with gated_linear_unit and SwiGLU, linear_fc2 RowParallelLinear; "
    "sequence_parallel=True)"
)
# tokens: full sequence (sharded over ranks outside the block); hidden: model width; ffn: full intermediate size
SHAPES = {
    "small": dict(tokens=64, hidden=128, ffn=256),
    "llama3-70b-tp8": dict(tokens=8192, hidden=8192, ffn=28672),
    "llama3-8b-tp2": dict(tokens=8192, hidden=4096, ffn=14336),
    "deepseek-v3-dense-tp8": dict(tokens=8192, hidden=7168, ffn=18432),  # its 3 dense layers
}


def inputs(rank, world_size, *, seed, device, tokens, hidden, ffn):
    """x_shard [tokens/P, hidden]; w_fc1 [hidden, 2·ffn/P] = [gate | up] of this rank; w_fc2 [ffn/P, hidden]; bf16."""
    import torch

    from pkroof.kernels.problems._random import generator

    t_local = per_rank(tokens, world_size, "tokens")
    f_local = per_rank(ffn, world_size, "ffn")
    g = generator(device, seed * 1000 + rank)
    x = torch.randn(t_local, hidden, generator=g, device=device)
    w_fc1 = torch.randn(hidden, 2 * f_local, generator=g, device=device) * hidden**-0.5
    w_fc2 = torch.randn(f_local, hidden, generator=g, device=device) * ffn**-0.5  # summed over all ranks' slices of ffn
    return tuple(t.to(device=device, dtype=torch.bfloat16) for t in (x, w_fc1, w_fc2))


def reference(x_shard, w_fc1, w_fc2):
    """y_shard [tokens/P, hidden] = reduce_scatter(SwiGLU(all_gather(x) · w_fc1) · w_fc2)."""
    import torch
    import torch.distributed as dist

    world_size = dist.get_world_size()
    x = x_shard.new_empty(x_shard.shape[0] * world_size, x_shard.shape[1])
    all_gather_into_tensor(x, x_shard)
    gate, up = torch.chunk(x @ w_fc1, 2, dim=-1)  # Megatron's glu(): first half gates the second
    partial = (torch.nn.functional.silu(gate) * up) @ w_fc2  # [tokens, hidden], this rank's share of the sum
    out = partial.new_empty(x_shard.shape)
    reduce_scatter_tensor(out, partial)
    return out
