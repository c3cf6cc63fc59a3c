# From pytorch/torchtitan torchtitan/models/llama3/infra/parallelize.py::apply_tp ("feed_forward.w2":
# RowwiseParallel(output_layouts=Shard(1))); the Partial -> Shard(1) redistribute is pytorch/pytorch
# torch/distributed/tensor/placement_types.py::Shard._reduce_shard_tensor, a functional reduce_scatter_tensor on the
# sequence dim (scatter_dim=1), as DTensor issues it (torch.distributed._functional_collectives).
import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol


def inputs(rank, world_size, *, seed, device, batch=2, seq=64, hidden=128, ffn=512):
    for name, value in (("seq", seq), ("ffn", ffn)):
        if value % world_size:
            raise ValueError(f"{name}={value} is not divisible by the world size {world_size}")
    g = None if torch.device(device).type == "meta" else torch.Generator(device=device).manual_seed(seed * 1000 + rank)
    h = torch.randn(batch, seq, ffn // world_size, generator=g, device=device, dtype=torch.bfloat16)
    w2 = 0.02 * torch.randn(hidden, ffn // world_size, generator=g, device=device, dtype=torch.bfloat16)
    return h, w2  # h: silu(w1 x) * w3 x, column-sharded; w2: the local shard of the row-wise weight


def reference(h, w2):
    partial = torch.matmul(h, w2.t())  # [b, s, hidden], Partial(sum) over the ranks
    out = funcol.reduce_scatter_tensor(partial.contiguous(), "sum", scatter_dim=1, group=dist.group.WORLD)
    if isinstance(out, funcol.AsyncCollectiveTensor):
        out = out.wait()
    return out  # [b, s/P, hidden], Shard(1)
