"""pkroof trace's reader beside HTA's (holistictraceanalysis, PyPI) on public traces: wall time to read and analyse,
peak memory, and what each keeps of an NCCL kernel's recorded arguments and of its timestamps.

    pip install holistictraceanalysis     # not a pkroof dependency: only this comparison uses it
    python benchmarks/trace/reader_vs_hta.py FOLDER [--topology NAME]

Each reader runs in its own process (a fresh interpreter, nothing cached); peak memory is that process's
ru_maxrss. HTA: TraceAnalysis(trace_dir=FOLDER) with its default parser configuration, then
get_comm_comp_overlap; pkroof: pkroof.runs.analyze_traces(FOLDER), which also bounds every kernel.
"""

import argparse
import json
import subprocess
import sys

HTA = """
import json, resource, sys, time
t0 = time.perf_counter()
from hta.trace_analysis import TraceAnalysis
t1 = time.perf_counter()
ta = TraceAnalysis(trace_dir=sys.argv[1])
t2 = time.perf_counter()
ta.get_comm_comp_overlap(visualize=False)
t3 = time.perf_counter()
df = next(iter(ta.t.traces.values()))
kernels = df[df["stream"] >= 0] if "stream" in df else df
nccl_args = [c for c in df.columns if c in ("In msg nelems", "in_msg_nelems", "Collective name", "collective_name")]
print(json.dumps({"import_s": t1 - t0, "read_s": t2 - t1, "overlap_s": t3 - t2,
    "maxrss_MiB": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, "columns": sorted(df.columns),
    "nccl_arg_columns": nccl_args, "gpu_dur_sum_us": float(kernels["dur"].sum())}))
"""

PKROOF = """
import json, resource, sys, time
t0 = time.perf_counter()
from pkroof.runs import analyze_traces
from pkroof.runs.read import find_files, read_all
t1 = time.perf_counter()
traces = read_all(find_files([sys.argv[1]]))
t2 = time.perf_counter()
r = analyze_traces(sys.argv[1], topology=sys.argv[2])
t3 = time.perf_counter()
print(json.dumps({"import_s": t1 - t0, "read_s": t2 - t1, "analyse_s": t3 - t2,
    "maxrss_MiB": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    "sized_collectives": int(r.kernels["bytes"].notna().sum()),
    "gpu_dur_sum_us": float(sum(k.dur_us for t in traces for k in t.kernels))}))
"""


def _run(code: str, *args: str) -> dict:
    done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def _raw_gpu_dur_sum_us(folder: str) -> float:
    import gzip
    from pathlib import Path

    total = 0.0
    for p in sorted(Path(folder).iterdir()):
        doc = json.loads(gzip.decompress(p.read_bytes()) if p.suffix == ".gz" else p.read_bytes())
        cats = ("kernel", "gpu_memcpy", "gpu_memset")
        total += sum(e.get("dur", 0) for e in doc["traceEvents"] if e.get("cat") in cats)
    return total


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("folder")
    ap.add_argument("--topology", default="dgx-a100-8")
    a = ap.parse_args()
    out = {"raw_gpu_dur_sum_us": _raw_gpu_dur_sum_us(a.folder)}
    out["hta"] = _run(HTA, a.folder)
    out["hta"].pop("columns")
    out["pkroof"] = _run(PKROOF, a.folder, a.topology)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
