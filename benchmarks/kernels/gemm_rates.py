"""How fast does cuBLAS run the suite's tensor-parallel GEMMs, and does the rate depend on the shape or on how long
the GPU has been busy?

The model divides FLOPs by one matmul rate per dtype (the probe's 8192³ bf16 matmul, timed one call per sample
after an idle, synchronised device). Large fused GEMMs measured 7–16% over the model on 2×H200. This times, on
every GPU at once (as the profiler runs), the GEMM each rank does in the fused problems at 2 ranks plus 8192³,
with 1, 3, 10 and 30 back-to-back calls per graph sample (pkroof's own timing: barrier and idle device before each
sample, slowest rank), and reads NVML while it runs: the mean SM clock, the highest power and the throttle
reasons seen. Read-only: no clocks or power limits are set.

Usage: python3 benchmarks/kernels/gemm_rates.py [--calls 1,3,10,30] [--iters 10]     (one process per GPU)
       python3 benchmarks/kernels/gemm_rates.py --probe     (GPU 0: the probe's burst and sustained bf16 matmul rates)
"""

from __future__ import annotations

import argparse
import os
import threading
import time

from pkroof.runtime.launch import keep_multicast_off

keep_multicast_off()  # before torch: its ranks start NCCL, which must never use NVLink multicast

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402

from pkroof.runtime.timing import time_device  # noqa: E402

# (name, m, n, k) of the GEMM one rank runs at 2 ranks (kernels/problems/*.py: SHAPES and inputs())
SHAPES = [
    ("8192^3 (probe)", 8192, 8192, 8192),
    ("gemm-rs/ar llama3-8b-tp2", 8192, 4096, 14336 // 2),
    ("gemm-rs/ar llama3-70b-tp8", 8192, 8192, 28672 // 2),
    ("gemm-ar llama3-70b-tp8-o-proj", 8192, 8192, 8192 // 2),
    ("gemm-rs deepseek-v3-dense-tp8", 8192, 7168, 18432 // 2),
    ("ag-gemm llama3-8b-tp2", 8192, 2 * 14336 // 2, 4096),
    ("ag-gemm llama3-70b-tp8", 8192, 2 * 28672 // 2, 8192),
    ("ag-gemm deepseek-v3-dense-tp8", 8192, 2 * 18432 // 2, 7168),
]


class NvmlWatch:
    """Polls the SM clock, power and throttle reasons of one GPU every ~2 ms in a thread."""

    def __init__(self, index: int) -> None:
        import pynvml

        pynvml.nvmlInit()
        self.nv, self.handle = pynvml, pynvml.nvmlDeviceGetHandleByIndex(index)
        self.clocks: list[int] = []
        self.power_mw: list[int] = []
        self.reasons = 0
        self._reasons = getattr(pynvml, "nvmlDeviceGetCurrentClocksEventReasons", None)
        self._reasons = self._reasons or pynvml.nvmlDeviceGetCurrentClocksThrottleReasons
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def _poll(self) -> None:
        nv, h = self.nv, self.handle
        while not self._stop.is_set():
            self.clocks.append(nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_SM))
            self.power_mw.append(nv.nvmlDeviceGetPowerUsage(h))
            self.reasons |= self._reasons(h)
            time.sleep(0.002)

    def __enter__(self) -> NvmlWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def summary(self) -> str:
        busy = [c for c in self.clocks if c > 1000] or self.clocks or [0]
        return (
            f"SM clock mean {sum(busy) / len(busy):6.0f} MHz (min {min(busy)}) over {len(self.clocks)} polls, "
            f"power max {max(self.power_mw or [0]) / 1000:5.0f} W, reasons 0x{self.reasons:x}"
        )


def _worker(rank: int, world: int, calls_list: list[int], iters: int) -> None:
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29583")
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", rank=rank, world_size=world, device_id=torch.device("cuda", rank))
    g = torch.Generator(device="cuda").manual_seed(rank)
    if rank == 0:
        print(f"{'GEMM (m x n x k)':46} {'calls':>5} {'µs/call':>9} {'TFLOPS':>7}  NVML on GPU 0 during the timing")
    for name, m, n, k in SHAPES:
        a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16, generator=g)
        b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16, generator=g)
        for calls in calls_list:
            with NvmlWatch(rank) as watch:
                t = time_device(
                    lambda i, a=a, b=b: torch.matmul(a, b),
                    iters=iters,
                    calls_per_sample=calls,
                    barrier=dist.barrier,
                    group=dist.group.WORLD,
                )
            per_call = t.median_s  # time_device's samples are per call
            if rank == 0:
                label = f"{name} ({m}x{n}x{k})"
                tflops = 2 * m * n * k / per_call / 1e12
                print(f"{label:46} {calls:5d} {per_call * 1e6:9.1f} {tflops:7.1f}  {watch.summary()}", flush=True)
    dist.destroy_process_group()


def probe_rates() -> None:
    """The probe's two bf16 matmul numbers on GPU 0, measured as `pkroof probe` measures them (topology/
    probe_worker.py): burst (one call per sample, 10 samples) and sustained (1 s busy first, then 50 ms samples)."""
    from pkroof.topology.probe_worker import sustained_time

    g = torch.Generator(device="cuda").manual_seed(0)
    a, b = (torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16, generator=g) for _ in range(2))
    fn = lambda i: torch.matmul(a, b)  # noqa: E731
    with NvmlWatch(0) as burst_watch:
        burst = time_device(fn, iters=10, warmup=2).median_s
    with NvmlWatch(0) as sustained_watch:
        sustained = sustained_time(fn, burst, 1.0, 10)
    flops = 2 * 8192**3
    print(
        f"probe bf16 8192^3 burst     {burst * 1e6:8.1f} µs {flops / burst / 1e12:6.1f} TFLOPS  {burst_watch.summary()}"
    )
    print(
        f"probe bf16 8192^3 sustained {sustained * 1e6:8.1f} µs {flops / sustained / 1e12:6.1f} TFLOPS  "
        f"{sustained_watch.summary()}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", default="1,3,10,30")
    parser.add_argument("--iters", type=int, default=10)
    parser.add_argument("--probe", action="store_true", help="only the probe's burst and sustained bf16 rates")
    args = parser.parse_args()
    if args.probe:
        probe_rates()
        return
    world = torch.cuda.device_count()
    calls = [int(c) for c in args.calls.split(",")]
    mp.spawn(_worker, args=(world, calls, args.iters), nprocs=world, join=True)


if __name__ == "__main__":
    main()
