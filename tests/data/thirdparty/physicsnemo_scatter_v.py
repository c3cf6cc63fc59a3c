# From NVIDIA/physicsnemo physicsnemo/distributed/utils.py::scatter_v_wrapper: a ScatterV done as dist.all_to_all of
# lists, the source sending split chunks of uneven size and empty tensors elsewhere, every other rank sending empty
# tensors. Rank r receives rows * (P - r) / (P (P + 1) / 2) rows here; only rank 0 holds the global tensor.
import torch
import torch.distributed as dist


def inputs(rank, world_size, *, seed, device, rows=96, features=64):
    total = world_size * (world_size + 1) // 2
    if rows % total:
        raise ValueError(f"rows={rows} is not divisible by {total}")
    sizes = [rows * (world_size - r) // total for r in range(world_size)]
    g = None if torch.device(device).type == "meta" else torch.Generator(device=device).manual_seed(seed * 1000 + rank)
    x = torch.randn(rows if rank == 0 else 0, features, generator=g, device=device, dtype=torch.bfloat16)
    return x, torch.tensor(sizes, dtype=torch.int64, device=device)


def reference(x, sizes):
    rank, n, src, cols = dist.get_rank(), dist.get_world_size(), 0, x.shape[1]
    sz = sizes.tolist()
    if rank == src:
        send = [c.contiguous() for c in torch.split(x, sz, dim=0)]
    else:
        send = [x.new_empty(0, cols) for _ in range(n)]
    recv = [x.new_empty(sz[rank] if r == src else 0, cols) for r in range(n)]
    dist.all_to_all(recv, send)
    return recv[src]
