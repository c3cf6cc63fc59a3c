"""`pkroof report`: result records + a topology → the bounds, advice and sweeps the pages need → reports/.

This module is the glue the renderer may not be: it computes bounds (pkroof.rooflines) and traces problems
(pkroof.profilers), then hands plain data to reports/build.py, which only draws.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from pkroof.profilers.analysis import SWEEP_SIZES
from pkroof.profilers.records import read_files
from pkroof.topology import Topology, resolve


def _analysis(name: str, record: dict[str, Any], topo: Topology) -> dict[str, Any]:
    from pkroof.profilers.analysis import analysis
    from pkroof.profilers.problems import load

    world = record["world_size"]
    return analysis(load(name), record["params"], world, topo.system(world))


def _preferred_shape(problem: Any) -> str:
    """A real model's shape for an analytic page: Llama-3-70B at TP=8 where the problem has it, else its first."""
    real = [name for name in problem.shapes if name != "small"]
    return "llama3-70b-tp8" if "llama3-70b-tp8" in real else (real[0] if real else "small")


def _builtin_analytic(topo: Topology) -> dict[str, dict[str, Any]]:
    """Without torch: the hand-written workloads of rooflines/workloads.py (nine collectives, three TP GEMMs)."""
    from pkroof.rooflines import advise, bound
    from pkroof.rooflines.export import bound_to_dict
    from pkroof.rooflines.workloads import BUILTINS, build

    world = topo.num_gpus
    system = topo.system(world)
    out = {}

    def whole(size: int) -> dict[str, int]:  # a size every rank gets whole bf16 chunks of (72 ranks: not 2^k)
        return {"size": size - size % (2 * world)}

    for name, spec in BUILTINS.items():
        collective = "size" in spec.defaults
        shape = spec.defaults | (whole(spec.defaults["size"]) if collective else {})
        try:
            b = bound(build(name, world, "bf16", **shape), system)
        except ValueError:  # a GEMM shape that does not divide over this many GPUs
            continue
        summary = bound_to_dict(b, advise(b))
        sizes = [whole(s) for s in SWEEP_SIZES if s >= 2 * world] if collective else [{}]
        sweep = []
        for extra in sizes:
            point = bound(build(name, world, "bf16", **(shape | extra)), system)
            sweep.append(
                {
                    "size_bytes": sum(op.size_bytes for op in point.workload.comm),
                    "t_roof_s": point.t_roof_s,
                    "compute_s": point.t_compute_s,
                    "hbm_s": point.t_hbm_s,
                    "link_s": point.t_link_s,
                    "latency_s": point.t_latency_s,
                    "predictions": {p.key: p.t_s for p in point.predictions},
                }
            )
        out[name] = {
            "bound": {"summary": summary, "sweep": sweep},
            "advice": summary["recommendation"],
            "category": "collective" if collective else "tp-gemm",
            "meta": {
                "doc": spec.summary,
                "source": "pkroof: rooflines/workloads.py (hand-written workload)",
                "command": f"pkroof report (analytic on {topo.name}: bound and advice, not measured)",
            },
        }
    return out


def _analytic(topo: Topology, log: Callable[[str], None]) -> dict[str, dict[str, Any]]:
    """Bound and advice for every suite problem at a real shape on every GPU of `topo`, nothing measured.

    The suite is PyTorch code; without torch, the model's own hand-written workloads stand in for it."""
    import importlib.util

    if importlib.util.find_spec("torch") is None:
        log(f"{topo.name}: torch is not installed, so the analytic pages cover the built-in workloads only")
        return _builtin_analytic(topo)
    from pkroof.profilers.analysis import analysis, cheap_workload
    from pkroof.profilers.problems import suite

    world = topo.num_gpus
    system = topo.system(world)
    out = {}
    for problem in suite():
        shape = _preferred_shape(problem)
        params = problem.params(shape)
        try:
            workload = cheap_workload(problem, world, params)
        except ValueError as e:  # the shape does not divide over this many GPUs
            log(f"{problem.name}: no analytic page on {topo.name} ({e})")
            continue
        if workload is None:
            log(f"{problem.name}: no analytic page on {topo.name} (its reference needs data to trace)")
            continue
        a = analysis(problem, params, world, system, workload=workload)
        a["bound"]["summary"]["shape"] = shape
        a["meta"]["command"] = f"pkroof report --topology {topo.name} (analytic: bound and advice, not measured)"
        out[problem.name] = a
    return out


def _pages_data(found: list[dict[str, Any]], topo: Topology, log: Callable[[str], None]) -> dict[str, Any]:
    """The keyword arguments of reports.build.write_report for one topology: measured where there are records,
    analytic (every traceable suite problem, nothing measured) where there are none."""
    bounds, advice, categories, meta = {}, {}, {}, {}
    for name, a in (_analytic(topo, log) if not found else {}).items():
        bounds[name], advice[name], categories[name], meta[name] = a["bound"], a["advice"], a["category"], a["meta"]
    for name in dict.fromkeys(r["problem"] for r in found):
        mine = [r for r in found if r["problem"] == name]
        stored = next((r["analysis"] for r in mine if isinstance(r.get("analysis"), dict)), None)
        try:  # what the profiler stored with the reference needs no torch; else trace the problem now
            a = stored or _analysis(name, mine[0], topo)
        except ValueError as e:  # an unknown problem or a world size the topology lacks: a page without a bound
            log(f"{name}: no bound on {topo.name} ({e})")
            continue
        bounds[name], advice[name], categories[name], meta[name] = a["bound"], a["advice"], a["category"], a["meta"]
    return {
        "topology": topo,
        "records": found,
        "bounds": bounds,
        "advice": advice,
        "categories": categories,
        "problems_meta": meta,
    }


def report(
    results: list[Path], *, topology: str, out: Path, fmt: str = "html", log: Callable[[str], None] = print
) -> list[Path]:
    """Render every problem found in the result files against `topology`; unreadable lines are reported, skipped.

    With no result files: an analytic report, every suite problem's roofline and advice on `topology`.
    """
    from pkroof.reports import build, frames

    topo = resolve(topology)
    found = read_files(results, log)
    if fmt != "html":
        target = out / f"results.{fmt}"
        out.mkdir(parents=True, exist_ok=True)
        return [build.export(frames.records_frame(found), target, fmt)]
    return build.write_report(out, **_pages_data(found, topo, log))


RECORDED = Path(__file__).parent / "recorded"  # the suite's results recorded on the 2×H200 node, shipped


def main_job(out: Path, *, log: Callable[[str], None] = print) -> list[Path]:
    """`pkroof report` with no arguments: the h200x2 node with the suite's recorded results (analytic where none
    ship yet), and an analytic report for every other preset, linked from the index."""
    from pkroof.reports import build
    from pkroof.topology import PRESETS

    recorded = sorted(RECORDED.glob("*.jsonl")) if RECORDED.is_dir() else []
    if recorded:
        log("h200x2: the suite's results recorded on the 2xH200 node (" + ", ".join(p.name for p in recorded) + ")")
    else:
        log("h200x2: no recorded suite results ship with this version yet; its pages are analytic")
    main = _pages_data(read_files(recorded, log), resolve("h200x2"), log)
    quiet: Callable[[str], None] = lambda m: None  # noqa: E731 - the presets' skipped problems are the same list
    others = {name: _pages_data([], resolve(name), quiet) for name in PRESETS if name != "h200x2"}
    return build.write_report(out, **main, others=others)


def run_all(out: Path, *, quick: bool = False, log: Callable[[str], None] = print) -> list[Path]:
    """On a GPU node: probe it, profile the whole suite against what the probe measured, report; resumable.

    The probe's topology and the results live beside the report, in OUT-data/, so re-running resumes the suite
    where it stopped instead of starting over, and the report folder itself stays replaceable as a whole.
    """
    from pkroof.profilers.problems import names
    from pkroof.profilers.profile import profile
    from pkroof.topology.probe import probe

    data = out.parent / f"{out.name}-data"
    data.mkdir(parents=True, exist_ok=True)
    topology = data / "topology.json"
    if not topology.exists():
        log(f"probing this node into {topology}")
        probe(out=topology, quick=quick, name="this-node", log=log)
    log(f"profiling {len(names())} problems into {data / 'results'}")
    profile(
        names(),
        impls=[],
        world_size=None,
        shape=None,
        overrides={},
        out_dir=data / "results",
        timeout_s=120,
        resume=True,
        topology=str(topology),
        log=log,
    )
    return report([data / "results" / "results.jsonl"], topology=str(topology), out=out, log=log)
