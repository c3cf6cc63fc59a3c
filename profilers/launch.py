"""Start N rank processes, wait for them with a deadline, stop them all on any failure: the one launcher.

Ranks are processes of the standard library's spawn context, so the parent never needs CUDA. `run_ranks` also
joins them in a process group (gloo on CPU, NCCL on GPUs) and brings each rank's return value back.
"""

from __future__ import annotations

import multiprocessing
import os
import pickle
import socket
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path

# NVLink multicast (NVLS) stays off unless the user asks pkroof for it: on shared hosts it can take GPUs out of
# service. The only way to ask is `pkroof probe --allow-multicast`, which sets ALLOW_MULTICAST for its own ranks.
SAFE_ENV = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}
ALLOW_MULTICAST = "PKROOF_ALLOW_MULTICAST"


def keep_multicast_off(*, allowed: bool = False) -> None:
    """Set SAFE_ENV in this process (and what it starts) over whatever the environment says: a variable inherited
    from a shell or an image (NCCL_NVLS_ENABLE=1) is not a request to pkroof. `allowed` (the probe's ranks under
    --allow-multicast) leaves the variables as they are."""
    if not allowed:
        os.environ.update(SAFE_ENV)


class RankFailedError(RuntimeError):
    """A rank raised or exited non-zero; `message` is its last error line when it could say one."""

    def __init__(self, rank: int, exitcode: int | None, message: str = "", details: str = "") -> None:
        self.rank, self.exitcode, self.message, self.details = rank, exitcode, message, details
        super().__init__(f"rank {rank} failed (exit code {exitcode})" + (f": {message}" if message else ""))


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


def _failed(procs: list, errors: Path | None) -> RankFailedError | None:
    """The first rank that failed, one killed by a signal (the OOM killer's -9) first: its peers then fail too,
    on the broken connection, and would hide the cause."""
    order = sorted(range(len(procs)), key=lambda r: (procs[r].exitcode or 0) >= 0)
    for rank in order:
        p = procs[rank]
        if p.exitcode not in (None, 0):
            details = ""
            if errors is not None and (errors / f"{rank}.error").exists():
                details = (errors / f"{rank}.error").read_text().strip()
            return RankFailedError(rank, p.exitcode, details.splitlines()[-1] if details else "", details)
    return None


def wait_ranks(procs: list, deadline_s: float, errors: Path | None = None) -> None:
    """Return when every rank exited 0; raise RankFailedError or RankTimeoutError otherwise (the caller stops them)."""
    start = time.monotonic()
    while any(p.is_alive() for p in procs):
        failure = _failed(procs, errors)
        if failure:
            raise failure
        if time.monotonic() - start > deadline_s:
            raise RankTimeoutError(
                f"the ranks did not finish in {deadline_s:g} s and were stopped", _phases(procs, errors)
            )
        time.sleep(0.05)
    failure = _failed(procs, errors)
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
        with tempfile.TemporaryDirectory(prefix="pkroof-ranks-") as folder:
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
