"""Where does a copy-engine collective's time go? A GPU timeline of one call per collective, 2 GPUs.

Runs pkroof's pipelined copy-engine collectives (kernels/copy_engine.py) a few times, then records one call of
each under torch.profiler (CUDA activity only) after a barrier, and prints rank 0's GPU events of that call in
start order: stream, start and end relative to the first event (µs), and what ran (DMA or kernel). The chrome
traces are written to OUT (default: current folder) as ce-<collective>-rank<r>.json.

Usage: python3 benchmarks/kernels/ce_timeline.py [SIZE] [OUT]   (needs 2 GPUs; SIZE default 64MiB, nccl-tests
convention)
"""

from __future__ import annotations

import json
import os
import sys

from pkroof.runtime.launch import keep_multicast_off

keep_multicast_off()  # before torch

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402
from torch.profiler import ProfilerActivity, profile  # noqa: E402

import pkroof.kernels.copy_engine as ce  # noqa: E402
from pkroof.kernels.symm import workspace  # noqa: E402
from pkroof.rooflines.units import parse_size  # noqa: E402

GPU_CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset")


def _events(path: str) -> list[dict]:
    with open(path) as f:
        trace = json.load(f)
    return sorted((e for e in trace["traceEvents"] if e.get("cat") in GPU_CATEGORIES), key=lambda e: e["ts"])


def _show(name: str, events: list[dict]) -> None:
    t0 = events[0]["ts"]
    end = max(e["ts"] + e["dur"] for e in events)
    print(f"== {name}: {end - t0:.1f} µs from first to last GPU event (rank 0)")
    for e in events:
        what = "DMA " if e["cat"] == "gpu_memcpy" else "    "
        args = e.get("args", {})
        moved = f" {args['bytes'] / 2**20:.0f} MiB" if "bytes" in args else ""
        label = e["name"][:60]
        print(f"  stream {e['tid']!s:>4s} {e['ts'] - t0:8.1f} → {e['ts'] + e['dur'] - t0:8.1f}  {what}{label}{moved}")


def _rank(rank: int, nbytes: int, out: str) -> None:
    torch.cuda.set_device(rank)
    dist.init_process_group(
        "nccl", init_method="tcp://127.0.0.1:29583", rank=rank, world_size=2, device_id=torch.device("cuda", rank)
    )
    workspace()
    fns = {
        "all-reduce": (ce.all_reduce_ce, nbytes // 2),
        "all-gather": (ce.all_gather_ce, nbytes // 4),
        "reduce-scatter": (ce.reduce_scatter_ce, nbytes // 2),
        "all-to-all": (ce.all_to_all_ce, nbytes // 2),
    }
    for name, (fn, numel) in fns.items():
        x = torch.randn(numel, device="cuda", dtype=torch.bfloat16)
        for _ in range(3):
            fn(x)
        torch.cuda.synchronize()
        dist.barrier()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            fn(x)
            torch.cuda.synchronize()
        path = os.path.join(out, f"ce-{name}-rank{rank}.json")
        prof.export_chrome_trace(path)
        dist.barrier()
        if rank == 0:
            _show(f"{name} {nbytes >> 20} MiB", _events(path))
    dist.barrier()
    os._exit(0)


if __name__ == "__main__":
    size = parse_size(sys.argv[1]) if len(sys.argv) > 1 else 64 << 20
    mp.spawn(_rank, args=(size, sys.argv[2] if len(sys.argv) > 2 else "."), nprocs=2)
