"""The roofline and the predictions, against derivations written out in each test."""

import dataclasses

import pytest
from bound_cases import _gemm_rs, _waves_s, build
from conftest import make_system

from pkroof.rooflines import Mechanism, Schedule, advise, bound, predict

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
