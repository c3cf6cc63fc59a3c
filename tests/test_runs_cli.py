"""`pkroof trace` through the CLI (typer's CliRunner): the summary, --json, --out, and bad input as one line on
stderr with exit status 2."""

import json
from pathlib import Path

from runs_traces import Synthetic, nccl_args
from typer.testing import CliRunner

from pkroof.cli import app

DATA = Path(__file__).parent / "data" / "runs"
AR = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
runner = CliRunner()


def _job(tmp_path) -> Path:
    """Two ranks, one step, one all-reduce each: rank 1 starts it 30 µs after rank 0."""
    for rank, start in ((0, 100), (1, 130)):
        t = Synthetic(rank=rank, world=2)
        t.step(1, 0, 1000)
        t.kernel("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n", 10, 80, op="aten::mm")
        t.kernel(AR, start, 60, stream=20, args=nccl_args("allreduce", 2**20, "BFloat16", [0, 1]))
        t.write(tmp_path / f"rank{rank}.json")
    return tmp_path


def test_the_summary_names_the_topology_the_steps_and_the_unsized(tmp_path):
    result = runner.invoke(app, ["trace", str(_job(tmp_path))])
    assert result.exit_code == 0, result.output
    out = result.output
    assert "pkroof trace: 2 of 2 ranks (0, 1)" in out
    assert "topology: hgx-h100-8 (deviceProperties GPU 'NVIDIA H100 80GB HBM3' with 132 SMs" in out
    assert "Steps (mean over ranks" in out and "communication" in out
    assert "Collectives matched across ranks: 1" in out and "last to arrive most often: rank 1" in out
    assert "2  aten::mm without Input Dims (record_shapes off)" in out


def test_json_is_the_schema_document_with_null_for_nan(tmp_path):
    result = runner.invoke(app, ["trace", str(_job(tmp_path)), "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    assert doc["schema"] == "pkroof.trace/1" and doc["topology"] == "hgx-h100-8" and doc["ranks"] == [0, 1]
    assert set(doc) >= {"kernels", "collectives", "steps", "opportunities", "notes", "topology_reason"}
    gemm = next(k for k in doc["kernels"] if k["category"] == "gemm")
    assert gemm["flops"] is None and gemm["t_roof_s"] is None  # not sized: null, not NaN
    ar = next(k for k in doc["kernels"] if k["category"] == "communication")
    assert ar["bytes"] == 2**20 * 2
    (collective,) = doc["collectives"]
    assert collective["last_rank"] == 1 and collective["ranks"] == "0,1"


def test_out_writes_the_json_document(tmp_path):
    out = tmp_path / "report"
    (tmp_path / "job").mkdir()
    result = runner.invoke(app, ["trace", str(_job(tmp_path / "job")), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert f"wrote {out / 'trace.json'}" in result.output
    assert json.loads((out / "trace.json").read_text())["schema"] == "pkroof.trace/1"


def test_a_topology_given_is_used_and_said(tmp_path):
    result = runner.invoke(app, ["trace", str(_job(tmp_path)), "-t", "hgx-h200-8"])
    assert result.exit_code == 0, result.output
    assert "topology: hgx-h200-8 (given with --topology hgx-h200-8)" in result.output


def _one_line_exit_2(args: list[str]) -> str:
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


def test_a_cpu_only_trace_is_one_line_and_exit_2():
    line = _one_line_exit_2(["trace", str(DATA / "hta_cpu_only")])
    assert line.startswith("pkroof: ") and "no GPU kernels" in line


def test_a_rocm_trace_is_one_line_and_exit_2():
    assert "a ROCm trace" in _one_line_exit_2(["trace", str(DATA / "hta_rocm")])


def test_an_unmatched_gpu_asks_for_a_topology_in_one_line():
    line = _one_line_exit_2(["trace", str(DATA / "hta_nccl_args")])
    assert line.endswith("give --topology NAME|FILE")


def test_an_unknown_topology_is_one_line(tmp_path):
    assert "unknown topology 'hgx-h300-8'" in _one_line_exit_2(["trace", str(_job(tmp_path)), "-t", "hgx-h300-8"])


def test_a_truncated_trace_is_one_line_and_exit_2(tmp_path):
    bad = tmp_path / "rank0.json"
    bad.write_text('{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "ncclDevKernel_')
    assert "not valid JSON, or truncated" in _one_line_exit_2(["trace", str(bad)])


def test_the_python_api_returns_the_frames_and_reports_progress(tmp_path):
    import pkroof

    seen = []
    job = pkroof.trace(_job(tmp_path), progress=lambda done, total, path: seen.append((done, total)))
    assert seen == [(1, 2), (2, 2)]
    assert list(job.steps.columns) == [
        "rank",
        "step",
        "wall_s",
        "compute_s",
        "communication_s",
        "exposed_communication_s",
        "idle_s",
    ]
    assert job.topology == "hgx-h100-8" and len(job.kernels) == 4
