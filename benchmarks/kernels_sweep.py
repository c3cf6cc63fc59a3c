"""Sweep pkroof's collective kernel over CTA counts on 2 GPUs: which grid each (collective, pull|push) wants.

    python3 benchmarks/kernels_sweep.py [sizes...]     (default: 64MiB 256KiB)

One process per GPU; each configuration is timed by pkroof's own timing function (CUDA graphs, 20 samples,
slowest rank) on one fixed input; correctness is the profiler's job, not this script's.
"""

import os
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

KINDS = {"all-reduce": 0, "all-gather": 1, "reduce-scatter": 2, "all-to-all": 3}
CTAS = [16, 32, 64, 128, 256]


def _size(text: str) -> int:
    units = {"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}
    for u, f in units.items():
        if text.endswith(u):
            return int(text[: -len(u)]) * f
    return int(text)


def _worker(rank: int, world: int, sizes: list[str]) -> None:
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", rank=rank, world_size=world, device_id=torch.device("cuda", rank))
    from pkroof.kernels.collectives import exchange
    from pkroof.profilers.timing import time_device

    rows = []
    for size in sizes:
        nbytes = _size(size)
        for name, kind in KINDS.items():
            numel = nbytes // 2 // (world if name == "all-gather" else 1)  # nccl-tests: all-gather's size is the output
            x = torch.randn(numel, device="cuda", dtype=torch.bfloat16)
            for push in (False, True):
                for ctas in CTAS:
                    t = time_device(
                        lambda i, k=kind, x=x, p=push, c=ctas: exchange(k, x, push=p, ctas=c),
                        iters=20,
                        barrier=dist.barrier,
                        group=dist.group.WORLD,
                    )
                    rows.append((size, name, "push" if push else "pull", ctas, t.median_s * 1e6))
    if rank == 0:
        print(f"{'size':>7} {'collective':15} {'mode':5} {'ctas':>5} {'median us':>10}")
        for size, name, mode, ctas, us in rows:
            print(f"{size:>7} {name:15} {mode:5} {ctas:>5} {us:10.1f}")
    dist.destroy_process_group()


if __name__ == "__main__":
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29533")
    world = torch.cuda.device_count()
    mp.spawn(_worker, args=(world, sys.argv[1:] or ["64MiB", "256KiB"]), nprocs=world)
