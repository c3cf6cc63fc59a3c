"""The Topology: plain frozen data about a node (or N of them), every number tied to a cited source.

Each record carries `sources`: field name → id of an entry in `Topology.sources`, whose `basis` says
whether the number is nominal (a datasheet or spec), measured on this machine (a published run, or `pkroof probe`),
or carried over from a measurement of another machine (the cite says which). Records check themselves on
construction and raise ValueError naming the field.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field, replace

from pkroof.rooflines import Collective, Mechanism, System, TransferModel
from pkroof.rooflines.mechanisms import DEVICE_INITIATED, OVERLAPPED
from pkroof.rooflines.nccl import NcclTuning
from pkroof.rooflines.workload import DTYPE_BYTES

BASES = ("nominal", "measured", "carried")
SCALEUP_KINDS = ("nvswitch", "nvlink", "pcie", "none")  # "none": one GPU per node, no peer to reach
NIC_KINDS = ("infiniband", "roce", "ethernet")
MECHANISMS = tuple(m.value for m in Mechanism if m is not Mechanism.NETWORK)


MAX_GPUS_PER_NODE = 4096  # one node or NVLink domain: 7x the largest announced (NVL576)
MAX_GPUS = 1 << 20  # a topology's GPUs in all: 128 Ki nodes of 8


@dataclass(frozen=True)
class Source:
    basis: str  # "nominal", "measured" (on this machine) or "carried" (measured on another, which the cite names)
    cite: str  # document and place in it, or the command, host and date of a measurement
    url: str = ""  # where to read it: a URL, or owner/repo@commit:path
    date: str = ""  # when it was published or measured (ISO 8601, as precise as the source says)
    software: str = ""  # the versions it was measured with (NCCL, CUDA, driver, torch, the tool)

    def __post_init__(self) -> None:
        if self.basis not in BASES:
            raise ValueError(f"basis: must be one of {', '.join(BASES)}, got {self.basis!r}")
        if not self.cite.strip():
            raise ValueError("cite: must say where the number comes from")


def set_numbers(record: object) -> list[str]:
    """Names of the numeric fields of a record that hold a number (None means 'not set', and so does 0 where the
    field's default is 0); a dict or tuple of them counts as one, where it is not empty."""
    out = []
    for f in dataclasses.fields(record):
        value = getattr(record, f.name)
        number = not isinstance(value, bool) and isinstance(value, (int, float, dict, tuple))
        if f.name != "sources" and number and (value or (f.default is None and value is not None)):
            out.append(f.name)
    return out


def _check_record(record: object, *, positive: tuple[str, ...], sourced: bool = True) -> None:
    for name in positive:
        value = getattr(record, name)
        if value is not None and not value > 0:
            raise ValueError(f"{name}: must be positive, got {value}")
    for f in dataclasses.fields(record):
        value = getattr(record, f.name)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value < 0:
            raise ValueError(f"{f.name}: must not be negative, got {value}")
    for name in set_numbers(record):
        if sourced and name not in record.sources:
            raise ValueError(f"sources.{name}: missing (every number says where it comes from)")
    unknown = set(record.sources) - {f.name for f in dataclasses.fields(record)}
    if unknown:
        raise ValueError(f"sources.{sorted(unknown)[0]}: names no field of this record")


@dataclass(frozen=True)
class GPU:
    name: str  # exact NVML product name, e.g. "NVIDIA H100 80GB HBM3"
    arch: str  # "ampere", "ada", "hopper", "blackwell"
    sm_count: int
    hbm_capacity_bytes: int
    hbm_bandwidth_Bps: float
    peak_flops: dict[str, float]  # dense tensor-core FLOP/s per dtype (fp32: the non-tensor rate)
    sources: dict[str, str]
    # FLOP/s per dtype under continuous load (the GPU at its power limit), where measured: predictions use it,
    # the roof keeps peak_flops
    sustained_flops: dict[str, float] = field(default_factory=dict)
    # FLOP/s per dtype of a matmul that runs alone, where measured: predictions charge short ops this; {}: the
    # peak (a probed node's peak is itself its measured burst rate; a datasheet's is not reached)
    burst_flops: dict[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        _check_record(self, positive=("sm_count", "hbm_capacity_bytes", "hbm_bandwidth_Bps"))
        if not self.name.strip():
            raise ValueError("name: must not be empty (the exact NVML product name)")
        for dtype, value in self.peak_flops.items():
            if dtype not in DTYPE_BYTES:
                raise ValueError(f"peak_flops.{dtype}: unknown precision (known: {', '.join(DTYPE_BYTES)})")
            if not value > 0:
                raise ValueError(f"peak_flops.{dtype}: must be positive, got {value}")
        for name in ("sustained_flops", "burst_flops"):
            for dtype, value in getattr(self, name).items():
                if dtype not in self.peak_flops:
                    raise ValueError(f"{name}.{dtype}: no peak_flops.{dtype} beside it")
                if not 0 < value <= self.peak_flops[dtype]:
                    raise ValueError(
                        f"{name}.{dtype}: must be positive and at most the peak ({self.peak_flops[dtype]:.4g}),"
                        f" got {value:.4g}"
                    )


@dataclass(frozen=True)
class ScaleUp:
    """How the GPUs of one node reach each other, per GPU and per direction."""

    kind: str  # "nvswitch", "nvlink" (direct mesh), "pcie", or "none" (a node of one GPU: no links, no peer)
    generation: str  # "NVLink 4.0", "PCIe 4.0 x16", ...
    links_per_gpu: int
    link_bandwidth_Bps: float  # one link, one direction
    switches_per_node: int  # NVSwitch chips (0 for a direct mesh or PCIe)
    multicast: bool  # the switches do NVLS multicast / in-network reduction
    sources: dict[str, str]

    def __post_init__(self) -> None:
        if self.kind not in SCALEUP_KINDS:
            raise ValueError(f"kind: must be one of {', '.join(SCALEUP_KINDS)}, got {self.kind!r}")
        if self.kind == "none":
            _check_record(self, positive=())
            if self.links_per_gpu or self.link_bandwidth_Bps or self.switches_per_node:
                raise ValueError("kind: 'none' (no peer) has no links, link bandwidth or switches")
        else:
            _check_record(self, positive=("links_per_gpu", "link_bandwidth_Bps"))
        if self.multicast and self.kind != "nvswitch":
            raise ValueError("multicast: only NVSwitch fabrics multicast")

    @property
    def total_bandwidth_Bps(self) -> float:
        return self.links_per_gpu * self.link_bandwidth_Bps


@dataclass(frozen=True)
class CollectiveFit:
    """One collective's own α and peak bandwidth, where it was measured apart from the mechanism's main curve."""

    latency_s: float  # α of its first dependent step (the mechanism's step latency for each one after)
    peak_bandwidth_Bps: float  # link bytes per second, as for the mechanism

    def __post_init__(self) -> None:
        for name in ("latency_s", "peak_bandwidth_Bps"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name}: must be positive, got {getattr(self, name)}")


@dataclass(frozen=True)
class NcclSpec:
    """NCCL's tuning on this node (rooflines/nccl.py: what it runs by default and what that costs), every figure
    cited: `sources` maps each of the model's fields to a source, and each of its measured pairs ("lines.ring/ll")."""

    model: NcclTuning
    sources: dict[str, str]

    def _cited(self) -> list[str]:
        return [n for n in set_numbers(self.model) if n != "lines"] + [f"lines.{k}" for k in self.model.lines]

    def __post_init__(self) -> None:
        for name in self._cited():
            if name not in self.sources:
                raise ValueError(f"sources.{name}: missing (every number says where it comes from)")
        unknown = set(self.sources) - set(self._cited())
        if unknown:
            raise ValueError(f"sources.{sorted(unknown)[0]}: names no number of the NCCL model")

    def rates(self) -> dict[str, float]:
        """Every bandwidth of its lines, by path: none may exceed the link."""
        return {
            f"lines.{k}[{i}].bandwidth_Bps": line.bandwidth_Bps
            for k, lines in self.model.lines.items()
            for i, line in enumerate(lines)
        }


@dataclass(frozen=True)
class MechanismSpec:
    """One transfer mechanism's model on this node: t(bytes, ctas) = α + bytes / min(ctas·β_cta, β_peak)."""

    available: bool
    latency_s: float
    peak_bandwidth_Bps: float
    per_cta_bandwidth_Bps: float | None  # None: takes no SMs (copy engine)
    num_ctas_default: int = 0  # CTAs it uses when nobody chooses (NCCL's channels); 0: as many as help
    note: str = ""  # why it is unavailable, or how its numbers were derived
    step_latency_s: float | None = None  # each further dependent step of one operation; None: latency_s again
    sources: dict[str, str] = field(default_factory=dict)
    # fitted per collective (NCCL): its regimes, smallest sizes first; each call runs the cheapest line
    collectives: dict[str, tuple[CollectiveFit, ...]] = field(default_factory=dict)
    # a collective staged through symmetric memory with this mechanism pays this much more per call than α and
    # one flag step (the stage's and the consume's dependent accesses, the release behind the data, bookkeeping):
    # measured from kernels that do it (pkroof's, by pkroof profile); 0: not measured
    handoff_s: float = 0.0
    # per direction when every GPU sends and receives at once, as the collectives do (both directions of every
    # link busy): the lower envelope of the probe's bidirectional curve; None: not measured (the one-way peak)
    duplex_bandwidth_Bps: float | None = None
    # per overlapped schedule ("intra-sm", "inter-sm", "ce-overlap"): what a fused kernel with this mechanism pays
    # per call beyond the model's terms (its own fixed costs: the compute → communication hand-off, its GEMM's
    # launch): the median excess of small fused kernels (pkroof topology calibrate); {}: not measured
    overlap_s: dict[str, float] = field(default_factory=dict)
    # the hand-off of a collective by the LL protocol (each word beside its flag, no release): measured like
    # handoff_s from LL kernels (pkroof topology calibrate; 0 is a measurement); None: not measured, so LL is
    # charged handoff_s
    ll_handoff_s: float | None = None
    # NCCL only: the algorithm and protocol it runs by default and their costs; None: the fits above price NCCL
    tuning: NcclSpec | None = None
    # each peer beyond the first adds this to the hand-off (handoff_s, ll_handoff_s): a staged collective's flags
    # are stored to and polled from every peer; 0: not known (a probe of two GPUs sees one peer)
    per_peer_s: float = 0.0

    def __post_init__(self) -> None:
        for schedule, seconds in self.overlap_s.items():
            if schedule not in OVERLAPPED:
                raise ValueError(f"overlap_s.{schedule}: not an overlapped schedule (one of: {', '.join(OVERLAPPED)})")
            if not seconds >= 0:
                raise ValueError(f"overlap_s.{schedule}: must not be negative, got {seconds}")
        if self.available:
            _check_record(self, positive=("latency_s", "peak_bandwidth_Bps", "per_cta_bandwidth_Bps"))
        else:
            _check_record(self, positive=(), sourced=False)
            if not self.note:
                raise ValueError("note: an unavailable mechanism says why")
            if self.collectives or self.tuning:
                raise ValueError("collectives: an unavailable mechanism has no fits")
        kinds = {c.value for c in Collective}
        for kind, regimes in self.collectives.items():
            if kind not in kinds:
                raise ValueError(f"collectives.{kind}: not a collective (known: {', '.join(sorted(kinds))})")
            if not regimes:
                raise ValueError(f"collectives.{kind}: needs at least one regime")

    def model(self, mechanism: Mechanism) -> TransferModel:
        return TransferModel(
            mechanism,
            self.available,
            self.latency_s,
            self.peak_bandwidth_Bps,
            self.per_cta_bandwidth_Bps,
            self.num_ctas_default,
            self.step_latency_s,
            tuple((k, c.latency_s, c.peak_bandwidth_Bps) for k, rs in sorted(self.collectives.items()) for c in rs),
            self.handoff_s,
            self.duplex_bandwidth_Bps,
            tuple(sorted(self.overlap_s.items())),
            self.ll_handoff_s,
            None if self.tuning is None else self.tuning.model,
            per_peer_s=self.per_peer_s,
        )


@dataclass(frozen=True)
class NIC:
    kind: str  # "infiniband", "roce" or "ethernet"
    model: str  # "ConnectX-7"
    count_per_node: int
    rate_Bps: float  # one NIC, one direction (NDR 400 Gb/s = 50e9 B/s)
    latency_s: float  # one-way, GPU to GPU through the network
    gpudirect_rdma: bool
    rail_aligned: bool  # NIC i of every node on one rail switch
    sources: dict[str, str]

    def __post_init__(self) -> None:
        if self.kind not in NIC_KINDS:
            raise ValueError(f"kind: must be one of {', '.join(NIC_KINDS)}, got {self.kind!r}")
        _check_record(self, positive=("count_per_node", "rate_Bps", "latency_s"))


@dataclass(frozen=True)
class Curve:
    """One measured sweep: per point the median time over its samples and the 10th/90th percentiles."""

    name: str  # "copy-engine pull", "sm-store push", "nccl all-reduce", ...
    mechanism: str  # a mechanism name, "nccl", or "hbm" / "matmul" for local ceilings
    direction: str  # "pull", "push", "bidirectional" or "" where it does not apply
    sweep: str  # "size": x is bytes at fixed CTAs; "ctas": x is CTA counts at fixed size
    num_ctas: int  # CTAs used (size sweep; 0: no SMs or the library's own choice)
    size_bytes: int  # bytes moved per call (CTA sweep; 0 for a size sweep)
    mode: str  # "graph" (CUDA graph replay) or "eager"
    x: tuple[float, ...]
    median_s: tuple[float, ...]
    p10_s: tuple[float, ...]
    p90_s: tuple[float, ...]
    num_samples: int  # samples behind each point
    verified: bool  # the bytes it moved were checked
    samples_s: tuple[tuple[float, ...], ...] = ()  # every timed sample of every point (slowest rank's)
    num_ranks: int = 0  # ranks a collective ran on; 0: every GPU of the topology (the probe's), else an import's

    def __post_init__(self) -> None:
        if self.sweep not in ("size", "ctas"):
            raise ValueError(f"sweep: must be 'size' or 'ctas', got {self.sweep!r}")
        n = len(self.x)
        if not n or any(len(v) != n for v in (self.median_s, self.p10_s, self.p90_s)):
            raise ValueError(f"{self.name}: x, median_s, p10_s and p90_s must be non-empty and of equal length")
        if any(not t > 0 for t in self.median_s):
            raise ValueError(f"{self.name}: median_s must be positive")


@dataclass(frozen=True)
class Fit:
    """The transfer model fitted to one mechanism's curves, with how well it matches them."""

    mechanism: str
    curve: str  # the size-sweep curve α and β come from
    latency_s: float
    bandwidth_Bps: float  # β of the size sweep (at its CTA count)
    per_cta_bandwidth_Bps: float | None  # from the CTA sweep; None for mechanisms that take no SMs
    peak_bandwidth_Bps: float
    ctas_for_90pct: int  # 0 for the copy engine
    efficient_size_bytes: float  # smallest message reaching 90% of β: 9·α·β
    size_max_rel_error: float  # of the curve's whole model (the minimum over its regimes)
    ctas_max_rel_error: float  # 0 without a CTA sweep
    regime: int = 0  # several fits of one curve: the library runs the cheapest line (NCCL); 0 = smallest sizes


@dataclass(frozen=True)
class Probe:
    """What `pkroof probe` ran, where, and what it saw: every curve behind the mechanisms' numbers."""

    host: str
    date: str  # ISO 8601, UTC
    command: str
    versions: dict[str, str]  # driver, cuda, nccl, torch, triton, python
    duration_s: float
    quick: bool
    curves: tuple[Curve, ...]
    fits: tuple[Fit, ...]
    ceilings: dict[str, float]  # "hbm_copy_Bps", "matmul_bf16_flops", ... , "flag_one_way_s"
    clocks_before: dict[str, float]  # MHz and throttle-reason bit masks per GPU, before and after
    clocks_after: dict[str, float]
    health: tuple[str, ...]  # degraded links, PCIe below max, throttling: one line each
    notes: tuple[str, ...] = ()
    pairs_Bps: dict[str, float] = field(default_factory=dict)  # "dst<-src": copy-engine pull, both ways at once


@dataclass(frozen=True)
class Topology:
    name: str
    description: str
    nodes: int
    gpus_per_node: int
    gpu: GPU
    scaleup: ScaleUp
    mechanisms: dict[str, MechanismSpec]  # every mechanism in MECHANISMS, available or not
    nic: NIC | None  # per node; None for a single node with no scale-out network
    sources: dict[str, Source]
    probe: Probe | None = None  # the measurements behind a measured topology

    def __post_init__(self) -> None:
        if not self.name.strip():
            raise ValueError("name: must not be empty (results and reports are labelled by it)")
        if self.nodes < 1:
            raise ValueError(f"nodes: must be at least 1, got {self.nodes}")
        if self.gpus_per_node < 1:
            raise ValueError(f"gpus_per_node: must be at least 1, got {self.gpus_per_node}")
        if self.gpus_per_node > MAX_GPUS_PER_NODE:
            raise ValueError(
                f"gpus_per_node: {self.gpus_per_node} is more than {MAX_GPUS_PER_NODE}, beyond any NVLink domain"
                " (the largest announced: 576 GPUs)"
            )
        if self.nodes * self.gpus_per_node > MAX_GPUS:
            raise ValueError(
                f"nodes: {self.nodes} nodes of {self.gpus_per_node} GPUs is more than the {MAX_GPUS} GPUs pkroof bounds"
            )
        for name in MECHANISMS:
            if name not in self.mechanisms:
                raise ValueError(f"mechanisms.{name}: missing (list it, with available: false if it cannot run)")
        for name, spec in self.mechanisms.items():
            if name not in MECHANISMS:
                raise ValueError(f"mechanisms.{name}: unknown mechanism (known: {', '.join(MECHANISMS)})")
            rates = {"peak_bandwidth_Bps": spec.peak_bandwidth_Bps} if spec.available else {}
            if spec.available and spec.duplex_bandwidth_Bps is not None:
                rates["duplex_bandwidth_Bps"] = spec.duplex_bandwidth_Bps
            for kind, regimes in spec.collectives.items():
                rates |= {
                    f"collectives.{kind}[{i}].peak_bandwidth_Bps": r.peak_bandwidth_Bps for i, r in enumerate(regimes)
                }
            if spec.tuning is not None:
                rates |= {f"tuning.model.{k}": v for k, v in spec.tuning.rates().items()}
            for field_name, rate in rates.items():
                if rate > self.scaleup.total_bandwidth_Bps * 1.0001:
                    raise ValueError(
                        f"mechanisms.{name}.{field_name}: {rate:.4g} exceeds the scale-up "
                        f"link's {self.scaleup.total_bandwidth_Bps:.4g} B/s per direction"
                    )
        if self.scaleup.kind == "none" and self.gpus_per_node != 1:
            raise ValueError(f"scaleup.kind: 'none' (no peer) is for one GPU per node, not {self.gpus_per_node}")
        if self.mechanisms["multimem"].available and not self.scaleup.multicast:
            raise ValueError("mechanisms.multimem.available: the scale-up fabric has no multicast")
        if self.nodes > 1 and self.nic is None:
            raise ValueError(f"nic: {self.nodes} nodes need a network between them")
        for path, record in self._records():
            for field_name, source_id in record.sources.items():
                if source_id not in self.sources:
                    raise ValueError(f"{path}.sources.{field_name}: unknown source {source_id!r}")

    def _records(self) -> list[tuple[str, object]]:
        out: list[tuple[str, object]] = [("gpu", self.gpu), ("scaleup", self.scaleup)]
        out += [(f"mechanisms.{k}", v) for k, v in self.mechanisms.items()]
        out += [(f"mechanisms.{k}.tuning", v.tuning) for k, v in self.mechanisms.items() if v.tuning is not None]
        if self.nic is not None:
            out.append(("nic", self.nic))
        return out

    @property
    def num_gpus(self) -> int:
        return self.nodes * self.gpus_per_node

    def basis(self, path: str) -> str:
        """'nominal' or 'measured' for a field given as 'gpu.hbm_bandwidth_Bps' (or 'nic.rate_Bps', ...)."""
        record_path, _, field_name = path.rpartition(".")
        record = dict(self._records())[record_path]
        return self.sources[record.sources[field_name]].basis

    def matmul_clock(self, dtype: str, phase: str = "sustained") -> tuple[float, float | None] | None:
        """(SM clock MHz, power-capped share or None) the probe recorded for its `phase` ("sustained" or "burst")
        matmul rate of `dtype`; None where it recorded none."""
        ceilings = self.probe.ceilings if self.probe else {}
        prefix = f"matmul_{dtype}_sustained" if phase == "sustained" else f"matmul_{dtype}"
        mhz = ceilings.get(f"{prefix}_sm_clock_mhz")
        return None if mhz is None else (mhz, ceilings.get(f"{prefix}_power_capped"))

    def with_nodes(self, nodes: int, nic: NIC | None = None) -> Topology:
        """`nodes` copies of this node joined by `nic`, else its own NICs, else one NDR 400 port per GPU."""
        sources = dict(self.sources)
        nic = nic or self.nic
        if nic is None and nodes > 1:
            nic = default_nic(self.gpus_per_node)
            sources |= {k: v for k, v in DEFAULT_NIC_SOURCES.items() if k not in sources}
        name = self.name if nodes == 1 else f"{self.name.split('@')[0]}@{nodes}"
        return replace(self, name=name, nodes=nodes, nic=nic, sources=sources)

    def system(self, world_size: int | None = None, ranks_per_node: int | None = None) -> System:
        """The numbers the roofline needs for a run of `world_size` ranks (default: every GPU), `ranks_per_node` of
        them on each node (default: as few nodes as hold them; a launched job says how it placed its ranks)."""
        world = self.num_gpus if world_size is None else world_size
        if ranks_per_node is not None and not 1 <= ranks_per_node <= self.gpus_per_node:
            raise ValueError(f"{ranks_per_node} ranks a node on {self.name}: its nodes have {self.gpus_per_node} GPUs")
        if world > self.num_gpus:
            raise ValueError(f"world size {world} is larger than {self.name}'s {self.num_gpus} GPUs")
        if world < 2 and self.num_gpus > 1:
            raise ValueError(f"world size must be at least 2, got {world}")
        if world < 1:
            raise ValueError(f"world size must be at least 1, got {world}")
        per_node = min(world, self.gpus_per_node) if ranks_per_node is None else ranks_per_node
        if world % per_node:
            raise ValueError(f"world size {world} is not a whole number of nodes of {per_node} ranks")
        if world // per_node > self.nodes:
            raise ValueError(
                f"{world // per_node} nodes of {per_node} ranks: {self.name} has {self.nodes} node"
                f"{'s' * (self.nodes > 1)} (--nodes N joins N of them)"
            )
        network = None
        if world > per_node:
            assert self.nic is not None
            # the node's NICs shared by the ranks on it: a node with fewer ranks than GPUs gives each rank more
            # (a bound, so the generous share: a GPU may reach a NIC beside another GPU's through the PCIe switches)
            share = self.nic.rate_Bps * self.nic.count_per_node / per_node
            network = TransferModel(Mechanism.NETWORK, True, self.nic.latency_s, share, None)
        return System(
            name=self.name,
            world_size=world,
            ranks_per_node=per_node,
            sm_count=self.gpu.sm_count,
            peak_flops=self.gpu.peak_flops,
            sustained_flops=self.gpu.sustained_flops,
            burst_flops=self.gpu.burst_flops,
            hbm_bandwidth_Bps=self.gpu.hbm_bandwidth_Bps,
            link_bandwidth_Bps=self.scaleup.total_bandwidth_Bps,
            mechanisms=_shared_handoffs({Mechanism(k): v.model(Mechanism(k)) for k, v in self.mechanisms.items()}),
            network=network,
        )


def _shared_handoffs(models: dict[Mechanism, TransferModel]) -> dict[Mechanism, TransferModel]:
    """Device-initiated mechanisms hand off through the same flags and consume step: one whose hand-off was not
    measured takes the smallest one measured for another (else a TMA kernel, say, would look 3.5 µs cheaper
    than an SM-store one only for want of a measurement). The same per overlapped schedule for the fixed cost of
    a fused kernel."""
    device = {k: m for k, m in models.items() if k in DEVICE_INITIATED}
    measured = [m.handoff_s for m in device.values() if m.handoff_s > 0]
    per_peer = [m.per_peer_s for m in device.values() if m.per_peer_s > 0]
    overlap = {s: min(v) for s in OVERLAPPED if (v := [m.overlap_for(s) for m in device.values() if m.overlap_for(s)])}
    out = dict(models)
    for k, m in device.items():
        handoff = m.handoff_s or (min(measured) if measured else 0.0)
        shared = dict(m.overlap_s) | {s: v for s, v in overlap.items() if not m.overlap_for(s)}
        peer_s = m.per_peer_s or (min(per_peer) if per_peer else 0.0)
        out[k] = dataclasses.replace(m, handoff_s=handoff, overlap_s=tuple(sorted(shared.items())), per_peer_s=peer_s)
    return out


# The default way to join nodes: one NDR InfiniBand port (400 Gb/s) per GPU, rail-aligned
DEFAULT_NIC_SOURCES = {
    "cx7-ndr": Source("nominal", "NVIDIA ConnectX-7 adapter datasheet: InfiniBand NDR, 400 Gb/s per port"),
    "ib-latency-assumed": Source(
        "nominal",
        "assumption, not a measurement: 3 µs GPU-to-GPU one way through "
        "one InfiniBand switch level with GPUDirect RDMA",
    ),
}


def default_nic(gpus_per_node: int) -> NIC:
    return NIC(
        kind="infiniband",
        model="ConnectX-7",
        count_per_node=gpus_per_node,
        rate_Bps=400e9 / 8,
        latency_s=3e-6,
        gpudirect_rdma=True,
        rail_aligned=True,
        sources={"count_per_node": "cx7-ndr", "rate_Bps": "cx7-ndr", "latency_s": "ib-latency-assumed"},
    )
