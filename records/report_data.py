"""The typed data of `pkroof report`'s pages, as records/report_inputs.py gathers it: the model's own results
(Bound with its advice, SweepPoint, NodesPoint) in small frozen dataclasses, one per thing a page shows."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pkroof.rooflines import Advice, Bound
from pkroof.rooflines.analyze import NodesPoint, SweepPoint
from pkroof.topology import Topology


@dataclass(frozen=True)
class Shape:
    """One analysed (shape, world size) of a problem: a row of the index and of its page's Bound and Advice tables,
    bounded and advised at its own parameters. Advice is only ever shown beside the shape it was computed for."""

    label: str  # as the records give it ("small size=64 MiB"); an index row is one (problem, label, world size)
    params: Mapping[str, Any]  # the problem's parameters at that shape
    bound: Bound  # with its advice

    @property
    def world_size(self) -> int:
        return self.bound.world_size

    @property
    def advice(self) -> Advice | None:
        return self.bound.advice


@dataclass(frozen=True)
class Crossover:
    """The bound at one shape against the number of nodes: where the link term moves from the node's own fabric to
    the network."""

    shape: str  # its label
    ranks_per_node: int
    fabric: str  # "NVLink" or "PCIe": the node's own links
    points: tuple[NodesPoint, ...]  # ascending nodes
    network_from: int | None  # the fewest nodes whose scale-out term exceeds the scale-up one (None: at none)
    left_out: str  # one line naming the node counts that could not be bounded, and why ("": none)


@dataclass(frozen=True)
class Page:
    """One problem's page: what it is, its analysed shapes, the roof swept over its sizes or shapes, and the bound
    against the number of nodes (None without a network)."""

    name: str
    category: str
    doc: str  # its one-line docstring
    source: str = ""  # the code it comes from
    command: str = ""  # the command that made an analytic page
    shapes: tuple[Shape, ...] = ()
    sweep: tuple[SweepPoint, ...] = ()  # ascending (size, FLOPs); passes through every analysed shape
    crossover: Crossover | None = None


@dataclass(frozen=True)
class Report:
    """One topology's report: the records with their model view (records/evaluate.py), a page per problem that
    could be bounded, and the problems left out of an analytic report with why. A problem with records but no page
    (its group could not be bounded) still gets a page of its measurements."""

    topology: Topology
    records: tuple[dict[str, Any], ...] = ()
    pages: Mapping[str, Page] = field(default_factory=dict)
    left_out: Mapping[str, str] = field(default_factory=dict)
    superseded: int = 0  # records a later run of the same (problem, shape, implementation, ranks) replaced
