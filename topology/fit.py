"""Fit the transfer model t(S, k) = α + S / min(k·β_cta, β_peak) to the probe's two sweeps.

A size sweep (message size S, fixed CTAs) gives α and β; a CTA sweep (CTA count k, fixed large S)
gives β_cta and β_peak. Both fits minimise the squared *relative* error Σ((model − measured)/measured)²,
because times span six orders of magnitude and an absolute fit would ignore the small messages.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


def _samples(xs: Sequence[float], ys: Sequence[float], x_name: str, y_name: str) -> tuple[np.ndarray, np.ndarray]:
    """Two equal-length arrays of finite, positive numbers with at least two distinct x values."""
    if len(xs) != len(ys):
        raise ValueError(f"{x_name} and {y_name} differ in length: {len(xs)} vs {len(ys)}")
    x, y = np.asarray(xs, dtype=float), np.asarray(ys, dtype=float)
    for name, values in ((x_name, x), (y_name, y)):
        if not np.all(np.isfinite(values)):
            raise ValueError(f"{name}: must be finite numbers, got NaN or infinity")
        if not np.all(values > 0):
            raise ValueError(f"{name}: must be positive, got {values.min()}")
    if len(np.unique(x)) < 2:
        raise ValueError(f"{x_name}: need at least 2 distinct values to fit, got {len(np.unique(x))}")
    return x, y


def _relative_errors(model: np.ndarray, measured: np.ndarray) -> tuple[float, float]:
    """max and RMS of |model − measured| / measured."""
    rel = np.abs(model - measured) / measured
    return float(rel.max()), float(np.sqrt(np.mean(rel**2)))


@dataclass(frozen=True)
class SizeFit:
    """t(S) = α + S/β fitted on a size sweep; errors are relative to the measured times."""

    latency_s: float  # α ≥ 0
    bandwidth_Bps: float  # β > 0
    max_rel_error: float  # max_i |t(S_i) − t_i| / t_i
    rms_rel_error: float  # sqrt(mean_i ((t(S_i) − t_i) / t_i)²)
    num_samples: int


def fit_size_sweep(sizes_bytes: Sequence[float], times_s: Sequence[float]) -> SizeFit:
    """Weighted least squares of t = α + S·u (u = 1/β) with weights 1/t, subject to α ≥ 0, u > 0.

    Dividing each row by t_i turns the problem into  min ‖A·(α, u) − 1‖²  with  A_i = (1/t_i, S_i/t_i).
    With two unknowns the non-negative solution is explicit: take the unconstrained one if α ≥ 0;
    otherwise the optimum lies on α = 0 (the segment from the unconstrained optimum to any feasible point
    crosses that face, and a convex objective does not increase along it), where u = Σa/Σa², a_i = S_i/t_i.
    If u ≤ 0 the times do not grow with size: no finite β fits, and that is a ValueError.
    """
    sizes, times = _samples(sizes_bytes, times_s, "sizes_bytes", "times_s")
    a = np.column_stack([1 / times, sizes / times])
    scale = np.linalg.norm(a, axis=0)  # unit columns: 1/t ~ 1e6 and S/t ~ 1e11 would be ill-conditioned
    (alpha, u), *_ = np.linalg.lstsq(a / scale, np.ones_like(times), rcond=None)
    alpha, u = alpha / scale[0], u / scale[1]
    if alpha < 0:
        alpha, u = 0.0, np.sum(a[:, 1]) / np.sum(a[:, 1] ** 2)
    if not u > 0:
        raise ValueError("times_s: do not grow with sizes_bytes, so no finite bandwidth fits")
    max_rel, rms_rel = _relative_errors(alpha + sizes * u, times)
    return SizeFit(float(alpha), float(1 / u), max_rel, rms_rel, len(sizes))


def efficient_size_bytes(fit: SizeFit, fraction: float = 0.9) -> float:
    """Smallest message reaching `fraction` of β: S/(α + S/β) ≥ f·β  ⇔  S ≥ f/(1−f)·α·β (9·α·β at 90%)."""
    if not 0 < fraction < 1:
        raise ValueError(f"fraction: must be in (0, 1), got {fraction}")
    return fraction / (1 - fraction) * fit.latency_s * fit.bandwidth_Bps


@dataclass(frozen=True)
class CtaFit:
    """bw(k) = min(k·β_cta, β_peak) fitted on a CTA sweep; errors are relative to the measured bandwidths."""

    per_cta_bandwidth_Bps: float  # β_cta > 0
    peak_bandwidth_Bps: float  # β_peak ≥ β_cta
    ctas_for_90pct: int  # ⌈0.9·β_peak/β_cta⌉
    max_rel_error: float  # max_i |bw(k_i) − b_i| / b_i
    rms_rel_error: float  # sqrt(mean_i ((bw(k_i) − b_i) / b_i)²)
    num_samples: int


def _fit_slope(ctas: np.ndarray, bws: np.ndarray, tau: float) -> tuple[float, float]:
    """For a fixed breakpoint τ = β_peak/β_cta, the model c·min(k, τ) is linear in c.

    With x_i = min(k_i, τ)/b_i the relative SSE is Σ(c·x_i − 1)², minimised by c = Σx/Σx²,
    leaving SSE = n − (Σx)²/Σx².  Returns (c, SSE).
    """
    x = np.minimum(ctas, tau) / bws
    c = np.sum(x) / np.sum(x**2)
    return float(c), float(np.sum((c * x - 1) ** 2))


def _candidate_breakpoints(ctas: np.ndarray, bws: np.ndarray) -> list[float]:
    """Every sampled k, plus the stationary τ inside each gap (k_j, k_j+1) between sampled counts.

    In a gap, rising points R = {k_i ≤ k_j} and flat points F give (Σx)²/Σx² = (A + τB)²/(C + τ²D) with
    A = Σ_R k/b, C = Σ_R (k/b)², B = Σ_F 1/b, D = Σ_F 1/b²; its derivative vanishes at τ = BC/(AD),
    i.e. β_cta = A/C (fit of the rising part through the origin) and β_peak = B/D (mean of the flat part).
    The SSE is continuous in τ and constant below the smallest k and above the largest, so these
    candidates contain the global minimum.
    """
    ks = np.unique(ctas)
    candidates = [float(k) for k in ks]
    for lo, hi in itertools.pairwise(ks):
        rising, flat = ctas <= lo, ctas >= hi
        A, C = np.sum(ctas[rising] / bws[rising]), np.sum((ctas[rising] / bws[rising]) ** 2)
        B, D = np.sum(1 / bws[flat]), np.sum(1 / bws[flat] ** 2)
        tau = B * C / (A * D)
        if lo < tau < hi:
            candidates.append(float(tau))
    return candidates


def fit_cta_sweep(num_ctas: Sequence[int], bandwidths_Bps: Sequence[float]) -> CtaFit:
    """Least squares in relative error of bw(k) = min(k·c, p) = c·min(k, τ), τ = p/c.

    Exact global minimum over c, p > 0: search τ over `_candidate_breakpoints`, with c from `_fit_slope`.
    τ ≥ smallest k ≥ 1 gives p = τ·c ≥ c. If the sweep never saturates, τ = largest k and β_peak is the
    model's bandwidth there (a lower bound on the true peak); if it is saturated from the first point,
    τ = smallest k and β_cta = β_peak / k_min (an upper bound on the true per-CTA bandwidth).
    """
    ctas, bws = _samples(num_ctas, bandwidths_Bps, "num_ctas", "bandwidths_Bps")
    if ctas.min() < 1:
        raise ValueError(f"num_ctas: must be at least 1, got {ctas.min()}")
    best_sse, best_tau, best_c = math.inf, 0.0, 0.0
    for tau in _candidate_breakpoints(ctas, bws):
        c, sse = _fit_slope(ctas, bws, tau)
        if sse < best_sse:
            best_sse, best_tau, best_c = sse, tau, c
    peak = best_tau * best_c
    max_rel, rms_rel = _relative_errors(np.minimum(ctas * best_c, peak), bws)
    ctas_90 = math.ceil(0.9 * peak / best_c - 1e-9)  # as TransferModel.ctas_for: rounding must not lift 14.0 to 15
    return CtaFit(best_c, peak, ctas_90, max_rel, rms_rel, len(ctas))


def envelope_size_sweep(sizes_bytes: Sequence[float], times_s: Sequence[float]) -> SizeFit:
    """The tightest α-β line that no sample beats: α + S_i/β ≤ t_i for every i (a roofline must not be beaten).

    Among feasible lines, maximise Σ_i (α + S_i/β)/t_i, the mean fraction of each measured time the model
    accounts for. That is a linear program in (α, u = 1/β) with two unknowns, so its optimum is a vertex: a
    line through two samples (an edge of the lower convex hull of the points (S, t)), or one through the
    origin (α = 0). All such candidates are tried.
    """
    sizes, times = _samples(sizes_bytes, times_s, "sizes_bytes", "times_s")
    candidates = [(0.0, float(np.min(times / sizes)))]
    for i, j in itertools.combinations(range(len(sizes)), 2):
        if sizes[i] != sizes[j]:
            u = (times[j] - times[i]) / (sizes[j] - sizes[i])
            candidates.append((float(times[i] - sizes[i] * u), float(u)))
    best, best_score = None, -math.inf
    for alpha, u in candidates:
        feasible = alpha >= 0 and u > 0 and np.all(alpha + sizes * u <= times * (1 + 1e-12))
        score = float(np.sum((alpha + sizes * u) / times)) if feasible else -math.inf
        if score > best_score:
            best, best_score = (alpha, u), score
    if best is None:
        raise ValueError("times_s: no line with α ≥ 0 and finite bandwidth stays below the samples")
    alpha, u = best
    max_rel, rms_rel = _relative_errors(alpha + sizes * u, times)
    return SizeFit(alpha, 1 / u, max_rel, rms_rel, len(sizes))


def envelope_cta_sweep(num_ctas: Sequence[int], bandwidths_Bps: Sequence[float]) -> CtaFit:
    """min(k·c, p) ≥ every measured bandwidth: c = max_i b_i/k_i, p = max_i b_i (both bind at some sample)."""
    ctas, bws = _samples(num_ctas, bandwidths_Bps, "num_ctas", "bandwidths_Bps")
    if ctas.min() < 1:
        raise ValueError(f"num_ctas: must be at least 1, got {ctas.min()}")
    c, p = float(np.max(bws / ctas)), float(np.max(bws))
    max_rel, rms_rel = _relative_errors(np.minimum(ctas * c, p), bws)
    return CtaFit(c, p, math.ceil(0.9 * p / c - 1e-9), max_rel, rms_rel, len(ctas))


def envelope_regimes(
    sizes_bytes: Sequence[float], times_s: Sequence[float], max_regimes: int = 3
) -> tuple[SizeFit, ...]:
    """A library that switches protocol with size (NCCL: LL, LL128, Simple, and its channel count) runs the
    cheapest of several α-β lines: t(S) = min_r (α_r + S/β_r). Split the sweep into at most `max_regimes`
    contiguous runs of sizes (two samples or more each), take each run's lower envelope, and keep the split whose
    min-of-lines is closest to the samples at its worst point; fewer regimes win ties within 2 points.

    Each line is at or below its own run's samples, so their minimum is at or below every sample: still an
    envelope no measurement beats. Returned from the smallest sizes' regime to the largest's. Each SizeFit's
    errors are those of the whole min-of-lines model over the whole sweep, so they read the same on every regime.
    """
    sizes, times = _samples(sizes_bytes, times_s, "sizes_bytes", "times_s")
    order = np.argsort(sizes)
    sizes, times = sizes[order], times[order]
    n = len(sizes)
    best: dict[int, tuple[float, tuple[SizeFit, ...]]] = {}  # regimes → (worst error, lines)
    for regimes in range(1, max_regimes + 1):
        for cuts in itertools.combinations(range(2, n - 1), regimes - 1):
            bounds = (0, *cuts, n)
            runs = [(bounds[i], bounds[i + 1]) for i in range(regimes)]
            if any(len(np.unique(sizes[a:b])) < 2 for a, b in runs):
                continue
            lines = [envelope_size_sweep(sizes[a:b], times[a:b]) for a, b in runs]
            model = np.min([line.latency_s + sizes / line.bandwidth_Bps for line in lines], axis=0)
            max_rel, rms_rel = _relative_errors(model, times)
            if regimes not in best or max_rel < best[regimes][0]:
                best[regimes] = (
                    max_rel,
                    tuple(SizeFit(f.latency_s, f.bandwidth_Bps, max_rel, rms_rel, n) for f in lines),
                )
    lowest = min(error for error, _ in best.values())
    return next(lines for _, (error, lines) in sorted(best.items()) if error <= lowest + 0.02)


def envelope_chain(sizes_bytes: Sequence[float], times_s: Sequence[float], max_regimes: int = 8) -> tuple[SizeFit, ...]:
    """envelope_regimes for a dense sweep (nccl-tests' -f 2: thirty sizes): runs of sizes that share their end
    points, each run's lower envelope a line; of the chains whose min-of-lines is within half a point of the best
    that `max_regimes` lines reach at their worst sample, the one closest to the samples on average (RMS). Sharing
    ends lets a line end exactly where the next begins, so a curve that bends between two sizes (NCCL's busbw still
    rising at 1 GiB) is followed rather than undercut.

    Each line is at or below its own run's samples, so their minimum is at or below every sample: an envelope no
    measurement beats. A dynamic program over the runs' end points keeps, per (runs, last end), the chain whose
    min-of-lines is closest to the samples so far at its worst one (a line of one run can undercut another's)."""
    sizes, times = _samples(sizes_bytes, times_s, "sizes_bytes", "times_s")
    order = np.argsort(sizes)
    sizes, times = sizes[order], times[order]
    n = len(sizes)
    lines: dict[tuple[int, int], tuple[SizeFit, np.ndarray]] = {}
    for i in range(n):
        for j in range(i + 1, n):
            if len(np.unique(sizes[i : j + 1])) >= 2:
                fit = envelope_size_sweep(sizes[i : j + 1], times[i : j + 1])
                lines[i, j] = fit, fit.latency_s + sizes / fit.bandwidth_Bps
    # chains[j]: (worst error over samples 0..j and their sum, the lines' min at every sample, end points) of the
    # best chain of the current number of runs that ends at sample j: the worst first (to 0.1 point), then the sum
    Chain = tuple[tuple[float, float], np.ndarray, tuple[int, ...]]
    chains: dict[int, Chain] = {0: ((0.0, 0.0), np.full(n, np.inf), (0,))}
    found = []
    for _ in range(max_regimes):
        step: dict[int, Chain] = {}
        for i, (_, floor, ends) in chains.items():
            for j in range(i + 1, n):
                if (i, j) not in lines:
                    continue
                lower = np.minimum(floor, lines[i, j][1])
                errors = (times[: j + 1] - lower[: j + 1]) / times[: j + 1]
                key = (round(float(np.max(errors)), 3), float(np.sum(errors)))
                if j not in step or key < step[j][0]:
                    step[j] = (key, lower, (*ends, j))
        chains = step
        if n - 1 in chains:
            _, lower, ends = chains[n - 1]
            max_rel, rms_rel = _relative_errors(lower, times)
            fits = [lines[a, b][0] for a, b in itertools.pairwise(ends)]
            regimes = tuple(SizeFit(f.latency_s, f.bandwidth_Bps, max_rel, rms_rel, n) for f in fits)
            found.append((max_rel, rms_rel, regimes))
    lowest = min(err for err, _, _ in found)
    return min((f for f in found if f[0] <= lowest + 0.005), key=lambda f: f[1])[2]  # then the closest on average
