"""pkroof's model as the opportunities ask it: the advice for one collective, or for one GEMM fused with the
collective that feeds or drains it, at a trace's size, dtype and group size on a topology.

Every call the opportunities make into the model (rooflines' workload builders and `analyze`, the topology's
System) is here, beside runs/roofs.py's for the kernels' roofs, so that the lead can re-point them in one place.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from pkroof.rooflines import DTYPE_BYTES, Collective, System, Workload, builders
from pkroof.rooflines.analyze import analyze
from pkroof.topology import Topology, resolve

from .roofs import placement

# the trace's collective names (runs' kernels frame) → the model's
COLLECTIVES = {
    "all_reduce": Collective.ALL_REDUCE,
    "all_gather": Collective.ALL_GATHER,
    "reduce_scatter": Collective.REDUCE_SCATTER,
    "all_to_all": Collective.ALL_TO_ALL,
    "broadcast": Collective.BROADCAST,
    "reduce": Collective.REDUCE,
    "gather": Collective.GATHER,
    "scatter": Collective.SCATTER,
    "send": Collective.SEND_RECV,
    "recv": Collective.SEND_RECV,
}
# a GEMM and the collective next to it, fused (rooflines/builders.py): every builder takes the GEMM's own
# per-rank m, n, k and the group size
FUSIONS = {
    "gemm-reduce-scatter": builders.gemm_reduce_scatter,
    "gemm-all-reduce": builders.gemm_all_reduce,
    "all-gather-gemm": builders.all_gather_gemm,
    "all-to-all-gemm": builders.all_to_all_gemm,
    "gemm-all-to-all": builders.gemm_all_to_all,
}
# dtype names as traces write them (PyTorch's c10 names in Kineto's args, torch's, NCCL's) → the model's
_DTYPES = {
    "bf16": "bf16",
    "bfloat16": "bf16",
    "ncclbfloat16": "bf16",
    "fp16": "fp16",
    "half": "fp16",
    "float16": "fp16",
    "ncclfloat16": "fp16",
    "ncclhalf": "fp16",
    "fp32": "fp32",
    "float": "fp32",
    "float32": "fp32",
    "ncclfloat32": "fp32",
    "ncclfloat": "fp32",
    "tf32": "tf32",
    "fp8": "fp8",
    "float8_e4m3fn": "fp8",
    "float8_e5m2": "fp8",
    "float8_e4m3fnuz": "fp8",
    "float8_e5m2fnuz": "fp8",
    "ncclfloat8e4m3": "fp8",
    "ncclfloat8e5m2": "fp8",
}
BYTES_ONLY = "fp8"  # a dtype the model has no rate for (int64, fp64): its bytes are modelled as 1-byte elements


def model_dtype(name: object) -> str | None:
    """The model's dtype for a trace's dtype name ("BFloat16", "c10::Half", "torch.float32", "bf16"), None where
    the model does not know it."""
    if not isinstance(name, str):
        return None
    key = name.strip().lower().removeprefix("c10::").removeprefix("torch.")
    return _DTYPES.get(key)


def element_bytes(name: object) -> int | None:
    dtype = model_dtype(name)
    return None if dtype is None else DTYPE_BYTES[dtype]


@dataclass(frozen=True)
class Advised:
    """The model's advice for one workload: the pair to build and its predicted time, the roof, and NCCL's
    default (serial) as the baseline it is measured against."""

    mechanism: str
    schedule: str
    protocol: str
    t_s: float  # the advised pair's predicted time
    t_roof_s: float
    baseline_s: float | None  # NCCL's default, serial
    reason: str
    workload: Workload


def as_topology(topology: Topology | str) -> Topology:
    return topology if isinstance(topology, Topology) else resolve(topology)


def ranks_per_node(topology: Topology, group: str | None, group_size: int) -> int:
    """How many of a group's ranks share a node: its listed ranks placed as runs/roofs.py places them for the roof
    (torchrun's order), else as densely as the nodes allow."""
    return placement(group, group_size, topology.gpus_per_node)[1]


def system_for(topology: Topology, group_size: int, per_node: int | None = None) -> System:
    """The System of a group of `group_size` ranks, `per_node` of them on a node (default: as densely as the
    topology's nodes allow); more ranks than the topology has: as many of its nodes as hold them."""
    per_node = min(group_size, per_node or topology.gpus_per_node)
    nodes = math.ceil(group_size / per_node)
    if nodes > topology.nodes:
        topology = topology.with_nodes(nodes)
    return topology.system(group_size, per_node)


def _advised(workload: Workload, system: System) -> Advised:
    a = analyze(workload, system)
    if a.advice is None:
        raise ValueError(f"{workload.name}: the model has no advice for it on {system.name}")
    best, baseline = a.advice.best, a.advice.baseline
    return Advised(
        best.mechanism.value,
        best.schedule.value,
        best.protocol.value,
        best.t_s,
        a.bound.t_roof_s,
        None if baseline is None else baseline.t_s,
        a.advice.reason,
        workload,
    )


def advise_collective(
    topology: Topology | str,
    collective: str,
    size_bytes: float,
    dtype: str | None,
    group_size: int,
    per_node: int | None = None,
) -> Advised:
    """The advice for one collective as the trace sized it (nccl-tests' convention), `per_node` of its ranks on a
    node; a ValueError of one line where the model cannot take it (an unknown collective, a size that does not split
    into whole elements per rank)."""
    kind = COLLECTIVES.get(collective)
    if kind is None:
        raise ValueError(f"{collective}: not a collective the model knows")
    topo = as_topology(topology)
    group = 2 if kind is Collective.SEND_RECV else group_size
    w = builders.collective(kind, group, model_dtype(dtype) or BYTES_ONLY, size=int(size_bytes))
    return _advised(w, system_for(topo, group, per_node))


def advise_fusion(
    topology: Topology | str,
    fusion: str,
    group_size: int,
    dtype: str | None,
    *,
    m: int,
    n: int,
    k: int,
    per_node: int | None = None,
) -> Advised:
    """The advice for a GEMM (this rank's m, n, k) fused with its collective over `group_size` ranks, `per_node` of
    them on a node (FUSIONS names the fusions)."""
    topo = as_topology(topology)
    w = FUSIONS[fusion](group_size, model_dtype(dtype) or BYTES_ONLY, m=m, n=n, k=k)
    return _advised(w, system_for(topo, group_size, per_node))
