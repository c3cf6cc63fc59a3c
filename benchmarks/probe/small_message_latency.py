#!/usr/bin/env python3
"""Small-message latency probes between two GPUs of one host (written for 2x H200, NVLink/NVSwitch).

Self-contained: torch, triton and the standard library only (nothing from pkroof).  It starts one
process per GPU itself (torch.multiprocessing spawn, NCCL, MASTER_ADDR=127.0.0.1) and measures:

  a. peer copies through torch's copy_ (cudaMemcpyAsync; the driver picks the engine) of 4 B / 4 KiB /
     64 KiB, pulled from and pushed to the peer's symmetric-memory buffer: per copy inside a CUDA graph of
     100 copies, eager per call (100 back-to-back calls), and one isolated call + synchronize (host clock);
  b. one-way NVLink latency by a flag ping-pong: one CTA per GPU, N round trips in one launch;
  c. SM-store small message (4 KiB / 64 KiB) written with plain stores by one CTA + a release flag,
     answered by a flag: round trip, minus the one-way flag latency of (b);
  d. NCCL all_reduce (8 B fp32, 64 KiB and 64 MiB bf16) and all_gather_into_tensor (64 MiB output) inside
     a CUDA graph of 20 calls and eager (20 back-to-back calls), with nccl-tests busbw;
  e. torch.ops.symm_mem.one_shot_all_reduce at 4 KiB inside a CUDA graph (and eager).

Every measurement has warm-up, >= 20 samples timed with CUDA events (except the host-clock "isolated"
row), and reports median / min / max; raw samples go to $OUT/latency.json when OUT is set.

NVLink multicast (NVLS) stays off: NCCL_NVLS_ENABLE=0, TORCH_SYMM_MEM_DISABLE_MULTICAST=1 and
NVSHMEM_DISABLE_NVLS=1 are forced below, before torch is imported.  Every GPU spin loop has a poll cap.

Usage:  python3 benchmarks/probe/small_message_latency.py        (needs 2 GPUs)
"""

from __future__ import annotations

import os

from pkroof.runtime.launch import SAFE_ENV as _SAFE_ENV
from pkroof.runtime.launch import keep_multicast_off

for _key, _val in _SAFE_ENV.items():
    if os.environ.get(_key, _val) != _val:  # never run with multicast on, whatever the caller's environment says
        print(f"[latency] overriding {_key}={os.environ[_key]!r} -> {_val!r}", flush=True)
keep_multicast_off()

import json  # noqa: E402
import socket  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
import traceback  # noqa: E402
from collections.abc import Callable  # noqa: E402
from datetime import UTC, datetime, timedelta  # noqa: E402
from typing import Any  # noqa: E402

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

from pkroof.rooflines import Collective, bus_bandwidth_factor  # noqa: E402
from pkroof.runtime.ptx import fence_acq_rel_sys, globaltimer, ld_acquire_sys, st_release_sys_thread0  # noqa: E402

WORLD = 2
KIB = 1024
MIB = 1024 * 1024

# Layout of the symmetric int32 buffer (indices in int32 words).
SYMM_WORDS = 1 << 17  # 512 KiB
FLAG_PP = 0  # ping-pong flag word (each rank polls its own, the peer writes it)
FLAG_MSG = 32  # message flag word (rank 1's is "message arrived", rank 0's is "reply")
CE_SRC = 1024  # 64 KiB source region for pulls
CE_DST = CE_SRC + 16384  # 64 KiB destination region for pushes
MSG = CE_DST + 16384  # 64 KiB message region for the SM-store test
assert MSG + 16384 <= SYMM_WORDS

MAX_POLLS = 1 << 26  # spin cap: a broken protocol gives up instead of hanging the GPU
PP_ITERS = 1000  # round trips per launch (b, c)
SAMPLES = 30
WARMUP = 5
GRAPH_COPIES = 100
EAGER_CALLS = 100
COLL_CALLS = 20
GLOO_TIMEOUT_S = 120
DEADLINE_S = float(os.environ.get("LATENCY_DEADLINE_S", "300"))


# ----------------------------------------------------------------------------------------------------------
# Triton kernels
# ----------------------------------------------------------------------------------------------------------


@triton.jit
def _wait_ge(addr, val, max_polls):
    # Flag values only grow, so ">=" lets a warp that lags behind its CTA's others catch up safely.
    n = tl.full((), 0, tl.int32)
    seen = ld_acquire_sys(addr)
    while (seen < val) & (n < max_polls):
        seen = ld_acquire_sys(addr)
        n += 1
    return (seen >= val).to(tl.int32), n


@triton.jit(do_not_specialize=["base", "n_iters", "max_polls"])
def _pingpong_kernel(my_flag, peer_flag, out_ptr, base, n_iters, max_polls, INITIATOR: tl.constexpr):
    # Round 0 is a handshake (absorbs the launch skew between the two processes); rounds 1..n_iters are timed.
    ok = tl.full((), 1, tl.int32)
    polls = tl.full((), 0, tl.int64)
    t0 = globaltimer()
    i = tl.full((), 0, tl.int32)
    while (i <= n_iters) & (ok == 1):
        if i == 1:
            t0 = globaltimer()
            polls = tl.full((), 0, tl.int64)  # count the timed rounds' polls only
        val = base + i
        if INITIATOR:
            st_release_sys_thread0(peer_flag, val)
            good, n = _wait_ge(my_flag, val, max_polls)
        else:
            good, n = _wait_ge(my_flag, val, max_polls)
            if good == 1:
                st_release_sys_thread0(peer_flag, val)
        ok = ok & good
        polls += n.to(tl.int64)
        i += 1
    t1 = globaltimer()
    tl.store(out_ptr + 0, ok.to(tl.int64))
    tl.store(out_ptr + 1, t1 - t0)
    tl.store(out_ptr + 2, polls)
    tl.store(out_ptr + 3, i.to(tl.int64))


@triton.jit(do_not_specialize=["base", "n_iters", "max_polls"])
def _message_kernel(
    my_flag,
    peer_flag,
    msg_addr,
    out_ptr,
    base,
    n_iters,
    max_polls,
    n_words,
    INITIATOR: tl.constexpr,
    BLOCK: tl.constexpr,
):
    # INITIATOR (rank 0): msg_addr = the peer's message region; writes n_words int32 = round value with plain
    #   stores, fence.acq_rel.sys by every thread, CTA barrier, release-store of the peer's flag, waits for reply.
    # responder (rank 1): msg_addr = its own message region; waits for the flag (acquire), checks the first and
    #   last word of the message, then release-stores the reply flag into rank 0's word.
    ok = tl.full((), 1, tl.int32)
    bad = tl.full((), 0, tl.int64)
    polls = tl.full((), 0, tl.int64)
    t0 = globaltimer()
    i = tl.full((), 0, tl.int32)
    msg = msg_addr.to(tl.pointer_type(tl.int32))  # 4-byte stores, 128 contiguous bytes per warp instruction
    while (i <= n_iters) & (ok == 1):
        if i == 1:
            t0 = globaltimer()
        val = base + i
        if INITIATOR:
            for start in range(0, n_words, BLOCK):
                offs = start + tl.arange(0, BLOCK)
                tl.store(msg + offs, tl.full((BLOCK,), 0, tl.int32) + val)
            fence_acq_rel_sys()
            tl.debug_barrier()
            st_release_sys_thread0(peer_flag, val)
            good, n = _wait_ge(my_flag, val, max_polls)
        else:
            good, n = _wait_ge(my_flag, val, max_polls)
            first = tl.load(msg, volatile=True)
            last = tl.load(msg + (n_words - 1), volatile=True)
            bad += ((first != val) | (last != val)).to(tl.int64)
            if good == 1:
                st_release_sys_thread0(peer_flag, val)
        ok = ok & good
        polls += n.to(tl.int64)
        i += 1
    t1 = globaltimer()
    tl.store(out_ptr + 0, ok.to(tl.int64))
    tl.store(out_ptr + 1, t1 - t0)
    tl.store(out_ptr + 2, polls)
    tl.store(out_ptr + 3, i.to(tl.int64))
    tl.store(out_ptr + 4, bad)


# ----------------------------------------------------------------------------------------------------------
# helpers
# ----------------------------------------------------------------------------------------------------------


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


# ----------------------------------------------------------------------------------------------------------
# parts
# ----------------------------------------------------------------------------------------------------------


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


# ----------------------------------------------------------------------------------------------------------
# process plumbing
# ----------------------------------------------------------------------------------------------------------


def _worker(rank: int, port: int, result_path: str) -> None:
    keep_multicast_off()
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")  # host-side barriers stay on the loopback interface
    torch.cuda.set_device(rank)
    dist.init_process_group(
        "nccl", rank=rank, world_size=WORLD, timeout=timedelta(seconds=180), device_id=torch.device("cuda", rank)
    )
    gloo = dist.new_group(backend="gloo", timeout=timedelta(seconds=GLOO_TIMEOUT_S))
    ctx = Ctx(rank, gloo, result_path)
    if rank == 0:
        nccl_v = torch.cuda.nccl.version()
        ctx.results["env"] = {
            "torch": torch.__version__,
            "torch_cuda": torch.version.cuda,
            "nccl": ".".join(map(str, nccl_v)) if isinstance(nccl_v, tuple) else str(nccl_v),
            "triton": triton.__version__,
            "python": sys.version.split()[0],
            "gpus": [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())],
            "sm_count": torch.cuda.get_device_properties(0).multi_processor_count,
            "safe_env": {k: os.environ.get(k) for k in _SAFE_ENV},
        }
        ctx.log(f"env: {ctx.results['env']}")
        ctx.save()
    run_part(ctx, "setup (symmetric memory)", part_setup)
    have_symm = ctx.results["parts"].get("setup (symmetric memory)", {}).get("ok", False)
    sync_ok: list[Any] = [have_symm]
    dist.broadcast_object_list(sync_ok, src=0, group=gloo)
    if sync_ok[0]:
        run_part(ctx, "a copy engine", part_copy)
        run_part(ctx, "b flag ping-pong", part_pingpong)
        if ctx.results["parts"]["b flag ping-pong"]["ok"]:  # the same on both ranks
            run_part(ctx, "c SM-store message", part_message)
    else:
        ctx.log("symmetric memory unavailable: parts a, b, c skipped")
    run_part(ctx, "d NCCL", part_nccl)
    run_part(ctx, "e symm_mem one_shot_all_reduce", part_one_shot)
    ctx.results["done"] = True
    ctx.save()
    ctx.log("done")
    # No destroy_process_group(): on the first device run the orderly teardown (gloo barrier + destroy, with
    # CUDA graphs holding NCCL work still alive) never returned. Every collective has completed by now and the
    # results are saved, so each worker leaves at once and the driver frees its resources.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def _results_done(path: str) -> bool:
    try:
        with open(path) as f:
            return bool(json.load(f).get("done"))
    except Exception:
        return False


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _sh(cmd: list[str]) -> str:
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=30).stdout.strip()
    except Exception as e:
        return f"({cmd[0]} failed: {e})"


def _fmt(x: float) -> str:
    return f"{x:10.3f}" if x < 1e5 else f"{x:10.0f}"


def print_table(res: dict[str, Any]) -> None:
    print("\n== results (µs; median over samples, [min, max]) ==")
    print(f"{'part':5} {'measurement':92} {'median':>10} {'min':>10} {'max':>10}  {'n':>3}  extra")
    for r in res.get("rows", []):
        st = r.get("stats")
        extra = []
        if "busbw_GBps" in r and r["busbw_GBps"] >= 0.01:
            extra.append(f"busbw {r['busbw_GBps']:.2f} GB/s")
        if "mean_polls_per_wait" in r:
            extra.append(f"extra polls/wait {r['mean_polls_per_wait']:.1f}")
        if r.get("note"):
            extra.append(r["note"])
        if st is None:
            print(f"{r['part']:5} {r['name']:92} {'-':>10} {'-':>10} {'-':>10}  {'-':>3}  {'; '.join(extra)}")
        else:
            print(
                f"{r['part']:5} {r['name']:92} {_fmt(st['median_us'])} {_fmt(st['min_us'])} "
                f"{_fmt(st['max_us'])}  {st['n']:3d}  {'; '.join(extra)}"
            )
    print("\n== parts ==")
    for name, p in res.get("parts", {}).items():
        status = "ok" if p["ok"] else "FAILED"
        print(f"{name:40} {status:7} {p['seconds']:7.1f} s")
        for e in p.get("errors", []):
            print("    " + e.strip().replace("\n", "\n    "))


def main() -> int:
    if not torch.cuda.is_available() or torch.cuda.device_count() < WORLD:
        print(f"need {WORLD} CUDA GPUs, found {torch.cuda.device_count() if torch.cuda.is_available() else 0}")
        return 2
    started = datetime.now(UTC).isoformat(timespec="seconds")
    smi = _sh(
        [
            "nvidia-smi",
            "--query-gpu=index,name,driver_version,pci.bus_id,clocks.sm,clocks.max.sm,clocks.mem,power.limit",
            "--format=csv",
        ]
    )
    topo = _sh(["nvidia-smi", "topo", "-m"])
    print(f"[latency] start {started}\n{smi}\n{topo}", flush=True)
    fd, result_path = tempfile.mkstemp(prefix="latency_", suffix=".json")
    os.close(fd)
    port = _free_port()
    pctx = mp.start_processes(_worker, args=(port, result_path), nprocs=WORLD, join=False, start_method="spawn")
    deadline = time.monotonic() + DEADLINE_S
    rc = 0
    while True:
        try:
            if pctx.join(timeout=5):
                break
        except Exception as e:
            print(f"[latency] a worker failed: {e}", flush=True)
            rc = 1
            break
        if _results_done(result_path):  # the workers should be gone already; give them a few seconds
            deadline = min(deadline, time.monotonic() + 20)
        if time.monotonic() > deadline:
            print("[latency] deadline passed; terminating the workers", flush=True)
            for p in pctx.processes:
                if p.is_alive():
                    p.terminate()
            rc = 1
            break
    try:
        with open(result_path) as f:
            res: dict[str, Any] = json.load(f)
    except Exception as e:
        print(f"[latency] no results: {e}")
        res = {"parts": {}, "rows": []}
    res["started_utc"] = started
    res["nvidia_smi"] = smi
    res["topo"] = topo
    res["command"] = " ".join([sys.executable, *sys.argv])
    res["constants"] = {
        "samples": SAMPLES,
        "warmup": WARMUP,
        "pingpong_iters": PP_ITERS,
        "graph_copies": GRAPH_COPIES,
        "eager_calls": EAGER_CALLS,
        "coll_calls": COLL_CALLS,
        "max_polls": MAX_POLLS,
    }
    print_table(res)
    out_dir = os.environ.get("OUT")
    if out_dir:
        with open(os.path.join(out_dir, "latency.json"), "w") as f:
            json.dump(res, f, indent=1)
        print(f"[latency] wrote {os.path.join(out_dir, 'latency.json')}")
    if any(not p["ok"] for p in res.get("parts", {}).values()):
        rc = rc or 1
    return rc


if __name__ == "__main__":
    sys.exit(main())
