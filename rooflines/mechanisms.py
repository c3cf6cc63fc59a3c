"""Transfer mechanisms and their alpha-beta-CTA model: t(bytes, ctas) = α + bytes / min(ctas·β_cta, β_peak)."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from enum import StrEnum

from .nccl import DEFAULT_RUN, NcclRun, NcclTuning


class Mechanism(StrEnum):
    COPY_ENGINE = "copy-engine"  # host-issued DMA (cudaMemcpyAsync between peers); takes no SMs
    SM_LOAD = "sm-load"  # kernel loads from peer memory (pull)
    SM_STORE = "sm-store"  # kernel stores to peer memory (push)
    TMA = "tma"  # Hopper+ bulk copies issued by one thread per CTA
    MULTIMEM = "multimem"  # NVSwitch in-network reduction / multicast (NVLS)
    NCCL = "nccl"  # NCCL's own collectives: the PyTorch baseline
    NETWORK = "network"  # inter-node NIC path (GPUDirect RDMA), used by hierarchical algorithms


class Schedule(StrEnum):
    SERIAL = "serial"  # communication after compute, as PyTorch + NCCL does
    INTRA_SM = "intra-sm"  # warp specialisation: comm and compute share the SMs, tile by tile
    INTER_SM = "inter-sm"  # k SMs dedicated to communication, the rest compute
    CE_OVERLAP = "ce-overlap"  # copy engine moves data while all SMs compute


class Protocol(StrEnum):
    """How a receiver learns that data has landed (NCCL's names). The choice trades bytes for latency."""

    SIMPLE = "simple"  # the data, then a flag stored with release semantics behind it: one more dependent step
    LL = "ll"  # each 4-byte word beside the call's flag in one 8-byte line: twice the bytes, no release, no flag


def label(mechanism: str, protocol: str | None = None) -> str:
    """A mechanism as tables, records and reports show it: "sm-store", or "sm-store LL" for the LL protocol."""
    return mechanism + (" LL" if protocol == Protocol.LL else "")


LL_PUSH = frozenset({Mechanism.SM_STORE})  # LL lines are stores a receiver polls: pushes only (kernels/low_latency.py)

DEVICE_INITIATED = frozenset({Mechanism.SM_LOAD, Mechanism.SM_STORE, Mechanism.TMA, Mechanism.MULTIMEM})
OVERLAPPED = (Schedule.INTRA_SM.value, Schedule.INTER_SM.value, Schedule.CE_OVERLAP.value)


@dataclass(frozen=True)
class TransferModel:
    """One mechanism's fitted (or published) transfer model between two GPUs, one direction."""

    mechanism: Mechanism
    available: bool
    latency_s: float  # α: from issue to the first transfer being usable at the peer (launch included)
    peak_bandwidth_Bps: float  # β_peak: bytes/s one GPU moves out (or in) with this mechanism
    per_cta_bandwidth_Bps: float | None  # β_cta; None for mechanisms that take no SMs
    num_ctas_default: int = 0  # CTAs the mechanism uses when nobody chooses (NCCL's channels); 0 = as many as help
    step_latency_s: float | None = None  # each further dependent step of one operation; None: α again
    # (collective, α, β_peak) where one collective was measured on its own and differs from the rest (NCCL);
    # several entries for one collective are regimes (protocols): each call runs the cheapest at its size
    collective_fits: tuple[tuple[str, float, float], ...] = ()
    handoff_s: float = 0.0  # a collective staged through symmetric memory pays this beyond α and one flag step
    duplex_bandwidth_Bps: float | None = None  # β_peak per direction with both directions busy; None: β_peak
    # (schedule, seconds): a fused kernel with this mechanism pays this much more per call under that overlapped
    # schedule than the model's terms say (its own fixed costs); measured by `pkroof topology calibrate`
    overlap_s: tuple[tuple[str, float], ...] = ()
    # an LL collective (Protocol.LL) pays this beyond α instead of handoff_s: no release and no flag step, but a
    # polling consume and its bookkeeping; None: not measured, so charged handoff_s (until kernels say otherwise)
    ll_handoff_s: float | None = None
    # NCCL only: its default algorithm and protocol per call and their costs (rooflines/nccl.py); None: the
    # collective fits above price NCCL as one measured ring (a probed node)
    nccl: NcclTuning | None = None
    nccl_run: NcclRun = DEFAULT_RUN  # how the program has NCCL run (NCCL_ALGO, NCCL_PROTO, registered buffers)
    # each peer beyond the first adds this to a staged collective's hand-off: its flags are stored to and polled
    # from every peer, and the call waits for the last of them (handoff_s was measured with one peer)
    per_peer_s: float = 0.0

    def handoff_for(self, protocol: Protocol, peers: int = 1) -> float:
        """The fixed hand-off a staged collective of `protocol` pays per call with `peers` peers (the simple one where
        LL's is unknown): the one-peer figure, and per_peer_s for each further peer."""
        one_peer = self.handoff_s
        if protocol is Protocol.LL and self.ll_handoff_s is not None:
            one_peer = self.ll_handoff_s
        return one_peer + max(0, peers - 1) * self.per_peer_s

    def overlap_for(self, schedule: str) -> float:
        """The measured fixed cost per call of a fused kernel under `schedule` (0 where none was measured)."""
        return next((seconds for name, seconds in self.overlap_s if name == schedule), 0.0)

    @property
    def uses_sms(self) -> bool:
        return self.per_cta_bandwidth_Bps is not None

    def for_collective(self, kind: str, num_bytes: float) -> TransferModel:
        """This model as it moves `num_bytes` of `kind`: that collective's own α and β_peak where it was fitted,
        in the regime cheapest at that size (β_cta scaled with β_peak, so the same CTAs still saturate); the
        general model otherwise."""
        regimes = [(latency_s, peak_Bps) for name, latency_s, peak_Bps in self.collective_fits if name == kind]
        if not regimes:
            return self
        latency_s, peak_Bps = min(regimes, key=lambda r: r[0] + num_bytes / r[1])
        return dataclasses.replace(self._at_peak(peak_Bps), latency_s=latency_s, collective_fits=())

    def both_ways(self) -> TransferModel:
        """This model while the same GPUs also receive as much as they send (every collective on two or more
        ranks): β_peak is the measured rate per direction with both directions busy (never above the one-way
        β_peak), β_cta scaled with it."""
        if self.duplex_bandwidth_Bps is None or self.duplex_bandwidth_Bps >= self.peak_bandwidth_Bps:
            return self
        return self._at_peak(self.duplex_bandwidth_Bps)

    def _at_peak(self, peak_Bps: float) -> TransferModel:
        """This model with β_peak = peak_Bps and β_cta scaled with it, so the same CTAs still saturate."""
        scale = peak_Bps / self.peak_bandwidth_Bps
        per_cta = None if self.per_cta_bandwidth_Bps is None else self.per_cta_bandwidth_Bps * scale
        return dataclasses.replace(self, peak_bandwidth_Bps=peak_Bps, per_cta_bandwidth_Bps=per_cta)

    def bandwidth_Bps(self, num_ctas: int | None = None) -> float:
        """Bandwidth with `num_ctas` CTAs moving data; None means as many as it takes to saturate."""
        if not self.uses_sms or num_ctas is None:
            return self.peak_bandwidth_Bps
        assert num_ctas >= 1, num_ctas
        return min(num_ctas * self.per_cta_bandwidth_Bps, self.peak_bandwidth_Bps)

    def latency_for(self, num_steps: int) -> float:
        """α for the first dependent step, the step latency for each one after it."""
        if num_steps <= 0:
            return 0.0
        step = self.latency_s if self.step_latency_s is None else self.step_latency_s
        return self.latency_s + (num_steps - 1) * step

    def time_s(self, num_bytes: float, num_ctas: int | None = None, *, num_steps: int = 1) -> float:
        """Latency of `num_steps` dependent steps plus bytes over the bandwidth the CTAs reach."""
        return self.latency_for(num_steps) + max(num_bytes, 0.0) / self.bandwidth_Bps(num_ctas)

    def ctas_for(self, fraction: float = 0.9) -> int:
        """CTAs needed to reach `fraction` of peak bandwidth (0 for the copy engine)."""
        if not self.uses_sms:
            return 0
        return math.ceil(fraction * self.peak_bandwidth_Bps / self.per_cta_bandwidth_Bps - 1e-9)

    def efficient_size_bytes(self, fraction: float = 0.9) -> float:
        """Smallest message reaching `fraction` of peak: S/(α + S/β) ≥ f·β  ⇔  S ≥ f/(1−f)·α·β."""
        assert 0 < fraction < 1, fraction
        return fraction / (1 - fraction) * self.latency_s * self.peak_bandwidth_Bps
