"""How long compute ops take: the roof's at the dtype's peak, a prediction's at the rate the GPU holds (the sustained
rate for long ops, the burst rate for short ones), a tiled op in whole waves of tiles."""

from __future__ import annotations

from .system import System
from .workload import ComputeOp, Workload

# A compute op whose time at the peak is at least this long is charged the sustained rate (the GPU at its power
# limit), a shorter one the peak. pkroof times at least 3 back-to-back calls per sample; on 2xH200 the limiter
# held the GPU at 700 W through samples of 8.4 ms of continuous matmuls (3 calls of 2.8 ms: 688 TFLOP/s) but not
# through samples of 4.3 ms (3 calls of 1.43 ms: 768, as one call after idle), so the line sits between a
# 1.43 ms and a 2.8 ms call (benchmarks/kernels/2026-11-30-gemm-rates-h200x2.md).
SUSTAINED_AFTER_S = 2e-3


def _rate(op: ComputeOp, system: System) -> float:
    """FLOP/s a prediction charges `op`: the sustained rate for a long op (SUSTAINED_AFTER_S), else the burst rate
    (a matmul alone after idle: the peak where none is known, a probed node's peak being its measured burst)."""
    peak = system.peak_flops_for(op.dtype)
    long = op.flops / peak >= SUSTAINED_AFTER_S
    return system.sustained_flops_for(op.dtype) if long else system.burst_flops_for(op.dtype)


# cuBLAS splits a GEMM along K only where each piece keeps a long K loop: this many FLOPs of a 128×256 tile, K =
# 2048. The 1024³ fp8 GEMMs of Azure's tables ran at one unsplit wave (H100 7.83 µs, H200 7.38, GB200 4.39: one
# 128×256 tile of K = 1024 at one SM's share of the rate, 6.3 µs on H100, plus a little), not at the 1.6 µs a
# 4-way split would give; a GEMM of small M and long K (decode) is split, as its weights' HBM time says it must be
SPLIT_K_MIN_FLOPS = 2 * 128 * 256 * 2048


def _alone_s(op: ComputeOp, system: System) -> float:
    """A compute op as a library kernel runs it alone on every SM: its FLOPs at its rate, and a tiled op (a GEMM) at
    least its waves of whole tiles, split along K where its tiles leave SMs idle and K is long (split-K,
    SPLIT_K_MIN_FLOPS): the last wave of 132 SMs holding 4 tiles costs a whole tile's time, and a GEMM of small M
    pays for its tiles' padded rows. Azure's cuBLASLt fp8 GEMMs on one H100 ran at 0.88-0.99 of their best rate
    from 4096³ up, and at 0.2-0.7 below (Azure/AI-benchmarking-guide, ND_H100_v5_results.md)."""
    rate = _rate(op, system)
    t = op.flops / rate
    if op.tile_flops:
        sms = system.sm_count
        split = max(1, min(sms // op.num_tiles, int(op.tile_flops // SPLIT_K_MIN_FLOPS)))
        waves = -(-op.num_tiles * split // sms)
        t = max(t, waves * op.tile_flops / split * sms / rate)
    return t


def serial_compute_s(w: Workload, system: System) -> float:
    return sum(max(_alone_s(op, system), op.hbm_bytes / system.hbm_bandwidth_Bps) for op in w.compute)


def flops_time_s(w: Workload, system: System, *, roof: bool = False) -> float:
    """The compute ops' FLOPs at their dtype's peak for the roof (a bound nothing beats: the fastest matmul
    measured, one call on an idle GPU), at _rate for predictions. On 2xH200 the 8192³ matmul ran at 772
    TFLOP/s one call after idle and at 667 back to back, the GPU at its 700 W limit with its SM clock near
    1450 MHz against 1980; fused GEMMs of 2.4-4.8 ms measured 8-16% over predictions made at the peak."""
    return sum(op.flops / (system.peak_flops_for(op.dtype) if roof else _rate(op, system)) for op in w.compute)


def tile_waves_s(w: Workload, system: System, sms: int) -> float:
    """Compute time of tiled ops on `sms` SMs that each own whole tiles: ⌈tiles / sms⌉ waves of one tile at one
    SM's share of the peak. Below a wave of tiles this, not FLOPs / peak, is the GEMM's time: on 2xH200 the
    inter-SM kernel's excess over a FLOPs-only model was 5.0-6.5 µs for one 128×256 tile with K = 128 and
    10.8 µs for 2 and 8 tiles with K = 512, the difference (4.4 µs) one such tile's 4.2 µs
    (benchmarks/kernels/2026-11-30-fixed-costs-h200x2.md)."""
    return sum(
        -(-op.num_tiles // sms) * op.tile_flops * system.sm_count / _rate(op, system)
        for op in w.compute
        if op.tile_flops
    )


def waves(w: Workload, sms: int) -> int:
    """Waves of whole tiles on `sms` SMs (the tiled ops' most); a large number when nothing is tiled. Tiles of one
    wave finish together, so communication that follows them has nothing left to overlap with: a pipeline is
    at most this deep (inter-SM GEMM + all-reduce, 2xH200: 64 tiles on 100 SMs ran 17.6% over a two-deep fill,
    benchmarks/kernels/2026-11-30-fixed-costs-h200x2.md)."""
    tiled = [op.num_tiles for op in w.compute if op.tile_flops]
    return max(1, -(-max(tiled) // sms)) if tiled else 1 << 30
