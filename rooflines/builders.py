"""Workload builders for hand-written workloads: a collective, and the three tensor-parallel GEMM fusions.

The suite's problem files (kernels/problems/) call them from their torch-free `workload()`.

Shapes follow Megatron-LM's layouts (megatron/core/tensor_parallel/layers.py): a row-parallel linear
splits K across ranks and reduce-scatters (sequence parallel) or all-reduces its output; a column-parallel
linear all-gathers its sequence-parallel input and splits N.
"""

from __future__ import annotations

import math

from .collectives import Collective
from .workload import DTYPE_BYTES, CommOp, ComputeOp, Workload

GEMM_TILE_M, GEMM_TILE_N = 128, 256  # a common Hopper bf16 GEMM tile (CUTLASS 3 / cuBLAS); sets pipelining depth


def _elements(size: int, dtype: str, name: str) -> int:
    es = DTYPE_BYTES[dtype]
    if size % es:
        raise ValueError(f"{name}: size {size} B is not a whole number of {dtype} elements ({es} B each)")
    return size // es


_CHUNKED = frozenset(
    {Collective.ALL_GATHER, Collective.REDUCE_SCATTER, Collective.ALL_TO_ALL, Collective.GATHER, Collective.SCATTER}
)  # the convention's size splits into one chunk per rank


def collective(kind: Collective, world_size: int, dtype: str, *, size: int) -> Workload:
    """One collective of `size` bytes (nccl-tests' convention) over every rank: it reads what it sends once and
    writes what it receives once."""
    elems = _elements(size, dtype, kind.value)
    if kind in _CHUNKED and elems % world_size:
        raise ValueError(f"{kind.value}: {elems} {dtype} elements do not split evenly over {world_size} ranks")
    group = 2 if kind is Collective.SEND_RECV else world_size
    local_in = size / world_size if kind in (Collective.ALL_GATHER, Collective.GATHER) else size
    local_out = size / world_size if kind in (Collective.REDUCE_SCATTER, Collective.SCATTER) else size
    return Workload(
        name=kind.value,
        comm=(CommOp(kind.value, kind, size, group),),
        hbm_bytes=local_in + local_out,
        params={"size": size},
        dtype=dtype,
    )


def _gemm(m: int, n: int, k: int, dtype: str) -> ComputeOp:
    es = DTYPE_BYTES[dtype]
    tiles = math.ceil(m / GEMM_TILE_M) * math.ceil(n / GEMM_TILE_N)
    tile_flops = 2 * GEMM_TILE_M * GEMM_TILE_N * k
    return ComputeOp("gemm", 2 * m * n * k, dtype, es * (m * k + k * n + m * n), tiles, tile_flops)


def gemm(m: int, n: int, k: int, dtype: str) -> Workload:
    """One GEMM on one GPU, C[m,n] = A[m,k]·B[k,n]: reads A and B once, writes C once."""
    op = _gemm(m, n, k, dtype)
    return Workload(name="gemm", compute=(op,), hbm_bytes=op.hbm_bytes, dtype=dtype, params={"m": m, "n": n, "k": k})


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


def all_to_all_gemm(world_size: int, dtype: str, *, m: int, n: int, k: int) -> Workload:
    """MoE dispatch then the expert GEMM: an all-to-all delivers this rank's tokens A[m,k] (m token rows received,
    k the hidden size), then C[m,n] = A[m,k]·B[k,n] with B the local expert's weight.

    Balanced routing: each rank sends as many rows as it receives, so the all-to-all's size (the bytes each rank
    sends, nccl-tests' convention) is A's bytes, es·m·k, split into m/P rows for each peer (m divisible by P).
    Fused, the GEMM reads its rows of A straight from the peer that holds them, once per column tile of C as the
    all-gather → GEMM does. HBM: the rank's own send buffer (es·m·k) and B read once, C written once; the received
    A never lands in HBM. Compute grows with n, the traffic does not."""
    _divisible(m, world_size, "m")
    es = DTYPE_BYTES[dtype]
    return Workload(
        name="all-to-all-gemm",
        compute=(_gemm(m, n, k, dtype),),
        comm=(
            CommOp(
                "all-to-all",
                Collective.ALL_TO_ALL,
                es * m * k,
                world_size,
                consumer="gemm",
                consumer_reads=math.ceil(n / GEMM_TILE_N),
            ),
        ),
        hbm_bytes=es * (m * k + k * n + m * n),
        params={"m": m, "n": n, "k": k},
        dtype=dtype,
        compute_scales_with="n",
    )


def gemm_all_to_all(world_size: int, dtype: str, *, m: int, n: int, k: int) -> Workload:
    """The expert GEMM then MoE combine: C[m,n] = A[m,k]·B[k,n] over the m token rows this rank's expert holds,
    then an all-to-all sends each row of C back to the rank its token came from.

    Balanced routing: the all-to-all's size (the bytes each rank sends) is C's bytes, es·m·n, m/P rows to each peer
    (m divisible by P). Fused, each tile of C is sent as it is computed. HBM: A and B read once, the m·n rows
    received written once; C itself never lands in HBM. Compute grows with k, the traffic does not."""
    _divisible(m, world_size, "m")
    es = DTYPE_BYTES[dtype]
    return Workload(
        name="gemm-all-to-all",
        compute=(_gemm(m, n, k, dtype),),
        comm=(CommOp("all-to-all", Collective.ALL_TO_ALL, es * m * n, world_size, producer="gemm"),),
        hbm_bytes=es * (m * k + k * n + m * n),
        params={"m": m, "n": n, "k": k},
        dtype=dtype,
        compute_scales_with="k",
    )
