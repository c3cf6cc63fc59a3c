"""A topology of one GPU (what `pkroof probe` writes on a node of one): no peer, every mechanism unavailable with
its reason; bound and advise give a problem of compute alone its compute and HBM terms, and refuse one that
communicates in one line. Built from the recorded 2×H200 probe and NVML replay, no GPU needed."""

import dataclasses
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pkroof.cli import app
from pkroof.runtime.nvml import Replay
from pkroof.topology import dump, from_dict, load, to_dict
from pkroof.topology.discover import discover
from pkroof.topology.from_probe import NO_PEER, build_topology

DATA = Path(__file__).parent / "data" / "h200x2"
RECORDED = load(DATA / "probe-2026-11-30.json")
runner = CliRunner()
PROBLEM = '''"""A GEMM on one GPU: C = A·B, nothing communicated."""

from pkroof.rooflines import ComputeOp, Workload

SHAPES = {"small": dict(m=8192, n=8192, k=8192)}


def inputs(rank, world_size, *, seed, device, m, n, k):
    import torch

    return torch.ones(m, k, device=device), torch.ones(k, n, device=device)


def reference(a, b):
    return a @ b


def workload(world_size, *, m, n, k):
    hbm = 2 * (m * k + k * n + m * n)
    return Workload("local-gemm", compute=(ComputeOp("gemm", 2 * m * n * k, "bf16", hbm),), hbm_bytes=hbm,
                    params={"m": m, "n": n, "k": k})
'''


def _one_gpu():
    """The topology build_topology makes of a one-rank probe record: the recorded node's HBM and matmul rates,
    a host link, no curves."""
    ceilings = {k: v for k, v in RECORDED.probe.ceilings.items() if k.startswith(("hbm", "matmul"))}
    ceilings |= {"host_to_device_Bps": 55e9, "device_to_host_Bps": 53e9}
    probe = dataclasses.replace(RECORDED.probe, curves=(), fits=(), pairs_Bps={}, ceilings=ceilings)
    record = {
        "world": 1,
        "gpu_name": RECORDED.gpu.name,
        "capability": [9, 0],
        "sm_count": RECORDED.gpu.sm_count,
        "hbm_capacity_bytes": RECORDED.gpu.hbm_capacity_bytes,
    }
    return build_topology("h200-one", record, discover(Replay.load(DATA / "nvml.json")), probe)


def test_a_one_gpu_topology_says_it_has_no_peer_and_round_trips():
    t = _one_gpu()
    assert (t.gpus_per_node, t.scaleup.kind, t.scaleup.links_per_gpu, t.scaleup.total_bandwidth_Bps) == (
        1,
        "none",
        0,
        0,
    )
    assert all(not spec.available and spec.note == NO_PEER for spec in t.mechanisms.values())
    assert t.gpu.hbm_bandwidth_Bps == RECORDED.probe.ceilings["hbm_copy_Bps"]
    assert t.gpu.peak_flops["bf16"] == RECORDED.probe.ceilings["matmul_bf16_flops"]
    assert from_dict(to_dict(t)) == t


def test_no_peer_is_for_one_gpu_per_node_only():
    data = to_dict(_one_gpu()) | {"gpus_per_node": 2}
    with pytest.raises(ValueError, match="'none' \\(no peer\\) is for one GPU per node, not 2"):
        from_dict(data)


def test_bound_gives_a_problem_of_compute_alone_its_compute_and_hbm_terms(tmp_path):
    topo = tmp_path / "one.json"
    dump(_one_gpu(), topo)
    problem = tmp_path / "local_gemm.py"
    problem.write_text(PROBLEM)
    out = json.loads(runner.invoke(app, ["bound", str(problem), "-t", str(topo), "--json"]).stdout)
    flops, hbm = 2 * 8192**3, 2 * 3 * 8192**2
    t = _one_gpu()
    assert out["world_size"] == 1 and out["limiter"] == "compute"
    assert out["terms"]["compute_s"] == pytest.approx(flops / t.gpu.peak_flops["bf16"])
    assert out["terms"]["hbm_s"] == pytest.approx(hbm / t.gpu.hbm_bandwidth_Bps)
    assert out["terms"]["link_s"] == 0 and out["predictions"] == [] and out["recommendation"] is None
    text = runner.invoke(app, ["advise", str(problem), "-t", str(topo)])
    assert text.exit_code == 0 and "nothing to advise" in text.stdout


def test_a_problem_that_communicates_is_one_line_on_one_gpu(tmp_path):
    topo = tmp_path / "one.json"
    dump(_one_gpu(), topo)
    for command in ("bound", "advise"):
        result = runner.invoke(app, [command, "all-reduce", "-t", str(topo)])
        assert result.exit_code == 2 and len(result.stderr.strip().splitlines()) == 1
        assert "h200-one has one GPU and no peer, but all-reduce communicates" in result.stderr


def test_topology_show_prints_the_host_link_and_no_links(tmp_path):
    topo = tmp_path / "one.json"
    dump(_one_gpu(), topo)
    text = runner.invoke(app, ["topology", "show", str(topo)]).stdout
    assert "scale-up: none (one GPU" in text and "no peer, so no communication is modelled" in text
    assert "host link (pinned memory, copy engine; not used by the model): to the GPU 55 GB/s, back 53 GB/s" in text
