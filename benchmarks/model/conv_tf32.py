"""fp32 convolutions and matmuls as torch runs them by default, against the compute term pkroof charges them.

torch lets cuDNN run fp32 convolutions on TF32 tensor cores by default (torch.backends.cudnn.allow_tf32) and keeps
fp32 matmuls in full fp32 (matmul precision "highest"); the tracer charges each accordingly (analysis/trace.py). This
times each op alone on one GPU (CUDA events over 20 back-to-back calls after 5 warm-up calls, median of 7) and prints
its rate beside the roof's compute term for the same op: a measured time below that term is a roof the op beats.

    python benchmarks/model/conv_tf32.py [TOPOLOGY]      (default: h200x2)
"""

from __future__ import annotations

import statistics
import sys

import torch
import torch.nn.functional as nnf

from pkroof.rooflines import ComputeOp, Workload, bound
from pkroof.topology import resolve

CONVS = [(8, 64, 128, 128), (16, 128, 64, 64), (32, 256, 56, 56), (8, 512, 28, 28), (64, 64, 112, 112)]  # N C H W
MATMULS = [(4096, 4096, 4096), (8192, 8192, 8192)]


def _time(fn, calls: int = 20, warmup: int = 5, repeats: int = 7) -> float:
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(calls):
            fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) / 1e3 / calls)
    return statistics.median(times)


def _roof_s(flops: float, dtype: str, system) -> float:
    w = Workload("op", (ComputeOp("op", flops, dtype, 0.0),))
    return bound(w, system).t_compute_s


def main(topology: str) -> None:
    system = resolve(topology).system(2)
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}, cudnn.allow_tf32="
          f"{torch.backends.cudnn.allow_tf32}, matmul precision {torch.get_float32_matmul_precision()}")  # fmt: skip
    print(f"{'op':34} {'TFLOP/s':>8} {'charged at':>10} {'roof TFLOP/s':>12} {'measured/roof':>13}")
    for n, c, h, w in CONVS:
        x = torch.randn(n, c, h, w, device="cuda")
        k = torch.randn(c, c, 3, 3, device="cuda")
        flops = 2 * (n * c * h * w) * c * 9  # 2·(output elements)·C_in·kh·kw, padding 1 keeps H×W
        t = _time(lambda x=x, k=k: nnf.conv2d(x, k, padding=1))
        roof = _roof_s(flops, "tf32", system)
        print(f"conv2d 3x3 fp32 {n}x{c}x{h}x{w:<14} {flops / t / 1e12:8.1f} {'tf32':>10} "
              f"{flops / roof / 1e12:12.1f} {t / roof:13.2f}")  # fmt: skip
    for m, nn, kk in MATMULS:
        a, b = torch.randn(m, kk, device="cuda"), torch.randn(kk, nn, device="cuda")
        flops = 2 * m * nn * kk
        t = _time(lambda a=a, b=b: a @ b)
        roof = _roof_s(flops, "fp32", system)
        print(f"matmul fp32 {m}x{nn}x{kk:<18} {flops / t / 1e12:8.1f} {'fp32':>10} "
              f"{flops / roof / 1e12:12.1f} {t / roof:13.2f}")  # fmt: skip


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "h200x2")
