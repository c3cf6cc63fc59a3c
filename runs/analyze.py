"""`analyze_traces`: a job's profiler traces → every kernel bounded, collectives matched across ranks, each step
broken down, and the opportunities ranked."""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path

import pandas as pd

from . import opportunities
from .job import job_of
from .kernels import kernels_frame, rank_rows
from .model import Model, choose_topology
from .ranks import collectives_frame, steps_frame
from .read import find_files, read_all
from .result import TraceResult

Progress = Callable[[int, int, str], None]  # (files read, files in all, the file just read)


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
