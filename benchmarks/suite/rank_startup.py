"""How long `run_ranks` takes for a job that does nothing but one all-reduce on 2 gloo ranks: rank start-up, with
ranks from the fork server (torch imported once, as pkroof runs them) or spawned afresh (each importing torch).

    python benchmarks/suite/rank_startup.py            # fork server: 5 runs, seconds each (the first starts the server)
    python benchmarks/suite/rank_startup.py --spawn    # the same with multiprocessing's spawn context
"""

from __future__ import annotations

import multiprocessing
import sys
import time

from pkroof.runtime import launch

RUNS = 5


def rank_and_sum(rank: int, world: int) -> tuple[int, float]:
    """One rank's job: this rank and the all-reduced sum of rank + 1 over the group (1 + 2 + ... + world)."""
    import torch
    import torch.distributed as dist

    x = torch.tensor([float(rank + 1)])
    dist.all_reduce(x)
    return rank, x.item()


def main() -> int:
    if "--spawn" in sys.argv:
        launch._CONTEXT[:] = [multiprocessing.get_context("spawn")]
    for _ in range(RUNS):
        start = time.perf_counter()
        assert launch.run_ranks(rank_and_sum, 2) == [(0, 3.0), (1, 3.0)]
        print(f"{time.perf_counter() - start:.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
