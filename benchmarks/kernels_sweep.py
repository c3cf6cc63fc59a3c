"""Sweep pkroof's collective kernel over CTA counts (and block sizes) on every GPU of a node.

    python3 benchmarks/kernels_sweep.py [SIZE ...] [--blocks 4096,8192,16384]   (default: 64MiB 256KiB, 4096)

One process per GPU; each configuration is timed by pkroof's own timing function (CUDA graphs, 20 samples,
slowest rank) on one fixed input; correctness is the profiler's job, not this script's. The block size is
the largest BLOCK the kernel may pick (kernels/collectives.py, MAX_BLOCK).
"""

import argparse
import os

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

KINDS = {"all-reduce": 0, "all-gather": 1, "reduce-scatter": 2, "all-to-all": 3}
CTAS = [16, 32, 64, 128, 256]


def _worker(rank: int, world: int, sizes: list[str], blocks: list[int]) -> None:
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", rank=rank, world_size=world, device_id=torch.device("cuda", rank))
    import pkroof.kernels.collectives as coll
    from pkroof.profilers.timing import time_device
    from pkroof.rooflines.units import parse_size

    rows = []
    for size in sizes:
        nbytes = parse_size(size)
        for name, kind in KINDS.items():
            numel = nbytes // 2 // (world if name == "all-gather" else 1)  # nccl-tests: all-gather's size is the output
            x = torch.randn(numel, device="cuda", dtype=torch.bfloat16)
            for push in (False, True):
                for block in blocks:
                    coll.MAX_BLOCK = block
                    for ctas in CTAS:
                        t = time_device(
                            lambda i, k=kind, x=x, p=push, c=ctas: coll.exchange(k, x, push=p, ctas=c),
                            iters=20,
                            barrier=dist.barrier,
                            group=dist.group.WORLD,
                        )
                        rows.append((size, name, "push" if push else "pull", block, ctas, t.median_s * 1e6))
    if rank == 0:
        print(f"{'size':>7} {'collective':15} {'mode':5} {'block':>6} {'ctas':>5} {'median us':>10}")
        for size, name, mode, block, ctas, us in rows:
            print(f"{size:>7} {name:15} {mode:5} {block:>6} {ctas:>5} {us:10.1f}")
    dist.destroy_process_group()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sizes", nargs="*", default=["64MiB", "256KiB"])
    parser.add_argument("--blocks", default="4096", help="comma-separated largest block sizes, in elements")
    args = parser.parse_args()
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29533")
    world = torch.cuda.device_count()
    blocks = [int(b) for b in args.blocks.split(",")]
    mp.spawn(_worker, args=(world, args.sizes, blocks), nprocs=world)
