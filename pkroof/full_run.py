"""`pkroof report --run` on a GPU node: probe it, profile the whole suite against what the probe measured, report."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path


def run_all(out: Path, *, quick: bool = False, log: Callable[[str], None] = print) -> list[Path]:
    """Probe, profile every suite problem (resumable), report. The probe's topology and the results live beside the
    report, in OUT-data/, so re-running resumes the suite where it stopped, and the report folder itself stays
    replaceable as a whole."""
    from pkroof.analysis.catalogue import names
    from pkroof.profilers.profile import profile
    from pkroof.report import report
    from pkroof.reports.build import check_out, first_missing
    from pkroof.topology.probe import probe

    check_out(out)  # before the probe and the suite, not after them
    data = out.parent / f"{out.name}-data"
    check_out(data, replace=False)
    made = first_missing(data)
    data.mkdir(parents=True, exist_ok=True)
    topology = data / "topology.json"
    if not topology.exists():
        log(f"probing this node into {topology}")
        try:
            probe(out=topology, quick=quick, name="this-node", log=log)
        except BaseException:
            if made is not None and not any(f.is_file() for f in made.rglob("*")):  # no empty folder left behind
                shutil.rmtree(made, ignore_errors=True)
            raise
    log(f"profiling {len(names())} problems into {data / 'results'}")
    profile(
        names(),
        impls=[],
        world_size=None,
        shape=None,
        overrides={},
        out_dir=data / "results",
        timeout_s=120,
        resume=True,
        topology=str(topology),
        log=log,
    )
    return report([data / "results" / "results.jsonl"], topology=str(topology), out=out, log=log)
