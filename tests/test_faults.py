"""The fault matrix (issue 25): every way a hostile or careless user's kernel, problem file, topology file or
results file can fail, on 2 CPU ranks over gloo. Each case asserts the one line (exit 2) or the recorded status,
that the record measured before it is still there, and, by PID, that no process it started is left running.

Implementations: tests/data/problems/hostile.py (raise, signals, exits, hangs, processes that try to outlive
pkroof, wrong outputs) and cheats.py (right while checked, wrong or idle while timed); problem files:
hostile_problems.py's SOURCES (loops, exits and hangs while imported or analysed)."""

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from faults_common import (  # noqa: E402, F401 (pids: the fixture that checks no PID a case named is left)
    CHEATS,
    DATA,
    HANG_S,
    HOSTILE,
    PARAMS,
    PROBLEM,
    _left,
    _my_descendants,
    _profile,
    _running,
    _said,
    _seed,
    pids,
)

from pkroof.profilers.profile import profile  # noqa: E402
from pkroof.records import format as records  # noqa: E402
from pkroof.runtime import launch, process_tree  # noqa: E402

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="checks processes through /proc")


# --- an implementation that fails: a recorded status, never an exception ------------------------------------------
# One profile run per deadline holds every case (the preparation is shared; each implementation still runs on its
# own fresh ranks); each case is its own test of its record and of the processes it started.

CRASHES = [
    ("raises", "RuntimeError: boom in the user's kernel"),
    ("segfaults_on_rank_1", "rank 1 was killed by SIGSEGV (code -11)"),
    ("aborts_on_rank_0", "rank 0 was killed by SIGABRT (code -6)"),
    ("killed_like_oom_on_rank_1", "rank 1 was killed by SIGKILL (code -9)"),
    ("exits_3_on_rank_1", "rank 1 exited (code 3) before returning a result"),
    ("raises_system_exit", "SystemExit: 0"),
    ("raises_keyboard_interrupt", "KeyboardInterrupt"),
    ("family_then_raises", "RuntimeError: failed after starting two processes"),
    ("closes_its_output_then_raises", "RuntimeError: said with stdout and stderr closed"),
    ("kills_its_guard", "rank 0 was killed by SIGKILL (code -9)"),
]
WRONG = [
    ("nan_output", "trial 1: ranks 0, 1: output 0: has NaN at 1 of 2048 elements (first at (3, 4))"),
    ("infinite_output", "trial 1: ranks 0, 1: output 0: 2048 of 2048 elements differ (max |error| inf)"),
    ("wrong_on_rank_1", "trial 1: rank 1: output 0: 1 of 2048 elements differ (max |error| 1)"),
    ("wrong_shape", "trial 1: ranks 0, 1: output 0: got ((64, 31), torch.float32), the reference gives"),
    ("wrong_dtype", "trial 1: ranks 0, 1: output 0: got ((64, 32), torch.float64), the reference gives"),
    ("returns_a_string", "trial 1: ranks 0, 1: output 0: got str, the reference gives ((64, 32), torch.float32)"),
    ("returns_nothing", "trial 1: ranks 0, 1: output 0: got NoneType, the reference gives"),
    ("cached_first_result", "trial 2: ranks 0, 1: output 0: 2048 of 2048 elements differ"),
]
CORRECT = ["family_then_correct", "mutates_its_input_and_is_right"]
CHEATING = [  # the timed sample it fails in: after 3 checks and 2 warm-up calls
    ("right_for_5_calls_then_zeros", 1),
    ("right_for_11_calls_then_the_last_answer", 7),
    ("cached_by_storage_pointer", 1),
    ("right_only_while_the_phase_says_check", 1),
    ("right_on_freshly_allocated_inputs", 1),
    ("returns_at_once_and_writes_later", 1),
]
HONEST_CHEATS = ["wrong_on_one_rank_after_the_checks", "cached_by_pointer_and_two_values"]
HANGS = [
    "family_then_hangs",
    "leaves_its_session_then_hangs",
    "ignores_sigterm_and_spins",
    "stops_itself",
    "forks_many",
    "deadlocks_on_rank_0",
]


@dataclass
class Run:
    records: dict[str, dict]  # by implementation function
    lines: list[str]
    pids: Path
    hits: Path


def _matrix(tmp: Path, impls: list[str], timeout_s: float) -> Run:
    """Profile every implementation after a recorded reference: the reference is kept, and every process named in
    $TEST_PIDS is gone once the run returns."""
    out, pids, hits = tmp / "out", tmp / "pids", tmp / "hits"
    pids.mkdir()
    hits.mkdir()
    before = _my_descendants()
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TEST_PIDS", str(pids))
        mp.setenv("TEST_CACHE_HITS", str(hits))
        written, lines = _profile(out, impls, timeout_s)
    left = _left(_said(pids)) + sorted(_my_descendants() - before)
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    assert not left, f"processes left running: {left}"
    return Run({r["impl"].rpartition(":")[2]: r for r in written}, lines, pids, hits)


@pytest.fixture(scope="module")
def crashed(tmp_path_factory) -> Run:
    return _matrix(tmp_path_factory.mktemp("crashed"), [f"{HOSTILE}:{name}" for name, _ in CRASHES], timeout_s=120)


@pytest.fixture(scope="module")
def wrong(tmp_path_factory) -> Run:
    impls = [f"{HOSTILE}:{name}" for name, _ in WRONG] + [f"{HOSTILE}:{name}" for name in CORRECT]
    return _matrix(tmp_path_factory.mktemp("wrong"), impls, timeout_s=120)


@pytest.fixture(scope="module")
def cheated(tmp_path_factory) -> Run:
    impls = [f"{CHEATS}:{name}" for name, _ in CHEATING] + [f"{CHEATS}:{name}" for name in HONEST_CHEATS]
    return _matrix(tmp_path_factory.mktemp("cheated"), impls, timeout_s=120)


@pytest.fixture(scope="module")
def hung(tmp_path_factory) -> Run:
    return _matrix(tmp_path_factory.mktemp("hung"), [f"{HOSTILE}:{name}" for name in HANGS], timeout_s=HANG_S)


def _gone(run: Run, impl: str) -> None:
    """Every process `impl` said it started is gone (the run's fixture checked them all; this names the case)."""
    mine = [int(f.read_text()) for f in run.pids.iterdir() if f.name.startswith(f"{impl}-")]
    assert not [p for p in mine if _running(p)]


@pytest.mark.parametrize(("impl", "message"), CRASHES, ids=[c[0] for c in CRASHES])
def test_an_implementation_that_dies_is_recorded_crashed(impl, message, crashed):
    record = crashed.records[impl]
    assert record["status"] == "crashed" and "median_s" not in record
    assert record["message"] == message
    assert any(line.endswith(message) for line in crashed.lines)  # the table's row says it too
    _gone(crashed, impl)


def test_an_implementation_that_kills_its_own_rank_process_had_started_processes(crashed):
    assert [f for f in crashed.pids.iterdir() if f.name.startswith("kills_its_guard-grandchild")]
    _gone(crashed, "kills_its_guard")


@pytest.mark.parametrize("impl", HANGS)
def test_an_implementation_that_hangs_is_killed_at_the_timeout_with_everything_it_started(impl, hung):
    record = hung.records[impl]
    assert record["status"] == "timeout" and "median_s" not in record
    assert record["message"].startswith(f"killed after {HANG_S} s while running the implementation (check 1 of 3)")
    assert [f for f in hung.pids.iterdir() if f.name.startswith(f"{impl}-")]  # it started processes: all gone
    _gone(hung, impl)


@pytest.mark.parametrize(("impl", "message"), WRONG, ids=[w[0] for w in WRONG])
def test_a_wrong_implementation_is_recorded_incorrect_and_never_timed(impl, message, wrong):
    record = wrong.records[impl]
    assert record["status"] == "incorrect" and "timing" not in record and "median_s" not in record
    assert record["message"].startswith(message)


@pytest.mark.parametrize("impl", CORRECT)
def test_a_correct_implementation_is_timed_and_what_it_left_running_is_stopped(impl, wrong):
    record = wrong.records[impl]
    assert record["status"] == "correct", record.get("message")
    assert record["median_s"] > 0 and len(record["timing"]["samples_s"]) == 20  # the documented ITERS
    _gone(wrong, impl)


# --- cheating the clock: right while checked, wrong while timed ---------------------------------------------------


@pytest.mark.parametrize(("impl", "sample"), CHEATING, ids=[c[0] for c in CHEATING])
def test_an_implementation_right_only_while_checked_is_incorrect_naming_the_timed_sample(impl, sample, cheated):
    record = cheated.records[impl]
    if impl == "cached_by_storage_pointer" and record["status"] == "timeout":
        # a cache hit on one rank skips the all-reduce its peer's miss runs: the ranks' collectives no longer pair
        # up and they wait for each other (seen once in a full run on a loaded 2-core machine). Never timed either
        assert "timing" not in record and "median_s" not in record
        return
    assert record["status"] == "incorrect" and "timing" not in record and "median_s" not in record
    assert record["message"].startswith(f"timed sample {sample}: ranks 0, 1: output 0: 2048 of 2048 elements differ")


def test_wrong_on_one_rank_only_while_timed_names_that_rank(cheated):
    record = cheated.records["wrong_on_one_rank_after_the_checks"]
    assert record["status"] == "incorrect" and "median_s" not in record
    assert record["message"].startswith("timed sample 1: rank 1: output 0: 2048 of 2048 elements differ")


def test_a_cache_keyed_by_values_never_hits_while_timed_each_sample_has_new_contents(cheated):
    assert cheated.records["cached_by_pointer_and_two_values"]["status"] == "correct"  # it computed each answer
    assert list(cheated.hits.iterdir()) == []  # not one timed call found its inputs' corner values seen before


def test_the_suite_all_reduce_returning_its_input_after_the_checks_is_incorrect(tmp_path, pids):
    impl = str(DATA / "all_reduce_cheats.py")
    lines: list[str] = []
    kw = dict(world_size=2, shape=None, overrides={"size_bytes": 4096}, out_dir=tmp_path, timeout_s=60)
    written = profile(
        ["all-reduce"],
        impls=[f"{impl}:right_for_3_calls_then_its_input", f"{impl}:in_place"],
        resume=False,
        topology="h200x2",
        log=lines.append,
        **kw,
    )
    status = {r["impl"].rpartition(":")[2]: r for r in written}
    cheat = status["right_for_3_calls_then_its_input"]
    assert cheat["status"] == "incorrect" and "median_s" not in cheat
    assert cheat["message"].startswith("timed sample 1: rank 0: output 0: ")  # bf16: a few elements happen to agree
    assert "elements differ" in cheat["message"]
    assert status["in_place"]["status"] == "correct"  # reducing its input in place is allowed, and right


# --- pkroof itself killed or interrupted: the ranks and everything they started die with it ------------------------


def _default_signals() -> None:
    """In the child before it runs pkroof: the signals this section sends take their default action, whatever the
    suite inherited (under nohup SIGHUP is ignored, and a background job of a script ignores SIGINT; pkroof, rightly,
    leaves an ignored signal ignored)."""
    for s in (signal.SIGINT, signal.SIGHUP, signal.SIGTERM):
        signal.signal(s, signal.SIG_DFL)


def _pkroof(args: list[str], tmp_path: Path, **env: str) -> subprocess.Popen:
    log = (tmp_path / "stderr").open("w")  # a file, not a pipe: a process left behind would hold a pipe open
    return subprocess.Popen(
        [sys.executable, "-m", "pkroof", *args], stdout=log, stderr=log, env=os.environ | env, cwd=tmp_path,
        preexec_fn=_default_signals,
    )  # fmt: skip


def _wait_for(pids: Path, count: int, pkroof: subprocess.Popen, tmp_path: Path) -> list[int]:
    deadline = time.monotonic() + 240  # start-up on a loaded machine: a poll for the files, no time asserted
    while len(found := _said(pids)) < count:
        assert pkroof.poll() is None, (tmp_path / "stderr").read_text()
        assert time.monotonic() < deadline, (tmp_path / "stderr").read_text()
        time.sleep(0.1)
    return found


@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGTERM, signal.SIGINT, signal.SIGHUP], ids=lambda s: s.name)
def test_pkroof_stopped_by_a_signal_leaves_no_rank_child_or_grandchild_and_keeps_its_records(how, tmp_path, pids):
    out, tmp = tmp_path / "out", tmp_path / "tmp"
    tmp.mkdir()
    _seed(out)
    args = ["profile", PROBLEM, "--impl", f"{HOSTILE}:family_then_spins", "-n", "2", "--out", str(out), "-t", "h200x2"]
    pkroof = _pkroof([*args, "--timeout", "300", "--resume"], tmp_path, TMPDIR=str(tmp))
    try:
        said = _wait_for(pids, 6, pkroof, tmp_path)  # 2 ranks, their 2 children, their 2 setsid grandchildren
        owned = f"{process_tree.TEMP_PREFIX}{pkroof.pid}-*"
        assert [f.name for f in tmp.glob(owned)]  # the ranks' folder, named by owner
        below = process_tree.descendants({pkroof.pid})  # the guards, the fork server, the resource trackers too
        pkroof.send_signal(how)
        code = pkroof.wait(300)  # stopping every rank's tree on a loaded machine: a limit, no time asserted
        assert code == (-9 if how == signal.SIGKILL else 128 + how)
        assert _left(sorted(below)) == []
        if how != signal.SIGKILL:
            last = (tmp_path / "stderr").read_text().strip().splitlines()[-1]
            assert last.startswith("pkroof: stopped, and its ranks with it")
        assert _left(said) == []
        assert [r["impl"] for r in records.read(out / "results.jsonl")[0]] == ["reference"]
    finally:
        if pkroof.poll() is None:
            pkroof.kill()
    if how != signal.SIGKILL:  # pkroof removed its own folder on the way out
        assert list(tmp.glob(f"{process_tree.TEMP_PREFIX}*")) == []
        return
    # the next run (any that starts a process: here bound on a problem file) removes what SIGKILL left behind
    again = subprocess.run(
        [sys.executable, "-m", "pkroof", "bound", PROBLEM, "-t", "h200x2", "-n", "2"],
        capture_output=True,
        text=True,
        env=os.environ | {"TMPDIR": str(tmp)},
        timeout=600,
    )
    assert again.returncode == 0, again.stderr
    assert list(tmp.glob(f"{process_tree.TEMP_PREFIX}*")) == []


def test_a_stale_folder_of_a_live_owner_or_of_another_shape_is_kept(tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    for name in (f"{dead.pid}-x", f"{os.getpid()}-y", "notapid-z"):
        (tmp_path / f"{process_tree.TEMP_PREFIX}{name}").mkdir()
    removed = process_tree.reap_stale_folders(tmp_path)
    assert [p.name for p in removed] == [f"{process_tree.TEMP_PREFIX}{dead.pid}-x"]
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        f"{process_tree.TEMP_PREFIX}{os.getpid()}-y",
        "pkroof-ranks-notapid-z",
    ]


# --- the rendezvous and the ranks' sockets stay on loopback ------------------------------------------------------


def _listening() -> dict[int, str]:
    """inode → local address of every TCP socket in LISTEN state (/proc/net/tcp and tcp6)."""
    out = {}
    for table, width in (("/proc/net/tcp", 8), ("/proc/net/tcp6", 32)):
        if not Path(table).exists():
            continue
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            local, state, inode = fields[1], fields[3], int(fields[9])
            if state == "0A":  # TCP_LISTEN
                out[inode] = local.split(":")[0].rjust(width, "0")
    return out


def _sockets(pid: int) -> set[int]:
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir() if Path(f"/proc/{pid}/fd").exists() else ():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(int(target[8:-1]))
    return inodes


LOOPBACK = {"0100007F", "00000000000000000000000001000000", "0000000000000000FFFF00000100007F"}  # 127.0.0.1, ::1


def test_every_listening_socket_of_the_ranks_is_on_loopback(tmp_path, pids, monkeypatch):
    import threading

    from pkroof.profilers.run import Job, run_job

    for key in ("GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME"):
        monkeypatch.delenv(key, raising=False)
    job = Job(PROBLEM, "small", PARAMS, f"{HOSTILE}:family_then_hangs", 2, "gloo")
    done: list[dict] = []
    runner = threading.Thread(target=lambda: done.append(run_job(job, 120)))
    runner.start()
    try:
        deadline = time.monotonic() + 240
        while len([f for f in pids.iterdir() if "-grandchild-" in f.name]) < 2:
            assert time.monotonic() < deadline and runner.is_alive()
            time.sleep(0.1)
        ranks = process_tree.descendants({os.getpid()})
        listening = _listening()
        mine = {inode: listening[inode] for pid in ranks for inode in _sockets(pid) if inode in listening}
        assert mine, "gloo's ranks listen for their peers: the test must see those sockets"
        assert set(mine.values()) <= LOOPBACK, f"listening beyond loopback: {mine}"
    finally:
        for pid in _said(pids):
            if _running(pid) and Path(f"/proc/{pid}/stat").exists():
                os.kill(pid, signal.SIGKILL)  # the ranks die, the job is recorded crashed: not what this test checks
        runner.join(120)


# --- start-up is not the implementation's time ----------------------------------------------------------------------


def test_the_deadline_starts_when_every_rank_is_ready_and_start_up_has_its_own_limit():
    import slow_import_target

    # importing the target's module takes 3 s in each rank (start-up); the job itself is quick: within 1 s
    assert launch.run_ranks(slow_import_target.rank_plus_one, 2, timeout_s=1) == [1, 2]
    with pytest.raises(launch.RankTimeoutError) as e:
        launch.run_ranks(slow_import_target.rank_plus_one, 2, timeout_s=60, startup_s=1)
    assert e.value.startup and "did not start in 1 s" in str(e.value)
