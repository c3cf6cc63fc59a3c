"""Measurement records: one JSON line per (problem, shape, implementation, world size), appended as soon as known."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

SCHEMA = "pkroof.record/1"
STATUSES = ("correct", "incorrect", "timeout", "crashed")


def key(record: dict[str, Any]) -> tuple:
    return (
        record["problem"],
        record["shape"],
        json.dumps(record["params"], sort_keys=True),
        record["impl"],
        record["world_size"],
    )


def append(path: Path, record: dict[str, Any]) -> None:
    """Append one line and make it durable before going on: nothing measured is lost to a later crash. After a line
    that a crash cut short (no newline at the end of the file), the record starts a line of its own."""
    path.parent.mkdir(parents=True, exist_ok=True)
    line = json.dumps({"schema": SCHEMA, **record}, sort_keys=True) + "\n"
    with path.open("a+b") as f:
        end = f.seek(0, os.SEEK_END)
        if end:
            f.seek(end - 1)
            if f.read(1) != b"\n":
                line = "\n" + line
        f.write(line.encode())
        f.flush()
        os.fsync(f.fileno())


def read(path: Path) -> tuple[list[dict[str, Any]], list[str]]:
    """The records of a results file, and one message per line that could not be read (skipped, never fatal)."""
    records, problems = [], []
    if not path.exists():
        return records, problems
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            key(record)
        except (json.JSONDecodeError, KeyError, TypeError) as e:
            problems.append(f"{path}:{number}: skipped, not a record ({type(e).__name__})")
            continue
        records.append(record)
    return records, problems


def read_files(paths: list[Path], log: Callable[[str], None]) -> list[dict[str, Any]]:
    """The records of several results files; a line that is not a record is reported through `log` and skipped,
    a file that does not exist is a ValueError."""
    found: list[dict[str, Any]] = []
    for path in paths:
        if not Path(path).is_file():
            raise ValueError(f"{path}: no such results file")
        lines, unreadable = read(Path(path))
        found += lines
        for line in unreadable:
            log(line)
    return found
