"""The launched profile rehearsed on one machine, timed: two torchrun "nodes" of 2 CPU ranks each (gloo) profile
the all-reduce with a right implementation and a crash, a hang and a wrong answer on node 1; then a second launch
whose rank 2 is killed mid-job (its pkroof process, as a lost node). Prints each launch's wall time, exit codes,
records, and how long after the kill both nodes had ended. The implementations are the launched tests' problem
file, passed to `pkroof profile --impl` (data here: nothing of tests/ is imported).

    python benchmarks/suite/launched_rehearsal.py OUT_DIR
"""

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

from pkroof.records import format as records
from pkroof.runtime.launch import free_port

IMPLS = Path(__file__).resolve().parents[2] / "tests" / "data" / "problems" / "launched_impls.py"
NODES, PER_NODE = 2, 2


def _environ(pid: int) -> dict[str, str]:
    try:
        pairs = Path(f"/proc/{pid}/environ").read_bytes().split(bytes(1))
    except OSError:
        return {}
    return dict(p.decode(errors="replace").partition("=")[::2] for p in pairs if b"=" in p)


def _live() -> dict[int, int]:
    """PID → parent PID of every live process (zombies left out), from /proc."""
    out = {}
    for entry in Path("/proc").iterdir():
        try:
            fields = (entry / "stat").read_text().rpartition(")")[2].split() if entry.name.isdigit() else None
        except OSError:
            continue
        if fields and fields[0] != "Z":
            out[int(entry.name)] = int(fields[1])
    return out


class Launch:
    """NODES torchrun agents of PER_NODE CPU ranks each on localhost running `pkroof profile ARGS` in `folder`;
    every process carries a mark (LAUNCH_TEST_MARK) to find what is left of it."""

    def __init__(self, folder: Path, args: list[str]) -> None:
        self.folder, self.mark, port = folder, uuid.uuid4().hex, free_port()
        env = os.environ | {"GLOO_SOCKET_IFNAME": "lo", "LAUNCH_TEST_DIR": str(folder), "LAUNCH_TEST_MARK": self.mark}
        env |= {"OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1", "CUDA_VISIBLE_DEVICES": ""}
        self.nodes = []
        for node in range(NODES):
            run = [sys.executable, "-m", "torch.distributed.run", "--nnodes", str(NODES)]
            run += ["--nproc-per-node", str(PER_NODE), "--node-rank", str(node), "--master-addr", "127.0.0.1"]
            run += ["--master-port", str(port), "-m", "pkroof", "profile", *args]
            log = (folder / f"node{node}.log").open("w")
            self.nodes.append(
                subprocess.Popen(run, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=folder, start_new_session=True)
            )

    def wait(self, limit_s: float = 600) -> list[int]:
        try:
            return [p.wait(limit_s) for p in self.nodes]
        finally:
            for p in self.nodes:
                if p.poll() is None:
                    os.killpg(p.pid, signal.SIGKILL)
                    p.wait()

    def rank_process(self, node: int, rank: int) -> int:
        """The pkroof process of global rank `rank`, a child of node `node`'s agent."""
        agent = self.nodes[node].pid
        return next(p for p, parent in _live().items() if parent == agent and _environ(p).get("RANK") == str(rank))

    def left_running(self) -> list[int]:
        """The launch's processes still alive after ten seconds' grace."""
        for _ in range(50):
            if not (left := [p for p in _live() if _environ(p).get("LAUNCH_TEST_MARK") == self.mark]):
                return []
            time.sleep(0.2)
        return left

    def records(self) -> list[dict]:
        return records.read(self.folder / "out" / "results.jsonl")[0]


def show(launch: Launch, codes: list[int], seconds: float) -> None:
    print(f"  exit codes {codes}, {seconds:.1f} s; left running: {launch.left_running() or 'nothing'}")
    for r in launch.records():
        took = f"{r['median_s'] * 1e3:.2f} ms" if r.get("median_s") else "-"
        print(f"  {r['impl'].rpartition(':')[2]:18} {r['status']:9} {took:>9}  world {r['world_size']} = "
              f"{r['nodes']} x {r['ranks_per_node']} ({r['launcher']})  {r.get('message', '')[:110]}")  # fmt: skip


def main(out: Path) -> None:
    faults = out / "faults"
    faults.mkdir(parents=True, exist_ok=True)
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
    os.kill(launch.rank_process(1, 2), signal.SIGKILL)
    killed = time.monotonic()
    ended: dict[int, float] = {}
    while len(ended) < NODES and time.monotonic() - killed < 600:
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
