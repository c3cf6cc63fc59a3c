"""Plotly figures, built only from the frames of reports/frames.py; every axis says its unit.

Plotly renders a subset of HTML in trace names and hover text, so user-supplied strings (impl names, curve
names) are HTML-escaped here and show as text.
"""

from __future__ import annotations

import html
import math

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from pkroof.rooflines.units import fmt_bytes

FONT = "-apple-system, BlinkMacSystemFont, 'Segoe UI', Helvetica, Arial, sans-serif"
TERM_STYLE = {  # series → (colour, width)
    "roof": ("#111827", 3.5),
    "compute": ("#2563eb", 1.5),
    "HBM": ("#7c3aed", 1.5),
    "link": ("#d97706", 1.5),
    "latency": ("#6b7280", 1.5),
}
TIER_STYLE = {"scale-up": "#d97706", "scale-out": "#15803d"}  # the link colour; the NICs' green in the diagram
PALETTE = ("#0f766e", "#be123c", "#4338ca", "#a16207", "#0369a1", "#9333ea", "#15803d", "#c2410c", "#475569")
TIME_AXIS = {"type": "log", "title": "time (s)", "exponentformat": "SI", "ticksuffix": "s"}
SIZE_AXIS = {"type": "log", "title": "size (bytes)"}  # ticks in binary units (size_axis), as the tables
FLOPS_AXIS = {"type": "log", "title": "FLOPs per rank", "exponentformat": "SI"}
BANDWIDTH_AXIS = {
    "title": "bandwidth (B/s, one direction)",
    "exponentformat": "SI",
    "ticksuffix": "B/s",
    "rangemode": "tozero",
}


def _escape(values: pd.Series) -> list[str]:
    return [html.escape(str(v)) for v in values]


def size_axis(sizes: pd.Series | list[float]) -> dict:
    """A log axis of bytes with ticks at powers of 2 labelled as the tables label sizes (256 KiB, 1 GiB), not
    plotly's decimal kB and MB."""
    values = [float(v) for v in sizes if v and v > 0 and math.isfinite(v)]
    if not values:
        return SIZE_AXIS
    low, high = math.floor(math.log2(min(values))), math.ceil(math.log2(max(values)))
    step = max(1, math.ceil((high - low) / 10))
    ticks = [2.0**e for e in range(low, high + 1, step)]
    return SIZE_AXIS | {"tickvals": ticks, "ticktext": [fmt_bytes(t) for t in ticks]}


def _layout(fig: go.Figure, title: str = "", **axes: dict) -> go.Figure:
    """The house style. Titles are the page's (HTML above the chart, clear of plotly's toolbar), not plotly's."""
    del title
    fig.update_layout(
        template="plotly_white",
        font={"family": FONT, "size": 12, "color": "#1f2937"},
        margin={"l": 70, "r": 20, "t": 30, "b": 55},
        legend={"font": {"size": 11}},
        hovermode="closest",
        **axes,
    )
    return fig


def roofline_figure(roof: pd.DataFrame, measured: pd.DataFrame, *, title: str = "", x: str = "comm_bytes") -> go.Figure:
    """Time against size (or against FLOPs, for shapes without a size), log-log: the roof and each term as lines
    through every analysed point, predictions dashed, measurements as markers.

    roof: roofline_frame(...); measured: records_frame rows of one problem measured on GPUs (x = its column `x`,
    comm_bytes or flops; y = median_s).
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
                mode="lines" if len(frame) > 1 else "lines+markers",  # one shape: a line of one point shows nothing
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
                mode="lines" if len(frame) > 1 else "lines+markers",
                line={"color": PALETTE[i % len(PALETTE)], "width": 1.5, "dash": "dash"},
            )
        )
    timed = measured[measured["median_s"].notna() & measured[x].notna()]
    for i, (impl, frame) in enumerate(timed.groupby("impl", sort=True)):
        custom = list(
            zip(
                _escape(frame["impl"]),
                frame["p10_s"],
                frame["p90_s"],
                frame["world_size"].astype(str),
                _escape(frame["status"]),
                _escape(frame["shape"]),
                [fmt_bytes(v) for v in frame["comm_bytes"]],
                strict=True,
            )
        )
        fig.add_trace(
            go.Scatter(
                x=frame[x],
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
                "p10–p90 %{customdata[1]:.3s}s – %{customdata[2]:.3s}s<br>size %{customdata[6]}<br>"
                "world size %{customdata[3]}, %{customdata[4]}<extra></extra>",
            )
        )
    axis = FLOPS_AXIS if x == "flops" else size_axis([*roof["x"], *timed[x]])
    return _layout(fig, title, xaxis=axis, yaxis=TIME_AXIS)


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
                hovertemplate="%{y:.3s}B/s at %{text}<br>time p10 %{customdata[0]:.3s}s, median "
                "%{customdata[1]:.3s}s, p90 %{customdata[2]:.3s}s<extra>%{fullData.name}</extra>",
                text=[fmt_bytes(v) for v in frame["x"]] if sweep == "size" else [f"{v:.0f} CTAs" for v in frame["x"]],
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
        axis = size_axis([*samples["x"], *fitted["x"]])
        return _layout(fig, f"{mechanism}: {what} vs size", xaxis=axis, yaxis=BANDWIDTH_AXIS)
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


def _points(fig: go.Figure, frame: pd.DataFrame, x: str, y: str, **where: int) -> None:
    """Each implementation's measured points (a colour each), its shape and time in the hover."""
    for i, (impl, rows) in enumerate(frame.groupby("impl", sort=True)):
        fig.add_trace(
            go.Scatter(
                x=rows[x],
                y=rows[y],
                name=html.escape(str(impl)),
                legendgroup=html.escape(str(impl)),
                showlegend=where.get("col", 1) == 1,
                mode="markers",
                marker={
                    "size": 11,
                    "symbol": "diamond",
                    "color": PALETTE[i % len(PALETTE)],
                    "line": {"width": 1, "color": "#111827"},
                },
                customdata=list(zip(_escape(rows["impl"]), _escape(rows["shape"]), rows["median_s"], strict=True)),
                hovertemplate="<b>%{customdata[0]}</b> (%{customdata[1]})<br>%{y:.3s} at %{x:.3g}<br>"
                "median %{customdata[2]:.3s}s<extra></extra>",
            ),
            **where,
        )


def _roof_line(fig: go.Figure, xs: list[float], ys: list[float], name: str, colour: str, **where: int) -> None:
    shown = any(t.name == name for t in fig.data)  # one legend entry per roof, whichever panel draws it first
    fig.add_trace(
        go.Scatter(x=xs, y=ys, name=name, mode="lines", line={"color": colour, "width": 2.5},
                   legendgroup=name, showlegend=not shown, hoverinfo="skip"),
        **where,
    )  # fmt: skip


def _span(values: pd.Series) -> list[float]:
    good = [v for v in values if v > 0 and math.isfinite(v)]
    low, high = (min(good), max(good)) if good else (1.0, 1.0)
    return [2.0 ** (math.log2(low) + i * (math.log2(high) - math.log2(low) + 8) / 48 - 4) for i in range(49)]


def intensity_figure(points: pd.DataFrame, shapes: pd.DataFrame) -> go.Figure:
    """Nsight Compute's roofline: achieved FLOP/s against FLOPs per HBM byte (left) and per link byte (right),
    log-log; the compute roof (the dtype's peak) flat, the HBM and link roofs rising as intensity × bandwidth; each
    measured implementation a marker, each shape's own roof (FLOPs / t_roof) a ring. No point can sit above the
    lower of the roofs at its intensity: a measured time is never below t_roof.

    points: intensity_frame(...) rows; shapes: shapes_frame(...) rows."""
    link = shapes["link_intensity"].notna().any() if len(shapes) else False
    fig = make_subplots(rows=1, cols=2 if link else 1, horizontal_spacing=0.1)
    peak = float(shapes["peak_flops"].max()) if len(shapes) else math.nan
    names = [html.escape(s) or "a shape of the sweep" for s in shapes["shape"]]
    panels = [(1, "hbm_intensity", "hbm_bandwidth_Bps", "HBM", "#7c3aed")]
    if link:
        panels.append((2, "link_intensity", "link_bandwidth_Bps", "link", "#d97706"))
    for col, x, bw, name, colour in panels:
        xs = _span(pd.concat([shapes[x], points[x]]))
        rate = float(shapes[bw].max())
        _roof_line(fig, xs, [peak] * len(xs), "compute roof", TERM_STYLE["compute"][0], row=1, col=col)
        _roof_line(fig, xs, [v * rate for v in xs], f"{name} roof", colour, row=1, col=col)
        fig.add_trace(
            go.Scatter(
                x=shapes[x], y=shapes["roof_flops"], mode="markers", name="each shape's roof (FLOPs / t_roof)",
                legendgroup="roof", showlegend=col == 1, text=names,
                marker={"size": 12, "symbol": "circle-open", "color": "#111827", "line": {"width": 2}},
                hovertemplate="roof of %{text}: %{y:.3s}FLOP/s at %{x:.3g}<extra></extra>",
            ),
            row=1, col=col,
        )  # fmt: skip
        _points(fig, points, x, "achieved_flops", row=1, col=col)
        fig.update_xaxes(type="log", title_text=f"FLOPs per {name} byte (per rank)", row=1, col=col)
        span = _log_range([*points["achieved_flops"], *shapes["roof_flops"]], peak)
        fig.update_yaxes(type="log", title_text="achieved FLOP/s" if col == 1 else "", exponentformat="SI",
                         ticksuffix="FLOP/s", range=span, row=1, col=col)  # fmt: skip
    return _layout(fig)


def _log_range(values: list[float], top: float) -> list[float]:
    """A log axis from a third of the lowest value to three times `top` (the highest roof that matters)."""
    good = [v for v in values if v > 0 and math.isfinite(v)]
    low = min([*good, top / 1e3])  # three decades at least: one shape's roof alone is no range
    return [math.log10(low / 3), math.log10(top * 3)]


def collective_roofline_figure(roofs: pd.DataFrame, points: pd.DataFrame) -> go.Figure:
    """A collective's roofline as bandwidth: link bytes per rank per second against its size, log-log; the link
    roof flat, the latency roof rising with size, the HBM roof, and what can be attained (over t_roof) as lines;
    each measured implementation a marker.

    roofs: bandwidth_roof_frame(sweep); points: intensity_frame(...) rows (achieved_link_Bps at size_bytes)."""
    fig = go.Figure()
    styles = {"roof": ("#111827", 3.5, "solid"), "link": ("#d97706", 1.5, "dot"), "HBM": ("#7c3aed", 1.5, "dot"),
              "latency": ("#6b7280", 1.5, "dot")}  # fmt: skip
    for series, rows in roofs.groupby("series", sort=False):
        colour, width, dash = styles.get(series, ("#6b7280", 1.5, "dot"))
        label = "attainable (link bytes / t_roof)" if series == "roof" else f"{series} roof"
        fig.add_trace(
            go.Scatter(x=rows["size_bytes"], y=rows["Bps"], name=label, mode="lines",
                       line={"color": colour, "width": width, "dash": dash}, hoverinfo="skip")
        )  # fmt: skip
    _points(fig, points, "size_bytes", "achieved_link_Bps")
    axis = size_axis([*roofs["size_bytes"], *points["size_bytes"]])
    link = roofs[roofs["series"] == "link"]["Bps"]
    top = float(link.max()) if len(link) else float(roofs["Bps"].max())
    span = _log_range([*roofs[roofs["series"] == "roof"]["Bps"], *points["achieved_link_Bps"]], top)
    title = "link bytes per rank per second (one direction)"
    yaxis = BANDWIDTH_AXIS | {"type": "log", "rangemode": "normal", "title": title, "range": span}
    return _layout(fig, xaxis=axis, yaxis=yaxis)


def crossover_figure(terms: pd.DataFrame, *, network_from: int | None, fabric: str) -> go.Figure:
    """The bound's terms against the number of nodes, log-log: the roof, compute, HBM and latency as the time chart
    draws them, and the link term of each tier (scale-up over the node's `fabric`, scale-out over the network) bold;
    a dashed vertical line at `network_from`, where the scale-out term first exceeds the scale-up one.

    terms: nodes_frame(...) rows."""
    fig = go.Figure()
    names = {"scale-up": f"scale-up ({fabric})", "scale-out": "scale-out (network)"}
    for series, rows in terms.groupby("series", sort=False):
        if series in TIER_STYLE:
            line = {"color": TIER_STYLE[series], "width": 2.5}
        else:
            colour, width = TERM_STYLE.get(series, ("#6b7280", 1.5))
            line = {"color": colour, "width": width, "dash": "solid" if series == "roof" else "dot"}
        label = html.escape(names.get(series, series))
        fig.add_trace(
            go.Scatter(
                x=rows["nodes"],
                y=rows["t_s"],
                name=label,
                mode="lines+markers",
                line=line,
                marker={"size": 6},
                hovertemplate=f"{label}: %{{y:.3s}}s at %{{x}} nodes<extra></extra>",
            )
        )
    if network_from is not None and len(terms):  # a trace, not a shape: a log axis places it where its value says
        low, high = float(terms["t_s"].min()), float(terms["t_s"].max())
        fig.add_trace(
            go.Scatter(
                x=[network_from, network_from],
                y=[low, high],
                name=f"network-bound from {network_from} nodes",
                mode="lines",
                line={"color": TIER_STYLE["scale-out"], "dash": "dash", "width": 1.5},
                hoverinfo="skip",
            )
        )
    nodes = sorted(set(terms["nodes"]))
    xaxis = {"type": "log", "title": "nodes", "tickvals": nodes, "ticktext": [str(n) for n in nodes]}
    return _layout(fig, xaxis=xaxis, yaxis=TIME_AXIS | {"dtick": "D2"})  # 2 and 5 labelled, not every digit
