"""Why does the probe time small NCCL all-reduces slower than a plain loop? An A/B on 2 GPUs, 4 KiB and 64 KiB.

a: plain loop: host dist.barrier() (which synchronizes), events around one replay of a 20-call graph.
b: pkroof's time_device as the probe calls it: a device-side all-reduce as barrier, samples queued back to back.
c: as b, but the host synchronizes after every sample (so eager and graph NCCL work never queue together).
d: as b, with values that stay finite (x is zeros, so repeated sums never overflow to inf).
Usage: python3 benchmarks/probe/nccl_small_ab.py (needs 2 GPUs; imports pkroof's timing function)
"""

from __future__ import annotations

import os
import statistics

from pkroof.runtime.launch import keep_multicast_off

keep_multicast_off()  # before torch

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402

from pkroof.runtime.timing import time_device  # noqa: E402

CALLS = 20


def _plain(x: torch.Tensor) -> float:
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(CALLS):
            dist.all_reduce(x)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(CALLS):
            dist.all_reduce(x)
    samples = []
    for _ in range(12):
        dist.barrier()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        torch.cuda.synchronize()
        samples.append(start.elapsed_time(end) * 1e-3 / CALLS)
    return statistics.median(samples[2:])


def _probe_like(x: torch.Tensor, *, sync_each: bool) -> float:
    token = torch.zeros(1, device="cuda")

    def barrier() -> None:
        if sync_each:
            torch.cuda.synchronize()
        dist.all_reduce(token)
        if sync_each:
            torch.cuda.synchronize()

    t = time_device(
        lambda i: dist.all_reduce(x),
        iters=10,
        warmup=2,
        calls_per_sample=CALLS,
        barrier=barrier,
        group=dist.group.WORLD,
    )
    return t.median_s


def _rank(rank: int) -> None:
    torch.cuda.set_device(rank)
    dist.init_process_group(
        "nccl", init_method="tcp://127.0.0.1:29577", rank=rank, world_size=2, device_id=torch.device("cuda", rank)
    )
    for size in (4096, 65536):
        n = size // 2
        rows = {
            "a plain loop": _plain(torch.ones(n, dtype=torch.bfloat16, device="cuda")),
            "b time_device": _probe_like(torch.ones(n, dtype=torch.bfloat16, device="cuda"), sync_each=False),
            "c time_device, sync per sample": _probe_like(
                torch.ones(n, dtype=torch.bfloat16, device="cuda"), sync_each=True
            ),
            "d time_device, finite values": _probe_like(
                torch.zeros(n, dtype=torch.bfloat16, device="cuda"), sync_each=False
            ),
            "a plain loop again": _plain(torch.ones(n, dtype=torch.bfloat16, device="cuda")),
        }
        for name, seconds in rows.items():
            t = torch.tensor([seconds], device="cuda")
            dist.all_reduce(t, op=dist.ReduceOp.MAX)
            if rank == 0:
                print(f"{size:>6d} B  {name:32s} {t.item() * 1e6:7.2f} µs per all-reduce", flush=True)
    dist.barrier()
    os._exit(0)


if __name__ == "__main__":
    mp.spawn(_rank, nprocs=2)
