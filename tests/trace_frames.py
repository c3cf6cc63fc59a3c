"""Trace results built by hand, in the frames of docs' pkroof.trace/1 schema (runs/): a kernel is one row, written
with only what a test needs; everything else takes the schema's empty value."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

KERNEL_COLUMNS = {
    "rank": 0, "stream": 7, "name": "kernel", "start_us": 0.0, "dur_us": 0.0, "correlation": 0, "step": 1,
    "op": None, "category": "other", "collective": None, "bytes": math.nan, "dtype": None, "group_size": None,
    "group": None, "seq": None, "flops": math.nan, "gemm_m": math.nan, "gemm_n": math.nan, "gemm_k": math.nan,
    "gemm_batch": math.nan, "t_roof_s": math.nan, "t_nccl_s": math.nan, "fraction_of_roof": math.nan,
    "busbw_GBps": math.nan, "unsized": None,
}  # fmt: skip
COLLECTIVE_COLUMNS = (
    "group", "seq", "collective", "bytes", "group_size", "ranks", "start_us_first", "start_us_last", "transfer_s",
    "wait_s", "last_rank",
)  # fmt: skip
STEP_COLUMNS = ("rank", "step", "wall_s", "compute_s", "communication_s", "exposed_communication_s", "idle_s")


def kernel(**fields) -> dict:
    unknown = set(fields) - set(KERNEL_COLUMNS)
    assert not unknown, unknown
    return KERNEL_COLUMNS | fields


def gemm(m: int, n: int, k: int, *, dtype: str = "bf16", **fields) -> dict:
    """A GEMM kernel C[m,n] = A[m,k]·B[k,n]: 2·m·n·k FLOPs."""
    dims = {"gemm_m": float(m), "gemm_n": float(n), "gemm_k": float(k), "gemm_batch": 1.0}
    base = {"name": "nvjet_tst_128x256_64x4_1x2_h_bz_coopA_TNT", "category": "gemm", "dtype": dtype}
    return kernel(**(base | dims | {"flops": 2.0 * m * n * k} | fields))


def collective(kind: str, size: float, group_size: int, *, dtype: str = "bf16", **fields) -> dict:
    base = {
        "name": f"ncclDevKernel_{kind}_RING_LL",
        "category": "communication",
        "collective": kind,
        "bytes": float(size),
        "dtype": dtype,
        "group_size": group_size,
        "group": ",".join(str(r) for r in range(group_size)),
    }
    return kernel(**(base | fields))


@dataclass(frozen=True)
class Result:
    """A TraceResult's frames, as runs.analyze_traces returns them."""

    kernels: pd.DataFrame
    collectives: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=list(COLLECTIVE_COLUMNS)))
    steps: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=list(STEP_COLUMNS)))
    topology: str = "hgx-h100-8"
    topology_reason: str = "given"
    ranks: tuple[int, ...] = (0,)
    notes: tuple[str, ...] = ()


def result(kernels: list[dict], collectives: list[dict] | None = None, steps: list[dict] | None = None) -> Result:
    k = pd.DataFrame(kernels, columns=list(KERNEL_COLUMNS))
    c = pd.DataFrame(collectives or [], columns=list(COLLECTIVE_COLUMNS))
    s = pd.DataFrame(steps or [], columns=list(STEP_COLUMNS))
    return Result(k, c, s, ranks=tuple(sorted(set(k["rank"]))))


def two_rank_job(folder: Path, *, hostile: str = "") -> list[Path]:
    """Kineto traces of two ranks, three steps each (tests/runs_traces.py): per step, a GEMM [0, 500) µs (8192 ×
    8192 × 3584 bf16), its reduce-scatter [500, 1000) that an elementwise kernel [600, 700) partly hides, a copy,
    and an all-reduce of 2 MiB [1200, 1500) far below its roof (its kernel name ending in `hostile`)."""
    from runs_traces import Synthetic, nccl_args

    m, n, k = 8192, 8192, 3584
    files = []
    for rank in (0, 1):
        t = Synthetic(rank=rank, world=2)
        for step in (1, 2, 3):
            at = step * 2000
            t.step(step, at - 10, at + 1500)
            t.kernel("nvjet_tst_256x128", at, 500, op="aten::mm", dims=[[m, k], [k, n]], types=["c10::BFloat16"] * 2)
            rs = nccl_args("_reduce_scatter_base", m * n, "BFloat16", [0, 1], out=m * n // 2)
            t.kernel("ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL", at + 500, 500, stream=20, args=rs)
            t.kernel("void at::native::vectorized_elementwise_kernel<4>", at + 600, 100, op="aten::add")
            t.kernel("Memcpy DtoD (Device -> Device)", at + 1100, 50, cat="gpu_memcpy")
            ar = nccl_args("allreduce", 2**20, "BFloat16", [0, 1])
            t.kernel(f"ncclDevKernel_AllReduce_Sum_bf16 {hostile}", at + 1200, 300, stream=20, args=ar)
        files.append(t.write(Path(folder) / f"rank{rank}.json"))
    return files
