"""Trace a problem's reference into a Workload: every rank's FLOPs by dtype, HBM bytes and collectives, and the data
flow between its collectives.

One dispatch mode (_Recorder) sees every op a reference runs, however the problem file imported torch.distributed:

- FLOPs: torch's FLOP formulas (matmuls, convolutions, attention), plus FFTs at 5·N·log2 N per complex transform of
  N points and 2.5·N·log2 N per real one (the usual radix-2 count); an op that does more than O(1) work per element
  but has no formula (linear algebra, say) is named in Workload.uncounted, not silently counted as zero.
- The rate they run at: FLOPs are charged at the problem's dtype wherever the op computes at least as wide (an upcast
  is the reference's accuracy, not the problem's math); an fp32 convolution or matmul that torch runs on TF32 tensor
  cores (cudnn's `allow_tf32`, on by default for convolutions; matmul precision "high" or "medium"), as read while the
  reference runs, is charged at the TF32 peak.
- HBM bytes: every tensor the reference reads that it did not make — its inputs, the parameters and buffers of
  modules among them, tensors it captured — once, and its outputs once.
- Communication: every c10d op (collectives, point-to-point, functional collectives) with its bytes in nccl-tests'
  convention; where a rank's bytes are uneven (split sizes, unequal lists, point-to-point) this rank's own bytes to
  and from its peers. Point-to-point ops issued together (none waiting on another's data) are one step.
- Data flow: which collectives each collective's data depends on, through any compute: the latency term is the
  longest such chain, so ops issued together or on independent data overlap.

Every rank is traced, on meta tensors over torch's fake process group (any shape, no memory, no data moved); ranks
that differ are kept as views (Workload.ranks) and the bound charges each term at its busiest rank. A reference
whose control flow needs values (`.item()`, MoE split sizes) is run for real on CPU ranks over gloo instead; there,
collectives that gloo refuses and NCCL runs (unequal all-gather or all-to-all lists) are run padded to equal sizes,
their real bytes recorded. Inputs that need values to be drawn are drawn on the CPU and moved to meta.
"""

from __future__ import annotations

import math
import re
import weakref
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, ClassVar

import torch
import torch.distributed as dist
from torch._subclasses.fake_tensor import FakeTensor
from torch.utils._python_dispatch import TorchDispatchMode, is_traceable_wrapper_subclass
from torch.utils._pytree import tree_flatten, tree_map
from torch.utils.flop_counter import flop_registry

from pkroof.analysis.catalogue import Problem, ProblemError, failure_line, guarded
from pkroof.analysis.source import SourceFile
from pkroof.rooflines import Collective, CommOp, ComputeOp, Workload
from pkroof.rooflines.builders import GEMM_TILE_M, GEMM_TILE_N
from pkroof.rooflines.workload import RankView

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
_CONVOLUTIONS = {p for p in flop_registry if "conv" in str(p)}
# torch's CPU attention kernel has no formula of its own; it computes what the flash kernel does
_SDPA_CPU = getattr(torch.ops.aten, "_scaled_dot_product_flash_attention_for_cpu", None)
# ops that do more than O(1) arithmetic per element, by a word of their name: without a formula they are named, not
# counted as zero ("gelu" or "detach" hold no such word; "linalg_solve_ex" holds two)
_HEAVY = frozenset(
    [
        "conv",
        "convolution",
        "mm",
        "bmm",
        "matmul",
        "attention",
        "fft",
        "linalg",
        "solve",
        "cholesky",
        "qr",
        "svd",
        "eig",
        "eigh",
        "eigvals",
        "lstsq",
        "lu",
        "inverse",
        "det",
        "slogdet",
        "pinv",
        "einsum",
        "tensordot",
        "cdist",
        "bilinear",
        "kron",
        "triangular",
        "gru",
        "lstm",
        "rnn",
        "geqrf",
        "ormqr",
        "matrix",
    ]
)
# what a reference whose control flow needs values raises on meta tensors (`.item()`, `.tolist()`, no meta kernel)
NEEDS_DATA = (RuntimeError, NotImplementedError)
TRACE_TIMEOUT_S = 300.0  # CPU ranks over gloo: a reference at a real model's shape is slow on a few cores


class TraceError(ProblemError):
    """A problem could not be traced: its inputs or reference raised, or its CPU ranks died or hung; one line."""


class InputChangedError(Exception):
    """The reference wrote into one of its inputs (raised inside the trace; reported as a TraceError)."""


def _nbytes(t: Any) -> int:
    return t.numel() * t.element_size() if isinstance(t, torch.Tensor) else 0


def _tensors(obj: Any) -> list[torch.Tensor]:
    """Every tensor in a nested structure, and the parameters and buffers of every module in it."""
    found = []
    for leaf in tree_flatten(obj)[0]:
        if isinstance(leaf, torch.Tensor):
            found.append(leaf)
        elif isinstance(leaf, torch.nn.Module):
            found += [*leaf.parameters(), *leaf.buffers()]
    return found


def _base(t: torch.Tensor) -> torch.Tensor:
    return t._base if t._base is not None else t


def _group(args: tuple, kwargs: dict) -> tuple[int, int] | None:
    """(size, this rank's index) of the process group among an op's arguments (a c10d op's boxed group, or a
    functional collective's group name); None where there is none."""
    for a in (*args, *kwargs.values()):
        if isinstance(a, torch.ScriptObject):
            try:
                pg = dist.ProcessGroup.unbox(a)
            except Exception:  # a ReduceOp or another script object: keep looking
                continue
            return pg.size(), pg.rank()
    for a in (*args, *kwargs.values()):
        if isinstance(a, str):
            try:
                pg = torch.distributed.distributed_c10d._resolve_process_group(a)
            except Exception:  # a reduce op's name ("sum"), not a group
                continue
            return pg.size(), pg.rank()
    return None


@dataclass(frozen=True)
class _Comm:
    """What one c10d op moves, for this rank: its kind, bytes in nccl-tests' convention, and, where this rank's
    bytes are not what kind and size make them, its own bytes to and from peers."""

    kind: Collective
    size: float
    send: float | None = None
    recv: float | None = None


def _uneven(kind: Collective, size: float, send: float, recv: float, even: bool) -> _Comm:
    return _Comm(kind, size) if even else _Comm(kind, size, send, recv)


def _list_bytes(tensors: list) -> list[int]:
    return [_nbytes(t) for t in tensors]


def _check_shapes(name: str, args: tuple, n: int) -> None:
    """A ValueError where a one-tensor all-gather or reduce-scatter's output and input do not match as NCCL
    requires (output = n × input, or input = n × output): a collective that cannot run has no roof."""
    if name not in ("_allgather_base_", "_reduce_scatter_base_") or len(args) < 2:
        return
    out, inp = args[0], args[1]
    if not (isinstance(out, torch.Tensor) and isinstance(inp, torch.Tensor)):
        return
    big, small, what = (
        (out, inp, "all-gather's output") if name == "_allgather_base_" else (inp, out, "reduce-scatter's input")
    )
    if big.numel() != n * small.numel():
        raise ValueError(
            f"{what} has {big.numel()} elements, not {n} ranks × {small.numel()}: NCCL refuses it, so it has no bound"
        )


def _comm(name: str, args: tuple, n: int, r: int) -> _Comm | None:
    """The collective a c10d (or functional) op of `name` is, on a group of n ranks where this one is r."""
    _check_shapes(name, args, n)
    match name:
        case (
            "allreduce_"
            | "allreduce_coalesced_"
            | "all_reduce"
            | "all_reduce_"
            | "all_reduce_coalesced"
            | ("all_reduce_coalesced_")
        ):
            return _Comm(Collective.ALL_REDUCE, sum(map(_nbytes, tree_flatten(args[0])[0])))
        case "allgather_coalesced_":  # (output lists, inputs)
            return _Comm(Collective.ALL_GATHER, sum(map(_nbytes, tree_flatten(args[0])[0])))
        case "all_gather_into_tensor_out":
            return _Comm(Collective.ALL_GATHER, n * _nbytes(args[0]))
        case "reduce_scatter_tensor_out":
            return _Comm(Collective.REDUCE_SCATTER, _nbytes(args[0]))
        case "shard_dim_alltoall":  # DTensor's Shard(i) → Shard(j): one all-to-all of the local shard
            return _Comm(Collective.ALL_TO_ALL, _nbytes(args[0]))
        case "_allgather_base_" | "allgather_into_tensor_coalesced_":
            return _Comm(Collective.ALL_GATHER, sum(map(_nbytes, tree_flatten(args[0])[0])))
        case "all_gather_into_tensor" | "all_gather_into_tensor_coalesced":
            return _Comm(Collective.ALL_GATHER, n * sum(map(_nbytes, tree_flatten(args[0])[0])))
        case "allgather_":  # (output lists, inputs): unequal lists are a rank sending its own to each peer
            outs = _list_bytes(args[0][0])
            own = _nbytes(args[1][0])
            return _uneven(Collective.ALL_GATHER, sum(outs), (n - 1) * own, sum(outs) - outs[r], len(set(outs)) == 1)
        case "_reduce_scatter_base_" | "reduce_scatter_tensor_coalesced_":
            return _Comm(Collective.REDUCE_SCATTER, sum(map(_nbytes, tree_flatten(args[1])[0])))
        case "reduce_scatter_tensor" | "reduce_scatter_tensor_coalesced":
            return _Comm(Collective.REDUCE_SCATTER, sum(map(_nbytes, tree_flatten(args[0])[0])))
        case "reduce_scatter_":  # (outputs, input lists)
            ins = _list_bytes(args[1][0])
            out = _nbytes(args[0][0])
            return _uneven(Collective.REDUCE_SCATTER, sum(ins), sum(ins) - ins[r], (n - 1) * out, len(set(ins)) == 1)
        case "alltoall_base_" | "all_to_all_single":
            return _all_to_all_single(name, args, n, r)
        case "alltoall_":  # (output list, input list)
            outs, ins = _list_bytes(args[0]), _list_bytes(args[1])
            even = len(set(outs)) == 1 and len(set(ins)) == 1
            return _uneven(Collective.ALL_TO_ALL, sum(ins), sum(ins) - ins[r], sum(outs) - outs[r], even)
        case "broadcast_" | "broadcast":
            return _Comm(Collective.BROADCAST, sum(map(_nbytes, tree_flatten(args[0])[0])))
        case "reduce_":
            return _Comm(Collective.REDUCE, sum(map(_nbytes, tree_flatten(args[0])[0])))
        case "gather_":  # (output lists at the root, inputs, group, root): direct, so each rank's own bytes
            own, outs = _nbytes(args[1][0]), _list_bytes(args[0][0]) if args[0] and args[0][0] else []
            root = args[3] if len(args) > 3 and isinstance(args[3], int) else 0
            recv = sum(outs) - outs[r] if (outs and r == root) else 0
            return _Comm(Collective.GATHER, n * own, 0 if r == root else own, recv)
        case "scatter_":  # (outputs, input lists at the root, group, root): direct, so each rank's own bytes
            own, ins = _nbytes(args[0][0]), _list_bytes(args[1][0]) if args[1] and args[1][0] else []
            root = args[3] if len(args) > 3 and isinstance(args[3], int) else 0
            send = sum(ins) - ins[r] if (ins and r == root) else 0
            return _Comm(Collective.SCATTER, n * own, send, 0 if r == root else own)
    return None


def _all_to_all_single(name: str, args: tuple, n: int, r: int) -> _Comm:
    """all_to_all_single, with split sizes along dim 0 (empty: even) of its output and input."""
    if name == "alltoall_base_":  # (output, input, group, output_split_sizes, input_split_sizes)
        out, inp, out_splits, in_splits = args[0], args[1], list(args[3]), list(args[4])
        out_row = _nbytes(out) / out.shape[0] if out.dim() and out.shape[0] else 0.0
    else:  # functional: (input, output_split_sizes, input_split_sizes, group name)
        inp, out_splits, in_splits = args[0], list(args[1]), list(args[2])
        out_row = _nbytes(inp) / inp.shape[0] if inp.dim() and inp.shape[0] else 0.0
    in_row = _nbytes(inp) / inp.shape[0] if inp.dim() and inp.shape[0] else 0.0
    rows = inp.shape[0] if inp.dim() else 0
    in_splits = in_splits or [rows // n] * n
    out_splits = out_splits or [rows // n] * n
    even = len(set(in_splits)) == 1 and len(set(out_splits)) == 1
    send = sum(s for j, s in enumerate(in_splits) if j != r) * in_row
    recv = sum(s for j, s in enumerate(out_splits) if j != r) * out_row
    return _uneven(Collective.ALL_TO_ALL, _nbytes(inp), send, recv, even)


_P2P = {"send": "send", "recv_": "recv", "recv_any_source_": "recv", "isend": "send", "irecv": "recv"}
_COMM_NAMESPACES = ("c10d", "_c10d_functional", "_dtensor")
_IGNORED = {"barrier", "monitored_barrier_", "wait_tensor", "_wrap_tensor_autograd"}


@dataclass
class _Event:
    kind: Collective
    size: float
    group: int
    send: float | None
    recv: float | None
    after: set[int]
    after_compute: bool
    p2p: bool = False


def _conv_tf32() -> bool:
    conv = getattr(torch.backends.cudnn, "conv", None)
    precision = getattr(conv, "fp32_precision", None) if conv is not None else None
    return precision == "tf32" if precision not in (None, "none") else bool(torch.backends.cudnn.allow_tf32)


def _matmul_tf32() -> bool:
    precision = getattr(torch.backends.cuda.matmul, "fp32_precision", None)
    if precision not in (None, "none"):
        return precision == "tf32"
    return torch.backends.cuda.matmul.allow_tf32 or torch.get_float32_matmul_precision() in ("high", "medium")


def _fft_flops(packet: Any, args: tuple, out: Any) -> float:
    """5·N·log2 N per complex transform of N points, 2.5·N·log2 N per real one, times the batch."""
    x = out if packet is torch.ops.aten._fft_c2r else args[0]
    dims = [d % x.dim() for d in args[1]]
    points = math.prod(x.shape[d] for d in dims)
    if points < 2:
        return 0.0
    batch = x.numel() / points
    per_point = 5.0 if packet is torch.ops.aten._fft_c2c else 2.5
    return batch * per_point * points * math.log2(points)


_FFTS = {torch.ops.aten._fft_r2c, torch.ops.aten._fft_c2c, torch.ops.aten._fft_c2r}


_RECORDING: list[_Recorder] = []  # the recorders active now (innermost last)


@dataclass
class _Recorder(TorchDispatchMode):
    """One rank's trace: FLOPs by the dtype they are charged at, tensors read from outside, collectives and the
    collectives each depends on. `padded`: run the collectives gloo refuses (unequal lists) padded (CPU ranks)."""

    world_size: int
    rank: int = 0
    dtype: torch.dtype | None = None  # the problem's
    compute: str = "bf16"  # what FLOPs at least as wide as `dtype` are charged at
    padded: bool = False
    flops: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    tiles: int = 1
    uncounted: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    events: list[_Event] = field(default_factory=list)
    read: dict[int, int] = field(default_factory=dict)  # id of a base tensor read from outside → its bytes
    _made: dict[int, tuple[Any, frozenset[int]]] = field(default_factory=dict)  # tensors made here → their deps
    _open_p2p: int | None = None  # the point-to-point step still being issued
    _host: frozenset[int] = frozenset()  # collectives whose results the host has waited for
    inputs: set[int] = field(default_factory=set)  # ids of the inputs' base tensors (module parameters included)

    def __post_init__(self) -> None:
        super().__init__()

    def __enter__(self) -> _Recorder:
        _RECORDING.append(self)
        return super().__enter__()

    def __exit__(self, *exc: object) -> None:
        _RECORDING.remove(self)
        return super().__exit__(*exc)

    # --- tensors made here, and the collectives their data depends on
    def _deps(self, t: torch.Tensor) -> frozenset[int] | None:
        entry = self._made.get(id(t))
        return entry[1] if entry is not None and entry[0]() is t else None

    def _mark(self, t: torch.Tensor, deps: frozenset[int]) -> None:
        self._made[id(t)] = (weakref.ref(t), deps)

    def _reads(self, tensors: list[torch.Tensor], *, external: bool = True) -> frozenset[int]:
        """The collectives these tensors' data depend on; with `external`, a tensor not made here counts as read."""
        deps: set[int] = set()
        for t in tensors:
            mine = self._deps(t)
            if mine is None:
                if external:
                    base = _base(t)
                    self.read.setdefault(id(base), _nbytes(base))
            else:
                deps |= mine
        return frozenset(deps)

    def host_waits(self, tensors: list[torch.Tensor]) -> None:
        """The host read these tensors' values (`.item()`, `.tolist()`): what they depend on comes before every
        collective issued from now on."""
        self._host |= self._reads(tensors, external=False)

    def _check_writes(self, func: Any, args: tuple, kwargs: dict, name: str, comm: bool) -> None:
        """A reference must not change its inputs (the profiler compares implementations on untouched ones)."""
        if comm:
            written = [] if (func.namespace != "c10d" or name in ("send", "isend")) else tree_flatten(args[0])[0]
        else:
            written = self._written(func, args, kwargs, None)
        for t in written:
            if isinstance(t, torch.Tensor) and id(_base(t)) in self.inputs:
                raise InputChangedError(
                    f"it changes one of its inputs ({func.namespace}.{name} writes into it): clone it first, as the "
                    "profiler checks every implementation on inputs the reference left as they were"
                )

    def declare_read(self, tensors: list[torch.Tensor]) -> None:
        """Count these (the inputs, their modules' parameters) as read once, whether or not an op touches them."""
        for t in tensors:
            base = _base(t)
            self.read.setdefault(id(base), _nbytes(base))
            self.inputs.add(id(base))

    # --- collectives
    def _record(self, name: str, args: tuple, kwargs: dict, deps: frozenset[int]) -> int | None:
        n, r = _group(args, kwargs) or (self.world_size, self.rank)
        deps = deps | self._host  # what the host waited for before issuing it: a step before this one
        if name == "batch_p2p_ops":  # functional: (ops, peers, tags, tensors, group): one step, issued together
            kinds, tensors = args[0], args[3]
            send = float(sum(_nbytes(x) for k, x in zip(kinds, tensors, strict=False) if "send" in str(k)))
            recv = float(sum(_nbytes(x) for k, x in zip(kinds, tensors, strict=False) if "recv" in str(k)))
            self._open_p2p = None
            self.events.append(
                _Event(Collective.SEND_RECV, max(send, recv), 2, send, recv, set(deps), bool(self.flops))
            )
            return len(self.events) - 1
        if name in _P2P:
            nbytes = sum(map(_nbytes, tree_flatten(args[0])[0]))
            send, recv = (nbytes, 0.0) if _P2P[name] == "send" else (0.0, nbytes)
            op = self._open_p2p
            if op is not None and op not in deps:  # issued together with the open step, on data not from it
                e = self.events[op]
                e.send, e.recv = e.send + send, e.recv + recv
                e.size = max(e.send, e.recv)
                e.after |= deps
                return op
            self.events.append(
                _Event(Collective.SEND_RECV, max(send, recv), 2, send, recv, set(deps), bool(self.flops))
            )
            self._open_p2p = len(self.events) - 1
            return self._open_p2p
        comm = _comm(name, args, n, r)
        if comm is None:  # a communication op pkroof does not model: named, not silently left out
            self.uncounted[f"communication {name}"] += 1
            return None
        self._open_p2p = None
        self.events.append(_Event(comm.kind, comm.size, n, comm.send, comm.recv, set(deps), bool(self.flops)))
        return len(self.events) - 1

    def _padded(self, func: Any, name: str, args: tuple) -> Any:
        """An all-gather or all-to-all of unequal lists, which gloo refuses and NCCL runs: run padded to equal sizes,
        copied into the real outputs; what the op returns (its outputs and a finished Work). None where the op is
        not one of those, its lists are equal, or this is not a CPU-rank trace."""
        if not self.padded or name not in ("allgather_", "alltoall_"):
            return None
        outs, ins = (args[0][0], args[1]) if name == "allgather_" else (args[0], args[1])
        sizes = [t.numel() for t in (*outs, *ins)]
        if len(set(sizes)) == 1:
            return None
        widest = torch.tensor([max(sizes)], dtype=torch.int64)
        dist.all_reduce(widest, op=dist.ReduceOp.MAX)  # every rank pads to the same width (its lists differ)
        width = int(widest.item())

        def pad(t: torch.Tensor) -> torch.Tensor:
            return torch.nn.functional.pad(t.reshape(-1), (0, width - t.numel()))

        padded_outs = [torch.empty(width, dtype=t.dtype) for t in outs]
        wide = [pad(t) for t in ins]
        result = func([padded_outs] if name == "allgather_" else padded_outs, wide, *args[2:])
        result[1].wait()
        for out, got in zip(outs, padded_outs, strict=True):
            out.copy_(got[: out.numel()].view_as(out))
        return (args[0], result[1])

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = func._overloadpacket.__name__
        inputs = [a for a in tree_flatten((args, kwargs))[0] if isinstance(a, torch.Tensor)]
        if any(is_traceable_wrapper_subclass(t) for t in inputs):  # DTensor & co.: count the local ops they run
            return NotImplemented
        if any(isinstance(t, FakeTensor) for t in inputs):  # shapes worked out (DTensor's sharding propagation)
            return func(*args, **kwargs)
        comm = func.namespace in _COMM_NAMESPACES and name not in _IGNORED
        deps = self._reads(inputs, external=not comm)  # what collectives move crosses HBM in their own term
        if name == "_local_scalar_dense":  # .item(): the host waits for this value before it issues anything more
            self.host_waits(inputs)
        self._check_writes(func, args, kwargs, name, comm)
        if comm:
            event = self._record(name, args, kwargs, deps)
            out = self._padded(func, name, args)
            out = func(*args, **kwargs) if out is None else out
            if event is not None:  # c10d ops write their first argument (all but send); functional ones return
                written = [] if (func.namespace != "c10d" or name == "send") else tree_flatten(args[0])[0]
                for t in [*written, *tree_flatten(out)[0]]:
                    if isinstance(t, torch.Tensor):
                        self._mark(t, frozenset({event}))
            return out
        out = func(*args, **kwargs)
        if self._open_p2p is not None and self._open_p2p in deps:
            self._open_p2p = None  # this op waits on the open step's data: a later send is a step of its own
        self._count(func, args, kwargs, out)
        for t in self._written(func, args, kwargs, out):
            self._mark(t, deps)
        return out

    @staticmethod
    def _written(func: Any, args: tuple, kwargs: dict, out: Any) -> list[torch.Tensor]:
        """The tensors an op made or wrote: its outputs and its mutated arguments."""
        written = [t for t in tree_flatten(out)[0] if isinstance(t, torch.Tensor)]
        for i, arg in enumerate(func._schema.arguments):
            if arg.alias_info is not None and arg.alias_info.is_write:
                value = args[i] if i < len(args) else kwargs.get(arg.name)
                written += [t for t in tree_flatten(value)[0] if isinstance(t, torch.Tensor)]
        return written

    def _count(self, func: Any, args: tuple, kwargs: dict, out: Any) -> None:
        packet = func._overloadpacket
        dtype = next((a.dtype for a in args if isinstance(a, torch.Tensor)), torch.float32)
        if packet in flop_registry or packet in _FFTS or packet is _SDPA_CPU:
            if packet in _FFTS:
                flops = _fft_flops(packet, args, out)
            else:
                formula = flop_registry[
                    torch.ops.aten._scaled_dot_product_flash_attention if packet is _SDPA_CPU else packet
                ]
                flops = formula(*args, **kwargs, out_val=out)
            self.flops[self._charged_at(packet, dtype)] += flops
            if packet in _MATMULS and isinstance(out, torch.Tensor) and out.dim() >= 2:
                batch = math.prod(out.shape[:-2])
                tiles = batch * math.ceil(out.shape[-2] / GEMM_TILE_M) * math.ceil(out.shape[-1] / GEMM_TILE_N)
                self.tiles = max(self.tiles, tiles)
        elif func.namespace == "aten" and _HEAVY & set(packet.__name__.split("_")):
            self.uncounted[f"aten.{packet.__name__}"] += 1

    def _charged_at(self, packet: Any, dtype: torch.dtype) -> str:
        """The peak an op's FLOPs are charged at: the problem's dtype where it computes at least as wide; TF32 for
        an fp32 convolution or matmul that torch would run on TF32 tensor cores."""
        name = DTYPE_NAMES.get(dtype, "fp32")
        if self.dtype is not None and dtype.is_floating_point and dtype.itemsize >= self.dtype.itemsize:
            name = self.compute
        tf32 = (packet in _CONVOLUTIONS and _conv_tf32()) or (packet in _MATMULS and _matmul_tf32())
        return "tf32" if (name == "fp32" and dtype == torch.float32 and tf32) else name

    # --- the rank's workload
    def workload(self, problem: Problem, out: Any, params: dict[str, Any], dtype: str) -> Workload:
        if not _tensors(out):
            raise TraceError(
                f"{problem.path}: reference() returned {type(out).__name__}, no tensor: every rank returns its output "
                "(a tensor or a tuple of them), which the profiler compares"
            )
        hbm = sum(self.read.values()) + sum(map(_nbytes, _tensors(out)))
        compute: tuple[ComputeOp, ...] = ()
        if self.flops:  # one op per peak the FLOPs are charged at, the main one (most FLOPs) first with the bytes
            main = max(self.flops, key=self.flops.__getitem__)
            compute = (ComputeOp("compute", self.flops[main], main, float(hbm), self.tiles),)
            compute += tuple(ComputeOp(f"compute-{d}", f, d, 0.0) for d, f in sorted(self.flops.items()) if d != main)
        names = [f"{e.kind.value}-{i}" for i, e in enumerate(self.events)]
        comm = tuple(
            CommOp(
                names[i],
                e.kind,
                float(e.size),
                e.group,
                producer="compute" if (compute and e.after_compute) else None,
                consumer="compute" if (compute and not e.after_compute) else None,
                send_bytes=None if e.send is None else float(e.send),
                recv_bytes=None if e.recv is None else float(e.recv),
                after=tuple(names[j] for j in sorted(e.after) if j != i),
            )
            for i, e in enumerate(self.events)
        )
        numeric = {k: v for k, v in params.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
        return Workload(
            problem.name,
            compute,
            comm,
            hbm_bytes=float(hbm),
            params=numeric,
            dtype=dtype,
            uncounted=tuple(sorted(self.uncounted)),
        )


class _Stream:
    """A CUDA stream or event while a reference is traced: ordering on one device is not what a trace counts."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.device = torch.device("meta")

    def __enter__(self) -> _Stream:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def __getattr__(self, name: str) -> Any:  # wait_stream, record_event, synchronize, query, elapsed_time...
        return lambda *args, **kwargs: None if name not in ("query",) else True


def _cuda_like(device: Any) -> bool:
    """A device that names a GPU: "cuda", "cuda:1", torch.device("cuda"), or a bare index."""
    if isinstance(device, str):
        return device.startswith("cuda")
    if isinstance(device, torch.device):
        return device.type == "cuda"
    return isinstance(device, int) and not isinstance(device, bool)


class _OnTraceDevice(torch.overrides.TorchFunctionMode):
    """Tensors a reference puts on "cuda" (a hard-coded device, `.cuda()`) land on the trace's device instead."""

    def __init__(self, device: torch.device) -> None:
        super().__init__()
        self.device = device

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        if func in (torch.Tensor.tolist, torch.Tensor.numpy) and _RECORDING:  # the host reads values: it waits
            _RECORDING[-1].host_waits([args[0]])
        if func is torch.Tensor.cuda:
            return args[0].to(self.device)
        if _cuda_like(kwargs.get("device")):
            kwargs["device"] = self.device
        if func is torch.Tensor.to:
            args = tuple(self.device if _cuda_like(a) else a for a in args)
        return func(*args, **kwargs)


class _CudaShims:
    """While a reference is traced on meta tensors or CPU ranks: CUDA streams, events and device queries answer as a
    single device would, and tensors asked for on "cuda" are made on the trace's device, so code written for GPUs
    traces where it would run. Nothing is patched outside the trace."""

    NAMES: ClassVar[dict[str, Any]] = {
        "Stream": _Stream,
        "Event": _Stream,
        "stream": _Stream,
        "current_stream": _Stream,
        "default_stream": _Stream,
        "synchronize": lambda *a, **k: None,
        "current_device": lambda: 0,
        "set_device": lambda *a, **k: None,
    }

    def __init__(self, device: torch.device) -> None:
        self.mode = _OnTraceDevice(device)
        self.saved: dict[str, Any] = {}

    def __enter__(self) -> _CudaShims:
        for name, fake in self.NAMES.items():
            self.saved[name] = getattr(torch.cuda, name, None)
            setattr(torch.cuda, name, fake)
        self.mode.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.mode.__exit__(*exc)
        for name, real in self.saved.items():
            setattr(torch.cuda, name, real)


def _main_dtype(tensors: list[torch.Tensor]) -> torch.dtype | None:
    """The floating dtype holding the most bytes (bf16 gradients beside an fp32 master shard: bf16); a complex
    tensor counts as its parts' dtype (complex64: fp32, which its arithmetic runs in)."""
    held: dict[torch.dtype, int] = defaultdict(int)
    for t in tensors:
        if t.dtype.is_floating_point:
            held[t.dtype] += _nbytes(t)
        elif t.dtype.is_complex:
            held[t.dtype.to_real()] += _nbytes(t)
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


class _FakeGroup:
    """torch's fake process group as `rank` of `world_size`, for one rank's trace on meta tensors."""

    def __init__(self, rank: int, world_size: int) -> None:
        self.rank, self.world_size = rank, world_size

    def __enter__(self) -> _FakeGroup:
        from torch.testing._internal.distributed.fake_pg import FakeStore

        if dist.is_initialized():
            raise RuntimeError("a process group is already initialised in this process; trace over gloo instead")
        dist.init_process_group("fake", store=FakeStore(), rank=self.rank, world_size=self.world_size)
        # batch_isend_irecv asks the group for its tensors' device's backend: meta gets the fake one too
        group, cpu = dist.group.WORLD, torch.device("cpu")
        group._register_backend(torch.device("meta"), group.BackendType.CUSTOM, group._get_backend(cpu))
        return self

    def __exit__(self, *exc: object) -> None:
        dist.destroy_process_group()


def input_dtype(problem: Problem, world_size: int, params: dict[str, Any]) -> str:
    """The problem's dtype at this shape: the floating dtype holding most of its inputs' bytes, module parameters
    included ("bf16" if none)."""
    with _FakeGroup(0, world_size):
        main = _main_dtype(_tensors(_meta_inputs(problem, 0, world_size, 0, params)))
    return DTYPE_NAMES.get(main, "fp32") if main is not None else "bf16"


def _recorder(inputs: tuple, dtype: str | None, world_size: int, rank: int, padded: bool) -> tuple[tuple, _Recorder]:
    """The inputs with those of the problem's dtype cast to `dtype` (None: as drawn), and a recorder charging FLOPs
    at it, every input (and module parameter) already counted as read once."""
    if dtype is not None and dtype not in TORCH_DTYPES:
        raise ValueError(f"unknown dtype {dtype!r} (one of: {', '.join(TORCH_DTYPES)})")
    main = _main_dtype(_tensors(inputs))
    if dtype is not None and any(t.dtype.is_complex for t in _tensors(inputs)):
        raise ValueError(f"--dtype {dtype}: the problem's inputs are complex; --dtype casts real floating inputs only")
    if dtype is None or main is None:
        own = DTYPE_NAMES.get(main, "fp32") if main is not None else "bf16"
        rec = _Recorder(world_size, rank, main, own, padded)
    else:
        to = TORCH_DTYPES[dtype]

        def cast(x: Any) -> Any:
            if isinstance(x, torch.Tensor) and x.dtype == main:
                return x.to(to)
            if isinstance(x, torch.nn.Module):
                return x.to(to)
            return x

        inputs = tree_map(cast, inputs)
        rec = _Recorder(world_size, rank, to, dtype, padded)
    rec.declare_read(_tensors(inputs))
    return inputs, rec


def cast_inputs(inputs: tuple, dtype: str) -> tuple:
    """The inputs with those of the problem's own floating dtype cast to `dtype` (the profiler's `--dtype`)."""
    return _recorder(inputs, dtype, 1, 0, False)[0]


def _trace_rank_on_meta(
    problem: Problem, rank: int, world_size: int, params: dict[str, Any], seed: int, dtype: str | None
) -> Workload:
    with _FakeGroup(rank, world_size), _CudaShims(torch.device("meta")):
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
    if len(views) == 1:
        return Workload(**{**first.__dict__, "uncounted": uncounted})
    kept = tuple(RankView(tuple(rs), c, m, h) for (c, m, h), rs in views.items())
    return Workload(**{**first.__dict__, "ranks": kept, "uncounted": uncounted})


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
    with _CudaShims(cpu):
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
