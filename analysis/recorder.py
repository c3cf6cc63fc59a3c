"""One rank's trace of a reference: a dispatch mode (Recorder) that sees every op the reference runs, however the
problem file imported torch.distributed, and makes the rank's Workload of them: FLOPs by the dtype they are charged
at (torch's formulas; FFTs counted here; ops without a formula named, not counted as zero), the bytes of every tensor
read from outside and of the outputs, and the collectives (c10d_ops.py) with the collectives each one's data depends
on through any compute.
"""

from __future__ import annotations

import math
import weakref
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.distributed as dist
from torch._subclasses.fake_tensor import FakeTensor
from torch.utils._python_dispatch import TorchDispatchMode, is_traceable_wrapper_subclass
from torch.utils._pytree import tree_flatten
from torch.utils.flop_counter import flop_registry

from pkroof.analysis.catalogue import Problem, ProblemError
from pkroof.rooflines import Collective, CommOp, ComputeOp, Workload
from pkroof.rooflines.builders import GEMM_TILE_M, GEMM_TILE_N

from . import symm_mem_ops
from .c10d_ops import COMM_NAMESPACES, IGNORED, P2P, Comm, collective_of, process_group, tensor_bytes
from .causal import CausalAttention
from .storage_deps import StorageDeps

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
# ops that only allocate, copy or arrange data (views aside, which torch marks): what a bare collective's reference
# does around its collective (a clone, an empty output, a flattened bucket) without computing anything
_MOVES = frozenset(
    [
        "clone",
        "copy",
        "copy_",
        "_to_copy",
        "empty",
        "empty_like",
        "empty_strided",
        "new_empty",
        "new_empty_strided",
        "zeros",
        "zeros_like",
        "new_zeros",
        "zero_",
        "ones",
        "ones_like",
        "new_ones",
        "full",
        "full_like",
        "new_full",
        "fill_",
        "lift_fresh",
        "lift_fresh_copy",
        "cat",
        "stack",
        "contiguous",
        "_unsafe_view",
        "_reshape_alias",
        "reshape",
        "view",
        "flatten",
        "unflatten",
        "_local_scalar_dense",
        "split_with_sizes_copy",
        "detach_copy",
        "view_copy",
        "clone_",
        "resize_",
    ]
)
# ops that do more than O(1) arithmetic per element, by a word of their name: without a formula they are named, not
# counted as zero ("gelu" or "detach" hold no such word; "linalg_solve_ex" holds two)
# a vector norm is a multiply and an add per element (ord 2), like a sum: no FLOP term of its own, nothing missed
_PER_ELEMENT = {torch.ops.aten.linalg_vector_norm}
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


class TraceError(ProblemError):
    """A problem could not be traced: its inputs or reference raised, or its CPU ranks died or hung; one line."""


def tensors_in(obj: Any) -> list[torch.Tensor]:
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


RECORDING: list[Recorder] = []  # the recorders active now (innermost last)


@dataclass
class Recorder(TorchDispatchMode):
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
    other: set[str] = field(default_factory=set)  # ops that compute without a FLOP formula (Workload.other_ops)
    events: list[_Event] = field(default_factory=list)
    read: dict[int, int] = field(default_factory=dict)  # id of a base tensor read from outside → its bytes
    _made: dict[int, tuple[Any, frozenset[int]]] = field(default_factory=dict)  # tensors made here → their deps
    _storage: StorageDeps = field(default_factory=StorageDeps)  # written byte ranges of storages → their deps
    _open_p2p: int | None = None  # the point-to-point step still being issued
    _host: frozenset[int] = frozenset()  # collectives whose results the host has waited for
    inputs: set[int] = field(default_factory=set)  # ids of the inputs' base tensors (module parameters included)
    wrote: dict[int, torch.Tensor] = field(default_factory=dict)  # the inputs' base tensors the reference wrote into

    def __post_init__(self) -> None:
        super().__init__()

    _quiet: int = 0  # inside a causal attention charged as a whole (causal.py): its own matmuls count nothing

    def __enter__(self) -> Recorder:
        RECORDING.append(self)
        self._causal = CausalAttention(self._charge_causal, self._hush)
        self._causal.__enter__()
        return super().__enter__()

    def __exit__(self, *exc: object) -> None:
        RECORDING.remove(self)
        self._causal.__exit__(*exc)
        return super().__exit__(*exc)

    def _charge_causal(self, flops: float, dtype: torch.dtype) -> None:
        if not self._quiet:
            self.flops[self._charged_at(torch.ops.aten.bmm, dtype)] += flops

    def _hush(self, step: int) -> None:
        self._quiet += step

    # --- tensors made here, and the collectives their data depends on
    def _deps(self, t: torch.Tensor) -> frozenset[int] | None:
        entry = self._made.get(id(t))
        mine = entry[1] if entry is not None and entry[0]() is t else None
        stored = self._storage.read(t)  # through views and out= (storage_deps.py)
        return mine if stored is None else (mine or frozenset()) | stored

    def _mark(self, t: torch.Tensor, deps: frozenset[int]) -> None:
        self._made[id(t)] = (weakref.ref(t), deps)
        self._storage.wrote(t, deps)

    def _reads(self, tensors: list[torch.Tensor], *, external: bool = True) -> frozenset[int]:
        """The collectives these tensors' data depend on; with `external`, a tensor not made here counts as read."""
        deps: set[int] = set()
        for t in tensors:
            mine = self._deps(t)
            if mine is None:
                if external:
                    base = _base(t)
                    self.read.setdefault(id(base), tensor_bytes(base))
            else:
                deps |= mine
        return frozenset(deps)

    def host_waits(self, tensors: list[torch.Tensor]) -> None:
        """The host read these tensors' values (`.item()`, `.tolist()`): what they depend on comes before every
        collective issued from now on."""
        self._host |= self._reads(tensors, external=False)

    def _note_writes(self, func: Any, args: tuple, kwargs: dict, name: str, comm: bool) -> None:
        """The inputs this op writes into (an in-place all-reduce of the gradients it was given, in-place clipping):
        the reference's output as much as what it returns, written to HBM once."""
        if comm:
            written = [] if (func.namespace != "c10d" or name in ("send", "isend")) else tree_flatten(args[0])[0]
        else:
            written = self._written(func, args, kwargs, None)
        for t in written:
            if isinstance(t, torch.Tensor) and id(_base(t)) in self.inputs:
                self.wrote.setdefault(id(_base(t)), _base(t))

    def declare_read(self, tensors: list[torch.Tensor]) -> None:
        """Count these (the inputs, their modules' parameters) as read once, whether or not an op touches them."""
        for t in tensors:
            base = _base(t)
            self.read.setdefault(id(base), tensor_bytes(base))
            self.inputs.add(id(base))

    # --- collectives
    def _record(self, name: str, args: tuple, kwargs: dict, deps: frozenset[int]) -> int | None:
        n, r = process_group(args, kwargs) or (self.world_size, self.rank)
        deps = deps | self._host  # what the host waited for before issuing it: a step before this one
        if name == "batch_p2p_ops":  # functional: (ops, peers, tags, tensors, group): one step, issued together
            kinds, tensors = args[0], args[3]
            send = float(sum(tensor_bytes(x) for k, x in zip(kinds, tensors, strict=False) if "send" in str(k)))
            recv = float(sum(tensor_bytes(x) for k, x in zip(kinds, tensors, strict=False) if "recv" in str(k)))
            self._open_p2p = None
            self.events.append(
                _Event(Collective.SEND_RECV, max(send, recv), 2, send, recv, set(deps), bool(self.flops))
            )
            return len(self.events) - 1
        if name in P2P:
            moved = sum(map(tensor_bytes, tree_flatten(args[0])[0]))
            send, recv = (moved, 0.0) if P2P[name] == "send" else (0.0, moved)
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
        comm = collective_of(name, args, n, r)
        if comm is None:  # a communication op pkroof does not model: named, not silently left out
            self.uncounted[f"communication {name}"] += 1
            return None
        return self._append(comm, n, deps)

    def _append(self, comm: Comm, n: int, deps: frozenset[int]) -> int:
        self._open_p2p = None
        self.events.append(_Event(comm.kind, comm.size, n, comm.send, comm.recv, set(deps), bool(self.flops)))
        return len(self.events) - 1

    def _symm_mem(self, func: Any, name: str, args: tuple, kwargs: dict, inputs: list[torch.Tensor]) -> Any:
        """A symmetric-memory op, priced from its schema (symm_mem_ops.py); one it does not price is named."""
        priced = symm_mem_ops.price(name, args, kwargs, self.world_size)
        n, _ = process_group(args, kwargs) or (self.world_size, self.rank)
        if priced is not None and n != self.world_size:
            priced = symm_mem_ops.price(name, args, kwargs, n)
        deps = self._reads(inputs, external=priced is not None and priced.flops > 0)  # a matmul reads its B
        self._note_writes(func, args, kwargs, name, False)
        event = None
        flops_dtype = args[0].dtype if args and isinstance(args[0], torch.Tensor) else torch.float32
        if priced is None and name not in symm_mem_ops.NO_DATA:
            self.uncounted[f"communication symm_mem.{name}"] += 1
        elif priced is not None:
            if priced.compute_first:
                self.flops[self._charged_at(torch.ops.aten.mm, flops_dtype)] += priced.flops
            if priced.comm is not None:
                event = self._append(priced.comm, n, deps | self._host)
            elif priced.p2p is not None:
                event = self._record("send" if priced.p2p == "send" else "recv_", (args[0],), {}, deps)
            if priced.flops and not priced.compute_first:
                self.flops[self._charged_at(torch.ops.aten.mm, flops_dtype)] += priced.flops
        out = symm_mem_ops.run(func, args, kwargs)
        after = deps | {event} if event is not None else deps
        for t in self._written(func, args, kwargs, out):
            self._mark(t, after)
        return out

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
        if func.namespace == "symm_mem":
            return self._symm_mem(func, name, args, kwargs, inputs)
        comm = func.namespace in COMM_NAMESPACES and name not in IGNORED
        deps = self._reads(inputs, external=not comm)  # what collectives move crosses HBM in their own term
        if name == "_local_scalar_dense":  # .item(): the host waits for this value before it issues anything more
            self.host_waits(inputs)
        self._note_writes(func, args, kwargs, name, comm)
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
        if not func.is_view:  # a view writes nothing: its data is what its bytes of the storage hold (_deps)
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
        if self._quiet:
            return
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
        elif func.namespace == "aten" and _HEAVY & set(packet.__name__.split("_")) and packet not in _PER_ELEMENT:
            self.uncounted[f"aten.{packet.__name__}"] += 1
        elif func.namespace == "aten" and not func.is_view and packet.__name__ not in _MOVES:
            self.other.add(f"aten.{packet.__name__}")  # elementwise work, a norm, a lookup: not a bare collective

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
        if not tensors_in(out):
            raise TraceError(
                f"{problem.path}: reference() returned {type(out).__name__}, no tensor: every rank returns its output "
                "(a tensor or a tuple of them), which the profiler compares"
            )
        returned = {id(_base(t)) for t in tensors_in(out)}
        wrote = [t for i, t in self.wrote.items() if i not in returned]  # inputs written and not returned: once
        hbm = sum(self.read.values()) + sum(map(tensor_bytes, tensors_in(out))) + sum(map(tensor_bytes, wrote))
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
            other_ops=tuple(sorted(self.other)),
        )
