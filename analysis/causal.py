"""Causal attention counted as the work a causal kernel does: `scaled_dot_product_attention(..., is_causal=True)`
charged only the query-key pairs its mask keeps, not the full, unmasked L×S score and value matmuls torch's FLOP
formula (and, on meta tensors, its math decomposition) would count.

torch's `is_causal` keeps, for query i of L, the keys j ≤ i of S (the mask `ones(L, S).tril()`, aligned top-left):
Σ_{i<L} min(i + 1, S) pairs, L·(L + 1)/2 where L ≤ S. Each pair costs 2·E FLOPs in Q·Kᵀ and 2·Ev in P·V (E: the
query and key width, Ev: the value's), for each of the B·H leading (batch, head) indices of the query. A causal
flash kernel computes whole tiles on the diagonal, so it does at least this: the count stays a bound.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

_SDPA = {torch.nn.functional.scaled_dot_product_attention, torch._C._nn.scaled_dot_product_attention}


def causal_pairs(num_queries: int, num_keys: int) -> int:
    """Σ_{i<L} min(i + 1, S): the (query, key) pairs is_causal keeps."""
    full = min(num_queries, num_keys)
    return full * (full + 1) // 2 + max(0, num_queries - num_keys) * num_keys


def causal_flops(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> float:
    """2·B·H·pairs·(E + Ev): the causal Q·Kᵀ and P·V."""
    heads = math.prod(q.shape[:-2])
    return 2.0 * heads * causal_pairs(q.shape[-2], k.shape[-2]) * (q.shape[-1] + v.shape[-1])


class CausalAttention(TorchFunctionMode):
    """Sees scaled_dot_product_attention before it dispatches: a causal call (is_causal=True, no explicit mask) is
    charged `charge(flops, dtype)` and runs under `quiet()`, in which its own matmuls count no FLOPs."""

    def __init__(self, charge: Callable[[float, torch.dtype], None], quiet: Callable[[int], None]) -> None:
        super().__init__()
        self._charge, self._quiet = charge, quiet

    def __torch_function__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        kwargs = kwargs or {}
        if func not in _SDPA:
            return func(*args, **kwargs)
        names = ("query", "key", "value", "attn_mask", "dropout_p", "is_causal")
        given = dict(zip(names, args, strict=False)) | kwargs
        if not given.get("is_causal") or given.get("attn_mask") is not None:
            return func(*args, **kwargs)
        q, k, v = given["query"], given["key"], given["value"]
        self._charge(causal_flops(q, k, v), q.dtype)
        self._quiet(1)
        try:
            return func(*args, **kwargs)
        finally:
            self._quiet(-1)
