"""What every pkroof command shares: its options' types and how it prints (safely) and fails (one line, exit 2)."""

from __future__ import annotations

import json
import re
import sys
import time
import unicodedata
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Annotated, TextIO

import typer

from pkroof.rooflines.serialize import finite

Topo = Annotated[
    str | None,
    typer.Option(
        "--topology",
        "-t",
        metavar="NAME|FILE",
        help="preset name or topology JSON file (default: $PKROOF_TOPOLOGY, else the topology `pkroof probe --save` "
        "wrote, else hgx-h100-8)",
    ),
]
Nodes = Annotated[int | None, typer.Option("--nodes", metavar="N", help="join N such nodes by their NICs")]
Ranks = Annotated[
    int | None,
    typer.Option("--world-size", "-n", metavar="N", help="ranks (default: every GPU here, else 2 CPU ranks over gloo)"),
]
World = Annotated[
    int | None, typer.Option("--world-size", "-n", metavar="N", help="ranks (default: every GPU of the topology)")
]
Size = Annotated[
    list[str] | None,
    typer.Option(
        "--size",
        metavar="SIZE",
        help="collective size, nccl-tests convention: 4096, 64M (= 64MiB), 1GiB, 1GB (= 1e9); repeat for several",
    ),
]
MinBytes = Annotated[
    str | None, typer.Option("--minbytes", "-b", metavar="SIZE", help="sweep: smallest size (as nccl-tests' -b)")
]
MaxBytes = Annotated[
    str | None, typer.Option("--maxbytes", "-e", metavar="SIZE", help="sweep: largest size (as nccl-tests' -e)")
]
StepFactor = Annotated[
    int | None,
    typer.Option("--stepfactor", "-f", metavar="F", help="sweep: multiply the size by F each step (nccl-tests' -f)"),
]
StepBytes = Annotated[
    str | None,
    typer.Option("--stepbytes", "-i", metavar="SIZE", help="sweep without -f: add SIZE each step (nccl-tests' -i; 1M)"),
]
Params = Annotated[
    list[str] | None,
    typer.Option(
        "--param",
        "-p",
        metavar="NAME=VALUE",
        help="shape parameter, read as its default's type (repeat); byte sizes (size, *_bytes) take units",
    ),
]
Dtype = Annotated[
    str | None,
    typer.Option("--dtype", "-d", metavar="DTYPE", help="fp8, bf16, fp16, tf32 or fp32 (default: the problem's own)"),
]
AsJson = Annotated[bool, typer.Option("--json", help="JSON instead of text (a list of objects for several sizes)")]
Problem = Annotated[
    str, typer.Argument(metavar="PROBLEM", help="a suite problem (pkroof problems) or a problem file (path.py)")
]
Shape = Annotated[
    str | None,
    typer.Option(
        "--shape", metavar="NAME", help="a named shape of the problem (pkroof problems lists them), e.g. llama3-70b-tp8"
    ),
]
AnalysisTimeout = Annotated[
    float,
    typer.Option(
        "--timeout",
        metavar="S",
        help="seconds a problem file may take to import and build its workload (its own process)",
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


def strict_json(data: object) -> str:
    """`data` as strict JSON (RFC 8259): a number that is not finite (an unbounded rate, no time) is null."""
    return json.dumps(finite(data), indent=2, allow_nan=False)


def _fail(message: str) -> None:
    _echo(f"pkroof: {message}", err=True)
    raise typer.Exit(2)


def about_line(about: dict[str, str] | None) -> str:
    """The description under a user's problem's header: "<docstring> · category <c> · source <s>"."""
    if not about:
        return ""
    parts = [about["summary"]] if about["summary"] else []
    return " · ".join([*parts, f"category {about['category']}", f"source {about['source']}"])


@contextmanager
def progress_line(*, quiet: bool = False, stream: TextIO | None = None) -> Iterator[Callable[[str], None]]:
    """A callback showing the step under way on one line of stderr (a spinner, the step, the seconds it has taken),
    erased when done, where stderr is a terminal and the output is not `quiet` (--json); elsewhere it shows nothing,
    so a log or a pipe gets only the command's own lines."""
    stream = sys.stderr if stream is None else stream
    if quiet or not stream.isatty():
        yield lambda step: None
        return
    from rich.console import Console

    console = Console(file=stream, force_terminal=True)
    with console.status("starting", spinner="dots") as status:
        started = time.monotonic()

        def step(text: str) -> None:
            status.update(f"{text} ({time.monotonic() - started:.0f} s in)")

        yield step
