"""Plain PyTorch measurements of what `pkroof probe` measures, for a side-by-side check in the same session.

No pkroof code: one process copies between cuda:0 and cuda:1 with `Tensor.copy_` (peer copies), timed with
CUDA events around 20 back-to-back eager copies after warm-up; two processes
time `dist.all_reduce` of bf16 under a CUDA graph. With --variants the all-reduce is also timed (b) after
creating a second process group and a symmetric-memory buffer, as the probe does, and (c) with a device-side
all-reduce as the per-sample barrier instead of dist.barrier(), to find what makes small all-reduces differ.
NVLink multicast stays off. Usage: python3 benchmarks/probe/plain_torch_baseline.py [--variants]
"""

from __future__ import annotations

import os
import statistics
import sys

from pkroof.runtime.launch import keep_multicast_off

keep_multicast_off()  # NVLS off, over whatever the environment says

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402

SIZES = [4 * 1024 * 4**i for i in range(10)]  # 4 KiB … 1 GiB
REPS = 20


def _events_ms(fn, device: int, reps: int = REPS) -> float:
    """Median over 10 samples of the time of `reps` back-to-back calls, per call (ms)."""
    samples = []
    for _ in range(12):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        with torch.cuda.device(device):
            start.record()
            for _ in range(reps):
                fn()
            end.record()
        torch.cuda.synchronize(device)
        samples.append(start.elapsed_time(end) / reps)
    return statistics.median(samples[2:])


def copies() -> None:
    for size in SIZES:
        n = size // 4
        a = torch.arange(n, dtype=torch.int32, device="cuda:0")
        b = torch.empty(n, dtype=torch.int32, device="cuda:1")
        pull = _events_ms(lambda a=a, b=b: a.copy_(b), 0)  # GPU0 reads GPU1's memory
        push = _events_ms(lambda a=a, b=b: b.copy_(a), 1)  # timed on the destination's stream, where copy_ runs
        assert torch.equal(b.cpu(), a.cpu())
        # eager only: capturing a copy between two devices' tensors in one process fails (legacy-stream dependency)
        print(f"copy_   {size:>11d} B   pull {size / pull / 1e6:7.1f} GB/s   push {size / push / 1e6:7.1f} GB/s")
        del a, b


def _all_reduce(rank: int, port: int, variants: bool) -> None:
    torch.cuda.set_device(rank)
    dist.init_process_group(
        "nccl", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2, device_id=torch.device("cuda", rank)
    )
    _time_all_reduce(rank, SIZES, "a plain", device_barrier=False)
    if variants:
        small = SIZES[:5]
        _time_all_reduce(rank, small, "c device barrier", device_barrier=True)
        import torch.distributed._symmetric_memory as symm_mem

        dist.new_group([0, 1])
        buf = symm_mem.empty(1 << 20, dtype=torch.int32, device="cuda")
        symm_mem.rendezvous(buf, dist.group.WORLD.group_name)
        _time_all_reduce(rank, small, "b + group + symm", device_barrier=False)
    dist.barrier()
    os._exit(0)


def _time_all_reduce(rank: int, sizes: list[int], label: str, *, device_barrier: bool) -> None:
    token = torch.zeros(1, device="cuda")
    for size in sizes:
        x = torch.ones(size // 2, dtype=torch.bfloat16, device="cuda")
        calls = 1 if size >= 16 * 2**20 else 20
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(calls):
                dist.all_reduce(x)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for _ in range(calls):
                dist.all_reduce(x)
        samples = []
        for _ in range(12):
            if device_barrier:
                dist.all_reduce(token)
            else:
                dist.barrier()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            graph.replay()
            end.record()
            torch.cuda.synchronize()
            samples.append(start.elapsed_time(end) / calls)
        t = torch.tensor([statistics.median(samples[2:])], device="cuda")
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        if rank == 0:
            ms = t.item()
            # 2 ranks: busbw = algbw × 2(n−1)/n = algbw
            print(f"all_reduce {label:17s} {size:>11d} B   {ms * 1e3:9.1f} µs   busbw {size / ms / 1e6:7.1f} GB/s")


if __name__ == "__main__":
    print(
        f"torch {torch.__version__}, NCCL {'.'.join(map(str, torch.cuda.nccl.version()))}, "
        f"{torch.cuda.get_device_name(0)} x{torch.cuda.device_count()}"
    )
    copies()
    mp.spawn(_all_reduce, args=(29533, "--variants" in sys.argv), nprocs=2)
