"""What the probe measures: sizes, CTA counts, samples, and which GPU pairs meet in which round.

Torch-free on purpose: the parent process imports this, never torch, so it starts quickly.
"""

from __future__ import annotations

from dataclasses import dataclass

KiB, MiB = 1024, 1024**2


@dataclass(frozen=True)
class Plan:
    sizes: tuple[int, ...]  # size sweeps, bytes
    ctas: tuple[int, ...]  # CTA sweeps (capped at the SM count)
    cta_sweep_bytes: int
    samples: int
    warmup: int
    matmul_n: int
    sustain_s: float  # back-to-back matmuls before the sustained rate is timed
    pingpong_iters: int
    collectives: tuple[str, ...]
    bidirectional: bool
    matmul_dtypes: tuple[str, ...]


def make_plan(*, quick: bool) -> Plan:
    if quick:
        return Plan(
            sizes=(4 * KiB, 1 * MiB, 64 * MiB),
            ctas=(1, 8, 32),
            cta_sweep_bytes=64 * MiB,
            samples=5,
            warmup=1,
            matmul_n=4096,
            sustain_s=0.2,
            pingpong_iters=200,
            collectives=("all-reduce",),
            bidirectional=False,
            matmul_dtypes=("bf16",),
        )
    return Plan(
        sizes=tuple(4 * KiB * 4**i for i in range(10)),  # 4 KiB … 1 GiB
        ctas=(1, 2, 4, 8, 12, 16, 24, 32, 48, 64, 96),
        cta_sweep_bytes=256 * MiB,
        samples=10,
        warmup=2,
        matmul_n=8192,
        sustain_s=1.0,
        pingpong_iters=1000,
        collectives=("all-reduce", "all-gather", "reduce-scatter", "all-to-all", "send-recv"),
        bidirectional=True,
        matmul_dtypes=("bf16", "fp16", "fp8", "tf32", "fp32"),
    )


def calls_per_sample(size_bytes: int) -> int:
    """Back-to-back calls captured per timed sample: enough device work that host launch gaps vanish."""
    return 1 if size_bytes >= 16 * MiB else 10 if size_bytes >= 1 * MiB else 20


def pair_rounds(n: int) -> list[list[tuple[int, int]]]:
    """Every pair of n GPUs exactly once, in n−1 rounds (n rounds if n is odd) of disjoint pairs.

    The circle method: fix GPU 0 (or a bye when n is odd), rotate the others. Within a round every GPU is in
    at most one pair, so the pairs of a round run at once: on 8 GPUs, 7 rounds of 4 concurrent pairs.
    """
    slots: list[int | None] = list(range(n)) + ([None] if n % 2 else [])
    m = len(slots)
    rounds = []
    for _ in range(m - 1):
        pairs = [(slots[i], slots[m - 1 - i]) for i in range(m // 2)]
        rounds.append([(min(a, b), max(a, b)) for a, b in pairs if a is not None and b is not None])
        slots = [slots[0], slots[-1], *slots[1:-1]]
    return rounds
