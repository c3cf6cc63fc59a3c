"""Hand-written workloads: the nine collectives and the three tensor-parallel GEMM fusions.

Shapes follow Megatron-LM's layouts (megatron/core/tensor_parallel/layers.py): a row-parallel linear
splits K across ranks and reduce-scatters (sequence parallel) or all-reduces its output; a column-parallel
linear all-gathers its sequence-parallel input and splits N. Defaults are Llama-3-70B's MLP at TP=8
(hidden 8192, FFN 28672; gate and up fused, so 2·28672/8 = 7168 output columns per rank) on 8192 tokens.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from .collectives import Collective
from .workload import DTYPE_BYTES, CommOp, ComputeOp, Workload

GEMM_TILE_M, GEMM_TILE_N = 128, 256  # a common Hopper bf16 GEMM tile (CUTLASS 3 / cuBLAS); sets pipelining depth


@dataclass(frozen=True)
class Builtin:
    name: str
    summary: str
    defaults: dict[str, int]  # shape parameters and their default values
    build: Callable[..., Workload]  # build(world_size, dtype, **params)


def _elements(size: int, dtype: str, name: str) -> int:
    es = DTYPE_BYTES[dtype]
    if size % es:
        raise ValueError(f"{name}: size {size} B is not a whole number of {dtype} elements ({es} B each)")
    return size // es


def _collective(kind: Collective) -> Callable[..., Workload]:
    # chunked collectives: the convention's size splits into one chunk per rank
    chunked = kind in (
        Collective.ALL_GATHER,
        Collective.REDUCE_SCATTER,
        Collective.ALL_TO_ALL,
        Collective.GATHER,
        Collective.SCATTER,
    )

    def build(world_size: int, dtype: str, *, size: int) -> Workload:
        elems = _elements(size, dtype, kind.value)
        if chunked and elems % world_size:
            raise ValueError(f"{kind.value}: {elems} {dtype} elements do not split evenly over {world_size} ranks")
        group = 2 if kind is Collective.SEND_RECV else world_size
        local_in = size / world_size if kind in (Collective.ALL_GATHER, Collective.GATHER) else size
        local_out = size / world_size if kind in (Collective.REDUCE_SCATTER, Collective.SCATTER) else size
        return Workload(
            name=kind.value,
            comm=(CommOp(kind.value, kind, size, group),),
            hbm_bytes=local_in + local_out,  # read what it sends once, write what it receives once
            params={"size": size},
            dtype=dtype,
        )

    return build


def _gemm(m: int, n: int, k: int, dtype: str) -> ComputeOp:
    es = DTYPE_BYTES[dtype]
    tiles = math.ceil(m / GEMM_TILE_M) * math.ceil(n / GEMM_TILE_N)
    tile_flops = 2 * GEMM_TILE_M * GEMM_TILE_N * k
    return ComputeOp("gemm", 2 * m * n * k, dtype, es * (m * k + k * n + m * n), tiles, tile_flops)


def _divisible(value: int, world_size: int, what: str) -> None:
    if value % world_size:
        raise ValueError(f"{what}={value} is not divisible by the world size {world_size}")


def gemm_reduce_scatter(world_size: int, dtype: str, *, m: int, n: int, k: int) -> Workload:
    """Row-parallel linear, sequence parallel: C[m,n] = A[m,k]·B[k,n] with k local, reduce-scatter rows."""
    _divisible(m, world_size, "m")
    es = DTYPE_BYTES[dtype]
    return Workload(
        name="gemm-reduce-scatter",
        compute=(_gemm(m, n, k, dtype),),
        comm=(CommOp("reduce-scatter", Collective.REDUCE_SCATTER, es * m * n, world_size, producer="gemm"),),
        hbm_bytes=es * (m * k + k * n + m * n / world_size),
        params={"m": m, "n": n, "k": k},
        dtype=dtype,
        compute_scales_with="k",
    )


def all_gather_gemm(world_size: int, dtype: str, *, m: int, n: int, k: int) -> Workload:
    """Column-parallel linear, sequence parallel: gather A's m/P row shards, C[m,n] = A[m,k]·B[k,n], n local."""
    _divisible(m, world_size, "m")
    es = DTYPE_BYTES[dtype]
    gemm = _gemm(m, n, k, dtype)
    return Workload(
        name="all-gather-gemm",
        compute=(gemm,),
        # a GEMM pulling A straight from peers reads each row block once per column tile
        comm=(
            CommOp(
                "all-gather",
                Collective.ALL_GATHER,
                es * m * k,
                world_size,
                consumer="gemm",
                consumer_reads=math.ceil(n / GEMM_TILE_N),
            ),
        ),
        hbm_bytes=es * (m * k / world_size + k * n + m * n),
        params={"m": m, "n": n, "k": k},
        dtype=dtype,
        compute_scales_with="n",
    )


def gemm_all_reduce(world_size: int, dtype: str, *, m: int, n: int, k: int) -> Workload:
    """Row-parallel linear without sequence parallelism: C[m,n] = A[m,k]·B[k,n] with k local, all-reduce C."""
    es = DTYPE_BYTES[dtype]
    return Workload(
        name="gemm-all-reduce",
        compute=(_gemm(m, n, k, dtype),),
        comm=(CommOp("all-reduce", Collective.ALL_REDUCE, es * m * n, world_size, producer="gemm"),),
        hbm_bytes=es * (m * k + k * n + m * n),
        params={"m": m, "n": n, "k": k},
        dtype=dtype,
        compute_scales_with="k",
    )


_COLLECTIVE_SIZE = {"size": 64 * 1024**2}
_LLAMA3_70B_TP8 = {
    "gemm-reduce-scatter": {"m": 8192, "n": 8192, "k": 3584},  # MLP down projection: 28672/8 inner per rank
    "all-gather-gemm": {"m": 8192, "n": 7168, "k": 8192},  # MLP gate+up projection: 2·28672/8 columns per rank
    "gemm-all-reduce": {"m": 8192, "n": 8192, "k": 3584},
}

BUILTINS: dict[str, Builtin] = {
    kind.value: Builtin(kind.value, f"{kind.value} (nccl-tests size convention)", _COLLECTIVE_SIZE, _collective(kind))
    for kind in Collective
} | {
    "gemm-reduce-scatter": Builtin(
        "gemm-reduce-scatter",
        "row-parallel linear + reduce-scatter (Megatron SP)",
        _LLAMA3_70B_TP8["gemm-reduce-scatter"],
        gemm_reduce_scatter,
    ),
    "all-gather-gemm": Builtin(
        "all-gather-gemm",
        "all-gather + column-parallel linear (Megatron SP)",
        _LLAMA3_70B_TP8["all-gather-gemm"],
        all_gather_gemm,
    ),
    "gemm-all-reduce": Builtin(
        "gemm-all-reduce",
        "row-parallel linear + all-reduce (Megatron TP)",
        _LLAMA3_70B_TP8["gemm-all-reduce"],
        gemm_all_reduce,
    ),
}


def build(name: str, world_size: int, dtype: str = "bf16", **params: int) -> Workload:
    """Build a built-in workload; unknown names, dtypes or parameters raise ValueError naming them."""
    if name not in BUILTINS:
        raise ValueError(f"unknown problem {name!r} (built-in: {', '.join(BUILTINS)})")
    if dtype not in DTYPE_BYTES:
        raise ValueError(f"unknown dtype {dtype!r} (one of: {', '.join(DTYPE_BYTES)})")
    spec = BUILTINS[name]
    unknown = set(params) - set(spec.defaults)
    if unknown:
        raise ValueError(f"{name} has no parameter {', '.join(sorted(unknown))} (it takes: {', '.join(spec.defaults)})")
    values = spec.defaults | params
    for key, value in values.items():
        if value <= 0:
            raise ValueError(f"{name}: {key} must be positive, got {value}")
    return spec.build(world_size, dtype, **values)
