"""Regenerate h200x2_*_perf.txt: the NCCL curves `pkroof probe` measured on the 2xH200 node (topology/data/h200x2.json,
2026-11-30, NCCL 2.28.9, graph replays, median of 10 samples per size) printed the way nccl-tests' *_perf prints a
run (NVIDIA/nccl-tests src/util.cu: writeResultHeader, writeBenchmarkLinePreamble, writeBenchmarkLineBody).

The probe times each NCCL call in place (torch.distributed's all_reduce(x)), so both columns hold that one time.
Hosts, pids and PCI ids are placeholders. Run from the repository root: python tests/data/logs/from_probe.py
"""

import json
from pathlib import Path

from pkroof.rooflines import Collective, bus_bandwidth_factor

HERE = Path(__file__).parent
PROGRAM = {"all-reduce": "all_reduce", "all-gather": "all_gather", "reduce-scatter": "reduce_scatter",
           "all-to-all": "alltoall", "send-recv": "sendrecv"}  # fmt: skip
REDUCES = ("all-reduce", "reduce-scatter")


def _float(value: float, width: int) -> str:
    """nccl-tests' getFloatStr: 2 decimals while they fit, then fewer."""
    digits = len(str(int(value))) if value >= 1 else 0
    decimals = 2 if digits < width - 2 else 1 if digits < width - 1 else 0
    return f"{value:{width}.{decimals}f}"


def write(curve: dict, probe: dict, gpu: str) -> None:
    kind = curve["name"].removeprefix("nccl ")
    n = 2
    sizes = [int(x) for x in curve["x"]]
    lines = [
        "# pkroof test fixture: pkroof probe's NCCL curve on the 2xH200 node in nccl-tests' format (tests/data/logs/"
        "README.md)",
        f"# Collective test starting: {PROGRAM[kind]}_perf",
        f"# nThread 1 nGpus 1 minBytes {sizes[0]} maxBytes {sizes[-1]} step: 4(factor) warmup iters: 2 iters: "
        f"{curve['num_samples']} agg iters: 1 validation: 1 graph: 1",
        "#",
        "# Using devices",
        *(
            f"#  Rank {r:2d} Group  0 Pid {1000 + r:6d} on   h200node device {r:2d} [0000:{r:02x}:00] {gpu}"
            for r in [0, 1]
        ),
        f"NCCL version {probe['versions']['nccl']}+cuda{probe['versions']['cuda']}",
        "#",
        f"# {'':>10}  {'':>12}  {'':>8}  {'':>6}  {'':>6}           out-of-place                       in-place"
        + " " * 10,
        f"# {'size':>10}  {'count':>12}  {'type':>8}  {'redop':>6}  {'root':>6}  {'time':>7}  {'algbw':>6}  "
        f"{'busbw':>6}  {'#wrong':>6}  {'time':>7}  {'algbw':>6}  {'busbw':>6}  {'#wrong':>6} ",
        f"# {'(B)':>10}  {'(elements)':>12}  {'':>8}  {'':>6}  {'':>6}  {'(us)':>7}  {'(GB/s)':>6}  {'(GB/s)':>6}  "
        f"{'':>6}  {'(us)':>7}  {'(GB/s)':>6}  {'(GB/s)':>6}  {'':>6} ",
    ]
    factor = bus_bandwidth_factor(Collective(kind), n)
    total = 0.0
    for size, t in zip(sizes, curve["median_s"], strict=True):
        us = t * 1e6
        algbw = size / us / 1e3
        busbw = algbw * factor
        total += busbw
        body = f"  {_float(us, 7)}  {_float(algbw, 6)}  {_float(busbw, 6)}  {0:6d}"
        redop = "sum" if kind in REDUCES else "none"
        lines.append(f"  {size:10d}  {size // 2:12d}  {'bfloat16':>8}  {redop:>6}  {-1:6d}{body}{body}")
    lines += [
        "# Out of bounds values : 0 OK",
        f"# Avg bus bandwidth    : {total / len(sizes):g} ",
        "#",
        f"# Collective test concluded: {PROGRAM[kind]}_perf",
    ]
    (HERE / f"h200x2_{PROGRAM[kind]}_perf.txt").write_text("\n".join(lines) + "\n")


def main() -> None:
    topo = json.loads((HERE.parents[2] / "topology" / "data" / "h200x2.json").read_text())
    probe = topo["probe"]
    for curve in probe["curves"]:
        if curve["mechanism"] == "nccl":
            write(curve, probe, topo["gpu"]["name"])


if __name__ == "__main__":
    main()
