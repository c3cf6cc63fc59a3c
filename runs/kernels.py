"""One row per GPU kernel: which operator and step launched it, what it is, how big, its roof and how close it came.

A kernel's launch is the runtime call with its correlation id (a CUDA graph's kernels share their graph launch's).
Its operator is the innermost CPU operator open on the launching thread at the launch (Kineto's External id where
no operator spans the launch); its step the ProfilerStep#N whose span holds the launch.
"""

from __future__ import annotations

import bisect
import math
from collections import Counter
from dataclasses import dataclass

import pandas as pd

from .classify import GEMM_OPS, category_of, collective_of_arg, size_collective, size_gemm
from .read import Kernel, Op, RankTrace
from .roofs import Model, placement

COLUMNS = [
    "rank",
    "stream",
    "name",
    "start_us",
    "dur_us",
    "correlation",
    "step",
    "op",
    "category",
    "collective",
    "bytes",
    "dtype",
    "group_size",
    "group",
    "seq",
    "flops",
    "gemm_m",
    "gemm_n",
    "gemm_k",
    "gemm_batch",
    "t_roof_s",
    "t_nccl_s",
    "fraction_of_roof",
    "busbw_GBps",
    "unsized",
]


@dataclass(frozen=True)
class _Context:
    """The operators open at one launch that the analysis asks about."""

    innermost: Op | None = None
    gemm: Op | None = None  # innermost matmul operator
    comm: Op | None = None  # innermost operator carrying a collective's arguments, or record_param_comms
    c10d: Op | None = None  # innermost c10d:: collective operator


def _is_comm_op(op: Op) -> bool:
    return op.name == "record_param_comms" or op.name.startswith("nccl:")


def _contexts(t: RankTrace) -> dict[int, _Context]:
    """The operators open at each launch, by correlation id: one sweep per thread over its operators (sorted by
    start) and its launches (sorted by time), with a stack of the operators open at the current time."""
    by_thread: dict[tuple, list[Op]] = {}
    for op in t.ops:
        by_thread.setdefault(op.thread, []).append(op)
    launches: dict[tuple, list[tuple[float, int]]] = {}
    for corr, launch in t.launches.items():
        launches.setdefault(launch.thread, []).append((launch.ts_us, corr))
    out: dict[int, _Context] = {}
    for thread, queries in launches.items():
        ops = by_thread.get(thread, [])
        stack: list[Op] = []
        i = 0
        for ts, corr in sorted(queries):
            while i < len(ops) and ops[i].start_us <= ts:
                while stack and stack[-1].end_us < ops[i].start_us:
                    stack.pop()
                stack.append(ops[i])
                i += 1
            while stack and stack[-1].end_us < ts:
                stack.pop()
            open_now = [op for op in stack if op.start_us <= ts <= op.end_us]
            out[corr] = _Context(
                open_now[-1] if open_now else None,
                next((op for op in reversed(open_now) if op.name in GEMM_OPS), None),
                next((op for op in reversed(open_now) if _is_comm_op(op)), None),
                next((op for op in reversed(open_now) if op.name.startswith("c10d::")), None),
            )
    return out


def _step_of(steps: list[tuple[int, float, float]], starts: list[float], ts: float | None) -> int | None:
    if ts is None:
        return None
    i = bisect.bisect_right(starts, ts) - 1
    return steps[i][0] if i >= 0 and ts <= steps[i][2] else None


def _by_external_id(t: RankTrace) -> dict[int, Op]:
    return {op.external_id: op for op in t.ops if op.external_id is not None}


def rank_rows(
    t: RankTrace, model: Model, default_group: tuple[str, int] | None, unsized: Counter, columns: dict[str, list]
) -> None:
    """One rank's kernels bounded on `model`, appended to `columns` (COLUMNS → a list each: a job's millions of
    kernels held as columns, not as a dict each); every reason a kernel was not sized counted in `unsized`."""
    contexts = _contexts(t)
    by_ext: dict[int, Op] | None = None  # built only if a launch lies outside every operator
    starts = [s[1] for s in t.steps]
    gemm_kernels: Counter = Counter()
    for k in t.kernels:
        ctx = contexts.get(k.correlation)
        if ctx is not None and ctx.gemm is not None and category_of(k, ctx.gemm.name) == "gemm":
            gemm_kernels[id(ctx.gemm)] += 1
    seqs: Counter = Counter()
    gpn = model.topology.gpus_per_node
    for k in t.kernels:
        launch = t.launches.get(k.correlation)
        ctx = contexts.get(k.correlation) or _Context()
        if ctx.innermost is None and k.external_id is not None:
            by_ext = _by_external_id(t) if by_ext is None else by_ext
            if k.external_id in by_ext:
                ctx = _Context(by_ext[k.external_id], *_fallback(by_ext[k.external_id]))
        graph = launch is not None and launch.graph
        row = _row(t.rank, k, ctx, _step_of(t.steps, starts, launch.ts_us if launch else None))
        if row["category"] == "communication":
            _communication(row, k, ctx, default_group, graph, model, gpn, seqs)
        elif row["category"] == "gemm":
            _gemm(row, ctx, graph, gemm_kernels[id(ctx.gemm)] if ctx.gemm else 0, model)
        if row["unsized"]:
            unsized[row["unsized"]] += 1
        for name in COLUMNS:
            columns[name].append(row[name])


def _fallback(op: Op) -> tuple[Op | None, Op | None, Op | None]:
    return (
        op if op.name in GEMM_OPS else None,
        op if _is_comm_op(op) else None,
        op if op.name.startswith("c10d::") else None,
    )


def _row(rank: int, k: Kernel, ctx: _Context, step: int | None) -> dict:
    category = category_of(k, ctx.innermost.name if ctx.innermost else None)
    op = (ctx.c10d or ctx.comm or ctx.innermost) if category == "communication" else ctx.innermost
    nan = math.nan
    return {
        "rank": rank,
        "stream": k.stream,
        "name": k.name,
        "start_us": k.start_us,
        "dur_us": k.dur_us,
        "correlation": k.correlation,
        "step": step,
        "op": op.name if op is not None else None,
        "category": category,
        "collective": None,
        "bytes": nan,
        "dtype": None,
        "group_size": None,
        "group": None,
        "seq": None,
        "flops": nan,
        "gemm_m": nan,
        "gemm_n": nan,
        "gemm_k": nan,
        "gemm_batch": nan,
        "t_roof_s": nan,
        "t_nccl_s": nan,
        "fraction_of_roof": nan,
        "busbw_GBps": nan,
        "unsized": None,
    }


def _communication(
    row: dict,
    k: Kernel,
    ctx: _Context,
    default_group: tuple[str, int] | None,
    graph: bool,
    model: Model,
    gpn: int,
    seqs: Counter,
) -> None:
    size = size_collective(k, ctx.c10d, ctx.comm, default_group, graph)
    kind = size.collective
    if kind is None and ctx.c10d is not None:
        kind = collective_of_arg(ctx.c10d.name)
    row |= {"collective": kind, "dtype": size.dtype, "group_size": size.group_size, "group": size.group}
    row["unsized"] = size.unsized
    if kind not in ("send", "recv"):  # a point-to-point pair is no collective of the whole group: not matched
        key = size.group if size.group is not None else "?"  # no group recorded anywhere: matched by order alone
        seq = k.comm.seq if k.comm is not None and k.comm.seq is not None else None
        row["seq"] = seq if seq is not None else seqs[key]
        seqs[key] += 1
    if size.unsized is not None:
        return
    row["bytes"] = size.bytes
    dur_s = k.dur_us * 1e-6
    if dur_s > 0:
        row["busbw_GBps"] = size.bytes / dur_s * model.busbw_factor(kind, size.group_size) / 1e9
    ranks, per_node = placement(size.group, size.group_size, gpn)
    roof = model.collective_roof(kind, size.bytes, size.dtype, ranks, per_node)
    if roof.unsized is not None:
        row["unsized"] = roof.unsized
        return
    row["t_roof_s"], row["t_nccl_s"] = roof.t_roof_s, roof.t_nccl_s
    if dur_s > 0:
        row["fraction_of_roof"] = roof.t_roof_s / dur_s


def _gemm(row: dict, ctx: _Context, graph: bool, kernels_of_op: int, model: Model) -> None:
    size = size_gemm(ctx.gemm or ctx.innermost, graph, kernels_of_op)
    row |= {"gemm_m": size.m, "gemm_n": size.n, "gemm_k": size.k, "gemm_batch": size.batch, "dtype": size.dtype}
    row["unsized"] = size.unsized
    if size.unsized is not None:
        return
    row["flops"] = size.flops
    roof = model.gemm_roof(int(size.m), int(size.n), int(size.k), int(size.batch), size.dtype)
    if roof.unsized is not None:
        row["unsized"] = roof.unsized
        return
    row["t_roof_s"] = roof.t_roof_s
    if row["dur_us"] > 0:
        row["fraction_of_roof"] = roof.t_roof_s / (row["dur_us"] * 1e-6)


def empty_columns() -> dict[str, list]:
    return {name: [] for name in COLUMNS}


def kernels_frame(columns: dict[str, list]) -> pd.DataFrame:
    frame = pd.DataFrame(columns, columns=COLUMNS)
    for col in ("step", "group_size", "seq"):
        frame[col] = frame[col].astype("Int64")
    return frame
