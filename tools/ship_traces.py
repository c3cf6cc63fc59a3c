"""Write the suite's traces for installs without torch: every suite problem without a hand-written workload, at each
named shape on 2, 8 and 72 ranks (the presets' GPU counts), and at every point of the sweep the analytic pages draw
from it, traced on meta tensors as those pages trace it.

    python -m tools.ship_traces                      # rewrites kernels/problems/_traced.jsonl
    python -m tools.ship_traces --out /tmp/t.jsonl   # writes them elsewhere (compare: cmp /tmp/t.jsonl ...)

Run it after changing a suite problem (tests/test_trace.py fails until then). It calls the analysis as `pkroof
report` does (analysis/problem.py: a collective's size rounded where it does not split, a point that does not
divide or needs data skipped) and keeps each trace under the key trace_cache.shipped() reads.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from pkroof.analysis import trace_cache
from pkroof.analysis.catalogue import Problem, suite
from pkroof.analysis.problem import sized, sweep_params
from pkroof.rooflines import Workload
from pkroof.rooflines.bound import check_fits
from pkroof.rooflines.workload import workload_from_dict, workload_to_dict
from pkroof.topology import PRESETS, Topology, resolve


def _traces(problem: Problem, shape: str, topo: Topology) -> Iterator[tuple[dict[str, Any], Workload]]:
    """(parameters, trace) at the shape, then, if it fits the GPU, at each point of its sweep that traces."""
    world = topo.num_gpus
    params, workload = sized(problem, world, problem.params(shape), cpu_ranks=False)
    yield params, workload
    check_fits(workload, topo.gpu.hbm_capacity_bytes, topo.gpu.name)
    for point in sweep_params(problem, params):
        try:
            yield sized(problem, world, point, cpu_ranks=False)
        except ValueError:  # does not divide, needs data: off the sweep, nothing to ship
            continue


def ship(path: Path = trace_cache.SHIPPED, log: Callable[[str], None] = print) -> int:
    """Trace and write them to `path`; the number written."""
    topologies = {t.num_gpus: t for t in map(resolve, PRESETS)}
    found: dict[str, Workload] = {}
    for problem in suite():
        if problem.has_workload:
            continue
        for world in trace_cache.SHIPPED_WORLDS:
            for shape in problem.shapes:
                try:
                    for params, workload in _traces(problem, shape, topologies[world]):
                        found[trace_cache.key(problem, world, params, None, "meta", any_torch=True)] = workload
                except ValueError as e:  # does not divide, needs data, does not fit: nothing more to ship
                    log(f"{problem.name} {shape} on {world}: {str(e)[:100]}")
    # each as a reader gets it back (its params as floats), whether it was traced now or read from the trace cache
    as_read = {k: workload_to_dict(workload_from_dict(workload_to_dict(w))) for k, w in found.items()}
    lines = [json.dumps({"key": k, "workload": w}) for k, w in as_read.items()]
    path.write_text("".join(sorted(line + "\n" for line in lines)))
    return len(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m tools.ship_traces", description="Write the suite's traces for installs without torch."
    )
    parser.add_argument("--out", type=Path, default=trace_cache.SHIPPED, help="where to write (default: %(default)s)")
    out = parser.parse_args(argv).out
    print(f"wrote {ship(out)} traces to {out}")


if __name__ == "__main__":
    main()
