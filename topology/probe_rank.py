"""The spawn target that starts one probe rank. Torch-free at import: the parent names this function to the spawn
context without importing torch; the child imports the measuring side (probe_worker.py) only when it runs."""

from __future__ import annotations


def run_rank(*args: object) -> None:
    from .probe_worker import run

    run(*args)
