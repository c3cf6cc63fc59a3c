"""Collectives whose transfers are copy-engine DMAs (cudaMemcpyAsync into the peers' symmetric inboxes).

No SM moves a byte across the link: each rank pushes its data into slot `rank` of every peer's inbox, a
one-CTA barrier waits until every peer's pushes into this rank are complete (stream order), then local
work finishes the collective (copies out of the inbox, or one add per peer), and a second barrier frees the
inboxes for the next call. The local step is not overlapped with the transfers: these are the copy engine's
simple, SM-free baseline, worth it for large messages only.

The versions measured on 2×H200 on 2026-11-30 also copied the rank's own slot into its inbox and reduced
through an fp32 intermediate (52–82% over the model at 64 MiB); these do neither and are not yet measured.
"""

from __future__ import annotations

import torch

from .declare import declare
from .symm import Workspace, workspace


def _push(name: str, slots: dict[int, torch.Tensor]) -> tuple[torch.Tensor, Workspace]:
    """slots[p] (one per peer) goes to slot `rank` of rank p's inbox `name` (world × span elements); returns this
    rank's inbox as [world, span] once every peer's pushes into it are complete (its own row is unused)."""
    ws = workspace()
    first = next(iter(slots.values()))
    span, dtype = first.numel(), first.dtype
    numel = ws.world * span
    inbox, _ = ws.buffer(name, numel, dtype)
    for p, data in slots.items():
        ws.peer_view(name, numel, dtype, p)[ws.rank * span : (ws.rank + 1) * span].copy_(data.reshape(-1))
    ws.barrier()
    return inbox.view(ws.world, span), ws


def _peers() -> list[int]:
    ws = workspace()
    return [p for p in range(ws.world) if p != ws.rank]


def _sum_into(own: torch.Tensor, inbox: torch.Tensor, peers: list[int]) -> torch.Tensor:
    """own + every peer's row of the inbox, one pass per peer (for two ranks: one kernel reading both, writing
    once); bf16 adds round after each peer."""
    out = torch.add(own, inbox[peers[0]].view_as(own))
    for p in peers[1:]:
        out.add_(inbox[p].view_as(own))
    return out


@declare(mechanism="copy-engine", schedule="serial", comm_sms=0)
def all_gather_ce(shard):
    peers = _peers()
    inbox, ws = _push("ce-all-gather", dict.fromkeys(peers, shard))
    rows = torch.empty(ws.world, shard.numel(), dtype=shard.dtype, device=shard.device)
    for p in peers:
        rows[p].copy_(inbox[p])
    rows[ws.rank].copy_(shard.reshape(-1))
    ws.barrier()  # the inbox is free for the next call
    return rows.view(-1)


@declare(mechanism="copy-engine", schedule="serial", comm_sms=0)
def all_to_all_ce(x):
    peers = _peers()
    chunks = x.reshape(len(peers) + 1, -1)
    inbox, ws = _push("ce-all-to-all", {p: chunks[p] for p in peers})
    rows = torch.empty_like(chunks)
    for p in peers:
        rows[p].copy_(inbox[p])
    rows[ws.rank].copy_(chunks[ws.rank])
    ws.barrier()
    return rows.view(-1)


@declare(mechanism="copy-engine", schedule="serial", comm_sms=0)
def reduce_scatter_ce(x):
    peers = _peers()
    chunks = x.reshape(len(peers) + 1, -1)
    inbox, ws = _push("ce-reduce-scatter", {p: chunks[p] for p in peers})
    out = _sum_into(chunks[ws.rank], inbox, peers)
    ws.barrier()
    return out


@declare(mechanism="copy-engine", schedule="serial", comm_sms=0)
def all_reduce_ce(x):
    peers = _peers()
    flat = x.reshape(-1)
    inbox, ws = _push("ce-all-reduce", dict.fromkeys(peers, flat))
    out = _sum_into(flat, inbox, peers)
    ws.barrier()
    return out.view_as(x)
