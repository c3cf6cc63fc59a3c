"""Trace a problem's reference once into a Workload: its collectives, its FLOPs by dtype, its minimal HBM bytes.

First on meta tensors in this process, torch.distributed replaced by a recorder that moves no data (fast, works
at any shape); a reference whose control flow needs values (MoE split sizes, `.item()`) is then run for real on
CPU ranks over gloo, with the collectives recorded on rank 0. Comm ops before any FLOP feed the compute
(consumer), comm ops after it are fed by the compute (producer): that is what lets the model overlap them.
"""

from __future__ import annotations

import contextlib
import math
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.distributed as dist
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import flop_registry

from pkroof.rooflines import Collective, CommOp, ComputeOp, Workload
from pkroof.rooflines.workloads import GEMM_TILE_M, GEMM_TILE_N

from .problems import Problem

DTYPE_NAMES = {
    torch.bfloat16: "bf16",
    torch.float16: "fp16",
    torch.float32: "fp32",
    torch.float8_e4m3fn: "fp8",
    torch.float8_e5m2: "fp8",
}
_MATMULS = {torch.ops.aten.mm, torch.ops.aten.addmm, torch.ops.aten.bmm, torch.ops.aten.baddbmm}


def _nbytes(t: Any) -> int:
    if isinstance(t, torch.Tensor):
        return t.numel() * t.element_size()
    if isinstance(t, (list, tuple)):
        return sum(_nbytes(x) for x in t)
    return 0


@dataclass
class _Recorder:
    world_size: int
    comm: list[tuple[Collective, int, int, bool]] = field(default_factory=list)  # kind, bytes, group, after FLOPs
    flops: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    tiles: int = 1

    def collective(self, kind: Collective, nbytes: int, group: Any) -> None:
        size = self.world_size if group is None else dist.get_world_size(group)
        self.comm.append((kind, nbytes, size, bool(self.flops)))


class _FlopCounter(TorchDispatchMode):
    """FLOPs of every op torch's flop counter knows, by the dtype of its first tensor argument."""

    def __init__(self, recorder: _Recorder) -> None:
        super().__init__()
        self.recorder = recorder

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        packet = func._overloadpacket
        if packet in flop_registry:
            dtype = next((a.dtype for a in args if isinstance(a, torch.Tensor)), torch.float32)
            name = DTYPE_NAMES.get(dtype, "fp32")
            if name == "fp32" and torch.backends.cuda.matmul.allow_tf32:
                name = "tf32"
            self.recorder.flops[name] += flop_registry[packet](*args, **kwargs, out_val=out)
            if packet in _MATMULS and isinstance(out, torch.Tensor) and out.dim() >= 2:
                rows, cols = out.shape[-2], out.shape[-1]
                batch = math.prod(out.shape[:-2])
                tiles = batch * math.ceil(rows / GEMM_TILE_M) * math.ceil(cols / GEMM_TILE_N)
                self.recorder.tiles = max(self.recorder.tiles, tiles)
        return out


class _Work:
    def wait(self) -> bool:
        return True

    def is_completed(self) -> bool:
        return True


def _fake_distributed(rec: _Recorder, *, move_data: bool) -> dict[str, Any]:
    """Replacements for torch.distributed's collectives that record (kind, bytes, group) before (maybe) running."""
    real = {
        name: getattr(dist, name)
        for name in (
            "all_reduce",
            "all_gather_into_tensor",
            "reduce_scatter_tensor",
            "all_to_all_single",
            "broadcast",
            "reduce",
            "gather",
            "scatter",
            "send",
            "recv",
            "isend",
            "irecv",
            "batch_isend_irecv",
            "all_gather",
            "all_to_all",
            "barrier",
            "get_rank",
            "get_world_size",
            "is_initialized",
        )
    }
    world = rec.world_size

    def wrap(name: str, kind: Collective | None, nbytes) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            if kind is not None:
                rec.collective(kind, nbytes(*args, **kwargs), kwargs.get("group"))
            if move_data:
                return real[name](*args, **kwargs)
            return _Work() if kwargs.get("async_op") or name in ("isend", "irecv") else None

        return call

    def batch(ops: list, *args: Any, **kwargs: Any) -> Any:
        for op in ops:
            if getattr(op.op, "__name__", "") in ("isend", "send"):
                rec.collective(Collective.SEND_RECV, _nbytes(op.tensor), getattr(op, "group", None))
        return real["batch_isend_irecv"](ops) if move_data else [_Work() for _ in ops]

    fakes: dict[str, Any] = {
        "all_reduce": wrap("all_reduce", Collective.ALL_REDUCE, lambda t, *a, **k: _nbytes(t)),
        "all_gather_into_tensor": wrap(
            "all_gather_into_tensor", Collective.ALL_GATHER, lambda o, i, *a, **k: _nbytes(o)
        ),
        "reduce_scatter_tensor": wrap(
            "reduce_scatter_tensor", Collective.REDUCE_SCATTER, lambda o, i, *a, **k: _nbytes(i)
        ),
        "all_to_all_single": wrap("all_to_all_single", Collective.ALL_TO_ALL, lambda o, i, *a, **k: _nbytes(i)),
        "broadcast": wrap("broadcast", Collective.BROADCAST, lambda t, *a, **k: _nbytes(t)),
        "reduce": wrap("reduce", Collective.REDUCE, lambda t, *a, **k: _nbytes(t)),
        "gather": wrap("gather", Collective.GATHER, lambda t, *a, **k: world * _nbytes(t)),
        "scatter": wrap("scatter", Collective.SCATTER, lambda t, *a, **k: world * _nbytes(t)),
        "send": wrap("send", Collective.SEND_RECV, lambda t, *a, **k: _nbytes(t)),
        "isend": wrap("isend", Collective.SEND_RECV, lambda t, *a, **k: _nbytes(t)),
        "recv": wrap("recv", None, None),
        "irecv": wrap("irecv", None, None),
        "batch_isend_irecv": batch,
        "all_gather": wrap("all_gather", Collective.ALL_GATHER, lambda outs, t, *a, **k: _nbytes(outs)),
        "all_to_all": wrap("all_to_all", Collective.ALL_TO_ALL, lambda outs, ins, *a, **k: _nbytes(ins)),
        "barrier": wrap("barrier", None, None),
    }
    if not move_data:
        fakes |= {
            "get_rank": lambda group=None: 0,
            "get_world_size": lambda group=None: world,
            "is_initialized": lambda: True,
        }
    return fakes


@contextlib.contextmanager
def _patched(fakes: dict[str, Any]) -> Iterator[None]:
    saved = {name: getattr(dist, name) for name in fakes}
    try:
        for name, fn in fakes.items():
            setattr(dist, name, fn)
        yield
    finally:
        for name, fn in saved.items():
            setattr(dist, name, fn)


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


def trace_on_meta(problem: Problem, world_size: int, params: dict[str, Any], *, seed: int = 0) -> Workload:
    """Rank 0's view on meta tensors; raises if the reference needs values (then use trace_on_gloo)."""
    rec = _Recorder(world_size)
    with torch.device("meta"):
        inputs = problem.inputs(0, world_size, seed=seed, device=torch.device("meta"), params=params)
    with _patched(_fake_distributed(rec, move_data=False)), _FlopCounter(rec):
        out = problem.reference(*inputs)
    dtype = next((DTYPE_NAMES.get(t.dtype, "fp32") for t in inputs if isinstance(t, torch.Tensor)), "bf16")
    return _workload(problem, rec, _nbytes(inputs) + _nbytes(out), params, dtype)


def trace_rank(problem: Problem, rank: int, world_size: int, params: dict[str, Any], seed: int = 0) -> Workload:
    """This rank's trace with real data over an initialised process group (gloo on CPU)."""
    rec = _Recorder(world_size)
    inputs = problem.inputs(rank, world_size, seed=seed, device=torch.device("cpu"), params=params)
    with _patched(_fake_distributed(rec, move_data=True)), _FlopCounter(rec):
        out = problem.reference(*inputs)
    dtype = next((DTYPE_NAMES.get(t.dtype, "fp32") for t in inputs if isinstance(t, torch.Tensor)), "bf16")
    return _workload(problem, rec, _nbytes(inputs) + _nbytes(out), params, dtype)


def trace(problem: Problem, world_size: int, params: dict[str, Any]) -> Workload:
    """Meta tensors when the reference allows, else a real run on CPU ranks over gloo."""
    try:
        return trace_on_meta(problem, world_size, params)
    except Exception:  # value-dependent control flow on meta tensors: trace with real data instead
        from .launch import run_ranks

        return run_ranks(_trace_job, world_size, (str(problem.path), params), backend="gloo")[0]


def _trace_job(rank: int, world_size: int, path: str, params: dict[str, Any]) -> Workload:
    from .problems import load

    return trace_rank(load(path), rank, world_size, params)
