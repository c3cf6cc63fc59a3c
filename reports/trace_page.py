"""`pkroof trace --out DIR`'s page, trace.html: the step breakdown, the kernels against their roofs, and the
opportunities with links to their problem files. Made from the trace result's frames alone (docs/trace.md); in the
report's style, with its plotly.min.js beside it (no network).

The template is templates/trace.html.j2 (render.py's environment: autoescape on, the report's style and scripts):
every string a trace holds is shown as text.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pandas as pd
import plotly.offline
from markupsafe import Markup

from pkroof.runs.opportunities import SAVING_NOTE

from . import html, trace_figures
from .render import ENV

PAGE = "trace.html"


def _rows(frame: pd.DataFrame) -> list[dict[str, Any]]:
    return frame.astype(object).where(frame.notna(), None).to_dict("records")


def _link(problem_file: Any, out_dir: Path | None) -> str | None:
    """The problem file's path relative to the page's folder, where it lies inside it (else no link)."""
    if not isinstance(problem_file, str) or not problem_file or out_dir is None:
        return None
    relative = os.path.relpath(Path(problem_file).resolve(), Path(out_dir).resolve())
    return None if relative.startswith("..") else Path(relative).as_posix()


def _chart(fig: Any, div_id: str, title: str, note: str) -> Markup:
    return html.figure_html(fig, div_id, title, note, wide=True)


def _frame(result: Any, name: str) -> pd.DataFrame:
    frame = getattr(result, name, None)
    return frame if isinstance(frame, pd.DataFrame) else pd.DataFrame()


def trace_page(result: Any, *, out_dir: Path | None = None, assets: str = "") -> str:
    """The page of a trace result (runs.TraceResult: its kernels, steps and opportunities frames, topology,
    topology_reason, ranks, notes, unsized); links to problem files are relative to `out_dir`, where the page goes."""
    kernels, steps, opportunities = _frame(result, "kernels"), _frame(result, "steps"), _frame(result, "opportunities")
    parts = trace_figures.step_parts(steps) if len(steps) else pd.DataFrame()
    top = trace_figures.top_kernels(kernels) if len(kernels) else pd.DataFrame()
    ranks = list(getattr(result, "ranks", []) or [])
    step_note = (
        f"Mean over the ranks that ran each step ({max(parts['ranks'])} at most); the parts add up to the step's wall"
        " time: compute plus overlapped comm is the compute time, overlapped plus exposed the communication time."
        if len(parts)
        else ""
    )
    kernel_note = f"The {len(top)} kernels with the most time, summed over ranks and steps; coloured by category."
    rows = _rows(opportunities)
    for row in rows:
        row["link"] = _link(row.get("problem_file"), out_dir)
    return ENV.get_template("trace.html.j2").render(
        assets=assets,
        ranks=ranks,
        rank_list=", ".join(str(r) for r in ranks[:16]) + (", …" if len(ranks) > 16 else ""),
        topology=getattr(result, "topology", ""),
        topology_reason=getattr(result, "topology_reason", ""),
        num_kernels=len(kernels),
        num_steps=int(steps["step"].nunique()) if len(steps) else 0,
        notes=list(getattr(result, "notes", []) or []),
        unsized=dict(getattr(result, "unsized", {}) or {}),
        step_chart=_chart(trace_figures.step_figure(parts), "steps-chart", "Step breakdown", step_note)
        if len(parts)
        else "",
        totals=_rows(trace_figures.rank_totals(steps)) if len(steps) else [],
        kernel_chart=_chart(trace_figures.kernel_figure(top), "kernels-chart", "Fraction of roof", kernel_note)
        if len(top)
        else "",
        kernels=_rows(top),
        colours=trace_figures.CATEGORY_COLOURS,
        opportunities=rows,
        saving_note=opportunities.attrs.get("note", SAVING_NOTE),
        skipped=list(opportunities.attrs.get("skipped", [])),
    )


def write_trace_page(result: Any, out_dir: Path | str) -> Path:
    """`out_dir`/trace.html and the plotly.min.js it loads; the folder is made where missing."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "plotly.min.js").write_text(plotly.offline.get_plotlyjs(), encoding="utf-8")
    page = out / PAGE
    page.write_text(trace_page(result, out_dir=out), encoding="utf-8")
    return page
