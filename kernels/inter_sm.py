"""GEMM + all-reduce, inter-SM: a persistent Triton GEMM on all SMs but k, and k communication CTAs that
all-reduce its output while it runs (k per shape: comm_ctas()). C [m, n] = sum_p A_p · B_p on every rank
(A_p [m, K], B_p [K, n]).

- The GEMM (one CTA per SM left, persistent) walks its BM × BN tiles in row-major order, so C is finished band
  by band (a band: BM rows, every column). Each tile goes into this rank's symmetric staging copy of C; then the
  CTA adds one to its band's counter (a CTA barrier, then a release add at GPU scope).
- Communication CTA c owns units c, c + k, ...; a unit is 1/PIECES of a band, whole rows, so contiguous
  in C. For each unit: wait (acquire) until the band's counter has every tile of the band, push the unit's rows
  into every peer's inbox (slot: this rank), raise flag (c, rank) on every peer; then, after pushing its next
  unit, wait for the peers' flags (c, p) and sum the own rows and every peer's inbox rows in fp32 into the
  output.
- Everything only counts up, so CUDA-graph replays work: the GEMM adds one per tile and call to its band's
  counter; unit u remembers in its own slot how many tiles of its band it has seen. Flags (c, rank) count
  units, from the CTA's epoch, as in collectives.py; inboxes are double-buffered by call parity, for the same
  reason and by the same argument (a rank writes half h again only after its peers finished reading it).

The GEMM of the next call overwrites the staging copy, so every call joins its communication stream back before
returning. Flags are never multicast. A and B are read by TMA (tensor descriptors): their rows must be 16-byte
aligned (k and n multiples of 8 for bf16).
"""

from __future__ import annotations

import os

import torch
import triton
import triton.language as tl

from .declare import report_comm_sms
from .settings import setting
from .symm import _POLLS, MAX_CTAS, side_stream, signal_peers, wait_peers, workspace
from .symm_collectives import _buffer, _tma_scratch

# Launch settings (kernels/settings.py, PKROOF_INTER_SM_*), all tunable, read when a call runs; each use says what
# its default rests on. Communication CTAs (PKROOF_INTER_SM_CTAS, else per shape: comm_ctas): the sweeps' best were
# 16 at llama3-8b-tp2 (K = 7168 per rank), 8 at llama3-70b-tp8 (K = 14336), bf16. C has e·m·n bytes for 2·m·n·K
# FLOPs, so communication per unit of compute is e / (2K): the CTAs that keep pace go as e / K.
COMM_K_BF16 = 16 * 7168  # = 8 * 14336
COMM_CTAS_RANGE = (4, 32)  # what the sweeps covered


@triton.jit
def _tile_at(tile, tiles_m, tiles_n, GROUP: tl.constexpr):
    """(band, column) of the tile-th tile: row-major if GROUP is 1 (bands finish in order), else column-major
    within groups of GROUP bands (B's columns reused from L2 across the group, the group's bands finishing
    together)."""
    if GROUP == 1:
        return tile // tiles_n, tile % tiles_n
    per_group = GROUP * tiles_n
    first = (tile // per_group) * GROUP
    bands = tl.minimum(tiles_m - first, GROUP)
    return first + (tile % per_group) % bands, (tile % per_group) // bands


@triton.jit
def _gemm_kernel(a, b, c, band_ready, m, n, k, n_ctas,
                 BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, STAGES: tl.constexpr,
                 GROUP: tl.constexpr, UPCAST: tl.constexpr):  # fmt: skip
    a_desc = tl.make_tensor_descriptor(a, shape=[m, k], strides=[k, 1], block_shape=[BM, BK])
    b_desc = tl.make_tensor_descriptor(b, shape=[k, n], strides=[n, 1], block_shape=[BK, BN])
    tiles_m = tl.cdiv(m, BM)
    tiles_n = tl.cdiv(n, BN)
    rows = tl.arange(0, BM)
    cols = tl.arange(0, BN)
    for tile in range(tl.program_id(0), tiles_m * tiles_n, n_ctas):
        band, col = _tile_at(tile, tiles_m, tiles_n, GROUP)
        row0 = band * BM
        col0 = col * BN
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for kk in tl.range(0, tl.cdiv(k, BK), num_stages=STAGES):
            x = a_desc.load([row0, kk * BK])
            y = b_desc.load([kk * BK, col0])
            if UPCAST:  # Triton 3.6's interpreter returns garbage from a bf16 dot; it runs the CPU tests
                x, y = x.to(tl.float32), y.to(tl.float32)
            acc = tl.dot(x, y, acc)
        r = (row0 + rows[:, None]).to(tl.int64)
        q = col0 + cols[None, :]
        tl.store(c + r * n + q, acc.to(c.dtype.element_ty), mask=(r < m) & (q < n))
        tl.debug_barrier()  # every thread's stores of the tile before the count
        tl.atomic_add(band_ready + band, 1, sem="release", scope="gpu")


@triton.jit
def _wait_band(band_ready, band, target):
    seen = tl.atomic_add(band_ready + band, 0, sem="acquire", scope="gpu")
    polls = 0
    while (seen < target) & (polls < _POLLS):
        seen = tl.atomic_add(band_ready + band, 0, sem="acquire", scope="gpu")
        polls += 1
    tl.debug_barrier()


@triton.jit
def _rows(unit, m, n, bm, rows_per_unit, PIECES: tl.constexpr):
    """Unit `unit`'s elements [lo, hi) of row-major C: whole rows of one band (may be empty)."""
    band_lo = (unit // PIECES) * bm
    lo = band_lo + (unit % PIECES) * rows_per_unit
    hi = tl.minimum(tl.minimum(lo + rows_per_unit, band_lo + bm), m)
    # n is a multiple of 8 (16-byte rows), so are both: Triton can then issue 16-byte accesses
    return tl.multiple_of(lo * n, 8), tl.multiple_of(hi * n, 8)


@triton.jit
def _push(staging, inbox_table, band_ready, unit_seen, unit, half, rank, slot_size, m, n, bm, rows_per_unit, tiles_n,
          WORLD: tl.constexpr, PIECES: tl.constexpr, BLOCK: tl.constexpr):  # fmt: skip
    """Wait until the GEMM has finished the unit's band, then store its rows into every peer's inbox."""
    target = tl.load(unit_seen + unit) + tiles_n
    _wait_band(band_ready, unit // PIECES, target)
    tl.store(unit_seen + unit, target)
    lo, hi = _rows(unit, m, n, bm, rows_per_unit, PIECES)
    ty = staging.dtype.element_ty
    for off in range(lo, hi, BLOCK):
        idx = off + tl.arange(0, BLOCK)
        v = tl.load(staging + idx, mask=idx < hi)
        for p in tl.static_range(WORLD):
            if p != rank:
                tl.store(_buffer(inbox_table, p, ty) + half + rank * slot_size + idx, v, mask=idx < hi)


@triton.jit
def _sum(staging, out, mine, unit, rank, slot_size, m, n, bm, rows_per_unit,
         WORLD: tl.constexpr, PIECES: tl.constexpr, BLOCK: tl.constexpr):  # fmt: skip
    """out = own rows + every peer's rows from this rank's inbox, summed in fp32."""
    lo, hi = _rows(unit, m, n, bm, rows_per_unit, PIECES)
    for off in range(lo, hi, BLOCK):
        idx = off + tl.arange(0, BLOCK)
        acc = tl.load(staging + idx, mask=idx < hi).to(tl.float32)
        for p in tl.static_range(WORLD):
            if p != rank:
                acc += tl.load(mine + p * slot_size + idx, mask=idx < hi).to(tl.float32)
        tl.store(out + idx, acc.to(out.dtype.element_ty), mask=idx < hi)


@triton.jit
def _reduce_kernel(staging, out, inbox_table, flag_table, my_flags, epochs, calls, unit_seen, band_ready,
                   rank, m, n, bm, rows_per_unit, n_units, half_size, slot_size, tiles_n,
                   WORLD: tl.constexpr, PIECES: tl.constexpr, BLOCK: tl.constexpr, PHASE: tl.constexpr):  # fmt: skip
    # Pipelined as collectives.py's kernel: push unit j+1 before waiting for the peers' unit j, so the wait
    # overlaps a push. PHASE 0 is the real thing; 1 (wait for the GEMM and push only) and 2 (sum only) skip the
    # flags, so the tests can run emulated ranks one after another on one GPU.
    cta = tl.program_id(0)
    grid = tl.num_programs(0)
    first = tl.load(epochs + cta)
    half = (tl.load(calls + cta) % 2) * half_size
    mine = _buffer(inbox_table, rank, staging.dtype.element_ty) + half
    if PHASE != 2:  # the grid never exceeds the units, so every CTA has a first one
        _push(staging, inbox_table, band_ready, unit_seen, cta, half, rank, slot_size, m, n, bm, rows_per_unit,
              tiles_n, WORLD, PIECES, BLOCK)  # fmt: skip
        if PHASE == 0:
            signal_peers(flag_table, cta, rank, first + 1, WORLD)
    j = 0
    for unit in range(cta, n_units, grid):
        nxt = unit + grid
        if (nxt < n_units) & (PHASE != 2):
            _push(staging, inbox_table, band_ready, unit_seen, nxt, half, rank, slot_size, m, n, bm, rows_per_unit,
                  tiles_n, WORLD, PIECES, BLOCK)  # fmt: skip
            if PHASE == 0:
                signal_peers(flag_table, cta, rank, first + j + 2, WORLD)
        if PHASE == 0:
            wait_peers(my_flags, cta, rank, first + j + 1, WORLD)
        if PHASE != 1:
            _sum(staging, out, mine, unit, rank, slot_size, m, n, bm, rows_per_unit, WORLD, PIECES, BLOCK)
        j += 1
    if PHASE != 1:
        tl.store(epochs + cta, first + j)
        tl.store(calls + cta, tl.load(calls + cta) + 1)


def comm_ctas(k: int, element_size: int) -> int:
    """Communication CTAs for a GEMM with inner size k (per rank): PKROOF_INTER_SM_CTAS if set (read now), else
    COMM_K_BF16 / k scaled by the element size (relative to bf16's 2 bytes), rounded up, within COMM_CTAS_RANGE."""
    fixed = setting("PKROOF_INTER_SM_CTAS")
    if fixed is not None:
        return fixed
    lo, hi = COMM_CTAS_RANGE
    return max(lo, min(hi, -(-COMM_K_BF16 * element_size // (2 * k))))


def plan(m: int, pieces: int, bm: int) -> tuple[int, int, int]:
    """(rows per unit, units, units per band): `pieces` units of whole rows per band of `bm` rows (fewer if a
    band has fewer rows than that)."""
    pieces = max(1, min(pieces, bm))
    return -(-bm // pieces), -(-m // bm) * pieces, pieces


def slot(m: int, n: int) -> int:
    """Elements between source ranks' slots in an inbox: C rounded up to 64 elements, so every slot starts
    16-byte aligned and Triton knows it (the launcher marks sizes divisible by 16)."""
    return -(-(m * n) // 64) * 64


def gemm(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, band_ready: torch.Tensor, n_ctas: int,
         tile: tuple[int, ...] | None = None, group: int = 1) -> None:  # fmt: skip
    """c = a · b by the persistent GEMM on `n_ctas` CTAs, counting each finished tile in band_ready[band]; tiles
    (BM, BN, BK, pipeline stages, warps: PKROOF_INTER_SM_TILE, read now, if None) in the order _tile_at gives for
    `group`."""
    bm, bn, bk, stages, warps = setting("PKROOF_INTER_SM_TILE") if tile is None else tile
    m, k = a.shape
    n = b.shape[1]
    if (k * a.element_size()) % 16 or (n * b.element_size()) % 16:
        raise ValueError(f"inter-SM GEMM: rows of A ({k}) and B ({n}) must be 16-byte aligned for TMA")
    if a.is_cuda:
        triton.set_allocator(_tma_scratch)  # device-side tensor descriptors live in a little global scratch
    tiles = triton.cdiv(m, bm) * triton.cdiv(n, bn)
    interpreted = os.environ.get("TRITON_INTERPRET") == "1"  # the CPU tests: see _gemm_kernel's UPCAST
    _gemm_kernel[(min(n_ctas, tiles),)](a, b, c, band_ready, m, n, k, min(n_ctas, tiles), BM=bm, BN=bn, BK=bk,
                                        STAGES=stages, GROUP=group, UPCAST=interpreted, num_warps=warps)  # fmt: skip


def reduce(staging, out, inbox_table, flag_table, my_flags, epochs, calls, unit_seen, band_ready, rank: int,
           world: int, m: int, n: int, *, comm_ctas: int, phase: int = 0,
           pieces: int | None = None, bm: int | None = None, bn: int | None = None) -> None:  # fmt: skip
    """The communication CTAs for one rank: tables are int64 addresses of every rank's inbox (2 · world ·
    slot(m, n) elements: two parity halves of a slot per source rank) and flags (real peers, or emulated ranks'
    buffers on one GPU with phase 1 then 2). pieces, bm, bn: PKROOF_INTER_SM_PIECES and PKROOF_INTER_SM_TILE's, read
    now, where None."""
    if pieces is None:
        pieces = setting("PKROOF_INTER_SM_PIECES")
    if bm is None or bn is None:
        tile = setting("PKROOF_INTER_SM_TILE")
        bm, bn = (tile[0] if bm is None else bm), (tile[1] if bn is None else bn)
    # Swept on 2xH200 (benchmarks/kernels/2026-11-30-inter-sm-h200x2.md): communication CTAs of 32 warps
    # (PKROOF_INTER_SM_WARPS; a communication CTA has its SM to itself) and 32768-element steps (PKROOF_INTER_SM_BLOCK;
    # 16-byte accesses) gave the best speed-ups over matmul + NCCL at llama3-8b-tp2 and llama3-70b-tp8. A CTA's step
    # waits for its loads before its stores go, so its rate is about a step per memory latency: 4096-element steps at
    # 8 warps moved ~5 GB/s per CTA (64 MiB over 8 CTAs in 1.7 ms).
    block, warps = setting("PKROOF_INTER_SM_BLOCK"), setting("PKROOF_INTER_SM_WARPS")
    rows, units, per_band = plan(m, pieces, bm)
    assert n % 8 == 0, "16-byte rows"  # the kernel's offsets rely on it
    # never more CTAs than units: every CTA must own a unit in every call (the parity argument needs it)
    _reduce_kernel[(min(comm_ctas, units, MAX_CTAS - 1),)](
        staging, out, inbox_table, flag_table, my_flags, epochs, calls, unit_seen, band_ready,
        rank, m, n, bm, rows, units, world * slot(m, n), slot(m, n), triton.cdiv(n, bn),
        WORLD=world, PIECES=per_band, BLOCK=block, PHASE=phase, num_warps=warps,
    )  # fmt: skip


def gemm_all_reduce_inter_sm(a, b):
    """C [m, n] = sum_p A_p · B_p on every rank; A [m, k_local], B [k_local, n]."""
    ws = workspace()
    a, b = a.contiguous(), b.contiguous()
    m, n = a.shape[0], b.shape[1]
    sms = torch.cuda.get_device_properties(a.device).multi_processor_count
    comm = max(1, min(comm_ctas(a.shape[1], a.element_size()), sms - 1))
    report_comm_sms(gemm_all_reduce_inter_sm, comm)
    staging, _ = ws.buffer("gemm-ar-staging", m * n, a.dtype)
    _, inbox_table = ws.buffer("gemm-ar-inbox", 2 * ws.world * slot(m, n), a.dtype)
    key = ("gemm-ar", m, n, a.dtype)
    # BM, BN, BK, pipeline stages, warps of the GEMM; units per band (the last bands spread over more CTAs)
    tile, pieces = setting("PKROOF_INTER_SM_TILE"), setting("PKROOF_INTER_SM_PIECES")
    # Tile order: 1 walks C row-major (bands finish in order). G > 1 walks column-major within groups of G bands, so
    # B's columns are read from L2 by G bands at once: at llama3-70b-tp8 on one H200, 8 made the GEMM alone 7-8%
    # faster on 124 CTAs, but the group's bands finish together, later, so communication starts later and the tail
    # after the GEMM grows; 1 stays the default until the fused kernel is timed on 2 GPUs
    # (benchmarks/kernels/2026-12-01-tile-order.md).
    group = setting("PKROOF_INTER_SM_GROUP")
    band_ready = ws.counter((*key, tile, "bands"), triton.cdiv(m, tile[0]))
    unit_seen = ws.counter((*key, tile, pieces, "units"), plan(m, pieces, tile[0])[1])
    calls = ws.counter((*key, "calls"))
    out = torch.empty(m, n, dtype=a.dtype, device=a.device)
    main, side = torch.cuda.current_stream(), side_stream()
    side.wait_stream(main)
    # the GEMM is launched first: it takes its SMs before the communication CTAs
    gemm(a, b, staging.view(m, n), band_ready, sms - comm, tile, group)
    with torch.cuda.stream(side):
        reduce(staging, out, inbox_table, ws.flag_table, ws.flags, ws.epochs, calls, unit_seen, band_ready,
               ws.rank, ws.world, m, n, comm_ctas=comm, pieces=pieces, bm=tile[0], bn=tile[1])  # fmt: skip
    main.wait_stream(side)  # the next call's GEMM overwrites the staging copy the CTAs above read
    return out
