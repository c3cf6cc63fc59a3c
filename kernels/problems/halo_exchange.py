"""Halo exchange of a row-decomposed convolution input, zero-padded at the open ends. From NVIDIA/physicsnemo physicsnemo/domain_parallel/shard_utils/halo.py::halo_padding_1d."""

CATEGORY = "long-tail"
SOURCE = "NVIDIA/physicsnemo: physicsnemo/domain_parallel/shard_utils/halo.py::halo_padding_1d"
SHAPES = {  # an NHWC image with batch 1, split over ranks by rows (height); halo = kernel_size // 2
    "small": dict(height=64, width=32, channels=8, halo=1),
    # SDXL VAE decoder's last up-block: 1024×1024 pixels, 128 channels, 3×3 convolutions
    "sdxl-vae-decoder-1024px": dict(height=1024, width=1024, channels=128, halo=1),
}


def inputs(rank, world_size, *, seed, device, height, width, channels, halo):
    """This rank's rows, (height / world_size, width, channels) bf16, and the halo width as a 0-d int64 tensor."""
    import torch

    from pkroof.kernels.problems._random import generator

    if height % world_size:
        raise ValueError(f"halo-exchange: height={height} is not divisible by the world size {world_size}")
    if halo > height // world_size:
        raise ValueError(f"halo-exchange: halo={halo} is wider than the {height // world_size} rows per rank")
    g = generator(device, seed * 1000 + rank)
    x = torch.randn(height // world_size, width, channels, generator=g, dtype=torch.bfloat16, device=device)
    return x, torch.tensor(halo, device=device)


def reference(x, halo):
    """This rank's rows with `halo` rows from each neighbour above and below; zeros beyond the first and last rank."""
    import torch
    import torch.distributed as dist

    rank, world_size = dist.get_rank(), dist.get_world_size()
    h = int(halo)
    above = x.new_zeros(h, *x.shape[1:])
    below = x.new_zeros(h, *x.shape[1:])
    ops = []
    if rank > 0:  # swap edges with the rank above (open boundary: rank 0 has none)
        ops += [dist.P2POp(dist.irecv, above, rank - 1), dist.P2POp(dist.isend, x[:h].contiguous(), rank - 1)]
    if rank < world_size - 1:
        ops += [dist.P2POp(dist.irecv, below, rank + 1), dist.P2POp(dist.isend, x[-h:].contiguous(), rank + 1)]
    if ops:
        for req in dist.batch_isend_irecv(ops):
            req.wait()
    return torch.cat([above, x, below])
