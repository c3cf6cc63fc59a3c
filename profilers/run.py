"""`pkroof profile`: check each implementation against the reference on fresh inputs, time the correct ones.

One set of ranks per (problem, implementation): a hang is killed at the timeout, a crash is recorded with its
message, and the next implementation runs. Ranks are GPUs (NCCL) where there are enough, else CPU processes
over gloo (correctness and orchestration; their times are CPU times and say so).
"""

from __future__ import annotations

import os
import platform
import socket
import statistics
import sys
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from pkroof.analysis.catalogue import load
from pkroof.kernels.declare import reported_comm_sms
from pkroof.runtime.gpu_state import slowest
from pkroof.runtime.launch import RankFailedError, RankTimeoutError, phase, run_ranks

from .checks import check
from .implementations import resolve_impl
from .sampling import ITERS, IncorrectWhileTimedError, Sampler, time_cpu, time_gpu


@dataclass(frozen=True)
class Job:
    """One job: a (problem, shape, implementation) on `world_size` ranks, with the knobs asked for."""

    problem: str  # suite name or file path
    shape: str
    params: dict[str, Any]
    impl: str  # "reference" or "path/to/file.py:function"
    world_size: int
    backend: str  # "nccl" or "gloo"
    seed: int = 0
    extra: dict[str, Any] = field(default_factory=dict)
    dtype: str | None = None  # `--dtype`: the inputs of the problem's own floating dtype cast to this one
    iters: int | None = None  # `--iters`: timed samples (None: ITERS)
    warmup: int | None = None  # `--warmup`: untimed samples first (None: the timing function's own)
    rtol: float | None = None  # `--rtol`, `--atol`: every floating output's tolerance (None: TOLERANCES')
    atol: float | None = None


def _job(rank: int, world: int, job: Job) -> dict[str, Any]:
    """One rank's part: check, then (if every rank is correct) time, checking every timed sample too. Rank 0's dict
    becomes the record."""
    import torch

    sys.stdout.flush()
    os.dup2(2, 1)  # what the problem or implementation prints goes to stderr: stdout is pkroof's table
    device = torch.device("cuda", torch.cuda.current_device()) if job.backend == "nccl" else torch.device("cpu")
    phase("loading the problem and the implementation")
    problem = load(job.problem)
    impl = resolve_impl(problem, job.impl)
    ok, worst, why, used_oracle = check(problem, impl, job, rank, device)
    result: dict[str, Any] = {"status": "correct" if ok else "incorrect", "max_abs_error": worst, "message": why}
    if job.rtol is not None or job.atol is not None:
        result |= {"rtol": job.rtol, "atol": job.atol}
    if used_oracle:  # right only where closer than the reference to its widened rerun: the record says so
        result["judged_by_oracle"] = True
    if not ok:
        return result
    phase("drawing the timed input sets")
    sampler = Sampler(problem, impl, job, rank, device, oracle=used_oracle)
    iters = ITERS if job.iters is None else job.iters
    try:
        if job.backend == "nccl":
            timing = time_gpu(sampler, device, iters, job.warmup)
        else:
            timing = time_cpu(sampler, iters, 2 if job.warmup is None else job.warmup)
    except IncorrectWhileTimedError as e:  # right while checked, wrong while timed: never a time
        return {"status": "incorrect", "max_abs_error": _worse(worst, sampler.worst), "message": str(e)}
    if job.warmup is not None:  # asked for: the record says so (the timer's own default otherwise)
        timing["warmup"] = job.warmup
    result["timing"] = timing
    result["max_abs_error"] = _worse(worst, sampler.worst)
    used = reported_comm_sms(impl)
    if used is not None:  # the implementation chose its communication SMs for this shape
        result["comm_sms_used"] = used
    return result


def _worse(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else max(a, b)


_CALLED = "pkroof.profile()"  # from Python rather than the command line


def _environment(backend: str) -> dict[str, Any]:
    """Where a record was measured. GPU facts come from NVML, so this parent process never opens a CUDA context."""
    env = {
        "host": socket.gethostname(),
        "python": platform.python_version(),
        "backend": backend,
        "command": " ".join(["pkroof", *sys.argv[1:]])
        if sys.argv[1:2] in (["profile"], ["report"])
        else "pkroof.profile()",
    }
    try:
        import torch

        env |= {"torch": torch.__version__, "cuda": torch.version.cuda or "none (a CPU build of torch)"}
        if backend == "nccl":
            env["nccl"] = ".".join(map(str, torch.cuda.nccl.version()))
    except (ImportError, RuntimeError, AttributeError):  # a CPU build has no NCCL to report
        pass
    try:  # pkroof's kernels are Triton: its version is part of what was measured
        from importlib.metadata import version

        env["triton"] = version("triton")
    except ImportError:  # PackageNotFoundError is an ImportError
        pass
    knobs = {k: v for k, v in os.environ.items() if k.startswith("PKROOF_")}  # CTA counts, block size
    if knobs:
        env["settings"] = knobs
    if backend == "nccl":
        from pkroof.runtime.nvml import NA, Device, Nvml

        nvml = Nvml()
        for key, answer in (
            ("driver", nvml.query("nvmlSystemGetDriverVersion")),
            ("gpu", nvml.query("nvmlDeviceGetName", Device(0))),
        ):
            env[key] = "" if isinstance(answer, NA) else str(answer)
    return env


def run_job(job: Job, timeout_s: float) -> dict[str, Any]:
    """Run one job on fresh ranks; a hang or a crash becomes a record, never an exception."""
    base = {
        "problem": job.problem,
        "shape": job.shape,
        "params": job.params,
        "impl": job.impl,
        "world_size": job.world_size,
    }
    try:
        result = run_ranks(_job, job.world_size, (job,), backend=job.backend, timeout_s=timeout_s)[0]
    except RankTimeoutError as e:
        if e.startup:  # the ranks never all joined their process group: nothing of the implementation ran
            return base | {"status": "timeout", "message": str(e)}
        where = f" while {e.where}" if e.where else ""
        why = f"a hang or deadlock{' there' if e.where else ''}, or more than --timeout allows at this size"
        return base | {"status": "timeout", "message": f"killed after {timeout_s:g} s{where} ({why})"}
    except RankFailedError as e:
        return base | {
            "status": "crashed",
            "message": e.message or f"rank {e.rank} {e.how}",
            "traceback": e.details,
        }
    return base | result


def summarise(timing: dict[str, Any]) -> dict[str, float]:
    samples = sorted(timing["samples_s"])
    pick = lambda q: samples[min(len(samples) - 1, round(q * (len(samples) - 1)))]  # noqa: E731
    return {"median_s": statistics.median(samples), "p10_s": pick(0.1), "p90_s": pick(0.9), "min_s": samples[0]}


def finish(record: dict[str, Any], *, backend: str) -> dict[str, Any]:
    """A job's result as a record: the date, where it ran, and its samples' statistics (nothing of the model's:
    records/evaluate.py computes that whenever records are read)."""
    out = record | {"date": datetime.now(UTC).isoformat(timespec="seconds"), "environment": _environment(backend)}
    if record.get("status") == "correct" and "timing" in record:
        out |= summarise(record["timing"])
        out |= slowest(record["timing"].get("gpu_state", []))  # sm_clock_mhz, power_capped
    return out
