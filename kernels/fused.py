"""Tensor-parallel GEMMs fused with their communication, over symmetric memory (cuBLAS does the math).

Hand-offs between ranks are point-to-point events (kernels/symm.py): READY says "my slot in your inbox is
written", FREE says "I have consumed what you put in my inbox; you may overwrite it".
FREE starts with one credit, so the first call never waits for it. Every function waits for its side stream
before returning, so tensors it used there cannot be recycled early.

- all-gather + GEMM (ce-overlap): the copy engine pushes this rank's A shard to every peer while the SMs
  multiply the local shard; each peer's shard is multiplied as soon as it has arrived.
- GEMM + reduce-scatter, ce-overlap: the partial products owed to peers are computed first, each pushed by
  the copy engine while the next is computed; the local chunk last; then a local sum.
- GEMM + reduce-scatter, intra-SM: the GEMM's epilogue stores each peer's partial product straight into the
  peer's inbox over NVLink (cuBLAS writing through the peer mapping), so the stores of one tile overlap the
  main loop of the next on the same SMs.
- GEMM + all-reduce, inter-SM: kernels/inter_sm.py (a persistent Triton GEMM beside dedicated communication
  CTAs; cuBLAS cannot be kept off SMs: it did not keep to torch's SM carve-out, benchmarks/kernels/carveout_check.py).
- GEMM + all-reduce, ce-overlap: for small outputs (one_shot()), one-shot: each row block of the partial
  product (one_shot_blocks()) is pushed whole to every peer by the copy engine while the next block is computed,
  then every rank sums the P partials (one exchange: it took 1.8-4.5 µs less than the two-shot at 16-512 KiB on 2xH200,
  benchmarks/kernels/2026-11-30-fixed-costs-h200x2.md). Otherwise two-shot: GEMM + reduce-scatter as above, then
  pkroof's push all-gather of the reduced rows (a one-shot's P − 1 full copies per rank cost more link time).
"""

from __future__ import annotations

import itertools
from contextlib import AbstractContextManager

import torch

from .settings import setting
from .symm import side_stream, workspace
from .symm_collectives import ALL_GATHER, exchange

AGG_READY, AGG_FREE, GRS_READY, GRS_FREE, GAR_READY, GAR_FREE = 0, 1, 2, 3, 4, 5
ONE_SHOT_MAX_BYTES = 4 << 20  # gemm_all_reduce_ce: one exchange up to here (latency-bound), two-shot above
ONE_SHOT_MAX_EXTRA_BYTES = 512 << 10  # ... and while it puts at most this much more on a rank's link than two-shot


class Side:
    """The calling stream and a side stream for the copy engine's work. `after_main()` issues onto the side stream
    behind everything given to the calling stream so far, `on_side()` just behind the side stream's own work (after
    an `after_main()`); `join()` holds the calling stream until the side stream is done (so nothing used there is
    recycled early), if it was used: waiting on a side stream that this call never forked onto is an error while a
    CUDA graph is being captured."""

    def __init__(self) -> None:
        self.main, self.stream, self.forked = torch.cuda.current_stream(), side_stream(), False

    def after_main(self) -> AbstractContextManager:
        self.stream.wait_stream(self.main)
        self.forked = True
        return torch.cuda.stream(self.stream)

    def on_side(self) -> AbstractContextManager:
        assert self.forked, "on_side() before after_main(): the side stream would not follow this call"
        return torch.cuda.stream(self.stream)

    def join(self) -> None:
        if self.forked:
            self.main.wait_stream(self.stream)


def one_shot(output_bytes: int, world: int) -> bool:
    """Whether gemm_all_reduce_ce exchanges whole partial products (one-shot) rather than reduce-scatter then
    all-gather. One-shot sends (P − 1)·S per rank, two-shot 2·(P − 1)/P·S: the same at 2 ranks, (P − 1)(P − 2)/P·S
    more beyond. It saves a second exchange (1.8-4.5 µs on 2xH200); 512 KiB more at ~370 GB/s costs ~1.4 µs."""
    extra = output_bytes * (world - 1) * (world - 2) / world
    return output_bytes <= ONE_SHOT_MAX_BYTES and extra <= ONE_SHOT_MAX_EXTRA_BYTES


def all_gather_gemm_ce(a_shard, b):
    """C [P·m_local, n] = all_gather(A_shard) · B; A_shard [m_local, k], B [k, n]."""
    ws = workspace()
    world, rank = ws.world, ws.rank
    m_local, k = a_shard.shape
    a_shard = a_shard.contiguous()
    span = m_local * k
    out = torch.empty(world * m_local, b.shape[1], dtype=a_shard.dtype, device=a_shard.device)
    side = Side()
    with side.after_main():
        for step in range(1, world):
            peer = (rank + step) % world
            ws.wait(AGG_FREE, peer, credit=1)
            target = ws.peer_view("ag-gemm-inbox", world * span, a_shard.dtype, peer)
            target[rank * span : (rank + 1) * span].copy_(a_shard.view(-1))
            ws.signal(AGG_READY, peer)
    torch.matmul(a_shard, b, out=out[rank * m_local : (rank + 1) * m_local])
    inbox, _ = ws.buffer("ag-gemm-inbox", world * span, a_shard.dtype)
    for step in range(1, world):
        peer = (rank - step) % world  # the order the shards were sent in
        ws.wait(AGG_READY, peer)
        shard = inbox[peer * span : (peer + 1) * span].view(m_local, k)
        torch.matmul(shard, b, out=out[peer * m_local : (peer + 1) * m_local])
        ws.signal(AGG_FREE, peer)
    side.join()
    return out


def _gemm_reduce_scatter(a, b, *, epilogue_push: bool):
    ws = workspace()
    world, rank = ws.world, ws.rank
    m, n = a.shape[0], b.shape[1]
    if m % world:
        raise ValueError(f"gemm-reduce-scatter: {m} rows do not split over {world} ranks")
    rows = m // world
    span = rows * n
    name = "gemm-rs-inbox"
    side = Side()
    partial = torch.empty(world, rows, n, dtype=a.dtype, device=a.device)
    for step in range(1, world):
        peer = (rank + step) % world
        slot = ws.peer_view(name, world * span, a.dtype, peer)[rank * span : (rank + 1) * span].view(rows, n)
        mine = a[peer * rows : (peer + 1) * rows]
        if epilogue_push:
            ws.wait(GRS_FREE, peer, credit=1)
            torch.matmul(mine, b, out=slot)
            ws.signal(GRS_READY, peer)
        else:
            torch.matmul(mine, b, out=partial[peer])
            with side.after_main():
                ws.wait(GRS_FREE, peer, credit=1)
                slot.copy_(partial[peer])
                ws.signal(GRS_READY, peer)
    torch.matmul(a[rank * rows : (rank + 1) * rows], b, out=partial[rank])
    inbox, _ = ws.buffer(name, world * span, a.dtype)
    out = partial[rank]
    for step in range(1, world):
        peer = (rank - step) % world
        ws.wait(GRS_READY, peer)
        out = out + inbox[peer * span : (peer + 1) * span].view(rows, n)  # bf16 add, computed in fp32
        ws.signal(GRS_FREE, peer)
    side.join()
    return out


def gemm_reduce_scatter_ce(a, b):
    """C_shard [m/P, n] = this rank's rows of sum_p A_p · B_p; A [m, k_local], B [k_local, n]."""
    return _gemm_reduce_scatter(a, b, epilogue_push=False)


def gemm_reduce_scatter_epilogue(a, b):
    """As gemm_reduce_scatter_ce, but the GEMM writes peers' rows straight into their inboxes."""
    return _gemm_reduce_scatter(a, b, epilogue_push=True)


def one_shot_blocks(world: int) -> int:
    """Row blocks of the one-shot GEMM + all-reduce's pipeline: each block is pushed to every peer as soon as it is
    computed, one DMA per peer, and DMAs on the copy stream start one after another, each paying the copy engine's
    α (2.75-2.88 µs on 2xH200). Two blocks at 2 ranks (the second's GEMM runs behind the first's DMA; measured
    there: benchmarks/kernels/2026-11-30-fixed-costs-h200x2.md). One beyond: a block costs P − 1 more DMAs, about 19 µs
    at 8 ranks, far more than the GEMMs of the outputs the one-shot path takes there (one_shot(): ≤ 97 KiB)."""
    return 2 if world == 2 else 1


def _row_blocks(m: int, blocks: int) -> list[tuple[int, int]]:
    edges = [m * i // blocks for i in range(blocks + 1)]
    return [(lo, hi) for lo, hi in itertools.pairwise(edges) if hi > lo]


def _gemm_all_reduce_one_shot(a, b):
    ws = workspace()
    world, rank = ws.world, ws.rank
    m, n = a.shape[0], b.shape[1]
    span = m * n
    name = "gemm-ar-inbox"
    side = Side()
    partial = torch.empty(m, n, dtype=a.dtype, device=a.device)
    peers = [(rank + step) % world for step in range(1, world)]
    with side.after_main():
        for peer in peers:  # my slot in every peer's inbox is free: they summed the last call's
            ws.wait(GAR_FREE, peer, credit=1)
    for lo, hi in _row_blocks(m, one_shot_blocks(world)):
        torch.matmul(a[lo:hi], b, out=partial[lo:hi])
        with side.after_main():
            for peer in peers:
                slot = ws.peer_view(name, world * span, a.dtype, peer)[rank * span + lo * n : rank * span + hi * n]
                slot.copy_(partial[lo:hi].reshape(-1))
    with side.on_side():
        for peer in peers:
            ws.signal(GAR_READY, peer)
    inbox, _ = ws.buffer(name, world * span, a.dtype)
    for peer in reversed(peers):
        ws.wait(GAR_READY, peer)
    parts = [partial if r == rank else inbox[r * span : (r + 1) * span].view(m, n) for r in range(world)]
    if world == 2:
        out = parts[0] + parts[1]  # one rounding, the same on both ranks
    else:  # in rank order, in fp32: every rank gets the same bits
        acc = parts[0].to(torch.float32, copy=True)  # a copy even of fp32: never sum into an inbox or partial
        for part in parts[1:]:
            acc += part
        out = acc.to(a.dtype)
    for peer in reversed(peers):
        ws.signal(GAR_FREE, peer)
    side.join()
    return out


def gemm_all_reduce_ce(a, b):
    """C [m, n] = sum_p A_p · B_p on every rank: one-shot (copy-engine overlap, then a local sum) where
    one_shot() says so, else GEMM + reduce-scatter (copy-engine overlap) + all-gather."""
    if one_shot(a.shape[0] * b.shape[1] * a.element_size(), workspace().world):
        return _gemm_all_reduce_one_shot(a, b)
    rows = _gemm_reduce_scatter(a, b, epilogue_push=False)
    out = torch.empty(a.shape[0], b.shape[1], dtype=a.dtype, device=a.device)
    exchange(ALL_GATHER, rows.reshape(-1), push=True, ctas=setting("PKROOF_CTAS_STORE"), out=out.view(-1))
    return out
