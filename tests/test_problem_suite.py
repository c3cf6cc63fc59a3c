"""The suite as a whole: at least 30 problems across the categories, each traceable; traced = hand-written."""

import pytest

torch = pytest.importorskip("torch")

from typer.testing import CliRunner  # noqa: E402

from pkroof.analysis.catalogue import CATEGORIES, suite  # noqa: E402
from pkroof.analysis.trace import trace_on_meta  # noqa: E402
from pkroof.cli import app  # noqa: E402

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
    written = problem.workload(world, params)
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
    assert out["params"] == {"tokens": 8192, "in_features": 8192, "out_features": 8 * 7168}  # its own, as -p takes
    assert out["flops"] == 2 * 8192 * 7168 * 8192
    bad = CliRunner().invoke(app, ["advise", "all-gather-gemm", "--shape", "nope"])
    assert bad.exit_code == 2 and "has no shape 'nope'" in bad.stderr


def _bound_json(*args):
    import json

    result = CliRunner().invoke(app, ["bound", *args, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout[result.stdout.index("{") :])


def _one_line_error(*args) -> str:
    result = CliRunner().invoke(app, list(args))
    assert result.exit_code == 2, result.output
    assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.output, result.output
    return result.stderr.strip()


def test_ring_attention_at_a_real_shape_traces_on_meta_with_bf16_matmuls(monkeypatch):
    import pkroof.runtime.launch as launch
    from pkroof.rooflines import Collective
    from pkroof.topology import resolve

    def no_cpu_ranks(*a, **kw):
        raise AssertionError("ring-attention must trace on meta tensors, not on CPU ranks (they need 32k's memory)")

    monkeypatch.setattr(launch, "run_ranks", no_cpu_ranks)
    problem = next(p for p in SUITE if p.name == "ring-attention")
    seq, heads, kv_heads, d, world = 32768, 32, 8, 128, 8  # llama3-8b-32k on 8 ranks
    w = trace_on_meta(problem, world, problem.params("llama3-8b-32k"))
    # each rank's seq/P queries meet all seq keys, per head: QKᵀ and PV are 2·(seq/P)·seq·d FLOPs each; the reference
    # upcasts to fp32 for its accuracy, the problem's math (its inputs) is bf16
    flops = 2 * 2 * heads * (seq // world) * seq * d
    assert w.flops_by_dtype == {"bf16": flops}
    # around the ring: P − 1 steps, each one batch_isend_irecv sending this rank's K and V chunks [seq/P, kv_heads, d]
    # bf16 to the next rank and receiving the previous rank's: one step of 2 chunks each way, after the step before
    # it (its K and V arrived in that step)
    chunk = (seq // world) * kv_heads * d * 2
    steps = [(op.kind, op.send_bytes, op.recv_bytes, op.group_size) for op in w.comm]
    assert steps == [(Collective.SEND_RECV, 2 * chunk, 2 * chunk, 2)] * (world - 1)
    assert [op.after for op in w.comm] == [(), *((w.comm[i].name,) for i in range(world - 2))]
    assert not w.ranks  # non-causal: every rank alike
    out = _bound_json("ring-attention", "--shape", "llama3-8b-32k", "--topology", "hgx-h100-8")
    assert out["terms"]["compute_s"] == pytest.approx(flops / resolve("hgx-h100-8").system(8).peak_flops["bf16"])
    text = CliRunner().invoke(app, ["bound", "ring-attention", "--shape", "llama3-8b-32k"]).stdout
    assert f"one-shot ×{world - 1}" in text and "one-shot,one-shot" not in text  # one column, not 7 repeats


def test_dtype_applies_to_suite_problems_or_is_refused_in_one_line():
    from pkroof.rooflines import Collective

    tokens, hidden, world = 64, 256, 8  # all-reduce-rmsnorm's small shape, traced with its bf16 inputs cast to fp32
    out = _bound_json("all-reduce-rmsnorm", "--dtype", "fp32")
    assert out["dtype"] == "fp32"
    assert [(c["kind"], c["size_bytes"]) for c in out["comm"]] == [(Collective.ALL_REDUCE.value, tokens * hidden * 4)]
    # read partial, residual [tokens, hidden] and gamma [hidden]; write normed and the new residual: all fp32
    assert out["hbm_bytes"] == 4 * (4 * tokens * hidden + hidden)
    assert (
        "(tokens=64, hidden=256, fp32)"
        in CliRunner().invoke(app, ["bound", "all-reduce-rmsnorm", "--dtype", "fp32"]).stdout
    )
    # a hand-written workload takes the dtype: llama3-70b-tp8 down projection in fp8, m·n·k with k = 28672 / 8
    m, n, k = 8192, 8192, 28672 // world
    out = _bound_json("gemm-reduce-scatter", "--shape", "llama3-70b-tp8", "--dtype", "fp8")
    assert (out["dtype"], out["flops"], out["comm"][0]["size_bytes"]) == ("fp8", 2 * m * n * k, m * n * 1)
    # a collective's size stays bytes in any dtype (nccl-tests' convention), as with --size
    out = _bound_json("all-reduce", "--shape", "llama3-70b-tp8-activation", "--dtype", "fp32")
    assert (out["dtype"], out["comm"][0]["size_bytes"]) == ("fp32", 8192 * 8192 * 2)
    # tf32: fp32 tensors, matmuls at the tf32 rate: ring-attention's small shape on 8 ranks
    out = _bound_json("ring-attention", "--dtype", "tf32")
    assert out["dtype"] == "tf32" and out["flops"] == 2 * 2 * 4 * (64 // world) * 64 * 16
    # a reference that needs data is traced on CPU ranks in its own dtype only
    err = _one_line_error("bound", "moe-dispatch", "--dtype", "fp32")
    assert "moe-dispatch" in err and "bounded only in the dtype of its inputs, bf16" in err
    assert "unknown dtype 'fp64'" in _one_line_error("bound", "all-reduce-rmsnorm", "--dtype", "fp64")


def test_parameters_start_from_the_default_shape_and_are_the_problems_own():
    # gemm-reduce-scatter's default ("small") shape: tokens=64, in_features=256, out_features=128; -p changes tokens
    # only: m = tokens, n = out_features, k = in_features / 8 per rank on hgx-h100-8's 8 ranks
    out = _bound_json("gemm-reduce-scatter", "-p", "tokens=4096")
    assert out["params"] == {"tokens": 4096, "in_features": 256, "out_features": 128}  # its own, as -p takes them
    err = _one_line_error("bound", "gemm-reduce-scatter", "-p", "m=5")
    assert "has no parameter m" in err and "tokens, in_features, out_features" in err
    err = _one_line_error("bound", "gemm-reduce-scatter", "-p", "tokens=4096", "-p", "tokens=5")
    assert "tokens is given twice" in err


def test_a_user_problem_whose_code_raises_is_one_line_naming_the_file_and_function(tmp_path):
    head = (
        '"""A user problem."""\nimport torch\nimport torch.distributed as dist\n'
        'CATEGORY = "collective"\nSOURCE = "a test"\nSHAPES = {"small": dict(n=64)}\n'
    )
    raises = tmp_path / "raises.py"
    raises.write_text(
        head + "def inputs(rank, world_size, *, seed, device, n):\n"
        "    return (torch.ones(n, dtype=torch.bfloat16, device=device),)\n"
        "def reference(x):\n    return x / undefined_helper\n"
    )
    err = _one_line_error("bound", str(raises))
    assert err == f"pkroof: {raises}: reference() raised NameError: name 'undefined_helper' is not defined"
    broken = tmp_path / "broken.py"  # read from its source; imported when traced, and the import fails
    broken.write_text(
        head.replace("import torch\n", "import torch\nimport not_a_module_anywhere\n") + raises.read_text()[len(head) :]
    )
    err = _one_line_error("bound", str(broken))
    assert str(broken) in err and "ModuleNotFoundError" in err
    empty = tmp_path / "empty.py"  # no functions at all: said without running it
    empty.write_text(head + "import not_a_module_anywhere\n")
    assert "has no function `inputs`" in _one_line_error("bound", str(empty))


def test_analytic_workloads_on_72_ranks_round_collective_sizes_and_say_why_a_shape_is_left_out():
    from pkroof.analysis.problem import NeedsDataError, analyze

    def cheap(name, shape, world=72, **kw):
        return analyze(name, topology="gb200-nvl72", shape=shape, world_size=world, cpu_ranks=False, **kw)

    # 8192 × 8192 bf16 gathered over 72 ranks: rounded down to whole chunks of 16 B per rank
    size = 8192 * 8192 * 2
    a = cheap("all-gather", "llama3-70b-tp8-activation", round_size=True)
    assert a.params["size_bytes"] == size - size % (16 * 72)
    assert a.analysis.workload.comm[0].size_bytes == size - size % (16 * 72)
    with pytest.raises(ValueError, match="not split evenly"):  # without rounding: refused
        cheap("all-gather", "llama3-70b-tp8-activation")
    with pytest.raises(ValueError, match="in_features=28672 is not divisible by the world size 72"):
        cheap("gemm-all-reduce", "llama3-70b-tp8", round_size=True)
    # a traced problem's shape error is its own reason, not "needs data to trace"
    with pytest.raises(ValueError, match="seq=32768 is not divisible by the world size 72"):
        cheap("ring-attention", "llama3-70b-32k", round_size=True)
    with pytest.raises(NeedsDataError):
        cheap("moe-dispatch", None, world=8)
    points = cheap("reduce-scatter", None, round_size=True, sweep=True).analysis.sweep
    assert len(points) == 10  # 4 KiB … 1 GiB, every size rounded to split over 72 ranks
    assert all(pt.size_bytes % (16 * 72) == 0 for pt in points)
