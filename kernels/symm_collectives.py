"""Collectives over symmetric memory, one Triton kernel for all of them, generic in the world size.

Callers hold ordinary tensors, so one side of every transfer goes through a symmetric buffer:

- pull (sm-load): each rank *stages* its input into its own symmetric buffer, then *consumes* by loading the
  peers' staged tiles over NVLink;
- push (sm-store): each rank *stages* by storing its tiles straight into the peers' symmetric inboxes, then
  *consumes* its own inbox locally.

Work is cut into tiles of SUB × BLOCK elements (BLOCK: 16-byte accesses for every thread; SUB: up to 16
blocks per hand-off); CTA c owns tiles c, c + grid, ... on every rank, and the same CTA on each rank hands its
tiles over through the flag slot (c, rank): stage tile k+1, signal it, wait for the peers' tile k, consume
it, so the wait for one tile overlaps the staging of the next. Symmetric slots are padded to 64 elements and
peer pointers declared 16-byte aligned: without that Triton emitted scalar 2-byte loads and stores, 2-4×
slower (benchmarks/kernels/2026-11-30-variants-h200x2.md). Staging buffers are
double-buffered by call parity (a per-CTA counter), so a fast rank's next call never overwrites a tile a slow
peer is still reading: writing half h again needs the peers to have signalled in the call in between, which
they do only after finishing the call that read half h.

Index spaces (C = numel / world, the chunk; x is this rank's input):
  all-reduce   tiles over N       out[i]         = sum_p x_p[i]
  all-gather   tiles over C       out[p*C + i]   = x_p[i]
  reduce-scat. tiles over C       out[i]         = sum_p x_p[rank*C + i]
  all-to-all   tiles over C       out[p*C + i]   = x_p[rank*C + i]
Sums accumulate in fp32.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.distributed as dist
import triton
import triton.language as tl

from .settings import setting
from .symm import MAX_CTAS, signal_peers, wait_peers, workspace

_MAX = tl.constexpr(MAX_CTAS)  # as Triton reads globals inside kernels

ALL_REDUCE, ALL_GATHER, REDUCE_SCATTER, ALL_TO_ALL = 0, 1, 2, 3
_NAMES = {ALL_REDUCE: "all-reduce", ALL_GATHER: "all-gather", REDUCE_SCATTER: "reduce-scatter", ALL_TO_ALL: "a2a"}


@triton.jit
def _buffer(table, p, ty):
    """Rank p's symmetric buffer as a pointer to `ty`; symmetric allocations are at least 16-byte aligned, and
    saying so lets Triton issue 16-byte accesses."""
    return tl.multiple_of(tl.load(table + p).to(tl.pointer_type(ty)), 16)


@triton.jit
def _src_offset(KIND: tl.constexpr, PUSH: tl.constexpr, p, rank, slot):
    """Where, in rank p's staging buffer (pull) or in my inbox slot p (push), my tile of p's data sits."""
    if PUSH:
        return p * slot
    elif (KIND == 2) | (KIND == 3):
        return rank * slot  # pull: p staged its whole input, a slot per chunk; my chunk of it
    else:
        return 0


@triton.jit
def _stage(x, stage_table, half, rank, offs, mask, slot, chunk,
           KIND: tl.constexpr, PUSH: tl.constexpr, WORLD: tl.constexpr):  # fmt: skip
    ty = x.dtype.element_ty
    if PUSH:
        for p in tl.static_range(WORLD):
            if p != rank:
                inbox = _buffer(stage_table, p, ty) + half + rank * slot
                if (KIND == 2) | (KIND == 3):
                    tl.store(inbox + offs, tl.load(x + p * chunk + offs, mask=mask), mask=mask)
                else:
                    tl.store(inbox + offs, tl.load(x + offs, mask=mask), mask=mask)
    else:
        mine = _buffer(stage_table, rank, ty) + half
        if (KIND == 2) | (KIND == 3):
            for q in tl.static_range(WORLD):
                if q != rank:
                    tl.store(mine + q * slot + offs, tl.load(x + q * chunk + offs, mask=mask), mask=mask)
        else:
            tl.store(mine + offs, tl.load(x + offs, mask=mask), mask=mask)


TMA_COLS = 256  # a TMA box row: 256 elements (the box's largest dimension); rows of it make a block


@triton.jit
def _tma_complete():
    # every bulk copy this thread issued has completed, and the async proxy's writes are ordered before what
    # follows (the flag's release store): without it a peer could see the flag before the data
    return tl.inline_asm_elementwise(
        "cp.async.bulk.wait_group 0; fence.proxy.async.global; mov.u32 $0, 0;",
        "=r",
        [],
        dtype=tl.int32,
        is_pure=False,
        pack=1,
    )


@triton.jit
def _stage_tma(x, stage_table, half, rank, row0, rows, slot, chunk,
               KIND: tl.constexpr, WORLD: tl.constexpr, ROWS: tl.constexpr):  # fmt: skip
    """Push rows [row0, row0 + ROWS) of this rank's data into every peer's inbox by TMA: a bulk load into shared
    memory, a bulk store to the peer. Only whole rows of TMA_COLS elements; the caller stages the tail."""
    ty = x.dtype.element_ty
    for p in tl.static_range(WORLD):
        if p != rank:
            src = x
            if (KIND == 2) | (KIND == 3):
                src = x + p * chunk
            dst = _buffer(stage_table, p, ty) + half + rank * slot
            s_desc = tl.make_tensor_descriptor(src, shape=[rows, 256], strides=[256, 1], block_shape=[ROWS, 256])
            d_desc = tl.make_tensor_descriptor(dst, shape=[rows, 256], strides=[256, 1], block_shape=[ROWS, 256])
            d_desc.store([row0, 0], s_desc.load([row0, 0]))


@triton.jit
def _consume(x, out, stage_table, half, rank, offs, mask, slot, chunk,
             KIND: tl.constexpr, PUSH: tl.constexpr, WORLD: tl.constexpr):  # fmt: skip
    ty = x.dtype.element_ty
    if PUSH:
        base = _buffer(stage_table, rank, ty) + half
    if (KIND == 0) | (KIND == 2):
        own = x
        if KIND == 2:
            own = x + rank * chunk
        acc = tl.load(own + offs, mask=mask).to(tl.float32)
        for p in tl.static_range(WORLD):
            if p != rank:
                if not PUSH:
                    base = _buffer(stage_table, p, ty) + half
                src = base + _src_offset(KIND, PUSH, p, rank, slot)
                acc += tl.load(src + offs, mask=mask).to(tl.float32)
        tl.store(out + offs, acc.to(ty), mask=mask)
    else:
        own = x
        if KIND == 3:
            own = x + rank * chunk
        tl.store(out + rank * chunk + offs, tl.load(own + offs, mask=mask), mask=mask)
        for p in tl.static_range(WORLD):
            if p != rank:
                if not PUSH:
                    base = _buffer(stage_table, p, ty) + half
                src = base + _src_offset(KIND, PUSH, p, rank, slot)
                tl.store(out + p * chunk + offs, tl.load(src + offs, mask=mask), mask=mask)


@triton.jit
def _stage_tile(x, stage_table, half, rank, tile, lanes, span, slot, chunk, n_tiles,
                KIND: tl.constexpr, PUSH: tl.constexpr, WORLD: tl.constexpr, BLOCK: tl.constexpr,
                SUB: tl.constexpr, TMA: tl.constexpr, PHASE: tl.constexpr):  # fmt: skip
    if TMA:  # whole TMA rows by bulk copies; the last tile also stages the tail (< TMA_COLS elements) by SM stores
        rows = span // 256
        for s in range(SUB):
            row0 = (tile * (SUB * BLOCK) + s * BLOCK) // 256
            if row0 < rows:
                _stage_tma(x, stage_table, half, rank, row0, rows, slot, chunk, KIND, WORLD, BLOCK // 256)
        if tile == n_tiles - 1:
            offs = rows * 256 + lanes
            _stage(x, stage_table, half, rank, offs, offs < span, slot, chunk, KIND, PUSH, WORLD)
        if PHASE == 0:
            _tma_complete()
    else:
        for s in range(SUB):
            offs = tile * (SUB * BLOCK) + s * BLOCK + lanes
            _stage(x, stage_table, half, rank, offs, offs < span, slot, chunk, KIND, PUSH, WORLD)


@triton.jit
def _consume_tile(x, out, stage_table, half, rank, tile, lanes, span, slot, chunk,
                  KIND: tl.constexpr, PUSH: tl.constexpr, WORLD: tl.constexpr, BLOCK: tl.constexpr,
                  SUB: tl.constexpr):  # fmt: skip
    for s in range(SUB):
        offs = tile * (SUB * BLOCK) + s * BLOCK + lanes
        _consume(x, out, stage_table, half, rank, offs, offs < span, slot, chunk, KIND, PUSH, WORLD)


@triton.jit
def _exchange_kernel(
    x, out, stage_table, flag_table, my_flags, epochs, calls, rank, n_tiles, grid, span, slot, chunk, half_size,
    KIND: tl.constexpr, PUSH: tl.constexpr, WORLD: tl.constexpr, BLOCK: tl.constexpr, SUB: tl.constexpr,
    PHASE: tl.constexpr, TMA: tl.constexpr = False,
):  # fmt: skip
    # a tile is SUB blocks of BLOCK elements: one flag hand-off per tile, 16-byte accesses within a block.
    # PHASE 0 is the real thing; 1 (stage only) and 2 (consume only) skip the flags, so the tests can run
    # emulated ranks one after another on one GPU: every rank's phase 1, then every rank's phase 2.
    # TMA (push only): the remote stores are bulk tensor copies instead of SM stores.
    cta = tl.program_id(0)
    first = tl.load(epochs + cta)  # flag values first+1, first+2, ... for this CTA's tiles
    half = (tl.load(calls + cta) % 2) * half_size
    lanes = tl.arange(0, BLOCK)
    if PHASE != 2:
        _stage_tile(x, stage_table, half, rank, cta, lanes, span, slot, chunk, n_tiles,
                    KIND, PUSH, WORLD, BLOCK, SUB, TMA, PHASE)  # fmt: skip
    if PHASE == 0:
        signal_peers(flag_table, cta, rank, first + 1, WORLD)
    k = 0
    for tile in range(cta, n_tiles, grid):
        nxt = tile + grid
        if (nxt < n_tiles) & (PHASE != 2):  # stage the next tile before waiting on this one
            _stage_tile(x, stage_table, half, rank, nxt, lanes, span, slot, chunk, n_tiles,
                        KIND, PUSH, WORLD, BLOCK, SUB, TMA, PHASE)  # fmt: skip
            if PHASE == 0:
                signal_peers(flag_table, cta, rank, first + k + 2, WORLD)
        if PHASE == 0:
            wait_peers(my_flags, cta, rank, first + k + 1, WORLD)
        if PHASE != 1:
            _consume_tile(x, out, stage_table, half, rank, tile, lanes, span, slot, chunk,
                          KIND, PUSH, WORLD, BLOCK, SUB)  # fmt: skip
        k += 1
    if PHASE != 1:  # a call ends after its consume phase
        tl.store(epochs + cta, first + k)
        tl.store(calls + cta, tl.load(calls + cta) + 1)


@triton.jit
def _split_kernel(
    x, out, stage_table, flag_table, my_flags, epochs, calls, rank, n_tiles, grid, span, slot, chunk, half_size,
    KIND: tl.constexpr, PUSH: tl.constexpr, WORLD: tl.constexpr, BLOCK: tl.constexpr, SUB: tl.constexpr,
    PHASE: tl.constexpr, TMA: tl.constexpr = False,
):  # fmt: skip
    # split roles: CTAs [0, grid) only stage (and signal each tile), CTAs [grid, 2 grid) only wait and consume,
    # so no CTA stops pushing to consume. Stager c and consumer grid + c share flag slot c, each with its own
    # epoch and call counter (epochs[c] / calls[c] for the stager, [MAX_CTAS + c] for the consumer): neither
    # can read the other's, which it may already have advanced. Both advance by the same tiles every call,
    # so they agree at every kernel boundary. Stagers have the lower CTA ids and never wait: they are
    # scheduled first and always finish, so consumers cannot starve them.
    pid = tl.program_id(0)
    lanes = tl.arange(0, BLOCK)
    if pid < grid:
        if PHASE != 2:
            first = tl.load(epochs + pid)
            half = (tl.load(calls + pid) % 2) * half_size
            k = 0
            for tile in range(pid, n_tiles, grid):
                _stage_tile(x, stage_table, half, rank, tile, lanes, span, slot, chunk, n_tiles,
                            KIND, PUSH, WORLD, BLOCK, SUB, TMA, PHASE)  # fmt: skip
                if PHASE == 0:
                    signal_peers(flag_table, pid, rank, first + k + 1, WORLD)
                k += 1
            tl.store(epochs + pid, first + k)
            tl.store(calls + pid, tl.load(calls + pid) + 1)
    elif PHASE != 1:
        cta = pid - grid
        first = tl.load(epochs + _MAX + cta)
        half = (tl.load(calls + _MAX + cta) % 2) * half_size
        k = 0
        for tile in range(cta, n_tiles, grid):
            if PHASE == 0:
                wait_peers(my_flags, cta, rank, first + k + 1, WORLD)
            _consume_tile(x, out, stage_table, half, rank, tile, lanes, span, slot, chunk,
                          KIND, PUSH, WORLD, BLOCK, SUB)  # fmt: skip
            k += 1
        tl.store(epochs + _MAX + cta, first + k)
        tl.store(calls + _MAX + cta, tl.load(calls + _MAX + cta) + 1)


def _tiling(span: int, ctas: int, max_block: int | None = None) -> tuple[int, int]:
    """(BLOCK, SUB): blocks of 1024..max_block (default PKROOF_MAX_BLOCK, read now) elements (16-byte accesses for
    every thread), and up to 16 blocks per flag hand-off while every CTA still gets about four tiles to pipeline."""
    per_cta = max(1, span // ctas)
    block = max(1024, min(max_block or setting("PKROOF_MAX_BLOCK"), triton.next_power_of_2(per_cta)))
    sub = max(1, min(16, per_cta // (4 * block)))
    return block, 1 << (sub.bit_length() - 1)  # a power of two


def exchange(
    kind: int,
    x: torch.Tensor,
    *,
    push: bool,
    ctas: int,
    out: torch.Tensor | None = None,
    tma: bool = False,
    split: bool = False,
    group: dist.ProcessGroup | None = None,
) -> torch.Tensor:
    """Run one collective of `kind` on this rank's `x` (read as 1-D) into `out` (a new tensor if None). tma: push by
    TMA bulk copies where the layout allows it (tma_capable), else by SM stores. split: half of the `ctas` CTAs
    stage, the other half consume (_split_kernel), on flags of their own."""
    ws = workspace(group)
    x = x.contiguous()
    layout = Layout.of(kind, x.numel(), ws.world, push)
    if out is not None and (out.numel() != layout.out_numel or not out.is_contiguous()):
        raise ValueError(f"{_NAMES[kind]}: out must be contiguous with {layout.out_numel} elements")
    if layout.chunk % ALIGN:
        padded = exchange(kind, pad_input(kind, x, ws.world), push=push, ctas=ctas, tma=tma, split=split, group=group)
        result = unpad_output(kind, padded, layout)
        return result if out is None else out.copy_(result)
    if out is None:
        out = torch.empty(layout.out_numel, dtype=x.dtype, device=x.device)
    _, table = ws.buffer(f"{_NAMES[kind]}-{'push' if push else 'pull'}", 2 * layout.half_size, x.dtype)
    calls = ws.counter(("exchange", kind, push, x.numel(), x.dtype, split), 2 * MAX_CTAS)  # call parity of the buffer
    tma = tma and tma_capable(layout, x)
    if split:
        flags, flag_table, epochs = ws.split_flags()
    else:
        flags, flag_table, epochs = ws.flags, ws.flag_table, ws.epochs
    launch(layout, x, out, table, flag_table, flags, epochs, calls, ws.rank, ctas=ctas, tma=tma, split=split)
    return out


# Elements per rank's chunk that keep the kernel's 16-byte accesses: Triton specialises an integer argument that is
# a multiple of 16, and with span and chunk not so every load and store of the data path compiled to 2 bytes
# (tests/test_kernels_ptx.py); at 100000004 bytes (25000001 elements a rank) the push kernels ran 4.6-8.7x slower
# than their 64 MiB rate (benchmarks/kernels/2026-11-30-gemm-rates-h200x2.md, §8). Other sizes run on chunks padded to
# it.
ALIGN = 16


def pad_input(kind: int, x: torch.Tensor, world: int) -> torch.Tensor:
    """x (1-D) with every rank's chunk padded to a multiple of ALIGN elements (the padding zeroed)."""
    n = x.numel()
    rows, chunk = (world, n // world) if kind in (REDUCE_SCATTER, ALL_TO_ALL) else (1, n)
    padded = torch.empty(rows, -(-chunk // ALIGN) * ALIGN, dtype=x.dtype, device=x.device)
    padded[:, :chunk].copy_(x.view(rows, chunk))
    padded[:, chunk:].zero_()
    return padded.view(-1)


def unpad_output(kind: int, out: torch.Tensor, layout: Layout) -> torch.Tensor:
    """The collective's output for the unpadded `layout`, from its output on padded chunks."""
    if kind in (ALL_REDUCE, REDUCE_SCATTER):
        return out[: layout.out_numel]  # one chunk: the padding is at its end
    return out.view(layout.world, -1)[:, : layout.chunk].reshape(-1)  # a padded chunk per rank


@dataclass(frozen=True)
class Layout:
    kind: int
    push: bool
    world: int
    span: int  # elements in the tile index space
    chunk: int  # elements of one rank's chunk of the input or output (their stride between ranks)
    slot: int  # span rounded up to 64 elements: the stride between rank slots in symmetric buffers, aligned
    half_size: int  # elements of one parity half of the symmetric buffer (a multiple of 64)
    out_numel: int

    @staticmethod
    def of(kind: int, n: int, world: int, push: bool) -> Layout:
        if kind in (REDUCE_SCATTER, ALL_TO_ALL) and n % world:
            raise ValueError(f"{_NAMES[kind]}: {n} elements do not split over {world} ranks")
        chunk = n // world if kind in (REDUCE_SCATTER, ALL_TO_ALL) else n
        span = n if kind == ALL_REDUCE else chunk
        out_numel = {ALL_REDUCE: n, ALL_GATHER: n * world, REDUCE_SCATTER: chunk, ALL_TO_ALL: n}[kind]
        slot = -(-span // 64) * 64
        # per parity: push inboxes hold a slot per source rank; pull stages hold what the peers read
        half_size = world * slot if push or kind in (REDUCE_SCATTER, ALL_TO_ALL) else slot
        return Layout(kind, push, world, span, chunk, slot, half_size, out_numel)


def tma_capable(layout: Layout, x: torch.Tensor) -> bool:
    """TMA addresses 16-byte aligned rows: the input, and (reduce-scatter, all-to-all) every rank's chunk of it."""
    aligned = x.data_ptr() % 16 == 0
    if layout.kind in (REDUCE_SCATTER, ALL_TO_ALL):
        aligned &= (layout.chunk * x.element_size()) % 16 == 0
    return layout.push and aligned


def _tma_scratch(size: int, alignment: int, stream: int | None) -> torch.Tensor:
    return torch.empty(size, dtype=torch.int8, device="cuda")


def launch(
    layout: Layout,
    x,
    out,
    stage_table,
    flag_table,
    my_flags,
    epochs,
    calls,
    rank: int,
    *,
    ctas: int,
    phase: int = 0,
    tma: bool = False,
    split: bool = False,
) -> None:
    """The kernel for one rank: tables are int64 addresses of every rank's staging buffer and flags (real peers
    through symmetric memory, or emulated ranks' buffers on one GPU in the tests, with phase 1 then 2). With
    tma, the remote stores are TMA bulk copies (push only; see tma_capable). With split, `ctas` CTAs in two
    roles (_split_kernel), whose epochs and calls hold 2 · MAX_CTAS counters."""
    if tma:
        assert tma_capable(layout, x), "TMA needs a push layout with 16-byte aligned rows"
        if x.is_cuda:  # device-side tensor descriptors live in a little global scratch
            triton.set_allocator(_tma_scratch)
    pairs = max(1, ctas // 2) if split else ctas  # CTAs that stage (and, unsplit, also consume)
    # PKROOF_MAX_BLOCK: larger blocks keep more bytes in flight per thread (one 16-byte load per 8 elements); at 64 MiB
    # on 2xH200, 16384 beat 4096 by 8-20% for all-gather, reduce-scatter and all-to-all and tied for all-reduce
    # (benchmarks/kernels/data/2026-11-30-variants/h200x2-sweeps.log).
    # PKROOF_TMA_MAX_BLOCK: a TMA block is one bulk copy's box (BLOCK / 256 rows of 256 elements), and each CTA has
    # one in flight at a time, so the box is the lever. All-gather at 64 MiB on 2xH200, 64 CTAs: 8 KiB boxes (4096
    # elements) 234 µs, 64 KiB boxes (32768 elements, 128 KiB of shared memory with the store's staging) 142 µs;
    # 136 µs at 128 CTAs, still slower than SM stores (111-116 µs) (benchmarks/kernels/2026-11-30-ceilings-h200x2.md).
    max_block = setting("PKROOF_TMA_MAX_BLOCK" if tma else "PKROOF_MAX_BLOCK")
    block, sub = _tiling(layout.span, pairs, max_block)
    n_tiles = triton.cdiv(layout.span, block * sub)
    grid = min(pairs, n_tiles, MAX_CTAS - 1)
    kernel = _split_kernel if split else _exchange_kernel
    kernel[(2 * grid if split else grid,)](
        x,
        out,
        stage_table,
        flag_table,
        my_flags,
        epochs,
        calls,
        rank,
        n_tiles,
        grid,
        layout.span,
        layout.slot,
        layout.chunk,
        layout.half_size,
        KIND=layout.kind,
        PUSH=layout.push,
        WORLD=layout.world,
        BLOCK=block,
        SUB=sub,
        PHASE=phase,
        TMA=tma,
        num_warps=8 if block >= 4096 else 4,
    )


# ---- implementations the profiler runs against the suite's problems (kernels/registry.py) -------------------------

# CTAs per collective, read from the launch settings when each call runs (kernels/settings.py; the registry names
# each built-in's): the probe's plain copies reach 90% of the link with 32 CTAs of loads or 12 of stores (h200x2,
# run 17); with staging and hand-offs more help: 256 for push with 4096-element blocks, 128 with 16384-element
# blocks (benchmarks/kernels/data/2026-11-30-first-kernels and -variants, sweeps at 64 MiB): PKROOF_CTAS_LOAD and
# PKROOF_CTAS_STORE
# 128. PKROOF_CTAS_TMA 128: the probe's plain TMA copy needs 16 CTAs for 90% of the link; the staged kernel, one box
# in flight per CTA, kept getting faster up to 128 (64 MiB, 64 KiB boxes). PKROOF_CTAS_SPLIT 256: stagers and
# consumers together.


def _collective(kind: int, ctas: str, **how: bool) -> Callable[[torch.Tensor], torch.Tensor]:
    """One built-in implementation: `exchange` of `kind` with these settings, on the CTAs that launch setting `ctas`
    holds when it is called (its pair is declared in kernels/registry.py)."""

    def run(x: torch.Tensor) -> torch.Tensor:
        return exchange(kind, x, ctas=setting(ctas), **how)

    return run


all_reduce_one_shot_pull = _collective(ALL_REDUCE, "PKROOF_CTAS_LOAD", push=False)
all_reduce_one_shot_push = _collective(ALL_REDUCE, "PKROOF_CTAS_STORE", push=True)
all_gather_push = _collective(ALL_GATHER, "PKROOF_CTAS_STORE", push=True)
all_gather_pull = _collective(ALL_GATHER, "PKROOF_CTAS_LOAD", push=False)
reduce_scatter_pull = _collective(REDUCE_SCATTER, "PKROOF_CTAS_LOAD", push=False)
reduce_scatter_push = _collective(REDUCE_SCATTER, "PKROOF_CTAS_STORE", push=True)
all_to_all_push = _collective(ALL_TO_ALL, "PKROOF_CTAS_STORE", push=True)
all_to_all_pull = _collective(ALL_TO_ALL, "PKROOF_CTAS_LOAD", push=False)


def all_reduce_two_shot(x):
    """Reduce-scatter (pull) then all-gather (push) of the reduced chunk: (P-1)/P of the bytes of one-shot's pull
    per phase, so it wins over one-shot as P grows; sizes not divisible by P are padded."""
    world = workspace().world
    pad = -x.numel() % world
    flat = torch.nn.functional.pad(x.reshape(-1), (0, pad)) if pad else x.reshape(-1)
    chunk = exchange(REDUCE_SCATTER, flat, push=False, ctas=setting("PKROOF_CTAS_LOAD"))
    full = exchange(ALL_GATHER, chunk, push=True, ctas=setting("PKROOF_CTAS_STORE"))
    return full[: x.numel()].view_as(x)


# TMA pushes (ask for them with --impl): correct on GPUs, and slower than the SM pushes at 64 MiB with every box and
# CTA count swept (all-gather 136 µs against 111; benchmarks/kernels/2026-11-30-ceilings-h200x2.md): each CTA waits for
# a
# bulk load before its bulk store. Chunks that are not 16-element multiples run padded (exchange), which TMA can
# address too.
all_reduce_tma = _collective(ALL_REDUCE, "PKROOF_CTAS_TMA", push=True, tma=True)
all_gather_tma = _collective(ALL_GATHER, "PKROOF_CTAS_TMA", push=True, tma=True)
reduce_scatter_tma = _collective(REDUCE_SCATTER, "PKROOF_CTAS_TMA", push=True, tma=True)
all_to_all_tma = _collective(ALL_TO_ALL, "PKROOF_CTAS_TMA", push=True, tma=True)

# Split roles: half the CTAs push (SM stores), the other half consume, so the link never waits for a consume.
all_reduce_split = _collective(ALL_REDUCE, "PKROOF_CTAS_SPLIT", push=True, split=True)
all_gather_split = _collective(ALL_GATHER, "PKROOF_CTAS_SPLIT", push=True, split=True)
reduce_scatter_split = _collective(REDUCE_SCATTER, "PKROOF_CTAS_SPLIT", push=True, split=True)
all_to_all_split = _collective(ALL_TO_ALL, "PKROOF_CTAS_SPLIT", push=True, split=True)
