import collections

import torch
import torch.distributed as dist

Meta = collections.namedtuple("Meta", "rows width")


def inputs(rank, world_size, *, seed, device, n=256):
    return (torch.ones(n, device=device),)


def reference(a):
    box = [Meta(4, 64)] if dist.get_rank() == 0 else [None]
    dist.broadcast_object_list(box, src=0)
    out = a.clone()
    dist.all_reduce(out)
    return out
