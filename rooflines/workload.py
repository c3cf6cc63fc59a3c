"""What a problem must do on each rank, not how: FLOPs by dtype, minimal HBM bytes, communication ops."""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field

from .collectives import REDUCTIONS, Collective

# bytes per element of each dtype pkroof models; tf32 is stored as fp32
DTYPE_BYTES = {"fp8": 1, "bf16": 2, "fp16": 2, "tf32": 4, "fp32": 4}


@dataclass(frozen=True)
class ComputeOp:
    name: str
    flops: float  # per rank
    dtype: str  # selects the peak FLOP/s: "bf16", "fp8", ...
    hbm_bytes: float  # bytes this op moves through HBM when it runs on its own (unfused)
    num_tiles: int = 1  # independent output tiles: the finest granularity communication can follow
    tile_flops: float = 0.0  # FLOPs of one whole tile as a tiled kernel computes it (edge tiles padded); 0: untiled


@dataclass(frozen=True)
class CommOp:
    name: str
    kind: Collective
    size_bytes: float  # nccl-tests' convention (see collectives.py)
    group_size: int
    producer: str | None = None  # compute op whose output this op sends, tile by tile
    consumer: str | None = None  # compute op that consumes what this op delivers
    consumer_reads: int = 1  # times the consumer reads each delivered byte if it fetches straight from peers

    @property
    def reduction(self) -> bool:
        return self.kind in REDUCTIONS


@dataclass(frozen=True)
class Workload:
    name: str
    compute: tuple[ComputeOp, ...] = ()
    comm: tuple[CommOp, ...] = ()
    hbm_bytes: float = 0.0  # minimal per rank: inputs read once, outputs written once
    dtype: str = "bf16"  # element type of the data it moves
    params: dict[str, float] = field(default_factory=dict)  # the shape it was built from
    compute_scales_with: str | None = None  # a param that compute time is proportional to and comm is not

    def __post_init__(self) -> None:
        names = {op.name for op in self.compute}
        for op in self.comm:
            for ref in (op.producer, op.consumer):
                if ref is not None and ref not in names:
                    raise ValueError(f"comm op {op.name!r} refers to unknown compute op {ref!r}")
        if self.compute_scales_with is not None and self.compute_scales_with not in self.params:
            raise ValueError(f"compute_scales_with={self.compute_scales_with!r} is not a param")

    @property
    def flops_by_dtype(self) -> dict[str, float]:
        out: dict[str, float] = defaultdict(float)
        for op in self.compute:
            out[op.dtype] += op.flops
        return dict(out)

    @property
    def sole_collective(self) -> CommOp | None:
        """The workload's one collective where it is nothing else (no compute): what nccl-tests times, so its
        algbw and busbw apply (rooflines/export.py: bandwidths)."""
        return self.comm[0] if len(self.comm) == 1 and not self.compute else None

    @property
    def overlappable(self) -> bool:
        """Every comm op feeds or is fed by a compute op, so the two can be pipelined."""
        return bool(self.compute) and bool(self.comm) and all(op.producer or op.consumer for op in self.comm)


# A Workload as plain JSON data: what a record stores where the workload was traced (it cannot be rebuilt without
# torch, or without running the file) — the problem's description, not the model's output.
_OP_FIELDS = {"name": str, "flops": float, "dtype": str, "hbm_bytes": float, "num_tiles": int, "tile_flops": float}
_COMM_FIELDS = {
    "name": str,
    "kind": str,
    "size_bytes": float,
    "group_size": int,
    "producer": (str, type(None)),
    "consumer": (str, type(None)),
    "consumer_reads": int,
}


def workload_to_dict(w: Workload) -> dict:
    return {
        "name": w.name,
        "compute": [{k: getattr(op, k) for k in _OP_FIELDS} for op in w.compute],
        "comm": [{k: getattr(op, k).value if k == "kind" else getattr(op, k) for k in _COMM_FIELDS} for op in w.comm],
        "hbm_bytes": w.hbm_bytes,
        "dtype": w.dtype,
        "params": dict(w.params),
        "compute_scales_with": w.compute_scales_with,
    }


def _field(data: dict, key: str, kind: type | tuple, where: str) -> object:
    if key not in data:
        raise ValueError(f"{where}.{key}: missing")
    value = data[key]
    if kind in (float, int):
        ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value >= 0
        if not ok or (kind is int and value != int(value)):
            raise ValueError(f"{where}.{key}: expected a finite number ≥ 0, got {value!r}")
        return kind(value)
    if not isinstance(value, kind):
        raise ValueError(f"{where}.{key}: expected {getattr(kind, '__name__', 'a string or null')}, got {value!r}")
    return value


def _fields(data: object, fields: dict, where: str) -> dict:
    if not isinstance(data, dict):
        raise ValueError(f"{where}: expected an object")
    unknown = set(data) - set(fields)
    if unknown:
        raise ValueError(f"{where}: unknown key {', '.join(sorted(unknown))}")
    return {k: _field(data, k, kind, where) for k, kind in fields.items()}


def workload_from_dict(data: object, where: str = "workload") -> Workload:
    """The Workload of workload_to_dict's data, strictly: a ValueError naming the first bad field."""
    top = {"name": str, "compute": list, "comm": list, "hbm_bytes": float, "dtype": str, "params": dict}
    top["compute_scales_with"] = (str, type(None))
    d = _fields(data, top, where)
    if d["dtype"] not in DTYPE_BYTES:
        raise ValueError(f"{where}.dtype: unknown dtype {d['dtype']!r}")
    compute = []
    for i, op in enumerate(d["compute"]):
        f = _fields(op, _OP_FIELDS, f"{where}.compute[{i}]")
        if f["dtype"] not in DTYPE_BYTES:
            raise ValueError(f"{where}.compute[{i}].dtype: unknown dtype {f['dtype']!r}")
        compute.append(ComputeOp(**f))
    comm = []
    for i, op in enumerate(d["comm"]):
        f = _fields(op, _COMM_FIELDS, f"{where}.comm[{i}]")
        try:
            f["kind"] = Collective(f["kind"])
        except ValueError:
            raise ValueError(f"{where}.comm[{i}].kind: unknown collective {f['kind']!r}") from None
        if f["group_size"] < 1:
            raise ValueError(f"{where}.comm[{i}].group_size: must be at least 1")
        comm.append(CommOp(**f))
    params = {k: _field(d["params"], k, float, f"{where}.params") for k in d["params"]}
    return Workload(
        d["name"], tuple(compute), tuple(comm), d["hbm_bytes"], d["dtype"], params, d["compute_scales_with"]
    )
