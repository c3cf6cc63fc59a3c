# From NVIDIA/physicsnemo physicsnemo/domain_parallel/shard_utils/halo.py::halo_padding_fwd_primitive with
# perform_halo_collective(method="a2a", the default: dist.all_to_all of lists, empty tensors to non-neighbours) and
# edge_padding_size = halo, then the sharded conv (conv_patches.py): an nn.Conv2d 5x5, no padding along the split
# height, bf16. The image [B, C, H, W] is split over ranks by rows.
import torch
import torch.distributed as dist
from torch import nn


def inputs(rank, world_size, *, seed, device, batch=2, channels=16, out_channels=32, height=64, width=64, kernel=5):
    if height % world_size or height // world_size < kernel // 2:
        raise ValueError(f"height={height} does not split over {world_size} ranks into rows at least halo tall")
    meta = torch.device(device).type == "meta"
    g = None if meta else torch.Generator(device=device).manual_seed(seed * 1000 + rank)
    x = torch.randn(batch, channels, height // world_size, width, generator=g, device=device, dtype=torch.bfloat16)
    conv = nn.Conv2d(channels, out_channels, kernel, padding=(0, kernel // 2), device=device, dtype=torch.bfloat16)
    conv.requires_grad_(False)
    if not meta:
        for p in conv.parameters():
            p.copy_(0.05 * torch.randn(p.shape, generator=g, device=device, dtype=p.dtype))
    return x, conv


def reference(x, conv):
    rank, n, halo = dist.get_rank(), dist.get_world_size(), conv.kernel_size[0] // 2
    send = [x.new_empty(0) for _ in range(n)]
    recv = [x.new_empty(0) for _ in range(n)]
    if rank > 0:
        send[rank - 1], recv[rank - 1] = x[:, :, :halo].contiguous(), x.new_zeros(*x.shape[:2], halo, x.shape[3])
    if rank < n - 1:
        send[rank + 1], recv[rank + 1] = x[:, :, -halo:].contiguous(), x.new_zeros(*x.shape[:2], halo, x.shape[3])
    dist.all_to_all(recv, send)
    edge = x.new_zeros(*x.shape[:2], halo, x.shape[3])
    top, bottom = recv[rank - 1] if rank > 0 else edge, recv[rank + 1] if rank < n - 1 else edge
    return conv(torch.cat([top, x, bottom], dim=2))
