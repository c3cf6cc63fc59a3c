"""What a problem must do on each rank, not how: FLOPs by dtype, minimal HBM bytes, communication ops."""

from __future__ import annotations

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
    def overlappable(self) -> bool:
        """Every comm op feeds or is fed by a compute op, so the two can be pipelined."""
        return bool(self.compute) and bool(self.comm) and all(op.producer or op.consumer for op in self.comm)
