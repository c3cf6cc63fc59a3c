"""Fit the presets' NCCL lines (rooflines/nccl.py) to the published runs marked `split=tune` (no GPU needed).

For every tuning row of a machine, NCCL's own model (rooflines/nccl.choose with the preset's documented inputs)
says which (algorithm, protocol) ran; each pair's rows then fit that pair's lines t = base + steps·step + bytes /
bandwidth, the call costing the cheapest (NCCL grows its channel count with the message), by weighted least
squares on relative error (a point belongs to its cheapest line, reassigned until nothing moves). Step latencies
are NCCL's documented per-NVLink-hop constants (tuning.cc: ring LL 0.6, LL128 1.9, Simple 3.4 µs), fitted only
where rows span several world sizes; a base is never below NCCL's (a line through the origin would price a tiny
call at nothing), and held at it where all rows have one size. It prints each line and each tuning point's
residual; topology/presets.py carries the numbers it prints, rounded, and cites this script. Held-out rows are
never read.

Usage: python benchmarks/model/fit_nccl.py [TABLE]   (default: tests/data/published/measurements.csv, the one copy
       of the table; its README says how the rows were curated and split)
"""

import csv
import dataclasses
import statistics
import sys
from pathlib import Path

import numpy as np

from pkroof.rooflines import Collective, nccl
from pkroof.topology import preset

TABLE = Path(__file__).resolve().parents[2] / "tests" / "data" / "published" / "measurements.csv"


def _rows(path: Path) -> list[dict]:
    return [r for r in csv.DictReader(path.open()) if r["use"] == "check" and r["split"] == "tune"]


def _line(sel, step_s: float, base_s: float | None, base_min: float = 0.0) -> tuple[float, float]:
    """(base, bandwidth) minimising Σ ((base + s·step + b/bw − t) / t)² over `sel`; `base_s` held where given, and
    never below `base_min`."""
    w = np.array([1.0 / t for _, _, t in sel])
    y = np.array([t - s * step_s for s, _, t in sel]) * w
    if base_s is not None:
        x = np.array([b for _, b, _ in sel]) * w
        inv_bw = float(x @ (y - base_s * w) / (x @ x))
        return base_s, 1.0 / max(inv_bw, 1e-15)
    a = np.array([[1.0, b] for _, b, _ in sel]) * w[:, None]
    (base, inv_bw), *_ = np.linalg.lstsq(a, y, rcond=None)
    if base < base_min:
        return _line(sel, step_s, base_min)
    return float(base), 1.0 / max(float(inv_bw), 1e-15)


def fit_lines(points, k: int, step_s: float, base_s: float | None = None, base_min: float = 0.0):
    """k lines (base_s, bandwidth_Bps), steps charged at `step_s` (and the base held at `base_s` where given), fitted
    to minimise the relative error of the cheapest line at each point: start from k runs of consecutive sizes, then
    move each point to its cheapest line and refit, until no point moves."""
    pts = sorted(points, key=lambda p: p[1])
    assign = np.concatenate([np.full(len(idx), j) for j, idx in enumerate(np.array_split(np.arange(len(pts)), k))])
    lines = [_line(pts, step_s, base_s, base_min)] * k
    for _ in range(100):
        lines = [
            _line([p for p, a in zip(pts, assign, strict=True) if a == j], step_s, base_s, base_min)
            if (assign == j).any()
            else line
            for j, line in enumerate(lines)
        ]
        new = np.array([min(range(k), key=lambda j: lines[j][0] + s * step_s + b / lines[j][1]) for s, b, _ in pts])
        if (new == assign).all():
            break
        assign = new
    return sorted(set(lines), key=lambda line: line[1])


def _report(key: str, points, lines, step_s: float | None) -> None:
    print(f"  {key}: {len(points)} points")
    for base, step, bw in lines:
        print(f"    ({base:.4g}, {step:.3g}, {bw / 1e9:.5g} * GB),")
    errs = []
    for s, b, t in sorted(points, key=lambda p: (p[1], p[0])):
        model = min(base + s * step + b / bw for base, step, bw in lines)
        errs.append((t - model) / model)
        print(f"      {s:3d} steps {b:14.0f} B {t * 1e6:10.2f} µs  model {model * 1e6:10.2f}  {errs[-1]:+.1%}")
    print(f"    median |e| {statistics.median(map(abs, errs)):.1%}")


def _fit_step(points, base_min: float) -> tuple[float, float, float]:
    """One line with its step latency free too: (base, step, bandwidth) by least squares on relative error (the
    points span several world sizes)."""
    w = np.array([1.0 / t for _, _, t in points])
    a = np.array([[1.0, s, b] for s, b, _ in points]) * w[:, None]
    y = np.array([t for _, _, t in points]) * w
    (base, step, inv_bw), *_ = np.linalg.lstsq(a, y, rcond=None)
    return max(float(base), base_min), max(float(step), 0.0), 1.0 / float(inv_bw)


# lines per pair and machine (one unless the rows span sizes where NCCL changes its channels), whether the step is
# fitted (the rows span world sizes) or NCCL's, and the least base
REGIMES = {
    ("hgx-h200-8", "nvls/simple"): 3,
    ("gb200-nvl72", "nvls/simple"): 2,
    ("gb200-nvl72", "ring/simple"): 2,
    ("dgx-a100-8", "ring/simple"): 2,
}
FREE_STEP = {("dgx-a100-8", "ring/ll")}
BASE_MIN = {"ring/ll": 6.6e-6, "ring/ll128": 14e-6, "ring/simple": 8.4e-6, "nvls/simple": 25e-6, "p2p/simple": 8.4e-6}


def _step_s(key: str) -> float:
    """NCCL's latency per ring step of the pair; 0 for pairs whose steps do not grow with the ranks."""
    algorithm, protocol = key.split("/")
    if algorithm != "ring":
        return 0.0
    return nccl.STEP_S["nvlink"][nccl.NcclAlgorithm(algorithm), nccl.NcclProtocol(protocol)]


def main(path: Path) -> None:
    rows = _rows(path)
    for name in ("hgx-h200-8", "hgx-b200-8", "gb200-nvl72", "dgx-a100-8"):
        tuning = dataclasses.replace(preset(name).mechanisms["nccl"].tuning.model, lines={})
        points: dict[str, list] = {}
        for r in rows:
            if r["preset"] != name or r["kind"] != "nccl" or r["nodes"] != "1" or r["registered"] == "yes":
                continue
            if r["launch"] != "queued":
                continue
            n, size = int(r["world_size"]), int(r["size_bytes"])
            run = nccl.NcclRun(algorithms=frozenset({r["nccl_algo"]}) if r["nccl_algo"] else None)
            c = nccl.choose(Collective(r["op"]), size, n, tuning, run=run)
            points.setdefault(c.label, []).append((c.steps, c.num_bytes, float(r["time_us"]) * 1e-6, size))
        print(f"{name} (NCCL's choice for each tuning row, then the lines of each pair):")
        for key, with_size in sorted(points.items()):
            pts = [p[:3] for p in with_size]
            sizes = {p[3] for p in with_size}
            k = min(REGIMES.get((name, key), 1), len(sizes))
            if (name, key) in FREE_STEP:
                lines = [_fit_step(pts, BASE_MIN.get(key, 0.0))]
            else:
                step = _step_s(key)
                held = BASE_MIN[key] if len(sizes) == 1 else None  # one size: the base is NCCL's
                lines = [(b, step, bw) for b, bw in fit_lines(pts, k, step, held, BASE_MIN.get(key, 0.0))]
            _report(key, pts, lines, None)
    # one eager PyTorch call the program waits on (stas00's older all_reduce_bench.py, 8x H200, NCCL 2.27.7): the
    # host's overhead is what it took beyond the queued nccl-tests time of the same size
    waited = {int(r["size_bytes"]): float(r["time_us"]) for r in rows if r["launch"] == "waited"}
    queued = {
        int(r["size_bytes"]): float(r["time_us"])
        for r in rows
        if r["preset"] == "hgx-h200-8" and r["impl"] == "nccl-tests" and r["world_size"] == "8" and not r["nccl_algo"]
    }
    both = sorted(set(waited) & set(queued) & {s for s in waited if s <= 1 << 20})
    overheads = [waited[s] - queued[s] for s in both]
    print("host overhead, µs, at", both, ":", [round(o, 2) for o in overheads], "mean", round(np.mean(overheads), 2))
    print("symmetric kernels, 8 B:", [(r["preset"], r["time_us"]) for r in rows if r["registered"] == "yes"])


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else TABLE)
