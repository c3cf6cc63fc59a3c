"""The transfer model t(bytes, ctas) = α + bytes / min(ctas·β_cta, β_peak), derived by hand."""

import pytest

from pkroof.rooflines import Mechanism, TransferModel

TMA = TransferModel(Mechanism.TMA, True, 2e-6, 350e9, 350e9 / 15)
CE = TransferModel(Mechanism.COPY_ENGINE, True, 10e-6, 369e9, None)


def test_time_is_alpha_plus_bytes_over_cta_limited_bandwidth():
    # 4 CTAs × 23.3 GB/s = 93.3 GB/s < peak, so 1 GiB takes 2 µs + 2^30 / 93.3e9
    assert TMA.time_s(2**30, 4) == pytest.approx(2e-6 + 2**30 / (4 * 350e9 / 15))
    # 30 CTAs would give 700 GB/s: capped at the 350 GB/s peak
    assert TMA.time_s(2**30, 30) == pytest.approx(2e-6 + 2**30 / 350e9)


def test_copy_engine_takes_no_sms():
    assert not CE.uses_sms
    assert CE.ctas_for(0.9) == 0
    assert CE.time_s(2**30, 64) == CE.time_s(2**30)  # CTAs do not matter


def test_ctas_to_reach_a_fraction_of_peak():
    assert TMA.ctas_for(1.0) == 15  # 350 / (350/15)
    assert TMA.ctas_for(0.9) == 14  # ⌈0.9 × 15⌉ = ⌈13.5⌉


def test_efficient_size_is_nine_alpha_beta_at_ninety_percent():
    # S/(α + S/β) = 0.9β  ⇔  S = 9αβ: 9 × 10 µs × 369 GB/s = 33.21 MB
    s = CE.efficient_size_bytes(0.9)
    assert s == pytest.approx(9 * 10e-6 * 369e9)
    assert s / CE.time_s(s) == pytest.approx(0.9 * 369e9)


def test_steps_multiply_alpha():
    assert TMA.time_s(0, 4, num_steps=3) == pytest.approx(3 * 2e-6)


def test_a_collective_measured_on_its_own_uses_its_own_fit():
    nccl = TransferModel(Mechanism.NCCL, True, 3e-6, 300e9, 300e9 / 16, 16, 0.5e-6, (("all-gather", 2e-6, 240e9),))
    ag = nccl.for_collective("all-gather", 2**30)
    assert (ag.latency_s, ag.peak_bandwidth_Bps, ag.step_latency_s) == (2e-6, 240e9, 0.5e-6)
    # β_cta scales with β_peak, so the same 16 channels still saturate: 16 × 240/16 GB/s = 240 GB/s
    assert ag.per_cta_bandwidth_Bps == pytest.approx(240e9 / 16)
    assert ag.bandwidth_Bps(16) == pytest.approx(240e9)
    # 1 GiB in 3 dependent steps: 2 µs + 2 × 0.5 µs + 2^30 / 240 GB/s
    assert ag.time_s(2**30, 16, num_steps=3) == pytest.approx(3e-6 + 2**30 / 240e9)
    assert nccl.for_collective("all-reduce", 2**30) is nccl  # no fit of its own: the general model


def test_a_collective_in_regimes_runs_the_cheapest_at_each_size():
    # LL-like 5 µs + S/100 GB/s against Simple-like 40 µs + S/400 GB/s: equal where
    # 5e-6 + S/100e9 = 40e-6 + S/400e9  ⇔  S·(1/100e9 − 1/400e9) = 35e-6  ⇔  S = 35e-6 / 7.5e-12 ≈ 4.67 MB
    regimes = (("all-reduce", 5e-6, 100e9), ("all-reduce", 40e-6, 400e9))
    nccl = TransferModel(Mechanism.NCCL, True, 5e-6, 400e9, 400e9 / 16, 16, None, regimes)
    crossover = 35e-6 / (1 / 100e9 - 1 / 400e9)
    small, large = (
        nccl.for_collective("all-reduce", 0.9 * crossover),
        nccl.for_collective("all-reduce", 1.1 * crossover),
    )
    assert (small.latency_s, small.peak_bandwidth_Bps) == (5e-6, 100e9)
    assert (large.latency_s, large.peak_bandwidth_Bps) == (40e-6, 400e9)
    assert small.per_cta_bandwidth_Bps == pytest.approx(100e9 / 16)  # the same 16 channels, at the regime's rate
