"""What the all-reduce reference's copy of its input costs on one GPU, timed as the profiler times a call.

The all-reduce, broadcast and reduce references (kernels/problems/) must not change their inputs, so each copies x
(x.clone()) and runs NCCL on the copy. Their shipped times on 2xH200 include that copy; NCCL in place (as the code
they cite and nccl-tests run it) does not. This times x.clone() alone on GPU 0 with pkroof's timing
(runtime/timing.py: CUDA-graph samples of the recorded calls per sample, rotating over 3 input sets, median of
20), at the sizes and calls per sample of the shipped all-reduce records, beside the reference's recorded time.

Usage: python3 benchmarks/suite/clone_cost.py     (one GPU; reads pkroof/recorded/*.jsonl)
"""

from __future__ import annotations

import glob
import json
from pathlib import Path

import torch

from pkroof.runtime.timing import time_device

RECORDED = Path(__file__).resolve().parents[2] / "pkroof" / "recorded"
SETS = 3  # the profiler's input sets


def shipped_references() -> list[tuple[int, float, int]]:
    """(size_bytes, median_s, calls_per_sample) of every shipped all-reduce reference record, by size."""
    rows = []
    for path in sorted(glob.glob(str(RECORDED / "*.jsonl"))):
        for line in Path(path).read_text().splitlines():
            r = json.loads(line)
            if r["problem"] == "all-reduce" and r["impl"] == "reference" and r.get("median_s"):
                rows.append((r["params"]["size_bytes"], r["median_s"], r["timing"]["calls_per_sample"]))
    return sorted(rows)


def main() -> None:
    print(f"# {torch.cuda.get_device_name()}; x.clone() of bf16, CUDA-graph samples, median of 20")
    print(f"{'size':>10} {'calls':>5} {'clone µs':>9} {'reference µs (2xH200)':>22} {'clone share':>11}")
    for size, ref_s, calls in shipped_references():
        xs = [torch.randn(size // 2, device="cuda").to(torch.bfloat16) for _ in range(SETS)]
        t = time_device(lambda i, xs=xs: xs[i % SETS].clone(), calls_per_sample=calls)
        label = f"{size >> 20} MiB" if size >= 1 << 20 else f"{size >> 10} KiB"
        print(f"{label:>10} {calls:5d} {t.median_s * 1e6:9.2f} {ref_s * 1e6:22.2f} {t.median_s / ref_s:11.1%}")
        del xs
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
