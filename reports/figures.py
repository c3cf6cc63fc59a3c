"""Plotly figures, built only from the frames of reports/frames.py; every axis says its unit.

Plotly renders a subset of HTML in trace names and hover text, so user-supplied strings (impl names, curve
names) are HTML-escaped here and show as text.
"""

from __future__ import annotations

import html

import pandas as pd
import plotly.graph_objects as go

FONT = "-apple-system, BlinkMacSystemFont, 'Segoe UI', Helvetica, Arial, sans-serif"
TERM_STYLE = {  # series → (colour, width)
    "roof": ("#111827", 3.5),
    "compute": ("#2563eb", 1.5),
    "HBM": ("#7c3aed", 1.5),
    "link": ("#d97706", 1.5),
    "latency": ("#6b7280", 1.5),
}
PALETTE = ("#0f766e", "#be123c", "#4338ca", "#a16207", "#0369a1", "#9333ea", "#15803d", "#c2410c", "#475569")
TIME_AXIS = {"type": "log", "title": "time (s)", "exponentformat": "SI", "ticksuffix": "s"}
SIZE_AXIS = {"type": "log", "title": "size (bytes)", "exponentformat": "SI", "ticksuffix": "B"}
BANDWIDTH_AXIS = {
    "title": "bandwidth (B/s, one direction)",
    "exponentformat": "SI",
    "ticksuffix": "B/s",
    "rangemode": "tozero",
}


def _escape(values: pd.Series) -> list[str]:
    return [html.escape(str(v)) for v in values]


def _layout(fig: go.Figure, title: str, **axes: dict) -> go.Figure:
    fig.update_layout(
        title={"text": html.escape(title), "font": {"size": 15}},
        template="plotly_white",
        font={"family": FONT, "size": 12, "color": "#1f2937"},
        margin={"l": 70, "r": 20, "t": 50, "b": 55},
        legend={"font": {"size": 11}},
        hovermode="closest",
        **axes,
    )
    return fig


def roofline_figure(roof: pd.DataFrame, measured: pd.DataFrame, *, title: str = "") -> go.Figure:
    """Time against size, log-log: the roof and each term as lines, predictions dashed, measurements as markers.

    roof: roofline_frame(...); measured: records_frame rows of one problem (x = comm_bytes, y = median_s).
    """
    fig = go.Figure()
    for series, frame in roof[roof["kind"] != "prediction"].groupby("series", sort=False):
        colour, width = TERM_STYLE.get(series, ("#6b7280", 1.5))
        dash = "solid" if series == "roof" else "dot"
        fig.add_trace(
            go.Scatter(
                x=frame["x"],
                y=frame["t_s"],
                name=html.escape(series),
                mode="lines",
                line={"color": colour, "width": width, "dash": dash},
            )
        )
    predictions = roof[roof["kind"] == "prediction"].groupby("series", sort=True)
    for i, (series, frame) in enumerate(predictions):
        fig.add_trace(
            go.Scatter(
                x=frame["x"],
                y=frame["t_s"],
                name=html.escape(series),
                mode="lines",
                line={"color": PALETTE[i % len(PALETTE)], "width": 1.5, "dash": "dash"},
            )
        )
    timed = measured[measured["median_s"].notna() & measured["comm_bytes"].notna()]
    for i, (impl, frame) in enumerate(timed.groupby("impl", sort=True)):
        custom = list(
            zip(
                _escape(frame["impl"]),
                frame["p10_s"],
                frame["p90_s"],
                frame["world_size"].astype(str),
                _escape(frame["status"]),
                _escape(frame["shape"]),
                strict=True,
            )
        )
        fig.add_trace(
            go.Scatter(
                x=frame["comm_bytes"],
                y=frame["median_s"],
                name=html.escape(str(impl)),
                mode="markers",
                marker={
                    "size": 10,
                    "symbol": "diamond",
                    "color": PALETTE[-1 - i % len(PALETTE)],
                    "line": {"width": 1, "color": "#111827"},
                },
                error_y={
                    "type": "data",
                    "symmetric": False,
                    "array": frame["p90_s"] - frame["median_s"],
                    "arrayminus": frame["median_s"] - frame["p10_s"],
                    "thickness": 1,
                },
                customdata=custom,
                hovertemplate="<b>%{customdata[0]}</b> (%{customdata[5]})<br>median %{y:.3s}s<br>"
                "p10–p90 %{customdata[1]:.3s}s – %{customdata[2]:.3s}s<br>size %{x:.3s}B<br>"
                "world size %{customdata[3]}, %{customdata[4]}<extra></extra>",
            )
        )
    return _layout(fig, title, xaxis=SIZE_AXIS, yaxis=TIME_AXIS)


def bandwidth_figure(curves: pd.DataFrame, model: pd.DataFrame, *, mechanism: str, sweep: str) -> go.Figure:
    """One mechanism's samples (median, p10–p90 error bars) and its model line, against size or CTA count."""
    fig = go.Figure()
    samples = curves[(curves["mechanism"] == mechanism) & (curves["sweep"] == sweep)]
    colors = {}
    for i, (curve, frame) in enumerate(samples.groupby("curve", sort=True)):
        colors[curve] = PALETTE[i % len(PALETTE)]
        fig.add_trace(
            go.Scatter(
                x=frame["x"],
                y=frame["bandwidth_Bps"],
                name=html.escape(str(curve)),
                mode="markers",
                marker={"size": 7, "color": colors[curve]},
                error_y={
                    "type": "data",
                    "symmetric": False,
                    "thickness": 1,
                    "array": frame["bandwidth_hi_Bps"] - frame["bandwidth_Bps"],
                    "arrayminus": frame["bandwidth_Bps"] - frame["bandwidth_lo_Bps"],
                },
                customdata=list(zip(frame["p10_s"], frame["median_s"], frame["p90_s"], strict=True)),
                hovertemplate="%{y:.3s}B/s at %{x:.3s}<br>time p10 %{customdata[0]:.3s}s, median "
                "%{customdata[1]:.3s}s, p90 %{customdata[2]:.3s}s<extra>%{fullData.name}</extra>",
            )
        )
    fitted = model[(model["mechanism"] == mechanism) & (model["sweep"] == sweep)]
    lines = list(fitted.groupby(["basis", "curve"], sort=True))
    for (basis, curve), frame in lines:  # several fits (NCCL: one per collective) take their samples' colour
        fig.add_trace(
            go.Scatter(
                x=frame["x"],
                y=frame["bandwidth_Bps"],
                mode="lines",
                name=f"model ({basis})" if len(lines) == 1 else html.escape(f"model ({basis}): {curve}"),
                line={"color": colors.get(curve, "#111827") if len(lines) > 1 else "#111827", "width": 2},
                hovertemplate="model %{y:.3s}B/s at %{x:.3s}<extra></extra>",
            )
        )
    if sweep == "size":
        what = "bus bandwidth (link bytes / time, as nccl-tests)" if mechanism == "nccl" else "bandwidth"
        return _layout(fig, f"{mechanism}: {what} vs size", xaxis=SIZE_AXIS, yaxis=BANDWIDTH_AXIS)
    ctas_axis = {"title": "CTAs moving data (count)", "rangemode": "tozero"}
    return _layout(fig, f"{mechanism}: bandwidth vs CTAs", xaxis=ctas_axis, yaxis=BANDWIDTH_AXIS)


def fraction_histogram(index: pd.DataFrame) -> go.Figure:
    """The references' fraction of roofline (t_roof / t_measured), in 5% bins, with a line at 50%."""
    fractions = index["reference_fraction"].dropna()
    fig = go.Figure(
        go.Histogram(
            x=fractions,
            name="references",
            xbins={"start": 0.0, "size": 0.05},
            marker={"color": "#64748b", "line": {"color": "#ffffff", "width": 1}},
            hovertemplate="%{x} of roofline: %{y} problems<extra></extra>",
        )
    )
    fig.add_vline(x=0.5, line={"color": "#b42318", "dash": "dash", "width": 1.5}, annotation_text="50%")
    return _layout(
        fig,
        "References: fraction of roofline",
        xaxis={"title": "fraction of roofline (t_roof / t_measured)", "tickformat": ".0%", "rangemode": "tozero"},
        yaxis={"title": "problems (count)"},
        bargap=0.05,
        showlegend=False,
    )
