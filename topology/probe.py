"""`pkroof probe`: discover the node through NVML, start one process per GPU, measure, fit, write a topology file.

The parent process never touches CUDA: it reads NVML (before and after, for clocks and throttling), spawns
the ranks (topology/probe_worker.py), waits for them (Ctrl-C or a deadline terminates every one), then fits
the curves and writes the Topology. NVLink multicast stays off unless the caller allows it.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shlex
import socket
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from pkroof.runtime.launch import (
    ALLOW_MULTICAST,
    PORT_TAKEN_EXIT,
    PORT_TRIES,
    RankFailedError,
    RankTimeoutError,
    free_port,
    keep_multicast_off,
    start_ranks,
    stop_ranks,
    stopped_by_signals,
    wait_ranks,
)
from pkroof.runtime.nvml import NA, Nvml
from pkroof.runtime.process_tree import TEMP_PREFIX, reap_stale_folders

from .discover import Discovery, discover, health
from .files import decode, dump
from .from_probe import build_topology, fit_curves
from .model import Curve, Probe, Topology


class ProbeError(RuntimeError):
    """The probe cannot run here (no GPU, no torch, a rank failed); the message is one line for the user."""


class CannotProbeHereError(ProbeError):
    """Nothing to probe here, or asked for wrongly (no GPU, no torch, a bad --gpus): exit 2, as bad input."""


class _PortTakenError(ProbeError):
    """A rank's rendezvous port was taken before it listened (it exited with PORT_TAKEN_EXIT): start again."""


def _clocks(d: Discovery) -> dict[str, float]:
    out: dict[str, float] = {}
    for g in d.gpus:
        for key in ("sm_clock_MHz", "memory_clock_MHz", "power_W", "temperature_C"):
            value = getattr(g, key)
            if not isinstance(value, NA):
                out[f"gpu{g.index}_{key}"] = float(value)
        reasons = g.clock_event_reasons
        if not isinstance(reasons, NA):
            out[f"gpu{g.index}_throttle_reasons"] = float(len([r for r in reasons if r != "gpu_idle"]))
    return out


def _gpu_list(text: str | None, count: int) -> list[int]:
    if text is None:
        return list(range(count))
    try:
        gpus = [int(t) for t in text.split(",") if t.strip()]
    except ValueError:
        raise CannotProbeHereError(f"--gpus takes a comma-separated list of GPU indices, got {text!r}") from None
    bad = [g for g in gpus if not 0 <= g < count]
    if bad or len(set(gpus)) != len(gpus):
        raise CannotProbeHereError(f"--gpus {text}: this node has GPUs 0..{count - 1}, each listed once")
    return gpus


def spawn(target: Callable[..., None], world: int, args: tuple, deadline_s: float, log: Callable[[str], None]) -> None:
    """Run target(rank, world, *args) on `world` processes and wait; every process is gone when this returns."""
    with stopped_by_signals():  # SIGTERM or SIGHUP stop the ranks too, rather than orphan them
        procs = start_ranks(target, world, args)
        try:
            _wait(procs, deadline_s, log)
        finally:
            stop_ranks(procs)


def _wait(procs: list, deadline_s: float, log: Callable[[str], None]) -> None:
    try:
        wait_ranks(procs, deadline_s)
    except RankFailedError as e:
        if e.exitcode == PORT_TAKEN_EXIT:
            raise _PortTakenError(f"rank {e.rank}: its rendezvous port was taken") from None
        raise ProbeError(f"rank {e.rank} failed (exit code {e.exitcode}); its error is printed above") from None
    except RankTimeoutError:
        raise ProbeError(f"the probe did not finish in {deadline_s:.0f} s; its ranks were stopped") from None
    except KeyboardInterrupt:
        log("interrupted: stopping every rank")
        raise


def spawn_on_fresh_ports(
    target: Callable[..., None],
    world: int,
    args_for: Callable[[int], tuple],
    deadline_s: float,
    log: Callable[[str], None],
    while_starting: Callable[[], None] = lambda: None,
) -> None:
    """As spawn, with args_for(port) on a port picked just before; a rank that finds the port taken (the port was
    free when picked, but not when rank 0 listened) makes all start again on another, up to PORT_TRIES times.
    while_starting runs once, while the first ranks start."""
    for attempt in range(PORT_TRIES):
        with stopped_by_signals():
            procs = start_ranks(target, world, args_for(free_port()))
            try:
                if attempt == 0:
                    while_starting()
                _wait(procs, deadline_s, log)
                return
            except _PortTakenError as e:
                if attempt + 1 == PORT_TRIES:
                    raise ProbeError(f"{e} on {PORT_TRIES} tries; is something on this node taking ports?") from None
                log(f"{e}; starting the ranks again on another port")
            finally:
                stop_ranks(procs)


def launched_by_torchrun() -> bool:
    """True in a process that torchrun (or srun with the same variables) started: one rank of many."""
    return all(key in os.environ for key in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR"))


def _pair_flags(pairs: dict[str, float]) -> list[str]:
    """A GPU pair more than 10% below the median pair is worth a look (a degraded link or switch port)."""
    if len(pairs) < 2:
        return []
    median = sorted(pairs.values())[len(pairs) // 2]
    return [
        f"GPU pair {k}: {v / 1e9:.0f} GB/s, below the median pair's {median / 1e9:.0f} GB/s"
        for k, v in pairs.items()
        if v < 0.9 * median
    ]


def _measure_spawned(
    nvml: object, chosen: list[int], plan: object, quick: bool, log: Callable[[str], None]
) -> tuple[dict, Discovery]:
    from .probe_rank import run_rank

    start = time.monotonic()
    found: list[Discovery] = []

    def discover_nodes() -> None:  # while the ranks import torch and set up NCCL: still before any load
        found.append(discover(nvml))
        log(f"NVML discovery: {len(found[0].gpus)} x {found[0].gpus[0].name} in {time.monotonic() - start:.1f} s")

    reap_stale_folders()  # what a probe or profile killed with SIGKILL left behind
    with tempfile.TemporaryDirectory(prefix=f"{TEMP_PREFIX}{os.getpid()}-probe-") as tmp:
        results = Path(tmp) / "results.json"
        spawn_on_fresh_ports(
            run_rank,
            len(chosen),
            lambda port: (port, plan, str(results), chosen),
            300 if quick else 900,
            log,
            while_starting=discover_nodes,
        )
        if not results.exists():
            raise ProbeError("the ranks finished without writing results")
        return json.loads(results.read_text()), found[0]


def _measure_launched(nvml: object, plan: object) -> tuple[dict | None, Discovery]:
    """This process is one rank of a torchrun/srun job: measure in-process; only global rank 0 gets the record."""
    import torch.distributed as dist

    from .probe_worker import run

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    before = discover(nvml)
    reap_stale_folders()  # what a probe or profile killed with SIGKILL left behind
    with tempfile.TemporaryDirectory(prefix=f"{TEMP_PREFIX}{os.getpid()}-probe-") as tmp:
        results = Path(tmp) / "results.json"
        run(rank, world, 0, plan, str(results), [], exit_process=False)
        seen: list[dict | None] = [None] * world
        dist.all_gather_object(seen, _node_summary(before))  # what each node's NVML and sysfs saw
        if rank != 0:
            return None, before
        record = json.loads(results.read_text())
    record["notes"] += _node_notes(seen)
    return record, before


def _node_summary(d: Discovery) -> dict:
    ports = [f"{p.device}:{p.port} {p.rate_text} {p.link_layer}" for p in d.hca_ports if p.state == "ACTIVE"]
    return {"host": socket.gethostname(), "ports": ports, "gpudirect": d.gpudirect_rdma, "health": health(d)}


def _node_notes(seen: list[dict]) -> list[str]:
    """One line per node (its active HCA ports, GPUDirect RDMA, health), and a line if the nodes' NICs differ."""
    nodes = {s["host"]: s for s in seen}
    notes = [
        f"node {h}: {len(s['ports'])} active HCA ports ({', '.join(s['ports']) or 'none'}), GPUDirect RDMA "
        f"{'yes' if s['gpudirect'] else 'no'}" + "".join(f"; {f}" for f in s["health"])
        for h, s in nodes.items()
    ]
    if len({tuple(s["ports"]) for s in nodes.values()}) > 1:
        notes.append("the nodes' network ports differ: the slowest node sets the scale-out bandwidth")
    return notes


def probe(
    *,
    out: Path,
    quick: bool = False,
    gpus: str | None = None,
    allow_multicast: bool = False,
    name: str | None = None,
    log: Callable[[str], None] = lambda m: print(m, file=sys.stderr, flush=True),
    nvml: object | None = None,
    progress: Callable[[str], None] = lambda step: None,
) -> Topology | None:
    """Probe this node (or, under torchrun/srun, every node of the job); rank 0 writes `out` and returns it.
    `progress` hears each step that takes a while (the measurements, the fits)."""
    nvml = nvml or Nvml()
    count = nvml.query("nvmlDeviceGetCount")
    if isinstance(count, NA) or not count:
        reason = count.reason if isinstance(count, NA) else "NVML sees 0 GPUs"
        raise CannotProbeHereError(
            f"no NVIDIA GPU found here ({reason}); `pkroof presets` lists topologies to use instead"
        )
    if importlib.util.find_spec("torch") is None or importlib.util.find_spec("triton") is None:
        raise CannotProbeHereError("pkroof probe needs torch and triton: pip install 'pkroof[gpu]'")
    launched = launched_by_torchrun()
    chosen = [] if launched else _gpu_list(gpus, count)
    if not launched and not chosen:
        raise CannotProbeHereError("--gpus names no GPU")
    if allow_multicast:
        log("--allow-multicast: NCCL may use NVLS; pkroof itself still runs no multimem code")
        os.environ[ALLOW_MULTICAST] = "1"  # this probe's ranks leave the NVLS variables as the user has them
    else:
        os.environ.pop(ALLOW_MULTICAST, None)  # only the flag asks, never an inherited variable
        keep_multicast_off()
    from .probe_plan import make_plan

    plan = make_plan(quick=quick)
    start = time.monotonic()
    if launched:
        record, before = _measure_launched(nvml, plan)
        if record is None:
            return None
    else:
        if len(chosen) == 1:
            log("one GPU: its memory, matmul rates and host link; no transfers between GPUs (no peer)")
        log(f"probing {len(chosen)} GPU{'s' * (len(chosen) > 1)}{' quickly' if quick else ''}")
        progress(f"measuring {len(chosen)} GPU{'s' * (len(chosen) > 1)}: every mechanism at every size")
        record, before = _measure_spawned(nvml, chosen, plan, quick, log)
    flags = health(before) + _pair_flags(record["pairs"])
    for flag in flags:
        log(f"health: {flag}")
    after = discover(nvml)
    curves = tuple(decode(Curve, c, f"curves[{i}]") for i, c in enumerate(record["curves"]))
    progress("fitting the measured curves")
    fits, fit_notes = fit_curves(curves, record["world"])
    command = "pkroof probe" + "".join(f" {shlex.quote(a)}" for a in sys.argv[2:])
    record_probe = Probe(
        host=record["host"],
        date=record["date"],
        command=command if sys.argv[1:2] == ["probe"] else "pkroof.topology.probe.probe()",
        versions=record["versions"] | {"driver": str(before.driver_version)},
        duration_s=time.monotonic() - start,
        quick=quick,
        curves=curves,
        fits=fits,
        ceilings=record["ceilings"],
        clocks_before=_clocks(before),
        clocks_after=_clocks(after),
        health=tuple(flags + [f"after the probe: {f}" for f in health(after) if f not in flags]),
        notes=tuple(record["notes"] + fit_notes),
        pairs_Bps=record["pairs"],
    )
    topology = build_topology(name or f"probe-{record['host']}", record, before, record_probe)
    dump(topology, out)
    log(f"wrote {out} in {record_probe.duration_s:.1f} s")
    return topology
