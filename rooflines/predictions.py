"""A prediction per (mechanism, schedule): what the pair really costs on the system.

A prediction charges the mechanism's α and bandwidth at the CTAs it gets (rooflines/costs.py), the SMs communication
takes away from compute (rooflines/compute.py), HBM staging where comm and compute meet through memory (inter-SM,
copy engine), the pipeline's fill, and the fixed costs kernels were measured to pay beyond all that (a staged
collective's hand-off, a fused kernel's per schedule). Every prediction is ≥ t_roof by construction.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from .collectives import Algorithm, Collective
from .compute import flops_time_s, serial_compute_s, tile_waves_s, waves
from .costs import nccl_cost, op_cost, staging_s
from .mechanisms import DEVICE_INITIATED, LL_PUSH, Mechanism, Protocol, Schedule, TransferModel, label
from .system import System
from .workload import CommOp, Workload


@dataclass(frozen=True)
class Prediction:
    mechanism: Mechanism
    schedule: Schedule
    comm_sms: int  # SMs (or SM-equivalents, intra-SM) taken by communication
    t_s: float
    compute_s: float  # compute after the SMs that communication takes
    comm_s: float  # communication's bandwidth time
    latency_s: float
    fill_s: float  # pipeline prologue/epilogue that cannot overlap
    algorithms: tuple[str, ...]  # per comm op (NCCL: the algorithm it picks, "ring", "nvls", "p2p", ...)
    protocol: Protocol = Protocol.SIMPLE
    protocols: tuple[str, ...] = ()  # per comm op: NCCL's ("ll", "ll128", "simple"), or a probe fit's regime
    # NCCL only, where its tuning is known: the same calls as eager PyTorch calls the program waits on (t_s is their
    # time captured in a CUDA graph, as pkroof times), and with buffers registered for NCCL's symmetric kernels
    t_eager_s: float | None = None
    t_symmetric_s: float | None = None
    # nccl-tests' algbw (size / t_s) and busbw (algbw × its PERFORMANCE.md factor) where the workload is one
    # collective and nothing else (Workload.bandwidths); None otherwise
    algbw_Bps: float | None = None
    busbw_Bps: float | None = None

    def with_bandwidths(self, w: Workload) -> Prediction:
        """This prediction with the algbw and busbw of `w`, the workload it predicts, at its time."""
        algbw, busbw = w.bandwidths(self.t_s)
        return dataclasses.replace(self, algbw_Bps=algbw, busbw_Bps=busbw)

    @property
    def key(self) -> str:
        """ "mechanism/schedule", "/ll" appended for the LL protocol: how result files and reports name the pair."""
        return f"{self.mechanism.value}/{self.schedule.value}" + ("/ll" if self.protocol is Protocol.LL else "")

    @property
    def label(self) -> str:
        """The mechanism as tables show it: "sm-store", or "sm-store LL"."""
        return label(self.mechanism.value, self.protocol)


def _serial(
    w: Workload,
    system: System,
    m: TransferModel,
    comm_sms: int | None = None,
    protocol: Protocol = Protocol.SIMPLE,
    algorithm: Algorithm | None = None,
) -> Prediction | None:
    """Compute, then communication with as many CTAs as help (NCCL: its own channel count; a kernel that
    declares its CTA count: that many). Anything but NCCL, whose measured rates already include its copies,
    also pays the staging of ordinary tensors through symmetric memory, after the transfers: pkroof's kernels
    on h200x2 measured 5-18% above the sum and 19-55% above the max of the two
    (benchmarks/kernels/2026-11-30-variants-h200x2.md)."""
    if m.mechanism is Mechanism.NCCL and m.nccl is not None:
        ctas, used = m.nccl.channels, m.nccl.channels
    elif m.mechanism is Mechanism.NCCL and m.num_ctas_default:
        ctas, used = m.num_ctas_default, m.num_ctas_default
    elif m.uses_sms:
        ctas, used = (comm_sms, comm_sms) if comm_sms else (system.sm_count, min(m.ctas_for(1.0), system.sm_count))
    else:
        ctas, used = None, 0
    staged = m.mechanism is not Mechanism.NCCL
    costs = [op_cost(op, system, m, ctas, staged=staged, protocol=protocol, algorithm=algorithm) for op in w.comm]
    if not costs and protocol is not Protocol.SIMPLE:
        return None  # nothing to communicate: no protocol to choose
    if any(c is None for c in costs):
        return None
    comm_s = sum(c.bandwidth_s for c in costs)
    if m.mechanism is not Mechanism.NCCL:
        comm_s += staging_s(costs, system)
    lat_s = sum(c.latency_s for c in costs)
    compute_s = serial_compute_s(w, system)
    hbm_s = w.hbm_bytes / system.hbm_bandwidth_Bps
    busy_s = max(compute_s + comm_s, hbm_s)
    eager_s = symmetric_s = None
    if m.mechanism is Mechanism.NCCL and m.nccl is not None:
        eager_s = busy_s + lat_s + sum(c.nccl.host_overhead_s for c in costs if c.nccl)
        if "symmetric/ll" in m.nccl.lines:
            run = dataclasses.replace(m.nccl_run, registered=True)
            sym = [nccl_cost(op, system, m, run) for op in w.comm]
            symmetric_s = max(compute_s + sum(c.bandwidth_s for c in sym), hbm_s) + sum(c.latency_s for c in sym)
    return Prediction(
        m.mechanism,
        Schedule.SERIAL,
        used,
        busy_s + lat_s,
        compute_s,
        comm_s,
        lat_s,
        0.0,
        tuple(c.algorithm_name for c in costs),
        protocol,
        tuple(c.protocol_name for c in costs),
        eager_s,
        symmetric_s,
    )


def _chunks(w: Workload, system: System, *, tiles: bool) -> int:
    """Pipeline depth: shards (one per rank) for inter-SM; waves of tiles for intra-SM (tiles finish a wave at a
    time and each wave's epilogue sends while the next computes: one wave, no overlap). The copy engine's:
    _ce_overlap_pipeline."""
    if tiles:
        return max(1, -(-max(op.num_tiles for op in w.compute) // system.sm_count))
    return max(op.group_size for op in w.comm)


def _ce_overlap_pipeline(op: CommOp, algorithm: Algorithm, system: System) -> tuple[int, int]:
    """(pipeline depth, DMAs sent to each peer, one after another) of a copy-engine overlap for `op`, as pkroof's
    kernels do it (kernels/fused.py). Gathers and scatters go shard by shard, one per rank, each peer's sent once.
    A one-shot all-reduce goes by row blocks of its partial product, each pushed to every peer as soon as it is
    computed: two blocks at 2 ranks, one beyond, where a block costs P − 1 more DMAs (fused.one_shot_blocks)."""
    if op.kind is Collective.ALL_REDUCE and algorithm is Algorithm.ONE_SHOT:
        blocks = 2 if min(op.group_size, system.ranks_per_node) == 2 else 1
        return blocks, blocks
    return op.group_size, 1


def _overlapped(
    w: Workload,
    system: System,
    m: TransferModel,
    schedule: Schedule,
    comm_sms: int | None = None,
    algorithm: Algorithm | None = None,
) -> Prediction | None:
    """Communication overlapped with compute: search the comm SMs k that minimise the total (or take the k a
    kernel declares). Inter-SM's GEMM runs in whole tiles on the SMs left to it, so its compute is at least
    its waves of tiles (tile_waves_s); intra-SM's and the copy engine's is cuBLAS's, which picks smaller
    tiles for small problems, and stays FLOPs at the peak."""
    sm = system.sm_count
    match schedule:
        case Schedule.INTRA_SM:
            candidates, staged, tiles = range(1, sm), False, True
        case Schedule.INTER_SM:
            nccl_ctas = m.nccl.channels if m.nccl is not None else m.num_ctas_default
            candidates = [nccl_ctas] if m.mechanism is Mechanism.NCCL else range(1, sm)
            candidates = [k for k in candidates if 0 < k < sm]
            staged, tiles = True, False
        case Schedule.CE_OVERLAP:
            candidates, staged, tiles = [0], True, False
    if comm_sms is not None and schedule is Schedule.INTER_SM:  # intra-SM's k is the model's SM-equivalents
        candidates = [comm_sms] if 0 < comm_sms < sm else []
    flops_s = flops_time_s(w, system)
    fill_depth = _chunks(w, system, tiles=tiles)
    ce = schedule is Schedule.CE_OVERLAP
    best: Prediction | None = None
    for k in candidates:
        costs, later_dmas, ce_depth = [], 0, 1
        for op in w.comm:
            reads = op.consumer_reads if (schedule is Schedule.INTRA_SM and op.consumer) else 1
            ctas = k if m.uses_sms else None
            c = op_cost(op, system, m, ctas, reads, staged=staged, chunked=not ce, algorithm=algorithm)
            if c is None:
                return None
            costs.append(c)
            if ce:  # a DMA to a peer starts once the one before it has ended: each after the first pays α, as
                # the copy-engine collectives' chunks do (cost); peers are served side by side, as there
                depth, dmas = _ce_overlap_pipeline(op, c.algorithm, system)
                ce_depth, later_dmas = max(ce_depth, depth), later_dmas + dmas - 1
        comm_s = sum(c.bandwidth_s for c in costs) + later_dmas * m.latency_s
        lat_s = sum(c.latency_s for c in costs) + m.overlap_for(schedule.value)  # a fused kernel's fixed costs
        staging = sum(c.traffic.send_bytes + c.traffic.recv_bytes for c in costs) if staged else 0.0
        hbm_s = (w.hbm_bytes + staging) / system.hbm_bandwidth_Bps
        compute_s = flops_s * sm / (sm - k)
        depth = ce_depth if ce else fill_depth
        if schedule is Schedule.INTER_SM:  # a persistent GEMM on sm − k SMs, each owning whole tiles
            compute_s = max(compute_s, tile_waves_s(w, system, sm - k))
            depth = min(depth, waves(w, sm - k))
        fill_s = min(compute_s, comm_s) / depth
        t = max(compute_s, hbm_s, comm_s) + lat_s + fill_s
        if best is None or t < best.t_s:
            algorithms = tuple(c.algorithm_name for c in costs)
            protocols = tuple(c.protocol_name for c in costs)
            best = Prediction(
                m.mechanism, schedule, k, t, compute_s, comm_s, lat_s, fill_s, algorithms, protocols=protocols
            )
    return best


def _schedules(w: Workload, m: TransferModel, *, declared: bool = False) -> list[Schedule]:
    """The schedules worth predicting for `w` with `m`; `declared`: an implementation runs this pair, so predict
    intra-SM even for a single tile (it is then serial: the one wave's epilogue sends after the compute)."""
    out = [Schedule.SERIAL]
    if not w.overlappable:
        return out
    if m.mechanism in DEVICE_INITIATED:
        tiled = declared or all(op.num_tiles > 1 for op in w.compute)
        out += [Schedule.INTRA_SM, Schedule.INTER_SM] if tiled else [Schedule.INTER_SM]
    elif m.mechanism is Mechanism.NCCL:
        out.append(Schedule.INTER_SM)  # NCCL on a side stream, its channels taking SMs from the compute
    elif m.mechanism is Mechanism.COPY_ENGINE:
        out.append(Schedule.CE_OVERLAP)
    return out


def predict(
    w: Workload,
    system: System,
    mechanism: Mechanism,
    schedule: Schedule,
    comm_sms: int | None = None,
    protocol: Protocol = Protocol.SIMPLE,
    algorithm: Algorithm | None = None,
) -> Prediction | None:
    """The prediction for one (mechanism, schedule) pair as an implementation declares it, with its protocol and
    algorithm; None where the system lacks the mechanism or the schedule, protocol or algorithm does not apply.
    comm_sms None: the best count, as in bound(); algorithm None: the cheapest. The LL protocol is modelled for
    serial collectives only."""
    m = next((m for m in system.available if m.mechanism is mechanism), None)
    if m is None or schedule not in _schedules(w, m, declared=True):
        return None
    if schedule is Schedule.SERIAL:
        p = _serial(w, system, m, comm_sms, protocol, algorithm)
    else:
        p = None if protocol is not Protocol.SIMPLE else _overlapped(w, system, m, schedule, comm_sms, algorithm)
    return None if p is None else p.with_bandwidths(w)


def every_prediction(w: Workload, system: System) -> list[Prediction]:
    """A prediction for every pair the system can run `w` with: each mechanism's schedules, and LL where it pushes.
    Their algbw and busbw are left to the caller, who knows which workload they are of (Bound: the whole one)."""
    predictions = []
    for m in system.available:
        for schedule in _schedules(w, m):
            p = _serial(w, system, m) if schedule is Schedule.SERIAL else _overlapped(w, system, m, schedule)
            if p is not None:
                predictions.append(p)
        if m.mechanism in LL_PUSH and (ll := _serial(w, system, m, protocol=Protocol.LL)) is not None:
            predictions.append(ll)
    return predictions
