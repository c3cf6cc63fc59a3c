"""Write a whole report folder atomically, and export result records as CSV, JSON or Parquet.

`write_report` takes one topology's Report (records/report_inputs.py): the records with their model view, a Page per
problem (its analysed shapes, each a Bound with its advice; the roof swept over sizes or shapes; the bound against
the number of nodes) and the problems left out. The pages turn it into DataFrames and figures (frames.py,
figures.py) and those into HTML (html.py): no other form between.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import re
import shutil
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd
import plotly.offline

from . import frames, html
from .render import shown

if TYPE_CHECKING:
    from pkroof.records.report_data import Report

MARKER = ".pkroof-report"  # names a folder write_report made, so it may replace it whole
EXPORTS = ("csv", "json", "parquet")


def slug(name: str, *, key: str | None = None) -> str:
    """A safe file-name part: [a-z0-9._-] only, no leading dot; a short hash (of `key`, where given: what the name
    stands for) keeps rewritten names distinct."""
    clean = re.sub(r"[^a-z0-9._-]+", "-", name.lower()).strip("-.")[:80]
    if clean and clean == name and key is None:
        return clean
    digest = hashlib.sha1((name if key is None else key).encode()).hexdigest()[:8]
    return f"{clean}-{digest}" if clean else digest


def page_file(problem: str) -> str:
    """A problem's page file: a problem file's named by its shown name (never this machine's absolute path), kept
    apart from another file of that name by a short hash of its path."""
    name = shown(problem)
    return f"problem-{slug(problem) if name == problem else slug(name, key=problem)}.html"


def _pages(
    out: Path,
    report: Report,
    *,
    others: Mapping[str, str] | None = None,
    assets: str = "",
    log: Callable[[str], None] = lambda line: None,
    progress: Callable[[str], None] = lambda step: None,
) -> list[Path]:
    """Every page of one topology's report into `out` (plotly.min.js is `assets` away, written by the caller)."""
    table = frames.records_frame(report.records)
    categories = {name: page.category for name, page in report.pages.items()}
    index = frames.index_frame(table, categories=categories, advice=frames.advice_by_row(report.pages.values()))
    analytic = frames.analytic_rows(report.pages.values(), measured=index["problem"])
    if len(analytic):  # problems bounded but not measured: their roofline and advice, no measurements
        index = pd.concat([index, analytic], ignore_index=True) if len(index) else analytic
    pages = {name: page_file(name) for name in dict.fromkeys(index["problem"])}
    topology = report.topology
    written = {
        "index.html": html.index_page(
            index,
            pages=pages,
            topology=topology.name,
            num_runs=len(table),
            left_out=report.left_out,
            others=others,
            assets=assets,
            superseded=report.superseded,
        )
    }
    log(f"{topology.name}: writing {len(pages) + 2} pages")
    for name, file_name in pages.items():
        progress(f"{topology.name}: writing {file_name}")
        written[file_name] = html.problem_page(
            name, records=table[table["problem"] == name], page=report.pages.get(name), assets=assets
        )
    written["topology.html"] = html.topology_page(topology, assets=assets)
    out.mkdir(parents=True, exist_ok=True)
    for file_name, text in written.items():
        (out / file_name).write_text(text, encoding="utf-8")
    return [Path(n) for n in written]


def check_out(out_dir: Path, *, replace: bool = True) -> None:
    """A ValueError unless `out_dir` can be written: a folder or nothing yet, below folders; with `replace`,
    also empty or a report write_report made (it is replaced whole)."""
    out_dir = Path(out_dir)
    if out_dir.exists() and not out_dir.is_dir():
        raise ValueError(f"{out_dir}: exists and is not a folder (choose another folder)")
    above = next((p for p in out_dir.absolute().parents if p.exists()), None)
    if above is not None and not above.is_dir():
        raise ValueError(f"{out_dir}: cannot be made, {above} is not a folder")
    if replace and out_dir.exists() and any(out_dir.iterdir()) and not (out_dir / MARKER).exists():
        raise ValueError(f"{out_dir}: exists and is not a pkroof report; not replacing it (choose another folder)")


def write_report(
    out_dir: Path,
    report: Report,
    *,
    others: Mapping[str, Report] | None = None,
    log: Callable[[str], None] = lambda line: None,
    progress: Callable[[str], None] = lambda step: None,
) -> list[Path]:
    """Build the report in a temporary sibling folder, then swap it in: a reader sees the old one or the new one.
    `log` hears a line per machine as its pages are written, `progress` each page.

    `others` maps another machine's name to its own Report (usually analytic: no records), written under
    presets/<name>/ and linked from the index.

    An existing `out_dir` is replaced whole, but only if it is empty or a report this function wrote.
    """
    out_dir = Path(out_dir)
    if out_dir.is_symlink():  # a link to a report: the report it points to is replaced, the link stays as it is
        out_dir = Path(os.path.realpath(out_dir))
    check_out(out_dir)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    new = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.new-", dir=out_dir.parent))
    try:
        links = {name: f"presets/{slug(name)}/index.html" for name in (others or {})}
        names = _pages(new, report, others=links, log=log, progress=progress)
        (new / "plotly.min.js").write_text(plotly.offline.get_plotlyjs(), encoding="utf-8")
        names.append(Path("plotly.min.js"))
        for name, sub in (others or {}).items():  # analytic reports of other machines, sharing plotly.min.js
            folder = Path("presets") / slug(name)
            names += [folder / n for n in _pages(new / folder, sub, assets="../../", log=log, progress=progress)]
        (new / MARKER).write_text("pkroof report\n")
        new.chmod(0o755)  # mkdtemp makes it 0700
    except BaseException:
        shutil.rmtree(new, ignore_errors=True)
        raise
    old = out_dir.parent / f".{out_dir.name}.old-{new.name.rpartition('-')[2]}"
    if out_dir.exists():
        out_dir.rename(old)
    try:
        new.rename(out_dir)
    except BaseException:
        if old.exists():
            old.rename(out_dir)
        shutil.rmtree(new, ignore_errors=True)
        raise
    shutil.rmtree(old, ignore_errors=True)
    return [out_dir / name for name in names]


FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")  # a spreadsheet reads a cell starting so as a formula


def neutralised(value: Any) -> Any:
    """A text cell that a spreadsheet would run as a formula, made inert with a leading apostrophe (OWASP's advice
    against CSV injection); numbers and every other cell as they are."""
    return "'" + value if isinstance(value, str) and value.startswith(FORMULA_STARTS) else value


def export(records: pd.DataFrame, path: Path, fmt: str) -> Path:
    """Write a records_frame as csv (formula-like text cells neutralised), json (a list of row objects, strict
    JSON: a number that is not finite is null) or parquet (needs pyarrow)."""
    if fmt not in EXPORTS:
        raise ValueError(f"export format must be one of {', '.join(EXPORTS)}, got {fmt!r}")
    path = Path(path)
    if fmt == "csv":
        text = records.copy()
        for column in text.columns:
            if not pd.api.types.is_numeric_dtype(text[column]):  # text, whether object or string dtype
                text[column] = text[column].map(neutralised)
        text.to_csv(path, index=False)
    elif fmt == "json":
        rows = json.loads(records.to_json(orient="records"))  # pandas writes NaN and infinities as null
        path.write_text(json.dumps(rows, indent=1, allow_nan=False) + "\n", encoding="utf-8")
    else:
        if importlib.util.find_spec("pyarrow") is None:
            raise ValueError("parquet export needs pyarrow: pip install 'pkroof[parquet]' (or export csv or json)")
        records.to_parquet(path, index=False)
    return path


def check_export(out_dir: Path, fmt: str, *, force: bool = False) -> None:
    """A ValueError unless `out_dir`/results.`fmt` can be written: an existing file is replaced only with `force`."""
    check_out(out_dir, replace=False)
    target = Path(out_dir) / f"results.{fmt}"
    if target.is_dir():
        raise ValueError(f"{target}: exists and is a folder; not replacing it (choose another --out)")
    if (target.exists() or target.is_symlink()) and not force:
        raise ValueError(f"{target}: exists; not overwriting it (--force replaces it, or choose another --out)")


def write_export(records: pd.DataFrame, out_dir: Path, fmt: str, *, force: bool = False) -> Path:
    """`out_dir`/results.`fmt` (see export), written beside and then moved in place (an existing file, or a link
    there, is replaced only with `force`); the folders this call made are removed again if the export fails."""
    out_dir = Path(out_dir)
    check_export(out_dir, fmt, force=force)
    made = first_missing(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / f"results.{fmt}"
    fd, temporary = tempfile.mkstemp(prefix=f".results.{fmt}.", dir=out_dir)
    os.close(fd)
    try:
        export(records, Path(temporary), fmt)
        os.chmod(temporary, 0o644)
        os.replace(temporary, target)
        return target
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        if made is not None:
            shutil.rmtree(made, ignore_errors=True)
        raise


def first_missing(path: Path) -> Path | None:
    """The outermost folder that `path.mkdir(parents=True)` would make (None: `path` exists), to undo it."""
    path = Path(path).absolute()
    return next((p for p in reversed([path, *path.parents]) if not p.exists()), None)
