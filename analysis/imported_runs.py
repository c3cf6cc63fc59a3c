"""`pkroof topology import`: a preset or topology file calibrated from nccl-tests' and nvbandwidth's output
(topology/from_logs.py), held to the model: no measured time below the calibrated topology's roof."""

from __future__ import annotations

from pathlib import Path

from pkroof.rooflines.analyze import analyze
from pkroof.rooflines.builders import collective
from pkroof.rooflines.units import fmt_s
from pkroof.topology import Topology
from pkroof.topology.from_logs import calibrate
from pkroof.topology.nccl_tests import Run


def check_roof(topo: Topology, runs: list[Run]) -> None:
    """No measured time below the result's roof: the roof is a bound (one line naming the row otherwise)."""
    for run in runs:
        try:
            system = topo.system(min(run.num_ranks, topo.num_gpus))
        except ValueError:
            continue
        for row in run.rows:
            try:
                w = collective(run.collective, system.world_size, "fp8", size=row.size_bytes)
            except ValueError:  # a size that does not split over the ranks in whole bytes
                continue
            roof = analyze(w, system).bound.t_roof_s
            if roof > row.fastest_s * (1 + 1e-9):
                raise ValueError(
                    f"{run.path}:{row.line}: {fmt_s(row.fastest_s)} measured at {row.size_bytes} B, below the roof "
                    f"({fmt_s(roof)}) of {topo.name} calibrated by it: is BASE this node?"
                )


def import_runs(base: str | Topology, files: list[Path], *, name: str | None = None) -> tuple[Topology, list[str]]:
    """BASE calibrated by `files` (nccl-tests and nvbandwidth output, in any mix) and one line per thing done; a
    ValueError of one line where a file's time beats the calibrated roof (the roof is a bound)."""
    topo, lines, runs = calibrate(base, files, name=name)
    check_roof(topo, runs)
    return topo, lines
