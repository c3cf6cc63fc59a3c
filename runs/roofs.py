"""Every call runs/ makes into pkroof's model, in one place: choosing the topology, a collective's bound and NCCL's
predicted time at its size, group and placement, a GEMM's bound at its dtype, and nccl-tests' busbw factor.

A collective's workload comes from the same builder the suite's collective problems use
(rooflines.workloads.collective, as `pkroof bound all-reduce` builds it), bounded by the one analysis
(rooflines.analyze.analyze); a GEMM's from rooflines.builders.gemm. Results are cached per distinct shape: a job
repeats the same few collectives and GEMMs thousands of times.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

from pkroof.rooflines import Collective, Mechanism, Schedule, System, bus_bandwidth_factor
from pkroof.rooflines.analyze import Analysis, analyze
from pkroof.rooflines.builders import collective, gemm
from pkroof.topology import PRESETS, Topology, preset, resolve

# this module's collective names → the model's
KINDS = {
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
# the model prices a collective's bytes; its dtype only sets the element size a size must split into
_MODEL_DTYPE_BY_WIDTH = {1: "fp8", 2: "bf16", 4: "fp32", 8: "fp32"}
_WIDTH = {"fp8": 1, "bf16": 2, "fp16": 2, "fp32": 4, "fp64": 8, "int8": 1, "uint8": 1, "bool": 1, "int16": 2}
_WIDTH |= {"int32": 4, "int64": 8}


@dataclass(frozen=True)
class Chosen:
    topology: Topology
    name: str  # as the user would give it back to --topology ("dgx-a100-8@2")
    reason: str


def _with_nodes(t: Topology, name: str, world: int | None) -> tuple[Topology, str]:
    if world is None or world <= t.num_gpus:
        return t, name
    if world % t.gpus_per_node:
        raise ValueError(f"{world} ranks do not fill whole nodes of {name} ({t.gpus_per_node} GPUs a node)")
    nodes = world // t.gpus_per_node
    return t.with_nodes(nodes), f"{name.partition('@')[0]}@{nodes}"


def choose_topology(given: str | None, devices: list[dict], world: int | None) -> Chosen:
    """--topology where given (joined into as many nodes as the world needs); else the preset whose GPU has exactly
    the trace's deviceProperties name and SM count, the smallest that holds the world in one node, else its nodes
    joined. A ValueError of one line asking for --topology where none matches."""
    if given is not None:
        t, name = _with_nodes(resolve(given), given, world)
        return Chosen(t, name, f"given with --topology {given}")
    if not devices:
        raise ValueError("the traces hold no deviceProperties to match a preset: give --topology NAME|FILE")
    gpu = devices[0].get("name")
    sms = devices[0].get("numSms")
    matches = [preset(n) for n in PRESETS]
    matches = [t for t in matches if t.gpu.name == gpu and t.gpu.sm_count == sms]
    if not matches:
        raise ValueError(
            f"no preset has the traces' GPU {gpu!r} with {sms} SMs (pkroof presets lists them): give --topology "
            "NAME|FILE"
        )
    one_node = sorted((t for t in matches if world is None or world <= t.gpus_per_node), key=lambda t: t.num_gpus)
    pick = one_node[0] if one_node else next((t for t in matches if world % t.gpus_per_node == 0), None)
    if pick is None:
        raise ValueError(f"{world} ranks of {gpu} fill no whole nodes of a preset: give --topology NAME|FILE")
    t, name = _with_nodes(pick, pick.name, world)
    ranks = f"{world} ranks" if world is not None else "an unknown world size"
    why = f"deviceProperties GPU {gpu!r} with {sms} SMs is {pick.name}'s GPU exactly; {ranks}"
    return Chosen(t, name, why + (f" = {t.nodes} nodes of {t.gpus_per_node}" if t.nodes > 1 else ""))


@lru_cache(maxsize=4096)  # a job has a few groups, each placed once per collective kernel: thousands of times
def placement(group: str | None, group_size: int, gpus_per_node: int) -> tuple[int, int]:
    """(ranks, ranks per node) of a group: its listed ranks placed rank // gpus_per_node (torchrun's order), else
    a group of consecutive ranks."""
    ranks = [int(r) for r in group.split(",")] if group and all(p.isdigit() for p in group.split(",")) else None
    if ranks is None or len(ranks) != group_size:
        return group_size, min(group_size, gpus_per_node)
    per_node: dict[int, int] = {}
    for r in ranks:
        per_node[r // gpus_per_node] = per_node.get(r // gpus_per_node, 0) + 1
    return group_size, max(per_node.values())


@dataclass(frozen=True)
class Roof:
    t_roof_s: float = math.nan
    t_nccl_s: float = math.nan
    unsized: str | None = None
    analysis: Analysis | None = None


def _system(t: Topology, group_size: int, ranks_per_node: int) -> System:
    nodes = -(-group_size // ranks_per_node)
    if nodes > t.nodes:
        t = t.with_nodes(nodes)
    return t.system(group_size, ranks_per_node)


class Model:
    """The chosen topology's roofs, each distinct shape computed once."""

    def __init__(self, topology: Topology) -> None:
        self.topology = topology
        self.collective_roof = lru_cache(maxsize=None)(self._collective_roof)
        self.gemm_roof = lru_cache(maxsize=None)(self._gemm_roof)

    def _collective_roof(self, kind: str, nbytes: float, dtype: str, group_size: int, ranks_per_node: int) -> Roof:
        """The bound of one `kind` of `nbytes` (nccl-tests' convention) over `group_size` ranks placed
        `ranks_per_node` a node, and NCCL's default predicted at that size."""
        if group_size < 2:
            return Roof(unsized="a group of one rank moves nothing")
        width = _WIDTH.get(dtype, 1)
        model_dtype = _MODEL_DTYPE_BY_WIDTH.get(width, "fp8")
        group = 2 if KINDS[kind] is Collective.SEND_RECV else group_size
        try:
            w = collective(KINDS[kind], group, model_dtype, size=int(nbytes))
            a = analyze(w, _system(self.topology, group, min(ranks_per_node, group)))
        except ValueError as e:
            return Roof(unsized=f"not bounded: {e}")
        nccl = a.bound.prediction(Mechanism.NCCL, Schedule.SERIAL)
        return Roof(a.bound.t_roof_s, nccl.t_s if nccl else math.nan, None, a)

    def _gemm_roof(self, m: int, n: int, k: int, batch: int, dtype: str) -> Roof:
        """pkroof's bound of the GEMM alone at its dtype's peak (fp32 at TF32's, which cuBLAS may use for it) and its
        HBM bytes once."""
        roof_dtype = "tf32" if dtype == "fp32" and "tf32" in self.topology.gpu.peak_flops else dtype
        if roof_dtype not in self.topology.gpu.peak_flops:
            return Roof(unsized=f"{dtype}: {self.topology.name} has no {dtype} peak")
        try:
            w = gemm(int(batch * m), int(n), int(k), roof_dtype)
            a = analyze(w, self.topology.system())
        except ValueError as e:
            return Roof(unsized=f"not bounded: {e}")
        return Roof(a.bound.t_roof_s, math.nan, None, a)

    @staticmethod
    def busbw_factor(kind: str, group_size: int) -> float:
        """nccl-tests' busbw / algbw (PERFORMANCE.md), from the model."""
        return bus_bandwidth_factor(KINDS[kind], 2 if KINDS[kind] is Collective.SEND_RECV else group_size)
