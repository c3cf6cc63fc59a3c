"""Collectives whose transfers are copy-engine DMAs (cudaMemcpyAsync into the peers' symmetric inboxes), pipelined.

No SM moves a byte across the link. Each rank cuts what it owes every peer into chunks (halving towards a last one
of TAIL_BYTES, or of about PKROOF_CE_CHUNK bytes) and pushes them, chunk by chunk, into slot `rank` of the peer's
inbox on that peer's copy stream; after each chunk a signal stream (waiting on the copy streams' events, so the next
DMA starts at once) raises READY on the peers.
The calling stream waits for each peer's chunk and finishes it locally (one add per peer, or a copy out of
the inbox) while the next chunks are still on the link, so only the last chunk's local work is exposed.
Once every chunk from a peer is consumed, FREE tells the peer its slot may be overwritten; FREE starts with
one credit, so a call never waits for the call before it on the same rank.

The first versions (measured on 2×H200 on 2026-11-30: 52–82% over the model at 64 MiB) pushed everything,
then did all the local work behind a barrier, with extra own-slot copies and an fp32 intermediate.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager

import torch

from .settings import setting
from .symm import side_stream, workspace

CE_READY, CE_FREE = 6, 7  # point-to-point event slots (kernels/fused.py uses 0-5; symm.EVENT_SLOTS = 8)
# chunks per peer: at most MAX_CHUNKS of about PKROOF_CE_CHUNK bytes, or halving from at most MAX_CHUNK_BYTES down to
# a last one of TAIL_BYTES (chunk_bounds says which, from PKROOF_CE_SCHEDULE)
MAX_CHUNKS = 16
TAIL_BYTES, MAX_CHUNK_BYTES = 4 << 20, 64 << 20


def chunk_bounds(span: int, itemsize: int) -> list[tuple[int, int]]:
    """[lo, hi) element ranges cut at multiples of 64 elements, sized by PKROOF_CE_SCHEDULE (and PKROOF_CE_CHUNK),
    read now."""
    # "equal": chunks of about PKROOF_CE_CHUNK bytes (at most MAX_CHUNKS). "halving": the last chunk TAIL_BYTES, each
    # earlier one twice the next up to MAX_CHUNK_BYTES, the first whatever is left: few chunks (each costs the
    # pipeline a DMA boundary, ~2.75 µs on 2xH200) and a small last one (its local work is the only part not hidden
    # behind a DMA). At 256 MiB on 2xH200, DMAs and flags alone (no local work) took 415.6 µs in 16 chunks of 8 MiB,
    # 376.5 in 2 of 64 MiB (reduce-scatter), while with the local work 64 MiB chunks were the slowest (442.2 against
    # 410.4 with 16 MiB): benchmarks/kernels/data/2026-11-30-gemm-rates/gemm-rates-ce-pipeline/ce-sweep.log.
    # Halving against equal 16 MiB chunks, ce-sm µs (probe-rates-1GiB-halving/ce-sweep.log beside it): faster in 11
    # of 12 cases, all-reduce 793.4 vs 823.2 at 256 MiB and 2936.9 vs 2962.1 at 1 GiB; slower only for the all-gather
    # at 64 MiB (142.8 vs 128.5, 4 chunks against 2 of 16 MiB).
    if setting("PKROOF_CE_SCHEDULE") == "halving":
        return _halving_bounds(span, itemsize)
    # per peer and chunk; 16 MiB (the default) was best or within 3% of it for all four at 64 MiB on 2xH200 (4, 8,
    # 16 MiB swept: benchmarks/kernels/data/2026-11-30-variants/h200x2-sweeps.log)
    chunk_bytes = setting("PKROOF_CE_CHUNK")
    n = max(1, min(MAX_CHUNKS, -(-span * itemsize // chunk_bytes)))
    step = -(-span // n)
    step = max(64, -(-step // 64) * 64)
    return [(lo, min(lo + step, span)) for lo in range(0, span, step)]


def _halving_bounds(span: int, itemsize: int) -> list[tuple[int, int]]:
    size = max(64, TAIL_BYTES // itemsize // 64 * 64)
    most = max(size, MAX_CHUNK_BYTES // itemsize // 64 * 64)
    lengths, left = [], span  # last chunk first
    while left > 0:
        lengths.append(min(size, left))
        left -= lengths[-1]
        size = min(2 * size, most)
    bounds, lo = [], 0
    for length in reversed(lengths):
        bounds.append((lo, lo + length))
        lo += length
    return bounds


def copy_stream_index(chunk: int, peer: int, lanes: int, per_lane: int) -> int:
    """Which of Streams' copy streams carries chunk `chunk`'s DMA to the `peer`-th peer: `per_lane` per lane
    (PKROOF_CE_STREAMS), the chunks alternating over a lane's; lane `peer` of `lanes` (one lane: every peer on it)."""
    return (chunk % per_lane) * lanes + peer % lanes


class Streams:
    """The calling stream, copy streams for the DMAs and a signal stream for the READY raises. The copy streams
    are PKROOF_CE_STREAMS per lane, a lane per peer (PKROOF_CE_PEER_STREAMS) or one (copy_stream_index); both read
    when a call makes its Streams."""

    def __init__(self, peers: int = 1) -> None:
        self.main = torch.cuda.current_stream()
        # a lane of copy streams per peer: each peer's DMAs queue behind that peer's alone, so beyond 2 ranks the copy
        # engine's α of one peer's DMA runs under the others' transfers (chunks per peer cost α each: the model
        # charges peers side by side, rooflines/costs.py). On one lane (PKROOF_CE_PEER_STREAMS=0) the P − 1 DMAs of
        # every chunk start one after another. At 2 ranks the two are the same; beyond, nothing is measured (2 GPUs
        # only).
        self.lanes = max(1, peers) if setting("PKROOF_CE_PEER_STREAMS") != "0" else 1
        # copy streams the chunks alternate over. On one stream a DMA starts only once the one before it has
        # finished, so each chunk boundary leaves the link idle for the copy engine's α; on two, the next chunk's DMA
        # is already under way. Local DMAs on one H200 (benchmarks/kernels/2026-12-01-one-gpu-h200.md): 128 MiB in 16
        # chunks
        # took 28.2 µs more than one copy on one stream, 7.5 µs more on two. Not yet measured over NVLink, so one
        # stream stays the default.
        self.per_lane = setting("PKROOF_CE_STREAMS")
        count = self.per_lane * self.lanes
        self.copies = [side_stream(0), *(side_stream(2 + i) for i in range(count - 1))]
        self.signal = side_stream(1)
        for stream in (*self.copies, self.signal):
            stream.wait_stream(self.main)

    def _copy_stream(self, chunk: int, peer: int) -> torch.cuda.Stream:
        return self.copies[copy_stream_index(chunk, peer, self.lanes, self.per_lane)]

    def on_copy(self, chunk: int = 0, peer: int = 0) -> AbstractContextManager:
        """The copy stream of chunk `chunk`'s DMA to the `peer`-th peer (chunks alternate over a lane's streams)."""
        return torch.cuda.stream(self._copy_stream(chunk, peer))

    def copies_after_first(self) -> None:
        """Every other copy stream waits for what the first has been given so far (the peers' credits)."""
        for stream in self.copies[1:]:
            stream.wait_stream(self.copies[0])

    def after_copies(self, chunk: int, fn: Callable[[], None]) -> None:
        """Run fn on the signal stream once chunk `chunk`'s DMAs (and every chunk's before it) have completed."""
        for lane in range(self.lanes):
            done = torch.cuda.Event()
            done.record(self._copy_stream(chunk, lane))
            self.signal.wait_event(done)  # the signal stream runs in chunk order, so READY is raised in chunk order
        with torch.cuda.stream(self.signal):
            fn()

    def main_after_copy_so_far(self) -> None:
        """Hold the calling stream until the work issued on the first copy stream so far has completed."""
        self.main.wait_stream(self.copies[0])

    def join(self) -> None:
        for stream in (*self.copies, self.signal):
            self.main.wait_stream(stream)


def _pipelined(
    name: str,
    sources: dict[int, torch.Tensor],
    consume: Callable[[int, int, int, torch.Tensor, bool], None],
    meanwhile: Callable[[], None] | None = None,
) -> None:
    """Push sources[p] (equal sizes) to every peer p by chunks; consume(p, lo, hi, rows, first) finishes elements
    [lo, hi) of peer p's data (rows: its inbox slice) as soon as they have arrived; `first` marks the first peer
    consumed for that chunk. meanwhile() runs on the calling stream while the first chunks are on the link (work
    issued before the call would hold the DMAs back: the copy stream starts after the calling stream's work)."""
    ws = workspace()
    if not sources:  # one rank: nothing to send or receive
        if meanwhile is not None:
            meanwhile()
        return
    data = {p: t.reshape(-1) for p, t in sources.items()}
    span, dtype = next(iter(data.values())).numel(), next(iter(data.values())).dtype
    numel = ws.world * span
    inbox, _ = ws.buffer(name, numel, dtype)
    to = [(ws.rank + step) % ws.world for step in range(1, ws.world)]  # every rank starts with a different peer
    frm = [(ws.rank - step) % ws.world for step in range(1, ws.world)]  # the order the peers push to this rank
    bounds = chunk_bounds(span, inbox.element_size())
    streams = Streams(len(to))
    with streams.on_copy():
        slots = {p: ws.peer_view(name, numel, dtype, p)[ws.rank * span : (ws.rank + 1) * span] for p in to}
        for p in to:
            ws.wait(CE_FREE, p, credit=1)
    streams.copies_after_first()
    if meanwhile is not None:
        # meanwhile's work only once the peers' credits are in: issued at the same moment as the credit waits
        # (one-CTA kernels), its grid went first and the DMAs started after it when calls ran back to back
        # (all-gather at 1 GiB on 2xH200: 1476.4 µs a call alone, 1641.8 three in a row; 1431.6 with no local
        # work: benchmarks/kernels/data/2026-11-30-large-collectives/ce-local-work-and-references/ce-calls.log)
        streams.main_after_copy_so_far()
    for chunk, (lo, hi) in enumerate(bounds):
        for i, p in enumerate(to):
            with streams.on_copy(chunk, i):
                slots[p][lo:hi].copy_(data[p][lo:hi])
        streams.after_copies(chunk, lambda: _raise(CE_READY, to))
    if meanwhile is not None:
        meanwhile()
    rows = inbox.view(ws.world, span)
    for lo, hi in bounds:
        for i, p in enumerate(frm):
            ws.wait(CE_READY, p)
            consume(p, lo, hi, rows[p, lo:hi], i == 0)
    _raise(CE_FREE, frm)
    streams.join()


def _raise(event: int, peers: list[int]) -> None:
    ws = workspace()
    for p in peers:
        ws.signal(event, p)


def _copy_local(src: torch.Tensor, dst: torch.Tensor, how: str) -> None:
    """dst = src by `how` (PKROOF_CE_LOCAL_COPY): "sm" or "dma"."""
    if how == "sm":
        torch.mul(src, 1, out=dst)  # an SM kernel (exact: x · 1 = x), not a DMA
    else:
        dst.copy_(src)


def _gather(name: str, sources: dict[int, torch.Tensor], own: torch.Tensor) -> torch.Tensor:
    """Rows [world, span]: row p is what peer p sent this rank, row `rank` is `own`."""
    ws = workspace()
    out = torch.empty(ws.world, own.numel(), dtype=own.dtype, device=own.device)
    # how the own row and each landed chunk are copied out of the inbox: "sm" (an elementwise kernel, leaving the copy
    # engines to the link) or "dma" (Tensor.copy_, itself a copy-engine transfer). At 64 MiB on 2xH200, sm against
    # dma: all-gather 171.3 vs 185.9 µs, all-to-all 185.5 vs 188.5 µs
    # (benchmarks/kernels/data/2026-11-30-ceilings/bidir-ceiling-and-sweeps/sweeps.log)
    how = setting("PKROOF_CE_LOCAL_COPY")

    def copy_out(p: int, lo: int, hi: int, rows: torch.Tensor, first: bool) -> None:
        _copy_local(rows, out[p, lo:hi], how)

    # the own row is copied while the DMAs run: issued before them, it held them back 18 µs at 64 MiB on 2xH200
    # (benchmarks/kernels/data/2026-11-30-ceilings/collectives-256MiB-ce-timeline/ce-timeline-64MiB.log)
    _pipelined(name, sources, copy_out, meanwhile=lambda: _copy_local(own.reshape(-1), out[ws.rank], how))
    return out


def _reduce(name: str, sources: dict[int, torch.Tensor], own: torch.Tensor) -> torch.Tensor:
    """own + what every peer sent, summed chunk by chunk as the chunks arrive (bf16 adds round after each peer)."""
    own = own.reshape(-1)
    out = torch.empty_like(own)
    if not sources:  # one rank: the sum is its own
        return out.copy_(own)

    def add(p: int, lo: int, hi: int, rows: torch.Tensor, first: bool) -> None:
        if first:
            torch.add(own[lo:hi], rows, out=out[lo:hi])
        else:
            out[lo:hi].add_(rows)

    _pipelined(name, sources, add)
    return out


def _peers() -> list[int]:
    ws = workspace()
    return [p for p in range(ws.world) if p != ws.rank]


def all_gather_ce(shard):
    return _gather("ce-all-gather", dict.fromkeys(_peers(), shard), shard).view(-1)


def all_to_all_ce(x):
    chunks = x.reshape(workspace().world, -1)
    return _gather("ce-all-to-all", {p: chunks[p] for p in _peers()}, chunks[workspace().rank]).view(-1)


def reduce_scatter_ce(x):
    chunks = x.reshape(workspace().world, -1)
    return _reduce("ce-reduce-scatter", {p: chunks[p] for p in _peers()}, chunks[workspace().rank])


def all_reduce_ce(x):
    return _reduce("ce-all-reduce", dict.fromkeys(_peers(), x), x).view_as(x)
