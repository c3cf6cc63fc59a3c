"""Per fused record: measured − the model's prediction without fused kernels' fixed costs (overlap_s), i.e. what
`pkroof topology calibrate` takes the median of, one line per record, so its spread over shapes can be read.
Then, leaving one shape out at a time: the fixed cost per pair from the other shapes' records (their median
excess), and the error of the held-out shape's records with it: is the cost fixed across shapes?

    python benchmarks/model/fused_excess.py topology/data/h200x2.json RESULTS.jsonl... [--max-size 1MiB]
"""

from __future__ import annotations

import statistics
import sys
from collections import defaultdict
from pathlib import Path

from pkroof.profilers.calibrate import fused_excesses
from pkroof.records import format as records
from pkroof.rooflines.units import parse_size
from pkroof.topology import load as load_topology


def main(argv: list[str]) -> None:
    max_bytes = parse_size(argv[argv.index("--max-size") + 1]) if "--max-size" in argv else 1 << 20
    paths = [a for i, a in enumerate(argv) if not a.startswith("--") and (i == 0 or argv[i - 1] != "--max-size")]
    topology = load_topology(Path(paths[0]))
    print(f"{'problem':22} {'shape':44} {'impl':26} {'pair':22} {'µs':>7} {'model':>7} {'excess':>7}")
    rows: dict[str, list[tuple[str, str, float, float]]] = defaultdict(list)  # pair: (shape, impl, measured, model)
    for r, excess_s in fused_excesses(records.read_files([Path(p) for p in paths[1:]], print), topology, max_bytes):
        pair, model_s = f"{r['mechanism']} {r['schedule']}", r["median_s"] - excess_s
        print(
            f"{r['problem']:22} {r['shape'][:44]:44} {r['impl'][:26]:26} {pair:22} {r['median_s'] * 1e6:7.2f} "
            f"{model_s * 1e6:7.2f} {excess_s * 1e6:7.2f}"
        )
        rows[pair].append((r["shape"], r["impl"], r["median_s"], model_s))
    print("\nleave one shape out: fixed cost from the other shapes, error of the held-out shape's records")
    for pair, found in sorted(rows.items()):
        for shape in sorted({s for s, *_ in found}):
            rest = [m - p for s, _, m, p in found if s != shape]
            if not rest:
                continue
            cost = statistics.median(rest)
            errors = " ".join(f"{(p + cost) / m - 1:+.1%}" for s, _, m, p in found if s == shape)
            print(f"{pair:22} {shape[:44]:44} {cost * 1e6:5.2f} µs from {len(rest):2} records: {errors}")


if __name__ == "__main__":
    main(sys.argv[1:])
