"""`pkroof bound --json` for every problem × named shape × preset, saved, and compared against a saved run.

    python benchmarks/model/bound_snapshot.py save FILE      # every case, one JSON line each
    python benchmarks/model/bound_snapshot.py compare FILE   # rerun FILE's cases (.jsonl or .jsonl.gz); list those
                                                              # that differ

Run `save` before a refactor that must not change a number and `compare` after it. Each case runs in this
process through the CLI (typer's CliRunner), so what is compared is exactly what `pkroof bound --json` prints;
a case that fails compares its exit code and message. A case that runs past --limit seconds (a reference that
needs CPU ranks at a real model's shape) is cut and recorded as such.
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import signal
import sys
import time
from pathlib import Path


class _CutError(Exception):
    pass


def _cases() -> list[list[str]]:
    from pkroof.analysis.catalogue import suite
    from pkroof.topology import PRESETS

    problems = [(p.name, list(p.shapes)) for p in suite()]
    cases = []
    for preset in PRESETS:
        for name, shapes in problems:
            cases += [["bound", name, "--shape", s, "--topology", preset, "--json"] for s in shapes]
    return cases


def _run(args: list[str], limit_s: float) -> dict:
    from typer.testing import CliRunner

    from pkroof.cli import app

    def cut(signum, frame):
        raise _CutError()

    signal.signal(signal.SIGALRM, cut)
    signal.alarm(math.ceil(limit_s))
    start = time.monotonic()
    try:
        r = CliRunner().invoke(app, args, catch_exceptions=True)
    except _CutError:
        return {"args": args, "cut": True}
    finally:
        signal.alarm(0)
    out = {"args": args, "exit": r.exit_code, "seconds": round(time.monotonic() - start, 2)}
    if isinstance(r.exception, _CutError):
        return {"args": args, "cut": True}
    if r.exit_code == 0:
        out["json"] = json.loads(r.stdout)
    else:
        out["message"] = (r.stderr if hasattr(r, "stderr") else r.output).strip()
    return out


def _same(a, b, path="") -> list[str]:
    """Paths where two JSON values differ (floats equal to 1e-12 relative: the same arithmetic reordered)."""
    if isinstance(a, dict) and isinstance(b, dict):
        diffs = [f"{path}.{k}: only before" for k in a.keys() - b.keys()]
        diffs += [f"{path}.{k}: only after" for k in b.keys() - a.keys()]
        for k in a.keys() & b.keys():
            diffs += _same(a[k], b[k], f"{path}.{k}")
        return diffs
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return [f"{path}: {len(a)} items before, {len(b)} after"]
        return [d for i, (x, y) in enumerate(zip(a, b, strict=True)) for d in _same(x, y, f"{path}[{i}]")]
    if isinstance(a, float) and isinstance(b, (int, float)) and not isinstance(b, bool):
        return [] if math.isclose(a, b, rel_tol=1e-12, abs_tol=0.0) else [f"{path}: {a!r} → {b!r}"]
    return [] if a == b else [f"{path}: {a!r} → {b!r}"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=["save", "compare"])
    parser.add_argument("file", type=Path)
    parser.add_argument("--limit", type=float, default=60.0, help="seconds a case may take")
    parser.add_argument("--ignore", action="append", default=[], help="a JSON key to leave out (repeat)")
    parser.add_argument("--cases", type=Path, help="save these cases (a JSON list of argument lists) instead")
    a = parser.parse_args()
    if a.mode == "save":
        cases = json.loads(a.cases.read_text()) if a.cases else _cases()
        with a.file.open("w") as f:
            for args in cases:
                row = _run(args, a.limit)
                f.write(json.dumps(row, sort_keys=True) + "\n")
                f.flush()
                print(" ".join(args[1:6]), "cut" if row.get("cut") else row["exit"], row.get("seconds", ""))
        return
    text = gzip.decompress(a.file.read_bytes()).decode() if a.file.suffix == ".gz" else a.file.read_text()
    before = [json.loads(line) for line in text.splitlines() if line.strip()]
    changed = same = skipped = 0
    for row in before:
        now = None if row.get("cut") else _run(row["args"], a.limit)
        if now is None or now.get("cut"):
            skipped += 1
            print(" ".join(row["args"][1:6]), "| cut", "before" if now is None else "now", "(not compared)")
            continue
        for key in a.ignore:
            row.get("json", {}).pop(key, None)
            now.get("json", {}).pop(key, None)
        old = {k: row.get(k) for k in ("exit", "json")}
        new = {k: now.get(k) for k in ("exit", "json")}
        diffs = _same(old, new)
        if diffs:
            changed += 1
            print(" ".join(row["args"][1:6]), "|", "; ".join(diffs[:6]) + (" …" if len(diffs) > 6 else ""))
        else:
            same += 1
    print(f"{same} identical, {changed} differ, {skipped} cut (not compared)")
    sys.exit(1 if changed else 0)


if __name__ == "__main__":
    main()
