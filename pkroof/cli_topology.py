"""`pkroof topology ...`: show, refit, calibrate or import a topology."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from pkroof import show as _show

from .cli_common import Nodes, _echo, _fail

topology_app = typer.Typer(
    no_args_is_help=True, rich_markup_mode=None, help="Inspect, refit, calibrate or import a topology."
)


@topology_app.command("show")
def topology_show(
    name: Annotated[str, typer.Argument(metavar="NAME|FILE", help="preset name or topology JSON file")],
    nodes: Nodes = None,
    as_json: Annotated[bool, typer.Option("--json", help="the topology file's JSON instead of text")] = False,
) -> None:
    """Print one topology: its GPUs, links, mechanisms, NICs and the source of every number."""
    from pkroof.topology import dumps, resolve

    try:
        topo = resolve(name, nodes=nodes)
    except ValueError as e:
        _fail(str(e))
    _echo(dumps(topo) if as_json else _show.topology_text(topo), nl=not as_json)


@topology_app.command("refit")
def topology_refit(
    path: Annotated[Path, typer.Argument(metavar="FILE", help="a topology file written by pkroof probe")],
    out: Annotated[
        Path | None, typer.Option("--out", metavar="FILE", help="where to write (default: in place)")
    ] = None,
) -> None:
    """Re-derive a probed topology's fits and mechanisms from its recorded curves."""
    from pkroof.topology import dump, load
    from pkroof.topology.from_probe import refit

    try:
        topology = refit(load(path))
    except ValueError as e:
        _fail(str(e))
    dump(topology, out or path)
    _echo(f"wrote {out or path}")


@topology_app.command("calibrate")
def topology_calibrate(
    path: Annotated[
        Path, typer.Argument(metavar="FILE", help="a topology JSON file (written by pkroof probe, or a preset's)")
    ],
    results: Annotated[
        list[Path], typer.Argument(metavar="RESULTS.jsonl...", help="results.jsonl files of pkroof profile there")
    ],
    max_size: Annotated[
        str, typer.Option("--max-size", metavar="SIZE", help="use records moving at most this much (nccl-tests size)")
    ] = "256KiB",
    out: Annotated[
        Path | None, typer.Option("--out", metavar="FILE", help="where to write (default: in place)")
    ] = None,
    force: Annotated[
        bool, typer.Option("--force", help="use records whose environment names another topology than the file's")
    ] = False,
) -> None:
    """Set each mechanism's hand-off (handoff_s; ll_handoff_s for LL kernels), and fused kernels' fixed cost per
    overlapped schedule (overlap_s), from profiled kernels: their median excess over the model."""
    from pkroof.profilers.calibrate import calibrate
    from pkroof.rooflines.units import fmt_s, parse_size

    try:
        found = calibrate(path, results, parse_size(max_size), max_size, out or path, _echo, force=force)
    except ValueError as e:
        _fail(str(e))
    for h in found:
        what = "hand-off" if h.schedule == "serial" else f"fused {h.schedule} fixed cost"
        _echo(f"{h.label}: {what} {fmt_s(h.seconds)} (median of {len(h.excesses_s)} records)")
    _echo(f"wrote {out or path}")


@topology_app.command("import")
def topology_import(
    base: Annotated[str, typer.Argument(metavar="BASE", help="the preset or topology file to calibrate")],
    files: Annotated[
        list[Path],
        typer.Argument(metavar="FILE...", help="nccl-tests output (*_perf text) or nvbandwidth output (text, or -j)"),
    ],
    out: Annotated[Path, typer.Option("--out", metavar="FILE", help="the calibrated topology file to write")],
    name: Annotated[
        str | None, typer.Option("--name", metavar="NAME", help="its name (default: BASE's, with +imported)")
    ] = None,
) -> None:
    """Calibrate a topology from runs you already have: NCCL's size regimes per collective from nccl-tests' output,
    copy-engine and SM copy rates from nvbandwidth's; every number marked measured, its file as the source."""
    from pkroof.analysis.imported_runs import import_runs
    from pkroof.topology import dump

    if name is not None and not name.strip():
        _fail("--name must not be empty")
    try:
        topology, lines = import_runs(base, files, name=name)
    except ValueError as e:
        _fail(str(e))
    for line in lines:
        _echo(line)
    try:
        dump(topology, out)
    except OSError as e:
        _fail(f"{e.filename or out}: {e.strerror or e}")
    _echo(f"wrote {out}")
