"""The fault matrix (issue 25): every way a hostile or careless user's kernel, problem file, topology file or
results file can fail, on 2 CPU ranks over gloo. Each case asserts the one line (exit 2) or the recorded status,
that the record measured before it is still there, and, by PID, that no process it started is left running.

Implementations: tests/data/problems/hostile.py (raise, signals, exits, hangs, processes that try to outlive
pkroof, wrong outputs) and cheats.py (right while checked, wrong or idle while timed); problem files:
hostile_problems.py's SOURCES (loops, exits and hangs while imported or analysed)."""

import json
import math
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from hostile_problems import SOURCES  # noqa: E402

from pkroof.profilers.profile import profile, topology_ref  # noqa: E402
from pkroof.records import format as records  # noqa: E402
from pkroof.runtime import launch, process_tree  # noqa: E402
from pkroof.topology import resolve  # noqa: E402

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="checks processes through /proc")

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


# --- a problem file that misbehaves while imported or analysed: one line, exit 2, nothing left ------------------------

BOUND_FAILS = {
    "loops_at_import": "analysing {path}: stopped after",
    "sleeps_at_import": "analysing {path}: stopped after",
    "exits_0_at_import": "analysing {path}: its process exited (code 0) before returning a result",
    "system_exit_at_import": "{path}: exited while it was imported (SystemExit: 0)",
    "system_exit_3_at_import": "{path}: exited while it was imported (SystemExit: 3)",
    "keyboard_interrupt_at_import": "analysing {path}: KeyboardInterrupt",
    "segfaults_at_import": "analysing {path}: its process was killed by SIGSEGV (code -11)",
    "forks_a_daemon_at_import": "analysing {path}: stopped after",
    "escapes_at_import": "{path}: cannot import it (RuntimeError: red gone)",
    "reference_hangs_when_traced": "analysing {path}: stopped after",
    "workload_hangs": "analysing {path}: stopped after",
    "workload_is_a_dict": "{path}: workload() returned dict, not a pkroof.rooflines.Workload",
    "workload_is_empty": "{path}: workload(): the workload has nothing to bound (no communication, no FLOPs",
    "workload_has_nan": "{path}: workload(): workload hbm_bytes must be a finite number ≥ 0, got nan",
    "workload_negative_flops": "{path}: workload(): compute op 'mm': flops must be a finite number ≥ 0, got -1",
}


def _one_line(result: subprocess.CompletedProcess) -> str:
    err = result.stderr.strip()
    assert result.returncode == 2, (result.returncode, result.stdout, result.stderr)
    assert len(err.splitlines()) == 1 and err.startswith("pkroof: "), err
    assert "\x1b" not in err and "\x07" not in err
    return err.removeprefix("pkroof: ")


@pytest.mark.parametrize("command", ["bound", "advise"])
@pytest.mark.parametrize("case", sorted(BOUND_FAILS))
def test_a_problem_file_that_misbehaves_is_one_line_for_bound_and_advise(case, command, tmp_path, pids):
    if command == "advise" and case not in ("loops_at_import", "exits_0_at_import", "workload_is_empty"):
        pytest.skip("advise takes the same path as bound: three cases suffice")
    path = tmp_path / f"{case}.py"
    path.write_text(SOURCES[case])
    err = _one_line(_cli(command, str(path), "-t", "h200x2", "-n", "2", "--timeout", "3"))
    assert err.startswith(BOUND_FAILS[case].format(path=path)), err
    if "stopped after" in err:
        assert "(the limit is 3 s: --timeout)" in err


@pytest.mark.parametrize("case", ["loops_at_import", "exits_0_at_import", "reference_hangs_when_traced"])
def test_a_problem_file_that_misbehaves_while_prepared_for_profile_is_one_line_and_nothing_is_lost(
    case, tmp_path, pids
):
    path = tmp_path / f"{case}.py"
    path.write_text(SOURCES[case])
    out = tmp_path / "out"
    seeded = _seed(out, problem=str(path), params={"n": 64})
    result = _cli("profile", str(path), "-n", "2", "--out", str(out), "--timeout", "3")
    assert _one_line(result).startswith(f"preparing {case}.py: ")
    assert records.read(out / "results.jsonl")[0] == [seeded | {"schema": records.SCHEMA}]


def test_inputs_that_hang_in_the_ranks_are_a_timeout_record(tmp_path, pids):
    path = tmp_path / "inputs_hang.py"
    path.write_text(SOURCES["inputs_hang"])
    written, _ = _profile(tmp_path / "out", [], timeout_s=HANG_S, problem=str(path))
    record = written[0]
    assert record["status"] == "timeout" and record["impl"] == "reference"
    assert record["message"].startswith(f"killed after {HANG_S} s while drawing inputs (check 1 of 3)")


# --- bad options, results and topology files: one line, before anything runs ----------------------------------------


def _cli(*args: str) -> subprocess.CompletedProcess:
    """`pkroof ARGS` run in this process (typer's runner): its exit code, stdout and stderr. The ranks and the
    processes a problem file is analysed in come from this process's fork server, as they would from pkroof's."""
    from typer.testing import CliRunner

    from pkroof.cli import app

    result = CliRunner().invoke(app, list(args))
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return subprocess.CompletedProcess(list(args), result.exit_code, result.stdout, result.stderr)


def test_profile_out_naming_an_existing_file_is_refused_before_any_rank_starts(tmp_path, pids):
    existing = tmp_path / "results"
    existing.write_text("my notes\n")
    err = _one_line(_cli("profile", PROBLEM, "-n", "2", "--out", str(existing)))
    assert err == f"--out {existing}: {existing} exists and is not a folder (--out names a folder)"
    assert existing.read_text() == "my notes\n"
    inside = existing / "deeper"
    assert _one_line(_cli("profile", "all-reduce", "--out", str(inside))).startswith(f"--out {inside}: {existing}")


def _topology_text() -> str:
    from pkroof.topology import dumps

    return dumps(resolve("h200x2"))


TOPOLOGIES = {  # what replaces '"sm_count": 132' (or the HBM bandwidth) in a copy of h200x2 → what the line says
    "400_digits": (("sm_count", "9" * 400), "gpu.sm_count: 999999999999...(400 characters) (more than 19 digits)"),
    "infinity_integer": (("sm_count", "Infinity"), "gpu.sm_count: Infinity (not a finite number)"),
    "minus_infinity": (("sm_count", "-Infinity"), "gpu.sm_count: -Infinity (not a finite number)"),
    "nan_integer": (("sm_count", "NaN"), "gpu.sm_count: NaN (not a finite number)"),
    "infinity_bandwidth": (("hbm_bandwidth_Bps", "Infinity"), "gpu.hbm_bandwidth_Bps: Infinity (not a finite"),
    "1e400_bandwidth": (("hbm_bandwidth_Bps", "1e400"), "gpu.hbm_bandwidth_Bps: 1e400 (out of range for a number)"),
    "1e30_bandwidth": (("hbm_bandwidth_Bps", "1e30"), "gpu.hbm_bandwidth_Bps: 1e+30 is beyond any machine"),
    "1e-400_bandwidth": (("hbm_bandwidth_Bps", "1e-400"), "gpu.hbm_bandwidth_Bps: must be positive, got 0.0"),
    "negative_bandwidth": (("hbm_bandwidth_Bps", "-4.8e12"), "gpu.hbm_bandwidth_Bps: must be positive"),
    "string_bandwidth": (("hbm_bandwidth_Bps", '"fast"'), "gpu.hbm_bandwidth_Bps: expected a finite number, got"),
    "fractional_count": (("sm_count", "132.5"), "gpu.sm_count: expected a whole number, got 132.5"),
    "huge_count": (("sm_count", "1e30"), "gpu.sm_count: 1e+30 is beyond any machine"),
    "repeated_key": (("sm_count", '132, "sm_count": 264'), "sm_count: the key appears twice in one object"),
}


@pytest.mark.parametrize("case", sorted(TOPOLOGIES))
def test_a_topology_with_nonsense_numbers_is_one_line_naming_the_field(case, tmp_path):
    (field, value), expected = TOPOLOGIES[case]
    text = _topology_text()
    old = next(line for line in text.splitlines() if line.strip().startswith(f'"{field}":'))
    path = tmp_path / f"{case}.json"
    path.write_text(text.replace(old, old.partition(":")[0] + ": " + value + ("," if old.endswith(",") else ""), 1))
    err = _one_line(_cli("bound", "all-reduce", "-t", str(path)))
    assert err.startswith(f"{path}: {expected}"), err


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("[" * 100_000 + "]" * 100_000, "nested too deeply to be a topology"),
        ('{"a": ' * 100_000 + "1" + "}" * 100_000, "nested too deeply to be a topology"),
        ("[1, 2]", "topology: expected a JSON object, got list"),
        ("", "not JSON (line 1: Expecting value)"),
    ],
    ids=["deep_lists", "deep_objects", "a_list", "empty"],
)
def test_a_topology_that_is_no_topology_is_one_line(text, expected, tmp_path):
    path = tmp_path / "t.json"
    path.write_text(text)
    assert _one_line(_cli("topology", "show", str(path))) == f"{path}: {expected}"


def test_a_topology_that_is_not_utf8_is_one_line(tmp_path):
    path = tmp_path / "t.json"
    path.write_bytes(b"\xff\xfe\x00{")
    assert _one_line(_cli("bound", "all-reduce", "-t", str(path))) == f"{path}: not JSON (not UTF-8 text)"


def _strict(text: str) -> object:
    def refuse(constant: str) -> None:
        raise AssertionError(f"{constant} is not JSON")

    return json.loads(text, parse_constant=refuse)


@pytest.mark.parametrize(
    "args",
    [
        ["bound", "all-reduce", "-t", "h200x2", "--json"],
        ["bound", "gemm-reduce-scatter", "-t", "hgx-h100-8", "--json"],
        ["advise", "all-to-all", "-t", "h200x2", "--json"],
        ["topology", "show", "h200x2", "--json"],
    ],
)
def test_every_json_pkroof_prints_is_strict_json(args):
    result = _cli(*args)
    assert result.returncode == 0, result.stderr
    assert isinstance(_strict(result.stdout), dict)


def test_a_problem_with_nothing_to_bound_prints_strict_json_or_one_line(tmp_path):
    path = tmp_path / "identity.py"
    path.write_text(SOURCES["loops_at_import"].split("_say('import')")[0].replace("dist.all_reduce(out)", "pass"))
    result = _cli("bound", str(path), "-t", "h200x2", "-n", "2", "--json")
    if result.returncode == 0:
        data = _strict(result.stdout)
        assert all(not isinstance(v, float) or math.isfinite(v) for v in data.values())
    else:
        _one_line(result)


# --- results files: never run, strictly read, never lost ------------------------------------------------------------


def test_a_results_file_never_runs_the_file_a_record_names(tmp_path):
    marker = tmp_path / "ran"
    evil = tmp_path / "evil.py"
    evil.write_text(f"open({str(marker)!r}, 'w').write('ran')\ndef inputs(*a, **k): pass\ndef reference(*a): pass\n")
    record = {"problem": str(evil), "shape": "default", "params": {}, "impl": f"{evil}:fast", "world_size": 2}
    records.append(tmp_path / "results.jsonl", record | {"status": "correct", "median_s": 1e-3})
    result = _cli("report", str(tmp_path / "results.jsonl"), "-t", "h200x2", "--out", str(tmp_path / "report"))
    assert not marker.exists()  # whatever the report made of it, the file it names never ran
    assert result.returncode in (0, 2)


def test_records_of_an_unknown_schema_and_a_cut_line_are_skipped_in_one_line_each_and_resume_goes_on(tmp_path, pids):
    out = tmp_path / "out"
    results = out / "results.jsonl"
    seeded = _seed(out)
    with results.open("a") as f:
        f.write(json.dumps(seeded | {"schema": "pkroof.record/99", "impl": "future"}) + "\n")
        f.write('{"problem": "cut mid-wri')  # the line a crash cut short
    lines: list[str] = []
    profile([PROBLEM], impls=[f"{HOSTILE}:raises"], world_size=2, shape=None, overrides={}, out_dir=out,
            timeout_s=60, resume=True, topology="h200x2", log=lines.append)  # fmt: skip
    assert sum("skipped, not a record" in line for line in lines) == 2
    assert any("schema 'pkroof.record/99' is not one this pkroof reads" in line for line in lines)
    stored = records.read(results)[0]
    assert [r["impl"].rpartition(":")[2] for r in stored] == ["reference", "raises"]  # the reference was reused


def test_resume_does_not_reuse_records_measured_against_another_topology(tmp_path, pids):
    out = tmp_path / "out"
    _seed(out, topology="hgx-h100-8")
    lines: list[str] = []
    written = profile([PROBLEM], impls=[], world_size=2, shape=None, overrides={}, out_dir=out, timeout_s=60,
                      resume=True, topology="h200x2", log=lines.append)  # fmt: skip
    assert [r["impl"] for r in written] == ["reference"]  # measured again, on this topology
    assert written[0]["topology"] == topology_ref(resolve("h200x2"))
    assert any("measured against another topology than h200x2" in line for line in lines)
    assert len(records.read(out / "results.jsonl")[0]) == 2  # the other topology's record is kept, not reused


def test_one_implementation_reached_by_two_spellings_of_its_path_is_profiled_once(tmp_path, pids, monkeypatch):
    monkeypatch.chdir(DATA)
    spellings = ["hostile.py:raises", "./hostile.py:raises", f"{DATA}/../problems/hostile.py:raises"]
    lines: list[str] = []
    written = profile(["user_gemm_all_reduce.py", "./user_gemm_all_reduce.py"], impls=spellings, world_size=2,
                      shape=None, overrides={}, out_dir=tmp_path, timeout_s=60, resume=False, topology="h200x2",
                      log=lines.append)  # fmt: skip
    assert [(r["problem"], r["impl"]) for r in written] == [
        (PROBLEM, "reference"),
        (PROBLEM, f"{os.path.realpath(HOSTILE)}:raises"),
    ]


# --- exports, terminals and report folders ------------------------------------------------------------------------


def _measured(tmp_path: Path, impl: str = "mine") -> Path:
    results = tmp_path / "results.jsonl"
    base = {"problem": "all-reduce", "shape": "small", "params": {"size_bytes": 2**20}, "world_size": 2}
    env = {"backend": "gloo", "host": '=HYPERLINK("http://x")'}
    for name in ("reference", impl):
        records.append(results, base | {"impl": name, "status": "correct", "median_s": 1e-3, "environment": env})
    return results


def test_a_csv_export_never_overwrites_a_file_unasked_and_neutralises_formulas(tmp_path):
    results = _measured(tmp_path, impl="=cmd|' /C calc'!A0")
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "results.csv").write_text("my own numbers\n")
    args = ["report", str(results), "--format", "csv", "--out", str(folder)]
    err = _one_line(_cli(*args))
    assert err == f"{folder / 'results.csv'}: exists; not overwriting it (--force replaces it, or choose another --out)"
    assert (folder / "results.csv").read_text() == "my own numbers\n"
    forced = _cli(*args, "--force")
    assert forced.returncode == 0, forced.stderr
    import csv

    rows = list(csv.DictReader((folder / "results.csv").open()))
    assert {r["impl"] for r in rows} == {"reference", "'=cmd|' /C calc'!A0"}
    cells = [v for r in rows for v in r.values() if v]
    assert not any(v.startswith(("=", "+", "@", "\t", "\r")) for v in cells)
    assert not any(v.startswith("-") and not _is_number(v) for v in cells)
    assert [p.name for p in folder.iterdir()] == ["results.csv"]  # no temporary file left beside it


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def test_a_json_export_is_strict_json_and_refuses_to_overwrite_too(tmp_path):
    results = _measured(tmp_path)
    out = tmp_path / "export"
    first = _cli("report", str(results), "--format", "json", "--out", str(out))
    assert first.returncode == 0, first.stderr
    rows = _strict((out / "results.json").read_text())
    assert isinstance(rows, list) and len(rows) == 2
    assert _one_line(_cli("report", str(results), "--format", "json", "--out", str(out))).endswith(
        "exists; not overwriting it (--force replaces it, or choose another --out)"
    )


def test_a_message_with_terminal_escapes_is_printed_without_them(tmp_path, pids):
    out = tmp_path / "out"
    _seed(out)
    result = _cli("profile", PROBLEM, "--impl", f"{HOSTILE}:raises_with_escapes", "-n", "2", "--out", str(out),
                  "--resume")  # fmt: skip
    assert result.returncode == 0, result.stderr
    row = next(line for line in result.stdout.splitlines() if "crashed" in line)
    assert "RuntimeError: red title cleared evildone" in row
    assert not any(c in row for c in "\x1b\x07\x08\r\u202e")
    stored = records.read(out / "results.jsonl")[0][-1]
    assert "\x1b[31m" in stored["message"]  # the record keeps what was said; only the terminal is spared


def test_report_out_through_a_symlink_replaces_the_report_and_leaves_no_stray_link(tmp_path):
    results = _measured(tmp_path)
    real = tmp_path / "reports" / "real"
    first = _cli("report", str(results), "--out", str(real))
    assert first.returncode == 0, first.stderr
    link = tmp_path / "latest"
    link.symlink_to(real)
    again = _cli("report", str(results), "--out", str(link))
    assert again.returncode == 0, again.stderr
    assert link.is_symlink() and (link / "index.html").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["latest", "reports", "results.jsonl"]
    assert [p.name for p in real.parent.iterdir()] == ["real"]


def test_hostile_strings_in_records_are_escaped_in_the_html(tmp_path):
    script = "<script>alert(1)</script>"
    results = _measured(tmp_path, impl=f"{script}.py:f")
    out = tmp_path / "report"
    result = _cli("report", str(results), "--out", str(out))
    assert result.returncode == 0, result.stderr
    pages = "".join(p.read_text() for p in out.rglob("*.html"))
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in pages or "\\u003cscript" in pages
    assert script not in pages


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (
            ["bound", "{tmp}/notes.txt"],
            "{tmp}/notes.txt: not a problem file (a problem is a Python file",
        ),
        (
            ["bound", "{tmp}/folder.py"],
            "{tmp}/folder.py: not a problem file (a problem is a Python file",
        ),
        (["bound", "{tmp}/missing.py"], "{tmp}/missing.py: no such problem file"),
        (["profile", "all-reduce", "--impl", "{tmp}/notes.txt:f"], "unknown implementation '{tmp}/notes.txt:f'"),
        (["profile", "all-reduce", "--impl", "{tmp}/folder.py:f"], "implementation file {tmp}/folder.py is not a file"),
        (["profile", "all-reduce", "--impl", "{tmp}/impl.py:not-a-name"], "unknown implementation '{tmp}/impl.py:not"),
        (["bound", "{tmp}/impl.py", "--timeout", "0"], "--timeout must be a positive number of seconds, got 0"),
        (["bound", "{tmp}/impl.py", "--timeout", "nan"], "--timeout must be a positive number of seconds, got nan"),
        (["profile", "all-reduce", "--timeout", "inf"], "timeout must be a positive number of seconds, got inf"),
    ],
    ids=["text", "folder", "missing", "impl-text", "impl-folder", "impl-name", "timeout-0", "timeout-nan", "inf"],
)
def test_a_path_or_limit_that_is_no_such_thing_is_one_line_before_anything_runs(args, expected, tmp_path):
    (tmp_path / "notes.txt").write_text("def inputs(): pass\n")
    (tmp_path / "folder.py").mkdir()
    (tmp_path / "impl.py").write_text("def f(x):\n    return x\n")
    out = ["--out", str(tmp_path / "out")] if args[0] == "profile" else ["-t", "h200x2"]
    err = _one_line(_cli(*[a.format(tmp=tmp_path) for a in args], *out))
    assert err.startswith(expected.format(tmp=tmp_path)), err
    assert not (tmp_path / "out").exists()
