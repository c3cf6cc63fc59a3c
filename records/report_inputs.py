"""`pkroof report`'s inputs: result records and a topology → the typed results its pages show (Report).

Every bound comes from the one analysis (analysis/problem.py) on records read by records/format.py and given
the model's view by records/evaluate.py; nothing here measures, and nothing a results file names is run. A page's
data is the model's own results (Bound, SweepPoint, NodesPoint) in the small frozen dataclasses of
records/report_data.py.
"""

from __future__ import annotations

import importlib.resources
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from pkroof.analysis.catalogue import Problem
from pkroof.analysis.problem import NeedsDataError, ProblemAnalysis, analyze, shipped_workload
from pkroof.records.evaluate import Group, evaluate, group_of
from pkroof.records.format import topology_name
from pkroof.records.report_data import Crossover, Page, Report, Shape
from pkroof.rooflines.analyze import NODE_COUNTS, NodesPoint, SweepPoint, network_bound_from
from pkroof.rooflines.analyze import analyze as analyze_workload
from pkroof.topology import Topology, resolve
from pkroof.topology.default import default_topology

REAL_SHAPE = "llama3-70b-tp8"  # an analytic page's shape where a problem has it, else its first real one


def _with_own(sweep: Iterable[SweepPoint], pa: ProblemAnalysis) -> tuple[SweepPoint, ...]:
    """The sweep with this shape's own bound among its points: a chart's roof then passes through every shape that
    is measured or advised, whatever the sweep sampled (a GEMM measured at a shape of its own, a collective at a
    size between the sweep's)."""
    points = {(p.size_bytes, p.flops): p for p in [*sweep, SweepPoint.of(pa.bound)]}
    return tuple(sorted(points.values(), key=lambda p: (p.size_bytes, p.flops)))


def _counts(nodes: list[int]) -> str:
    """ "1024 nodes", "256 to 1024 nodes" (a run of NODE_COUNTS), "2, 8 and 32 nodes"."""
    if len(nodes) == 1:
        return f"{nodes[0]} node{'s' * (nodes[0] > 1)}"
    i = NODE_COUNTS.index(nodes[0])
    if list(NODE_COUNTS[i : i + len(nodes)]) == nodes:
        return f"{nodes[0]} to {nodes[-1]} nodes"
    return f"{', '.join(map(str, nodes[:-1]))} and {nodes[-1]} nodes"


def _left_out(skipped: list[tuple[int, str]]) -> str:
    """One line: the node counts left out, and why (the first one's reason where they differ)."""
    if not skipped:
        return ""
    nodes, reasons = [n for n, _ in skipped], [why for _, why in skipped]
    if len(set(reasons)) == 1:
        return f"{_counts(nodes)} left out: {reasons[0]}"
    return f"{_counts(nodes)} left out: at {nodes[0]}, {reasons[0]}"


def _fabric(topo: Topology) -> str:
    """What a page calls the node's own fabric: NVLink (through NVSwitch or direct), else PCIe."""
    return "NVLink" if topo.scaleup.kind in ("nvswitch", "nvlink") else "PCIe"


def _nodes_points(
    problem: Problem, pa: ProblemAnalysis, topo: Topology, ranks_per_node: int, dtype: str | None
) -> tuple[list[NodesPoint], list[tuple[int, str]]]:
    """The bound of `pa`'s shape at each of NODE_COUNTS nodes, and each node count left out with why."""
    points: list[NodesPoint] = []
    skipped: list[tuple[int, str]] = []
    for n in NODE_COUNTS:
        world = n * ranks_per_node
        try:
            w = shipped_workload(problem, world, pa.params, dtype)
            points.append(NodesPoint.of(analyze_workload(w, topo.with_nodes(n).system(world, ranks_per_node)).bound))
        except ValueError as e:  # a shape that does not divide, a trace none ships, more GPUs than pkroof bounds
            skipped.append((n, str(e).splitlines()[0]))
    return points, skipped


def _crossover(
    problem: Problem | None, pa: ProblemAnalysis, *, topo: Topology, ranks_per_node: int, dtype: str | None = None
) -> Crossover | None:
    """The bound of `pa`'s shape on 1, 2, 4 … 1024 nodes of `ranks_per_node` ranks joined by the topology's NICs,
    the workload rebuilt at each world size from what ships with pkroof alone (analysis/problem.py:
    shipped_workload; nothing is traced, no problem file runs); a point that cannot be bounded is left out, and the
    line `left_out` says why. None on a topology without a network."""
    if topo.nic is None:
        return None
    if problem is None:
        why = f"{pa.bound.workload.name} is a problem file, rebuilt only by running it"
        points, skipped = [], [(n, why) for n in NODE_COUNTS]
    else:
        points, skipped = _nodes_points(problem, pa, topo, ranks_per_node, dtype)
    left_out = _left_out(skipped)
    return Crossover(pa.shape, ranks_per_node, _fabric(topo), tuple(points), network_bound_from(points), left_out)


def _described(name: str) -> Problem | None:
    """A user's problem file as its source says (docstring, CATEGORY, SOURCE), read without running it; None where
    the file is gone or sets them by code."""
    from pkroof.analysis.catalogue import from_source
    from pkroof.analysis.source import read

    try:
        return from_source(read(Path(name))) if name.endswith(".py") and Path(name).is_file() else None
    except (OSError, ValueError, SyntaxError):
        return None


def _page(name: str, pa: ProblemAnalysis, shapes: tuple[Shape, ...], sweep: tuple[SweepPoint, ...], **kw: Any) -> Page:
    p = pa.problem or _described(name)
    if p is None:
        return Page(name, "user", "a problem file; its workload as traced", shapes=shapes, sweep=sweep, **kw)
    source = "" if p.source == str(p.path) else p.source  # the default SOURCE: the file's own path, named already
    return Page(name, p.category, p.summary, source, shapes=shapes, sweep=sweep, **kw)


def _preferred_shape(problem: Any) -> str:
    real = [name for name in problem.shapes if name != "small"]
    return REAL_SHAPE if REAL_SHAPE in real else (real[0] if real else problem.default_shape)


def _analytic(
    topo: Topology, progress: Callable[[str], None] = lambda step: None
) -> tuple[dict[str, ProblemAnalysis], dict[str, str]]:
    """Every suite problem at a real model's shape on every GPU of `topo`, nothing measured; and each left out,
    with why (a shape that does not divide, a reference that needs data to trace, torch missing for a trace)."""
    from pkroof.analysis.catalogue import suite

    out, left_out = {}, {}
    for problem in suite():
        shape = _preferred_shape(problem)
        progress(f"{topo.name}: bounding {problem.name}")
        try:
            out[problem.name] = analyze(
                problem, topology=topo, shape=shape, sweep=True, cpu_ranks=False, round_size=True
            )
        except NeedsDataError:
            left_out[problem.name] = "its reference needs data to trace"
        except ValueError as e:  # the shape does not divide over this many GPUs; or no torch to trace with
            left_out[problem.name] = f"at {shape}: {e}"
    return out, left_out


def _largest(analyses: dict[Group, ProblemAnalysis]) -> dict[str, tuple[Group, ProblemAnalysis]]:
    """Each problem's analysed shape that communicates most (then has the longest roof): where a problem's page
    draws its link terms against the number of nodes."""
    out: dict[str, tuple[Group, ProblemAnalysis]] = {}

    def weight(pa: ProblemAnalysis) -> tuple[float, float]:
        return pa.bound.workload.comm_bytes, pa.bound.t_roof_s

    for group, pa in analyses.items():
        name = group[0]
        if name not in out or weight(pa) > weight(out[name][1]):
            out[name] = (group, pa)
    return out


def _ranks_per_node(record: dict[str, Any]) -> int:
    """The ranks a record ran on each node: its `ranks_per_node`, else all of them on one."""
    rpn = record.get("ranks_per_node")
    return rpn if isinstance(rpn, int) and not isinstance(rpn, bool) and rpn > 0 else record["world_size"]


def report_of(
    found: list[dict[str, Any]],
    topo: Topology,
    log: Callable[[str], None],
    progress: Callable[[str], None] = lambda step: None,
) -> Report:
    """One topology's report: measured where there are records (each (shape, world size) bounded and advised at its
    own parameters), analytic where there are none. `progress` hears each step that may take a while."""
    if not found:
        analytic, left_out = _analytic(topo, progress)
        for name, why in left_out.items():
            log(f"{name}: left out on {topo.name} ({why})")
        command = f"pkroof report --topology {topo.name} (analytic: bound and advice, not measured)"
        pages = {}
        for name, pa in analytic.items():
            progress(f"{topo.name}: {name} across nodes")
            shape = Shape(pa.shape, pa.params, pa.bound)
            crossover = _crossover(pa.problem, pa, topo=topo, ranks_per_node=topo.gpus_per_node)
            sweep = _with_own(pa.analysis.sweep, pa)
            pages[name] = _page(name, pa, (shape,), sweep, command=command, crossover=crossover)
        return Report(topo, pages=pages, left_out=left_out)
    log(f"{topo.name}: bounding the problems of {len(found)} record{'s' * (len(found) != 1)}")
    progress(f"{topo.name}: bounding the problems of {len(found)} record{'s' * (len(found) != 1)}")
    evaluation = evaluate(found, topo, sweep=True, log=log)
    shapes: dict[str, list[Shape]] = {}
    sweeps: dict[str, tuple[SweepPoint, ...]] = {}
    for (name, label, _, _world, _nodes), pa in evaluation.analyses.items():
        shapes.setdefault(name, []).append(Shape(label, pa.params, pa.bound))
        sweeps[name] = _with_own(sweeps.get(name, pa.analysis.sweep), pa)
    pages = {}
    for name, (group, pa) in _largest(evaluation.analyses).items():
        progress(f"{topo.name}: {name} across nodes")
        first = next(r for r in evaluation.records if group_of(r) == group)
        rpn, dtype = _ranks_per_node(first), first.get("dtype")
        crossover = _crossover(pa.problem, pa, topo=topo, ranks_per_node=rpn, dtype=dtype)
        pages[name] = _page(name, pa, tuple(shapes[name]), sweeps[name], crossover=crossover)
    return Report(topo, tuple(evaluation.records), pages, superseded=evaluation.superseded)


def left_out_line(report: Report) -> str:
    """One log line naming the problems an analytic report left out (the reasons are on its index)."""
    left_out, pages = report.left_out, len(report.pages)
    names = ", ".join(left_out)
    total = len(left_out) + pages
    return f"{report.topology.name}: {len(left_out)} of {total} problems left out (reasons on its index): {names}"


def report_topology(found: list[dict[str, Any]], topology: str | None) -> Topology:
    """The topology to report `found` against: the one named, else the one the records were measured on, else
    every command's default (topology/default.py: $PKROOF_TOPOLOGY, the saved probe, hgx-h100-8). Records
    measured on another topology, or on several, are refused: their bounds, predictions and fractions of roofline
    belong to the node they ran on."""
    measured_on = sorted({name for r in found if (name := topology_name(r))})
    if len(measured_on) > 1:
        several = f"{len(measured_on)} topologies ({', '.join(measured_on)})"
        raise ValueError(f"the records were measured on {several}: report each one's results separately")
    if topology is None and measured_on:
        try:
            return resolve(measured_on[0])
        except ValueError:
            raise ValueError(
                f"the records were measured on {measured_on[0]!r}, which is not a preset: name its topology file "
                "(pkroof probe wrote it) with --topology"
            ) from None
    topo = resolve(topology or default_topology())
    if measured_on and topo.name != measured_on[0]:
        raise ValueError(
            f"the records were measured on {measured_on[0]}, not {topo.name}: report them against their own "
            f"topology (leave out --topology), or run the problems on {topo.name} (pkroof profile)"
        )
    return topo


def recorded_dir() -> Path:
    """The results recorded on the 2×H200 node that ship in the package (pkroof/recorded/)."""
    return Path(str(importlib.resources.files("pkroof") / "recorded"))


def recorded(topology: str | None = None) -> list[Path]:
    """The shipped results files: what `pkroof report` shows when given no results and no topology."""
    folder = recorded_dir()
    if topology is not None or not folder.is_dir():
        return []
    return sorted(folder.glob("*.jsonl"))
