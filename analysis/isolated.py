"""A user's problem file analysed in a process of its own, stopped at a deadline: `pkroof bound` and `advise` on a
file whose import loops, whose workload() never returns or whose reference hangs while traced end in one line.

pkroof's own suite problems are analysed in the calling process (analysis/problem.py); a user's file never is.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from pkroof.analysis.catalogue import (
    WouldRunError,
    check_path,
    is_file,
    is_suite_problem,
    load,
    read_without_running,
    without_running,
)
from pkroof.runtime.launch import phase, reap_stale_folders, run_isolated

from .problem import ProblemAnalysis, analyze

PRELOAD = ("torch", "pkroof.analysis.trace")  # imported before the deadline starts: pkroof's start-up
ANALYSIS_TIMEOUT_S = 120.0  # `pkroof bound/advise --timeout`: importing the file, its workload() or the trace


def is_user_file(problem: str) -> bool:
    return is_file(problem) and not is_suite_problem(problem)


def _analyze_here(problem: str, kw: dict[str, Any]) -> ProblemAnalysis:
    phase(f"importing {problem}")
    loaded = load(problem)
    phase("building its workload (its workload(), or its reference traced)")
    return dataclasses.replace(analyze(loaded, **kw), problem=None)  # a module does not travel between processes


def _from_cache(problem: str, kw: dict[str, Any]) -> ProblemAnalysis | None:
    """The analysis of a user's file whose trace is cached, made here without running a line of it (its source
    read for its literal constants and signatures, its workload from the cache); None where the file would have
    to run: names set by code, a hand-written workload(), a shape or dtype the cache lacks."""
    try:
        with without_running():
            loaded = read_without_running(Path(problem))
            if loaded is None:
                return None
            return dataclasses.replace(analyze(loaded, **kw), problem=None)
    except WouldRunError:
        return None


def analyze_anywhere(problem: str, *, timeout_s: float = ANALYSIS_TIMEOUT_S, **kw: Any) -> ProblemAnalysis:
    """analyze(problem, **kw): in this process for a suite problem; for a user's file from the trace cache where
    it holds this shape (the file does not run), else in a process of its own that is stopped after `timeout_s`
    (the analysis then has no `problem`: its module stays in that process)."""
    if not is_user_file(problem):
        return analyze(problem, **kw)
    if not 0 < timeout_s < float("inf"):
        raise ValueError(f"--timeout must be a positive number of seconds, got {timeout_s:g}")
    check_path(Path(problem))
    reap_stale_folders()  # what a pkroof killed with SIGKILL left, even where no process starts now
    cached = _from_cache(problem, kw)
    if cached is not None:
        return cached
    return run_isolated(_analyze_here, (problem, kw), timeout_s=timeout_s, what=f"analysing {problem}", preload=PRELOAD)
