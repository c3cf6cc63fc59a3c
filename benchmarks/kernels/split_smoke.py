"""One-GPU smoke test of benchmarks/kernels/bidir_ceiling.py's split copies: each split way copies a local buffer
inside a
CUDA graph (pkroof's time_device) and the result is compared with the source. Local HBM copies, not NVLink: the
times printed say nothing about the link; they only show the two engines ran inside one graph.

Usage: python3 benchmarks/kernels/split_smoke.py [MiB ...]   (default 16 64)
"""

from __future__ import annotations

import importlib.util
import pathlib
import sys

import torch

from pkroof.runtime.timing import time_device
from pkroof.topology.copy_kernels import sm_copy

spec = importlib.util.spec_from_file_location("bidir_ceiling", pathlib.Path(__file__).with_name("bidir_ceiling.py"))
ceiling = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ceiling)

side = torch.cuda.Stream()
ways = {
    "copy engine": ceiling._dma,
    "2 copy-engine halves": ceiling.split(side, ceiling._dma, ceiling._dma, 0.5),
    "CE 1/2 + SM 66 CTAs": ceiling.split(side, ceiling._dma, lambda s, d: sm_copy(s, d, 66), 0.5),
    "CE 3/4 + SM 32 CTAs": ceiling.split(side, ceiling._dma, lambda s, d: sm_copy(s, d, 32), 0.75),
}
failed = 0
for mib in [int(a) for a in sys.argv[1:]] or [16, 64]:
    n = (mib << 18) + 96  # not a multiple of the parts' 64-element alignment
    src = torch.arange(n, dtype=torch.int32, device="cuda")
    for name, copy in ways.items():
        dst = torch.full((n,), -1, dtype=torch.int32, device="cuda")
        t = time_device(lambda i, c=copy, s=src, d=dst: c(s, d), iters=5, warmup=1)
        ok = torch.equal(dst, src)
        failed += not ok
        print(f"{mib:5d} MiB  {name:22s} {t.median_s * 1e6:8.1f} µs (local)  {'ok' if ok else 'WRONG'}", flush=True)
sys.exit(1 if failed else 0)
