"""The one timing function: warm-up, CUDA-graph replay (or eager calls), one event pair per sample, all samples kept.

Distributed callers pass `barrier` (a collective on the GPUs, e.g. an all-reduce of one element) and `group`: the
result then holds, per sample, the slowest rank's time. Each sample starts from an idle device (the host waits for
the previous one), and every rank's GPU starts it at the same moment: the barrier releases all GPUs within a link
latency, then a short spin on the GPU (HOLD_CYCLES) gives each host time to queue the sample behind it. Without
the spin each rank started its sample when its own host got there; the first rank's first collective then waited
for the last, and the slowest-rank time held that host skew (µs, varying run to run: small collectives measured
10.5-18.8 µs at 1 MiB on 2xH200 before, benchmarks/kernels/2026-11-30-ceilings-h200x2.md).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist

HOLD_CYCLES = 300_000  # the GPU's spin before a graph sample: 150 µs at 2 GHz, far more than a host needs to queue
# an event, a graph replay and an event (tens of µs)


@dataclass(frozen=True)
class Timing:
    samples_s: tuple[float, ...]  # seconds per call, one entry per timed sample (slowest rank if distributed)
    mode: str  # "graph" or "eager"
    calls_per_sample: int

    @property
    def median_s(self) -> float:
        return statistics.median(self.samples_s)

    @property
    def min_s(self) -> float:
        return min(self.samples_s)

    @property
    def max_s(self) -> float:
        return max(self.samples_s)

    def quantile_s(self, q: float) -> float:
        ordered = sorted(self.samples_s)
        return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]

    @property
    def spread(self) -> float:
        """(p90 − p10) / median: the relative spread of the samples."""
        return (self.quantile_s(0.9) - self.quantile_s(0.1)) / self.median_s


def _capture(fn: Callable[[int], Any], calls: int) -> tuple[torch.cuda.CUDAGraph, list[Any]]:
    """The graph of fn(0) ... fn(calls - 1), and what each call returned while captured (the tensors each replay
    writes)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up outside the graph, as capture requires
        for i in range(calls):
            fn(i)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        outputs = [fn(i) for i in range(calls)]
    return graph, outputs


def _slowest_rank(samples: list[float], group: dist.ProcessGroup | None) -> list[float]:
    if group is None:
        return samples
    t = torch.tensor(samples, dtype=torch.float64, device="cuda")
    dist.all_reduce(t, op=dist.ReduceOp.MAX, group=group)
    return t.tolist()


def time_device(
    fn: Callable[[int], None],
    *,
    iters: int = 20,
    warmup: int = 3,
    calls_per_sample: int = 1,
    graph: bool = True,
    barrier: Callable[[], None] | None = None,
    group: dist.ProcessGroup | None = None,
    before_sample: Callable[[], None] | None = None,
    after_sample: Callable[[list[Any]], None] | None = None,
) -> Timing:
    """Time fn(i) for i in range(calls_per_sample) per sample: `iters` samples after `warmup` ones.

    fn gets the call's index so callers can rotate input sets (cold L2). With graph=True the calls of one
    sample are captured once and replayed, which removes host launch overhead from the device time.
    `before_sample()` runs before each timed sample and `after_sample(outputs)` after it (outputs: what each call
    returned; in a graph, the tensors the replay wrote), both outside the timed region: the profiler refills the
    inputs in place with fresh values, then checks the sample's outputs against the reference on them.
    """
    assert iters >= 1 and calls_per_sample >= 1
    stream = torch.cuda.current_stream()
    if graph:
        g, outputs = _capture(fn, calls_per_sample)

        def run() -> list[Any]:
            g.replay()
            return outputs
    else:

        def run() -> list[Any]:
            return [fn(i) for i in range(calls_per_sample)]

    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(iters)]
    for _ in range(warmup):
        if barrier:
            barrier()
        run()
    for start, end in events:
        if before_sample:
            before_sample()
        if barrier:
            # start every sample from an idle device: an eager collective queued behind graph-replayed NCCL
            # work made small all-reduces time 15-20% slow on the 2xH200 node (benchmarks/probe/nccl_small_ab.py)
            torch.cuda.synchronize()
            barrier()
            if graph:  # every GPU leaves the barrier together and spins while its host queues the sample
                torch.cuda._sleep(HOLD_CYCLES)
            else:  # eager calls include their host's launch costs, so the host must not get a head start
                torch.cuda.synchronize()
        start.record(stream)
        out = run()
        end.record(stream)
        if after_sample:
            after_sample(out)
    torch.cuda.synchronize()
    samples = [s.elapsed_time(e) * 1e-3 / calls_per_sample for s, e in events]
    return Timing(tuple(_slowest_rank(samples, group)), "graph" if graph else "eager", calls_per_sample)
