"""`pkroof trace`'s terminal summary, and its progress bar on stderr while the traces are read."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path

import pandas as pd

from pkroof.rooflines.units import fmt_s
from pkroof.runs.analyze_traces import Progress
from pkroof.runs.result import TraceResult

CATEGORY_ORDER = ("communication", "gemm", "attention", "memory", "copy", "memset", "other")
TOP = 10  # opportunities and unsized reasons shown
MAX_RANK_ROWS = 16


def _table(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    lines = ["  " + "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in [header, *rows]]
    return "\n".join(lines)


def _s(value: float) -> str:
    return "-" if pd.isna(value) else fmt_s(float(value))


def _pct(value: float) -> str:
    return "-" if pd.isna(value) else f"{value:.1%}"


def _steps(steps: pd.DataFrame) -> str:
    """Per step: the slowest rank's wall, each other column's mean over ranks; then the sum over steps."""
    cols = ["compute_s", "communication_s", "exposed_communication_s", "idle_s"]
    by_step = steps.assign(step=steps["step"].astype(object).fillna("all")).groupby("step", sort=False)
    rows = []
    for step, g in by_step:
        rows.append([str(step), _s(g["wall_s"].max()), *(_s(g[c].mean()) for c in cols)])
    per_rank = steps.groupby("rank")[["wall_s", *cols]].sum()
    rows.append(["job", _s(per_rank["wall_s"].max()), *(_s(per_rank[c].mean()) for c in cols)])
    header = ["step", "wall (slowest rank)", "compute", "communication", "exposed comm.", "idle"]
    return "Steps (mean over ranks; job: the sum over steps):\n" + _table(header, rows)


def _ranks(steps: pd.DataFrame) -> str:
    cols = ["wall_s", "compute_s", "communication_s", "exposed_communication_s", "idle_s"]
    per_rank = steps.groupby("rank")[cols].sum().sort_values("exposed_communication_s", ascending=False)
    shown = per_rank.head(MAX_RANK_ROWS)
    rows = [[str(r), *(_s(v) for v in row)] for r, row in zip(shown.index, shown.to_numpy(), strict=True)]
    more = f"\n  ... {len(per_rank) - len(shown)} more ranks (--json has each)" if len(per_rank) > len(shown) else ""
    header = ["rank", "wall", "compute", "communication", "exposed comm.", "idle"]
    return "Ranks (sum over steps, most exposed communication first):\n" + _table(header, rows) + more


def _categories(kernels: pd.DataFrame) -> str:
    rows = []
    for cat in CATEGORY_ORDER:
        k = kernels[kernels["category"] == cat]
        if k.empty:
            continue
        bounded = k[k["t_roof_s"].notna()]
        fraction = bounded["t_roof_s"].sum() / (bounded["dur_us"].sum() * 1e-6) if len(bounded) else float("nan")
        rows.append([cat, str(len(k)), _s(k["dur_us"].sum() * 1e-6), f"{len(bounded)}", _pct(fraction)])
    header = ["category", "kernels", "time (all ranks)", "bounded", "roof / time of the bounded"]
    return "Kernels:\n" + _table(header, rows)


def _collectives(c: pd.DataFrame) -> str:
    if c.empty:
        return "Collectives matched across ranks: none"
    last = c["last_rank"].value_counts()
    return (
        f"Collectives matched across ranks: {len(c)}; transfer {_s(c['transfer_s'].sum())}, waiting for the last "
        f"rank {_s(c['wait_s'].sum())}; last to arrive most often: rank {last.index[0]} ({last.iloc[0]} of {len(c)})"
    )


def _opportunities(o: pd.DataFrame) -> str:
    if o.empty:
        return "Opportunities: none found"
    lines = ["Opportunities (the saving is what pkroof's model predicts):"]
    for i, row in enumerate(o.head(TOP).itertuples(), 1):
        pair = f"{row.mechanism} + {row.schedule}" if isinstance(row.mechanism, str) else ""
        lines.append(
            f"  {i}. {row.what}: {_s(row.measured_s)} → {_s(row.predicted_s)}, saves {_s(row.saving_s)}"
            + (f" ({pair})" if pair else "")
            + (f" [{row.problem_file}]" if isinstance(row.problem_file, str) else "")
        )
    return "\n".join(lines)


def _unsized(unsized: dict[str, int]) -> str:
    if not unsized:
        return "Unsized kernels: none"
    total = sum(unsized.values())
    lines = [f"Unsized kernels: {total} (communication and GEMMs pkroof could not size; never guessed)"]
    lines += [f"  {n:6d}  {reason}" for reason, n in list(unsized.items())[:TOP]]
    if len(unsized) > TOP:
        lines.append(f"  ... {len(unsized) - TOP} more reasons (--json has each kernel's)")
    return "\n".join(lines)


def trace_text(r: TraceResult, *, wrote: Path | None = None) -> str:
    """The summary: topology and why, ranks, notes, steps, categories, collectives, opportunities, unsized; and the
    folder `--out` wrote to."""
    ranks = ", ".join(map(str, r.ranks[:16])) + (" ..." if len(r.ranks) > 16 else "")
    head = [
        f"pkroof trace: {len(r.ranks)} of {r.world_size} ranks ({ranks}), {len(r.kernels)} GPU kernels",
        f"topology: {r.topology} ({r.topology_reason})",
    ]
    head += [f"note: {n}" for n in r.notes]
    parts = ["\n".join(head), _steps(r.steps)]
    if len(r.ranks) > 1:
        parts.append(_ranks(r.steps))
    parts += [_categories(r.kernels), _collectives(r.collectives), _opportunities(r.opportunities)]
    parts.append(_unsized(r.unsized))
    if wrote is not None:
        parts.append(f"wrote {wrote / 'trace.json'}")
    return "\n\n".join(parts)


@contextlib.contextmanager
def progress_bar() -> Iterator[Progress | None]:
    """A progress callback drawing a bar on stderr while files are read, where stderr is a terminal; else None."""
    if not sys.stderr.isatty():
        yield None
        return
    import rich.progress as rp

    columns = (rp.TextColumn("reading traces"), rp.BarColumn(), rp.MofNCompleteColumn(), rp.TimeElapsedColumn())
    bar = rp.Progress(*columns, console=rp.Console(stderr=True), transient=True)
    task = bar.add_task("read", total=None)
    with bar:

        def advance(done: int, total: int, path: str) -> None:
            bar.update(task, completed=done, total=total)

        yield advance
