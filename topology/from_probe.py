"""Turn a probe's raw record (curves, ceilings) and NVML discovery into a measured Topology with fitted mechanisms.

Pure data work: no torch, no devices, so it is tested on recorded probe output.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

from pkroof.rooflines import Collective
from pkroof.rooflines.algorithms import nccl_traffic
from pkroof.runtime.nvml import NA

from .discover import Discovery
from .fit import (
    CtaFit,
    SizeFit,
    efficient_size_bytes,
    envelope_chain,
    envelope_cta_sweep,
    envelope_regimes,
    envelope_size_sweep,
)
from .model import GPU, NIC, CollectiveFit, Curve, Fit, MechanismSpec, Probe, ScaleUp, Source, Topology, set_numbers

ARCH = {(8, 0): "ampere", (8, 6): "ampere", (8, 9): "ada", (9, 0): "hopper", (10, 0): "blackwell"}
NVLINK_LINK_Bps = {"NVLink 3.0": 25e9, "NVLink 4.0": 25e9, "NVLink 5.0": 50e9}  # data rate per link, one way
NCCL_STEP_S = 0.47e-6  # NCCL's tuning model, ring LL per NVLink step (src/graph/tuning.cc)
NCCL_CHANNELS = 32
DTYPES = ("bf16", "fp16", "fp8", "tf32", "fp32")
NCCL_KINDS = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all", "send-recv")  # what the probe times
NCCL_SOURCES = {
    "nccl-tuning": Source(
        "nominal", "NCCL's own cost model, src/graph/tuning.cc: ring LL protocol latency 0.47 µs per NVLink step"
    ),
    "nccl-channels": Source("nominal", "assumption: NCCL runs one CTA per channel, up to 32 channels"),
}


def _curve(curves: dict[str, Curve], name: str) -> Curve | None:
    return curves.get(name)


def _size_fit(curve: Curve) -> SizeFit:
    return envelope_size_sweep(curve.x, curve.median_s)


def _cta_fit(curve: Curve) -> CtaFit:
    return envelope_cta_sweep([int(k) for k in curve.x], [curve.size_bytes / t for t in curve.median_s])


def _ctas_for_90(curve: Curve) -> int:
    """Smallest sampled CTA count reaching 90% of the sweep's best bandwidth: read off the samples, not the fit."""
    bandwidths = [curve.size_bytes / t for t in curve.median_s]
    target = 0.9 * max(bandwidths)
    return int(next(k for k, bw in zip(curve.x, bandwidths, strict=True) if bw >= target))


def _fit(mechanism: str, size_curve: Curve, cta_curve: Curve | None) -> Fit:
    """The lower envelope of the samples (a model no measurement beats): α and the peak from the size sweep at
    full CTAs, bandwidth per CTA from the CTA sweep, the peak the larger of the two sweeps' best rates."""
    sf = _size_fit(size_curve)
    per_cta, ctas_90, cta_error = None, 0, 0.0
    if cta_curve is not None:
        cf = _cta_fit(cta_curve)
        per_cta, ctas_90, cta_error = cf.per_cta_bandwidth_Bps, _ctas_for_90(cta_curve), cf.max_rel_error
    return Fit(
        mechanism,
        size_curve.name,
        sf.latency_s,
        sf.bandwidth_Bps,
        per_cta,
        sf.bandwidth_Bps,
        ctas_90,
        efficient_size_bytes(sf),
        sf.max_rel_error,
        cta_error,
    )


def _nccl_fits(curve: Curve, world: int, *, chained: bool = False) -> list[Fit]:
    """t against the link bytes of one call (ring all-reduce: 2(n−1)/n·S), so β is a link rate like the others;
    one line per size regime NCCL's protocol and channel choices make (fit.envelope_regimes; `chained`: the runs
    share their ends and there may be more of them, fit.envelope_chain, for nccl-tests' dense sweeps)."""
    kind = Collective(curve.name.removeprefix("nccl "))
    fitter = envelope_chain if chained else envelope_regimes
    regimes = fitter([nccl_traffic(kind, s, world).bytes for s in curve.x], curve.median_s)
    return [
        Fit(
            "nccl",
            curve.name,
            sf.latency_s,
            sf.bandwidth_Bps,
            None,
            sf.bandwidth_Bps,
            0,
            efficient_size_bytes(sf),
            sf.max_rel_error,
            0.0,
            regime,
        )
        for regime, sf in enumerate(regimes)
    ]


def fit_curves(
    curves: tuple[Curve, ...], world: int, *, chained_nccl: bool = False
) -> tuple[tuple[Fit, ...], list[str]]:
    """One Fit per mechanism that has curves (NCCL's fitted as _nccl_fits(chained=chained_nccl)); notes on the
    choices made."""
    by_name = {c.name: c for c in curves if c.verified}
    fits, notes = [], []
    for mech, direction in (("copy-engine", "pull"), ("sm-load", "pull"), ("sm-store", "push")):
        size = _curve(by_name, f"{mech} {direction}")
        if size is not None:
            fits.append(_fit(mech, size, _curve(by_name, f"{mech} {direction} by CTAs")))
    tma = [
        _fit("tma", by_name[f"tma {d}"], _curve(by_name, f"tma {d} by CTAs"))
        for d in ("pull", "push")
        if f"tma {d}" in by_name
    ]
    if tma:
        best = max(tma, key=lambda f: f.peak_bandwidth_Bps)
        fits.append(best)
        notes.append(f"tma: the {best.curve.split()[-1]} direction is the faster and is the one modelled")
    for kind in NCCL_KINDS:  # all-reduce first: the mechanism's general model comes from it
        curve = _curve(by_name, f"nccl {kind}")
        if curve is not None:
            fits += _nccl_fits(curve, world, chained=chained_nccl)
    net = _curve(by_name, "network send-recv")
    if net is not None:
        fits.append(_fit("network", net, None))
    unverified = [c.name for c in curves if not c.verified]
    if unverified:
        notes.append("not used, bytes did not verify: " + ", ".join(unverified))
    return tuple(fits), notes


def _known(value: Any) -> bool:
    return not isinstance(value, NA)


NO_PEER = "one GPU: no peer to move data to"


def _no_peer(discovery: Discovery) -> ScaleUp:
    """One GPU: no link to a peer. Its own NVLinks (to switches this node does not offer it) are said, not used."""
    gpu = discovery.gpus[0]
    active = [link for link in gpu.nvlinks if link.state == "ACTIVE"]
    said = f"none (one GPU; {len(active)} NVLinks active on it)" if active else "none (one GPU)"
    return ScaleUp("none", said, 0, 0.0, 0, False, {})


def _scaleup(discovery: Discovery, sources: dict[str, Source]) -> ScaleUp:
    gpu = discovery.gpus[0]
    active = [link for link in gpu.nvlinks if link.state == "ACTIVE"]
    if not active:
        sources["pcie-spec"] = Source(
            "nominal",
            "PCI Express specification: 16 GT/s x16 = 31.5 GB/s per direction (Gen4); 32 GT/s x16 = 63 GB/s (Gen5)",
        )
        gen = gpu.pcie_generation_max if _known(gpu.pcie_generation_max) else 4
        per_lane = {3: 0.985e9, 4: 1.969e9, 5: 3.938e9}.get(gen, 1.969e9)
        width = gpu.pcie_width_max if _known(gpu.pcie_width_max) else 16
        return ScaleUp(
            "pcie",
            f"PCIe {gen}.0 x{width}",
            1,
            per_lane * width,
            0,
            False,
            {"links_per_gpu": "pcie-spec", "link_bandwidth_Bps": "pcie-spec"},
        )
    version = active[0].version if _known(active[0].version) else "NVLink 4.0"
    switch = all(link.remote_type == "SWITCH" for link in active)
    switches = discovery.num_nvswitches if _known(discovery.num_nvswitches) else 0
    multicast = bool(discovery.multicast_supported) if _known(discovery.multicast_supported) else False
    sources["nvml"] = Source(
        "nominal",
        "NVML on the probed node: active NVLinks, their version, remote type and "
        "raw speed per direction (NVML_FI_DEV_NVLINK_GET_SPEED)",
    )
    speeds = [link.speed_MBps for link in active if _known(link.speed_MBps)]
    if speeds:
        per_link, src = min(speeds) * 1e6, {"links_per_gpu": "nvml", "link_bandwidth_Bps": "nvml"}
    else:
        sources["nvlink-spec"] = Source(
            "nominal",
            "NVLink data rate per link per direction: 25 GB/s for NVLink 3.0 "
            "and 4.0, 50 GB/s for 5.0 (NVIDIA A100/H100/Blackwell whitepapers)",
        )
        per_link = NVLINK_LINK_Bps.get(version, 25e9)
        src = {"links_per_gpu": "nvml", "link_bandwidth_Bps": "nvlink-spec"}
    if switches:
        src["switches_per_node"] = "nvml"
    return ScaleUp(
        "nvswitch" if switch else "nvlink", version, len(active), per_link, switches, multicast and switch, src
    )


def _nic(discovery: Discovery, fits: tuple[Fit, ...], sources: dict[str, Source]) -> NIC | None:
    """Active HCA ports from sysfs; failing those, the network path NCCL took between nodes, as measured."""
    ports = [p for p in discovery.hca_ports if _known(p.state) and p.state == "ACTIVE" and _known(p.rate_text)]
    if ports:
        gbit = float(re.match(r"\s*([0-9.]+)", str(ports[0].rate_text)).group(1))
        sources["sysfs-hca"] = Source("nominal", "rate and link layer of the active HCA ports in /sys/class/infiniband")
        sources["ib-latency-assumed"] = Source(
            "nominal",
            "assumption, not a measurement: 3 µs GPU-to-GPU one way "
            "through one InfiniBand switch level with GPUDirect RDMA",
        )
        kind = "infiniband" if ports[0].link_layer == "InfiniBand" else "roce"
        return NIC(
            kind,
            ports[0].device,
            len(ports),
            gbit * 1e9 / 8,
            3e-6,
            discovery.gpudirect_rdma,
            True,
            {"count_per_node": "sysfs-hca", "rate_Bps": "sysfs-hca", "latency_s": "ib-latency-assumed"},
        )
    net = next((f for f in fits if f.mechanism == "network"), None)
    if net is None:
        return None
    return NIC(
        "ethernet",
        "no HCA found: the transport NCCL chose between nodes",
        1,
        net.bandwidth_Bps,
        max(net.latency_s, 1e-9),
        discovery.gpudirect_rdma,
        False,
        {"count_per_node": "probe", "rate_Bps": "probe", "latency_s": "probe"},
    )


def duplex_rates(curves: tuple[Curve, ...]) -> dict[str, float]:
    """Per mechanism, the peak rate per direction of the lower envelope of its verified bidirectional curve (both
    GPUs sending to each other at once)."""
    return {
        c.mechanism: _size_fit(c).bandwidth_Bps
        for c in curves
        if c.verified and c.name == f"{c.mechanism} bidirectional" and c.sweep == "size"
    }


def _mechanisms(
    fits: tuple[Fit, ...], ceilings: dict[str, float], world: int, nodes: int, duplex: dict[str, float]
) -> dict[str, MechanismSpec]:
    by = {f.mechanism: f for f in fits if f.mechanism != "nccl"}
    nccl: dict[str, list[Fit]] = {}  # collective → its regimes, smallest sizes first
    for f in sorted((f for f in fits if f.mechanism == "nccl"), key=lambda f: f.regime):
        nccl.setdefault(f.curve.removeprefix("nccl "), []).append(f)
    step = ceilings.get("flag_one_way_s")
    out: dict[str, MechanismSpec] = {}
    for mech in ("copy-engine", "sm-load", "sm-store", "tma"):
        f = by.get(mech)
        if f is None:
            why = NO_PEER if world == 1 else "not measured: needs two GPUs of one node"
            out[mech] = MechanismSpec(False, 0.0, 0.0, None, note=why)
            continue
        src = {"latency_s": "probe", "peak_bandwidth_Bps": "probe"}
        if f.per_cta_bandwidth_Bps:
            src["per_cta_bandwidth_Bps"] = "probe"
        use_step = step if (mech != "copy-engine" and step) else None
        if use_step:
            src["step_latency_s"] = "probe"
        note = f"lower envelope of '{f.curve}' (at most {f.size_max_rel_error:.0%} faster than a sample)"
        if f.ctas_for_90pct:
            note += f"; 90% of the sweep's best at {f.ctas_for_90pct} CTAs (measured)"
        both = min(duplex[mech], f.peak_bandwidth_Bps) if mech in duplex else None
        if both:
            src["duplex_bandwidth_Bps"] = "probe"
            note += f"; both ways at once {both / 1e9:.0f} GB/s per direction"
        out[mech] = MechanismSpec(
            True, f.latency_s, f.peak_bandwidth_Bps, f.per_cta_bandwidth_Bps, 0, note, use_step, src,
            duplex_bandwidth_Bps=both,
        )  # fmt: skip
    multimem = NO_PEER if world == 1 else "not measured: NVLink multicast stays off"
    out["multimem"] = MechanismSpec(False, 0.0, 0.0, None, note=multimem)
    if "all-reduce" not in nccl:
        why = NO_PEER if world == 1 else "the probe could not measure NCCL"
        out["nccl"] = MechanismSpec(False, 0.0, 0.0, None, note=why)
    else:
        collectives = nccl_regimes(fits, world)
        # for collectives the probe did not time: the all-reduce's small-size α and large-size β (optimistic
        # between its regimes, so the headroom quoted over NCCL there is understated, never overstated)
        small, large = collectives["all-reduce"][0], collectives["all-reduce"][-1]
        src = {
            "latency_s": "probe",
            "peak_bandwidth_Bps": "probe",
            "step_latency_s": "nccl-tuning",
            "per_cta_bandwidth_Bps": "nccl-channels",
            "num_ctas_default": "nccl-channels",
            "collectives": "probe",
        }
        out["nccl"] = MechanismSpec(
            True,
            small.latency_s,
            large.peak_bandwidth_Bps,
            large.peak_bandwidth_Bps / NCCL_CHANNELS,
            NCCL_CHANNELS,
            f"ring all-reduce, {world} ranks: α of its smallest-size regime, β of its largest; each collective the"
            " probe timed has its own regimes"
            + (
                f"; measured across {nodes} nodes, so a cross-node rate: pessimistic for NCCL within one node"
                if nodes > 1
                else ""
            ),
            NCCL_STEP_S,
            src,
            collectives,
        )
    return out


def nccl_regimes(fits: tuple[Fit, ...], world: int) -> dict[str, tuple[CollectiveFit, ...]]:
    """Each collective's NCCL regimes (smallest sizes first) from its fits on `world` ranks, as the model charges
    them (α less the steps after the first, _nccl_collective)."""
    out: dict[str, list[CollectiveFit]] = {}
    for f in sorted((f for f in fits if f.mechanism == "nccl"), key=lambda f: f.regime):
        kind = f.curve.removeprefix("nccl ")
        out.setdefault(kind, []).append(_nccl_collective(kind, f, world))
    return {kind: tuple(regimes) for kind, regimes in out.items()}


def _nccl_collective(kind: str, fit: Fit, world: int) -> CollectiveFit:
    """The fitted α covers the call's whole chain of steps; the model charges α + (steps − 1)·step, so take the
    steps NCCL's tuning model charges back off (never below one step)."""
    steps = nccl_traffic(Collective(kind), 1.0, world).num_steps
    alpha = max(fit.latency_s - (steps - 1) * NCCL_STEP_S, NCCL_STEP_S)
    return CollectiveFit(alpha, fit.peak_bandwidth_Bps)


def build_topology(name: str, record: dict[str, Any], discovery: Discovery, probe: Probe) -> Topology:
    """The measured topology of the probed node: GPU ceilings, fitted mechanisms, NVML's links and NICs."""
    world, local = record["world"], record.get("local_world", record["world"])
    sources = {"probe": Source("measured", f"{probe.command} on {probe.host}, {probe.date}"), **NCCL_SOURCES}
    ceilings = probe.ceilings
    flops = {d: ceilings[f"matmul_{d}_flops"] for d in DTYPES if f"matmul_{d}_flops" in ceilings}
    # never above the burst: a run-to-run difference must not make the roof slower than a prediction
    sustained = {
        d: min(ceilings[f"matmul_{d}_sustained_flops"], flops[d])
        for d in flops
        if f"matmul_{d}_sustained_flops" in ceilings
    }
    gpu = GPU(
        record["gpu_name"],
        ARCH.get(tuple(record["capability"]), "unknown"),
        record["sm_count"],
        record["hbm_capacity_bytes"],
        ceilings["hbm_copy_Bps"],
        flops,
        {"sm_count": "probe", "hbm_capacity_bytes": "probe", "hbm_bandwidth_Bps": "probe", "peak_flops": "probe"}
        | ({"sustained_flops": "probe"} if sustained else {}),
        sustained,
    )
    scaleup = _no_peer(discovery) if world == 1 else _scaleup(discovery, sources)
    nic = _nic(discovery, probe.fits, sources)
    mechanisms = _mechanisms(probe.fits, ceilings, world, world // local, duplex_rates(probe.curves))
    used = {i for r in (gpu, scaleup, nic, *mechanisms.values()) if r is not None for i in r.sources.values()}
    nodes = world // local
    where = f"{nodes} nodes x {local}" if nodes > 1 else f"{world}x"
    return Topology(
        name=name,
        description=f"{where} {record['gpu_name']} measured by pkroof probe on {probe.host}, {probe.date[:10]}"
        + (" (one GPU: no peer, so compute and memory only)" if world == 1 else ""),
        nodes=nodes,
        gpus_per_node=local,
        gpu=gpu,
        scaleup=scaleup,
        mechanisms=mechanisms,
        nic=nic,
        sources={k: v for k, v in sources.items() if k in used},
        probe=probe,
    )


def refit(topology: Topology) -> Topology:
    """Re-derive the fits and the mechanisms of a probed topology from its recorded curves (after a model change)."""
    if topology.probe is None:
        raise ValueError(f"{topology.name} holds no probe measurements to fit")
    if any(note.startswith("calibrated later: pkroof topology import") for note in topology.probe.notes) or (
        topology.probe.command.startswith("pkroof topology import")
    ):
        raise ValueError(
            f"{topology.name} was calibrated by pkroof topology import: refit its base, then import the same files "
            "again (a refit would fit the imported curves as the probe's)"
        )
    world = topology.nodes * topology.gpus_per_node  # the ranks the probe ran, as in build_topology
    fits, notes = fit_curves(topology.probe.curves, world)
    probe = dataclasses.replace(
        topology.probe, fits=fits, notes=tuple(n for n in topology.probe.notes if n not in notes) + tuple(notes)
    )
    fresh = _mechanisms(fits, probe.ceilings, world, topology.nodes, duplex_rates(probe.curves))
    mechanisms = _kept_handoffs(fresh, topology.mechanisms)
    sources = dict(topology.sources) | NCCL_SOURCES
    records = (topology.gpu, topology.scaleup, topology.nic, *mechanisms.values())
    records += tuple(m.tuning for m in mechanisms.values() if m.tuning is not None)  # NCCL's cited tuning
    used = {i for r in records if r is not None for i in r.sources.values()}
    return dataclasses.replace(
        topology, mechanisms=mechanisms, probe=probe, sources={k: v for k, v in sources.items() if k in used}
    )


CALIBRATED = ("handoff_s", "ll_handoff_s", "overlap_s")  # set by `pkroof topology calibrate`, not by the probe


def _kept_handoffs(fresh: dict[str, MechanismSpec], before: dict[str, MechanismSpec]) -> dict[str, MechanismSpec]:
    """A refit re-derives what the probe measured; hand-offs and fused kernels' fixed costs come from profiled
    kernels, so they stay."""
    out = dict(fresh)
    for name, spec in fresh.items():
        old = before.get(name)
        if old is None or not spec.available:
            continue
        kept = {f: getattr(old, f) for f in CALIBRATED if f in set_numbers(old)}
        if kept:
            sources = spec.sources | {f: old.sources[f] for f in kept}
            out[name] = dataclasses.replace(spec, **kept, sources=sources)
    return out
