"""Write the suite's traces for installs without torch: every suite problem without a hand-written workload, at each
named shape on 2, 8 and 72 ranks (the presets' GPU counts), traced on meta tensors as the analytic pages trace it.

    python -m tools.ship_traces        # rewrites kernels/problems/_traced.jsonl

Run it after changing a suite problem (tests/test_trace.py fails until then).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from pkroof.analysis import trace_cache
from pkroof.analysis.catalogue import suite
from pkroof.analysis.problem import analyze
from pkroof.rooflines.workload import workload_to_dict
from pkroof.topology import PRESETS, resolve


def ship(path: Path = trace_cache.SHIPPED, log: Callable[[str], None] = print) -> int:
    """Trace and write them to `path`; the number written."""
    topologies = {resolve(n).num_gpus: n for n in PRESETS}
    trace_cache.collecting(True)
    try:
        for problem in suite():
            if problem.has_workload:
                continue
            for world in trace_cache.SHIPPED_WORLDS:
                for shape in problem.shapes:
                    try:
                        analyze(problem, topology=topologies[world], shape=shape, world_size=world, sweep=True,
                                cpu_ranks=False, round_size=True)  # fmt: skip
                    except ValueError as e:  # does not divide, needs data: nothing to ship
                        log(f"{problem.name} {shape} on {world}: {str(e)[:100]}")
    finally:
        found = trace_cache.collecting(False)
    lines = [json.dumps({"key": k, "workload": workload_to_dict(w)}) for k, w in found.items()]
    path.write_text("".join(sorted(line + "\n" for line in lines)))
    return len(lines)


if __name__ == "__main__":
    print(f"wrote {ship()} traces to {trace_cache.SHIPPED}")
