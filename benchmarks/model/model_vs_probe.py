"""The model's predictions against the probe's own measurements on the same node (no GPU needed).

For each NCCL collective the probe timed, the model's (nccl, serial) prediction for the same size on the same
topology; for each point-to-point mechanism, its fitted transfer model at all SMs. Prints (measured − predicted)
/ predicted per size: positive means the hardware was slower than the model says.
Those rows are in-sample: the fits come from the very samples they are compared with. The last rows are not:
they compare the same model with plain PyTorch timings taken by a separate script in the same session
(benchmarks/probe/plain_torch_baseline.py, its log in benchmarks/probe/data/): `dist.all_reduce` under a CUDA graph and
`copy_` between peers (pull), which the probe's fits never saw. The plain copies are eager calls (a copy
between two devices cannot be captured from one process), host-bound below a few hundred MiB, so only 256 MiB
and 1 GiB are compared; the other cells print "—".
Usage: python benchmarks/model/model_vs_probe.py [TOPOLOGY [PLAIN_LOG]]
       (defaults: h200x2, the measured preset; benchmarks/probe/data/2026-11-30-probe/final-probe/plain.log)
"""

import re
import sys
from pathlib import Path

from pkroof.rooflines import Collective, Mechanism, Schedule, bound
from pkroof.rooflines.builders import collective
from pkroof.rooflines.units import fmt_bytes
from pkroof.topology import resolve

PLAIN_LOG = Path(__file__).parents[1] / "probe" / "data" / "2026-11-30-probe" / "final-probe" / "plain.log"


def _plain(log: Path) -> dict[str, dict[int, float]]:
    """Seconds per size from the plain-PyTorch log: 'all_reduce a plain' lines (µs) and 'copy_' pulls (GB/s)."""
    out: dict[str, dict[int, float]] = {"all-reduce": {}, "copy-engine": {}}
    for line in log.read_text().splitlines():
        if m := re.match(r"all_reduce a plain\s+(\d+) B\s+([\d.]+) µs", line):
            out["all-reduce"][int(m[1])] = float(m[2]) * 1e-6
        elif m := re.match(r"copy_\s+(\d+) B\s+pull\s+([\d.]+) GB/s", line):
            out["copy-engine"][int(m[1])] = int(m[1]) / (float(m[2]) * 1e9)
    return out


def main(name: str, plain_log: Path) -> None:
    topology = resolve(name)
    system = topology.system()
    curves = {c.name: c for c in topology.probe.curves}
    sizes = curves["nccl all-reduce"].x
    print(f"{'':20}" + "".join(f"{fmt_bytes(s):>9}" for s in sizes))
    for kind in ("all-reduce", "all-gather", "reduce-scatter", "all-to-all", "send-recv"):
        curve = curves[f"nccl {kind}"]
        errors = []
        for size, measured in zip(curve.x, curve.median_s, strict=True):
            predicted = bound(collective(Collective(kind), system.world_size, "bf16", size=int(size)), system)
            t = predicted.prediction(Mechanism.NCCL, Schedule.SERIAL).t_s
            errors.append((measured - t) / t)
        label = f"nccl {kind}"
        print(f"{label:20}" + "".join(f"{e:>+9.0%}" for e in errors))
    for mechanism, curve_name in (
        ("copy-engine", "copy-engine pull"),
        ("sm-load", "sm-load pull"),
        ("sm-store", "sm-store push"),
        ("tma", "tma pull"),
    ):
        curve, model = curves[curve_name], system.mechanisms[Mechanism(mechanism)]
        errors = [
            (m - model.time_s(s, system.sm_count)) / model.time_s(s, system.sm_count)
            for s, m in zip(curve.x, curve.median_s, strict=True)
        ]
        print(f"{mechanism:20}" + "".join(f"{e:>+9.0%}" for e in errors))
    plain = _plain(plain_log)
    ce = system.mechanisms[Mechanism.COPY_ENGINE]
    for label, kind, times in (
        ("plain all_reduce", "all-reduce", plain["all-reduce"]),
        ("plain copy_ pull", "copy-engine", plain["copy-engine"]),
    ):
        errors = []
        for size in sizes:
            if int(size) not in times or (kind == "copy-engine" and size < 256 * 2**20):
                errors.append(None)
                continue
            if kind == "all-reduce":
                w = collective(Collective(kind), system.world_size, "bf16", size=int(size))
                t = bound(w, system).prediction(Mechanism.NCCL, Schedule.SERIAL).t_s
            else:
                t = ce.time_s(size)
            errors.append((times[int(size)] - t) / t)
        print(f"{label:20}" + "".join(f"{e:>+9.0%}" if e is not None else f"{'—':>9}" for e in errors))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "h200x2", Path(sys.argv[2]) if len(sys.argv) > 2 else PLAIN_LOG)
