"""The pkroof command line: each command parses, calls one library function, prints."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path
from typing import Annotated

import typer

from pkroof import __version__
from pkroof import show as _show

from .cli_common import (
    AnalysisTimeout,
    AsJson,
    Dtype,
    MaxBytes,
    MinBytes,
    Nodes,
    Params,
    Problem,
    Ranks,
    Shape,
    Size,
    StepBytes,
    StepFactor,
    Topo,
    World,
    _echo,
    _fail,
    about_line,
    progress_line,
    strict_json,
)
from .cli_topology import topology_app

# plain help (no rich panels): a flag reads `--json`, not `--json <bool>`
HELP = "How fast could this multi-GPU kernel be on this node, how fast is it, and what should I change first?"
app = typer.Typer(no_args_is_help=True, add_completion=False, help=HELP, rich_markup_mode=None)
app.add_typer(topology_app, name="topology")


def _version(value: bool) -> None:
    if value:
        _echo(f"pkroof {__version__}")
        raise typer.Exit()


@app.callback()
def main(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="print pkroof's version and exit")
    ] = False,
) -> None:
    """How fast could this multi-GPU kernel be on this node, how fast is it, and what should I change first?"""


def _topology(topology: str | None) -> str:
    from pkroof.topology.default import default_topology

    return topology if topology is not None else default_topology()


def _overrides(size: int | None, params: list[str] | None) -> dict[str, int]:
    """--param pairs and one --size as the problem's parameter overrides (size → size_bytes)."""
    from pkroof.analysis.catalogue import parse_params

    overrides = parse_params(params or [])
    if size is not None:
        if "size_bytes" in overrides:
            raise ValueError("give the size once: --size or --param size_bytes=..., not both")
        overrides["size_bytes"] = size
    return overrides


def _sizes(
    size: list[str] | None,
    minbytes: str | None,
    maxbytes: str | None,
    stepfactor: int | None,
    stepbytes: str | None,
) -> tuple[list[int] | None, bool]:
    """(the sizes asked for, None for the problem's own; whether they are a -b/-e sweep). A sweep runs from -b to
    -e as nccl-tests does (-f: times F each step, else plus -i bytes, 1M); a missing end is the other end.
    --size may be repeated (each size once); it and a sweep do not mix."""
    from pkroof.rooflines.units import parse_size, size_sweep

    sweep = minbytes is not None or maxbytes is not None
    if not sweep and (stepfactor is not None or stepbytes is not None):
        raise ValueError("-f/--stepfactor and -i/--stepbytes step a sweep: give -b/--minbytes and -e/--maxbytes too")
    if sweep and size:
        raise ValueError("give sizes with --size or as a sweep with -b/-e, not both")
    if sweep:
        low, high = parse_size(minbytes or maxbytes), parse_size(maxbytes or minbytes)
        step = parse_size(stepbytes) if stepbytes is not None else 1 << 20
        return size_sweep(low, high, stepfactor=1 if stepfactor is None else stepfactor, stepbytes=step), True
    if not size:
        return None, False
    sizes = [parse_size(s) for s in size]
    twice = next((text for text, s in zip(size, sizes, strict=True) if sizes.count(s) > 1), None)
    if twice is not None:
        raise ValueError(f"--size {twice} is given twice (each size once; -b/-e/-f sweep sizes)")
    return sizes, False


def _analyses(
    problem: str,
    topology: str | None,
    world_size: int | None,
    nodes: int | None,
    sizes: tuple[list[int] | None, bool],
    params: list[str] | None,
    dtype: str | None,
    shape: str | None,
    timeout: float,
) -> list:
    """The one analysis of `problem` (analysis/problem.py; a user's file in a process stopped after `timeout`
    seconds) at each size asked for (its own where none was), or one line and exit 2. In a -b/-e sweep a size that
    does not split over the ranks is rounded down as nccl-tests does, and one that cannot be bounded (too small to
    split, too large to fit) is skipped with a line on stderr."""
    from pkroof.analysis.user_file import analyze_anywhere
    from pkroof.topology import resolve

    listed, sweep = sizes
    try:
        topo = resolve(_topology(topology), nodes=nodes)
        out = []
        for size in listed or [None]:
            kwargs = dict(
                topology=topo, shape=shape, params=_overrides(size, params), world_size=world_size, nodes=nodes
            )
            try:
                out.append(analyze_anywhere(problem, timeout_s=timeout, **kwargs, dtype=dtype, round_size=sweep))
            except ValueError as e:
                if not sweep:
                    raise
                _echo(f"pkroof: skipped {size} B: {e}", err=True)
        if not out:
            raise ValueError("no size of the sweep could be bounded (each is named above)")
        return out
    except ValueError as e:
        _fail(str(e))
    except KeyboardInterrupt as e:  # Ctrl-C, SIGTERM or SIGHUP while a problem file was analysed apart: stopped
        _echo("pkroof: interrupted; the problem file's process was stopped", err=True)
        raise typer.Exit(128 + getattr(e, "signum", signal.SIGINT)) from None


def _json_out(objects: list) -> None:
    """One object as strict JSON, or a list of them (a sweep: one per size)."""
    _echo(strict_json(objects[0] if len(objects) == 1 else objects))


@app.command()
def probe(
    out: Annotated[Path, typer.Option("--out", metavar="FILE", help="topology file to write")] = Path("topology.json"),
    quick: Annotated[bool, typer.Option("--quick", help="fewer sizes and samples (about 15 s)")] = False,
    gpus: Annotated[
        str | None, typer.Option("--gpus", metavar="LIST", help="GPU indices to use, e.g. 0,1 (default: all)")
    ] = None,
    name: Annotated[
        str | None, typer.Option("--name", metavar="NAME", help="name of the topology (default: probe-HOST)")
    ] = None,
    save: Annotated[
        bool,
        typer.Option("--save", help="also save it as this node's default topology (~/.config/pkroof/topology.json)"),
    ] = False,
    allow_multicast: Annotated[
        bool, typer.Option("--allow-multicast", help="let NCCL use NVLink multicast (NVLS)")
    ] = False,
) -> None:
    """Discover this node through NVML and measure it into a topology file: every transfer mechanism between its
    GPUs, or on one GPU its memory, matmul rates and host link."""
    from pkroof.topology.probe import CannotProbeHereError, ProbeError, launched_by_torchrun
    from pkroof.topology.probe import probe as run_probe

    if name is not None and not name.strip():
        _fail("--name must not be empty")
    try:
        with progress_line() as progress:  # on a terminal: the step under way, on stderr
            written = run_probe(
                out=out, quick=quick, gpus=gpus, name=name, allow_multicast=allow_multicast, progress=progress
            )
        if save and written is not None:
            from pkroof.topology import dump
            from pkroof.topology.default import saved_path

            saved_path().parent.mkdir(parents=True, exist_ok=True)
            dump(written, saved_path())
            _echo(f"saved as this node's default topology: {saved_path()}", err=True)
        if launched_by_torchrun():  # one rank of many: skip NCCL teardown at exit, which can hang
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(0)
    except CannotProbeHereError as e:  # no GPU, no torch, a bad --gpus: one line, exit 2 like all bad input
        _fail(str(e))
    except ProbeError as e:  # a rank failed or hung: what the probe measured is lost, exit 1
        _echo(f"pkroof: {e}", err=True)
        raise typer.Exit(1) from None
    except OSError as e:  # --out or the saved default cannot be written
        _fail(f"{e.filename or out}: {e.strerror or e}")
    except KeyboardInterrupt as e:  # Ctrl-C, or SIGTERM/SIGHUP (TerminatedError): the ranks were stopped
        _echo("pkroof: interrupted; every probe rank was stopped", err=True)
        raise typer.Exit(128 + getattr(e, "signum", signal.SIGINT)) from None


@app.command()
def problems() -> None:
    """List the built-in problem suite: category, shapes and the real code each comes from."""
    from pkroof.analysis.catalogue import suite

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
    problem: Annotated[list[str], typer.Argument(metavar="PROBLEM...", help="suite problems or problem files")],
    impl: Annotated[
        list[str] | None,
        typer.Option(
            "--impl",
            metavar="NAME|FILE.py:FUNC",
            help="implementation: a built-in name (pkroof impls) or path/to/file.py:function (repeat)",
        ),
    ] = None,
    world_size: Ranks = None,
    shape: Shape = None,
    size: Size = None,
    minbytes: MinBytes = None,
    maxbytes: MaxBytes = None,
    stepfactor: StepFactor = None,
    stepbytes: StepBytes = None,
    param: Params = None,
    dtype: Dtype = None,
    iters: Annotated[
        int | None,
        typer.Option("--iters", metavar="N", help="timed samples per implementation (default 20, as nccl-tests' -n)"),
    ] = None,
    warmup: Annotated[
        int | None,
        typer.Option("--warmup", "-w", metavar="N", help="untimed warm-up samples first (default: the timer's, 3)"),
    ] = None,
    rtol: Annotated[
        float | None,
        typer.Option("--rtol", metavar="R", help="relative tolerance of every floating output (default: by dtype)"),
    ] = None,
    atol: Annotated[
        float | None,
        typer.Option("--atol", metavar="A", help="absolute tolerance of every floating output (default: by dtype)"),
    ] = None,
    out: Annotated[Path, typer.Option("--out", metavar="DIR", help="folder for results.jsonl")] = Path(
        "pkroof-results"
    ),
    timeout: Annotated[
        float, typer.Option("--timeout", metavar="S", help="seconds before a hanging implementation is killed")
    ] = 60.0,
    resume: Annotated[bool, typer.Option("--resume", help="skip what results.jsonl already holds")] = False,
    topology: Topo = None,
    nodes: Annotated[
        int | None,
        typer.Option(
            "--nodes", metavar="N", help="under torchrun/srun: bound on N of the topology's nodes (the job's)"
        ),
    ] = None,
) -> None:
    """Check implementations against the reference on N ranks, time the correct ones, record them; print each with
    its fraction of roofline, and collectives as nccl-tests does (time, algbw, busbw; out of place | in place).
    Under torchrun or srun each process is one rank of the launched job, across nodes; global rank 0 writes."""
    from pkroof.profilers.across_nodes import JobLostError
    from pkroof.profilers.profile import profile as run_profile

    try:
        sizes, sweep = _sizes(size, minbytes, maxbytes, stepfactor, stepbytes)
        with progress_line() as progress:  # on a terminal: the job under way, on stderr
            written = run_profile(
                problem,
                impls=impl or [],
                world_size=world_size,
                shape=shape,
                overrides=_overrides(None, param),
                sizes=sizes,
                round_sizes=sweep,
                dtype=dtype,
                iters=iters,
                warmup=warmup,
                rtol=rtol,
                atol=atol,
                out_dir=out,
                timeout_s=timeout,
                resume=resume,
                topology=_topology(topology),
                log=_echo,
                nodes=nodes,
                progress=progress,
            )
    except ValueError as e:
        _fail(str(e))
    except JobLostError as e:  # a launched job lost a rank, or rank 0 ended it: every rank still there says so
        _echo(f"pkroof: the launched job ends: {e}; rank 0's {out / 'results.jsonl'} keeps what it measured", err=True)
        raise typer.Exit(1) from None
    except KeyboardInterrupt as e:  # Ctrl-C, or SIGTERM/SIGHUP (TerminatedError) while ranks ran: they were stopped
        _echo(f"pkroof: stopped, and its ranks with it; what was measured is in {out / 'results.jsonl'}", err=True)
        raise typer.Exit(128 + getattr(e, "signum", signal.SIGINT)) from None
    failed = [r for r in written if r.get("impl") == "reference" and r.get("status") != "correct"]
    if failed:  # nothing could be checked against it, so nothing measured means anything: not a success
        where = ", ".join(f"{r['problem']} ({r['shape']}, {r['status']})" for r in failed)
        _echo(f"pkroof: the reference failed for {where}: see {out / 'results.jsonl'}", err=True)
        raise typer.Exit(1)


@app.command()
def report(
    results: Annotated[
        list[Path] | None,
        typer.Argument(metavar="[RESULTS.jsonl]...", help="results.jsonl files of pkroof profile, or its --out"),
    ] = None,
    topology: Annotated[
        str | None,
        typer.Option(
            "--topology", "-t", metavar="NAME|FILE", help="preset or topology file (default: the results' own, or all)"
        ),
    ] = None,
    out: Annotated[Path, typer.Option("--out", metavar="DIR", help="report folder (replaced whole)")] = Path(
        "pkroof-report"
    ),
    fmt: Annotated[str, typer.Option("--format", metavar="FORMAT", help="html, csv, json or parquet")] = "html",
    run: Annotated[bool, typer.Option("--run", help="on a GPU node: probe, profile the suite, then report")] = False,
    force: Annotated[
        bool, typer.Option("--force", help="let an export (csv, json, parquet) replace results.FORMAT in --out")
    ] = False,
) -> None:
    """An HTML report: an index, a page per problem with its roofline, and the topology's page."""
    from pkroof.full_run import run_all
    from pkroof.report import main_job
    from pkroof.report import report as run_report

    if fmt not in ("html", "csv", "json", "parquet"):
        _fail(f"--format takes html, csv, json or parquet, got {fmt!r}")
    try:
        with progress_line() as progress:  # on a terminal: the step under way, on stderr
            if run:
                written = run_all(out, log=_echo)
            elif not results and topology is None and fmt == "html":
                written = main_job(out, log=_echo, progress=progress)
            else:
                written = run_report(
                    results or [], topology=topology, out=out, fmt=fmt, log=_echo, force=force, progress=progress
                )
    except ValueError as e:
        _fail(str(e))
    except RuntimeError as e:  # the probe's: no GPU, no torch (exit 2, as bad input), a rank that failed (exit 1)
        from pkroof.topology.probe import CannotProbeHereError

        if isinstance(e, CannotProbeHereError):
            _fail(str(e))
        _echo(f"pkroof: {e}", err=True)
        raise typer.Exit(1) from None
    except OSError as e:  # a folder that cannot be written: permissions, a full disk
        _fail(f"{e.filename or out}: {e.strerror or e}")
    _echo(f"wrote {len(written)} file{'' if len(written) == 1 else 's'} to {out}")


@app.command()
def presets() -> None:
    """List the embedded topology presets."""
    _echo(_show.presets_table())


TraceTopo = Annotated[
    str | None,
    typer.Option(
        "--topology", "-t", metavar="NAME|FILE", help="preset or topology file (default: matched from the traces)"
    ),
]


@app.command("trace")
def trace_cmd(
    traces: Annotated[
        list[str], typer.Argument(metavar="TRACES...", help="torch.profiler traces: files, folders, globs")
    ],
    topology: TraceTopo = None,
    as_json: Annotated[bool, typer.Option("--json", help="the whole result as JSON (schema pkroof.trace/1)")] = False,
    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            metavar="DIR",
            help="write DIR/trace.json (--json's), DIR/trace.html and a problem file for each top opportunity",
        ),
    ] = None,
) -> None:
    """Bound every GPU kernel of a job's profiler traces (one file per rank), match its collectives across ranks,
    break each step into compute, communication, exposed communication and idle, and rank what to hand-tune first."""
    from pkroof.runs import analyze_traces
    from pkroof.show_trace import progress_bar, trace_text

    try:
        with progress_bar() as progress:
            result = analyze_traces(traces, topology=topology, progress=progress)
        if out is not None:
            from pkroof.trace_out import write_out

            result = write_out(result, out)
    except ValueError as e:
        _fail(str(e))
    except OSError as e:
        _fail(f"{e.filename or out}: {e.strerror or e}")
    if as_json:  # written as it is made: a job's million kernels never held as Python objects (docs/trace.md)
        from pkroof.trace_out import write_json

        sys.stdout.flush()
        write_json(result, sys.stdout.buffer)
        sys.stdout.buffer.flush()
    else:
        _echo(trace_text(result, wrote=out))


@app.command("bound")
def bound_cmd(
    problem: Problem,
    topology: Topo = None,
    world_size: World = None,
    nodes: Nodes = None,
    size: Size = None,
    minbytes: MinBytes = None,
    maxbytes: MaxBytes = None,
    stepfactor: StepFactor = None,
    stepbytes: StepBytes = None,
    param: Params = None,
    dtype: Dtype = None,
    shape: Shape = None,
    as_json: AsJson = False,
    timeout: AnalysisTimeout = 120.0,
) -> None:
    """The communication-aware roofline of a problem, with a prediction per (mechanism, schedule); a collective's
    algbw and busbw as nccl-tests computes them; on more than one node (--nodes) the link term of each tier, NVLink
    inside a node and the network across, and which binds. Several sizes (-b/-e/-f, or --size repeated): one row
    each."""
    try:
        sizes = _sizes(size, minbytes, maxbytes, stepfactor, stepbytes)
    except ValueError as e:
        _fail(str(e))
    analyses = _analyses(problem, topology, world_size, nodes, sizes, param, dtype, shape, timeout)
    about = analyses[0].about  # a user's file: what it is, from its docstring, CATEGORY and SOURCE (read once)
    if as_json:
        _json_out([pa.analysis.to_dict() | ({"about": about} if about else {}) for pa in analyses])
    elif len(analyses) > 1 or sizes[1]:
        _echo(_show.sweep_text([pa.analysis for pa in analyses]))
    else:
        _echo(_show.bound_text(analyses[0].bound, analyses[0].advice, about=about_line(about)))


@app.command()
def advise(
    problem: Problem,
    topology: Topo = None,
    world_size: World = None,
    nodes: Nodes = None,
    size: Size = None,
    minbytes: MinBytes = None,
    maxbytes: MaxBytes = None,
    stepfactor: StepFactor = None,
    stepbytes: StepBytes = None,
    param: Params = None,
    dtype: Dtype = None,
    shape: Shape = None,
    as_json: AsJson = False,
    timeout: AnalysisTimeout = 120.0,
) -> None:
    """Which mechanism and schedule to build before hand-tuning, and why. Several sizes: one row each."""
    try:
        sizes = _sizes(size, minbytes, maxbytes, stepfactor, stepbytes)
    except ValueError as e:
        _fail(str(e))
    analyses = _analyses(problem, topology, world_size, nodes, sizes, param, dtype, shape, timeout)
    if as_json:
        many = len(analyses) > 1
        _json_out([_show.recommendation(pa.analysis, with_size=many) for pa in analyses])
    elif len(analyses) > 1 or sizes[1]:
        _echo(_show.advice_sweep_text([pa.analysis for pa in analyses]))
    else:
        pa = analyses[0]
        _echo(_show.advice_text(pa.bound, pa.advice))
        name = pa.problem.name if pa.problem else Path(problem).stem.replace("_", "-")  # a file analysed apart
        comm_bytes = sum(op.size_bytes for op in pa.analysis.workload.comm)
        kernels = _show.builtin_kernels_text(name, pa.advice, comm_bytes) if pa.advice else ""
        if kernels:
            _echo("\n" + kernels)
