"""One call from a problem name, a topology and a shape to its Bound and Advice (what bound/advise print)."""

from __future__ import annotations

from pkroof.rooflines import Advice, Bound, advise, bound
from pkroof.rooflines.units import parse_size
from pkroof.rooflines.workloads import BUILTINS, build
from pkroof.topology import resolve

DEFAULT_TOPOLOGY = "hgx-h100-8"


def parse_params(pairs: list[str]) -> dict[str, int]:
    """['m=8192', 'k=4Ki'] → {'m': 8192, 'k': 4096}; values take the size suffixes of parse_size."""
    out: dict[str, int] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name.strip():
            raise ValueError(f"--param takes name=value, got {pair!r}")
        out[name.strip()] = parse_size(value)
    return out


def analyze(
    problem: str,
    *,
    topology: str = DEFAULT_TOPOLOGY,
    world_size: int | None = None,
    nodes: int | None = None,
    size: str | None = None,
    params: list[str] | None = None,
    dtype: str = "bf16",
) -> tuple[Bound, Advice]:
    topo = resolve(topology, nodes=nodes)
    shape = parse_params(params or [])
    if size is not None:
        spec = BUILTINS.get(problem)
        if spec is not None and "size" not in spec.defaults:
            raise ValueError(f"--size applies to collectives; {problem} takes --param {', '.join(spec.defaults)}")
        shape["size"] = parse_size(size)
    system = topo.system(world_size)
    workload = build(problem, system.world_size, dtype, **shape)
    b = bound(workload, system)
    return b, advise(b)
