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
