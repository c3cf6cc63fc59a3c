"""Profile problems: bound each one, run the reference and every implementation, record and print as it goes."""

from __future__ import annotations

import dataclasses
import hashlib
import math
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pkroof.kernels.catalogue import Problem, check_path, is_file, is_suite_problem, load
from pkroof.rooflines.units import fmt_bytes, fmt_s
from pkroof.rooflines.workload import workload_to_dict
from pkroof.runtime.launch import phase, run_isolated
from pkroof.topology import Topology, dumps, resolve

from . import records
from .analysis import ProblemAnalysis, analyze
from .evaluate import derive
from .isolated import PRELOAD
from .run import Job, check_builtin, check_impl_spec, finish, resolve_impl, run_job

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


def declared_pair(problem: Problem | None, impl: str) -> dict[str, Any] | None:
    """The pair an implementation declares: the reference is NCCL, serial; a built-in's is in the registry (no
    import); a user's function says it with @declare (its file is imported: the user named it)."""
    from pkroof.kernels.declare import declared
    from pkroof.kernels.registry import BUILTIN_IMPLS

    if impl == "reference":
        return REFERENCE_PAIR
    if impl in BUILTIN_IMPLS:
        return BUILTIN_IMPLS[impl].pair
    assert problem is not None, "a user's implementation is resolved against its problem"
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


def _problem_fields(problem: Problem, pa: ProblemAnalysis) -> dict[str, Any]:
    """What a record says of its problem beyond name, shape and params: the file's hash, the dtype bounded, and
    the workload where the catalogue cannot rebuild it without torch or without running a file (traced)."""
    out: dict[str, Any] = {"problem_sha256": problem.sha256, "dtype": pa.analysis.workload.dtype}
    if not (problem.suite and problem.has_workload):
        out["workload"] = workload_to_dict(pa.analysis.workload)
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
        f"{fmt_s(r['t_roof_s']):>10} {f'{roof:.0%}' if roof else '-':>5} {f'{speed:.2f}x' if speed else '-':>6} "
        f"{f'{clock:.0f}' if clock else '-':>6}"
    )


def canonical_problem(name: str) -> str:
    """A problem file by its resolved path (two spellings of one file are one problem); a suite name as it is."""
    return os.path.realpath(name) if is_file(name) and not is_suite_problem(name) else name


def canonical_impl(spec: str) -> str:
    """'path/to/file.py:function' with the file's resolved path (two spellings are one implementation)."""
    path, sep, name = spec.rpartition(":")
    return f"{os.path.realpath(path)}:{name}" if sep and path.endswith(".py") else spec


def user_code(name: str, impls: list[str]) -> bool:
    """Whether preparing `name` with `impls` imports or runs a user's file (a problem file, an implementation)."""
    return (is_file(name) and not is_suite_problem(name)) or bool(impls)


@dataclass(frozen=True)
class Prepared:
    """A problem ready to profile: what the parent needs of it, which can come back from another process."""

    name: str  # as records name it: a suite name or a problem file's resolved path
    problem_name: str
    analysis: ProblemAnalysis  # its `problem` is None where it was prepared in another process
    fields: dict[str, Any]  # _problem_fields
    pairs: dict[str, dict[str, Any] | None]  # each given implementation's declared pair


def prepare(
    name: str, impls: list[str], shape: str | None, overrides: dict[str, Any], world: int, topo: Topology
) -> Prepared:
    """Load the problem, import every implementation, build the workload (hand-written, or traced): everything of
    a problem that runs its file's code before the ranks start. Bad names, files and shapes are a ValueError,
    naming files as given; the Prepared names them by their resolved paths."""
    phase(f"importing {name}")
    problem = load(name)
    problem.check_size(overrides)
    for impl in impls:
        phase(f"importing {impl}")
        resolve_impl(problem, impl)
    phase("building the workload (the file's workload(), or tracing its reference)")
    pa = analyze(problem, topology=topo, shape=shape, params=overrides, world_size=world)
    pairs = {canonical_impl(impl): declared_pair(problem, impl) for impl in impls}
    return Prepared(canonical_problem(name), problem.name, pa, _problem_fields(problem, pa), pairs)


def _detached(prepared: Prepared) -> Prepared:
    return dataclasses.replace(prepared, analysis=dataclasses.replace(prepared.analysis, problem=None))


def prepare_isolated(
    name: str, impls: list[str], shape: str | None, overrides: dict[str, Any], world: int, topo: Topology
) -> Prepared:
    """prepare() in a process of its own when a user's file is involved, stopped at the deadline (pkroof's own
    suite problems load here)."""
    return _detached(prepare(name, impls, shape, overrides, world, topo))


def check_out_dir(out_dir: Path) -> None:
    """A ValueError, before anything runs, unless `out_dir` can hold results.jsonl: a folder or nothing yet."""
    for folder in (out_dir, *out_dir.parents):
        if folder.exists() and not folder.is_dir():
            raise ValueError(f"--out {out_dir}: {folder} exists and is not a folder (--out names a folder)")
    results = out_dir / "results.jsonl"
    if results.exists() and not results.is_file():
        raise ValueError(f"--out {out_dir}: {results} exists and is not a file")


def _reusable(existing: list[dict[str, Any]], topo: Topology, log: Callable[[str], None]) -> list[dict[str, Any]]:
    """The records --resume may skip: those measured against this very topology (name and file hash)."""
    here = topology_ref(topo)
    same = [r for r in existing if r.get("topology") == here]
    others = len(existing) - len(same)
    if others:
        log(
            f"{others} recorded result{'s were' if others > 1 else ' was'} measured against another topology than "
            f"{topo.name} (or another version of its file): measured again, not reused"
        )
    return same


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
    check_out_dir(out_dir)
    topo = resolve(topology)
    topo.system(world)  # a world larger than the topology's GPUs is refused here
    from pkroof.kernels.registry import BUILTIN_IMPLS

    # two spellings of one file are one problem, or one implementation: the first spelling is the one messages use
    problems = list({canonical_problem(p): p for p in reversed(problems)}.values())[::-1]
    given = list({canonical_impl(i): i for i in reversed(impls)}.values())[::-1]
    impls = [canonical_impl(i) for i in given]
    user_impls = [i for i in given if i != "reference" and i not in BUILTIN_IMPLS]
    prepared = []  # every bad name, file or shape is reported before anything runs
    for name in problems:
        args = (name, user_impls, shape, overrides, world, topo)
        if is_file(name) and not is_suite_problem(name):
            check_path(Path(name))  # no such file, or not a .py file: said at once, before any process starts
        for impl in user_impls:
            check_impl_spec(impl)
        if user_code(name, user_impls):  # a user's file runs: under the deadline, in a process of its own
            what = f"preparing {Path(name).name if is_file(name) else name}"
            prepared.append(run_isolated(prepare_isolated, args, timeout_s=timeout_s, what=what, preload=PRELOAD))
        else:
            prepared.append(prepare(*args))
        for impl in given:
            if impl not in user_impls:
                check_builtin(prepared[-1].problem_name, impl)  # the reference or a built-in: pkroof's own code

    path = out_dir / "results.jsonl"
    existing, unreadable = records.read(path) if resume else ([], [])
    for line in unreadable:
        log(line)
    done = {records.key(r): r for r in _reusable(existing, topo, log)}
    if backend == "gloo":
        log(f"no {world} GPUs here: {world} CPU ranks over gloo check correctness; their times are CPU times")
    log(HEADER)
    written = []
    for prep in prepared:
        name, pa = prep.name, prep.analysis
        reference_s = None
        comm_bytes = sum(op.size_bytes for op in pa.analysis.workload.comm)  # nccl-tests' size convention
        peers = automatic_peers(prep.problem_name, backend, log, comm_bytes)
        chosen = [i for i in impls if i != "reference" and not (backend == "gloo" and i in BUILTIN_IMPLS)]
        if backend == "gloo" and any(i in BUILTIN_IMPLS for i in impls):
            log("the built-in GPU implementations need GPUs: skipped on CPU ranks")
        for impl in ["reference", *dict.fromkeys(chosen + peers)]:
            job = Job(name, pa.shape, pa.params, impl, world, backend)
            key = records.key(
                {"problem": name, "shape": job.shape, "params": pa.params, "impl": impl, "world_size": world}
            )
            if key in done:
                log(f"{_row(derive(done[key], pa, reference_s))}  (recorded)")
                if impl == "reference":
                    reference_s = done[key].get("median_s")
                continue
            result = run_job(job, timeout_s)
            pair = prep.pairs[impl] if impl in prep.pairs else declared_pair(None, impl)
            used = result.pop("comm_sms_used", None)  # what the implementation took at this shape, if it says
            if pair:
                result |= {k: v for k, v in pair.items() if k != "comm_sms"}
                result["comm_sms"] = pair.get("comm_sms") if used is None else used
            result |= prep.fields | {"topology": topology_ref(topo)}
            record = finish(result, backend=backend)
            records.append(path, record)
            written.append(record)
            shown = derive(record, pa, reference_s)
            log(_row(shown) + (f"  {record['message']}" if record.get("message") else ""))
            if impl == "reference":
                reference_s = record.get("median_s")
    return written
