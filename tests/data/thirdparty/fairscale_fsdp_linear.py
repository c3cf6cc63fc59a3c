# From facebookresearch/fairscale fairscale/nn/data_parallel/fully_sharded_data_parallel.py::FullyShardedDataParallel
# (_shard_parameters_: the flat parameter split into world_size chunks, the last padded; _rebuild_full_params:
# all-gather of the shards; _post_backward_hook: divide, chunk-and-pad, reduce-scatter of the flat gradient). One
# FSDP-wrapped nn.Linear (weight then bias in the flat parameter), forward and backward, reshard_after_forward=False.
import torch
import torch.distributed as dist
import torch.nn.functional as nnf


def inputs(rank, world_size, *, seed, device, tokens=64, hidden=128, out_features=255):
    numel = out_features * hidden + out_features
    shard = -(-numel // world_size)
    g = None if torch.device(device).type == "meta" else torch.Generator(device=device).manual_seed(seed * 1000 + rank)
    x = torch.randn(tokens, hidden, generator=g, device=device, dtype=torch.bfloat16)
    flat = 0.05 * torch.randn(shard, generator=g, device=device, dtype=torch.bfloat16)
    real = max(0, min(shard, numel - rank * shard))  # the last shard ends in padding
    flat[real:] = 0
    dy = torch.randn(tokens, out_features, generator=g, device=device, dtype=torch.bfloat16)
    return x, flat, dy


def reference(x, flat, dy):
    n, out_features, hidden = dist.get_world_size(), dy.shape[1], x.shape[1]
    numel = out_features * hidden + out_features
    full = flat.new_empty(n * flat.numel())
    dist.all_gather_into_tensor(full, flat)
    weight, bias = full[: out_features * hidden].view(out_features, hidden), full[out_features * hidden : numel]
    y = nnf.linear(x, weight, bias)
    dx = torch.matmul(dy, weight)
    grad = torch.cat([torch.matmul(dy.t(), x).flatten(), dy.sum(dim=0), dy.new_zeros(full.numel() - numel)])
    grad_shard = flat.new_empty(flat.numel())
    dist.reduce_scatter_tensor(grad_shard, grad / n)
    return y, dx, grad_shard
