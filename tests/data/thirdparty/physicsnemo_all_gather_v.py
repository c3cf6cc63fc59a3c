# From NVIDIA/physicsnemo physicsnemo/distributed/utils.py::all_gather_v_wrapper (sizes given per rank): receive
# buffers of each rank's own size, dist.all_gather of a list of unequal tensors, cat along dim 0. Rank r holds
# rows * (P - r) / P rows here (rank 0 the most).
import torch
import torch.distributed as dist


def inputs(rank, world_size, *, seed, device, rows=96, features=64):
    sizes = [rows * (world_size - r) // world_size for r in range(world_size)]
    if min(sizes) < 1:
        raise ValueError(f"rows={rows} leaves a rank of the {world_size} without rows")
    g = None if torch.device(device).type == "meta" else torch.Generator(device=device).manual_seed(seed * 1000 + rank)
    x = torch.randn(sizes[rank], features, generator=g, device=device, dtype=torch.bfloat16)
    return x, torch.tensor(sizes, dtype=torch.int64, device=device)


def reference(x, sizes):
    parts = [x.new_empty(s, x.shape[1]) for s in sizes.tolist()]
    dist.all_gather(parts, x.contiguous())
    return torch.cat(parts, dim=0)
