"""How the profiler records an implementation that fails in the ways the first review found: a rank that leaves
quietly or is killed, output wrong on one rank only, NaN or mis-shaped output, a results file cut mid-line, and
SIGTERM to pkroof itself. Each failure is a record (or one line and a non-zero exit), never lost work."""

import json
import math
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

torch = pytest.importorskip("torch")

from pkroof.profilers.checks import compare, verdict  # noqa: E402
from pkroof.profilers.profile import topology_ref  # noqa: E402
from pkroof.profilers.run import Job, run_job  # noqa: E402
from pkroof.records import format as records  # noqa: E402
from pkroof.runtime.launch import RankFailedError, _failed  # noqa: E402
from pkroof.topology import resolve  # noqa: E402

DATA = Path(__file__).parent / "data" / "problems"
PROBLEM = str(DATA / "user_gemm_all_reduce.py")
IMPLS = str(DATA / "impls.py")


def _job(impl: str, timeout_s: float = 10) -> dict:
    return run_job(Job(PROBLEM, "small", {"m": 64, "n": 32, "k": 16}, f"{IMPLS}:{impl}", 2, "gloo"), timeout_s)


def test_a_rank_that_exits_0_without_a_result_is_a_crash_not_an_abort():
    record = _job("exits_quietly")  # the whole run used to stop on a missing result file
    assert record["status"] == "crashed"
    # both ranks leave; whichever is seen first is named (the job stops at the first)
    assert re.fullmatch(r"rank [01] exited \(code 0\) before returning a result", record["message"])


def test_the_rank_that_left_first_is_blamed_not_its_peer_on_the_broken_connection():
    record = _job("rank_1_exits")
    assert record["status"] == "crashed"
    assert record["message"] == "rank 1 exited (code 0) before returning a result"  # not gloo's "closed by peer"


def test_a_rank_killed_by_a_signal_is_named_by_the_signal():
    record = _job("rank_1_segfaults")
    assert record["status"] == "crashed" and record["message"] == "rank 1 was killed by SIGSEGV (code -11)"
    assert RankFailedError(0, -9).how == "was killed by SIGKILL (code -9)"


def test_failed_prefers_a_rank_that_ended_without_raising_then_the_first_to_raise(tmp_path):
    procs = [SimpleNamespace(exitcode=1), SimpleNamespace(exitcode=0)]  # rank 0 raised; rank 1 left, no result
    (tmp_path / "0.error").write_text("Traceback\nRuntimeError: Connection closed by peer")
    assert (_failed(procs, tmp_path).rank, _failed(procs, tmp_path).message) == (1, "")
    assert _failed(procs, None) is not None and _failed(procs, None).rank == 0  # no folder (the probe): 0 is success
    (tmp_path / "1.pickle").write_bytes(b"")  # rank 1 returned after all: rank 0 failed alone
    assert _failed(procs, tmp_path).rank == 0
    both = [SimpleNamespace(exitcode=1), SimpleNamespace(exitcode=1)]
    (tmp_path / "1.error").write_text("Traceback\nRuntimeError: boom from user")
    os.utime(tmp_path / "1.error", ns=(1, 1))  # rank 1 raised first; rank 0's error came after
    assert _failed(both, tmp_path).message == "RuntimeError: boom from user"


def test_output_wrong_on_one_rank_is_incorrect_at_once_and_says_which_rank():
    record = _job("wrong_on_rank_1", timeout_s=300)
    assert record["status"] == "incorrect", record["message"]  # it used to deadlock until the timeout: "timeout"
    assert record["message"].startswith("trial 1: rank 1: output 0: 1 of 2048 elements differ")  # 64 x 32
    assert record["max_abs_error"] == pytest.approx(1.0, rel=1e-4)  # rank 1's error, not rank 0's 0


def test_mismatched_and_nan_outputs_have_no_error_number_and_say_why():
    want = (torch.zeros(4, 2),)
    ok, error, why = compare((torch.zeros(8),), want)
    assert (ok, error) == (False, None) and "got ((8,), torch.float32)" in why
    assert compare((None,), want)[:2] == (False, None)
    nan = torch.zeros(4, 2)
    nan[1, 1] = nan[3, 0] = float("nan")
    assert compare((nan,), want) == (False, None, "output 0: has NaN at 2 of 8 elements (first at (1, 1))")
    # the ranks' verdicts: one without a number leaves the trial without one, and each rank's reason is kept
    ok, error, why = verdict(0, [(True, 0.0, ""), (False, None, "output 0: has NaN")])
    assert (ok, error, why) == (False, None, "trial 1: rank 1: output 0: has NaN")
    assert verdict(2, [(False, 2.0, "x"), (False, 3.0, "x")]) == (False, 3.0, "trial 3: ranks 0, 1: x")
    record = {"problem": "p", "shape": "s", "params": {}, "impl": "i", "world_size": 2, "max_abs_error": error}
    assert json.loads(json.dumps(record, allow_nan=False))["max_abs_error"] is None  # standard JSON: null
    ok, error, why = compare((torch.full((4, 2), math.inf),), want)
    assert (ok, error, why) == (False, math.inf, "output 0: 8 of 8 elements differ (max |error| inf)")
    assert verdict(0, [(False, error, why), (True, 0.0, "")])[1] is None  # infinitely off: no number either


def test_a_record_after_a_line_cut_mid_write_gets_a_line_of_its_own(tmp_path):
    path = tmp_path / "results.jsonl"
    first = {"problem": "p", "shape": "small", "params": {}, "impl": "reference", "world_size": 2}
    records.append(path, first)
    with path.open("a") as f:
        f.write('{"problem": "p", "shape": "sm')  # the crash: no newline
    records.append(path, first | {"impl": "mine"})
    stored, unreadable = records.read(path)
    assert [r["impl"] for r in stored] == ["reference", "mine"]
    assert len(unreadable) == 1 and unreadable[0].startswith(f"{path}:2: skipped, not a record (JSONDecodeError")
    assert path.read_text().endswith("\n")


def _running(pid: int) -> bool:
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_text().rpartition(")")[2].split()[0] != "Z"  # a zombie is gone


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads process states from /proc")
def test_sigterm_stops_the_ranks_exits_non_zero_and_keeps_what_was_recorded(tmp_path):
    pids, out = tmp_path / "pids", tmp_path / "out"
    pids.mkdir()
    reference = {"problem": PROBLEM, "shape": "small", "params": {"m": 64, "n": 32, "k": 16}, "impl": "reference"}
    measured_on = topology_ref(resolve("h200x2"))  # --resume reuses records of the topology it runs against only
    records.append(out / "results.jsonl", reference | {"world_size": 2, "status": "correct", "topology": measured_on})
    command = [sys.executable, "-m", "pkroof", "profile", PROBLEM, "--impl", f"{IMPLS}:hangs_saying_its_pid"]
    command += [
        "-n",
        "2",
        "--out",
        str(out),
        "--timeout",
        "60",
        "--resume",
        "-t",
        "h200x2",
    ]  # the reference is recorded already
    log = tmp_path / "stderr"
    with log.open("w") as err:  # files, not pipes: orphaned ranks would hold a pipe open
        pkroof = subprocess.Popen(
            command, stdout=subprocess.DEVNULL, stderr=err, env=os.environ | {"TEST_RANK_PIDS": str(pids)}
        )
    ranks: list[int] = []
    try:
        deadline = time.monotonic() + 300  # start-up on a busy machine: a poll, no time asserted
        while len(ranks) < 2:
            assert pkroof.poll() is None and time.monotonic() < deadline, log.read_text()
            ranks = [int(text) for f in pids.iterdir() if (text := f.read_text())]
            time.sleep(0.05)
        pkroof.send_signal(signal.SIGTERM)
        assert pkroof.wait(120) == 128 + signal.SIGTERM
        assert log.read_text().strip().splitlines()[-1].startswith("pkroof: stopped, and its ranks with it")
        assert not any(_running(pid) for pid in ranks)
        assert [r["impl"] for r in records.read(out / "results.jsonl")[0]] == ["reference"]
    finally:
        for pid in ranks:  # where the ranks were orphaned (the bug), stop them here
            if _running(pid):
                os.kill(pid, signal.SIGKILL)
        if pkroof.poll() is None:
            pkroof.kill()


def test_a_crash_message_is_the_exception_its_type_and_every_line_of_it():
    import traceback

    from pkroof.runtime.launch import _exception_text

    def fails():
        raise RuntimeError("bad input\r\nsecond line")

    try:
        fails()
    except RuntimeError:
        details = traceback.format_exc().strip()
    assert _exception_text(details) == "RuntimeError: bad input second line"  # not the last line alone
