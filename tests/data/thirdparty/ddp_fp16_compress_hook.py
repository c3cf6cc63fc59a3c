# From pytorch/pytorch torch/distributed/algorithms/ddp_comm_hooks/default_hooks.py::fp16_compress_hook
# (_compress_hook): the fp32 gradient bucket cast to fp16 and divided by the world size, all-reduced, and decompressed
# back to fp32 (the hook copies into the bucket; here a new tensor, the bucket being an input).
import torch
import torch.distributed as dist


def inputs(rank, world_size, *, seed, device, numel=1 << 20):
    """One GradBucket's buffer() of fp32 gradients (4 MiB; DDP's default cap is bucket_cap_mb=25)."""
    g = None if torch.device(device).type == "meta" else torch.Generator(device=device).manual_seed(seed * 1000 + rank)
    return (torch.randn(numel, generator=g, device=device, dtype=torch.float32),)


def reference(bucket):
    group = dist.group.WORLD  # process_group=None: the default group
    # divide before the sum, as the hook does, so that the fp16 sum of world-size terms keeps its range
    compressed = bucket.to(torch.float16).div_(group.size())
    dist.all_reduce(compressed, group=group)
    # decompress: fut.then() copies the reduced value back into the bucket's dtype
    return compressed.to(bucket.dtype)
