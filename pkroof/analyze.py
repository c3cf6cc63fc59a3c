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


def _problem_workload(problem: str, world_size: int, shape: dict[str, int], named: str | None):
    """A suite problem or a problem file: its hand-written workload, else the one traced from its reference."""
    try:
        import torch  # noqa: F401
    except ImportError:
        raise ValueError(f"{problem}: problem files are traced with torch; pip install torch") from None
    from pkroof.profilers.problems import load
    from pkroof.profilers.profile import workload_of

    p = load(problem)
    size = shape.pop("size", None)
    if size is not None:
        shape["size_bytes"] = size
    return workload_of(p, world_size, p.params(named, shape))


def _analytic(problem: str, shape: dict[str, int], named: str | None) -> bool:
    """Whether the built-in analytic workload answers: a built-in name, no named shape, and either no suite problem
    of that name or none of its parameters given (gemm-all-reduce is both: m, n, k for the built-in; tokens,
    in_features, out_features for the suite's, as `pkroof profile` and the records name them)."""
    spec = BUILTINS.get(problem)
    if spec is None or named is not None:
        return False
    from pkroof.profilers.problems import is_suite_problem  # file names only: no torch

    return set(shape) <= set(spec.defaults) | {"size"} or not is_suite_problem(problem)


def analyze(
    problem: str,
    *,
    topology: str = DEFAULT_TOPOLOGY,
    world_size: int | None = None,
    nodes: int | None = None,
    size: str | None = None,
    params: list[str] | None = None,
    dtype: str = "bf16",
    named_shape: str | None = None,
) -> tuple[Bound, Advice]:
    topo = resolve(topology, nodes=nodes)
    shape = parse_params(params or [])
    if size is not None:
        spec = BUILTINS.get(problem)
        if spec is not None and "size" not in spec.defaults:
            raise ValueError(f"--size applies to collectives; {problem} takes --param {', '.join(spec.defaults)}")
        shape["size"] = parse_size(size)
    system = topo.system(world_size)
    if _analytic(problem, shape, named_shape):  # no torch needed
        workload = build(problem, system.world_size, dtype, **shape)
    else:
        workload = _problem_workload(problem, system.world_size, shape, named_shape)
    b = bound(workload, system)
    return b, advise(b)
