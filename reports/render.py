"""The pages' Jinja2 environment: the templates under reports/templates (shipped as package data), autoescape on,
and the filters that format a number by the unit its name carries ("—" for what is missing)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pandas as pd
from jinja2 import Environment, PackageLoader, StrictUndefined

from pkroof.rooflines.units import fmt_Bps, fmt_bytes, fmt_clock, fmt_flops, fmt_s


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


def value_text(name: str, value: Any) -> str:
    """A topology field formatted by the unit its name carries; a dict entry by its field's unit (overlap_s: seconds
    per schedule; peak_flops: FLOP/s per dtype), each collective's regimes on a line of their own."""
    if isinstance(value, dict) and name == "collectives":
        return "\n".join(f"{k}: {_regimes(rs)}" for k, rs in value.items())
    if isinstance(value, dict):
        return ", ".join(f"{k} {_scalar(name, v)}" for k, v in value.items())
    return _scalar(name, value)


def shown(problem: Any) -> Any:
    """A problem as a page names it: a suite problem by its name, a problem file by its path relative to the working
    folder where it lies below it, else by its file name; never this machine's absolute path. An implementation
    `file.py:function` is named so too; what is not text is left as it is."""
    if not isinstance(problem, str):
        return problem
    path_part, colon, function = problem.rpartition(":")
    if colon and path_part.endswith(".py"):
        return f"{shown(path_part)}:{function}"
    if not problem.endswith(".py"):
        return problem
    path = Path(problem)
    if not path.is_absolute():
        return problem
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return path.name


ENV = Environment(
    loader=PackageLoader("pkroof.reports", "templates"),
    autoescape=True,
    undefined=StrictUndefined,
    trim_blocks=True,
)
ENV.filters |= {
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
    "value": lambda value, name: value_text(name, value),
    "shown": shown,
    "plural": lambda n, word: f"{n} {word}" if n == 1 else f"{n} {word}s",
}


def render(template: str, title: str, *, assets: str = "", **context: Any) -> str:
    """The page `template` ("index", "problem", "topology") with its `title`; `assets`: the relative path from the
    page to the folder holding plotly.min.js ("" or "../../")."""
    return ENV.get_template(f"{template}.html.j2").render(title=title, assets=assets, **context)
