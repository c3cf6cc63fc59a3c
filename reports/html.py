"""HTML pages from plain data: the index, one page per problem, the topology. Jinja2 with autoescape on.

Every page loads `plotly.min.js` from its own folder (no network). A figure is embedded as its JSON, in which
plotly escapes `<`, `>` and `/`, so no string inside it can close the script element.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import pandas as pd
import plotly.graph_objects as go
import plotly.io as pio
from jinja2 import DictLoader, Environment, StrictUndefined
from markupsafe import Markup, escape

from pkroof.rooflines.units import fmt_Bps, fmt_bytes, fmt_clock, fmt_flops, fmt_s

from . import figures, frames

if TYPE_CHECKING:
    from pkroof.topology import Topology


def _missing(value: Any) -> bool:
    return value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value)) or value == ""


def _fmt(fn):
    return lambda value: "—" if _missing(value) else fn(value)


def _pct_class(fraction: Any) -> str:
    """<50% red, 50–80% amber, ≥80% green; above 105% the model is wrong (no correct run beats the roof)."""
    if _missing(fraction):
        return "na"
    return "over" if fraction > 1.05 else "good" if fraction >= 0.8 else "fair" if fraction >= 0.5 else "poor"


def _sort_key(value: Any) -> str:
    return "" if _missing(value) else repr(float(value))


def _regimes(regimes: Any) -> str:
    """A collective's regimes as "α + β" lines, smallest sizes first."""
    return " | ".join(f"{fmt_s(r.latency_s)} + {fmt_Bps(r.peak_bandwidth_Bps)}" for r in regimes)


def _value(name: str, value: Any) -> str:
    """A topology field formatted by the unit its name carries."""
    if isinstance(value, dict) and name == "collectives":
        return "; ".join(f"{k} {_regimes(rs)}" for k, rs in value.items())
    if isinstance(value, dict):
        return ", ".join(f"{k} {fmt_flops(v)}" for k, v in value.items())
    if name.endswith("_flops"):
        return fmt_flops(value)
    if name.endswith("_Bps"):
        return fmt_Bps(value)
    if name.endswith("_bytes"):
        return fmt_bytes(value)
    if name.endswith("_s"):
        return fmt_s(value)
    return str(value)


STYLE = """
:root { --ink:#1f2937; --muted:#6b7280; --rule:#e5e7eb; --bg:#ffffff; --head:#f9fafb; }
* { box-sizing: border-box; }
body { font: 14px/1.5 -apple-system, BlinkMacSystemFont, "Segoe UI", Helvetica, Arial, sans-serif;
       color: var(--ink); background: var(--bg); margin: 0; }
main { max-width: 1180px; margin: 0 auto; padding: 24px 32px 64px; }
nav { border-bottom: 1px solid var(--rule); padding: 10px 32px; font-size: 13px; }
nav a { margin-right: 18px; }
a { color: #1d4ed8; text-decoration: none; } a:hover { text-decoration: underline; }
h1 { font-size: 22px; margin: 8px 0 4px; font-weight: 600; }
h3 { font-size: 14px; margin: 20px 0 4px; font-weight: 600; color: #374151; }
h2 { font-size: 16px; margin: 32px 0 8px; font-weight: 600; border-bottom: 1px solid var(--rule); padding-bottom: 4px; }
p.sub { color: var(--muted); margin: 0 0 16px; }
code, .mono { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: 12.5px; }
table { border-collapse: collapse; width: 100%; margin: 8px 0 16px; font-variant-numeric: tabular-nums; }
th, td { padding: 6px 10px; border-bottom: 1px solid var(--rule); text-align: left; vertical-align: top; }
th { background: var(--head); font-weight: 600; font-size: 12.5px; color: #374151; white-space: nowrap; }
td.num, th.num { text-align: right; white-space: nowrap; }
table.sortable th { cursor: pointer; user-select: none; }
table.sortable th[data-order="asc"]::after { content: " ▲"; font-size: 10px; }
table.sortable th[data-order="desc"]::after { content: " ▼"; font-size: 10px; }
table.kv th { width: 220px; background: none; }
.pill { display: inline-block; padding: 1px 8px; border-radius: 10px; font-size: 12.5px; font-weight: 600; }
.good { background: #ecfdf3; color: #067647; } .fair { background: #fffaeb; color: #b54708; }
.poor { background: #fef3f2; color: #b42318; } .over { background: #f4f3ff; color: #5925dc; }
.na { color: var(--muted); }
.status-correct { color: #067647; } .status-incorrect, .status-crashed, .status-timeout { color: #b42318; }
.message { color: #b42318; font-size: 12.5px; max-width: 420px; overflow-wrap: anywhere; }
.chart { width: 100%; height: 420px; }
.charts { display: grid; grid-template-columns: 1fr 1fr; gap: 16px; }
.callout { border-left: 4px solid #b42318; background: #fef3f2; padding: 10px 16px; margin: 12px 0; }
.callout.ok { border-color: #067647; background: #ecfdf3; }
.callout.info { border-color: #6b7280; background: #f9fafb; }
.callout ul { margin: 4px 0; padding-left: 20px; }
.advice { border: 1px solid var(--rule); border-radius: 6px; padding: 12px 16px; }
.legend span { margin-right: 14px; font-size: 12.5px; }
svg text { font-family: -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; }
"""

SORT_JS = """
document.querySelectorAll("table.sortable").forEach(table => {
  table.querySelectorAll("th").forEach((th, col) => th.addEventListener("click", () => {
    const asc = th.dataset.order !== "asc";
    table.querySelectorAll("th").forEach(h => delete h.dataset.order);
    th.dataset.order = asc ? "asc" : "desc";
    const key = row => {
      const c = row.cells[col];
      return c.dataset.sort !== undefined ? c.dataset.sort : c.textContent.trim();
    };
    const rows = Array.from(table.tBodies[0].rows);
    rows.sort((a, b) => {
      const x = key(a), y = key(b);
      if (x === "" || y === "") return (x === "") - (y === "");
      const nx = parseFloat(x), ny = parseFloat(y);
      const d = (!isNaN(nx) && !isNaN(ny)) ? nx - ny : x.localeCompare(y);
      return asc ? d : -d;
    });
    rows.forEach(r => table.tBodies[0].appendChild(r));
  }));
});
"""

BASE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{ title }} · pkroof</title><style>{{ style }}</style>
<script src="{{ assets }}plotly.min.js"></script></head>
<body><nav><a href="index.html">pkroof report</a><a href="topology.html">topology</a></nav><main>
{% block body %}{% endblock %}
</main><script>{{ sort_js }}</script></body></html>
"""

INDEX = """{% extends "base" %}{% block body %}
<h1>Communication-aware roofline report</h1>
<p class="sub">{{ index|length|plural("row") }} (problem, shape, ranks) of {{ problems|length|plural("problem") }}
on <a href="topology.html">{{ topology }}</a>, {% if num_runs %}{{ num_runs|plural("measured run") }}
{%- else %}nothing measured (analytic){% endif %}
{%- if left_out %}; {{ left_out|length|plural("problem") }} left out, <a href="#left-out">named below</a>{% endif %}.
Fraction of roofline = t_roof / t_measured (higher is better): <span class="pill poor">&lt; 50%</span>
<span class="pill fair">50–80%</span> <span class="pill good">≥ 80%</span>
<span class="pill over">&gt; 105%: faster than the bound, the model is wrong</span>. Click a column to sort.</p>
{{ histogram }}
<h2>Problems</h2>
<table class="sortable"><thead><tr>
<th>problem</th><th>category</th><th>shape</th><th class="num">ranks</th><th class="num">t_roof</th>
<th class="num">reference</th><th class="num">reference % roof</th><th>best implementation</th>
<th class="num">best</th><th class="num">best % roof</th><th class="num">headroom (measured)</th>
<th>recommended mechanism / schedule</th><th class="num">predicted</th><th class="num">headroom (predicted)</th>
</tr></thead><tbody>
{% for r in index %}<tr>
<td><a href="{{ pages[r.problem] }}">{{ r.problem }}</a></td><td>{{ r.category|text }}</td><td>{{ r.shape|text }}</td>
<td class="num">{{ r.world_size|text }}</td>
<td class="num" data-sort="{{ r.t_roof_s|sort_key }}">{{ r.t_roof_s|seconds }}</td>
<td class="num" data-sort="{{ r.reference_median_s|sort_key }}">{{ r.reference_median_s|seconds }}</td>
<td class="num" data-sort="{{ r.reference_fraction|sort_key }}">
<span class="pill {{ r.reference_fraction|pct_class }}">{{ r.reference_fraction|pct }}</span></td>
<td>{{ r.best_impl|text }}</td>
<td class="num" data-sort="{{ r.best_median_s|sort_key }}">{{ r.best_median_s|seconds }}</td>
<td class="num" data-sort="{{ r.best_fraction|sort_key }}">
<span class="pill {{ r.best_fraction|pct_class }}">{{ r.best_fraction|pct }}</span></td>
<td class="num" data-sort="{{ r.headroom|sort_key }}">{{ r.headroom|times }}</td>
<td>{% if r.mechanism %}{{ r.mechanism }} / {{ r.schedule }}{% else %}—{% endif %}</td>
<td class="num" data-sort="{{ r.predicted_s|sort_key }}">{{ r.predicted_s|seconds }}</td>
<td class="num" data-sort="{{ r.predicted_headroom|sort_key }}">{{ r.predicted_headroom|times }}</td>
</tr>{% endfor %}
</tbody></table>
{% if left_out %}<h2 id="left-out">Left out</h2>
<p class="sub">{{ left_out|length|plural("problem") }} with no page on {{ topology }}, and why:</p>
<table><thead><tr><th>problem</th><th>reason</th></tr></thead><tbody>
{% for name, why in left_out.items() %}<tr><td>{{ name }}</td><td>{{ why }}</td></tr>{% endfor %}
</tbody></table>{% endif %}
<h2>Pages</h2>
<ul>{% for name, page in pages.items() %}<li><a href="{{ page }}">{{ name }}</a></li>{% endfor %}
<li><a href="topology.html">topology: {{ topology }}</a></li></ul>
{% if others %}<h2>Other machines</h2>
<p class="sub">Analytic: each problem's roofline and advice on the machine's preset, nothing measured there.</p>
<ul>{% for name, page in others.items() %}<li><a href="{{ page }}">{{ name }}</a></li>{% endfor %}</ul>{% endif %}
{% endblock %}"""

PROBLEM = """{% extends "base" %}{% block body %}
<h1>{{ name }}</h1>
<p class="sub">{{ meta.get("doc")|text }}{% if meta.get("source") %} · <code>{{ meta["source"] }}</code>
{% endif %}</p>
{% if shapes %}<h2>Bound</h2>
<p class="sub">{% if shapes|length > 1 %}One row per shape and world size, each bound at its own parameters.
{% endif %}t_roof = max(compute, HBM, link) + latency.</p>
<table><thead><tr><th>shape</th><th class="num">ranks</th><th class="num">t_roof</th><th>limiter</th>
{% for key, label in terms %}<th class="num">{{ label }}</th>{% endfor %}
<th class="num">link bytes per rank</th><th>link</th><th>dtype · topology</th></tr></thead><tbody>
{% for s in shapes %}{% set b = s.summary %}<tr><td>{{ s.shape|text }}{% if s.params %}<br>
<span class="mono na">{{ s.params }}</span>{% endif %}</td>
<td class="num">{{ s.world_size|text }}</td>
<td class="num">{{ b.get("t_roof_s")|seconds }}</td><td>{{ b.get("limiter")|text }}</td>
{% for key, label in terms %}<td class="num">{{ b.get("terms", {}).get(key)|seconds }}</td>{% endfor %}
<td class="num">{{ b.get("link_bytes_per_rank")|bytes }}</td>
<td>{{ b.get("link_tier")|text }} at {{ b.get("link_bandwidth_Bps")|Bps }}</td>
<td>{{ b.get("dtype")|text }} · {{ b.get("topology")|text }}</td></tr>
{% endfor %}
</tbody></table>{% endif %}
<h2>Roofline</h2>
{{ chart }}
<h2>Implementations</h2>
<table class="sortable"><thead><tr><th>implementation</th><th>shape</th><th class="num">ranks</th><th>status</th>
<th class="num">median</th><th class="num">p10 – p90</th><th class="num">% of roofline</th>
<th class="num">speedup vs reference</th><th>mechanism / schedule</th><th class="num">predicted</th>
<th class="num">model error</th>
<th class="num">achieved link</th><th class="num">comm size</th>
<th class="num" title="median SM clock during the timed samples, slowest rank; in brackets the share of that time
the power policy held the clock down">SM clock</th><th>message</th></tr></thead><tbody>
{% for r in rows %}<tr>
<td class="mono">{{ r.impl }}</td><td>{{ r.shape|text }}</td><td class="num">{{ r.world_size|text }}</td>
<td class="status-{{ r.status }}">{{ r.status|text }}</td>
<td class="num" data-sort="{{ r.median_s|sort_key }}">{{ r.median_s|seconds }}</td>
<td class="num" data-sort="{{ r.p90_s|sort_key }}">{{ r.p10_s|seconds }} – {{ r.p90_s|seconds }}</td>
<td class="num" data-sort="{{ r.fraction_of_roofline|sort_key }}">
<span class="pill {{ r.fraction_of_roofline|pct_class }}">{{ r.fraction_of_roofline|pct }}</span></td>
<td class="num" data-sort="{{ r.speedup_vs_reference|sort_key }}">{{ r.speedup_vs_reference|times }}</td>
<td>{% if r.mechanism %}{{ r.mechanism }} / {{ r.schedule }}{% else %}—{% endif %}</td>
<td class="num" data-sort="{{ r.predicted_s|sort_key }}">{{ r.predicted_s|seconds }}</td>
<td class="num" data-sort="{{ r.prediction_error|sort_key }}">{{ r.prediction_error|pct }}</td>
<td class="num" data-sort="{{ r.achieved_link_Bps|sort_key }}">{{ r.achieved_link_Bps|Bps }}</td>
<td class="num" data-sort="{{ r.comm_bytes|sort_key }}">{{ r.comm_bytes|bytes }}</td>
<td class="num" data-sort="{{ r.sm_clock_mhz|sort_key }}">{{ r.sm_clock_mhz|mhz }}
<span class="na">{{ r.power_capped|capped }}</span></td>
<td class="message">{% if r.status != "correct" %}{{ r.message }}{% endif %}</td>
</tr>{% endfor %}
</tbody></table>
<h2>Advice</h2>
{% if shapes %}<p class="sub">What to build, per shape and world size: the model's best (mechanism, schedule) at
that row's own parameters, against NCCL, serial.</p>
<table class="advice"><thead><tr><th>shape</th><th class="num">ranks</th><th>mechanism / schedule</th>
<th class="num">predicted</th><th class="num">NCCL, serial</th><th class="num">headroom over NCCL, serial</th>
<th>reason</th></tr></thead><tbody>
{% for s in shapes %}{% set a = s.advice %}<tr><td>{{ s.shape|text }}{% if s.params %}<br>
<span class="mono na">{{ s.params }}</span>{% endif %}</td><td class="num">{{ s.world_size|text }}</td>
<td>{% if a.get("mechanism") %}{% set ll = " LL" if a.get("protocol") == "ll" else "" %}
<b>{{ a["mechanism"] }}{{ ll }} / {{ a.get("schedule")|text }}</b>
{%- if a.get("comm_sms") %} ({{ a["comm_sms"] }} SMs for communication){% endif %}
{% else %}—{% endif %}</td>
<td class="num">{{ a.get("t_s")|seconds }}</td><td class="num">{{ a.get("baseline_t_s")|seconds }}</td>
<td class="num">{{ a.get("headroom")|times }}</td><td>{{ a.get("reason")|text }}</td></tr>
{% endfor %}
</tbody></table>{% else %}<p class="na">No advice was given for this problem.</p>{% endif %}
<h2>Environment</h2>
<table class="kv"><tbody>{% for label, value in environment %}<tr><th>{{ label }}</th><td>{{ value|text }}</td></tr>
{% endfor %}
</tbody></table>
{% endblock %}"""

TOPOLOGY = """{% extends "base" %}{% block body %}
<h1>Topology: {{ t.name }}</h1>
<p class="sub">{{ t.description }}</p>
{% if t.probe is none %}<div class="callout info"><b>Not probed.</b> No measurement stands behind this topology:
its numbers come from datasheets and published runs (see "measured or nominal" below).</div>
{% elif t.probe.health %}<div class="callout"><b>Health flags ({{ t.probe.health|length }})</b>: the probe saw these;
numbers measured on a degraded node understate a healthy one.<ul>{% for line in t.probe.health %}<li>{{ line }}</li>
{% endfor %}</ul></div>
{% else %}<div class="callout ok"><b>No health flags</b>: links, PCIe and clocks looked nominal during the probe.</div>
{% endif %}
<h2>Node</h2>
{{ svg }}
<table class="kv"><tbody>
<tr><th>nodes × GPUs per node</th><td>{{ t.nodes }} × {{ t.gpus_per_node }}</td></tr>
<tr><th>GPU</th><td>{{ t.gpu.name }} ({{ t.gpu.arch }}), {{ t.gpu.sm_count }} SMs,
{{ t.gpu.hbm_capacity_bytes|bytes }} HBM at {{ t.gpu.hbm_bandwidth_Bps|Bps }}</td></tr>
<tr><th>peak FLOP/s (dense)</th><td>{{ t.gpu.peak_flops|value("peak_flops") }}</td></tr>
{% if t.gpu.sustained_flops %}<tr><th>FLOP/s under continuous load</th>
<td>{% for dtype, flops in t.gpu.sustained_flops.items() %}{{ dtype }} {{ flops|value("sustained_flops") }}{{
t.matmul_clock(dtype)|clock }}{% if not loop.last %}, {% endif %}{% endfor %} (predictions of ops of 2 ms or more)</td>
</tr>{% endif %}
<tr><th>scale-up</th>
<td>{{ t.scaleup.kind }}, {{ t.scaleup.generation }}: {{ t.scaleup.links_per_gpu }} links
× {{ t.scaleup.link_bandwidth_Bps|Bps }}
= {{ t.scaleup.total_bandwidth_Bps|Bps }} per GPU per direction{% if t.scaleup.multicast %}, multicast
{% endif %}</td></tr>
<tr><th>scale-out</th><td>{% if t.nic %}{{ t.nic.count_per_node }} × {{ t.nic.model }} ({{ t.nic.kind }})
at {{ t.nic.rate_Bps|Bps }} each,
{{ t.nic.latency_s|seconds }} one way{% else %}none{% endif %}</td></tr>
</tbody></table>
<h2>Mechanisms: latency and bandwidth</h2>
<table><thead><tr><th>mechanism</th><th>available</th><th class="num">α (latency)</th>
<th class="num">step latency</th>
<th class="num" title="per call, for a collective staged through symmetric memory, beyond α and one flag step">
hand-off</th>
<th class="num">peak bandwidth</th>
<th class="num" title="per direction with both directions busy, as in every collective; the model uses it there">
both ways</th><th class="num">per CTA</th><th class="num">default CTAs</th><th>basis</th>
<th>note</th></tr></thead><tbody>
{% for m in mechanisms %}{% set on = m.spec.available %}
<tr><td class="mono">{{ m.name }}</td><td>{{ "yes" if on else "no" }}</td>
<td class="num">{{ m.spec.latency_s|seconds if on else "—" }}</td>
<td class="num">{{ (m.spec.step_latency_s|seconds if m.spec.step_latency_s else "= α") if on else "—" }}</td>
<td class="num">{{ m.spec.handoff_s|seconds if on and m.spec.handoff_s else "—" }}</td>
<td class="num">{{ m.spec.peak_bandwidth_Bps|Bps if on else "—" }}</td>
<td class="num">{{ m.spec.duplex_bandwidth_Bps|Bps if on and m.spec.duplex_bandwidth_Bps else "—" }}</td>
<td class="num">{{ m.spec.per_cta_bandwidth_Bps|Bps if on else "—" }}</td>
<td class="num">{{ m.spec.num_ctas_default or "—" }}</td><td>{{ m.basis }}</td><td>{{ m.spec.note }}</td></tr>
{% endfor %}
</tbody></table>
{% if t.probe %}<h2>Fits</h2>
<table><thead><tr><th>mechanism</th><th>curve</th><th class="num">α</th><th class="num">β</th>
<th class="num">β per CTA</th>
<th class="num">CTAs for 90%</th><th class="num">size for 90% of β</th><th class="num">max error (size)</th>
<th class="num">max error (CTAs)</th></tr></thead><tbody>
{% for f in t.probe.fits %}<tr><td class="mono">{{ f.mechanism }}</td>
{% set several = f.regime or (loop.nextitem and loop.nextitem.curve == f.curve) %}
<td>{{ f.curve }}{% if several %} (regime {{ f.regime + 1 }}){% endif %}</td>
<td class="num">{{ f.latency_s|seconds }}</td>
<td class="num">{{ f.bandwidth_Bps|Bps }}</td><td class="num">{{ f.per_cta_bandwidth_Bps|Bps }}</td>
<td class="num">{{ f.ctas_for_90pct or "—" }}</td>
<td class="num">{{ f.efficient_size_bytes|bytes }}</td><td class="num">{{ f.size_max_rel_error|pct }}</td>
<td class="num">{{ f.ctas_max_rel_error|pct if f.ctas_max_rel_error else "—" }}</td></tr>{% endfor %}
</tbody></table>{% endif %}
<h2>Bandwidth: model over samples</h2>
{% if not t.probe %}<p class="na">No samples without a probe: the lines are the nominal mechanism specs.</p>
{% endif %}
{% for mechanism, charts in charts %}<h3>{{ mechanism }}</h3><div class="charts">{% for c in charts %}
<div>{{ c }}</div>{% endfor %}</div>{% endfor %}
<h2>Measured or nominal</h2>
<table><thead><tr><th>number</th><th class="num">value</th><th>basis</th><th>source</th></tr></thead><tbody>
{% for row in basis %}<tr><td class="mono">{{ row.path }}</td><td class="num">{{ row.value }}</td>
<td><span class="pill {{ 'good' if row.basis == 'measured' else 'na' }}">{{ row.basis }}</span></td>
<td>{{ row.cite }}</td></tr>{% endfor %}
</tbody></table>
{% if t.probe %}<h2>Probe</h2>
<table class="kv"><tbody>
<tr><th>host · date</th><td>{{ t.probe.host }} · {{ t.probe.date }}</td></tr>
<tr><th>command</th><td><code>{{ t.probe.command }}</code>
({{ t.probe.duration_s|seconds }}{{ ", quick" if t.probe.quick }})</td></tr>
{% for k, v in t.probe.versions.items() %}<tr><th>{{ k }}</th><td>{{ v }}</td></tr>{% endfor %}
{% for k, v in t.probe.ceilings.items() %}<tr><th>{{ k }}</th><td>{{ v|value(k) }}</td></tr>{% endfor %}
</tbody></table>
{% if t.probe.notes %}<ul>{% for n in t.probe.notes %}<li>{{ n }}</li>{% endfor %}</ul>{% endif %}{% endif %}
{% endblock %}"""

_ENV = Environment(
    loader=DictLoader({"base": BASE, "index": INDEX, "problem": PROBLEM, "topology": TOPOLOGY}),
    autoescape=True,
    undefined=StrictUndefined,
    trim_blocks=True,
)
_ENV.filters |= {
    "seconds": _fmt(fmt_s),
    "bytes": _fmt(fmt_bytes),
    "Bps": _fmt(fmt_Bps),
    "pct": _fmt(lambda f: f"{f:.0%}"),
    "times": _fmt(lambda x: f"{x:.2f}×"),
    "mhz": _fmt(lambda x: f"{x:.0f} MHz"),
    "clock": fmt_clock,
    "capped": lambda x: "" if _missing(x) or x < 0.05 else f"({x:.0%} power-capped)",
    "pct_class": _pct_class,
    "sort_key": _sort_key,
    "text": _fmt(str),
    "value": lambda value, name: _value(name, value),
    "plural": lambda n, word: f"{n} {word}" if n == 1 else f"{n} {word}s",
}


TERMS = (("compute_s", "compute"), ("hbm_s", "HBM"), ("link_s", "link"), ("latency_s", "latency"))


def _render(template: str, title: str, *, assets: str = "", **context: Any) -> str:
    """`assets`: the relative path from the page to the folder holding plotly.min.js ("" or "../../")."""
    page = _ENV.get_template(template)
    return page.render(title=title, style=Markup(STYLE), sort_js=Markup(SORT_JS), assets=assets, **context)


def figure_html(fig: go.Figure, div_id: str) -> Markup:
    """A div and the script that draws `fig` into it with the page's plotly.min.js."""
    assert div_id.replace("-", "").isalnum(), div_id  # ids are generated here, never user text
    data = pio.to_json(fig, validate=False)  # plotly escapes < > / in strings
    config = '{"displaylogo": false, "responsive": true}'
    return Markup(
        f'<div id="{div_id}" class="chart"></div>\n'
        f'<script>Plotly.newPlot("{div_id}", Object.assign({data}, {{config: {config}}}));</script>'
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
) -> str:
    """The index: the histogram and a sortable table of problems; `pages` maps a problem name to its file name,
    `num_runs` counts the measured records, `left_out` names each problem without a page and why, `others` maps
    another machine's name to its own (analytic) report's index, relative to this one."""
    return _render(
        "index",
        "report",
        assets=assets,
        others=others or {},
        index=_rows(index),
        problems=sorted(set(index["problem"])),
        pages=pages,
        topology=topology,
        num_runs=num_runs,
        left_out=left_out or {},
        histogram=figure_html(figures.fraction_histogram(index), "histogram"),
    )


def _environment(records: pd.DataFrame, meta: Mapping[str, Any]) -> list[tuple[str, str]]:
    """One line per environment field: its distinct values across the problem's records."""
    labels = {"gpu": "GPU", "driver": "driver", "cuda": "CUDA", "nccl": "NCCL", "torch": "torch", "triton": "triton"}
    labels |= {"settings": "settings", "host": "host"}
    labels |= {"backend": "backend", "topology": "topology", "date": "date"}
    out = []
    for column, label in labels.items():
        values = [v for v in dict.fromkeys(records[column]) if v]
        missing = "defaults" if column == "settings" else "not recorded"  # PKROOF_* variables, when any were set
        out.append((label, ", ".join(values) or missing))
    commands = [v for v in dict.fromkeys(records["command"]) if v] if "command" in records else []
    out.append(("command", meta.get("command") or ", ".join(commands) or "not recorded"))
    return out


def _shapes(bound: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The bound's analysed shapes, smallest roof first, each with its parameters as "k=v, ..." text."""
    out = []
    for entry in bound.get("shapes") or ():
        summary = entry.get("summary") or {}
        params = entry.get("params") or summary.get("params") or {}
        text = ", ".join(f"{k}={v}" for k, v in params.items()) if isinstance(params, Mapping) else ""
        out.append(entry | {"summary": summary, "advice": entry.get("advice") or {}, "params": text})

    def order(e: dict[str, Any]) -> tuple:
        t = e["summary"].get("t_roof_s")
        return (0, t) if isinstance(t, (int, float)) and math.isfinite(t) else (1, 0.0)

    return sorted(out, key=order)


def problem_page(
    name: str,
    *,
    records: pd.DataFrame,
    bound: Mapping[str, Any] | None = None,
    meta: Mapping[str, Any] | None = None,
    assets: str = "",
) -> str:
    """One problem: its bound and advice per shape, the roofline chart, the implementations and the environment.

    records: records_frame rows of this problem; bound (its "shapes" and "sweep") and meta: see reports/build.py.
    """
    bound, meta = bound or {}, meta or {}
    ordered = records.assign(_ref=records["impl"] != "reference").sort_values(["shape", "_ref", "median_s"])
    chart = figures.roofline_figure(frames.roofline_frame(bound.get("sweep", ())), records, title=f"{name}: roofline")
    return _render(
        "problem",
        name,
        assets=assets,
        name=name,
        meta=meta,
        shapes=_shapes(bound),
        terms=TERMS,
        chart=figure_html(chart, "roofline"),
        rows=_rows(ordered.drop(columns="_ref")),
        environment=_environment(records, meta),
    )


def topology_svg(topology: Topology) -> Markup:
    """The GPUs of one node, the scale-up fabric and the NICs, labelled with link count and speed."""
    s, nic = topology.scaleup, topology.nic
    n = topology.gpus_per_node
    cols = min(n, 8)
    box_w, box_h, gap = 112, 52, 18
    width = max(cols * (box_w + gap) + 2 * gap, 720)
    gpu_rows = math.ceil(n / cols)
    left = (width - cols * (box_w + gap) + gap) / 2
    fabric_y = 30 + gpu_rows * (box_h + gap) + 40
    nic_y = fabric_y + 90
    height = nic_y + (box_h + 40 if nic else 10)
    gpu_xy = [(left + (i % cols) * (box_w + gap), 30 + (i // cols) * (box_h + gap)) for i in range(n)]
    if s.kind == "nvswitch":
        switches = f"{s.switches_per_node} × NVSwitch" if s.switches_per_node else "NVSwitch"
        fabric = f"{switches} ({s.generation}{', multicast' if s.multicast else ''})"
    elif s.kind == "nvlink":
        fabric = f"direct {s.generation} links, no switch"
    else:
        fabric = f"PCIe switch / root complex ({s.generation})"
    per_gpu = (
        f"{s.links_per_gpu} × {fmt_Bps(s.link_bandwidth_Bps)} = {fmt_Bps(s.total_bandwidth_Bps)} per GPU per direction"
    )
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width:.0f} {height:.0f}" width="100%" role="img">']
    text = '<text x="{x:.0f}" y="{y:.0f}" font-size="{size}" text-anchor="middle" fill="{fill}">{body}</text>'
    if nic:
        for i, (x, y) in enumerate(gpu_xy):
            k = i * nic.count_per_node // n
            nx = (width - nic.count_per_node * (box_w + gap) + gap) / 2 + k * (box_w + gap)
            parts.append(
                f'<line x1="{x + box_w / 2:.0f}" y1="{y + box_h:.0f}" x2="{nx + box_w / 2:.0f}" y2="{nic_y:.0f}" '
                'stroke="#9ca3af" stroke-dasharray="4 3"/>'
            )
    for x, y in gpu_xy:
        parts.append(
            f'<line x1="{x + box_w / 2:.0f}" y1="{y + box_h:.0f}" x2="{x + box_w / 2:.0f}" y2="{fabric_y:.0f}" '
            'stroke="#d97706" stroke-width="2"/>'
        )
        if n <= 16:
            body = f"{s.links_per_gpu}×"
            parts.append(text.format(x=x + box_w / 2 + 14, y=fabric_y - 8, size=10, fill="#b45309", body=body))
    for i, (x, y) in enumerate(gpu_xy):
        parts.append(
            f'<rect x="{x:.0f}" y="{y:.0f}" width="{box_w}" height="{box_h}" rx="6" fill="#eff6ff" stroke="#2563eb"/>'
        )
        parts.append(text.format(x=x + box_w / 2, y=y + 21, size=13, fill="#1e3a8a", body=f"GPU {i}"))
        parts.append(text.format(x=x + box_w / 2, y=y + 38, size=10, fill="#374151", body=escape(topology.gpu.name)))
    bar = f'x="{gap}" y="{fabric_y:.0f}" width="{width - 2 * gap:.0f}" height="44"'
    parts.append(f'<rect {bar} rx="6" fill="#fffbeb" stroke="#d97706"/>')
    parts.append(text.format(x=width / 2, y=fabric_y + 18, size=13, fill="#92400e", body=escape(fabric)))
    parts.append(text.format(x=width / 2, y=fabric_y + 35, size=11, fill="#92400e", body=escape(per_gpu)))
    if nic:
        start = (width - nic.count_per_node * (box_w + gap) + gap) / 2
        for k in range(nic.count_per_node):
            x = start + k * (box_w + gap)
            box = f'x="{x:.0f}" y="{nic_y:.0f}" width="{box_w}" height="{box_h}"'
            parts.append(f'<rect {box} rx="6" fill="#f0fdf4" stroke="#15803d"/>')
            parts.append(text.format(x=x + box_w / 2, y=nic_y + 21, size=12, fill="#14532d", body=f"NIC {k}"))
            label = f"{escape(nic.model)} · {fmt_Bps(nic.rate_Bps)}"
            parts.append(text.format(x=x + box_w / 2, y=nic_y + 38, size=10, fill="#374151", body=label))
        rdma = ", GPUDirect RDMA" if nic.gpudirect_rdma else ""
        caption = f"dashed: PCIe from each GPU to its NIC ({escape(nic.kind)}{rdma})"
        parts.append(text.format(x=width / 2, y=height - 8, size=11, fill="#6b7280", body=caption))
    if topology.nodes > 1:
        parts.append(text.format(x=width / 2, y=16, size=11, fill="#6b7280", body=f"one of {topology.nodes} nodes"))
    parts.append("</svg>")
    return Markup("\n".join(parts))


def _basis_rows(topology: Topology) -> list[dict[str, str]]:
    records: list[tuple[str, Any]] = [("gpu", topology.gpu), ("scaleup", topology.scaleup)]
    records += [(f"mechanisms.{k}", v) for k, v in topology.mechanisms.items()]
    records += [("nic", topology.nic)] if topology.nic else []
    rows = []
    for path, record in records:
        for field, source_id in record.sources.items():
            source = topology.sources[source_id]
            value = _value(field, getattr(record, field))
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
                charts.append(figure_html(fig, f"bw-{len(out)}-{sweep}"))
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
    return _render(
        "topology",
        f"topology {topology.name}",
        assets=assets,
        t=topology,
        svg=topology_svg(topology),
        mechanisms=mechanisms,
        charts=_charts(topology),
        basis=_basis_rows(topology),
    )
