"""Does the host skew between ranks inflate the profiler's small-collective times? An A/B on the GPUs of one node.

Every configuration is timed by pkroof's time_device as the profiler calls it (CUDA graph of 3 calls rotating
over 3 inputs, 20 samples, the slowest rank per sample), three ways, interleaved, `--repeats` times:

  before   the host synchronizes after the barrier, then each rank's host queues its sample on its own: the GPUs
           start the sample when their hosts get there (profilers/timing.py up to 2026-11-30, fourth session; runtime/timing.py now)
  aligned  the barrier releases every GPU at once and a spin on the GPU holds it while its host queues the sample
           (runtime/timing.py now)
  20 calls as aligned, 20 calls per sample: whatever skew is left is spread over 20 calls

If `before` is slower than `aligned` and `aligned` matches `20 calls`, the skew was in the numbers.
NCCL is called as nccl-tests calls it (all-reduce in place), not through the suite's reference (which clones first).
Usage: python3 benchmarks/suite/timing_align_ab.py [SIZE ...] [--repeats N]   (default 256KiB 1MiB, 3 repeats)
"""

from __future__ import annotations

import argparse
import os
import statistics

from pkroof.runtime.launch import keep_multicast_off

keep_multicast_off()  # before torch

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402

import pkroof.runtime.timing as timing  # noqa: E402
from pkroof.kernels.settings import setting  # noqa: E402
from pkroof.kernels.symm_collectives import exchange  # noqa: E402
from pkroof.rooflines.units import parse_size  # noqa: E402

KINDS = {"all-reduce": 0, "all-gather": 1, "reduce-scatter": 2, "all-to-all": 3}
SETS = 3


def _nccl(kind: str, x: torch.Tensor, world: int) -> torch.Tensor:
    if kind == "all-reduce":
        dist.all_reduce(x)
        return x
    if kind == "all-gather":
        out = x.new_empty(x.numel() * world)
        dist.all_gather_into_tensor(out, x)
        return out
    if kind == "reduce-scatter":
        out = x.new_empty(x.numel() // world)
        dist.reduce_scatter_tensor(out, x)
        return out
    out = torch.empty_like(x)
    dist.all_to_all_single(out, x)
    return out


def _median_us(fn, mode: str) -> float:
    token = torch.zeros(1, device="cuda")
    calls = 20 if mode == "20 calls" else SETS

    def barrier() -> None:
        dist.all_reduce(token)
        if mode == "before":
            torch.cuda.synchronize()

    hold = timing.HOLD_CYCLES
    timing.HOLD_CYCLES = 0 if mode == "before" else hold
    try:
        t = timing.time_device(fn, iters=20, calls_per_sample=calls, barrier=barrier, group=dist.group.WORLD)
    finally:
        timing.HOLD_CYCLES = hold
    return t.median_s * 1e6


def _rank(rank: int, world: int, sizes: list[str], repeats: int) -> None:
    torch.cuda.set_device(rank)
    dist.init_process_group(
        "nccl", init_method="tcp://127.0.0.1:29583", rank=rank, world_size=world, device_id=torch.device("cuda", rank)
    )
    modes = ("before", "aligned", "20 calls")
    ctas = setting("PKROOF_CTAS_STORE")  # the push collectives' CTAs, as the built-ins read them
    if rank == 0:
        print(f"{'size':>8} {'collective':<15} {'impl':<7} " + " ".join(f"{m + ' (µs)':>26}" for m in modes))
    for size in sizes:
        nbytes = parse_size(size)
        for kind, code in KINDS.items():
            numel = nbytes // 2 // (world if kind == "all-gather" else 1)  # all-gather: size is the output
            xs = [torch.randn(numel, device="cuda", dtype=torch.bfloat16) for _ in range(SETS)]
            impls = {
                "nccl": lambda i, k=kind, xs=xs: _nccl(k, xs[i % SETS], world),  # all-reduce in place
                "pkroof": lambda i, c=code, xs=xs: exchange(c, xs[i % SETS], push=True, ctas=ctas),
            }
            for name, fn in impls.items():
                got = {m: [] for m in modes}
                for _ in range(repeats):  # interleaved, so drift over time hits every mode alike
                    for m in modes:
                        got[m].append(_median_us(fn, m))
                if rank == 0:
                    cells = [
                        f"{statistics.median(v):7.2f} [{min(v):6.2f}-{max(v):6.2f}]".rjust(26) for v in got.values()
                    ]
                    print(f"{size:>8} {kind:<15} {name:<7} " + " ".join(cells), flush=True)
    dist.barrier()
    os._exit(0)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("sizes", nargs="*", default=["256KiB", "1MiB"])
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args()
    n = torch.cuda.device_count()
    mp.spawn(_rank, args=(n, a.sizes, a.repeats), nprocs=n)
