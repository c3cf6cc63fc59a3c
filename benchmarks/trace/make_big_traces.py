"""Synthetic, realistic Kineto traces of a tensor-parallel training job, large: by default 8 ranks × ~200 MB of
plain JSON, for timing `pkroof trace` and HTA's TraceAnalysis on the same files (benchmarks/trace/2026-12-05-reader.md).

    python benchmarks/trace/make_big_traces.py --out /tmp/pkroof-big-traces [--ranks 8] [--mb 200] [--layers 32]

What each rank's file holds, as torch.profiler (PyTorch 2.x, record_shapes=True, with_stack=False) writes it: the
top-level schemaVersion, deviceProperties (8 × H100 SXM), distributedInfo (NCCL, one process group), and traceEvents:
ProfilerStep#N spans; per transformer layer (Llama-3-70B shapes, TP = 8, sequence parallel, 8192 tokens a step)
forward and backward: nn.Module python_function spans, cpu_ops (aten::linear → aten::mm with Input Dims and Input
type, record_param_comms with NCCL's arguments, flash attention, elementwise), cudaLaunchKernel runtime calls with
their correlation ids and ac2g flow events, and the GPU kernels: cuBLAS nvjet GEMMs on stream 7, NCCL all-gather and
reduce-scatter kernels on stream 20 with their recorded arguments, flash attention, layer norm, elementwise; the
optimizer's multi_tensor_apply kernels and an all-reduce of the layer norms' gradients. Steps repeat until a file
reaches the size asked for.

The eight ranks are simulated together: a collective starts on each rank when that rank launches it and ends on all
of them once the last has arrived and the transfer is done (NCCL's behaviour), so the traces match across ranks;
each rank's launches and kernel times carry their own jitter (seeded), rank 3 runs 4% slower (a straggler).
Nothing here imports pkroof or the tests.
"""

from __future__ import annotations

import argparse
import random
from pathlib import Path

H100 = (
    '{{"id": {id}, "name": "NVIDIA H100 80GB HBM3", "totalGlobalMem": 85029158912, "computeMajor": 9, '
    '"computeMinor": 0, "maxThreadsPerBlock": 1024, "maxThreadsPerMultiprocessor": 2048, "regsPerBlock": 65536, '
    '"warpSize": 32, "sharedMemPerBlock": 49152, "numSms": 132, "regsPerMultiprocessor": 65536, '
    '"sharedMemPerBlockOptin": 232448, "sharedMemPerMultiprocessor": 233472}}'
)
PID = 2910249
MAIN_TID, BWD_TID = 2910249, 2919752  # the Python thread; autograd's backward thread
COMPUTE, COMM = 7, 20  # CUDA streams
BASE_US = 4458676416788.066  # a CUPTI timestamp of the size real traces carry (µs)

# Llama-3-70B, TP = 8, sequence parallel: 8192 tokens a step, hidden 8192, FFN 28672, 64 query and 8 KV heads
TOKENS, HIDDEN, FFN, HEADS, KV_HEADS, HEAD_DIM, TP = 8192, 8192, 28672, 64, 8, 128, 8
QKV_N = (HEADS + 2 * KV_HEADS) * HEAD_DIM // TP  # 1280
TFLOPS = 640e12  # achieved bf16 GEMM rate on an H100 (of 989 TFLOP/s peak)
COMM_BUSBW = 360e9  # achieved NCCL busbw of an all-gather / reduce-scatter over 8 H100s (B/s)

GEMM_KERNEL = "nvjet_tst_256x128_64x4_2x1_v_bz_coopB_TNN"
AG_KERNEL = "ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
RS_KERNEL = "ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
AR_KERNEL = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
FLASH_FWD = "void flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4, false, false, cutlass::bfloat16_t>>"
FLASH_BWD = "void flash::flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel<Flash_bwd_kernel_traits<128, 64, 128, 8>>"
NORM = "void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<c10::BFloat16, float>"
ELEMENTWISE = "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<c10::BFloat16>>"
SILU = "void at::native::vectorized_elementwise_kernel<4, at::native::silu_kernel(at::TensorIteratorBase&)>"
ADAM = "void at::native::multi_tensor_apply_kernel<at::native::TensorListMetadata<4>, at::native::FusedAdamMathFunctor>"


class Rank:
    """One rank's clocks and its open output file."""

    def __init__(self, rank: int, world: int, path: Path, seed: int) -> None:
        self.rank, self.world = rank, world
        self.rng = random.Random(seed * 1000 + rank)
        self.slow = 1.04 if rank == 3 else 1.0
        self.cpu = BASE_US + self.rng.uniform(0, 50)  # the launching thread's clock (µs)
        self.stream = {COMPUTE: self.cpu, COMM: self.cpu}  # when each stream is next free
        self.corr = 1
        self.ext = 1
        self.file = path.open("w", encoding="utf-8", buffering=1 << 22)
        self.first = True
        self.written = 0

    def emit(self, text: str) -> None:
        self.file.write(text if self.first else ",\n" + text)
        self.written += len(text) + 2
        self.first = False

    def jitter(self, us: float) -> float:
        return us * self.slow * self.rng.uniform(0.97, 1.03)


def _header(r: Rank) -> str:
    devices = ", ".join(H100.format(id=i) for i in range(8))
    ranks = ", ".join(map(str, range(r.world)))
    info = (
        f'{{"backend": "nccl", "rank": {r.rank}, "world_size": {r.world}, "pg_count": 1, "pg_config": [{{"pg_name": '
        f'"0", "pg_desc": "default_pg", "backend_config": "cuda:nccl", "pg_size": {r.world}, "ranks": [{ranks}]}}], '
        '"nccl_version": "2.21.5"}'
    )
    return (
        f'{{"schemaVersion": 1, "deviceProperties": [{devices}], "distributedInfo": {info}, "record_shapes": 1, '
        f'"traceName": "rank{r.rank}.pt.trace.json", "displayTimeUnit": "ms", "baseTimeNanoseconds": '
        f'1711964646000000000, "traceEvents": [\n'
    )


def _x(cat: str, name: str, pid: object, tid: object, ts: float, dur: float, args: str) -> str:
    return (
        f'{{"ph": "X", "cat": "{cat}", "name": "{name}", "pid": {pid}, "tid": {tid}, "ts": {ts:.3f}, '
        f'"dur": {dur:.3f}, "args": {{{args}}}}}'
    )


def _comm_args(collective: str, nelems_in: int, nelems_out: int, dtype: str, world: int) -> str:
    ranks = ", ".join(map(str, range(world)))
    return (
        f'"Collective name": "{collective}", "In msg nelems": {nelems_in}, "Out msg nelems": {nelems_out}, '
        f'"Group size": {world}, "dtype": "{dtype}", "In split size": "[]", "Out split size": "[]", '
        f'"Process Group Name": "0", "Process Group Description": "default_pg", "Process Group Ranks": "[{ranks}]"'
    )


def launch(
    r: Rank,
    tid: int,
    op: str,
    kernel: str,
    stream: int,
    dur_us: float,
    *,
    dims: str = "",
    after: float = 0.0,
    kernel_args: str = "",
    module: str | None = None,
) -> tuple[float, float]:
    """One operator launching one kernel on `stream`, not before `after` (a dependency): the cpu_op (inside an
    nn.Module python_function where given), its cudaLaunchKernel, the ac2g flow, the kernel. (start, end) in µs."""
    ext, corr = r.ext, r.corr
    r.ext, r.corr = ext + 1, corr + 1
    t0 = r.cpu
    op_dur = r.rng.uniform(8, 20)
    launch_at = t0 + op_dur * 0.6
    if module is not None:
        r.emit(_x("python_function", module, PID, tid, t0 - 2, op_dur + 4, f'"Python id": {ext}, "Python thread": 0'))
    shapes = f', "Input Dims": {dims}, "Input type": ["c10::BFloat16", "c10::BFloat16"]' if dims else ""
    r.emit(_x("cpu_op", op, PID, tid, t0, op_dur, f'"External id": {ext}, "Record function id": {ext}{shapes}'))
    r.emit(_x("cuda_runtime", "cudaLaunchKernel", PID, tid, launch_at, 4.1, f'"External id": {ext}, "cbid": 211, '
              f'"correlation": {corr}'))  # fmt: skip
    r.emit(
        f'{{"ph": "s", "id": {corr}, "pid": {PID}, "tid": {tid}, "ts": {launch_at:.3f}, "cat": "ac2g", "name": "ac2g"}}'
    )
    start = max(r.stream[stream], launch_at + 5.0, after)
    r.emit(f'{{"ph": "f", "id": {corr}, "pid": 0, "tid": {stream}, "ts": {start:.3f}, "cat": "ac2g", "name": "ac2g", '
           '"bp": "e"}')  # fmt: skip
    grid = "[132, 1, 1]" if stream == COMPUTE else "[24, 1, 1]"
    args = (
        f'"External id": {ext}, "queued": 0, "device": {r.rank}, "context": 1, "stream": {stream}, "correlation": '
        f'{corr}, "registers per thread": 168, "shared memory": 232448, "grid": {grid}, "block": [384, 1, 1]'
    )
    r.emit(_x("kernel", kernel, 0, stream, start, dur_us, args + kernel_args))
    r.stream[stream] = start + dur_us
    r.cpu = t0 + op_dur + r.rng.uniform(2, 6)
    return start, start + dur_us


def gemm(r: Rank, tid: int, m: int, n: int, k: int, *, after: float = 0.0, module: str = "Linear") -> float:
    """aten::linear → aten::mm (A [m, k] · B [k, n], bf16) and its cuBLAS kernel; its end (µs)."""
    t0, us = r.cpu, r.jitter(2 * m * n * k / TFLOPS * 1e6)
    dims = f"[[{m}, {k}], [{k}, {n}]]"
    end = launch(r, tid, "aten::mm", GEMM_KERNEL, COMPUTE, us, dims=dims, after=after, module=f"nn.Module: {module}")[1]
    r.emit(_x("cpu_op", "aten::linear", PID, tid, t0 - 1, r.cpu - t0 + 1, f'"External id": {r.ext + 100000000}'))
    return end


def simple(r: Rank, tid: int, op: str, kernel: str, us: float, *, after: float = 0.0) -> float:
    return launch(r, tid, op, kernel, COMPUTE, r.jitter(us), after=after)[1]


def collective(ranks: list[Rank], tid: int, kind: str, nbytes: int, after: list[float]) -> list[float]:
    """One collective on every rank: each launches it when its CPU gets there; all end together once the last has
    arrived and the transfer is done. Returns each rank's end."""
    world = len(ranks)
    kernel, name, es, dtype = {
        "ag": (AG_KERNEL, "_allgather_base", 2, "BFloat16"),
        "rs": (RS_KERNEL, "_reduce_scatter_base", 2, "BFloat16"),
        "ar": (AR_KERNEL, "allreduce", 4, "Float"),
    }[kind]
    elems = nbytes // es
    nin, nout = {"ag": (elems // world, elems), "rs": (elems, elems // world), "ar": (elems, elems)}[kind]
    factor = 2 * (world - 1) / world if kind == "ar" else (world - 1) / world
    transfer = factor * nbytes / COMM_BUSBW * 1e6 + 12.0
    arrivals = []
    for r, dep in zip(ranks, after, strict=True):  # where each rank's kernel starts: launch() computes the same
        arrivals.append(max(r.stream[COMM], dep))
        r.emit(_x("cpu_op", "record_param_comms", PID, tid, r.cpu, 25.0, f'"External id": {r.ext + 200000000}, '
                  + _comm_args(name, nin, nout, dtype, world)))  # fmt: skip
    starts = []
    for r, arrival in zip(ranks, arrivals, strict=True):
        saved = r.rng.getstate()
        op_dur = r.rng.uniform(8, 20)  # launch()'s first draw: its launch time, so the kernel's start
        r.rng.setstate(saved)
        starts.append(max(arrival, r.cpu + op_dur * 0.6 + 5.0))
    end = max(starts) + transfer
    args = ", " + _comm_args(name, nin, nout, dtype, world)
    for r, start in zip(ranks, starts, strict=True):
        launch(r, tid, "nccl:" + name.strip("_"), kernel, COMM, end - start, after=start, kernel_args=args)
    return [end] * len(ranks)


def layer_forward(ranks: list[Rank], layer: int) -> None:
    act = TOKENS * HIDDEN * 2  # the gathered activations, bf16
    blocks = (  # (name, the input projection's n, the output projection's n and k)
        ("attention", QKV_N, HIDDEN, HEADS * HEAD_DIM // TP),
        ("mlp", 2 * FFN // TP, HIDDEN, FFN // TP),
    )
    for prefix, n_in, n_out, k_out in blocks:
        ends = [simple(r, MAIN_TID, "aten::native_layer_norm", NORM, 45.0) for r in ranks]
        ends = collective(ranks, MAIN_TID, "ag", act, ends)
        ends = [gemm(r, MAIN_TID, TOKENS, n_in, HIDDEN, after=e, module=f"{prefix}.{layer}.in") for r, e in
                zip(ranks, ends, strict=True)]  # fmt: skip
        if prefix == "attention":
            ends = [simple(r, MAIN_TID, "aten::_flash_attention_forward", FLASH_FWD, 610.0, after=e) for r, e in
                    zip(ranks, ends, strict=True)]  # fmt: skip
        else:
            ends = [simple(r, MAIN_TID, "aten::silu", SILU, 160.0, after=e) for r, e in zip(ranks, ends, strict=True)]
        ends = [gemm(r, MAIN_TID, TOKENS, n_out, k_out, after=e, module=f"{prefix}.{layer}.out") for r, e in
                zip(ranks, ends, strict=True)]  # fmt: skip
        ends = collective(ranks, MAIN_TID, "rs", TOKENS * HIDDEN * 2, ends)
        for r, e in zip(ranks, ends, strict=True):
            simple(r, MAIN_TID, "aten::add", ELEMENTWISE, 30.0, after=e)


def layer_backward(ranks: list[Rank], layer: int) -> None:
    """Reverse order, as Megatron overlaps it: each block's input all-gathered again on the comm stream while the
    output projection's input-gradient GEMM runs, its weight-gradient GEMM after both; the input projection's input
    gradient reduce-scattered while its weight-gradient GEMM runs."""
    act = TOKENS * HIDDEN * 2
    blocks = (("mlp", FFN // TP, 2 * FFN // TP, SILU, 320.0), ("attention", HEADS * HEAD_DIM // TP, QKV_N, FLASH_BWD,
                                                                  1480.0))  # fmt: skip
    for prefix, k_in, n_out, kernel, us in blocks:
        gathered = collective(ranks, BWD_TID, "ag", act, [0.0] * len(ranks))
        for r, e in zip(ranks, gathered, strict=True):
            d = gemm(r, BWD_TID, TOKENS, k_in, HIDDEN, module=f"{prefix}.{layer}.out.backward")
            gemm(r, BWD_TID, k_in, HIDDEN, TOKENS, after=max(e, d), module=f"{prefix}.{layer}.out.wgrad")
        op = "aten::_flash_attention_backward" if prefix == "attention" else "aten::silu_backward"
        ends = [simple(r, BWD_TID, op, kernel, us) for r in ranks]
        ends = [gemm(r, BWD_TID, TOKENS, HIDDEN, n_out, after=e, module=f"{prefix}.{layer}.in.backward") for r, e in
                zip(ranks, ends, strict=True)]  # fmt: skip
        ends = collective(ranks, BWD_TID, "rs", TOKENS * HIDDEN * 2, ends)
        for r, e in zip(ranks, ends, strict=True):
            gemm(r, BWD_TID, HIDDEN, n_out, TOKENS, module=f"{prefix}.{layer}.in.wgrad")
            simple(r, BWD_TID, "aten::native_layer_norm_backward", NORM, 90.0, after=e)


def step(ranks: list[Rank], n: int, layers: int) -> None:
    starts = [r.cpu for r in ranks]
    for layer in range(layers):
        layer_forward(ranks, layer)
    for layer in reversed(range(layers)):
        layer_backward(ranks, layer)
    norms = 2 * layers * HIDDEN * 4  # the layer norms' weight gradients, fp32: replicated, summed over TP ranks
    collective(ranks, MAIN_TID, "ar", norms, [r.stream[COMPUTE] for r in ranks])
    for r in ranks:
        for _ in range(8):
            simple(r, MAIN_TID, "aten::_fused_adam_", ADAM, 210.0, after=r.stream[COMM])
    for r, start in zip(ranks, starts, strict=True):
        r.cpu = max(r.cpu, r.stream[COMPUTE], r.stream[COMM]) + 40.0  # the step's end waits for the GPU
        r.emit(_x("user_annotation", f"ProfilerStep#{n}", PID, MAIN_TID, start - 5, r.cpu - start + 5,
                  f'"External id": {r.ext + 300000000}'))  # fmt: skip
        r.cpu += r.rng.uniform(200, 400)  # the data loader between steps


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=Path("/tmp/pkroof-big-traces"))
    p.add_argument("--ranks", type=int, default=8)
    p.add_argument("--mb", type=float, default=200.0, help="size of each rank's file (MB = 1e6 bytes)")
    p.add_argument("--layers", type=int, default=32)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    ranks = [Rank(i, a.ranks, a.out / f"rank{i}.pt.trace.json", a.seed) for i in range(a.ranks)]
    for r in ranks:
        r.file.write(_header(r))
    n = 0
    while min(r.written for r in ranks) < a.mb * 1e6:
        n += 1
        step(ranks, n, a.layers)
    for r in ranks:
        r.file.write("\n]}\n")
        r.file.close()
    sizes = ", ".join(f"{(a.out / f'rank{r.rank}.pt.trace.json').stat().st_size / 1e6:.0f}" for r in ranks)
    print(f"wrote {a.ranks} ranks × {n} steps of {a.layers} layers to {a.out} (MB: {sizes})")


if __name__ == "__main__":
    main()
