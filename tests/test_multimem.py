"""Multimem's own transfer model (issue 31, item 3): its rate both ways from NCCL's published NVLink SHARP all-reduce
(NVIDIA/nccl-tests#212: algbw ~275 GB/s on 8 H100s at large sizes), each rank moving (n+1)/n·S each way through the
switch; its α, step latency and per-peer cost SM loads', marked nominal; the roof stays the switch ports' rate."""

import pytest

from pkroof.rooflines import Collective, Mechanism, Schedule, predict
from pkroof.rooflines.builders import collective
from pkroof.topology.presets import preset

GB = 1e9
NVLS_ALGBW_8_H100 = 275 * GB  # NVIDIA/nccl-tests#212, sjeaugey, 2024-05-06
PORTS_NVLINK4 = 18 * 25 * GB  # 18 NVLink 4 links of 25 GB/s per direction


def test_the_h100_node_prices_multimem_both_ways_at_ncclss_published_nvls_rate():
    m = preset("hgx-h100-8").mechanisms["multimem"]
    # algbw = S / t and t = (n+1)/n·S / β, so β = algbw · (n+1)/n with n = 8
    assert pytest.approx(NVLS_ALGBW_8_H100 * 9 / 8) == m.duplex_bandwidth_Bps
    assert m.sources["duplex_bandwidth_Bps"] == "nvls-nccl-tests212"


def test_the_roof_stays_the_switch_ports_rate():
    m = preset("hgx-h100-8").mechanisms["multimem"]
    assert m.peak_bandwidth_Bps == PORTS_NVLINK4
    assert m.sources["peak_bandwidth_Bps"] == "switch-port"


def test_what_no_one_measured_for_multimem_is_marked_nominal():
    t = preset("hgx-h100-8")
    m = t.mechanisms["multimem"]
    for field in ("latency_s", "step_latency_s", "per_cta_bandwidth_Bps", "per_peer_s"):
        assert m.sources[field] == "multimem-nominal"
    assert t.sources["multimem-nominal"].basis == "nominal"
    assert t.sources["multimem-nominal"].cite.startswith("nominal: ")


def test_a_faster_link_keeps_the_same_fraction_of_its_ports():
    m = preset("hgx-b200-8").mechanisms["multimem"]
    # 18 NVLink 5 links of 50 GB/s: the fraction NVLS reached on NVLink 4, (275 · 9/8) / 450
    assert pytest.approx(18 * 50 * GB * (NVLS_ALGBW_8_H100 * 9 / 8) / PORTS_NVLINK4) == m.duplex_bandwidth_Bps


def test_a_large_multimem_all_reduce_takes_its_bytes_at_the_published_rate_and_never_beats_the_roof():
    system = preset("hgx-h100-8").system(8)
    size = 1 << 30
    w = collective(Collective.ALL_REDUCE, 8, "bf16", size=size)
    p = predict(w, system, Mechanism.MULTIMEM, Schedule.SERIAL)
    # 9/8·S each way at 309 GB/s per direction: the wire's share is S / 275 GB/s; staged through the symmetric
    # buffer, the serial schedule also copies S in and S out at the H100's HBM rate (3.35 TB/s, its datasheet)
    wire_s = size / NVLS_ALGBW_8_H100
    staging_s = 2 * size / 3.35e12
    assert p.t_s >= wire_s + staging_s
    assert p.t_s < wire_s + staging_s + 50e-6  # α, flags and the hand-off are microseconds
    assert p.t_s >= size / PORTS_NVLINK4  # the roof: S each way at the ports' rate
