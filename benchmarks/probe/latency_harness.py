"""The latency probe's harness: run constants, the per-rank context every part shares, CUDA-event timing, graph
capture, and one part run on both ranks with its failure recorded.

Imported by small_message_latency.py once it has forced NVLink multicast off (before torch is imported)."""

from __future__ import annotations

import json
import os
import statistics
import time
import traceback
from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist

WORLD = 2
KIB = 1024
MIB = 1024 * 1024
PP_ITERS = 1000  # round trips per launch (b, c)
SAMPLES = 30
WARMUP = 5
GRAPH_COPIES = 100
EAGER_CALLS = 100
COLL_CALLS = 20


def summarize(samples_us: list[float]) -> dict[str, Any]:
    return {
        "median_us": statistics.median(samples_us),
        "min_us": min(samples_us),
        "max_us": max(samples_us),
        "n": len(samples_us),
        "samples_us": [round(s, 4) for s in samples_us],
    }


class Ctx:
    """Per-rank state shared by the parts."""

    def __init__(self, rank: int, gloo: dist.ProcessGroup, result_path: str) -> None:
        self.rank = rank
        self.peer = 1 - rank
        self.dev = torch.device("cuda", rank)
        self.gloo = gloo
        self.result_path = result_path
        self.results: dict[str, Any] = {"parts": {}, "rows": []}
        self.symm_buf: torch.Tensor | None = None
        self.symm_hdl: Any = None
        self.peer_buf: torch.Tensor | None = None
        self.flag_seq = 1000  # monotonically increasing flag values; a stale value never matches
        self.last_base = 0
        self.nccl_sync: Callable[[], None] | None = None
        self.nccl_sync_graph: torch.cuda.CUDAGraph | None = None

    def barrier(self) -> None:
        torch.cuda.synchronize()
        dist.barrier(group=self.gloo)

    def all_ok(self, ok: bool) -> bool:
        """True when ok is True on every rank (a gloo collective both ranks must reach)."""
        oks: list[Any] = [None] * WORLD
        dist.all_gather_object(oks, bool(ok), group=self.gloo)
        return all(oks)

    def agree(self, ok: bool, what: str) -> None:
        """Raises on every rank when ok is False on any rank, so that both leave a part at the same point."""
        if not self.all_ok(ok):
            raise RuntimeError(f"{what} (failed on {'this' if not ok else 'the other'} rank)")

    def log(self, msg: str) -> None:
        if self.rank == 0:
            print(f"[latency] {msg}", flush=True)

    def row(self, part: str, name: str, stats: dict[str, Any] | None, note: str = "", **extra: Any) -> None:
        self.results["rows"].append({"part": part, "name": name, "stats": stats, "note": note, **extra})

    def save(self) -> None:
        if self.rank != 0:
            return
        tmp = self.result_path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(self.results, f)
        os.replace(tmp, self.result_path)

    def next_base(self, n_iters: int) -> int:
        base = self.flag_seq
        self.flag_seq += n_iters + 2
        return base


def time_events(
    fn: Callable[[], None], before: Callable[[], None] | None, samples: int, warmup: int, divide: int = 1
) -> list[float]:
    """GPU time between two events around fn(), per `divide`, in µs; before() runs (untimed) first."""
    out: list[float] = []
    for s in range(warmup + samples):
        if before is not None:
            before()
        e0 = torch.cuda.Event(enable_timing=True)
        e1 = torch.cuda.Event(enable_timing=True)
        e0.record()
        fn()
        e1.record()
        e1.synchronize()
        if s >= warmup:
            out.append(e0.elapsed_time(e1) * 1000.0 / divide)
    return out


def capture(fn: Callable[[], None], n: int) -> torch.cuda.CUDAGraph:
    g = torch.cuda.CUDAGraph()
    torch.cuda.synchronize()
    with torch.cuda.graph(g, capture_error_mode="thread_local"):
        for _ in range(n):
            fn()
    torch.cuda.synchronize()
    return g


def run_part(ctx: Ctx, name: str, fn: Callable[[Ctx], None]) -> None:
    """Runs one part on both ranks; a failure is recorded and the next part still runs."""
    ctx.log(f"--- part {name}")
    t = time.perf_counter()
    err = ""
    try:
        fn(ctx)
    except Exception as e:
        err = f"rank {ctx.rank}: {type(e).__name__}: {e}\n{traceback.format_exc(limit=6)}"
        print(f"[latency] part {name} FAILED on {err}", flush=True)
    try:
        torch.cuda.synchronize()
    except Exception as e:  # a sticky CUDA error: record it, the later parts will fail too
        err += f"\nrank {ctx.rank}: synchronize after part: {e}"
    errs: list[Any] = [None] * WORLD
    try:
        dist.all_gather_object(errs, err, group=ctx.gloo)
    except Exception as e:
        errs = [err, f"(status exchange failed: {e})"]
    ctx.results["parts"][name] = {
        "ok": not any(errs),
        "errors": [x for x in errs if x],
        "seconds": round(time.perf_counter() - t, 2),
    }
    ctx.save()
