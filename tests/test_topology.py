"""Topology data model: presets, JSON round trip, and refusal of malformed files with the field named."""

import copy
import json

import pytest

from pkroof.topology import PRESETS, SCHEMA, TopologyError, dumps, from_dict, load, preset, resolve, to_dict

REQUIRED_PRESETS = {"hgx-h100-8", "hgx-h200-8", "hgx-b200-8", "gb200-nvl72", "dgx-a100-8", "pcie-l40s-8"}
REQUIRED_PRESETS |= {"gb200-nvl576"}  # one NVLink domain of 576 GPUs (issue 27)


def test_every_required_preset_exists():
    assert set(PRESETS) >= REQUIRED_PRESETS


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_presets_round_trip_through_json(name):
    t = preset(name)
    again = from_dict(json.loads(dumps(t)))
    assert again == t


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_every_number_in_a_preset_is_sourced(name):
    t = preset(name)
    assert t.basis("gpu.hbm_bandwidth_Bps") in ("nominal", "measured")
    assert t.basis("scaleup.link_bandwidth_Bps") == "nominal"
    for mech, spec in t.mechanisms.items():
        if spec.available:
            assert t.basis(f"mechanisms.{mech}.peak_bandwidth_Bps") in ("nominal", "measured", "carried")
            assert t.basis(f"mechanisms.{mech}.latency_s") in ("nominal", "measured", "carried")
    for source in t.sources.values():
        assert source.cite.strip()


@pytest.mark.parametrize("name", sorted(n for n in PRESETS if n != "h200x2"))
def test_a_preset_says_where_to_read_every_measured_or_carried_number(name):
    # a measurement names where it was published (a URL, owner/repo@commit:path, or this repository's file); a
    # number carried over from another machine says so by its basis, never "measured"
    t = preset(name)
    for sid, source in t.sources.items():
        if source.basis in ("measured", "carried"):
            assert source.url.strip(), sid
    nccl = t.mechanisms["nccl"].tuning
    assert nccl is not None  # every preset prices NCCL as it runs by default
    assert {t.sources[i].basis for i in nccl.sources.values()} <= {"nominal", "measured", "carried"}


def test_the_l40s_preset_measured_nothing_of_its_own():
    # no L40S run of any kind was found published: every figure is a datasheet's, an assumption, or carried over
    t = preset("pcie-l40s-8")
    assert "measured" not in {s.basis for s in t.sources.values()} - {t.sources["nccl-net"].basis}
    assert t.sources["nccl-net"].basis == "measured"  # NCCL's share of an NDR NIC, should nodes be joined
    assert t.basis("mechanisms.copy-engine.peak_bandwidth_Bps") == "carried"
    assert t.basis("mechanisms.sm-store.latency_s") == "carried"


def test_h100_takes_the_fastest_measured_copy_and_the_switch_port_rate_for_in_network_reduction():
    # nvbandwidth write CE on 8×H100: 397.48 GB/s one way (the read was 395.08); p2pBandwidthLatencyTest's
    # bidirectional sum up to 775.34 GB/s, 387.67 per direction. In-network reduction's roof is the switch port's
    # rate, the link's 18 × 25 GB/s; the SM mechanisms carry the 2×H200 node's probe (the same NVLink 4)
    from pkroof.rooflines import Mechanism

    t, h200x2 = preset("hgx-h100-8"), resolve("h200x2")
    m = t.mechanisms
    assert m["copy-engine"].peak_bandwidth_Bps == pytest.approx(397.48e9)
    assert m["copy-engine"].duplex_bandwidth_Bps == pytest.approx(775.34e9 / 2)
    assert t.basis("mechanisms.copy-engine.peak_bandwidth_Bps") == "measured"
    assert m["multimem"].peak_bandwidth_Bps == pytest.approx(18 * 25e9)
    for name in ("sm-load", "sm-store", "tma"):
        assert m[name].peak_bandwidth_Bps == h200x2.mechanisms[name].peak_bandwidth_Bps
        assert m[name].latency_s == h200x2.mechanisms[name].latency_s
        assert t.basis(f"mechanisms.{name}.peak_bandwidth_Bps") == "carried"
    # multimem's loads are SM loads through the switch: their per-CTA rate and α (nominal); its both-ways rate is
    # NCCL's published NVLS all-reduce, algbw 275 GB/s with 9/8·S each way on 8 ranks (tests/test_multimem.py)
    assert m["multimem"].per_cta_bandwidth_Bps == m["sm-load"].per_cta_bandwidth_Bps
    assert m["multimem"].latency_s == m["sm-load"].latency_s
    assert m["multimem"].duplex_bandwidth_Bps == pytest.approx(275e9 * 9 / 8)
    system = t.system()
    tma = h200x2.mechanisms["tma"]
    assert system.mechanisms[Mechanism.TMA].ctas_for(1.0) == -(-tma.peak_bandwidth_Bps // tma.per_cta_bandwidth_Bps)
    # the same copy figure on H200 is carried over from H100, and says so
    assert preset("hgx-h200-8").basis("mechanisms.copy-engine.peak_bandwidth_Bps") == "carried"


def test_the_nvl576_preset_is_the_nvl72_rack_at_the_announced_link_and_says_it_is_unmeasured():
    # one NVLink domain of 576 GB200 GPUs (8 racks of 72, announced at GTC 2024, never measured in public): the rack's
    # GPU, mechanisms and multicast; its link the announced 1.8 TB/s both ways per GPU = 18 × 50 GB/s one way,
    # nominal; its latencies the rack's, a floor (a second switch tier only adds), cited as carried for that reason;
    # NCCL's model and lines the rack's, carried
    big, rack = preset("gb200-nvl576"), preset("gb200-nvl72")
    assert big.nodes == 1 and big.gpus_per_node == 576 == 8 * rack.gpus_per_node
    assert big.gpu == rack.gpu
    assert big.scaleup.links_per_gpu * big.scaleup.link_bandwidth_Bps == pytest.approx(1.8e12 / 2)
    assert big.basis("scaleup.link_bandwidth_Bps") == "nominal"
    assert big.scaleup.multicast == rack.scaleup.multicast is True
    for name, m in big.mechanisms.items():
        r = rack.mechanisms[name]
        same = ("available", "peak_bandwidth_Bps", "duplex_bandwidth_Bps", "latency_s", "step_latency_s", "handoff_s")
        assert [getattr(m, f) for f in same] == [getattr(r, f) for f in same], name
        if name == "multimem":  # no multimem α was published on any preset: nominal (tests/test_multimem.py)
            assert m.sources["latency_s"] == "multimem-nominal"
            assert big.basis(f"mechanisms.{name}.latency_s") == "nominal"
        elif name != "nccl":
            assert m.sources["latency_s"] == "nvl576-latency" and big.basis(f"mechanisms.{name}.latency_s") == "carried"
    nccl = big.mechanisms["nccl"].tuning
    assert nccl.model == rack.mechanisms["nccl"].tuning.model
    assert {big.sources[i].basis for k, i in nccl.sources.items() if k.startswith("lines.")} == {"carried"}
    assert "no measurement" in big.description and "nominal" in big.description


def test_every_preset_carries_fixed_costs_measured_on_the_same_generation_or_labelled():
    # the 2×H200 node's calibrated hand-offs and fused kernels' fixed costs, carried to every preset (Hopper: the
    # same generation; the others: the nearest measurement, its source says so)
    h200x2 = resolve("h200x2")
    for name in (n for n in PRESETS if n != "h200x2"):
        t = preset(name)
        store = t.mechanisms["sm-store"]
        assert store.handoff_s == h200x2.mechanisms["sm-store"].handoff_s
        assert store.overlap_s == h200x2.mechanisms["sm-store"].overlap_s
        assert t.sources[store.sources["handoff_s"]].basis == "carried"
        assert t.mechanisms["copy-engine"].handoff_s == h200x2.mechanisms["copy-engine"].handoff_s


def test_matmul_rates_are_the_published_maximum_achievable_ones():
    # stas00's MAMF tables (bf16 / fp8): H100 794.5 / 1402.6, H200 794.5 / 1453.4, B200 1745.0 / 3432.5,
    # GB200 1822.0 / 3615.6, A100 271.2 TFLOP/s; fp16 as bf16; L40S: none published, so none
    expected = {
        "hgx-h100-8": (794.5, 1402.6),
        "hgx-h200-8": (794.5, 1453.4),
        "hgx-b200-8": (1745.0, 3432.5),
        "gb200-nvl72": (1822.0, 3615.6),
    }
    for name, (bf16, fp8) in expected.items():
        gpu = preset(name).gpu
        assert gpu.sustained_flops == gpu.burst_flops
        assert gpu.burst_flops == pytest.approx({"bf16": bf16 * 1e12, "fp16": bf16 * 1e12, "fp8": fp8 * 1e12})
    assert preset("dgx-a100-8").gpu.burst_flops == pytest.approx({"bf16": 271.2e12, "fp16": 271.2e12})
    assert preset("pcie-l40s-8").gpu.burst_flops == {}


def test_gpu_names_are_exact_nvml_strings():
    assert preset("hgx-h100-8").gpu.name == "NVIDIA H100 80GB HBM3"
    assert preset("hgx-h200-8").gpu.name == "NVIDIA H200"
    assert preset("dgx-a100-8").gpu.name == "NVIDIA A100-SXM4-80GB"


def test_chips_without_a_feature_say_so():
    a100 = preset("dgx-a100-8")
    assert "fp8" not in a100.gpu.peak_flops
    assert not a100.mechanisms["tma"].available and a100.mechanisms["tma"].note
    assert not a100.mechanisms["multimem"].available and not a100.scaleup.multicast
    assert preset("hgx-h100-8").scaleup.multicast


def test_nodes_join_by_nics_with_ndr_default():
    t = resolve("pcie-l40s-8", nodes=4)  # no NICs of its own: one NDR 400 Gb/s port per GPU
    assert t.nodes == 4 and t.num_gpus == 32
    assert t.nic.rate_Bps == pytest.approx(400e9 / 8)
    assert t.nic.count_per_node == 8 and t.nic.rail_aligned
    system = t.system()
    assert system.num_nodes == 4
    assert system.network.peak_bandwidth_Bps == pytest.approx(400e9 / 8)  # 8 NICs shared by 8 GPUs
    a100 = resolve("dgx-a100-8", nodes=2)  # its own HDR 200 Gb/s NICs
    assert a100.nic.rate_Bps == pytest.approx(200e9 / 8)
    assert from_dict(to_dict(t)) == t


def test_file_round_trip(tmp_path):
    path = tmp_path / "node.json"
    path.write_text(dumps(preset("hgx-b200-8")))
    assert resolve(str(path)) == preset("hgx-b200-8")


# ---- malformed files: one error naming the field ----


def _nccl_fit_for(kind, peak_Bps):
    def mutate(d):
        nccl = d["mechanisms"]["nccl"]
        nccl["collectives"] = {kind: [{"latency_s": 5e-6, "peak_bandwidth_Bps": peak_Bps}]}
        nccl["sources"]["collectives"] = nccl["sources"]["peak_bandwidth_Bps"]

    return mutate


def _sustained(rates):
    def mutate(d):
        d["gpu"]["sustained_flops"] = rates(d)
        d["gpu"]["sources"]["sustained_flops"] = d["gpu"]["sources"]["peak_flops"]

    return mutate


def _duplex(rate_Bps):
    def mutate(d):
        d["mechanisms"]["sm-load"]["duplex_bandwidth_Bps"] = rate_Bps
        d["mechanisms"]["sm-load"]["sources"]["duplex_bandwidth_Bps"] = "pk-2025"

    return mutate


def _broken(mutate):
    data = copy.deepcopy(to_dict(preset("hgx-h100-8")))
    mutate(data)
    return data


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (lambda d: d.update(schema="pkroof.topology/0"), "schema"),
        (lambda d: d["gpu"].update(hbm_bandwith_Bps=1.0), "gpu.hbm_bandwith_Bps: unknown key"),
        (lambda d: d["gpu"].pop("sm_count"), "gpu.sm_count: missing"),
        (lambda d: d["gpu"].update(hbm_bandwidth_Bps=-3e12), "gpu.hbm_bandwidth_Bps: must be positive"),
        (lambda d: d["mechanisms"]["tma"].update(peak_bandwidth_Bps=-1), "mechanisms.tma.peak_bandwidth_Bps"),
        (lambda d: d["mechanisms"]["tma"].update(peak_bandwidth_Bps=900e9), "exceeds the scale-up link"),
        (lambda d: d["mechanisms"].pop("nccl"), "mechanisms.nccl: missing"),
        (lambda d: d["mechanisms"].update(warp={}), "mechanisms.warp"),
        (_nccl_fit_for("all-gathr", 300e9), "mechanisms.nccl.collectives.all-gathr: not a collective"),
        (_nccl_fit_for("all-gather", -1.0), "mechanisms.nccl.collectives.all-gather[0].peak_bandwidth_Bps: must"),
        (
            _nccl_fit_for("all-gather", 900e9),
            "mechanisms.nccl.collectives.all-gather[0].peak_bandwidth_Bps: 9e+11 exceeds",
        ),
        (
            _sustained(lambda d: {"bf16": 2 * d["gpu"]["peak_flops"]["bf16"]}),
            "gpu.sustained_flops.bf16: must be positive and at most the peak",
        ),
        (_sustained(lambda d: {"int4": 1e15}), "gpu.sustained_flops.int4: no peak_flops.int4 beside it"),
        (lambda d: d["scaleup"].update(links_per_gpu="18"), "scaleup.links_per_gpu: expected a whole number"),
        (lambda d: d["scaleup"].update(kind="infinityfabric"), "scaleup.kind"),
        (lambda d: d["gpu"]["sources"].pop("sm_count"), "gpu.sources.sm_count: missing"),
        (lambda d: d["gpu"]["sources"].update(sm_count="nowhere"), "unknown source 'nowhere'"),
        (lambda d: d["sources"]["nvbw-h100"].update(basis="guessed"), "sources.nvbw-h100.basis"),
        (lambda d: d.update(nodes=2, nic=None), "nic: 2 nodes need a network"),
        (lambda d: d["scaleup"].update(multicast=False), "multimem.available: the scale-up fabric has no multicast"),
        (lambda d: d["gpu"]["peak_flops"].update(int4=4e15), "gpu.peak_flops.int4: unknown precision (known: fp8,"),
        (lambda d: d.update(name=""), "name: must not be empty"),
        (lambda d: d.update(name="  "), "name: must not be empty"),
        (lambda d: d["gpu"].update(name=""), "gpu.name: must not be empty"),
        # both directions busy, each still moves at most the link's 18 × 25 GB/s = 450 GB/s
        (_duplex(451e9), "mechanisms.sm-load.duplex_bandwidth_Bps: 4.51e+11 exceeds the scale-up link's 4.5e+11"),
    ],
)
def test_malformed_topologies_are_refused_naming_the_field(mutate, expected):
    with pytest.raises(TopologyError) as err:
        from_dict(_broken(mutate))
    message = str(err.value)
    assert expected in message
    assert "\n" not in message


def test_load_reports_path_and_json_errors(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{ not json")
    with pytest.raises(TopologyError, match=r"bad\.json: not JSON"):
        load(bad)
    with pytest.raises(TopologyError, match="cannot read"):
        load(tmp_path / "missing.json")
    assert SCHEMA.startswith("pkroof.topology/")


def test_unknown_preset_names_the_choices():
    with pytest.raises(ValueError, match=r"unknown topology 'hgx-h20-8'.*hgx-h200-8"):
        resolve("hgx-h20-8")


def test_an_unmeasured_device_initiated_hand_off_takes_the_smallest_measured_one():
    from pkroof.rooflines import Mechanism
    from pkroof.topology import resolve

    topo = resolve("h200x2")
    spec = topo.mechanisms
    # measured on h200x2 for sm-store and sm-load (pkroof topology calibrate); tma has none of its own
    assert spec["tma"].handoff_s == 0 and spec["sm-store"].handoff_s > 0 and spec["sm-load"].handoff_s > 0
    models = topo.system(2).mechanisms
    smaller = min(spec["sm-store"].handoff_s, spec["sm-load"].handoff_s)
    assert models[Mechanism.TMA].handoff_s == smaller
    assert models[Mechanism.SM_LOAD].handoff_s == spec["sm-load"].handoff_s  # a measured one stays its own
    assert models[Mechanism.NCCL].handoff_s == 0  # NCCL is not device-initiated over symmetric memory
    assert models[Mechanism.COPY_ENGINE].handoff_s == spec["copy-engine"].handoff_s


def test_a_fused_fixed_cost_names_an_overlapped_schedule_and_device_mechanisms_share_the_smallest():
    import dataclasses

    from pkroof.rooflines import Mechanism

    topo = resolve("h200x2")
    store = topo.mechanisms["sm-store"]
    with pytest.raises(TopologyError, match=r"overlap_s\.serial: not an overlapped schedule"):
        data = to_dict(topo)
        data["mechanisms"]["sm-store"]["overlap_s"] = {"serial": 1e-6}
        from_dict(data)
    mechanisms = dict(topo.mechanisms)
    mechanisms["sm-store"] = dataclasses.replace(
        store, overlap_s={"inter-sm": 5e-6}, sources=store.sources | {"overlap_s": "calibrate"}
    )
    models = dataclasses.replace(topo, mechanisms=mechanisms).system(2).mechanisms
    assert models[Mechanism.SM_STORE].overlap_for("inter-sm") == 5e-6
    assert models[Mechanism.TMA].overlap_for("inter-sm") == 5e-6  # unmeasured: the smallest measured one
    assert models[Mechanism.COPY_ENGINE].overlap_for("inter-sm") == 0  # not device-initiated: its own or none
    assert models[Mechanism.SM_STORE].overlap_for("intra-sm") == 0


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda t: t["model"]["lines"].update({"ring/ll256": t["model"]["lines"]["ring/ll"]}), "lines.ring/ll256"),
        (lambda t: t["sources"].pop("lines.ring/ll"), r"sources\.lines\.ring/ll: missing"),
        (lambda t: t["sources"].update({"lines.tree/ll": "nccl-h200"}), r"sources\.lines\.tree/ll: names no number"),
        (lambda t: t["model"].update({"channels": 0}), "channels: must be at least 1"),
    ],
)
def test_a_malformed_nccl_tuning_in_a_topology_file_is_refused_naming_the_field(change, message):
    # the strict reader decodes NCCL's tuning like every other record: a pair that is not one, a measured line with
    # no source, a source for a line that is not there, a number out of range
    data = to_dict(preset("hgx-h200-8"))
    change(data["mechanisms"]["nccl"]["tuning"])
    with pytest.raises(TopologyError, match=message):
        from_dict(data)


def test_a_topology_beyond_any_machine_is_refused_in_one_line():
    import dataclasses

    from pkroof.topology import resolve

    base = resolve("hgx-h100-8")
    with pytest.raises(ValueError, match="gpus_per_node: 1000000000 is more than 4096"):
        dataclasses.replace(base, gpus_per_node=10**9)
    with pytest.raises(ValueError, match="nodes: 200000 nodes of 8 GPUs is more than the 1048576 GPUs"):
        resolve("hgx-h100-8", nodes=200_000)
    assert resolve("hgx-h100-8", nodes=1024).num_gpus == 8192  # 1024 nodes of 8: bounded (tests/test_scale.py)
