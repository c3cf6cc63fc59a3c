"""Built-in implementations the profiler runs beside each problem's reference, unasked (GPUs only).

Each entry names its function as "module:function" and is imported only when it runs, so listing the
registry needs neither triton nor a GPU. Two families:
- ecosystem: the fast paths PyTorch ships (kernels/ecosystem.py), the bar pkroof's kernels must clear;
- pkroof: pkroof's own kernels, one per (mechanism, schedule) they declare (kernels/collectives.py,
  copy_engine.py, fused.py, inter_sm.py). Variants that measured slower than a sibling of the same collective on the
  2xH200 node (benchmarks/2026-11-30-kernels-h200x2.md) run only when named with --impl, and small-message kernels
  (kernels/low_latency.py) run unasked only up to their auto_max_bytes.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class BuiltinImpl:
    target: str  # "pkroof.kernels.module:function"
    problems: frozenset[str]  # suite problems whose reference it implements
    family: str  # "ecosystem" or "pkroof"
    auto: bool = True  # profiled beside the reference unasked; False: only when named with --impl
    auto_max_bytes: int | None = None  # unasked only up to this size (nccl-tests' convention); above, when named

    def runs_unasked(self, problem: str, comm_bytes: int) -> bool:
        small_enough = self.auto_max_bytes is None or comm_bytes <= self.auto_max_bytes
        return self.auto and problem in self.problems and small_enough

    @property
    def fn(self) -> Callable[..., Any]:
        module, _, name = self.target.partition(":")
        return getattr(importlib.import_module(module), name)


def _entries(family: str, module: str, table: dict[str, tuple]) -> dict[str, BuiltinImpl]:
    """name -> (function, problems[, auto[, auto_max_bytes]])"""
    return {
        name: BuiltinImpl(f"pkroof.kernels.{module}:{row[0]}", frozenset(row[1]), family, *row[2:])
        for name, row in table.items()
    }


BUILTIN_IMPLS: dict[str, BuiltinImpl] = {
    **_entries(
        "ecosystem",
        "ecosystem",
        {
            # NCCL without the copy the references make to leave their inputs alone (kernels/ecosystem.py)
            "nccl-all-reduce-in-place": ("nccl_all_reduce_in_place", {"all-reduce"}),
            "nccl-broadcast-in-place": ("nccl_broadcast_in_place", {"broadcast"}),
            "nccl-reduce-in-place": ("nccl_reduce_in_place", {"reduce"}),
            "torch-symm-mem-one-shot": ("symm_mem_one_shot_all_reduce", {"all-reduce"}),
            "torch-symm-mem-two-shot": ("symm_mem_two_shot_all_reduce", {"all-reduce"}),
            "torch-fused-all-gather-matmul": ("fused_all_gather_matmul", {"all-gather-gemm"}),
            "torch-fused-matmul-reduce-scatter": ("fused_matmul_reduce_scatter", {"gemm-reduce-scatter"}),
        },
    ),
    **_entries(
        "pkroof",
        "collectives",
        {
            "pkroof-one-shot-pull": ("all_reduce_one_shot_pull", {"all-reduce"}),
            "pkroof-one-shot-push": ("all_reduce_one_shot_push", {"all-reduce"}),
            "pkroof-two-shot": ("all_reduce_two_shot", {"all-reduce"}, False),
            "pkroof-all-gather-push": ("all_gather_push", {"all-gather"}),
            "pkroof-all-gather-pull": ("all_gather_pull", {"all-gather"}, False),
            "pkroof-reduce-scatter-pull": ("reduce_scatter_pull", {"reduce-scatter"}),
            "pkroof-reduce-scatter-push": ("reduce_scatter_push", {"reduce-scatter"}),
            "pkroof-all-to-all-push": ("all_to_all_push", {"all-to-all"}),
            "pkroof-all-to-all-pull": ("all_to_all_pull", {"all-to-all"}, False),
            # TMA pushes: correct on GPUs; 2x slower than the SM push with 8 KiB boxes, 64 KiB boxes not yet timed
            "pkroof-all-reduce-tma": ("all_reduce_tma", {"all-reduce"}, False),
            "pkroof-all-gather-tma": ("all_gather_tma", {"all-gather"}, False),
            "pkroof-reduce-scatter-tma": ("reduce_scatter_tma", {"reduce-scatter"}, False),
            "pkroof-all-to-all-tma": ("all_to_all_tma", {"all-to-all"}, False),
            # split roles (stager and consumer CTAs): correct on GPUs, within 5% of the SM push at 64 MiB
            "pkroof-all-reduce-split": ("all_reduce_split", {"all-reduce"}, False),
            "pkroof-all-gather-split": ("all_gather_split", {"all-gather"}, False),
            "pkroof-reduce-scatter-split": ("reduce_scatter_split", {"reduce-scatter"}, False),
            "pkroof-all-to-all-split": ("all_to_all_split", {"all-to-all"}, False),
        },
    ),
    **_entries(
        "pkroof",
        "low_latency",
        {
            # data and flag in one 8-byte line (NCCL's LL protocol): for small messages, not yet timed on NVLink
            "pkroof-one-shot-ll": ("all_reduce_one_shot_ll", {"all-reduce"}, True, 1 << 20),
            # for more than 2 ranks: at 2 it moves the one-shot's bytes in two steps
            "pkroof-two-shot-ll": ("all_reduce_two_shot_ll", {"all-reduce"}, False),
            "pkroof-all-gather-ll": ("all_gather_ll", {"all-gather"}, True, 1 << 20),
            "pkroof-reduce-scatter-ll": ("reduce_scatter_ll", {"reduce-scatter"}, True, 1 << 20),
            "pkroof-all-to-all-ll": ("all_to_all_ll", {"all-to-all"}, True, 1 << 20),
            "pkroof-gemv-ar-ll": ("gemv_all_reduce_ll", {"decode-gemv-all-reduce"}, True, 1 << 20),
            "pkroof-gemm-rs-ll": ("gemm_reduce_scatter_ll", {"gemm-reduce-scatter"}, True, 1 << 20),
            "pkroof-ag-gemm-ll": ("all_gather_gemm_ll", {"all-gather-gemm"}, True, 1 << 20),
            "pkroof-gemm-ar-ll": ("gemm_all_reduce_ll", {"gemm-all-reduce"}, True, 1 << 20),
        },
    ),
    **_entries(
        "pkroof",
        "copy_engine",
        {
            "pkroof-all-reduce-ce": ("all_reduce_ce", {"all-reduce"}),
            "pkroof-all-gather-ce": ("all_gather_ce", {"all-gather"}),
            "pkroof-reduce-scatter-ce": ("reduce_scatter_ce", {"reduce-scatter"}),
            "pkroof-all-to-all-ce": ("all_to_all_ce", {"all-to-all"}),
        },
    ),
    **_entries(
        "pkroof",
        "fused",
        {
            "pkroof-ag-gemm-ce": ("all_gather_gemm_ce", {"all-gather-gemm"}),
            "pkroof-gemm-rs-ce": ("gemm_reduce_scatter_ce", {"gemm-reduce-scatter"}),
            "pkroof-gemm-rs-epilogue": ("gemm_reduce_scatter_epilogue", {"gemm-reduce-scatter"}),
            "pkroof-gemm-ar-ce": ("gemm_all_reduce_ce", {"gemm-all-reduce"}),
        },
    ),
    **_entries(
        "pkroof",
        "inter_sm",
        {"pkroof-gemm-ar-inter-sm": ("gemm_all_reduce_inter_sm", {"gemm-all-reduce"})},
    ),
}
