"""Which algorithms each mechanism runs a collective with, and the traffic NCCL's one algorithm puts on the busiest
rank's link: what the bound charges NCCL, and what nccl-tests' bus bandwidth is measured against."""

from __future__ import annotations

from .collectives import Algorithm, Collective, Traffic, traffic
from .mechanisms import Mechanism

_ALGORITHMS = {
    Mechanism.COPY_ENGINE: (Algorithm.ONE_SHOT, Algorithm.TWO_SHOT),
    Mechanism.SM_LOAD: (Algorithm.ONE_SHOT, Algorithm.TWO_SHOT),
    Mechanism.SM_STORE: (Algorithm.ONE_SHOT, Algorithm.TWO_SHOT),
    Mechanism.TMA: (Algorithm.ONE_SHOT, Algorithm.TWO_SHOT),
    Mechanism.MULTIMEM: (Algorithm.IN_NETWORK,),
    Mechanism.NCCL: (Algorithm.RING,),  # NCCL inside a node without NVLS: rings; point-to-point for the rest
}
_NCCL_P2P = frozenset({Collective.ALL_TO_ALL, Collective.GATHER, Collective.SCATTER, Collective.SEND_RECV})


def algorithms(mechanism: Mechanism, kind: Collective) -> tuple[Algorithm, ...]:
    """The algorithms `mechanism` can run `kind` with (NCCL: the one it runs inside a node)."""
    if mechanism is Mechanism.NCCL and kind in _NCCL_P2P:
        return (Algorithm.ONE_SHOT,)
    return _ALGORITHMS[mechanism]


def nccl_traffic(kind: Collective, size: float, n: int) -> Traffic:
    """What one NCCL call of `kind` and `size` on `n` ranks of one node puts on the busiest rank's link, as the
    model charges NCCL (its one algorithm for that kind). Its bytes over a time are nccl-tests' bus bandwidth."""
    (algorithm,) = algorithms(Mechanism.NCCL, kind)
    t = traffic(kind, algorithm, size, n)
    assert t is not None, kind
    return t
