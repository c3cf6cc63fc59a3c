"""The pkroof command line: each command parses, calls one library function, prints."""

from __future__ import annotations

import json
import math
import os
import re
import signal
import sys
import unicodedata
from pathlib import Path
from typing import Annotated

import typer

from pkroof import show as _show

app = typer.Typer(no_args_is_help=True, add_completion=False, help=__doc__)
topology_app = typer.Typer(no_args_is_help=True, help="Inspect a topology (a preset name or a JSON file).")
app.add_typer(topology_app, name="topology")

Topo = Annotated[str, typer.Option("--topology", "-t", help="preset name or topology JSON file")]
Nodes = Annotated[int | None, typer.Option(help="join N such nodes by their NICs")]
World = Annotated[int | None, typer.Option("--world-size", "-n", help="ranks (default: every GPU)")]
Size = Annotated[
    str | None, typer.Option(help="collective size, nccl-tests convention: 4096, 64M (= 64MiB), 1GiB, 1GB (= 1e9)")
]
Params = Annotated[
    list[str] | None,
    typer.Option(
        "--param",
        "-p",
        help="shape parameter name=value, a positive integer (repeat); byte sizes (size, *_bytes) take units",
    ),
]
Dtype = Annotated[str | None, typer.Option(help="fp8, bf16, fp16, tf32 or fp32 (default: bf16, a problem's own)")]
AsJson = Annotated[bool, typer.Option("--json", help="one JSON object instead of text")]
Problem = Annotated[str, typer.Argument(help="a suite problem (pkroof problems) or a problem file (path.py)")]
Shape = Annotated[
    str | None, typer.Option(help="a named shape of the problem (pkroof problems lists them), e.g. llama3-70b-tp8")
]
AnalysisTimeout = Annotated[
    float,
    typer.Option(
        "--timeout", help="seconds a problem file may take to import and build its workload (its own process)"
    ),
]


_ESCAPES = re.compile(r"\x1b(\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(\x07|\x1b\\)?|[PX^_][^\x1b]*(\x1b\\)?|[@-Z\\-_])")


def printable(text: str) -> str:
    """`text` as safe to print on a terminal: escape sequences (colours, cursor moves, titles, OSC 8 links) and
    every other control or bidirectional-override character removed; newlines and tabs kept."""
    text = _ESCAPES.sub("", str(text))
    return "".join(
        c for c in text if c in "\n\t" or not (unicodedata.category(c) in ("Cc", "Cf", "Cs", "Co") or c == "\x7f")
    )


def _echo(message: object = "", *, err: bool = False, nl: bool = True) -> None:
    """typer.echo of `message` made printable: what pkroof prints of a user's file or exception cannot drive the
    terminal."""
    typer.echo(printable(str(message)), err=err, nl=nl)


def _finite(value: object) -> object:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def strict_json(data: object) -> str:
    """`data` as strict JSON (RFC 8259): a number that is not finite (an unbounded rate, no time) is null."""
    return json.dumps(_finite(data), indent=2, allow_nan=False)


def _fail(message: str) -> None:
    _echo(f"pkroof: {message}", err=True)
    raise typer.Exit(2)


DEFAULT_TOPOLOGY = "hgx-h100-8"


def _overrides(size: str | None, params: list[str] | None) -> dict[str, int]:
    """--param pairs and --size as the problem's parameter overrides (size → size_bytes)."""
    from pkroof.kernels.catalogue import parse_params
    from pkroof.rooflines.units import parse_size

    overrides = parse_params(params or [])
    if size is not None:
        if "size_bytes" in overrides:
            raise ValueError("give the size once: --size or --param size_bytes=..., not both")
        overrides["size_bytes"] = parse_size(size)
    return overrides


def _run(
    problem: str,
    topology: str,
    world_size: int | None,
    nodes: int | None,
    size: str | None,
    params: list[str] | None,
    dtype: str | None,
    shape: str | None = None,
    timeout: float = 120.0,
):
    """The one analysis of `problem` (profilers/analysis.py; a user's file in a process stopped after `timeout`
    seconds), or one line and exit 2."""
    from pkroof.profilers.isolated import analyze_anywhere

    try:
        return analyze_anywhere(
            problem,
            timeout_s=timeout,
            topology=topology,
            shape=shape,
            params=_overrides(size, params),
            world_size=world_size,
            nodes=nodes,
            dtype=dtype,
        )
    except ValueError as e:
        _fail(str(e))
    except KeyboardInterrupt as e:  # Ctrl-C, SIGTERM or SIGHUP while a problem file was analysed apart: stopped
        _echo("pkroof: interrupted; the problem file's process was stopped", err=True)
        raise typer.Exit(128 + getattr(e, "signum", signal.SIGINT)) from None


@app.command()
def probe(
    out: Annotated[Path, typer.Option(help="topology file to write")] = Path("topology.json"),
    quick: Annotated[bool, typer.Option(help="fewer sizes and samples (about 15 s)")] = False,
    gpus: Annotated[str | None, typer.Option(help="GPU indices to use, e.g. 0,1 (default: all)")] = None,
    name: Annotated[str | None, typer.Option(help="name of the topology (default: probe-HOST)")] = None,
    allow_multicast: Annotated[bool, typer.Option(help="let NCCL use NVLink multicast (NVLS)")] = False,
) -> None:
    """Discover this node through NVML and measure every transfer mechanism into a topology file."""
    from pkroof.topology.probe import ProbeError, launched_by_torchrun
    from pkroof.topology.probe import probe as run_probe

    if name is not None and not name.strip():
        _fail("--name must not be empty")
    try:
        run_probe(out=out, quick=quick, gpus=gpus, name=name, allow_multicast=allow_multicast)
        if launched_by_torchrun():  # one rank of many: skip NCCL teardown at exit, which can hang
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(0)
    except ProbeError as e:
        _echo(f"pkroof: {e}", err=True)
        raise typer.Exit(1) from None
    except KeyboardInterrupt as e:  # Ctrl-C, or SIGTERM/SIGHUP (TerminatedError): the ranks were stopped
        _echo("pkroof: interrupted; every probe rank was stopped", err=True)
        raise typer.Exit(128 + getattr(e, "signum", signal.SIGINT)) from None


@app.command()
def problems() -> None:
    """List the built-in problem suite: category, shapes and the real code each comes from."""
    from pkroof.kernels.catalogue import suite

    try:
        _echo(_show.problems_table(suite()))
    except ValueError as e:
        _fail(str(e))


@app.command()
def impls() -> None:
    """List the built-in implementations the profiler runs beside the references (GPUs only), and their pairs."""
    from pkroof.kernels.registry import BUILTIN_IMPLS

    _echo(_show.implementations_table(BUILTIN_IMPLS))


@app.command()
def profile(
    problem: Annotated[list[str], typer.Argument(help="suite problems or problem files")],
    impl: Annotated[
        list[str] | None,
        typer.Option(help="implementation: a built-in name (pkroof impls) or path/to/file.py:function (repeat)"),
    ] = None,
    world_size: World = None,
    shape: Shape = None,
    size: Size = None,
    param: Params = None,
    out: Annotated[Path, typer.Option(help="folder for results.jsonl")] = Path("pkroof-results"),
    timeout: Annotated[float, typer.Option(help="seconds before a hanging implementation is killed")] = 60.0,
    resume: Annotated[bool, typer.Option(help="skip what results.jsonl already holds")] = False,
    topology: Topo = "h200x2",
) -> None:
    """Check implementations against the reference on N ranks, time the correct ones, record fraction of roofline."""
    from pkroof.profilers.profile import profile as run_profile

    try:
        overrides = _overrides(size, param)
        run_profile(
            problem,
            impls=impl or [],
            world_size=world_size,
            shape=shape,
            overrides=overrides,
            out_dir=out,
            timeout_s=timeout,
            resume=resume,
            topology=topology,
            log=_echo,
        )
    except ValueError as e:
        _fail(str(e))
    except KeyboardInterrupt as e:  # Ctrl-C, or SIGTERM/SIGHUP (TerminatedError) while ranks ran: they were stopped
        _echo(f"pkroof: stopped, and its ranks with it; what was measured is in {out / 'results.jsonl'}", err=True)
        raise typer.Exit(128 + getattr(e, "signum", signal.SIGINT)) from None


@app.command()
def report(
    results: Annotated[list[Path] | None, typer.Argument(help="results.jsonl files written by pkroof profile")] = None,
    topology: Annotated[
        str | None, typer.Option("--topology", "-t", help="preset or topology file (default: the results' own, or all)")
    ] = None,
    out: Annotated[Path, typer.Option(help="report folder (replaced whole)")] = Path("pkroof-report"),
    fmt: Annotated[str, typer.Option("--format", help="html, csv, json or parquet")] = "html",
    run: Annotated[bool, typer.Option("--run", help="on a GPU node: probe, profile the suite, then report")] = False,
    force: Annotated[
        bool, typer.Option(help="let an export (csv, json, parquet) replace results.FORMAT in --out")
    ] = False,
) -> None:
    """An HTML report: an index, a page per problem with its roofline, and the topology's page."""
    from pkroof.reports.job import main_job
    from pkroof.reports.job import report as run_report
    from pkroof.run import run_all

    if fmt not in ("html", "csv", "json", "parquet"):
        _fail(f"--format takes html, csv, json or parquet, got {fmt!r}")
    try:
        if run:
            written = run_all(out, log=_echo)
        elif not results and topology is None and fmt == "html":
            written = main_job(out, log=_echo)
        else:
            written = run_report(results or [], topology=topology, out=out, fmt=fmt, log=_echo, force=force)
    except ValueError as e:
        _fail(str(e))
    except RuntimeError as e:  # the probe's ProbeError: no GPU, no torch, a rank that failed
        _echo(f"pkroof: {e}", err=True)
        raise typer.Exit(1) from None
    except OSError as e:  # a folder that cannot be written: permissions, a full disk
        _fail(f"{e.filename or out}: {e.strerror or e}")
    _echo(f"wrote {len(written)} file{'' if len(written) == 1 else 's'} to {out}")


@app.command()
def presets() -> None:
    """List the embedded topology presets."""
    _echo(_show.presets_table())


@topology_app.command("show")
def topology_show(
    name: Annotated[str, typer.Argument(help="preset name or topology JSON file")],
    nodes: Nodes = None,
    as_json: AsJson = False,
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
    path: Annotated[Path, typer.Argument(help="a topology file written by pkroof probe")],
    out: Annotated[Path | None, typer.Option(help="where to write (default: in place)")] = None,
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
    path: Annotated[Path, typer.Argument(help="a topology JSON file (written by pkroof probe, or a preset's)")],
    results: Annotated[list[Path], typer.Argument(help="results.jsonl files of pkroof profile on that node")],
    max_size: Annotated[str, typer.Option(help="use records moving at most this much (nccl-tests size)")] = "256KiB",
    out: Annotated[Path | None, typer.Option(help="where to write (default: in place)")] = None,
    force: Annotated[
        bool, typer.Option(help="use records whose environment names another topology than the file's")
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


@app.command("bound")
def bound_cmd(
    problem: Problem,
    topology: Topo = DEFAULT_TOPOLOGY,
    world_size: World = None,
    nodes: Nodes = None,
    size: Size = None,
    param: Params = None,
    dtype: Dtype = None,
    shape: Shape = None,
    as_json: AsJson = False,
    timeout: AnalysisTimeout = 120.0,
) -> None:
    """The communication-aware roofline of a problem, with a prediction per (mechanism, schedule)."""
    a = _run(problem, topology, world_size, nodes, size, param, dtype, shape, timeout).analysis
    if as_json:
        _echo(strict_json(a.to_dict()))
    else:
        _echo(_show.bound_text(a.bound, a.advice))


@app.command()
def advise(
    problem: Problem,
    topology: Topo = DEFAULT_TOPOLOGY,
    world_size: World = None,
    nodes: Nodes = None,
    size: Size = None,
    param: Params = None,
    dtype: Dtype = None,
    shape: Shape = None,
    as_json: AsJson = False,
    timeout: AnalysisTimeout = 120.0,
) -> None:
    """Which mechanism and schedule to build before hand-tuning, and why."""
    pa = _run(problem, topology, world_size, nodes, size, param, dtype, shape, timeout)
    a = pa.analysis
    if as_json:
        _echo(strict_json(a.to_dict()["recommendation"]))
    else:
        _echo(_show.advice_text(a.bound, a.advice))
        name = pa.problem.name if pa.problem else Path(problem).stem.replace("_", "-")  # a file analysed apart
        kernels = _show.builtin_kernels_text(name, a.advice)
        if kernels:
            _echo("\n" + kernels)
