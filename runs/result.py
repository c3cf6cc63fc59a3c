"""What `pkroof trace` returns (TraceResult) and its JSON document (`to_dict`: `pkroof trace --json`)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from pkroof.topology import Topology

SCHEMA = "pkroof.trace/1"


@dataclass(frozen=True)
class TraceResult:
    """What `pkroof trace` found (docs/trace.md says what each column means)."""

    kernels: pd.DataFrame
    collectives: pd.DataFrame
    steps: pd.DataFrame
    opportunities: pd.DataFrame
    topology: str  # the preset or file, as --topology takes it
    topology_reason: str
    ranks: list[int]
    world_size: int
    notes: list[str] = field(default_factory=list)  # partial-result labels and what was assumed
    unsized: dict[str, int] = field(default_factory=dict)  # kernels not sized, by reason
    files: list[str] = field(default_factory=list)
    model: Topology | None = field(default=None, repr=False)  # the chosen topology itself


def _plain(value: Any) -> Any:
    if value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value)):
        return None
    return value.item() if hasattr(value, "item") else value  # a numpy scalar as Python's, every digit kept


def _records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """A frame's rows as plain JSON values: NaN and missing as null."""
    columns = list(frame.columns)
    return [dict(zip(columns, map(_plain, row), strict=True)) for row in frame.itertuples(index=False, name=None)]


def to_dict(result: TraceResult) -> dict[str, Any]:
    """`pkroof trace --json`: the schema's document (NaN as null)."""
    return {
        "schema": SCHEMA,
        "topology": result.topology,
        "topology_reason": result.topology_reason,
        "ranks": list(result.ranks),
        "world_size": result.world_size,
        "kernels": _records(result.kernels),
        "collectives": _records(result.collectives),
        "steps": _records(result.steps),
        "opportunities": _records(result.opportunities),
        "unsized": dict(result.unsized),
        "notes": list(result.notes),
        "files": list(result.files),
    }
