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

from pkroof.analysis.catalogue import Problem, ProblemError, is_file, is_suite_problem, load
from pkroof.analysis.problem import INSTALL_TORCH, NeedsDataError, ProblemAnalysis, analyze, has_torch
from pkroof.analysis.source import check_path
from pkroof.analysis.user_file import PRELOAD
from pkroof.records import format as records
from pkroof.records.evaluate import derive
from pkroof.rooflines import DTYPE_BYTES, bus_bandwidth_factor
from pkroof.rooflines.units import fmt_bytes, fmt_s
from pkroof.rooflines.workload import workload_to_dict
from pkroof.runtime.isolated import run_isolated
from pkroof.runtime.launch import phase
from pkroof.runtime.launched import Control, launched
from pkroof.topology import Topology, dumps, resolve

from .across_nodes import JobLostError, Placement, check_files, follow, job_topology, join, placement, run_launched
from .implementations import check_builtin, check_impl_spec, resolve_impl
from .run import Job, finish, run_job

REFERENCE_PAIR = {"mechanism": "nccl", "schedule": "serial"}  # PyTorch + torch.distributed: compute, then NCCL
HEADER = (
    f"{'problem':26} {'shape':20} {'impl':33} {'size':>10} {'status':9} {'time':>10} {'algbw':>7} {'busbw':>7} "
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


def automatic_peers(
    problem: str, backend: str, log: Callable[[str], None], comm_bytes: float, nodes: int = 1
) -> list[str]:
    """The built-in implementations that run beside `problem`'s reference unasked at `comm_bytes`: on GPUs only, those
    meant for that size, those that span nodes where the ranks are on several, and pkroof's own kernels only where
    triton imports (said once per call, not recorded as crashes)."""
    import importlib.util

    from pkroof.kernels.registry import BUILTIN_IMPLS

    if backend != "nccl":
        return []
    peers = [n for n, b in BUILTIN_IMPLS.items() if b.runs_unasked(problem, comm_bytes)]
    if nodes > 1 and (local := [n for n in peers if BUILTIN_IMPLS[n].one_node]):
        log(f"{problem}: on {nodes} nodes, {', '.join(local)} (peer-to-peer memory, one NVLink domain) are skipped")
        peers = [n for n in peers if n not in local]
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


def _gbps(rate: float | None) -> str:
    return f"{rate / 1e9:.2f}" if rate else "-"


def _row(r: dict[str, Any]) -> str:
    median = r.get("median_s")
    algbw, busbw = r.get("algbw_Bps"), r.get("busbw_Bps")  # GB/s, nccl-tests' columns (one collective alone)
    roof = r.get("fraction_of_roofline")
    speed = r.get("speedup_vs_reference")
    clock = r.get("sm_clock_mhz")  # the slowest rank's median SM clock during the samples
    problem = Path(r["problem"]).stem.replace("_", "-") if r["problem"].endswith(".py") else r["problem"]
    impl = r["impl"].rpartition("/")[2]
    size = r.get("comm_bytes")
    return (
        f"{problem[:26]:26} {r['shape'][:20]:20} {impl[:33]:33} {fmt_bytes(size) if size else '-':>10} "
        f"{r['status']:9} "
        f"{fmt_s(median) if median else '-':>10} {_gbps(algbw):>7} {_gbps(busbw):>7} "
        f"{fmt_s(r['t_roof_s']) if r.get('t_roof_s') else '-':>10} {f'{roof:.0%}' if roof else '-':>5} "
        f"{f'{speed:.2f}x' if speed else '-':>6} "
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
class Run:
    """One problem at one size: its analysis, or None and why where it cannot be bounded (checked and timed all
    the same, without a roof)."""

    analysis: ProblemAnalysis | None  # its `problem` is None where it was prepared in another process
    shape: str
    params: dict[str, Any]
    fields: dict[str, Any]  # _problem_fields
    unbounded: str | None = None


@dataclass(frozen=True)
class Prepared:
    """A problem ready to profile: what the parent needs of it, which can come back from another process."""

    name: str  # as records name it: a suite name or a problem file's resolved path
    problem_name: str
    runs: tuple[Run, ...]  # one per size asked for (the shape's own where none was)
    pairs: dict[str, dict[str, Any] | None]  # each given implementation's declared pair
    notes: tuple[str, ...] = ()  # lines for the parent to print (a problem that cannot be bounded)


@dataclass(frozen=True)
class Ask:
    """What to prepare of every problem: the shape, parameters, sizes and dtype asked for, on `world` ranks."""

    shape: str | None
    overrides: dict[str, Any]
    world: int
    topo: Topology
    sizes: list[int] | None = None
    round_sizes: bool = False  # a -b/-e sweep: sizes rounded down to split over the ranks
    dtype: str | None = None
    ranks_per_node: int | None = None  # a launched job's placement (None: as few nodes as hold the ranks)


def _run(problem: Problem, ask: Ask, size: int | None, notes: list[str]) -> Run:
    """The problem's analysis at `size` (its shape's own where None), in the asked dtype. A dtype other than the
    problem's own is part of the shape's label ("small dtype=fp16"), so its records stay apart. A shape that does
    not fit the topology's GPUs or a bad parameter is a ValueError; a problem whose own code cannot be traced, or
    whose workload needs its inputs' values, is run unbounded."""
    params = ask.overrides if size is None else ask.overrides | {"size_bytes": size}
    problem.check_size(params)
    kw = dict(topology=ask.topo, shape=ask.shape, params=params, world_size=ask.world, round_size=ask.round_sizes)
    kw["ranks_per_node"] = ask.ranks_per_node
    try:
        pa = analyze(problem, **kw, dtype=ask.dtype)
        own = ask.dtype is None or "dtype" in problem.takes  # its own parameter dtype: in the label already
        if not own and analyze(problem, **kw).analysis.workload.dtype != ask.dtype:
            pa = dataclasses.replace(pa, shape=f"{pa.shape} dtype={ask.dtype}")
    except (ProblemError, NeedsDataError) as e:
        if isinstance(e, ProblemError):  # its trace failed; its implementations can still run
            notes.append(f"{problem.name}: no bound ({e}); checked and timed all the same")
        own = "dtype" in problem.takes  # its own parameter dtype: set by --dtype, in the label as a parameter
        params = problem.with_dtype(params, ask.dtype)
        label = problem.shape_label(ask.shape, params) + (f" dtype={ask.dtype}" if ask.dtype and not own else "")
        return Run(None, label, problem.params(ask.shape, params), _problem_fields(problem, None, str(e)), str(e))
    return Run(pa, pa.shape, pa.params, _problem_fields(problem, pa, None))


def prepare(name: str, impls: list[str], ask: Ask) -> Prepared:
    """Load the problem, import every implementation, build the workloads (hand-written, or traced): everything of
    a problem that runs its file's code before the ranks start. Bad names, files and shapes are a ValueError,
    naming files as given; the Prepared names them by their resolved paths."""
    phase(f"importing {name}")
    problem = load(name)
    problem.check_size(ask.overrides)
    for impl in impls:
        phase(f"importing {impl}")
        resolve_impl(problem, impl)
    phase("building the workload (the file's workload(), or tracing its reference)")
    notes: list[str] = []
    runs = tuple(_run(problem, ask, size, notes) for size in ask.sizes or [None])
    pairs = {canonical_impl(impl): declared_pair(problem, impl) for impl in impls}
    return Prepared(canonical_problem(name), problem.name, runs, pairs, tuple(notes))


def _detached(run: Run) -> Run:
    return (
        run
        if run.analysis is None
        else dataclasses.replace(run, analysis=dataclasses.replace(run.analysis, problem=None))
    )


def prepare_isolated(name: str, impls: list[str], ask: Ask) -> Prepared:
    """prepare() in a process of its own when a user's file is involved, stopped at the deadline (pkroof's own
    suite problems load here): its analyses come back without their modules."""
    prepared = prepare(name, impls, ask)
    return dataclasses.replace(prepared, runs=tuple(_detached(r) for r in prepared.runs))


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
    sizes: list[int] | None = None,
    round_sizes: bool = False,
    dtype: str | None = None,
    iters: int | None = None,
    warmup: int | None = None,
    rtol: float | None = None,
    atol: float | None = None,
    nodes: int | None = None,
    progress: Callable[[str], None] = lambda step: None,
) -> list[dict[str, Any]]:
    """Check and time every implementation of every problem at each of `sizes` (collectives; None: the shape's own,
    `round_sizes`: rounded down to split over the ranks, as a -b/-e sweep is); `dtype` casts the inputs; `iters`
    and `warmup` override the timing function's samples. Returns the records written by this call, as written:
    measurements only (records/evaluate.py gives them the model's fields).

    Started by torchrun or srun (one rank of a launched job), this process is that rank: global rank 0 profiles
    and writes the records, bounded against `topology` on the job's nodes (`nodes`: must be the job's); the other
    ranks follow it and return []. A job that loses a rank is a JobLostError on every rank still there."""
    if not (0 < timeout_s < math.inf):
        raise ValueError(f"timeout must be a positive number of seconds, got {timeout_s:g}")
    if not has_torch():
        raise ValueError(
            "profile runs the reference and the implementations on ranks, which needs torch: " + INSTALL_TORCH
        )
    if iters is not None and iters < 1:
        raise ValueError(f"--iters must be at least 1, got {iters}")
    if warmup is not None and warmup < 0:
        raise ValueError(f"--warmup must not be negative, got {warmup}")
    for flag, tol in (("--rtol", rtol), ("--atol", atol)):
        if tol is not None and not 0 <= tol < math.inf:
            raise ValueError(f"{flag} must be a finite number at least 0, got {tol:g}")
    asked = dict(shape=shape, overrides=overrides, sizes=sizes, round_sizes=round_sizes, dtype=dtype, iters=iters)
    asked |= dict(warmup=warmup, rtol=rtol, atol=atol, progress=progress)
    launch = launched()
    if launch is None:
        if nodes is not None:
            raise ValueError("--nodes is for a profile launched on several nodes (torchrun, srun): see docs/profile.md")
        check_out_dir(out_dir)
        place, topo = _local(world_size, resolve(topology))
        return _profile(problems, impls, place, topo, out_dir, timeout_s, resume, log, None, **asked)
    control = join(launch, timeout_s, devices())
    try:
        if launch.rank != 0:
            follow(control)
            return []
        try:
            place = placement(control)  # a rank that never joins: JobLostError
            if world_size is not None and world_size != launch.world:
                raise ValueError(f"-n {world_size}, but the launch has {launch.world} ranks")
            check_out_dir(out_dir)
            topo = job_topology(resolve(topology), nodes, place, log)
            written = _profile(problems, impls, place, topo, out_dir, timeout_s, resume, log, control, **asked)
        except BaseException as e:
            if not isinstance(e, JobLostError):
                control.abort(f"rank 0 ended the job: {(str(e).strip().splitlines() or [type(e).__name__])[0]}")
            control.linger(control.lost_s)
            raise
        control.finish()
        return written
    finally:
        control.close()


def _local(world_size: int | None, topo: Topology) -> tuple[Placement, Topology]:
    """pkroof's own ranks on this node: NCCL where it has the GPUs, else gloo; all on one node of the topology."""
    gpus = devices()
    backend = "nccl" if gpus >= max(2, world_size or 2) else "gloo"
    world = world_size if world_size is not None else (gpus if backend == "nccl" else 2)
    if world < 2:
        raise ValueError(f"world size must be at least 2, got {world}")
    topo.system(world)  # a world larger than the topology's GPUs is refused here
    if world > topo.gpus_per_node:
        raise ValueError(
            f"{world} ranks on this one node, but {topo.name}'s nodes have {topo.gpus_per_node} GPUs: profile against "
            "a topology of this node (pkroof probe), or launch on several nodes (torchrun, srun)"
        )
    return Placement(1, world, backend), topo


def _profile(
    problems: list[str],
    impls: list[str],
    place: Placement,
    topo: Topology,
    out_dir: Path,
    timeout_s: float,
    resume: bool,
    log: Callable[[str], None],
    control: Control | None,
    *,
    shape: str | None,
    overrides: dict[str, Any],
    sizes: list[int] | None,
    round_sizes: bool,
    dtype: str | None,
    iters: int | None,
    warmup: int | None,
    rtol: float | None,
    atol: float | None,
    progress: Callable[[str], None],
) -> list[dict[str, Any]]:
    """profile()'s work once it knows where the ranks run: on this node (control None) or on the launch's."""
    world, backend = place.nodes * place.ranks_per_node, place.backend
    from pkroof.kernels.registry import BUILTIN_IMPLS

    # two spellings of one file are one problem, or one implementation: the first spelling is the one messages use
    problems = list({canonical_problem(p): p for p in reversed(problems)}.values())[::-1]
    given = list({canonical_impl(i): i for i in reversed(impls)}.values())[::-1]
    impls = [canonical_impl(i) for i in given]
    user_impls = [i for i in given if i != "reference" and i not in BUILTIN_IMPLS]
    ask = Ask(shape, overrides, world, topo, sizes, round_sizes, dtype, place.ranks_per_node)
    prepared: list[Prepared] = []  # every bad name, file or shape is reported before anything runs
    for name in problems:
        args = (name, user_impls, ask)
        if is_file(name) and not is_suite_problem(name):
            check_path(Path(name))  # no such file, or not a .py file: said at once, before any process starts
        for impl in user_impls:
            check_impl_spec(impl)
        if user_code(name, user_impls):  # a user's file runs: under the deadline, in a process of its own
            what = f"preparing {Path(name).name if is_file(name) else name}"
            prepared.append(run_isolated(prepare_isolated, args, timeout_s=timeout_s, what=what, preload=PRELOAD))
        else:
            prepared.append(prepare(*args))
        for note in prepared[-1].notes:
            log(note)
        for impl in given:
            if impl not in user_impls:
                check_builtin(prepared[-1].problem_name, impl)  # the reference or a built-in: pkroof's own code

    if control is not None:  # every node must have the files it will run, as rank 0 has them
        files = [prep.name for prep in prepared if is_file(prep.name) and not is_suite_problem(prep.name)]
        check_files(control, list(dict.fromkeys(files + [canonical_impl(i).rpartition(":")[0] for i in user_impls])))
    path = out_dir / "results.jsonl"
    existing, unreadable = records.read(path) if resume else ([], [])
    for line in unreadable:
        log(line)
    done = {records.key(r): r for r in _reusable(existing, topo, log)}
    if control is not None:
        hosts = ", ".join(place.hosts)
        nodes = f"{place.nodes} node{'s' * (place.nodes > 1)} of {place.ranks_per_node}"
        nodes += f" rank{'s' * (place.ranks_per_node > 1)}"
        log(f"launched by {place.launcher}: {nodes} ({hosts})")
    if backend == "gloo":
        where = place.why_gloo or f"no {world} GPUs here"
        log(f"{where}: {world} CPU ranks over gloo check correctness; their times are CPU times")
    log(f"topology: {topo.name}")
    if backend == "nccl":
        _say_other_gpu(topo, log)
    log(HEADER)
    shown: list[dict[str, Any]] = []  # what was printed: the records with the model's fields
    written: list[dict[str, Any]] = []
    for prep in prepared:
        for run in prep.runs:
            name, pa = prep.name, run.analysis
            reference_s = None
            # nccl-tests' size convention; unbounded, the size is unknown: no size-limited kernel runs unasked
            comm_bytes = sum(op.size_bytes for op in pa.analysis.workload.comm) if pa else math.inf
            peers = automatic_peers(prep.problem_name, backend, log, comm_bytes, place.nodes)
            chosen = [i for i in impls if i != "reference" and not (backend == "gloo" and i in BUILTIN_IMPLS)]
            if backend == "gloo" and any(i in BUILTIN_IMPLS for i in impls):
                log("the built-in GPU implementations need GPUs: skipped on CPU ranks")
            for impl in ["reference", *dict.fromkeys(chosen + peers)]:
                job = Job(
                name, run.shape, run.params, impl, world, backend,
                dtype=dtype, iters=iters, warmup=warmup, rtol=rtol, atol=atol,
            )  # fmt: skip
                key = records.key(
                    {"problem": name, "shape": job.shape, "params": run.params, "impl": impl, "world_size": world}
                    | place.fields
                )
                if key in done and done[key].get("problem_sha256") not in (None, run.fields.get("problem_sha256")):
                    log(f"{name}: its file changed since {impl} was recorded: measured again")
                    del done[key]
                if key in done:
                    row = derive(done[key], pa, reference_s) if pa else done[key]
                    log(f"{_row(row)}  (recorded)")
                    shown.append(row)
                    if impl == "reference":
                        reference_s = done[key].get("median_s")
                    continue
                progress(f"{name} {job.shape}: checking and timing {impl} on {world} ranks")
                result, lost = (
                    (run_job(job, timeout_s), None) if control is None else run_launched(control, job, timeout_s)
                )
                pair = prep.pairs[impl] if impl in prep.pairs else declared_pair(None, impl)
                used = result.pop("comm_sms_used", None)  # what the implementation took at this shape, if it says
                if pair:
                    result |= {k: v for k, v in pair.items() if k != "comm_sms"}
                    result["comm_sms"] = pair.get("comm_sms") if used is None else used
                result |= run.fields | {"topology": topology_ref(topo)} | place.fields
                record = finish(result, backend=backend)
                records.append(path, record)
                written.append(record)
                row = derive(record, pa, reference_s) if pa else record
                shown.append(row)
                log(_row(row) + (f"  {record['message']}" if record.get("message") else ""))
                if lost is not None:  # the record says why; the job ends on every rank still there
                    raise JobLostError(lost)
                if impl == "reference":
                    reference_s = record.get("median_s")
            last = run is prep.runs[-1]
            if last and pa and pa.analysis.workload.sole_collective is not None:
                table = nccl_tests_table([r for r in shown if r["problem"] == name], pa, backend)
                if table:
                    log(table)
    return written


def _say_other_gpu(topo: Topology, log: Callable[[str], None]) -> None:
    """A line where this node's GPUs are not the topology's (NVML's name against the topology's, exactly): its
    roofline is then another machine's."""
    from pkroof.runtime.nvml import NA, Device, Nvml

    name = Nvml().query("nvmlDeviceGetName", Device(0))
    if not isinstance(name, NA) and str(name) != topo.gpu.name:
        log(
            f"note: this node's GPUs are {name}, {topo.name} describes {topo.gpu.name}: the roofline is that "
            "machine's (pkroof probe --save makes this node's topology the default)"
        )


def _in_place_impls() -> set[str]:
    from pkroof.kernels.registry import BUILTIN_IMPLS

    return {name for name, impl in BUILTIN_IMPLS.items() if impl.in_place}


def _columns(r: dict[str, Any] | None) -> str:
    """time (µs), algbw, busbw (GB/s), #wrong of one record, as nccl-tests prints them; blanks where not timed."""
    if r is None:
        return f"{'':>7}  {'':>6}  {'':>6}  {'N/A':>6}"
    if r["status"] != "correct":
        return f"{'-':>7}  {'-':>6}  {'-':>6}  {r['status']:>6}"
    bw = (r.get("algbw_Bps"), r.get("busbw_Bps"))
    gbps = [f"{v / 1e9:6.2f}" if v else f"{'-':>6}" for v in bw]
    return f"{r['median_s'] * 1e6:7.2f}  {gbps[0]}  {gbps[1]}  {0:>6}"


def nccl_tests_table(rows: list[dict[str, Any]], pa: ProblemAnalysis, backend: str) -> str:
    """A collective's reference (out of place) beside NCCL in place, per size, in nccl-tests' layout:
    `size count type redop root | time algbw busbw #wrong | time algbw busbw #wrong`. Empty without a reference."""
    op = pa.analysis.workload.sole_collective
    by_size: dict[float, dict[str, dict[str, Any]]] = {}
    in_place = _in_place_impls()
    for r in rows:
        if r["impl"] == "reference" or r["impl"] in in_place:
            by_size.setdefault(r.get("comm_bytes") or 0.0, {})["in" if r["impl"] in in_place else "out"] = r
    if not any("out" in v for v in by_size.values()):
        return ""
    dtype = pa.analysis.workload.dtype
    element = DTYPE_BYTES[dtype]
    redop = "sum" if op.reduction else "none"
    root = 0 if op.kind.value in ("broadcast", "reduce", "gather", "scatter") else -1
    factor = bus_bandwidth_factor(op.kind, op.group_size)
    where = "CPU ranks over gloo: CPU times, no algbw or busbw" if backend == "gloo" else f"{op.group_size} GPUs"
    lines = [
        f"# {pa.problem.name if pa.problem else op.kind.value}, {where}: out of place = the reference, in place = "
        f"NCCL in place where pkroof has it; busbw = algbw × {factor:.4g} (nccl-tests' factor)",
        f"# {'':>10}  {'':>12}  {'':>8}  {'':>6}  {'':>6}           out-of-place                       in-place",
        f"# {'size':>10}  {'count':>12}  {'type':>8}  {'redop':>6}  {'root':>6}  {'time':>7}  {'algbw':>6}  "
        f"{'busbw':>6}  {'#wrong':>6}  {'time':>7}  {'algbw':>6}  {'busbw':>6}  {'#wrong':>6}",
        f"# {'(B)':>10}  {'(elements)':>12}  {'':>8}  {'':>6}  {'':>6}  {'(us)':>7}  {'(GB/s)':>6}  {'(GB/s)':>6}  "
        f"{'':>6}  {'(us)':>7}  {'(GB/s)':>6}  {'(GB/s)':>6}",
    ]
    for size, pair in sorted(by_size.items()):
        lines.append(
            f"  {size:10.0f}  {size / element:12.0f}  {dtype:>8}  {redop:>6}  {root:>6}  "
            f"{_columns(pair.get('out'))}  {_columns(pair.get('in'))}"
        )
    return "\n".join(lines)
