"""The inter-SM GEMM + all-reduce's persistent Triton GEMM (kernels/inter_sm.py) alone, on one GPU, against cuBLAS.

At llama3-70b-tp8 (per rank on 2 ranks: m 8192, k 14336, n 8192) the Triton GEMM was 11% slower than
torch.matmul on all SMs, and the fused kernel 0.97x matmul + NCCL (benchmarks/kernels/2026-11-30-inter-sm-h200x2.md).
This times its variants on the CTA counts the fused kernel leaves it (every SM, minus 8, minus 16):

- tile order: row-major (GROUP 1, shipped: bands finish in order, so communication starts after one band) or
  column-major within groups of G bands (B's columns reused from L2 by G bands at once);
- tiles (BM x BN x BK x stages x warps).

Every variant is checked against torch.matmul on the same inputs first (bf16; |error| within 2% of max |C|) and
reported WRONG, not timed, if it is not. Timing: pkroof's time_device (CUDA graphs, median of 10 samples of 3
calls, inputs rotated over 3 sets); the GPU runs at its power limit during long GEMM runs, so every round times
cuBLAS again and the rounds repeat: compare within a round.

Usage: python3 benchmarks/kernels/persistent_gemm.py [m,k,n ...] [--tiles 128x256x64x4x8,...] [--groups 1,4,8]
       [--ctas-off 0,8,16] [--rounds 2]

(Call 1 of 2026-12-01's fourteenth session also timed a FLATTEN variant, the tile and k loops as one software
pipeline via tl.range(..., flatten=True): 3.2-4.4x slower than cuBLAS at every setting; removed.)
"""

from __future__ import annotations

import argparse
import itertools

import torch

from pkroof.kernels import inter_sm
from pkroof.runtime.timing import time_device


def _us(fn) -> float:
    return time_device(fn, iters=10, calls_per_sample=3).median_s * 1e6


def _ints(text: str) -> list[int]:
    return [int(v) for v in text.split(",")]


def _shape(m: int, k: int, n: int, variants: list[tuple], rounds: int, sms: int) -> None:
    """Check every variant at m x k x n, then time the correct ones beside cuBLAS, `rounds` times."""
    flops = 2 * m * n * k
    sets = [(torch.randn(m, k, device="cuda").bfloat16(), torch.randn(k, n, device="cuda").bfloat16()) for _ in "abc"]
    c = torch.empty(m, n, dtype=torch.bfloat16, device="cuda")
    ready = torch.zeros(m, dtype=torch.int32, device="cuda")  # a band counter per row is enough for any BM
    expect = torch.matmul(*sets[0]).float()
    scale = expect.abs().max().item()

    def run(i: int, v: tuple) -> None:
        tile, group, off = v
        inter_sm.gemm(*sets[i % 3], c, ready, sms - off, tile, group)

    print(f"\nm={m} k={k} n={n}: {flops / 1e12:.2f} TFLOP per GEMM", flush=True)
    good = []
    for v in variants:
        try:
            c.fill_(float("nan"))
            run(0, v)
            err = (c.float() - expect).abs().max().item()
        except Exception as e:  # a variant Triton cannot compile is reported; the others still run
            print(f"  {v}: failed: {type(e).__name__}: {str(e).splitlines()[0][:120]}", flush=True)
            continue
        if err <= 0.02 * scale:  # NaN fails too
            good.append(v)
        else:
            print(f"  {v}: WRONG (max |error| {err:.3g}, max |C| {scale:.3g})", flush=True)
    for r in range(rounds):
        t0 = _us(lambda i: torch.matmul(*sets[i % 3], out=c))
        print(f"  round {r}: {'torch.matmul':34s} {t0:8.1f} µs {flops / t0 * 1e-6:5.0f} TFLOP/s", flush=True)
        for v in good:
            t = _us(lambda i, v=v: run(i, v))
            tile, group, off = v
            name = f"{'x'.join(map(str, tile))} G{group} {sms - off:3d} CTAs"
            rate = flops / t * 1e-6
            print(f"  round {r}: {name:34s} {t:8.1f} µs {rate:5.0f} TFLOP/s  {t / t0:5.3f}x cuBLAS", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("shapes", nargs="*", default=["8192,7168,4096", "8192,14336,8192"])
    ap.add_argument("--tiles", default="128x256x64x4x8")
    ap.add_argument("--groups", type=_ints, default=[1, 4, 8])
    ap.add_argument("--ctas-off", type=_ints, default=[0, 8, 16])
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    tiles = [tuple(int(v) for v in t.split("x")) for t in args.tiles.split(",")]
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    print(f"{torch.cuda.get_device_name(0)}, {sms} SMs, torch {torch.__version__}", flush=True)
    variants = list(itertools.product(tiles, args.groups, args.ctas_off))
    for shape in args.shapes:
        _shape(*_ints(shape), variants, args.rounds, sms)


if __name__ == "__main__":
    main()
