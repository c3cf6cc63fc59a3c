# From pytorch/pytorch torch/distributed/pipelining/stage.py::_PipelineStageBase.get_fwd_send_ops / get_fwd_recv_ops
# and schedules.py::_batch_p2p (dist.batch_isend_irecv of all the ops, as of 2025): a 2-stage pipeline whose first
# stage returns two tensors (hidden states and the residual), one isend each, batched; stage 1 receives both.
import torch
import torch.distributed as dist
import torch.nn.functional as nnf


def inputs(rank, world_size, *, seed, device, tokens=64, hidden=128):
    if world_size != 2:
        raise ValueError(f"this is a pipeline of two stages: it needs 2 ranks, got {world_size}")
    g = None if torch.device(device).type == "meta" else torch.Generator(device=device).manual_seed(seed * 1000 + rank)
    x = torch.randn(tokens, hidden, generator=g, device=device, dtype=torch.bfloat16)  # stage 1: shape only
    w = 0.05 * torch.randn(hidden, hidden, generator=g, device=device, dtype=torch.bfloat16)  # this stage's weight
    return x, w


def reference(x, w):
    if dist.get_rank() == 0:
        hidden = nnf.linear(x, w)
        outputs = (hidden, x)  # (hidden states, residual): both go to stage 1
        for req in dist.batch_isend_irecv([dist.P2POp(dist.isend, t, 1) for t in outputs]):
            req.wait()
        return hidden
    hidden, residual = torch.empty_like(x), torch.empty_like(x)
    for req in dist.batch_isend_irecv([dist.P2POp(dist.irecv, t, 0) for t in (hidden, residual)]):
        req.wait()
    return nnf.linear(hidden + residual, w)
