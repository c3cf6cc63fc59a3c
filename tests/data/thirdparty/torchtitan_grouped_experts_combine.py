# From pytorch/torchtitan torchtitan/models/moe/moe.py::GroupedExperts (w1, w2, w3 as nn.Parameter [experts, ...],
# _run_experts_for_loop) and torchtitan/distributed/expert_parallel.py::ExpertParallel._token_combine (the reverse
# all_to_all_single with the dispatch's uneven splits swapped). The input is what _token_dispatch delivered: rows
# ordered by source rank, then local expert. Fixed routing: every rank sent 1/2 of its rows to the last expert, 1/4
# to the one before, and the other 1/4 evenly over the remaining experts (the last rank's experts run the most).
import torch
import torch.distributed as dist
import torch.nn.functional as nnf
from torch import nn


def inputs(rank, world_size, *, seed, device, rows=64, hidden=64, ffn=128, experts=4):
    if experts % world_size or experts < 3 or rows % (4 * (experts - 2)):
        raise ValueError(f"rows={rows}, experts={experts} do not fit the routing over {world_size} ranks")
    meta = torch.device(device).type == "meta"
    g = None if meta else torch.Generator(device=device).manual_seed(seed * 1000 + rank)
    per_expert = [rows // (4 * (experts - 2))] * (experts - 2) + [rows // 4, rows // 2]  # what each source sent
    held = experts // world_size
    mine = per_expert[rank * held : (rank + 1) * held]
    counts = torch.tensor(mine * world_size, dtype=torch.int64, device=device)  # [src][local expert]
    sent = [sum(per_expert[d * held : (d + 1) * held]) for d in range(world_size)]
    routed = torch.randn(world_size * sum(mine), hidden, generator=g, device=device, dtype=torch.bfloat16)
    grouped = nn.Module()
    for name, shape in (("w1", (held, ffn, hidden)), ("w2", (held, hidden, ffn)), ("w3", (held, ffn, hidden))):
        w = 0.05 * torch.randn(shape, generator=g, device=device, dtype=torch.bfloat16)
        setattr(grouped, name, nn.Parameter(w, requires_grad=False))
    return routed, counts, torch.tensor(sent, dtype=torch.int64, device=device), grouped


def reference(routed, counts, sent, grouped):
    n, held = dist.get_world_size(), grouped.w1.shape[0]
    sizes = counts.tolist()
    chunks, outs = routed.split(sizes), [None] * len(sizes)
    for j in range(held):  # permute to expert-major, run the expert, un-permute
        idx = [s * held + j for s in range(n)]
        x = torch.cat([chunks[i] for i in idx])
        h = nnf.silu(torch.matmul(x, grouped.w1[j].t())) * torch.matmul(x, grouped.w3[j].t())
        y = torch.matmul(h, grouped.w2[j].t())
        for i, part in zip(idx, y.split([sizes[i] for i in idx]), strict=True):
            outs[i] = part
    held_from = [sum(sizes[s * held : (s + 1) * held]) for s in range(n)]
    back = routed.new_empty(int(sent.sum()), routed.shape[1])
    dist.all_to_all_single(back, torch.cat(outs), sent.tolist(), held_from)
    return back
