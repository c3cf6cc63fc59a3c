"""Plain-text views for the terminal: presets, a topology, a bound, advice."""

from __future__ import annotations

import textwrap

from pkroof.rooflines import DTYPE_BYTES, Advice, Bound, Mechanism, Schedule, bus_bandwidth_factor
from pkroof.rooflines.analyze import Analysis
from pkroof.rooflines.mechanisms import label
from pkroof.rooflines.serialize import to_dict
from pkroof.rooflines.units import fmt_Bps, fmt_bytes, fmt_clock, fmt_flops, fmt_s
from pkroof.topology import PRESETS, ScaleUp, Topology, preset


def _table(header: list[str], rows: list[list[str]], *, width: int | None = None) -> str:
    """Columns two spaces apart; `width`: the last column wrapped so that no line is longer (its continuation lines
    under it), where the others leave it at least 30 characters."""
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    start = sum(widths[:-1]) + 2 * (len(widths) - 1)
    wrap = width is not None and width - start >= 30 and start + widths[-1] > width
    if wrap:
        widths[-1] = max(len(header[-1]), width - start)
    lines = []
    for row in [header, *rows]:
        *first, last = row
        parts = textwrap.wrap(last, widths[-1]) if wrap and len(last) > widths[-1] else [last]
        lines.append("  ".join(c.ljust(w) for c, w in zip([*first, parts[0]], widths, strict=True)).rstrip())
        lines += [" " * start + part for part in parts[1:]]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def presets_table() -> str:
    rows = []
    for name in PRESETS:
        t = preset(name)
        nic = f"{t.nic.count_per_node}x {t.nic.rate_Bps * 8 / 1e9:.0f} Gb/s" if t.nic else "-"
        rows.append(
            [
                name,
                f"{t.gpus_per_node}x {t.gpu.name}",
                t.scaleup.generation,
                fmt_Bps(t.scaleup.total_bandwidth_Bps),
                nic,
                t.description,
            ]
        )
    return _table(["preset", "GPUs per node", "scale-up", "per GPU, one way", "NICs", "what"], rows, width=120)


def _tag(t: Topology, path: str) -> str:
    return t.basis(path)  # "measured", "carried" (measured on another machine) or "nominal"


def _cite(v) -> str:
    """The cite, then where to read it, when and with what (where the source says)."""
    return "; ".join(x for x in (v.cite, v.url, v.date, v.software) if x)


def _switches(s: ScaleUp) -> str:
    if s.kind != "nvswitch":
        return "no switches"
    return f"{s.switches_per_node} switch chips" if s.switches_per_node else "switch count hidden by NVML"


def _scaleup_line(t: Topology) -> str:
    s = t.scaleup
    if s.kind == "none":
        return f"  scale-up: {s.generation}: no peer, so no communication is modelled"
    return (
        f"  scale-up: {s.kind}, {s.generation}, {s.links_per_gpu} links x {fmt_Bps(s.link_bandwidth_Bps)} = "
        f"{fmt_Bps(s.total_bandwidth_Bps)} per GPU per direction, {_switches(s)}, "
        f"multicast (NVLS) {'yes' if s.multicast else 'no'} [{_tag(t, 'scaleup.link_bandwidth_Bps')}]"
    )


def topology_text(t: Topology) -> str:
    g = t.gpu
    lines = [
        f"{t.name}: {t.description}",
        f"  {t.nodes} node(s) x {t.gpus_per_node} {g.name} ({g.arch}, {g.sm_count} SMs, "
        f"{fmt_bytes(g.hbm_capacity_bytes)} memory at {fmt_Bps(g.hbm_bandwidth_Bps)} "
        f"[{_tag(t, 'gpu.hbm_bandwidth_Bps')}])",
        "  dense peak: "
        + ", ".join(f"{k} {fmt_flops(v)}{fmt_clock(t.matmul_clock(k, 'burst'))}" for k, v in g.peak_flops.items())
        + f" [{_tag(t, 'gpu.peak_flops')}]",
        *(
            [
                (
                    "  measured matmul rates (predictions of every op; the roof keeps the peak): "
                    if g.burst_flops and dict(g.burst_flops) == dict(g.sustained_flops)
                    else "  under continuous load (predictions of ops of 2 ms or more): "
                )
                + ", ".join(f"{k} {fmt_flops(v)}{fmt_clock(t.matmul_clock(k))}" for k, v in g.sustained_flops.items())
                + f" [{_tag(t, 'gpu.sustained_flops')}]"
            ]
            if g.sustained_flops
            else []
        ),
        _scaleup_line(t),
    ]
    if t.nic:
        n = t.nic
        lines.append(
            f"  network: {n.count_per_node}x {n.model} {n.kind} at {n.rate_Bps * 8 / 1e9:.0f} Gb/s, "
            f"GPUDirect RDMA {'yes' if n.gpudirect_rdma else 'no'}, "
            f"{'rail-aligned' if n.rail_aligned else 'not rail-aligned'} [{_tag(t, 'nic.rate_Bps')}]"
        )
    rows = []
    for name, m in t.mechanisms.items():
        if not m.available:
            rows.append([name, "no", "", "", "", "", m.note])
            continue
        model = m.model(Mechanism(name))
        per_cta = fmt_Bps(m.per_cta_bandwidth_Bps) if m.per_cta_bandwidth_Bps else "no SMs"
        ctas = str(model.ctas_for(0.9)) if model.uses_sms else "0"
        rows.append(
            [
                name,
                "yes",
                fmt_s(m.latency_s),
                fmt_Bps(m.peak_bandwidth_Bps),
                per_cta,
                ctas,
                f"[{_tag(t, f'mechanisms.{name}.peak_bandwidth_Bps')}] {m.note}".strip(),
            ]
        )
    lines += ["", _table(["mechanism", "available", "latency", "peak", "per CTA", "CTAs for 90%", "basis, note"], rows)]
    for name, m in t.mechanisms.items():
        if m.collectives:
            lines.append(
                f"  {name} per collective (α + link rate per regime, smallest sizes first; the cheapest runs):"
            )
            for k, regimes in m.collectives.items():
                lines.append(
                    f"    {k}: "
                    + " | ".join(f"{fmt_s(r.latency_s)} + {fmt_Bps(r.peak_bandwidth_Bps)}" for r in regimes)
                )
    both = [f"{name} {fmt_Bps(m.duplex_bandwidth_Bps)}" for name, m in t.mechanisms.items() if m.duplex_bandwidth_Bps]
    if both:
        lines.append(
            "  per direction with both directions busy (every collective; the roof keeps the one-way peak): "
            + ", ".join(both)
        )
    handoffs = [f"{name} {fmt_s(m.handoff_s)}" for name, m in t.mechanisms.items() if m.handoff_s]
    if handoffs:
        lines.append(
            "  hand-off of a collective staged through symmetric memory, beyond α and one flag step: "
            + ", ".join(handoffs)
            + " (a device-initiated mechanism without its own takes the smallest of these SM ones)"
        )
    ll = [f"{name} {fmt_s(m.ll_handoff_s)}" for name, m in t.mechanisms.items() if m.ll_handoff_s is not None]
    store = t.mechanisms.get("sm-store")
    if (handoffs or ll) and store is not None and store.available:  # LL is modelled for SM stores only
        said = ", ".join(ll) if ll else "not measured, so charged the one above"
        lines.append(f"  hand-off of an LL collective (flags inside the data), beyond α: {said}")
    fused = [f"{name} {s} {fmt_s(v)}" for name, m in t.mechanisms.items() for s, v in sorted(m.overlap_s.items())]
    if fused:
        lines.append("  fixed cost of a fused kernel per call, beyond the model's terms: " + ", ".join(fused))
    host = t.probe.ceilings if t.probe is not None else {}
    if "host_to_device_Bps" in host or "host_to_device_ce_Bps" in host:
        to_gpu = host.get("host_to_device_Bps", host.get("host_to_device_ce_Bps"))
        back = host.get("device_to_host_Bps", host.get("device_to_host_ce_Bps"))
        lines.append(
            f"  host link (pinned memory, copy engine; not used by the model): to the GPU {fmt_Bps(to_gpu)}"
            + (f", back {fmt_Bps(back)}" if back else "")
            + " [measured]"
        )
    if t.probe is not None and t.probe.health:  # what `pkroof report` shows too: numbers from a degraded node
        lines += ["", f"health flags the probe saw ({len(t.probe.health)}; numbers measured on a degraded node "
                      "understate a healthy one):"] + [f"  {line}" for line in t.probe.health]  # fmt: skip
    lines += ["", "sources:"] + [f"  {k} ({v.basis}): {_cite(v)}" for k, v in t.sources.items()]
    return "\n".join(lines)


def _bandwidths(b: Bound) -> str:
    """ "algbw 275 GB/s, busbw 481 GB/s" at the roof for a workload that is one collective (nccl-tests' columns)."""
    if b.algbw_Bps is None:
        return ""
    return f"algbw {fmt_Bps(b.algbw_Bps)}, busbw {fmt_Bps(b.busbw_Bps)}"


def _link(b: Bound) -> str:
    """The link term's bytes and rate: on one node its one tier's; across nodes each tier's, and which binds."""
    if not b.workload.comm:
        return "nothing communicated"
    if len(b.link_terms) == 1:
        return f"link: {fmt_bytes(b.link_bytes_per_rank)} per rank at {fmt_Bps(b.link_bandwidth_Bps)} ({b.link_tier})"
    tiers = [
        f"{tier} {fmt_bytes(t.bytes_per_rank)} per rank at {fmt_Bps(t.bandwidth_Bps)} = {fmt_s(t.t_s)}"
        for tier, t in b.link_terms.items()
    ]
    return f"link: {', '.join(tiers)} ({b.link_tier} binds)"


def _terms(b: Bound) -> str:
    rates = _bandwidths(b)
    lines = [
        f"t_roof {fmt_s(b.t_roof_s)} ({b.limiter}-bound) = max(compute {fmt_s(b.t_compute_s)}, "
        f"hbm {fmt_s(b.t_hbm_s)}, link {fmt_s(b.t_link_s)}) + latency {fmt_s(b.t_latency_s)}"
        + (f"; at the roof {rates}" if rates else ""),
        f"  {_link(b)}; compute at {fmt_flops(b.peak_flops)}",
    ]
    if b.busiest_rank:  # ranks differ: each term is its busiest rank's
        lines.append("  busiest rank: " + ", ".join(f"{term} {rank}" for term, rank in b.busiest_rank.items()))
    if b.workload.uncounted:
        lines.append("  not counted (no formula for): " + ", ".join(b.workload.uncounted))
    return "\n".join(lines)


def _algorithms(names: tuple[str, ...], protocols: tuple[str, ...] = ()) -> str:
    """One per comm op, runs of the same collapsed: ("one-shot",) * 14 → "one-shot ×14"; NCCL's with the protocol it
    assumes ("nvls/simple")."""
    if protocols:
        names = tuple(f"{a}/{p}" for a, p in zip(names, protocols, strict=True))
    runs: list[list] = []
    for name in names:
        if runs and runs[-1][0] == name:
            runs[-1][1] += 1
        else:
            runs.append([name, 1])
    return ",".join(name if n == 1 else f"{name} ×{n}" for name, n in runs)


def _gbps(value: float | None) -> str:
    return "-" if value is None else f"{value / 1e9:.1f}"


def _predictions(b: Bound, limit: int | None = None) -> str:
    collective = b.workload.sole_collective is not None
    rows = []
    for p in b.predictions[:limit]:
        row = [p.label, p.schedule.value, str(p.comm_sms), fmt_s(p.t_s), f"{b.t_roof_s / p.t_s:.0%}"]
        if collective:
            row += [_gbps(p.algbw_Bps), _gbps(p.busbw_Bps)]
        rows.append([*row, _algorithms(p.algorithms, p.protocols if p.mechanism.value == "nccl" else ())])
    header = ["mechanism", "schedule", "comm SMs", "predicted", "of roof"]
    header += ["algbw GB/s", "busbw GB/s"] if collective else []
    return _table([*header, "algorithm"], rows)


def _header(b: Bound) -> str:
    w = b.workload
    shape = ", ".join(f"{k}={fmt_bytes(v) if k.endswith('_bytes') else f'{v:g}'}" for k, v in b.params.items())
    ranks = b.system.world_size
    return f"{w.name} ({shape}, {w.dtype}) on {b.system.name}, {ranks} rank{'s' * (ranks > 1)}"


def _why(advice: Advice | None) -> str:
    """The advice's reason, its lines indented under "why: "."""
    if advice is None:
        return "why: nothing to communicate, and no peer to do it with: the roof is compute and HBM alone"
    first, *rest = advice.reason.splitlines()
    return "\n".join([f"why: {first}", *(f"     {line}" for line in rest)])


def bound_text(b: Bound, advice: Advice | None, *, about: str = "") -> str:
    """`pkroof bound`'s text; `about`: a user's file's own description, under the header."""
    parts = [_header(b), *([about] if about else []), _terms(b)]
    if b.predictions:
        parts += ["", _predictions(b)]
    return "\n".join([*parts, "", _why(advice)])


def _nccl_default(advice: Advice) -> str:
    """What NCCL runs by default, each (algorithm/protocol) once: "ring/simple" for two ops that both run it, not
    "ring/simple,ring/simple"; different ones in the ops' order ("ring/simple, nvls/simple")."""
    return ", ".join(dict.fromkeys(advice.baseline_pair.split(",")))


def advice_text(b: Bound, advice: Advice | None) -> str:
    if advice is None:
        return "\n".join([_header(b), "nothing to advise", "", _why(advice), "", _terms(b)])
    best = advice.best
    head = f"build {best.label} + {best.schedule.value}"
    if best.comm_sms:
        head += f" ({best.comm_sms} comm SMs)"
    head += f": predicted {fmt_s(best.t_s)}, {b.t_roof_s / best.t_s:.0%} of the roofline"
    if advice.baseline:
        head += f", {advice.headroom:.2f}x over NCCL's default ({_nccl_default(advice)}, {fmt_s(advice.baseline.t_s)})"
    return "\n".join([_header(b), head, "", _why(advice), "", _terms(b), "", _predictions(b, 6)])


def recommendation(a: Analysis, *, with_size: bool = False) -> dict | None:
    """`advise --json`'s object for one analysis; with its size (`size_bytes`) where several are printed."""
    rec = to_dict(a.advice)
    if not with_size or rec is None:
        return rec
    return {"size_bytes": a.workload.comm_bytes, **rec}


def _sweep_head(a: Analysis) -> str:
    b = a.bound
    op = b.workload.sole_collective
    line = f"# {b.workload.name} ({b.workload.dtype}) on {b.system.name}, {b.system.world_size} ranks"
    if op is not None:
        factor = bus_bandwidth_factor(op.kind, op.group_size)
        line += f"; algbw = size / time, busbw = algbw × {factor:.4g} (nccl-tests' factor for {op.kind.value})"
    return line


def _us(t: float | None) -> str:
    return "-" if t is None else f"{t * 1e6:.2f}"


def _at(w, t: float | None) -> list[str]:
    """time (µs), algbw and busbw (GB/s) at `t`, as nccl-tests prints a row's three numbers."""
    return [_us(t), *map(_gbps, w.bandwidths(t))]


SWEEP_HEADER = (
    ["size", "count", "type", "t_roof", "algbw", "busbw", "limiter", "best pair", "time", "algbw", "busbw"],
    ["(B)", "(elements)", "", "(us)", "(GB/s)", "(GB/s)", "", "", "(us)", "(GB/s)", "(GB/s)"],
)
_LEFT = (2, 6, 7)  # text columns: type, limiter, pair


def sweep_text(analyses: list[Analysis]) -> str:
    """Several sizes of one problem, one row each, in nccl-tests' layout: size, count, type, then the roof's time,
    algbw and busbw and its limiter, the best prediction's, and NCCL's (serial)."""
    rows = []
    for a in analyses:
        b, w = a.bound, a.workload
        size = w.comm_bytes
        best = b.predictions[0] if b.predictions else None
        nccl = b.prediction(Mechanism.NCCL, Schedule.SERIAL)
        pair = f"{best.label} + {best.schedule.value}" if best else "-"
        head = [f"{size:.0f}", f"{size / DTYPE_BYTES[w.dtype]:.0f}", w.dtype, *_at(w, b.t_roof_s), b.limiter, pair]
        rows.append([*head, *_at(w, best.t_s if best else None), *_at(w, nccl.t_s if nccl else None)])
    header = [SWEEP_HEADER[0] + ["nccl time", "algbw", "busbw"], SWEEP_HEADER[1] + ["(us)", "(GB/s)", "(GB/s)"]]
    widths = [max(len(r[i]) for r in [*header, *rows]) for i in range(len(header[0]))]
    lines = [_sweep_head(analyses[0])]
    for i, row in enumerate([*header, *rows]):
        cells = [c.ljust(w) if j in _LEFT else c.rjust(w) for j, (c, w) in enumerate(zip(row, widths, strict=True))]
        lines.append(("# " if i < 2 else "  ") + "  ".join(cells).rstrip())
    return "\n".join(lines)


def advice_sweep_text(analyses: list[Analysis]) -> str:
    """Several sizes: per size the recommended pair, its prediction, its headroom over NCCL and its first reason."""
    rows = []
    for a in analyses:
        size = a.workload.comm_bytes
        adv = a.advice
        if adv is None:
            rows.append([fmt_bytes(size), "-", "-", "-", "nothing to communicate"])
            continue
        pair = f"{adv.best.label} + {adv.best.schedule.value}"
        headroom = f"{adv.headroom:.2f}x" if adv.headroom else "-"
        why = adv.reason.splitlines()[0].split(": ", 1)[-1]
        rows.append([fmt_bytes(size), pair, fmt_s(adv.best.t_s), headroom, why])
    head = _sweep_head(analyses[0]).removeprefix("# ").split(";")[0]
    return head + "\n" + _table(["size", "build", "predicted", "x NCCL", "why (first line)"], rows)


def _param(name: str, value: object) -> str:
    return f"{name}={fmt_bytes(value)}" if name.endswith("_bytes") and isinstance(value, int) else f"{name}={value}"


def problems_table(problems: list) -> str:
    """Each problem, then one line per named shape with its parameters (the default marked)."""
    rows = []
    for p in problems:
        rows.append([p.name, p.category, p.source])
        for name, params in p.shapes.items():
            mark = " (default)" if name == p.default_shape else ""
            rows.append(["", f"  {name}{mark}", ", ".join(_param(k, v) for k, v in params.items())])
    return _table(["problem", "category / shape", "from / parameters"], rows)


def _mechanism(pair: dict) -> str:
    """A declared pair's mechanism as tables show it: "sm-store", or "sm-store LL" (Prediction.label)."""
    return label(pair["mechanism"], pair.get("protocol"))


def implementations_table(registry: dict) -> str:
    """Built-in implementations: the problems each implements, whose it is, whether the profiler runs it unasked,
    and the (mechanism, schedule, comm CTAs) it declares (kernels/registry.py: no kernel is imported)."""
    rows = []
    for name, impl in registry.items():
        pair = impl.pair
        said = f"{_mechanism(pair)} / {pair['schedule']}" if pair else "-"
        if pair and pair.get("comm_sms") is not None:
            said += f" / {pair['comm_sms']} comm CTAs"
        elif pair and pair["schedule"] == "inter-sm":  # it reports its count per call (report_comm_sms)
            said += " / comm CTAs per shape"
        runs = "auto" if impl.auto else "--impl"
        if impl.auto and impl.auto_max_bytes:
            runs += f" ≤ {fmt_bytes(impl.auto_max_bytes)}"
        rows.append([name, ", ".join(sorted(impl.problems)), impl.family, runs, said])
    return _table(["implementation", "problems", "from", "runs", "declares"], rows)


def builtin_kernels_text(problem: str, advice: Advice, comm_bytes: float | None = None) -> str:
    """The built-in implementations of `problem` that can be profiled now, the recommended pair's marked; those
    meant for smaller messages than `comm_bytes` (nccl-tests' size convention) say up to which size."""
    from pkroof.kernels.registry import BUILTIN_IMPLS

    best = (advice.best.label, advice.best.schedule.value)
    lines = []
    for name, impl in BUILTIN_IMPLS.items():
        if problem not in impl.problems:
            continue
        pair = impl.pair
        said = f"{_mechanism(pair)} + {pair['schedule']}" if pair else impl.family
        runs_best = pair and pair.get("algorithm") in (None, *advice.best.algorithms)  # one-shot LL, not two-shot
        mark = "  <- the recommended pair" if runs_best and (_mechanism(pair), pair["schedule"]) == best else ""
        if comm_bytes is not None and impl.max_input_bytes is not None and comm_bytes > impl.max_input_bytes:
            mark += f"  (refuses a rank's input over {fmt_bytes(impl.max_input_bytes)})"
        elif comm_bytes is not None and impl.auto_max_bytes is not None and comm_bytes > impl.auto_max_bytes:
            mark += f"  (meant for messages up to {fmt_bytes(impl.auto_max_bytes)})"
        lines.append(f"  {name:34} {said}{mark}")
    if not lines:
        return ""
    head = f"built-in implementations to measure it against (pkroof profile {problem} --impl NAME, on GPUs):"
    return "\n".join([head, *lines])
