"""Trace a problem's reference once into a Workload: its collectives, its FLOPs by dtype, its minimal HBM bytes.

One dispatch mode sees both: torch's FLOP formulas for compute ops, and torch.distributed's c10d ops (which
every collective goes through, however the problem file imported it) for communication. First on meta tensors
in this process over torch's fake process group (no data moves; any shape); a reference whose control flow
needs values (MoE split sizes, `.item()`) is then run for real on CPU ranks over gloo. Comm ops before any FLOP
feed the compute (consumer), comm ops after it are fed by it (producer): that lets the model overlap them.
"""

from __future__ import annotations

import math
from collections import defaultdict
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
    """FLOPs by the dtype of each op's first tensor, and every collective with its bytes and group size."""

    world_size: int
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


def _dtype(inputs: tuple) -> str:
    return next((DTYPE_NAMES.get(t.dtype, "fp32") for t in inputs if isinstance(t, torch.Tensor)), "bf16")


def _meta_inputs(problem: Problem, world_size: int, seed: int, params: dict[str, Any]) -> tuple:
    """Rank 0's inputs as meta tensors: made on meta directly (instant at any shape) when every op allows it."""
    meta = torch.device("meta")
    try:
        with meta:
            return problem.inputs(0, world_size, seed=seed, device=meta, params=params)
    except ValueError:
        raise
    except Exception:  # an op without a meta kernel (bincount, …): make them on the CPU, then move
        return problem.inputs(0, world_size, seed=seed, device=meta, params=params)


def trace_on_meta(problem: Problem, world_size: int, params: dict[str, Any], *, seed: int = 0) -> Workload:
    """Rank 0's view on meta tensors over torch's fake process group; raises if the reference needs values."""
    from torch.testing._internal.distributed.fake_pg import FakeStore

    if dist.is_initialized():
        raise RuntimeError("a process group is already initialised in this process; trace over gloo instead")
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=world_size)
    try:
        inputs = _meta_inputs(problem, world_size, seed, params)
        rec = _Recorder(world_size)
        with rec:
            out = problem.reference(*inputs)
    finally:
        dist.destroy_process_group()
    return _workload(problem, rec, _nbytes(inputs) + _nbytes(out), params, _dtype(inputs))


def trace_rank(problem: Problem, rank: int, world_size: int, params: dict[str, Any], seed: int = 0) -> Workload:
    """This rank's trace with real data over an initialised process group (gloo on CPU)."""
    inputs = problem.inputs(rank, world_size, seed=seed, device=torch.device("cpu"), params=params)
    rec = _Recorder(world_size)
    with rec:
        out = problem.reference(*inputs)
    return _workload(problem, rec, _nbytes(inputs) + _nbytes(out), params, _dtype(inputs))


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
