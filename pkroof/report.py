"""`pkroof report`: result records and a topology → the typed results the pages show (records/report_inputs.py:
Report) → the folder (reports/build.py). Nothing here measures, and nothing a results file names is run."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from pkroof.records.evaluate import evaluate
from pkroof.records.format import read_files
from pkroof.records.report_inputs import left_out_line, recorded, report_of, report_topology
from pkroof.reports import build, frames
from pkroof.topology import resolve


def report(
    results: list[Path],
    *,
    topology: str | None = None,
    out: Path,
    fmt: str = "html",
    log: Callable[[str], None] = print,
    force: bool = False,
    progress: Callable[[str], None] = lambda step: None,
) -> list[Path]:
    """Render every problem found in the result files against `topology` (default: the one they were measured
    on); unreadable lines are reported, skipped, but result files without a single record are a ValueError.

    With no result files and no topology: the suite's results recorded on the 2xH200 node. With a topology and no
    result files: an analytic report, every suite problem's roofline and advice on it, which has nothing to export.
    """
    if fmt == "html":
        build.check_out(out)
    else:  # an export never replaces a file in the user's folder unasked
        build.check_export(out, fmt, force=force)
    found = read_files(results or recorded(topology), log)
    if results and not found:
        where = "in it" if len(results) == 1 else "in them"
        raise ValueError(f"{', '.join(map(str, results))}: not one result record {where}; nothing written")
    topo = report_topology(found, topology)
    if fmt != "html":
        if not found:
            raise ValueError(
                f"nothing measured to export on {topo.name}: name results files (without them the {topo.name} "
                "report is analytic, html only)"
            )
        frame = frames.records_frame(evaluate(found, topo, log=log).records)
        return [build.write_export(frame, out, fmt, force=force)]
    return build.write_report(out, report_of(found, topo, log, progress), log=log, progress=progress)


def main_job(
    out: Path, *, log: Callable[[str], None] = print, progress: Callable[[str], None] = lambda step: None
) -> list[Path]:
    """`pkroof report` with no arguments: the h200x2 node with the suite's recorded results (analytic where none
    ship), and an analytic report for every other preset, linked from the index."""
    from pkroof.topology import PRESETS

    build.check_out(out)
    shipped = recorded()
    if shipped:
        log("h200x2: the suite's results recorded on the 2xH200 node (" + ", ".join(p.name for p in shipped) + ")")
    else:
        log("h200x2: no recorded suite results ship with this version; its pages are analytic")
    main = report_of(read_files(shipped, log), resolve("h200x2"), log, progress)
    others = {}
    for name in PRESETS:
        if name != "h200x2":
            log(f"{name}: analytic pages")
            others[name] = report_of([], resolve(name), lambda m: None, progress)  # a line per preset, not per problem
            if others[name].left_out:
                log(left_out_line(others[name]))
    return build.write_report(out, main, others=others, log=log, progress=progress)
