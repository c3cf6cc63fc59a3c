"""The probe on real GPUs: its copy kernels on one GPU, then a quick probe of the node (2+ GPUs)."""

import pytest

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("n", [1, 4095, 4097, 3 * 4096 + 17, 1 << 20])
def test_sm_copy_copies_every_element(n):
    import torch

    from pkroof.topology.copy_kernels import sm_copy

    src = torch.randint(-(2**31), 2**31 - 1, (n,), dtype=torch.int32, device="cuda")
    dst = torch.full((n + 1,), -1, dtype=torch.int32, device="cuda")
    for ctas in (1, 3, 132):
        dst.fill_(-1)
        sm_copy(src, dst[:n], ctas)
        assert torch.equal(dst[:n], src) and int(dst[n]) == -1


@pytest.mark.parametrize("rows", [1, 63, 65, 1000])
def test_tma_copy_copies_every_tile(rows):
    import torch

    from pkroof.topology.copy_kernels import TMA_COLS, tma_copy

    n = rows * TMA_COLS
    src = torch.randint(-(2**31), 2**31 - 1, (n,), dtype=torch.int32, device="cuda")
    dst = torch.full((n + TMA_COLS,), -1, dtype=torch.int32, device="cuda")
    tma_copy(src, dst[:n], 7)
    torch.cuda.synchronize()
    assert torch.equal(dst[:n], src) and bool((dst[n:] == -1).all())


@pytest.mark.multigpu
def test_quick_probe_of_this_node(tmp_path):
    from pkroof.topology import load
    from pkroof.topology.probe import probe

    out = tmp_path / "node.json"
    t = probe(out=out, quick=True, name="this-node", log=print)
    assert load(out) == t
    assert all(c.verified for c in t.probe.curves)
    for name in ("copy-engine", "sm-load", "sm-store", "tma", "nccl"):
        spec = t.mechanisms[name]
        assert spec.available, name
        assert 0 < spec.peak_bandwidth_Bps <= t.scaleup.total_bandwidth_Bps, name
    assert not t.mechanisms["multimem"].available  # the probe never runs multicast
    assert t.probe.ceilings["flag_one_way_s"] > 0
    # the matmul under continuous load (the GPU at its power limit) is never faster than one burst after idle
    assert 0 < t.gpu.sustained_flops["bf16"] <= t.gpu.peak_flops["bf16"]


def test_local_ceilings_record_the_clock_each_matmul_rate_ran_at():
    import dataclasses

    import torch

    from pkroof.topology.probe_plan import make_plan
    from pkroof.topology.probe_worker import Rank

    worker = Rank.__new__(Rank)  # the local ceilings need no process group: rank 0's GPU alone
    worker.rank, worker.device = 0, torch.device("cuda", 0)
    worker.plan = dataclasses.replace(make_plan(quick=True), sizes=(1 << 20,), matmul_dtypes=("bf16", "fp32"))
    worker.ceilings, worker.notes, worker.log = {}, [], lambda line: None
    worker.ceilings_local()
    c = worker.ceilings
    for dtype in ("bf16", "fp32"):
        assert 0 < c[f"matmul_{dtype}_sustained_flops"] <= 1.1 * c[f"matmul_{dtype}_flops"], dtype
        assert c[f"matmul_{dtype}_sm_clock_mhz"] > 0 and c[f"matmul_{dtype}_sustained_sm_clock_mhz"] > 0, dtype
        assert 0.0 <= c[f"matmul_{dtype}_sustained_power_capped"] <= 1.0, dtype
    # fp32 run as tf32 would be ~8x the fp32 rate on an H200 (h200x2.json: fp32 50.9, tf32 411, bf16 798 TFLOP/s,
    # so fp32 is 6% of bf16 and tf32 52%): the tf32 flag is set on every call, the sustained pass included
    assert c["matmul_fp32_flops"] < 0.3 * c["matmul_bf16_flops"]
    assert c["matmul_fp32_sustained_flops"] < 0.3 * c["matmul_bf16_sustained_flops"]


def test_the_host_link_is_measured_and_its_bytes_checked():
    import dataclasses

    import torch

    from pkroof.topology.probe_plan import make_plan
    from pkroof.topology.probe_worker import Rank

    worker = Rank.__new__(Rank)  # the host link needs no process group: rank 0's GPU and its host
    worker.rank, worker.device = 0, torch.device("cuda", 0)
    worker.plan = dataclasses.replace(make_plan(quick=True), cta_sweep_bytes=16 << 20)
    worker.ceilings, worker.notes, worker.log = {}, [], lambda line: None
    worker.host_link()
    assert worker.notes == []
    # PCIe Gen5 x16 carries at most 63 GB/s per direction (the PCI Express spec, 32 GT/s x16), NVLink-C2C 450
    for key in ("host_to_device_Bps", "device_to_host_Bps"):
        assert 1e9 < worker.ceilings[key] < 450e9, key


def test_a_quick_probe_of_one_gpu_writes_a_topology_without_peers(tmp_path):
    from typer.testing import CliRunner

    from pkroof.cli import app
    from pkroof.topology import load

    out = tmp_path / "one.json"
    result = CliRunner().invoke(app, ["probe", "--quick", "--gpus", "0", "--out", str(out), "--name", "one"])
    assert result.exit_code == 0, result.output
    t = load(out)
    assert (t.gpus_per_node, t.scaleup.kind, t.scaleup.links_per_gpu) == (1, "none", 0)
    assert not any(spec.available for spec in t.mechanisms.values())
    assert all(spec.note == "one GPU: no peer to move data to" for spec in t.mechanisms.values())
    assert t.basis("gpu.hbm_bandwidth_Bps") == "measured" and t.gpu.peak_flops["bf16"] > 0
    assert 0 < t.gpu.sustained_flops["bf16"] <= t.gpu.peak_flops["bf16"]
    assert t.probe.ceilings["host_to_device_Bps"] > 0 and t.probe.ceilings["device_to_host_Bps"] > 0
    bound = CliRunner().invoke(app, ["bound", "all-reduce", "-t", str(out)])
    assert bound.exit_code == 2 and "one GPU and no peer" in bound.stderr
