"""Collectives whose transfers are copy-engine DMAs (cudaMemcpyAsync into the peers' symmetric inboxes).

No SM moves a byte across the link: each rank pushes its data into slot `rank` of every peer's inbox, a
one-CTA barrier waits until every peer's pushes into this rank are complete (stream order), then local
work finishes the collective, and a second barrier frees the inboxes for the next call. The local step
(a copy or a sum out of the inbox) is not overlapped with the transfers: these are the copy engine's
simple, SM-free baseline, worth it for large messages only.
"""

from __future__ import annotations

import torch

from .declare import declare
from .symm import Workspace, workspace


def _push(name: str, slots: list[torch.Tensor]) -> tuple[torch.Tensor, Workspace]:
    """slots[p] goes to slot `rank` of rank p's inbox `name` (world × span elements); returns this rank's
    inbox as [world, span] after every peer's push into it is complete."""
    ws = workspace()
    span = slots[0].numel()
    numel = ws.world * span
    for p, data in enumerate(slots):
        target = ws.peer_view(name, numel, data.dtype, p)
        target[ws.rank * span : (ws.rank + 1) * span].copy_(data.reshape(-1))  # own slot: a local copy
    ws.barrier()
    inbox, _ = ws.buffer(name, numel, slots[0].dtype)
    return inbox.view(ws.world, span), ws


def _sum(rows: torch.Tensor) -> torch.Tensor:
    return rows.sum(dim=0, dtype=torch.float32).to(rows.dtype)


@declare(mechanism="copy-engine", schedule="serial", comm_sms=0)
def all_gather_ce(shard):
    world = workspace().world
    inbox, ws = _push("ce-all-gather", [shard] * world)
    out = inbox.reshape(-1).clone()
    ws.barrier()
    return out


@declare(mechanism="copy-engine", schedule="serial", comm_sms=0)
def all_to_all_ce(x):
    world = workspace().world
    inbox, ws = _push("ce-all-to-all", list(x.reshape(world, -1)))
    out = inbox.reshape(-1).clone()
    ws.barrier()
    return out


@declare(mechanism="copy-engine", schedule="serial", comm_sms=0)
def reduce_scatter_ce(x):
    world = workspace().world
    inbox, ws = _push("ce-reduce-scatter", list(x.reshape(world, -1)))
    out = _sum(inbox)
    ws.barrier()
    return out


@declare(mechanism="copy-engine", schedule="serial", comm_sms=0)
def all_reduce_ce(x):
    world = workspace().world
    inbox, ws = _push("ce-all-reduce", [x] * world)
    out = _sum(inbox).view_as(x)
    ws.barrier()
    return out
