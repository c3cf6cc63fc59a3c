"""NCCL as it runs by default (rooflines/nccl.py): the pair NCCL's own model picks, priced by the measured lines,
against derivations written out in each test."""

import dataclasses

import pytest

from pkroof.rooflines import Collective
from pkroof.rooflines.nccl import NcclLine, NcclRun, NcclTuning, choose

GB = 1e9
MiB = 2**20
# NCCL's model of an 8-GPU NVLink 4 node (its documented constants): 18 links × 20.6 GB/s, LL capped at 141 GB/s,
# LL128 at 36.7 GB/s per channel of 32, NVLS at 0.85 over 16 channels, from 5 ranks on
HOPPER = NcclTuning(
    version="2.27",
    channels=32,
    fabric="nvlink",
    link_Bps=18 * 20.6 * GB,
    ll_max_Bps=141 * GB,
    ll128_channel_Bps=36.7 * GB,
    nvls_efficiency=0.85,
    nvls_channels=16,
    nvls_min_ranks=5,
    lines={
        "ring/ll": (NcclLine(9e-6, 0.6e-6, 285 * GB),),
        "nvls/simple": (NcclLine(25e-6, 0.0, 140 * GB), NcclLine(70e-6, 0.0, 270 * GB)),
        "symmetric/ll": (NcclLine(2.3e-6, 0.0, 285 * GB),),
    },
    host_overhead_s=21e-6,
    net_efficiency=0.94,
)


def _nccl_model_nvls_Bps(n):
    """NCCL's NVLS all-reduce rate: links × 0.85 × 15/16 channels × 2 phases, as bus bandwidth; per byte of the
    size, divided by 2(n−1)/n."""
    return 18 * 20.6e9 * 0.85 * 15 / 16 * 2 / (2 * (n - 1) / n)


def test_nccl_runs_the_ring_with_ll_up_to_1_mib_and_nvls_from_2_mib_on_8_ranks():
    # NCCL's model: ring/LL = 6.6 µs + 14 steps × 0.6 µs + 1.75·S / min(141, 370.8/2) GB/s; NVLS = 25 µs + S at its
    # rate. They cross where 15.0 µs + 1.75·S/141e9 = 25 µs + S/nvls: S ≈ 1.06 MB, between 1 MiB and 2 MiB, as the
    # 8×H200 NCCL_DEBUG=TUNING log reads (stas00, NCCL 2.27.7 and 2.30.7)
    crossover = (25e-6 - (6.6e-6 + 14 * 0.6e-6)) / (1.75 / 141e9 - 1 / _nccl_model_nvls_Bps(8))
    assert 1 * MiB < crossover < 2 * MiB
    small = choose(Collective.ALL_REDUCE, 1 * MiB, 8, HOPPER)
    large = choose(Collective.ALL_REDUCE, 2 * MiB, 8, HOPPER)
    assert (small.label, large.label) == ("ring/ll", "nvls/simple")
    # priced by the measured lines: ring/LL 9 µs + 14 × 0.6 µs + 2·7/8·1 MiB at 285 GB/s
    assert small.graph_s == pytest.approx(9e-6 + 14 * 0.6e-6 + 1.75 * MiB / 285e9)
    assert small.measured and small.steps == 14 and small.num_bytes == pytest.approx(1.75 * MiB)
    # NVLS: the cheaper of its two lines at 2 MiB: 25 µs + 2 MiB / 140 GB/s = 40.0 µs < 70 µs + 7.8 µs
    assert large.graph_s == pytest.approx(25e-6 + 2 * MiB / 140e9)
    huge = choose(Collective.ALL_REDUCE, 8 * 2**30, 8, HOPPER)
    assert huge.graph_s == pytest.approx(70e-6 + 8 * 2**30 / 270e9)


def test_nvls_needs_enough_ranks_and_the_size_a_tuner_allows():
    # 4 ranks: NCCL stays on the ring (8×H200 and 8×B200 runs); 5 on: NVLS
    assert choose(Collective.ALL_REDUCE, 2**30, 4, HOPPER).algorithm.value == "ring"
    assert choose(Collective.ALL_REDUCE, 2**30, 5, HOPPER).algorithm.value == "nvls"
    # a tuner holding NVLS back below 4 GiB (as the 8×B200 clouds' do)
    held = dataclasses.replace(HOPPER, nvls_min_bytes=4 * 2**30)
    assert choose(Collective.ALL_REDUCE, 4 * 2**30, 8, held).algorithm.value == "ring"
    assert choose(Collective.ALL_REDUCE, 8 * 2**30, 8, held).algorithm.value == "nvls"
    # and no NVLS for the other collectives, whatever the size
    assert choose(Collective.ALL_GATHER, 2**30, 8, HOPPER).algorithm.value == "ring"


def test_an_unmeasured_pair_is_priced_by_nccls_own_model():
    # ring/Simple has no measured line here: NCCL's 8.4 µs + 14 × 3.4 µs + 2·7/8·S at 18 × 20.6 GB/s
    ring = choose(
        Collective.ALL_REDUCE,
        2**30,
        8,
        HOPPER,
        run=NcclRun(algorithms=frozenset({"ring"}), protocols=frozenset({"simple"})),
    )
    assert ring.label == "ring/simple" and not ring.measured
    assert ring.graph_s == pytest.approx(8.4e-6 + 14 * 3.4e-6 + 1.75 * 2**30 / (18 * 20.6e9))


def test_nccl_algo_restricts_the_choice_and_leaves_nothing_where_it_excludes_everything():
    forced = choose(Collective.ALL_REDUCE, 1024, 8, HOPPER, run=NcclRun(algorithms=frozenset({"nvls"})))
    assert forced.label == "nvls/simple" and forced.graph_s == pytest.approx(25e-6 + 1024 / 140e9)
    with pytest.raises(ValueError, match="no algorithm and protocol"):
        choose(Collective.ALL_GATHER, 1024, 8, HOPPER, run=NcclRun(algorithms=frozenset({"nvls"})))


def test_a_call_waited_on_pays_the_hosts_overhead_beyond_the_captured_one():
    c = choose(Collective.ALL_REDUCE, 32 * 1024, 8, HOPPER)
    assert c.eager_s == pytest.approx(c.graph_s + 21e-6)


def test_symmetric_kernels_run_only_on_registered_buffers():
    # 8 bytes, registered: the symmetric line, 2.3 µs + one step of nothing + 1.75 · 8 B at 285 GB/s
    plain = choose(Collective.ALL_REDUCE, 8, 8, HOPPER)
    registered = choose(Collective.ALL_REDUCE, 8, 8, HOPPER, run=NcclRun(registered=True))
    assert plain.label == "ring/ll"
    assert registered.label == "symmetric/ll" and registered.graph_s == pytest.approx(2.3e-6 + 1.75 * 8 / 285e9)


def test_across_nodes_a_ring_is_bound_by_the_node_nics():
    # 2 nodes × 8: the ring's bus bytes 2·15/16·S cross each node boundary through its 8 NICs at 20 GB/s × 0.94 =
    # 150 GB/s; inside the node they would go at 285 GB/s (ring/LL's line), so the NICs bind
    size = 2**30
    run = NcclRun(algorithms=frozenset({"ring"}), protocols=frozenset({"ll"}))
    c = choose(Collective.ALL_REDUCE, size, 8, HOPPER, nodes=2, network_share_Bps=20e9, run=run)
    assert c.bandwidth_s == pytest.approx(2 * 15 / 16 * size / (8 * 20e9 * 0.94))
    # 2·15 steps, 2·2 of them through the network at NCCL's 2.7 µs for LL: 26 × 0.6 µs + 4 × 2.7 µs + 9 µs
    assert c.latency_s == pytest.approx(9e-6 + 26 * 0.6e-6 + 4 * 2.7e-6)
    with pytest.raises(ValueError, match="network rate"):
        choose(Collective.ALL_REDUCE, size, 8, HOPPER, nodes=2)


def test_all_to_all_runs_point_to_point_whatever_nccl_algo_says():
    # no measured p2p line here: NCCL's model, 8.4 µs + 7/8·S sent at the links' 370.8 GB/s
    c = choose(Collective.ALL_TO_ALL, 2**30, 8, HOPPER, run=NcclRun(algorithms=frozenset({"ring"})))
    assert c.label == "p2p/simple"
    assert c.graph_s == pytest.approx(8.4e-6 + 7 / 8 * 2**30 / (18 * 20.6e9))


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"lines": {"ring/ll9": (NcclLine(1e-6, 0.0, 1e9),)}}, "lines.ring/ll9: not an algorithm/protocol pair"),
        ({"lines": {"ring/ll": ()}}, "lines.ring/ll: needs at least one line"),
        ({"nvls_channels": 0}, "nvls_channels: set exactly where NVLS is"),
        ({"fabric": "infiniband"}, "fabric: 'nvlink' or 'pcie'"),
        ({"channels": 0}, "channels: must be at least 1"),
    ],
)
def test_a_malformed_tuning_is_refused_naming_the_field(change, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        dataclasses.replace(HOPPER, **change)


def test_a_line_of_no_bandwidth_is_refused():
    with pytest.raises(ValueError, match="bandwidth_Bps: must be positive"):
        NcclLine(1e-6, 0.0, 0.0)
