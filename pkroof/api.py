"""The Python API: `pkroof.bound`, `pkroof.advise` and `pkroof.profile`, as thin as the CLI.

`bound` and `advise` take the CLI's route (`pkroof.analysis.user_file.analyze_anywhere`): a suite problem analysed
here; a user's problem file answered from the trace cache without running it, or a hand-written workload() of a file
of definitions called here under an alarm, else the file in a process of its own, each stopped after `timeout_s`.
They return the model's own results: a `Bound` (rooflines/bound.py) whose attributes include every key of `pkroof
bound --json` (`Bound.to_dict()` is that object), and its `Advice` (rooflines/advice.py), whose attributes include
every key of `pkroof advise --json`. `profile` runs the profiler and returns its records with the model's fields
computed (records/evaluate.py). Bad input is a ValueError of one line, as the CLI's one line on stderr.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pkroof.rooflines.advice import Advice
from pkroof.rooflines.bound import Bound, LinkTerm, Terms
from pkroof.rooflines.predictions import Prediction
from pkroof.rooflines.workload import CommOp

__all__ = ["Advice", "Bound", "CommOp", "LinkTerm", "Prediction", "Terms", "advise", "bound", "profile", "sizes"]

Size = int | str  # bytes, or text in nccl-tests' convention: "64M" (= 64 MiB), "256KiB", "1GB" (= 10**9)
ANALYSIS_TIMEOUT_S = 120.0  # the CLI's --timeout: a problem file's import, workload() or trace


def sizes(minbytes: Size, maxbytes: Size, *, stepfactor: int = 1, stepbytes: Size = "1M") -> list[int]:
    """The sizes of nccl-tests' `-b minbytes -e maxbytes -f stepfactor -i stepbytes`: sizes(8, "128M", stepfactor=2)
    is 8, 16, ... 128 MiB."""
    from pkroof.rooflines.units import size_sweep

    return size_sweep(_bytes(minbytes), _bytes(maxbytes), stepfactor=stepfactor, stepbytes=_bytes(stepbytes))


def _bytes(size: Size) -> int:
    from pkroof.rooflines.units import parse_size

    if isinstance(size, bool) or not isinstance(size, (int, str)):
        raise ValueError(f"a size is a number of bytes or text such as '64MiB', got {size!r}")
    return parse_size(str(size))


def _params(params: Mapping[str, int | str] | None, size: int | None) -> dict[str, int]:
    """Shape parameters as `--param name=value` reads them (byte sizes take units), the size as size_bytes."""
    from pkroof.analysis.catalogue import parse_params

    out = parse_params([f"{k}={v}" for k, v in (params or {}).items()])
    if size is not None:
        if "size_bytes" in out:
            raise ValueError("give the size once: size= or params={'size_bytes': ...}, not both")
        out["size_bytes"] = size
    return out


def _sizes(size: Size | Sequence[Size] | None) -> tuple[list[int | None], bool]:
    """(the sizes, whether several were asked for): one size gives one result, a sequence a list."""
    if size is None or isinstance(size, (int, str)):
        return [None if size is None else _bytes(size)], False
    if not isinstance(size, Sequence):  # 1.5e6: a float is not a byte count
        raise ValueError(f"a size is a whole number of bytes or text such as '64MiB', got {size!r}")
    listed = [_bytes(s) for s in size]
    if len(set(listed)) != len(listed):
        raise ValueError("a size is given twice (each size once)")
    return listed, True


def _bounds(
    problem: str,
    *,
    topology: Any,
    size: Size | Sequence[Size] | None,
    shape: str | None,
    params: Mapping[str, int | str] | None,
    world_size: int | None,
    nodes: int | None,
    dtype: str | None,
    timeout_s: float,
) -> list[Bound] | Bound:
    """The bound of `problem` at each size, as `pkroof bound` makes it (one Bound, or a list for a sequence)."""
    from pkroof.analysis.user_file import analyze_anywhere
    from pkroof.topology.default import default_topology

    listed, many = _sizes(size)
    topo = default_topology() if topology is None else topology
    kw = dict(topology=topo, shape=shape, world_size=world_size, nodes=nodes, dtype=dtype)
    out = [analyze_anywhere(problem, timeout_s=timeout_s, params=_params(params, s), **kw).bound for s in listed]
    return out if many else out[0]


def bound(
    problem: str,
    *,
    topology: Any = None,
    size: Size | Sequence[Size] | None = None,
    shape: str | None = None,
    params: Mapping[str, int | str] | None = None,
    world_size: int | None = None,
    nodes: int | None = None,
    dtype: str | None = None,
    timeout_s: float = ANALYSIS_TIMEOUT_S,
) -> Bound | list[Bound]:
    """The communication-aware roofline of `problem` (a suite name or a problem file) on `topology` (a preset name,
    a topology file, or a Topology; default: the CLI's), with every (mechanism, schedule) prediction and its advice.
    A sequence of sizes gives a list, one Bound per size. A problem file takes the CLI's route, stopped after
    `timeout_s` seconds (the CLI's --timeout; docs/problems.md says where a file runs)."""
    return _bounds(
        problem, topology=topology, size=size, shape=shape, params=params, world_size=world_size, nodes=nodes,
        dtype=dtype, timeout_s=timeout_s,
    )  # fmt: skip


def advise(
    problem: str,
    *,
    topology: Any = None,
    size: Size | Sequence[Size] | None = None,
    shape: str | None = None,
    params: Mapping[str, int | str] | None = None,
    world_size: int | None = None,
    nodes: int | None = None,
    dtype: str | None = None,
    timeout_s: float = ANALYSIS_TIMEOUT_S,
) -> Advice | list[Advice | None] | None:
    """`bound(...)`'s advice: the pair to build, its headroom over NCCL and why (None where there is nothing to
    communicate, on one GPU). A sequence of sizes gives a list."""
    found = _bounds(
        problem, topology=topology, size=size, shape=shape, params=params, world_size=world_size, nodes=nodes,
        dtype=dtype, timeout_s=timeout_s,
    )  # fmt: skip
    return [b.advice for b in found] if isinstance(found, list) else found.advice


def profile(
    problems: str | Sequence[str],
    *,
    impls: Sequence[str] = (),
    topology: str | None = None,
    size: Size | Sequence[Size] | None = None,
    shape: str | None = None,
    params: Mapping[str, int | str] | None = None,
    world_size: int | None = None,
    dtype: str | None = None,
    iters: int | None = None,
    warmup: int | None = None,
    rtol: float | None = None,
    atol: float | None = None,
    out: str | Path = "pkroof-results",
    timeout_s: float = 60.0,
    resume: bool = False,
    log: Callable[[str], None] | None = None,
    nodes: int | None = None,
) -> list[dict[str, Any]]:
    """`pkroof profile`: check every implementation against the reference on fresh inputs, time the correct ones
    (GPUs over NCCL, else CPU ranks over gloo), append each record to `out`/results.jsonl. Returns the records this
    call wrote, each with the model's fields computed as records/evaluate.py computes them when records are read
    (t_roof_s, fraction_of_roofline, algbw_Bps, busbw_Bps, predicted_s, ...). `log` gets each line `pkroof
    profile` prints (default: nothing). Called in a process torchrun or srun started, it is that rank of the launched
    job (`nodes`: the job's node count, to bound on that many of the topology's nodes); ranks other than 0 return []."""
    from pkroof.profilers.profile import profile as run_profile
    from pkroof.records.evaluate import evaluate
    from pkroof.topology import resolve
    from pkroof.topology.default import default_topology

    listed, many = _sizes(size)
    topology = default_topology() if topology is None else topology
    written = run_profile(
        [problems] if isinstance(problems, str) else list(problems),
        impls=list(impls),
        world_size=world_size,
        shape=shape,
        overrides=_params(params, None),
        sizes=listed if (many or listed[0] is not None) else None,
        dtype=dtype,
        iters=iters,
        warmup=warmup,
        rtol=rtol,
        atol=atol,
        out_dir=Path(out),
        timeout_s=timeout_s,
        resume=resume,
        topology=topology,
        log=log or (lambda line: None),
        nodes=nodes,
    )
    return evaluate(written, resolve(topology), log=lambda line: None).records


def trace(
    paths: str | Path | Sequence[str | Path],
    *,
    topology: str | None = None,
    progress: Callable[[int, int, str], None] | None = None,
) -> Any:
    """`pkroof trace`: a job's torch.profiler traces (files, folders or globs; one file per rank) → a TraceResult
    (pkroof.runs.analyze_traces.TraceResult) whose `kernels`, `collectives`, `steps` and `opportunities` are pandas
    DataFrames with the columns of `pkroof trace --json` (docs/trace.md), and its topology, the reason it was chosen,
    ranks, notes and unsized counts. `topology`: a preset or topology file (default: matched from the traces).
    `progress(files_read, files, path)` after each file. Bad input is a ValueError of one line."""
    from pkroof.runs import analyze_traces

    return analyze_traces(paths, topology=topology, progress=progress)
