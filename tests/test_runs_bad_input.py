"""Traces pkroof trace cannot use, or only in part: one line each (a ValueError; the CLI's one line and exit 2), or a
result labelled partial. Nothing in a trace runs: it is read as JSON data."""

import gzip
import json
from pathlib import Path

import pytest
from runs_traces import Synthetic, nccl_args

from pkroof.runs import analyze_traces

DATA = Path(__file__).parent / "data" / "runs"
AR = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"


def _rank(tmp_path, rank: int, world: int, **kw) -> Path:
    t = Synthetic(rank=rank, world=world, **kw)
    t.kernel(AR, 10, 5, args=nccl_args("allreduce", 1024, "Float", list(range(world))))
    return t.write(tmp_path / f"rank{rank}.json")


def test_a_truncated_trace_is_one_line(tmp_path):
    whole = _rank(tmp_path, 0, 1).read_bytes()
    cut = tmp_path / "cut.json"
    cut.write_bytes(whole[: len(whole) // 2])
    with pytest.raises(ValueError, match=r"cut.json: not valid JSON, or truncated") as e:
        analyze_traces(cut, topology="hgx-h100-8")
    assert "\n" not in str(e.value)


def test_a_truncated_gzip_is_one_line(tmp_path):
    whole = gzip.compress(_rank(tmp_path, 0, 1).read_bytes())
    cut = tmp_path / "cut.json.gz"
    cut.write_bytes(whole[: len(whole) // 2])
    with pytest.raises(ValueError, match=r"cut.json.gz: cannot be read"):
        analyze_traces(cut, topology="hgx-h100-8")


def test_json_that_is_not_a_trace_is_one_line(tmp_path):
    other = tmp_path / "results.json"
    other.write_text(json.dumps({"schema": "pkroof.bound/1", "t_roof_s": 1e-3}))
    with pytest.raises(ValueError, match=r"results.json: not a Chrome trace of torch.profiler \(no traceEvents\)"):
        analyze_traces(other, topology="hgx-h100-8")


def test_a_trace_whose_events_are_not_events_is_one_line(tmp_path):
    other = tmp_path / "odd.json"
    other.write_text(json.dumps({"traceEvents": [{"ph": "X", "ts": "soon"}]}))
    with pytest.raises(ValueError, match=r"odd.json: not a Chrome trace of torch.profiler .*ts"):
        analyze_traces(other, topology="hgx-h100-8")


def test_ranks_of_different_world_sizes_are_different_jobs(tmp_path):
    (tmp_path / "other").mkdir()
    paths = [_rank(tmp_path, 0, 2), _rank(tmp_path / "other", 1, 4)]
    with pytest.raises(ValueError, match=r"ranks from different jobs: .* has world size 2, .* 4"):
        analyze_traces(paths, topology="hgx-h100-8")


def test_one_rank_twice_is_refused(tmp_path):
    a = _rank(tmp_path, 0, 2)
    b = tmp_path / "copy-of-rank0.json"
    b.write_bytes(a.read_bytes())
    with pytest.raises(ValueError, match=r"ranks from different jobs, or one file twice: .* are rank 0"):
        analyze_traces([a, b], topology="hgx-h100-8")


def test_ranks_of_different_gpus_are_different_jobs(tmp_path):
    a = _rank(tmp_path, 0, 2)
    b = _rank(tmp_path, 1, 2, device={"name": "NVIDIA H200", "numSms": 132})
    with pytest.raises(
        ValueError, match=r"ranks from different jobs: .* has GPU NVIDIA H100 80GB HBM3, .* NVIDIA H200"
    ):
        analyze_traces([a, b], topology="hgx-h100-8")


def test_process_groups_of_different_sizes_are_different_jobs(tmp_path):
    a = _rank(tmp_path, 0, 4, pg_ranks=[0, 1, 2, 3])
    b = _rank(tmp_path, 1, 4, pg_ranks=[0, 1])
    with pytest.raises(ValueError, match=r"ranks from different jobs: .* process group '0' 4 and 2 ranks"):
        analyze_traces([a, b], topology="hgx-h100-8")


def test_a_missing_rank_is_a_labelled_partial_result(tmp_path):
    r = analyze_traces([_rank(tmp_path, 0, 4), _rank(tmp_path, 2, 4)], topology="hgx-h100-8")
    assert r.ranks == [0, 2]
    assert r.notes[0] == "partial result: 2 of 4 ranks; missing ranks 1, 3"


def test_a_cpu_only_trace_is_one_line():
    path = DATA / "hta_cpu_only" / "rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz"
    with pytest.raises(ValueError, match=r"no GPU kernels \(a CPU-only trace\?\)"):
        analyze_traces(path, topology="hgx-h100-8")


def test_a_rocm_trace_is_one_line():
    path = DATA / "hta_rocm" / "mi250_minitoy_train_ROCm6_2_kineto.json.gz"
    with pytest.raises(ValueError, match=r"a ROCm trace \(AMD Radeon Graphics\): pkroof trace reads NVIDIA .* only"):
        analyze_traces(path, topology="hgx-h100-8")


def test_a_rank_without_gpu_kernels_beside_others_is_left_out_and_said(tmp_path):
    cpu = Synthetic(rank=1, world=2)
    cpu.step(1, 0, 10)
    paths = [_rank(tmp_path, 0, 2), cpu.write(tmp_path / "rank1.json")]
    r = analyze_traces(paths, topology="hgx-h100-8")
    assert r.ranks == [0]
    assert any(n.startswith("rank 1: no GPU kernels") for n in r.notes)


def test_nothing_named_in_a_trace_is_run(tmp_path):
    # kernel and operator names that are code: read as text, never evaluated or imported
    t = Synthetic(rank=0, world=1)
    marker = tmp_path / "ran"
    code = f"__import__('pathlib').Path({str(marker)!r}).touch()"
    t.kernel(code, 10, 5, op=code, dims=[[1, 2]], types=[code])
    r = analyze_traces(t.write(tmp_path / "r.json"), topology="hgx-h100-8")
    assert r.kernels.iloc[0]["name"] == code
    assert not marker.exists()


def test_no_such_file_is_one_line(tmp_path):
    with pytest.raises(ValueError, match=r"nope.json: no such file or folder"):
        analyze_traces(tmp_path / "nope.json")


def test_a_glob_matching_nothing_is_one_line(tmp_path):
    with pytest.raises(ValueError, match=r"rank\*.json: no file matches"):
        analyze_traces(str(tmp_path / "rank*.json"))


@pytest.mark.parametrize("call", ["hipLaunchKernel", "hipExtModuleLaunchKernel"])
def test_a_trace_of_hip_runtime_calls_is_a_rocm_trace_in_one_line(tmp_path, call):
    # no AMD device name (no deviceProperties), no Cijk_ kernel: only the runtime call says ROCm
    t = Synthetic(rank=0, world=1, device=None)
    t.kernel("void at::native::vectorized_elementwise_kernel<4>", 10, 5, op="aten::add")
    for e in t.doc["traceEvents"]:
        if e["cat"] == "cuda_runtime":
            e["name"] = call
    with pytest.raises(ValueError, match=r"a ROCm trace \(HIP calls\): pkroof trace reads NVIDIA .* only") as e:
        analyze_traces(t.write(tmp_path / "rank0.json"), topology="hgx-h100-8")
    assert "\n" not in str(e.value)
