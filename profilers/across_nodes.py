"""`pkroof profile` as one rank of a job that torchrun or srun launched across nodes.

Global rank 0 leads: it prepares the problems, announces each job through the launch's store, runs its own part,
gathers every rank's outcome and writes the record. Every other rank follows: it runs its part of each job as rank
0 announces it and writes nothing. Each part runs in a child of its own (runtime/launched.py), so a crash or a hang
is one recorded failure on every node and the job goes on; a rank whose process disappears ends the job
everywhere (JobLostError), with what was measured already written.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pkroof.runtime.launch import STARTUP_S
from pkroof.runtime.launched import Control, Launch, LostError, Outcome, first_failure
from pkroof.topology import Topology

from .run import Job, _job

LOST_S = 10.0  # a control silent this long is gone (within --timeout where --timeout is at least this)


class JobLostError(RuntimeError):
    """The launched job cannot go on (a rank gone, the store gone, rank 0 ended it): one line, exit non-zero."""


@dataclass(frozen=True)
class Placement:
    """Where a profile's ranks ran: nodes × ranks per node, the nodes' hosts, the backend every rank can use."""

    nodes: int
    ranks_per_node: int
    backend: str
    hosts: tuple[str, ...] = ()
    launcher: str | None = None  # None: pkroof started the ranks itself, on this node
    why_gloo: str = ""  # where GPUs were there but not one for each rank

    @property
    def fields(self) -> dict[str, Any]:
        """What every record says of it."""
        out: dict[str, Any] = {"nodes": self.nodes, "ranks_per_node": self.ranks_per_node}
        if self.launcher is not None:
            out |= {"launcher": self.launcher, "hosts": list(self.hosts)}
        return out


def join(launch: Launch, timeout_s: float, gpus: int) -> Control:
    """This rank's seat in the launched job, with its hello said (its node's GPUs)."""
    hello = {"gpus": gpus, "local_rank": launch.local_rank, "argv": sys.argv[1:]}
    hello["visible"] = os.environ.get("CUDA_VISIBLE_DEVICES")
    try:
        return Control.join(launch, hello, lost_s=min(LOST_S, max(2.0, timeout_s)), startup_s=STARTUP_S)
    except LostError as e:
        raise JobLostError(str(e)) from None


def placement(control: Control) -> Placement:
    """Rank 0: the job's nodes and ranks per node from every rank's hello, and NCCL where every rank has a GPU of
    its own (_own_gpus), else gloo. Unequal nodes, or a node's ranks not consecutive
    (the model's nodes are ranks r·k … r·k+k−1), are a ValueError of one line."""
    try:
        hellos = control.hellos(STARTUP_S)
    except LostError as e:
        raise JobLostError(str(e)) from None
    for rank, hello in enumerate(hellos[1:], 1):  # the others follow rank 0's: a different command is a mistake
        if hello.get("argv") != hellos[0].get("argv"):
            said = " ".join(hello.get("argv") or [])[:200]
            raise ValueError(f"rank {rank} was started as `{said}`, unlike rank 0: every rank takes the same command")
    order: list[str] = []
    by_node: dict[str, list[int]] = {}
    for rank, hello in enumerate(hellos):
        node = str(hello["node"])
        if node not in by_node:
            order.append(node)
        by_node.setdefault(node, []).append(rank)
    counts = {len(ranks) for ranks in by_node.values()}
    if len(counts) > 1:
        said = ", ".join(f"{len(by_node[n])} on node {n}" for n in order)
        raise ValueError(f"the launch put {said}: pkroof bounds nodes of equal numbers of ranks")
    per_node = counts.pop()
    for i, node in enumerate(order):
        if by_node[node] != list(range(i * per_node, (i + 1) * per_node)):
            raise ValueError(
                f"node {node} holds ranks {by_node[node]}: a node's ranks must be consecutive (torchrun's order; "
                "srun --distribution=block)"
            )
    shared = [n for n in order if not _own_gpus([hellos[r] for r in by_node[n]])]
    hosts = tuple(str(hellos[by_node[n][0]]["host"]) for n in order)
    why = ""
    if shared and any(h["gpus"] for h in hellos):  # GPUs there, but not one a rank (no GPU at all needs no word)
        why = f"node {shared[0]}'s ranks have no GPU each (fewer GPUs than ranks, or CUDA_VISIBLE_DEVICES)"
    return Placement(len(order), per_node, "gloo" if shared else "nccl", hosts, control.launch.launcher, why)


def _own_gpus(node: list[dict[str, Any]]) -> bool:
    """Whether each of a node's ranks has a GPU of its own: the one of its local rank, or the one GPU it sees where
    each sees another (srun --gpus-per-task=1 sets each task's CUDA_VISIBLE_DEVICES)."""
    if all(h["gpus"] > h["local_rank"] for h in node):
        return True
    alone = [h.get("visible") for h in node if h["gpus"] == 1]
    return len(alone) == len(node) and None not in alone and len(set(alone)) == len(node)


def job_topology(topo: Topology, nodes: int | None, place: Placement, log: Callable[[str], None]) -> Topology:
    """The multi-node topology a launched job is bounded against: `--nodes N` copies of the topology's node (N must
    be the job's), or the topology itself where it holds the job's nodes (a multi-node probe's file), or — one node
    given, the job on several — that node joined as many times by its NICs, said in a line."""
    if nodes is not None and nodes != place.nodes:
        raise ValueError(f"--nodes {nodes}, but the launch runs on {place.nodes} node{'s' * (place.nodes > 1)}")
    if nodes is not None:
        topo = topo.with_nodes(nodes)
    elif topo.nodes < place.nodes:
        if topo.nodes > 1:
            raise ValueError(f"the launch runs on {place.nodes} nodes; {topo.name} has {topo.nodes}")
        topo = topo.with_nodes(place.nodes)
        log(
            f"{place.nodes} of {topo.name.split('@')[0]}'s node joined by its NICs for the job's {place.nodes} nodes "
            f"(--nodes {place.nodes} says the same; a probe under the same launch measures the network)"
        )
    topo.system(place.nodes * place.ranks_per_node, place.ranks_per_node)  # ranks a node beyond its GPUs: refused
    return topo


def _where(control: Control, rank: int) -> str:
    return f"rank {rank}{control.where(rank)}"


def _record(control: Control, outcomes: list[Outcome], value: Any, timeout_s: float) -> dict[str, Any]:
    """Every rank's outcome of one job as run_job's result: rank 0's result where all were ok, else the failure
    that came first (runtime/launched.py's first_failure), naming its rank and node."""
    bad = first_failure(outcomes)
    if bad is None:
        return value
    if bad.kind == "failed":
        return {"status": "crashed", "message": f"{_where(control, bad.rank)}: {bad.message}", "traceback": bad.details}
    if bad.kind == "startup":
        return {"status": "timeout", "message": f"{bad.message} (over the network, before anything of the job ran)"}
    if bad.kind == "timeout":
        phases = {o.rank: o.phase for o in outcomes if o.kind == "timeout" and o.phase}
        one = len(set(phases.values())) == 1 and len(phases) > 1
        where = next(iter(phases.values())) if one else ", ".join(f"rank {r}: {p}" for r, p in sorted(phases.items()))
        why = "a hang or deadlock, or more than --timeout allows at this size"
        return {
            "status": "timeout",
            "message": f"killed after {timeout_s:g} s{f' while {where}' if where else ''} ({why})",
        }
    return {"status": "crashed", "message": f"{_where(control, bad.rank)}: {bad.message}"}


def run_launched(control: Control, job: Job, timeout_s: float) -> tuple[dict[str, Any], str | None]:
    """Rank 0: one job on every rank of the launch, as run_job's result (a failure is a record, not an error), and
    why the launched job cannot go on where it lost a rank meanwhile (None otherwise): that failure is the job's
    record, and the caller ends the job once it is written."""
    base = {k: getattr(job, k) for k in ("problem", "shape", "params", "impl", "world_size")}
    try:
        control.announce({"job": dataclasses.asdict(job), "timeout_s": timeout_s})
        outcomes, value = control.run(_job, (job,), backend=job.backend, timeout_s=timeout_s)
    except LostError as e:
        return base | {"status": "crashed", "message": str(e)}, str(e)
    return base | _record(control, outcomes, value, timeout_s), None


def follow(control: Control) -> None:
    """A rank other than 0: run each job rank 0 announces until it says the end, answering its questions (the
    files it will run, as this node has them); a lost job is JobLostError."""
    try:
        while (said := control.next_job()) is not None:
            if "ask" in said:
                control.answer(_differences(said["ask"]["files"]))
                continue
            job = Job(**said["job"])
            control.run(_job, (job,), backend=job.backend, timeout_s=said["timeout_s"])
    except LostError as e:
        raise JobLostError(str(e)) from None


def file_hashes(paths: list[str]) -> dict[str, str]:
    """Each file's SHA-256 here ('' where it cannot be read)."""
    out = {}
    for path in paths:
        try:
            out[path] = hashlib.sha256(Path(path).read_bytes()).hexdigest()
        except OSError:
            out[path] = ""
    return out


def _differences(expected: dict[str, str]) -> list[str]:
    """The files rank 0 will run that this node has not, or has with other bytes: one line each."""
    here = file_hashes(list(expected))
    missing = [f"{p}: not on this node" for p, h in here.items() if not h]
    return missing + [f"{p}: other bytes than rank 0's" for p, h in here.items() if h and h != expected[p]]


def check_files(control: Control, paths: list[str]) -> None:
    """Rank 0: every node has the problem and implementation files it will run, with rank 0's bytes (a shared
    file system); a ValueError of one line naming the first rank and file that differ otherwise."""
    if not paths:
        return
    try:
        answers = control.ask({"files": file_hashes(paths)})
    except LostError as e:
        raise JobLostError(str(e)) from None
    for rank, lines in enumerate(answers, 1):
        if lines:
            more = f" (and {len(lines) - 1} more)" if len(lines) > 1 else ""
            raise ValueError(f"rank {rank}{control.where(rank)}: {lines[0]}{more}: every node runs the same files")
