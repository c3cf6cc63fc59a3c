"""`analyze_traces`: a job's profiler traces → every kernel bounded, collectives matched across ranks, each step
broken down, and the opportunities ranked."""

from __future__ import annotations

import contextlib
import dataclasses
import gc
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import pandas as pd

from . import opportunities
from .job import JobCheck
from .kernels import empty_columns, kernels_frame, rank_rows
from .ranks import collectives_frame, steps_frame
from .read import find_files, read_rank
from .result import TraceResult
from .roofs import Chosen, Model, choose_topology

Progress = Callable[[int, int, str], None]  # (files read, files in all, the file just read)


def analyze_traces(
    paths: str | Path | Iterable[str | Path], *, topology: str | None = None, progress: Progress | None = None
) -> TraceResult:
    """Read the traces (files, folders or globs: one file per rank), bound every kernel on `topology` (a preset or
    topology file; default: the preset matched from the traces' deviceProperties), match collectives across ranks
    and break each step down. One rank's events are in memory at a time. Bad input is a ValueError of one line."""
    files = find_files([paths] if isinstance(paths, (str, Path)) else list(paths))
    with _no_cycle_collection():
        return _analyze(files, topology, progress)


@contextlib.contextmanager
def _no_cycle_collection() -> Iterator[None]:
    """Python's cycle collector paused while millions of events become objects and columns (none of them in a
    cycle): its full collections walk every live object again and again, 69 s → 37 s of CPU time on 8 ranks × 200 MB
    (benchmarks/trace/2026-12-05-reader.md). Reference counting frees everything as before."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _analyze(files: list[Path], topology: str | None, progress: Progress | None) -> TraceResult:
    check = JobCheck(len(files))
    chosen: Chosen | None = None
    model: Model | None = None
    unsized: Counter = Counter()
    columns = empty_columns()
    for i, path in enumerate(files):
        trace = read_rank(path)
        meta = check.add(trace)
        if trace.kernels:
            if model is None:
                chosen = choose_topology(topology, meta.devices, meta.distributed.get("world_size"))
                model = Model(chosen.topology)
            rank_rows(trace, model, meta.default_group, unsized, columns)
        del trace
        if progress is not None:
            progress(i + 1, len(files), str(path))
    ranks, world, notes = check.finish()
    assert chosen is not None and model is not None  # finish() refuses a job without GPU kernels
    kernels = kernels_frame(columns)
    collectives, matching = collectives_frame(kernels)
    result = TraceResult(
        kernels=kernels,
        collectives=collectives,
        steps=steps_frame(kernels),
        opportunities=pd.DataFrame(columns=opportunities.COLUMNS),
        topology=chosen.name,
        topology_reason=chosen.reason,
        ranks=ranks,
        world_size=world,
        notes=notes + matching,
        unsized=dict(unsized.most_common()),
        files=[str(f) for f in files],
        model=chosen.topology,
    )
    return dataclasses.replace(result, opportunities=opportunities.find(result, chosen.topology))
