"""Trace a problem's reference into a Workload: every rank's FLOPs by dtype, HBM bytes and collectives, and the data
flow between its collectives.

One dispatch mode (recorder.py's Recorder) sees every op a reference runs, however the problem file imported
torch.distributed (the c10d ops it sizes: c10d_ops.py; what stands in for GPUs and a process group: trace_shims.py):

- FLOPs: torch's FLOP formulas (matmuls, convolutions, attention; causal attention at the pairs its mask keeps:
  causal.py), plus FFTs at 5·N·log2 N per complex transform of N points and 2.5·N·log2 N per real one (the usual
  radix-2 count); an op that does more than O(1) work per element but has no formula (linear algebra, say) is named
  in Workload.uncounted, not silently counted as zero.
- The rate they run at: FLOPs are charged at the problem's dtype wherever the op computes at least as wide (an upcast
  is the reference's accuracy, not the problem's math); an fp32 convolution or matmul that torch runs on TF32 tensor
  cores (cudnn's `allow_tf32`, on by default for convolutions; matmul precision "high" or "medium"), as read while the
  reference runs, is charged at the TF32 peak.
- HBM bytes: every tensor the reference reads that it did not make — its inputs, the parameters and buffers of
  modules among them, tensors it captured — once, and its outputs once (the inputs it writes into, as in-place code
  does, among them).
- Communication: every c10d op (collectives, point-to-point, functional collectives, torch's symmetric-memory ops:
  symm_mem_ops.py) with its bytes in nccl-tests' convention; where a rank's bytes are uneven (split sizes, unequal
  lists, point-to-point) this rank's own bytes to and from its peers. Point-to-point ops issued together (none
  waiting on another's data) are one step.
- Data flow: which collectives each collective's data depends on, through any compute: the latency term is the
  longest such chain, so ops issued together or on independent data overlap.

Every rank is traced, on meta tensors over torch's fake process group (any shape, no memory, no data moved); ranks
that differ are kept as views (Workload.ranks) and the bound charges each term at its busiest rank. A reference
whose control flow needs values (`.item()`, MoE split sizes) is run for real on CPU ranks over gloo instead; there,
collectives that gloo refuses and NCCL runs (unequal all-gather or all-to-all lists) are run padded to equal sizes,
their real bytes recorded. Inputs that need values to be drawn are drawn on the CPU and moved to meta.
"""

from __future__ import annotations

import pickle
import re
from collections import defaultdict
from typing import Any

import torch
from torch.utils._pytree import tree_map

from pkroof.analysis.catalogue import Problem, ProblemError, failure_line, guarded
from pkroof.analysis.source import SourceFile
from pkroof.rooflines import Workload
from pkroof.rooflines.workload import RankView

from .c10d_ops import tensor_bytes
from .recorder import DTYPE_NAMES, TORCH_DTYPES, Recorder, TraceError, tensors_in
from .trace_shims import CudaShims, FakeGroup

# what a reference whose control flow needs values raises on meta tensors (`.item()`, `.tolist()`, no meta kernel);
# an object sent with broadcast_object_list & co. unpickles (or runs out of input) from bytes meta tensors lack
NEEDS_DATA = (RuntimeError, NotImplementedError, pickle.UnpicklingError, EOFError)
TRACE_TIMEOUT_S = 300.0  # CPU ranks over gloo: a reference at a real model's shape is slow on a few cores


def _main_dtype(tensors: list[torch.Tensor]) -> torch.dtype | None:
    """The floating dtype holding the most bytes (bf16 gradients beside an fp32 master shard: bf16); a complex
    tensor counts as its parts' dtype (complex64: fp32, which its arithmetic runs in)."""
    held: dict[torch.dtype, int] = defaultdict(int)
    for t in tensors:
        if t.dtype.is_floating_point:
            held[t.dtype] += tensor_bytes(t)
        elif t.dtype.is_complex:
            held[t.dtype.to_real()] += tensor_bytes(t)
    return max(held, key=held.__getitem__) if held else None


def _to_meta(obj: Any) -> Any:
    meta = torch.device("meta")
    return tree_map(lambda x: x.to(meta) if isinstance(x, (torch.Tensor, torch.nn.Module)) else x, obj)


def _meta_inputs(problem: Problem, rank: int, world_size: int, seed: int, params: dict[str, Any]) -> tuple:
    """This rank's inputs as meta tensors: made on meta directly (instant at any shape) where every op allows it,
    else drawn on the CPU (ops without a meta kernel, values needed to draw them) and moved to meta."""
    meta = torch.device("meta")
    try:
        with meta:
            return problem.inputs(rank, world_size, seed=seed, device=meta, params=params)
    except ValueError:
        raise
    except Exception:  # an op without a meta kernel (bincount, …), or `.item()`: make them on the CPU, then move
        cpu = torch.device("cpu")
        made = guarded(
            problem, "inputs", lambda: problem.inputs(rank, world_size, seed=seed, device=cpu, params=params)
        )
        return _to_meta(made)


def input_dtype(problem: Problem, world_size: int, params: dict[str, Any]) -> str:
    """The problem's dtype at this shape: the floating dtype holding most of its inputs' bytes, module parameters
    included ("bf16" if none)."""
    with FakeGroup(0, world_size):
        main = _main_dtype(tensors_in(_meta_inputs(problem, 0, world_size, 0, params)))
    return DTYPE_NAMES.get(main, "fp32") if main is not None else "bf16"


def _recorder(inputs: tuple, dtype: str | None, world_size: int, rank: int, padded: bool) -> tuple[tuple, Recorder]:
    """The inputs with those of the problem's dtype cast to `dtype` (None: as drawn), and a recorder charging FLOPs
    at it, every input (and module parameter) already counted as read once."""
    if dtype is not None and dtype not in TORCH_DTYPES:
        raise ValueError(f"unknown dtype {dtype!r} (one of: {', '.join(TORCH_DTYPES)})")
    main = _main_dtype(tensors_in(inputs))
    if dtype is not None and any(t.dtype.is_complex for t in tensors_in(inputs)):
        raise ValueError(f"--dtype {dtype}: the problem's inputs are complex; --dtype casts real floating inputs only")
    if dtype is None or main is None:
        own = DTYPE_NAMES.get(main, "fp32") if main is not None else "bf16"
        rec = Recorder(world_size, rank, main, own, padded)
    else:
        to = TORCH_DTYPES[dtype]

        def cast(x: Any) -> Any:
            if isinstance(x, torch.Tensor) and x.dtype == main:
                return x.to(to)
            if isinstance(x, torch.nn.Module):
                return x.to(to)
            return x

        inputs = tree_map(cast, inputs)
        rec = Recorder(world_size, rank, to, dtype, padded)
    rec.declare_read(tensors_in(inputs))
    return inputs, rec


def cast_inputs(inputs: tuple, dtype: str) -> tuple:
    """The inputs with those of the problem's own floating dtype cast to `dtype` (the profiler's `--dtype`)."""
    return _recorder(inputs, dtype, 1, 0, False)[0]


def _trace_rank_on_meta(
    problem: Problem, rank: int, world_size: int, params: dict[str, Any], seed: int, dtype: str | None
) -> Workload:
    with FakeGroup(rank, world_size), CudaShims(torch.device("meta")):
        inputs, rec = _recorder(_meta_inputs(problem, rank, world_size, seed, params), dtype, world_size, rank, False)
        with rec:
            try:
                out = problem.reference(*inputs)
            except NEEDS_DATA:
                raise
            except Exception as e:
                raise TraceError(failure_line(problem, "reference", e)) from e
    return rec.workload(problem, out, params, rec.compute)


def combine(ranks: list[Workload]) -> Workload:
    """One Workload from every rank's: rank 0's, with each distinct rank view kept where ranks differ."""
    first = ranks[0]
    views: dict[tuple, list[int]] = {}
    for r, w in enumerate(ranks):
        views.setdefault((w.compute, w.comm, w.hbm_bytes), []).append(r)
    uncounted = tuple(sorted({name for w in ranks for name in w.uncounted}))
    other = tuple(sorted({name for w in ranks for name in w.other_ops}))
    if len(views) == 1:
        return Workload(**{**first.__dict__, "uncounted": uncounted, "other_ops": other})
    kept = tuple(RankView(tuple(rs), c, m, h) for (c, m, h), rs in views.items())
    return Workload(**{**first.__dict__, "ranks": kept, "uncounted": uncounted, "other_ops": other})


def trace_on_meta(
    problem: Problem, world_size: int, params: dict[str, Any], *, seed: int = 0, dtype: str | None = None
) -> Workload:
    """Every rank's view on meta tensors over torch's fake process group, its floating inputs in `dtype` if given;
    raises one of NEEDS_DATA if the reference needs values, TraceError if it raises anything else."""
    return combine([_trace_rank_on_meta(problem, r, world_size, params, seed, dtype) for r in range(world_size)])


def trace_rank(problem: Problem, rank: int, world_size: int, params: dict[str, Any], seed: int = 0) -> Workload:
    """This rank's trace with real data over an initialised process group (gloo on CPU); collectives gloo refuses
    (unequal lists) run padded."""
    cpu = torch.device("cpu")
    with CudaShims(cpu):
        made = guarded(
            problem, "inputs", lambda: problem.inputs(rank, world_size, seed=seed, device=cpu, params=params)
        )
        inputs, rec = _recorder(made, None, world_size, rank, True)
        with rec:
            out = guarded(problem, "reference", lambda: problem.reference(*inputs))
    return rec.workload(problem, out, params, rec.compute)


def _first_line(e: BaseException) -> str:
    """The first sentence of what `e` says (torch's missing-meta-kernel message runs on for a paragraph)."""
    line = (str(e).strip().splitlines() or [type(e).__name__])[0]
    return re.split(r"(?<=[.!])\s", line, maxsplit=1)[0].rstrip(".")


def trace(problem: Problem, world_size: int, params: dict[str, Any], *, dtype: str | None = None) -> Workload:
    """Meta tensors when the reference allows, else a real run on CPU ranks over gloo (in the problem's own dtype
    only: `dtype` is refused there). A rank that raises, dies or hangs is a TraceError of one line."""
    from pkroof.runtime.launch import RankFailedError, RankTimeoutError, run_ranks

    try:
        return trace_on_meta(problem, world_size, params, dtype=dtype)
    except NEEDS_DATA as e:  # value-dependent control flow on meta tensors: trace with real data instead
        on_meta = _first_line(e)
    if dtype is not None:
        own = input_dtype(problem, world_size, params)
        raise TraceError(
            f"{problem.name}: cannot trace it in {dtype} on meta tensors ({on_meta}), and CPU ranks run it as its "
            f"inputs are drawn: it is bounded only in the dtype of its inputs, {own}"
        )
    what = f"tracing {problem.name} at {problem.shape_of(params)} on {world_size} CPU ranks"
    try:
        where = problem.name if problem.suite else (problem.origin or str(problem.path))  # a user's: the bytes read
        return combine(run_ranks(_trace_job, world_size, (where, params), backend="gloo", timeout_s=TRACE_TIMEOUT_S))
    except RankFailedError as e:
        for said in (TraceError, ProblemError):  # the problem's own code raised: the rank said which function
            prefix = f"{said.__module__}.{said.__qualname__}: "
            if e.message.startswith(prefix):
                raise TraceError(e.message.removeprefix(prefix)) from None
        if e.exitcode == -9:  # SIGKILL: what the kernel's OOM killer sends
            raise TraceError(
                f"{what} was killed (SIGKILL: out of memory?); its reference needs data to trace ({on_meta}), so the "
                "trace needs the memory of the real run: try a smaller --shape or --world-size"
            ) from None
        raise TraceError(f"{what} failed: rank {e.rank}: {e.message or e.how}") from None
    except RankTimeoutError:
        raise TraceError(
            f"{what} did not finish in {TRACE_TIMEOUT_S:g} s; its reference needs data to trace ({on_meta}): "
            "try a smaller --shape or --world-size"
        ) from None


def _trace_job(rank: int, world_size: int, where: str | SourceFile, params: dict[str, Any]) -> Workload:
    from pkroof.analysis.catalogue import load, load_source

    problem = load(where) if isinstance(where, str) else load_source(where)
    return trace_rank(problem, rank, world_size, params)
