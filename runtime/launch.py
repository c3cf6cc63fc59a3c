"""Start N rank processes, wait for them with a deadline, stop them all on any failure: the one launcher.

Ranks are processes of the standard library's spawn context, so the parent never needs CUDA. `run_ranks` also
joins them in a process group (gloo on CPU, NCCL on GPUs) and brings each rank's return value back.
"""

from __future__ import annotations

import multiprocessing
import os
import pickle
import signal
import socket
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

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

    def __init__(self, message: str, phases: dict[int, str] | None = None) -> None:
        self.phases = phases or {}
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


def start_ranks(target: Callable[..., None], world: int, args: tuple) -> list:
    """target(rank, world, *args) in `world` spawned processes."""
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=target, args=(rank, world, *args), daemon=True) for rank in range(world)]
    for p in procs:
        p.start()
    return procs


def stop_ranks(procs: list) -> None:
    for p in procs:
        if p.is_alive():
            p.terminate()
    for p in procs:
        p.join(5)
        if p.is_alive():
            p.kill()
            p.join()


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
    details = (folder / f"{rank}.error").read_text().strip() if times[rank] is not None else ""
    return RankFailedError(rank, procs[rank].exitcode, details.splitlines()[-1] if details else "", details)


def wait_ranks(procs: list, deadline_s: float, folder: Path | None = None) -> None:
    """Return when every rank exited 0 (and, with `folder`, wrote its result there); raise RankFailedError or
    RankTimeoutError otherwise (the caller stops them)."""
    start = time.monotonic()
    while any(p.is_alive() for p in procs):
        failure = _failed(procs, folder)
        if failure:
            raise failure
        if time.monotonic() - start > deadline_s:
            raise RankTimeoutError(
                f"the ranks did not finish in {deadline_s:g} s and were stopped", _phases(procs, folder)
            )
        time.sleep(0.05)
    failure = _failed(procs, folder)
    if failure:
        raise failure


def _rank_main(rank: int, world: int, fn: Callable, args: tuple, backend: str, port: int, folder: str) -> None:
    keep_multicast_off()
    os.environ[PHASE_FILE] = str(Path(folder, f"{rank}.phase"))
    import torch
    import torch.distributed as dist

    try:
        if backend == "nccl":
            torch.cuda.set_device(rank)
            dist.init_process_group(
                "nccl",
                init_method=f"tcp://127.0.0.1:{port}",
                rank=rank,
                world_size=world,
                device_id=torch.device("cuda", rank),
            )
        else:
            dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
        result = fn(rank, world, *args)
        Path(folder, f"{rank}.pickle").write_bytes(pickle.dumps(result))
        dist.barrier()
    except BaseException:  # the parent reports the last line and keeps the whole traceback
        Path(folder, f"{rank}.error").write_text(traceback.format_exc())
        os._exit(1)
    os._exit(0)  # process-group teardown can hang after NCCL work; nothing is left to flush


PORT_TRIES = 3
PORT_TAKEN_EXIT = 75  # a rank whose rendezvous port was taken exits with this (EX_TEMPFAIL): start again elsewhere


def run_ranks(fn: Callable, world: int, args: tuple = (), *, backend: str = "gloo", timeout_s: float = 120) -> list:
    """fn(rank, world, *args) on `world` ranks in one process group; their return values, in rank order.

    The rendezvous port is free when picked but can be taken before rank 0 listens on it (seen once on the
    2xH200 node: EADDRINUSE, and the job was recorded as crashed); then the ranks start again on another port,
    up to PORT_TRIES times. Nothing of fn has run by then: rank 0 fails while creating the process group."""
    for attempt in range(PORT_TRIES):
        with tempfile.TemporaryDirectory(prefix="pkroof-ranks-") as folder, stopped_by_signals():
            procs = start_ranks(_rank_main, world, (fn, args, backend, free_port(), folder))
            try:
                wait_ranks(procs, timeout_s, Path(folder))
            except RankFailedError as e:
                if _port_taken(e) and attempt + 1 < PORT_TRIES:
                    continue
                raise
            finally:
                stop_ranks(procs)
            return [pickle.loads(Path(folder, f"{r}.pickle").read_bytes()) for r in range(world)]
    raise AssertionError("unreachable: the last attempt returns or raises")


def _port_taken(e: RankFailedError) -> bool:
    return "DistNetworkError" in e.message and "EADDRINUSE" in e.message
