"""Is an implementation right? Its outputs against the reference's on the same fresh inputs, every rank agreeing on
the verdict: within a tolerance by dtype, or, where it misses on values alone, at least as close as the reference to
the reference rerun in wider dtypes (the oracle)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pkroof.analysis.catalogue import Problem
from pkroof.runtime.launch import phase

if TYPE_CHECKING:  # a job (run.py) is only annotated here: run.py imports this module
    from .run import Job


TRIALS = 3  # correctness trials, each on fresh random inputs
# (rtol, atol) by output dtype: an element is right where |got − want| ≤ atol + rtol·|want|. rtol is about two
# units in the last place (torch.testing.assert_close's bf16 and fp16 rtol; 10× its fp32 one); atol, wider than
# torch.testing's 1e-5, because sums of many low-precision terms near zero differ with their order, not only by
# rounding. Complex outputs: their real and imaginary parts, at their parts' dtype's. Integers, booleans and
# other dtypes are compared exactly.
TOLERANCES = {"bfloat16": (1.6e-2, 1e-2), "float16": (1e-3, 1e-3), "float32": (1.3e-5, 1e-5), "float64": (1e-7, 1e-7)}
# the oracle: the reference rerun on its inputs widened to these dtypes, where an implementation misses the
# tolerance; an element at least as close to the oracle as the reference's own is right too
ORACLE_DTYPES = {"bfloat16": "float32", "float16": "float32", "float32": "float64", "complex64": "complex128"}


def as_tuple(out: Any) -> tuple:
    return out if isinstance(out, tuple) else (out,)


def cloned(inputs: tuple) -> tuple:
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


def widened_reference(problem: Problem, inputs: tuple) -> tuple:
    """The reference's outputs on `inputs` widened (a collective call on every rank, as the reference is)."""
    return as_tuple(problem.reference(*_widened(inputs)))


def compare(
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


def verdict(trial: int, verdicts: list[tuple[bool, float | None, str]]) -> tuple[bool, float | None, str]:
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


def draw_inputs(problem: Problem, job: Job, rank: int, *, seed: int, device: Any) -> tuple:
    """This rank's inputs, those of the problem's own floating dtype cast to `job.dtype` where it asks."""
    inputs = problem.inputs(rank, job.world_size, seed=seed, device=device, params=job.params)
    if job.dtype is None:
        return inputs
    from pkroof.analysis.trace import cast_inputs

    return cast_inputs(inputs, job.dtype)


def agree(mine: tuple[bool, float | None, str], world: int) -> list[Any]:
    import torch.distributed as dist

    verdicts: list[Any] = [None] * world
    dist.all_gather_object(verdicts, mine)
    return verdicts


def _numeric(verdicts: list[tuple[bool, float | None, str]]) -> bool:
    """Whether every rank that failed failed on values alone (its error has a number): the oracle may decide."""
    return all(ok or error is not None for ok, error, _ in verdicts)


def check(problem: Problem, impl: Callable, job: Job, rank: int, device: Any) -> tuple[bool, float | None, str, bool]:
    """TRIALS checks on fresh inputs; after each, every rank learns every rank's verdict (so all stop together
    where one rank's output differs, rather than wait for it in the next check's collectives). Where outputs miss
    the tolerance on values alone, every rank reruns the reference widened (widened_reference) and judges again.
    The last item: whether the oracle was needed (the timed samples are then judged with it too)."""
    worst: float | None = 0.0
    tol = (job.rtol, job.atol)
    used_oracle = False
    for trial in range(TRIALS):
        phase(f"drawing inputs (check {trial + 1} of {TRIALS})")
        inputs = draw_inputs(problem, job, rank, seed=job.seed + 1000 * (trial + 1), device=device)
        phase(f"running the reference (check {trial + 1} of {TRIALS})")
        want = as_tuple(problem.reference(*cloned(inputs)))
        _poison_allocator(device, sum(w.numel() * w.element_size() for w in want if hasattr(w, "numel")))
        phase(f"running the implementation (check {trial + 1} of {TRIALS})")
        got = as_tuple(impl(*cloned(inputs)))
        phase(f"comparing outputs (check {trial + 1} of {TRIALS})")
        mine = compare(got, want, tol)
        phase(f"agreeing on check {trial + 1} of {TRIALS} with the other ranks")
        verdicts = agree(mine, job.world_size)
        ok, error, why = verdict(trial, verdicts)
        if not ok and _numeric(verdicts):
            phase(f"running the reference widened, the oracle (check {trial + 1} of {TRIALS})")
            mine = compare(got, want, tol, widened_reference(problem, inputs))
            ok, _, oracle_why = verdict(trial, agree(mine, job.world_size))
            used_oracle |= ok
            why = why if ok else f"{oracle_why}, and no closer than the reference to its widened rerun"
        worst = None if worst is None or error is None else max(worst, error)
        if not ok:
            return False, worst, why, used_oracle
    return True, worst, "", used_oracle
