"""The model held to published head-to-heads: two or more implementations of one operation timed on one machine in
one table. For each side it predicts the (mechanism, schedule, algorithm) the side stands for, then prints

* ranking agreement: in how many groups the published winner is the side the model predicts fastest (groups whose
  sides all stand for one model pair cannot be ranked by the model and are left out of it);
* ratio error: published time / predicted time per side (1.00 = right; above 1: the model is optimistic);
* bias per mechanism: the median of that ratio over the sides of each mechanism, on the machine the preset is;
* every side the roof does not stay under (a published time below the roof is a bug in the roof).

Rows of split `tune` may have set a model number (the README of the table says which and how); `holdout` rows never
did, and the targets are held on them. Sides on a machine that is not exactly the preset's (`machine_matches` not
starting with "yes") are ranked (both sides ran on it) and checked against the roof, but their ratios are not counted.

Usage: python -m tools.head_to_head [TABLE] [--rows] [--bands]

--bands prints each mechanism's error band (rooflines/margins.py's BANDS) from the tune rows alone, and the rows
behind it.
"""

from __future__ import annotations

import csv
import statistics
import sys
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from pkroof.rooflines import Algorithm, Collective, Mechanism, Protocol, Schedule, bound, predict
from pkroof.rooflines.builders import all_gather_gemm, collective
from pkroof.rooflines.workload import DTYPE_BYTES, Workload
from pkroof.topology.presets import PRESETS, preset
from tools import published_runs
from tools.published_runs import _int

TABLE = Path(__file__).resolve().parents[1] / "tests" / "data" / "head_to_head" / "head_to_head.csv"
PUBLISHED = TABLE.parents[1] / "published" / "measurements.csv"  # NCCL's band: its tune rows of kind nccl
COLUMNS = ("pair", "side", "split", "preset", "world_size", "op", "size_bytes", "dtype", "m", "n", "k", "impl")
COLUMNS += ("mechanism", "schedule", "algorithm", "protocol", "launch", "time_us", "machine_matches", "source_url")
COLUMNS += ("source_locator",)
SPLITS = ("tune", "holdout")
LAUNCHES = ("graph", "queued", "waited", "unknown")
WHOLE_BYTES = 16  # a collective's size is cut to whole 16-byte chunks on every rank (6 ranks do not split 2^k)


@dataclass(frozen=True)
class Side:
    """One implementation's published time in one group, and the model pair it stands for."""

    pair: str
    side: str
    split: str
    preset: str
    world_size: int
    op: str
    size_bytes: int
    dtype: str
    m: int
    n: int
    k: int
    impl: str
    mechanism: Mechanism
    schedule: Schedule
    algorithm: Algorithm | None
    protocol: Protocol
    launch: str
    time_s: float
    same_machine: bool

    @property
    def model_pair(self) -> tuple[str, ...]:
        return (
            self.mechanism.value,
            self.schedule.value,
            self.algorithm.value if self.algorithm else "",
            self.protocol,
        )


def _side(f: dict[str, str], where: str) -> Side:
    if f["split"] not in SPLITS or f["launch"] not in LAUNCHES or f["preset"] not in PRESETS:
        raise ValueError(f"{where}: split {f['split']!r}, launch {f['launch']!r} or preset {f['preset']!r} unknown")
    if f["dtype"] not in DTYPE_BYTES:
        raise ValueError(f"{where}: unknown dtype {f['dtype']!r}")
    try:
        mechanism, schedule = Mechanism(f["mechanism"]), Schedule(f["schedule"])
        algorithm = Algorithm(f["algorithm"]) if f["algorithm"] else None
        protocol = Protocol(f["protocol"] or "simple")
        time_s = float(f["time_us"]) * 1e-6
    except ValueError as e:
        raise ValueError(f"{where}: {e}") from None
    if time_s <= 0:
        raise ValueError(f"{where}: time_us must be positive")
    return Side(
        f["pair"], f["side"], f["split"], f["preset"], _int(f["world_size"], "world_size", where), f["op"],
        _int(f["size_bytes"], "size_bytes", where), f["dtype"], _int(f["m"], "m", where), _int(f["n"], "n", where),
        _int(f["k"], "k", where), f["impl"], mechanism, schedule, algorithm, protocol, f["launch"], time_s,
        f["machine_matches"].startswith("yes"),
    )  # fmt: skip


def read(path: str | Path = TABLE) -> list[Side]:
    """Every side of a head-to-head table; ValueError naming the row of a bad one."""
    path = Path(path)
    with path.open(newline="") as f:
        reader = csv.DictReader(f)
        missing = set(COLUMNS) - set(reader.fieldnames or ())
        if missing:
            raise ValueError(f"{path}: missing columns {', '.join(sorted(missing))}")
        return [_side(fields, f"{path}:{i + 2}") for i, fields in enumerate(reader)]


def workload(s: Side) -> Workload:
    if s.op == "all-gather-gemm":
        return all_gather_gemm(s.world_size, s.dtype, m=s.m, n=s.n, k=s.k)
    size = s.size_bytes - s.size_bytes % (WHOLE_BYTES * s.world_size)
    return collective(Collective(s.op), s.world_size, s.dtype, size=size)


@dataclass(frozen=True)
class Evaluated:
    side: Side
    predicted_s: float
    roof_s: float

    @property
    def ratio(self) -> float:
        """published / predicted: above 1 where the model is optimistic."""
        return self.side.time_s / self.predicted_s


def evaluate(s: Side) -> Evaluated:
    """The model's time for the pair the side stands for (NCCL: as it runs by default; each call waited on for an
    eager run), and the roof of the same work."""
    system = preset(s.preset).system(s.world_size)
    w = workload(s)
    b = bound(w, system)
    if s.mechanism is Mechanism.NCCL and s.schedule is Schedule.SERIAL:
        p = b.prediction(Mechanism.NCCL, Schedule.SERIAL)
        assert p is not None, s.pair
        t = p.t_eager_s if s.launch == "waited" and p.t_eager_s is not None else p.t_s
        return Evaluated(s, t, b.t_roof_s)
    p = predict(w, system, s.mechanism, s.schedule, protocol=s.protocol, algorithm=s.algorithm)
    if p is None:
        raise ValueError(f"{s.pair}/{s.side}: {s.preset} cannot run {s.mechanism.value} {s.schedule.value}")
    return Evaluated(s, p.t_s, b.t_roof_s)


@dataclass(frozen=True)
class Group:
    """One published comparison: its sides, and whether the model ranks the published winner first."""

    pair: str
    sides: tuple[Evaluated, ...]

    @property
    def split(self) -> str:
        return self.sides[0].side.split

    @property
    def rankable(self) -> bool:
        """The sides stand for at least two model pairs (else the model gives them one time)."""
        return len({e.side.model_pair for e in self.sides}) > 1

    @property
    def agrees(self) -> bool:
        """The side predicted fastest is a published winner (a tie in the published table counts as either)."""
        fastest_published = min(e.side.time_s for e in self.sides)
        predicted_first = min(self.sides, key=lambda e: e.predicted_s)
        return predicted_first.side.time_s <= fastest_published


def groups(evaluated: list[Evaluated]) -> list[Group]:
    by_pair: dict[str, list[Evaluated]] = defaultdict(list)
    for e in evaluated:
        by_pair[e.side.pair].append(e)
    return [Group(pair, tuple(sides)) for pair, sides in by_pair.items()]


@dataclass(frozen=True)
class Summary:
    ranked: int  # groups the model can rank
    agreed: int  # of them, those whose published winner it ranks first
    median_ratio: float  # published / predicted over counted sides
    within_25: float  # share of counted sides within 25% of the prediction
    bias: dict[str, float]  # mechanism label → median published / predicted
    sides_per_mechanism: dict[str, int]
    below_roof: tuple[str, ...]  # sides whose published time is below the roof

    @property
    def agreement(self) -> float:
        return self.agreed / self.ranked if self.ranked else 1.0


def _label(s: Side) -> str:
    return s.mechanism.value + (" LL" if s.protocol is Protocol.LL else "")


def summarize(evaluated: list[Evaluated], split: str | None = None) -> Summary:
    chosen = [e for e in evaluated if split is None or e.side.split == split]
    ranked = [g for g in groups(chosen) if g.rankable]
    counted = [e for e in chosen if e.side.same_machine]
    per_mechanism: dict[str, list[float]] = defaultdict(list)
    for e in counted:
        per_mechanism[_label(e.side)].append(e.ratio)
    ratios = [e.ratio for e in counted]
    return Summary(
        ranked=len(ranked),
        agreed=sum(g.agrees for g in ranked),
        median_ratio=statistics.median(ratios) if ratios else 1.0,
        within_25=sum(abs(r - 1) <= 0.25 for r in ratios) / len(ratios) if ratios else 1.0,
        bias={m: statistics.median(r) for m, r in sorted(per_mechanism.items())},
        sides_per_mechanism={m: len(r) for m, r in sorted(per_mechanism.items())},
        below_roof=tuple(f"{e.side.pair}/{e.side.side}" for e in chosen if e.side.time_s < e.roof_s),
    )


def evaluate_all(path: str | Path = TABLE) -> list[Evaluated]:
    return [evaluate(s) for s in read(path)]


def _print_summary(name: str, s: Summary) -> None:
    print(f"{name}: published winner ranked first in {s.agreed}/{s.ranked} groups ({s.agreement:.0%})")
    print(f"  published/predicted: median {s.median_ratio:.2f}, within 25%: {s.within_25:.0%} of counted sides")
    bias = ", ".join(f"{m} {b:.2f} ({s.sides_per_mechanism[m]})" for m, b in s.bias.items())
    print(f"  bias per mechanism (median published/predicted, sides): {bias}")
    print(f"  published times below the roof: {len(s.below_roof)}" + (f" {list(s.below_roof)}" if s.below_roof else ""))


BAND_QUANTILES = 10  # a band runs from the 10th to the 90th percentile of published / predicted


def bands(evaluated: list[Evaluated]) -> dict[str, tuple[tuple[float, float], tuple[str, ...]]]:
    """Each mechanism's (lo, hi) band over the tune rows on the preset's own machine, and those rows; held-out rows
    set nothing. A mechanism with one tune row gets that row's ratio at both ends."""
    per: dict[str, list[Evaluated]] = defaultdict(list)
    for e in evaluated:
        if e.side.split == "tune" and e.side.same_machine:
            per[_label(e.side)].append(e)
    out: dict[str, tuple[tuple[float, float], tuple[str, ...]]] = {}
    for m, rows in sorted(per.items()):
        out[m] = (_quantile_band([e.ratio for e in rows]), tuple(f"{e.side.pair}/{e.side.side}" for e in rows))
    return out


def _quantile_band(ratios: list[float]) -> tuple[float, float]:
    q = statistics.quantiles(ratios, n=BAND_QUANTILES, method="inclusive") if len(ratios) > 1 else ratios * 2
    return q[0], q[-1]


def nccl_band(path: str | Path = PUBLISHED) -> tuple[tuple[float, float], tuple[str, ...]] | None:
    """NCCL's band over the published table's microbenchmark rows that may tune (split tune, kind nccl, one node,
    counted: the preset's own machine, not suspect); held-out rows set nothing."""
    rows = [r for r in published_runs.checkable(published_runs.read(path)) if r.kind == "nccl" and r.nodes == 1]
    rows = [r for r in rows if r.use == "check" and r.split == "tune" and r.counted]
    checked = [published_runs.check(r) for r in rows]
    ratios = [c.row.time_s / c.predicted_s for c in checked if c.predicted_s]
    return (_quantile_band(ratios), tuple(r.id for r in rows)) if ratios else None


def _print_bands(evaluated: list[Evaluated], published: Path) -> None:
    print("BANDS: dict[str, tuple[float, float]] = {  # rooflines/margins.py, from the tune rows only")
    found = bands(evaluated)
    nccl = nccl_band(published)
    if nccl is not None:
        found = {Mechanism.NCCL.value: nccl, **found}
    for m, ((lo, hi), _) in found.items():
        print(f'    "{m}": ({lo:.3f}, {hi:.3f}),')
    print("}")
    for m, (_, rows) in found.items():
        print(f"{m}: {len(rows)} tune rows: {', '.join(rows)}")


def main(argv: list[str]) -> None:
    table = Path(next((a for a in argv if not a.startswith("--")), TABLE))
    try:
        evaluated = evaluate_all(table)
    except (OSError, ValueError) as e:  # a missing or malformed table: one line
        sys.exit(f"head_to_head: {getattr(e, 'strerror', None) or e}{f': {table}' if isinstance(e, OSError) else ''}")
    if "--bands" in argv:
        try:
            _print_bands(evaluated, PUBLISHED)
        except (OSError, ValueError) as e:
            sys.exit(f"head_to_head: {getattr(e, 'strerror', None) or e}")
        return
    if "--rows" in argv:
        for g in groups(evaluated):
            mark = "" if not g.rankable else ("ok  " if g.agrees else "MISS")
            for e in g.sides:
                s = e.side
                print(
                    f"{mark:4} {s.pair:34} {s.side:18} {_label(s):9} {s.schedule.value:10} "
                    f"{(s.algorithm.value if s.algorithm else '-'):10} published {s.time_s * 1e6:8.1f} us  "
                    f"predicted {e.predicted_s * 1e6:8.1f} us  ratio {e.ratio:5.2f}  [{s.split}]"
                )
    print(
        "tune rows: the sglang#2904 custom all-reduces at 2, 4 and 8 ranks (see the table's README for what they set)"
    )
    for split in SPLITS:
        _print_summary(split, summarize(evaluated, split))
    _print_summary("all", summarize(evaluated))


if __name__ == "__main__":
    main(sys.argv[1:])
