"""`pkroof profile`: check each implementation against the reference on fresh inputs, time the correct ones.

One set of ranks per (problem, implementation): a hang is killed at the timeout, a crash is recorded with its
message, and the next implementation runs. Ranks are GPUs (NCCL) where there are enough, else CPU processes
over gloo (correctness and orchestration; their times are CPU times and say so).
"""

from __future__ import annotations

import importlib.util
import math
import os
import platform
import socket
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pkroof.analysis.catalogue import Problem, load
from pkroof.kernels.declare import reported_comm_sms
from pkroof.runtime.gpu_state import slowest, watches
from pkroof.runtime.launch import RankFailedError, RankTimeoutError, phase, run_ranks

TRIALS = 3  # correctness trials, each on fresh random inputs
INPUT_SETS = 3  # timed calls rotate over this many input sets (cold L2 between reuses)
SAMPLE_SEED = 10_000  # timed samples draw seeds above it (the checks draw seed + 1000, + 2000, + 3000)
ITERS = 20
# A graph sample is at least SAMPLE_S of back-to-back calls (at most MAX_CALLS, a multiple of INPUT_SETS), as
# nccl-tests times 20 back-to-back iterations. Each sample starts from an idle device and pays a fixed start-up
# (the graph's first kernel and event, not the collective): at 3 calls per sample it was 5-16 µs per call at
# 256 KiB on 2xH200 (pkroof all-gather 10.8 µs per call at 3 calls, 5.55 at 20; NCCL 14.4 and 11.3), and still
# ~3 µs at 9 calls (benchmarks/suite/2026-11-30-sampling-h200x2.md, §0). The calls are counted by a short pilot of graph
# samples of INPUT_SETS calls (their time per call holds a third of the start-up, so it overestimates): sizing by
# the eager time, launch costs included, gave host-heavy kernels (the copy engine's: 250-520 µs of host work per
# call at 1 MiB) 6-9 calls per sample and so 2-3 µs of start-up per call, varying with their host's speed.
# At most 21 calls, as nccl-tests' 20 iterations: NCCL's time per call grows with the calls in one graph at small
# sizes (256 KiB reduce-scatter 10.8 µs per call at 21 calls, 18.0 at 60; all-gather 10.7 and 15.2; all-to-all
# 12.0 and 16.7; all-reduce 10.1 and 9.75), pkroof's kernels' moves by -18..+7%; 21 leaves pkroof's ~16 µs
# start-up at under 1 µs per call (benchmarks/suite/2026-11-30-sampling-h200x2.md).
PILOT_ITERS = 5
SAMPLE_S = 2e-3
MAX_CALLS = 21
# (rtol, atol) by output dtype: an element is right where |got − want| ≤ atol + rtol·|want|. rtol is about two
# units in the last place (torch.testing.assert_close's bf16 and fp16 rtol; 10× its fp32 one); atol, wider than
# torch.testing's 1e-5, because sums of many low-precision terms near zero differ with their order, not only by
# rounding. Complex outputs: their real and imaginary parts, at their parts' dtype's. Integers, booleans and
# other dtypes are compared exactly.
TOLERANCES = {"bfloat16": (1.6e-2, 1e-2), "float16": (1e-3, 1e-3), "float32": (1.3e-5, 1e-5), "float64": (1e-7, 1e-7)}
# the oracle: the reference rerun on its inputs widened to these dtypes, where an implementation misses the
# tolerance; an element at least as close to the oracle as the reference's own is right too
ORACLE_DTYPES = {"bfloat16": "float32", "float16": "float32", "float32": "float64", "complex64": "complex128"}


@dataclass(frozen=True)
class Job:
    problem: str  # suite name or file path
    shape: str
    params: dict[str, Any]
    impl: str  # "reference" or "path/to/file.py:function"
    world_size: int
    backend: str  # "nccl" or "gloo"
    seed: int = 0
    extra: dict[str, Any] = field(default_factory=dict)
    dtype: str | None = None  # `--dtype`: the inputs of the problem's own floating dtype cast to this one
    iters: int | None = None  # `--iters`: timed samples (None: ITERS)
    warmup: int | None = None  # `--warmup`: untimed samples first (None: the timing function's own)
    rtol: float | None = None  # `--rtol`, `--atol`: every floating output's tolerance (None: TOLERANCES')
    atol: float | None = None


def check_builtin(problem: str, spec: str) -> Callable[..., Any] | None:
    """The reference (None here) or a built-in implementation that applies to `problem`; a ValueError otherwise."""
    from pkroof.kernels.registry import BUILTIN_IMPLS

    if spec == "reference":
        return None
    builtin = BUILTIN_IMPLS[spec]
    if problem not in builtin.problems:
        raise ValueError(f"{spec} implements {', '.join(sorted(builtin.problems))}, not {problem}")
    return builtin.fn


def resolve_impl(problem: Problem, spec: str) -> Callable[..., Any]:
    """'reference', a built-in implementation that applies (kernels/registry.py), or 'path/to/file.py:function' with
    the reference's signature; anything else is a ValueError."""
    from pkroof.kernels.registry import BUILTIN_IMPLS

    if spec == "reference":
        return problem.reference
    if spec in BUILTIN_IMPLS:
        return check_builtin(problem.name, spec)
    path, name = check_impl_spec(spec)
    module_spec = importlib.util.spec_from_file_location(f"pkroof_impl_{Path(path).stem}", path)
    module = importlib.util.module_from_spec(module_spec)
    try:
        module_spec.loader.exec_module(module)
    except Exception as e:
        raise ValueError(_import_error(path, e)) from None
    fn = getattr(module, name, None)
    if not callable(fn):
        raise ValueError(f"{path} has no function {name!r}")
    return fn


def check_impl_spec(spec: str) -> tuple[str, str]:
    """(file, function) of a user's 'path/to/file.py:function', the file existing; else a ValueError of one line."""
    from pkroof.kernels.registry import BUILTIN_IMPLS

    path, sep, name = spec.rpartition(":")
    if not sep or not path.endswith(".py") or not name.isidentifier():
        raise ValueError(
            f"unknown implementation {spec!r}: give 'reference', one of {', '.join(BUILTIN_IMPLS)}, "
            "or path/to/file.py:function"
        )
    if not Path(path).is_file():
        what = "is not a file" if Path(path).exists() else "does not exist"
        raise ValueError(f"implementation file {path} {what}")
    return path, name


def _import_error(path: str, e: Exception) -> str:
    """One line for an implementation file that does not import: 'file.py:function: ...' where a function's
    decorator raised (a bad @declare), else 'file.py: cannot import it (SyntaxError: ...)'."""
    import ast
    import traceback

    here = Path(path).resolve()
    lines = [n for f, n in traceback.walk_tb(e.__traceback__) if Path(f.f_code.co_filename).resolve() == here]
    if lines and not isinstance(e, SyntaxError):
        for node in ast.walk(ast.parse(here.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and any(
                d.lineno <= lines[-1] <= (d.end_lineno or d.lineno) for d in node.decorator_list
            ):
                return f"{path}:{node.name}: {e}"
    return f"{path}: cannot import it ({type(e).__name__}: {e})"


def _as_tuple(out: Any) -> tuple:
    return out if isinstance(out, tuple) else (out,)


def _clone(inputs: tuple) -> tuple:
    import torch

    return tuple(x.clone() if isinstance(x, torch.Tensor) else x for x in inputs)


def _poison_allocator(device: Any, nbytes: int) -> None:
    """On a GPU, hand freshly freed NaN-filled memory to the caching allocator so unwritten outputs fail the check."""
    import torch

    if device.type == "cuda" and nbytes:
        torch.full((nbytes // 4 + 1,), float("nan"), dtype=torch.float32, device=device)


def tolerance(dtype: str, rtol: float | None = None, atol: float | None = None) -> tuple[float, float]:
    """(rtol, atol) for outputs of `dtype` ("bfloat16"): TOLERANCES', each replaced where given (floating dtypes
    only: any other is compared exactly)."""
    if dtype not in TOLERANCES:
        return 0.0, 0.0
    default_rtol, default_atol = TOLERANCES[dtype]
    return (default_rtol if rtol is None else rtol), (default_atol if atol is None else atol)


def _widened(inputs: tuple) -> tuple:
    """Copies of `inputs` with every 16- and 32-bit floating (and complex64) tensor widened to its ORACLE_DTYPES
    dtype: tensors, the parameters and buffers of modules (a copy of each), inside lists, tuples and dicts."""
    import copy

    import torch

    def wide_dtype(t: torch.Tensor) -> torch.dtype | None:
        wide = ORACLE_DTYPES.get(str(t.dtype).removeprefix("torch."))
        return getattr(torch, wide) if wide else None

    def widen(x: Any) -> Any:
        if isinstance(x, torch.Tensor):
            wide = wide_dtype(x)
            return x.detach().to(wide) if wide else x.clone()
        if isinstance(x, torch.nn.Module):
            module = copy.deepcopy(x)
            with torch.no_grad():
                for t in [*module.parameters(), *module.buffers()]:
                    wide = wide_dtype(t)
                    if wide is not None:
                        t.data = t.data.to(wide)
            return module
        if type(x) in (list, tuple):
            return type(x)(widen(v) for v in x)
        if isinstance(x, dict):
            return {k: widen(v) for k, v in x.items()}
        return x

    return tuple(widen(x) for x in inputs)


def _oracle(problem: Problem, inputs: tuple) -> tuple:
    """The reference's outputs on `inputs` widened (a collective call on every rank, as the reference is)."""
    return _as_tuple(problem.reference(*_widened(inputs)))


def _compare(
    got: tuple, want: tuple, tol: tuple[float | None, float | None] = (None, None), oracle: tuple | None = None
) -> tuple[bool, float | None, str]:
    """(all close, largest absolute error, a line saying what differs). An element is right within `tol` (rtol,
    atol; None: the dtype's default) of the reference's, or, given the `oracle`'s outputs (the reference in wider
    dtypes), where it is at least as close to the oracle's as the reference's is. The error is None where it has
    no number: an output missing, of another shape or dtype, or NaN where the reference is not."""
    import torch

    if len(got) != len(want):
        return False, None, f"returned {len(got)} outputs, the reference {len(want)}"
    worst = 0.0
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        if not isinstance(w, torch.Tensor):
            continue
        if not isinstance(g, torch.Tensor) or g.shape != w.shape or g.dtype != w.dtype:
            what = (tuple(g.shape), g.dtype) if isinstance(g, torch.Tensor) else type(g).__name__
            return False, None, f"output {i}: got {what}, the reference gives {(tuple(w.shape), w.dtype)}"
        if g.device != w.device:
            return False, None, f"output {i}: on {g.device}, the reference's on {w.device}"
        if w.numel() == 0:
            continue
        g, w = g.detach(), w.detach()
        o = oracle[i] if oracle is not None and i < len(oracle) else None
        if w.is_complex():  # real and imaginary parts, each held to the tolerance of the parts' dtype
            g, w = torch.view_as_real(g.resolve_conj()), torch.view_as_real(w.resolve_conj())
            if isinstance(o, torch.Tensor) and o.is_complex():
                o = torch.view_as_real(o.detach().resolve_conj())
        rtol, atol = tolerance(str(w.dtype).removeprefix("torch."), *tol)
        # float32 holds every 16- and 32-bit float's difference closely enough for these tolerances, at half the
        # memory traffic of float64 (every timed sample is compared, on CPU ranks too); integers and doubles exactly
        wide = w.dtype in (torch.float16, torch.bfloat16, torch.float32) and g.dtype == w.dtype
        gf, wf = (g.float(), w.float()) if wide else (g.double(), w.double())
        nan = gf.isnan() & ~wf.isnan()
        if bool(nan.any()):
            first = nan.nonzero()[0].tolist()
            at = first[0] if len(first) == 1 else tuple(first)
            return False, None, f"output {i}: has NaN at {int(nan.sum())} of {w.numel()} elements (first at {at})"
        err = gf.sub(wf).abs_()
        bad = ~(err <= wf.abs().mul_(rtol).add_(atol))  # NaN (unwritten, poisoned) counts as bad
        if bool(bad.any()) and isinstance(o, torch.Tensor) and o.shape == w.shape:
            exact = o.double()
            bad &= ~(g.double().sub_(exact).abs_() <= w.double().sub_(exact).abs_())
        worst = max(worst, float(err.nan_to_num_(nan=math.inf, posinf=math.inf).max()))
        if bool(bad.any()):
            return (
                False,
                worst,
                f"output {i}: {int(bad.sum())} of {w.numel()} elements differ (max |error| {worst:.3g})",
            )
    return True, worst, ""


def _verdict(trial: int, verdicts: list[tuple[bool, float | None, str]]) -> tuple[bool, float | None, str]:
    """Every rank's (ok, error, why) for one trial, as one: which ranks differ and how."""
    errors = [e for _, e, _ in verdicts]
    worst = None if None in errors or not all(map(math.isfinite, errors)) else max(errors)
    wrong: dict[str, list[int]] = {}
    for rank, (ok, _, why) in enumerate(verdicts):
        if not ok:
            wrong.setdefault(why, []).append(rank)
    if not wrong:
        return True, worst, ""
    said = [f"rank{'s' * (len(r) > 1)} {', '.join(map(str, r))}: {why}" for why, r in wrong.items()]
    return False, worst, f"trial {trial + 1}: {'; '.join(said)}"


def _inputs(problem: Problem, job: Job, rank: int, *, seed: int, device: Any) -> tuple:
    """This rank's inputs, those of the problem's own floating dtype cast to `job.dtype` where it asks."""
    inputs = problem.inputs(rank, job.world_size, seed=seed, device=device, params=job.params)
    if job.dtype is None:
        return inputs
    from pkroof.analysis.trace import cast_inputs

    return cast_inputs(inputs, job.dtype)


def _agree(mine: tuple[bool, float | None, str], world: int) -> list[Any]:
    import torch.distributed as dist

    verdicts: list[Any] = [None] * world
    dist.all_gather_object(verdicts, mine)
    return verdicts


def _numeric(verdicts: list[tuple[bool, float | None, str]]) -> bool:
    """Whether every rank that failed failed on values alone (its error has a number): the oracle may decide."""
    return all(ok or error is not None for ok, error, _ in verdicts)


def _check(problem: Problem, impl: Callable, job: Job, rank: int, device: Any) -> tuple[bool, float | None, str, bool]:
    """TRIALS checks on fresh inputs; after each, every rank learns every rank's verdict (so all stop together
    where one rank's output differs, rather than wait for it in the next check's collectives). Where outputs miss
    the tolerance on values alone, every rank reruns the reference widened (_oracle) and judges again. The last
    item: whether the oracle was needed (the timed samples are then judged with it too)."""
    worst: float | None = 0.0
    tol = (job.rtol, job.atol)
    used_oracle = False
    for trial in range(TRIALS):
        phase(f"drawing inputs (check {trial + 1} of {TRIALS})")
        inputs = _inputs(problem, job, rank, seed=job.seed + 1000 * (trial + 1), device=device)
        phase(f"running the reference (check {trial + 1} of {TRIALS})")
        want = _as_tuple(problem.reference(*_clone(inputs)))
        _poison_allocator(device, sum(w.numel() * w.element_size() for w in want if hasattr(w, "numel")))
        phase(f"running the implementation (check {trial + 1} of {TRIALS})")
        got = _as_tuple(impl(*_clone(inputs)))
        phase(f"comparing outputs (check {trial + 1} of {TRIALS})")
        mine = _compare(got, want, tol)
        phase(f"agreeing on check {trial + 1} of {TRIALS} with the other ranks")
        verdicts = _agree(mine, job.world_size)
        ok, error, why = _verdict(trial, verdicts)
        if not ok and _numeric(verdicts):
            phase(f"running the reference widened, the oracle (check {trial + 1} of {TRIALS})")
            mine = _compare(got, want, tol, _oracle(problem, inputs))
            ok, _, oracle_why = _verdict(trial, _agree(mine, job.world_size))
            used_oracle |= ok
            why = why if ok else f"{oracle_why}, and no closer than the reference to its widened rerun"
        worst = None if worst is None or error is None else max(worst, error)
        if not ok:
            return False, worst, why, used_oracle
    return True, worst, "", used_oracle


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
        return _inputs(self.problem, self.job, self.rank, seed=seed, device=self.device)

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
            self.wants[k] = _as_tuple(self.problem.reference(*_clone(self.buffers[k])))
            if self.oracle:
                self.oracles[k] = _oracle(self.problem, self.buffers[k])

    def verify(self, outputs: list[Any], first: int = 0, what: str = "") -> None:
        """After a sample: each call's outputs (call i used set (first + i) % INPUT_SETS) against the reference's;
        every rank learns every rank's verdict. IncorrectWhileTimedError where one differs."""
        phase(f"checking the outputs of timed sample {self.samples}")
        got = [_as_tuple(o) for o in outputs]
        overwritten = _aliased(got)
        mine: tuple[bool, float | None, str] = (True, 0.0, "")
        for i, out in enumerate(got):
            if overwritten[i]:
                continue
            k = (first + i) % INPUT_SETS
            tol = (self.job.rtol, self.job.atol)
            ok, error, why = _compare(out, self.wants[k], tol, self.oracles[k] if self.oracle else None)
            worst = None if mine[1] is None or error is None else max(mine[1], error)
            call = f"call {i + 1} of {len(got)}: " if len(got) > 1 else ""
            mine = (mine[0] and ok, worst, mine[2] or (f"{call}{why}" if not ok else ""))
            if not ok:
                break
        ok, error, why = _verdict(0, _agree(mine, self.job.world_size))
        self.worst = None if self.worst is None or error is None else max(self.worst, error)
        if not ok:
            where = f"timed sample {self.samples}{f' ({what})' if what else ''}"
            raise IncorrectWhileTimedError(where + why.removeprefix("trial 1"))


def _time_cpu(sampler: Sampler, iters: int = ITERS, warmup: int = 2) -> dict[str, Any]:
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
        got = _clone(_as_tuple(out))  # what it returned when the clock stopped, not what a thread writes later
        sampler.verify([got], first=i % INPUT_SETS)
    t = torch.tensor(samples, dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return {"mode": "cpu-wall", "samples_s": t.tolist()}


def calls_per_sample(call_s: float) -> int:
    """Calls per graph sample for calls of about `call_s` (the pilot's time per call, so an overestimate):
    enough for SAMPLE_S, at least INPUT_SETS and at most MAX_CALLS, a multiple of INPUT_SETS."""
    want = max(INPUT_SETS, min(MAX_CALLS, math.ceil(SAMPLE_S / max(call_s, 1e-9))))
    return -(-want // INPUT_SETS) * INPUT_SETS


def _time_gpu(sampler: Sampler, device: Any, iters: int = ITERS, warmup: int | None = None) -> dict[str, Any]:
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


def _job(rank: int, world: int, job: Job) -> dict[str, Any]:
    """One rank's part: check, then (if every rank is correct) time, checking every timed sample too. Rank 0's dict
    becomes the record."""
    import torch

    sys.stdout.flush()
    os.dup2(2, 1)  # what the problem or implementation prints goes to stderr: stdout is pkroof's table
    device = torch.device("cuda", torch.cuda.current_device()) if job.backend == "nccl" else torch.device("cpu")
    phase("loading the problem and the implementation")
    problem = load(job.problem)
    impl = resolve_impl(problem, job.impl)
    ok, worst, why, used_oracle = _check(problem, impl, job, rank, device)
    result: dict[str, Any] = {"status": "correct" if ok else "incorrect", "max_abs_error": worst, "message": why}
    if job.rtol is not None or job.atol is not None:
        result |= {"rtol": job.rtol, "atol": job.atol}
    if used_oracle:  # right only where closer than the reference to its widened rerun: the record says so
        result["judged_by_oracle"] = True
    if not ok:
        return result
    phase("drawing the timed input sets")
    sampler = Sampler(problem, impl, job, rank, device, oracle=used_oracle)
    iters = ITERS if job.iters is None else job.iters
    try:
        if job.backend == "nccl":
            timing = _time_gpu(sampler, device, iters, job.warmup)
        else:
            timing = _time_cpu(sampler, iters, 2 if job.warmup is None else job.warmup)
    except IncorrectWhileTimedError as e:  # right while checked, wrong while timed: never a time
        return {"status": "incorrect", "max_abs_error": _worse(worst, sampler.worst), "message": str(e)}
    if job.warmup is not None:  # asked for: the record says so (the timer's own default otherwise)
        timing["warmup"] = job.warmup
    result["timing"] = timing
    result["max_abs_error"] = _worse(worst, sampler.worst)
    used = reported_comm_sms(impl)
    if used is not None:  # the implementation chose its communication SMs for this shape
        result["comm_sms_used"] = used
    return result


def _worse(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else max(a, b)


_CALLED = "pkroof.profile()"  # from Python rather than the command line


def _environment(backend: str) -> dict[str, Any]:
    """Where a record was measured. GPU facts come from NVML, so this parent process never opens a CUDA context."""
    env = {
        "host": socket.gethostname(),
        "python": platform.python_version(),
        "backend": backend,
        "command": " ".join(["pkroof", *sys.argv[1:]])
        if sys.argv[1:2] in (["profile"], ["report"])
        else "pkroof.profile()",
    }
    try:
        import torch

        env |= {"torch": torch.__version__, "cuda": torch.version.cuda or "none (a CPU build of torch)"}
        if backend == "nccl":
            env["nccl"] = ".".join(map(str, torch.cuda.nccl.version()))
    except (ImportError, RuntimeError, AttributeError):  # a CPU build has no NCCL to report
        pass
    try:  # pkroof's kernels are Triton: its version is part of what was measured
        from importlib.metadata import version

        env["triton"] = version("triton")
    except ImportError:  # PackageNotFoundError is an ImportError
        pass
    knobs = {k: v for k, v in os.environ.items() if k.startswith("PKROOF_")}  # CTA counts, block size
    if knobs:
        env["settings"] = knobs
    if backend == "nccl":
        from pkroof.runtime.nvml import NA, Device, Nvml

        nvml = Nvml()
        for key, answer in (
            ("driver", nvml.query("nvmlSystemGetDriverVersion")),
            ("gpu", nvml.query("nvmlDeviceGetName", Device(0))),
        ):
            env[key] = "" if isinstance(answer, NA) else str(answer)
    return env


def run_job(job: Job, timeout_s: float) -> dict[str, Any]:
    """Run one job on fresh ranks; a hang or a crash becomes a record, never an exception."""
    base = {
        "problem": job.problem,
        "shape": job.shape,
        "params": job.params,
        "impl": job.impl,
        "world_size": job.world_size,
    }
    try:
        result = run_ranks(_job, job.world_size, (job,), backend=job.backend, timeout_s=timeout_s)[0]
    except RankTimeoutError as e:
        if e.startup:  # the ranks never all joined their process group: nothing of the implementation ran
            return base | {"status": "timeout", "message": str(e)}
        where = f" while {e.where}" if e.where else ""
        why = f"a hang or deadlock{' there' if e.where else ''}, or more than --timeout allows at this size"
        return base | {"status": "timeout", "message": f"killed after {timeout_s:g} s{where} ({why})"}
    except RankFailedError as e:
        return base | {
            "status": "crashed",
            "message": e.message or f"rank {e.rank} {e.how}",
            "traceback": e.details,
        }
    return base | result


def summarise(timing: dict[str, Any]) -> dict[str, float]:
    samples = sorted(timing["samples_s"])
    pick = lambda q: samples[min(len(samples) - 1, round(q * (len(samples) - 1)))]  # noqa: E731
    return {"median_s": statistics.median(samples), "p10_s": pick(0.1), "p90_s": pick(0.9), "min_s": samples[0]}


def finish(record: dict[str, Any], *, backend: str) -> dict[str, Any]:
    """A job's result as a record: the date, where it ran, and its samples' statistics (nothing of the model's:
    records/evaluate.py computes that whenever records are read)."""
    out = record | {"date": datetime.now(UTC).isoformat(timespec="seconds"), "environment": _environment(backend)}
    if record.get("status") == "correct" and "timing" in record:
        out |= summarise(record["timing"])
        out |= slowest(record["timing"].get("gpu_state", []))  # sm_clock_mhz, power_capped
    return out
