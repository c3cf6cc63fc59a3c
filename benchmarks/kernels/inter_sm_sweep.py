"""GEMM + all-reduce inter-SM (kernels/inter_sm.py) on the GPUs of one node: its GEMM alone, then the whole thing.

1. The persistent Triton GEMM alone on each GPU against torch.matmul (cuBLAS), per tile and CTA count: what the
   GEMM loses by leaving SMs to communication, and by being Triton's.
2. The fused kernel per communication-CTA count and tile, checked against matmul + NCCL all-reduce on fresh
   inputs first (wrong results are printed as such, not timed), then timed beside matmul + NCCL.
Timing: pkroof's time_device (CUDA graphs, a barrier before each sample, the slowest rank; 3 calls per sample).

Usage: python3 benchmarks/kernels/inter_sm_sweep.py [SHAPE] [--comm 8,16,32] [--tiles 128x256x64x3x8,...] [--blocks
16384]
       [--warps 8,16,32] [--groups 1,8] [--gemm-only]
       (SHAPE: a gemm-all-reduce suite shape, default llama3-8b-tp2; needs every GPU of the node)
"""

from __future__ import annotations

import argparse
import itertools
import os

from pkroof.runtime.launch import keep_multicast_off

keep_multicast_off()  # before torch

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402

from pkroof.kernels import inter_sm  # noqa: E402
from pkroof.kernels.settings import setting  # noqa: E402
from pkroof.runtime.timing import time_device  # noqa: E402


def _us(fn, *, group=None) -> float:
    token = torch.zeros(1, device="cuda")
    barrier = (lambda: dist.all_reduce(token)) if group is not None else None
    return time_device(fn, iters=10, calls_per_sample=3, barrier=barrier, group=group).median_s * 1e6


def _rank(rank: int, world: int, shape: str, comms: list[int], tiles: list[tuple], blocks: list[int],
          warps: list[int], groups: list[int], gemm_only: bool):  # fmt: skip
    torch.cuda.set_device(rank)
    dist.init_process_group(
        "nccl", init_method="tcp://127.0.0.1:29585", rank=rank, world_size=world, device_id=torch.device("cuda", rank)
    )
    from pkroof.kernels.problems import gemm_all_reduce as problem

    dims = problem.SHAPES[shape]
    sms = torch.cuda.get_device_properties(rank).multi_processor_count
    show = print if rank == 0 else (lambda *a, **k: None)
    sets = [problem.inputs(rank, world, seed=s, device="cuda", **dims) for s in range(3)]
    m, k, n = dims["tokens"], sets[0][0].shape[1], dims["out_features"]
    flops = 2 * m * n * k
    show(f"{shape}: m={m} k={k} n={n} on {world} ranks, {sms} SMs")
    c = torch.empty(m, n, dtype=torch.bfloat16, device="cuda")
    t = _us(lambda i: torch.matmul(*sets[i % 3], out=c))
    show(f"  torch.matmul                 {t:8.1f} µs  {flops / t * 1e-6:6.0f} TFLOP/s")
    ready = torch.zeros(m, dtype=torch.int32, device="cuda")
    for tile, g in itertools.product(tiles, groups):
        for ctas in sorted({sms, 128, sms - 8, sms - 16}, reverse=True):
            t = _us(lambda i, tile=tile, ctas=ctas, g=g: inter_sm.gemm(*sets[i % 3], c, ready, ctas, tile, g))
            name = f"{'x'.join(map(str, tile))} G{g}"
            show(f"  triton {name:<16} {ctas:3d} CTAs {t:8.1f} µs  {flops / t * 1e-6:6.0f} TFLOP/s")
    if gemm_only:
        dist.barrier()
        os._exit(0)
    group = dist.group.WORLD
    ref = problem.reference(*sets[0])  # matmul + NCCL all-reduce
    t_ref = _us(lambda i: problem.reference(*sets[i % 3]), group=group)
    show(f"  matmul + NCCL all-reduce     {t_ref:8.1f} µs")
    for tile, g, comm, block, warp in itertools.product(tiles, groups, comms, blocks, warps):
        # the kernel's launch settings, read when it runs (kernels/settings.py)
        os.environ.update(
            {
                "PKROOF_INTER_SM_TILE": ",".join(map(str, tile)),
                "PKROOF_INTER_SM_GROUP": str(g),
                "PKROOF_INTER_SM_CTAS": str(comm),
                "PKROOF_INTER_SM_BLOCK": str(block),
                "PKROOF_INTER_SM_WARPS": str(warp),
            }
        )
        fresh = problem.inputs(rank, world, seed=99, device="cuda", **dims)
        want = problem.reference(*fresh)
        got = inter_sm.gemm_all_reduce_inter_sm(*fresh)
        ok = torch.tensor([float(torch.allclose(got.float(), want.float(), rtol=2e-2, atol=2e-2))], device="cuda")
        dist.all_reduce(ok, op=dist.ReduceOp.MIN)
        label = f"  inter-SM {'x'.join(map(str, tile))} G{g:<3} {comm:3d} comm {block:6d} block {warp:2d} warps"
        if ok.item() < 1:
            err = (got.float() - want.float()).abs().max().item()
            show(f"{label}  INCORRECT (max |error| {err:.3g}); not timed")
            continue
        t = _us(lambda i: inter_sm.gemm_all_reduce_inter_sm(*sets[i % 3]), group=group)
        show(f"{label} {t:8.1f} µs  {t_ref / t:5.2f}x matmul + NCCL")
    del ref
    dist.barrier()
    os._exit(0)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("shape", nargs="?", default="llama3-8b-tp2")
    ap.add_argument("--comm", default="8,16,32")
    ap.add_argument("--tiles", default="128x256x64x3x8,128x256x64x4x8,128x128x64x4x4,256x128x64x3x8")
    ap.add_argument("--blocks", default=str(setting("PKROOF_INTER_SM_BLOCK")))
    ap.add_argument("--warps", default=str(setting("PKROOF_INTER_SM_WARPS")))
    ap.add_argument("--groups", default=str(setting("PKROOF_INTER_SM_GROUP")))
    ap.add_argument("--gemm-only", action="store_true")
    a = ap.parse_args()
    tiles = [tuple(int(v) for v in t.split("x")) for t in a.tiles.split(",")]
    n = torch.cuda.device_count()
    ints = [[int(v) for v in arg.split(",")] for arg in (a.comm, a.blocks, a.warps, a.groups)]
    mp.spawn(_rank, args=(n, a.shape, ints[0], tiles, ints[1], ints[2], ints[3], a.gemm_only), nprocs=n)
