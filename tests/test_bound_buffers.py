"""The copy engine's chunk count in closed form, what one rank must hold, NCCL's tuning and regimes, multimem,
burst rates, split-K GEMMs and the advice's margin, against derivations in each test."""

import dataclasses
import math

import pytest
from bound_cases import _gemm_rs, _waves_s, build
from conftest import make_system
from hypothesis import example, given, settings
from hypothesis import strategies as st

from pkroof.rooflines import Mechanism, Schedule, advise, bound

S = 2**30


# ---- the copy engine's chunk count in closed form, and what one rank must hold ----

MiB = 2**20


def _chunks_by_definition(bytes_per_peer: float) -> int:
    """The halving schedule as kernels/copy_engine.py cuts it: chunks of 4, 8, 16, 32, 64, 64, ... MiB (from the
    end) until they cover the bytes; one chunk at least."""
    chunks, size, covered = 1, 4 * MiB, 4 * MiB
    while covered < bytes_per_peer:
        size = min(2 * size, 64 * MiB)
        chunks, covered = chunks + 1, covered + size
    return chunks


# where the chunks' cover ends: 4, 4+8, 4+8+16, 4+8+16+32, 4+...+64 MiB, then 64 MiB more each
_COVER_ENDS = [4 * MiB * (2**c - 1) for c in range(1, 6)] + [124 * MiB + 64 * MiB * j for j in range(1, 6)]


@pytest.mark.parametrize("end", _COVER_ENDS)
@pytest.mark.parametrize("offset", [-1, -0.5, 0, 0.5, 1])
def test_copy_engine_chunks_in_closed_form_match_the_halving_schedule_at_every_boundary(end, offset):
    from pkroof.rooflines.costs import _ce_chunks

    assert _ce_chunks(end + offset) == _chunks_by_definition(end + offset)


@settings(max_examples=500, deadline=None)
@given(st.floats(min_value=0, max_value=64 * 2**30, allow_nan=False))
@example(0.0)
@example(1.0)
def test_copy_engine_chunks_in_closed_form_match_the_halving_schedule(bytes_per_peer):
    from pkroof.rooflines.costs import _ce_chunks

    assert _ce_chunks(bytes_per_peer) == _chunks_by_definition(bytes_per_peer)


def test_copy_engine_chunks_of_a_huge_buffer_take_no_time():
    # 124 MiB in the 5 doubling chunks, then ⌈(1e30 − 124 MiB) / 64 MiB⌉ chunks of 64 MiB: a loop would need ~1.5e22
    from pkroof.rooflines.costs import _ce_chunks

    assert _ce_chunks(1e30) == 5 + math.ceil((1e30 - 124 * MiB) / (64 * MiB))
    assert _ce_chunks(188 * MiB) == 6 and _ce_chunks(188 * MiB + 1) == 7


@pytest.mark.parametrize(
    ("kind", "expected"),
    [
        # nccl-tests' convention on 8 ranks, out of place: S the buffer, or all ranks' together (S/8 each)
        ("all-reduce", S + S),
        ("all-gather", S / 8 + S),  # send one rank's share, receive everyone's
        ("reduce-scatter", S + S / 8),  # send the whole input, receive one share
        ("all-to-all", S + S),
        ("scatter", S + S / 8),
        ("gather", S / 8 + S),
    ],
)
def test_a_collective_holds_its_send_and_receive_buffers(kind, expected):
    from pkroof.rooflines.bound import resident_bytes

    need, what = resident_bytes(build(kind, 8, size=S))
    assert need == pytest.approx(expected)
    assert kind in what


def test_a_gemm_holds_its_operands_and_a_workload_that_cannot_fit_is_refused():
    from pkroof.rooflines.bound import check_fits, resident_bytes

    # gemm-all-reduce: A (m×k), B (k×n) and C (m×n) in bf16 beside C's all-reduce (2·m·n·2 B): the GEMM's is larger
    m, n, k = 8192, 8192, 16384
    w = build("gemm-all-reduce", 8, m=m, n=n, k=k)
    need, what = resident_bytes(w)
    assert need == 2 * (m * k + k * n + m * n) and "gemm" in what
    check_fits(w, need, "GPU")  # exactly full is enough
    with pytest.raises(ValueError, match=r"gemm-all-reduce: the gemm .* needs 640 MiB on each rank, more than one "):
        check_fits(w, need - 1, "GPU")


def _with_nccl_tuning(system, tuning):
    ms = dict(system.mechanisms)
    ms[Mechanism.NCCL] = dataclasses.replace(ms[Mechanism.NCCL], nccl=tuning)
    return dataclasses.replace(system, mechanisms=ms)


def test_nccl_with_its_tuning_runs_what_nccl_picks_and_names_it():
    # NCCL's model on an NVLink node of 370.8 GB/s: at 1 GiB on 8 ranks NVLS beats the ring; its measured line prices
    # it, 40 µs + S at 270 GB/s, captured in a graph; waited on, 21 µs of host more; NCCL's 24 channels its SMs
    from pkroof.rooflines.nccl import NcclLine, NcclTuning

    tuning = NcclTuning(
        "2.27", 24, "nvlink", 370.8e9, 141e9, 36.7e9, 0.85, 16, 5,
        lines={"nvls/simple": (NcclLine(40e-6, 0.0, 270e9),)}, host_overhead_s=21e-6,
    )  # fmt: skip
    system = _with_nccl_tuning(make_system(multimem=True), tuning)
    p = bound(build("all-reduce", 8, size=S), system).prediction(Mechanism.NCCL, Schedule.SERIAL)
    assert (p.algorithms, p.protocols, p.comm_sms) == (("nvls",), ("simple",), 24)
    assert p.t_s == pytest.approx(40e-6 + S / 270e9)
    assert p.t_eager_s == pytest.approx(p.t_s + 21e-6)
    assert p.t_symmetric_s is None  # no symmetric kernels in this tuning
    # without multicast NCCL's default is no NVLS: the ring, priced by NCCL's model (no measured ring line)
    flat = _with_nccl_tuning(make_system(), dataclasses.replace(tuning, nvls_efficiency=0.0, nvls_channels=0))
    q = bound(build("all-reduce", 8, size=S), flat).prediction(Mechanism.NCCL, Schedule.SERIAL)
    assert (q.algorithms, q.protocols) == (("ring",), ("simple",))
    assert q.t_s == pytest.approx(8.4e-6 + 14 * 3.4e-6 + 2 * 7 / 8 * S / 370.8e9)


def test_a_probe_fitted_nccl_names_the_regime_that_prices_each_call():
    # make_system's NCCL has no fits: no regime; one fitted collective names which of its lines ran
    plain = bound(build("all-reduce", 8, size=S), make_system()).prediction(Mechanism.NCCL, Schedule.SERIAL)
    assert plain.protocols == ("simple",) and plain.t_eager_s is None
    system = make_system()
    ms = dict(system.mechanisms)
    fits = (("all-reduce", 3e-6, 100e9), ("all-reduce", 30e-6, 300e9))
    ms[Mechanism.NCCL] = dataclasses.replace(ms[Mechanism.NCCL], collective_fits=fits)
    fitted = dataclasses.replace(system, mechanisms=ms)
    small = bound(build("all-reduce", 8, size=4096), fitted).prediction(Mechanism.NCCL, Schedule.SERIAL)
    large = bound(build("all-reduce", 8, size=S), fitted).prediction(Mechanism.NCCL, Schedule.SERIAL)
    assert (small.protocols, large.protocols) == (("fit 1/2",), ("fit 2/2",))


def test_multimem_all_reduce_is_predicted_at_n_plus_one_over_n_of_the_size_and_the_roof_keeps_the_size():
    # in-network all-reduce on 8 ranks: each rank's own chunk crosses its link too, so (8+1)/8·S each way at the
    # 400 GB/s peak (100 CTAs × 80 GB/s above it); 2 steps + a flag × 2 µs; staging S sent and S received through HBM
    # (3 TB/s). The roof keeps S at 400 GB/s
    system = make_system(multimem=True)
    b = bound(build("all-reduce", 8, size=S), system)
    p = b.prediction(Mechanism.MULTIMEM, Schedule.SERIAL)
    assert p.t_s == pytest.approx(9 / 8 * S / 400e9 + 3 * 2e-6 + 2 * S / 3e12)
    assert b.t_link_s == pytest.approx(S / 400e9)


def test_a_short_gemm_is_predicted_at_the_burst_rate_where_one_is_measured():
    # a datasheet peak of 1000 TFLOP/s that no matmul reaches, 800 measured for one call alone: 8192³ (1.1 ms at the
    # peak, under SUSTAINED_AFTER_S) is predicted by its 21 waves at 800e12; the roof keeps the peak
    system = dataclasses.replace(make_system(), burst_flops={"bf16": 800e12})
    m = n = k = 8192
    b = _gemm_rs(k, system, m=m, n=n)
    comm_s = 7 / 8 * m * n * 2 / 300e9 + 7 * 3e-6
    assert b.prediction(Mechanism.NCCL, Schedule.SERIAL).t_s == pytest.approx(_waves_s(m, n, k, 800e12) + comm_s)
    assert b.t_compute_s == pytest.approx(2 * m * n * k / 1000e12)


def test_a_gemm_of_few_tiles_splits_along_k_and_pays_its_padded_rows():
    # M = 64, N = 2048, K = 8192 on 100 SMs: 1 × 8 tiles of 128×256 (the M rows padded to 128), split along K as
    # far as the SMs allow (100 // 8 = 12) and each piece keeps K ≥ 2048 (8192 // 2048 = 4): 4 ways, 32 pieces, one
    # wave of 2·128·256·8192 / 4 FLOP per SM at 1000e12 / 100; more than the FLOPs at the peak (half the tile rows
    # are padding). HBM at 300 TB/s, so that it does not bind (at 3 TB/s it would)
    from pkroof.rooflines.builders import gemm

    m, n, k = 64, 2048, 8192
    p = bound(gemm(m, n, k, "bf16"), make_system(hbm=300e12)).prediction(Mechanism.NCCL, Schedule.SERIAL)
    split = min(100 // 8, k // 2048)
    waves_s = 1 * 2 * 128 * 256 * k / split * 100 / 1000e12
    assert waves_s > 2 * m * n * k / 1000e12 and waves_s > 2 * (m * k + k * n + m * n) / 300e12
    assert p.t_s == pytest.approx(waves_s)
    # K = 1024 is too short to split: one wave of whole tiles
    short = bound(gemm(m, n, 1024, "bf16"), make_system(hbm=300e12)).prediction(Mechanism.NCCL, Schedule.SERIAL)
    assert short.t_s == pytest.approx(2 * 128 * 256 * 1024 * 100 / 1000e12)


def test_a_pair_within_the_models_error_of_nccls_default_is_not_advised():
    # NCCL 300 GB/s ring on 8 ranks against SM loads at 400 GB/s two-shot: at 1 GiB the SM kernel is predicted 1.2×
    # faster (beyond WIN = 1.1): advised. Give NCCL 350 GB/s and the gain falls under 1.1: NCCL's default is advised,
    # with no headroom, and the faster pair is kept as the one not advised
    from pkroof.rooflines.advice import WIN

    w = build("all-reduce", 8, size=S)
    a = advise(bound(w, make_system()))
    assert a.best.mechanism is not Mechanism.NCCL and a.headroom >= WIN and a.fastest is None
    close = advise(bound(w, make_system(nccl_peak=350e9)))
    assert close.best.mechanism is Mechanism.NCCL and close.headroom == 1.0
    assert close.fastest is not None and close.fastest.t_s < close.baseline.t_s < WIN * close.fastest.t_s
    assert "no gain the model can claim" in close.reason
