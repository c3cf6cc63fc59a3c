"""The Python API: `pkroof.bound`, `pkroof.advise` and `pkroof.profile`, as thin as the CLI.

`bound` and `advise` call the one analysis (`pkroof.profilers.analysis.analyze`) and return typed, frozen objects
whose attributes are the fields of `pkroof bound --json` (Bound) and `pkroof advise --json` (Recommendation);
`profile` runs the profiler and returns its records with the model's fields computed (profilers/evaluate.py).
Bad input is a ValueError of one line, as the CLI's one line on stderr.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

Size = int | str  # bytes, or text in nccl-tests' convention: "64M" (= 64 MiB), "256KiB", "1GB" (= 10**9)


@dataclass(frozen=True)
class Terms:
    compute_s: float
    hbm_s: float
    link_s: float
    latency_s: float


@dataclass(frozen=True)
class LinkTerm:
    """One tier's part of terms.link_s, at the rank busiest on that tier: t_s = bytes_per_rank / bandwidth_Bps."""

    t_s: float
    bytes_per_rank: float
    bandwidth_Bps: float


@dataclass(frozen=True)
class Comm:
    """One communication op of the workload: nccl-tests' size, its group, what produces and consumes it."""

    name: str
    kind: str
    size_bytes: float
    group_size: int
    reduction: bool
    producer: str | None
    consumer: str | None
    send_bytes: float | None  # this rank's own bytes to and from its peers where uneven; None: the even split
    recv_bytes: float | None
    after: tuple[str, ...] | None  # the ops it waits for where given; None: the data flow's


@dataclass(frozen=True)
class Prediction:
    """The model's time for one (mechanism, schedule) pair, and its parts; algbw/busbw for a lone collective."""

    mechanism: str
    schedule: str
    comm_sms: int
    t_s: float
    compute_s: float
    comm_s: float
    latency_s: float
    fill_s: float
    algorithms: tuple[str, ...]
    protocol: str
    protocols: tuple[str, ...]  # per communication op: NCCL's protocol, or a probe fit's regime
    t_eager_s: float | None  # NCCL: the same calls launched eagerly, each waited on (t_s: captured in a graph)
    t_symmetric_s: float | None  # NCCL: with buffers registered for its symmetric-memory kernels
    algbw_Bps: float | None
    busbw_Bps: float | None


@dataclass(frozen=True)
class Recommendation:
    """`pkroof advise --json`: the pair to build, its time, NCCL's, the headroom, why, and every number why quotes."""

    mechanism: str
    schedule: str
    protocol: str
    comm_sms: int
    t_s: float
    baseline_t_s: float | None
    baseline_assumes: str | None  # what NCCL runs by default, per communication op
    headroom: float | None
    fastest_t_s: float | None  # the fastest pair's time where it is not advised (within a few % of NCCL's)
    reason: str
    facts: Mapping[str, float]


@dataclass(frozen=True)
class Bound:
    """`pkroof bound --json`: t_roof_s = max(terms.compute_s, terms.hbm_s, terms.link_s) + terms.latency_s."""

    schema: str
    problem: str
    topology: str
    world_size: int
    nodes: int
    dtype: str
    params: Mapping[str, float]
    t_roof_s: float
    algbw_Bps: float | None
    busbw_Bps: float | None
    limiter: str
    terms: Terms
    flops: float
    peak_flops: float
    hbm_bytes: float
    hbm_bandwidth_Bps: float
    link_bytes_per_rank: float
    link_bandwidth_Bps: float
    link_tier: str
    link_terms: Mapping[str, LinkTerm]  # "scale-up"; "scale-out" on more than one node (terms.link_s: the slower)
    comm: tuple[Comm, ...]
    busiest_rank: Mapping[str, int]  # the rank that set each term, where ranks differ (empty: every rank alike)
    uncounted: tuple[str, ...]  # ops that compute but that no FLOP formula prices
    predictions: tuple[Prediction, ...]  # fastest first
    recommendation: Recommendation | None  # None: nothing to communicate on a topology without peers

    def to_dict(self) -> dict[str, Any]:
        """The JSON object of `pkroof bound --json`."""
        return _plain(self)


def _build(cls: type, data: Mapping[str, Any]) -> Any:
    """An instance of dataclass `cls` from the JSON dict of its fields (nested records, tuples and mappings)."""
    hints = typing.get_type_hints(cls)
    names = [f.name for f in dataclasses.fields(cls)]
    assert set(names) == set(data), (cls.__name__, sorted(set(names) ^ set(data)))  # the JSON's fields, exactly
    return cls(**{name: _value(hints[name], data[name]) for name in names})


def _value(hint: Any, value: Any) -> Any:
    origin = typing.get_origin(hint)
    if origin in (types.UnionType, typing.Union):
        inner = [a for a in typing.get_args(hint) if a is not type(None)]
        return None if value is None else _value(inner[0], value)
    if dataclasses.is_dataclass(hint):
        return _build(hint, value)
    if origin is tuple:
        item = typing.get_args(hint)[0]
        return tuple(_value(item, v) for v in value)
    if origin is Mapping:
        item = typing.get_args(hint)[1]
        return types.MappingProxyType({k: _value(item, v) for k, v in value.items()})
    return value


def _plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    return value


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
    from pkroof.kernels.catalogue import parse_params

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
    listed = [_bytes(s) for s in size]
    if len(set(listed)) != len(listed):
        raise ValueError("a size is given twice (each size once)")
    return listed, True


def _analyses(problem: str, *, topology: Any, size: Any, shape: str | None, params: Any, **kw: Any) -> tuple:
    from pkroof.profilers.analysis import analyze
    from pkroof.topology.default import default_topology

    listed, many = _sizes(size)
    topo = default_topology() if topology is None else topology
    out = [analyze(problem, topology=topo, shape=shape, params=_params(params, s), **kw) for s in listed]
    return out, many


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
) -> Bound | list[Bound]:
    """The communication-aware roofline of `problem` (a suite name or a problem file) on `topology` (a preset name,
    a topology file, or a Topology; default: the CLI's), with every (mechanism, schedule) prediction. A sequence of
    sizes gives a list, one Bound per size."""
    found, many = _analyses(
        problem, topology=topology, size=size, shape=shape, params=params, world_size=world_size, nodes=nodes,
        dtype=dtype,
    )  # fmt: skip
    out = [_build(Bound, pa.analysis.to_dict()) for pa in found]
    return out if many else out[0]


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
) -> Recommendation | list[Recommendation | None] | None:
    """`bound(...)`'s recommendation: the pair to build, its headroom over NCCL and why (None where there is nothing
    to communicate, on one GPU). A sequence of sizes gives a list."""
    found = bound(
        problem, topology=topology, size=size, shape=shape, params=params, world_size=world_size, nodes=nodes,
        dtype=dtype,
    )  # fmt: skip
    return [b.recommendation for b in found] if isinstance(found, list) else found.recommendation


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
    call wrote, each with the model's fields computed as profilers/evaluate.py computes them when records are read
    (t_roof_s, fraction_of_roofline, algbw_Bps, busbw_Bps, predicted_s, ...). `log` gets each line `pkroof
    profile` prints (default: nothing). Called in a process torchrun or srun started, it is that rank of the launched
    job (`nodes`: the job's node count, to bound on that many of the topology's nodes); ranks other than 0 return []."""
    from pkroof.profilers.evaluate import evaluate
    from pkroof.profilers.profile import profile as run_profile
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
    (pkroof.runs.analyze.TraceResult) whose `kernels`, `collectives`, `steps` and `opportunities` are pandas
    DataFrames with the columns of `pkroof trace --json` (docs/trace.md), and its topology, the reason it was chosen,
    ranks, notes and unsized counts. `topology`: a preset or topology file (default: matched from the traces).
    `progress(files_read, files, path)` after each file. Bad input is a ValueError of one line."""
    from pkroof.runs import analyze_traces

    return analyze_traces(paths, topology=topology, progress=progress)
