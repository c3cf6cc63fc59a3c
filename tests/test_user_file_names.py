"""A user's problem file is named by the file asked for, and says what it is: a copy of a file whose trace is cached
is named after the copy; `bound --json` is byte-identical with and without the trace cache, integers staying
integers; a file's docstring, CATEGORY and SOURCE appear in `bound`'s text and JSON; headers and JSON name the
problem's own parameters (the ones `--param` takes), fused problems are not framed as a bare collective."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")  # the files are traced from their reference

PROBLEM = '''"""Reduce-scatter then RMSNorm, as in a sequence-parallel block."""
import torch
import torch.distributed as dist

CATEGORY = "tp-norm"
SOURCE = "example: my_model.py::block"


def inputs(rank, world_size, *, seed, device, tokens=64, hidden=128):
    g = None if torch.device(device).type == "meta" else torch.Generator(device=device).manual_seed(seed + rank)
    return (torch.randn(tokens, hidden, generator=g, device=device),)


def reference(x):
    out = torch.empty(x.shape[0] // dist.get_world_size(), x.shape[1], device=x.device, dtype=x.dtype)
    dist.reduce_scatter_tensor(out, x.clone())
    return torch.nn.functional.rms_norm(out, (x.shape[1],))
'''
BARE = '''"""A bare reduce-scatter."""
import torch
import torch.distributed as dist


def inputs(rank, world_size, *, seed, device, tokens=64, hidden=128):
    return (torch.zeros(tokens, hidden, device=device),)


def reference(x):
    out = torch.empty(x.shape[0] // dist.get_world_size(), x.shape[1], device=x.device, dtype=x.dtype)
    dist.reduce_scatter_tensor(out, x.clone())
    return out
'''


def _pkroof(*args: str, cwd: Path, cache: str) -> str:
    env = os.environ | {"PKROOF_TRACE_CACHE": cache, "PYTHONWARNINGS": "ignore"}
    command = [sys.executable, "-m", "pkroof", *args]
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("user-files")
    (folder / "my_norm.py").write_text(PROBLEM)
    (folder / "copy_of_norm.py").write_text(PROBLEM)  # the same bytes: the same cache entry
    (folder / "bare_rs.py").write_text(BARE)
    return folder


def test_bound_json_is_byte_identical_with_and_without_the_trace_cache(files, tmp_path):
    args = ("bound", "my_norm.py", "-t", "h200x2", "--json")
    cache = str(tmp_path / "cache")
    uncached = _pkroof(*args, cwd=files, cache="off")
    traced = _pkroof(*args, cwd=files, cache=cache)  # traced, then stored
    hit = _pkroof(*args, cwd=files, cache=cache)  # read from the cache
    assert any((tmp_path / "cache").iterdir())
    assert uncached == traced == hit
    assert json.loads(hit)["params"] == {"tokens": 64, "hidden": 128}  # integers, not 64.0
    assert '"tokens": 64,' in hit


def test_a_copy_of_a_cached_file_is_named_after_itself(files, tmp_path):
    cache = str(tmp_path / "cache")
    first = json.loads(_pkroof("bound", "my_norm.py", "-t", "h200x2", "--json", cwd=files, cache=cache))
    copy = json.loads(_pkroof("bound", "copy_of_norm.py", "-t", "h200x2", "--json", cwd=files, cache=cache))
    assert first["problem"] == "my-norm" and copy["problem"] == "copy-of-norm"
    text = _pkroof("bound", "copy_of_norm.py", "-t", "h200x2", cwd=files, cache=cache)
    assert text.startswith("copy-of-norm (tokens=64, hidden=128, fp32) on h200x2, 2 ranks\n")


def test_bound_shows_the_files_docstring_category_and_source(files):
    text = _pkroof("bound", "my_norm.py", "-t", "h200x2", cwd=files, cache="off")
    about = "Reduce-scatter then RMSNorm, as in a sequence-parallel block. · category tp-norm · source example: "
    assert text.splitlines()[1] == about + "my_model.py::block"
    found = json.loads(_pkroof("bound", "my_norm.py", "-t", "h200x2", "--json", cwd=files, cache="off"))
    assert found["about"] == {
        "summary": "Reduce-scatter then RMSNorm, as in a sequence-parallel block.",
        "category": "tp-norm",
        "source": "example: my_model.py::block",
    }


def test_a_fused_reduce_scatter_and_norm_is_not_framed_as_a_bare_collective(files):
    fused = json.loads(_pkroof("bound", "my_norm.py", "-t", "h200x2", "--json", cwd=files, cache="off"))
    assert fused["algbw_Bps"] is None and fused["busbw_Bps"] is None
    assert all(p["busbw_Bps"] is None for p in fused["predictions"])
    bare = json.loads(_pkroof("bound", "bare_rs.py", "-t", "h200x2", "--json", cwd=files, cache="off"))
    size = 64 * 128 * 4  # fp32 input of the reduce-scatter: nccl-tests' size
    assert bare["algbw_Bps"] == pytest.approx(size / bare["t_roof_s"], rel=1e-12)
    assert bare["busbw_Bps"] == pytest.approx(bare["algbw_Bps"] * (2 - 1) / 2, rel=1e-12)  # (n-1)/n, n = 2


def test_the_api_takes_back_the_parameters_it_returned(files, monkeypatch, tmp_path):
    import pkroof

    monkeypatch.setenv("PKROOF_TRACE_CACHE", str(tmp_path / "cache"))
    path = str(files / "my_norm.py")
    first = pkroof.bound(path, topology="h200x2")
    again = pkroof.bound(path, topology="h200x2", params=dict(first.params))  # a cache hit, passed back
    assert dict(again.params) == {"tokens": 64, "hidden": 128}
    assert all(type(v) is int for v in again.params.values())


def test_headers_and_json_name_the_problems_own_parameters():
    from typer.testing import CliRunner

    from pkroof.cli import app

    run = CliRunner().invoke(app, ["bound", "gemm-reduce-scatter", "-t", "hgx-h100-8", "-p", "tokens=16384"])
    assert run.exit_code == 0, run.output
    header = run.stdout.splitlines()[0]
    assert header.startswith("gemm-reduce-scatter (tokens=16384, ") and "m=" not in header
    run = CliRunner().invoke(app, ["bound", "all-reduce", "-t", "h200x2", "--size", "1MiB", "--json"])
    assert json.loads(run.stdout)["params"] == {"size_bytes": 2**20}
    text = CliRunner().invoke(app, ["bound", "all-reduce", "-t", "h200x2", "--size", "1MiB"]).stdout
    assert text.startswith("all-reduce (size_bytes=1 MiB, bf16) on h200x2")
