"""What one c10d op moves, as one rank sees it: the collective it is (a c10d op, a functional collective, DTensor's
all-to-all; point-to-point ops are steps of their own) and its bytes in nccl-tests' convention; where this rank's
bytes are uneven (split sizes, unequal lists, a root's gather or scatter), its own bytes to and from its peers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
from torch.utils._pytree import tree_flatten

from pkroof.rooflines import Collective


def tensor_bytes(t: Any) -> int:
    return t.numel() * t.element_size() if isinstance(t, torch.Tensor) else 0


def process_group(args: tuple, kwargs: dict) -> tuple[int, int] | None:
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
                pg = torch.distributed.distributed_c10d._resolve_processprocess_group(a)
            except Exception:  # a reduce op's name ("sum"), not a group
                continue
            return pg.size(), pg.rank()
    return None


@dataclass(frozen=True)
class Comm:
    """What one c10d op moves, for this rank: its kind, bytes in nccl-tests' convention, and, where this rank's
    bytes are not what kind and size make them, its own bytes to and from peers."""

    kind: Collective
    size: float
    send: float | None = None
    recv: float | None = None


def _uneven(kind: Collective, size: float, send: float, recv: float, even: bool) -> Comm:
    return Comm(kind, size) if even else Comm(kind, size, send, recv)


def _list_bytes(tensors: list) -> list[int]:
    return [tensor_bytes(t) for t in tensors]


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


def collective_of(name: str, args: tuple, n: int, r: int) -> Comm | None:
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
            return Comm(Collective.ALL_REDUCE, sum(map(tensor_bytes, tree_flatten(args[0])[0])))
        case "allgather_coalesced_":  # (output lists, inputs)
            return Comm(Collective.ALL_GATHER, sum(map(tensor_bytes, tree_flatten(args[0])[0])))
        case "all_gather_into_tensor_out":
            return Comm(Collective.ALL_GATHER, n * tensor_bytes(args[0]))
        case "reduce_scatter_tensor_out":
            return Comm(Collective.REDUCE_SCATTER, tensor_bytes(args[0]))
        case "shard_dim_alltoall":  # DTensor's Shard(i) → Shard(j): one all-to-all of the local shard
            return Comm(Collective.ALL_TO_ALL, tensor_bytes(args[0]))
        case "_allgather_base_" | "allgather_into_tensor_coalesced_":
            return Comm(Collective.ALL_GATHER, sum(map(tensor_bytes, tree_flatten(args[0])[0])))
        case "all_gather_into_tensor" | "all_gather_into_tensor_coalesced":
            return Comm(Collective.ALL_GATHER, n * sum(map(tensor_bytes, tree_flatten(args[0])[0])))
        case "allgather_":  # (output lists, inputs): unequal lists are a rank sending its own to each peer
            outs = _list_bytes(args[0][0])
            own = tensor_bytes(args[1][0])
            return _uneven(Collective.ALL_GATHER, sum(outs), (n - 1) * own, sum(outs) - outs[r], len(set(outs)) == 1)
        case "_reduce_scatter_base_" | "reduce_scatter_tensor_coalesced_":
            return Comm(Collective.REDUCE_SCATTER, sum(map(tensor_bytes, tree_flatten(args[1])[0])))
        case "reduce_scatter_tensor" | "reduce_scatter_tensor_coalesced":
            return Comm(Collective.REDUCE_SCATTER, sum(map(tensor_bytes, tree_flatten(args[0])[0])))
        case "reduce_scatter_":  # (outputs, input lists)
            ins = _list_bytes(args[1][0])
            out = tensor_bytes(args[0][0])
            return _uneven(Collective.REDUCE_SCATTER, sum(ins), sum(ins) - ins[r], (n - 1) * out, len(set(ins)) == 1)
        case "alltoall_base_" | "all_to_all_single":
            return _all_to_all_single(name, args, n, r)
        case "alltoall_":  # (output list, input list)
            outs, ins = _list_bytes(args[0]), _list_bytes(args[1])
            even = len(set(outs)) == 1 and len(set(ins)) == 1
            return _uneven(Collective.ALL_TO_ALL, sum(ins), sum(ins) - ins[r], sum(outs) - outs[r], even)
        case "broadcast_" | "broadcast":
            return Comm(Collective.BROADCAST, sum(map(tensor_bytes, tree_flatten(args[0])[0])))
        case "reduce_":
            return Comm(Collective.REDUCE, sum(map(tensor_bytes, tree_flatten(args[0])[0])))
        case "gather_":  # (output lists at the root, inputs, group, root): direct, so each rank's own bytes
            own, outs = tensor_bytes(args[1][0]), _list_bytes(args[0][0]) if args[0] and args[0][0] else []
            root = args[3] if len(args) > 3 and isinstance(args[3], int) else 0
            recv = sum(outs) - outs[r] if (outs and r == root) else 0
            return Comm(Collective.GATHER, n * own, 0 if r == root else own, recv)
        case "scatter_":  # (outputs, input lists at the root, group, root): direct, so each rank's own bytes
            own, ins = tensor_bytes(args[0][0]), _list_bytes(args[1][0]) if args[1] and args[1][0] else []
            root = args[3] if len(args) > 3 and isinstance(args[3], int) else 0
            send = sum(ins) - ins[r] if (ins and r == root) else 0
            return Comm(Collective.SCATTER, n * own, send, 0 if r == root else own)
    return None


def _all_to_all_single(name: str, args: tuple, n: int, r: int) -> Comm:
    """all_to_all_single, with split sizes along dim 0 (empty: even) of its output and input."""
    if name == "alltoall_base_":  # (output, input, group, output_split_sizes, input_split_sizes)
        out, inp, out_splits, in_splits = args[0], args[1], list(args[3]), list(args[4])
        out_row = tensor_bytes(out) / out.shape[0] if out.dim() and out.shape[0] else 0.0
    else:  # functional: (input, output_split_sizes, input_split_sizes, group name)
        inp, out_splits, in_splits = args[0], list(args[1]), list(args[2])
        out_row = tensor_bytes(inp) / inp.shape[0] if inp.dim() and inp.shape[0] else 0.0
    in_row = tensor_bytes(inp) / inp.shape[0] if inp.dim() and inp.shape[0] else 0.0
    rows = inp.shape[0] if inp.dim() else 0
    in_splits = in_splits or [rows // n] * n
    out_splits = out_splits or [rows // n] * n
    even = len(set(in_splits)) == 1 and len(set(out_splits)) == 1
    send = sum(s for j, s in enumerate(in_splits) if j != r) * in_row
    recv = sum(s for j, s in enumerate(out_splits) if j != r) * out_row
    return _uneven(Collective.ALL_TO_ALL, tensor_bytes(inp), send, recv, even)


P2P = {"send": "send", "recv_": "recv", "recv_any_source_": "recv", "isend": "send", "irecv": "recv"}
COMM_NAMESPACES = ("c10d", "_c10d_functional", "_dtensor")
IGNORED = {"barrier", "monitored_barrier_", "wait_tensor", "_wrap_tensor_autograd"}
