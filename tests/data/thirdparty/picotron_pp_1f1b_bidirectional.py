# From huggingface/picotron picotron/pipeline_parallel/pp_communications.py::bidirectional_pipeline_communicate
# (commit 5809434): the 1F1B steady state of a 2-stage pipeline. Stage 0 runs the forward of its next micro-batch and
# does send_fwd_recv_bwd; stage 1 runs the input-gradient GEMM of its micro-batch and does send_bwd_recv_fwd; each is
# one batch_isend_irecv of one send and one receive.
import torch
import torch.distributed as dist
import torch.nn.functional as nnf


def inputs(rank, world_size, *, seed, device, tokens=64, hidden=128):
    if world_size != 2:
        raise ValueError(f"this is a pipeline of two stages: it needs 2 ranks, got {world_size}")
    g = None if torch.device(device).type == "meta" else torch.Generator(device=device).manual_seed(seed * 1000 + rank)
    x = torch.randn(tokens, hidden, generator=g, device=device, dtype=torch.bfloat16)  # stage 0: input; 1: output grad
    w = 0.05 * torch.randn(hidden, hidden, generator=g, device=device, dtype=torch.bfloat16)
    return x, w


def reference(x, w):
    rank = dist.get_rank()
    send = nnf.linear(x, w) if rank == 0 else torch.matmul(x, w)  # activation to stage 1, or gradient to stage 0
    recv = torch.empty_like(send)
    peer = 1 - rank
    for req in dist.batch_isend_irecv([dist.P2POp(dist.isend, send, peer), dist.P2POp(dist.irecv, recv, peer)]):
        req.wait()
    return recv
