"""Two torchrun "nodes" on this machine for the launched-profile tests: one torchrun agent per node (static
rendezvous on localhost), each starting its ranks of `pkroof profile ...`; and what of them is left running."""

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

from pkroof.records import format as records
from pkroof.runtime.launch import free_port


class Launch:
    """`nodes` torchrun agents of `per_node` ranks each running `pkroof profile ARGS` in `tmp`; `node_env`: each
    node's own variables (CUDA_VISIBLE_DEVICES for one-GPU "nodes"). Every process carries a mark to find it by."""

    def __init__(
        self, tmp: Path, args: list[str], *, nodes: int = 2, per_node: int = 2, node_env: list[dict] | None = None
    ) -> None:
        self.tmp, self.mark, port = tmp, uuid.uuid4().hex, free_port()
        env = os.environ | {"GLOO_SOCKET_IFNAME": "lo", "LAUNCH_TEST_DIR": str(tmp), "LAUNCH_TEST_MARK": self.mark}
        env |= {"OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1", "CUDA_VISIBLE_DEVICES": ""}  # CPU ranks unless a
        self.nodes = []  # node's own variables say otherwise (the GPU form's one GPU a node)
        for node in range(nodes):
            run = [sys.executable, "-m", "torch.distributed.run", "--nnodes", str(nodes)]
            run += ["--nproc-per-node", str(per_node), "--node-rank", str(node)]
            run += ["--master-addr", "127.0.0.1", "--master-port", str(port), "-m", "pkroof", "profile", *args]
            out = (tmp / f"node{node}.log").open("w")
            mine = env | (node_env[node] if node_env else {})
            self.nodes.append(
                subprocess.Popen(run, stdout=out, stderr=subprocess.STDOUT, env=mine, cwd=tmp, start_new_session=True)
            )

    def wait(self, limit_s: float = 600) -> list[int]:
        """Every agent's exit code; whatever is still running after `limit_s` is killed (a failed test leaves
        nothing behind either)."""
        try:
            return [p.wait(limit_s) for p in self.nodes]
        finally:
            for p in self.nodes:
                if p.poll() is None:
                    os.killpg(p.pid, signal.SIGKILL)
                    p.wait()

    def log(self, node: int) -> str:
        return (self.tmp / f"node{node}.log").read_text()

    def logs(self) -> str:
        return "\n".join(f"--- node {n}\n{self.log(n)[-3000:]}" for n in range(len(self.nodes)))

    def records(self) -> list[dict]:
        found, unreadable = records.read(self.tmp / "out" / "results.jsonl")
        assert unreadable == []
        return found


def _stat(pid: int) -> list[str] | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return None


def environ(pid: int) -> dict[str, str]:
    try:
        pairs = Path(f"/proc/{pid}/environ").read_bytes().split(bytes(1))
    except OSError:
        return {}
    return dict(p.decode(errors="replace").partition("=")[::2] for p in pairs if b"=" in p)


def children(pid: int) -> list[int]:
    pids = [int(e.name) for e in Path("/proc").iterdir() if e.name.isdigit()]
    return [p for p in pids if (s := _stat(p)) is not None and int(s[1]) == pid]


def _marked_now(mark: str) -> list[int]:
    pids = [int(e.name) for e in Path("/proc").iterdir() if e.name.isdigit()]
    live = [p for p in pids if (s := _stat(p)) is not None and s[0] != "Z"]
    return [p for p in live if environ(p).get("LAUNCH_TEST_MARK") == mark]


def marked(mark: str) -> list[str]:
    """Live processes whose environment carries `mark`: what a launch started and left (those on their way out get
    ten seconds). Each as 'PID: command line'."""
    for _ in range(50):
        if not (found := _marked_now(mark)):
            return []
        time.sleep(0.2)
    return [f"{pid}: {Path(f'/proc/{pid}/cmdline').read_bytes().replace(bytes(1), b' ')[:200]!r}" for pid in found]
