"""The model's predictions against the probe's own measurements on the same node (no GPU needed).

For each NCCL collective the probe timed, the model's (nccl, serial) prediction for the same size on the same
topology; for each point-to-point mechanism, its fitted transfer model at all SMs. Prints (measured − predicted)
/ predicted per size: positive means the hardware was slower than the model says.
Usage: python benchmarks/model_vs_probe.py [TOPOLOGY]   (default h200x2, the measured preset)
"""

import sys

from pkroof.rooflines import Mechanism, Schedule, bound
from pkroof.rooflines.units import fmt_bytes
from pkroof.rooflines.workloads import build
from pkroof.topology import resolve


def main(name: str) -> None:
    topology = resolve(name)
    system = topology.system()
    curves = {c.name: c for c in topology.probe.curves}
    sizes = curves["nccl all-reduce"].x
    print(f"{'':20}" + "".join(f"{fmt_bytes(s):>9}" for s in sizes))
    for kind in ("all-reduce", "all-gather", "reduce-scatter", "all-to-all", "send-recv"):
        curve = curves[f"nccl {kind}"]
        errors = []
        for size, measured in zip(curve.x, curve.median_s, strict=True):
            predicted = bound(build(kind, system.world_size, "bf16", size=int(size)), system)
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


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "h200x2")
