"""Opportunities: where a job's trace says time could be won, what pkroof advises building there, and how much the
model predicts it would save, ranked by that saving.

Two kinds:

- **a collective far below its roof** (fraction_of_roof < FAR_BELOW_ROOF), with the (mechanism, schedule) the model
  advises at its size, dtype and group size (rooflines' `analyze` of the collective's Workload, as `pkroof advise
  all-reduce --size S` gives it);
- **exposed communication next to the GEMM that produces or consumes it**, with the fused pair the model advises for
  the two (rooflines/builders.py's fusion builders):

  | pattern | rule (same rank, same step) | bytes that must match exactly |
  |---|---|---|
  | GEMM → reduce-scatter | the last GEMM to end at or before the collective starts | collective bytes = C, m·n·es |
  | GEMM → all-reduce | the same | collective bytes = C, m·n·es |
  | GEMM → all-to-all (MoE combine) | the same | collective bytes = C, m·n·es |
  | all-gather → GEMM | the first GEMM to start at or after the collective ends | collective bytes = A, m·k·es |
  | all-to-all → GEMM (MoE dispatch) | the same | collective bytes = A, m·k·es |

  (the producer must end before its output is sent, the consumer start after its input arrived; es is the
  collective's element size, else the GEMM's; a GEMM with a batch dimension above 1 is not paired). An all-to-all
  that matches both ways takes the GEMM nearer in time.

Time is measured from the kernels frame, never from the waiting: a collective's time is its kernel's time after the
last rank of its group arrived (the collectives frame's start_us_last; its whole duration where it was not matched
across ranks), since no faster collective recovers a late rank; its exposed part is that time not overlapped by a
compute kernel (not communication, copy or memset) on any stream of its rank. For a fusion the measured time of one
instance is the GEMM's duration plus its collective's exposed time.

Ranking: instances of the same opportunity (the same collective at the same size, dtype and group; the same fusion
at the same m, n, k, dtype and group) are summed over every step and every rank of the job. Per instance, the
predicted time is the advised pair's, or the instance's own where that is faster (a slower pair is not built), so
saving_s = measured_s − predicted_s ≥ 0 per instance, and the job's saving is their sum: GPU-seconds, which for a
job whose ranks all do the same is the number of ranks times each rank's wall-time saving. The two kinds are
alternatives where they name the same collective, not savings to add. The saving is what the model predicts.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
import pandas as pd

from pkroof.rooflines.units import fmt_bytes, fmt_s
from pkroof.topology import Topology

from . import advise

# "Far" below the roof: the kernel takes at least twice its bound. The model's prediction of NCCL's own default is
# within 25% on 91% of the published runs it was checked against (rooflines/advice.py, WIN), so a collective at half
# its roof is slower than the model can explain by its own error, not within it.
FAR_BELOW_ROOF = 0.5
SAVING_NOTE = (
    "saving = measured − predicted: the prediction is pkroof's model's for the advised (mechanism, schedule), "
    "summed over every step and rank (GPU-seconds); nothing was measured of the advised pair"
)
COLUMNS = (
    # the schema's (docs: pkroof.trace/1)
    "what", "kernels", "measured_s", "predicted_s", "saving_s", "mechanism", "schedule", "problem_file", "rank",
    # what a problem file is written from
    "kind", "collective", "bytes", "dtype", "group_size", "gemm_m", "gemm_n", "gemm_k", "instances", "ranks",
)  # fmt: skip
# the same collective at the same size over a group of the same size and placement
SIGNATURE = ["collective", "bytes", "dtype", "group_size", "per_node"]
NOT_COMPUTE = frozenset({"communication", "copy", "memset"})  # the steps frame's compute: neither of these
PRODUCED = {"reduce_scatter": "gemm-reduce-scatter", "all_reduce": "gemm-all-reduce", "all_to_all": "gemm-all-to-all"}
CONSUMED = {"all_gather": "all-gather-gemm", "all_to_all": "all-to-all-gemm"}
NAMES = {  # a collective as the sentences name it
    "all_reduce": "all-reduce",
    "all_gather": "all-gather",
    "reduce_scatter": "reduce-scatter",
    "all_to_all": "all-to-all",
}


def _merged(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Disjoint intervals covering the union of [starts, ends), sorted."""
    if not len(starts):
        return starts, ends
    order = np.argsort(starts, kind="stable")
    s, e = starts[order], ends[order]
    reach = np.maximum.accumulate(e)
    new = np.ones(len(s), bool)
    new[1:] = s[1:] > reach[:-1]  # starts after everything before it ended: a new piece of the union
    return s[new], np.maximum.reduceat(e, np.flatnonzero(new))


def _covered_before(x: np.ndarray, s: np.ndarray, e: np.ndarray) -> np.ndarray:
    """Length of the union of disjoint sorted intervals [s, e) that lies before each x."""
    if not len(s):
        return np.zeros(len(x))
    before = np.concatenate([[0.0], np.cumsum(e - s)])  # union length before interval i
    i = np.searchsorted(s, x, side="right") - 1
    inside = np.clip(x - s[np.maximum(i, 0)], 0, (e - s)[np.maximum(i, 0)])
    return np.where(i >= 0, before[np.maximum(i, 0)] + inside, 0.0)


def overlapped_us(intervals: pd.DataFrame, compute: pd.DataFrame) -> np.ndarray:
    """For each row of `intervals` (rank, t0_us, t1_us): how much of [t0, t1) the compute kernels of its rank cover."""
    out = np.zeros(len(intervals))
    position = pd.RangeIndex(len(intervals))
    for rank, rows in intervals.assign(_at=position).groupby("rank", sort=False):
        mine = compute[compute["rank"] == rank]
        start = mine["start_us"].to_numpy(float)
        s, e = _merged(start, start + mine["dur_us"].to_numpy(float))
        t0, t1 = rows["t0_us"].to_numpy(float), rows["t1_us"].to_numpy(float)
        out[rows["_at"].to_numpy()] = _covered_before(t1, s, e) - _covered_before(t0, s, e)
    return out


def communication(kernels: pd.DataFrame, collectives: pd.DataFrame | None, topology: Topology) -> pd.DataFrame:
    """The communication kernels with their transfer interval [t0_us, t1_us) (after the last rank of the group
    arrived), transfer_us, exposed_us (the transfer not overlapped by compute on the rank) and per_node (how many of
    its group's ranks share a node on `topology`)."""
    comm = kernels[kernels["category"] == "communication"].copy()
    comm["t1_us"] = comm["start_us"] + comm["dur_us"]
    last = np.full(len(comm), np.nan)
    if collectives is not None and len(collectives) and len(comm):
        keys = collectives[["group", "seq", "start_us_last"]].drop_duplicates(["group", "seq"])
        joined = comm[["group", "seq"]].merge(keys, on=["group", "seq"], how="left")
        last = joined["start_us_last"].to_numpy(float)
    comm["t0_us"] = np.fmax(comm["start_us"].to_numpy(float), last)  # fmax: NaN (unmatched) takes the start
    comm["transfer_us"] = (comm["t1_us"] - comm["t0_us"]).clip(lower=0.0)
    sized = comm["group_size"].notna()
    comm["per_node"] = pd.Series(pd.NA, index=comm.index, dtype="Int64")
    groups = comm.loc[sized, ["group", "group_size"]].astype({"group_size": "int64"})
    placed = {  # each distinct group placed once: a job runs the same few groups thousands of times
        (g, n): advise.ranks_per_node(topology, g if isinstance(g, str) else None, n)
        for g, n in groups.drop_duplicates().itertuples(index=False)
    }
    comm.loc[sized, "per_node"] = [placed[g, n] for g, n in groups.itertuples(index=False)]
    compute = kernels[~kernels["category"].isin(NOT_COMPUTE)]
    covered = overlapped_us(comm[["rank", "t0_us", "t1_us"]], compute) if len(comm) else np.zeros(0)
    comm["exposed_us"] = (comm["transfer_us"] - covered).clip(lower=0.0)
    return comm


def _ranks_text(ranks: Iterable[int]) -> str:
    return ",".join(str(r) for r in sorted(set(int(r) for r in ranks)))


def _names(values: pd.Series, most: int = 3) -> str:
    names = list(dict.fromkeys(str(v) for v in values))
    return " | ".join(names[:most]) + (f" | … {len(names) - most} more" if len(names) > most else "")


def _example(row: pd.Series, *correlations: Any) -> str:
    step = "" if pd.isna(row["step"]) else f" step {int(row['step'])}"
    corr = ", ".join(str(int(c)) for c in correlations if not pd.isna(c))
    return f"rank {int(row['rank'])}{step} correlation {corr}"


def _totals(measured_s: np.ndarray, predicted_one_s: float) -> tuple[float, float, float]:
    """(measured, predicted, saving) summed over instances; an instance faster than the prediction keeps its time."""
    predicted = np.minimum(measured_s, predicted_one_s)
    return float(measured_s.sum()), float(predicted.sum()), float((measured_s - predicted).sum())


def _row(**fields: Any) -> dict[str, Any]:
    return {c: fields.get(c) for c in COLUMNS}


def _int(value: Any) -> int | None:
    return None if value is None or pd.isna(value) else int(value)


def _far_below_roof(comm: pd.DataFrame, topology: Topology, far: float, skipped: list[str]) -> list[dict]:
    sized = comm["bytes"].notna() & comm["group_size"].notna() & comm["collective"].notna()
    slow = comm[sized & (comm["fraction_of_roof"] < far)]
    rows = []
    for (collective, size, dtype, group, per_node), g in slow.groupby(SIGNATURE, dropna=False, sort=False):
        dtype = None if pd.isna(dtype) else dtype
        try:
            a = advise.advise_collective(topology, collective, size, dtype, int(group), int(per_node))
        except ValueError as e:
            skipped.append(f"{collective} of {fmt_bytes(size)} over {int(group)} ranks: {e}")
            continue
        measured, predicted, saving = _totals(g["transfer_us"].to_numpy(float) * 1e-6, a.t_s)
        first = g.iloc[0]
        what = (
            f"{NAMES.get(collective, collective)} of {fmt_bytes(size)} {dtype or ''} over {int(group)} ranks at "
            f"{g['fraction_of_roof'].median():.0%} of its roof (median of {len(g)}): {a.mechanism} + {a.schedule} "
            f"predicted {fmt_s(a.t_s)} against {fmt_s(g['transfer_us'].median() * 1e-6)} measured after the last "
            "rank arrived"
        )
        ranks = set(g["rank"])
        rows.append(
            _row(
                what=" ".join(what.split()),
                kernels=f"{_names(g['name'])} ({_example(first, first['correlation'])})",
                measured_s=measured,
                predicted_s=predicted,
                saving_s=saving,
                mechanism=a.mechanism,
                schedule=a.schedule,
                rank=int(next(iter(ranks))) if len(ranks) == 1 else None,
                kind="collective",
                collective=collective,
                bytes=float(size),
                dtype=dtype,
                group_size=int(group),
                instances=len(g),
                ranks=_ranks_text(ranks),
            )
        )
    return rows


def _gemms(kernels: pd.DataFrame) -> pd.DataFrame:
    g = kernels[kernels["category"] == "gemm"]
    dims = g["gemm_m"].notna() & g["gemm_n"].notna() & g["gemm_k"].notna()
    g = g[dims & (g["gemm_batch"].isna() | (g["gemm_batch"] == 1))].copy()
    g["end_us"] = g["start_us"] + g["dur_us"]
    return g


def _keyed(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.assign(_step=frame["step"].fillna(-1).astype("int64"), _rank=frame["rank"].astype("int64"))


def _paired(comm: pd.DataFrame, gemms: pd.DataFrame, names: dict[str, str], *, produced: bool) -> pd.DataFrame:
    """Each collective of `names` beside the GEMM the rule pairs it with, where the bytes match; `gap_us` the time
    between them."""
    c = comm[comm["collective"].isin(names) & comm["bytes"].notna() & comm["group_size"].notna()]
    c = _keyed(c[["rank", "step", "name", "correlation", "start_us", "t1_us", "exposed_us", "group", *SIGNATURE]])
    own = ["start_us", "end_us", "dur_us", "name", "correlation", "dtype"]  # the GEMM's, as g_start_us, ...
    g = _keyed(gemms)[["_rank", "_step", *own, "gemm_m", "gemm_n", "gemm_k"]]
    g = g.rename(columns={col: f"g_{col}" for col in own})
    if not len(c) or not len(g):
        return pd.DataFrame()
    left_on, right_on = ("start_us", "g_end_us") if produced else ("t1_us", "g_start_us")
    pairs = pd.merge_asof(
        c.sort_values(left_on),
        g.sort_values(right_on),
        left_on=left_on,
        right_on=right_on,
        by=["_rank", "_step"],
        direction="backward" if produced else "forward",
    ).dropna(subset=["gemm_m"])
    widths = {d: advise.element_bytes(d) for d in pd.unique(pairs[["dtype", "g_dtype"]].to_numpy().ravel())}
    es = pairs["dtype"].map(widths).fillna(pairs["g_dtype"].map(widths))
    inner = pairs["gemm_n"] if produced else pairs["gemm_k"]
    pairs = pairs[pairs["bytes"] == pairs["gemm_m"] * inner * es].copy()
    pairs["fusion"] = pairs["collective"].map(names)
    pairs["gap_us"] = pairs["start_us"] - pairs["g_end_us"] if produced else pairs["g_start_us"] - pairs["t1_us"]
    return pairs


def fusion_pairs(kernels: pd.DataFrame, comm: pd.DataFrame) -> pd.DataFrame:
    """Every (GEMM, collective) pair of the table above whose collective has exposed time, one row per collective
    instance (an all-to-all that matches both ways keeps the nearer GEMM)."""
    gemms = _gemms(kernels)
    exposed = comm[comm["exposed_us"] > 0]
    both = [_paired(exposed, gemms, PRODUCED, produced=True), _paired(exposed, gemms, CONSUMED, produced=False)]
    both = [p for p in both if len(p)]
    if not both:
        return pd.DataFrame()
    pairs = pd.concat(both, ignore_index=True).sort_values("gap_us", kind="stable")
    return pairs.drop_duplicates(["rank", "correlation", "start_us"], keep="first")


def _fusions(kernels: pd.DataFrame, comm: pd.DataFrame, topology: Topology, skipped: list[str]) -> list[dict]:
    pairs = fusion_pairs(kernels, comm)
    if not len(pairs):
        return []
    pairs["dtype_used"] = pairs["dtype"].fillna(pairs["g_dtype"])
    rows = []
    keys = ["fusion", "group_size", "per_node", "dtype_used", "gemm_m", "gemm_n", "gemm_k", "collective", "bytes"]
    for key, g in pairs.groupby(keys, dropna=False, sort=False):
        fusion, group, per_node, dtype, m, n, k, collective, size = key
        dtype = None if pd.isna(dtype) else dtype
        dims = {"m": int(m), "n": int(n), "k": int(k), "per_node": int(per_node)}
        try:
            a = advise.advise_fusion(topology, fusion, int(group), dtype, **dims)
        except ValueError as e:
            skipped.append(f"{fusion} {int(m)}×{int(n)}×{int(k)} over {int(group)} ranks: {e}")
            continue
        one = (g["g_dur_us"] + g["exposed_us"]).to_numpy(float) * 1e-6
        measured, predicted, saving = _totals(one, a.t_s)
        first = g.iloc[0]
        gemm = f"GEMM {int(m)}×{int(n)}×{int(k)} {dtype or ''}"
        comm_text = f"{NAMES[collective]} of {fmt_bytes(size)} over {int(group)} ranks"
        order = f"{gemm} → {comm_text}" if fusion.startswith("gemm-") else f"{comm_text} → {gemm}"
        fused = "fused" if a.schedule != "serial" else "one after the other,"  # serial: fusing does not pay here
        what = (
            f"{order}, {fmt_s(g['exposed_us'].median() * 1e-6)} of the {NAMES[collective]} exposed (median of "
            f"{len(g)}): {fused} {a.mechanism} + {a.schedule} predicted {fmt_s(a.t_s)} against "
            f"{fmt_s(np.median(one))} measured (GEMM + exposed communication)"
        )
        names = f"{_names(g['g_name'], 2)} ⇄ {_names(g['name'], 2)}"
        ranks = set(g["rank"])
        rows.append(
            _row(
                what=" ".join(what.split()),
                kernels=f"{names} ({_example(first, first['g_correlation'], first['correlation'])})",
                measured_s=measured,
                predicted_s=predicted,
                saving_s=saving,
                mechanism=a.mechanism,
                schedule=a.schedule,
                rank=int(next(iter(ranks))) if len(ranks) == 1 else None,
                kind=fusion,
                collective=collective,
                bytes=float(size),
                dtype=dtype,
                group_size=int(group),
                gemm_m=int(m),
                gemm_n=int(n),
                gemm_k=int(k),
                instances=len(g),
                ranks=_ranks_text(ranks),
            )
        )
    return rows


def find(result: Any, topology: Topology | str, *, far_below: float = FAR_BELOW_ROOF) -> pd.DataFrame:
    """The opportunities of a trace's result (its `kernels` and `collectives` frames) on `topology`, ranked by
    saving_s, largest first; only those the model predicts would save time. `frame.attrs["skipped"]` names what
    the model could not take (a size that does not split over the group, say), `frame.attrs["note"]` what the
    saving is."""
    topo = advise.as_topology(topology)
    kernels = result.kernels
    skipped: list[str] = []
    comm = communication(kernels, getattr(result, "collectives", None), topo)
    rows = _far_below_roof(comm, topo, far_below, skipped) + _fusions(kernels, comm, topo, skipped)
    frame = pd.DataFrame(rows, columns=list(COLUMNS))
    frame = frame[frame["saving_s"] > 0].sort_values("saving_s", ascending=False, kind="stable")
    frame = frame.reset_index(drop=True).astype({"rank": "object", "problem_file": "object"})
    frame.attrs["skipped"] = skipped
    frame.attrs["note"] = SAVING_NOTE
    return frame
