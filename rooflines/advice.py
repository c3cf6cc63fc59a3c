"""Advice: the best (mechanism, schedule), its headroom over what NCCL does by default on the machine (its own
algorithm and protocol: NVLS where the switches multicast), and the numbers that decided it. A pair predicted
to beat NCCL's default by less than the model's own error is no win: the advice is then NCCL's default."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from .collectives import Collective
from .mechanisms import Mechanism, Protocol, Schedule
from .predictions import Prediction
from .units import fmt_Bps, fmt_bytes, fmt_s

if TYPE_CHECKING:
    from .bound import Bound  # advise() reads a Bound; bound() advises the Bound it makes

# A pair must be predicted this much faster than NCCL's default to be advised over it: on the 113 held-out published
# runs the NCCL baseline's median error is 4.4%, 91% are within 25%, and on H100 and B200 the medians are 11-12%
# (benchmarks/model/2026-12-02-published-check.md): a smaller predicted gain is within what the model cannot tell apart
WIN = 1.10


@dataclass(frozen=True)
class Advice:
    best: Prediction  # the pair to build: NCCL's default itself where nothing beats it by WIN
    baseline: Prediction | None  # NCCL, serial, as it runs by default: what PyTorch + torch.distributed does
    headroom: float | None  # baseline time / best time (None without a baseline: nothing to be ahead of)
    reason: str
    facts: dict[str, float]  # every number the reason quotes, unformatted
    fastest: Prediction | None = None  # the fastest prediction where it was not advised (within WIN of NCCL's)

    # `pkroof advise --json`'s object (rooflines/serialize.py): the pair to build, its time, NCCL's, why
    json_fields: ClassVar[tuple[str, ...]] = (
        "mechanism",
        "schedule",
        "protocol",
        "comm_sms",
        "t_s",
        "baseline_t_s",
        "baseline_assumes",
        "headroom",
        "fastest_t_s",
        "reason",
        "facts",
    )

    @property
    def baseline_pair(self) -> str:
        """What the baseline assumes NCCL runs, per comm op ("nvls/simple")."""
        if self.baseline is None:
            return ""
        protocols = self.baseline.protocols or ("",) * len(self.baseline.algorithms)
        pairs = zip(self.baseline.algorithms, protocols, strict=True)
        return ",".join(f"{a}/{p}" if p else a for a, p in pairs)

    @property
    def mechanism(self) -> Mechanism:
        return self.best.mechanism

    @property
    def schedule(self) -> Schedule:
        return self.best.schedule

    @property
    def protocol(self) -> Protocol:
        return self.best.protocol

    @property
    def comm_sms(self) -> int:
        return self.best.comm_sms

    @property
    def t_s(self) -> float:
        """The advised pair's predicted time."""
        return self.best.t_s

    @property
    def baseline_t_s(self) -> float | None:
        return self.baseline.t_s if self.baseline else None

    @property
    def baseline_assumes(self) -> str | None:
        """What NCCL runs by default, per comm op (None without a baseline)."""
        return self.baseline_pair or None

    @property
    def fastest_t_s(self) -> float | None:
        """The fastest pair's time where it was not advised (within WIN of NCCL's default)."""
        return self.fastest.t_s if self.fastest else None


_WHOLE_BUFFER = frozenset({Collective.SEND_RECV, Collective.BROADCAST, Collective.REDUCE})


def _per_peer_message_bytes(b: Bound) -> float:
    """Largest single copy a direct algorithm issues: a 1/g chunk, or the whole buffer for rooted ops; where a
    rank's bytes are its own (uneven splits), its busier direction's bytes over its g − 1 peers."""
    sizes = []
    for op in b.workload.comm:
        g = min(op.group_size, b.system.ranks_per_node)
        if op.explicit and op.kind not in _WHOLE_BUFFER:
            sizes.append(max(op.send_bytes or 0.0, op.recv_bytes or 0.0) / max(1, g - 1))
        else:
            sizes.append(op.size_bytes if op.kind in _WHOLE_BUFFER else op.size_bytes / g)
    return max(sizes, default=0.0)


def _limiter_sentence(b: Bound, facts: dict[str, float]) -> str:
    facts |= {"t_compute_s": b.t_compute_s, "t_hbm_s": b.t_hbm_s, "t_link_s": b.t_link_s, "t_latency_s": b.t_latency_s}
    if b.limiter == "link":
        said = (
            f"link-bound: {fmt_bytes(b.link_bytes_per_rank)} per rank over the {b.link_tier} link at "
            f"{fmt_Bps(b.link_bandwidth_Bps)} take {fmt_s(b.t_link_s)}"
        )
        return said + (f", compute {fmt_s(b.t_compute_s)}" if b.t_compute_s else "")
    if b.limiter == "latency":
        return f"latency-bound: {fmt_s(b.t_latency_s)} of dependent steps, {fmt_s(b.t_link_s)} on the link"
    if b.limiter == "hbm":
        return f"HBM-bound: {fmt_s(b.t_hbm_s)} of HBM traffic, {fmt_s(b.t_link_s)} on the link"
    return f"compute-bound: {fmt_s(b.t_compute_s)} of compute, {fmt_s(b.t_link_s)} on the link"


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


def _mechanism_facts(b: Bound, facts: dict[str, float]) -> None:
    """Every mechanism number the advice may rest on, whichever pair wins: the message size, the copy engine's
    efficient size, the CTAs each SM mechanism needs for 90% of its peak."""
    models = b.system.mechanisms
    facts["message_bytes"] = _per_peer_message_bytes(b)
    ce = models.get(Mechanism.COPY_ENGINE)
    if ce is not None and ce.available:
        facts["copy_engine_efficient_bytes"] = ce.efficient_size_bytes(0.9)
    for m in (Mechanism.TMA, Mechanism.SM_STORE, Mechanism.SM_LOAD):
        if m in models and models[m].available:
            facts[f"{m.value}_ctas_for_90pct"] = models[m].ctas_for(0.9)


def _mechanism_sentence(b: Bound, best: Prediction, facts: dict[str, float]) -> str | None:
    """Why this mechanism, in the numbers that decide it: the copy engine's efficient size against the message
    for the copy engine (and for an SM mechanism that won on small messages), the SMs an SM mechanism needs,
    in-network reduction for multimem."""
    if not b.workload.comm:
        return None
    msg, models = facts["message_bytes"], b.system.mechanisms
    knee = facts.get("copy_engine_efficient_bytes")
    ce_side = None if knee is None else f"{fmt_bytes(msg)} per peer {'≥' if msg >= knee else '<'} {fmt_bytes(knee)}"
    match best.mechanism:
        case Mechanism.COPY_ENGINE:
            return f"copy engine: {ce_side}, its efficient size (90% of its peak at S ≥ 9·α·β); it takes no SMs"
        case Mechanism.SM_STORE | Mechanism.SM_LOAD | Mechanism.TMA:
            m = models[best.mechanism]
            said = (
                f"{best.mechanism.value}: 90% of {fmt_Bps(m.peak_bandwidth_Bps)} with {m.ctas_for(0.9)} of "
                f"{b.system.sm_count} SMs"
            )
            if best.comm_sms and best.comm_sms != m.ctas_for(0.9):  # the count it is predicted at, and why it differs
                why = (
                    "those that reach its peak"
                    if best.schedule is Schedule.SERIAL
                    else "the fastest split with compute"
                )
                said += f"; predicted on {best.comm_sms}, {why}"
            if knee is not None and msg < knee:
                said += f"; {ce_side}, the copy engine's efficient size"
            return said
        case Mechanism.MULTIMEM:
            return "multimem: the switch reduces in-network, so each rank moves S, not 2(n−1)/n·S"
        case _:
            return "NCCL: no other mechanism of this node is predicted faster at this size"


def _protocol_sentence(b: Bound, best: Prediction, facts: dict[str, float]) -> str | None:
    """Why LL, when it wins: the flag step and hand-off it skips against the bytes it doubles."""
    simple = b.prediction(best.mechanism, best.schedule)
    if best.protocol is not Protocol.LL or simple is None:
        return None
    facts["t_simple_protocol_s"] = simple.t_s
    return f"the LL protocol: twice the bytes, no flag step: {fmt_s(best.t_s)} against {fmt_s(simple.t_s)} with one"


def _schedule_sentence(best: Prediction) -> str | None:
    match best.schedule:
        case Schedule.SERIAL:
            return None if not best.compute_s else "serial: overlapping compute and communication does not pay here"
        case Schedule.CE_OVERLAP:
            comm, compute = fmt_s(best.comm_s), fmt_s(best.compute_s)
            return f"ce-overlap: the copy engine moves {comm} while all SMs compute {compute}"
        case _:
            return (
                f"{best.schedule.value}, {best.comm_sms} comm SMs: compute {fmt_s(best.compute_s)}, communication "
                f"{fmt_s(best.comm_s)}, fill {fmt_s(best.fill_s)}"
            )


def _no_win_sentence(fastest: Prediction, baseline: Prediction, pair: str, facts: dict[str, float]) -> str:
    facts["t_fastest_s"] = fastest.t_s
    return (
        f"NCCL's default ({pair}) is predicted within {WIN - 1:.0%} of the fastest pair ({fastest.label} + "
        f"{fastest.schedule.value}, {fmt_s(fastest.t_s)} against {fmt_s(baseline.t_s)}): no gain the model can claim"
    )


def _runner_up_sentence(b: Bound, best: Prediction, facts: dict[str, float]) -> str | None:
    """The next best pair of another mechanism or schedule: the margin the choice rests on."""
    other = next((p for p in b.predictions if (p.mechanism, p.schedule) != (best.mechanism, best.schedule)), None)
    if other is None:
        return None
    facts["t_next_s"] = other.t_s
    return f"next: {other.label} + {other.schedule.value} {fmt_s(other.t_s)} ({other.t_s / best.t_s - 1:+.0%})"


def advise(b: Bound) -> Advice:
    if not b.predictions:
        raise ValueError(f"no mechanism on {b.system.name} can run {b.workload.name}")
    best = b.predictions[0]
    baseline = b.prediction(Mechanism.NCCL, Schedule.SERIAL)
    fastest = None
    if baseline is not None and best is not baseline and baseline.t_s < WIN * best.t_s:
        fastest, best = best, baseline
    headroom = baseline.t_s / best.t_s if baseline and best.t_s > 0 else None
    facts: dict[str, float] = {"t_best_s": best.t_s, "t_roof_s": b.t_roof_s}
    if baseline:
        facts["t_baseline_s"] = baseline.t_s
    _mechanism_facts(b, facts)
    pair = Advice(best, baseline, headroom, "", {}).baseline_pair if fastest is not None else ""
    lines = [
        f"{best.label} + {best.schedule.value}: {_limiter_sentence(b, facts)}",
        _no_win_sentence(fastest, baseline, pair, facts) if fastest is not None else None,
        _hiding_sentence(b, facts),
        _mechanism_sentence(b, best, facts),
        _protocol_sentence(b, best, facts),
        _schedule_sentence(best),
        _runner_up_sentence(b, best, facts),
    ]
    reason = "\n".join(line for line in lines if line)  # a few short lines, each quoting what decided this pair
    return Advice(best, baseline, headroom, reason, facts, fastest)
