"""Typed results → pandas DataFrames: result records, the per-problem index, probe curves, fitted models, roofline
sweeps, the bound against the number of nodes.

Nothing here measures or bounds anything: the records arrive with their model view, the pages' bounds, sweeps and
crossovers as the model's results (records/report_inputs.py), and a fitted model's line is the model's own transfer
time (rooflines/mechanisms.py). A record's field that is missing or not a number (a corrupted record) becomes NaN
(numbers) or "" (text), never an error.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

import pandas as pd

from pkroof.records.format import topology_name
from pkroof.rooflines import Advice, Collective, Mechanism, TransferModel
from pkroof.rooflines.algorithms import nccl_traffic
from pkroof.rooflines.analyze import NodesPoint, SweepPoint
from pkroof.rooflines.mechanisms import label

if TYPE_CHECKING:
    from pkroof.records.report_data import Page, Shape
    from pkroof.rooflines import Bound
    from pkroof.topology import Topology

TEXT = ("problem", "shape", "impl", "status", "mechanism", "schedule", "message", "date")
NUMBERS = (
    "median_s",
    "p10_s",
    "p90_s",
    "t_roof_s",
    "fraction_of_roofline",
    "speedup_vs_reference",
    "achieved_link_Bps",
    "algbw_Bps",
    "busbw_Bps",
    "comm_bytes",
    "predicted_s",
    "prediction_error",
    "sm_clock_mhz",
    "power_capped",
)
ENVIRONMENT = ("gpu", "driver", "cuda", "nccl", "torch", "triton", "settings", "host", "backend", "topology", "command")
RECORD_COLUMNS = (
    "problem",
    "shape",
    "impl",
    "world_size",
    "nodes",
    "ranks_per_node",
    "launcher",
    "hosts",
    "status",
    "mechanism",
    "schedule",
    *NUMBERS,
    "message",
    *ENVIRONMENT,
    "date",
)
TERMS = {"t_roof_s": "roof", "compute_s": "compute", "hbm_s": "HBM", "link_s": "link", "latency_s": "latency"}


def _number(value: Any) -> float:
    """A finite int or float as float; anything else (None, a string, a bool, inf) is NaN."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return math.nan
    return float(value)


def _text(value: Any) -> str:
    if isinstance(value, Mapping):  # settings: NAME=value, sorted
        return " ".join(f"{k}={v}" for k, v in sorted(value.items()))
    return "" if value is None else str(value)


def _mechanism(d: Mapping[str, Any]) -> str:
    """A record's or an advice's mechanism as the report shows it: "sm-store", or "sm-store LL" for the LL protocol."""
    return label(_text(d.get("mechanism")), d.get("protocol"))


def _record_row(record: Mapping[str, Any]) -> dict[str, Any]:
    env = record.get("environment")
    env = env if isinstance(env, Mapping) else {}
    row: dict[str, Any] = {name: _text(record.get(name)) for name in TEXT}
    row["mechanism"] = _mechanism(record)
    row |= {name: _number(record.get(name)) for name in NUMBERS}
    world = _number(record.get("world_size"))
    row["world_size"] = pd.NA if math.isnan(world) else int(world)
    nodes, per_node = _number(record.get("nodes", 1)), _number(record.get("ranks_per_node", record.get("world_size")))
    row["nodes"] = pd.NA if math.isnan(nodes) else int(nodes)  # a launched job's placement; one node otherwise
    row["ranks_per_node"] = pd.NA if math.isnan(per_node) else int(per_node)
    row["launcher"] = _text(record.get("launcher"))
    hosts = record.get("hosts")
    row["hosts"] = " ".join(map(str, hosts)) if isinstance(hosts, list) else ""
    for name in ("median_s", "p10_s", "p90_s", "t_roof_s"):  # a time that is not positive was never measured
        if not row[name] > 0:
            row[name] = math.nan
    row |= {name: _text(env.get(name)) for name in ENVIRONMENT}
    row["topology"] = _text(topology_name(dict(record)))  # version 1: its environment's
    return row


def records_frame(records: Iterable[Mapping[str, Any]]) -> pd.DataFrame:
    """One row per result record (records/format.py), the environment flattened into columns."""
    frame = pd.DataFrame([_record_row(r) for r in records], columns=list(RECORD_COLUMNS))
    for name in ("world_size", "nodes", "ranks_per_node"):
        frame[name] = frame[name].astype("Int64")
    return frame


def _advice_fields(advice: Advice | None) -> dict[str, Any]:
    if advice is None:
        return {"mechanism": "", "schedule": "", "predicted_s": math.nan, "predicted_headroom": math.nan, "reason": ""}
    return {
        "mechanism": advice.best.label,
        "schedule": advice.schedule.value,
        "predicted_s": _number(advice.t_s),
        "predicted_headroom": _number(advice.headroom),
        "reason": advice.reason,
    }


INDEX_COLUMNS = (
    "problem",
    "shape",
    "world_size",
    "category",
    "t_roof_s",
    "reference_median_s",
    "reference_fraction",
    "best_impl",
    "best_median_s",
    "best_fraction",
    "headroom",
    "num_impls",
    "num_failed",
    "mechanism",
    "schedule",
    "predicted_s",
    "predicted_headroom",
    "reason",
    "on_cpu",
)


RowKey = tuple[str, str, Any]  # (problem, shape, world size): one index row, one analysis


def index_frame(
    records: pd.DataFrame,
    *,
    categories: Mapping[str, str] | None = None,
    advice: Mapping[RowKey, Advice | None] | None = None,
) -> pd.DataFrame:
    """One row per (problem, shape, world size): the reference against the fastest correct implementation.

    headroom = reference median / best median (measured). `advice` maps (problem, shape, world size) to the Advice
    computed for that row's own parameters and ranks; a row without one shows none.
    """
    categories, advice = categories or {}, advice or {}
    rows = []
    for (problem, shape, world), group in records.groupby(["problem", "shape", "world_size"], sort=True, dropna=False):
        timed = group[(group["status"] == "correct") & group["median_s"].notna()]
        reference = timed[timed["impl"] == "reference"]
        ref = reference.iloc[0] if len(reference) else None
        best = timed.loc[timed["median_s"].idxmin()] if len(timed) else None
        rows.append(
            {
                "problem": problem,
                "shape": shape,
                "world_size": world,
                "category": categories.get(problem, ""),
                "t_roof_s": group["t_roof_s"].max(),
                "reference_median_s": ref["median_s"] if ref is not None else math.nan,
                "reference_fraction": ref["fraction_of_roofline"] if ref is not None else math.nan,
                "best_impl": best["impl"] if best is not None else "",
                "best_median_s": best["median_s"] if best is not None else math.nan,
                "best_fraction": best["fraction_of_roofline"] if best is not None else math.nan,
                "headroom": ref["median_s"] / best["median_s"] if ref is not None else math.nan,
                "num_impls": len(group),
                "num_failed": int((group["status"] != "correct").sum()),
                **_advice_fields(advice.get((problem, shape, None if pd.isna(world) else int(world)))),
                "on_cpu": bool(on_cpu_ranks(timed).any()),  # CPU times: never compared with a GPU roof
            }
        )
    frame = pd.DataFrame(rows, columns=list(INDEX_COLUMNS))
    frame["world_size"] = frame["world_size"].astype("Int64")
    return frame


def analytic_rows(pages: Iterable[Page], *, measured: Iterable[str] = ()) -> pd.DataFrame:
    """Index rows for problems with a bound but no measurement: per analysed shape, the roof and its advice."""
    skip = set(measured)
    rows = []
    for page in pages:
        if page.name in skip:
            continue
        for shape in page.shapes:
            rows.append(
                {
                    "problem": page.name,
                    "shape": shape.label,
                    "world_size": shape.world_size,
                    "category": page.category,
                    "t_roof_s": _number(shape.bound.t_roof_s),
                    "num_impls": 0,
                    "num_failed": 0,
                    **_advice_fields(shape.advice),
                    "on_cpu": False,
                }
            )
    frame = pd.DataFrame(rows, columns=list(INDEX_COLUMNS))
    frame["world_size"] = frame["world_size"].astype("Int64")
    return frame


def advice_by_row(pages: Iterable[Page]) -> dict[RowKey, Advice | None]:
    """(problem, shape, world size) → the advice computed for that shape (the `advice` argument of index_frame)."""
    return {(page.name, shape.label, shape.world_size): shape.advice for page in pages for shape in page.shapes}


CURVE_COLUMNS = (
    "curve",
    "mechanism",
    "direction",
    "sweep",
    "num_ctas",
    "size_bytes",
    "x",
    "median_s",
    "p10_s",
    "p90_s",
    "bandwidth_Bps",
    "bandwidth_lo_Bps",
    "bandwidth_hi_Bps",
)


def curves_frame(topology: Topology) -> pd.DataFrame:
    """Every probe curve point; bandwidth = link bytes / median (lo: / p90, hi: / p10), one direction: the size
    for a copy, a collective's link bytes for NCCL (so its nccl-tests bus bandwidth). Empty without a probe."""
    rows, ranks = [], topology.nodes * topology.gpus_per_node  # NCCL curves span every rank the probe ran
    for c in topology.probe.curves if topology.probe else ():
        link = _link_bytes(c.mechanism, c.name, c.num_ranks or ranks)  # an imported run says its own ranks
        for x, median, p10, p90 in zip(c.x, c.median_s, c.p10_s, c.p90_s, strict=True):
            size = x if c.sweep == "size" else c.size_bytes  # a CTA sweep moves size_bytes at every point
            moved = link(size)
            rows.append(
                {
                    "curve": c.name,
                    "mechanism": c.mechanism,
                    "direction": c.direction,
                    "sweep": c.sweep,
                    "num_ctas": c.num_ctas,
                    "size_bytes": size,
                    "x": x,
                    "median_s": median,
                    "p10_s": p10,
                    "p90_s": p90,
                    "bandwidth_Bps": moved / median,
                    "bandwidth_lo_Bps": moved / p90,
                    "bandwidth_hi_Bps": moved / p10,
                }
            )
    return pd.DataFrame(rows, columns=list(CURVE_COLUMNS))


MODEL_COLUMNS = ("mechanism", "curve", "basis", "sweep", "x", "bandwidth_Bps")


def _lines(topology: Topology) -> dict[tuple[str, str, str], TransferModel]:
    """(mechanism, curve, basis) → the model's transfer model of that line: the probe's fits of the curve (several
    are a collective's regimes, of which the cheapest runs at each size) or, without a probe, the mechanism's spec."""
    if topology.probe is None:
        specs = topology.mechanisms.items()
        return {(name, name, "spec"): spec.model(Mechanism(name)) for name, spec in specs if spec.available}
    fits: dict[tuple[str, str], list] = {}
    for f in sorted(topology.probe.fits, key=lambda f: f.regime):
        fits.setdefault((f.mechanism, f.curve), []).append(f)
    return {
        (mechanism, curve, "fit"): TransferModel(
            Mechanism(mechanism),
            True,
            regimes[0].latency_s,
            max(f.peak_bandwidth_Bps for f in regimes),
            regimes[0].per_cta_bandwidth_Bps,
            collective_fits=tuple((curve, f.latency_s, f.peak_bandwidth_Bps) for f in regimes),
        )
        for (mechanism, curve), regimes in fits.items()
    }


def model_frame(topology: Topology, sizes: Iterable[float], ctas: Iterable[int]) -> pd.DataFrame:
    """The topology's own fitted model at the given x, as the model computes it (rooflines/mechanisms.py
    TransferModel): size sweeps L(S) / t(L(S)), the cheapest of a fit's regimes at each size; CTA sweeps the
    bandwidth k CTAs reach, min(k·β_cta, β_peak).

    L(S) is the link bytes of one call: S for a point-to-point copy; for an NCCL fit, its collective's link bytes
    on the node's ranks (β is a link rate), the same units as the samples (curves_frame).
    basis is "fit" (the probe's fits) or "spec" (a topology without a probe: its mechanism specs).
    """
    sizes, ctas = list(sizes), list(ctas)
    rows, ranks = [], topology.nodes * topology.gpus_per_node  # NCCL fits span every rank the probe ran
    measured_on = {c.name: c.num_ranks for c in topology.probe.curves} if topology.probe else {}
    for (mechanism, curve, basis), model in _lines(topology).items():
        link = _link_bytes(mechanism, curve, measured_on.get(curve) or ranks)
        for s in sizes:
            moved = link(s)
            rows.append((mechanism, curve, basis, "size", s, moved / model.for_collective(curve, moved).time_s(moved)))
        if model.uses_sms:
            rows += [(mechanism, curve, basis, "ctas", k, model.bandwidth_Bps(k)) for k in ctas]
    return pd.DataFrame(rows, columns=list(MODEL_COLUMNS))


def _link_bytes(mechanism: str, curve: str, world: int) -> Callable[[float], float]:
    if mechanism == "nccl" and curve.startswith("nccl "):
        kind = Collective(curve.removeprefix("nccl "))
        return lambda s: nccl_traffic(kind, s, world).bytes
    return lambda s: s


ROOFLINE_COLUMNS = ("x", "x_kind", "series", "kind", "t_s")


def roofline_frame(points: Iterable[SweepPoint], x: str = "size_bytes") -> pd.DataFrame:
    """Long form of sweep points: one row per (x, series), x each point's `x` ("size_bytes", or "flops" for a sweep
    of shapes without a size).

    kind is "roof" (t_roof_s), "term" (compute, HBM, link, latency) or "prediction" (series "mechanism/schedule",
    "/ll" appended for the LL protocol).
    """
    rows = []
    for p in points:
        at = _number(getattr(p, x))
        for key, series in TERMS.items():
            rows.append((at, x, series, "roof" if key == "t_roof_s" else "term", _number(getattr(p, key))))
        rows += [(at, x, name, "prediction", _number(t)) for name, t in p.predictions.items()]
    return pd.DataFrame(rows, columns=list(ROOFLINE_COLUMNS))


NODES_TERMS = {
    "t_roof_s": "roof",
    "compute_s": "compute",
    "hbm_s": "HBM",
    "scaleup_s": "scale-up",
    "scaleout_s": "scale-out",
    "latency_s": "latency",
}
NODES_COLUMNS = ("nodes", "series", "t_s")


def nodes_frame(points: Iterable[NodesPoint]) -> pd.DataFrame:
    """Long form of the bound at each number of nodes (a crossover's points): one row per (nodes, series) whose time
    is positive, as a log axis draws them (no scale-out on one node, no compute in a collective)."""
    rows = []
    for p in points:
        for key, series in NODES_TERMS.items():
            t = _number(getattr(p, key))
            if t > 0:
                rows.append((p.nodes, series, t))
    return pd.DataFrame(rows, columns=list(NODES_COLUMNS))


def on_cpu_ranks(records: pd.DataFrame) -> pd.Series:
    """Rows measured on CPU ranks over gloo: CPU times, never drawn or compared as GPU times."""
    return records["backend"] == "gloo"


def chart_x(page: Page) -> str:
    """What a problem's time chart is drawn against: its size where it has one (a collective), else its FLOPs
    (shapes of a GEMM differ in FLOPs, and sizes would pile distinct roofs on one x), else its communication."""
    sized = any("size" in shape.bound.workload.params for shape in page.shapes)
    if sized or not any(p.flops > 0 for p in page.sweep):
        return "size_bytes"
    return "flops"


INTENSITY_COLUMNS = (
    "impl",
    "shape",
    "world_size",
    "median_s",
    "size_bytes",
    "flops",
    "hbm_bytes",
    "link_bytes",
    "t_roof_s",
    "achieved_flops",
    "achieved_link_Bps",
    "hbm_intensity",
    "link_intensity",
    "roof_flops",
    "peak_flops",
    "hbm_bandwidth_Bps",
    "link_bandwidth_Bps",
)


def _intensities(flops: float, hbm: float, link: float, t_roof: float) -> dict[str, float]:
    """FLOPs per HBM byte and per link byte, and the roof as FLOP/s (FLOPs / t_roof); NaN where a divisor is 0."""
    return {
        "hbm_intensity": flops / hbm if hbm > 0 else math.nan,
        "link_intensity": flops / link if link > 0 else math.nan,
        "roof_flops": flops / t_roof if t_roof > 0 else math.nan,
    }


def _roofs(b: Bound) -> dict[str, float]:
    """The shape's roofs: its FLOPs' peak FLOP/s, the HBM bandwidth and the link rate its link term was charged."""
    return {name: _number(getattr(b, name)) for name in ("peak_flops", "hbm_bandwidth_Bps", "link_bandwidth_Bps")}


def _sizes(b: Bound) -> tuple[float, float, float, float]:
    """(FLOPs, HBM bytes, link bytes per rank, t_roof) of the busiest rank."""
    return _number(b.flops), _number(b.hbm_bytes), _number(b.link_bytes_per_rank), _number(b.t_roof_s)


def intensity_frame(records: pd.DataFrame, shapes: Iterable[Shape]) -> pd.DataFrame:
    """One row per timed GPU record, placed by its shape's workload (from that shape's Bound): achieved FLOP/s =
    FLOPs / median, achieved link rate = link bytes per rank / median, FLOPs per HBM byte and per link byte, and the
    shape's roof as FLOP/s (FLOPs / t_roof). CPU-rank records are left out."""
    by_shape = {(shape.label, shape.world_size): shape.bound for shape in shapes}
    rows = []
    gpu = records[(records["status"] == "correct") & records["median_s"].notna() & ~on_cpu_ranks(records)]
    for r in gpu.itertuples():
        b = by_shape.get((r.shape, None if pd.isna(r.world_size) else int(r.world_size)))
        if b is None:
            continue
        flops, hbm, link, t_roof = _sizes(b)
        rows.append(
            {
                "impl": r.impl,
                "shape": r.shape,
                "world_size": r.world_size,
                "median_s": r.median_s,
                "size_bytes": sum(_number(op.size_bytes) for op in b.comm),  # the busiest rank's communication
                "flops": flops,
                "hbm_bytes": hbm,
                "link_bytes": link,
                "t_roof_s": t_roof,
                "achieved_flops": flops / r.median_s,
                "achieved_link_Bps": link / r.median_s,
                **_intensities(flops, hbm, link, t_roof),
                **_roofs(b),
            }
        )
    return pd.DataFrame(rows, columns=list(INTENSITY_COLUMNS))


def shapes_frame(shapes: Iterable[Shape], sweep: Iterable[SweepPoint] = ()) -> pd.DataFrame:
    """Each shape's own roof on the intensity chart (the attainable point FLOPs / t_roof): one row per analysed
    shape, named, and one per other point of the sweep (its named shapes or sizes: "" for a name), at the analysed
    shapes' roofs (peak FLOP/s, HBM and link bandwidth)."""
    rows = []
    for shape in shapes:
        flops, hbm, link, t_roof = _sizes(shape.bound)
        rows.append(
            {"shape": shape.label, "flops": flops, **_intensities(flops, hbm, link, t_roof), **_roofs(shape.bound)}
        )
    named = {(r["flops"], r["roof_flops"]) for r in rows}
    unknown = dict.fromkeys(("peak_flops", "hbm_bandwidth_Bps", "link_bandwidth_Bps"), math.nan)
    for p in sweep:
        flops, hbm, link, t_roof = (_number(v) for v in (p.flops, p.hbm_bytes, p.link_bytes, p.t_roof_s))
        rates = _intensities(flops, hbm, link, t_roof)
        if (flops, rates["roof_flops"]) in named or not flops > 0:
            continue
        rows.append({"shape": "", "flops": flops, **rates, **unknown})
    return pd.DataFrame(rows)


BANDWIDTH_ROOF_COLUMNS = ("size_bytes", "series", "Bps")


def bandwidth_roof_frame(points: Iterable[SweepPoint]) -> pd.DataFrame:
    """A collective's roofs as rates against its size, from the sweep: link bytes per rank over t_roof (what can be
    attained), over the link term (the link's rate), over the HBM term and over the latency term."""
    rows = []
    for p in points:
        link, size = _number(p.link_bytes), _number(p.size_bytes)
        if not link > 0:
            continue
        for key, series in (("t_roof_s", "roof"), ("link_s", "link"), ("hbm_s", "HBM"), ("latency_s", "latency")):
            t = _number(getattr(p, key))
            if t > 0:
                rows.append((size, series, link / t))
    return pd.DataFrame(rows, columns=list(BANDWIDTH_ROOF_COLUMNS))
