"""Built-in implementations the profiler runs beside each problem's reference, unasked (GPUs only), each declared
here in full: the problems it implements, whose it is, its (mechanism, schedule, communication CTAs, protocol,
algorithm), whether it runs unasked and up to which size. Nothing here imports torch or triton: the function is
imported only when it runs, so `pkroof impls` and `advise` cost what `bound` costs.

Two families:
- ecosystem: the fast paths PyTorch ships (kernels/ecosystem.py), the bar pkroof's kernels must clear;
- pkroof: pkroof's own kernels (kernels/symm_collectives.py, copy_engine.py, fused.py, inter_sm.py, low_latency.py).
  Variants that measured slower than a sibling of the same collective on the 2xH200 node
  (benchmarks/kernels/) run only when named with --impl, and small-message kernels (LL) run unasked only up to
  their auto_max_bytes.

comm_sms is a number, the name of the launch setting it is read from when the kernel runs (kernels/settings.py),
or None where the kernel takes a count per shape and reports it per call (or takes no SMs at all: 0).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .declare import pair
from .settings import SETTINGS, setting


@dataclass(frozen=True)
class BuiltinImpl:
    target: str  # "pkroof.kernels.module:function"
    problems: frozenset[str]  # suite problems whose reference it implements
    family: str  # "ecosystem" or "pkroof"
    mechanism: str | None = None  # None: no pair declared (PyTorch's fused paths: the model has none for them)
    schedule: str | None = None
    comm_sms: int | str | None = None
    protocol: str = "simple"
    algorithm: str | None = None
    auto: bool = True  # profiled beside the reference unasked; False: only when named with --impl
    auto_max_bytes: int | None = None  # unasked only up to this size (nccl-tests' convention); above, when named
    in_place: bool = False  # the reference's collective in place: nccl-tests' in-place column beside its out-of-place
    max_input_bytes: int | None = None  # a rank's input it refuses above (kernels/low_latency.py MAX_BYTES for LL)
    one_node: bool = True  # peer-to-peer memory (symmetric memory, pkroof's kernels): one NVLink domain only

    def __post_init__(self) -> None:
        if isinstance(self.comm_sms, str) and self.comm_sms not in SETTINGS:
            raise ValueError(f"{self.target}: comm_sms names no launch setting {self.comm_sms!r}")
        self.pair  # noqa: B018 - a bad name fails here, when the registry is built

    def runs_unasked(self, problem: str, comm_bytes: float) -> bool:
        small_enough = self.auto_max_bytes is None or comm_bytes <= self.auto_max_bytes
        return self.auto and problem in self.problems and small_enough

    @property
    def pair(self) -> dict[str, Any] | None:
        """The declared pair as records carry it, comm_sms read from its setting now; None without one."""
        if self.mechanism is None or self.schedule is None:
            return None
        ctas = setting(self.comm_sms) if isinstance(self.comm_sms, str) else self.comm_sms
        return pair(
            mechanism=self.mechanism,
            schedule=self.schedule,
            comm_sms=ctas,
            protocol=self.protocol,
            algorithm=self.algorithm,
        )

    @property
    def fn(self) -> Callable[..., Any]:
        module, _, name = self.target.partition(":")
        return getattr(importlib.import_module(module), name)


def _impl(module: str, function: str, problems: set[str], family: str = "pkroof", **declared: Any) -> BuiltinImpl:
    return BuiltinImpl(f"pkroof.kernels.{module}:{function}", frozenset(problems), family, **declared)


_NCCL = {"mechanism": "nccl", "schedule": "serial"}
_INPL = _NCCL | {"in_place": True, "one_node": False}  # nccl-tests' in-place column: NCCL spans nodes
_LL = {
    "mechanism": "sm-store",
    "schedule": "serial",
    "comm_sms": "PKROOF_CTAS_LL",
    "protocol": "ll",
    "max_input_bytes": 64 << 20,  # kernels/low_latency.py MAX_BYTES (not imported: it needs triton)
}
_LL_AUTO = _LL | {"algorithm": "one-shot", "auto_max_bytes": 1 << 20}  # small messages only
_PULL = {"mechanism": "sm-load", "schedule": "serial", "comm_sms": "PKROOF_CTAS_LOAD", "algorithm": "one-shot"}
_PUSH = {"mechanism": "sm-store", "schedule": "serial", "comm_sms": "PKROOF_CTAS_STORE", "algorithm": "one-shot"}
_TMA = {"mechanism": "tma", "schedule": "serial", "comm_sms": "PKROOF_CTAS_TMA", "algorithm": "one-shot"}
_SPLIT = {"mechanism": "sm-store", "schedule": "serial", "comm_sms": "PKROOF_CTAS_SPLIT", "algorithm": "one-shot"}
_CE = {"mechanism": "copy-engine", "schedule": "serial", "comm_sms": 0, "algorithm": "one-shot"}
_CE_OVERLAP = {"mechanism": "copy-engine", "schedule": "ce-overlap", "comm_sms": 0}
ASK = {"auto": False}  # slower than a sibling on 2xH200, or for more ranks than 2: runs only when named

BUILTIN_IMPLS: dict[str, BuiltinImpl] = {
    # NCCL without the copy the references make to leave their inputs alone (kernels/ecosystem.py)
    "nccl-all-reduce-in-place": _impl("ecosystem", "nccl_all_reduce_in_place", {"all-reduce"}, "ecosystem", **_INPL),
    "nccl-broadcast-in-place": _impl("ecosystem", "nccl_broadcast_in_place", {"broadcast"}, "ecosystem", **_INPL),
    "nccl-reduce-in-place": _impl("ecosystem", "nccl_reduce_in_place", {"reduce"}, "ecosystem", **_INPL),
    "torch-symm-mem-one-shot": _impl("ecosystem", "symm_mem_one_shot_all_reduce", {"all-reduce"}, "ecosystem"),
    "torch-symm-mem-two-shot": _impl("ecosystem", "symm_mem_two_shot_all_reduce", {"all-reduce"}, "ecosystem"),
    "torch-fused-all-gather-matmul": _impl("ecosystem", "fused_all_gather_matmul", {"all-gather-gemm"}, "ecosystem"),
    "torch-fused-matmul-reduce-scatter": _impl(
        "ecosystem", "fused_matmul_reduce_scatter", {"gemm-reduce-scatter"}, "ecosystem"
    ),
    # pkroof's SM collectives (kernels/symm_collectives.py)
    "pkroof-one-shot-pull": _impl("symm_collectives", "all_reduce_one_shot_pull", {"all-reduce"}, **_PULL),
    "pkroof-one-shot-push": _impl("symm_collectives", "all_reduce_one_shot_push", {"all-reduce"}, **_PUSH),
    "pkroof-two-shot": _impl(
        "symm_collectives", "all_reduce_two_shot", {"all-reduce"}, **(_PULL | {"algorithm": "two-shot"}), **ASK
    ),
    "pkroof-all-gather-push": _impl("symm_collectives", "all_gather_push", {"all-gather"}, **_PUSH),
    "pkroof-all-gather-pull": _impl("symm_collectives", "all_gather_pull", {"all-gather"}, **_PULL, **ASK),
    "pkroof-reduce-scatter-pull": _impl("symm_collectives", "reduce_scatter_pull", {"reduce-scatter"}, **_PULL),
    "pkroof-reduce-scatter-push": _impl("symm_collectives", "reduce_scatter_push", {"reduce-scatter"}, **_PUSH),
    "pkroof-all-to-all-push": _impl("symm_collectives", "all_to_all_push", {"all-to-all"}, **_PUSH),
    "pkroof-all-to-all-pull": _impl("symm_collectives", "all_to_all_pull", {"all-to-all"}, **_PULL, **ASK),
    # TMA pushes: correct on GPUs; slower than the SM push at 64 MiB with every box and CTA count swept
    "pkroof-all-reduce-tma": _impl("symm_collectives", "all_reduce_tma", {"all-reduce"}, **_TMA, **ASK),
    "pkroof-all-gather-tma": _impl("symm_collectives", "all_gather_tma", {"all-gather"}, **_TMA, **ASK),
    "pkroof-reduce-scatter-tma": _impl("symm_collectives", "reduce_scatter_tma", {"reduce-scatter"}, **_TMA, **ASK),
    "pkroof-all-to-all-tma": _impl("symm_collectives", "all_to_all_tma", {"all-to-all"}, **_TMA, **ASK),
    # split roles (stager and consumer CTAs): correct on GPUs, within 5% of the SM push at 64 MiB
    "pkroof-all-reduce-split": _impl("symm_collectives", "all_reduce_split", {"all-reduce"}, **_SPLIT, **ASK),
    "pkroof-all-gather-split": _impl("symm_collectives", "all_gather_split", {"all-gather"}, **_SPLIT, **ASK),
    "pkroof-reduce-scatter-split": _impl(
        "symm_collectives", "reduce_scatter_split", {"reduce-scatter"}, **_SPLIT, **ASK
    ),
    "pkroof-all-to-all-split": _impl("symm_collectives", "all_to_all_split", {"all-to-all"}, **_SPLIT, **ASK),
    # data and flag in one 8-byte line (NCCL's LL protocol), for small messages (kernels/low_latency.py)
    "pkroof-one-shot-ll": _impl("low_latency", "all_reduce_one_shot_ll", {"all-reduce"}, **_LL_AUTO),
    # for more than 2 ranks: at 2 it moves the one-shot's bytes in two steps
    "pkroof-two-shot-ll": _impl(
        "low_latency", "all_reduce_two_shot_ll", {"all-reduce"}, **(_LL | {"algorithm": "two-shot"}), **ASK
    ),
    "pkroof-all-gather-ll": _impl("low_latency", "all_gather_ll", {"all-gather"}, **_LL_AUTO),
    "pkroof-reduce-scatter-ll": _impl("low_latency", "reduce_scatter_ll", {"reduce-scatter"}, **_LL_AUTO),
    "pkroof-all-to-all-ll": _impl("low_latency", "all_to_all_ll", {"all-to-all"}, **_LL_AUTO),
    "pkroof-gemv-ar-ll": _impl("low_latency", "gemv_all_reduce_ll", {"decode-gemv-all-reduce"}, **_LL_AUTO),
    "pkroof-gemm-rs-ll": _impl("low_latency", "gemm_reduce_scatter_ll", {"gemm-reduce-scatter"}, **_LL_AUTO),
    "pkroof-ag-gemm-ll": _impl("low_latency", "all_gather_gemm_ll", {"all-gather-gemm"}, **_LL_AUTO),
    "pkroof-gemm-ar-ll": _impl("low_latency", "gemm_all_reduce_ll", {"gemm-all-reduce"}, **_LL_AUTO),
    # the copy engine (kernels/copy_engine.py)
    "pkroof-all-reduce-ce": _impl("copy_engine", "all_reduce_ce", {"all-reduce"}, **_CE),
    "pkroof-all-gather-ce": _impl("copy_engine", "all_gather_ce", {"all-gather"}, **_CE),
    "pkroof-reduce-scatter-ce": _impl("copy_engine", "reduce_scatter_ce", {"reduce-scatter"}, **_CE),
    "pkroof-all-to-all-ce": _impl("copy_engine", "all_to_all_ce", {"all-to-all"}, **_CE),
    # fused GEMMs (kernels/fused.py, inter_sm.py)
    "pkroof-ag-gemm-ce": _impl("fused", "all_gather_gemm_ce", {"all-gather-gemm"}, **_CE_OVERLAP),
    "pkroof-gemm-rs-ce": _impl("fused", "gemm_reduce_scatter_ce", {"gemm-reduce-scatter"}, **_CE_OVERLAP),
    "pkroof-gemm-rs-epilogue": _impl(
        "fused",
        "gemm_reduce_scatter_epilogue",
        {"gemm-reduce-scatter"},
        mechanism="sm-store",
        schedule="intra-sm",
        comm_sms=0,
    ),
    "pkroof-gemm-ar-ce": _impl("fused", "gemm_all_reduce_ce", {"gemm-all-reduce"}, **_CE_OVERLAP),
    # comm CTAs per shape (by the GEMM's K) unless PKROOF_INTER_SM_CTAS is set; reported per call
    "pkroof-gemm-ar-inter-sm": _impl(
        "inter_sm",
        "gemm_all_reduce_inter_sm",
        {"gemm-all-reduce"},
        mechanism="sm-store",
        schedule="inter-sm",
        comm_sms="PKROOF_INTER_SM_CTAS",
    ),
}
