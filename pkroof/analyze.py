"""One call from a problem name, a topology and a shape to its Bound and Advice (what bound/advise print)."""

from __future__ import annotations

from pkroof.rooflines import Advice, Bound, advise, bound
from pkroof.rooflines.bound import check_fits
from pkroof.rooflines.units import parse_size
from pkroof.rooflines.workloads import BUILTINS, build
from pkroof.topology import resolve

DEFAULT_TOPOLOGY = "hgx-h100-8"


def is_byte_size(name: str) -> bool:
    """Whether a parameter is a number of bytes (`size`, `size_bytes`, any `*_bytes`), which takes parse_size's
    units; every other parameter counts things (m, n, k, tokens, hidden, experts) and takes plain digits."""
    return name == "size" or name.endswith("_bytes")


def parse_params(pairs: list[str]) -> dict[str, int]:
    """['m=8192', 'size_bytes=64MiB'] → {'m': 8192, 'size_bytes': 67108864}: every value a positive integer, byte
    sizes (is_byte_size) with parse_size's units, counts and dimensions in plain digits (no units: `k=4K` would
    read as bytes)."""
    out: dict[str, int] = {}
    for pair in pairs:
        name, sep, value = (part.strip() for part in pair.partition("="))
        if not sep or not name:
            raise ValueError(f"--param takes name=value, got {pair!r}")
        if is_byte_size(name):
            try:
                out[name] = parse_size(value)
            except ValueError as e:
                raise ValueError(f"--param {name}: {e}") from None
        elif value.isascii() and value.isdigit() and int(value) > 0:
            out[name] = int(value)
        else:
            raise ValueError(
                f"--param {name}={value}: must be a positive integer in plain digits ({name} is a count, not a byte "
                "size, so it takes no units such as KiB)"
            )
    return out


# --param in a suite problem's spelling without --shape starts, for a built-in name, from the suite shape that the
# built-in's defaults are (README: "defaults: Llama-3-70B MLP at TP=8 on 8192 tokens"), else from "small"
BUILTIN_SHAPE = "llama3-70b-tp8"


def _problem_workload(problem: str, world_size: int, shape: dict[str, int], named: str | None, dtype: str | None):
    """A suite problem or a problem file: its hand-written workload, else the one traced from its reference."""
    try:
        import torch  # noqa: F401
    except ImportError:
        raise ValueError(f"{problem}: problem files are traced with torch; pip install torch") from None
    from pkroof.profilers.problems import load
    from pkroof.profilers.profile import check_size, workload_of

    p = load(problem)
    size = shape.pop("size", None)
    if size is not None:
        shape["size_bytes"] = size
    check_size(p, shape)
    spec = BUILTINS.get(problem)
    if spec is not None and named is None:
        named = BUILTIN_SHAPE if BUILTIN_SHAPE in p.shapes else None
        takes = p.params(named)
        unknown = sorted(set(shape) - set(takes))
        both = f"{', '.join(spec.defaults)} (the built-in workload's) or {', '.join(takes)} (the suite problem's)"
        if set(unknown) <= set(spec.defaults) | {"size"} and unknown:
            raise ValueError(f"{problem}: give {both}, not a mix of the two")
        if unknown:
            raise ValueError(f"{problem} has no parameter {', '.join(unknown)} (it takes {both})")
    return workload_of(p, world_size, p.params(named, shape), dtype=dtype)


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
    dtype: str | None = None,
    named_shape: str | None = None,
) -> tuple[Bound, Advice]:
    """`dtype` None: bf16 for the built-in workloads, a problem's own (its inputs') for suite problems and files."""
    topo = resolve(topology, nodes=nodes)
    shape = parse_params(params or [])
    if size is not None:
        spec = BUILTINS.get(problem)
        if spec is not None and "size" not in spec.defaults:
            raise ValueError(
                f"{problem} has no size (--size applies to collectives): set its shape with --param name=value "
                f"({', '.join(spec.defaults)}), or --shape NAME (`pkroof problems` lists them)"
            )
        shape["size"] = parse_size(size)
    system = topo.system(world_size)
    if _analytic(problem, shape, named_shape):  # no torch needed
        workload = build(problem, system.world_size, dtype or "bf16", **shape)
    else:
        workload = _problem_workload(problem, system.world_size, shape, named_shape, dtype)
    check_fits(workload, topo.gpu.hbm_capacity_bytes, topo.gpu.name)
    b = bound(workload, system)
    return b, advise(b)
