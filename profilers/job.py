"""One job of `pkroof profile`: a (problem, shape, implementation) on a number of ranks, with the knobs asked for."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Job:
    problem: str  # suite name or file path
    shape: str
    params: dict[str, Any]
    impl: str  # "reference" or "path/to/file.py:function"
    world_size: int
    backend: str  # "nccl" or "gloo"
    seed: int = 0
    extra: dict[str, Any] = field(default_factory=dict)
    dtype: str | None = None  # `--dtype`: the inputs of the problem's own floating dtype cast to this one
    iters: int | None = None  # `--iters`: timed samples (None: ITERS)
    warmup: int | None = None  # `--warmup`: untimed samples first (None: the timing function's own)
    rtol: float | None = None  # `--rtol`, `--atol`: every floating output's tolerance (None: TOLERANCES')
    atol: float | None = None
