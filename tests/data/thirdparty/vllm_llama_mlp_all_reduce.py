# From vllm-project/vllm vllm/model_executor/models/llama.py::LlamaMLP.forward: MergedColumnParallelLinear
# gate_up_proj, SiluAndMul, RowParallelLinear down_proj whose reduce_results=True ends in
# tensor_model_parallel_all_reduce (vLLM's custom all-reduce where the size allows, else NCCL). Prefill tokens.
import torch
import torch.distributed as dist
import torch.nn.functional as nnf
from torch import nn


def inputs(rank, world_size, *, seed, device, tokens=128, hidden=256, intermediate=512):
    if intermediate % world_size:
        raise ValueError(f"intermediate={intermediate} is not divisible by the world size {world_size}")
    meta = torch.device(device).type == "meta"
    g = None if meta else torch.Generator(device=device).manual_seed(seed * 1000 + rank)
    x = torch.randn(tokens, hidden, generator=g, device=device, dtype=torch.bfloat16)
    local = intermediate // world_size
    kw = dict(bias=False, device=device, dtype=torch.bfloat16)
    mlp = nn.ModuleDict(dict(gate_up_proj=nn.Linear(hidden, 2 * local, **kw), down_proj=nn.Linear(local, hidden, **kw)))
    mlp.requires_grad_(False)
    if not meta:
        for p in mlp.parameters():
            p.copy_(0.05 * torch.randn(p.shape, generator=g, device=device, dtype=p.dtype))
    return x, mlp


def reference(x, mlp):
    gate, up = mlp["gate_up_proj"](x).chunk(2, dim=-1)
    out = mlp["down_proj"](nnf.silu(gate) * up)  # a partial sum over the intermediate shards
    dist.all_reduce(out)
    return out
