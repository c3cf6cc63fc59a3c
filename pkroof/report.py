"""`pkroof report`: result records + a topology → the bounds, advice and sweeps the pages need → reports/.

This module is the glue the renderer may not be: it computes bounds (pkroof.rooflines) and traces problems
(pkroof.profilers), then hands plain data to reports/build.py, which only draws.
"""

from __future__ import annotations

import shutil
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


def _builtin_analytic(topo: Topology) -> tuple[dict[str, dict[str, Any]], dict[str, str]]:
    """Without torch: the hand-written workloads of rooflines/workloads.py (nine collectives, three TP GEMMs);
    and each one left out, with why."""
    from pkroof.rooflines import advise, bound
    from pkroof.rooflines.export import bound_to_dict
    from pkroof.rooflines.workloads import BUILTINS, build

    world = topo.num_gpus
    system = topo.system(world)
    out, left_out = {}, {}

    def whole(size: int) -> dict[str, int]:  # a size every rank gets whole bf16 chunks of (72 ranks: not 2^k)
        return {"size": size - size % (2 * world)}

    for name, spec in BUILTINS.items():
        collective = "size" in spec.defaults
        shape = spec.defaults | (whole(spec.defaults["size"]) if collective else {})
        try:
            b = bound(build(name, world, "bf16", **shape), system)
        except ValueError as e:  # a GEMM shape that does not divide over this many GPUs
            left_out[name] = str(e)
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
    return out, left_out


def _analytic(topo: Topology, log: Callable[[str], None]) -> tuple[dict[str, dict[str, Any]], dict[str, str]]:
    """Bound and advice for every suite problem at a real shape on every GPU of `topo`, nothing measured; and each
    problem left out, with why.

    The suite is PyTorch code; without torch, the model's own hand-written workloads stand in for it."""
    import importlib.util

    if importlib.util.find_spec("torch") is None:
        log(f"{topo.name}: torch is not installed, so the analytic pages cover the built-in workloads only")
        return _builtin_analytic(topo)
    from pkroof.profilers.analysis import analysis, cheap_workload
    from pkroof.profilers.problems import suite

    world = topo.num_gpus
    system = topo.system(world)
    out, left_out = {}, {}
    for problem in suite():
        shape = _preferred_shape(problem)
        params = problem.params(shape)
        try:  # a collective's size is rounded down to one every rank gets whole chunks of (72 ranks)
            workload = cheap_workload(problem, world, params)
        except ValueError as e:  # the shape does not divide over this many GPUs, in the problem's own words
            left_out[problem.name] = f"at {shape}: {e}"
            continue
        if workload is None:
            left_out[problem.name] = "its reference needs data to trace"
            continue
        if "size_bytes" in params:  # the size the page shows: rounded where it did not split (the workload's)
            params = params | {"size_bytes": workload.params["size"]}
        a = analysis(problem, params, world, system, workload=workload)
        a["bound"]["summary"]["shape"] = shape
        a["params"] = params
        a["meta"]["command"] = f"pkroof report --topology {topo.name} (analytic: bound and advice, not measured)"
        out[problem.name] = a
    return out, left_out


def _entry(a: dict[str, Any], *, shape: str, world: int, params: dict[str, Any] | None) -> dict[str, Any]:
    """One analysed shape of a problem (reports/build.py: bounds[name]["shapes"]), its advice beside its bound."""
    summary, advice = a["bound"]["summary"], a["advice"]
    return {"shape": shape, "world_size": world, "params": params, "summary": summary, "advice": advice}


def _groups(mine: list[dict[str, Any]]) -> dict[tuple[str, Any], list[dict[str, Any]]]:
    """A problem's records by (shape, world size), as the index has its rows; the reference first in each."""
    groups: dict[tuple[str, Any], list[dict[str, Any]]] = {}
    for r in sorted(mine, key=lambda r: r["impl"] != "reference"):
        shape, world = r["shape"], r["world_size"]
        world = world if isinstance(world, int) and not isinstance(world, bool) else None  # a corrupted record's
        groups.setdefault(("" if shape is None else str(shape), world), []).append(r)
    return groups


def _pages_data(found: list[dict[str, Any]], topo: Topology, log: Callable[[str], None]) -> dict[str, Any]:
    """The keyword arguments of reports.build.write_report for one topology: measured where there are records
    (each (shape, world size) bound and advised at its own parameters), analytic (every traceable suite problem,
    nothing measured) where there are none."""
    bounds, categories, meta, left_out = {}, {}, {}, {}
    if not found:
        pages, left_out = _analytic(topo, log)
        for name, why in left_out.items():
            log(f"{name}: left out on {topo.name} ({why})")
        for name, a in pages.items():
            summary = a["bound"]["summary"]
            entry = _entry(a, shape=summary.get("shape", ""), world=summary["world_size"], params=a.get("params"))
            bounds[name] = {"sweep": a["bound"]["sweep"], "shapes": [entry]}
            categories[name], meta[name] = a["category"], a["meta"]
    for name in dict.fromkeys(r["problem"] for r in found):
        shapes, sweep = [], None
        for (shape, world), group in _groups([r for r in found if r["problem"] == name]).items():
            stored = next((r["analysis"] for r in group if isinstance(r.get("analysis"), dict)), None)
            try:  # what the profiler stored with the reference needs no torch; else trace the problem now
                if stored is None and not (world and world > 0):
                    raise ValueError(f"the world size {group[0]['world_size']!r} is not a number of ranks")
                a = stored or _analysis(name, group[0], topo)
            except ValueError as e:  # an unknown problem or a world size the topology lacks: a row without advice
                log(f"{name} at {shape} on {world} ranks: no bound on {topo.name} ({e})")
                continue
            shapes.append(_entry(a, shape=shape, world=world, params=group[0].get("params")))
            sweep = a["bound"]["sweep"] if sweep is None else sweep
            categories[name], meta[name] = a["category"], a["meta"]
        if shapes:
            bounds[name] = {"sweep": sweep, "shapes": shapes}
    return {
        "topology": topo,
        "records": found,
        "bounds": bounds,
        "categories": categories,
        "problems_meta": meta,
        "left_out": left_out,
    }


def _left_out_line(topo: Topology, data: dict[str, Any]) -> str:
    """One log line naming the problems an analytic report left out (the reasons are on its index)."""
    left_out, pages = data["left_out"], len(data["bounds"])
    names = ", ".join(left_out)
    return f"{topo.name}: {len(left_out)} of {len(left_out) + pages} problems left out (reasons on its index): {names}"


def _topology(found: list[dict[str, Any]], topology: str | None) -> Topology:
    """The topology to report `found` against: the one named, else the one the records were measured on (h200x2
    without records). Records measured on another topology, or on several, are refused: their bounds, predictions
    and fractions of roofline belong to the node they ran on."""
    env = [r.get("environment") for r in found]
    measured_on = sorted({str(e["topology"]) for e in env if isinstance(e, dict) and e.get("topology")})
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
    topo = resolve(topology or "h200x2")
    if measured_on and topo.name != measured_on[0]:
        raise ValueError(
            f"the records were measured on {measured_on[0]}, not {topo.name}: report them against their own "
            f"topology (leave out --topology), or run the problems on {topo.name} (pkroof profile)"
        )
    return topo


def report(
    results: list[Path],
    *,
    topology: str | None = None,
    out: Path,
    fmt: str = "html",
    log: Callable[[str], None] = print,
) -> list[Path]:
    """Render every problem found in the result files against `topology` (default: the one they were measured
    on); unreadable lines are reported, skipped, but result files without a single record are a ValueError.

    With no result files and no topology: the suite's results recorded on the 2xH200 node (`main_job`'s first
    page). With a topology and no result files: an analytic report, every suite problem's roofline and advice on
    it, which has nothing to export as csv, json or parquet.
    """
    from pkroof.reports import build, frames

    build.check_out(out, replace=fmt == "html")
    found = read_files(results or _recorded(topology), log)
    if results and not found:
        where = "in it" if len(results) == 1 else "in them"
        raise ValueError(f"{', '.join(map(str, results))}: not one result record {where}; nothing written")
    topo = _topology(found, topology)
    if fmt != "html":
        if not found:
            raise ValueError(
                f"nothing measured to export on {topo.name}: name results files (without them the {topo.name} "
                "report is analytic, html only)"
            )
        return [build.write_export(frames.records_frame(found), out, fmt)]
    return build.write_report(out, **_pages_data(found, topo, log))


RECORDED = Path(__file__).parent / "recorded"  # the suite's results recorded on the 2×H200 node, shipped


def _recorded(topology: str | None = None) -> list[Path]:
    """The shipped results files: what `pkroof report` shows when given no results and no topology."""
    if topology is not None or not RECORDED.is_dir():
        return []
    return sorted(RECORDED.glob("*.jsonl"))


def main_job(out: Path, *, log: Callable[[str], None] = print) -> list[Path]:
    """`pkroof report` with no arguments: the h200x2 node with the suite's recorded results (analytic where none
    ship yet), and an analytic report for every other preset, linked from the index."""
    from pkroof.reports import build
    from pkroof.topology import PRESETS

    build.check_out(out)
    recorded = _recorded()
    if recorded:
        log("h200x2: the suite's results recorded on the 2xH200 node (" + ", ".join(p.name for p in recorded) + ")")
    else:
        log("h200x2: no recorded suite results ship with this version yet; its pages are analytic")
    main = _pages_data(read_files(recorded, log), resolve("h200x2"), log)
    others = {}
    for name in PRESETS:
        if name != "h200x2":
            others[name] = _pages_data([], resolve(name), lambda m: None)  # a line per preset, not per problem
            if others[name]["left_out"]:
                log(_left_out_line(others[name]["topology"], others[name]))
    return build.write_report(out, **main, others=others)


def run_all(out: Path, *, quick: bool = False, log: Callable[[str], None] = print) -> list[Path]:
    """On a GPU node: probe it, profile the whole suite against what the probe measured, report; resumable.

    The probe's topology and the results live beside the report, in OUT-data/, so re-running resumes the suite
    where it stopped instead of starting over, and the report folder itself stays replaceable as a whole.
    """
    from pkroof.profilers.problems import names
    from pkroof.profilers.profile import profile
    from pkroof.reports.build import check_out, first_missing
    from pkroof.topology.probe import probe

    check_out(out)  # before the probe and the suite, not after them
    data = out.parent / f"{out.name}-data"
    check_out(data, replace=False)
    made = first_missing(data)
    data.mkdir(parents=True, exist_ok=True)
    topology = data / "topology.json"
    if not topology.exists():
        log(f"probing this node into {topology}")
        try:
            probe(out=topology, quick=quick, name="this-node", log=log)
        except BaseException:
            if made is not None and not any(f.is_file() for f in made.rglob("*")):  # no empty folder left behind
                shutil.rmtree(made, ignore_errors=True)
            raise
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
