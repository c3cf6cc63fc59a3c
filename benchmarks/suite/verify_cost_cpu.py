"""What checking every timed sample costs in wall time on CPU ranks (issue 25): the timing phase of one job, as
pkroof profile runs it now (each sample's inputs refilled with fresh values, the reference run on them and the
outputs compared, all outside the timed region) against the loop it replaced (2 warm-up calls, then 20 samples of
one call on 3 input sets drawn once, nothing compared), in the same 2 gloo ranks, alternating, REPEATS times.

    python benchmarks/suite/verify_cost_cpu.py          # prints one line per problem: median seconds, old and new
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

REPEATS = 5
HERE = Path(__file__).resolve().parents[2]
CASES = [  # (problem, params)
    (str(HERE / "tests/data/problems/user_gemm_all_reduce.py"), {"m": 64, "n": 32, "k": 16}),
    (str(HERE / "tests/data/problems/user_gemm_all_reduce.py"), {"m": 1024, "n": 1024, "k": 256}),
    ("all-reduce", {"size_bytes": 1 << 20}),
    ("all-reduce", {"size_bytes": 16 << 20}),
]


def _old(problem, impl, job, rank, device) -> None:
    import torch.distributed as dist

    from pkroof.profilers.sampling import INPUT_SETS, ITERS

    sets = [
        problem.inputs(rank, job.world_size, seed=job.seed + 10_000 + s, device=device, params=job.params)
        for s in range(INPUT_SETS)
    ]
    for i in range(2):
        impl(*sets[i % INPUT_SETS])
    for i in range(ITERS):
        dist.barrier()
        impl(*sets[i % INPUT_SETS])


def _rank(rank: int, world: int, name: str, params: dict) -> list[tuple[float, float]]:
    import torch

    from pkroof.analysis.catalogue import load
    from pkroof.profilers.run import Job
    from pkroof.profilers.sampling import Sampler, time_cpu

    problem = load(name)
    job = Job(name, "bench", params, "reference", world, "gloo")
    device = torch.device("cpu")
    out = []
    for _ in range(REPEATS):
        start = time.perf_counter()
        _old(problem, problem.reference, job, rank, device)
        old = time.perf_counter() - start
        start = time.perf_counter()
        time_cpu(Sampler(problem, problem.reference, job, rank, device))
        out.append((old, time.perf_counter() - start))
    return out


def main() -> int:
    from pkroof.runtime.launch import run_ranks

    for name, params in CASES:
        times = run_ranks(_rank, 2, (name, params), timeout_s=600)[0]
        old = statistics.median(t[0] for t in times)
        new = statistics.median(t[1] for t in times)
        label = f"{Path(name).stem} {params}"
        print(f"{label:60} old {old * 1e3:8.1f} ms   new {new * 1e3:8.1f} ms   +{(new - old) * 1e3:7.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
