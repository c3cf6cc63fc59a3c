"""What the fault tests share (tests/test_faults.py, tests/test_faults_input.py): the hostile data, a PID watch
that finds what a case left running, and a profile seeded with a reference record that must never be lost."""

import json
import os
import signal
import time
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")


from pkroof.profilers.profile import profile, topology_ref  # noqa: E402
from pkroof.records import format as records  # noqa: E402
from pkroof.runtime import launch, process_tree  # noqa: E402
from pkroof.topology import resolve  # noqa: E402

DATA = Path(__file__).parent / "data" / "problems"
PROBLEM = os.path.realpath(DATA / "user_gemm_all_reduce.py")
HOSTILE = str(DATA / "hostile.py")
CHEATS = str(DATA / "cheats.py")
PARAMS = {"m": 64, "n": 32, "k": 16}  # the problem's "small" shape
HANG_S = 4  # --timeout where the case hangs: the deadline starts once every rank is in its process group


def _running(pid: int) -> bool:
    stat = Path(f"/proc/{pid}/stat")
    try:
        return stat.read_text().rpartition(")")[2].split()[0] not in ("Z", "X")  # a zombie is gone
    except (OSError, IndexError):
        return False


def _said(folder: Path) -> list[int]:
    """Every PID the hostile code wrote into $TEST_PIDS but this one's: a hand-written workload() of a file whose
    import runs only definitions is called in pkroof's own process (here: the test's), under a deadline."""
    said = [int(f.read_text()) for f in folder.iterdir() if f.read_text().strip().isdigit()]
    return [pid for pid in said if pid != os.getpid()]


def _left(pids: list[int], settle_s: float = 10) -> list[int]:
    """The PIDs still running once killed processes had `settle_s` to be reaped (a poll, not a time asserted)."""
    deadline = time.monotonic() + settle_s
    while (alive := [p for p in pids if _running(p)]) and time.monotonic() < deadline:
        time.sleep(0.05)
    return alive


def _my_descendants() -> set[int]:
    """Processes below this test process, but multiprocessing's resource tracker and the ranks' fork server (they
    live as long as this process does, and end with it: the signal tests check pkroof's)."""
    from multiprocessing import resource_tracker

    helpers = {getattr(resource_tracker._resource_tracker, "_pid", None), launch._server()}
    helpers |= process_tree.descendants({p for p in helpers if p})  # the fork server's own resource tracker
    return {p for p in process_tree.descendants({os.getpid()}) if p not in helpers and _running(p)}


@pytest.fixture
def pids(tmp_path, monkeypatch):
    """$TEST_PIDS for the hostile code; afterwards every process it named is asserted gone (and killed if not)."""
    folder = tmp_path / "pids"
    folder.mkdir()
    monkeypatch.setenv("TEST_PIDS", str(folder))
    before = _my_descendants()
    yield folder
    said = _said(folder)
    left = _left(said) + sorted(_my_descendants() - before)
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    assert not left, f"processes left running: {left}"


def _seed(out: Path, problem: str = PROBLEM, params: dict | None = None, topology: str = "h200x2") -> dict:
    """A reference record measured before the case runs (--resume skips it): it must still be there after."""
    record = {
        "problem": problem,
        "shape": "small",
        "params": params or PARAMS,
        "impl": "reference",
        "world_size": 2,
        "status": "correct",
        "median_s": 1e-3,
        "timing": {"mode": "cpu-wall", "samples_s": [1e-3]},
        "topology": topology_ref(resolve(topology)),
    }
    records.append(out / "results.jsonl", record)
    return record


def _profile(out: Path, impls: list[str], timeout_s: float = 60, problem: str = PROBLEM) -> tuple[list, list[str]]:
    """Profile `impls` after a recorded reference; the new records, and what was logged. The old record is kept."""
    seeded = _seed(out, problem)
    lines: list[str] = []
    written = profile(
        [problem],
        impls=impls,
        world_size=2,
        shape=None,
        overrides={},
        out_dir=out,
        timeout_s=timeout_s,
        resume=True,
        topology="h200x2",
        log=lines.append,
    )
    stored, unreadable = records.read(out / "results.jsonl")
    assert unreadable == [] and len(stored) == 1 + len(written)
    assert stored[0]["impl"] == "reference" and stored[0]["median_s"] == seeded["median_s"]  # nothing lost
    assert stored[1:] == [json.loads(json.dumps(r)) | {"schema": records.SCHEMA} for r in written]  # as returned
    return written, lines
