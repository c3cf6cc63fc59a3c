"""`pkroof topology import BASE FILE...`: calibrate a preset or topology file from runs a user already has.

nccl-tests' output (topology/nccl_tests.py) gives NCCL's size regimes per collective, fitted as the probe fits its
own NCCL curves (topology/from_probe.py: the lower envelope of the faster of out of place and in place at each size,
against each call's link bytes, up to three α + size/β lines); nvbandwidth's (topology/nvbandwidth.py) gives the
copy engine's and the SM copies' peak rate between GPUs, one way and both ways at once, and the host link. Every
number set here is marked measured, its source the file (name and SHA-256). What no file measured stays BASE's.

Physics first: a rate above BASE's scale-up link, or a measured time below the roof of the result, is refused in one
line (an all-reduce that NCCL ran in-network, NVLS, puts fewer bytes on each link than a ring: rerun it with
NCCL_NVLS_ENABLE=0, or NCCL_ALGO=Ring).
"""

from __future__ import annotations

import dataclasses
import hashlib
import statistics
from datetime import UTC, datetime
from pathlib import Path

from pkroof.rooflines import Collective
from pkroof.rooflines.units import fmt_Bps

from . import nccl_tests, nvbandwidth
from .from_probe import NCCL_CHANNELS, NCCL_SOURCES, NCCL_STEP_S, fit_curves, nccl_regimes
from .model import Curve, Fit, MechanismSpec, Probe, Source, Topology
from .presets import resolve

IMPORTED = "pkroof topology import"  # how an imported topology's probe record names its command
NVBW_DEFAULT_BUFFER = 64 << 20  # nvbandwidth's smallest default copy size (v0.1-0.4; later 512 MiB): the safe end
# nvbandwidth testcase → (mechanism, "peak" or "duplex", divisor to one direction). Its CE bidirectional tests report
# the measured stream's rate (one direction), its SM ones the sum of both directions (NVIDIA/nvbandwidth README).
COPIES = {
    "device_to_device_memcpy_read_ce": ("copy-engine", "peak", 1),
    "device_to_device_memcpy_write_ce": ("copy-engine", "peak", 1),
    "device_to_device_bidirectional_memcpy_read_ce": ("copy-engine", "duplex", 1),
    "device_to_device_bidirectional_memcpy_write_ce": ("copy-engine", "duplex", 1),
    "device_to_device_memcpy_read_sm": ("sm-load", "peak", 1),
    "device_to_device_memcpy_write_sm": ("sm-store", "peak", 1),
    "device_to_device_bidirectional_memcpy_read_sm": ("sm-load", "duplex", 2),
    "device_to_device_bidirectional_memcpy_write_sm": ("sm-store", "duplex", 2),
}
HOST = {  # nvbandwidth testcase → the probe ceiling it sets (per GPU, GB/s as B/s; the best GPU)
    "host_to_device_memcpy_ce": "host_to_device_ce_Bps",
    "device_to_host_memcpy_ce": "device_to_host_ce_Bps",
    "host_to_device_memcpy_sm": "host_to_device_sm_Bps",
    "device_to_host_memcpy_sm": "device_to_host_sm_Bps",
    "device_local_copy": "device_local_copy_Bps",
}


def _kind(path: Path) -> str:
    """'nccl-tests' or 'nvbandwidth' by what the file holds; a ValueError for anything else."""
    try:
        head = path.read_text(encoding="utf-8", errors="replace")[:65536]
    except OSError as e:
        raise ValueError(f"{path}: cannot read it ({e.strerror})") from None
    if nvbandwidth.looks_like(head):
        return "nvbandwidth"
    if "nThread" in head or "out-of-place" in head:
        return "nccl-tests"
    raise ValueError(f"{path}: neither nccl-tests output (# nThread ...) nor nvbandwidth's (text or -j JSON)")


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _source_id(path: Path, taken: dict[str, Source]) -> str:
    base, n = f"import-{path.name}", 1
    name = base
    while name in taken:
        n += 1
        name = f"{base}-{n}"
    return name


def _nccl_run_said(run: nccl_tests.Run) -> str:
    nodes = max(1, len(run.hosts))
    where = f"{run.num_ranks} ranks on {nodes} node{'s' * (nodes > 1)}"
    if run.hosts:
        where += f" ({', '.join(run.hosts[:4])}{', ...' if len(run.hosts) > 4 else ''})"
    parts = [f"{run.collective.value.replace('-', '_')}_perf", where]
    parts += [", ".join(run.gpu_names)] if run.gpu_names else []
    parts += [f"NCCL {run.nccl_version}"] if run.nccl_version else []
    parts += [f"{run.iters} iterations" + (", CUDA graphs" if run.graph else "")] if run.iters else []
    return ", ".join(parts)


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _curve(run: nccl_tests.Run) -> Curve:
    """The run as a probe curve: per size the faster of out of place and in place (NCCL's best there), the average
    over its iterations as nccl-tests prints it."""
    times = tuple(r.fastest_s for r in run.rows)
    return Curve(
        f"nccl {run.collective.value}", "nccl", "", "size", 0, 0, "graph" if run.graph else "eager",
        tuple(float(r.size_bytes) for r in run.rows), times, times, times, run.iters or 1, True, (), run.num_ranks,
    )  # fmt: skip


def _nccl(
    topo: Topology, runs: list[nccl_tests.Run], source_of: dict[Path, str], sources: dict[str, Source]
) -> tuple[MechanismSpec, list[Curve], tuple[Fit, ...], list[str]]:
    """NCCL's mechanism with each imported collective's regimes, the curves and fits behind them, and lines to log."""
    by_kind: dict[Collective, nccl_tests.Run] = {}
    for run in runs:
        if run.collective in by_kind:
            other = by_kind[run.collective]
            raise ValueError(
                f"{run.path}:{run.line}: {run.collective.value} is timed in {other.path}:{other.line} too: import one"
            )
        by_kind[run.collective] = run
    worlds = {run.num_ranks for run in runs}
    if len(worlds) > 1:
        raise ValueError(f"{runs[0].path}: the runs use {sorted(worlds)} ranks: NCCL's regimes come from one count")
    (world,) = worlds
    nodes = max(1, *(len(run.hosts) for run in runs))
    per_node = world // nodes
    if per_node > topo.gpus_per_node or (world > topo.num_gpus and nodes == 1):
        raise ValueError(
            f"{runs[0].path}: it ran {per_node} ranks per node, more than {topo.name}'s {topo.gpus_per_node} GPUs per "
            "node: choose the preset or topology file of that node"
        )
    curves = [_curve(run) for run in runs]
    for run in runs:
        if len(run.rows) < 2:
            raise ValueError(f"{run.path}:{run.line}: one size only: NCCL's regimes need two sizes or more (-b/-e)")
    fits, _ = fit_curves(tuple(curves), world, chained_nccl=True)
    regimes = nccl_regimes(fits, world)
    link = topo.scaleup.total_bandwidth_Bps
    for run in runs:
        top = max(regimes[run.collective.value], key=lambda r: r.peak_bandwidth_Bps)
        if top.peak_bandwidth_Bps > link * 1.0001:
            nvls = " (NCCL ran it in-network, NVLS: rerun with NCCL_NVLS_ENABLE=0 or NCCL_ALGO=Ring)"
            raise ValueError(
                f"{run.path}:{run.line}: {run.collective.value} moves {fmt_Bps(top.peak_bandwidth_Bps)} of link bytes "
                f"per rank, above {topo.name}'s scale-up link ({fmt_Bps(link)} per direction)"
                + (nvls if run.collective is Collective.ALL_REDUCE and topo.scaleup.multicast else "")
                + ": is BASE this node?"
            )
    names = [source_of[run.path] for run in runs]
    if len(names) == 1:
        collectives_src = names[0]
    else:
        collectives_src = "import-nccl-tests"
        sources[collectives_src] = Source("measured", "; ".join(sources[n].cite for n in dict.fromkeys(names)))
    old = topo.mechanisms["nccl"]
    merged = dict(old.collectives) if old.available else {}
    merged |= regimes
    src = dict(old.sources) if old.available else {}
    src |= {"collectives": collectives_src}
    note = f"NCCL's regimes of {', '.join(k.value for k in by_kind)} imported from nccl-tests ({world} ranks"
    note += f", {nodes} nodes: a cross-node rate)" if nodes > 1 else ")"
    if old.tuning is not None:  # measured curves price NCCL here, not the base's model of NCCL's own choices
        note += "; they replace the base's model of NCCL's tuning"
    latency, peak = old.latency_s, old.peak_bandwidth_Bps
    if "all-reduce" in regimes:  # the mechanism's general α and β, as the probe sets them: the all-reduce's
        latency, peak = regimes["all-reduce"][0].latency_s, regimes["all-reduce"][-1].peak_bandwidth_Bps
        src |= {"latency_s": source_of[by_kind[Collective.ALL_REDUCE].path]}
        src |= {"peak_bandwidth_Bps": source_of[by_kind[Collective.ALL_REDUCE].path]}
    elif not old.available:
        first = next(iter(regimes.values()))
        latency, peak = first[0].latency_s, first[-1].peak_bandwidth_Bps
        src |= {"latency_s": collectives_src, "peak_bandwidth_Bps": collectives_src}
    ctas = old.num_ctas_default if old.available and old.num_ctas_default else NCCL_CHANNELS
    step = NCCL_STEP_S  # the step the regimes' α was reduced by (nccl_regimes): the model charges it back
    sources |= NCCL_SOURCES
    src |= {"step_latency_s": "nccl-tuning"}
    if not (old.available and old.num_ctas_default):
        src |= {"num_ctas_default": "nccl-channels"}
    src |= {"per_cta_bandwidth_Bps": src.get("peak_bandwidth_Bps", collectives_src)}
    spec = dataclasses.replace(
        old if old.available else MechanismSpec(True, latency, peak, peak / ctas),
        available=True,
        latency_s=latency,
        peak_bandwidth_Bps=peak,
        per_cta_bandwidth_Bps=peak / ctas,
        num_ctas_default=ctas,
        step_latency_s=step,
        note=note,
        sources=src,
        collectives=merged,
        tuning=None,
    )
    lines = []
    for run in runs:
        worst = max(f.size_max_rel_error for f in fits if f.curve == f"nccl {run.collective.value}")
        lines.append(
            f"{run.path}: {run.collective.value}, {len(run.rows)} sizes on {world} ranks: "
            f"{_plural(len(regimes[run.collective.value]), 'regime')}, at most {worst:.1%} below a measured time"
        )
    return spec, curves, fits, lines


def _corrected(rate_Bps: float, alpha_s: float, buffer: int) -> float:
    """The peak that a copy measured at `rate_Bps` over `buffer` bytes implies after α: S / (S / rate − α), so the
    roof (α + S/β) stays at or below the measured time; the rate itself where α would not leave time to copy."""
    t = buffer / rate_Bps
    return buffer / (t - alpha_s) if t > 2 * alpha_s else rate_Bps


def _pair_flags(path: Path, case: nvbandwidth.Testcase) -> list[str]:
    """A pair of GPUs more than 10% below the median pair of one testcase (a degraded link or switch port)."""
    values = case.values_GBps
    if len(values) < 2:
        return []
    median = statistics.median(values)
    return [
        f"{path.name}: {case.name}: GPU {i} / GPU {j} {v:.1f} GB/s, below the median pair's {median:.1f} GB/s"
        for i, row in enumerate(case.matrix)
        for j, v in enumerate(row)
        if v is not None and v < 0.9 * median
    ]


def _copies(
    topo: Topology, outputs: list[nvbandwidth.Output], source_of: dict[Path, str]
) -> tuple[dict[str, MechanismSpec], dict[str, float], list[str], list[str], set[Path]]:
    """The copy engine's and the SM copies' peaks and both-ways rates from nvbandwidth, the host-link ceilings, health
    flags, lines to log, and the files any of it came from."""
    mechanisms = dict(topo.mechanisms)
    ceilings: dict[str, float] = {}
    flags, lines = [], []
    used: set[Path] = set()
    link = topo.scaleup.total_bandwidth_Bps
    for out in outputs:
        buffer = out.buffer_bytes or NVBW_DEFAULT_BUFFER
        for name, case in out.testcases.items():
            values = case.values_GBps
            if name in HOST and values:
                ceilings[HOST[name]] = max(ceilings.get(HOST[name], 0.0), max(values) * 1e9)
                used.add(out.path)
                continue
            if name not in COPIES or not values:
                if name not in HOST:
                    lines.append(f"{out.path}: {name}: not a rate pkroof models; not used")
                continue
            mechanism, what, divisor = COPIES[name]
            spec = mechanisms[mechanism]
            if not spec.available:
                lines.append(f"{out.path}: {name}: {mechanism} is unavailable on {topo.name}; not used")
                continue
            rate = max(values) * 1e9 / divisor
            flags += _pair_flags(out.path, case)
            best = _corrected(rate, spec.latency_s, buffer)
            if best > link * 1.0001:
                raise ValueError(
                    f"{out.path}:{case.line}: {name} measured {fmt_Bps(rate)}, above {topo.name}'s scale-up link "
                    f"({fmt_Bps(link)} per direction): is BASE this node?"
                )
            best = min(best, link)
            src = source_of[out.path]
            if what == "peak":
                if "peak_bandwidth_Bps" in spec.sources and spec.sources["peak_bandwidth_Bps"] == src:
                    best = max(best, spec.peak_bandwidth_Bps)  # read and write of one file: the faster
                per_cta = spec.per_cta_bandwidth_Bps
                duplex = spec.duplex_bandwidth_Bps
                spec = dataclasses.replace(
                    spec,
                    peak_bandwidth_Bps=best,
                    per_cta_bandwidth_Bps=None if per_cta is None else min(per_cta, best),
                    duplex_bandwidth_Bps=None if duplex is None else min(duplex, best),
                    sources=spec.sources | {"peak_bandwidth_Bps": src},
                    note=f"{spec.note}; peak from nvbandwidth {name} ({fmt_Bps(rate)}, best pair)".lstrip("; "),
                )
            else:
                spec = dataclasses.replace(
                    spec,
                    duplex_bandwidth_Bps=min(rate, spec.peak_bandwidth_Bps),
                    sources=spec.sources | {"duplex_bandwidth_Bps": src},
                    note=f"{spec.note}; both ways from nvbandwidth {name} ({fmt_Bps(rate)})".lstrip("; "),
                )
            mechanisms[mechanism] = spec
            used.add(out.path)
            lines.append(f"{out.path}: {name}: {mechanism} {'peak' if what == 'peak' else 'both ways'} {fmt_Bps(rate)}")
    return mechanisms, ceilings, flags, lines, used


def _probe(
    topo: Topology,
    files: list[Path],
    curves: list[Curve],
    fits: tuple[Fit, ...],
    ceilings: dict[str, float],
    flags: list[str],
    notes: list[str],
    versions: dict[str, str],
    hosts: list[str],
) -> Probe:
    """The probe record of the result: BASE's, with the imported curves and fits in place of its own of the same
    name; a new one, naming this import as its command, where BASE had none."""
    command = f"{IMPORTED} {topo.name} " + " ".join(str(f) for f in files)
    old = topo.probe
    if old is None:
        return Probe(
            host=", ".join(hosts) or "unknown (the imported files name no host)",
            date=datetime.now(UTC).isoformat(timespec="seconds"),
            command=command,
            versions=versions,
            duration_s=0.0,
            quick=False,
            curves=tuple(curves),
            fits=fits,
            ceilings=ceilings,
            clocks_before={},
            clocks_after={},
            health=tuple(flags),
            notes=tuple(notes),
        )
    names = {c.name for c in curves}
    kept_fits = tuple(f for f in old.fits if f.curve not in names)
    return dataclasses.replace(
        old,
        curves=tuple(c for c in old.curves if c.name not in names) + tuple(curves),
        fits=kept_fits + fits,
        ceilings=old.ceilings | ceilings,
        health=old.health + tuple(f for f in flags if f not in old.health),
        notes=(*old.notes, f"calibrated later: {command}", *notes),
    )


def calibrate(
    base: str | Topology, files: list[Path], *, name: str | None = None
) -> tuple[Topology, list[str], list[nccl_tests.Run]]:
    """BASE calibrated by `files` (nccl-tests and nvbandwidth output, in any mix), one line per thing done, and the
    nccl-tests runs read (analysis/imported_runs.py holds the result to them: no measured time below its roof)."""
    topo = base if isinstance(base, Topology) else resolve(base)
    if not files:
        raise ValueError("name at least one file of nccl-tests or nvbandwidth output")
    files = [Path(f) for f in files]
    sources = dict(topo.sources)
    source_of: dict[Path, str] = {}
    runs: list[nccl_tests.Run] = []
    outputs: list[nvbandwidth.Output] = []
    date = datetime.now(UTC).date().isoformat()
    for path in files:
        kind = _kind(path)
        if kind == "nccl-tests":
            found = nccl_tests.parse(path)
            runs += found
            said = "; ".join(_nccl_run_said(r) for r in found)
        else:
            out = nvbandwidth.parse(path)
            outputs.append(out)
            said = ", ".join(
                [f"nvbandwidth {out.version}" if out.version else "nvbandwidth"]
                + ([f"driver {out.driver}"] if out.driver else [])
                + ([", ".join(dict.fromkeys(out.devices))] if out.devices else [])
            )
        source_of[path] = _source_id(path, sources)
        sources[source_of[path]] = Source(
            "measured", f"{kind} output {path.name} (sha256 {_digest(path)}): {said}; imported by {IMPORTED}, {date}"
        )
    lines: list[str] = []
    mechanisms, curves, fits, ceilings, flags = dict(topo.mechanisms), [], (), {}, []
    set_from: set[Path] = set()
    if outputs:
        mechanisms, ceilings, flags, copy_lines, set_from = _copies(topo, outputs, source_of)
        lines += copy_lines
    if runs:
        spec, curves, fits, nccl_lines = _nccl(topo, runs, source_of, sources)
        mechanisms["nccl"] = spec
        lines += nccl_lines
    gpus = {g for r in runs for g in r.gpu_names} | {d for o in outputs for d in o.devices}
    if gpus and topo.gpu.name not in gpus:
        lines.append(f"note: the files ran on {', '.join(sorted(gpus))}; {topo.name} describes {topo.gpu.name}")
    versions = {}
    for tool, found in (("nccl", [r.nccl_version for r in runs]), ("nvbandwidth", [o.version for o in outputs])):
        if any(found):
            versions[tool] = ", ".join(dict.fromkeys(v for v in found if v))
    notes = [f"{c.name}: the faster of out-of-place and in-place at each size (nccl-tests' average)" for c in curves]
    hosts = list(dict.fromkeys(h for r in runs for h in r.hosts))
    used = {i for spec in mechanisms.values() for i in spec.sources.values()}
    used |= {i for spec in mechanisms.values() if spec.tuning is not None for i in spec.tuning.sources.values()}
    used |= {i for r in (topo.gpu, topo.scaleup, topo.nic) if r is not None for i in r.sources.values()}
    try:
        result = dataclasses.replace(
            topo,
            name=name or f"{topo.name}+imported",
            description=f"{topo.description}; calibrated by {IMPORTED} from {', '.join(f.name for f in files)}",
            mechanisms=mechanisms,
            sources={k: v for k, v in sources.items() if k in used},
            probe=_probe(topo, files, curves, fits, ceilings, flags, notes, versions, hosts),
        )
    except ValueError as e:
        raise ValueError(f"{', '.join(map(str, files))}: the calibrated topology is refused ({e})") from None
    set_from |= {r.path for r in runs}
    unused = [str(f) for f in files if f not in set_from]
    if unused:
        lines.append(f"nothing pkroof models was set from {', '.join(unused)}")
    return result, lines, runs
