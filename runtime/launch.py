"""Start N rank processes, wait for them with a deadline, stop them all on any failure: the one launcher.

Ranks come from the standard library's fork server (torch imported once, CUDA never), so the parent never needs
CUDA and a rank starts in a fraction of a second; each is a guard and the worker it forks (runtime/process_tree.py).
`run_ranks` also joins them in a process group (gloo on CPU, NCCL on GPUs) and brings each rank's return value back.
"""

from __future__ import annotations

import multiprocessing
import os
import pickle
import signal
import socket
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from .process_tree import (
    PR_SET_CHILD_SUBREAPER,
    TEMP_PREFIX,
    is_subreaper,
    kill_tree,
    prctl,
    processes,
    rank_guard,
    reap,
    reap_stale_folders,
)

# NVLink multicast (NVLS) stays off unless the user asks pkroof for it: on shared hosts it can take GPUs out of
# service. The only way to ask is `pkroof probe --allow-multicast`, which sets ALLOW_MULTICAST for its own ranks.
SAFE_ENV = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}
ALLOW_MULTICAST = "PKROOF_ALLOW_MULTICAST"


def keep_multicast_off(*, allowed: bool = False) -> None:
    """Set SAFE_ENV in this process (and what it starts) over whatever the environment says: a variable inherited
    from a shell or an image (NCCL_NVLS_ENABLE set to 1) is not a request to pkroof. `allowed` (the probe's ranks under
    --allow-multicast) leaves the variables as they are."""
    if not allowed:
        os.environ.update(SAFE_ENV)


class RankFailedError(RuntimeError):
    """A rank raised, was killed or exited before returning a result; `message` is its last error line when it could
    say one, else "" and `how` says how it ended."""

    def __init__(self, rank: int, exitcode: int | None, message: str = "", details: str = "") -> None:
        self.rank, self.exitcode, self.message, self.details = rank, exitcode, message, details
        super().__init__(f"rank {rank} failed (exit code {exitcode})" + (f": {message}" if message else ""))

    @property
    def how(self) -> str:
        """'was killed by SIGSEGV (code -11)' or 'exited (code 0) before returning a result'."""
        if self.exitcode is not None and self.exitcode < 0:
            try:
                name = signal.Signals(-self.exitcode).name
            except ValueError:
                name = f"signal {-self.exitcode}"
            return f"was killed by {name} (code {self.exitcode})"
        return f"exited (code {self.exitcode}) before returning a result"


class TerminatedError(KeyboardInterrupt):
    """SIGTERM or SIGHUP reached this process while ranks ran; raised as Ctrl-C raises KeyboardInterrupt, so the
    ranks are stopped on the way out rather than left running as orphans."""

    def __init__(self, signum: int) -> None:
        self.signum = signum
        super().__init__(signal.Signals(signum).name)


@contextmanager
def stopped_by_signals() -> Iterator[None]:
    """Turn SIGTERM and SIGHUP into TerminatedError here, where they would kill this process and orphan its ranks.
    A signal already ignored (nohup) or handled stays so; only the main thread may set handlers."""

    def stop(signum: int, frame: object) -> None:
        raise TerminatedError(signum)

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGHUP)}
    for s, handler in before.items():
        if handler is signal.SIG_DFL:
            signal.signal(s, stop)
    try:
        yield
    finally:
        for s, handler in before.items():
            signal.signal(s, handler)


class RankTimeoutError(RuntimeError):
    """The ranks did not finish by the deadline (a hang: the most common multi-GPU bug); they were killed.
    `phases`: what each rank last said it was doing (phase()), where it said anything."""

    def __init__(self, message: str, phases: dict[int, str] | None = None, *, startup: bool = False) -> None:
        self.phases = phases or {}
        self.startup = startup  # the ranks never all joined their process group: nothing of the job ran
        super().__init__(message)

    @property
    def where(self) -> str:
        """'rank 0: timing, rank 1: checking', or the one phase every rank was in; '' when none said."""
        if len(set(self.phases.values())) == 1 and len(self.phases) > 1:
            return next(iter(self.phases.values()))
        return ", ".join(f"rank {r}: {p}" for r, p in sorted(self.phases.items()))


PHASE_FILE = "PKROOF_RANK_PHASE"  # set in each rank: where phase() writes


def phase(text: str) -> None:
    """Say what this rank is doing now (one short line); a timeout reports it. A no-op outside run_ranks."""
    path = os.environ.get(PHASE_FILE)
    if path:
        Path(path).write_text(text)


def _phases(procs: list, folder: Path | None) -> dict[int, str]:
    if folder is None:
        return {}
    files = {rank: folder / f"{rank}.phase" for rank in range(len(procs))}
    return {rank: f.read_text() for rank, f in files.items() if f.exists()}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


LOOPBACK_ENV = {"GLOO_SOCKET_IFNAME": "lo", "NCCL_SOCKET_IFNAME": "lo"}  # one node: gloo's and NCCL's own sockets


class Ranks(list):
    """The guards start_ranks started, with what stop_ranks needs: each one's pipe, and pkroof's children before."""

    def __init__(self, procs: list, pipes: list, before: set[int], subreaper_was: bool) -> None:
        super().__init__(procs)
        self.pipes, self.before, self.subreaper_was = pipes, before, subreaper_was


# Ranks come from multiprocessing's fork server, started once per pkroof process with torch imported: a rank then
# starts in well under a second instead of importing torch again (4-10 s on a busy 2-core machine). The server
# never touches CUDA (importing torch does not), so a rank may; it exits when pkroof does.
# The caller's __main__ is neither preloaded nor re-imported (_main_hidden): a script that calls pkroof without an
# `if __name__ == "__main__":` guard would otherwise run again in every rank.
PRELOAD = ["torch", "torch.distributed", "pkroof.runtime.launch"]
_CONTEXT: list = []


def _context() -> Any:
    if not _CONTEXT:
        ctx = multiprocessing.get_context("forkserver")
        ctx.set_forkserver_preload(PRELOAD)
        _CONTEXT.append(ctx)
    return _CONTEXT[0]


def _server() -> int | None:
    """The fork server's PID, once it runs (a child of pkroof that is not a rank's)."""
    from multiprocessing import forkserver

    return getattr(forkserver._forkserver, "_forkserver_pid", None)


@contextmanager
def _main_hidden() -> Iterator[None]:
    """The caller's main module unnamed while ranks start: multiprocessing's start-up (spawn.get_preparation_data)
    would otherwise have each new process import it again by its path or module name, running a script's top level
    (its pkroof calls included) in every rank. A rank's target and arguments come from pkroof's own modules."""
    main = sys.modules.get("__main__")
    saved = {k: main.__dict__[k] for k in ("__file__", "__spec__") if main is not None and k in main.__dict__}
    try:
        if main is not None:
            main.__dict__.pop("__file__", None)
            main.__dict__["__spec__"] = None
        yield
    finally:
        if main is not None:
            main.__dict__.pop("__spec__", None)
            main.__dict__.update(saved)


def start_ranks(target: Callable[..., None], world: int, args: tuple, *, loopback: bool = True) -> Ranks:
    """target(rank, world, *args) in `world` processes (each a guard and its worker, above). `loopback` (one node):
    gloo's and NCCL's sockets on the loopback interface where the user set none."""
    ctx = _context()
    before = {p for p, (ppid, _, _) in processes().items() if ppid == os.getpid()}
    subreaper_was = is_subreaper()
    prctl(PR_SET_CHILD_SUBREAPER, 1)
    env = dict(os.environ) | {k: v for k, v in LOOPBACK_ENV.items() if loopback and k not in os.environ}
    procs, pipes = [], []
    for rank in range(world):
        reader, writer = ctx.Pipe(duplex=False)
        payload = pickle.dumps((target, (rank, world, *args)))
        guard_args = (payload, reader, env, os.getcwd(), list(sys.path))
        procs.append(ctx.Process(target=rank_guard, args=guard_args, daemon=True))
        pipes.append((reader, writer))
    ranks = Ranks(procs, pipes, before, subreaper_was)
    try:
        with _main_hidden():
            for p, (reader, _) in zip(procs, pipes, strict=True):
                p.start()
                reader.close()
    except BaseException:
        stop_ranks(ranks)
        raise
    return ranks


def stop_ranks(procs: list) -> None:
    """Stop every rank and everything it started; every process is gone when this returns."""
    pipes = getattr(procs, "pipes", [])
    for _, writer in pipes:  # end of file: each guard kills its tree and leaves
        writer.close()
    for p in procs:  # one without a pid never started (start_ranks failed before it): nothing to stop
        if p.pid is not None and p.is_alive() and not pipes:
            p.terminate()
    for p in procs:
        if p.pid is not None:
            p.join(5)
    started = [p.pid for p in procs if p.pid is not None]
    # a guard that did not leave (stopped, stuck), or one killed before it could stop its tree: its process group
    # and whatever is still below it, from here
    kill_tree(set(started), set(started))
    for p in procs:
        if p.pid is None:
            continue
        if p.is_alive():
            p.kill()
        p.join()
    if isinstance(procs, Ranks):
        _sweep_orphans(procs, set(started))


def _sweep_orphans(ranks: Ranks, started: set[int]) -> None:
    """Kill what reparented to pkroof (a child subreaper while ranks ran) since start_ranks, and collect the exit
    status of such children that died (a guard killed by a signal leaves its worker and the worker's children to
    pkroof: they reparent as they die, so /proc is read until two readings in a row find nothing); then drop the
    flag."""
    from multiprocessing import resource_tracker

    known = ranks.before | started | {getattr(resource_tracker._resource_tracker, "_pid", None), _server()}
    mine, quiet = os.getpid(), 0
    while quiet < 2:
        table = processes()
        children = {p for p, (ppid, _, _) in table.items() if ppid == mine and p not in known}
        dead = {p for p in children if table[p][2] == "Z"}
        if children - dead:
            kill_tree(children - dead)
        reap(children)
        quiet = 0 if children else quiet + 1
        time.sleep(0.02)
    if not ranks.subreaper_was:
        prctl(PR_SET_CHILD_SUBREAPER, 0)


def _read_exact(path: Path) -> str:
    """A file's text with its carriage returns kept (read_text would turn them into line breaks)."""
    with path.open(encoding="utf-8", errors="replace", newline="") as f:
        return f.read()


def _failed(procs: list, folder: Path | None) -> RankFailedError | None:
    """The rank that failed first. With `folder` (run_ranks'), a rank that exited, even with code 0, without
    writing its result there failed. A rank that ended without raising (a signal such as the OOM killer's -9, a
    segfault, os._exit) comes first, one killed by a signal before one that exited: its peers then raise on the
    broken connection, and would hide the cause. Among ranks that raised, the first to write its error."""

    def returned(rank: int) -> bool:
        return procs[rank].exitcode == 0 and (folder is None or (folder / f"{rank}.pickle").exists())

    def raised_at(rank: int) -> int | None:  # when the rank wrote its error, ns
        error = folder / f"{rank}.error" if folder is not None else None
        return error.stat().st_mtime_ns if error is not None and error.exists() else None

    failed = [r for r, p in enumerate(procs) if p.exitcode is not None and not returned(r)]
    if not failed:
        return None
    times = {r: raised_at(r) for r in failed}
    rank = min(failed, key=lambda r: (times[r] is not None, procs[r].exitcode >= 0, times[r] or 0, r))
    details = _read_exact(folder / f"{rank}.error").strip() if times[rank] is not None else ""
    return RankFailedError(rank, procs[rank].exitcode, _exception_text(details), details)


def _exception_text(details: str) -> str:
    """The exception a traceback ends with, type and message, its lines joined ("RuntimeError: bad input second
    line"): what follows the last frame and its source lines. A carriage return inside a message is no line break."""
    lines = details.split("\n")
    frames = [i for i, line in enumerate(lines) if line.startswith("  File ")]
    start = frames[-1] + 1 if frames else int(bool(lines) and lines[0].startswith("Traceback"))
    while start < len(lines) and lines[start].startswith("    "):  # the frame's source line and its ^^^ marks
        start += 1
    text = " ".join(line.strip() for line in lines[start:] if line.strip())
    return text or (lines[-1] if lines else "")


STARTUP_S = 180.0  # spawning the ranks and joining their process group: not the implementation's time
CAUSE_GRACE_S = 2.0  # after a rank raised, how long its peers may take to end before it is blamed


def _ready(folder: Path, world: int) -> bool:
    return all((folder / f"{rank}.ready").exists() for rank in range(world))


def wait_ranks(procs: list, deadline_s: float, folder: Path | None = None, startup_s: float | None = None) -> None:
    """Return when every rank exited 0 (and, with `folder`, wrote its result there); raise RankFailedError or
    RankTimeoutError otherwise (the caller stops them). With `startup_s` (run_ranks: each rank writes RANK.ready in
    `folder` once in the process group) the deadline starts when every rank is ready; start-up has its own limit."""
    start = time.monotonic()
    started = startup_s is None or folder is None
    seen: float | None = None  # when a rank was first seen to have raised
    while any(p.is_alive() for p in procs):
        failure = _failed(procs, folder)
        if failure and (failure.exitcode is None or failure.exitcode < 0 or not failure.message):
            raise failure
        if failure:  # it raised: a peer killed by a signal (its guard still stopping its tree) may be the cause
            seen = seen or time.monotonic()
            if time.monotonic() - seen > CAUSE_GRACE_S:
                raise failure
        if not started:
            if _ready(folder, len(procs)):
                started, start = True, time.monotonic()
            elif time.monotonic() - start > startup_s:
                raise RankTimeoutError(
                    f"the ranks did not start in {startup_s:g} s (spawning them and joining their process group, "
                    "before anything of the job ran: is this machine overloaded?) and were stopped",
                    startup=True,
                )
        elif time.monotonic() - start > deadline_s:
            raise RankTimeoutError(
                f"the ranks did not finish in {deadline_s:g} s and were stopped", _phases(procs, folder)
            )
        time.sleep(0.05)
    failure = _failed(procs, folder)
    if failure:
        raise failure


def _rank_main(rank: int, world: int, fn: Callable, args: tuple, backend: str, folder: str) -> None:
    """One rank of run_ranks: join the process group through a FileStore in `folder` (one node: no listening socket
    for the rendezvous; torch's TCPStore binds every interface whatever address it is given), then serve_rank."""
    serve_rank(rank, world, fn, args, backend, folder, device=rank)


def serve_rank(
    rank: int,
    world: int,
    fn: Callable,
    args: tuple,
    backend: str,
    folder: str,
    *,
    device: int,
    store: Callable[[], Any] | None = None,
    slot: int | None = None,
) -> None:
    """Join the process group (CUDA device `device` under NCCL; through `store()` where given, else a FileStore in
    `folder`), say it is ready, run fn(rank, world, *args), write its result in `folder` as SLOT.pickle (`slot`:
    default the rank), and leave. An exception is written there as SLOT.error for the parent (its last line is the
    message) and the process exits 1."""
    keep_multicast_off()
    slot = rank if slot is None else slot
    os.environ[PHASE_FILE] = str(Path(folder, f"{slot}.phase"))
    try:
        import torch
        import torch.distributed as dist

        where = {"store": store()} if store is not None else {"init_method": f"file://{Path(folder, 'store')}"}
        if backend == "nccl":
            torch.cuda.set_device(device)
            dist.init_process_group(
                "nccl", rank=rank, world_size=world, device_id=torch.device("cuda", device), **where
            )
        else:
            dist.init_process_group("gloo", rank=rank, world_size=world, **where)
        Path(folder, f"{slot}.ready").write_text("")
        result = fn(rank, world, *args)
        Path(folder, f"{slot}.pickle").write_bytes(pickle.dumps(result))
        dist.barrier()
    except BaseException:  # the parent reports the last line and keeps the whole traceback
        Path(folder, f"{slot}.error").write_text(traceback.format_exc())
        os._exit(1)
    os._exit(0)  # process-group teardown can hang after NCCL work; nothing is left to flush


PORT_TRIES = 3  # the probe's ranks rendezvous over TCP (topology/probe.py)
PORT_TAKEN_EXIT = 75  # a rank whose rendezvous port was taken exits with this (EX_TEMPFAIL): start again elsewhere


def run_ranks(
    fn: Callable,
    world: int,
    args: tuple = (),
    *,
    backend: str = "gloo",
    timeout_s: float = 120,
    startup_s: float = STARTUP_S,
) -> list:
    """fn(rank, world, *args) on `world` ranks of this node in one process group; their return values, in rank
    order. `timeout_s` counts from the moment every rank is in the process group; start-up has `startup_s`.

    The folder the ranks share carries this process's PID in its name: one left by a pkroof killed with SIGKILL
    is removed at the next start."""
    reap_stale_folders()
    with tempfile.TemporaryDirectory(prefix=f"{TEMP_PREFIX}{os.getpid()}-") as folder, stopped_by_signals():
        procs = start_ranks(_rank_main, world, (fn, args, backend, folder))
        try:
            wait_ranks(procs, timeout_s, Path(folder), startup_s=startup_s)
        finally:
            stop_ranks(procs)
        return [pickle.loads(Path(folder, f"{r}.pickle").read_bytes()) for r in range(world)]
