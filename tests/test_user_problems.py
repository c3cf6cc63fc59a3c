"""A third party's own problem file, as they already have it: `inputs` and `reference`, nothing else.

The minimal file below is bounded, advised and profiled by path (CPU, 2 gloo ranks); its shape is inputs()' keyword
defaults, `--param` changes them, and a parameter without a default is asked for in one line.
"""

import json

import pytest

torch = pytest.importorskip("torch")

from typer.testing import CliRunner  # noqa: E402

from pkroof.cli import app  # noqa: E402

MINIMAL = """
import torch
import torch.distributed as dist


def inputs(rank, world_size, *, seed, device, tokens=64, hidden=128):
    g = None if torch.device(device).type == "meta" else torch.Generator(device=device).manual_seed(seed * 1000 + rank)
    return (torch.randn(tokens, hidden, generator=g, device=device, dtype=torch.bfloat16),)


def reference(x):
    out = x.clone()
    dist.all_reduce(out)
    return out
"""


@pytest.fixture
def minimal(tmp_path):
    path = tmp_path / "my_all_reduce.py"
    path.write_text(MINIMAL)
    return path


def _json(*args):
    done = CliRunner().invoke(app, [*args, "--json"])
    assert done.exit_code == 0, done.output
    return json.loads(done.stdout)


def test_a_minimal_file_is_bounded_at_its_keyword_defaults(minimal):
    # the all-reduce of a [64, 128] bf16 tensor on 2 ranks: 64·128·2 B = 16 KiB, nccl-tests' size; HBM: the input
    # read once, its clone written and the output (the same tensor) written once: 2 × 16 KiB
    out = _json("bound", str(minimal), "--topology", "h200x2", "-n", "2")
    assert out["problem"] == "my-all-reduce" and out["params"] == {"tokens": 64, "hidden": 128}
    assert [(c["kind"], c["size_bytes"]) for c in out["comm"]] == [("all-reduce", 64 * 128 * 2)]
    assert out["hbm_bytes"] == 2 * 64 * 128 * 2
    # at 2 ranks every all-reduce algorithm puts the whole buffer on each rank's link: S
    assert out["link_bytes_per_rank"] == 64 * 128 * 2
    wider = _json("bound", str(minimal), "--topology", "h200x2", "-n", "2", "-p", "hidden=256")
    assert wider["params"] == {"tokens": 64, "hidden": 256} and wider["comm"][0]["size_bytes"] == 64 * 256 * 2
    advice = _json("advise", str(minimal), "--topology", "h200x2", "-n", "2")
    assert advice["t_s"] >= out["t_roof_s"]


def test_pkroof_problems_style_metadata_is_optional_and_defaults_are_sensible(minimal):
    from pkroof.analysis.catalogue import load

    p = load(str(minimal))
    assert (p.name, p.category, p.source, p.summary) == ("my-all-reduce", "user", str(minimal), "")
    assert p.shapes == {"default": {"tokens": 64, "hidden": 128}} and p.default_shape == "default"
    assert not p.suite and len(p.sha256) == 64


def test_a_parameter_without_a_default_is_asked_for_in_one_line(tmp_path):
    path = tmp_path / "bare.py"
    path.write_text(MINIMAL.replace("tokens=64, hidden=128", "tokens, hidden"))
    done = CliRunner().invoke(app, ["bound", str(path), "-t", "h200x2"])
    assert done.exit_code == 2 and done.stderr.count("\n") == 1 and "Traceback" not in done.output
    assert "takes tokens, hidden without a default" in done.stderr
    assert "--param tokens=N --param hidden=N" in done.stderr
    given = _json("bound", str(path), "-t", "h200x2", "-p", "tokens=8", "-p", "hidden=16")
    assert given["comm"][0]["size_bytes"] == 8 * 16 * 2


def test_a_minimal_file_is_profiled_and_its_records_carry_its_hash_and_workload(minimal, tmp_path):
    import hashlib

    impl = tmp_path / "mine.py"
    impl.write_text("import torch.distributed as dist\n\ndef fast(x):\n    out = x.clone()\n    dist.all_reduce(out)\n"
                    "    return out\n")  # fmt: skip
    out = tmp_path / "res"
    done = CliRunner().invoke(
        app, ["profile", str(minimal), "--impl", f"{impl}:fast", "-n", "2", "--out", str(out), "-t", "h200x2"]
    )
    assert done.exit_code == 0, done.output
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert [(r["impl"].rpartition(":")[2], r["status"]) for r in rows] == [
        ("reference", "correct"),
        ("fast", "correct"),
    ]
    for r in rows:
        assert r["schema"] == "pkroof.record/2" and r["problem"] == str(minimal)
        assert r["problem_sha256"] == hashlib.sha256(minimal.read_bytes()).hexdigest()
        assert r["workload"]["comm"][0]["size_bytes"] == 64 * 128 * 2  # traced: kept with the measurement
        assert r["topology"]["name"] == "h200x2" and len(r["topology"]["sha256"]) == 64
        assert r["dtype"] == "bf16" and r["median_s"] > 0
        assert not {"t_roof_s", "fraction_of_roofline", "predicted_s", "analysis", "comm_bytes"} & set(r)


CRASHING_REFERENCE = """
import torch
from pkroof.rooflines.builders import collective
from pkroof.rooflines import Collective


def inputs(rank, world_size, *, seed, device, size_bytes=4096):
    return (torch.ones(size_bytes // 4, device=device),)


def reference(x):
    raise RuntimeError("the reference is broken")


def workload(world_size, *, size_bytes):
    return collective(Collective.ALL_REDUCE, world_size, "fp32", size=size_bytes)
"""


def test_profile_exits_non_zero_when_the_reference_itself_fails(tmp_path):
    # a hand-written workload bounds it without running the reference; the ranks then find it broken: the record
    # says so, and the exit status does too (nothing could be checked against it)
    path = tmp_path / "broken.py"
    path.write_text(CRASHING_REFERENCE)
    out = tmp_path / "res"
    done = CliRunner().invoke(app, ["profile", str(path), "-n", "2", "--out", str(out), "-t", "h200x2"])
    assert done.exit_code == 1, done.output
    (row,) = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert (row["impl"], row["status"]) == ("reference", "crashed")
    assert "the reference failed" in done.stderr and "crashed" in done.stderr
