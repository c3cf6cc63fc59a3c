"""The Python API from a plain `python -c`: pkroof.bound, pkroof.advise, pkroof.profile, the model's own frozen
results whose attributes include every key of the JSON, and an `import pkroof` that loads neither torch nor pandas."""

import dataclasses
import json
import os
import subprocess
import sys

import pytest
from typer.testing import CliRunner

import pkroof
from pkroof.cli import app

MiB = 2**20


def _python(code: str) -> str:
    env = {k: v for k, v in os.environ.items() if k != "PKROOF_TOPOLOGY"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_import_pkroof_is_cheap_and_bound_needs_no_torch():
    out = _python(
        "import sys, pkroof\n"
        "print('torch' in sys.modules, 'pandas' in sys.modules, 'plotly' in sys.modules)\n"
        "b = pkroof.bound('all-reduce', topology='h200x2', size='256MiB')\n"
        "print('torch' in sys.modules, 'pandas' in sys.modules)\n"
        "print(b.t_roof_s, b.limiter, b.terms.link_s, b.predictions[0].t_s, b.recommendation.mechanism)\n"
    )
    first, second, values = out.splitlines()
    assert first == "False False False" and second == "False False"
    t_roof, limiter, link_s, best, mechanism = values.split()
    cli = json.loads(
        CliRunner().invoke(app, ["bound", "all-reduce", "-t", "h200x2", "--size", "256MiB", "--json"]).stdout
    )
    assert float(t_roof) == cli["t_roof_s"] and limiter == cli["limiter"] and float(link_s) == cli["terms"]["link_s"]
    assert float(best) == cli["predictions"][0]["t_s"] and mechanism == cli["recommendation"]["mechanism"]


def test_advise_from_python_is_advise_json():
    out = _python(
        "import json, pkroof\n"
        "r = pkroof.advise('gemm-reduce-scatter', topology='hgx-h100-8', shape='llama3-70b-tp8', "
        "params={'tokens': 16384})\n"
        "print(json.dumps([r.mechanism, r.schedule, r.t_s, r.headroom, r.reason]))\n"
    )
    cli = CliRunner().invoke(
        app,
        [
            "advise",
            "gemm-reduce-scatter",
            "-t",
            "hgx-h100-8",
            "--shape",
            "llama3-70b-tp8",
            "-p",
            "tokens=16384",
            "--json",
        ],
    )
    rec = json.loads(cli.stdout)
    assert json.loads(out) == [rec["mechanism"], rec["schedule"], rec["t_s"], rec["headroom"], rec["reason"]]


def test_bad_input_is_a_value_error_of_one_line():
    out = _python(
        "import pkroof\n"
        "for call in (lambda: pkroof.bound('all-gatherr'), lambda: pkroof.bound('all-reduce', size='lots'),\n"
        "             lambda: pkroof.bound('all-reduce', topology='hgx-h20-8')):\n"
        "    try:\n"
        "        call()\n"
        "    except ValueError as e:\n"
        "        print(str(e).count(chr(10)), type(e).__name__)\n"
    )
    assert out.splitlines() == ["0 ValueError"] * 3


def test_the_bound_object_has_the_json_fields_and_is_frozen():
    from pkroof.rooflines import Bound, Prediction
    from pkroof.rooflines.advice import Advice

    b = pkroof.bound("all-gather", topology="hgx-h100-8", size="1GiB")
    cli = json.loads(
        CliRunner().invoke(app, ["bound", "all-gather", "-t", "hgx-h100-8", "--size", "1GiB", "--json"]).stdout
    )
    assert pkroof.Bound is Bound and pkroof.Prediction is Prediction and pkroof.Advice is Advice  # the model's own
    assert list(pkroof.Bound.json_fields) == list(cli) and all(hasattr(b, name) for name in cli)
    assert {f.name for f in dataclasses.fields(pkroof.Prediction)} == set(cli["predictions"][0])
    assert list(pkroof.Advice.json_fields) == list(cli["recommendation"])
    assert b.to_dict() == cli and (b.schema, b.problem, b.topology) == (cli["schema"], "all-gather", "hgx-h100-8")
    assert b.terms.link_s == cli["terms"]["link_s"] and b.recommendation.t_s == cli["recommendation"]["t_s"]
    assert isinstance(b.predictions, tuple) and isinstance(b.predictions[0], pkroof.Prediction)
    with pytest.raises(dataclasses.FrozenInstanceError):
        b.t_roof_s = 0.0  # type: ignore[misc]
    with pytest.raises(TypeError):
        b.params["size_bytes"] = 1  # type: ignore[index]


def test_across_nodes_the_link_term_of_each_tier_is_a_typed_object_as_the_json():
    b = pkroof.bound("all-reduce", topology="hgx-h100-8", nodes=2, size="1GiB")
    args = ["bound", "all-reduce", "-t", "hgx-h100-8", "--nodes", "2", "--size", "1GiB", "--json"]
    cli = json.loads(CliRunner().invoke(app, args).stdout)
    assert list(b.link_terms) == ["scale-up", "scale-out"]
    assert all(isinstance(t, pkroof.LinkTerm) for t in b.link_terms.values())
    assert {f.name for f in dataclasses.fields(pkroof.LinkTerm)} == set(cli["link_terms"]["scale-out"])
    assert b.to_dict() == cli
    assert b.terms.link_s == max(t.t_s for t in b.link_terms.values()) == b.link_terms[b.link_tier].t_s


def test_a_list_of_sizes_gives_a_list():
    found = pkroof.bound("all-reduce", topology="h200x2", size=pkroof.sizes("1M", "4M", stepfactor=2))
    assert [b.params["size_bytes"] for b in found] == [MiB, 2 * MiB, 4 * MiB]
    assert [r.t_s for r in pkroof.advise("all-reduce", topology="h200x2", size=[MiB, 4 * MiB])] == [
        found[0].recommendation.t_s,
        found[2].recommendation.t_s,
    ]


def test_the_default_topology_is_the_clis():
    from pkroof.topology.default import PRESET

    assert pkroof.bound("all-reduce").topology == PRESET


def test_profile_from_python_returns_records_with_the_models_fields(tmp_path):
    pytest.importorskip("torch")
    code = (
        "import json, pkroof\n"
        f"rs = pkroof.profile('all-reduce', topology='h200x2', size='64KiB', out={str(tmp_path)!r}, iters=3)\n"
        "print(json.dumps([[r['impl'], r['status'], r['t_roof_s'], len(r['timing']['samples_s'])] for r in rs]))\n"
    )
    rows = json.loads(_python(code).splitlines()[-1])
    assert rows[0][:2] == ["reference", "correct"]
    bound = pkroof.bound("all-reduce", topology="h200x2", size="64KiB")
    assert rows[0][2] == bound.t_roof_s and rows[0][3] == 3  # --iters 3: three samples
    stored = [json.loads(line) for line in (tmp_path / "results.jsonl").read_text().splitlines()]
    assert len(stored) == len(rows) and "t_roof_s" not in stored[0]  # the file holds measurements only


@pytest.mark.parametrize("problem", ["ring-attention", "all-to-allv", "moe-dispatch", "tp-mlp-sequence-parallel"])
def test_traced_problems_with_uneven_ranks_and_dependencies_build_the_same_object_as_the_json(problem):
    # traced references carry what hand-written workloads do not: each rank's own bytes (send_bytes/recv_bytes),
    # the ops a collective waits for (after), the busiest rank per term, ops no formula prices
    if problem in ("all-to-allv", "moe-dispatch"):  # values decide their splits: traced on CPU ranks, none shipped
        pytest.importorskip("torch")
    b = pkroof.bound(problem, topology="h200x2")
    out = CliRunner().invoke(app, ["bound", problem, "-t", "h200x2", "--json"])
    assert out.exit_code == 0, out.output
    assert json.loads(json.dumps(b.to_dict())) == json.loads(out.stdout)
    assert set(b.busiest_rank) <= {"compute", "hbm", "link", "latency"} and isinstance(b.uncounted, tuple)
    assert pkroof.advise(problem, topology="h200x2").t_s >= b.t_roof_s


def test_a_problem_file_takes_the_clis_route_and_is_stopped_at_its_deadline(tmp_path):
    from hostile_problems import HEAD, REFERENCE, SOURCES

    written = "from pkroof.rooflines import Collective, CommOp, Workload\n"
    written += "def workload(world_size, *, n=64):\n    _say('mine')\n"
    written += "    return Workload('w', comm=(CommOp('x', Collective.ALL_REDUCE, 4 * n, world_size),))\n"
    (tmp_path / "mine.py").write_text(HEAD + REFERENCE + written)
    (tmp_path / "hangs.py").write_text(SOURCES["workload_hangs"])
    (tmp_path / "pids").mkdir()
    code = (
        "import os, pkroof\n"
        f"b = pkroof.bound({str(tmp_path / 'mine.py')!r}, topology='h200x2', world_size=2)\n"
        "print(os.getpid(), b.problem, b.comm[0].size_bytes)\n"
        "try:\n"
        f"    pkroof.bound({str(tmp_path / 'hangs.py')!r}, topology='h200x2', world_size=2, timeout_s=3)\n"
        "except ValueError as e:\n"
        "    print(e)\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "PKROOF_TOPOLOGY"} | {"TEST_PIDS": str(tmp_path / "pids")}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    first, stopped = done.stdout.splitlines()
    caller, problem, size = first.split()
    # the file's own workload, at its default n, named after the file asked for (not the name workload() gave it)
    assert (problem, float(size)) == ("mine", 4 * 64)
    ran = {p.name.split("-")[0]: int(p.read_text()) for p in (tmp_path / "pids").iterdir()}
    # a file of definitions with a hand-written workload(): called in the caller's process under an alarm, as
    # `pkroof bound` does (analysis/user_file.py); a workload() that hangs is stopped at timeout_s all the same
    assert ran["mine"] == int(caller)
    assert stopped.startswith(f"analysing {tmp_path / 'hangs.py'}: stopped after")
