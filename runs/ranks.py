"""Across ranks and steps: each collective matched over the ranks that ran it, its time split into transfer and
waiting; each step of each rank broken into compute, communication, exposed communication and idle time.

A collective is matched by (process group, seq): NCCL requires every rank of a group to issue the group's
collectives in one order, so the n-th on one rank is the n-th on each. Ranks' clocks are their hosts': across
nodes, start times carry the hosts' clock offset.
"""

from __future__ import annotations

import pandas as pd

from .intervals import length, subtract, union

COLLECTIVE_COLUMNS = [
    "group",
    "seq",
    "collective",
    "bytes",
    "group_size",
    "ranks",
    "start_us_first",
    "start_us_last",
    "transfer_s",
    "wait_s",
    "last_rank",
]
STEP_COLUMNS = ["rank", "step", "wall_s", "compute_s", "communication_s", "exposed_communication_s", "idle_s"]
COMPUTE = frozenset({"gemm", "attention", "memory", "other"})  # copies and memsets are neither compute nor comm


def _same_order(comm: pd.DataFrame) -> bool:
    """Whether every rank ran the same collectives in the same order (what matching by order alone needs)."""
    orders = {tuple(g["collective"].fillna("?")) for _, g in comm.groupby("rank")}
    return len(orders) == 1


def collectives_frame(kernels: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """One row per collective that at least two ranks' traces hold: the last rank to start it, and its transfer
    (after the last rank started: the earliest end minus the last start, at least 0) and waiting (the longest
    kernel's duration minus the transfer); and notes on what could not be matched. Kernels of no recorded group
    are matched by their order alone, and only where every rank ran the same collectives in the same order."""
    comm = kernels[(kernels["category"] == "communication") & kernels["seq"].notna()].copy()
    comm["key"] = comm["group"].fillna("?")
    notes = []
    unknown = comm["key"] == "?"
    if unknown.any() and comm.loc[unknown, "rank"].nunique() > 1:
        if _same_order(comm[unknown]):
            notes.append("no process group recorded: collectives matched across ranks by their order alone")
        else:
            notes.append(
                "no process group recorded, and the ranks ran different collectives or in another order: "
                f"{int(unknown.sum())} communication kernels not matched across ranks"
            )
            comm = comm[~unknown]
    comm["end_us"] = comm["start_us"] + comm["dur_us"]
    comm = comm.sort_values(["key", "seq", "rank"], kind="stable")  # each collective's kernels in rank order
    comm["rank_text"] = comm["rank"].astype(str)
    by = comm.groupby(["key", "seq"], sort=True)
    g = by.agg(
        num_ranks=("rank", "nunique"),
        collective=("collective", "first"),  # first: the first value that is not missing
        bytes=("bytes", "first"),
        group_size=("group_size", "first"),
        ranks=("rank_text", ",".join),
        start_us_first=("start_us", "min"),
        start_us_last=("start_us", "max"),
        end_us_first=("end_us", "min"),
        dur_us_max=("dur_us", "max"),
    )
    g["last_rank"] = comm.loc[by["start_us"].idxmax().to_numpy(), "rank"].to_numpy()  # the first, in rank order
    g = g[g["num_ranks"] >= 2].reset_index()
    transfer_us = (g["end_us_first"] - g["start_us_last"]).clip(lower=0.0)
    frame = pd.DataFrame(
        {
            "group": g["key"].where(g["key"] != "?", None),
            "seq": g["seq"].astype("int64"),
            "collective": g["collective"],
            "bytes": g["bytes"].astype(float),
            "group_size": g["group_size"].astype("Int64"),
            "ranks": g["ranks"],
            "start_us_first": g["start_us_first"].astype(float),
            "start_us_last": g["start_us_last"].astype(float),
            "transfer_s": transfer_us * 1e-6,
            "wait_s": (g["dur_us_max"] - transfer_us) * 1e-6,
            "last_rank": g["last_rank"].astype("int64"),
        },
        columns=COLLECTIVE_COLUMNS,
    )
    return frame, notes


def step_row(rank: int, step: int | None, kernels: pd.DataFrame) -> dict:
    """One rank's step from its kernels (start_us, dur_us, category). Wall: from the step's first kernel start to
    its last kernel end; compute: the union of non-communication kernels (copies and memsets are neither);
    communication: the union of communication kernels; exposed communication: communication that no compute
    kernel on any stream overlaps; idle: wall minus the union of all kernels."""
    start, end = kernels["start_us"], kernels["start_us"] + kernels["dur_us"]
    spans = list(zip(start.tolist(), end.tolist(), strict=True))
    cats = kernels["category"].tolist()
    compute = union(s for s, c in zip(spans, cats, strict=True) if c in COMPUTE)
    comm = union(s for s, c in zip(spans, cats, strict=True) if c == "communication")
    busy = union(spans)
    wall = float(end.max() - start.min())
    return {
        "rank": rank,
        "step": step,
        "wall_s": wall * 1e-6,
        "compute_s": length(compute) * 1e-6,
        "communication_s": length(comm) * 1e-6,
        "exposed_communication_s": length(subtract(comm, compute)) * 1e-6,
        "idle_s": (wall - length(busy)) * 1e-6,
    }


def steps_frame(kernels: pd.DataFrame) -> pd.DataFrame:
    """One row per rank per step (kernels of no step are left out); where a rank's trace has no ProfilerStep at
    all, one row (step null) of all its kernels."""
    rows = []
    for rank, of_rank in kernels.groupby("rank", sort=True):
        if of_rank["step"].isna().all():
            rows.append(step_row(int(rank), None, of_rank))
            continue
        for step, g in of_rank[of_rank["step"].notna()].groupby("step", sort=True):
            rows.append(step_row(int(rank), int(step), g))
    frame = pd.DataFrame(rows, columns=STEP_COLUMNS)
    frame["step"] = frame["step"].astype("Int64")
    return frame
