"""The report's pages, assembled: the index, one page per problem, the topology; each from the DataFrames and figures
of its typed results (frames.py, figures.py) into its template (reports/templates, render.py).

Every page loads `plotly.min.js` from its own folder (no network). A figure is embedded as its JSON, in which
plotly escapes `<`, `>` and `/`, so no string inside it can close the script element.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

import pandas as pd
import plotly.graph_objects as go
import plotly.io as pio
from markupsafe import Markup, escape

from pkroof.records.report_data import Crossover, Page

from . import figures, frames
from .diagram import topology_svg
from .render import render, shown, value_text

if TYPE_CHECKING:
    from pkroof.topology import Topology

# a shape without advice (nothing to communicate on one GPU): its Advice row shows "—" for each field
NO_ADVICE = SimpleNamespace(mechanism=None, protocol=None, schedule=None, comm_sms=None, t_s=None, baseline_t_s=None,
                            headroom=None, reason=None)  # fmt: skip


TERMS = (("compute_s", "compute"), ("hbm_s", "HBM"), ("link_s", "link"), ("latency_s", "latency"))
TIERS = ("scale-up", "scale-out")  # the link term of each, on a bound across nodes


def figure_html(fig: go.Figure, div_id: str, title: str = "", note: str = "", *, wide: bool = False) -> Markup:
    """A div and the script that draws `fig` into it with the page's plotly.min.js, its title and note as HTML
    above and below it (plotly's own title sat under its toolbar)."""
    assert div_id.replace("-", "").isalnum(), div_id  # ids are generated here, never user text
    data = pio.to_json(fig, validate=False)  # plotly escapes < > / in strings
    config = '{"displaylogo": false, "responsive": true}'
    head = f'<h3 class="chart-title">{escape(title)}</h3>\n' if title else ""
    tail = f'<p class="chart-note">{escape(note)}</p>\n' if note else ""
    return Markup(
        f'{head}<div id="{div_id}" class="chart{" wide" if wide else ""}"></div>\n'
        f'<script>Plotly.newPlot("{div_id}", Object.assign({data}, {{config: {config}}}));'
        f'narrow("{div_id}");</script>\n{tail}'
    )


def _rows(frame: pd.DataFrame) -> list[dict[str, Any]]:
    return frame.astype(object).where(frame.notna(), None).to_dict("records")


def index_page(
    index: pd.DataFrame,
    *,
    pages: Mapping[str, str],
    topology: str,
    num_runs: int = 0,
    left_out: Mapping[str, str] | None = None,
    others: Mapping[str, str] | None = None,
    assets: str = "",
    superseded: int = 0,
) -> str:
    """The index: the histogram (where references were measured on GPUs) and a sortable table of problems; `pages`
    maps a problem name to its file name, `num_runs` counts the measured records, `left_out` names each problem
    without a page and why, `others` maps another machine's name to its own (analytic) report's index, relative to
    this one; `superseded` counts the records a later run of the same replaced (the page says so)."""
    measured = index["reference_fraction"].notna().any()
    histogram = figures.fraction_histogram(index)
    return render(
        "index",
        "report",
        assets=assets,
        others=others or {},
        index=_rows(index.sort_values(["problem", "t_roof_s"], kind="stable").assign(_order=range(len(index)))),
        problems=sorted(set(index["problem"])),
        pages=pages,
        topology=topology,
        num_runs=num_runs,
        left_out=left_out or {},
        superseded=superseded,
        cpu_rows=int(index["on_cpu"].fillna(False).astype(bool).sum()) if "on_cpu" in index else 0,
        histogram=figure_html(histogram, "histogram", "References: fraction of roofline") if measured else "",
    )


def _environment(records: pd.DataFrame, command: str) -> list[tuple[str, str]]:
    """One line per environment field: its distinct values across the problem's records."""
    labels = {"gpu": "GPU", "driver": "driver", "cuda": "CUDA", "nccl": "NCCL", "torch": "torch", "triton": "triton"}
    labels |= {"settings": "settings", "host": "host"}
    labels |= {"backend": "backend", "topology": "topology", "date": "date"}
    out = []
    for column, label in labels.items():
        values = [v for v in dict.fromkeys(records[column]) if v and v != "None"]  # older records: str(None)
        missing = "defaults" if column == "settings" else "not recorded"  # PKROOF_* variables, when any were set
        out.append((label, ", ".join(values) or missing))
    commands = [v for v in dict.fromkeys(records["command"]) if v] if "command" in records else []
    out.append(("command", command or ", ".join(commands) or "not recorded"))
    return out


def _shapes(page: Page) -> list[SimpleNamespace]:
    """The page's analysed shapes, smallest roof first, each with its parameters as "k=v, ..." text."""
    out = []
    for shape in page.shapes:
        params = shape.params or shape.bound.params
        text = ", ".join(f"{k}={v}" for k, v in params.items()) if isinstance(params, Mapping) else ""
        advice = shape.advice or NO_ADVICE
        out.append(SimpleNamespace(label=shape.label, world_size=shape.world_size, bound=shape.bound, advice=advice,
                                   params=text))  # fmt: skip

    def order(s: SimpleNamespace) -> tuple:
        t = s.bound.t_roof_s
        return (0, t) if math.isfinite(t) else (1, 0.0)

    return sorted(out, key=order)


def _ordered(records: pd.DataFrame) -> pd.DataFrame:
    """The implementations table's rows: smallest shape first (by its communication, then its roof: never by the
    label's text, where "1 GiB" sorts before "256 KiB"), the reference first within a shape, then fastest first;
    `_order` is that order, the shape column's sort key."""
    keyed = records.assign(
        _size=records["comm_bytes"].fillna(0.0),
        _roof=records["t_roof_s"].fillna(0.0),
        _ref=records["impl"] != "reference",
    )
    ordered = keyed.sort_values(["_size", "_roof", "shape", "_ref", "median_s"], na_position="last")
    return ordered.drop(columns=["_size", "_roof", "_ref"]).assign(_order=range(len(ordered)))


def _problem_charts(records: pd.DataFrame, page: Page) -> tuple[str, Markup, Markup]:
    """(the time chart's title, the time chart, the roofline chart) of one problem, GPU measurements only."""
    gpu = records[~frames.on_cpu_ranks(records)] if len(records) else records
    x = frames.chart_x(page)
    flops = {(shape.label, shape.world_size): float(shape.bound.flops or 0.0) for shape in page.shapes}
    keys = zip(gpu["shape"], [None if pd.isna(w) else int(w) for w in gpu["world_size"]], strict=True)
    measured = gpu.assign(flops=[flops.get(k, math.nan) for k in keys])
    roof = frames.roofline_frame(page.sweep, x="flops" if x == "flops" else "size_bytes")
    time_fig = figures.roofline_figure(roof, measured, x="flops" if x == "flops" else "comm_bytes")
    if x == "flops":
        title = "Time against FLOPs per rank: each shape's roof, predictions and measurements"
        note = "One point per shape (named or measured), joined by lines; each measurement sits at its own shape."
    else:
        title = "Time against size: the roof, its terms, every prediction and the measurements"
        note = "Sizes in nccl-tests' convention; the roof passes through every measured size."
    chart = figure_html(time_fig, "roofline", title, note, wide=True)
    points = frames.intensity_frame(gpu, page.shapes)
    shapes = frames.shapes_frame(page.shapes, page.sweep)
    if len(shapes) and (shapes["flops"] > 0).any():
        fig = figures.intensity_figure(points, shapes[shapes["flops"] > 0])
        said = (
            "Achieved FLOP/s of each measured implementation against its shape's FLOPs per byte of HBM and of link "
            "traffic (per rank): no point can rise above the lower roof at its intensity."
        )
        roofline = figure_html(fig, "intensity", "Achieved FLOP/s against arithmetic intensity", said, wide=True)
    elif len({p.size_bytes for p in page.sweep if p.link_bytes}) > 1 or (
        len(points) and any(p.link_bytes for p in page.sweep)
    ):
        # its roofs are lines through the sweep's sizes: one size and no measurement would draw an empty chart
        fig = figures.collective_roofline_figure(frames.bandwidth_roof_frame(page.sweep), points)
        said = (
            "No FLOPs: each measured implementation's link bytes per rank per second against its size, under the link "
            "roof, the latency roof (link bytes / the latency term) and the HBM roof."
        )
        roofline = figure_html(fig, "intensity", "Achieved bandwidth against size", said, wide=True)
    else:
        roofline = Markup("")
    return title, chart, roofline


def crossover_sentence(crossover: Crossover) -> str:
    """Where the link term moves from the node's fabric to the network, in words: "NVLink-bound up to 8 nodes,
    network-bound from 16.", "Network-bound from 2 nodes.", or "NVLink-bound at every size shown (1 to 1024
    nodes).": the scale-out term first exceeds the scale-up one at `network_from` nodes (None: at none shown)."""
    nodes = [p.nodes for p in crossover.points]
    first, fabric = crossover.network_from, crossover.fabric or "scale-up"
    if first is None:
        return f"{fabric}-bound at every size shown ({nodes[0]} to {nodes[-1]} nodes)."
    before = [n for n in nodes if 1 < n < first]
    if not before:
        return f"Network-bound from {first} nodes."
    return f"{fabric}-bound up to {before[-1]} nodes, network-bound from {first}."


def _crossover_chart(crossover: Crossover | None) -> Markup:
    """The bound's terms against the number of nodes, and where the network takes over the link term, in a sentence
    under the chart; where fewer than two node counts could be bounded, why, in one line. Nothing without a
    network."""
    if crossover is None:
        return Markup("")
    points, left_out = crossover.points, crossover.left_out
    if len(points) < 2 or not any(p.nodes > 1 for p in points):
        return Markup(f'<p class="na">Not drawn: {escape(left_out)}.</p>\n')
    fig = figures.crossover_figure(
        frames.nodes_frame(points), network_from=crossover.network_from, fabric=crossover.fabric
    )
    what = f"at {crossover.shape}, {crossover.ranks_per_node} ranks a node"
    title = f"The bound's terms against the number of nodes ({what})"
    said = crossover_sentence(crossover)
    said += " The scale-up term is the node's own links, the scale-out term each GPU's share of its node's NICs."
    chart = figure_html(fig, "crossover", title, said, wide=True)
    return chart + (Markup(f'<p class="chart-note">{escape(left_out)}.</p>\n') if left_out else Markup(""))


# the implementations table's columns shown only where some record has a value (CPU ranks have none of them)
OPTIONAL_COLUMNS = (
    "fraction_of_roofline",
    "speedup_vs_reference",
    "predicted_s",
    "prediction_error",
    "achieved_link_Bps",
    "sm_clock_mhz",
)


def problem_page(name: str, *, records: pd.DataFrame, page: Page | None = None, assets: str = "") -> str:
    """One problem: its roofline charts, its bound and advice per shape, the implementations and the environment;
    an analytic page (no records) has no implementations table.

    records: records_frame rows of this problem; page: its analysed shapes, sweep and crossover (None: it has
    records but could not be bounded).
    """
    page = page or Page(name, category="", doc="")
    time_title, chart, roofline = _problem_charts(records, page)
    timed_on_cpu = frames.on_cpu_ranks(records) & records["median_s"].notna()
    shapes = _shapes(page)
    across_nodes = any("scale-out" in s.bound.link_terms for s in shapes)
    rows = _rows(_ordered(records)) if len(records) else []
    return render(
        "problem",
        shown(name),
        assets=assets,
        name=name,
        page=page,
        shapes=shapes,
        terms=TERMS,
        time_title=time_title.split(":")[0],
        chart=chart,
        roofline=roofline,
        crossover=_crossover_chart(page.crossover),
        fabric=page.crossover.fabric if page.crossover else "",
        tiers=TIERS if across_nodes else (),  # a bound across nodes: each tier's link term in a column of its own
        cpu_rows=int(timed_on_cpu.sum()),
        rows=rows,
        busbw=bool(records["busbw_Bps"].notna().any()) if len(records) else False,
        cols={c for c in OPTIONAL_COLUMNS if len(records) and records[c].notna().any()},  # the rest would be all "—"
        failed=[r for r in rows if r["status"] != "correct"],  # each with its reason, in a table that wraps it
        environment=_environment(records, page.command),
    )


def _basis_rows(topology: Topology) -> list[dict[str, str]]:
    records: list[tuple[str, Any]] = [("gpu", topology.gpu), ("scaleup", topology.scaleup)]
    records += [(f"mechanisms.{k}", v) for k, v in topology.mechanisms.items()]
    records += [("nic", topology.nic)] if topology.nic else []
    rows = []
    for path, record in records:
        for field, source_id in record.sources.items():
            source = topology.sources[source_id]
            value = value_text(field, getattr(record, field))
            rows.append({"path": f"{path}.{field}", "value": value, "basis": source.basis, "cite": source.cite})
    return rows


def _charts(topology: Topology) -> list[tuple[str, list[Markup]]]:
    curves = frames.curves_frame(topology)
    sizes = [2.0**e for e in range(10, 31)]  # 1 KiB .. 1 GiB
    ctas = list(range(1, topology.gpu.sm_count + 1))
    model = frames.model_frame(topology, sizes, ctas)
    out = []
    for mechanism in dict.fromkeys([*curves["mechanism"], *model["mechanism"]]):
        charts = []
        for sweep in ("size", "ctas"):
            if any(((f["mechanism"] == mechanism) & (f["sweep"] == sweep)).any() for f in (curves, model)):
                fig = figures.bandwidth_figure(curves, model, mechanism=mechanism, sweep=sweep)
                what = "bus bandwidth (link bytes / time, as nccl-tests)" if mechanism == "nccl" else "bandwidth"
                title = f"{what} against size" if sweep == "size" else "bandwidth against CTAs"
                charts.append(figure_html(fig, f"bw-{len(out)}-{sweep}", title))
        out.append((mechanism, charts))
    return out


def topology_page(topology: Topology, *, assets: str = "") -> str:
    """The node diagram, health flags, mechanism latencies and fits, bandwidth charts, measured vs nominal."""
    mechanisms = []
    for name, spec in topology.mechanisms.items():
        basis = "—"
        if "latency_s" in spec.sources:
            basis = topology.sources[spec.sources["latency_s"]].basis
        mechanisms.append({"name": name, "spec": spec, "basis": basis})
    return render(
        "topology",
        f"topology {topology.name}",
        assets=assets,
        t=topology,
        svg=topology_svg(topology),
        mechanisms=mechanisms,
        charts=_charts(topology),
        basis=_basis_rows(topology),
    )
