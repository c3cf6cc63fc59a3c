"""Progress on stderr while a long step runs (report, profile, probe): shown on a terminal, naming the step; nothing
where stderr is not a terminal (a log, a pipe, CliRunner) or under --json; and the library calls the callback at
each step."""

import io
import json

import pytest
from typer.testing import CliRunner

from pkroof.cli import app
from pkroof.cli_common import progress_line


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_on_a_terminal_the_step_under_way_is_shown():
    stream = _Terminal()
    with progress_line(stream=stream) as progress:
        progress("h200x2: bounding all-reduce")
    assert "h200x2: bounding all-reduce" in stream.getvalue()


def test_off_a_terminal_nothing_is_shown():
    stream = io.StringIO()  # a pipe or a file: isatty() is False
    with progress_line(stream=stream) as progress:
        progress("h200x2: bounding all-reduce")
    assert stream.getvalue() == ""


def test_under_json_nothing_is_shown_even_on_a_terminal():
    stream = _Terminal()
    with progress_line(quiet=True, stream=stream) as progress:
        progress("h200x2: bounding all-reduce")
    assert stream.getvalue() == ""


def _results(tmp_path):
    record = {
        "schema": "pkroof.record/2",
        "problem": "all-reduce",
        "shape": "small",
        "params": {"size_bytes": 2**20},
        "impl": "reference",
        "world_size": 2,
        "status": "correct",
        "median_s": 40e-6,
        "p10_s": 36e-6,
        "p90_s": 44e-6,
        "topology": {"name": "h200x2"},
        "date": "2026-12-01T10:00:00+00:00",
        "environment": {"host": "node-1", "backend": "nccl", "gpu": "NVIDIA H200"},
    }
    path = tmp_path / "results.jsonl"
    path.write_text(json.dumps(record) + "\n")
    return path


def test_the_report_calls_progress_at_each_step(tmp_path):
    pytest.importorskip("plotly")
    from pkroof.report import report

    steps: list[str] = []
    report([_results(tmp_path)], topology="h200x2", out=tmp_path / "out", log=lambda line: None, progress=steps.append)
    assert "h200x2: bounding the problems of 1 record" in steps
    assert "h200x2: writing problem-all-reduce.html" in steps


def test_the_report_command_off_a_terminal_writes_no_progress(tmp_path):
    pytest.importorskip("plotly")
    done = CliRunner().invoke(app, ["report", str(_results(tmp_path)), "--out", str(tmp_path / "out")])
    assert done.exit_code == 0, done.output
    assert "bounding all-reduce" not in done.output and "writing problem-" not in done.output


def test_profile_calls_progress_for_each_implementation(tmp_path):
    pytest.importorskip("torch")  # CPU ranks over gloo
    from pkroof.profilers.profile import profile

    steps: list[str] = []
    profile(
        ["all-reduce"],
        impls=[],
        world_size=2,
        shape=None,
        overrides={},
        sizes=[1024],
        out_dir=tmp_path / "res",
        timeout_s=120,
        resume=False,
        topology="h200x2",
        iters=2,
        log=lambda line: None,
        progress=steps.append,
    )
    assert steps == ["all-reduce small size=1 KiB: checking and timing reference on 2 ranks"]
