"""Measurement records: one JSON line per (problem, shape, implementation, world size), appended as soon as known.

A record holds what was measured and on what, never the model's view of it (that is computed whenever records
are read: records/evaluate.py), so records never go stale when the model changes:

    schema        "pkroof.record/2"
    problem       a suite name ("all-reduce") or the path of a user's problem file, with problem_sha256 (its bytes)
    shape         the label of the shape ("small", "small size=64 MiB"); params: every shape parameter
    world_size    ranks; dtype: the problem's dtype as bounded
    nodes         the nodes it ran on and ranks_per_node (absent: one node of all its ranks); a launched job's
                  records also say its launcher (torchrun, srun) and hosts (one per node, in rank order)
    topology      {"name": ..., "sha256": ...}: the topology the run was measured against
    impl          "reference", a built-in name or "path/to/file.py:function"; mechanism, schedule, comm_sms,
                  protocol, algorithm: the pair it declares (the reference: NCCL, serial)
    status        correct, incorrect, timeout or crashed; message (and traceback) say why
    timing        every sample (seconds per call), how they were taken; median_s, p10_s, p90_s, min_s of them;
                  max_abs_error of the checks and of every timed sample's outputs; sm_clock_mhz, power_capped: the
                  GPU while the samples ran; rtol/atol where --rtol/--atol replaced the dtype's tolerance;
                  judged_by_oracle where outputs were right only as close as the reference to its widened rerun
    environment   host, python, torch, CUDA, NCCL, driver, GPU, triton, PKROOF_* settings, the command
    date          UTC, ISO 8601
    workload      the traced Workload (rooflines/workload.py's dict) where the catalogue cannot rebuild it
                  without torch or without running a file: a reference traced on meta or CPU ranks, a user's file

Reading never imports a file a record names. Version 1 records (which also carried bounds, predictions and
fractions of roofline) are read as version 2, those fields dropped.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pkroof.rooflines.serialize import finite

SCHEMA = "pkroof.record/2"
OLDER = ("pkroof.record/1",)
STATUSES = ("correct", "incorrect", "timeout", "crashed")
# what version 1 stored beside the measurement: the model's output of the day, now computed when read
MODEL_FIELDS = (
    "analysis",
    "t_roof_s",
    "fraction_of_roofline",
    "achieved_link_Bps",
    "speedup_vs_reference",
    "predicted_s",
    "prediction_error",
    "comm_bytes",
    "model_refreshed",
)


def key(record: dict[str, Any]) -> tuple:
    return (
        record["problem"],
        record["shape"],
        json.dumps(record["params"], sort_keys=True),
        record["impl"],
        record["world_size"],
        placement(record)[0],
    )


def placement(record: dict[str, Any]) -> tuple[int, int]:
    """(nodes, ranks per node) a record ran on: a launched job's; one node of all its ranks where it says none (pkroof's
    own ranks on one node, and every record before launched jobs)."""
    return record.get("nodes", 1), record.get("ranks_per_node", record["world_size"])


def topology_name(record: dict[str, Any]) -> str | None:
    """The name of the topology a record was measured against (version 1 kept it in its environment)."""
    topo = record.get("topology")
    if isinstance(topo, dict) and isinstance(topo.get("name"), str):
        return topo["name"]
    env = record.get("environment")
    return str(env["topology"]) if isinstance(env, dict) and env.get("topology") else None


def upgrade(record: dict[str, Any]) -> dict[str, Any]:
    """A version 1 record as version 2: the model's fields dropped, the topology's name moved out of the
    environment. A version 2 record is returned as it is."""
    if record.get("schema") == SCHEMA:
        return record
    out = {k: v for k, v in record.items() if k not in MODEL_FIELDS}
    name = topology_name(record)
    env = out.get("environment")
    if isinstance(env, dict):
        out["environment"] = {k: v for k, v in env.items() if k != "topology"}
    if name is not None:
        out["topology"] = {"name": name}
    return out | {"schema": SCHEMA}


def append(path: Path, record: dict[str, Any]) -> None:
    """Append one line and make it durable before going on: nothing measured is lost to a later crash. After a line
    that a crash cut short (no newline at the end of the file), the record starts a line of its own. A number that
    is not finite is written as null (strict JSON)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    line = json.dumps(finite({**record, "schema": SCHEMA}), sort_keys=True, allow_nan=False) + "\n"
    with path.open("a+b") as f:
        end = f.seek(0, os.SEEK_END)
        if end:
            f.seek(end - 1)
            if f.read(1) != b"\n":
                line = "\n" + line
        f.write(line.encode())
        f.flush()
        os.fsync(f.fileno())


def _constant(name: str) -> None:
    raise ValueError(f"{name} is not a number JSON allows")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text} is out of range for a number")
    return value


def _strict_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    keys = [k for k, _ in pairs]
    if len(set(keys)) != len(keys):
        raise ValueError(f"key {next(k for k in keys if keys.count(k) > 1)!r} appears twice")
    return dict(pairs)


def _parse(line: str) -> dict[str, Any]:
    """One record, strictly: valid JSON without NaN/Infinity or repeated keys, a known schema, the key fields."""
    record = json.loads(line, parse_constant=_constant, parse_float=_finite_float, object_pairs_hook=_strict_pairs)
    if not isinstance(record, dict):
        raise ValueError("not a JSON object")
    schema = record.get("schema")
    if schema not in (SCHEMA, *OLDER):
        raise ValueError(f"schema {schema!r} is not one this pkroof reads ({', '.join((SCHEMA, *OLDER))})")
    key(record)
    for field in ("problem", "shape", "impl"):
        if not isinstance(record[field], str):
            raise ValueError(f"{field} is not a string")
    if not isinstance(record["params"], dict):
        raise ValueError("params is not an object")
    world = record["world_size"]
    if isinstance(world, bool) or not isinstance(world, int) or not 1 <= world <= MAX_RANKS:
        raise ValueError(f"world_size {world!r} is not a number of ranks")
    _check_placement(record)
    _check_times(record)
    return upgrade(record)


def _check_placement(record: dict[str, Any]) -> None:
    """nodes × ranks_per_node is the world size, each a whole number of at least 1, where a record says them."""
    for field in ("nodes", "ranks_per_node"):
        value = record.get(field, 1)
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_RANKS:
            raise ValueError(f"{field} {value!r} is not a number of {'nodes' if field == 'nodes' else 'ranks'}")
    nodes, per_node = placement(record)
    if nodes * per_node != record["world_size"]:
        raise ValueError(f"{nodes} nodes of {per_node} ranks is not its world_size {record['world_size']}")


MAX_RANKS = 1 << 20
MAX_SECONDS = 1e6  # a time per call beyond 11 days is no measurement


def _seconds(field: str, value: Any) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= MAX_SECONDS:
        raise ValueError(f"{field} {value!r} is not a time in seconds (0 to {MAX_SECONDS:g})")


def _check_times(record: dict[str, Any]) -> None:
    """Every time a record holds is a number of seconds within physical range: a negative, an absurd or a non-number
    time is a record not to use (NaN and Infinity were refused by the parser already)."""
    for field in ("median_s", "p10_s", "p90_s", "min_s"):
        _seconds(field, record.get(field))
    error = record.get("max_abs_error")
    if error is not None and (isinstance(error, bool) or not isinstance(error, (int, float)) or error < 0):
        raise ValueError(f"max_abs_error {error!r} is not a size of error")
    timing = record.get("timing")
    if timing is not None:
        if not isinstance(timing, dict):
            raise ValueError("timing is not an object")
        samples = timing.get("samples_s", [])
        if not isinstance(samples, list):
            raise ValueError("timing.samples_s is not a list")
        for i, value in enumerate(samples):
            _seconds(f"timing.samples_s[{i}]", value)


def read(path: Path) -> tuple[list[dict[str, Any]], list[str]]:
    """The records of a results file, and one message per line that could not be read (skipped, never fatal); one
    message in all for a file none of whose lines is a record."""
    records, problems = [], []
    if not path.exists():
        return records, problems
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as e:
        return records, [f"{path}: cannot read it ({e.strerror})"]
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            records.append(_parse(line))
        except (ValueError, KeyError, TypeError, RecursionError) as e:
            why = f"{type(e).__name__}: {e}" if isinstance(e, ValueError) else type(e).__name__
            problems.append(f"{path}:{number}: skipped, not a record ({why[:160]})")
    if not records and len(problems) > 1:  # a Python file, a log: one line, not one per line of it
        first = problems[0].split(": skipped, not a record ", 1)[-1]
        return records, [f"{path}: not a results file: none of its {len(problems)} lines is a record (first: {first})"]
    return records, problems


RESULTS_FILE = "results.jsonl"  # what `pkroof profile --out DIR` writes in DIR


def read_files(paths: list[Path], log: Callable[[str], None]) -> list[dict[str, Any]]:
    """The records of several results files (a folder: the results.jsonl `pkroof profile --out` wrote in it); a line
    that is not a record is reported through `log` and skipped, a file that does not exist is a ValueError."""
    found: list[dict[str, Any]] = []
    for path in paths:
        if Path(path).is_dir() and (Path(path) / RESULTS_FILE).is_file():
            path = Path(path) / RESULTS_FILE
        if not Path(path).is_file():
            raise ValueError(f"{path}: no such results file")
        lines, unreadable = read(Path(path))
        found += lines
        for line in unreadable:
            log(line)
    return found
