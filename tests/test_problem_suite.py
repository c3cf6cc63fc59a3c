"""The suite as a whole: at least 30 problems across the categories, each traceable; traced = hand-written."""

import pytest

torch = pytest.importorskip("torch")

from typer.testing import CliRunner  # noqa: E402

from pkroof.cli import app  # noqa: E402
from pkroof.profilers.problems import CATEGORIES, suite  # noqa: E402
from pkroof.profilers.trace import trace_on_meta  # noqa: E402

SUITE = suite()


def test_at_least_thirty_problems_across_the_categories():
    assert len(SUITE) >= 30
    assert {p.category for p in SUITE} == set(CATEGORIES)
    for p in SUITE:
        assert "/" in p.source and "::" in p.source, p.name  # repository, path and function
        assert next(iter(p.shapes)) == "small" and len(p.shapes) >= 2, p.name


def test_pkroof_problems_lists_the_suite():
    result = CliRunner().invoke(app, ["problems"])
    assert result.exit_code == 0
    for p in SUITE:
        assert p.name in result.stdout


@pytest.mark.parametrize("problem", [p for p in SUITE if p.has_workload], ids=lambda p: p.name)
@pytest.mark.parametrize("world", [2, 8])
def test_traced_workload_matches_the_hand_written_one(problem, world):
    shape = "llama3-70b-tp8" if "llama3-70b-tp8" in problem.shapes else "small"
    params = problem.params(shape)
    written = problem.module.workload(world, **params)
    traced = trace_on_meta(problem, world, params)
    comm = [(c.kind, c.size_bytes, c.group_size) for c in traced.comm]
    assert comm == [(c.kind, c.size_bytes, c.group_size) for c in written.comm]
    assert sum(op.flops for op in traced.compute) == pytest.approx(sum(op.flops for op in written.compute))


def test_bound_works_on_a_suite_problem_without_a_hand_written_workload():
    result = CliRunner().invoke(app, ["bound", "tp-mlp-sequence-parallel", "--topology", "hgx-h100-8", "--json"])
    assert result.exit_code == 0, result.output
    assert '"limiter"' in result.stdout


def test_bound_and_advise_take_a_suite_problems_named_shape():
    # llama3-70b-tp8 all-gather + column-parallel GEMM: m = 8192 tokens, k = 8192 hidden, n = 2·28672/8 columns
    result = CliRunner().invoke(app, ["bound", "all-gather-gemm", "--shape", "llama3-70b-tp8", "--json"])
    assert result.exit_code == 0, result.output
    import json

    out = json.loads(result.stdout[result.stdout.index("{") :])
    assert out["params"] == {"m": 8192, "n": 7168, "k": 8192}
    assert out["flops"] == 2 * 8192 * 7168 * 8192
    bad = CliRunner().invoke(app, ["advise", "all-gather-gemm", "--shape", "nope"])
    assert bad.exit_code == 2 and "has no shape 'nope'" in bad.stderr
