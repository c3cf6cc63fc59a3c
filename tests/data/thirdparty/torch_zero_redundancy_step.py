# From pytorch/pytorch torch/distributed/optim/zero_redundancy_optimizer.py::ZeroRedundancyOptimizer.step
# (_partition_parameters: largest first, each to the rank holding the fewest elements so far; the local optimizer
# on this rank's parameters, here SGD with momentum; _sync_params: one async broadcast per parameter from its owner,
# parameters_as_bucket_view=False, all waited at the end). Parameters of a two-layer MLP, fp32.
import torch
import torch.distributed as dist


def _owners(numels, n):
    owner, load = [0] * len(numels), [0] * n
    for i in sorted(range(len(numels)), key=lambda i: -numels[i]):  # stable: ties keep their order
        owner[i] = min(range(n), key=load.__getitem__)
        load[owner[i]] += numels[i]
    return owner


def inputs(rank, world_size, *, seed, device, hidden=128, ffn=256):
    g = None if torch.device(device).type == "meta" else torch.Generator(device=device).manual_seed(seed * 1000)
    shapes = [(ffn, hidden), (ffn,), (hidden, ffn), (hidden,)]  # fc1.weight, fc1.bias, fc2.weight, fc2.bias
    params = [torch.randn(s, generator=g, device=device) for s in shapes]  # replicated: the same on every rank
    grads = [torch.randn(s, generator=g, device=device) for s in shapes]  # already all-reduced by DDP
    owner = _owners([p.numel() for p in params], world_size)
    momentum = [torch.randn(s, generator=g, device=device) for s, o in zip(shapes, owner, strict=True) if o == rank]
    return (*params, *grads, *momentum)


def reference(*tensors):
    rank, n = dist.get_rank(), dist.get_world_size()
    params, grads, momentum = tensors[:4], tensors[4:8], list(tensors[8:])
    owner = _owners([p.numel() for p in params], n)
    new_params, new_momentum, handles = [], [], []
    for p, grad, o in zip(params, grads, owner, strict=True):
        if o == rank:
            buf = 0.9 * momentum.pop(0) + grad
            new_momentum.append(buf)
            new_params.append(p - 0.01 * buf)
        else:
            new_params.append(p.clone())  # overwritten by the owner's broadcast
    for p, o in zip(new_params, owner, strict=True):
        handles.append(dist.broadcast(p, src=o, async_op=True))
    for h in handles:
        h.wait()
    return (*new_params, *new_momentum)
