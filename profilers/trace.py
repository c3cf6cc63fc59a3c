"""Trace a problem's reference once into a Workload: its collectives, its FLOPs by dtype, its minimal HBM bytes.

One dispatch mode sees both: torch's FLOP formulas for compute ops, and torch.distributed's c10d ops (which
every collective goes through, however the problem file imported it) for communication. First on meta tensors
in this process over torch's fake process group (no data moves; any shape); a reference whose control flow
needs values (MoE split sizes, `.item()`) is then run for real on CPU ranks over gloo, which needs the memory of
the real run. Comm ops before any FLOP feed the compute (consumer), comm ops after it are fed by it (producer):
that lets the model overlap them.

A problem's dtype is the floating dtype holding most of its input bytes; FLOPs are charged at it wherever the
reference computes at least as wide (ring attention upcasts to fp32 for its own accuracy; a kernel runs those
matmuls on the tensor cores of bf16 with fp32 accumulation). A requested dtype (`--dtype`) casts the inputs of
the problem's dtype on meta tensors; a reference that needs data is traced in its own dtype only.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.distributed as dist
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import flop_registry

from pkroof.kernels.catalogue import Problem, ProblemError, failure_line, guarded
from pkroof.rooflines import Collective, CommOp, ComputeOp, Workload
from pkroof.rooflines.workloads import GEMM_TILE_M, GEMM_TILE_N

DTYPE_NAMES = {
    torch.bfloat16: "bf16",
    torch.float16: "fp16",
    torch.float32: "fp32",
    torch.float8_e4m3fn: "fp8",
    torch.float8_e5m2: "fp8",
}
TORCH_DTYPES = {  # --dtype → the tensors traced on meta; tf32 is fp32 storage with tf32 matmuls
    "bf16": torch.bfloat16,
    "fp16": torch.float16,
    "fp32": torch.float32,
    "tf32": torch.float32,
    "fp8": torch.float8_e4m3fn,
}
_MATMULS = {torch.ops.aten.mm, torch.ops.aten.addmm, torch.ops.aten.bmm, torch.ops.aten.baddbmm}
# what a reference whose control flow needs values raises on meta tensors (`.item()`, `.tolist()`, no meta kernel)
NEEDS_DATA = (RuntimeError, NotImplementedError)
TRACE_TIMEOUT_S = 300.0  # CPU ranks over gloo: a reference at a real model's shape is slow on a few cores


class TraceError(ProblemError):
    """A problem could not be traced: its inputs or reference raised, or its CPU ranks died or hung; one line."""


def _nbytes(t: Any) -> int:
    if isinstance(t, torch.Tensor):
        return t.numel() * t.element_size()
    if isinstance(t, (list, tuple)):
        return sum(_nbytes(x) for x in t)
    return 0


def _group_size(args: tuple, default: int) -> int:
    for a in args:
        if isinstance(a, torch.ScriptObject):
            try:
                return dist.ProcessGroup.unbox(a).size()
            except Exception:  # a ReduceOp or another script object: keep looking
                continue
    return default


# c10d op → (collective, bytes in nccl-tests' convention from the op's arguments and the group size n)
_C10D = {
    "allreduce_": (Collective.ALL_REDUCE, lambda a, n: _nbytes(a[0])),
    "allreduce_coalesced_": (Collective.ALL_REDUCE, lambda a, n: _nbytes(a[0])),
    "_allgather_base_": (Collective.ALL_GATHER, lambda a, n: _nbytes(a[0])),
    "allgather_": (Collective.ALL_GATHER, lambda a, n: _nbytes(a[0])),
    "allgather_into_tensor_coalesced_": (Collective.ALL_GATHER, lambda a, n: _nbytes(a[0])),
    "_reduce_scatter_base_": (Collective.REDUCE_SCATTER, lambda a, n: _nbytes(a[1])),
    "reduce_scatter_": (Collective.REDUCE_SCATTER, lambda a, n: _nbytes(a[1])),
    "reduce_scatter_tensor_coalesced_": (Collective.REDUCE_SCATTER, lambda a, n: _nbytes(a[1])),
    "alltoall_base_": (Collective.ALL_TO_ALL, lambda a, n: _nbytes(a[1])),
    "alltoall_": (Collective.ALL_TO_ALL, lambda a, n: _nbytes(a[1])),
    "broadcast_": (Collective.BROADCAST, lambda a, n: _nbytes(a[0])),
    "reduce_": (Collective.REDUCE, lambda a, n: _nbytes(a[0])),
    "gather_": (Collective.GATHER, lambda a, n: n * _nbytes(a[1])),
    "scatter_": (Collective.SCATTER, lambda a, n: n * _nbytes(a[0])),
    "send": (Collective.SEND_RECV, lambda a, n: _nbytes(a[0])),  # a receive is the other half: not counted twice
}


@dataclass
class _Recorder(TorchDispatchMode):
    """FLOPs by the dtype of each op's first tensor (`compute` where that is at least as wide as the problem's
    `dtype`), and every collective with its bytes and group size."""

    world_size: int
    dtype: torch.dtype | None = None  # the problem's
    compute: str = "bf16"  # what FLOPs at least as wide as `dtype` are charged at
    comm: list[tuple[Collective, int, int, bool]] = field(default_factory=list)  # kind, bytes, group, after FLOPs
    flops: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    tiles: int = 1

    def __post_init__(self) -> None:
        super().__init__()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func.namespace == "c10d" and func._overloadpacket.__name__ in _C10D:
            kind, nbytes = _C10D[func._overloadpacket.__name__]
            n = _group_size(args, self.world_size)
            group = 2 if kind is Collective.SEND_RECV else n  # point to point: a pair, whatever group carries it
            self.comm.append((kind, nbytes(args, n), group, bool(self.flops)))
        out = func(*args, **kwargs)
        packet = func._overloadpacket
        if packet in flop_registry:
            dtype = next((a.dtype for a in args if isinstance(a, torch.Tensor)), torch.float32)
            name = DTYPE_NAMES.get(dtype, "fp32")
            if self.dtype is not None and dtype.is_floating_point and dtype.itemsize >= self.dtype.itemsize:
                name = self.compute  # an upcast inside the reference is its own accuracy, not the problem's math
            self.flops[name] += flop_registry[packet](*args, **kwargs, out_val=out)
            if packet in _MATMULS and isinstance(out, torch.Tensor) and out.dim() >= 2:
                batch = math.prod(out.shape[:-2])
                tiles = batch * math.ceil(out.shape[-2] / GEMM_TILE_M) * math.ceil(out.shape[-1] / GEMM_TILE_N)
                self.tiles = max(self.tiles, tiles)
        return out


def _workload(problem: Problem, rec: _Recorder, hbm_bytes: int, params: dict[str, Any], dtype: str) -> Workload:
    compute = ()
    if rec.flops:
        main = max(rec.flops, key=rec.flops.__getitem__)
        compute = (ComputeOp("compute", sum(rec.flops.values()), main, float(hbm_bytes), rec.tiles),)
    comm = tuple(
        CommOp(
            f"{kind.value}-{i}",
            kind,
            float(nbytes),
            group,
            producer="compute" if (compute and after) else None,
            consumer="compute" if (compute and not after) else None,
        )
        for i, (kind, nbytes, group, after) in enumerate(rec.comm)
    )
    numeric = {k: float(v) for k, v in params.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
    return Workload(problem.name, compute, comm, hbm_bytes=float(hbm_bytes), params=numeric, dtype=dtype)


def _main_dtype(inputs: tuple) -> torch.dtype | None:
    """The floating dtype holding the most input bytes (bf16 gradients beside an fp32 master shard: bf16)."""
    held: dict[torch.dtype, int] = defaultdict(int)
    for t in inputs:
        if isinstance(t, torch.Tensor) and t.dtype.is_floating_point:
            held[t.dtype] += _nbytes(t)
    return max(held, key=held.__getitem__) if held else None


def _meta_inputs(problem: Problem, world_size: int, seed: int, params: dict[str, Any]) -> tuple:
    """Rank 0's inputs as meta tensors: made on meta directly (instant at any shape) when every op allows it."""
    meta = torch.device("meta")
    try:
        with meta:
            return problem.inputs(0, world_size, seed=seed, device=meta, params=params)
    except ValueError:
        raise
    except Exception:  # an op without a meta kernel (bincount, …): make them on the CPU, then move
        return guarded(problem, "inputs", lambda: problem.inputs(0, world_size, seed=seed, device=meta, params=params))


def input_dtype(problem: Problem, world_size: int, params: dict[str, Any]) -> str:
    """The problem's dtype at this shape: the floating dtype holding most of its input bytes ("bf16" if none)."""
    main = _main_dtype(_meta_inputs(problem, world_size, 0, params))
    return DTYPE_NAMES.get(main, "fp32") if main is not None else "bf16"


def _recast(inputs: tuple, dtype: str | None, world_size: int) -> tuple[tuple, _Recorder]:
    """The inputs with those of the problem's dtype cast to `dtype` (None: as drawn), and a recorder charging FLOPs
    at it."""
    if dtype is not None and dtype not in TORCH_DTYPES:
        raise ValueError(f"unknown dtype {dtype!r} (one of: {', '.join(TORCH_DTYPES)})")
    main = _main_dtype(inputs)
    if dtype is None or main is None:
        return inputs, _Recorder(world_size, main, DTYPE_NAMES.get(main, "fp32") if main is not None else "bf16")
    to = TORCH_DTYPES[dtype]
    cast = tuple(t.to(to) if isinstance(t, torch.Tensor) and t.dtype == main else t for t in inputs)
    return cast, _Recorder(world_size, to, dtype)


def cast_inputs(inputs: tuple, dtype: str) -> tuple:
    """The inputs with those of the problem's own floating dtype cast to `dtype` (the profiler's `--dtype`)."""
    return _recast(inputs, dtype, 1)[0]


def trace_on_meta(
    problem: Problem, world_size: int, params: dict[str, Any], *, seed: int = 0, dtype: str | None = None
) -> Workload:
    """Rank 0's view on meta tensors over torch's fake process group, its floating inputs in `dtype` if given;
    raises one of NEEDS_DATA if the reference needs values, TraceError if it raises anything else."""
    from torch.testing._internal.distributed.fake_pg import FakeStore

    if dist.is_initialized():
        raise RuntimeError("a process group is already initialised in this process; trace over gloo instead")
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=world_size)
    try:
        # batch_isend_irecv asks the group for its tensors' device's backend: meta gets the fake one too (a
        # "cpu:fake,meta:fake" group does the same, but warns when it is destroyed)
        group, cpu = dist.group.WORLD, torch.device("cpu")
        group._register_backend(torch.device("meta"), group.BackendType.CUSTOM, group._get_backend(cpu))
        inputs, rec = _recast(_meta_inputs(problem, world_size, seed, params), dtype, world_size)
        with rec:
            try:
                out = problem.reference(*inputs)
            except NEEDS_DATA:
                raise
            except Exception as e:
                raise TraceError(failure_line(problem, "reference", e)) from e
    finally:
        dist.destroy_process_group()
    return _workload(problem, rec, _nbytes(inputs) + _nbytes(out), params, rec.compute)


def trace_rank(problem: Problem, rank: int, world_size: int, params: dict[str, Any], seed: int = 0) -> Workload:
    """This rank's trace with real data over an initialised process group (gloo on CPU)."""
    cpu = torch.device("cpu")
    made = guarded(problem, "inputs", lambda: problem.inputs(rank, world_size, seed=seed, device=cpu, params=params))
    inputs, rec = _recast(made, None, world_size)
    with rec:
        out = guarded(problem, "reference", lambda: problem.reference(*inputs))
    return _workload(problem, rec, _nbytes(inputs) + _nbytes(out), params, rec.compute)


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
        where = problem.name if problem.suite else str(problem.path)
        job = run_ranks(_trace_job, world_size, (where, params), backend="gloo", timeout_s=TRACE_TIMEOUT_S)
        return job[0]
    except RankFailedError as e:
        for said in (TraceError, ProblemError):  # the problem's own code raised: the rank said which function
            prefix = f"{said.__module__}.{said.__qualname__}: "
            if e.message.startswith(prefix):
                raise TraceError(e.message.removeprefix(prefix)) from None
        if e.exitcode is not None and e.exitcode < 0:
            raise TraceError(
                f"{what} was killed (signal {-e.exitcode}: out of memory?); its reference needs data to trace "
                f"({on_meta}), so the trace needs the memory of the real run: try a smaller --shape or --world-size"
            ) from None
        raise TraceError(f"{what} failed: rank {e.rank}: {e.message or e.how}") from None
    except RankTimeoutError:
        raise TraceError(
            f"{what} did not finish in {TRACE_TIMEOUT_S:g} s; its reference needs data to trace ({on_meta}): "
            "try a smaller --shape or --world-size"
        ) from None


def _trace_job(rank: int, world_size: int, path: str, params: dict[str, Any]) -> Workload:
    from pkroof.kernels.catalogue import load

    return trace_rank(load(path), rank, world_size, params)
