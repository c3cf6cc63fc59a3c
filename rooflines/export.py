"""A Bound and its Advice as one plain JSON-ready dict (the documented output of `pkroof bound --json`)."""

from __future__ import annotations

import math
from typing import Any

from .advice import Advice
from .bound import Bound, LinkTerm, Prediction
from .collectives import algorithm_bandwidth_Bps, bus_bandwidth_Bps
from .workload import CommOp, Workload

SCHEMA = "pkroof.bound/1"


def finite(value: Any) -> Any:
    """`value` with every float that is not finite replaced by None, through dicts, lists and tuples: strict JSON
    (RFC 8259) has no NaN or Infinity."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(v) for v in value]
    return value


def bandwidths(w: Workload, t_s: float | None) -> dict[str, float | None]:
    """nccl-tests' algbw (size / time) and busbw (algbw × its PERFORMANCE.md factor) of a workload that is one
    collective and nothing else, at time `t_s`; both None for anything else (a fused GEMM, several collectives)."""
    op = w.sole_collective
    if op is None or t_s is None or not t_s > 0:
        return {"algbw_Bps": None, "busbw_Bps": None}
    return {
        "algbw_Bps": algorithm_bandwidth_Bps(op.size_bytes, t_s),
        "busbw_Bps": bus_bandwidth_Bps(op.kind, op.size_bytes, t_s, op.group_size),
    }


def _prediction(p: Prediction, w: Workload) -> dict[str, Any]:
    return {
        "mechanism": p.mechanism.value,
        "schedule": p.schedule.value,
        "comm_sms": p.comm_sms,
        "t_s": p.t_s,
        "compute_s": p.compute_s,
        "comm_s": p.comm_s,
        "latency_s": p.latency_s,
        "fill_s": p.fill_s,
        "algorithms": list(p.algorithms),
        "protocol": p.protocol.value,
        "protocols": list(p.protocols),  # per comm op: NCCL's protocol, or a probe fit's regime
        "t_eager_s": p.t_eager_s,  # NCCL: the same calls eager, each waited on (t_s: captured in a graph)
        "t_symmetric_s": p.t_symmetric_s,  # NCCL: with buffers registered for its symmetric kernels
        **bandwidths(w, p.t_s),
    }


def _link_term(term: LinkTerm) -> dict[str, float]:
    return {"t_s": term.t_s, "bytes_per_rank": term.bytes_per_rank, "bandwidth_Bps": term.bandwidth_Bps}


def _comm(op: CommOp) -> dict[str, Any]:
    out = {
        "name": op.name,
        "kind": op.kind.value,
        "size_bytes": op.size_bytes,
        "group_size": op.group_size,
        "reduction": op.reduction,
        "producer": op.producer,
        "consumer": op.consumer,
    }
    # this rank's own bytes to and from its peers where they are its own (uneven splits, point-to-point batches);
    # null where the collective's even split holds
    if op.explicit:
        out |= {"send_bytes": op.send_bytes or 0.0, "recv_bytes": op.recv_bytes or 0.0}
    else:
        out |= {"send_bytes": None, "recv_bytes": None}
    out["after"] = list(op.after) if op.after is not None else None  # the ops it waits for; null: the data flow's
    return out


def recommendation_to_dict(advice: Advice | None) -> dict[str, Any] | None:
    """`advise --json`'s object; None where there is nothing to communicate (a workload of compute alone on a
    topology without peers has no pair to recommend)."""
    if advice is None:
        return None
    return {
        "mechanism": advice.best.mechanism.value,
        "schedule": advice.best.schedule.value,
        "protocol": advice.best.protocol.value,
        "comm_sms": advice.best.comm_sms,
        "t_s": advice.best.t_s,
        "baseline_t_s": advice.baseline.t_s if advice.baseline else None,
        "baseline_assumes": advice.baseline_pair or None,  # what NCCL runs by default, per comm op
        "headroom": advice.headroom,
        "fastest_t_s": advice.fastest.t_s if advice.fastest else None,  # not advised: within WIN of NCCL's
        "reason": advice.reason,
        "facts": advice.facts,
    }


def bound_to_dict(b: Bound, advice: Advice | None) -> dict[str, Any]:
    w = b.workload
    return {
        "schema": SCHEMA,
        "problem": w.name,
        "topology": b.system.name,
        "world_size": b.system.world_size,
        "nodes": b.system.num_nodes,
        "dtype": w.dtype,
        "params": dict(w.params),
        "t_roof_s": b.t_roof_s,
        **bandwidths(w, b.t_roof_s),
        "limiter": b.limiter,
        "terms": {
            "compute_s": b.t_compute_s,
            "hbm_s": b.t_hbm_s,
            "link_s": b.t_link_s,
            "latency_s": b.t_latency_s,
        },
        "flops": b.flops,
        "peak_flops": b.peak_flops,
        "hbm_bytes": b.hbm_bytes,
        "hbm_bandwidth_Bps": b.system.hbm_bandwidth_Bps,
        "link_bytes_per_rank": b.link_bytes_per_rank,
        "link_bandwidth_Bps": b.link_bandwidth_Bps,
        "link_tier": b.link_tier,
        # each tier's term at its own busiest rank: "scale-up", and "scale-out" on more than one node
        "link_terms": {tier: _link_term(term) for tier, term in b.link_terms.items()},
        "comm": [_comm(op) for op in b.comm],
        "busiest_rank": dict(b.busiest),  # the rank that set each term where ranks differ ({}: every rank alike)
        "uncounted": list(w.uncounted),  # ops that compute but that no FLOP formula prices
        "predictions": [_prediction(p, w) for p in b.predictions],
        "recommendation": recommendation_to_dict(advice),
    }
