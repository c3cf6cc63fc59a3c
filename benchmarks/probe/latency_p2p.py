"""The latency probe's point-to-point parts: symmetric-memory set-up and peer copies through torch's copy_ (a), the
flag ping-pong (b) and the SM-store message (c).

Imported by small_message_latency.py once it has forced NVLink multicast off (before torch is imported)."""

from __future__ import annotations

import statistics
import time
import traceback
from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist
from latency_harness import (
    EAGER_CALLS,
    GRAPH_COPIES,
    KIB,
    PP_ITERS,
    SAMPLES,
    WARMUP,
    WORLD,
    Ctx,
    capture,
    summarize,
    time_events,
)
from latency_kernels import (
    CE_DST,
    CE_SRC,
    FLAG_MSG,
    FLAG_PP,
    MAX_POLLS,
    MSG,
    SYMM_WORDS,
    _message_kernel,
    _pingpong_kernel,
)


def part_setup(ctx: Ctx) -> None:
    import torch.distributed._symmetric_memory as symm_mem

    info: dict[str, Any] = {}
    if hasattr(symm_mem, "set_backend"):
        try:
            symm_mem.set_backend("CUDA")
        except Exception as e:
            info["set_backend_error"] = str(e)
    buf = symm_mem.empty(SYMM_WORDS, dtype=torch.int32, device=ctx.dev)
    try:
        hdl = symm_mem.rendezvous(buf, dist.group.WORLD)
    except Exception:
        # older torch: the group has to be enabled first
        symm_mem.enable_symm_mem_for_group(dist.group.WORLD.group_name)
        hdl = symm_mem.rendezvous(buf, dist.group.WORLD)
    buf.zero_()
    ctx.symm_buf = buf
    ctx.symm_hdl = hdl
    ctx.peer_buf = hdl.get_buffer(ctx.peer, (SYMM_WORDS,), torch.int32)
    if hasattr(symm_mem, "get_backend"):
        try:
            info["symm_mem_backend"] = symm_mem.get_backend(ctx.dev)
        except Exception as e:
            info["symm_mem_backend"] = f"? ({e})"
    info["buffer_ptrs"] = [hex(p) for p in getattr(hdl, "buffer_ptrs", [])]
    info["peer_view_ptr"] = hex(ctx.peer_buf.data_ptr())
    info["can_device_access_peer"] = torch.cuda.can_device_access_peer(ctx.rank, ctx.peer)
    ctx.barrier()
    # Each rank writes its id into word 8 of its own buffer, then reads the peer's through the mapping.
    buf[8] = 100 + ctx.rank
    ctx.barrier()
    seen = int(ctx.peer_buf[8].item())
    info["peer_word_read"] = seen
    ctx.agree(seen == 100 + ctx.peer, f"peer mapping check: read {seen}, expected {100 + ctx.peer}")
    if ctx.rank == 0:
        ctx.results["symm_mem"] = info
        ctx.log(f"symmetric memory ok: {info}")
    # compile the Triton kernels once on each rank without any waiting (n_iters=-1: the loop body never runs)
    out = torch.zeros(8, dtype=torch.int64, device=ctx.dev)
    my_flag = buf[FLAG_PP:].data_ptr()
    peer_flag = ctx.peer_buf[FLAG_PP:].data_ptr()
    _pingpong_kernel[(1,)](my_flag, peer_flag, out, 0, -1, MAX_POLLS, INITIATOR=ctx.rank == 0, num_warps=1)
    msg_addr = (ctx.peer_buf if ctx.rank == 0 else buf)[MSG:].data_ptr()
    _message_kernel[(1,)](
        buf[FLAG_MSG:].data_ptr(),
        ctx.peer_buf[FLAG_MSG:].data_ptr(),
        msg_addr,
        out,
        0,
        -1,
        MAX_POLLS,
        1024,
        INITIATOR=ctx.rank == 0,
        BLOCK=1024,
        num_warps=4,
    )
    ctx.barrier()


def _pattern(n: int, salt: int, dev: torch.device) -> torch.Tensor:
    return (torch.arange(n, dtype=torch.int32, device=dev) * 7 + salt).contiguous()


def _copy_rows(ctx: Ctx, peer_buf: torch.Tensor, nmax: int) -> None:
    """Rank 0 only: pulls from / pushes to rank 1's symmetric buffer with torch's copy_."""
    ctx.results["copy_info"] = {"can_device_access_peer_0_1": torch.cuda.can_device_access_peer(0, 1)}
    for nbytes in (4, 4 * KIB, 64 * KIB):
        n = nbytes // 4
        label = f"{nbytes} B" if nbytes < KIB else f"{nbytes // KIB} KiB"
        src_peer = peer_buf[CE_SRC : CE_SRC + n]
        dst = torch.full((n,), -1, dtype=torch.int32, device=ctx.dev)
        dst.copy_(src_peer)
        torch.cuda.synchronize()
        if not torch.equal(dst, _pattern(nmax, 12345, ctx.dev)[:n]):
            raise RuntimeError(f"pull {label}: copied bytes differ from the peer's pattern")
        local_src = _pattern(n, 777, ctx.dev)
        dst_peer = peer_buf[CE_DST : CE_DST + n]

        def pull(d: torch.Tensor = dst, s: torch.Tensor = src_peer) -> None:
            d.copy_(s)

        def push(d: torch.Tensor = dst_peer, s: torch.Tensor = local_src) -> None:
            d.copy_(s)

        for direction, fn in (("pull", pull), ("push", push)):
            for _ in range(3):
                fn()
            g = capture(fn, GRAPH_COPIES)
            st = time_events(g.replay, None, SAMPLES, WARMUP, divide=GRAPH_COPIES)
            ctx.row(
                "a", f"copy_ {direction} {label}: CUDA graph of {GRAPH_COPIES}, per copy", summarize(st), bytes=nbytes
            )
            del g

            def eager(f: Callable[[], None] = fn) -> None:
                for _ in range(EAGER_CALLS):
                    f()

            st = time_events(eager, None, SAMPLES, WARMUP, divide=EAGER_CALLS)
            ctx.row(
                "a",
                f"copy_ {direction} {label}: eager, {EAGER_CALLS} back-to-back, per call",
                summarize(st),
                bytes=nbytes,
            )
            iso: list[float] = []
            for s in range(WARMUP + SAMPLES):
                torch.cuda.synchronize()
                t = time.perf_counter()
                fn()
                torch.cuda.synchronize()
                if s >= WARMUP:
                    iso.append((time.perf_counter() - t) * 1e6)
            ctx.row(
                "a", f"copy_ {direction} {label}: one call + synchronize (host clock)", summarize(iso), bytes=nbytes
            )
        torch.cuda.synchronize()


def part_copy(ctx: Ctx) -> None:
    assert ctx.symm_buf is not None and ctx.peer_buf is not None
    buf, peer_buf = ctx.symm_buf, ctx.peer_buf
    nmax = 16384
    # rank 1 fills its pull-source region; rank 0 pulls from it and pushes into rank 1's push region
    if ctx.rank == 1:
        buf[CE_SRC : CE_SRC + nmax].copy_(_pattern(nmax, 12345, ctx.dev))
        buf[CE_DST : CE_DST + nmax].zero_()
    ctx.barrier()
    err = ""
    if ctx.rank == 0:
        try:
            _copy_rows(ctx, peer_buf, nmax)
        except Exception as e:
            err = f"{type(e).__name__}: {e}\n{traceback.format_exc(limit=4)}"
    try:
        torch.cuda.synchronize()
    except Exception as e:
        err += f" / synchronize: {e}"
    dist.barrier(group=ctx.gloo)
    ok = True
    if ctx.rank == 1:  # the pushes of the last (64 KiB) size covered the whole region
        ok = torch.equal(buf[CE_DST : CE_DST + nmax], _pattern(nmax, 777, ctx.dev))
        if not ok:
            err = "push: bytes on rank 1 differ from rank 0's pattern"
    ctx.agree(not err and ok, f"copy part: {err}")


def _flag_samples(
    ctx: Ctx, launch: Callable[[int, torch.Tensor], None], n_out: int, n_iters: int
) -> tuple[list[float], list[float], list[list[int]]]:
    """Launches a two-sided kernel SAMPLES+WARMUP times (gloo barrier before each); returns rank-local
    in-kernel ns per round (globaltimer), event µs per launch, and the raw out words of each launch."""
    out = torch.zeros(n_out, dtype=torch.int64, device=ctx.dev)
    ker: list[float] = []
    ev: list[float] = []
    raw: list[list[int]] = []
    for s in range(WARMUP + SAMPLES):
        base = ctx.next_base(n_iters)
        out.zero_()
        ctx.barrier()
        e0 = torch.cuda.Event(enable_timing=True)
        e1 = torch.cuda.Event(enable_timing=True)
        e0.record()
        launch(base, out)
        e1.record()
        e1.synchronize()
        words = [int(x) for x in out.tolist()]
        ctx.agree(words[0] == 1, f"spin gave up (poll cap) or protocol broke: out={words}, base={base}, sample={s}")
        ctx.last_base = base
        if s >= WARMUP:
            ker.append(words[1] / 1000.0)  # ns -> µs for all n_iters rounds
            ev.append(e0.elapsed_time(e1) * 1000.0)
            raw.append(words)
    return ker, ev, raw


def part_pingpong(ctx: Ctx) -> None:
    assert ctx.symm_buf is not None and ctx.peer_buf is not None
    my_flag = ctx.symm_buf[FLAG_PP:].data_ptr()
    peer_flag = ctx.peer_buf[FLAG_PP:].data_ptr()
    n = PP_ITERS

    def launch(base: int, out: torch.Tensor) -> None:
        _pingpong_kernel[(1,)](my_flag, peer_flag, out, base, n, MAX_POLLS, INITIATOR=ctx.rank == 0, num_warps=1)

    ker, ev, raw = _flag_samples(ctx, launch, 8, n)
    one_way = [k / (2 * n) for k in ker]
    one_way_ev = [e / (2 * (n + 1)) for e in ev]
    all_one_way: list[Any] = [None] * WORLD
    dist.all_gather_object(all_one_way, statistics.median(one_way), group=ctx.gloo)
    if ctx.rank == 0:
        ctx.results["pingpong_median_one_way_us"] = statistics.median(one_way)
        ctx.row(
            "b",
            f"flag one-way (ping-pong, {n} round trips/launch, in-kernel globaltimer / 2N)",
            summarize(one_way),
            note=f"rank 1's own clock gave median {all_one_way[1]:.4f} us",
            mean_polls_per_wait=statistics.mean(r[2] for r in raw) / n,
        )
        ctx.row(
            "b", "flag one-way (CUDA events around the launch / 2(N+1); includes launch skew)", summarize(one_way_ev)
        )


def part_message(ctx: Ctx) -> None:
    assert ctx.symm_buf is not None and ctx.peer_buf is not None
    buf, peer_buf = ctx.symm_buf, ctx.peer_buf
    my_flag = buf[FLAG_MSG:].data_ptr()
    peer_flag = peer_buf[FLAG_MSG:].data_ptr()
    msg_addr = (peer_buf if ctx.rank == 0 else buf)[MSG:].data_ptr()
    n = PP_ITERS
    flag_one_way = ctx.results.get("pingpong_median_one_way_us")
    fow: list[Any] = [flag_one_way]
    dist.broadcast_object_list(fow, src=0, group=ctx.gloo)
    flag_one_way = fow[0]
    for nbytes in (4 * KIB, 64 * KIB):
        n_words = nbytes // 4
        if ctx.rank == 1:
            buf[MSG : MSG + 16384].fill_(-1)

        def launch(base: int, out: torch.Tensor, n_words: int = n_words) -> None:
            _message_kernel[(1,)](
                my_flag,
                peer_flag,
                msg_addr,
                out,
                base,
                n,
                MAX_POLLS,
                n_words,
                INITIATOR=ctx.rank == 0,
                BLOCK=1024,
                num_warps=4,
            )

        ker, _ev, raw = _flag_samples(ctx, launch, 8, n)
        last_base = ctx.last_base
        verdict: list[Any] = [None]
        if ctx.rank == 1:
            expect = last_base + n
            region = buf[MSG : MSG + n_words]
            ok_bytes = bool(torch.all(region == expect).item())
            beyond_ok = bool(torch.all(buf[MSG + n_words : MSG + 16384] == -1).item())
            bad_checks = sum(r[4] for r in raw)
            verdict = [{"bytes_ok": ok_bytes, "untouched_beyond_ok": beyond_ok, "in_kernel_bad_checks": bad_checks}]
        dist.broadcast_object_list(verdict, src=1, group=ctx.gloo)
        v = verdict[0]
        if ctx.rank == 0:
            label = f"{nbytes // KIB} KiB"
            rt = [k / n for k in ker]
            ctx.row(
                "c",
                f"SM-store {label} + flag, reply flag: round trip (in-kernel)",
                summarize(rt),
                note=f"rank1 verification: {v}",
            )
            if flag_one_way is not None:
                ctx.row(
                    "c",
                    f"SM-store {label}: message one-way = RT - flag one-way(b median)",
                    summarize([r - flag_one_way for r in rt]),
                )
                ctx.row(
                    "c",
                    f"SM-store {label}: payload extra = RT - 2 x flag one-way(b median)",
                    summarize([r - 2 * flag_one_way for r in rt]),
                )
        if not (v["bytes_ok"] and v["untouched_beyond_ok"] and v["in_kernel_bad_checks"] == 0):
            raise RuntimeError(f"message {nbytes} B verification failed: {v}")  # v is the same on both ranks
