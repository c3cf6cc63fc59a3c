"""`analyze_traces`: a job's profiler traces → every kernel bounded, collectives matched across ranks, each step
broken down, and the opportunities ranked; `to_dict` is `pkroof trace --json`'s document."""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from pkroof.topology import Topology

from . import opportunities
from .job import job_of
from .kernels import kernels_frame, rank_rows
from .model import Model, choose_topology
from .ranks import collectives_frame, steps_frame
from .read import find_files, read_all

SCHEMA = "pkroof.trace/1"
Progress = Callable[[int, int, str], None]  # (files read, files in all, the file just read)


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


def analyze_traces(
    paths: str | Path | Iterable[str | Path], *, topology: str | None = None, progress: Progress | None = None
) -> TraceResult:
    """Read the traces (files, folders or globs: one file per rank), bound every kernel on `topology` (a preset or
    topology file; default: the preset matched from the traces' deviceProperties), match collectives across ranks
    and break each step down. Bad input is a ValueError of one line."""
    files = find_files([paths] if isinstance(paths, (str, Path)) else list(paths))
    job = job_of(read_all(files, progress))
    chosen = choose_topology(topology, job.devices, job.world_size)
    model = Model(chosen.topology)
    unsized: Counter = Counter()
    rows: list[dict] = []
    for trace in job.traces.values():
        rows += rank_rows(trace, model, job.default_group, unsized)
    kernels = kernels_frame(rows)
    collectives, matching = collectives_frame(kernels)
    result = TraceResult(
        kernels=kernels,
        collectives=collectives,
        steps=steps_frame(kernels),
        opportunities=pd.DataFrame(columns=opportunities.COLUMNS),
        topology=chosen.name,
        topology_reason=chosen.reason,
        ranks=list(job.traces),
        world_size=job.world_size,
        notes=job.notes + matching,
        unsized=dict(unsized.most_common()),
        files=[str(f) for f in files],
        model=chosen.topology,
    )
    return dataclasses.replace(result, opportunities=opportunities.find(result, chosen.topology))


def _records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """A frame's rows as plain JSON values: NaN and missing as null."""
    return json.loads(frame.to_json(orient="records", double_precision=15))


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
