"""Timed samples of a correct implementation: every sample on inputs drawn afresh, its outputs checked after the
clock stops; wall-clock per call on CPU ranks, the one timing function (runtime/timing.py) eager and in CUDA graphs
on GPUs."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pkroof.analysis.catalogue import Problem
from pkroof.runtime.gpu_state import watches
from pkroof.runtime.launch import phase

from .checks import agree, as_tuple, cloned, compare, draw_inputs, verdict, widened_reference

if TYPE_CHECKING:  # a job (run.py) is only annotated here: run.py imports this module
    from .run import Job

INPUT_SETS = 3  # timed calls rotate over this many input sets (cold L2 between reuses)
SAMPLE_SEED = 10_000  # timed samples draw seeds above it (the checks draw seed + 1000, + 2000, + 3000)
ITERS = 20
# A graph sample is at least SAMPLE_S of back-to-back calls (at most MAX_CALLS, a multiple of INPUT_SETS), as
# nccl-tests times 20 back-to-back iterations. Each sample starts from an idle device and pays a fixed start-up
# (the graph's first kernel and event, not the collective): at 3 calls per sample it was 5-16 µs per call at
# 256 KiB on 2xH200 (pkroof all-gather 10.8 µs per call at 3 calls, 5.55 at 20; NCCL 14.4 and 11.3), and still
# ~3 µs at 9 calls (benchmarks/suite/2026-11-30-sampling-h200x2.md, §0). The calls are counted by a short pilot of
# graph samples of INPUT_SETS calls (their time per call holds a third of the start-up, so it overestimates): sizing by
# the eager time, launch costs included, gave host-heavy kernels (the copy engine's: 250-520 µs of host work per
# call at 1 MiB) 6-9 calls per sample and so 2-3 µs of start-up per call, varying with their host's speed.
# At most 21 calls, as nccl-tests' 20 iterations: NCCL's time per call grows with the calls in one graph at small
# sizes (256 KiB reduce-scatter 10.8 µs per call at 21 calls, 18.0 at 60; all-gather 10.7 and 15.2; all-to-all
# 12.0 and 16.7; all-reduce 10.1 and 9.75), pkroof's kernels' moves by -18..+7%; 21 leaves pkroof's ~16 µs
# start-up at under 1 µs per call (benchmarks/suite/2026-11-30-sampling-h200x2.md).
PILOT_ITERS = 5
SAMPLE_S = 2e-3
MAX_CALLS = 21


class IncorrectWhileTimedError(Exception):
    """A timed sample's outputs differ from the reference's on the same inputs, on some rank (every rank raises it
    together). `message` names the sample and the ranks."""


def _refill(buffers: tuple, fresh: tuple) -> bool:
    """Copy `fresh` into `buffers` in place (same storage, new contents); False where it does not fit: a tensor of
    another shape or dtype, or another non-tensor argument."""
    import torch

    if len(buffers) != len(fresh):
        return False
    for b, f in zip(buffers, fresh, strict=True):
        if isinstance(b, torch.Tensor) != isinstance(f, torch.Tensor):
            return False
        if isinstance(b, torch.Tensor):
            if b.shape != f.shape or b.dtype != f.dtype or b.device != f.device:
                return False
        elif b != f:
            return False
    try:
        with torch.no_grad():
            for b, f in zip(buffers, fresh, strict=True):
                if isinstance(b, torch.Tensor):
                    b.copy_(f)
    except RuntimeError:  # a buffer that cannot be written in place (an expanded view): not a fit
        return False
    return True


def _aliased(outputs: list[tuple]) -> list[bool]:
    """For each call of a sample, whether a later call's output shares its storage (an implementation that returns
    one buffer it owns each time: only the last such call's values are still there to check)."""
    import torch

    def pointers(out: tuple) -> set[int]:
        return {t.untyped_storage().data_ptr() for t in out if isinstance(t, torch.Tensor) and t.numel()}

    ptrs = [pointers(o) for o in outputs]
    return [any(ptrs[i] & later for later in ptrs[i + 1 :]) for i in range(len(ptrs))]


@dataclass
class Sampler:
    """Inputs for the timed calls: INPUT_SETS sets of buffers, refilled in place before every timed sample with
    values drawn afresh (a seed no check and no earlier sample used), and the reference's outputs on them, computed
    outside the timed region; after the sample, every call's output is compared with them on every rank."""

    problem: Problem
    impl: Callable[..., Any]
    job: Job
    rank: int
    device: Any
    buffers: list[tuple] = field(default_factory=list)
    wants: list[tuple] = field(default_factory=list)
    draws: int = 0
    samples: int = 0  # timed samples checked so far
    worst: float | None = 0.0
    in_place: bool = False  # a CUDA graph reads these buffers: a draw that does not fit them is an error
    oracle: bool = False  # the checks needed the oracle: each sample's reference is rerun widened too
    oracles: list[tuple] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.buffers = [self._draw() for _ in range(INPUT_SETS)]
        self.wants = [()] * INPUT_SETS
        self.oracles = [()] * INPUT_SETS

    def _draw(self) -> tuple:
        self.draws += 1
        seed = self.job.seed + SAMPLE_SEED + self.draws
        return draw_inputs(self.problem, self.job, self.rank, seed=seed, device=self.device)

    def call(self, i: int) -> Any:
        return self.impl(*self.buffers[i % INPUT_SETS])

    def refresh(self, sets: range = range(INPUT_SETS)) -> None:
        """Before a sample: fresh values in the sets it uses, and the reference's outputs on them."""
        self.samples += 1
        phase(f"drawing inputs and running the reference for timed sample {self.samples}")
        for k in sets:
            fresh = self._draw()
            if not _refill(self.buffers[k], fresh):
                if self.in_place:
                    raise ValueError("the problem's inputs change shape from draw to draw: they cannot be replayed")
                self.buffers[k] = fresh
            self.wants[k] = as_tuple(self.problem.reference(*cloned(self.buffers[k])))
            if self.oracle:
                self.oracles[k] = widened_reference(self.problem, self.buffers[k])

    def verify(self, outputs: list[Any], first: int = 0, what: str = "") -> None:
        """After a sample: each call's outputs (call i used set (first + i) % INPUT_SETS) against the reference's;
        every rank learns every rank's verdict. IncorrectWhileTimedError where one differs."""
        phase(f"checking the outputs of timed sample {self.samples}")
        got = [as_tuple(o) for o in outputs]
        overwritten = _aliased(got)
        mine: tuple[bool, float | None, str] = (True, 0.0, "")
        for i, out in enumerate(got):
            if overwritten[i]:
                continue
            k = (first + i) % INPUT_SETS
            tol = (self.job.rtol, self.job.atol)
            ok, error, why = compare(out, self.wants[k], tol, self.oracles[k] if self.oracle else None)
            worst = None if mine[1] is None or error is None else max(mine[1], error)
            call = f"call {i + 1} of {len(got)}: " if len(got) > 1 else ""
            mine = (mine[0] and ok, worst, mine[2] or (f"{call}{why}" if not ok else ""))
            if not ok:
                break
        ok, error, why = verdict(0, agree(mine, self.job.world_size))
        self.worst = None if self.worst is None or error is None else max(self.worst, error)
        if not ok:
            where = f"timed sample {self.samples}{f' ({what})' if what else ''}"
            raise IncorrectWhileTimedError(where + why.removeprefix("trial 1"))


def time_cpu(sampler: Sampler, iters: int = ITERS, warmup: int = 2) -> dict[str, Any]:
    """Wall-clock per call on CPU ranks, barrier before each sample, slowest rank per sample. Every timed call is
    on fresh inputs and checked after the clock stops; the warm-up calls are not timed."""
    import torch
    import torch.distributed as dist

    for i in range(warmup):
        sampler.call(i)
    samples = []
    for i in range(iters):
        sampler.refresh(range(i % INPUT_SETS, i % INPUT_SETS + 1))
        dist.barrier()
        start = time.perf_counter()
        out = sampler.call(i)
        samples.append(time.perf_counter() - start)
        got = cloned(as_tuple(out))  # what it returned when the clock stopped, not what a thread writes later
        sampler.verify([got], first=i % INPUT_SETS)
    t = torch.tensor(samples, dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return {"mode": "cpu-wall", "samples_s": t.tolist()}


def calls_per_sample(call_s: float) -> int:
    """Calls per graph sample for calls of about `call_s` (the pilot's time per call, so an overestimate):
    enough for SAMPLE_S, at least INPUT_SETS and at most MAX_CALLS, a multiple of INPUT_SETS."""
    want = max(INPUT_SETS, min(MAX_CALLS, math.ceil(SAMPLE_S / max(call_s, 1e-9))))
    return -(-want // INPUT_SETS) * INPUT_SETS


def time_gpu(sampler: Sampler, device: Any, iters: int = ITERS, warmup: int | None = None) -> dict[str, Any]:
    import torch
    import torch.distributed as dist

    from pkroof.runtime.timing import time_device

    token = torch.zeros(1, device=device)

    def barrier() -> None:
        dist.all_reduce(token)

    warm = {} if warmup is None else {"warmup": warmup}  # the timing function's own warm-up unless asked

    def checked(what: str) -> dict[str, Any]:  # every timed sample on fresh inputs, its outputs checked after it
        return {"before_sample": sampler.refresh, "after_sample": lambda out: sampler.verify(out, what=what)}

    fn = sampler.call
    watch = watches(device)
    phase("timing (eager samples)")
    with watch("eager"):
        eager = time_device(
            fn, iters=iters, calls_per_sample=INPUT_SETS, graph=False, barrier=barrier, group=dist.group.WORLD,
            **warm, **checked("eager"),
        )  # fmt: skip
    out = {"mode": "eager", "samples_s": list(eager.samples_s), "eager_median_s": eager.median_s}
    out["calls_per_sample"] = INPUT_SETS
    try:
        sampler.in_place = True  # a graph reads the buffers it was captured with
        phase("timing (graph pilot)")
        pilot = time_device(
            fn, iters=PILOT_ITERS, warmup=1, calls_per_sample=INPUT_SETS, graph=True, barrier=barrier,
            group=dist.group.WORLD, **checked("graph pilot"),
        )  # fmt: skip
        calls = calls_per_sample(pilot.median_s)  # the slowest rank's samples, so every rank counts the same
        phase(f"timing (graph samples of {calls} calls)")
        with watch("graph"):
            graph = time_device(
                fn, iters=iters, calls_per_sample=calls, graph=True, barrier=barrier, group=dist.group.WORLD,
                **warm, **checked(f"graph of {calls} calls"),
            )  # fmt: skip
        out |= {"mode": "graph", "samples_s": list(graph.samples_s), "calls_per_sample": calls}
        out["pilot_median_s"] = pilot.median_s
    except IncorrectWhileTimedError:
        raise
    except Exception as e:  # not every implementation can be captured (host syncs, CPU-side splits): eager then
        out["graph_error"] = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
        torch.cuda.synchronize()
    finally:
        sampler.in_place = False
    states: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(states, watch.summary(out["mode"]))  # each GPU during the samples the record keeps
    if any(states):
        out["gpu_state"] = [{"rank": r} | s for r, s in enumerate(states) if s]
    return out
