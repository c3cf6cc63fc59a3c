"""The latency probe's collective parts: NCCL all_reduce and all_gather_into_tensor (d) and torch's symmetric-memory
one-shot all-reduce (e), in CUDA graphs and eager, with nccl-tests busbw.

Imported by small_message_latency.py once it has forced NVLink multicast off (before torch is imported)."""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist
from latency_harness import COLL_CALLS, KIB, MIB, SAMPLES, WARMUP, WORLD, Ctx, capture, summarize, time_events

from pkroof.rooflines import Collective, bus_bandwidth_factor


def _coll_rows(
    ctx: Ctx,
    name: str,
    fn: Callable[[], Any],
    sync: Callable[[], None],
    g_sync: torch.cuda.CUDAGraph | None,
    size_bytes: int,
    busbw_factor: float,
) -> None:
    def before_eager() -> None:
        ctx.barrier()
        sync()

    def eager() -> None:
        for _ in range(COLL_CALLS):
            fn()

    st_e = time_events(eager, before_eager, SAMPLES, WARMUP, divide=COLL_CALLS)
    rows = [("eager", st_e)]
    g: torch.cuda.CUDAGraph | None = None
    cap_err = ""
    try:
        g = capture(fn, COLL_CALLS)
    except Exception as e:
        cap_err = f"{type(e).__name__}: {e}"
    if ctx.all_ok(g is not None) and g is not None:

        def before_graph() -> None:
            ctx.barrier()
            if g_sync is not None:
                g_sync.replay()
            else:
                sync()

        st_g = time_events(g.replay, before_graph, SAMPLES, WARMUP, divide=COLL_CALLS)
        rows.insert(0, ("CUDA graph", st_g))
    elif ctx.rank == 0:
        ctx.row("d/e", f"{name}: CUDA graph capture FAILED", None, note=cap_err or "failed on rank 1")
    meds: list[Any] = [None] * WORLD
    dist.all_gather_object(meds, {k: statistics.median(v) for k, v in rows}, group=ctx.gloo)
    if ctx.rank == 0:
        for kind, st in rows:
            med = statistics.median(st)
            busbw = busbw_factor * size_bytes / (med * 1e-6) / 1e9
            ctx.row(
                "d/e",
                f"{name}: {kind}, {COLL_CALLS} back-to-back, per call",
                summarize(st),
                busbw_GBps=round(busbw, 3),
                note=f"rank 1 median {meds[1].get(kind, float('nan')):.3f} us",
            )


def part_nccl(ctx: Ctx) -> None:
    n = WORLD
    sync_t = torch.zeros(1, dtype=torch.float32, device=ctx.dev)

    def sync() -> None:
        dist.all_reduce(sync_t)

    sync()
    torch.cuda.synchronize()
    g_sync: torch.cuda.CUDAGraph | None = None
    try:
        g_sync = capture(sync, 1)
    except Exception as e:
        ctx.log(f"could not capture the NCCL sync graph: {e}")
    if not ctx.all_ok(g_sync is not None):
        g_sync = None
    ctx.nccl_sync, ctx.nccl_sync_graph = sync, g_sync
    cases: list[tuple[str, int, torch.dtype]] = [
        ("all_reduce", 8, torch.float32),
        ("all_reduce", 64 * KIB, torch.bfloat16),
        ("all_reduce", 64 * MIB, torch.bfloat16),
        ("all_gather_into_tensor", 64 * MIB, torch.bfloat16),
    ]
    for op, size, dtype in cases:
        elem = torch.tensor([], dtype=dtype).element_size()
        label = f"{size} B" if size < KIB else (f"{size // KIB} KiB" if size < MIB else f"{size // MIB} MiB")
        dname = str(dtype).removeprefix("torch.")
        if op == "all_reduce":
            x = torch.full((size // elem,), float(ctx.rank + 1), dtype=dtype, device=ctx.dev)
            dist.all_reduce(x)
            torch.cuda.synchronize()
            ctx.agree(bool(torch.all(x == 3).item()), f"all_reduce {label}: wrong sum")
            x.zero_()

            def fn(x: torch.Tensor = x) -> None:
                dist.all_reduce(x)

            factor = bus_bandwidth_factor(Collective.ALL_REDUCE, n)
            _coll_rows(ctx, f"NCCL all_reduce {label} {dname}", fn, sync, g_sync, size, factor)
        else:
            out = torch.empty(size // elem, dtype=dtype, device=ctx.dev)
            half = size // elem // n
            inp = torch.full((half,), float(ctx.rank + 1), dtype=dtype, device=ctx.dev)
            dist.all_gather_into_tensor(out, inp)
            torch.cuda.synchronize()
            good = bool(torch.all(out[:half] == 1).item()) and bool(torch.all(out[half:] == 2).item())
            ctx.agree(good, f"all_gather {label}: wrong data")

            def fn2(out: torch.Tensor = out, inp: torch.Tensor = inp) -> None:
                dist.all_gather_into_tensor(out, inp)

            factor = bus_bandwidth_factor(Collective.ALL_GATHER, n)
            _coll_rows(ctx, f"NCCL all_gather_into_tensor {label} output {dname}", fn2, sync, g_sync, size, factor)


def part_one_shot(ctx: Ctx) -> None:
    import torch.distributed._symmetric_memory as symm_mem

    if not hasattr(torch.ops.symm_mem, "one_shot_all_reduce"):
        if ctx.rank == 0:
            ctx.row("d/e", "symm_mem one_shot_all_reduce: not in this torch", None)
        return
    group_name = dist.group.WORLD.group_name
    n_el = 4 * KIB // 2
    inp = symm_mem.empty(n_el, dtype=torch.bfloat16, device=ctx.dev)
    symm_mem.rendezvous(inp, dist.group.WORLD)
    inp.fill_(float(ctx.rank + 1))
    ctx.barrier()
    res = torch.ops.symm_mem.one_shot_all_reduce(inp, "sum", group_name)
    torch.cuda.synchronize()
    ctx.agree(bool(torch.all(res == 3).item()), "one_shot_all_reduce 4 KiB: wrong sum")

    def fn() -> None:
        torch.ops.symm_mem.one_shot_all_reduce(inp, "sum", group_name)

    sync = ctx.nccl_sync
    if sync is None:
        sync_t = torch.zeros(1, dtype=torch.float32, device=ctx.dev)

        def sync() -> None:
            dist.all_reduce(sync_t)

    _coll_rows(
        ctx, "symm_mem one_shot_all_reduce 4 KiB bf16", fn, sync, ctx.nccl_sync_graph, 4 * KIB, 2 * (WORLD - 1) / WORLD
    )
