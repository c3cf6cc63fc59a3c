"""The launched profile rehearsed on one machine, timed: two torchrun "nodes" of 2 CPU ranks each (gloo) profile
the all-reduce with a right implementation and a crash, a hang and a wrong answer on node 1; then a second launch
whose rank 2 is killed mid-job (its pkroof process, as a lost node). Prints each launch's wall time, exit codes,
records, and how long after the kill both nodes had ended.

    python benchmarks/suite/launched_rehearsal.py OUT_DIR
"""

import json
import os
import signal
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[2] / "tests"))
from launched_nodes import Launch, children, environ, marked

IMPLS = Path(__file__).parents[2] / "tests" / "data" / "problems" / "launched_impls.py"


def show(launch: Launch, codes: list[int], seconds: float) -> None:
    print(f"  exit codes {codes}, {seconds:.1f} s; left running: {marked(launch.mark) or 'nothing'}")
    for r in launch.records():
        took = f"{r['median_s'] * 1e3:.2f} ms" if r.get("median_s") else "-"
        print(f"  {r['impl'].rpartition(':')[2]:18} {r['status']:9} {took:>9}  world {r['world_size']} = "
              f"{r['nodes']} x {r['ranks_per_node']} ({r['launcher']})  {r.get('message', '')[:110]}")  # fmt: skip


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    faults = out / "faults"
    faults.mkdir(exist_ok=True)
    names = ("correct", "killed_on_node_1", "hangs_on_node_1", "wrong_on_node_1")
    args = ["all-reduce", "--size", "64K", "--out", str(faults / "out"), "--timeout", "20", "--iters", "3"]
    start = time.monotonic()
    launch = Launch(faults, args + [a for n in names for a in ("--impl", f"{IMPLS}:{n}")])
    codes = launch.wait()
    print("faults on node 1 (--timeout 20):")
    show(launch, codes, time.monotonic() - start)

    lost = out / "lost"
    lost.mkdir(exist_ok=True)
    args = ["all-reduce", "--size", "64K", "--out", str(lost / "out"), "--timeout", "120", "--iters", "2"]
    launch = Launch(lost, [*args, "--impl", f"{IMPLS}:waits_on_node_1"])
    while not (lost / "rank-2-started").exists():
        time.sleep(0.1)
    control = next(p for p in children(launch.nodes[1].pid) if environ(p).get("RANK") == "2")
    os.kill(control, signal.SIGKILL)
    killed = time.monotonic()
    ended: dict[int, float] = {}
    while len(ended) < 2 and time.monotonic() - killed < 600:
        ended |= {
            n: time.monotonic() - killed for n, p in enumerate(launch.nodes) if n not in ended and p.poll() is not None
        }
        time.sleep(0.05)
    print(
        f"rank 2's pkroof process killed (--timeout 120): node 0 ended {ended[0]:.1f} s after, node 1 {ended[1]:.1f} s"
    )
    show(launch, [p.returncode for p in launch.nodes], ended[0])
    (out / "records.json").write_text(json.dumps(launch.records(), indent=1))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
