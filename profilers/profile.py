"""Profile problems: bound each one, run the reference and every implementation, record and print as it goes."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pkroof.kernels.catalogue import Problem, ProblemError, load
from pkroof.rooflines.units import fmt_bytes, fmt_s
from pkroof.rooflines.workload import workload_to_dict
from pkroof.topology import Topology, dumps, resolve

from . import records
from .analysis import NeedsDataError, ProblemAnalysis, analyze
from .evaluate import derive
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


def declared_pair(problem: Problem, impl: str) -> dict[str, Any] | None:
    """The pair an implementation declares: the reference is NCCL, serial; a built-in's is in the registry (no
    import); a user's function says it with @declare (its file is imported: the user named it)."""
    from pkroof.kernels.declare import declared
    from pkroof.kernels.registry import BUILTIN_IMPLS

    if impl == "reference":
        return REFERENCE_PAIR
    if impl in BUILTIN_IMPLS:
        return BUILTIN_IMPLS[impl].pair
    return declared(resolve_impl(problem, impl))


def automatic_peers(problem: str, backend: str, log: Callable[[str], None], comm_bytes: float) -> list[str]:
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


def topology_ref(topo: Topology) -> dict[str, str]:
    """How a record names the topology it was measured against: its name and the hash of its JSON."""
    return {"name": topo.name, "sha256": hashlib.sha256(dumps(topo).encode()).hexdigest()}


def _problem_fields(problem: Problem, pa: ProblemAnalysis | None, unbounded: str | None) -> dict[str, Any]:
    """What a record says of its problem beyond name, shape and params: the file's hash, the dtype bounded, and
    the workload where the catalogue cannot rebuild it without torch or without running a file (traced); or, for a
    problem that could not be bounded, why."""
    out: dict[str, Any] = {"problem_sha256": problem.sha256}
    if pa is None:
        return out | {"unbounded": unbounded}
    out["dtype"] = pa.analysis.workload.dtype
    if not (problem.suite and problem.has_workload):
        out["workload"] = workload_to_dict(pa.analysis.workload)
    return out


def _analyses(loaded: list[Problem], log: Callable[[str], None], **how: Any) -> list[tuple[Any, str | None]]:
    """Each problem's analysis, or None and why where it cannot be bounded (it is checked and timed all the same);
    a shape that does not fit the topology's GPUs or a bad parameter stops the run before anything runs."""
    out = []
    for p in loaded:
        try:
            out.append((analyze(p, **how), None))
        except ProblemError as e:  # the problem's own code: its trace failed; its implementations can still run
            log(f"{p.name}: no bound ({e}); checked and timed all the same")
            out.append((None, str(e)))
        except NeedsDataError as e:
            out.append((None, str(e)))
    return out


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
        f"{fmt_s(r['t_roof_s']) if r.get('t_roof_s') else '-':>10} {f'{roof:.0%}' if roof else '-':>5} "
        f"{f'{speed:.2f}x' if speed else '-':>6} "
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
    topo.system(world)  # a world larger than the topology's GPUs is refused here
    loaded = [load(name) for name in problems]  # every bad name, file or shape is reported before anything runs
    for problem in loaded:
        problem.check_size(overrides)
        for impl in impls:
            resolve_impl(problem, impl)
    analyses = _analyses(loaded, log, topology=topo, shape=shape, params=overrides, world_size=world)
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
    for problem, name, (pa, unbounded) in zip(loaded, problems, analyses, strict=True):
        reference_s = None
        # nccl-tests' size convention; unbounded, the size is unknown: no size-limited kernel runs unasked
        comm_bytes = sum(op.size_bytes for op in pa.analysis.workload.comm) if pa else math.inf
        label = pa.shape if pa else problem.shape_label(shape, overrides)
        params = pa.params if pa else problem.params(shape, overrides)
        peers = automatic_peers(problem.name, backend, log, comm_bytes)
        chosen = [i for i in impls if i != "reference" and not (backend == "gloo" and i in BUILTIN_IMPLS)]
        if backend == "gloo" and any(i in BUILTIN_IMPLS for i in impls):
            log("the built-in GPU implementations need GPUs: skipped on CPU ranks")
        for impl in ["reference", *dict.fromkeys(chosen + peers)]:
            job = Job(name, label, params, impl, world, backend)
            key = records.key(
                {"problem": name, "shape": job.shape, "params": params, "impl": impl, "world_size": world}
            )
            if key in done:
                log(f"{_row(derive(done[key], pa, reference_s) if pa else done[key])}  (recorded)")
                if impl == "reference":
                    reference_s = done[key].get("median_s")
                continue
            result = run_job(job, timeout_s)
            pair = declared_pair(problem, impl)
            used = result.pop("comm_sms_used", None)  # what the implementation took at this shape, if it says
            if pair:
                result |= {k: v for k, v in pair.items() if k != "comm_sms"}
                result["comm_sms"] = pair.get("comm_sms") if used is None else used
            result |= _problem_fields(problem, pa, unbounded) | {"topology": topology_ref(topo)}
            record = finish(result, backend=backend)
            records.append(path, record)
            written.append(record)
            shown = derive(record, pa, reference_s) if pa else record
            log(_row(shown) + (f"  {record['message']}" if record.get("message") else ""))
            if impl == "reference":
                reference_s = record.get("median_s")
    return written
