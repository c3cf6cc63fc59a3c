"""Send of a pipeline-parallel activation from rank 0 to rank 1. From NVIDIA/Megatron-LM megatron/core/pipeline_parallel/p2p_communication.py::_p2p_ops."""

from pkroof.rooflines import Collective, Workload
from pkroof.rooflines.builders import collective

CATEGORY = "collective"
SOURCE = "NVIDIA/Megatron-LM: megatron/core/pipeline_parallel/p2p_communication.py::_p2p_ops"
SHAPES = {  # size_bytes: the message (nccl-tests' convention)
    "small": dict(size_bytes=2**20),
    "llama3-70b-pp-activation": dict(size_bytes=8192 * 8192 * 2),  # micro-batch 1 × 8192 tokens × hidden 8192 × bf16
    "llama3-70b-pp-tp8-sp-activation": dict(size_bytes=8192 * 8192 * 2 // 8),  # the same, sequence-split over TP=8
}


def inputs(rank, world_size, *, seed, device, size_bytes):
    """A (size_bytes / 2,) bf16 message on every rank; rank 0's is sent, rank 1's shape sizes the receive buffer."""
    import torch

    from pkroof.kernels.problems._random import generator

    if world_size < 2:
        raise ValueError(f"send-recv needs at least 2 ranks, got {world_size}")
    if size_bytes % 2:
        raise ValueError(f"send-recv: size_bytes={size_bytes} is not a whole number of bf16 elements (2 B each)")
    g = generator(device, seed * 1000 + rank)
    return (torch.randn(size_bytes // 2, generator=g, dtype=torch.bfloat16, device=device),)


def reference(x):
    """Rank 1 returns what rank 0 sent; every other rank returns an empty tensor."""
    import torch
    import torch.distributed as dist

    # plain send/recv, not batch_isend_irecv: NCCL wants every rank of the group in a first batched call
    rank = dist.get_rank()
    if rank == 0:
        dist.send(x, dst=1)
    elif rank == 1:
        out = torch.empty_like(x)
        dist.recv(out, src=0)
        return out
    return x.new_empty(0)


def workload(world_size, *, size_bytes, dtype="bf16") -> Workload:
    return collective(Collective.SEND_RECV, world_size, dtype, size=size_bytes)
