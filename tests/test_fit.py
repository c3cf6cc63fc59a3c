"""Fits of the transfer model to the probe's sweeps, checked on samples generated from known parameters."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pkroof.topology.fit import (
    efficient_size_bytes,
    envelope_cta_sweep,
    envelope_size_sweep,
    fit_cta_sweep,
    fit_size_sweep,
)

ALPHA, BETA = 8e-6, 370e9  # s, B/s
PER_CTA, PEAK = 23.3e9, 350e9  # B/s; saturates at 350/23.3 ≈ 15.0 CTAs
SIZES = [2**e for e in range(12, 31)]  # 4 KiB … 1 GiB
CTAS = [1, 2, 4, 8, 16, 32, 64, 128, 132]  # up to all SMs of an H100/H200
NOISE = 0.03  # ± relative, uniform
# The true parameters are one candidate of each least-squares fit, and their relative error on a sample
# t·(1+e) is |e|/(1+e) ≤ 0.03/0.97, so the fitted RMS relative error can be no larger.
NOISE_RMS_BOUND = NOISE / (1 - NOISE)


def _times(alpha, beta, sizes=SIZES):
    return [alpha + s / beta for s in sizes]


def _bandwidths(per_cta, peak, ctas=CTAS):
    return [min(k * per_cta, peak) for k in ctas]


def _noisy(values, seed):
    rng = np.random.default_rng(seed)
    return list(np.asarray(values) * (1 + rng.uniform(-NOISE, NOISE, len(values))))


def test_size_fit_recovers_exact_parameters():
    fit = fit_size_sweep(SIZES, _times(ALPHA, BETA))
    assert fit.latency_s == pytest.approx(ALPHA, rel=1e-9)
    assert fit.bandwidth_Bps == pytest.approx(BETA, rel=1e-9)
    assert fit.max_rel_error < 1e-9 and fit.rms_rel_error < 1e-9
    assert fit.num_samples == 19


@pytest.mark.parametrize("seed", range(5))
def test_size_fit_with_noise(seed):
    fit = fit_size_sweep(SIZES, _noisy(_times(ALPHA, BETA), seed))
    # α is pinned by the ~8 sizes ≤ 512 KiB where S/β < 0.2·α, β by the ~8 sizes ≥ 8 MiB where α < 0.4% of t;
    # each is then an average of samples within ±3%, and 5% leaves room for the two leaking into each other.
    assert fit.latency_s == pytest.approx(ALPHA, rel=0.05)
    assert fit.bandwidth_Bps == pytest.approx(BETA, rel=0.05)
    assert fit.rms_rel_error <= NOISE_RMS_BOUND
    assert fit.rms_rel_error <= fit.max_rel_error


def test_size_fit_clamps_negative_latency_to_zero():
    # t = S/β − 1 µs would fit with α < 0: the constrained fit is the line through the origin
    sizes = [2**20, 2**24, 2**28]
    fit = fit_size_sweep(sizes, [s / BETA - 1e-6 for s in sizes])
    assert fit.latency_s == 0.0
    a = np.array(sizes) / np.array([s / BETA - 1e-6 for s in sizes])  # S_i/t_i
    assert fit.bandwidth_Bps == pytest.approx(np.sum(a**2) / np.sum(a))  # 1/u, u = Σa/Σa²


def test_efficient_size_is_nine_alpha_beta_at_ninety_percent():
    fit = fit_size_sweep(SIZES, _times(ALPHA, BETA))
    s = efficient_size_bytes(fit)
    assert s == pytest.approx(9 * ALPHA * BETA, rel=1e-9)  # 9 × 8 µs × 370 GB/s = 26.64 MB
    assert s / (ALPHA + s / BETA) == pytest.approx(0.9 * BETA, rel=1e-9)
    assert efficient_size_bytes(fit, 0.5) == pytest.approx(ALPHA * BETA, rel=1e-9)


def test_cta_fit_recovers_exact_parameters():
    fit = fit_cta_sweep(CTAS, _bandwidths(PER_CTA, PEAK))
    assert fit.per_cta_bandwidth_Bps == pytest.approx(PER_CTA, rel=1e-9)
    assert fit.peak_bandwidth_Bps == pytest.approx(PEAK, rel=1e-9)
    assert fit.ctas_for_90pct == math.ceil(0.9 * PEAK / PER_CTA)  # ⌈13.52⌉ = 14
    assert fit.max_rel_error < 1e-9 and fit.rms_rel_error < 1e-9
    assert fit.num_samples == len(CTAS)


@pytest.mark.parametrize("seed", range(5))
def test_cta_fit_with_noise(seed):
    fit = fit_cta_sweep(CTAS, _noisy(_bandwidths(PER_CTA, PEAK), seed))
    # With the breakpoint in the same gap (8, 16), β_cta = Σx/Σx² over x_i = k_i/b_i is a weighted mean of
    # b_i/k_i = β_cta·(1+e_i), and β_peak a weighted mean of b_i = β_peak·(1+e_i): both within ±3%.
    assert fit.per_cta_bandwidth_Bps == pytest.approx(PER_CTA, rel=NOISE + 1e-9)
    assert fit.peak_bandwidth_Bps == pytest.approx(PEAK, rel=NOISE + 1e-9)
    assert 8 < fit.peak_bandwidth_Bps / fit.per_cta_bandwidth_Bps < 16
    assert fit.rms_rel_error <= NOISE_RMS_BOUND


def test_cta_fit_that_never_saturates():
    ctas = [1, 2, 4, 8]
    fit = fit_cta_sweep(ctas, [k * PER_CTA for k in ctas])
    assert fit.per_cta_bandwidth_Bps == pytest.approx(PER_CTA, rel=1e-9)
    assert fit.peak_bandwidth_Bps == pytest.approx(8 * PER_CTA, rel=1e-9)  # the most the data shows
    assert fit.max_rel_error < 1e-9


def test_cta_fit_saturated_from_the_start():
    ctas = [4, 8, 16, 32]
    fit = fit_cta_sweep(ctas, [PEAK] * 4)
    assert fit.peak_bandwidth_Bps == pytest.approx(PEAK, rel=1e-9)
    assert fit.per_cta_bandwidth_Bps == pytest.approx(PEAK / 4, rel=1e-9)  # reaches the peak by 4 CTAs
    assert fit.ctas_for_90pct == math.ceil(0.9 * 4)
    assert fit.max_rel_error < 1e-9


def test_cta_fit_keeps_peak_at_least_per_cta():
    fit = fit_cta_sweep([1, 2, 4], [100e9, 90e9, 95e9])  # noisy and flat from k = 1
    assert 0 < fit.per_cta_bandwidth_Bps <= fit.peak_bandwidth_Bps


@pytest.mark.parametrize(
    ("xs", "ys", "problem"),
    [
        ([2**20], [1e-5], "distinct"),
        ([2**20, 2**20], [1e-5, 1e-5], "distinct"),
        ([2**20, 2**21], [1e-5], "length"),
        ([2**20, 0], [1e-5, 2e-5], "positive"),
        ([2**20, 2**21], [1e-5, -2e-5], "positive"),
        ([2**20, 2**21], [1e-5, float("nan")], "finite"),
        ([2**20, float("inf")], [1e-5, 2e-5], "finite"),
    ],
)
@pytest.mark.parametrize("fit", [fit_size_sweep, fit_cta_sweep])
def test_bad_input_raises(fit, xs, ys, problem):
    with pytest.raises(ValueError, match=problem):
        fit(xs, ys)


def test_fewer_than_one_cta_raises():
    with pytest.raises(ValueError, match="at least 1"):
        fit_cta_sweep([0.5, 1, 2], [10e9, 20e9, 40e9])


def test_times_that_do_not_grow_with_size_raise():
    with pytest.raises(ValueError, match="do not grow"):
        fit_size_sweep([2**20, 2**24, 2**28], [3e-3, 2e-3, 1e-3])


@pytest.mark.parametrize("fraction", [0.0, 1.0, 1.5])
def test_efficient_size_rejects_fraction_outside_open_unit_interval(fraction):
    with pytest.raises(ValueError, match="fraction"):
        efficient_size_bytes(fit_size_sweep(SIZES, _times(ALPHA, BETA)), fraction)


@settings(max_examples=100, deadline=None)
@given(alpha=st.floats(0.5e-6, 50e-6), beta=st.floats(10e9, 900e9))
def test_size_fit_recovers_any_exact_alpha_beta(alpha, beta):
    fit = fit_size_sweep(SIZES, _times(alpha, beta))
    assert fit.latency_s == pytest.approx(alpha, rel=1e-6)
    assert fit.bandwidth_Bps == pytest.approx(beta, rel=1e-6)


@settings(max_examples=100, deadline=None)
@given(per_cta=st.floats(1e9, 100e9), saturation=st.floats(1.0, 132.0))
def test_cta_fit_recovers_any_exact_curve_that_saturates_within_the_sweep(per_cta, saturation):
    fit = fit_cta_sweep(CTAS, _bandwidths(per_cta, saturation * per_cta))
    assert fit.per_cta_bandwidth_Bps == pytest.approx(per_cta, rel=1e-6)
    assert fit.peak_bandwidth_Bps == pytest.approx(saturation * per_cta, rel=1e-6)


# ---- envelopes: the fastest model no sample beats ----


def test_envelope_of_exact_alpha_beta_data_recovers_it():
    alpha, beta = 3e-6, 390e9
    sizes = [4096 * 4**i for i in range(10)]
    fit = envelope_size_sweep(sizes, [alpha + s / beta for s in sizes])
    assert fit.latency_s == pytest.approx(alpha, rel=1e-9)
    assert fit.bandwidth_Bps == pytest.approx(beta, rel=1e-9)


def test_envelope_stays_below_every_noisy_sample_and_touches_two():
    rng = np.random.default_rng(7)
    alpha, beta = 8e-6, 370e9
    sizes = np.array([4096 * 4**i for i in range(10)], dtype=float)
    times = (alpha + sizes / beta) * rng.uniform(1.0, 1.3, size=sizes.size)  # noise only adds time
    fit = envelope_size_sweep(sizes, times)
    model = fit.latency_s + sizes / fit.bandwidth_Bps
    assert np.all(model <= times * (1 + 1e-12))
    assert np.sum(np.isclose(model, times, rtol=1e-9)) >= 2  # a vertex of the LP: a line through two samples
    # noise ≥ 0 means the true parameters are feasible, and the envelope is at least as fast at every size
    assert fit.bandwidth_Bps >= beta * 0.999 or fit.latency_s <= alpha


def test_cta_envelope_is_the_smallest_dominating_model():
    ctas = [1, 2, 4, 8, 16, 32, 64, 132]
    bws = [30e9, 58e9, 110e9, 200e9, 300e9, 355e9, 366e9, 369e9]
    fit = envelope_cta_sweep(ctas, bws)
    assert fit.per_cta_bandwidth_Bps == pytest.approx(30e9)  # max b/k is at k = 1
    assert fit.peak_bandwidth_Bps == pytest.approx(369e9)
    assert all(min(k * fit.per_cta_bandwidth_Bps, fit.peak_bandwidth_Bps) >= b for k, b in zip(ctas, bws, strict=True))
    assert fit.ctas_for_90pct == math.ceil(0.9 * 369 / 30)


def test_regimes_recover_the_lines_a_protocol_switch_makes():
    from pkroof.topology.fit import envelope_regimes

    # t = min(5 µs + S/100 GB/s, 40 µs + S/400 GB/s): the lines cross at S = 35 µs / (1/100 − 1/400) ns/B ≈ 4.67 MB,
    # so of the sizes 4 KiB .. 1 GiB (×4) the six up to 4 MiB (4.19 MB) lie on the first line and the four from
    # 16 MiB on the second, and both lines come back exactly
    sizes = [4.0**k * 4096 for k in range(10)]
    times = [min(5e-6 + s / 100e9, 40e-6 + s / 400e9) for s in sizes]
    regimes = envelope_regimes(sizes, times)
    assert [(r.latency_s, r.bandwidth_Bps) for r in regimes] == [
        pytest.approx((5e-6, 100e9)),
        pytest.approx((40e-6, 400e9)),
    ]
    assert regimes[0].max_rel_error == pytest.approx(0, abs=1e-9)


def test_one_line_stays_one_regime_and_the_envelope_holds_under_noise():
    from pkroof.topology.fit import envelope_regimes

    sizes = [4.0**k * 4096 for k in range(10)]
    (line,) = envelope_regimes(sizes, [3e-6 + s / 300e9 for s in sizes])  # a third line would gain nothing
    assert (line.latency_s, line.bandwidth_Bps) == (pytest.approx(3e-6), pytest.approx(300e9))
    rng = np.random.default_rng(7)
    noisy = [(3e-6 + s / 300e9) * (1 + rng.uniform(0, 0.3)) for s in sizes]
    regimes = envelope_regimes(sizes, noisy)
    model = [min(r.latency_s + s / r.bandwidth_Bps for r in regimes) for s in sizes]
    assert all(m <= t * (1 + 1e-12) for m, t in zip(model, noisy, strict=True))  # never faster than a sample
    assert 1 <= len(regimes) <= 3
