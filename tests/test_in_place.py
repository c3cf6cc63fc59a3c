"""References that write into their inputs, as real code does (issue 32 item 2): an all-reduce of the gradients it
was given, in-place gradient clipping. The tracer counts what they write; the profiler gives every call (the
reference and each implementation, checks and timed samples) copies of its own. 2 gloo ranks on CPU.
"""

import json

import pytest

torch = pytest.importorskip("torch")

from typer.testing import CliRunner  # noqa: E402

from pkroof.cli import app  # noqa: E402

TOKENS, HIDDEN = 64, 128
IN_PLACE_ALL_REDUCE = """
import torch
import torch.distributed as dist


def inputs(rank, world_size, *, seed, device, tokens=64, hidden=128):
    g = None if torch.device(device).type == "meta" else torch.Generator(device=device).manual_seed(seed * 1000 + rank)
    return (torch.randn(tokens, hidden, generator=g, device=device),)


def reference(grad):
    dist.all_reduce(grad)  # in place, on the tensor it was given
    return grad
"""
IN_PLACE_CLIPPING = """
import torch


def inputs(rank, world_size, *, seed, device, tokens=64, hidden=128):
    g = None if torch.device(device).type == "meta" else torch.Generator(device=device).manual_seed(seed * 1000 + rank)
    return ([torch.randn(tokens, hidden, generator=g, device=device), torch.randn(hidden, generator=g, device=device)],)


def reference(grads):  # torch.nn.utils.clip_grad_norm_'s steps on the gradients themselves
    norm = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in grads]))
    torch._foreach_mul_(grads, torch.clamp(1.0 / (norm + 1e-6), max=1.0))  # in place
    return norm
"""


@pytest.fixture(autouse=True)
def _no_cache(monkeypatch):
    monkeypatch.setenv("PKROOF_TRACE_CACHE", "off")


def _bound(path):
    done = CliRunner().invoke(app, ["bound", str(path), "-t", "h200x2", "-n", "2", "--json"])
    assert done.exit_code == 0, done.output
    return json.loads(done.stdout)


def test_an_in_place_all_reduce_of_its_input_is_bounded(tmp_path):
    path = tmp_path / "in_place.py"
    path.write_text(IN_PLACE_ALL_REDUCE)
    out = _bound(path)
    size = TOKENS * HIDDEN * 4  # fp32
    assert [(c["kind"], c["size_bytes"]) for c in out["comm"]] == [("all-reduce", size)]
    assert out["hbm_bytes"] == 2 * size  # read once, and written once: the output is the input


def test_in_place_clipping_counts_the_gradients_it_writes(tmp_path):
    path = tmp_path / "clipping.py"
    path.write_text(IN_PLACE_CLIPPING)
    grads = (TOKENS * HIDDEN + HIDDEN) * 4
    # both gradients read once, written once in place (not returned), and the norm (one fp32 scalar) returned
    assert _bound(path)["hbm_bytes"] == grads + grads + 4


def test_an_in_place_reference_is_profiled_on_copies_of_its_own(tmp_path):
    path = tmp_path / "in_place.py"
    path.write_text(IN_PLACE_ALL_REDUCE)
    impl = tmp_path / "mine.py"  # in place too: it checks against the reference only if each gets its own copies
    impl.write_text("import torch.distributed as dist\n\ndef fast(x):\n    dist.all_reduce(x)\n    return x\n")
    out = tmp_path / "res"
    args = ["profile", str(path), "--impl", f"{impl}:fast", "-n", "2", "--out", str(out), "-t", "h200x2"]
    done = CliRunner().invoke(app, [*args, "--iters", "3"])
    assert done.exit_code == 0, done.output
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    statuses = [(r["impl"].rpartition(":")[2], r["status"]) for r in rows]
    assert statuses == [("reference", "correct"), ("fast", "correct")]
    assert all(r["workload"]["comm"][0]["size_bytes"] == TOKENS * HIDDEN * 4 for r in rows)
