"""Opportunities (runs/opportunities.py) on trace frames built by hand: which kernels are paired, which times count,
and the savings, each derived here from the model's advice as `pkroof advise` gives it."""

import pandas as pd
import pytest
from trace_frames import collective, gemm, kernel, result

import pkroof
from pkroof.rooflines.analyze import analyze
from pkroof.rooflines.builders import all_to_all_gemm, gemm_all_to_all
from pkroof.runs import opportunities
from pkroof.topology import resolve

TOPO = "hgx-h100-8"
MIB = 1 << 20
# llama3-70b-tp8's MLP down projection on one of 8 ranks: 8192 tokens, k = 28672 / 8, n = 8192 (the suite's shape)
M, N, K_LOCAL = 8192, 8192, 28672 // 8
C_BYTES = 2 * M * N  # bf16


def _advised_s(problem, **kw):
    return pkroof.advise(problem, topology=TOPO, **kw).t_s


def test_overlap_of_intervals_with_the_union_of_compute():
    # compute on rank 0: [0, 10) and [5, 20) (union [0, 20)), [30, 40); on rank 1: [0, 100)
    compute = pd.DataFrame({"rank": [0, 0, 0, 1], "start_us": [0.0, 5.0, 30.0, 0.0], "dur_us": [10.0, 15.0, 10.0, 100]})
    asked = pd.DataFrame({"rank": [0, 0, 0, 1], "t0_us": [15.0, 20.0, -5.0, 50.0], "t1_us": [35.0, 30.0, 50.0, 60.0]})
    covered = opportunities.overlapped_us(asked, compute)
    # [15, 35): 5 of [0, 20) + 5 of [30, 40); [20, 30): none; [-5, 50): 20 + 10; rank 1's [50, 60): all 10
    assert list(covered) == [5 + 5, 0, 20 + 10, 10]


def _far_all_reduce(fraction=0.3):
    # rank 0 starts at 100 µs, rank 1 at 300 µs (the last to arrive); both end at 1100 µs
    size = 64 * MIB
    kernels = [
        collective("all_reduce", size, 8, rank=0, start_us=100.0, dur_us=1000.0, seq=0, fraction_of_roof=fraction),
        collective("all_reduce", size, 8, rank=1, start_us=300.0, dur_us=800.0, seq=0, fraction_of_roof=fraction),
    ]
    matched = {"group": "0,1,2,3,4,5,6,7", "seq": 0, "collective": "all_reduce", "start_us_last": 300.0}
    return result(kernels, [matched])


def test_a_collective_far_below_its_roof_gets_the_advised_pair_and_its_saving():
    found = opportunities.find(_far_all_reduce(), TOPO)
    (row,) = found.itertuples()
    advised = pkroof.advise("all-reduce", topology=TOPO, size="64MiB")
    # each rank's time after the last rank arrived: 1100 − 300 = 800 µs on both
    assert row.measured_s == pytest.approx(2 * 800e-6)
    assert row.predicted_s == pytest.approx(2 * min(800e-6, advised.t_s))
    assert row.saving_s == pytest.approx(2 * (800e-6 - min(800e-6, advised.t_s)))
    assert (row.mechanism, row.schedule) == (advised.mechanism, advised.schedule)
    assert (row.kind, row.collective, row.bytes, row.group_size, row.instances) == ("collective", "all_reduce",
                                                                                    64 * MIB, 8, 2)  # fmt: skip
    assert row.rank is None and row.ranks == "0,1"
    assert "30% of its roof" in row.what and "correlation" in row.kernels


def test_a_collective_at_half_its_roof_or_better_is_no_opportunity():
    assert opportunities.find(_far_all_reduce(fraction=opportunities.FAR_BELOW_ROOF), TOPO).empty


def _gemm_rs(*, other=(), rs_bytes=C_BYTES, gemm_fields=None):
    """A GEMM on rank 0 from 0 to 500 µs, its reduce-scatter from 500 to 800 µs, at 90% of its roof (not far)."""
    kernels = [
        gemm(M, N, K_LOCAL, start_us=0.0, dur_us=500.0, correlation=10, **(gemm_fields or {})),
        collective("reduce_scatter", rs_bytes, 8, start_us=500.0, dur_us=300.0, correlation=11, fraction_of_roof=0.9),
        *other,
    ]
    return result(kernels)


def test_gemm_then_exposed_reduce_scatter_is_fused():
    # an elementwise kernel on another stream covers 600–650 µs of the reduce-scatter: 250 µs of it is exposed
    side = kernel(category="memory", stream=9, start_us=600.0, dur_us=50.0)
    (row,) = opportunities.find(_gemm_rs(other=[side]), TOPO).itertuples()
    advised = pkroof.advise("gemm-reduce-scatter", topology=TOPO, shape="llama3-70b-tp8")
    measured = 500e-6 + 250e-6
    assert row.measured_s == pytest.approx(measured)
    assert row.saving_s == pytest.approx(measured - min(measured, advised.t_s))
    assert (row.kind, row.gemm_m, row.gemm_n, row.gemm_k) == ("gemm-reduce-scatter", M, N, K_LOCAL)
    assert (row.mechanism, row.schedule) == (advised.mechanism, advised.schedule)
    assert row.rank == 0 and row.what.startswith(f"GEMM {M}×{N}×{K_LOCAL} bf16 → reduce-scatter of 128 MiB")


def test_a_copy_or_memset_does_not_hide_communication():
    # the steps' compute counts neither: the whole 300 µs stays exposed
    copy = kernel(category="copy", stream=9, start_us=500.0, dur_us=300.0)
    (row,) = opportunities.find(_gemm_rs(other=[copy]), TOPO).itertuples()
    assert row.measured_s == pytest.approx(500e-6 + 300e-6)


def test_a_fully_overlapped_reduce_scatter_is_not_paired():
    side = kernel(category="other", stream=9, start_us=450.0, dur_us=400.0)
    assert opportunities.find(_gemm_rs(other=[side]), TOPO).empty


def test_bytes_must_match_the_gemm_output_exactly():
    assert opportunities.find(_gemm_rs(rs_bytes=C_BYTES + 2 * 8), TOPO).empty


def test_a_batched_gemm_is_not_paired():
    assert opportunities.find(_gemm_rs(gemm_fields={"gemm_batch": 2.0}), TOPO).empty


def test_the_producer_is_the_last_gemm_to_end_before_the_collective_starts():
    # a second GEMM of the same shape ending at 600 µs, after the reduce-scatter starts, cannot be its producer;
    # another that ended earlier (at 100 µs) is not the last one: the one ending at 500 µs is paired
    early = gemm(M, N, K_LOCAL, start_us=-400.0, dur_us=500.0, correlation=8)
    late = gemm(M, N, K_LOCAL, stream=9, start_us=520.0, dur_us=80.0, correlation=12)
    (row,) = opportunities.find(_gemm_rs(other=[early, late]), TOPO).itertuples()
    # the late GEMM is compute and hides 80 µs of the 300; the paired GEMM is correlation 10, 500 µs
    assert "correlation 10, 11" in row.kernels
    assert row.measured_s == pytest.approx(500e-6 + (300e-6 - 80e-6))


def test_a_gemm_in_another_step_is_not_paired():
    (row,) = [r for r in _gemm_rs().kernels.to_dict("records") if r["category"] == "communication"]
    alone = result([gemm(M, N, K_LOCAL, start_us=0.0, dur_us=500.0, step=1), row | {"step": 2}])
    assert opportunities.find(alone, TOPO).empty


def test_all_gather_then_gemm():
    # the all-gather delivers A [m, k] = 8192 × 8192 bf16; the GEMM after it multiplies by B [8192, 57344 / 8]
    m, k, n = 8192, 8192, 2 * 28672 // 8
    kernels = [
        collective("all_gather", 2 * m * k, 8, start_us=0.0, dur_us=400.0, fraction_of_roof=0.9),
        gemm(m, n, k, start_us=410.0, dur_us=1200.0),
    ]
    (row,) = opportunities.find(result(kernels), TOPO).itertuples()
    advised = pkroof.advise("all-gather-gemm", topology=TOPO, shape="llama3-70b-tp8")
    measured = 1200e-6 + 400e-6
    assert row.kind == "all-gather-gemm" and row.measured_s == pytest.approx(measured)
    assert row.saving_s == pytest.approx(measured - min(measured, advised.t_s))


def _moe(m=8192, hidden=4096, ffn=14336):
    """An expert layer on rank 0: dispatch all-to-all (A: m × hidden), up projection, combine (C: m × hidden)."""
    return [
        collective("all_to_all", 2 * m * hidden, 8, start_us=0.0, dur_us=300.0, fraction_of_roof=0.9),
        gemm(m, ffn, hidden, start_us=300.0, dur_us=1000.0, correlation=2),
        gemm(m, hidden, ffn, start_us=1300.0, dur_us=1000.0, correlation=3),
        collective("all_to_all", 2 * m * hidden, 8, start_us=2300.0, dur_us=300.0, fraction_of_roof=0.9),
    ]


def test_moe_dispatch_and_combine_around_the_expert_gemms():
    found = opportunities.find(result(_moe()), TOPO)
    system = resolve(TOPO).system(8)
    dispatch = analyze(all_to_all_gemm(8, "bf16", m=8192, n=14336, k=4096), system).advice.best.t_s
    combine = analyze(gemm_all_to_all(8, "bf16", m=8192, n=4096, k=14336), system).advice.best.t_s
    by_kind = {r.kind: r for r in found.itertuples()}
    measured = 1000e-6 + 300e-6
    assert by_kind["all-to-all-gemm"].saving_s == pytest.approx(measured - min(measured, dispatch))
    assert by_kind["gemm-all-to-all"].saving_s == pytest.approx(measured - min(measured, combine))
    assert (by_kind["gemm-all-to-all"].gemm_n, by_kind["gemm-all-to-all"].gemm_k) == (4096, 14336)


def test_an_all_to_all_that_matches_both_ways_takes_the_nearer_gemm():
    # top-1 routing: the combine's bytes (m × hidden) are also the next layer's projection's A; the combine's
    # producer ended 0 µs before it, the next GEMM starts 50 µs after it: the producer wins
    r = result([*_moe()[1:], gemm(8192, 1024, 4096, start_us=2650.0, dur_us=100.0)])
    pairs = opportunities.fusion_pairs(r.kernels, opportunities.communication(r.kernels, r.collectives, resolve(TOPO)))
    assert list(pairs["fusion"]) == ["gemm-all-to-all"] and list(pairs["gap_us"]) == [0.0]


def test_instances_sum_over_steps_and_ranks_and_rank_order_is_by_saving():
    # the same GEMM → reduce-scatter in steps 1 and 2 on ranks 0 and 1: one opportunity of 4 instances
    rows = []
    for rank in (0, 1):
        for step in (1, 2):
            rows += [
                r | {"rank": rank, "step": step, "start_us": r["start_us"] + 1000 * step}
                for r in _gemm_rs().kernels.to_dict("records")
            ]
    rows += _far_all_reduce().kernels.to_dict("records")
    found = opportunities.find(result(rows, _far_all_reduce().collectives.to_dict("records")), TOPO)
    assert list(found["saving_s"]) == sorted(found["saving_s"], reverse=True)
    (fused,) = found[found["kind"] == "gemm-reduce-scatter"].itertuples()
    advised = _advised_s("gemm-reduce-scatter", shape="llama3-70b-tp8")
    assert fused.instances == 4 and fused.ranks == "0,1" and fused.rank is None
    assert fused.saving_s == pytest.approx(4 * (800e-6 - min(800e-6, advised)))


def test_a_shape_the_model_cannot_split_is_named_not_guessed():
    # m = 8190 rows do not reduce-scatter over 8 ranks
    kernels = [
        gemm(8190, N, K_LOCAL, start_us=0.0, dur_us=500.0),
        collective("reduce_scatter", 2 * 8190 * N, 8, start_us=500.0, dur_us=300.0, fraction_of_roof=0.9),
    ]
    found = opportunities.find(result(kernels), TOPO)
    assert found.empty and any("m=8190 is not divisible" in s for s in found.attrs["skipped"])


def test_the_saving_says_it_is_a_prediction():
    assert "predict" in opportunities.find(_far_all_reduce(), TOPO).attrs["note"]


def test_from_kineto_traces_to_a_fused_opportunity(tmp_path):
    """Two ranks' traces (tests/runs_traces.py), each a GEMM [0, 500) µs and its reduce-scatter [500, 800) µs,
    read by analyze_traces: one opportunity of 2 instances, the GEMM as aten::mm's shapes give it."""
    from runs_traces import Synthetic, nccl_args

    from pkroof.runs import analyze_traces

    m, n, k = 8192, 8192, 3584
    files = []
    for rank in (0, 1):
        t = Synthetic(rank=rank, world=2)
        t.step(1, -10, 1000)  # holds the GEMM's launch, 1 µs before it starts
        dims, types = [[m, k], [k, n]], ["c10::BFloat16"] * 2
        t.kernel("nvjet_tst_256x128_64x4_2x1_v_bz_coopB_TNN", 0, 500, op="aten::mm", dims=dims, types=types)
        rs = nccl_args("_reduce_scatter_base", m * n, "BFloat16", [0, 1], out=m * n // 2)
        t.kernel("ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL", 500, 300, stream=20, args=rs)
        files.append(t.write(tmp_path / f"rank{rank}.json"))
    r = analyze_traces(files, topology=TOPO)
    (row,) = r.opportunities[r.opportunities["kind"] == "gemm-reduce-scatter"].itertuples()
    advised = pkroof.advise("gemm-reduce-scatter", topology=TOPO, world_size=2,
                            params={"tokens": m, "in_features": 2 * k, "out_features": n})  # fmt: skip
    measured = 500e-6 + 300e-6  # the GEMM, and the whole reduce-scatter: both ranks arrived at 500 µs, nothing hides it
    assert (row.instances, row.ranks, row.group_size) == (2, "0,1", 2)
    assert row.saving_s == pytest.approx(2 * (measured - min(measured, advised.t_s)))


def test_a_pair_advised_serial_is_not_called_fused():
    # 64 × 64 × 64: the model advises its pair one after the other (serial), where overlapping does not pay
    kernels = [
        gemm(64, 64, 64, start_us=0.0, dur_us=50.0),
        collective("reduce_scatter", 2 * 64 * 64, 8, start_us=50.0, dur_us=60.0, fraction_of_roof=0.9),
    ]
    (row,) = opportunities.find(result(kernels), TOPO).itertuples()
    assert row.schedule == "serial" and "one after the other" in row.what and "fused" not in row.what
