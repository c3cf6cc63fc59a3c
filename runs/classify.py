"""What each GPU kernel is and how big: its category from its name (and its operator's), a collective's operation,
bytes, dtype and group from its recorded arguments or its operator's shapes, a GEMM's FLOPs from its operator's
shapes. What cannot be sized gets a reason instead of a guess.

Names are matched by the patterns below, each a family a library names its kernels by; a name matching none is
"other". A collective's size follows nccl-tests' convention (PERFORMANCE.md): all-reduce, broadcast, reduce: the
buffer; all-gather: the gathered output; reduce-scatter: the full input; all-to-all: what one rank sends in all;
send/recv: the message.
"""

from __future__ import annotations

import functools
import json
import math
import re
from dataclasses import dataclass

from .read import Kernel, Op, _CommArgs

CATEGORIES = ("communication", "gemm", "attention", "memory", "copy", "memset", "other")

_COMM_NAME = re.compile(r"^(?:void )?(?:nccl|rccl)", re.IGNORECASE)
# the memory-bound helpers cuBLAS launches beside a GEMM (epilogues, split-K reductions, scaling)
_GEMM_HELPER_NAME = re.compile(r"epilogue|splitKreduce|reduce_splitk|ReduceSplitK|scal_kernel", re.I)
# cuBLAS/cuBLASLt (sm90_xmma_gemm, ampere_sgemm, gemv, nvjet), CUTLASS GEMMs, Triton's and Inductor's matmul templates
_GEMM_NAME = re.compile(r"(?<!fb)gemm|gemv|nvjet|(?:^|_)mm_|triton_tem_fused_.*mm|matmul|cutlass.*tensorop", re.I)
# convolutions (cuDNN's implicit GEMMs among them): "other", FLOPs not counted
_CONV_NAME = re.compile(r"implicit_gemm|fprop|dgrad|wgrad|conv(?!ert)", re.I)
_ATTENTION_NAME = re.compile(r"flash|fmha|attention|attn|sdpa|_mha_", re.I)
_MEMORY_NAME = re.compile(
    r"elementwise|vectorized|unrolled|reduce_kernel|reduction|CatArray|copy|fill|index|scatter|gather|softmax|"
    r"norm|triton_(?:poi|red|per)_|transpose|nchwTo|nhwcTo|embedding|dropout|cumsum|sort|topk|cub::|scan|"
    r"multi_tensor_apply|Moments|GammaBeta|permute",
    re.I,
)
GEMM_OPS = frozenset(
    {"aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::matmul", "aten::linear", "aten::_scaled_mm"}
)

# the collective in an NCCL kernel's name (ncclKernel_AllReduce_RING_LL_Sum_float, ncclDevKernel_ReduceScatter_...)
_NAME_COLLECTIVE = (
    ("AllReduce", "all_reduce"),
    ("AllGather", "all_gather"),
    ("ReduceScatter", "reduce_scatter"),
    ("AllToAll", "all_to_all"),
    ("Broadcast", "broadcast"),
    ("SendRecv", "send_recv"),  # NCCL runs all-to-all and send/recv as SendRecv: the arguments or operator tell
    ("Reduce", "reduce"),
    ("Send", "send"),
    ("Recv", "recv"),
)
# PyTorch's names for a collective (record_param_comms' "Collective name", c10d ops, nccl:* annotations)
_ARG_COLLECTIVE = {
    "allreduce": "all_reduce",
    "all_reduce": "all_reduce",
    "barrier": "all_reduce",
    "allgather": "all_gather",
    "all_gather": "all_gather",
    "allgather_base": "all_gather",
    "allgather_into_tensor": "all_gather",
    "all_gather_into_tensor": "all_gather",
    "all_gather_single": "all_gather",
    "reduce_scatter": "reduce_scatter",
    "reduce_scatter_base": "reduce_scatter",
    "reduce_scatter_tensor": "reduce_scatter",
    "reduce_scatter_single": "reduce_scatter",
    "alltoall": "all_to_all",
    "alltoall_base": "all_to_all",
    "all_to_all": "all_to_all",
    "all_to_allv": "all_to_all",
    "alltoallv": "all_to_all",
    "broadcast": "broadcast",
    "reduce": "reduce",
    "send": "send",
    "recv": "recv",
    "recv_any_source": "recv",
    "gather": "gather",
    "scatter": "scatter",
}
# element sizes of PyTorch's dtype names as traces write them ("Float", "c10::BFloat16", "float")
_DTYPES = {
    "float": ("fp32", 4),
    "double": ("fp64", 8),
    "half": ("fp16", 2),
    "bfloat16": ("bf16", 2),
    "float8_e4m3fn": ("fp8", 1),
    "float8_e5m2": ("fp8", 1),
    "float8_e4m3fnuz": ("fp8", 1),
    "float8_e5m2fnuz": ("fp8", 1),
    "int": ("int32", 4),
    "long": ("int64", 8),
    "int64_t": ("int64", 8),
    "short": ("int16", 2),
    "char": ("int8", 1),
    "signed char": ("int8", 1),
    "byte": ("uint8", 1),
    "unsigned char": ("uint8", 1),
    "bool": ("bool", 1),
    "int8_t": ("int8", 1),
    "uint8_t": ("uint8", 1),
}


def dtype_of(text: str | None) -> tuple[str, int] | None:
    """(pkroof's dtype name, bytes per element) of a dtype as a trace writes it, or None."""
    if not text:
        return None
    return _DTYPES.get(text.lower().removeprefix("c10::").removeprefix("at::").strip())


def collective_of_name(name: str) -> str | None:
    for word, kind in _NAME_COLLECTIVE:
        if re.search(rf"[_ ]{word}(?:[_(]|$)", name):
            return kind
    return None


def collective_of_arg(text: str | None) -> str | None:
    """PyTorch's collective name ("allreduce", "_allgather_base", "c10d::alltoall_base_", "nccl:all_reduce",
    "allgather_into_tensor_coalesced") as this module's name, or None."""
    if not text:
        return None
    base = text.rpartition(":")[2].strip("_").removesuffix("_coalesced").strip("_")
    return _ARG_COLLECTIVE.get(base)


def category_of(kernel: Kernel, op: str | None) -> str:
    """The kernel's category: its own for a memcpy or memset, else from its name (and its operator, for a name of
    no known family)."""
    if kernel.kind != "kernel":
        return kernel.kind
    return _category_of_name(kernel.name, op in GEMM_OPS)


@functools.lru_cache(maxsize=1 << 16)  # a job repeats a few hundred kernel names millions of times
def _category_of_name(name: str, gemm_op: bool) -> str:
    if _COMM_NAME.match(name):
        return "communication"
    if _ATTENTION_NAME.search(name):
        return "attention"
    if _GEMM_HELPER_NAME.search(name):
        return "memory"
    if _CONV_NAME.search(name):
        return "other"
    if _GEMM_NAME.search(name):
        return "gemm"
    if _MEMORY_NAME.search(name):
        return "memory"
    if gemm_op:  # a kernel named by none of the families, launched by a matmul operator
        return "gemm"
    return "other"


@dataclass(frozen=True)
class CommSize:
    """A collective's operation, size (nccl-tests' convention), dtype and group; `unsized` where not known."""

    collective: str | None
    bytes: float = math.nan
    dtype: str | None = None
    group_size: int | None = None
    group: str | None = None
    unsized: str | None = None


def _ranks(value: str | list | None) -> list[int] | None:
    """'[0, 1, 2]' (as PyTorch writes a group's ranks) as a list; None where absent or cut short ("...")."""
    if isinstance(value, list):
        return [int(v) for v in value] if all(isinstance(v, int) for v in value) else None
    if not value:
        return None
    parsed = _parsed_ranks(value)
    return None if parsed is None else list(parsed)


@functools.lru_cache(maxsize=1024)  # every kernel of a group repeats its text: parsed once
def _parsed_ranks(text: str) -> tuple[int, ...] | None:
    try:
        parsed = json.loads(text)
    except ValueError:
        return None
    if not isinstance(parsed, list) or not all(isinstance(v, int) for v in parsed):
        return None
    return tuple(parsed)


def _nccl_bytes(kind: str, in_nelems: int, out_nelems: int, es: int, group: int) -> float:
    match kind:
        case "all_gather" | "gather":
            return max(out_nelems, in_nelems * group) * es
        case "scatter":
            return max(in_nelems, out_nelems * group) * es
        case "send" | "recv" | "send_recv":
            return max(in_nelems, out_nelems) * es
        case _:  # all_reduce, broadcast, reduce: the buffer; reduce_scatter: the full input; all_to_all: all it sends
            return in_nelems * es


def _from_args(kind: str | None, a: _CommArgs, default_group: tuple[str, int] | None) -> CommSize:
    kind = collective_of_arg(a.collective) or kind
    if kind == "send_recv":
        return CommSize(kind, unsized="an NCCL SendRecv kernel whose arguments do not say send, recv or all-to-all")
    dt = dtype_of(a.dtype)
    ranks = _ranks(a.pg_ranks)
    group = ",".join(map(str, ranks)) if ranks else a.pg_name
    size = a.group_size or (len(ranks) if ranks else None)
    if size is None and default_group is not None:
        group, size = default_group
    if kind in ("send", "recv"):
        size = 2  # a point-to-point message: two ranks, whatever group it was sent in
    why = None
    if kind is None:
        why = f"collective {a.collective!r} is not one pkroof models"
    elif dt is None:
        why = f"dtype {a.dtype!r} not recorded or not known"
    elif a.in_nelems is None:
        why = "no In msg nelems"
    elif size is None:
        why = "no group size recorded"
    if why:
        return CommSize(kind, dtype=dt[0] if dt else None, group_size=size, group=group, unsized=why)
    nbytes = _nccl_bytes(kind, a.in_nelems, a.out_nelems or 0, dt[1], size)
    return CommSize(kind, float(nbytes), dt[0], size, group)


def _numel(dims: object) -> int | None:
    if not isinstance(dims, list) or not all(isinstance(d, int) for d in dims):
        return None
    return math.prod(dims)


def _from_op(kind: str | None, op: Op, default_group: tuple[str, int] | None) -> CommSize:
    """From a c10d op's Input Dims/Input type: _allgather_base_(out, in), _reduce_scatter_base_(out, in),
    alltoall_base_(out, in, ...), allreduce_/broadcast_/send/recv_([tensors], ...)."""
    base = op.name.rpartition(":")[2].strip("_")
    dims, types = op.input_dims or [], op.input_type or []
    if not dims:
        return CommSize(kind, unsized="no In msg nelems and no Input Dims (record_shapes off)")
    if base in ("allgather_base", "reduce_scatter_base", "alltoall_base", "allgather_into_tensor_coalesced"):
        at = 0 if base == "allgather_base" else 1  # all-gather: the output is the gathered bytes; else the input
        numel = _numel(dims[at]) if len(dims) > at else None
        dt = dtype_of(types[at]) if len(types) > at else None
    else:
        tensors = dims[0] if dims and isinstance(dims[0], list) else []
        sizes = [_numel(t) for t in tensors] if tensors and isinstance(tensors[0], list) else [_numel(tensors)]
        numel = None if None in sizes or not tensors else sum(s for s in sizes if s is not None)
        dt = dtype_of(types[0]) if types else None
    if numel is None:
        return CommSize(kind, unsized="no In msg nelems and its operator's Input Dims are empty")
    if dt is None:
        return CommSize(kind, unsized=f"no dtype recorded ({types[0] if types else 'no Input type'})")
    if default_group is None:
        return CommSize(kind, dtype=dt[0], unsized="no group recorded (several process groups, none named)")
    group, size = default_group
    if kind in ("send", "recv"):
        size = 2
    if kind == "all_gather" and base != "allgather_base":
        numel *= size
    return CommSize(kind, float(numel * dt[1]), dt[0], size, group)


def size_collective(
    kernel: Kernel, op: Op | None, comm_op: Op | None, default_group: tuple[str, int] | None, graph: bool
) -> CommSize:
    """A communication kernel's operation and size: from its own arguments, else record_param_comms' (`comm_op`),
    else its c10d operator's shapes (`op`). `default_group`: (name, size) of the job's one process group where the
    trace lists exactly one, else None."""
    kind = collective_of_name(kernel.name)
    for args in (kernel.comm, comm_op.comm if comm_op else None):
        if args is not None:
            return _from_args(kind, args, default_group)
    for candidate in (comm_op, op):
        if candidate is not None and collective_of_arg(candidate.name):
            kind = collective_of_arg(candidate.name) if kind in (None, "send_recv") else kind
            if candidate.name.startswith("c10d::"):
                return _from_op(kind, candidate, default_group)
    if kind == "send_recv":
        return CommSize(kind, unsized="an NCCL SendRecv kernel without arguments or operator: send, recv or all-to-all")
    if graph:
        return CommSize(kind, unsized="launched from a CUDA graph: no arguments and no operator shapes")
    return CommSize(kind, unsized="no In msg nelems and no Input Dims")


@dataclass(frozen=True)
class GemmSize:
    flops: float = math.nan
    m: float = math.nan
    n: float = math.nan
    k: float = math.nan
    batch: float = math.nan
    dtype: str | None = None
    unsized: str | None = None


def _shape(dims: list, i: int) -> list[int] | None:
    d = dims[i] if len(dims) > i else None
    return d if isinstance(d, list) and d and all(isinstance(x, int) for x in d) else None


def _mnk(name: str, dims: list) -> tuple[int, int, int, int] | None:
    """(batch, m, n, k) from the operator's Input Dims."""
    if name in ("aten::mm", "aten::_scaled_mm"):
        a, b = _shape(dims, 0), _shape(dims, 1)
        return (1, a[0], b[1], a[1]) if a and b and len(a) == 2 and len(b) == 2 else None
    if name == "aten::addmm":
        a, b = _shape(dims, 1), _shape(dims, 2)
        return (1, a[0], b[1], a[1]) if a and b and len(a) == 2 and len(b) == 2 else None
    if name in ("aten::bmm", "aten::baddbmm"):
        off = 1 if name == "aten::baddbmm" else 0
        a, b = _shape(dims, off), _shape(dims, off + 1)
        return (a[0], a[1], b[2], a[2]) if a and b and len(a) == 3 and len(b) == 3 else None
    if name == "aten::linear":  # x[..., K] · w[N, K]ᵀ
        x, w = _shape(dims, 0), _shape(dims, 1)
        return (1, math.prod(x[:-1]), w[0], x[-1]) if x and w and len(w) == 2 else None
    if name == "aten::matmul":  # a[..., M, K] · b[..., K, N], leading dimensions broadcast
        a, b = _shape(dims, 0), _shape(dims, 1)
        if not a or not b or len(a) < 2 or len(b) < 2:
            return None
        lead_a, lead_b = a[:-2], b[:-2]
        width = max(len(lead_a), len(lead_b))
        lead_a, lead_b = [1] * (width - len(lead_a)) + lead_a, [1] * (width - len(lead_b)) + lead_b
        return (math.prod(max(x, y) for x, y in zip(lead_a, lead_b, strict=True)), a[-2], b[-1], a[-1])
    return None


def size_gemm(op: Op | None, graph: bool, gemm_kernels_of_op: int) -> GemmSize:
    """A GEMM kernel's FLOPs (2·batch·m·n·k) and dtype from the operator that launched it."""
    if op is None:
        why = "launched from a CUDA graph: no operator shapes" if graph else "no launching operator found"
        return GemmSize(unsized=why)
    if op.name not in GEMM_OPS:
        return GemmSize(unsized=f"its operator {op.name} is not a matmul pkroof sizes")
    if not op.input_dims:
        return GemmSize(unsized=f"{op.name} without Input Dims (record_shapes off)")
    mnk = _mnk(op.name, op.input_dims)
    if mnk is None:
        return GemmSize(unsized=f"{op.name}: Input Dims not the shapes of a matmul")
    batch, m, n, k = mnk
    at = {"aten::addmm": 1, "aten::baddbmm": 1}.get(op.name, 0)
    types = op.input_type or []
    dt = dtype_of(types[at]) if len(types) > at else None
    if gemm_kernels_of_op > 1:
        return GemmSize(m=m, n=n, k=k, batch=batch, unsized=f"{op.name} launched {gemm_kernels_of_op} GEMM kernels")
    if dt is None:
        return GemmSize(m=m, n=n, k=k, batch=batch, unsized=f"{op.name}: no dtype recorded")
    return GemmSize(2.0 * batch * m * n * k, m, n, k, batch, dt[0])
