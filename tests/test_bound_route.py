"""Where `pkroof bound` analyses a user's problem file, decided from its source before any of it runs: from the
trace cache, here with its hand-written workload() under a deadline, or in a process of its own; the file read once.
"""

import json
import os
import signal
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from typer.testing import CliRunner  # noqa: E402

from pkroof.analysis import source  # noqa: E402
from pkroof.cli import app  # noqa: E402
from pkroof.runtime import deadline, isolated  # noqa: E402

WORKLOAD_FILE = Path(__file__).parent / "data" / "problems" / "user_gemm_all_reduce_workload.py"
M, N, K = 64, 32, 16  # its "small" shape; fp32: 4 bytes an element
OPENED: list[str] = []


def _opened(event: str, args: tuple) -> None:
    if event == "open" and isinstance(args[0], str | os.PathLike):
        OPENED.append(os.path.realpath(args[0]))


sys.addaudithook(_opened)  # for the life of this process; it only appends paths


def _bound(path: Path, *extra: str) -> tuple[dict, int]:
    """`pkroof bound PATH --json` here; its JSON and how often it opened PATH."""
    before = len(OPENED)
    done = CliRunner().invoke(app, ["bound", str(path), "-t", "h200x2", "-n", "2", "--json", *extra])
    assert done.exit_code == 0, done.output
    return json.loads(done.stdout), OPENED[before:].count(os.path.realpath(path))


@pytest.fixture
def no_process(monkeypatch):
    monkeypatch.setattr(isolated, "run_isolated", lambda *a, **k: pytest.fail("a process was started"))


@pytest.fixture
def apart(monkeypatch):
    """run_isolated that runs its function here, noting that it was asked to."""
    calls = []

    def here(fn, args, **kw):
        calls.append(kw["what"])
        return fn(*args)

    monkeypatch.setattr(isolated, "run_isolated", here)
    return calls


def test_a_hand_written_workload_is_bounded_in_pkroofs_process_reading_the_file_once(no_process):
    out, reads = _bound(WORKLOAD_FILE)
    # rooflines.builders.gemm_all_reduce: the m×n fp32 output all-reduced, 2·m·n·k FLOPs
    assert [(c["kind"], c["size_bytes"]) for c in out["comm"]] == [("all-reduce", 4 * M * N)]
    assert out["flops"] == 2 * M * N * K
    assert reads == 1


def test_a_cached_trace_is_bounded_without_running_the_file_reading_it_once(tmp_path, monkeypatch):
    monkeypatch.setenv("PKROOF_TRACE_CACHE", str(tmp_path / "cache"))
    path = tmp_path / "traced.py"
    marker = tmp_path / "ran"
    path.write_text(
        WORKLOAD_FILE.read_text().split("\n\ndef workload")[0] + f"\n\nopen({str(marker)!r}, 'a').write('x')\n"
    )
    first, _ = _bound(path)  # traced (a process of its own: the file's top level runs code)
    monkeypatch.setattr(isolated, "run_isolated", lambda *a, **k: pytest.fail("a process was started"))
    again, reads = _bound(path)
    assert marker.read_text() == "x"  # the second bound ran nothing of the file
    assert [c["size_bytes"] for c in again["comm"]] == [c["size_bytes"] for c in first["comm"]] == [4 * M * N]
    assert reads == 1


def test_a_workload_in_a_file_whose_top_level_runs_code_is_analysed_apart(tmp_path, apart):
    path = tmp_path / "noisy.py"
    path.write_text(WORKLOAD_FILE.read_text() + "\nprint('imported')\n")
    out, reads = _bound(path)
    assert apart == [f"analysing {path}"]
    assert out["comm"][0]["size_bytes"] == 4 * M * N
    assert reads == 1  # the process apart runs the bytes read here


@pytest.mark.parametrize(
    ("text", "runs_only_definitions"),
    [
        ('"""doc"""\nimport math\nfrom os import path\nX = 8192 * 2\nSHAPES = {"s": dict(n=4)}\n', True),
        ("def workload(world_size, *, n=4):\n    return n\n", True),
        ("class C:\n    x = 1\n\n    def f(self):\n        return 1\n", True),
        ('if __name__ == "__main__":\n    main()\n', True),
        ("try:\n    import triton\nexcept ImportError:\n    triton = None\n", True),
        ("print('hi')\n", False),
        ("N = compute()\n", False),
        ("def f(x=compute()):\n    pass\n", False),
        ("@decorate\ndef f():\n    pass\n", False),
        ("while True:\n    pass\n", False),
        ("import neighbour\n", False),
        ("from . import x\n", False),
        ("def dict(**kw):\n    return kw\nS = dict(n=1)\n", False),
        ("def broken(:\n", False),
    ],
    ids=[
        "declarations",
        "a-function",
        "a-class",
        "a-main-block",
        "an-optional-import",
        "a-call",
        "a-computed-constant",
        "a-computed-default",
        "a-decorator",
        "a-loop",
        "an-import-of-its-own-folder",
        "a-relative-import",
        "its-own-dict",
        "a-syntax-error",
    ],
)
def test_whether_importing_a_file_runs_only_definitions_is_read_from_its_source(text, runs_only_definitions, tmp_path):
    (tmp_path / "neighbour.py").write_text("")
    path = tmp_path / "problem.py"
    path.write_text(text)
    assert source.declarative(source.read(path)) is runs_only_definitions


def test_a_deadline_stops_a_loop_in_this_process():
    with pytest.raises(deadline.DeadlineError), deadline.deadline(0.2):
        while True:
            pass


def test_a_deadline_gives_back_an_alarm_set_before_it():
    before = signal.getsignal(signal.SIGALRM)

    def outer(signum, frame):
        raise AssertionError("the outer alarm fired inside the test")

    signal.signal(signal.SIGALRM, outer)
    signal.setitimer(signal.ITIMER_REAL, 600)
    try:
        with pytest.raises(deadline.DeadlineError), deadline.deadline(0.2):
            while True:
                pass
        left, _ = signal.getitimer(signal.ITIMER_REAL)
        assert signal.getsignal(signal.SIGALRM) is outer and 0 < left <= 600
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, before)
