"""Where a user's problem file is analysed, decided before anything of it runs, from its source read once:

- not one of its functions needed (its trace cached for this point, no hand-written workload() to call): here, from
  its source and the trace cache; nothing of the file runs;
- its hand-written workload() to call, in a file whose import runs nothing of its own but definitions
  (source.declarative): here, the file imported and workload() called under a deadline (runtime/deadline.py);
- anything else (a reference to trace, code at the file's top level, no alarm to be had on this thread): in a
  process of its own, stopped at the deadline (runtime/isolated.py), given the bytes read here.

Every way, a file that loops or hangs ends in one line at --timeout. The alarm cannot stop a workload() stuck in one
C call that never returns to Python, nor one that exits or crashes the process: where a file's import could do that,
it runs apart. pkroof's own suite problems are analysed here, with no deadline (analysis/problem.py).
"""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import importlib
import sys
import time
from pathlib import Path
from typing import Any

from pkroof.runtime.process_tree import reap_stale_folders

from .catalogue import from_source, is_file, is_suite_problem, load_source
from .problem import ProblemAnalysis, analyze, analyze_from_cache, has_torch, uses_hand_written
from .source import SourceFile, declarative, read

PRELOAD = ("torch", "pkroof.analysis.trace")  # imported before the deadline starts: pkroof's start-up
ANALYSIS_TIMEOUT_S = 120.0  # `pkroof bound/advise --timeout`: importing the file, its workload() or the trace
BUILDING = "building its workload (its workload(), or its reference traced)"


def is_user_file(problem: str) -> bool:
    return is_file(problem) and not is_suite_problem(problem)


def _detached(analysis: ProblemAnalysis) -> ProblemAnalysis:
    """A user's file's analysis without its module, wherever it was made (a module does not travel between
    processes, so none comes back from one)."""
    return dataclasses.replace(analysis, problem=None)


def _analyze_apart(source: SourceFile, kw: dict[str, Any]) -> ProblemAnalysis:
    """In the process of its own: the file from the bytes the caller read, analysed."""
    from pkroof.runtime.launch import phase

    phase(f"importing {source.path}")
    with contextlib.redirect_stdout(sys.stderr):  # what the file prints goes to stderr: stdout is pkroof's
        loaded = load_source(source)
    phase(BUILDING)
    return _detached(analyze(loaded, **kw))


def _imports_torch(tree: ast.Module) -> bool:
    names = [a.name for n in tree.body if isinstance(n, ast.Import) for a in n.names]
    names += [n.module or "" for n in tree.body if isinstance(n, ast.ImportFrom)]
    return any(name.split(".")[0] == "torch" for name in names)


def _analyze_here(
    source: SourceFile, tree: ast.Module, kw: dict[str, Any], timeout_s: float, what: str
) -> ProblemAnalysis:
    """The file imported and its workload() called in this process, both stopped at `timeout_s`."""
    from pkroof.runtime import deadline

    if _imports_torch(tree) and has_torch():
        importlib.import_module("torch")  # pkroof's start-up, before the deadline, as the process apart does
    doing, start = f"importing {source.path}", time.monotonic()
    try:
        with deadline.deadline(timeout_s), contextlib.redirect_stdout(sys.stderr):
            loaded = load_source(source)
            doing = BUILDING
            return _detached(analyze(loaded, **kw))
    except deadline.DeadlineError:
        raise ValueError(deadline.stopped_line(what, time.monotonic() - start, doing, timeout_s)) from None


def analyze_anywhere(problem: str, *, timeout_s: float = ANALYSIS_TIMEOUT_S, **kw: Any) -> ProblemAnalysis:
    """analyze(problem, **kw): here for a suite problem; for a user's file here where nothing of it runs or only its
    hand-written workload() does (under the deadline), else in a process of its own stopped after `timeout_s` (see
    the module's docstring). A user's file's analysis has no `problem`: its module is not handed out."""
    if not is_user_file(problem):
        return analyze(problem, **kw)
    if not 0 < timeout_s < float("inf"):
        raise ValueError(f"--timeout must be a positive number of seconds, got {timeout_s:g}")
    source = read(Path(problem))
    reap_stale_folders()  # what a pkroof killed with SIGKILL left, even where no process starts now
    what = f"analysing {problem}"
    tree = source.tree()
    known = from_source(source, tree) if tree is not None else None  # never runs the file
    about = None if known is None else {"summary": known.summary, "category": known.category, "source": known.source}
    if known is not None and not uses_hand_written(known, kw.get("dtype")):
        found = analyze_from_cache(known, **kw)
        if found is not None:
            return dataclasses.replace(_detached(found), about=about)
    elif known is not None and declarative(source, tree):
        from pkroof.runtime.deadline import available  # imported where only workload() runs

        if available():
            return dataclasses.replace(_analyze_here(source, tree, kw, timeout_s, what), about=about)
    from pkroof.runtime.isolated import run_isolated  # the launcher, imported where a process starts

    found = run_isolated(_analyze_apart, (source, kw), timeout_s=timeout_s, what=what, preload=PRELOAD)
    return dataclasses.replace(found, about=about)
