"""The model's prediction for each (mechanism, schedule) pair against pkroof's kernels measured on 2xH200.

Reads the profiler's records (benchmarks/kernels/data/2026-11-30-first-kernels/: the final run and the CTA sweep)
and the 256 KiB table from the final run's log (that run's records did not come back from the device: eight files
at most), recomputes every prediction
with the model as it is now (the same problem, shape and topology the profiler used, the pair and the CTA
count the kernel declares), and prints (measured − predicted) / predicted: positive means the kernel was
slower than the model says. No GPU needed.

Usage: python benchmarks/model/model_vs_kernels.py [TOPOLOGY]   (default: h200x2)
"""

import json
import sys
from pathlib import Path

from pkroof.analysis.catalogue import load
from pkroof.analysis.problem import predict_declared, workload_of
from pkroof.profilers.profile import declared_pair
from pkroof.rooflines import bound
from pkroof.rooflines.units import fmt_bytes, fmt_s
from pkroof.topology import resolve

DATA = Path(__file__).parents[1] / "kernels" / "data" / "2026-11-30-first-kernels"
FINAL, SWEEP = "final-kernels-timed", "cta-sweep-and-fused"
RECORDS = [f"{FINAL}/collectives-64MiB.jsonl", f"{FINAL}/gemm-all-reduce.jsonl", f"{SWEEP}/fused-llama3-8b-tp2.jsonl"]
# the final run reran the sweep's GEMM + all-reduce with the final kernels
SUPERSEDED = {(f"{SWEEP}/fused-llama3-8b-tp2.jsonl", "gemm-all-reduce")}
SMALL_LOG = f"{FINAL}/collectives-256KiB.log"  # 256 KiB: rows of the profiler's table
UNITS = {"ns": 1e-9, "µs": 1e-6, "ms": 1e-3, "s": 1.0}


def _measured() -> list[tuple[str, dict, str, float]]:
    """(problem, params, impl, median seconds) for every correct kernel measurement."""
    rows = []
    for name in RECORDS:
        for line in (DATA / name).read_text().splitlines():
            r = json.loads(line)
            if r["status"] == "correct" and (name, r["problem"]) not in SUPERSEDED:
                rows.append((r["problem"], r["params"], r["impl"], r["median_s"]))
    for line in (DATA / SMALL_LOG).read_text().splitlines():
        f = line.split()
        if len(f) > 7 and f[5] == "correct":  # problem shape impl 256 KiB correct <time> <unit> ...
            rows.append((f[0], {"size_bytes": 256 << 10}, f[2], float(f[6]) * UNITS[f[7]]))
    return rows


def main(topology_name: str) -> None:
    system = resolve(topology_name).system(2)
    print(f"{'problem':20} {'size':>8} {'impl':26} {'pair':24} {'measured':>9} {'predicted':>9} {'error':>6}")
    for problem_name, params, impl, seconds in _measured():
        problem = load(problem_name)
        pair = declared_pair(problem, impl)
        if pair is None:  # torch's own fast paths declare no pair
            continue
        w = workload_of(problem, 2, params)
        p = predict_declared(w, system, pair, pair.get("comm_sms"))
        size = fmt_bytes(sum(op.size_bytes for op in w.comm))
        label = f"{pair['mechanism']}/{pair['schedule']}" + ("/ll" if pair.get("protocol") == "ll" else "")
        err = (seconds - p.t_s) / p.t_s
        roof = bound(w, system).t_roof_s
        print(
            f"{problem_name:20} {size:>8} {impl:26} {label:24} {fmt_s(seconds):>9} {fmt_s(p.t_s):>9} "
            f"{err:+6.0%}  (roof {fmt_s(roof)})"
        )


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "h200x2")
