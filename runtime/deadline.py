"""A deadline for code that runs in this process: SIGALRM on the main thread, its handler raising DeadlineError.

It stops what returns to the interpreter (a Python loop, a sleep, a wait a signal interrupts) and, as it fires
again every REPEAT_S, code that swallowed it once. It cannot stop one C call that never returns to Python, a
process exit (os._exit) or a crash: what needs that runs in a process of its own (runtime/isolated.py).
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

REPEAT_S = 0.1


class DeadlineError(BaseException):
    """The deadline passed while the code under it ran. Not an Exception: the code it stops must not catch it in its
    own `except Exception`."""


def stopped_line(what: str, seconds: float, doing: str, limit_s: float) -> str:
    """What a user's file did at its deadline, in one line (here or in a process of its own)."""
    return f"{what}: stopped after {seconds:.0f} s, still {doing} (the limit is {limit_s:g} s: --timeout)"


def available() -> bool:
    """Whether a deadline can be set here: on the main thread, with a SIGALRM handler Python can put back."""
    return (
        hasattr(signal, "SIGALRM")
        and threading.current_thread() is threading.main_thread()
        and signal.getsignal(signal.SIGALRM) is not None
    )


@contextmanager
def deadline(seconds: float) -> Iterator[None]:
    """DeadlineError in the block once `seconds` pass. An alarm already set (a test runner's) that comes first
    is left to fire; a later one is set again, for the time it had left, on the way out."""
    assert available(), "deadline() on the main thread, where SIGALRM's handler is Python's"
    outer, _ = signal.getitimer(signal.ITIMER_REAL)
    if outer and outer <= seconds:
        yield
        return
    before = signal.getsignal(signal.SIGALRM)
    start = time.monotonic()

    def expired(signum: int, frame: object) -> None:
        raise DeadlineError

    signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds, REPEAT_S)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, before)
        if outer:
            signal.setitimer(signal.ITIMER_REAL, max(outer - (time.monotonic() - start), 1e-3))
