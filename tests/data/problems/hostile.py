"""Implementations of user_gemm_all_reduce that fail the way a hostile or careless user's kernel can: raise, die by
each signal, exit, hang in every way, start processes that try to outlive pkroof, lie about their output. Each
writes the PIDs of every process it starts (itself included) into $TEST_PIDS, so a test can check none is left."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist


def _right(a, b):
    out = a @ b
    dist.all_reduce(out)
    return out


def _say(pid: int, what: str) -> None:
    """PID into $TEST_PIDS/IMPL-WHAT-RANK-PID, IMPL the implementation that called (the outermost function here)."""
    folder = os.environ.get("TEST_PIDS")
    here = [f.f_code.co_name for f in _frames() if f.f_code.co_filename == __file__]
    if folder:
        Path(folder, f"{here[-1]}-{what}-{dist.get_rank()}-{pid}").write_text(str(pid))


def _dies_first(dying: int) -> None:
    """Rank `dying` is about to die; every other rank waits here until that rank's process (its guard, the worker's
    parent) has ended, so pkroof sees it end before a peer fails on the broken connection: which rank is named
    does not depend on timing (a busy machine once let the peer's error arrive first)."""
    store = dist.distributed_c10d._get_default_store()
    if dist.get_rank() == dying:
        store.set("dying-guard", str(os.getppid()))
        return
    guard = int(store.get("dying-guard"))
    while _running(guard):
        time.sleep(0.01)


def _running(pid: int) -> bool:
    """The process is there and not a zombie (one that ended, not yet reaped by pkroof)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rpartition(")")[2].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _frames():
    frame = sys._getframe(1)
    while frame is not None:
        yield frame
        frame = frame.f_back


def _family() -> None:
    """This rank, a subprocess.Popen child, and a grandchild that left the process group and session (setsid, then
    a second fork so that its parent exits: it reparents to the nearest subreaper)."""
    _say(os.getpid(), "rank")
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    _say(child.pid, "child")
    pipe_r, pipe_w = os.pipe()
    first = os.fork()
    if first == 0:
        os.setsid()
        second = os.fork()
        if second == 0:
            os.close(pipe_r)
            os.write(pipe_w, str(os.getpid()).encode())
            os.close(pipe_w)
            time.sleep(600)
            os._exit(0)
        os._exit(0)
    os.close(pipe_w)
    grandchild = int(os.read(pipe_r, 32).decode())
    os.close(pipe_r)
    os.waitpid(first, 0)
    _say(grandchild, "grandchild")


def family_then_spins(a, b):  # every rank at full CPU, its child and grandchild asleep: kill -9 pkroof now
    _family()
    while True:
        pass


def family_then_hangs(a, b):
    _family()
    time.sleep(3600)


def family_then_raises(a, b):
    _family()
    raise RuntimeError("failed after starting two processes")


def family_then_correct(a, b):  # right, and leaves its processes behind when it returns
    if not Path(os.environ.get("TEST_PIDS", "/nonexistent"), f"done-{dist.get_rank()}").exists():
        _family()
        Path(os.environ["TEST_PIDS"], f"done-{dist.get_rank()}").write_text("")
    return _right(a, b)


def raises(a, b):
    raise RuntimeError("boom in the user's kernel")


def raises_with_escapes(a, b):  # a message that would recolour the terminal, set its title and move the cursor
    raise RuntimeError("\x1b[31mred\x1b[0m \x1b]0;owned\x07title \x1b[2J\x1b[Hcleared \u202eevil\r\x08done")


def segfaults_on_rank_1(a, b):
    _say(os.getpid(), "rank")
    _dies_first(1)
    if dist.get_rank() == 1:
        os.kill(os.getpid(), signal.SIGSEGV)
    return _right(a, b)


def aborts_on_rank_0(a, b):
    _say(os.getpid(), "rank")
    _dies_first(0)
    if dist.get_rank() == 0:
        os.abort()
    return _right(a, b)


def killed_like_oom_on_rank_1(a, b):  # the OOM killer's SIGKILL
    _say(os.getpid(), "rank")
    _dies_first(1)
    if dist.get_rank() == 1:
        os.kill(os.getpid(), signal.SIGKILL)
    return _right(a, b)


def exits_3_on_rank_1(a, b):
    _dies_first(1)
    if dist.get_rank() == 1:
        os._exit(3)
    return _right(a, b)


def raises_system_exit(a, b):
    raise SystemExit(0)


def raises_keyboard_interrupt(a, b):  # a Ctrl-C of its own making
    raise KeyboardInterrupt


def kills_its_guard(a, b):  # rank 0 SIGKILLs its own parent, rank 1 waits: pkroof then stops what is left
    _family()
    if dist.get_rank() == 0:  # one rank only: with both, which guard died first was a race (rank 1 under load)
        os.kill(os.getppid(), signal.SIGKILL)
    time.sleep(3600)


def leaves_its_session_then_hangs(a, b):  # the rank itself leaves its process group and session
    os.setsid()
    _family()
    time.sleep(3600)


def ignores_sigterm_and_spins(a, b):
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _say(os.getpid(), "rank")
    while True:
        pass


def stops_itself(a, b):  # SIGSTOP: neither running nor dead
    _say(os.getpid(), "rank")
    os.kill(os.getpid(), signal.SIGSTOP)
    return _right(a, b)


def forks_many(a, b):  # twenty sleeping children, some in sessions of their own, then a hang
    _say(os.getpid(), "rank")
    for i in range(20):
        pid = os.fork()
        if pid == 0:
            if i % 2:
                os.setsid()
            time.sleep(600)
            os._exit(0)
        _say(pid, f"fork{i}")
    time.sleep(3600)


def deadlocks_on_rank_0(a, b):  # rank 0 waits in a collective no other rank joins
    _say(os.getpid(), "rank")
    if dist.get_rank() == 0:
        dist.all_reduce(torch.ones(1))
    time.sleep(3600)


def closes_its_output_then_raises(a, b):
    os.close(1)
    os.close(2)
    raise RuntimeError("said with stdout and stderr closed")


def nan_output(a, b):
    out = _right(a, b)
    out[3, 4] = float("nan")
    return out


def infinite_output(a, b):
    return _right(a, b) * float("inf")


def wrong_on_rank_1(a, b):
    out = _right(a, b)
    if dist.get_rank() == 1:
        out[0, 0] += 1
    return out


def wrong_shape(a, b):
    return _right(a, b)[:, :-1]


def wrong_dtype(a, b):
    return _right(a, b).double()


def returns_a_string(a, b):
    return "the answer"


def returns_nothing(a, b):
    _right(a, b)


_first = {}


def cached_first_result(a, b):  # the first answer, forever
    if "out" not in _first:
        _first["out"] = _right(a, b)
    return _first["out"]


def mutates_its_input_and_is_right(a, b):  # allowed: pkroof hands every call its own copy or fresh values
    out = _right(a, b)
    a.zero_()
    return out
