"""The roofline and the predictions, against derivations written out in each test."""

import dataclasses
import math

import pytest
from bound_cases import COLLECTIVES, NAMES, build
from conftest import make_system
from hypothesis import example, given, settings
from hypothesis import strategies as st

from pkroof.rooflines import Algorithm, Mechanism, Protocol, Schedule, advise, bound, predict

S = 2**30


def test_all_gather_roof_is_direct_traffic_at_best_peak(system):
    # one-shot all-gather on 8 ranks: 7/8·S on the link; best peak among mechanisms: sm-*/tma 400 GB/s
    # latency: one step at the smallest α (2 µs); HBM: read S/8, write S at 3 TB/s
    b = bound(build("all-gather", 8, size=S), system)
    assert b.link_bytes_per_rank == pytest.approx(7 / 8 * S)
    assert b.link_bandwidth_Bps == pytest.approx(400e9)
    assert b.t_link_s == pytest.approx(7 / 8 * S / 400e9)
    assert b.t_latency_s == pytest.approx(2e-6)
    assert b.t_hbm_s == pytest.approx((S / 8 + S) / 3e12)
    assert b.t_roof_s == pytest.approx(7 / 8 * S / 400e9 + 2e-6)
    assert b.limiter == "link"


def test_all_reduce_roof_without_and_with_in_network_reduction():
    plain = bound(build("all-reduce", 8, size=S), make_system())
    assert plain.link_bytes_per_rank == pytest.approx(2 * 7 / 8 * S)
    nvls = bound(build("all-reduce", 8, size=S), make_system(multimem=True))
    assert nvls.link_bytes_per_rank == pytest.approx(S)  # the switch reduces: S each way
    assert nvls.prediction(Mechanism.MULTIMEM, Schedule.SERIAL) is not None
    assert plain.prediction(Mechanism.MULTIMEM, Schedule.SERIAL) is None


def test_tiny_messages_are_latency_bound(system):
    b = bound(build("all-reduce", 8, size=1024), system)
    assert b.limiter == "latency"
    # one-shot SM all-reduce: (1 step + the flag telling peers the data is there) × 2 µs, + 7 KiB at 100 SMs ×
    # 20 GB/s (capped at 400 GB/s), + staging: the 7 KiB sent and 7 KiB received each cross HBM once more (3 TB/s)
    p = b.prediction(Mechanism.SM_LOAD, Schedule.SERIAL)
    assert p.t_s == pytest.approx(2 * 2e-6 + 7 * 1024 / 400e9 + (7 * 1024 + 7 * 1024) / 3e12)
    assert p.algorithms == ("one-shot",)


def test_collectives_move_bytes_at_the_both_ways_rate_and_the_roof_keeps_the_one_way_rate():
    # SM loads measured 300 GB/s per direction with both directions busy (one way: 400 GB/s). A 1 GiB all-gather
    # on 2 ranks sends S/2 and receives S/2 at once: one-shot pull = 1 step + 1 flag × 2 µs + (S/2) at 300 GB/s
    # (100 CTAs × 20 GB/s scaled by 300/400 = 1.5 TB/s, above the peak) + staging S/2 sent and S/2 received
    # through HBM at 3 TB/s. The roof is a bound, so it keeps the faster one-way rate: (S/2) at 400 GB/s + α
    plain = make_system(n=2)
    ms = dict(plain.mechanisms)
    ms[Mechanism.SM_LOAD] = dataclasses.replace(ms[Mechanism.SM_LOAD], duplex_bandwidth_Bps=300e9)
    system = dataclasses.replace(plain, mechanisms=ms)
    b = bound(build("all-gather", 2, size=S), system)
    p = b.prediction(Mechanism.SM_LOAD, Schedule.SERIAL)
    assert p.t_s == pytest.approx(2 * 2e-6 + (S / 2) / 300e9 + S / 3e12)
    assert b.t_link_s == pytest.approx((S / 2) / 400e9)
    assert b.t_link_s == bound(build("all-gather", 2, size=S), plain).t_link_s
    # a both-ways rate above the one-way peak (a noisy probe) never makes a mechanism faster than one way
    ms[Mechanism.SM_LOAD] = dataclasses.replace(ms[Mechanism.SM_LOAD], duplex_bandwidth_Bps=500e9)
    faster = dataclasses.replace(plain, mechanisms=ms)
    q = predict(build("all-gather", 2, size=S), faster, Mechanism.SM_LOAD, Schedule.SERIAL)
    assert q.t_s == pytest.approx(
        predict(build("all-gather", 2, size=S), plain, Mechanism.SM_LOAD, Schedule.SERIAL).t_s
    )


def test_a_measured_hand_off_is_paid_once_per_staged_collective_and_never_by_nccl():
    # the same tiny all-reduce as above with a 3.5 µs hand-off measured for SM loads and 15 µs for the copy engine
    # (and, to show NCCL ignores it, 100 µs for NCCL): sm-load = 2·2 µs + 3.5 µs + 7 KiB at 400 GB/s + staging
    plain = make_system()
    ms = dict(plain.mechanisms)
    for mech, h in ((Mechanism.SM_LOAD, 3.5e-6), (Mechanism.COPY_ENGINE, 15e-6), (Mechanism.NCCL, 100e-6)):
        ms[mech] = dataclasses.replace(ms[mech], handoff_s=h)
    system = dataclasses.replace(plain, mechanisms=ms)
    w = build("all-reduce", 8, size=1024)
    p = predict(w, system, Mechanism.SM_LOAD, Schedule.SERIAL)
    assert p.t_s == pytest.approx(2 * 2e-6 + 3.5e-6 + 7 * 1024 / 400e9 + (7 * 1024 + 7 * 1024) / 3e12)
    for mech, extra in ((Mechanism.COPY_ENGINE, 15e-6), (Mechanism.NCCL, 0.0), (Mechanism.SM_STORE, 0.0)):
        before, after = predict(w, plain, mech, Schedule.SERIAL), predict(w, system, mech, Schedule.SERIAL)
        assert after.t_s - before.t_s == pytest.approx(extra), mech
    # the roof is what any implementation could reach: no hand-off in it
    assert bound(w, system).t_roof_s == bound(w, plain).t_roof_s


def test_nccl_serial_baseline_is_ring_at_its_channels():
    # ring all-reduce: 2·7 steps × 3 µs + 2·7/8·S at 16 channels × 18.75 GB/s = 300 GB/s
    b = bound(build("all-reduce", 8, size=S), make_system())
    p = b.prediction(Mechanism.NCCL, Schedule.SERIAL)
    assert p.algorithms == ("ring",)
    assert p.comm_sms == 16
    assert p.t_s == pytest.approx(14 * 3e-6 + 2 * 7 / 8 * S / 300e9)


def test_copy_engine_all_reduce_pays_the_last_chunk_of_a_local_reduction():
    # two-shot by copies (2·7/8·S at 380 GB/s, 2 steps + 1 flag × 10 µs) + a reduce kernel reading S, writing
    # S/8 at 3 TB/s, pipelined behind the DMAs: each of the 7 peers gets 2·S/8 = 256 MiB, the last chunk 4 MiB, so
    # 4/256 = 1/64 of the reduction is exposed; + staging through symmetric memory (2·7/8·S sent and as much
    # received, once more through HBM), pipelined the same way: 1/64 of it. 256 MiB per peer is 8 chunks (4, 8, 16,
    # 32, 64 MiB from the end: 124 MiB, then 64 MiB ones: 188, 252, 316 ≥ 256), each after the first one more α
    b = bound(build("all-reduce", 8, size=S), make_system())
    p = b.prediction(Mechanism.COPY_ENGINE, Schedule.SERIAL)
    assert p.algorithms == ("two-shot",)
    link = 2 * 7 / 8 * S
    chunks = 8
    assert p.t_s == pytest.approx(
        (3 + chunks - 1) * 10e-6 + link / 380e9 + (S + S / 8) / 64 / 3e12 + 2 * link / 3e12 / 64
    )


def test_copy_engine_reduction_is_exposed_whole_when_one_chunk_holds_it():
    # 4 MiB on 2 ranks, one-shot: S = 4 MiB to the one peer, one 4 MiB chunk: nothing to pipeline behind, so the
    # whole reduction (read 2 buffers, write 1: 3·S) is exposed: 1 step + 1 flag × 10 µs + S at 380 GB/s + 3·S at
    # 3 TB/s + staging S sent and S received through HBM = 38.0 µs. Two-shot sends S as well but pays one more
    # step (10 µs) to save half the reduction (1.5·S: 2.1 µs): 45.9 µs
    size = 4 << 20
    b = bound(build("all-reduce", 2, size=size), make_system(n=2))
    p = b.prediction(Mechanism.COPY_ENGINE, Schedule.SERIAL)
    assert p.algorithms == ("one-shot",)
    assert p.t_s == pytest.approx(2 * 10e-6 + size / 380e9 + 3 * size / 3e12 + 2 * size / 3e12)


def _gemm_rs(k, system, m=32768, n=32768):
    return bound(build("gemm-reduce-scatter", system.world_size, m=m, n=n, k=k), system)


def test_gemm_reduce_scatter_hiding_threshold():
    # compute 2·M·N·K/R hides the reduce-scatter (P−1)/P·M·N·s/B iff K ≥ (P−1)/P·s·R/(2B)
    system = make_system(flops=1000e12, peak=400e9)
    k_star = 7 / 8 * 2 * 1000e12 / (2 * 400e9)  # = 2187.5
    below, above = _gemm_rs(int(k_star * 0.8), system), _gemm_rs(int(k_star * 1.25), system)
    assert below.limiter == "link" and above.limiter == "compute"
    advice = advise(below)
    assert advice.facts["k_threshold"] == pytest.approx(k_star, rel=1e-9)
    assert "k*=2188" in advice.reason


def test_inter_sm_compute_runs_on_the_remaining_sms():
    system = make_system()
    b = _gemm_rs(4096, system)
    p = b.prediction(Mechanism.TMA, Schedule.INTER_SM)
    k = p.comm_sms
    assert 0 < k < system.sm_count
    flops = 2 * 32768 * 32768 * 4096
    # 256 · 128 = 32768 tiles of 128 x 256, each 2·128·256·4096 FLOP at one SM's 10 TFLOP/s, in whole waves
    waves_s = -(-32768 // (system.sm_count - k)) * 2 * 128 * 256 * 4096 / 10e12
    assert p.compute_s == pytest.approx(max(flops / 1000e12 * system.sm_count / (system.sm_count - k), waves_s))


def test_inter_sm_gemm_takes_at_least_its_waves_of_whole_tiles():
    # inter-SM's GEMM owns whole 128 x 256 tiles on the SMs communication leaves it, each at one SM's share of the
    # peak (1000 TFLOP/s / 100 SMs = 10 TFLOP/s): compute = max(FLOPs / peak · SMs / (SMs − k),
    # ⌈tiles / (SMs − k)⌉ · 2·128·256·K / 10e12)
    system = make_system(n=2)
    # 128 x 512 x 512: 2 tiles of 2·128·256·512 = 33.554432 MFLOP, 3.3554432 µs each, side by side: one wave.
    # FLOPs alone: 2·128·512·512 / 1e15 · 100 / 68 = 0.0987 µs, 34x less
    w = _gemm_rs(512, system, m=128, n=512).workload
    p = predict(w, system, Mechanism.SM_STORE, Schedule.INTER_SM, comm_sms=32)
    assert p.compute_s == pytest.approx(2 * 128 * 256 * 512 / 10e12)
    # 3200 x 2560 x 8192: 25 · 10 = 250 tiles of 2·128·256·8192 / 10e12 = 53.687 µs. On 50 SMs: 5 full waves,
    # the same as FLOPs / peak · 100 / 50 = 268.4 µs. On 60: still 5 waves (250/60 = 4.17), not 223.7 µs
    w = _gemm_rs(8192, system, m=3200, n=2560).workload
    tile_s = 2 * 128 * 256 * 8192 / 10e12
    flops = 2 * 3200 * 2560 * 8192
    even = predict(w, system, Mechanism.SM_STORE, Schedule.INTER_SM, comm_sms=50)
    assert even.compute_s == pytest.approx(5 * tile_s) and even.compute_s == pytest.approx(flops / 1e15 * 2)
    uneven = predict(w, system, Mechanism.SM_STORE, Schedule.INTER_SM, comm_sms=40)
    assert uneven.compute_s == pytest.approx(5 * tile_s) and uneven.compute_s > flops / 1e15 * 100 / 60 * 1.19
    # intra-SM and the copy engine run cuBLAS, which picks smaller tiles for small problems: FLOPs at the peak
    w = _gemm_rs(512, system, m=128, n=512).workload
    for mechanism, schedule in [(Mechanism.SM_STORE, Schedule.INTRA_SM), (Mechanism.COPY_ENGINE, Schedule.CE_OVERLAP)]:
        p = predict(w, system, mechanism, schedule)
        assert p.compute_s < 2 * 128 * 512 * 512 / 1e15 * 2  # FLOPs-bound, never a 3.36 µs tile


def test_an_inter_sm_pipeline_is_no_deeper_than_its_waves_of_tiles():
    # communication SMs follow the GEMM's tiles as they finish; the tiles of one wave finish together, so a
    # one-wave GEMM leaves nothing to overlap: fill = min(compute, comm) / min(shards, waves), shards = 2 ranks
    system = make_system(n=2)
    one_wave = predict(_gemm_rs(512, system, m=128, n=512).workload, system, Mechanism.SM_STORE,
                       Schedule.INTER_SM, comm_sms=32)  # fmt: skip
    assert one_wave.fill_s == pytest.approx(min(one_wave.compute_s, one_wave.comm_s))  # 2 tiles on 68 SMs
    five_waves = predict(_gemm_rs(8192, system, m=3200, n=2560).workload, system, Mechanism.SM_STORE,
                         Schedule.INTER_SM, comm_sms=50)  # fmt: skip
    assert five_waves.fill_s == pytest.approx(min(five_waves.compute_s, five_waves.comm_s) / 2)  # 250 on 50


def test_a_declared_pair_is_predicted_at_its_own_sm_count():
    system = make_system()
    b = _gemm_rs(4096, system)
    w = b.workload
    # no count declared: the same prediction the bound makes (its best count)
    best = b.prediction(Mechanism.TMA, Schedule.INTER_SM)
    assert predict(w, system, Mechanism.TMA, Schedule.INTER_SM) == best
    # 50 SMs declared: the GEMM runs on the other 50 of 100, so its time doubles against all 100, and its 32768
    # tiles take ⌈32768 / 50⌉ = 656 waves where 655.36 would do: × 656 / 655.36
    p = predict(w, system, Mechanism.TMA, Schedule.INTER_SM, comm_sms=50)
    flops = 2 * 32768 * 32768 * 4096
    assert p.comm_sms == 50 and p.compute_s == pytest.approx(flops / 1000e12 * 100 / 50 * 656 / 655.36)
    assert p.t_s >= best.t_s >= b.t_roof_s
    # a mechanism the system lacks, or a schedule that does not apply to a lone collective: no prediction
    assert predict(w, system, Mechanism.MULTIMEM, Schedule.SERIAL) is None
    collective = bound(build("all-reduce", 8, size=S), system).workload
    assert predict(collective, system, Mechanism.TMA, Schedule.INTER_SM) is None


def test_intra_sm_overlaps_by_waves_of_tiles():
    # tiles finish a wave at a time on the SMs and each wave's epilogue sends while the next computes, so only
    # one wave's share of the shorter side is exposed: fill = min(compute, comm) / ceil(tiles / SMs).
    # 3200 x 2560 in 128 x 256 tiles = 25 x 10 = 250 tiles on 100 SMs: 3 waves (the last one half full)
    system = make_system(n=2)
    p = _gemm_rs(8192, system, m=3200, n=2560).prediction(Mechanism.SM_STORE, Schedule.INTRA_SM)
    assert p.fill_s == pytest.approx(min(p.compute_s, p.comm_s) / 3)
    assert p.t_s == pytest.approx(max(p.compute_s, p.comm_s) + p.latency_s + p.fill_s)  # HBM is far below both


def test_a_single_tile_is_predicted_intra_sm_only_when_a_kernel_declares_it():
    # one 128 x 256 tile: one wave, so the epilogue sends after the whole compute: the serial sum of the two
    # (plus the latency), on the SMs the pair leaves the GEMM. The bound does not offer intra-SM for it (no
    # overlap to gain), but a kernel that runs that pair at this shape gets its prediction
    system = make_system(n=2)
    b = _gemm_rs(128, system, m=128, n=256)
    assert b.prediction(Mechanism.SM_STORE, Schedule.INTRA_SM) is None
    p = predict(b.workload, system, Mechanism.SM_STORE, Schedule.INTRA_SM)
    assert p is not None and p.fill_s == pytest.approx(min(p.compute_s, p.comm_s))
    assert p.t_s == pytest.approx(p.compute_s + p.comm_s + p.latency_s)


def test_a_fused_kernels_measured_fixed_cost_is_charged_to_its_schedule_only():
    # 7 µs measured for SM-store inter-SM fused kernels: that pair's prediction grows by exactly 7 µs at the same
    # comm SMs; SM-store serial and intra-SM, and every other mechanism, are untouched
    plain = make_system(n=2)
    ms = dict(plain.mechanisms)
    ms[Mechanism.SM_STORE] = dataclasses.replace(ms[Mechanism.SM_STORE], overlap_s=(("inter-sm", 7e-6),))
    charged = dataclasses.replace(plain, mechanisms=ms)
    w = _gemm_rs(4096, plain).workload
    before = {s: predict(w, plain, Mechanism.SM_STORE, s, 10).t_s for s in Schedule if s is not Schedule.CE_OVERLAP}
    after = {s: predict(w, charged, Mechanism.SM_STORE, s, 10).t_s for s in before}
    assert after[Schedule.INTER_SM] == pytest.approx(before[Schedule.INTER_SM] + 7e-6)
    assert after[Schedule.SERIAL] == before[Schedule.SERIAL] and after[Schedule.INTRA_SM] == before[Schedule.INTRA_SM]
    assert bound(w, charged).t_roof_s == bound(w, plain).t_roof_s  # a kernel's cost, never the roof's


def test_every_schedule_appears_for_a_fused_gemm(system):
    b = _gemm_rs(4096, system)
    pairs = {(p.mechanism, p.schedule) for p in b.predictions}
    assert (Mechanism.TMA, Schedule.INTRA_SM) in pairs
    assert (Mechanism.SM_STORE, Schedule.INTER_SM) in pairs
    assert (Mechanism.COPY_ENGINE, Schedule.CE_OVERLAP) in pairs
    assert (Mechanism.NCCL, Schedule.SERIAL) in pairs
    assert (Mechanism.COPY_ENGINE, Schedule.INTRA_SM) not in pairs  # the copy engine has no SMs to share


def test_pure_collectives_only_have_serial_predictions(system):
    b = bound(build("all-to-all", 8, size=S), system)
    assert {p.schedule for p in b.predictions} == {Schedule.SERIAL}


def _waves_s(m, n, k, rate, sms=100):
    """A GEMM alone on every SM: whole waves of 128×256 tiles, each SM at 1/sms of the rate (split-K only where the
    tiles leave SMs idle, not here): ⌈tiles / SMs⌉ · 2·128·256·K / (rate / SMs)."""
    tiles = math.ceil(m / 128) * math.ceil(n / 256)
    return math.ceil(tiles / sms) * 2 * 128 * 256 * k * sms / rate


def test_serial_baseline_is_compute_then_comm():
    # GEMM alone: max(its waves of tiles, HBM bytes/BW) — 32768² has 256·128 = 32768 tiles, 328 waves on 100 SMs,
    # not 327.68; then the NCCL ring reduce-scatter 7/8·M·N·2 at 300 GB/s, 7 steps
    system = make_system()
    m = n = 32768
    k = 4096
    b = _gemm_rs(k, system)
    p = b.prediction(Mechanism.NCCL, Schedule.SERIAL)
    gemm_s = max(_waves_s(m, n, k, 1000e12), 2 * (m * k + k * n + m * n) / 3e12)
    comm_s = 7 / 8 * m * n * 2 / 300e9 + 7 * 3e-6
    assert p.t_s == pytest.approx(gemm_s + comm_s)


def test_a_long_gemm_is_predicted_at_the_sustained_rate_and_the_roof_keeps_the_peak():
    # peak 1000 TFLOP/s, sustained 800. M = N = 32768, K = 4096: 2·M·N·K = 8.80e12 FLOP, 8.8 ms at the peak,
    # past SUSTAINED_AFTER_S (2 ms), so the prediction charges its waves at 800e12: 11.0 ms; the roof keeps 8.8 ms
    system = dataclasses.replace(make_system(), sustained_flops={"bf16": 800e12})
    m = n = 32768
    k = 4096
    b = _gemm_rs(k, system)
    flops = 2 * m * n * k
    comm_s = 7 / 8 * m * n * 2 / 300e9 + 7 * 3e-6
    assert b.prediction(Mechanism.NCCL, Schedule.SERIAL).t_s == pytest.approx(_waves_s(m, n, k, 800e12) + comm_s)
    assert b.t_compute_s == pytest.approx(flops / 1000e12)
    assert b.peak_flops == pytest.approx(1000e12)


def test_a_short_gemm_is_predicted_at_the_peak_even_where_a_sustained_rate_is_known():
    # M = N = K = 8192: 2·8192³ = 1.10e12 FLOP, 1.10 ms at the peak (< 2 ms): the GPU does not reach its power
    # limit within one timed sample, so the prediction charges the peak (its 21 waves of 2048 tiles on 100 SMs);
    # its HBM time 2·3·8192²/3e12 = 0.13 ms
    system = dataclasses.replace(make_system(), sustained_flops={"bf16": 800e12})
    m = n = k = 8192
    b = _gemm_rs(k, system, m=m, n=n)
    comm_s = 7 / 8 * m * n * 2 / 300e9 + 7 * 3e-6
    assert b.prediction(Mechanism.NCCL, Schedule.SERIAL).t_s == pytest.approx(_waves_s(m, n, k, 1000e12) + comm_s)


def test_a_system_without_a_sustained_rate_predicts_at_the_peak():
    plain, same = make_system(), dataclasses.replace(make_system(), sustained_flops={"bf16": 1000e12})
    for system in (plain, same):
        assert system.sustained_flops_for("bf16") == 1000e12
    assert _gemm_rs(4096, plain).predictions == _gemm_rs(4096, same).predictions


def test_multi_node_all_reduce_binds_on_the_nic():
    # 2 nodes × 8. Inside the node: 2·7/8·S at 400 GB/s = 4.375 ps per byte of S.
    # Across: all-reduce of S/8 over 2 nodes = 2·(1/2)·S/8 = S/8 at 20 GB/s per GPU = 6.25 ps/B: the NIC binds.
    system = make_system(n=16, per_node=8, net_peak=20e9)
    b = bound(build("all-reduce", 16, size=S), system)
    assert b.link_tier == "scale-out"
    assert b.link_bytes_per_rank == pytest.approx(S / 8)
    assert b.t_link_s == pytest.approx(S / 8 / 20e9)
    faster_nic = bound(build("all-reduce", 16, size=S), make_system(n=16, per_node=8, net_peak=50e9))
    assert faster_nic.link_tier == "scale-up"  # S/8 at 50 GB/s = 2.5 ps/B < 4.375
    assert faster_nic.t_link_s == pytest.approx(2 * 7 / 8 * S / 400e9)


def test_a_two_node_all_reduce_on_hgx_h100_carries_both_tiers_terms_by_hand():
    # hgx-h100-8 on 2 nodes, 16 ranks: g = 8 a node, N = 2 nodes. The hierarchical all-reduce reduce-scatters S in
    # the node, all-reduces each GPU's S/8 across the nodes on its own rail, then all-gathers in the node.
    # Scale-up: NVLS (multimem, at the switch ports' 18 links × 25 GB/s = 450 GB/s) reduce-scatters by sending
    # 7/8·S and receiving S/8, then all-gathers by sending S/8 and receiving 7/8·S: S each way, at 450 GB/s
    # (one-shot by SM stores would move 2·7/8·S at no more than 400 GB/s: slower).
    # Scale-out: a ring all-reduce of S/8 over 2 nodes moves 2·(N−1)/N·S/8 = S/8 each way, at one GPU's share of
    # its node's NICs: 8 × 400 Gb/s ConnectX-7 over 8 ranks = 50 GB/s.
    # S/8 at 50 GB/s = S/400e9 is longer than S at 450 GB/s: scale-out binds.
    from pkroof.topology import resolve

    b = bound(build("all-reduce", 16, size=S), resolve("hgx-h100-8", nodes=2).system(16))
    up, out = b.link_terms["scale-up"], b.link_terms["scale-out"]
    assert up.bytes_per_rank == pytest.approx(S) and up.bandwidth_Bps == pytest.approx(450e9)
    assert up.t_s == pytest.approx(S / 450e9)
    assert out.bytes_per_rank == pytest.approx(2 * (2 - 1) / 2 * S / 8) and out.bandwidth_Bps == pytest.approx(50e9)
    assert out.t_s == pytest.approx(S / 8 / 50e9)
    assert b.link_tier == "scale-out" and b.t_link_s == out.t_s == max(up.t_s, out.t_s)
    assert b.t_roof_s == pytest.approx(max(b.t_compute_s, b.t_hbm_s, S / 8 / 50e9) + b.t_latency_s)


def test_one_node_has_no_scale_out_term_and_a_group_inside_a_node_puts_nothing_on_the_nic():
    # one node of 8: the scale-up term alone, 2·7/8·S at 400 GB/s (no multimem in this system)
    one = bound(build("all-reduce", 8, size=S), make_system())
    assert set(one.link_terms) == {"scale-up"}
    assert one.link_terms["scale-up"].t_s == pytest.approx(2 * 7 / 8 * S / 400e9) == one.t_link_s
    # 2 nodes of 8, an all-reduce among 8 ranks of one node: nothing leaves it; the NIC's term is 0, at its 50 GB/s
    inside = bound(build("all-reduce", 8, size=S), make_system(n=16, per_node=8, net_peak=50e9))
    out = inside.link_terms["scale-out"]
    assert (out.t_s, out.bytes_per_rank, out.bandwidth_Bps) == (0.0, 0.0, 50e9)
    assert inside.link_tier == "scale-up" and inside.t_link_s == pytest.approx(2 * 7 / 8 * S / 400e9)


def test_each_tier_carries_the_bytes_of_every_op_that_crosses_it():
    # 2 nodes of 8 (g = 8, N = 2), SM mechanisms at 400 GB/s, 50 GB/s of NIC per GPU; an all-to-all of S, then an
    # all-reduce of S, in order.
    # all-to-all: (N−1)/N·S = S/2 leaves the node; (g−1)/(N·g)·S = 7/16·S stays inside: it binds on the NIC
    #   (S/2 at 50 GB/s = 10 ps per byte of S, against 7/16·S at 400 GB/s = 1.09 ps).
    # all-reduce: 2·7/8·S = 1.75·S inside (4.375 ps), S/8 across (2.5 ps): it binds on NVLink.
    # Each tier is its own link and carries both ops' bytes in turn: scale-up 7/16·S + 1.75·S = 2.1875·S at
    # 400 GB/s (5.47 ps), scale-out S/2 + S/8 = 0.625·S at 50 GB/s (12.5 ps): t_link is the NIC's, 12.5 ps per byte
    # of S, more than either op's slower tier alone (10 ps).
    from pkroof.rooflines import Collective, CommOp, Workload

    ops = (CommOp("a2a", Collective.ALL_TO_ALL, S, 16), CommOp("ar", Collective.ALL_REDUCE, S, 16))
    b = bound(Workload("two", comm=ops, hbm_bytes=2 * S), make_system(n=16, per_node=8, net_peak=50e9))
    up, out = b.link_terms["scale-up"], b.link_terms["scale-out"]
    assert up.bytes_per_rank == pytest.approx((7 / 16 + 2 * 7 / 8) * S)
    assert up.t_s == pytest.approx((7 / 16 + 2 * 7 / 8) * S / 400e9)
    assert out.bytes_per_rank == pytest.approx((1 / 2 + 1 / 8) * S)
    assert out.t_s == pytest.approx((1 / 2 + 1 / 8) * S / 50e9)
    assert b.link_tier == "scale-out" and b.t_link_s == out.t_s


# ---- properties over random systems and shapes ----

systems = st.builds(
    make_system,
    n=st.sampled_from([2, 4, 8]),
    sms=st.integers(16, 160),
    flops=st.floats(50e12, 5000e12),
    hbm=st.floats(0.5e12, 10e12),
    alpha=st.floats(0.3e-6, 20e-6),
    peak=st.floats(10e9, 900e9),
    per_cta=st.floats(1e9, 100e9),
    ce_alpha=st.floats(1e-6, 50e-6),
    ce_peak=st.floats(10e9, 900e9),
    nccl_peak=st.floats(10e9, 900e9),
    multimem=st.booleans(),
)
problems = st.sampled_from(sorted(NAMES))


def _workload(name, n, scale):
    if name in COLLECTIVES:
        return build(name, n, size=n * 2 * 2**scale)
    return build(name, n, m=n * 256 * scale, n=1024 * scale, k=512 * scale)


@settings(max_examples=150, deadline=None)
@given(system=systems, name=problems, scale=st.integers(1, 20))
def test_roof_is_never_above_any_prediction(system, name, scale):
    b = bound(_workload(name, system.world_size, scale), system)
    assert b.predictions
    for p in b.predictions:
        assert b.t_roof_s <= p.t_s * (1 + 1e-9), (p.mechanism, p.schedule)


@settings(max_examples=100, deadline=None)
@given(system=systems, name=problems, scale=st.integers(1, 12))
def test_bigger_problems_never_take_less_time(system, name, scale):
    small = bound(_workload(name, system.world_size, scale), system)
    large = bound(_workload(name, system.world_size, scale + 1), system)
    assert large.t_roof_s >= small.t_roof_s
    assert large.predictions[0].t_s >= small.predictions[0].t_s * (1 - 1e-9)


def _faster(system, factor):
    mechs = {
        k: dataclasses.replace(
            m,
            peak_bandwidth_Bps=m.peak_bandwidth_Bps * factor,
            per_cta_bandwidth_Bps=m.per_cta_bandwidth_Bps and m.per_cta_bandwidth_Bps * factor,
        )
        for k, m in system.mechanisms.items()
    }
    return dataclasses.replace(system, mechanisms=mechs)


@settings(max_examples=100, deadline=None)
@given(system=systems, name=problems, scale=st.integers(1, 12), factor=st.floats(1.0, 4.0))
# found by CI: the copy engine's serial all-reduce switched to one-shot on a 2x faster link (less link time, 4x the
# HBM staging) and got slower overall, until the algorithm choice counted the staging too
@example(
    system=make_system(
        n=8, sms=16, flops=5e13, hbm=2.039e12, alpha=17.3e-6, peak=10e9, per_cta=1e9, ce_alpha=43.5e-6,
        ce_peak=403.9e9, nccl_peak=10e9,
    ),
    name="gemm-all-reduce",
    scale=1,
    factor=2.0,
)  # fmt: skip
def test_more_bandwidth_is_never_slower(system, name, scale, factor):
    w = _workload(name, system.world_size, scale)
    slow, fast = bound(w, system), bound(w, _faster(system, factor))
    assert fast.t_roof_s <= slow.t_roof_s * (1 + 1e-12)
    for p in fast.predictions:
        q = slow.prediction(p.mechanism, p.schedule, p.protocol)
        assert p.t_s <= q.t_s * (1 + 1e-9), p.key


def _with_nccl_fits(system, *fits):
    nccl = dataclasses.replace(system.mechanisms[Mechanism.NCCL], collective_fits=fits)
    return dataclasses.replace(system, mechanisms={**system.mechanisms, Mechanism.NCCL: nccl})


def test_nccl_charges_a_collective_its_own_fit():
    system = _with_nccl_fits(make_system(), ("all-gather", 1e-6, 150e9))
    # ring all-gather on 8 ranks: 7 steps × 1 µs (no step latency set: α again) + 7/8·S at 150 GB/s
    ag = bound(build("all-gather", 8, size=S), system).prediction(Mechanism.NCCL, Schedule.SERIAL)
    assert ag.t_s == pytest.approx(7 * 1e-6 + 7 / 8 * S / 150e9)
    # all-reduce has no fit of its own: 2·7 steps × 3 µs + 2·7/8·S at the general 300 GB/s
    ar = bound(build("all-reduce", 8, size=S), system).prediction(Mechanism.NCCL, Schedule.SERIAL)
    assert ar.t_s == pytest.approx(14 * 3e-6 + 2 * 7 / 8 * S / 300e9)


def test_a_collective_fit_faster_than_every_mechanism_moves_the_roof():
    # a 600 GB/s all-gather beats the 400 GB/s peak of the others: the roof must use it, or NCCL would beat it
    system = _with_nccl_fits(make_system(), ("all-gather", 0.1e-6, 600e9))
    b = bound(build("all-gather", 8, size=S), system)
    assert b.link_bandwidth_Bps == pytest.approx(600e9)
    assert b.t_latency_s == pytest.approx(7 * 0.1e-6)  # 7 ring steps at 0.1 µs beat one 2 µs step
    assert all(p.t_s >= b.t_roof_s * (1 - 1e-12) for p in b.predictions)


def test_nccl_regimes_are_chosen_by_the_bytes_on_the_link():
    # regimes (α, β) = (1 µs, 100 GB/s) and (20 µs, 300 GB/s), the cheaper α + x/β at x the link bytes runs; ring
    # all-reduce on 8 ranks puts x = 2·7/8·S on the link in 14 steps (no step latency set: α per step).
    # S = 64 KiB: x = 114688 B, 1 µs + x/100e9 = 2.15 µs < 20 µs + x/300e9 = 20.4 µs: the first regime;
    # S = 1 GiB: x = 1.88 GB, 18.8 ms > 6.28 ms: the second
    system = _with_nccl_fits(make_system(), ("all-reduce", 1e-6, 100e9), ("all-reduce", 20e-6, 300e9))
    for size, alpha, beta in ((64 * 1024, 1e-6, 100e9), (S, 20e-6, 300e9)):
        p = bound(build("all-reduce", 8, size=size), system).prediction(Mechanism.NCCL, Schedule.SERIAL)
        assert p.t_s == pytest.approx(14 * alpha + 2 * 7 / 8 * size / beta)


def test_a_copy_engine_overlap_pays_alpha_for_every_dma_to_a_peer_after_the_first():
    # A DMA starts only once the one before it on its copy stream has ended (local DMAs on one H200: ~1.9 µs per
    # chunk boundary, benchmarks/kernels/2026-12-01-one-gpu-h200.md §2; 2.75-2.88 µs per chunk over NVLink on 2xH200).
    # GEMM + reduce-scatter sends each peer its rows once: one DMA per peer. The one-shot GEMM + all-reduce
    # (kernels/fused.py) pushes each row block of its partial product to every peer as soon as it is computed: two
    # blocks at 2 ranks, one beyond (fused.one_shot_blocks). Peers are served side by side, as in the copy-engine
    # collectives. At a tiny shape the copy stream is the longer side (t = comm + latency + the fixed costs +
    # compute / depth), so raising the copy engine's α by 1 µs raises the prediction by the 2 α of the one-shot's
    # latency (the step and the flag), plus 1 µs per DMA to a peer after the first: reduce-scatter 2 µs at any P;
    # all-reduce 2 + 1 = 3 µs at P = 2, 2 + 0 = 2 µs at P = 4
    expected = {("gemm-reduce-scatter", 2): 2e-6, ("gemm-all-reduce", 2): 3e-6,
                ("gemm-reduce-scatter", 4): 2e-6, ("gemm-all-reduce", 4): 2e-6}  # fmt: skip
    for (name, n), dt in expected.items():
        t = []
        for ce_alpha in (10e-6, 11e-6):
            system = make_system(n=n, ce_alpha=ce_alpha)
            w = build(name, n, m=64 * n, n=128, k=128)
            p = predict(w, system, Mechanism.COPY_ENGINE, Schedule.CE_OVERLAP)
            assert p.algorithms == ("one-shot",) and p.compute_s < p.comm_s
            t.append(p.t_s)
        assert t[1] - t[0] == pytest.approx(dt), (name, n)


def test_a_one_shot_copy_engine_overlap_fills_its_pipeline_by_row_blocks():
    # fill = min(compute, comm) / depth: the one-shot all-reduce's depth is its row blocks (2 at 2 ranks, 1 at 4: the
    # whole GEMM before the first DMA), the reduce-scatter's its shards (one per rank)
    for n, blocks in ((2, 2), (4, 1)):
        system = make_system(n=n)
        for name, depth in (("gemm-all-reduce", blocks), ("gemm-reduce-scatter", n)):
            p = predict(build(name, n, m=64 * n, n=128, k=128), system, Mechanism.COPY_ENGINE, Schedule.CE_OVERLAP)
            assert p.fill_s == pytest.approx(min(p.compute_s, p.comm_s) / depth), (name, n)


def _with(system, mechanism, **fields):
    ms = dict(system.mechanisms)
    ms[mechanism] = dataclasses.replace(ms[mechanism], **fields)
    return dataclasses.replace(system, mechanisms=ms)


def test_ll_doubles_the_bytes_on_the_link_and_skips_the_flag_step():
    # a 1 KiB all-reduce on 8 ranks, one-shot push: each rank sends its 1 KiB to 7 peers and receives 7 KiB.
    # simple: α for the data + one flag step (α again) + 7 KiB at 400 GB/s + staging (7 + 7 KiB) at 3 TB/s.
    # LL: α only (the flags travel inside the data) + 14 KiB of lines at 400 GB/s + the lines landing in the
    # inbox and read back from it (2·14 KiB) at 3 TB/s; no hand-off measured: 0 for both
    system = make_system()
    w = build("all-reduce", 8, size=1024)
    simple = predict(w, system, Mechanism.SM_STORE, Schedule.SERIAL)
    ll = predict(w, system, Mechanism.SM_STORE, Schedule.SERIAL, protocol=Protocol.LL)
    assert simple.t_s == pytest.approx(2 * 2e-6 + 7 * 1024 / 400e9 + 14 * 1024 / 3e12)
    assert ll.t_s == pytest.approx(2e-6 + 14 * 1024 / 400e9 + 4 * 7 * 1024 / 3e12)
    assert ll.algorithms == ("one-shot",) and ll.protocol is Protocol.LL and ll.key == "sm-store/serial/ll"
    assert ll.label == "sm-store LL" and simple.key == "sm-store/serial" and simple.label == "sm-store"


def test_ll_pays_the_simple_hand_off_until_its_own_is_measured():
    # sm-store's hand-off measured at 3.5 µs: the simple protocol pays it; LL, whose own was not measured (None),
    # too (no evidence it is cheaper); once LL's is measured it pays that, 1 µs, or nothing when it measured 0 µs;
    # the simple protocol still 3.5 µs
    plain = make_system()
    w = build("all-reduce", 8, size=1024)
    base = {p: predict(w, plain, Mechanism.SM_STORE, Schedule.SERIAL, protocol=p).t_s for p in Protocol}
    for ll_handoff, expected_ll in ((None, 3.5e-6), (1e-6, 1e-6), (0.0, 0.0)):
        system = _with(plain, Mechanism.SM_STORE, handoff_s=3.5e-6, ll_handoff_s=ll_handoff)
        after = {p: predict(w, system, Mechanism.SM_STORE, Schedule.SERIAL, protocol=p).t_s for p in Protocol}
        assert after[Protocol.SIMPLE] - base[Protocol.SIMPLE] == pytest.approx(3.5e-6)
        assert after[Protocol.LL] - base[Protocol.LL] == pytest.approx(expected_ll, abs=1e-15), ll_handoff
        assert bound(w, system).t_roof_s == bound(w, plain).t_roof_s  # a kernel's cost, never the roof's


def test_ll_wins_small_messages_and_loses_large_ones():
    # 2 ranks, where one-shot (one step, S each way) always beats two-shot (two steps, the same S each way):
    # simple = 2α + S/β + (S + S)/h; LL = α + 2S/β + 4S/h (α = 2 µs, β = 400 GB/s, h = 3 TB/s, no hand-off).
    # LL wins while S/β + 2S/h < α, i.e. S < 2e-6 / (1/400e9 + 2/3e12) = 631,579 bytes (617 KiB)
    system = make_system()
    crossover = 2e-6 / (1 / 400e9 + 2 / 3e12)
    for size, ll_first in ((4096, True), (512 << 10, True), (768 << 10, False), (64 << 20, False)):
        b = bound(build("all-reduce", 2, size=size), system)
        ll = b.prediction(Mechanism.SM_STORE, Schedule.SERIAL, Protocol.LL)
        simple = b.prediction(Mechanism.SM_STORE, Schedule.SERIAL)
        assert ll.algorithms == simple.algorithms == ("one-shot",)
        assert simple.t_s - ll.t_s == pytest.approx((crossover - size) * (1 / 400e9 + 2 / 3e12))
        assert (ll.t_s < simple.t_s) is ll_first, size
        assert sum(p.protocol is Protocol.LL for p in b.predictions) == 1  # one LL row: serial SM stores
        assert len({p.key for p in b.predictions}) == len(b.predictions)  # report keys never collide


def test_ll_is_modelled_for_serial_sm_store_collectives_only():
    system = make_system()
    assert predict(build("all-reduce", 8, size=1024), system, Mechanism.SM_LOAD, Schedule.SERIAL,
                   protocol=Protocol.LL) is None  # fmt: skip
    w = build("gemm-reduce-scatter", 8, m=8192, n=4096, k=4096)
    assert predict(w, system, Mechanism.SM_STORE, Schedule.INTER_SM, 16, Protocol.LL) is None
    assert predict(w, system, Mechanism.SM_STORE, Schedule.INTER_SM, 16) is not None
    two_nodes = make_system(n=16, per_node=8)  # LL across the network is not modelled: no LL row there
    b = bound(build("all-reduce", 16, size=4096), two_nodes)
    assert all(p.protocol is Protocol.SIMPLE for p in b.predictions)


def test_a_declared_algorithm_is_predicted_even_where_another_is_cheaper():
    # 64 MiB all-reduce on 8 ranks by SM stores. One-shot pushes the whole buffer to 7 peers: 7·S each way in one
    # step (+ the flag step), staging (7·S + 7·S) at 3 TB/s. Two-shot (reduce-scatter, then all-gather) moves
    # 2·(7/8)·S each way in two steps: cheaper here, so the model's own choice, but a one-shot kernel is predicted
    # as one-shot
    system, size = make_system(), 64 << 20
    w = build("all-reduce", 8, size=size)
    one = predict(w, system, Mechanism.SM_STORE, Schedule.SERIAL, algorithm=Algorithm.ONE_SHOT)
    assert one.algorithms == ("one-shot",)
    assert one.comm_s == pytest.approx(7 * size / 400e9 + 14 * size / 3e12)
    assert one.latency_s == pytest.approx(2 * 2e-6)
    two = predict(w, system, Mechanism.SM_STORE, Schedule.SERIAL, algorithm=Algorithm.TWO_SHOT)
    assert two.algorithms == ("two-shot",)
    assert two.comm_s == pytest.approx(2 * 7 / 8 * size / 400e9 + 4 * 7 / 8 * size / 3e12)
    assert two.latency_s == pytest.approx(3 * 2e-6)  # two steps and the flag step
    cheapest = predict(w, system, Mechanism.SM_STORE, Schedule.SERIAL)
    assert cheapest == two and two.t_s < one.t_s
    # an algorithm the mechanism does not have: no prediction
    assert predict(w, system, Mechanism.SM_STORE, Schedule.SERIAL, algorithm=Algorithm.RING) is None


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
