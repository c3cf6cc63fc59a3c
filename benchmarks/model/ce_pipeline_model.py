"""A fluid model of the copy-engine pipeline: what chunking costs on one copy stream or two (no GPU; a model, not
a measurement).

Per peer, S MiB are cut into chunks (kernels/copy_engine.py's halving schedule, or equal chunks); chunk i's DMA
runs on copy stream i mod k. The link (397 GB/s, the h200x2 roofline's rate) is shared evenly by the DMAs moving
bytes at the moment; each DMA first sits idle for ALPHA (the copy engine's start-up: 2.75-2.88 µs per chunk over
NVLink, benchmarks/kernels/2026-11-30-gemm-rates-h200x2.md §4). The calling stream finishes chunk i (at LOCAL_SPEEDUP
times the link's rate) once it has landed and chunk i-1 is finished. Printed: when the last DMA lands and when
the last chunk is finished, against the link alone (S at 397 GB/s).

Usage: python3 benchmarks/model/ce_pipeline_model.py [MiB per peer ...]   (default 32 64 128 256 512)
"""

from __future__ import annotations

import sys

ALPHA_US = 2.8
LINK = 397e9 / 2**20 / 1e6  # MiB per µs
LOCAL_SPEEDUP = 7.0  # the local copy-out or add against the link (SM copies at ~2.8 TB/s of traffic)
TAIL_MIB, MAX_CHUNK_MIB = 4, 64


def simulate(sizes: list[float], streams: int) -> tuple[float, float]:
    """(µs when the last DMA has landed, µs when the last chunk is finished)."""
    queues = [[(i, s) for i, s in enumerate(sizes) if i % streams == q] for q in range(streams)]
    active: dict[int, list[float]] = {}  # stream -> [chunk, MiB left, idle µs left]
    landed: dict[int, float] = {}
    t = 0.0

    def start(q: int) -> None:
        if queues[q]:
            i, s = queues[q].pop(0)
            active[q] = [i, s, ALPHA_US]

    for q in range(streams):
        start(q)
    while active:
        moving = [q for q, a in active.items() if a[2] <= 0]
        rate = LINK / len(moving) if moving else 0.0
        dt = min([a[2] for a in active.values() if a[2] > 0] + [active[q][1] / rate for q in moving])
        t += dt
        for q, a in list(active.items()):
            if a[2] > 0:
                a[2] = max(0.0, a[2] - dt)
            else:
                a[1] -= rate * dt
                if a[1] <= 1e-9:
                    landed[int(a[0])] = t
                    del active[q]
                    start(q)
    done = 0.0
    for i, s in enumerate(sizes):
        done = max(done, landed[i]) + s / (LINK * LOCAL_SPEEDUP)
    return max(landed.values()), done


def halving(total: float) -> list[float]:
    out, left, size = [], total, float(TAIL_MIB)
    while left > 0:
        out.append(min(size, left))
        left -= out[-1]
        size = min(2 * size, MAX_CHUNK_MIB)
    return out[::-1]


def equal(total: float, chunk: float) -> list[float]:
    n = int(-(-total // chunk))
    return [total / n] * n


def main(totals: list[float]) -> None:
    print(f"# fluid model: link {LINK * 2**20 * 1e6 / 1e9:.0f} GB/s shared, alpha {ALPHA_US} µs per DMA, "
          f"local work {LOCAL_SPEEDUP:g}x the link")  # fmt: skip
    print("| MiB per peer | chunks | copy streams | DMAs landed µs | finished µs | over the link alone µs |")
    print("|---|---|---|---|---|---|")
    for total in totals:
        link_us = total / LINK
        for name, sizes in (("halving", halving(total)), ("equal 16 MiB", equal(total, 16)), ("one", [total])):
            for streams in (1, 2) if len(sizes) > 1 else (1,):
                landed, done = simulate(sizes, streams)
                print(f"| {total:g} | {name} ({len(sizes)}) | {streams} | {landed:.1f} | {done:.1f} | "
                      f"{done - link_us:+.1f} |")  # fmt: skip


if __name__ == "__main__":
    main([float(a) for a in sys.argv[1:]] or [32, 64, 128, 256, 512])
