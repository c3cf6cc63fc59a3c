"""A rank's processes, and nothing left behind: each rank is a guard and the worker it forks; whatever a worker
starts (children, setsid grandchildren) is found through /proc and killed with it; folders of a pkroof killed with
SIGKILL are removed at the next start.
"""

from __future__ import annotations

import contextlib
import ctypes
import multiprocessing
import os
import pickle
import resource
import select
import shutil
import signal
import sys
import tempfile
import threading
import traceback
import warnings
from pathlib import Path
from typing import Any

# Each rank is a guard (the spawned process, tiny: no torch, no user code) and a worker it forks at once, which runs
# the target. The guard leads its own process group (a timeout kill reaches the worker's subprocess.Popen children)
# and is a child subreaper (a double-forked setsid grandchild reparents to it, so it stays in the tree). It waits on
# the worker and on a pipe from pkroof: the pipe's end of file (pkroof gone, SIGKILL included, or stop_ranks) makes
# it freeze and kill its whole tree, then leave. The worker dies with its guard (PR_SET_PDEATHSIG). A guard that
# itself got SIGKILL is handled by pkroof: its process group and the tree under it, found through /proc, and the
# orphans reparented to pkroof (a child subreaper while ranks run).
# A rank cannot kill itself on its parent's death as its first act (PR_SET_PDEATHSIG, SIGKILL): the kernel's
# SIGKILL leaves it no moment to stop its own children, which then run on under init. The guard can.

_PR_SET_PDEATHSIG, PR_SET_CHILD_SUBREAPER, _PR_GET_CHILD_SUBREAPER = 1, 36, 37
TEMP_PREFIX = "pkroof-ranks-"  # + the owner's PID + "-": a folder whose owner is dead is removed at the next start


def prctl(option: int, value: int) -> bool:
    """prctl(option, value) on Linux; False where there is no prctl (another OS) or it failed."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(option, ctypes.c_ulong(value), 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def is_subreaper() -> bool:
    if not sys.platform.startswith("linux"):
        return False
    flag = ctypes.c_int(0)
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(_PR_GET_CHILD_SUBREAPER, ctypes.byref(flag), 0, 0, 0) == 0 and bool(flag.value)
    except (OSError, AttributeError):
        return False


def _stat(pid: int) -> tuple[int, int, str] | None:
    """(parent PID, process group, state) of `pid` from /proc, None where it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text.rpartition(")")[2].split()
    return int(fields[1]), int(fields[2]), fields[0]


def processes() -> dict[int, tuple[int, int, str]]:
    out = {}
    for entry in Path("/proc").iterdir() if Path("/proc").is_dir() else ():
        if entry.name.isdigit() and (stat := _stat(int(entry.name))) is not None:
            out[int(entry.name)] = stat
    return out


def descendants(roots: set[int], groups: set[int] = frozenset()) -> set[int]:
    """Every live process below `roots` (their children, the children's children...) and every process in one of
    the process `groups`, by /proc's parent links; the roots themselves are not in it."""
    table = processes()
    found = {p for p, (_, pgid, state) in table.items() if pgid in groups and state != "Z"} - roots
    frontier = set(roots) | found
    while frontier:
        below = {p for p, (ppid, _, state) in table.items() if ppid in frontier and state != "Z"} - found - roots
        found |= below
        frontier = below
    return found


def _signal(pid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, signum)


def kill_tree(roots: set[int], groups: set[int] = frozenset(), *, include_roots: bool = True) -> set[int]:
    """Freeze (SIGSTOP) and then kill (SIGKILL) `roots`' descendants and the members of `groups`, and the roots
    with `include_roots`: stopped first, so nothing forks or reparents while the tree is read. What was killed."""
    me = os.getpid()
    frozen: set[int] = set()
    for _ in range(50):  # until a reading of /proc finds nothing new
        found = (descendants(roots, groups) | (set(roots) if include_roots else set())) - {me}
        new = found - frozen
        if not new:
            break
        for pid in new:
            _signal(pid, signal.SIGSTOP)
        frozen |= new
    for pid in frozen:
        _signal(pid, signal.SIGKILL)
    return frozen


def reap(pids: set[int]) -> None:
    """Collect the exit status of those of `pids` that are this process's children (zombies otherwise)."""
    for pid in pids:
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)


def reap_stale_folders(tmp: Path | None = None) -> list[Path]:
    """Remove the rank folders (TEMP_PREFIX) whose owner process is dead (a pkroof killed with SIGKILL); ours only."""
    removed = []
    for folder in Path(tmp or tempfile.gettempdir()).glob(f"{TEMP_PREFIX}*"):
        owner = folder.name.removeprefix(TEMP_PREFIX).partition("-")[0]
        try:
            if not owner.isdigit() or folder.stat().st_uid != os.getuid() or not folder.is_dir():
                continue
        except OSError:
            continue
        stat = _stat(int(owner))
        if int(owner) == os.getpid() or (stat is not None and stat[2] != "Z"):
            continue  # its owner runs
        shutil.rmtree(folder, ignore_errors=True)
        removed.append(folder)
    return removed


def rank_guard(payload: bytes, watch: Any, env: dict[str, str], cwd: str, path: list[str]) -> None:
    """The process of one rank: fork the worker, wait for it or for pkroof's end, leave no process behind. It exits
    as its worker did (the same code, or killed by the same signal), so a crash reads the same. It came from the
    fork server, so it takes pkroof's environment, folder and import path of now, not of the server's start."""
    os.environ.clear()
    os.environ.update(env)
    os.chdir(cwd)
    sys.path[:] = path
    os.setpgid(0, 0)
    prctl(PR_SET_CHILD_SUBREAPER, 1)
    # torch's notices that an API a reference calls is deprecated (reduce_scatter_tensor, ...), once per rank and
    # call site: dozens of lines around a few rows of results, about torch, not about the result
    warnings.filterwarnings("ignore", category=FutureWarning, module=r"torch\.distributed")
    stop = threading.Event()
    for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(s, lambda *_: stop.set())
    guard = os.getpid()  # pkroof gone before this line: the pipe is at its end already, and the worker is stopped
    worker = os.fork()
    if worker == 0:
        _worker(payload, guard, watch)
    fd = watch.fileno()
    status = None
    while status is None and not stop.is_set():
        ready, _, _ = select.select([fd], [], [], 0.05)
        if ready:  # pkroof closed the pipe or is gone: end of file
            break
        status = _reap_children(worker)
    stopped = status is None  # pkroof's end or its stop: the worker is killed with the rest
    kill_tree({guard}, {guard}, include_roots=False)
    last = _reap_children(worker, block=True)
    status = last if status is None else status
    if stopped or status is None:
        os._exit(1)
    if os.WIFSIGNALED(status):
        signum = os.WTERMSIG(status)
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # the worker's signal again, without a core file
        with contextlib.suppress(OSError, ValueError):  # SIGKILL has no handler to reset
            signal.signal(signum, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signum})
        os.kill(os.getpid(), signum)
    os._exit(os.waitstatus_to_exitcode(status) if not os.WIFSIGNALED(status) else 1)


def _reap_children(worker: int, *, block: bool = False) -> int | None:
    """Collect every child of this guard that ended (orphans reparent to it); the worker's wait status if it ended.
    `block`: wait until no child is left (after kill_tree)."""
    status = None
    while True:
        try:
            pid, code = os.waitpid(-1, 0 if block else os.WNOHANG)
        except ChildProcessError:
            return status
        if pid == 0:
            return status
        if pid == worker:
            status = code


def _worker(payload: bytes, guard: int, watch: Any) -> None:
    """The rank itself, forked by its guard: dies with the guard, then runs the target."""
    prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != guard:  # the guard died before the line above: nothing to wait for
        os._exit(1)
    watch.close()
    for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(s, signal.SIG_DFL)
    # it may start ranks of its own (a user's file analysed apart is traced on CPU ranks when it needs values):
    # no daemon to multiprocessing, which refuses a daemon's children; its guard kills whatever it starts
    multiprocessing.current_process()._config["daemon"] = False
    try:
        target, args = pickle.loads(payload)
        target(*args)
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        if not isinstance(e.code, int | None):
            print(e.code, file=sys.stderr)
        flush()
        os._exit(code)
    except BaseException:
        traceback.print_exc()
        flush()
        os._exit(1)
    flush()
    os._exit(0)


def flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
