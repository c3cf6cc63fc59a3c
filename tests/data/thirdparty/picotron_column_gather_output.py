# From huggingface/picotron picotron/tensor_parallel/tensor_parallel.py::ColumnParallelLinear.forward (commit 5809434)
# gather_output=True, as apply_tensor_parallel sets it for final_proj (the LM head); the gather is
# GatherFromModelParallelRegion (tp_communications.py): dist.all_gather into a list, then cat on the last dim.
import torch
import torch.distributed as dist
import torch.nn.functional as nnf
from torch import nn


def inputs(rank, world_size, *, seed, device, batch=2, seq=32, hidden=128, vocab=512):
    if vocab % world_size:
        raise ValueError(f"vocab={vocab} is not divisible by the world size {world_size}")
    meta = torch.device(device).type == "meta"
    g = None if meta else torch.Generator(device=device).manual_seed(seed * 1000 + rank)
    x = torch.randn(batch, seq, hidden, generator=g, device=device, dtype=torch.bfloat16)
    head = nn.Linear(hidden, vocab // world_size, bias=False, device=device, dtype=torch.bfloat16)
    head.requires_grad_(False)
    if not meta:
        head.weight.copy_(0.02 * torch.randn(head.weight.shape, generator=g, device=device, dtype=torch.bfloat16))
    return x, head


def reference(x, head):
    # Y_i = X W_i^T: this rank's slice of the vocabulary
    local = nnf.linear(x, head.weight).contiguous()
    parts = [torch.empty_like(local) for _ in range(dist.get_world_size())]
    dist.all_gather(parts, local)
    return torch.cat(parts, dim=-1)
