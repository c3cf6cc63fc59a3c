"""Traced workloads, cached on disk: a second `pkroof bound` of the same file and shape reads its workload instead of
tracing the reference again.

A trace is keyed by everything that decides it: the problem file's bytes (a suite problem's shared helpers too:
kernels/problems/_*.py), the parameters, the world size, the dtype, torch's version and the tracer's. A file that
imports code of its own elsewhere is keyed by its own bytes only: after changing that code, set PKROOF_TRACE_CACHE=off
(or delete the folder). The folder is $PKROOF_TRACE_CACHE, else $XDG_CACHE_HOME/pkroof/traces, else
~/.cache/pkroof/traces. An entry that cannot be read strictly is ignored and traced again; what is stored is data (a
workload), never code.

The package ships the suite's traces at its named shapes on 2, 8 and 72 ranks (kernels/problems/_traced.jsonl, made
by `python -m tools.ship_traces`), keyed without torch's version: where torch is not installed, `bound`,
`advise` and `report` read them instead of tracing. A suite file changed since fails tests/test_trace.py's check.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from pkroof.analysis.catalogue import SUITE_DIR, Problem
from pkroof.rooflines import Workload
from pkroof.rooflines.workload import workload_from_dict, workload_to_dict

TRACER_VERSION = 5  # bump when the tracer counts anything differently: older entries are then never read
OFF = ("0", "off", "no", "false")
SHIPPED = SUITE_DIR / "_traced.jsonl"
SHIPPED_WORLDS = (2, 8, 72)  # the presets' GPU counts


def folder() -> Path | None:
    """Where traces are cached; None where the cache is switched off (PKROOF_TRACE_CACHE=off)."""
    chosen = os.environ.get("PKROOF_TRACE_CACHE")
    if chosen is not None and chosen.strip().lower() in OFF:
        return None
    if chosen:
        return Path(chosen)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "pkroof" / "traces"


def _helpers_sha() -> str:
    """The suite's shared helpers (kernels/problems/_*.py), which its problem files import."""
    h = hashlib.sha256()
    for path in sorted(SUITE_DIR.glob("_*.py")):
        h.update(path.name.encode() + b"\0" + path.read_bytes())
    return h.hexdigest()


def _torch_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("torch")
    except PackageNotFoundError:
        return ""


def key(
    problem: Problem, world_size: int, params: dict[str, Any], dtype: str | None, how: str, *, any_torch: bool = False
) -> str:
    """The entry's name: a hash of what decides the trace. `how`: "meta" (meta tensors only) or "trace" (CPU ranks
    where meta tensors do not do). torch's version is read from its metadata (a hit imports no torch); `any_torch`:
    the shipped traces' key, which leaves it out."""
    torch_version = "" if any_torch else _torch_version()
    what = {
        "file": problem.sha256,
        "helpers": _helpers_sha() if problem.suite else "",
        "params": params,
        "world_size": world_size,
        "dtype": dtype,
        "torch": torch_version,
        "tracer": TRACER_VERSION,
        "how": how,
    }
    return hashlib.sha256(json.dumps(what, sort_keys=True, default=str).encode()).hexdigest()


def get(name: str) -> Workload | None:
    where = folder()
    path = where / f"{name}.json" if where is not None else None
    if path is None or not path.is_file():
        return None
    try:
        return workload_from_dict(json.loads(path.read_text()))
    except (OSError, ValueError, RecursionError):  # unreadable or not a workload: trace again (and overwrite)
        return None


def put(name: str, workload: Workload) -> None:
    """Store atomically (a reader sees the old entry or the new one); a folder that cannot be written is no error."""
    where = folder()
    if where is None:
        return
    try:
        where.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=where, prefix=".entry-", suffix=".json")
        with os.fdopen(fd, "w") as f:
            json.dump(workload_to_dict(workload), f, allow_nan=False)
        os.replace(tmp, where / f"{name}.json")
    except OSError:
        return


_shipped: dict[str, Workload] | None = None


def shipped(name: str) -> Workload | None:
    """The shipped trace under `name` (a key made with any_torch=True), read once."""
    global _shipped
    if _shipped is None:
        _shipped = {}
        if SHIPPED.is_file():
            for line in SHIPPED.read_text().splitlines():
                entry = json.loads(line)
                _shipped[entry["key"]] = workload_from_dict(entry["workload"])
    return _shipped.get(name)
