"""rooflines/ is pure math: importing it (and using it) must work with torch, pynvml and plotly unavailable."""

import subprocess
import sys

BLOCK = """
import sys
class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split('.')[0] in ('torch', 'pynvml', 'plotly', 'pandas'):
            raise ImportError(f'blocked {name}')
sys.meta_path.insert(0, Block())
"""


def _run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", BLOCK + code], capture_output=True, text=True)


def test_rooflines_imports_and_computes_with_torch_blocked():
    r = _run(
        "import pkroof.rooflines as r\n"
        "from pkroof.rooflines.builders import collective\n"
        "from pkroof.topology import preset\n"
        "b = r.bound(collective(r.Collective.ALL_REDUCE, 8, 'bf16', size=1 << 30), preset('hgx-h100-8').system())\n"
        "print(b.limiter)\n"
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "link"


def test_the_blocker_really_blocks():
    r = _run("import torch\n")
    assert r.returncode != 0 and "blocked torch" in r.stderr


CLI = """
import sys
from typer.testing import CliRunner
from pkroof.cli import app
result = CliRunner().invoke(app, {args!r})
print(result.exit_code)
print(result.stdout)
print("heavy:", sorted(m for m in ('torch', 'triton', 'pandas', 'plotly') if m in sys.modules))
"""


def _cli_without_torch(*args: str) -> tuple[int, str, str]:
    r = _run(CLI.format(args=list(args)))
    assert r.returncode == 0, r.stderr
    code, *rest = r.stdout.split("\n")
    heavy = next(line for line in rest if line.startswith("heavy:"))
    return int(code), "\n".join(rest), heavy


def test_problems_bound_advise_and_impls_need_no_torch():
    code, out, heavy = _cli_without_torch("problems")
    assert code == 0 and "ring-attention" in out and "size_bytes=1 MiB" in out and heavy == "heavy: []"
    # a suite problem's named shape with a hand-written workload: Llama-3-70B's MLP down projection at TP=8
    code, out, heavy = _cli_without_torch(
        "bound", "gemm-reduce-scatter", "--shape", "llama3-70b-tp8", "-t", "hgx-h100-8"
    )
    assert (
        code == 0 and "(tokens=8192, in_features=28672, out_features=8192, bf16)" in out
    )  # the problem's own, as -p takes them and heavy == "heavy: []"
    code, out, heavy = _cli_without_torch("advise", "all-reduce", "--shape", "llama3-70b-tp8-activation")
    assert code == 0 and "build " in out and "pkroof-one-shot-push" in out and heavy == "heavy: []"
    code, out, heavy = _cli_without_torch("impls")
    assert code == 0 and "pkroof-gemm-ar-inter-sm" in out and "sm-store / inter-sm" in out and heavy == "heavy: []"
    # a traced suite problem is read from the traces the package ships (kernels/problems/_traced.jsonl)
    code, out, heavy = _cli_without_torch("bound", "ring-attention", "-t", "h200x2")
    assert (
        code == 0 and "ring-attention (seq=64, heads=4, kv_heads=2, head_dim=16, bf16)" in out and heavy == "heavy: []"
    )
    # a shape nobody shipped says, in one line, what it needs
    code, out, _ = _cli_without_torch("bound", "ring-attention", "-t", "h200x2", "-p", "seq=96")
    assert code == 2


def test_profile_without_torch_is_one_line_and_exit_2_not_a_crash_record():
    # (the line goes to stderr, which this runner keeps apart: the message is checked in-process below)
    code, out, _ = _cli_without_torch("profile", "all-reduce", "--size", "64KiB", "--out", "/nonexistent/never-made")
    assert code == 2 and "crashed" not in out and "reference" not in out


def test_profile_says_it_needs_torch(monkeypatch, tmp_path):
    import pytest

    from pkroof.profilers import profile as module

    monkeypatch.setattr(module, "has_torch", lambda: False)
    with pytest.raises(ValueError, match="needs torch: pip install torch"):
        module.profile(
            ["all-reduce"], impls=[], world_size=2, shape=None, overrides={}, out_dir=tmp_path, timeout_s=60,
            resume=False, topology="h200x2",
        )  # fmt: skip
    assert not (tmp_path / "results.jsonl").exists()
