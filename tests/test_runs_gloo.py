"""Traces the project makes itself: two CPU ranks over gloo under torch.profiler, each exporting its Chrome trace
as a user would. They hold operators, shapes and steps but no GPU kernel: `pkroof trace` reads them and says so in
one line."""

import pytest

pytest.importorskip("torch")

from gloo import run_on_ranks
from runs_traces import profile_gloo_rank
from typer.testing import CliRunner

from pkroof.cli import app
from pkroof.runs.read import read_rank


@pytest.fixture(scope="module")
def gloo_traces(tmp_path_factory):
    folder = tmp_path_factory.mktemp("gloo")
    return run_on_ranks(profile_gloo_rank, 2, str(folder))


def test_torch_profiler_traces_are_read_with_their_steps_shapes_and_ranks(gloo_traces):
    for rank, path in enumerate(gloo_traces):
        t = read_rank(path)
        assert t.rank == rank and t.distributed["world_size"] == 2
        assert [n for n, _, _ in t.steps] == [1, 2]  # warm-up step 0 is not recorded: the schedule's 2 active steps
        mm = [op for op in t.ops if op.name == "aten::mm"]
        assert len(mm) == 2 and mm[0].input_dims[:2] == [[64, 32], [32, 64]]
        assert not t.kernels


def test_cpu_only_ranks_are_one_line_and_exit_2(gloo_traces):
    result = CliRunner().invoke(app, ["trace", *gloo_traces, "-t", "hgx-h100-8"])
    assert result.exit_code == 2
    assert (
        result.stderr.strip()
        == "pkroof: 2 traces: no GPU kernels (a CPU-only trace?): profile with ProfilerActivity.CUDA"
    )
