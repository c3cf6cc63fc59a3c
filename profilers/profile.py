"""Profile problems: bound each one, run the reference and every implementation, record and print as it goes."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pkroof.kernels.declare import declared
from pkroof.rooflines import (
    Algorithm,
    Bound,
    Mechanism,
    Prediction,
    Protocol,
    Schedule,
    System,
    Workload,
    bound,
    predict,
)
from pkroof.rooflines.bound import check_fits
from pkroof.rooflines.units import fmt_bytes, fmt_s
from pkroof.topology import resolve

from . import records
from .analysis import analysis
from .problems import DEFAULT_SHAPE, Problem, load
from .run import Job, finish, resolve_impl, run_job

REFERENCE_PAIR = {"mechanism": "nccl", "schedule": "serial"}  # PyTorch + torch.distributed: compute, then NCCL
HEADER = (
    f"{'problem':26} {'shape':20} {'impl':33} {'size':>10} {'status':9} {'time':>10} {'link GB/s':>9} "
    f"{'t_roof':>10} {'roof':>5} {'vs ref':>6} {'SM MHz':>6}"
)


def devices() -> int:
    try:
        import torch
    except ImportError:
        return 0
    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def workload_of(problem: Problem, world_size: int, params: dict[str, Any], *, dtype: str | None = None):
    """The problem's hand-written workload if it has one, else the one traced from its reference; in `dtype` where
    given and not the problem's own (a hand-written workload that takes `dtype` gets it, else the trace casts)."""
    import inspect

    from .trace import guarded, input_dtype, trace

    # shape errors (not divisible by the world size) surface here as ValueError, before any rank starts
    if dtype == input_dtype(problem, world_size, params):
        dtype = None
    if problem.has_workload and (dtype is None or "dtype" in inspect.signature(problem.module.workload).parameters):
        extra = {} if dtype is None else {"dtype": dtype}
        return guarded(problem, "workload", lambda: problem.module.workload(world_size, **params, **extra))
    return trace(problem, world_size, params, dtype=dtype)


def check_size(problem: Problem, overrides: dict[str, Any]) -> None:
    """ValueError, in one line, where --size (the override `size_bytes`) is given for a problem that has no size."""
    params = problem.shapes[DEFAULT_SHAPE]
    if "size_bytes" in overrides and "size_bytes" not in params:
        raise ValueError(
            f"{problem.name} has no size (--size applies to collectives): set its shape with --shape "
            f"({', '.join(problem.shapes)}) or --param name=value ({', '.join(params)})"
        )


def declared_pair(problem: Problem, impl: str) -> dict[str, Any] | None:
    """The (mechanism, schedule, comm_sms) an implementation declares; the reference is NCCL, serial."""
    return REFERENCE_PAIR if impl == "reference" else declared(resolve_impl(problem, impl))


def predict_declared(w: Workload, system: System, pair: dict[str, Any], comm_sms: int | None) -> Prediction | None:
    """The model's prediction for a declared pair (or a record's: its "mechanism", "schedule", "protocol",
    "algorithm") at `comm_sms` communication SMs. Without "protocol": simple; without "algorithm": the cheapest."""
    protocol = Protocol(pair.get("protocol", Protocol.SIMPLE.value))
    algorithm = Algorithm(pair["algorithm"]) if pair.get("algorithm") else None
    mechanism, schedule = Mechanism(pair["mechanism"]), Schedule(pair["schedule"])
    return predict(w, system, mechanism, schedule, comm_sms, protocol, algorithm)


def automatic_peers(problem: str, backend: str, log: Callable[[str], None], comm_bytes: int) -> list[str]:
    """The built-in implementations that run beside `problem`'s reference unasked at `comm_bytes`: on GPUs only, those
    meant for that size, and pkroof's own kernels only where triton imports (said once per call, not recorded as
    crashes)."""
    import importlib.util

    from pkroof.kernels.registry import BUILTIN_IMPLS

    if backend != "nccl":
        return []
    peers = [n for n, b in BUILTIN_IMPLS.items() if b.runs_unasked(problem, comm_bytes)]
    if importlib.util.find_spec("triton") is None:
        mine = [n for n in peers if BUILTIN_IMPLS[n].family == "pkroof"]
        if mine:
            log(f"{problem}: triton is not installed here, so pkroof's kernels ({', '.join(mine)}) are skipped")
        peers = [n for n in peers if n not in mine]
    return peers


def _row(r: dict[str, Any]) -> str:
    median = r.get("median_s")
    link = r.get("achieved_link_Bps")
    roof = r.get("fraction_of_roofline")
    speed = r.get("speedup_vs_reference")
    clock = r.get("sm_clock_mhz")  # the slowest rank's median SM clock during the samples
    problem = Path(r["problem"]).stem.replace("_", "-") if r["problem"].endswith(".py") else r["problem"]
    impl = r["impl"].rpartition("/")[2]
    size = r.get("comm_bytes")
    return (
        f"{problem[:26]:26} {r['shape'][:20]:20} {impl[:33]:33} {fmt_bytes(size) if size else '-':>10} "
        f"{r['status']:9} "
        f"{fmt_s(median) if median else '-':>10} {f'{link / 1e9:.1f}' if link else '-':>9} "
        f"{fmt_s(r['t_roof_s']):>10} {f'{roof:.0%}' if roof else '-':>5} {f'{speed:.2f}x' if speed else '-':>6} "
        f"{f'{clock:.0f}' if clock else '-':>6}"
    )


def profile(
    problems: list[str],
    *,
    impls: list[str],
    world_size: int | None,
    shape: str | None,
    overrides: dict[str, Any],
    out_dir: Path,
    timeout_s: float,
    resume: bool,
    topology: str,
    log: Callable[[str], None] = print,
) -> list[dict[str, Any]]:
    if not (0 < timeout_s < math.inf):
        raise ValueError(f"timeout must be a positive number of seconds, got {timeout_s:g}")
    gpus = devices()
    backend = "nccl" if gpus >= max(2, world_size or 2) else "gloo"
    world = world_size if world_size is not None else (gpus if backend == "nccl" else 2)
    if world < 2:
        raise ValueError(f"world size must be at least 2, got {world}")
    topo = resolve(topology)
    system = topo.system(world)  # a world larger than the topology's GPUs is refused here
    loaded = [load(name) for name in problems]  # every bad name, file or shape is reported before anything runs
    for problem in loaded:
        check_size(problem, overrides)
        for impl in impls:
            resolve_impl(problem, impl)
    workloads = []
    for problem in loaded:
        params = problem.params(shape, overrides)
        workload = workload_of(problem, world, params)
        check_fits(workload, topo.gpu.hbm_capacity_bytes, topo.gpu.name)
        workloads.append((params, workload))
    from pkroof.kernels.registry import BUILTIN_IMPLS

    path = out_dir / "results.jsonl"
    existing, unreadable = records.read(path) if resume else ([], [])
    for line in unreadable:
        log(line)
    done = {records.key(r): r for r in existing}
    if backend == "gloo":
        log(f"no {world} GPUs here: {world} CPU ranks over gloo check correctness; their times are CPU times")
    log(HEADER)
    written = []
    for problem, name, (params, workload) in zip(loaded, problems, workloads, strict=True):
        b: Bound = bound(workload, system)
        reference_s = None
        comm_bytes = sum(op.size_bytes for op in workload.comm)  # nccl-tests' size convention
        peers = automatic_peers(problem.name, backend, log, comm_bytes)
        chosen = [i for i in impls if i != "reference" and not (backend == "gloo" and i in BUILTIN_IMPLS)]
        if backend == "gloo" and any(i in BUILTIN_IMPLS for i in impls):
            log("the built-in GPU implementations need GPUs: skipped on CPU ranks")
        for impl in ["reference", *dict.fromkeys(chosen + peers)]:
            job = Job(name, problem.shape_label(shape, overrides), params, impl, world, backend)
            key = records.key(
                {"problem": name, "shape": job.shape, "params": params, "impl": impl, "world_size": world}
            )
            if key in done:
                log(f"{_row(done[key])}  (recorded)")
                if impl == "reference":
                    reference_s = done[key].get("median_s")
                continue
            result = run_job(job, timeout_s)
            result["comm_bytes"] = comm_bytes
            if impl == "reference":  # the report's page data, so a report of these results needs no torch
                result["analysis"] = analysis(problem, params, world, system, workload=workload)
            pair = declared_pair(problem, impl)
            used = result.pop("comm_sms_used", None)  # what the implementation took at this shape, if it says
            if pair:
                comm_sms = pair.get("comm_sms") if used is None else used
                predicted = predict_declared(workload, system, pair, comm_sms)
                result |= {
                    "mechanism": pair["mechanism"],
                    "schedule": pair["schedule"],
                    "comm_sms": comm_sms,
                    "predicted_s": predicted.t_s if predicted else None,
                }
                result |= {k: pair[k] for k in ("protocol", "algorithm") if k in pair}
            record = finish(
                result,
                t_roof_s=b.t_roof_s,
                link_bytes=b.link_bytes_per_rank,
                reference_s=reference_s,
                backend=backend,
                topology=topo.name,
            )
            records.append(path, record)
            written.append(record)
            log(_row(record) + (f"  {record['message']}" if record.get("message") else ""))
            if impl == "reference":
                reference_s = record.get("median_s")
    return written
