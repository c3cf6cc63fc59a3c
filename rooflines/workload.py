"""What a problem must do on each rank, not how: FLOPs by dtype, minimal HBM bytes, communication ops and the data
flow between them.

A Workload is one rank's view. Where ranks differ (causal ring attention, uneven MoE routing, a pipeline's first and
last stage), `ranks` holds each distinct rank's view (RankView) and the bound charges every term at its busiest rank.
"""

from __future__ import annotations

import dataclasses
import math
from collections import defaultdict
from dataclasses import dataclass, field
from typing import ClassVar

from .collectives import REDUCTIONS, Collective, algorithm_bandwidth_Bps, bus_bandwidth_Bps

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
    # Where a rank's traffic is not what `kind` at `size_bytes` makes it (uneven splits of an all-to-all-v, unequal
    # all-gather lists, point-to-point batches), the bytes this rank sends to and receives from its peers; the op
    # is then direct (one step), whatever the algorithm. None: the collective's own traffic.
    send_bytes: float | None = None
    recv_bytes: float | None = None
    # The comm ops (by name) whose results this one's data depends on, through any compute: the latency term is
    # the longest such chain. None: after the op before it (a hand-written workload's ops run in order).
    after: tuple[str, ...] | None = None
    # what a bound's JSON shows of the op (rooflines/serialize.py): the busiest rank's bytes where they are its own
    json_fields: ClassVar[tuple[str, ...]] = (
        "name",
        "kind",
        "size_bytes",
        "group_size",
        "reduction",
        "producer",
        "consumer",
        "send_bytes",
        "recv_bytes",
        "after",
    )

    def __post_init__(self) -> None:
        if self.explicit:  # one direction given: the other carries nothing
            object.__setattr__(self, "send_bytes", self.send_bytes or 0.0)
            object.__setattr__(self, "recv_bytes", self.recv_bytes or 0.0)

    @property
    def reduction(self) -> bool:
        return self.kind in REDUCTIONS

    @property
    def explicit(self) -> bool:
        """Its per-rank bytes are given (send_bytes, recv_bytes) rather than derived from kind and size."""
        return self.send_bytes is not None or self.recv_bytes is not None


@dataclass(frozen=True)
class RankView:
    """What the ranks in `ranks` do where it differs from the other ranks: their compute, comm and HBM bytes."""

    ranks: tuple[int, ...]
    compute: tuple[ComputeOp, ...]
    comm: tuple[CommOp, ...]
    hbm_bytes: float


@dataclass(frozen=True)
class Workload:
    name: str
    compute: tuple[ComputeOp, ...] = ()
    comm: tuple[CommOp, ...] = ()
    hbm_bytes: float = 0.0  # minimal per rank: inputs read once, outputs written once
    dtype: str = "bf16"  # element type of the data it moves
    params: dict[str, float] = field(default_factory=dict)  # the shape it was built from
    compute_scales_with: str | None = None  # a param that compute time is proportional to and comm is not
    ranks: tuple[RankView, ...] = ()  # every distinct rank's view where ranks differ; empty: every rank is this one
    uncounted: tuple[str, ...] = ()  # ops that compute but that no FLOP formula prices (named, not silently 0)
    # ops besides its communication that compute at O(1) per element, without FLOPs the roof counts (a norm's, a
    # residual add, an embedding lookup): a workload with any is not a bare collective (sole_collective)
    other_ops: tuple[str, ...] = ()
    # the problem's own parameters, the ones `--param` takes, where `params` are another's (a hand-written workload
    # built as a GEMM of m, n, k for a problem of tokens and hidden); None: `params` are the problem's
    problem_params: dict[str, float] | None = None

    def __post_init__(self) -> None:
        names = {op.name for op in self.compute}
        for view in (self, *self.ranks):
            known = {op.name for op in view.comm}
            for op in view.comm:
                for ref in (op.producer, op.consumer):
                    if ref is not None and ref not in names | {c.name for c in view.compute}:
                        raise ValueError(f"comm op {op.name!r} refers to unknown compute op {ref!r}")
                for before in op.after or ():
                    if before not in known or before == op.name:
                        raise ValueError(f"comm op {op.name!r} comes after unknown comm op {before!r}")
        if self.compute_scales_with is not None and self.compute_scales_with not in self.params:
            raise ValueError(f"compute_scales_with={self.compute_scales_with!r} is not a param")

    def views(self) -> tuple[Workload, ...]:
        """One workload per distinct rank view (this one where every rank is alike), each with its ranks' view."""
        if not self.ranks:
            return (self,)
        return tuple(
            dataclasses.replace(self, compute=v.compute, comm=v.comm, hbm_bytes=v.hbm_bytes, ranks=())
            for v in self.ranks
        )

    def view_ranks(self) -> tuple[tuple[int, ...], ...]:
        """The ranks of each of views(), in the same order (() for a workload alike on every rank)."""
        return tuple(v.ranks for v in self.ranks) or ((),)

    @property
    def flops_by_dtype(self) -> dict[str, float]:
        out: dict[str, float] = defaultdict(float)
        for op in self.compute:
            out[op.dtype] += op.flops
        return dict(out)

    @property
    def sole_collective(self) -> CommOp | None:
        """The workload's one collective where it is nothing else (no compute): what nccl-tests times, so its
        algbw and busbw apply (bandwidths). A fused reduce-scatter + RMSNorm is not one: its norm is in other_ops."""
        return self.comm[0] if len(self.comm) == 1 and not self.compute and not self.other_ops else None

    @property
    def comm_bytes(self) -> float:
        """Its communication in nccl-tests' size convention, every op's summed (0 without any)."""
        return sum(op.size_bytes for op in self.comm)

    def bandwidths(self, t_s: float | None) -> tuple[float | None, float | None]:
        """nccl-tests' algbw (size / time) and busbw (algbw × its PERFORMANCE.md factor) at time `t_s`, where the
        workload is one collective and nothing else; (None, None) for anything else (a fused GEMM, several
        collectives) and for no time."""
        op = self.sole_collective
        if op is None or t_s is None or not t_s > 0:
            return None, None
        algbw = algorithm_bandwidth_Bps(op.size_bytes, t_s)
        return algbw, bus_bandwidth_Bps(op.kind, op.size_bytes, t_s, op.group_size)

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
_COMM_OPTIONAL = {"send_bytes": (float, None), "recv_bytes": (float, None), "after": (list, None)}
_NUMBER = (int, float)


def _comm_dict(op: CommOp) -> dict:
    out = {k: getattr(op, k).value if k == "kind" else getattr(op, k) for k in _COMM_FIELDS}
    for k in _COMM_OPTIONAL:
        value = getattr(op, k)
        if value is not None:
            out[k] = list(value) if k == "after" else value
    return out


def _view_dict(ranks: tuple[int, ...], compute: tuple[ComputeOp, ...], comm: tuple[CommOp, ...], hbm: float) -> dict:
    return {
        "ranks": list(ranks),
        "compute": [{k: getattr(op, k) for k in _OP_FIELDS} for op in compute],
        "comm": [_comm_dict(op) for op in comm],
        "hbm_bytes": hbm,
    }


def workload_to_dict(w: Workload) -> dict:
    out = {
        "name": w.name,
        "compute": [{k: getattr(op, k) for k in _OP_FIELDS} for op in w.compute],
        "comm": [_comm_dict(op) for op in w.comm],
        "hbm_bytes": w.hbm_bytes,
        "dtype": w.dtype,
        "params": dict(w.params),
        "compute_scales_with": w.compute_scales_with,
    }
    if w.ranks:
        out["ranks"] = [_view_dict(v.ranks, v.compute, v.comm, v.hbm_bytes) for v in w.ranks]
    if w.uncounted:
        out["uncounted"] = list(w.uncounted)
    if w.other_ops:
        out["other_ops"] = list(w.other_ops)
    if w.problem_params is not None:
        out["problem_params"] = dict(w.problem_params)
    return out


def _number(value: object, where: str, *, whole: bool = False) -> float:
    ok = isinstance(value, _NUMBER) and not isinstance(value, bool) and math.isfinite(value) and value >= 0
    if not ok or (whole and value != int(value)):
        raise ValueError(f"{where}: expected a finite number ≥ 0, got {value!r}")
    return int(value) if whole else float(value)


def _field(data: dict, key: str, kind: type | tuple, where: str) -> object:
    if key not in data:
        raise ValueError(f"{where}.{key}: missing")
    value = data[key]
    if kind in (float, int):
        return _number(value, f"{where}.{key}", whole=kind is int)
    if not isinstance(value, kind):
        raise ValueError(f"{where}.{key}: expected {getattr(kind, '__name__', 'a string or null')}, got {value!r}")
    return value


def _fields(data: object, fields: dict, where: str, optional: dict | None = None) -> dict:
    if not isinstance(data, dict):
        raise ValueError(f"{where}: expected an object")
    unknown = set(data) - set(fields) - set(optional or {})
    if unknown:
        raise ValueError(f"{where}: unknown key {', '.join(sorted(unknown))}")
    return {k: _field(data, k, kind, where) for k, kind in fields.items()}


def _strings(value: object, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(s, str) for s in value):
        raise ValueError(f"{where}: expected a list of strings")
    return tuple(value)


def _compute_ops(items: list, where: str) -> tuple[ComputeOp, ...]:
    out = []
    for i, op in enumerate(items):
        f = _fields(op, _OP_FIELDS, f"{where}[{i}]")
        if f["dtype"] not in DTYPE_BYTES:
            raise ValueError(f"{where}[{i}].dtype: unknown dtype {f['dtype']!r}")
        out.append(ComputeOp(**f))
    return tuple(out)


def _comm_ops(items: list, where: str) -> tuple[CommOp, ...]:
    out = []
    for i, op in enumerate(items):
        at = f"{where}[{i}]"
        f = _fields(op, _COMM_FIELDS, at, _COMM_OPTIONAL)
        try:
            f["kind"] = Collective(f["kind"])
        except ValueError:
            raise ValueError(f"{at}.kind: unknown collective {f['kind']!r}") from None
        if f["group_size"] < 1:
            raise ValueError(f"{at}.group_size: must be at least 1")
        for key in ("send_bytes", "recv_bytes"):
            if op.get(key) is not None:
                f[key] = _number(op[key], f"{at}.{key}")
        if op.get("after") is not None:
            f["after"] = _strings(op["after"], f"{at}.after")
        out.append(CommOp(**f))
    return tuple(out)


def _param(params: dict, key: str, where: str) -> int | float:
    """A shape parameter as written: an integer stays an integer (the API and `-p` take it back as one)."""
    value = _field(params, key, float, where)
    raw = params[key]
    return raw if isinstance(raw, int) else value


def workload_from_dict(data: object, where: str = "workload") -> Workload:
    """The Workload of workload_to_dict's data, strictly: a ValueError naming the first bad field."""
    top = {"name": str, "compute": list, "comm": list, "hbm_bytes": float, "dtype": str, "params": dict}
    top["compute_scales_with"] = (str, type(None))
    d = _fields(data, top, where, {"ranks": list, "uncounted": list, "other_ops": list, "problem_params": dict})
    if d["dtype"] not in DTYPE_BYTES:
        raise ValueError(f"{where}.dtype: unknown dtype {d['dtype']!r}")
    views = []
    for i, v in enumerate(data.get("ranks") or ()):
        at = f"{where}.ranks[{i}]"
        f = _fields(v, {"ranks": list, "compute": list, "comm": list, "hbm_bytes": float}, at)
        ranks = tuple(_number(r, f"{at}.ranks", whole=True) for r in f["ranks"])
        views.append(RankView(ranks, _compute_ops(f["compute"], f"{at}.compute"), _comm_ops(f["comm"], f"{at}.comm"),
                              f["hbm_bytes"]))  # fmt: skip
    params = {k: _param(d["params"], k, f"{where}.params") for k in d["params"]}
    own = data.get("problem_params")
    if own is not None and not isinstance(own, dict):
        raise ValueError(f"{where}.problem_params: expected an object")
    return Workload(
        d["name"],
        _compute_ops(d["compute"], f"{where}.compute"),
        _comm_ops(d["comm"], f"{where}.comm"),
        d["hbm_bytes"],
        d["dtype"],
        params,
        d["compute_scales_with"],
        tuple(views),
        _strings(data.get("uncounted") or [], f"{where}.uncounted"),
        _strings(data.get("other_ops") or [], f"{where}.other_ops"),
        None if own is None else {k: _param(own, k, f"{where}.problem_params") for k in own},
    )
