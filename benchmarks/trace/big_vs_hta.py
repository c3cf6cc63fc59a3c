"""`pkroof trace` and HTA's TraceAnalysis on the same folder of traces, side by side: wall time, CPU time and peak
memory of each, measured from outside with GNU time (/usr/bin/time -v), and the peak of its whole process tree's
resident memory sampled from /proc (HTA parses ranks in a pool of worker processes; time -v's maximum resident set
is one process's).

    python benchmarks/trace/make_big_traces.py --out /tmp/pkroof-big-traces        # 8 ranks × ~200 MB
    pip install holistictraceanalysis                                               # not a pkroof dependency
    python benchmarks/trace/big_vs_hta.py /tmp/pkroof-big-traces [--hta-backend json|ijson] [--only pkroof|hta]

pkroof: `python -m pkroof trace FOLDER` (read, classify, size and bound every kernel, match collectives across ranks,
steps, opportunities; the terminal summary to /dev/null). HTA: `TraceAnalysis(trace_dir=FOLDER)` (its parse of every
rank), then `get_comm_comp_overlap` and `get_temporal_breakdown` (the analyses nearest pkroof's exposed
communication and step breakdown), timed inside the process too. Writes one JSON line per tool to stdout.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HTA = """
import json, sys, time
t0 = time.perf_counter()
from hta.common.trace_parser import ParserBackend, set_default_trace_parsing_backend
from hta.trace_analysis import TraceAnalysis
if sys.argv[2] == "ijson":
    set_default_trace_parsing_backend(ParserBackend.IJSON_BATCH_AND_COMPRESS)
t1 = time.perf_counter()
ta = TraceAnalysis(trace_dir=sys.argv[1])
t2 = time.perf_counter()
overlap = ta.get_comm_comp_overlap(visualize=False)
t3 = time.perf_counter()
ta.get_temporal_breakdown(visualize=False)
t4 = time.perf_counter()
pct = {int(r): float(p) for r, p in zip(overlap["rank"], overlap["comp_comm_overlap_pctg"])}
print(json.dumps({"import_s": t1 - t0, "load_s": t2 - t1, "overlap_s": t3 - t2, "breakdown_s": t4 - t3,
                  "overlap_pct": pct}))
"""


def _tree_rss_kib(root: int) -> int:
    """Resident memory of `root` and every process below it (KiB), from /proc."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            status = Path(f"/proc/{entry}/status").read_text()
        except OSError:
            continue
        ppid = re.search(r"^PPid:\s+(\d+)", status, re.M)
        vm = re.search(r"^VmRSS:\s+(\d+) kB", status, re.M)
        if ppid:
            children.setdefault(int(ppid.group(1)), []).append(int(entry))
        rss[int(entry)] = int(vm.group(1)) if vm else 0
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        total += rss.get(pid, 0)
        todo += children.get(pid, [])
    return total


def measure(command: list[str], stdout: Path) -> dict:
    """Run `command` under /usr/bin/time -v; its wall, user and system time, time's maximum resident set (the largest
    single process) and the sampled peak of its process tree."""
    with tempfile.NamedTemporaryFile("r", suffix=".time") as report, stdout.open("w") as out:
        start = time.perf_counter()
        proc = subprocess.Popen(
            ["/usr/bin/time", "-v", "-o", report.name, *command], stdout=out, stderr=subprocess.PIPE
        )
        peak = [0]

        def sample() -> None:
            while proc.poll() is None:
                peak[0] = max(peak[0], _tree_rss_kib(proc.pid))
                time.sleep(0.2)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        _, err = proc.communicate()
        sampler.join()
        wall = time.perf_counter() - start
        text = Path(report.name).read_text()
    if proc.returncode:
        raise SystemExit(f"{command[:3]} failed ({proc.returncode}): {err.decode()[-2000:]}")

    def field(name: str) -> float:
        return float(re.search(rf"{name}: ([\d.]+)", text).group(1))

    return {
        "wall_s": wall,
        "user_s": field("User time \\(seconds\\)"),
        "system_s": field("System time \\(seconds\\)"),
        "max_rss_MiB": field("Maximum resident set size \\(kbytes\\)") / 1024,
        "tree_peak_MiB": peak[0] / 1024,
        "load_average": os.getloadavg()[0],
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("folder")
    p.add_argument("--topology", default=None)
    p.add_argument("--hta-backend", choices=("json", "ijson"), default="json", help="json: HTA's default")
    p.add_argument("--only", choices=("pkroof", "hta"), default=None)
    a = p.parse_args()
    files = sorted(Path(a.folder).glob("*.json*"))
    size_MB = sum(f.stat().st_size for f in files) / 1e6
    base = {"folder": a.folder, "files": len(files), "MB": round(size_MB), "cpus": os.cpu_count()}
    if a.only in (None, "pkroof"):
        command = [sys.executable, "-m", "pkroof", "trace", a.folder]
        command += ["--topology", a.topology] if a.topology else []
        got = measure(command, Path(tempfile.gettempdir()) / "big_vs_hta.pkroof.txt")
        print(json.dumps(base | {"tool": "pkroof trace"} | got), flush=True)
    if a.only in (None, "hta"):
        out = Path(tempfile.gettempdir()) / "big_vs_hta.hta.txt"
        got = measure([sys.executable, "-c", HTA, a.folder, a.hta_backend], out)
        inside = json.loads(out.read_text().strip().splitlines()[-1])
        print(json.dumps(base | {"tool": f"HTA TraceAnalysis ({a.hta_backend})"} | got | inside), flush=True)


if __name__ == "__main__":
    main()
