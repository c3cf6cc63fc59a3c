"""Measure a topology's fixed costs from profiled kernels: what a staged collective, and a fused kernel, pay per call
beyond the model.

The probe measures transfers (α, bandwidths, a flag's latency), not the hand-off a collective staged through
symmetric memory needs around them: the stage's and the consume's dependent accesses, the release behind the
data, bookkeeping, stream hops. Kernels that do all of that show it as a fixed excess over the model at small
sizes. For each (mechanism, protocol): the median of (measured − predicted without any hand-off) over the
correct records of that mechanism's serial implementations of that protocol at or below `max_bytes` (NCCL
never: its α is measured whole). LL kernels (flags inside the data, no release) get a hand-off of their own.

A fused kernel (GEMM + collective under an overlapped schedule) pays fixed costs of its own on top: its GEMM's
launch, the compute → communication hand-off (a band counter, epilogue flags, the copy engine's stream events).
Per (mechanism, overlapped schedule): the median of (measured − predicted with the hand-offs just found but no
such cost) over its correct records at or below `max_bytes`, i.e. at shapes small enough that fixed costs are
most of the time.
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any

from pkroof.analysis.problem import predict_declared, workload_of
from pkroof.records import format as rec
from pkroof.records.evaluate import record_workload
from pkroof.rooflines import Mechanism, Protocol, Schedule, Workload
from pkroof.rooflines.mechanisms import label
from pkroof.topology import Topology

MIN_RECORDS = 2  # fewer is an anecdote, not a measurement


@dataclass(frozen=True)
class Handoff:
    mechanism: str
    seconds: float
    excesses_s: tuple[float, ...]  # one per record used, measured − predicted without a hand-off
    schedule: str = Schedule.SERIAL.value  # serial: a collective's hand-off; else a fused kernel's fixed cost
    protocol: str = Protocol.SIMPLE.value  # ll: the hand-off of LL collectives (ll_handoff_s)

    @property
    def label(self) -> str:
        return label(self.mechanism, self.protocol)


def _without(topology: Topology, empty: dict[str, Any]) -> Topology:
    """The topology with these fields of every mechanism set to their empty values (and their sources dropped)."""
    mechanisms = {
        name: dataclasses.replace(spec, **empty, sources={k: v for k, v in spec.sources.items() if k not in empty})
        for name, spec in topology.mechanisms.items()
    }
    return dataclasses.replace(topology, mechanisms=mechanisms)


def _usable(r: dict[str, Any], *, fused: bool) -> bool:
    return (
        r.get("status") == "correct"
        and r.get("mechanism") not in (None, Mechanism.NCCL.value)
        and r.get("schedule") is not None
        and (r["schedule"] != Schedule.SERIAL.value) == fused
        and bool(r.get("median_s"))
        and r.get("protocol", Protocol.SIMPLE.value) in {p.value for p in Protocol}
    )


def _workload(r: dict[str, Any]) -> Workload | None:
    """The record's workload (stored, or its suite problem's); None where neither can give it."""
    try:
        problem, workload = record_workload(r)
        return workload or workload_of(problem, r["world_size"], r["params"], dtype=r.get("dtype"))
    except ValueError:
        return None


def _excesses(
    records: Iterable[dict[str, Any]], bare: Topology, max_bytes: int, *, fused: bool
) -> list[tuple[dict[str, Any], float]]:
    """(record, measured − predicted by `bare`) for each usable record the model has a prediction for."""
    out = []
    for r in records:
        w = _workload(r) if _usable(r, fused=fused) else None
        if w is None or not 0 < sum(op.size_bytes for op in w.comm) <= max_bytes:
            continue
        system = bare.system(r["world_size"])
        p = predict_declared(w, system, r, r.get("comm_sms"))
        if p is not None:
            out.append((r, r["median_s"] - p.t_s))
    return out


def _median_excesses(
    records: Iterable[dict[str, Any]], bare: Topology, max_bytes: int, *, fused: bool
) -> list[Handoff]:
    """Per (mechanism, schedule) with at least MIN_RECORDS usable records: the median of measured − predicted by
    `bare` (never below 0)."""
    excess: dict[tuple[str, str, str], list[float]] = {}
    for r, seconds in _excesses(records, bare, max_bytes, fused=fused):
        key = (r["mechanism"], r["schedule"], r.get("protocol", Protocol.SIMPLE.value))
        excess.setdefault(key, []).append(seconds)
    return [
        Handoff(mech, max(0.0, statistics.median(xs)), tuple(xs), schedule, protocol)
        for (mech, schedule, protocol), xs in sorted(excess.items())
        if len(xs) >= MIN_RECORDS
    ]


def handoffs(records: Iterable[dict[str, Any]], topology: Topology, max_bytes: int) -> list[Handoff]:
    """Per (mechanism, protocol) with at least MIN_RECORDS usable serial records: the median excess over the model
    without hand-offs (≥ 0)."""
    bare = _without(topology, {"handoff_s": 0.0, "ll_handoff_s": None})
    return _median_excesses(records, bare, max_bytes, fused=False)


def fused_excesses(
    records: Iterable[dict[str, Any]], topology: Topology, max_bytes: int
) -> list[tuple[dict[str, Any], float]]:
    """Each usable fused record with its excess over `topology`'s model without fused kernels' fixed costs: what
    overlaps() takes the median of, per record (benchmarks/model/fused_excess.py shows their spread over shapes)."""
    return _excesses(records, _without(topology, {"overlap_s": {}}), max_bytes, fused=True)


def overlaps(records: Iterable[dict[str, Any]], topology: Topology, max_bytes: int) -> list[Handoff]:
    """Per (mechanism, overlapped schedule) with at least MIN_RECORDS usable fused records: the median excess over
    `topology`'s model (its hand-offs included) without fused kernels' fixed costs (≥ 0)."""
    return _median_excesses(records, _without(topology, {"overlap_s": {}}), max_bytes, fused=True)


def with_handoffs(topology: Topology, found: list[Handoff], source: str, cite: str) -> Topology:
    """The topology with these hand-offs and fused kernels' fixed costs set (others untouched), each citing
    `source`; sources no number uses any more are dropped."""
    from pkroof.topology.model import Source

    mechanisms = dict(topology.mechanisms)
    for h in found:
        spec = mechanisms[h.mechanism]
        if not spec.available:
            continue
        if h.schedule == Schedule.SERIAL.value:
            field = "ll_handoff_s" if h.protocol == Protocol.LL.value else "handoff_s"
            spec = dataclasses.replace(spec, **{field: h.seconds}, sources=spec.sources | {field: source})
        else:
            overlap = spec.overlap_s | {h.schedule: h.seconds}
            spec = dataclasses.replace(spec, overlap_s=overlap, sources=spec.sources | {"overlap_s": source})
        mechanisms[h.mechanism] = spec
    records = (topology.gpu, topology.scaleup, topology.nic, *mechanisms.values())
    records += tuple(m.tuning for m in mechanisms.values() if m.tuning is not None)  # NCCL's cited tuning
    used = {s for r in records if r is not None for s in r.sources.values()}
    every = topology.sources | {source: Source("measured", cite)}
    return dataclasses.replace(topology, mechanisms=mechanisms, sources={k: v for k, v in every.items() if k in used})


def check_measured_on(records: Iterable[dict[str, Any]], topology: Topology, path: Path) -> None:
    """ValueError, in one line, where a record says it was measured on another topology than `topology` (its
    environment's "topology", the name `pkroof profile --topology` ran with): another node's excesses are not
    this node's fixed costs. Records that name none are taken as this node's."""
    measured_on = {rec.topology_name(r) for r in records}
    others = sorted(measured_on - {None, topology.name}, key=str)
    if others:
        raise ValueError(
            f"{path} is topology {topology.name!r} but records were measured on {', '.join(map(repr, others))}; "
            "calibrate with that node's records (pkroof profile --topology FILE), or pass --force"
        )


def calibrate(
    path: Path,
    results: list[Path],
    max_bytes: int,
    max_label: str,
    out: Path,
    log: Callable[[str], None],
    *,
    force: bool = False,
) -> list[Handoff]:
    """Read the topology file and the result files (unreadable lines reported, skipped), set the hand-offs found,
    write the topology to `out`. ValueError when a record was measured on another topology (unless `force`), or
    when no mechanism has enough records."""
    from pkroof.topology import dump
    from pkroof.topology import load as load_topology

    topology = load_topology(path)
    found_records = rec.read_files(results, log)
    if not force:
        check_measured_on(found_records, topology, path)
    found = handoffs(found_records, topology, max_bytes)
    names = " ".join(str(r) for r in results)
    cite = f"pkroof topology calibrate {path} {names} --max-size {max_label}, {date.today().isoformat()}"
    # fused kernels' fixed costs are what remains beyond the model with the hand-offs just found
    fused = overlaps(found_records, with_handoffs(topology, found, "calibrate", cite), max_bytes)
    if not found and not fused:
        raise ValueError(
            f"no mechanism has {MIN_RECORDS} correct serial records, nor a fused pair {MIN_RECORDS} records, of "
            f"at most {max_label} among the {len(found_records)} records read"
        )
    dump(with_handoffs(topology, found + fused, _source_name(topology, cite), cite), out)
    return found + fused


def _source_name(topology: Topology, cite: str) -> str:
    """The source key of this run: "calibrate", or "calibrate-2", "-3"... while an earlier run's source still backs
    numbers this run leaves alone (its hand-offs, say, when this run only sets fused costs): each number keeps the
    command it came from."""
    name, n = "calibrate", 1
    while name in topology.sources and topology.sources[name].cite != cite:
        n += 1
        name = f"calibrate-{n}"
    return name
