"""What `pkroof trace --out DIR` writes: a problem file for each of the top opportunities (DIR/problems/), the
result as JSON with their paths (DIR/trace.json, --json's document) and the page (DIR/trace.html)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import BinaryIO

import msgspec
import pandas as pd

from pkroof.reports.trace_page import write_trace_page
from pkroof.runs import problem_files
from pkroof.runs.result import TraceResult, to_dict

FRAMES = ("kernels", "collectives", "steps", "opportunities")
CHUNK = 50_000  # rows turned into Python objects at a time: a job's million kernels never all at once


def _column(values: pd.Series) -> list:
    """A column as Python values, missing as None (msgspec writes NaN and infinities as null too)."""
    return values.astype(object).where(values.notna(), None).tolist()


def _write_rows(frame: pd.DataFrame, out: BinaryIO) -> None:
    """`frame` as a JSON list of row objects, CHUNK rows at a time."""
    names = [str(c) for c in frame.columns]
    out.write(b"[")
    for start in range(0, len(frame), CHUNK):
        part = frame.iloc[start : start + CHUNK]
        rows = [dict(zip(names, values, strict=True)) for values in zip(*(_column(part[c]) for c in part), strict=True)]
        if start:
            out.write(b",")
        out.write(msgspec.json.encode(rows)[1:-1])
    out.write(b"]")


def write_json(result: TraceResult, out: BinaryIO) -> None:
    """`pkroof trace --json`'s document (runs/result.py `to_dict`, the same keys and values), written as it is made:
    a job's million kernels take their own size in memory, not a Python object each."""
    empty = {name: getattr(result, name).iloc[:0] for name in FRAMES}
    head = to_dict(dataclasses.replace(result, **empty))
    out.write(b"{")
    for i, (key, value) in enumerate(head.items()):
        out.write((b"," if i else b"") + msgspec.json.encode(key) + b":")
        if key in FRAMES:
            _write_rows(getattr(result, key), out)
        else:
            out.write(msgspec.json.encode(value))
    out.write(b"}\n")


def write_out(result: TraceResult, out_dir: Path, *, top: int = problem_files.TOP) -> TraceResult:
    """Write DIR/problems/top<i>_<kind>.py for the first `top` opportunities, DIR/trace.json and DIR/trace.html;
    the result again, its opportunities' problem_file set."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    with_files = problem_files.write(result.opportunities, out, top=top, topology=result.topology)
    result = dataclasses.replace(result, opportunities=with_files)
    with (out / "trace.json").open("wb") as f:
        write_json(result, f)
    write_trace_page(result, out)
    return result
