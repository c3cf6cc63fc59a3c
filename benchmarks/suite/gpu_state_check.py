"""Does the profiler's GPU-state watch read what the GPU does? One GPU: idle, then back-to-back matmuls.

Prints runtime/gpu_state.py's summary for 1 s of idle and for 3 s of back-to-back 8192³ bf16 matmuls, beside
the matmuls' achieved rate: on an H200 at its power limit the SM clock should fall below its maximum, the power
sit near the enforced limit, and `power_capped` (NVML's power-policy violation time over the window) near 1.
NVML is only read.

Usage: python3 benchmarks/suite/gpu_state_check.py
"""

from __future__ import annotations

import json
import time

import torch

from pkroof.runtime.gpu_state import watches


def main() -> None:
    watch = watches(torch.device("cuda", 0))
    print(f"# {torch.cuda.get_device_name(0)}, NVML index {watch.index}")
    with watch("idle"):
        time.sleep(1.0)
    print("idle:", json.dumps(watch.summary("idle")))
    a = torch.randn(8192, 8192, dtype=torch.bfloat16, device="cuda")
    for _ in range(5):
        a @ a
    torch.cuda.synchronize()
    start, calls = time.monotonic(), 0
    with watch("matmuls"):
        while time.monotonic() - start < 3.0:
            for _ in range(20):
                a @ a
            torch.cuda.synchronize()
            calls += 20
    elapsed = time.monotonic() - start
    print(f"matmuls: {calls} in {elapsed:.2f} s = {calls * 2 * 8192**3 / elapsed / 1e12:.0f} TFLOP/s")
    print("matmuls:", json.dumps(watch.summary("matmuls")))


if __name__ == "__main__":
    main()
