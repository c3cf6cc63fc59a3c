"""The same-numbers golden: what `pkroof bound --json`, `pkroof advise --json` and `pkroof report`'s exports print
for every suite problem on every preset, at the problem's default parameters (on one node and on NODES) and at
each of its named shapes (but SHAPES_LEFT_OUT's), and the exports of the records that ship in pkroof/recorded/,
written to one gzip JSON file that maps each command line to its output. tests/test_same_numbers.py recomputes
every entry through this file's `run` and compares, so a refactor that changes a number, or renames or drops a
field, fails there.

    python tests/data/same-numbers/snapshot.py          # writes bound-advise-<commit>.json.gz beside this file
    python tests/data/same-numbers/snapshot.py --check  # recomputes and counts the entries that differ

Everything goes through the public command line (`pkroof.cli:app`, in this process through typer's CliRunner, as
tests/test_cli.py does): the problems and presets are read from `pkroof problems` and `pkroof presets`.

What is normalised, and why (nothing else is touched; every number is kept as printed):
- The trace cache is a fresh temporary folder ($PKROOF_TRACE_CACHE) for the whole run: every traced problem is
  traced by the code under test, not read from a cache an earlier version wrote (a cache entry's key holds the
  problem file's bytes, not the tracer's code). Within one run a trace is made once per (problem, world size) and
  then shared by `bound`, `advise` and every preset of that world size, as on a user's machine.
- `report` writes into a temporary --out folder; the key leaves --out out, and the entry is the exported file
  (results.json parsed; results.csv as a list of rows, each cell a number where it reads as one), not the
  "wrote 1 file to <folder>" line.
- A record file is named by its path relative to the repository root (pkroof/recorded/...), not its absolute path.
- A command that exits non-zero is {"exit": code, "stderr": its first line}, with this repository's absolute path
  written as <repo> and the temporary folders as <tmp> should they appear. An exception that escapes the command
  line (a traceback, which pkroof should never print) is recorded as {"exit": 1, "stderr": "Type: message"}.
- Nothing in the JSON of `bound`/`advise` varies between runs (no timing of the analysis, no paths, no dates):
  `--twice` checks that, running every command twice, each time on a fresh trace cache, and counting differences.
"""

from __future__ import annotations

import argparse
import csv
import gzip
import json
import os
import shlex
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from pkroof.cli import app

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
COMMIT = "7f02713"
GOLDEN = HERE / f"bound-advise-{COMMIT}.json.gz"
RECORDED = "pkroof/recorded"  # the results measured on the 2xH200 node that ship in the package
EXPORTS = ("json", "csv")  # parquet needs pyarrow, which pkroof does not require
SLOW_S = 30.0
NODES = 2  # --nodes: the network tier, NCCL's hierarchical algorithms (tree, NVLS-tree) and the per-tier link terms
# Problems whose reference needs values to trace (routing, splits, top-k): pkroof traces them on CPU ranks over gloo
# with real data. At their default shape they are in the golden on every preset. At their named shapes (real models'
# sizes) one trace takes 50 s on 2 ranks and 110-140 s on 8 on a 2-core machine, and on 8 ranks moe-combine at
# deepseek-v3-ep8 was killed for memory (24 GiB shared with other jobs, 2026-12-05): an outcome that depends on the
# machine, not on the code, so their named shapes are left out.
SHAPES_LEFT_OUT = ("all-to-allv", "distributed-topk", "halo-exchange", "moe-combine", "moe-dispatch")
INTERRUPTED = (128 + 1, 128 + 2, 128 + 15)  # pkroof's exit after SIGHUP, SIGINT, SIGTERM


def _invoke(argv: list[str]) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of `pkroof argv`, in this process."""
    result = CliRunner().invoke(app, argv)
    if isinstance(result.exception, KeyboardInterrupt) or result.exit_code in INTERRUPTED:
        raise KeyboardInterrupt  # stopped (Ctrl-C, SIGTERM): stop the snapshot too, record nothing
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        e = result.exception
        return 1, "", f"{type(e).__name__}: {e}"
    return result.exit_code, result.stdout, result.stderr


def _first_line(text: str, tmp: str) -> str:
    line = (text.strip().splitlines() or [""])[0]
    return line.replace(str(REPO), "<repo>").replace(tmp, "<tmp>").replace(tempfile.gettempdir(), "<tmp>")


def _cell(text: str) -> Any:
    """A CSV cell as the number it reads as (int, then float), else the text."""
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            continue
    return text


def _read_export(path: Path, fmt: str) -> Any:
    if fmt == "json":
        return json.loads(path.read_text())
    with path.open(newline="") as f:
        return [{k: _cell(v) for k, v in row.items()} for row in csv.DictReader(f)]


def run(command: str) -> Any:
    """The output of one command line of the golden ("pkroof bound all-gather -t h200x2 --json"): its parsed JSON,
    the parsed export of a `report`, or {"exit": code, "stderr": first line} where it exits non-zero."""
    argv = shlex.split(command)
    assert argv[0] == "pkroof", command
    argv = argv[1:]
    with tempfile.TemporaryDirectory(prefix="same-numbers-") as tmp:
        if argv[0] == "report":
            fmt = argv[argv.index("--format") + 1]
            argv = [str(REPO / a) if a.startswith(RECORDED) else a for a in argv] + ["--out", tmp]
        code, out, err = _invoke(argv)
        if code != 0:
            return {"exit": code, "stderr": _first_line(err, tmp)}
        if argv[0] == "report":
            return _read_export(Path(tmp) / f"results.{fmt}", fmt)
        return json.loads(out)


def _table(argv: list[str]) -> list[str]:
    """The lines below the dashed rule of a table that `pkroof problems` or `pkroof presets` prints."""
    code, out, err = _invoke(argv)
    if code != 0:
        raise SystemExit(f"pkroof {' '.join(argv)}: exit {code}: {err.strip()}")
    lines = out.splitlines()
    rule = next(i for i, line in enumerate(lines) if line.startswith("---"))
    return [line for line in lines[rule + 1 :] if line.strip()]


def presets() -> list[str]:
    """The presets, as `pkroof presets` lists them: the first word of each row."""
    return [line.split()[0] for line in _table(["presets"])]


def problems() -> dict[str, list[str]]:
    """Each suite problem and its named shapes other than its default, as `pkroof problems` lists them: a problem's
    row starts with its name, each of its shapes is an indented row below it, the default one marked (default)."""
    out: dict[str, list[str]] = {}
    for line in _table(["problems"]):
        if not line[0].isspace():
            out[line.split()[0]] = shapes = []
        elif "(default)" not in line:
            shapes.append(line.split()[0])
    return out


def commands() -> list[str]:
    """Every command line of the golden: bound and advise of each problem on each preset at its default shape, then
    the same on NODES such nodes, then at each of its other named shapes (but those of SHAPES_LEFT_OUT) on one node,
    then the exports of each shipped record file and of all of them together."""
    suite, tops = problems(), presets()
    pairs = ("bound", "advise")
    out = [f"pkroof {cmd} {problem} -t {top} --json" for problem in suite for top in tops for cmd in pairs]
    out += [
        f"pkroof {cmd} {problem} -t {top} --nodes {NODES} --json" for problem in suite for top in tops for cmd in pairs
    ]
    out += [
        f"pkroof {cmd} {problem} --shape {shape} -t {top} --json"
        for problem, shapes in suite.items()
        if problem not in SHAPES_LEFT_OUT
        for shape in shapes
        for top in tops
        for cmd in pairs
    ]
    files = sorted(f"{RECORDED}/{p.name}" for p in (REPO / RECORDED).glob("*.jsonl"))
    for fmt in EXPORTS:
        out += [f"pkroof report {f} --format {fmt}" for f in files]
        out.append(f"pkroof report {' '.join(files)} --format {fmt}")
    return out


@contextmanager
def fresh_trace_cache() -> Iterator[None]:
    """$PKROOF_TRACE_CACHE set to a new empty folder while inside, restored after."""
    before = os.environ.get("PKROOF_TRACE_CACHE")
    with tempfile.TemporaryDirectory(prefix="same-numbers-traces-") as folder:
        os.environ["PKROOF_TRACE_CACHE"] = folder
        try:
            yield
        finally:
            if before is None:
                os.environ.pop("PKROOF_TRACE_CACHE", None)
            else:
                os.environ["PKROOF_TRACE_CACHE"] = before


def snapshot(lines: list[str]) -> tuple[dict[str, Any], dict[str, float]]:
    """(each command line's output, each one's seconds), on a fresh trace cache."""
    outputs, seconds = {}, {}
    with fresh_trace_cache():
        for i, line in enumerate(lines, 1):
            start = time.perf_counter()
            outputs[line] = run(line)
            seconds[line] = time.perf_counter() - start
            if seconds[line] > SLOW_S:
                print(f"  slow: {line}: {seconds[line]:.1f} s", file=sys.stderr)
            if i % 50 == 0:
                print(f"  {i}/{len(lines)}", file=sys.stderr)
    return outputs, seconds


def write(outputs: dict[str, Any], path: Path = GOLDEN) -> None:
    """gzip JSON, byte-for-byte the same for the same outputs (no timestamp in the gzip header)."""
    data = json.dumps(outputs, indent=1, allow_nan=False).encode()
    with path.open("wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, filename="") as f:
        f.write(data)


def read(path: Path = GOLDEN) -> dict[str, Any]:
    with gzip.open(path, "rt") as f:
        return json.load(f)


def _summary(outputs: dict[str, Any], seconds: dict[str, float], wall_s: float) -> None:
    failed = {k: v for k, v in outputs.items() if isinstance(v, dict) and set(v) == {"exit", "stderr"}}
    print(f"{len(outputs)} commands in {wall_s:.0f} s: {len(outputs) - len(failed)} ok, {len(failed)} exit non-zero")
    reasons: dict[str, int] = {}
    for v in failed.values():
        reasons[f"exit {v['exit']}: {v['stderr']}"] = reasons.get(f"exit {v['exit']}: {v['stderr']}", 0) + 1
    for reason, n in sorted(reasons.items(), key=lambda kv: -kv[1]):
        print(f"  {n:4d} x {reason}")
    print("slowest:")
    for line, s in sorted(seconds.items(), key=lambda kv: -kv[1])[:10]:
        print(f"  {s:7.1f} s  {line}")


def _update() -> None:
    """Rewrite the golden's entries that now differ, leaving every other entry as it was, and name each changed one
    with the fields that changed (the README beside this file says why they changed)."""
    golden = read()
    outputs, _ = snapshot(list(golden))
    changed = [k for k in golden if outputs[k] != golden[k]]
    for k in changed:
        fields = sorted(_changed_fields(golden[k], outputs[k]))
        print(f"{k}: {', '.join(fields[:6])}{' ...' if len(fields) > 6 else ''}")
        golden[k] = outputs[k]
    write(golden)
    print(f"{len(changed)} of {len(golden)} entries rewritten in {GOLDEN.name}")


def _changed_fields(old: Any, new: Any, where: str = "") -> set[str]:
    """The paths (list indices left out) where `new` differs from `old`."""
    if isinstance(old, dict) and isinstance(new, dict):
        out = {f"{where}.{k}" for k in set(old) ^ set(new)}
        for k in set(old) & set(new):
            out |= _changed_fields(old[k], new[k], f"{where}.{k}")
        return out
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        return {p for a, b in zip(old, new, strict=True) for p in _changed_fields(a, b, f"{where}[]")}
    return set() if old == new else {where or "."}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="recompute and compare with the golden; write nothing")
    parser.add_argument("--twice", action="store_true", help="run everything twice and compare; write nothing")
    parser.add_argument("--out", type=Path, default=GOLDEN, help="where to write the golden")
    parser.add_argument(
        "--only",
        action="append",
        metavar="TEXT",
        help="recompute only the golden's entries whose command line holds TEXT (repeatable) and write them into it, "
        "every other entry kept as it is (an intended model change: list it in README.md beside this file)",
    )
    parser.add_argument(
        "--update",
        action="store_true",
        help="recompute every entry of the golden, rewrite only those that differ, and list them (an intended change)",
    )
    args = parser.parse_args()
    if args.update:
        _update()
        return

    start = time.perf_counter()
    if args.only:
        golden = read()
        lines = [k for k in golden if any(text in k for text in args.only)]
        outputs, seconds = snapshot(lines)
        _summary(outputs, seconds, time.perf_counter() - start)
        write(golden | outputs, args.out)
        print(f"rewrote {len(lines)} entries of {args.out}")
        return
    lines = list(read()) if args.check else commands()
    outputs, seconds = snapshot(lines)
    _summary(outputs, seconds, time.perf_counter() - start)
    if args.check or args.twice:
        other = read() if args.check else snapshot(lines)[0]
        differ = [k for k in lines if outputs[k] != other[k]]
        print(f"{len(differ)} of {len(lines)} entries differ (exact comparison)")
        for k in differ[:20]:
            print(f"  {k}")
        raise SystemExit(1 if differ else 0)
    write(outputs, args.out)
    print(f"wrote {args.out} ({args.out.stat().st_size / 1e6:.2f} MB)")


if __name__ == "__main__":
    main()
