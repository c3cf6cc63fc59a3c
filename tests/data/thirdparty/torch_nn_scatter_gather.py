# From pytorch/pytorch torch/distributed/nn/functional.py::_Scatter.forward and _Gather.forward: rank 0 scatters a
# list of equal chunks (dist.scatter with scatter_list; every rank passes the list, whose shapes size the output),
# each rank applies its linear map, and rank 0 gathers the results (dist.gather with gather_list). Every rank
# returns the gathered tuple (zeros off rank 0), as _Gather does.
import torch
import torch.distributed as dist
import torch.nn.functional as nnf


def inputs(rank, world_size, *, seed, device, rows=64, hidden=128, out_features=64):
    g = None if torch.device(device).type == "meta" else torch.Generator(device=device).manual_seed(seed * 1000 + rank)
    chunks = [torch.randn(rows, hidden, generator=g, device=device, dtype=torch.bfloat16) for _ in range(world_size)]
    w = 0.05 * torch.randn(out_features, hidden, generator=g, device=device, dtype=torch.bfloat16)
    return (*chunks, w)


def reference(*tensors):
    chunks, w = tensors[:-1], tensors[-1]
    root = dist.get_rank() == 0
    local = torch.zeros_like(chunks[0])
    dist.scatter(local, list(chunks) if root else None, src=0)
    y = nnf.linear(local, w).contiguous()
    gathered = [torch.zeros_like(y) for _ in range(dist.get_world_size())]
    dist.gather(y, gathered if root else None, dst=0)
    return tuple(gathered)
