# From NVIDIA/torch-harmonics torch_harmonics/distributed/distributed_sht.py::DistributedRealSHT.forward (azimuth
# group = the world, polar group of one): all-to-all transpose making longitude local (channels split), rfft along
# longitude truncated to mmax, transpose back (m split, channels local), Legendre quadrature as two einsums against
# the precomputed weights buffer [mmax/P, lmax, nlat] (random here in place of the Legendre polynomials).
import math

import torch
import torch.distributed as dist
from torch import nn


def inputs(rank, world_size, *, seed, device, batch=1, channels=4, nlat=32, nlon=64, lmax=32, mmax=32):
    if channels % world_size or nlon % world_size or mmax % world_size or mmax > nlon // 2 + 1:
        raise ValueError(f"channels={channels}, nlon={nlon}, mmax={mmax} do not split over {world_size} ranks")
    g = None if torch.device(device).type == "meta" else torch.Generator(device=device).manual_seed(seed * 1000 + rank)
    x = torch.randn(batch, channels, nlat, nlon // world_size, generator=g, device=device)
    sht = nn.Module()
    sht.register_buffer("weights", torch.randn(mmax // world_size, lmax, nlat, generator=g, device=device))
    sht.nlon, sht.mmax = nlon, mmax
    return x, sht


def _transpose(x, split_dim, cat_dim, n):
    send = [c.contiguous() for c in torch.chunk(x, n, dim=split_dim)]
    recv = [torch.empty_like(send[0]) for _ in range(n)]
    dist.all_to_all(recv, send)
    return torch.cat(recv, dim=cat_dim)


def reference(x, sht):
    n = dist.get_world_size()
    x = _transpose(x, -3, -1, n)  # [b, c/P, nlat, nlon]
    x = 2.0 * math.pi * torch.fft.rfft(x, n=sht.nlon, dim=-1, norm="forward")[..., : sht.mmax]
    x = torch.view_as_real(_transpose(x, -1, -3, n))  # [b, c, nlat, mmax/P, 2]
    re = torch.einsum("...km,mlk->...lm", x[..., 0], sht.weights)
    im = torch.einsum("...km,mlk->...lm", x[..., 1], sht.weights)
    return torch.complex(re, im)  # [b, c, lmax, mmax/P]
