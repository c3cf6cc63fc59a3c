"""Does the GPU-state watch (a thread reading NVML every 2 ms during the samples) change the times it records?

Runs the profiler's job for one implementation on one GPU (one NCCL rank: the whole timing path, eager, pilot and
graph samples) alternately with the watch on and off (PKROOF_GPU_STATE=0), ROUNDS times each, and prints every
median. A job is its own process, as in `pkroof profile`.

Usage: python3 benchmarks/suite/gpu_state_ab.py [SIZE ...]   (default 256KiB 64MiB; all-reduce's reference)
"""

from __future__ import annotations

import os
import statistics
import sys

from pkroof.runtime.launch import keep_multicast_off

keep_multicast_off()  # before torch

from pkroof.analysis.catalogue import load  # noqa: E402
from pkroof.profilers.run import Job, run_job  # noqa: E402
from pkroof.rooflines.units import parse_size  # noqa: E402

ROUNDS = 3


def main(sizes: list[str]) -> None:
    print("| size | watch | medians µs (graph samples, one rank) | median of medians |")
    print("|---|---|---|---|")
    for size in sizes:
        params = load("all-reduce").params(None, {"size_bytes": parse_size(size)})
        medians: dict[str, list[float]] = {"on": [], "off": []}
        for _ in range(ROUNDS):
            for state in ("on", "off"):
                os.environ["PKROOF_GPU_STATE"] = "1" if state == "on" else "0"
                r = run_job(Job("all-reduce", size, params, "reference", 1, "nccl"), timeout_s=120)
                assert r["status"] == "correct", r.get("message")
                assert ("gpu_state" in r["timing"]) == (state == "on"), state
                medians[state].append(statistics.median(r["timing"]["samples_s"]) * 1e6)
        for state, ms in medians.items():
            print(f"| {size} | {state} | {', '.join(f'{m:.2f}' for m in ms)} | {statistics.median(ms):.2f} |")


if __name__ == "__main__":
    main(sys.argv[1:] or ["256KiB", "64MiB"])
