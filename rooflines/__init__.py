"""Pure math of the communication-aware roofline: no torch, no NVML, no files, no devices."""

from .advice import Advice, advise
from .bound import Bound, LinkTerm, Terms, bound
from .collectives import (
    Algorithm,
    Collective,
    Traffic,
    bus_bandwidth_factor,
    chan_lower_bound,
    hierarchical_traffic,
    traffic,
)
from .mechanisms import Mechanism, Protocol, Schedule, TransferModel
from .predictions import Prediction, predict
from .system import System
from .workload import DTYPE_BYTES, CommOp, ComputeOp, Workload

__all__ = [
    "DTYPE_BYTES",
    "Advice",
    "Algorithm",
    "Bound",
    "Collective",
    "CommOp",
    "ComputeOp",
    "LinkTerm",
    "Mechanism",
    "Prediction",
    "Protocol",
    "Schedule",
    "System",
    "Terms",
    "Traffic",
    "TransferModel",
    "Workload",
    "advise",
    "bound",
    "bus_bandwidth_factor",
    "chan_lower_bound",
    "hierarchical_traffic",
    "predict",
    "traffic",
]
