"""Measure a topology's hand-off costs from profiled kernels: what a staged collective pays per call beyond the model.

The probe measures transfers (α, bandwidths, a flag's latency), not the hand-off a collective staged through
symmetric memory needs around them: the stage's and the consume's dependent accesses, the release behind the
data, bookkeeping, stream hops. Kernels that do all of that show it as a fixed excess over the model at small
sizes. For each mechanism: the median of (measured − predicted without any hand-off) over the correct records
of that mechanism's serial implementations at or below `max_bytes` (NCCL never: its α is measured whole).
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any

from pkroof.rooflines import Mechanism, Schedule, predict
from pkroof.topology import Topology

from .problems import load
from .profile import workload_of

MIN_RECORDS = 2  # fewer is an anecdote, not a measurement


@dataclass(frozen=True)
class Handoff:
    mechanism: str
    seconds: float
    excesses_s: tuple[float, ...]  # one per record used, measured − predicted without a hand-off


def _without_handoffs(topology: Topology) -> Topology:
    mechanisms = {
        name: dataclasses.replace(
            spec, handoff_s=0.0, sources={k: v for k, v in spec.sources.items() if k != "handoff_s"}
        )
        for name, spec in topology.mechanisms.items()
    }
    return dataclasses.replace(topology, mechanisms=mechanisms)


def _usable(r: dict[str, Any], max_bytes: int) -> bool:
    return (
        r.get("status") == "correct"
        and r.get("mechanism") not in (None, Mechanism.NCCL.value)
        and r.get("schedule") == Schedule.SERIAL.value
        and bool(r.get("median_s"))
        and 0 < r.get("comm_bytes", 0) <= max_bytes
    )


def handoffs(records: Iterable[dict[str, Any]], topology: Topology, max_bytes: int) -> list[Handoff]:
    """Per mechanism with at least MIN_RECORDS usable records: the median excess over the model (≥ 0)."""
    bare = _without_handoffs(topology)
    excess: dict[str, list[float]] = {}
    for r in records:
        if not _usable(r, max_bytes):
            continue
        system = bare.system(r["world_size"])
        w = workload_of(load(r["problem"]), r["world_size"], r["params"])
        p = predict(w, system, Mechanism(r["mechanism"]), Schedule.SERIAL, r.get("comm_sms"))
        if p is not None:
            excess.setdefault(r["mechanism"], []).append(r["median_s"] - p.t_s)
    return [
        Handoff(mech, max(0.0, statistics.median(xs)), tuple(xs))
        for mech, xs in sorted(excess.items())
        if len(xs) >= MIN_RECORDS
    ]


def with_handoffs(topology: Topology, found: list[Handoff], source: str, cite: str) -> Topology:
    """The topology with these hand-offs set (others untouched), each citing `source`; sources no number uses
    any more are dropped."""
    from pkroof.topology.model import Source

    mechanisms = dict(topology.mechanisms)
    for h in found:
        spec = mechanisms[h.mechanism]
        if spec.available:
            sources = spec.sources | {"handoff_s": source}
            mechanisms[h.mechanism] = dataclasses.replace(spec, handoff_s=h.seconds, sources=sources)
    records = (topology.gpu, topology.scaleup, topology.nic, *mechanisms.values())
    used = {s for r in records if r is not None for s in r.sources.values()}
    every = topology.sources | {source: Source("measured", cite)}
    return dataclasses.replace(topology, mechanisms=mechanisms, sources={k: v for k, v in every.items() if k in used})


def calibrate(
    path: Path, results: list[Path], max_bytes: int, max_label: str, out: Path, log: Callable[[str], None]
) -> list[Handoff]:
    """Read the topology file and the result files (unreadable lines reported, skipped), set the hand-offs found,
    write the topology to `out`. ValueError when no mechanism has enough records."""
    from pkroof.topology import dump
    from pkroof.topology import load as load_topology

    from . import records as rec

    topology = load_topology(path)
    found_records = rec.read_files(results, log)
    found = handoffs(found_records, topology, max_bytes)
    if not found:
        raise ValueError(
            f"no mechanism has {MIN_RECORDS} correct serial records of at most {max_label} "
            f"among the {len(found_records)} records read"
        )
    names = " ".join(str(r) for r in results)
    cite = f"pkroof topology calibrate {path} {names} --max-size {max_label}, {date.today().isoformat()}"
    dump(with_handoffs(topology, found, "calibrate", cite), out)
    return found
