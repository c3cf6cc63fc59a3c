"""What can any kernel reach when both GPUs send at once? Plain pushes, both directions together, 2 GPUs.

A collective on 2 ranks sends S/2 bytes each way at the same time (all-gather, reduce-scatter, all-to-all of S
bytes) or S bytes each way (one-shot all-reduce). This measures the plainest way to move those bytes, with no
staging, no flags and no local work: a copy of a local buffer into the peer's symmetric buffer, issued by both
ranks together, by the copy engine (`Tensor.copy_`), SM stores (the probe's copy kernel) and TMA (the probe's
TMA kernel, 64 KiB boxes), timed like the probe (CUDA graphs, a barrier before each sample, the slower rank).
The result is the per-direction ceiling the collectives should be compared with, beside the roofline's rate.

Split ways (2026-12-01, not yet run on 2 GPUs) test whether that ceiling is one mechanism's or the link's: the bytes
of one direction divided between two engines working at once, each on its own stream inside the same graph, so
their start-up costs overlap instead of adding: two copy-engine copies of half each (a second DMA may take a second
copy engine), and the copy engine beside SM stores (a fraction f by DMA, the rest by N CTAs).

Usage: python3 benchmarks/kernels/bidir_ceiling.py [MiB per direction ...]   (needs 2 GPUs; default 16 32 64 128 512)
       PKROOF_CEILING_WAYS=split  runs only the copy engine and the split ways
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable

from pkroof.runtime.launch import keep_multicast_off

keep_multicast_off()  # before torch

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.distributed._symmetric_memory as symm_mem  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402

from pkroof.runtime.timing import time_device  # noqa: E402
from pkroof.topology.copy_kernels import sm_copy, tma_copy  # noqa: E402
from pkroof.topology.presets import preset  # noqa: E402

Copy = Callable[[torch.Tensor, torch.Tensor], None]


def _dma(s: torch.Tensor, d: torch.Tensor) -> None:
    d.copy_(s)


def split(side: torch.cuda.Stream, first: Copy, second: Copy, f: float) -> Copy:
    """A copy as two parts at once: the first fraction f of the elements by `first` on the side stream, the rest
    by `second` on the calling stream; the calling stream then waits for both (also inside a graph capture)."""

    def copy(s: torch.Tensor, d: torch.Tensor) -> None:
        cut = int(s.numel() * f) // 64 * 64  # 256-byte aligned parts
        main = torch.cuda.current_stream()
        side.wait_stream(main)
        with torch.cuda.stream(side):
            first(s[:cut], d[:cut])
        second(s[cut:], d[cut:])
        main.wait_stream(side)

    return copy


def _rank(rank: int, sizes_mib: list[int]) -> None:
    torch.cuda.set_device(rank)
    dist.init_process_group(
        "nccl", init_method="tcp://127.0.0.1:29581", rank=rank, world_size=2, device_id=torch.device("cuda", rank)
    )
    n_max = max(sizes_mib) << 18  # int32 elements
    buf = symm_mem.empty(n_max, dtype=torch.int32, device="cuda")
    handle = symm_mem.rendezvous(buf, dist.group.WORLD.group_name)
    peer = handle.get_buffer(1 - rank, (n_max,), torch.int32)
    src = torch.arange(n_max, dtype=torch.int32, device="cuda") + rank * 7
    sms = torch.cuda.get_device_properties(rank).multi_processor_count
    token = torch.zeros(1, device="cuda")

    def barrier() -> None:
        dist.all_reduce(token)

    side = torch.cuda.Stream()
    ways = {
        "copy engine": _dma,
        "2 copy-engine halves": split(side, _dma, _dma, 0.5),
        "CE 1/2 + SM 66 CTAs": split(side, _dma, lambda s, d: sm_copy(s, d, 66), 0.5),
        "CE 3/4 + SM 32 CTAs": split(side, _dma, lambda s, d: sm_copy(s, d, 32), 0.75),
        f"SM stores ({sms} CTAs)": lambda s, d: sm_copy(s, d, sms),
        "SM stores (64 CTAs)": lambda s, d: sm_copy(s, d, 64),
        f"TMA ({sms} CTAs)": lambda s, d: tma_copy(s, d, sms),
    }
    if os.environ.get("PKROOF_CEILING_WAYS") == "split":
        ways = {k: v for k, v in ways.items() if k == "copy engine" or "+" in k or "halves" in k}
    # the roofline's link rate: the best peak of any mechanism (rooflines/bound.py, _link_floor)
    roof = max(m.peak_bandwidth_Bps for m in preset("h200x2").mechanisms.values() if m.available)
    if rank == 0:
        print(f"roofline's link rate (h200x2 preset): {roof / 1e9:.1f} GB/s per direction", flush=True)
        print(f"{'MiB each way':>12s}  {'mechanism':22s} {'µs':>8s} {'GB/s each way':>14s} {'% roof':>7s}  check")
    for mib in sizes_mib:
        n = mib << 18
        for name, copy in ways.items():
            buf.fill_(-1)
            torch.cuda.synchronize()
            dist.barrier()
            s, d = src[:n], peer[:n]
            t = time_device(
                lambda i, s=s, d=d, c=copy: c(s, d), iters=10, warmup=2, barrier=barrier, group=dist.group.WORLD
            )
            torch.cuda.synchronize()
            dist.barrier()
            expect = torch.arange(n, dtype=torch.int32, device="cuda") + (1 - rank) * 7
            ok = torch.tensor([int(torch.equal(buf[:n], expect))], device="cuda")
            dist.all_reduce(ok, op=dist.ReduceOp.MIN)
            if rank == 0:
                rate = (n * 4) / t.median_s
                print(
                    f"{mib:12d}  {name:22s} {t.median_s * 1e6:8.1f} {rate / 1e9:14.1f} {100 * rate / roof:6.1f}%  "
                    f"{'ok' if ok.item() else 'WRONG'}",
                    flush=True,
                )
    dist.barrier()
    os._exit(0)


if __name__ == "__main__":
    mp.spawn(_rank, args=([int(a) for a in sys.argv[1:]] or [16, 32, 64, 128, 512],), nprocs=2)
