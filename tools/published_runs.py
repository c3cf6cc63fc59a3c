"""Published measurements of the presets' machines, and the model run on each: is any faster than the roof, and how
far is the NCCL baseline (or the GEMM prediction) from what was measured.

A table row (tests/data/published/measurements.csv; its README gives every column) says what was measured (a
collective, a GEMM, a collective after a GEMM, an HBM or peer copy rate), on which preset, world size and nodes,
how it was run (nccl-tests or PyTorch, calls queued or each one waited on, NCCL_ALGO forced, buffers registered)
and what it took. `check` evaluates one: the roof for the same work, and the prediction the row's implementation
stands for (NCCL's default, pinned to the algorithm the row forced; cuBLAS alone; cuBLAS then NCCL), or none for a
custom kernel, which only the roof checks.
"""

from __future__ import annotations

import csv
import dataclasses
from dataclasses import dataclass
from pathlib import Path

from pkroof.rooflines import Collective, Mechanism, Schedule, bound
from pkroof.rooflines.builders import all_gather_gemm, collective, gemm
from pkroof.rooflines.nccl import NcclRun
from pkroof.rooflines.system import System
from pkroof.rooflines.workload import DTYPE_BYTES, Workload
from pkroof.topology.presets import PRESETS, preset

KINDS = ("nccl", "custom", "gemm", "fused", "hbm", "copy", "statement")
LAUNCHES = ("queued", "waited", "graph", "unknown", "")
CHECKS = ("nccl", "custom", "gemm", "fused")  # the kinds whose time the model runs on
COLUMNS = ("id", "use", "split", "preset", "nodes", "world_size", "kind", "op", "size_bytes", "dtype", "m", "n", "k")
COLUMNS += ("impl", "launch", "nccl_algo", "registered", "time_us", "rate_GBps", "machine_matches", "suspect")
WHOLE_BYTES = 16  # a collective's size is cut to whole chunks of elements on every rank (72 ranks: 2^k does not split)


@dataclass(frozen=True)
class Row:
    """One published figure: the columns `check` reads, and the rest of the row as it stands in the table."""

    id: str
    use: str  # "set" (a preset number comes from it) or "check" (the model is held to it)
    split: str  # check rows: "tune" (fitted the NCCL lines) or "holdout"
    preset: str
    nodes: int
    world_size: int
    kind: str
    op: str
    size_bytes: int
    dtype: str
    m: int
    n: int
    k: int
    impl: str
    launch: str
    nccl_algo: str  # NCCL_ALGO the run set ("" for NCCL's default)
    registered: bool
    time_s: float  # 0 where the row gives a rate instead
    rate_Bps: float  # hbm and copy rows
    machine_matches: str  # "yes ...", or why the machine is not the preset's (the roof still holds)
    suspect: str  # why the figure disagrees with its own source's other rows ("" where it does not)
    fields: dict[str, str]

    @property
    def same_machine(self) -> bool:
        return self.machine_matches.startswith("yes")

    @property
    def counted(self) -> bool:
        """Counted in the baseline's error statistics: the preset's own machine, a figure consistent with its source."""
        return self.same_machine and not self.suspect


def _int(value: str, name: str, where: str) -> int:
    try:
        return int(value) if value else 0
    except ValueError:
        raise ValueError(f"{where}: {name} {value!r} is not a whole number") from None


def _float(value: str, name: str, where: str) -> float:
    try:
        return float(value) if value else 0.0
    except ValueError:
        raise ValueError(f"{where}: {name} {value!r} is not a number") from None


def _row(fields: dict[str, str], where: str) -> Row:
    kind, use = fields["kind"], fields["use"]
    if use not in ("set", "check") or kind not in KINDS or fields["launch"] not in LAUNCHES:
        raise ValueError(f"{where}: use {use!r}, kind {kind!r} or launch {fields['launch']!r} is not one known")
    if fields["preset"] and fields["preset"] not in PRESETS:
        raise ValueError(f"{where}: unknown preset {fields['preset']!r}")
    dtype = fields["dtype"] or ("fp32" if kind in ("nccl", "custom") else "")
    if dtype and dtype not in DTYPE_BYTES:
        raise ValueError(f"{where}: unknown dtype {dtype!r}")
    return Row(
        id=fields["id"],
        use=use,
        split=fields["split"],
        preset=fields["preset"],
        nodes=_int(fields["nodes"], "nodes", where) or 1,
        world_size=_int(fields["world_size"], "world_size", where),
        kind=kind,
        op=fields["op"],
        size_bytes=_int(fields["size_bytes"], "size_bytes", where),
        dtype=dtype,
        m=_int(fields["m"], "m", where),
        n=_int(fields["n"], "n", where),
        k=_int(fields["k"], "k", where),
        impl=fields["impl"],
        launch=fields["launch"],
        nccl_algo=fields["nccl_algo"],
        registered=fields["registered"] == "yes",
        time_s=_float(fields["time_us"], "time_us", where) * 1e-6,
        rate_Bps=_float(fields["rate_GBps"], "rate_GBps", where) * 1e9,
        machine_matches=fields["machine_matches"],
        suspect=fields["suspect"],
        fields=dict(fields),
    )


def read(path: str | Path) -> list[Row]:
    """Every row of a published-measurements table; ValueError naming the row and column of a bad one."""
    path = Path(path)
    with path.open(newline="") as f:
        reader = csv.DictReader(f)
        missing = set(COLUMNS) - set(reader.fieldnames or ())
        if missing:
            raise ValueError(f"{path}: missing columns {', '.join(sorted(missing))}")
        return [_row(fields, f"{path}:{i + 2} ({fields.get('id', '?')})") for i, fields in enumerate(reader)]


@dataclass(frozen=True)
class Checked:
    """The model on one row: its roof, the prediction the row stands for (None for a custom kernel or a rate), and
    the pair that prediction assumes ("nvls/simple", "cublas", ...)."""

    row: Row
    t_roof_s: float  # for hbm and copy rows: the seconds the roof gives the measured bytes at its rate
    predicted_s: float | None
    assumes: str

    @property
    def measured_s(self) -> float:
        return self.row.time_s if self.row.time_s else 1.0  # rate rows: per unit of bytes at the measured rate

    @property
    def roof_ratio(self) -> float:
        """measured / roof: below 1 means the roof was beaten."""
        return self.measured_s / self.t_roof_s

    @property
    def error(self) -> float | None:
        """(measured − predicted) / predicted: positive where the machine was slower than the model says."""
        if self.predicted_s is None:
            return None
        return (self.row.time_s - self.predicted_s) / self.predicted_s


def _system(row: Row) -> System:
    topology = preset(row.preset)
    if row.nodes > 1:
        topology = topology.with_nodes(row.nodes)
    return topology.system(max(2, row.world_size))


def _nccl_run(system: System, row: Row) -> System:
    """The system with NCCL run as the row ran it: NCCL_ALGO (nvls-tree named for the tuner's own name), buffers
    registered for the symmetric kernels."""
    m = system.mechanisms[Mechanism.NCCL]
    algorithms = frozenset({row.nccl_algo}) if row.nccl_algo else None
    run = NcclRun(algorithms=algorithms, registered=row.registered)
    mechanisms = {**system.mechanisms, Mechanism.NCCL: dataclasses.replace(m, nccl_run=run)}
    return dataclasses.replace(system, mechanisms=mechanisms)


def _workload(row: Row) -> Workload:
    if row.op == "gemm":
        return gemm(row.m, row.n, row.k, row.dtype)
    if row.op == "all-gather-gemm":
        return all_gather_gemm(row.world_size, row.dtype, m=row.m, n=row.n, k=row.k)
    size = row.size_bytes - row.size_bytes % (WHOLE_BYTES * row.world_size)
    return collective(Collective(row.op), row.world_size, row.dtype, size=size)


def _rate_roof(row: Row, system: System) -> float:
    """Seconds per byte at the roof's rate for an HBM or a peer-copy row (their measured seconds per byte: 1 / rate)."""
    if row.kind == "hbm":
        return 1 / system.hbm_bandwidth_Bps * row.rate_Bps
    best = max(m.peak_bandwidth_Bps for m in system.available)
    return 1 / best * row.rate_Bps


def check(row: Row) -> Checked:
    """The roof and the matching prediction for one row with a preset."""
    assert row.preset, row.id
    system = _system(row)
    if row.kind in ("hbm", "copy"):
        return Checked(row, _rate_roof(row, system), None, "")
    system = _nccl_run(system, row)
    b = bound(_workload(row), system)
    if row.kind == "custom":
        return Checked(row, b.t_roof_s, None, "")
    p = b.prediction(Mechanism.NCCL, Schedule.SERIAL)
    assert p is not None, row.id
    if row.kind == "gemm":
        return Checked(row, b.t_roof_s, p.t_s, "cublas")
    t = p.t_eager_s if row.launch == "waited" and p.t_eager_s is not None else p.t_s
    if row.registered and p.t_symmetric_s is not None:
        t = p.t_symmetric_s
    pairs = ",".join(f"{a}/{q}" for a, q in zip(p.algorithms, p.protocols, strict=True))
    return Checked(row, b.t_roof_s, t, ("cublas+" if row.kind == "fused" else "") + pairs)


def checkable(rows: list[Row]) -> list[Row]:
    """The rows the model can run on: with a preset, and a time or a rate."""
    timed = [r for r in rows if r.preset and r.kind in CHECKS and r.time_s]
    return timed + [r for r in rows if r.preset and r.kind in ("hbm", "copy") and r.rate_Bps]
