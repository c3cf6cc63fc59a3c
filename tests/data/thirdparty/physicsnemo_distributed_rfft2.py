# From NVIDIA/physicsnemo physicsnemo/distributed/fft.py::DistributedRFFT2.forward (commit d2207df), with
# distributed_transpose (physicsnemo/distributed/utils.py: split, dist.all_to_all of a list, cat). Input real and
# split over the last dim; FFT along dim[0] = -2 (of real data), all-to-all transpose, FFT along dim[1] = -1,
# truncate to W // 2 + 1. Output split over dim -2.
import torch
import torch.distributed as dist


def inputs(rank, world_size, *, seed, device, batch=2, channels=4, height=32, width=64):
    if height % world_size or width % world_size:
        raise ValueError(f"height={height} and width={width} must both divide over {world_size} ranks")
    g = None if torch.device(device).type == "meta" else torch.Generator(device=device).manual_seed(seed * 1000 + rank)
    return (torch.randn(batch, channels, height, width // world_size, generator=g, device=device),)


def reference(x):
    n = dist.get_world_size()
    h, w = x.shape[-2], x.shape[-1] * n
    x1 = torch.fft.fft(x, n=h, dim=-2, norm="ortho")  # complex [b, c, H, W/P]
    send = [c.contiguous() for c in torch.split(x1, h // n, dim=-2)]
    recv = [torch.empty_like(send[0]) for _ in range(n)]
    dist.all_to_all(recv, send)
    x2 = torch.fft.fft(torch.cat(recv, dim=-1), n=w, dim=-1, norm="ortho")  # complex [b, c, H/P, W]
    return x2[..., : w // 2 + 1].contiguous()
