"""Seeded generators for problems' inputs, on the device the inputs will live on.

Drawing on the GPU keeps large inputs cheap: the profiler draws six input sets per implementation (three
correctness trials, three timed sets), and drawn on the host the 1 GiB collectives did not get past their
first implementation in 60 s on the 2xH200 node (benchmarks/kernels/2026-11-30-gemm-rates-h200x2.md, §3).
"""

from __future__ import annotations

import torch


def generator(device: torch.device | str, seed: int) -> torch.Generator | None:
    """A generator on `device` seeded with `seed`; None on the meta device (tracing: shapes, no values)."""
    device = torch.device(device)
    return None if device.type == "meta" else torch.Generator(device=device).manual_seed(seed)
