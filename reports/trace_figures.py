"""The trace page's tables and figures, from `pkroof trace`'s frames (docs/trace.md: kernels, steps): each step's
time split into what filled it, and the kernels that took the most time against their roofs."""

from __future__ import annotations

import html

import pandas as pd
import plotly.graph_objects as go

from .figures import _layout

# a step's wall time, split so that the parts add up to it (per rank, then the mean over ranks): compute no
# communication overlaps, communication under compute (overlapped), communication under no compute (exposed),
# time only copies or memsets fill, and time no kernel fills (idle)
STEP_PARTS = (
    ("compute_only_s", "compute", "#0f766e"),
    ("overlapped_s", "overlapped comm", "#f59e0b"),
    ("exposed_s", "exposed comm", "#b42318"),
    ("copy_only_s", "copies, memsets", "#9333ea"),
    ("idle_s", "idle", "#d1d5db"),
)
CATEGORY_COLOURS = {
    "communication": "#d97706",
    "gemm": "#0f766e",
    "attention": "#4338ca",
    "memory": "#0369a1",
    "copy": "#9333ea",
    "memset": "#c2410c",
    "other": "#475569",
}
TOP_KERNELS = 20  # kernels charted and listed: the most time, summed over ranks and steps


def step_parts(steps: pd.DataFrame) -> pd.DataFrame:
    """One row per step: STEP_PARTS' columns and wall_s, each the mean over the ranks that ran the step, and
    `ranks` (how many). compute_only = compute − overlapped; overlapped = communication − exposed (the part of
    communication some compute covers); copy_only = wall − compute − exposed − idle (what only copies fill)."""
    s = steps.dropna(subset=["step"]).copy()
    s["overlapped_s"] = s["communication_s"] - s["exposed_communication_s"]
    s["compute_only_s"] = s["compute_s"] - s["overlapped_s"]
    s["exposed_s"] = s["exposed_communication_s"]
    s["copy_only_s"] = (s["wall_s"] - s["compute_s"] - s["exposed_s"] - s["idle_s"]).clip(lower=0.0)
    columns = [c for c, _, _ in STEP_PARTS] + ["wall_s"]
    out = s.groupby("step", sort=True)[columns].mean()
    out["ranks"] = s.groupby("step", sort=True)["rank"].nunique()
    return out.reset_index()


def step_figure(parts: pd.DataFrame) -> go.Figure:
    """Stacked bars, one per step: what filled its wall time (the mean over ranks)."""
    labels = [f"step {int(s)}" for s in parts["step"]]
    fig = go.Figure()
    for column, name, colour in STEP_PARTS:
        fig.add_trace(
            go.Bar(
                x=labels,
                y=parts[column],
                name=name,
                marker={"color": colour},
                hovertemplate=f"%{{x}}: {name} %{{y:.4s}}s<extra></extra>",
            )
        )
    return _layout(
        fig,
        "Steps",
        barmode="stack",
        xaxis={"title": "step (ProfilerStep#N)", "type": "category"},
        yaxis={"title": "time per rank (s, mean over ranks)", "exponentformat": "SI", "ticksuffix": "s"},
    )


def top_kernels(kernels: pd.DataFrame, top: int = TOP_KERNELS) -> pd.DataFrame:
    """The `top` kernels (by name and category) with the most time summed over every rank and step: count, time_s,
    and fraction_of_roof time-weighted over the instances that have a roof (Σ t_roof / Σ duration), worst_fraction
    the lowest instance's; busbw_GBps the median (collectives)."""
    k = kernels.assign(time_s=kernels["dur_us"] * 1e-6)
    roofed = k["t_roof_s"].notna() & (k["dur_us"] > 0)
    k["roofed_time_s"] = k["time_s"].where(roofed, 0.0)
    k["roof_s"] = k["t_roof_s"].where(roofed, 0.0)
    k["worst"] = k["fraction_of_roof"].where(roofed)
    grouped = k.groupby(["name", "category"], sort=False, dropna=False)
    out = grouped.agg(
        count=("time_s", "size"),
        time_s=("time_s", "sum"),
        roofed_time_s=("roofed_time_s", "sum"),
        roof_s=("roof_s", "sum"),
        worst_fraction=("worst", "min"),
        busbw_GBps=("busbw_GBps", "median"),
    ).reset_index()
    out["fraction_of_roof"] = (out["roof_s"] / out["roofed_time_s"]).where(out["roofed_time_s"] > 0)
    out = out.sort_values("time_s", ascending=False, kind="stable").head(top)
    return out.drop(columns=["roofed_time_s", "roof_s"]).reset_index(drop=True)


def _short(name: str, most: int = 48) -> str:
    return name if len(name) <= most else name[: most - 1] + "…"


def kernel_figure(top: pd.DataFrame) -> go.Figure:
    """The top kernels' fraction of roof as horizontal bars (the most time at the top), coloured by category; a
    kernel without a roof has no bar. Names are HTML-escaped: plotly renders some HTML in labels."""
    fig = go.Figure()
    rows = top.iloc[::-1]  # plotly draws the first category at the bottom
    labels = [f"{i + 1}. {html.escape(_short(str(n)))}" for i, n in reversed(list(enumerate(top["name"])))]
    for category, colour in CATEGORY_COLOURS.items():
        mine = rows["category"] == category
        if not mine.any():
            continue
        fig.add_trace(
            go.Bar(
                x=rows["fraction_of_roof"].where(mine),
                y=labels,
                orientation="h",
                name=category,
                marker={"color": colour},
                customdata=rows["time_s"],
                hovertemplate="%{y}: %{x:.0%} of roof, %{customdata:.4s}s in all<extra></extra>",
            )
        )
    fig.add_vline(x=1.0, line={"color": "#111827", "width": 1.5}, annotation_text="roof")
    _layout(
        fig,
        "Kernels: fraction of roof",
        barmode="overlay",
        xaxis={"title": "fraction of roof (t_roof / time, time-weighted)", "tickformat": ".0%", "range": [0, 1.08]},
        yaxis={"type": "category", "automargin": True},
    )
    return fig.update_layout(margin={"l": 20})  # the names' own width: automargin makes room for them


def rank_totals(steps: pd.DataFrame) -> pd.DataFrame:
    """Per rank, the job's totals: every column of the steps frame summed over its steps."""
    columns = ["wall_s", "compute_s", "communication_s", "exposed_communication_s", "idle_s"]
    out = steps.groupby("rank", sort=True)[columns].sum()
    out["steps"] = steps.groupby("rank", sort=True)["step"].nunique()
    return out.reset_index()
