"""A function of a user's code in a process of its own (a guard and its worker, as a rank), stopped at a deadline:
every way it can fail is one line.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import pickle
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .deadline import stopped_line
from .launch import (
    PHASE_FILE,
    STARTUP_S,
    TEMP_PREFIX,
    RankFailedError,
    RankTimeoutError,
    start_ranks,
    stop_ranks,
    stopped_by_signals,
    wait_ranks,
)
from .process_tree import flush, reap_stale_folders


class IsolatedError(ValueError):
    """What a user's file did in run_isolated's process, in one line: it hung past its deadline, died, or raised
    something other than a ValueError. `details`: the traceback where there is one."""

    def __init__(self, message: str, details: str = "") -> None:
        self.details = details
        super().__init__(message)


def _isolated_main(rank: int, world: int, fn: Callable, args: tuple, folder: str, preload: tuple[str, ...]) -> None:
    os.environ[PHASE_FILE] = str(Path(folder, f"{rank}.phase"))
    for module in preload:  # pkroof's own imports (torch) are start-up, not the user's file's time
        with contextlib.suppress(ImportError):
            importlib.import_module(module)
    Path(folder, f"{rank}.ready").write_text("")
    try:
        outcome: tuple = ("returned", fn(*args))
    except ValueError as e:  # a user error: the same exception in the caller, where it pickles
        outcome = ("raised", e, traceback.format_exc())
    except BaseException as e:  # SystemExit, KeyboardInterrupt of the file's own, any other error: one line
        first = (str(e).strip().splitlines() or [""])[0]
        outcome = ("failed", f"{type(e).__name__}{': ' + first if first else ''}", traceback.format_exc())
    try:
        data = pickle.dumps(outcome)
    except Exception as e:  # an exception or a result that does not pickle
        data = pickle.dumps(("failed", f"its result could not be sent back ({type(e).__name__}: {e})", ""))
    Path(folder, f"{rank}.pickle").write_bytes(data)
    flush()
    os._exit(0)


def run_isolated(
    fn: Callable,
    args: tuple,
    *,
    timeout_s: float,
    what: str,
    startup_s: float = STARTUP_S,
    preload: tuple[str, ...] = (),
) -> Any:
    """fn(*args) in a process of its own (a guard and its worker, as a rank), stopped at `timeout_s`; its return
    value. For the user's files that the parent would otherwise import or run (an import that loops, a reference
    that never returns while traced): `what` says what ran ("loading my_problem.py"), and every way it can fail is
    one line: a ValueError it raised is raised here as it is; a hang, a death (os._exit, a signal) or another error
    is an IsolatedError. The deadline starts once the process runs fn (its start-up, `preload`'s imports included,
    has `startup_s`)."""
    reap_stale_folders()
    with tempfile.TemporaryDirectory(prefix=f"{TEMP_PREFIX}{os.getpid()}-") as folder, stopped_by_signals():
        procs = start_ranks(_isolated_main, 1, (fn, args, folder, preload), loopback=True)
        start = time.monotonic()
        try:
            wait_ranks(procs, timeout_s, Path(folder), startup_s=startup_s)
        except RankTimeoutError as e:
            if e.startup:
                raise IsolatedError(f"{what}: its process did not start in {startup_s:g} s; stopped") from None
            doing = e.phases.get(0) or what
            seconds = time.monotonic() - start
            raise IsolatedError(stopped_line(what, seconds, doing, timeout_s)) from None
        except RankFailedError as e:
            raise IsolatedError(f"{what}: its process {e.how}", e.details) from None
        finally:
            stop_ranks(procs)
        outcome = pickle.loads(Path(folder, "0.pickle").read_bytes())
    if outcome[0] == "returned":
        return outcome[1]
    if outcome[0] == "raised":
        raise outcome[1]
    raise IsolatedError(f"{what}: {outcome[1]}", outcome[2])
