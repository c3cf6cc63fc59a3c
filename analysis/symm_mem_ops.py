"""torch's symmetric-memory ops (`torch.ops.symm_mem`: what torchtitan's async tensor parallelism runs) priced from
their schema, as the recorder sees them at dispatch: the communication each performs, as the collective that moves
the same bytes (nccl-tests' convention, c10d_ops.Comm), and the matmul FLOPs of the fused ones. An op of the
namespace not priced here is named by the recorder (Workload.uncounted), never a silent zero; ops that only move
signals or handles (NO_DATA) move no data worth a term.

Most of them have no meta or CPU kernel (torch 2.13): their outputs are made from the schema instead (the argument
an out= or in-place op returns, else a tensor shaped as the op returns it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from pkroof.rooflines import Collective

from .c10d_ops import Comm, tensor_bytes

# handles, barriers, signals and flags: no data moved
NO_DATA = frozenset(
    {
        "_rendezvous",
        "_barrier",
        "memset32_",
        "stream_write_value32_",
        "nccl_wait_for_signal",
        "nccl_wait_signal",
        "nvshmem_wait_for_signal",
    }
)
_ALL_REDUCES = ("one_shot_all_reduce", "one_shot_all_reduce_out", "two_shot_all_reduce_", "two_shot_all_reduce_out",
                "multimem_all_reduce_", "multimem_one_shot_all_reduce", "multimem_one_shot_all_reduce_out")  # fmt: skip
_PUTS = ("nvshmem_put", "nccl_put", "nvshmem_put_with_signal", "nccl_put_with_signal", "nccl_put_signal")
_GETS = ("nvshmem_get", "nccl_get")


@dataclass(frozen=True)
class Priced:
    """What one symm_mem op does on this rank: communication (a collective, or a one-sided put or get of its first
    argument: `p2p` "send"/"recv"), and matmul FLOPs, computed before the communication where `compute_first`."""

    comm: Comm | None = None
    flops: float = 0.0
    compute_first: bool = False
    p2p: str | None = None


def _matmul_flops(a: torch.Tensor, b: torch.Tensor, rows_factor: int = 1) -> float:
    """2·M·K·N for A [..., K] (gathered over `rows_factor` ranks) @ B [K, N]: 2 × A's elements × N."""
    return 2.0 * rows_factor * a.numel() * b.shape[-1]


def _scaled_out_dtype(args: tuple, kwargs: dict, index: int) -> torch.dtype:
    given = args[index] if len(args) > index else kwargs.get("out_dtype")
    return given if isinstance(given, torch.dtype) else torch.bfloat16


def price(name: str, args: tuple, kwargs: dict, n: int) -> Priced | None:
    """The op `name` of torch.ops.symm_mem on a group of n ranks; None where it is not priced here."""
    first = args[0] if args and isinstance(args[0], torch.Tensor) else None
    match name:
        case "fused_all_gather_matmul" | "fused_all_gather_scaled_matmul":  # (A shard, Bs, ...): gather A, then A @ B
            a, bs = args[0], args[1]
            flops = sum(_matmul_flops(a, b, n) for b in bs)
            return Priced(Comm(Collective.ALL_GATHER, n * tensor_bytes(a)), flops)
        case "fused_matmul_reduce_scatter" | "fused_scaled_matmul_reduce_scatter":  # A @ B, then reduce-scatter it
            a, b = args[0], args[1]
            dtype = a.dtype if name == "fused_matmul_reduce_scatter" else _scaled_out_dtype(args, kwargs, 11)
            out = a.numel() // a.shape[-1] * b.shape[-1] * torch.empty((), dtype=dtype).element_size()
            return Priced(Comm(Collective.REDUCE_SCATTER, out), _matmul_flops(a, b), compute_first=True)
        case "_async_input_mm":  # (a, b, signals, pivot): a matmul that waits for a's chunks
            return Priced(None, _matmul_flops(args[0], args[1]))
        case name if name in _ALL_REDUCES:
            return Priced(Comm(Collective.ALL_REDUCE, tensor_bytes(first)))
        case "one_shot_all_reduce_copy" | "one_shot_all_reduce_copy_out":  # (symm buffer, local input, ...)
            return Priced(Comm(Collective.ALL_REDUCE, tensor_bytes(args[1])))
        case "multimem_one_shot_reduce_out" | "tile_reduce":
            return Priced(Comm(Collective.REDUCE, tensor_bytes(first)))
        case "_low_contention_all_gather" | "multimem_all_gather_out":
            return Priced(Comm(Collective.ALL_GATHER, n * tensor_bytes(first)))
        case "_low_contention_reduce_scatter" | "reduce_scatter_out":
            return Priced(Comm(Collective.REDUCE_SCATTER, tensor_bytes(first)))
        case "nvshmem_all_to_all":
            return Priced(Comm(Collective.ALL_TO_ALL, tensor_bytes(first)))
        case "nvshmem_broadcast":
            return Priced(Comm(Collective.BROADCAST, tensor_bytes(first)))
        case name if name in _PUTS:
            return Priced(p2p="send")
        case name if name in _GETS:
            return Priced(p2p="recv")
    return None


def run(func: Any, args: tuple, kwargs: dict) -> Any:
    """The op's outputs: from its meta kernel where every tensor is on meta and it has one, else made from its
    schema. Never its real kernel: a traced reference moves nothing, and symmetric memory's multimem ops would use
    NVLink multicast, which pkroof never turns on unasked."""
    tensors = [a for a in (*args, *kwargs.values()) if isinstance(a, torch.Tensor)]
    if tensors and all(t.is_meta for t in tensors):
        try:
            return func(*args, **kwargs)
        except (NotImplementedError, RuntimeError):
            pass
    schema = func._schema
    values = {arg.name: (args[i] if i < len(args) else kwargs.get(arg.name)) for i, arg in enumerate(schema.arguments)}
    made = []
    for ret in schema.returns:
        alias = ret.alias_info.before_set if ret.alias_info is not None else None
        aliased = [
            values[a.name] for a in schema.arguments if alias and a.alias_info and a.alias_info.before_set == alias
        ]
        if aliased:
            made.append(aliased[0])
        elif func._overloadpacket.__name__ == "_async_input_mm":
            a, b = args[0], args[1]
            made.append(a.new_empty((*a.shape[:-1], b.shape[-1])))
        else:  # an all-reduce's result: shaped as its input
            made.append(torch.empty_like(args[0]))
    return None if not made else made[0] if len(made) == 1 else tuple(made)
