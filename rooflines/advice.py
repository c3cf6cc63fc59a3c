"""Advice: the best (mechanism, schedule), its headroom over PyTorch + NCCL, and the numbers that decided it."""

from __future__ import annotations

from dataclasses import dataclass

from .bound import Bound, Prediction
from .collectives import Collective
from .mechanisms import Mechanism, Protocol, Schedule
from .units import fmt_Bps, fmt_bytes, fmt_s


@dataclass(frozen=True)
class Advice:
    best: Prediction
    baseline: Prediction | None  # NCCL, serial: what PyTorch + torch.distributed does
    headroom: float | None  # baseline time / best time (None without a baseline: nothing to be ahead of)
    reason: str
    facts: dict[str, float]  # every number the reason quotes, unformatted


_WHOLE_BUFFER = frozenset({Collective.SEND_RECV, Collective.BROADCAST, Collective.REDUCE})


def _per_peer_message_bytes(b: Bound) -> float:
    """Largest single copy a direct algorithm issues: a 1/g chunk, or the whole buffer for rooted ops."""
    sizes = []
    for op in b.workload.comm:
        g = min(op.group_size, b.system.ranks_per_node)
        sizes.append(op.size_bytes if op.kind in _WHOLE_BUFFER else op.size_bytes / g)
    return max(sizes, default=0.0)


def _limiter_sentence(b: Bound, facts: dict[str, float]) -> str:
    facts |= {"t_compute_s": b.t_compute_s, "t_hbm_s": b.t_hbm_s, "t_link_s": b.t_link_s, "t_latency_s": b.t_latency_s}
    if b.limiter == "link":
        return (
            f"link-bound: {fmt_bytes(b.link_bytes_per_rank)} per rank on the {b.link_tier} link take "
            f"{fmt_s(b.t_link_s)} at {fmt_Bps(b.link_bandwidth_Bps)}, against {fmt_s(b.t_compute_s)} of compute"
        )
    if b.limiter == "latency":
        return f"latency-bound: {fmt_s(b.t_latency_s)} of dependent steps against {fmt_s(b.t_link_s)} on the link"
    if b.limiter == "hbm":
        return f"HBM-bound: {fmt_s(b.t_hbm_s)} of HBM traffic against {fmt_s(b.t_link_s)} on the link"
    return f"compute-bound: {fmt_s(b.t_compute_s)} of compute against {fmt_s(b.t_link_s)} on the link"


def _hiding_sentence(b: Bound, facts: dict[str, float]) -> str | None:
    """For a shape whose compute grows with one parameter and whose traffic does not (GEMM's K): the threshold."""
    name = b.workload.compute_scales_with
    if name is None or not b.t_compute_s or not b.t_link_s:
        return None
    value = b.workload.params[name]
    threshold = value * b.t_link_s / b.t_compute_s  # t_compute ∝ value, so t_compute = t_link at this value
    facts |= {name: value, f"{name}_threshold": threshold}
    verdict = "compute can hide the communication" if value >= threshold else "compute cannot hide the communication"
    side = "≥" if value >= threshold else "<"
    return f"{name}={value:g} {side} {name}*={threshold:.0f} (t_compute = t_link there): {verdict}"


def _mechanism_sentence(b: Bound, best: Prediction, facts: dict[str, float]) -> str:
    models = b.system.mechanisms
    msg = _per_peer_message_bytes(b)
    facts["message_bytes"] = msg
    parts = []
    ce = models.get(Mechanism.COPY_ENGINE)
    if ce is not None and ce.available:
        knee = ce.efficient_size_bytes(0.9)
        facts["copy_engine_efficient_bytes"] = knee
        side = "≥" if msg >= knee else "<"
        parts.append(
            f"messages of {fmt_bytes(msg)} {side} the copy engine's efficient size {fmt_bytes(knee)} "
            f"(90% of {fmt_Bps(ce.peak_bandwidth_Bps)} needs S ≥ 9·α·β)"
        )
    sm_mechs = [
        m for m in (Mechanism.TMA, Mechanism.SM_STORE, Mechanism.SM_LOAD) if m in models and models[m].available
    ]
    if sm_mechs:
        needs = [f"{m.value} {models[m].ctas_for(0.9)}" for m in sm_mechs]
        for m in sm_mechs:
            facts[f"{m.value}_ctas_for_90pct"] = models[m].ctas_for(0.9)
        parts.append(f"SMs to reach 90% of the link: {', '.join(needs)} of {b.system.sm_count}")
    if best.mechanism is Mechanism.MULTIMEM:
        parts.append("the switch reduces in-network, so each rank moves S instead of 2(n−1)/n·S")
    return "; ".join(parts)


def _protocol_sentence(b: Bound, best: Prediction, facts: dict[str, float]) -> str | None:
    """Why LL, when it wins: the flag step and hand-off it skips against the bytes it doubles."""
    simple = b.prediction(best.mechanism, best.schedule)
    if best.protocol is not Protocol.LL or simple is None:
        return None
    facts["t_simple_protocol_s"] = simple.t_s
    return (
        f"the LL protocol (each 4-byte word beside its flag in one 8-byte line) doubles the bytes on the link but "
        f"needs no flag step behind them: {fmt_s(best.t_s)} against {fmt_s(simple.t_s)} with a flag"
    )


def _schedule_sentence(best: Prediction) -> str:
    match best.schedule:
        case Schedule.SERIAL:
            return "nothing to overlap" if not best.compute_s else "overlap does not pay here"
        case Schedule.CE_OVERLAP:
            return f"the copy engine moves data ({fmt_s(best.comm_s)}) while all SMs compute ({fmt_s(best.compute_s)})"
        case _:
            return (
                f"{best.comm_sms} comm SMs: compute {fmt_s(best.compute_s)} vs communication "
                f"{fmt_s(best.comm_s)}, fill {fmt_s(best.fill_s)}"
            )


def advise(b: Bound) -> Advice:
    if not b.predictions:
        raise ValueError(f"no mechanism on {b.system.name} can run {b.workload.name}")
    best = b.predictions[0]
    baseline = b.prediction(Mechanism.NCCL, Schedule.SERIAL)
    headroom = baseline.t_s / best.t_s if baseline and best.t_s > 0 else None
    facts: dict[str, float] = {"t_best_s": best.t_s, "t_roof_s": b.t_roof_s}
    if baseline:
        facts["t_baseline_s"] = baseline.t_s
    sentences = [_limiter_sentence(b, facts)]
    hiding = _hiding_sentence(b, facts)
    if hiding:
        sentences.append(hiding)
    sentences.append(_mechanism_sentence(b, best, facts))
    sentences.append(_protocol_sentence(b, best, facts))
    sentences.append(_schedule_sentence(best))
    reason = f"{best.label} + {best.schedule.value}: " + "; ".join(s for s in sentences if s) + "."
    return Advice(best, baseline, headroom, reason, facts)
