"""ZeRO-2 step: reduce-scatter gradients, SGD on this rank's fp32 shard, all-gather bf16 parameters. From deepspeedai/DeepSpeed deepspeed/runtime/zero/stage_1_and_2.py::DeepSpeedZeroOptimizer.step."""

from pkroof.kernels.problems._collectives import all_gather_into_tensor, reduce_scatter_tensor

CATEGORY = "data-parallel"
# DeepSpeed averages with one dist.reduce per partition (average_tensor), the same traffic as one reduce-scatter,
# and all-gathers the updated bf16 partitions with all_gather_into_tensor (runtime/utils.py::all_gather_dp_groups)
SOURCE = "deepspeedai/DeepSpeed: deepspeed/runtime/zero/stage_1_and_2.py::DeepSpeedZeroOptimizer.step"
SHAPES = {  # numel: parameters in one bucket, numel / world_size owned by each rank
    "small": dict(numel=2**19),
    "deepspeed-bucket": dict(numel=500_000_000),  # DeepSpeed's default reduce_bucket_size = allgather_bucket_size = 5e8
}
LR = 0.01  # plain SGD; the optimizer's arithmetic is not the point, its place between the collectives is


def inputs(rank, world_size, *, seed, device, numel):
    """This rank's fp32 master shard, (numel / world_size,), and its full bf16 gradients, (numel,)."""
    import torch

    from pkroof.kernels.problems._random import generator

    if numel % world_size:
        raise ValueError(
            f"zero-reduce-scatter-then-all-gather: numel={numel} is not divisible by the world size {world_size}"
        )
    g = generator(device, seed * 1000 + rank)
    master = torch.randn(numel // world_size, generator=g, dtype=torch.float32, device=device)
    grads = torch.randn(numel, generator=g, dtype=torch.bfloat16, device=device)
    return master, grads


def reference(master, grads):
    """Returns the updated bf16 parameters, (numel,), and this rank's updated fp32 master shard."""
    import torch.distributed as dist

    world_size = dist.get_world_size()
    grad_shard = grads.new_empty(grads.numel() // world_size)
    reduce_scatter_tensor(grad_shard, grads, op=dist.ReduceOp.AVG)
    new_master = master - LR * grad_shard.float()
    params = grads.new_empty(grads.numel())
    all_gather_into_tensor(params, new_master.to(grads.dtype))  # the model's dtype: bf16
    return params, new_master
