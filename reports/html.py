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


def _scalar(name: str, value: Any) -> str:
    """One number formatted by the unit its field's name carries (…_s seconds, …_Bps bandwidth, …_flops FLOP/s)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    if name.endswith("_flops"):
        return fmt_flops(value)
    if name.endswith("_Bps"):
        return fmt_Bps(value)
    if name.endswith("_bytes"):
        return fmt_bytes(value)
    if name.endswith("_s"):
        return fmt_s(value)
    return f"{value:g}"


def _value(name: str, value: Any) -> str:
    """A topology field formatted by the unit its name carries; a dict entry by its field's unit (overlap_s: seconds
    per schedule; peak_flops: FLOP/s per dtype), each collective's regimes on a line of their own."""
    if isinstance(value, dict) and name == "collectives":
        return "\n".join(f"{k}: {_regimes(rs)}" for k, rs in value.items())
    if isinstance(value, dict):
        return ", ".join(f"{k} {_scalar(name, v)}" for k, v in value.items())
    return _scalar(name, value)


STYLE = """
:root { --ink:#1f2937; --muted:#6b7280; --rule:#e5e7eb; --bg:#ffffff; --head:#f9fafb; }
* { box-sizing: border-box; }
body { font: 14px/1.5 -apple-system, BlinkMacSystemFont, "Segoe UI", Helvetica, Arial, sans-serif;
       color: var(--ink); background: var(--bg); margin: 0; }
main { max-width: 1400px; margin: 0 auto; padding: 24px 20px 64px; overflow-wrap: break-word; }  /* a long path wraps */
nav { border-bottom: 1px solid var(--rule); padding: 10px 32px; font-size: 13px; }
nav a { margin-right: 18px; }
a { color: #1d4ed8; text-decoration: none; } a:hover { text-decoration: underline; }
h1 { font-size: 22px; margin: 8px 0 4px; font-weight: 600; overflow-wrap: anywhere; }
h3 { font-size: 14px; margin: 20px 0 4px; font-weight: 600; color: #374151; }
h2 { font-size: 16px; margin: 32px 0 8px; font-weight: 600; border-bottom: 1px solid var(--rule); padding-bottom: 4px; }
p.sub { color: var(--muted); margin: 0 0 16px; }
code, .mono { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: 12.5px; }
p.sub code { overflow-wrap: anywhere; }
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
.message { color: #b42318; font-size: 12.5px; min-width: 260px; max-width: 460px; overflow-wrap: anywhere; }
.wrap, td.wrap { overflow-wrap: anywhere; min-width: 220px; max-width: 560px; white-space: pre-line; }
.reason { white-space: pre-line; min-width: 340px; font-size: 13px; }
.scroll { overflow-x: auto; margin: 8px 0 16px; }
.scroll > table { margin: 0; }
td.impl { min-width: 170px; overflow-wrap: anywhere; }
td.nowrap { white-space: nowrap; }
td.shape { min-width: 130px; max-width: 210px; }
th, td { padding: 6px 8px; }
.pill.cpu { background: #eef2ff; color: #3730a3; font-weight: 500; }
h3.chart-title { margin: 18px 0 0; }
p.chart-note { color: var(--muted); font-size: 12.5px; margin: 2px 0 0; }
.chart { width: 100%; height: 440px; }
.chart.wide { height: 480px; }
.charts { display: grid; grid-template-columns: 1fr 1fr; gap: 16px; }
.callout { border-left: 4px solid #b42318; background: #fef3f2; padding: 10px 16px; margin: 12px 0; }
.callout.ok { border-color: #067647; background: #ecfdf3; }
.callout.info { border-color: #6b7280; background: #f9fafb; }
.callout ul { margin: 4px 0; padding-left: 20px; }
.advice { border: 1px solid var(--rule); border-radius: 6px; padding: 12px 16px; }
.legend span { margin-right: 14px; font-size: 12.5px; }
svg text { font-family: -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; }
@media (max-width: 760px) {
  main { padding: 12px 12px 40px; } nav { padding: 8px 12px; }
  h1 { font-size: 19px; } .charts { grid-template-columns: 1fr; } .chart, .chart.wide { height: 360px; }
  table.kv th { width: auto; } .reason, .wrap { min-width: 240px; }
}
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

NARROW_JS = """
function narrow(id) {  // a phone: the legend under the chart, side-by-side panels stacked
  if (window.innerWidth >= 760) return;
  const div = document.getElementById(id), layout = div.layout || {};
  const update = {"legend.orientation": "h", "legend.x": 0, "legend.y": -0.22, "legend.yanchor": "top",
                  "margin.r": 10, "margin.l": 55, "margin.t": 20, "height": 640};
  if (layout.xaxis2) {
    Object.assign(update, {"xaxis.domain": [0, 1], "xaxis2.domain": [0, 1], "yaxis.domain": [0.6, 1],
                           "yaxis2.domain": [0, 0.4], "legend.y": -0.12, "height": 1000});
  }
  div.style.height = update.height + "px";
  Plotly.relayout(div, update);
}
"""

BASE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{ title }} · pkroof</title><style>{{ style }}</style>
<script src="{{ assets }}plotly.min.js"></script><script>{{ narrow_js }}</script></head>
<body><nav><a href="index.html">pkroof report</a><a href="topology.html">topology</a></nav><main>
{% block body %}{% endblock %}
</main><script>{{ sort_js }}</script></body></html>
"""

INDEX = """{% extends "base" %}{% block body %}
<h1>Communication-aware roofline report</h1>
<p class="sub">{{ index|length|plural("row") }} (problem, shape, ranks) of {{ problems|length|plural("problem") }}
on <a href="topology.html">{{ topology }}</a>, {% if num_runs %}{{ num_runs|plural("measured run") }}
{%- else %}nothing measured (analytic: each problem's bound and advice){% endif %}
{%- if left_out %}; {{ left_out|length|plural("problem") }} left out, <a href="#left-out">named below</a>{% endif %}.
Fraction of roofline = t_roof / t_measured (higher is better): <span class="pill poor">&lt; 50%</span>
<span class="pill fair">50–80%</span> <span class="pill good">≥ 80%</span>
<span class="pill over">&gt; 105%: faster than the bound, the model is wrong</span>. Click a column to sort.</p>
{% if superseded %}<div class="callout info">{{ superseded|plural("record") }} measured again later: the latest run of
each (problem, shape, implementation, ranks) is the one shown, the earlier ones left out.</div>{% endif %}
{% if cpu_rows %}<div class="callout info">{{ cpu_rows|plural("row") }} measured on CPU ranks (gloo; no GPUs where they
ran): <span class="pill cpu">CPU</span> marks their times, which are CPU times, so no fraction of a GPU roofline is
given for them.</div>{% endif %}
{{ histogram }}
<h2>Problems</h2>
<div class="scroll"><table class="sortable"><thead><tr>
<th>problem</th><th>shape</th><th class="num">ranks</th><th class="num">t_roof</th>
<th class="num">reference (% roof)</th><th class="num">best implementation (% roof)</th>
<th class="num" title="the reference's median over the best implementation's">headroom, measured</th>
<th title="the model's best (mechanism, schedule) at this row's shape and ranks">recommended</th>
<th class="num" title="its predicted time, and its headroom over NCCL, serial">predicted</th>
</tr></thead><tbody>
{% for r in index %}<tr>
<td><a href="{{ pages[r.problem] }}">{{ r.problem }}</a><br><span class="na">{{ r.category|text }}
</span></td><td class="shape" data-sort="{{ r._order }}">{{ r.shape|text }}</td>
<td class="num">{{ r.world_size|text }}</td>
<td class="num" data-sort="{{ r.t_roof_s|sort_key }}">{{ r.t_roof_s|seconds }}</td>
<td class="num" data-sort="{{ r.reference_median_s|sort_key }}">{{ r.reference_median_s|seconds }}
{% if r.on_cpu and r.reference_median_s %}<span class="pill cpu">CPU</span>{% elif r.reference_median_s %}
<span class="pill {{ r.reference_fraction|pct_class }}">{{ r.reference_fraction|pct }}</span>{% endif %}</td>
<td class="num" data-sort="{{ r.best_median_s|sort_key }}"><span class="mono">{{ r.best_impl|text }}</span><br>
{{ r.best_median_s|seconds }}
{% if r.on_cpu and r.best_median_s %}<span class="pill cpu">CPU</span>{% elif r.best_median_s %}
<span class="pill {{ r.best_fraction|pct_class }}">{{ r.best_fraction|pct }}</span>{% endif %}</td>
<td class="num" data-sort="{{ r.headroom|sort_key }}">{{ r.headroom|times }}</td>
<td>{% if r.mechanism %}{{ r.mechanism }} / {{ r.schedule }}{% else %}—{% endif %}</td>
<td class="num" data-sort="{{ r.predicted_s|sort_key }}">{{ r.predicted_s|seconds }}
{% if r.predicted_headroom %}<span class="na">({{ r.predicted_headroom|times }})</span>{% endif %}</td>
</tr>{% endfor %}
</tbody></table></div>
{% if left_out %}<h2 id="left-out">Left out</h2>
<p class="sub">{{ left_out|length|plural("problem") }} with no page on {{ topology }}, and why:</p>
<div class="scroll"><table><thead><tr><th>problem</th><th>reason</th></tr></thead><tbody>
{% for name, why in left_out.items() %}<tr><td>{{ name }}</td><td>{{ why }}</td></tr>{% endfor %}
</tbody></table></div>{% endif %}
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
{% if not rows %}<div class="callout info"><b>Analytic</b>, not measured here: {{ name }}'s roofline, the model's
prediction for every (mechanism, schedule) and its advice{% if meta.get("command") %} (<code>{{ meta["command"] }}
</code>){% endif %}.</div>{% endif %}
{% if roofline %}<h2>Roofline</h2>
{{ roofline }}{% endif %}
<h2>{{ time_title }}</h2>
{{ chart }}
{% if cpu_rows %}<p class="chart-note">{{ cpu_rows|plural("measurement") }} on CPU ranks (gloo) left off the charts:
CPU times, not GPU times; in the table below, marked <span class="pill cpu">CPU</span>.</p>{% endif %}
{% if crossover %}<h2>{{ fabric }} against the network as nodes grow</h2>
{{ crossover }}{% endif %}
{% if shapes %}<h2>Bound</h2>
<p class="sub">{% if shapes|length > 1 %}One row per shape and world size, each bound at its own parameters.
{% endif %}t_roof = max(compute, HBM, link) + latency.</p>
<div class="scroll"><table><thead><tr><th>shape</th><th class="num">ranks</th><th class="num">t_roof</th>
<th>limiter</th>{% for key, label in terms %}<th class="num">{{ label }}</th>{% endfor %}
{% for tier in tiers %}<th class="num" title="the link term of this tier alone, at its busiest rank: bytes per rank
at the rate charged">{{ tier }}</th>{% endfor %}
<th class="num">link bytes per rank</th><th>link</th><th>dtype · topology</th></tr></thead><tbody>
{% for s in shapes %}{% set b = s.summary %}<tr><td>{{ s.shape|text }}{% if s.params %}<br>
<span class="mono na">{{ s.params }}</span>{% endif %}</td>
<td class="num">{{ s.world_size|text }}{% if b.get("nodes", 1) > 1 %}<br>
<span class="na">{{ b["nodes"] }} nodes</span>{% endif %}</td>
<td class="num">{{ b.get("t_roof_s")|seconds }}</td><td>{{ b.get("limiter")|text }}</td>
{% for key, label in terms %}<td class="num">{{ b.get("terms", {}).get(key)|seconds }}</td>{% endfor %}
{% for tier in tiers %}{% set t = b.get("link_terms", {}).get(tier) %}<td class="num">{% if t %}
{{ t.get("t_s")|seconds }}{% if b.get("link_tier") == tier %} <span class="pill fair">binds</span>{% endif %}<br>
<span class="na">{{ t.get("bytes_per_rank")|bytes }} at {{ t.get("bandwidth_Bps")|Bps }}</span>{% else %}—{% endif %}
</td>{% endfor %}
<td class="num">{{ b.get("link_bytes_per_rank")|bytes }}</td>
<td>{{ b.get("link_tier")|text }} at {{ b.get("link_bandwidth_Bps")|Bps }}</td>
<td>{{ b.get("dtype")|text }} · {{ b.get("topology")|text }}</td></tr>
{% endfor %}
</tbody></table></div>{% endif %}
{% if rows %}<h2>Implementations</h2>
<p class="sub">Smallest shape first, the reference first in each. Hover a column for what it means.</p>
<div class="scroll"><table class="sortable"><thead><tr><th>implementation</th><th>shape</th>
<th class="num">ranks</th><th>status</th><th class="num" title="median of the timed samples; below it p10 – p90">
median</th>
<th class="num">% of roofline</th><th class="num">speedup vs reference</th><th>mechanism / schedule</th>
<th class="num">predicted</th><th class="num" title="(measured − predicted) / predicted">model error</th>
{% if busbw %}<th class="num" title="nccl-tests' busbw: algbw × its factor">busbw</th>{% endif %}
<th class="num" title="link bytes per rank / median">achieved link</th><th class="num">comm size</th>
<th class="num" title="median SM clock during the timed samples, slowest rank; in brackets the share of that time
the power policy held the clock down">SM clock</th>{% if failed %}<th>message</th>{% endif %}</tr></thead><tbody>
{% for r in rows %}<tr>
<td class="mono impl">{{ r.impl }}</td><td class="shape" data-sort="{{ r._order }}">{{ r.shape|text }}</td>
<td class="num">{{ r.world_size|text }}{% if r.nodes is number and r.nodes > 1 %}<br><span class="na"
title="nodes × ranks a node{% if r.launcher %}, launched by {{ r.launcher }}: {{ r.hosts }}{% endif %}">
{{ r.nodes }} × {{ r.ranks_per_node }}</span>{% endif %}</td>
<td class="status-{{ r.status }}">{{ r.status|text }}{% if r.backend == "gloo" %}
<span class="pill cpu" title="CPU ranks over gloo: a CPU time">CPU</span>{% endif %}</td>
<td class="num" data-sort="{{ r.median_s|sort_key }}">{{ r.median_s|seconds }}{% if r.median_s %}<br>
<span class="na">{{ r.p10_s|seconds }} – {{ r.p90_s|seconds }}</span>{% endif %}</td>
<td class="num" data-sort="{{ r.fraction_of_roofline|sort_key }}">
<span class="pill {{ r.fraction_of_roofline|pct_class }}">{{ r.fraction_of_roofline|pct }}</span></td>
<td class="num" data-sort="{{ r.speedup_vs_reference|sort_key }}">{{ r.speedup_vs_reference|times }}</td>
<td>{% if r.mechanism %}{{ r.mechanism }} / {{ r.schedule }}{% else %}—{% endif %}</td>
<td class="num" data-sort="{{ r.predicted_s|sort_key }}">{{ r.predicted_s|seconds }}</td>
<td class="num" data-sort="{{ r.prediction_error|sort_key }}">{{ r.prediction_error|pct }}</td>
{% if busbw %}<td class="num" data-sort="{{ r.busbw_Bps|sort_key }}">{{ r.busbw_Bps|Bps }}</td>{% endif %}
<td class="num" data-sort="{{ r.achieved_link_Bps|sort_key }}">{{ r.achieved_link_Bps|Bps }}</td>
<td class="num" data-sort="{{ r.comm_bytes|sort_key }}">{{ r.comm_bytes|bytes }}</td>
<td class="num" data-sort="{{ r.sm_clock_mhz|sort_key }}">{{ r.sm_clock_mhz|mhz }}
<span class="na">{{ r.power_capped|capped }}</span></td>
{% if failed %}<td class="message">{% if r.status != "correct" %}{{ r.message }}{% endif %}</td>{% endif %}
</tr>{% endfor %}
</tbody></table></div>{% endif %}
<h2>Advice</h2>
{% if shapes %}<p class="sub">What to build, per shape and world size: the model's best (mechanism, schedule) at
that row's own parameters, against NCCL, serial.</p>
<div class="scroll"><table class="advice"><thead><tr><th>shape</th><th class="num">ranks</th>
<th>mechanism / schedule</th><th class="num">predicted</th><th class="num">NCCL, serial</th>
<th class="num">headroom over NCCL, serial</th><th>why</th></tr></thead><tbody>
{% for s in shapes %}{% set a = s.advice %}<tr><td>{{ s.shape|text }}{% if s.params %}<br>
<span class="mono na">{{ s.params }}</span>{% endif %}</td><td class="num">{{ s.world_size|text }}</td>
<td>{% if a.get("mechanism") %}{% set ll = " LL" if a.get("protocol") == "ll" else "" %}
<b>{{ a["mechanism"] }}{{ ll }} / {{ a.get("schedule")|text }}</b>
{%- if a.get("comm_sms") %} ({{ a["comm_sms"] }} SMs for communication){% endif %}
{% else %}—{% endif %}</td>
<td class="num">{{ a.get("t_s")|seconds }}</td><td class="num">{{ a.get("baseline_t_s")|seconds }}</td>
<td class="num">{{ a.get("headroom")|times }}</td><td class="reason">{{ a.get("reason")|text }}</td></tr>
{% endfor %}
</tbody></table></div>{% else %}<p class="na">No advice was given for this problem.</p>{% endif %}
{% if rows %}<h2>Environment</h2>
<div class="scroll"><table class="kv"><tbody>{% for label, value in environment %}<tr><th>{{ label }}</th>
<td class="wrap">{{ value|text }}</td></tr>
{% endfor %}
</tbody></table></div>{% endif %}
{% endblock %}"""

TOPOLOGY = """{% extends "base" %}{% block body %}
<h1>Topology: {{ t.name }}</h1>
<p class="sub">{{ t.description }}</p>
{% if t.probe is none %}<div class="callout info"><b>Not probed.</b> No measurement stands behind this topology:
its numbers come from datasheets and published runs (see "measured or nominal" below).</div>
{% elif t.probe.health %}<div class="callout"><b>Health flags ({{ t.probe.health|length }})</b>: the probe saw these;
numbers measured on a degraded node understate a healthy one.<ul>{% for line in t.probe.health %}<li>{{ line }}</li>
{% endfor %}</ul></div>
{% elif t.probe.command.startswith("pkroof topology import") %}<div class="callout info"><b>Calibrated from runs
imported</b> (nccl-tests, nvbandwidth) onto a preset: each number they set is marked measured, its file the source
(see "measured or nominal" below); the rest is the preset's.</div>
{% else %}<div class="callout ok"><b>No health flags</b>: links, PCIe and clocks looked nominal during the probe.</div>
{% endif %}
<h2>Node</h2>
{{ svg }}
<div class="scroll"><table class="kv"><tbody>
<tr><th>nodes × GPUs per node</th><td>{{ t.nodes }} × {{ t.gpus_per_node }}</td></tr>
<tr><th>GPU</th><td>{{ t.gpu.name }} ({{ t.gpu.arch }}), {{ t.gpu.sm_count }} SMs,
{{ t.gpu.hbm_capacity_bytes|bytes }} HBM at {{ t.gpu.hbm_bandwidth_Bps|Bps }}</td></tr>
<tr><th>peak FLOP/s (dense)</th><td>{{ t.gpu.peak_flops|value("peak_flops") }}</td></tr>
{% if t.gpu.sustained_flops %}<tr><th>FLOP/s under continuous load</th>
<td>{% for dtype, flops in t.gpu.sustained_flops.items() %}{{ dtype }} {{ flops|value("sustained_flops") }}{{
t.matmul_clock(dtype)|clock }}{% if not loop.last %}, {% endif %}{% endfor %} (predictions of ops of 2 ms or more)</td>
</tr>{% endif %}
<tr><th>scale-up</th>
<td>{% if t.scaleup.kind == "none" %}{{ t.scaleup.generation }}: no peer, nothing is communicated{% else %}
{{ t.scaleup.kind }}, {{ t.scaleup.generation }}: {{ t.scaleup.links_per_gpu }} links
× {{ t.scaleup.link_bandwidth_Bps|Bps }}
= {{ t.scaleup.total_bandwidth_Bps|Bps }} per GPU per direction{% if t.scaleup.multicast %}, multicast
{% endif %}{% endif %}</td></tr>
<tr><th>scale-out</th><td>{% if t.nic %}{{ t.nic.count_per_node }} × {{ t.nic.model }} ({{ t.nic.kind }})
at {{ t.nic.rate_Bps|Bps }} each,
{{ t.nic.latency_s|seconds }} one way{% else %}none{% endif %}</td></tr>
</tbody></table></div>
<h2>Mechanisms: latency and bandwidth</h2>
<div class="scroll"><table><thead><tr><th>mechanism</th><th>available</th><th class="num">α (latency)</th>
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
<td class="num">{{ m.spec.num_ctas_default or "—" }}</td><td>{{ m.basis }}</td><td class="wrap">{{ m.spec.note }}</td>
</tr>
{% endfor %}
</tbody></table></div>
{% if t.probe and t.probe.fits %}<h2>Fits</h2>
<div class="scroll"><table><thead><tr><th>mechanism</th><th>curve</th><th class="num">α</th><th class="num">β</th>
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
</tbody></table></div>{% endif %}
{% if charts %}<h2>Bandwidth: model over samples</h2>
{% if not t.probe %}<p class="na">No samples without a probe: the lines are the nominal mechanism specs.</p>
{% endif %}{% endif %}
{% for mechanism, charts in charts %}<h3>{{ mechanism }}</h3><div class="charts">{% for c in charts %}
<div>{{ c }}</div>{% endfor %}</div>{% endfor %}
<h2 id="basis">Measured or nominal</h2>
<div class="scroll"><table><thead><tr><th>number</th><th class="num">value</th><th>basis</th><th>source</th>
</tr></thead><tbody>
{% for row in basis %}<tr><td class="mono">{{ row.path }}</td><td class="num wrap">{{ row.value }}</td>
<td><span class="pill {{ 'good' if row.basis == 'measured' else 'na' }}">{{ row.basis }}</span></td>
<td class="wrap">{{ row.cite }}</td></tr>{% endfor %}
</tbody></table></div>
{% if t.probe %}<h2>Probe</h2>
<div class="scroll"><table class="kv"><tbody>
<tr><th>host · date</th><td>{{ t.probe.host }} · {{ t.probe.date }}</td></tr>
<tr><th>command</th><td><code>{{ t.probe.command }}</code>
({{ t.probe.duration_s|seconds }}{{ ", quick" if t.probe.quick }})</td></tr>
{% for k, v in t.probe.versions.items() %}<tr><th>{{ k }}</th><td>{{ v }}</td></tr>{% endfor %}
{% for k, v in t.probe.ceilings.items() %}<tr><th>{{ k }}</th><td>{{ v|value(k) }}</td></tr>{% endfor %}
</tbody></table></div>
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
TIERS = ("scale-up", "scale-out")  # the link term of each, on a bound across nodes


def _render(template: str, title: str, *, assets: str = "", **context: Any) -> str:
    """`assets`: the relative path from the page to the folder holding plotly.min.js ("" or "../../")."""
    page = _ENV.get_template(template)
    return page.render(
        title=title, style=Markup(STYLE), sort_js=Markup(SORT_JS), narrow_js=Markup(NARROW_JS), assets=assets, **context
    )


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
    return _render(
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


def _environment(records: pd.DataFrame, meta: Mapping[str, Any]) -> list[tuple[str, str]]:
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


def _flops_by_shape(bound: Mapping[str, Any]) -> dict[tuple[str, Any], float]:
    return {
        (str(e.get("shape")), e.get("world_size")): float((e.get("summary") or {}).get("flops") or 0.0)
        for e in bound.get("shapes") or ()
    }


def _problem_charts(records: pd.DataFrame, bound: Mapping[str, Any]) -> tuple[str, Markup, Markup]:
    """(the time chart's title, the time chart, the roofline chart) of one problem, GPU measurements only."""
    gpu = records[~frames.on_cpu_ranks(records)] if len(records) else records
    x = frames.chart_x(bound)
    entries = list(bound.get("shapes") or ())
    sweep = list(bound.get("sweep") or ())
    flops = _flops_by_shape(bound)
    keys = zip(gpu["shape"], [None if pd.isna(w) else int(w) for w in gpu["world_size"]], strict=True)
    measured = gpu.assign(flops=[flops.get(k, math.nan) for k in keys])
    roof = frames.roofline_frame(sweep, x="flops" if x == "flops" else None)
    time_fig = figures.roofline_figure(roof, measured, x="flops" if x == "flops" else "comm_bytes")
    if x == "flops":
        title = "Time against FLOPs per rank: each shape's roof, predictions and measurements"
        note = "One point per shape (named or measured), joined by lines; each measurement sits at its own shape."
    else:
        title = "Time against size: the roof, its terms, every prediction and the measurements"
        note = "Sizes in nccl-tests' convention; the roof passes through every measured size."
    chart = figure_html(time_fig, "roofline", title, note, wide=True)
    points = frames.intensity_frame(gpu, entries)
    shapes = frames.shapes_frame(entries, sweep)
    if len(shapes) and (shapes["flops"] > 0).any():
        fig = figures.intensity_figure(points, shapes[shapes["flops"] > 0])
        said = (
            "Achieved FLOP/s of each measured implementation against its shape's FLOPs per byte of HBM and of link "
            "traffic (per rank): no point can rise above the lower roof at its intensity."
        )
        roofline = figure_html(fig, "intensity", "Achieved FLOP/s against arithmetic intensity", said, wide=True)
    elif sweep and any(p.get("link_bytes") for p in sweep):
        fig = figures.collective_roofline_figure(frames.bandwidth_roof_frame(sweep), points)
        said = (
            "No FLOPs: each measured implementation's link bytes per rank per second against its size, under the link "
            "roof, the latency roof (link bytes / the latency term) and the HBM roof."
        )
        roofline = figure_html(fig, "intensity", "Achieved bandwidth against size", said, wide=True)
    else:
        roofline = Markup("")
    return title, chart, roofline


def crossover_sentence(crossover: Mapping[str, Any]) -> str:
    """Where the link term moves from the node's fabric to the network, in words: "NVLink-bound up to 8 nodes,
    network-bound from 16.", "Network-bound from 2 nodes.", or "NVLink-bound at every size shown (1 to 1024
    nodes).": the scale-out term first exceeds the scale-up one at `network_from` nodes (None: at none shown)."""
    nodes = [int(p["nodes"]) for p in crossover.get("points") or ()]
    first, fabric = crossover.get("network_from"), crossover.get("fabric") or "scale-up"
    if first is None:
        return f"{fabric}-bound at every size shown ({nodes[0]} to {nodes[-1]} nodes)."
    before = [n for n in nodes if 1 < n < first]
    if not before:
        return f"Network-bound from {first} nodes."
    return f"{fabric}-bound up to {before[-1]} nodes, network-bound from {first}."


def _crossover_chart(crossover: Mapping[str, Any] | None) -> Markup:
    """The bound's terms against the number of nodes, and where the network takes over the link term, in a sentence
    under the chart; where fewer than two node counts could be bounded, why, in one line. Nothing without a
    network."""
    if not crossover:
        return Markup("")
    points, left_out = crossover.get("points") or (), crossover.get("left_out") or ""
    if len(points) < 2 or not any(p["nodes"] > 1 for p in points):
        return Markup(f'<p class="na">Not drawn: {escape(left_out)}.</p>\n')
    fig = figures.crossover_figure(
        frames.nodes_frame(points), network_from=crossover.get("network_from"), fabric=crossover.get("fabric", "")
    )
    what = f"at {crossover.get('shape')}, {crossover.get('ranks_per_node')} ranks a node"
    title = f"The bound's terms against the number of nodes ({what})"
    said = crossover_sentence(crossover)
    said += " The scale-up term is the node's own links, the scale-out term each GPU's share of its node's NICs."
    chart = figure_html(fig, "crossover", title, said, wide=True)
    return chart + (Markup(f'<p class="chart-note">{escape(left_out)}.</p>\n') if left_out else Markup(""))


def problem_page(
    name: str,
    *,
    records: pd.DataFrame,
    bound: Mapping[str, Any] | None = None,
    meta: Mapping[str, Any] | None = None,
    assets: str = "",
) -> str:
    """One problem: its roofline charts, its bound and advice per shape, the implementations and the environment;
    an analytic page (no records) has no implementations table.

    records: records_frame rows of this problem; bound (its "shapes" and "sweep") and meta: see reports/build.py.
    """
    bound, meta = bound or {}, meta or {}
    time_title, chart, roofline = _problem_charts(records, bound)
    timed_on_cpu = frames.on_cpu_ranks(records) & records["median_s"].notna()
    shapes = _shapes(bound)
    across_nodes = any("scale-out" in (s["summary"].get("link_terms") or {}) for s in shapes)
    return _render(
        "problem",
        name,
        assets=assets,
        name=name,
        meta=meta,
        shapes=shapes,
        terms=TERMS,
        time_title=time_title.split(":")[0],
        chart=chart,
        roofline=roofline,
        crossover=_crossover_chart(bound.get("crossover")),
        fabric=(bound.get("crossover") or {}).get("fabric", ""),
        tiers=TIERS if across_nodes else (),  # a bound across nodes: each tier's link term in a column of its own
        cpu_rows=int(timed_on_cpu.sum()),
        rows=_rows(_ordered(records)) if len(records) else [],
        busbw=bool(records["busbw_Bps"].notna().any()) if len(records) else False,
        failed=bool((records["status"] != "correct").any()) if len(records) else False,
        environment=_environment(records, meta),
    )


def _wrapped(body: str, width: int) -> list[str]:
    """`body` in at most two lines of about `width` characters, broken at spaces (a GPU's NVML name in its box)."""
    import textwrap

    lines = textwrap.wrap(body, width) or [""]
    return lines if len(lines) <= 2 else [lines[0], textwrap.shorten(" ".join(lines[1:]), width, placeholder="…")]


def topology_svg(topology: Topology) -> Markup:
    """The GPUs of one node, the scale-up fabric and the NICs, labelled with link count and speed; drawn no larger
    than its own size, every label inside its box."""
    s, nic = topology.scaleup, topology.nic
    n = topology.gpus_per_node
    cols = min(n, 8)
    box_w, box_h, gap = 120, 60, 18
    width = max(cols * (box_w + gap) + 2 * gap, 720)
    gpu_rows = math.ceil(n / cols)
    left = (width - cols * (box_w + gap) + gap) / 2
    peers = s.kind != "none"
    fabric_y = 30 + gpu_rows * (box_h + gap) + (40 if peers else -gap)
    nic_y = fabric_y + (90 if peers else 40)
    height = (nic_y + box_h + 40) if nic else (fabric_y + (54 if peers else 30))
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
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width:.0f} {height:.0f}" width="100%" '
        f'style="max-width: {width:.0f}px" role="img">'
    ]
    text = '<text x="{x:.0f}" y="{y:.0f}" font-size="{size}" text-anchor="middle" fill="{fill}">{body}</text>'
    if nic:
        for i, (x, y) in enumerate(gpu_xy):
            k = i * nic.count_per_node // n
            nx = (width - nic.count_per_node * (box_w + gap) + gap) / 2 + k * (box_w + gap)
            parts.append(
                f'<line x1="{x + box_w / 2:.0f}" y1="{y + box_h:.0f}" x2="{nx + box_w / 2:.0f}" y2="{nic_y:.0f}" '
                'stroke="#9ca3af" stroke-dasharray="4 3"/>'
            )
    for x, y in gpu_xy if peers else ():
        parts.append(
            f'<line x1="{x + box_w / 2:.0f}" y1="{y + box_h:.0f}" x2="{x + box_w / 2:.0f}" y2="{fabric_y:.0f}" '
            'stroke="#d97706" stroke-width="2"/>'
        )
        if n <= 16:
            body = f"{s.links_per_gpu}×"
            parts.append(text.format(x=x + box_w / 2 + 14, y=fabric_y - 8, size=10, fill="#b45309", body=body))
    name = _wrapped(topology.gpu.name, 19)
    for i, (x, y) in enumerate(gpu_xy):
        parts.append(
            f'<rect x="{x:.0f}" y="{y:.0f}" width="{box_w}" height="{box_h}" rx="6" fill="#eff6ff" stroke="#2563eb"/>'
        )
        parts.append(text.format(x=x + box_w / 2, y=y + 20, size=13, fill="#1e3a8a", body=f"GPU {i}"))
        for j, line in enumerate(name):
            parts.append(text.format(x=x + box_w / 2, y=y + 37 + 13 * j, size=10, fill="#374151", body=escape(line)))
    if peers:
        bar = f'x="{gap}" y="{fabric_y:.0f}" width="{width - 2 * gap:.0f}" height="44"'
        parts.append(f'<rect {bar} rx="6" fill="#fffbeb" stroke="#d97706"/>')
        parts.append(text.format(x=width / 2, y=fabric_y + 18, size=13, fill="#92400e", body=escape(fabric)))
        parts.append(text.format(x=width / 2, y=fabric_y + 35, size=11, fill="#92400e", body=escape(per_gpu)))
    else:
        said = f"{s.generation}: no peer in this node, so nothing is communicated"
        parts.append(text.format(x=width / 2, y=fabric_y + 22, size=12, fill="#6b7280", body=escape(said)))
    if nic:
        start = (width - nic.count_per_node * (box_w + gap) + gap) / 2
        for k in range(nic.count_per_node):
            x = start + k * (box_w + gap)
            box = f'x="{x:.0f}" y="{nic_y:.0f}" width="{box_w}" height="{box_h}"'
            parts.append(f'<rect {box} rx="6" fill="#f0fdf4" stroke="#15803d"/>')
            parts.append(text.format(x=x + box_w / 2, y=nic_y + 20, size=12, fill="#14532d", body=f"NIC {k}"))
            for j, line in enumerate(_wrapped(f"{nic.model} · {fmt_Bps(nic.rate_Bps)}", 19)):
                at = nic_y + 37 + 13 * j
                parts.append(text.format(x=x + box_w / 2, y=at, size=10, fill="#374151", body=escape(line)))
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
