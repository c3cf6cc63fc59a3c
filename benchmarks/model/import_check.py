"""How well `pkroof topology import` follows nccl-tests runs: import them onto a base topology, then print, per size,
what each log measured (the faster of out of place and in place) against the NCCL prediction of the result, and the
roof (which must never be above a measured time).

    python benchmarks/model/import_check.py h200x2 all_reduce_perf.txt [all_gather_perf.txt ...]

The bar `pkroof topology import` is held to on a 2xH200 node's all-reduce: within 5% at 512 MiB, 10% at 128 KiB.
Torch-free; runs anywhere.
"""

import sys
from pathlib import Path

from pkroof.analysis.imported_runs import import_runs
from pkroof.rooflines import Mechanism, Schedule
from pkroof.rooflines.analyze import analyze
from pkroof.rooflines.builders import collective
from pkroof.topology import nccl_tests

BAR = {512 << 20: 0.05, 128 << 10: 0.10}  # size → the largest |error| allowed there (all-reduce)


def main(base: str, files: list[str]) -> int:
    topo, lines = import_runs(base, [Path(f) for f in files])
    print("\n".join(lines))
    failed = 0
    for path in files:
        for run in nccl_tests.parse(Path(path)):
            ranks = min(run.num_ranks, topo.num_gpus)
            print(f"\n{path}: {run.collective.value}, {run.num_ranks} ranks")
            print(f"{'size':>12} {'measured':>12} {'predicted':>12} {'error':>8} {'t_roof':>12}  bar")
            for row in run.rows:
                try:
                    w = collective(run.collective, ranks, "fp8", size=row.size_bytes)
                except ValueError:
                    continue
                b = analyze(w, topo.system(ranks)).bound
                p = b.prediction(Mechanism.NCCL, Schedule.SERIAL)
                error = (p.t_s - row.fastest_s) / row.fastest_s
                bar = BAR.get(row.size_bytes) if run.collective.value == "all-reduce" else None
                ok = "" if bar is None else ("ok" if abs(error) <= bar else f"FAIL (> {bar:.0%})")
                ok += "" if b.t_roof_s <= row.fastest_s else "  ROOF ABOVE A MEASURED TIME"
                failed += "FAIL" in ok or "ROOF" in ok
                measured, predicted, roof = (t * 1e6 for t in (row.fastest_s, p.t_s, b.t_roof_s))
                times = f"{measured:>10.2f}us {predicted:>10.2f}us {error:>+8.1%} {roof:>10.2f}us"
                print(f"{row.size_bytes:>12} {times}  {ok}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2:]))
