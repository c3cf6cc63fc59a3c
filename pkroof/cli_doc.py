"""docs/cli.md, written from the typer app itself: every command and every option, with an example of each.

    python -m pkroof.cli_doc > docs/cli.md

tests/test_cli_doc.py fails when the page and the app differ, when a command or option has no example here, and
when an example does not parse.
"""

from __future__ import annotations

from typing import Any

import typer

from pkroof.cli import app

# one example per command: what a newcomer would type (each parses: tests/test_cli_doc.py)
COMMANDS = {
    "bound": "pkroof bound all-reduce -t h200x2 -b 4K -e 1G -f 4",
    "advise": "pkroof advise gemm-reduce-scatter -t hgx-h100-8 --shape llama3-70b-tp8 -p tokens=16384",
    "profile": "pkroof profile all-reduce -b 64K -e 64M -f 4 --iters 20",
    "report": "pkroof report pkroof-results/results.jsonl --out pkroof-report",
    "probe": "pkroof probe --quick --out node.json --save",
    "problems": "pkroof problems",
    "impls": "pkroof impls",
    "presets": "pkroof presets",
    "topology show": "pkroof topology show hgx-h100-8 --json",
    "topology refit": "pkroof topology refit node.json --out node-refit.json",
    "topology calibrate": "pkroof topology calibrate node.json pkroof-results/results.jsonl --max-size 1MiB",
    "topology import": "pkroof topology import h200x2 all_reduce_perf.txt nvbandwidth.json --out h200x2-mine.json",
    "trace": "pkroof trace traces/ --topology dgx-a100-8 --out trace-report",
}
# one example per option, the command's own where it differs from the rest
OPTIONS = {
    "--topology": "-t h200x2",
    "--world-size": "-n 4",
    "--nodes": "--nodes 4",
    "--size": "--size 256MiB --size 1G",
    "--minbytes": "-b 8",
    "--maxbytes": "-e 128M",
    "--stepfactor": "-f 2",
    "--stepbytes": "-i 16M",
    "--param": "-p tokens=8192",
    "--dtype": "-d fp16",
    "--shape": "--shape llama3-70b-tp8",
    "--json": "--json",
    "--impl": "--impl pkroof-one-shot-push",
    "--iters": "--iters 50",
    "--warmup": "-w 5",
    "--rtol": "--rtol 2e-2",
    "--atol": "--atol 1e-3",
    "--out": "--out DIR",
    "--timeout": "--timeout 120",
    "--resume": "--resume",
    "--format": "--format csv",
    "--run": "--run",
    "--quick": "--quick",
    "--gpus": "--gpus 0,1",
    "--name": "--name my-node",
    "--save": "--save",
    "--allow-multicast": "--allow-multicast",
    "--max-size": "--max-size 1MiB",
    "--force": "--force",
    "--version": "--version",
}
PER_COMMAND = {
    ("report", "--topology"): "-t hgx-b200-8",
    ("report", "--out"): "--out pkroof-report",
    ("profile", "--out"): "--out pkroof-results",
    ("probe", "--out"): "--out node.json",
    ("topology refit", "--out"): "--out node-refit.json",
    ("topology calibrate", "--out"): "--out node-calibrated.json",
    ("topology import", "--out"): "--out h200x2-mine.json",
    ("topology import", "--name"): "--name h200x2-mine",
    ("topology show", "--nodes"): "--nodes 2",
    ("trace", "--topology"): "-t hgx-h100-8@2",
    ("trace", "--out"): "--out trace-report",
}
HEAD = """# The pkroof command line

Written from the CLI itself by `python -m pkroof.cli_doc > docs/cli.md`; `tests/test_cli_doc.py` fails when this
page and the CLI differ. Every command prints `--help`; bad input is one line on stderr and exit status 2.

Conventions, as nccl-tests has them: sizes are bytes in its convention (all-reduce: the buffer; all-gather: the
gathered output; reduce-scatter: the full input; all-to-all: one rank's send buffer), and `K`, `M`, `G` alone are
powers of 1024 (`64M` is 64 MiB), as are `KiB` ... `PiB`, while `KB` ... `PB` are powers of 1000. `-b/-e/-f` sweep
sizes as nccl-tests does (from `-b`, times `-f` each step while at most `-e`; without `-f`, plus `-i` bytes);
`algbw` is size / time and `busbw` is algbw times nccl-tests' factor for the collective (PERFORMANCE.md:
2(n−1)/n for all-reduce, (n−1)/n for all-gather, reduce-scatter and all-to-all, 1 for the rest).

The default topology, for every command that takes `-t`: `$PKROOF_TOPOLOGY` (a preset name or a file), else the
file `pkroof probe --save` wrote (`~/.config/pkroof/topology.json`, under `$XDG_CONFIG_HOME` where set), else the
preset `hgx-h100-8`.
"""


def commands() -> dict[str, Any]:
    """Every command of the app (typer's click commands) by its name after `pkroof` ("bound", "topology show")."""
    out: dict[str, Any] = {}

    def walk(group: Any, prefix: str) -> None:
        for name, sub in group.commands.items():
            full = f"{prefix} {name}".strip()
            if hasattr(sub, "commands"):  # a group of commands
                walk(sub, full)
            else:
                out[full] = sub

    walk(typer.main.get_command(app), "")
    return out


def _arguments(command: Any) -> list[Any]:
    return [p for p in command.params if p.param_type_name == "argument"]


def _usage(name: str, command: Any) -> str:
    args = []
    for p in _arguments(command):
        metavar = p.metavar or p.name.upper()
        args.append(metavar if p.required else f"[{metavar}]")
    return " ".join(["pkroof", name, *args, "[OPTIONS]" if _options(command) else ""]).strip()


def _options(command: Any) -> list[Any]:
    return [p for p in command.params if p.param_type_name == "option" and p.name != "help"]


def _default(p: Any) -> str:
    value = p.default
    if value is None or value is False or value == () or value == []:
        return ""
    return f"`{value}`"


def _cell(text: str | None) -> str:
    return " ".join((text or "").split()).replace("|", "\\|")


def example(command: str, option: Any) -> str:
    long = next(o for o in option.opts if o.startswith("--"))
    return PER_COMMAND.get((command, long), OPTIONS[long])


def render() -> str:
    lines = [HEAD]
    root = typer.main.get_command(app)
    lines += ["## pkroof", "", _cell(root.help), "", "| option | meaning | example |", "|---|---|---|"]
    lines += [f"| `{', '.join(p.opts)}` | {_cell(p.help)} | `pkroof {OPTIONS[p.opts[0]]}` |" for p in root.params]
    for name, command in commands().items():
        lines += ["", f"## pkroof {name}", "", f"`{_usage(name, command)}`", "", _cell(command.help), ""]
        lines += [f"Example: `{COMMANDS[name]}`"]
        arguments = _arguments(command)
        if arguments:
            lines += ["", "| argument | meaning |", "|---|---|"]
            lines += [f"| `{p.metavar or p.name.upper()}` | {_cell(getattr(p, 'help', ''))} |" for p in arguments]
        options = _options(command)
        if options:
            lines += ["", "| option | value | meaning | default | example |", "|---|---|---|---|---|"]
            for p in options:
                value = "" if p.is_flag else f"`{_cell(p.metavar)}`"
                row = f"| `{', '.join(p.opts)}` | {value} | {_cell(p.help)} | {_default(p)} | `{example(name, p)}` |"
                lines.append(row)
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(render(), end="")
