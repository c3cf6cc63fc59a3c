"""A problem's analysis: from a problem (suite name, file, or a record's stored workload), a topology, a shape, a
world size and a dtype to its Workload, Bound, every prediction, Advice and the roof swept over sizes or shapes.

`pkroof bound`, `advise`, `profile`'s table and `report` all call `analyze`. The workload comes from the problem's
hand-written `workload()` where it has one (torch-free), else from tracing its reference (torch: on meta tensors,
or on CPU ranks where it needs values); a sweep only ever traces on meta tensors.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.util
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pkroof.analysis.catalogue import Problem, ProblemError, check_workload, guarded
from pkroof.analysis.catalogue import load as load_problem
from pkroof.rooflines import (
    DTYPE_BYTES,
    Advice,
    Algorithm,
    Bound,
    Mechanism,
    Prediction,
    Protocol,
    Schedule,
    System,
    Workload,
    predict,
)
from pkroof.rooflines.analyze import SWEEP_SIZES, Analysis, whole_size
from pkroof.rooflines.analyze import analyze as analyze_workload
from pkroof.rooflines.bound import check_fits
from pkroof.topology import Topology, resolve


class NeedsDataError(ValueError):
    """The reference's control flow needs values (MoE splits, `.item()`), and the caller allowed no CPU ranks."""


def has_torch() -> bool:
    """Whether torch can be imported here (without importing it)."""
    try:
        return importlib.util.find_spec("torch") is not None
    except (ImportError, ValueError):
        return False


def _check_dtype(dtype: str | None) -> None:
    if dtype is not None and dtype not in DTYPE_BYTES:
        raise ValueError(f"unknown dtype {dtype!r} (one of: {', '.join(DTYPE_BYTES)})")


def _hand_written(problem: Problem, world_size: int, params: dict[str, Any], dtype: str | None) -> Workload:
    w = guarded(problem, "workload", lambda: problem.workload(world_size, params, dtype))
    if not isinstance(w, Workload):
        raise ProblemError(f"{problem.path}: workload() returned {type(w).__name__}, not a pkroof.rooflines.Workload")
    check_workload(w, f"{problem.path}: workload()")
    return w if problem.suite else _named(problem, w)  # a user's file: named by its file, as a traced one is


# how to get torch: the plain `pip install torch` brings a CUDA build of several GB, even on a machine without a GPU
INSTALL_TORCH = (
    "pip install torch (on a machine without a GPU, the small CPU build: "
    "pip install torch --index-url https://download.pytorch.org/whl/cpu)"
)


def _torch_missing(problem: Problem) -> ValueError:
    return ValueError(
        f"{problem.name}: it has no hand-written workload(), so its reference is traced, which needs torch: "
        + INSTALL_TORCH
    )


def uses_hand_written(problem: Problem, dtype: str | None) -> bool:
    """Whether the problem's workload is its hand-written workload() (one that takes `dtype` where one is asked)."""
    return problem.has_workload and (dtype is None or problem.workload_takes_dtype)


def cached_workload(
    problem: Problem, world_size: int, params: dict[str, Any], *, dtype: str | None = None, cpu_ranks: bool = True
) -> Workload | None:
    """The traced workload from what is at hand, running nothing of the problem's: the trace cache's entry (without
    torch: the trace shipped with pkroof); None where there is none, or where its hand-written workload() is used."""
    from . import trace_cache

    _check_dtype(dtype)
    if uses_hand_written(problem, dtype):
        return None
    if not has_torch():  # the suite's traces ship with the package, in their own dtype
        found = trace_cache.shipped(trace_cache.key(problem, world_size, params, None, "meta", any_torch=True))
        return _named(problem, found) if found is not None and dtype in (None, found.dtype) else None
    # traced before, same file bytes, shape, ranks, dtype, torch and tracer: no torch import. The entry is keyed by
    # the file's bytes, so a copy of the file finds it too: named after the file asked for.
    found = trace_cache.get(trace_cache.key(problem, world_size, params, dtype, "trace" if cpu_ranks else "meta"))
    return None if found is None else _named(problem, found)


def _named(problem: Problem, workload: Workload) -> Workload:
    """The workload named after `problem`, the file asked for (not a copy of it that was traced or written first)."""
    return workload if workload.name == problem.name else dataclasses.replace(workload, name=problem.name)


def workload_of(
    problem: Problem, world_size: int, params: dict[str, Any], *, dtype: str | None = None, cpu_ranks: bool = True
) -> Workload:
    """The problem's hand-written workload if it has one, else the one traced from its reference (from the trace
    cache where it was traced before); in `dtype` where given (a hand-written workload that takes `dtype` gets it,
    else the trace casts the inputs). `cpu_ranks` False: a reference that needs values is a NeedsDataError instead
    of a trace on CPU ranks. What the problem's own code prints goes to stderr: stdout is pkroof's (`bound --json`)."""
    _check_dtype(dtype)
    with contextlib.redirect_stdout(sys.stderr):
        if uses_hand_written(problem, dtype):
            return _hand_written(problem, world_size, params, dtype)
        found = cached_workload(problem, world_size, params, dtype=dtype, cpu_ranks=cpu_ranks)
        if found is not None:
            return found
        if not has_torch():  # the rest of tracing needs torch
            raise _torch_missing(problem)
        return _traced(problem, world_size, params, dtype, cpu_ranks)


def _traced(problem: Problem, world_size: int, params: dict[str, Any], dtype: str | None, cpu_ranks: bool) -> Workload:
    """The reference traced (on meta tensors, else on CPU ranks where `cpu_ranks`), stored in the trace cache."""
    from . import trace_cache
    from .trace import NEEDS_DATA, input_dtype, trace, trace_on_meta

    name = trace_cache.key(problem, world_size, params, dtype, "trace" if cpu_ranks else "meta")
    if dtype is not None and dtype == input_dtype(problem, world_size, params):
        dtype = None
    if problem.has_workload and dtype is None:
        return _hand_written(problem, world_size, params, None)
    try:
        if cpu_ranks:
            traced = trace(problem, world_size, params, dtype=dtype)
        else:
            traced = trace_on_meta(problem, world_size, params, dtype=dtype)
    except NEEDS_DATA as e:
        raise NeedsDataError(f"{problem.name}: its reference needs data to trace ({type(e).__name__})") from None
    trace_cache.put(name, traced)
    return traced


def shipped_workload(problem: Problem, world_size: int, params: dict[str, Any], dtype: str | None = None) -> Workload:
    """The problem's workload on `world_size` ranks from what ships with pkroof alone, running no problem's code but
    the suite's torch-free `workload()` and tracing nothing: a suite problem's hand-written workload, else the trace
    shipped for that shape and world size (trace_cache.SHIPPED_WORLDS). A ValueError of one line where there is
    neither: a user's file, a traced problem at a world size none ships for, a shape that does not divide."""
    from . import trace_cache

    if not problem.suite:
        raise ValueError(f"{problem.name} is a problem file: its workload is rebuilt only by running it")
    if problem.has_workload and (dtype is None or problem.workload_takes_dtype):
        return _hand_written(problem, world_size, params, dtype)
    found = trace_cache.shipped(trace_cache.key(problem, world_size, params, None, "meta", any_torch=True))
    if found is None or dtype not in (None, found.dtype):
        *most, last = trace_cache.SHIPPED_WORLDS
        worlds = f"{', '.join(map(str, most))} and {last}"
        raise ValueError(f"{problem.name} is traced from its reference, and its traces ship for {worlds} ranks only")
    return found


def sized(
    problem: Problem, world_size: int, params: dict[str, Any], dtype: str | None = None, **kw: Any
) -> tuple[dict[str, Any], Workload]:
    """workload_of, with a collective's `size_bytes` that does not split over `world_size` ranks rounded down to
    one that does (64 MiB over 72 ranks: 67107840 B); (the parameters used, the workload)."""
    try:
        return params, workload_of(problem, world_size, params, dtype=dtype, **kw)
    except ValueError:
        size = params.get("size_bytes")
        if not isinstance(size, int) or whole_size(size, world_size) in (size, 0):
            raise
        rounded = params | {"size_bytes": whole_size(size, world_size)}
        return rounded, workload_of(problem, world_size, rounded, dtype=dtype, **kw)


def sweep_params(problem: Problem, params: dict[str, Any]) -> list[dict[str, Any]]:
    """The points of the problem's sweep from `params`: along its size (collectives: SWEEP_SIZES), else across its
    named shapes."""
    if "size_bytes" in params:
        return [params | {"size_bytes": s} for s in SWEEP_SIZES]
    return [problem.params(name) for name in problem.shapes]


def _sweep(
    problem: Problem, params: dict[str, Any], world_size: int, dtype: str | None, run: bool
) -> list[Workload] | None:
    """The problem's sweep (sweep_params): what can be had cheaply, a hand-written workload or a trace on meta
    tensors, never CPU ranks. Not `run`: from the trace cache alone, None where a point would have to run the
    problem's code."""
    out = []
    for p in sweep_params(problem, params):
        if not run:
            found = cached_workload(problem, world_size, p, dtype=dtype, cpu_ranks=False)
            if found is None and has_torch():
                return None
            out += [found] if found is not None else []  # without torch no run could trace it either: skipped
            continue
        try:
            out.append(sized(problem, world_size, p, dtype, cpu_ranks=False)[1])
        except ValueError:  # a shape that does not divide by this world size, or one that needs data: off the chart
            continue
    return out


@dataclass(frozen=True)
class ProblemAnalysis:
    """`analysis` of `problem` (None: a record's stored workload whose file pkroof does not run) at `shape`."""

    problem: Problem | None
    shape: str  # the label results use ("small", "small size=64 MiB")
    params: dict[str, Any]  # the parameters the workload was built at
    topology: Topology
    analysis: Analysis
    about: dict[str, str] | None = None  # a user's file as its source describes it: summary, category, source

    @property
    def bound(self) -> Bound:
        return self.analysis.bound

    @property
    def advice(self) -> Advice:
        return self.analysis.advice


def _spread(world_size: int | None, nodes: int | None) -> int | None:
    """Ranks a node where `--nodes N` and `-n W` are both given: W spread evenly over the N nodes joined (8 ranks on
    2 nodes are 4 a node, not 8 on the first); None where either is not given (as few nodes as hold the ranks)."""
    if world_size is None or nodes is None or nodes <= 1:
        return None
    if world_size % nodes:
        raise ValueError(f"{world_size} ranks do not spread evenly over {nodes} nodes")
    return world_size // nodes


def analyze(
    problem: str | Problem | None,
    *,
    topology: str | Topology,
    shape: str | None = None,
    params: dict[str, Any] | None = None,
    world_size: int | None = None,
    nodes: int | None = None,
    ranks_per_node: int | None = None,
    dtype: str | None = None,
    workload: Workload | None = None,
    sweep: bool = False,
    cpu_ranks: bool = True,
    round_size: bool = False,
) -> ProblemAnalysis:
    """The analysis of `problem` at `shape` (default: its default shape) with `params` on top, on `world_size`
    ranks (default: every GPU of the topology) of `topology` (a preset name, a file, or a Topology), `ranks_per_node`
    of them a node (default: as few nodes as hold them).

    `workload`: use this one instead of building it (a record's stored workload; with `problem` None the sweep is
    that one point). `sweep`: also the roof over sizes or named shapes. `cpu_ranks` False: a reference that needs
    values to trace is a NeedsDataError rather than a trace on CPU ranks. `round_size`: a collective's size that
    does not split over the ranks is rounded down instead of refused (the analytic report's 72 ranks).
    Bad names, shapes, parameters and dtypes are a ValueError of one line."""
    kw = dict(shape=shape, params=params, world_size=world_size, nodes=nodes, ranks_per_node=ranks_per_node)
    found = _analyze(problem, topology, **kw, dtype=dtype, workload=workload, sweep=sweep, cpu_ranks=cpu_ranks,
                     round_size=round_size, run=True)  # fmt: skip
    assert found is not None, "an analysis that may run the problem's code always has a result"
    return found


def analyze_from_cache(problem: Problem, *, topology: str | Topology, **kw: Any) -> ProblemAnalysis | None:
    """analyze(problem, topology=..., **kw) from what is at hand, running nothing of the problem's code: None where
    it would have to run (its hand-written workload(), a trace the cache does not hold: at the point, or with
    `sweep` at any point of the sweep). Bad names, shapes and parameters are a ValueError, as for analyze()."""
    return _analyze(problem, topology, **kw, run=False)


def _analyze(
    problem: str | Problem | None,
    topology: str | Topology,
    *,
    shape: str | None = None,
    params: dict[str, Any] | None = None,
    world_size: int | None = None,
    nodes: int | None = None,
    ranks_per_node: int | None = None,
    dtype: str | None = None,
    workload: Workload | None = None,
    sweep: bool = False,
    cpu_ranks: bool = True,
    round_size: bool = False,
    run: bool,
) -> ProblemAnalysis | None:
    topo = topology if isinstance(topology, Topology) else resolve(topology, nodes=nodes)
    system = topo.system(world_size, ranks_per_node or _spread(world_size, nodes))
    world = system.world_size
    _check_dtype(dtype)
    overrides = dict(params or {})
    p = load_problem(problem) if isinstance(problem, str) else problem
    if p is None:
        assert workload is not None, "a problem or a workload"
        return ProblemAnalysis(None, shape or "", overrides, topo, analyze_workload(workload, system, sweep=[workload]))
    p.check_size(overrides)
    overrides = p.with_dtype(overrides, dtype)  # a parameter named dtype answers --dtype
    at = p.params(shape, overrides)
    label = p.shape_label(shape, overrides)
    if workload is None:
        if run and round_size:
            workload = sized(p, world, at, dtype, cpu_ranks=cpu_ranks)[1]
        elif run:
            workload = workload_of(p, world, at, dtype=dtype, cpu_ranks=cpu_ranks)
        else:
            workload = cached_workload(p, world, at, dtype=dtype, cpu_ranks=cpu_ranks)
            if workload is None and not uses_hand_written(p, dtype) and not has_torch():
                raise _torch_missing(p)  # no run could trace it either
            if workload is None:
                return None
        if round_size and "size_bytes" in at:  # the size used: rounded where it did not split
            at = at | {"size_bytes": int(workload.params.get("size", at["size_bytes"]))}
        check_fits(workload, topo.gpu.hbm_capacity_bytes, topo.gpu.name)
    others = _sweep(p, at, world, dtype, run) if sweep else []
    if others is None:
        return None
    return ProblemAnalysis(p, label, at, topo, analyze_workload(_own_params(workload, at), system, sweep=others))


def _own_params(workload: Workload, params: dict[str, Any]) -> Workload:
    """The workload carrying the problem's own parameters (the ones `--param` takes) where it was built from others
    (a hand-written GEMM's m, n, k; a collective's size for size_bytes): what a bound's header and JSON name."""
    own = {k: v for k, v in params.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
    if own == dict(workload.params) or workload.problem_params is not None:
        return workload
    return dataclasses.replace(workload, problem_params=own)


def predict_declared(w: Workload, system: System, pair: Mapping[str, Any], comm_sms: int | None) -> Prediction | None:
    """The model's prediction for a declared pair (or a record's: its "mechanism", "schedule", "protocol",
    "algorithm") at `comm_sms` communication SMs. Without "protocol": simple; without "algorithm": the cheapest.
    A name this pkroof does not know is a ValueError."""
    protocol = Protocol(pair.get("protocol") or Protocol.SIMPLE.value)
    algorithm = Algorithm(pair["algorithm"]) if pair.get("algorithm") else None
    mechanism, schedule = Mechanism(pair["mechanism"]), Schedule(pair["schedule"])
    return predict(w, system, mechanism, schedule, comm_sms, protocol, algorithm)
