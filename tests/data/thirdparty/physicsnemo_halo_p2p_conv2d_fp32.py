# From NVIDIA/physicsnemo physicsnemo/domain_parallel/shard_utils/halo.py::perform_halo_collective(method="p2p"):
# receives from the right and left, then sends to the left and right, in one batch_isend_irecv; zero edge padding
# at the first and last rank; then a 3x3 conv2d in fp32 (weight and bias as tensors) over the padded rows.
import torch
import torch.distributed as dist
import torch.nn.functional as nnf


def inputs(rank, world_size, *, seed, device, batch=2, channels=8, out_channels=16, height=64, width=64):
    if height % world_size:
        raise ValueError(f"height={height} is not divisible by the world size {world_size}")
    g = None if torch.device(device).type == "meta" else torch.Generator(device=device).manual_seed(seed * 1000 + rank)
    x = torch.randn(batch, channels, height // world_size, width, generator=g, device=device)
    weight = 0.1 * torch.randn(out_channels, channels, 3, 3, generator=g, device=device)
    return x, weight, 0.1 * torch.randn(out_channels, generator=g, device=device)


def reference(x, weight, bias):
    rank, n, halo = dist.get_rank(), dist.get_world_size(), weight.shape[-2] // 2
    to_left, to_right = x[:, :, :halo].contiguous(), x[:, :, -halo:].contiguous()
    from_left, from_right = torch.zeros_like(to_left), torch.zeros_like(to_right)
    ops = []
    if rank < n - 1:
        ops.append(dist.P2POp(dist.irecv, from_right, rank + 1))
    if rank > 0:
        ops.append(dist.P2POp(dist.irecv, from_left, rank - 1))
        ops.append(dist.P2POp(dist.isend, to_left, rank - 1))
    if rank < n - 1:
        ops.append(dist.P2POp(dist.isend, to_right, rank + 1))
    if ops:
        for req in dist.batch_isend_irecv(ops):
            req.wait()
    return nnf.conv2d(torch.cat([from_left, x, from_right], dim=2), weight, bias, padding=(0, halo))
