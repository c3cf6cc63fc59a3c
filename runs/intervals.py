"""Unions of time intervals: what a step's compute, communication and exposed communication are made of.

An interval is (start, end) with start <= end, in any one unit. `union` merges them; `length` sums a union;
`subtract` is what of one union no interval of another covers. Kernels on different streams overlap, so a time is
counted once however many kernels run at it.
"""

from __future__ import annotations

from collections.abc import Iterable

Interval = tuple[float, float]


def union(intervals: Iterable[Interval]) -> list[Interval]:
    """The intervals merged: sorted, disjoint, none touching another. [(0, 2), (1, 3), (5, 6)] → [(0, 3), (5, 6)]."""
    merged: list[Interval] = []
    for start, end in sorted(intervals):
        if merged and start <= merged[-1][1]:
            if end > merged[-1][1]:
                merged[-1] = (merged[-1][0], end)
        else:
            merged.append((start, end))
    return merged


def length(merged: Iterable[Interval]) -> float:
    """Total length of disjoint intervals (a union)."""
    return sum(end - start for start, end in merged)


def subtract(a: list[Interval], b: list[Interval]) -> list[Interval]:
    """The parts of union `a` that no interval of union `b` covers; both sorted and disjoint (from `union`).
    [(0, 10)] minus [(2, 3), (5, 7)] → [(0, 2), (3, 5), (7, 10)]."""
    out: list[Interval] = []
    j = 0
    for start, end in a:
        while j < len(b) and b[j][1] <= start:  # b's intervals wholly before this one never matter again
            j += 1
        cursor, k = start, j
        while k < len(b) and b[k][0] < end:
            if b[k][0] > cursor:
                out.append((cursor, b[k][0]))
            cursor = max(cursor, b[k][1])
            k += 1
        if cursor < end:
            out.append((cursor, end))
    return out
