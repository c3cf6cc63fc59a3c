"""The presets held to published measurements of their machines: per preset and split (the rows that tuned the NCCL
lines, the rows held out), the NCCL baseline's error, and every row the roof does not stay under.

Reads the table tests/data/published/measurements.csv (its README gives every column, the sources and the split).
Error = (measured − predicted) / predicted: positive where the machine was slower than the model says. Counted: the
preset's own machine and a figure its own source does not contradict (`counted`); the other rows (other parts,
other networks, suspect figures) are listed with --rows, not counted.

It also runs on a checkout from before the model had NCCL's tuning (no tools/published_runs.py there): it then reads
the table with the csv module and takes the one NCCL prediction that model makes for every row (it cannot force an
algorithm, register buffers or wait on each call), which is how benchmarks/model/2026-12-02-published-check.md's
"before"
column was made: PYTHONPATH pointing at a pkroof package built from the older checkout's folders.

Usage: python -m benchmarks.model.published_check [TABLE] [--rows]
"""

from __future__ import annotations

import csv
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

TABLE = Path(__file__).resolve().parents[2] / "tests" / "data" / "published" / "measurements.csv"


@dataclass(frozen=True)
class Result:
    id: str
    use: str  # "set" rows are run against the roof only: a preset number came from them
    preset: str
    split: str
    kind: str
    counted: bool
    what: str
    measured_s: float
    roof_s: float
    predicted_s: float | None
    assumes: str

    @property
    def error(self) -> float | None:
        return None if self.predicted_s is None else (self.measured_s - self.predicted_s) / self.predicted_s


def _what(f: dict[str, str]) -> str:
    shape = "x".join(f[c] for c in ("m", "n", "k") if f[c])
    size = f["size_bytes"]
    return f"{f['op']} {shape or size} {f['world_size']}x{f['nodes'] or 1} {f['impl']} {f['launch']} {f['nccl_algo']}"


def _current(table: Path) -> list[Result]:
    from tools import published_runs as published

    out = []
    for c in (published.check(r) for r in published.checkable(published.read(table))):
        r = c.row
        out.append(
            Result(
                r.id,
                r.use,
                r.preset,
                r.split,
                r.kind,
                r.counted,
                _what(r.fields),
                c.measured_s,
                c.t_roof_s,
                c.predicted_s,
                c.assumes,
            )
        )
    return out


def _before(table: Path) -> list[Result]:
    """The older model: one NCCL serial prediction per row, the roof of the same work; time rows only."""
    import math

    from pkroof.rooflines import Collective, Mechanism, Schedule, bound
    from pkroof.rooflines.builders import all_gather_gemm, collective
    from pkroof.rooflines.workload import DTYPE_BYTES, ComputeOp, Workload
    from pkroof.topology import resolve

    def gemm(m: int, n: int, k: int, dtype: str) -> Workload:
        es = DTYPE_BYTES[dtype]
        hbm = es * (m * k + k * n + m * n)
        tiles = math.ceil(m / 128) * math.ceil(n / 256)
        return Workload("gemm", compute=(ComputeOp("gemm", 2 * m * n * k, dtype, hbm, tiles, 2 * 128 * 256 * k),),
                        hbm_bytes=hbm, dtype=dtype)  # fmt: skip

    out = []
    for f in csv.DictReader(table.open(newline="")):
        if f["use"] != "check" or f["kind"] not in ("nccl", "custom", "gemm", "fused") or not f["preset"]:
            continue
        if not f["time_us"]:
            continue
        nodes, world, dtype = int(f["nodes"] or 1), max(2, int(f["world_size"] or 2)), f["dtype"] or "fp32"
        system = resolve(f["preset"], nodes=nodes if nodes > 1 else None).system(world)
        m, n, k = (int(f[c] or 0) for c in ("m", "n", "k"))
        if f["op"] == "all-gather-gemm":
            w = all_gather_gemm(world, dtype, m=m, n=n, k=k)
        elif f["op"] == "gemm":
            w = gemm(m, n, k, dtype)
        else:
            size = int(f["size_bytes"])
            w = collective(Collective(f["op"]), world, dtype, size=size - size % (16 * world))
        b = bound(w, system)
        p = b.prediction(Mechanism.NCCL, Schedule.SERIAL) if f["kind"] != "custom" else None
        counted = f["machine_matches"].startswith("yes") and not f["suspect"]
        out.append(
            Result(
                f["id"],
                f["use"],
                f["preset"],
                f["split"],
                f["kind"],
                counted,
                _what(f),
                float(f["time_us"]) * 1e-6,
                b.t_roof_s,
                p.t_s if p else None,
                "",
            )
        )
    return out


def _stats(results: list[Result]) -> str:
    errors = [abs(r.error) for r in results if r.error is not None]
    if not errors:
        return f"{0:>4} {'—':>8} {'—':>8} {'—':>8}"
    within = sum(e <= 0.25 for e in errors) / len(errors)
    return f"{len(errors):>4} {statistics.median(errors):>8.1%} {within:>8.0%} {max(errors):>8.0%}"


def main(argv: list[str]) -> None:
    rows = "--rows" in argv
    args = [a for a in argv if a != "--rows"]
    table = Path(args[0]) if args else TABLE
    try:
        import tools.published_runs  # noqa: F401

        results, model = _current(table), "current"
    except ImportError:
        results, model = _before(table), "before NCCL's tuning (one NCCL figure per row)"
    print(f"model: {model}; table: {table}")
    beaten = [r for r in results if r.measured_s < 0.99 * r.roof_s]  # rate rows: seconds per byte, against the roof's
    print(f"rows run: {len(results)} ({sum(r.kind not in ('hbm', 'copy') for r in results)} timed); "
          f"measured below the roof by more than 1%: {len(beaten)}")  # fmt: skip
    for r in beaten:
        print(f"  {r.id:20} {r.preset:12} {r.what}: measured/roof {r.measured_s / r.roof_s:.3f}")
    print("\nNCCL baseline, counted rows (the preset's own machine, figures their source does not contradict)")
    print(f"{'preset':13} {'split':8} {'rows':>4} {'median':>8} {'≤25%':>8} {'max':>8}")
    checks = [r for r in results if r.use == "check"]
    nccl = [r for r in checks if r.kind == "nccl" and r.counted]
    for preset in sorted({r.preset for r in nccl}):
        for split in ("tune", "holdout"):
            print(f"{preset:13} {split:8} {_stats([r for r in nccl if r.preset == preset and r.split == split])}")
    for split in ("tune", "holdout"):
        print(f"{'all':13} {split:8} {_stats([r for r in nccl if r.split == split])}")
    print(f"{'all':13} {'both':8} {_stats(nccl)}")
    print("\nnot counted (other parts, other networks, suspect figures): NCCL rows")
    print(f"{'all':13} {'both':8} {_stats([r for r in checks if r.kind == 'nccl' and not r.counted])}")
    print("\nGEMMs (cuBLAS alone) and cuBLAS then NCCL (fused problems' unfused baseline)")
    for kind in ("gemm", "fused"):
        for split in ("tune", "holdout", "other"):
            chosen = [r for r in checks if r.kind == kind and (r.split if r.counted else "other") == split]
            if chosen:
                print(f"{kind:13} {split:8} {_stats(chosen)}")
    if rows:
        print()
        for r in results:
            error = f"{r.error:+7.1%}" if r.error is not None else " " * 7
            where = f"{r.id:22} {r.preset:12} {r.split:7} {'' if r.counted else 'other':5} {r.what:58}"
            times = f"measured {r.measured_s * 1e6:11.2f} µs  roof {r.roof_s * 1e6:11.2f}"
            print(f"{where} {times}  error {error}  {r.assumes}")


if __name__ == "__main__":
    main(sys.argv[1:])
