"""What a copy-engine DMA costs per call, and what SM work beside it costs it: chunked copies on one or two streams.

The copy-engine collectives (kernels/copy_engine.py) cut their transfers into chunks on one copy stream, and every
chunk after the first has cost about the copy engine's α on 2xH200 (2.75-2.88 µs,
benchmarks/kernels/2026-11-30-gemm-rates-h200x2.md §4): a DMA on a stream starts only once the one before it has
finished. This measures, for one buffer of S
bytes copied by `Tensor.copy_` (a DMA):

- `one`: a single copy;
- `1 stream`: n equal chunks one after another on one stream;
- `2 streams`: the same chunks alternating between two streams, with no order between the streams (two DMAs in
  flight at once, so one stream's start-up overlaps the other's transfer);
- `staggered`: two streams again, the first chunk half the size of the others, so the streams' chunk boundaries
  fall at different moments;
- `beside SM copy`: the single copy while an SM copy kernel (the probe's, `ctas` CTAs) moves S bytes between two
  other buffers on another stream: the time of both together, against each alone.

With two GPUs the destination is GPU 1's memory (a peer DMA over NVLink, what the collectives do); with one it is
local (HBM to HBM), which shows the per-call cost but not the link's. Each variant is timed by pkroof's timing
function (runtime/timing.py): captured in a CUDA graph, replayed from an idle device, median of 20 after 3.

Usage: python3 benchmarks/kernels/ce_alpha.py [MiB ...]   (default 16 64 128)
"""

from __future__ import annotations

import itertools
import sys
from collections.abc import Callable

from pkroof.runtime.launch import keep_multicast_off

keep_multicast_off()  # before torch (nothing here uses NCCL or symmetric memory; the rule holds anyway)

import torch  # noqa: E402

from pkroof.runtime.timing import time_device  # noqa: E402
from pkroof.topology.copy_kernels import sm_copy  # noqa: E402

REPLAYS, WARMUP = 20, 3


def _time(fn: Callable[[], None]) -> float:
    """Median seconds of fn, captured in a CUDA graph and replayed, each sample from an idle device."""
    timing = time_device(lambda i: fn(), iters=REPLAYS, warmup=WARMUP, barrier=torch.cuda.synchronize)
    return timing.median_s


def _on_streams(pieces: list[tuple[int, int]], src: torch.Tensor, dst: torch.Tensor, streams: int) -> Callable:
    """Copy src[lo:hi] to dst[lo:hi] for every piece, piece i on stream i % streams, then join."""
    side = [torch.cuda.Stream() for _ in range(streams)]

    def run() -> None:
        main = torch.cuda.current_stream()
        for s in side:
            s.wait_stream(main)
        for i, (lo, hi) in enumerate(pieces):
            with torch.cuda.stream(side[i % streams]):
                dst[lo:hi].copy_(src[lo:hi])
        for s in side:
            main.wait_stream(s)

    return run


def _equal(n_elem: int, n: int) -> list[tuple[int, int]]:
    step = -(-n_elem // n)
    return [(lo, min(lo + step, n_elem)) for lo in range(0, n_elem, step)]


def _staggered(n_elem: int, n: int) -> list[tuple[int, int]]:
    step = -(-n_elem // n)
    cuts = [0, step // 2, *range(step // 2 + step, n_elem, step), n_elem]
    return [(lo, hi) for lo, hi in itertools.pairwise(cuts) if hi > lo]


def _beside(src: torch.Tensor, dst: torch.Tensor, a: torch.Tensor, b: torch.Tensor, ctas: int) -> Callable:
    side = torch.cuda.Stream()

    def run() -> None:
        main = torch.cuda.current_stream()
        side.wait_stream(main)
        with torch.cuda.stream(side):
            dst.copy_(src)
        sm_copy(a, b, ctas)
        main.wait_stream(side)

    return run


def _size(mib: int, peer: bool) -> None:
    n_elem = mib << 18  # int32
    src = torch.randint(0, 1 << 30, (n_elem,), dtype=torch.int32, device="cuda:0")
    dst = torch.empty(n_elem, dtype=torch.int32, device="cuda:1" if peer else "cuda:0")
    a = torch.randint(0, 1 << 30, (n_elem,), dtype=torch.int32, device="cuda:0")
    b = torch.empty_like(a)

    def row(variant: str, chunks: int, t: float, base: float) -> None:
        gbps = (mib << 20) / t / 1e9
        print(f"| {mib} | {variant} | {chunks} | {t * 1e6:.1f} | {gbps:.0f} | {(t - base) * 1e6:+.1f} |")

    one = _time(lambda: dst.copy_(src))
    row("one", 1, one, one)
    for n in (2, 4, 8, 16):
        for variant, pieces, streams in (
            ("1 stream", _equal(n_elem, n), 1),
            ("2 streams", _equal(n_elem, n), 2),
            ("staggered", _staggered(n_elem, n), 2),
        ):
            dst.zero_()
            t = _time(_on_streams(pieces, src, dst, streams))
            row(variant, len(pieces), t, one)
            assert torch.equal(dst.cpu(), src.cpu()), f"{variant} {n}: copy incorrect"
    for ctas in (8, 32, 132):
        sm_alone = _time(lambda: sm_copy(a, b, ctas))  # noqa: B023 (timed before the loop moves on)
        both = _time(_beside(src, dst, a, b, ctas))
        print(
            f"| {mib} | beside SM copy, {ctas} CTAs | 1 | {both * 1e6:.1f} | — | {(both - one) * 1e6:+.1f} "
            f"(SM copy alone {sm_alone * 1e6:.1f} µs) |"
        )


def main(sizes_mib: list[int]) -> None:
    peer = torch.cuda.device_count() >= 2
    where = "GPU 0 -> GPU 1 (peer DMA)" if peer else "GPU 0 -> GPU 0 (local DMA)"
    print(f"# ce_alpha: {torch.cuda.get_device_name(0)}, {where}, torch {torch.__version__}")
    print("| MiB | variant | chunks | µs | GB/s | µs over one copy |")
    print("|---|---|---|---|---|---|")
    for mib in sizes_mib:
        _size(mib, peer)
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main([int(s) for s in sys.argv[1:]] or [16, 64, 128])
