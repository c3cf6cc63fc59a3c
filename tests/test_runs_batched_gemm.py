"""A batched GEMM's roof counts the HBM bytes of every GEMM of the batch: A, B and C of each once (a B the batch
broadcasts, once); hand-derived byte counts."""

import pytest
from runs_traces import Synthetic

from pkroof.runs import analyze_traces
from pkroof.topology import preset

SGEMM = "ampere_sgemm_128x64_nn"


def _roof(tmp_path, op: str, dims: list) -> float:
    """The roof time of one fp32 `op` kernel of 1 s (far below any roof) with these Input Dims."""
    t = Synthetic(rank=0, world=1)
    t.kernel(SGEMM, 10, 1e6, op=op, dims=dims, types=["float"] * len(dims))
    r = analyze_traces(t.write(tmp_path / "r.json"), topology="hgx-h100-8")
    (row,) = r.kernels.to_dict("records")
    assert row["unsized"] is None
    return row["t_roof_s"]


def test_bmm_counts_a_b_and_c_of_every_batch(tmp_path):
    t_roof = _roof(tmp_path, "aten::bmm", [[2048, 606, 160], [2048, 160, 20]])
    nbytes = 4 * 2048 * (606 * 160 + 160 * 20 + 606 * 20)  # fp32 A + B + C of each of 2048 GEMMs
    assert nbytes == 919_797_760
    gpu = preset("hgx-h100-8").gpu
    hbm_s = nbytes / gpu.hbm_bandwidth_Bps
    flops_s = 2 * 2048 * 606 * 20 * 160 / gpu.peak_flops["tf32"]  # fp32 bounded at the TF32 peak
    assert hbm_s > flops_s  # so the roof is the bytes' time
    assert t_roof == pytest.approx(hbm_s, rel=1e-9)


def test_a_matmul_broadcasting_b_reads_b_once(tmp_path):
    t_roof = _roof(tmp_path, "aten::matmul", [[2048, 606, 160], [160, 20]])
    nbytes = 4 * (2048 * 606 * 160 + 160 * 20 + 2048 * 606 * 20)  # every A and C, the one B
    assert t_roof == pytest.approx(nbytes / preset("hgx-h100-8").gpu.hbm_bandwidth_Bps, rel=1e-9)
