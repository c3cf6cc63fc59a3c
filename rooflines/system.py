"""The numbers of a machine that the model needs, for one run of `world_size` ranks (a view of a Topology)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from .mechanisms import Mechanism, TransferModel


@dataclass(frozen=True)
class System:
    name: str
    world_size: int
    ranks_per_node: int  # ranks sharing one scale-up (NVLink / PCIe) domain
    sm_count: int
    peak_flops: Mapping[str, float]  # dense FLOP/s per dtype
    hbm_bandwidth_Bps: float
    link_bandwidth_Bps: float  # nominal scale-up bandwidth per GPU per direction
    mechanisms: Mapping[Mechanism, TransferModel]  # scale-up mechanisms, available or not
    network: TransferModel | None = None  # this GPU's share of its node's NICs; None on one node
    # FLOP/s per dtype under continuous load, where the GPU runs at its power limit (measured: the probe); the
    # predictions use it, the roof keeps peak_flops. A dtype without one is predicted at its peak.
    sustained_flops: Mapping[str, float] = field(default_factory=dict)
    # FLOP/s per dtype of a matmul that runs alone, where measured (a datasheet peak is not reached): predictions
    # of short ops use it; a dtype without one is predicted at its peak
    burst_flops: Mapping[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.world_size < 1:
            raise ValueError(f"world size must be at least 1, got {self.world_size}")
        if self.world_size == 1 and self.available:
            raise ValueError("world size must be at least 2 where GPUs have peers to communicate with")
        if self.world_size % self.ranks_per_node:
            raise ValueError(f"world size {self.world_size} is not a multiple of {self.ranks_per_node} GPUs per node")
        if self.num_nodes > 1 and self.network is None:
            raise ValueError(f"{self.name}: {self.num_nodes} nodes but no network between them")

    @property
    def num_nodes(self) -> int:
        return self.world_size // self.ranks_per_node

    @property
    def available(self) -> tuple[TransferModel, ...]:
        return tuple(m for m in self.mechanisms.values() if m.available and m.mechanism is not Mechanism.NETWORK)

    def peak_flops_for(self, dtype: str) -> float:
        if dtype not in self.peak_flops:
            raise ValueError(f"{self.name} has no {dtype} peak (it has: {', '.join(sorted(self.peak_flops))})")
        return self.peak_flops[dtype]

    def sustained_flops_for(self, dtype: str) -> float:
        return self.sustained_flops.get(dtype) or self.burst_flops_for(dtype)

    def burst_flops_for(self, dtype: str) -> float:
        return self.burst_flops.get(dtype) or self.peak_flops_for(dtype)
