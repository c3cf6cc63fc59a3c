# From NVIDIA/TransformerEngine transformer_engine/pytorch/module/layernorm_linear.py::_LayerNormLinear.forward
# parallel_mode="column", sequence_parallel=True: layer norm on this rank's sequence shard, gather_along_first_dim
# of the normalized activations (all_gather_into_tensor), then the GEMM with this rank's column shard and bias.
import torch
import torch.distributed as dist
import torch.nn.functional as nnf
from torch import nn


def inputs(rank, world_size, *, seed, device, seq=128, batch=2, hidden=128, out_features=256):
    for name, value in (("seq", seq), ("out_features", out_features)):
        if value % world_size:
            raise ValueError(f"{name}={value} is not divisible by the world size {world_size}")
    meta = torch.device(device).type == "meta"
    g = None if meta else torch.Generator(device=device).manual_seed(seed * 1000 + rank)
    x = torch.randn(seq // world_size, batch, hidden, generator=g, device=device, dtype=torch.bfloat16)
    block = nn.Sequential(
        nn.LayerNorm(hidden, device=device, dtype=torch.bfloat16),
        nn.Linear(hidden, out_features // world_size, bias=True, device=device, dtype=torch.bfloat16),
    )
    block.requires_grad_(False)
    if not meta:
        for p in block[1].parameters():
            p.copy_(0.02 * torch.randn(p.shape, generator=g, device=device, dtype=p.dtype))
    return x, block


def reference(x, block):
    norm, fc = block[0], block[1]
    y = nnf.layer_norm(x, norm.normalized_shape, norm.weight, norm.bias, norm.eps)  # [s/P, b, h], sbhd
    full = y.new_empty(y.shape[0] * dist.get_world_size(), *y.shape[1:])
    dist.all_gather_into_tensor(full, y.contiguous())
    return nnf.linear(full, fc.weight, fc.bias)  # [s, b, out/P]
