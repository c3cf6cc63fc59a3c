"""Does torch's SM carve-out reach the GEMMs pkroof's inter-SM schedule runs? One GPU, no pkroof code.

    python3 benchmarks/kernels/carveout_check.py

Times torch.matmul (bf16, the GEMM + all-reduce row-chunk of llama3-8b-tp2 on 2 ranks: 2048 x 4096 x 7168)
with torch._C._set_sm_carveout_experimental(k) for several k. If cuBLAS honours it, the time grows as k SMs
are taken away (compute-bound: about 132 / (132 - k) times the k = 0 time). CUDA events around 20 calls,
median of 10 samples.
"""

import statistics

import torch


def _time(fn, iters: int = 20, samples: int = 10) -> float:
    fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(samples):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(iters):
            fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / iters * 1e3)
    return statistics.median(times)


def main() -> None:
    a = torch.randn(2048, 7168, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(7168, 4096, device="cuda", dtype=torch.bfloat16)
    out = torch.empty(2048, 4096, device="cuda", dtype=torch.bfloat16)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    base = None
    print(f"{'carveout':>8} {'median us':>10} {'vs k=0':>7} {'132/(132-k)':>11}")
    for k in (0, 8, 16, 32, 64):
        torch._C._set_sm_carveout_experimental(k or None)
        us = _time(lambda: torch.matmul(a, b, out=out))
        base = base or us
        print(f"{k:>8} {us:10.1f} {us / base:7.2f} {sms / (sms - k):11.2f}")
    torch._C._set_sm_carveout_experimental(None)


if __name__ == "__main__":
    main()
