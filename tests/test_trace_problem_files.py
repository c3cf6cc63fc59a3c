"""Problem files written for a trace's top opportunities (runs/problem_files.py): `pkroof bound` and `advise` take
them as they are, at the trace's shapes (the same roof and advice as the suite's problem of that shape), `pkroof
profile` runs one on 2 gloo ranks, and nothing a trace holds becomes code."""

import ast
import importlib.util
import json
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

import pkroof
from pkroof.cli import app
from pkroof.runs import opportunities, problem_files

TOPO = "hgx-h100-8"
MIB = 1 << 20


def _opportunity(kind, *, collective, size, group=8, dtype="bf16", m=None, n=None, k=None, **fields):
    row = dict.fromkeys(opportunities.COLUMNS)
    row |= {"what": f"{kind} at the trace's shape", "kernels": "nvjet_tst_x ⇄ ncclDevKernel_y (rank 0 correlation 1)"}
    row |= {"measured_s": 2e-3, "predicted_s": 1e-3, "saving_s": 1e-3, "mechanism": "nccl", "schedule": "serial"}
    row |= {"kind": kind, "collective": collective, "bytes": float(size), "dtype": dtype, "group_size": group}
    row |= {"gemm_m": m, "gemm_n": n, "gemm_k": k, "instances": 3, "ranks": "0,1"}
    return row | fields


def _frame(*rows):
    return pd.DataFrame(list(rows), columns=list(opportunities.COLUMNS))


def _written(tmp_path, row):
    out = problem_files.write(_frame(row), tmp_path, topology=TOPO)
    return out.loc[0, "problem_file"]


def _cli(*args):
    done = CliRunner().invoke(app, [*args])
    assert done.exit_code == 0, done.output
    return json.loads(done.output) if "--json" in args else done.output


# (opportunity kind and shape, the suite problem and shape that is the same computation on 8 ranks)
SAME_AS_SUITE = {
    "all_reduce": (dict(collective="all_reduce", size=64 * MIB), ("all-reduce", {"size": "64MiB"})),
    "all_gather": (dict(collective="all_gather", size=128 * MIB), ("all-gather", {"size": "128MiB"})),
    "reduce_scatter": (dict(collective="reduce_scatter", size=128 * MIB), ("reduce-scatter", {"size": "128MiB"})),
    "all_to_all": (dict(collective="all_to_all", size=64 * MIB), ("all-to-all", {"size": "64MiB"})),
    "broadcast": (dict(collective="broadcast", size=16 * MIB), ("broadcast", {"size": "16MiB"})),
    # llama3-70b-tp8's shapes, the GEMM as one of 8 ranks runs it
    "gemm-reduce-scatter": (
        dict(collective="reduce_scatter", size=2 * 8192 * 8192, m=8192, n=8192, k=28672 // 8),
        ("gemm-reduce-scatter", {"shape": "llama3-70b-tp8"}),
    ),
    "gemm-all-reduce": (
        dict(collective="all_reduce", size=2 * 8192 * 8192, m=8192, n=8192, k=28672 // 8),
        ("gemm-all-reduce", {"shape": "llama3-70b-tp8"}),
    ),
    "all-gather-gemm": (
        dict(collective="all_gather", size=2 * 8192 * 8192, m=8192, n=2 * 28672 // 8, k=8192),
        ("all-gather-gemm", {"shape": "llama3-70b-tp8"}),
    ),
}


@pytest.mark.parametrize("case", list(SAME_AS_SUITE))
def test_bound_and_advise_take_the_file_at_the_traces_shape(case, tmp_path):
    shape, (suite, how) = SAME_AS_SUITE[case]
    kind = case if "gemm" in case else "collective"
    path = _written(tmp_path, _opportunity(kind, **shape))
    bound = _cli("bound", path, "--topology", TOPO, "--json")
    expected = pkroof.bound(suite, topology=TOPO, **how)
    assert bound["t_roof_s"] == pytest.approx(expected.t_roof_s, rel=1e-12)
    advice = _cli("advise", path, "--topology", TOPO, "--json")
    recommended = pkroof.advise(suite, topology=TOPO, **how)
    assert advice["t_s"] == pytest.approx(recommended.t_s, rel=1e-12)
    assert advice["mechanism"] == recommended.mechanism


@pytest.mark.parametrize("kind", ["all-to-all-gemm", "gemm-all-to-all"])
def test_the_moe_files_are_advised_as_the_opportunity_was(kind, tmp_path):
    # dispatch: A = 8192 rows × hidden 4096 sent; combine: C = 8192 × 4096 sent back
    n, k = (14336, 4096) if kind == "all-to-all-gemm" else (4096, 14336)
    path = _written(tmp_path, _opportunity(kind, collective="all_to_all", size=2 * 8192 * 4096, m=8192, n=n, k=k))
    advice = _cli("advise", path, "--topology", TOPO, "--json")
    from pkroof.runs.advise import advise_fusion

    assert advice["t_s"] == pytest.approx(advise_fusion(TOPO, kind, 8, "bf16", m=8192, n=n, k=k).t_s)


def test_files_for_the_top_opportunities_only(tmp_path):
    rows = [_opportunity("collective", collective="all_reduce", size=s * MIB) for s in (1, 2, 3)]
    out = problem_files.write(_frame(*rows), tmp_path, top=2, topology=TOPO)
    assert [p is not None for p in out["problem_file"]] == [True, True, False]
    assert sorted(p.name for p in (tmp_path / "problems").iterdir()) == ["top1_all_reduce.py", "top2_all_reduce.py"]


def test_a_dtype_torch_cannot_draw_gets_no_file_and_says_why(tmp_path):
    out = problem_files.write(
        _frame(_opportunity("collective", collective="all_reduce", size=MIB, dtype="Long")), tmp_path
    )
    assert out.loc[0, "problem_file"] is None and "dtype Long" in out.attrs["no_file"][0]


def _module(path):
    spec = importlib.util.spec_from_file_location("written", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_world_size_the_group_does_not_divide_is_one_line(tmp_path):
    path = _written(tmp_path, _opportunity("gemm-reduce-scatter", collective="reduce_scatter", size=2 * 64 * 32, m=64,
                                           n=32, k=16))  # fmt: skip
    written = _module(path)
    with pytest.raises(ValueError, match=r"world size 3 is not a multiple of group_size=8: run it on 8 ranks"):
        written.workload(3, group_size=8, m=64, n=32, k=16)
    with pytest.raises(ValueError, match=r"m=63 is not divisible by group_size=8"):
        written.workload(8, group_size=8, m=63, n=32, k=16)
    # on 8 ranks in groups of 4 (two tensor-parallel groups of a job), each group's collective is over 4 ranks
    assert written.workload(8, group_size=4, m=64, n=32, k=16).comm[0].group_size == 4


def test_nothing_a_trace_holds_becomes_code(tmp_path):
    hostile = '"""\nimport os; os.system("echo pwned")\n"""\\'
    row = _opportunity("collective", collective="all_reduce", size=MIB, kernels=hostile, what=hostile + "\n# x")
    text = Path(_written(tmp_path, row)).read_text()
    tree = ast.parse(text)
    top = [type(node).__name__ for node in tree.body]
    # the docstring, CATEGORY, SOURCE, SHAPES, _GROUPS, then functions only: no statement of the trace's
    assert top[:6] == ["Expr", "Assign", "Assign", "Assign", "Assign", "FunctionDef"]
    assert set(top[5:]) == {"FunctionDef"}
    assert '"' not in ast.get_docstring(tree) and "\\" not in text.split("CATEGORY")[0]  # neither quote nor backslash
    assert "os.system(?echo pwned?)" in ast.get_docstring(tree)  # the name is still there to read, made inert


def test_profile_runs_a_file_on_two_gloo_ranks(tmp_path):
    pytest.importorskip("torch")
    path = _written(tmp_path, _opportunity("gemm-reduce-scatter", collective="reduce_scatter", size=2 * 8192 * 8192,
                                           m=8192, n=8192, k=3584))  # fmt: skip
    out = tmp_path / "results"
    # the trace's group of 8 overridden to 2, its shape made small
    args = ["profile", path, "-n", "2", "-p", "group_size=2", "-p", "m=64", "-p", "n=32", "-p", "k=16"]
    _cli(*args, "--out", str(out), "-t", TOPO)
    (record,) = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert (record["impl"], record["status"], record["world_size"]) == ("reference", "correct", 2)
    assert record["workload"]["comm"][0]["size_bytes"] == 2 * 64 * 32  # C = 64 × 32 bf16, reduce-scattered
