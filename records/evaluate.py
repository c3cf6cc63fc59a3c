"""The model's view of measurement records, computed whenever records are read and never stored: each record's
communication size, roofline, fraction of it, link rate, speedup over the reference and its declared pair's
prediction, from its problem's workload on the topology it was measured on.

A record's workload comes from the record itself where it carries one (a traced problem), else from the catalogue:
a suite problem's hand-written workload, or its reference traced (torch). A file a record names is never imported:
a record of a user's problem file without a workload is reported in one line and skipped.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from pkroof.analysis.catalogue import Problem, is_suite_problem, load
from pkroof.analysis.problem import ProblemAnalysis, analyze, predict_declared
from pkroof.rooflines import Workload
from pkroof.rooflines.serialize import to_dict
from pkroof.rooflines.workload import workload_from_dict
from pkroof.topology import Topology

from . import format as rec


@dataclass(frozen=True)
class ModelView:
    """The model's view of one record, computed when it is read: what `pkroof profile` prints beside the
    measurement and the report shows. A field that does not apply (a failed run, CPU ranks, no declared pair) is
    None."""

    comm_bytes: float  # the workload's communication, nccl-tests' size convention
    t_roof_s: float
    fraction_of_roofline: float | None = None  # t_roof / median (GPU ranks only)
    achieved_link_Bps: float | None = None  # link bytes per rank / median
    algbw_Bps: float | None = None  # nccl-tests' algbw and busbw at the median, for one collective alone
    busbw_Bps: float | None = None
    speedup_vs_reference: float | None = None  # the reference's median / this one's, on the same backend
    predicted_s: float | None = None  # the declared pair's prediction
    prediction_error: float | None = None  # (median − predicted) / predicted


DERIVED = tuple(f.name for f in dataclasses.fields(ModelView))  # the keys it adds to a record


def _current(problem: Problem, record: dict[str, Any], stored: Workload | None) -> Workload | None:
    """A suite record's workload as this pkroof counts it, where the record measured the file as it is now (same
    bytes): its hand-written workload (None: the catalogue builds it) or the trace shipped for that shape and world
    size, in the record's dtype; the record's stored trace otherwise (an older file's, or a shape none ships)."""
    from pkroof.analysis import trace_cache

    if stored is None or record.get("problem_sha256") not in (None, problem.sha256):
        return stored
    if problem.has_workload and (record.get("dtype") in (None, stored.dtype) or problem.workload_takes_dtype):
        return None
    params, world = record.get("params") or {}, record.get("world_size")
    shipped = trace_cache.shipped(trace_cache.key(problem, world, params, None, "meta", any_torch=True))
    return shipped if shipped is not None and shipped.dtype == stored.dtype else stored


def record_workload(record: dict[str, Any]) -> tuple[Problem | None, Workload | None]:
    """(the suite problem, the workload to bound the record by: a suite problem's as this pkroof counts it where it
    can (_current), else the record's stored one): either may be None, not both; a ValueError of one line where the
    record's workload can be rebuilt neither from the catalogue nor from itself."""
    name = record["problem"]
    if isinstance(record.get("unbounded"), str) and record.get("workload") is None and not is_suite_problem(name):
        raise ValueError(f"it could not be bounded when it was profiled: {record['unbounded']}")
    stored = record.get("workload")
    workload = workload_from_dict(stored) if stored is not None else None
    if is_suite_problem(name):
        problem = load(name)
        return problem, _current(problem, record, workload)
    if workload is None:
        raise ValueError(
            f"{name} is a problem file; pkroof never runs a file named in a results file, and this record carries no "
            "workload to bound it by (profile it again with this pkroof)"
        )
    return None, workload


def on_gpus(record: dict[str, Any]) -> bool:
    env = record.get("environment")
    return isinstance(env, dict) and env.get("backend") == "nccl"


def _median(record: dict[str, Any]) -> float | None:
    m = record.get("median_s")
    ok = isinstance(m, (int, float)) and not isinstance(m, bool) and math.isfinite(m) and m > 0
    return float(m) if ok and record.get("status") == "correct" else None


def model_view(record: dict[str, Any], pa: ProblemAnalysis, reference_s: float | None) -> ModelView:
    """The model's view of `record`, bounded by `pa`; `reference_s`: its group's reference median (None: none)."""
    b = pa.bound
    median, gpu = _median(record), on_gpus(record)
    out: dict[str, Any] = {"comm_bytes": b.workload.comm_bytes, "t_roof_s": b.t_roof_s}
    if median is not None:
        out["fraction_of_roofline"] = b.t_roof_s / median if gpu else None
        out["achieved_link_Bps"] = b.link_bytes_per_rank / median if (gpu and b.link_bytes_per_rank) else None
        if gpu:  # nccl-tests' algbw and busbw, where the problem is one collective and nothing else
            out["algbw_Bps"], out["busbw_Bps"] = b.workload.bandwidths(median)
        out["speedup_vs_reference"] = reference_s / median if reference_s and record["impl"] != "reference" else None
    if record.get("mechanism") and record.get("schedule"):
        try:
            p = predict_declared(b.workload, b.system, record, record.get("comm_sms"))
        except ValueError:  # a pair this pkroof does not know (a newer record): no prediction
            p = None
        out["predicted_s"] = p.t_s if p else None
        if p and median is not None and gpu:
            out["prediction_error"] = (median - p.t_s) / p.t_s
    return ModelView(**out)


def derive(record: dict[str, Any], pa: ProblemAnalysis, reference_s: float | None) -> dict[str, Any]:
    """The record with its model view's fields (DERIVED) added, as rooflines/serialize.py writes them."""
    return dict(record) | to_dict(model_view(record, pa, reference_s))


Group = tuple[str, str, str, int, int]  # (problem, shape, params as JSON, world size, nodes)


def group_of(record: dict[str, Any]) -> Group:
    params = json.dumps(record["params"], sort_keys=True)
    return (record["problem"], record["shape"], params, record["world_size"], rec.placement(record)[0])


def placed(topology: Topology, nodes: int) -> Topology:
    """The topology a record of `nodes` nodes is bounded on: the topology itself where it holds them, else its node
    joined `nodes` times by its NICs (as `pkroof profile` did when launched on them with a one-node topology)."""
    return topology if topology.nodes >= nodes or topology.nodes > 1 else topology.with_nodes(nodes)


@dataclass
class Evaluation:
    # the records kept (the latest of each), each with DERIVED added where its group could be bounded
    records: list[dict[str, Any]] = field(default_factory=list)
    analyses: dict[Group, ProblemAnalysis] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)  # one line per group left out, and why
    superseded: int = 0  # records measured again later: only the latest of each is kept


def latest(records: Iterable[dict[str, Any]]) -> tuple[list[dict[str, Any]], int]:
    """One record per (problem, shape, params, implementation, world size): the latest (by date, then by order
    read); and how many earlier ones were dropped."""
    kept: dict[tuple, dict[str, Any]] = {}
    dropped = 0
    for r in records:
        k = rec.key(r)
        if k in kept:
            dropped += 1
            if str(r.get("date", "")) < str(kept[k].get("date", "")):
                continue
        kept[k] = r
    return list(kept.values()), dropped


def evaluate(
    records: Iterable[dict[str, Any]], topology: Topology, *, sweep: bool = False, log: Callable[[str], None] = print
) -> Evaluation:
    """Every record's model fields on `topology`, one analysis per (problem, shape, params, world size); a group
    whose workload cannot be rebuilt, or that the topology cannot hold, is one line in `skipped` (and `log`)."""
    kept, dropped = latest(records)
    if dropped:
        log(f"{dropped} record{'s' * (dropped > 1)} measured again later: the latest of each is the one shown")
    out = Evaluation(superseded=dropped)
    groups: dict[Group, list[dict[str, Any]]] = {}
    for r in kept:
        groups.setdefault(group_of(r), []).append(r)
    references: dict[Group, dict[str, Any] | None] = {}
    for g, members in groups.items():
        problem, shape, _, world, nodes = g
        first = members[0]
        try:
            p, w = record_workload(first)
            pa = analyze(
                p,
                topology=placed(topology, nodes),
                shape=shape if p is None else None,
                params=first["params"],
                world_size=world,
                ranks_per_node=rec.placement(first)[1] if "ranks_per_node" in first else None,
                dtype=first.get("dtype"),
                workload=w,
                sweep=sweep,
            )
        except (ValueError, RecursionError) as e:
            line = f"{problem} at {shape} on {world} ranks: no bound on {topology.name} ({str(e)[:300]})"
            out.skipped.append(line)
            log(line)
            continue
        out.analyses[g] = pa
        references[g] = next((r for r in members if r["impl"] == "reference"), None)

    def reference_s(r: dict[str, Any], g: Group) -> float | None:
        """The group's reference time, where it ran on the same backend (a CPU time is no yardstick for a GPU's)."""
        ref = references[g]
        return _median(ref) if ref is not None and on_gpus(ref) == on_gpus(r) else None

    out.records = [
        derive(r, out.analyses[g], reference_s(r, g)) if (g := group_of(r)) in out.analyses else r for r in kept
    ]
    return out
