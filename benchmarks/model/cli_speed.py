"""Whole-process wall time of `pkroof bound`, `pkroof advise` on the same query, and `python -c "import typer"`,
run side by side (interleaved, so a busy machine slows all three alike); medians of N runs each.

    python benchmarks/model/cli_speed.py [N] [PROBLEM ARGS...]     (default: 15 runs; all-reduce -t hgx-h100-8)
"""

from __future__ import annotations

import shutil
import statistics
import subprocess
import sys
import time


def _wall(command: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 15
    query = sys.argv[2:] or ["all-reduce", "-t", "hgx-h100-8"]
    pkroof = shutil.which("pkroof") or "pkroof"
    commands = {
        "import typer": [sys.executable, "-c", "import typer"],
        "bound": [pkroof, "bound", *query],
        "advise": [pkroof, "advise", *query],
    }
    for command in commands.values():  # warm the file cache once
        _wall(command)
    times: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(runs):
        for name, command in commands.items():
            times[name].append(_wall(command))
    median = {name: statistics.median(t) for name, t in times.items()}
    for name, t in times.items():
        print(f"{name:14} median {median[name]:.3f} s  (min {min(t):.3f}, max {max(t):.3f}, {runs} runs)")
    print(
        f"advise / bound = {median['advise'] / median['bound']:.2f}; bound / import typer = "
        f"{median['bound'] / median['import typer']:.2f}"
    )


if __name__ == "__main__":
    main()
