"""An LL collective against the flag hand-off (collectives.py's push) with 2 ranks emulated on ONE GPU.

Both ranks' kernels run side by side on streams of one GPU (tests/emulate_ll.py's concurrent mode; the push kernel
with its real flags, phase 0, as tests/emulate.py lays them out), so every byte and flag stays in local HBM: no
NVLink. What this times is the kernels' own cost: launch, prologue, the system-scope release (local here, a round
trip over NVLink on a real node), polling, the sum. It says nothing about the link; the 2-GPU profile does.

Each rank's 20 calls are captured in a CUDA graph; a sample replays both graphs on their streams between events on
a third (per call = elapsed / 20), median and [min, max] of 30 samples. Outputs are checked after timing.

Usage: python3 benchmarks/kernels/ll_local.py [--kind all-reduce] [--ctas 64] [--sizes 4096,...] [--only ll|push]  (one
GPU)
Sizes are each rank's input (the all-gather's shard; the reduce-scatter's and all-to-all's whole buffer).
"""

from __future__ import annotations

import argparse
import statistics

import torch

from pkroof.kernels import low_latency as ll
from pkroof.kernels import symm_collectives as c
from pkroof.kernels.symm import FLAG_STRIDE, MAX_CTAS


def expected(kind: str, xs: list) -> list:
    """Every rank's output of `kind` for inputs xs (one per rank), by the collective's definition."""
    world = len(xs)
    chunks = [x.reshape(world, -1) for x in xs] if kind in ("reduce-scatter", "all-to-all") else []
    match kind:
        case "all-reduce":
            return [torch.stack(xs).float().sum(0).to(xs[0].dtype)] * world
        case "all-gather":
            return [torch.cat([x.reshape(-1) for x in xs])] * world
        case "reduce-scatter":
            return [torch.stack([c[r] for c in chunks]).float().sum(0).to(xs[0].dtype) for r in range(world)]
        case "all-to-all":
            return [torch.cat([c[r] for c in chunks]) for r in range(world)]
    raise AssertionError(kind)


WORLD, CALLS, SAMPLES = 2, 20, 30
SIZES = [4 << 10, 16 << 10, 64 << 10, 256 << 10, 1 << 20]
CODES = {"all-reduce": c.ALL_REDUCE, "all-gather": c.ALL_GATHER, "reduce-scatter": c.REDUCE_SCATTER,
         "all-to-all": c.ALL_TO_ALL}  # fmt: skip


def _zeros(numel: int, dtype=torch.int32) -> torch.Tensor:
    return torch.zeros(numel, dtype=dtype, device="cuda")


def ll_runner(kind: str, xs, outs, ctas: int):
    chunked = ll.KINDS[kind][0]
    words = [ll.words_of(x, WORLD if chunked else 1) for x in xs]
    lines = ll.inbox_lines(words[0].numel() // (WORLD if chunked else 1))
    inboxes = [_zeros(2 * WORLD * lines, torch.int64) for _ in range(WORLD)]
    table = torch.tensor([b.data_ptr() for b in inboxes], dtype=torch.int64, device="cuda")
    calls = [_zeros(MAX_CTAS) for _ in range(WORLD)]
    out_words = [o.view(torch.int32) for o in outs]

    def run(r: int) -> None:
        ll.launch(kind, words[r], out_words[r], table, calls[r], r, WORLD, xs[r].dtype, ctas=ctas)

    run.keep = inboxes  # the table holds raw addresses: the buffers must live as long as the kernel runs
    return run


def push_runner(kind: str, xs, outs, ctas: int):
    layout = c.Layout.of(CODES[kind], xs[0].numel(), WORLD, True)
    stages = [torch.empty(2 * layout.half_size, dtype=xs[0].dtype, device="cuda") for _ in range(WORLD)]
    flags = [_zeros(MAX_CTAS * WORLD * FLAG_STRIDE) for _ in range(WORLD)]
    table = torch.tensor([s.data_ptr() for s in stages], dtype=torch.int64, device="cuda")
    flag_table = torch.tensor([f.data_ptr() for f in flags], dtype=torch.int64, device="cuda")
    epochs = [_zeros(MAX_CTAS) for _ in range(WORLD)]
    counters = [_zeros(MAX_CTAS) for _ in range(WORLD)]

    def run(r: int) -> None:
        c.launch(layout, xs[r], outs[r], table, flag_table, flags[r], epochs[r], counters[r], r, ctas=ctas)

    run.keep = (stages, flags)  # the tables hold raw addresses: the buffers must live as long as the kernel runs
    return run


def time_pair(run, streams) -> list[float]:
    """Per-call µs of each sample: both ranks' graphs of CALLS calls replayed side by side."""
    for _ in range(2):  # eagerly, side by side: the first pass compiles (the push kernel once per rank, so its rank 0
        # may poll until it gives up while rank 1 compiles), the second runs on compiled kernels
        for r, s in enumerate(streams):
            with torch.cuda.stream(s):
                run(r)
        torch.cuda.synchronize()
    graphs = [torch.cuda.CUDAGraph() for _ in streams]
    for r, s in enumerate(streams):
        with torch.cuda.graph(graphs[r], stream=s):
            for _ in range(CALLS):
                run(r)
    main = torch.cuda.current_stream()
    times = []
    for _ in range(SAMPLES):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        start.record(main)
        for r, s in enumerate(streams):
            s.wait_stream(main)
            with torch.cuda.stream(s):
                graphs[r].replay()
        for s in streams:
            main.wait_stream(s)
        end.record(main)
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) * 1e3 / CALLS)
    return times


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ctas", type=int, default=64, help="CTAs per rank (both ranks' kernels must fit side by side)")
    ap.add_argument("--sizes", default=",".join(map(str, SIZES)), help="bytes per rank, comma-separated")
    ap.add_argument("--only", choices=["ll", "push"], help="time one kernel only")
    ap.add_argument("--kind", choices=list(CODES), default="all-reduce")
    args = ap.parse_args()
    ctas = args.ctas
    runners = {"ll": ll_runner, "push": push_runner}
    chosen = [runners[args.only]] if args.only else list(runners.values())
    gpu = torch.cuda.get_device_name()
    print(f"# {args.kind}, {gpu}; {WORLD} ranks emulated side by side on one GPU, {ctas} CTAs each;")
    print(f"# per call µs from CUDA graphs of {CALLS} calls per rank, median [min, max] of {SAMPLES}; local HBM only")
    heads = {ll_runner: "LL", push_runner: "push (flags)"}
    print(f"{'size':>8} " + " ".join(f"{heads[m]:>24}" for m in chosen) + f" {'LL - push':>10}  check")
    g = torch.Generator(device="cpu").manual_seed(0)
    for size in map(int, args.sizes.split(",")):
        xs = [torch.randn(size // 2, generator=g).to(torch.bfloat16).cuda() for _ in range(WORLD)]
        wants = expected(args.kind, xs)
        row, medians, ok = [], [], True
        for make in chosen:
            outs = [torch.full_like(w, float("nan")) for w in wants]
            streams = [torch.cuda.Stream() for _ in range(WORLD)]
            t = time_pair(make(args.kind, xs, outs, ctas), streams)
            ok &= all(torch.equal(o, w) for o, w in zip(outs, wants, strict=True))
            medians.append(statistics.median(t))
            row.append(f"{medians[-1]:7.2f} [{min(t):6.2f}, {max(t):6.2f}]")
        label = f"{size >> 10} KiB" if size < 1 << 20 else f"{size >> 20} MiB"
        diff = f"{medians[0] - medians[1]:>+10.2f}" if len(medians) == 2 else f"{'-':>10}"
        cells = " ".join(f"{cell:>24}" for cell in row)
        print(f"{label:>8} {cells} {diff}  {'ok' if ok else 'WRONG'}", flush=True)


if __name__ == "__main__":
    main()
