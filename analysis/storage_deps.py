"""The collectives the bytes of each storage depend on, so that data flows through views and `out=` (issue 32 item
6): `flat[:n].copy_(x)` then `all_reduce(flat)`, `torch.bmm(a, b, out=view)` into a slice of one flat buffer (the
PowerSGD hook's P then Q). A tensor's own identity loses these: the view written and the buffer read are different
tensors over one storage.

Each storage keeps the byte ranges ops wrote and the collectives each write depended on. A read of a tensor depends
on every range its bytes overlap (its span: storage offset to the last element its strides reach), so a write to
one half of a buffer does not order a read of the other half. A write that covers a range replaces it.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field

import torch


def span(t: torch.Tensor) -> tuple[int, int]:
    """The bytes of its storage a tensor reaches: [first, last + 1)."""
    start = t.storage_offset() * t.element_size()
    if t.numel() == 0:
        return start, start
    reach = 1 + sum((size - 1) * abs(stride) for size, stride in zip(t.shape, t.stride(), strict=True))
    return start, start + reach * t.element_size()


@dataclass
class StorageDeps:
    """Storage (by identity, held weakly) → written byte ranges → the collectives each write depended on."""

    _ranges: dict[int, tuple[weakref.ref, list[tuple[int, int, frozenset[int]]]]] = field(default_factory=dict)

    def _entry(self, t: torch.Tensor, make: bool) -> list[tuple[int, int, frozenset[int]]] | None:
        try:
            storage = t.untyped_storage()
        except (RuntimeError, NotImplementedError):  # a tensor without a storage of its own (a subclass)
            return None
        entry = self._ranges.get(id(storage))
        if entry is not None and entry[0]() is storage:
            return entry[1]
        if not make:
            return None
        ranges: list[tuple[int, int, frozenset[int]]] = []
        self._ranges[id(storage)] = (weakref.ref(storage), ranges)
        return ranges

    def wrote(self, t: torch.Tensor, deps: frozenset[int]) -> None:
        ranges = self._entry(t, make=True)
        if ranges is None:
            return
        lo, hi = span(t)
        ranges[:] = [r for r in ranges if not (lo <= r[0] and r[1] <= hi)]
        ranges.append((lo, hi, deps))

    def read(self, t: torch.Tensor) -> frozenset[int] | None:
        """What the bytes this tensor reaches depend on; None where no op here wrote any of them (an input's)."""
        ranges = self._entry(t, make=False)
        if ranges is None:
            return None
        lo, hi = span(t)
        hit = [d for start, end, d in ranges if start < hi and lo < end]
        return frozenset().union(*hit) if hit else None
