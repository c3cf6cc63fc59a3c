"""One rank of a job that torchrun or srun launched, across nodes: find out which, and run jobs in step with the
other ranks through the launch's store.

Each launched process is one rank and stays up for the whole job (the control): it joins the launch's TCP store,
sends a heartbeat there, and runs each job's part for its rank in a child of its own (a guard and its worker, as
`run_ranks` starts them locally) that joins a fresh process group of all ranks through the same store. A child
that crashes, hangs or is wrong is one rank's outcome, said to every rank through the store, which then stops its
own child: one recorded failure everywhere, and the job goes on. A control that disappears (killed, or its node
lost) stops sending heartbeats: the others see it within `lost_s`, global rank 0 says why, and every rank ends
with a non-zero exit, its child stopped first, so the launcher (torchrun's agents, srun) ends the job everywhere.

Store keys (under pkroof/profile/<run id>/): hello/R (what rank R's node has), beat/R (a counter), job/N (rank 0:
what the N-th job is, a question, or the end), answer/N/R, out/N/R (rank R's outcome of job N), out/N/failed (a
failure of job N, the one key the others watch), bye/R (rank R read the end or an abort), abort (any rank: why the
job ends).
"""

from __future__ import annotations

import contextlib
import json
import os
import pickle
import socket
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from .launch import (
    CAUSE_GRACE_S,
    STARTUP_S,
    RankFailedError,
    _failed,
    _phases,
    _ready,
    serve_rank,
    start_ranks,
    stop_ranks,
    stopped_by_signals,
)
from .process_tree import TEMP_PREFIX, reap_stale_folders

BEAT_S = 0.5  # how often a control says it is alive, and how often it looks at the others'
POLL_S = 0.05


class LostError(RuntimeError):
    """The job cannot go on: a rank's control is gone, the store is gone, or another rank said so (abort)."""


@dataclass(frozen=True)
class Launch:
    """Where this process sits in a launched job, from its launcher's variables."""

    rank: int
    world: int
    local_rank: int
    node: str  # the node's index as the launcher numbers it (torchrun's GROUP_RANK, SLURM_NODEID), else its host
    addr: str  # the store: MASTER_ADDR:MASTER_PORT
    port: int
    launcher: str  # "torchrun", "srun", or "env" (RANK/WORLD_SIZE/... set by hand)
    run_id: str  # one job's keys apart from another's on a shared store
    agent_store: bool  # torchrun's agent serves the store; otherwise global rank 0 does

    @property
    def prefix(self) -> str:
        return f"pkroof/profile/{self.run_id}/"


def _int(env: dict[str, str], name: str) -> int:
    try:
        return int(env[name])
    except ValueError:
        raise ValueError(f"{name}={env[name]!r} is not a whole number (set by the launcher)") from None


def _store_address(env: dict[str, str], launcher: str) -> tuple[str, int]:
    missing = [k for k in ("MASTER_ADDR", "MASTER_PORT") if not env.get(k)]
    if missing:
        how = (
            "export them in the batch script (docs/profile.md's sbatch example: the first node's host name and a "
            "free port)"
            if launcher == "srun"
            else "torchrun sets them; set them by hand when setting RANK and WORLD_SIZE yourself"
        )
        how = how.replace("them", "it") if len(missing) == 1 else how
        raise ValueError(f"a launched pkroof profile needs {' and '.join(missing)}: {how}")
    return env["MASTER_ADDR"], _int(env, "MASTER_PORT")


def launched(environ: dict[str, str] | None = None) -> Launch | None:
    """This process's place in a torchrun or srun job of two or more ranks; None where nothing launched it (or a
    job of one rank: pkroof then starts its own ranks as usual). A variable that does not parse is a ValueError."""
    env = dict(os.environ if environ is None else environ)
    if all(k in env for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK")):
        launcher = "torchrun" if "TORCHELASTIC_RUN_ID" in env else "env"
        rank, world, local = _int(env, "RANK"), _int(env, "WORLD_SIZE"), _int(env, "LOCAL_RANK")
        node = env.get("GROUP_RANK") or socket.gethostname()
        run = f"{env.get('TORCHELASTIC_RUN_ID', 'env')}.{env.get('TORCHELASTIC_RESTART_COUNT', '0')}"
        agent = env.get("TORCHELASTIC_USE_AGENT_STORE", "").lower() == "true"
    elif "SLURM_STEP_ID" in env and "SLURM_PROCID" in env:  # a task of an srun step (a batch script itself has none)
        launcher = "srun"
        rank, local = _int(env, "SLURM_PROCID"), _int(env, "SLURM_LOCALID") if "SLURM_LOCALID" in env else 0
        world = _int(env, "SLURM_STEP_NUM_TASKS" if "SLURM_STEP_NUM_TASKS" in env else "SLURM_NTASKS")
        node = env.get("SLURM_NODEID") or socket.gethostname()
        run, agent = f"slurm.{env.get('SLURM_JOB_ID', '0')}.{env['SLURM_STEP_ID']}", False
    else:
        return None
    if world < 2:
        return None
    if not 0 <= rank < world:
        raise ValueError(f"rank {rank} is outside a job of {world} ranks (the launcher's variables disagree)")
    addr, port = _store_address(env, launcher)
    return Launch(rank, world, local, node, addr, port, launcher, run, agent)


@dataclass
class Outcome:
    """One rank's end of one job: "ok", "failed" (raised, exited or killed), "timeout", "startup" (its process group
    never formed), or "stopped" (another rank failed first)."""

    rank: int
    kind: str
    message: str = ""
    details: str = ""
    exitcode: int | None = None
    phase: str = ""
    order: int = 0  # when its control first saw it, among the job's outcomes
    raised_ns: int = 0  # when the rank wrote its error (its clock: nodes' clocks agree to NTP's milliseconds)


PRIORITY = {"failed": 0, "timeout": 1, "startup": 2, "stopped": 3}
# what a rank raises when a peer died or raised first: gloo's and NCCL's words for a broken connection
ECHOES = ("connection reset by peer", "connection closed by peer", "broken pipe", "remote process exited",
          "communicator was aborted", "socket closed", "read error", "connection refused")  # fmt: skip


def echo(outcome: Outcome) -> bool:
    """Whether a failure reads as the symptom of a peer's (the connection to it broke), not a cause of its own."""
    return outcome.kind == "failed" and any(e in outcome.message.lower() for e in ECHOES)


def first_failure(outcomes: list[Outcome]) -> Outcome | None:
    """The outcome to record where ranks failed: a rank that died without saying why (a signal, os._exit) first,
    since its peers then raise on the broken connection and would hide it; then the first to raise a cause of its
    own (a broken connection is a peer's symptom), by when it raised; then a hang; a rank stopped last."""
    bad = [o for o in outcomes if o.kind != "ok"]
    if not bad:
        return None

    def key(o: Outcome) -> tuple:
        raised = bool(o.message) and o.kind == "failed"
        return (PRIORITY[o.kind], raised, echo(o), o.raised_ns or o.order, o.order, o.rank)

    return min(bad, key=key)


def _child_main(
    _: int, __: int, fn: Callable, args: tuple, launch: Launch, job: int, folder: str, backend: str, startup_s: float
) -> None:
    """A job's part for this rank: a fresh process group of every rank through the launch's store, then fn. Its GPU
    is its local rank's, or the one GPU it sees (srun --gpus-per-task=1 binds each task to one)."""
    import torch
    import torch.distributed as dist

    device = launch.local_rank if backend != "nccl" or torch.cuda.device_count() > launch.local_rank else 0

    def store() -> Any:
        client = dist.TCPStore(launch.addr, launch.port, is_master=False, timeout=timedelta(seconds=startup_s))
        return dist.PrefixStore(f"{launch.prefix}pg/{job}/", client)

    serve_rank(launch.rank, launch.world, fn, args, backend, folder, device=device, store=store, slot=0)


class Control:
    """This rank's seat in the launched job: the store, the heartbeats, and each job run in step."""

    def __init__(self, launch: Launch, store: Any, lost_s: float) -> None:
        self.launch, self.store, self.lost_s = launch, store, lost_s
        self.jobs = 0
        self._stop = threading.Event()
        self._seen: dict[int, tuple[int, float]] = {}  # rank → (its last counter, when it last changed here)
        self._looked = 0.0  # when check() last read the heartbeats
        self._order = 0  # the current job's order number, once this rank's failure was seen
        self._parent = os.getppid()  # the launcher's process here (torchrun's agent, slurmstepd)
        self._beat = threading.Thread(target=self._beats, daemon=True)

    @classmethod
    def join(cls, launch: Launch, hello: dict[str, Any], *, lost_s: float, startup_s: float) -> Control:
        """Connect to the launch's store (global rank 0 serves it where torchrun's agent does not) and say hello."""
        import torch.distributed as dist

        serve = launch.rank == 0 and not launch.agent_store
        try:
            client = dist.TCPStore(
                launch.addr, launch.port, is_master=serve, timeout=timedelta(seconds=startup_s), wait_for_workers=False
            )
        except (RuntimeError, OSError) as e:
            first = (str(e).strip().splitlines() or [""])[0][:200]
            raise ValueError(f"cannot reach the launch's store at {launch.addr}:{launch.port} ({first})") from None
        control = cls(launch, dist.PrefixStore(launch.prefix, client), lost_s)
        control._set(f"hello/{launch.rank}", hello | {"host": socket.gethostname(), "node": launch.node})
        control._beat.start()
        return control

    # --- the store, every failure of it one LostError ------------------------------------------------------------
    def _call(self, op: str, *args: Any) -> Any:
        try:
            return getattr(self.store, op)(*args)
        except (RuntimeError, OSError) as e:  # torch's DistNetworkError and DistStoreError are RuntimeErrors
            raise LostError(f"the launch's store is gone ({type(e).__name__}); rank 0's node may be lost") from None

    def _set(self, key: str, value: Any) -> None:
        self._call("set", key, json.dumps(value))

    def _get(self, key: str) -> Any:
        return json.loads(self._call("get", key))

    def _has(self, key: str) -> bool:
        return bool(self._call("check", [key]))

    def _add(self, key: str, amount: int) -> int:
        return int(self._call("add", key, amount))

    def _beats(self) -> None:
        while not self._stop.wait(BEAT_S):
            try:
                self.store.add(f"beat/{self.launch.rank}", 1)
            except (RuntimeError, OSError):
                return  # the store is gone: the main thread finds out on its next call

    def close(self) -> None:
        """Stop the heartbeat and wait for it (a thread left inside a store call at exit can abort the process)."""
        self._stop.set()
        if self._beat.is_alive():
            self._beat.join(timeout=5)

    # --- who is still there -----------------------------------------------------------------------------------
    def _watched(self) -> list[int]:
        """Rank 0 watches every rank; the others watch rank 0, which watches for them."""
        return [r for r in range(self.launch.world) if r != self.launch.rank] if self.launch.rank == 0 else [0]

    def check(self) -> None:
        """Raise LostError where the job cannot go on: an abort was said, or a watched rank's heartbeat stopped for
        `lost_s` (rank 0 then says the abort for everyone)."""
        if self._has("abort"):
            why = str(self._get("abort"))
            with contextlib.suppress(LostError):
                self._set(f"bye/{self.launch.rank}", True)  # read: rank 0, which may serve the store, can leave
            raise LostError(why)
        now = time.monotonic()
        if now - self._looked < BEAT_S:
            return
        self._looked = now
        silent: dict[int, float] = {}  # rank → since when it has been silent, for those past lost_s
        for r in self._watched():
            count = self._add(f"beat/{r}", 0)
            last = self._seen.get(r)
            if not count:  # not started yet (its node still importing): joining has its own limit (hellos)
                continue
            if last is None or last[0] != count:
                self._seen[r] = (count, now)
            elif now - last[1] > self.lost_s:
                silent[r] = last[1]
        if self.launch.launcher != "env" and os.getppid() != self._parent:  # torchrun's agent or srun's step died
            me = self.launch.rank
            why = f"rank {me}{self.where(me)}: its {self.launch.launcher} (process {self._parent}) is gone"
            self.abort(why)
            raise LostError(why)
        if silent:  # those silent within one look of each other all went (a node's agent stops its other ranks)
            first = min(silent.values())
            gone = sorted(r for r, since in silent.items() if since - first <= BEAT_S)
            who = f"rank {gone[0]}{self.where(gone[0])} is" if len(gone) == 1 else self._ranks(gone) + " are"
            why = f"{who} gone: no heartbeat for {self.lost_s:g} s (killed, or its node lost)"
            if self.launch.rank == 0:
                self.abort(why)
            raise LostError(why)

    def _ranks(self, ranks: list[int]) -> str:
        """'ranks 2, 3 (node 1, gpu-b07)' where they share a node, else each with its own."""
        places = {self.where(r) for r in ranks}
        if len(places) == 1:
            return f"ranks {', '.join(map(str, ranks))}{places.pop()}"
        return "ranks " + ", ".join(f"{r}{self.where(r)}" for r in ranks)

    def where(self, rank: int) -> str:
        """' (node 1, gpu-b07)' for a rank that said hello, else ''."""
        try:
            hello = self._get(f"hello/{rank}") if self._has(f"hello/{rank}") else {}
        except LostError:
            hello = {}
        return f" (node {hello['node']}, {hello['host']})" if "host" in hello else ""

    def abort(self, why: str) -> None:
        """Say to every rank that the job ends, and why (best effort: the store may be gone)."""
        with contextlib.suppress(LostError):
            self._set("abort", why)

    def _wait_for(self, key: str, deadline_s: float | None = None) -> Any:
        start = time.monotonic()
        while not self._has(key):
            self.check()
            if deadline_s is not None and time.monotonic() - start > deadline_s:
                raise LostError(f"{key} did not come in {deadline_s:g} s")
            time.sleep(POLL_S)
        return self._get(key)

    def hellos(self, startup_s: float) -> list[dict[str, Any]]:
        """Every rank's hello, in rank order (rank 0, once each rank has joined); a rank that does not join within
        `startup_s` ends the job (rank 0 says so to the others)."""
        start, said = time.monotonic(), []
        for r in range(self.launch.world):
            try:
                said.append(self._wait_for(f"hello/{r}", max(0.0, startup_s - (time.monotonic() - start))))
            except LostError as e:
                if not str(e).startswith("hello/"):
                    raise
                why = f"rank {r} did not join the launch in {startup_s:g} s (did its pkroof start? see its node's log)"
                self.abort(why)
                raise LostError(why) from None
        return said

    # --- the jobs ---------------------------------------------------------------------------------------------
    def announce(self, what: dict[str, Any] | None) -> None:
        """Rank 0: the next job (its description, JSON), or None: no more jobs."""
        self._set(f"job/{self.jobs}", {"end": True} if what is None else {"job": what})

    def next_job(self) -> dict[str, Any] | None:
        """A rank other than 0: the next job rank 0 announced, or None at the end (said back: rank 0 may serve the
        store, and waits for every rank to have read it before it leaves). A question (ask) is answered first."""
        said = self._wait_for(f"job/{self.jobs}")
        if said.get("end"):
            self._set(f"bye/{self.launch.rank}", True)
            return None
        if "ask" in said:
            return {"ask": said["ask"]}
        return said["job"]

    def ask(self, question: dict[str, Any]) -> list[Any]:
        """Rank 0: a question every other rank answers (answer()), their answers in rank order."""
        n, self.jobs = self.jobs, self.jobs + 1
        self._set(f"job/{n}", {"ask": question})
        return [self._wait_for(f"answer/{n}/{r}") for r in range(1, self.launch.world)]

    def answer(self, value: Any) -> None:
        """A rank other than 0: its answer to the question next_job() returned."""
        n, self.jobs = self.jobs, self.jobs + 1
        self._set(f"answer/{n}/{self.launch.rank}", value)

    def finish(self, wait_s: float = 60.0) -> None:
        """Rank 0: no more jobs; return once every other rank has read so (or `wait_s` passed, or a rank is gone)."""
        self.announce(None)
        self.linger(wait_s)

    def linger(self, wait_s: float) -> None:
        """Rank 0, after the end or an abort: wait until every other rank has said it read it (bye), `wait_s` at
        most: under srun rank 0 serves the store, and leaving first would make the others read a lost store."""
        start = time.monotonic()
        for r in range(1, self.launch.world):
            while time.monotonic() - start < wait_s:
                try:
                    if self._has(f"bye/{r}"):
                        break
                except LostError:
                    return
                time.sleep(POLL_S)

    def run(
        self, fn: Callable, args: tuple, *, backend: str, timeout_s: float, startup_s: float = STARTUP_S
    ) -> tuple[list[Outcome], Any]:
        """This rank's part of the current job in a child; every rank's outcome (rank 0 waits for them all; the
        others return with their own alone) and this rank's return value (None unless "ok")."""
        job = self.jobs
        self.jobs += 1
        self._order = 0
        reap_stale_folders()
        with tempfile.TemporaryDirectory(prefix=f"{TEMP_PREFIX}{os.getpid()}-launched-") as folder:
            with stopped_by_signals():
                procs = start_ranks(
                    _child_main, 1, (fn, args, self.launch, job, folder, backend, startup_s), loopback=False
                )
                try:
                    mine = self._watch_child(procs, Path(folder), job, timeout_s, startup_s)
                finally:
                    stop_ranks(procs)
            value = pickle.loads(Path(folder, "0.pickle").read_bytes()) if mine.kind == "ok" else None
        mine.order = self._order or self._add(f"out/{job}/order", 1)
        self._set(f"out/{job}/{self.launch.rank}", mine.__dict__)
        if mine.kind not in ("ok", "stopped"):  # one key every rank watches, however many ranks there are
            self._set(f"out/{job}/failed", mine.__dict__)
        if self.launch.rank != 0:
            return [mine], value
        return [Outcome(**self._wait_for(f"out/{job}/{r}")) for r in range(self.launch.world)], value

    def _others_failed(self, job: int) -> Outcome | None:
        """Another rank's failure of this job, once one has said it (out/JOB/failed: the latest to fail)."""
        if not self._has(f"out/{job}/failed"):
            return None
        said = Outcome(**self._get(f"out/{job}/failed"))
        return said if said.rank != self.launch.rank else None

    def _watch_child(self, procs: list, folder: Path, job: int, timeout_s: float, startup_s: float) -> Outcome:
        """Wait for this rank's child while watching the others: its own outcome, or "stopped" where another rank
        failed first. A child that raised waits a moment for a peer's crash that may have caused it."""
        rank, start, ready_at, raised_at = self.launch.rank, time.monotonic(), None, None
        while True:
            self.check()
            failure = _failed(procs, folder)
            if failure is not None and not procs[0].is_alive():
                self._order = self._order or self._add(f"out/{job}/order", 1)  # seen now, posted after the grace
                if failure.message and failure.exitcode is not None and failure.exitcode > 0:
                    raised_at = raised_at or time.monotonic()
                    if self._others_failed(job) is None and time.monotonic() - raised_at < CAUSE_GRACE_S:
                        time.sleep(POLL_S)
                        continue
                return _failed_outcome(rank, failure, folder)
            if not procs[0].is_alive():
                return Outcome(rank, "ok")
            other = self._others_failed(job)
            if other is not None:
                return Outcome(rank, "stopped", f"stopped: rank {other.rank} {other.kind} first")
            if ready_at is None and _ready(folder, 1):
                ready_at = time.monotonic()
            if ready_at is None and time.monotonic() - start > startup_s:
                return Outcome(rank, "startup", f"the ranks did not all join in {startup_s:g} s")
            if ready_at is not None and time.monotonic() - ready_at > timeout_s:
                return Outcome(rank, "timeout", phase=_phases(procs, folder).get(0, ""))
            time.sleep(POLL_S)


def _failed_outcome(rank: int, failure: RankFailedError, folder: Path) -> Outcome:
    error = folder / "0.error"
    raised = error.stat().st_mtime_ns if error.exists() else 0
    return Outcome(rank, "failed", failure.message or failure.how, failure.details, failure.exitcode, raised_ns=raised)
