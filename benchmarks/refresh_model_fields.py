"""Recompute the model's fields of recorded results with the model as it is now; measurements stay untouched.

A record holds measurements (times, correctness, environment) and what the model said when it was written
(predicted_s, prediction_error, comm_sms, and the reference's page analysis). When the model changes, the
shipped records (pkroof/recorded/) would show the old model beside new code; this rewrites only those fields
and stamps each record with `model_refreshed` (date and commit), so a reader can tell.

Usage: python benchmarks/refresh_model_fields.py [--topology NAME] FILE.jsonl ...

--topology: predict against this preset instead of the one each record names (for records measured against a
fresh probe of the node, "this-node", which is not shipped); the stamp then says which.
"""

import json
import subprocess
import sys
from datetime import date
from pathlib import Path

from pkroof.profilers.analysis import analysis
from pkroof.profilers.problems import load
from pkroof.profilers.profile import declared_pair, predict_declared, workload_of
from pkroof.topology import resolve


def refresh(record: dict, stamp: str, topology: str | None = None) -> dict:
    problem = load(record["problem"])
    world = record["world_size"]
    system = resolve(topology or record["environment"]["topology"]).system(world)
    workload = workload_of(problem, world, record["params"])
    pair = declared_pair(problem, record["impl"])
    if pair:
        # the CTA count the kernel ran with, as recorded (a later default may differ); declared where none was
        ctas = record["comm_sms"] if record.get("comm_sms") is not None else pair.get("comm_sms")
        p = predict_declared(workload, system, pair, ctas)
        record["comm_sms"] = ctas
        for key in ("protocol", "algorithm"):  # the kernel's declaration now, as for the rest of the pair
            record.pop(key, None)
            if key in pair:
                record[key] = pair[key]
        record["predicted_s"] = p.t_s if p else None
        if p and record.get("median_s"):
            record["prediction_error"] = (record["median_s"] - p.t_s) / p.t_s
    if record["impl"] == "reference":
        record["analysis"] = analysis(problem, record["params"], world, system, workload=workload)
    record["model_refreshed"] = stamp
    return record


def main(args: list[str]) -> None:
    topology = None
    if args[:1] == ["--topology"]:
        topology, args = args[1], args[2:]
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    stamp = f"{date.today().isoformat()} {commit}" + (f" against {topology}" if topology else "")
    for name in args:
        path = Path(name)
        rows = [refresh(json.loads(line), stamp, topology) for line in path.read_text().splitlines() if line.strip()]
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
        print(f"{path}: {len(rows)} records, model fields as of {stamp}")


if __name__ == "__main__":
    main(sys.argv[1:])
