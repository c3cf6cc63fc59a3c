"""The node diagram of a topology's page: one node's GPUs, its scale-up fabric and its NICs as an SVG, labelled with
link count and speed. Every label is escaped; the figure is drawn no larger than its own size."""

from __future__ import annotations

import math
import textwrap
from typing import TYPE_CHECKING

from markupsafe import Markup, escape

from pkroof.rooflines.units import fmt_Bps

if TYPE_CHECKING:
    from pkroof.topology import Topology


def _wrapped(body: str, width: int) -> list[str]:
    """`body` in at most two lines of about `width` characters, broken at spaces (a GPU's NVML name in its box)."""
    lines = textwrap.wrap(body, width) or [""]
    return lines if len(lines) <= 2 else [lines[0], textwrap.shorten(" ".join(lines[1:]), width, placeholder="…")]


def topology_svg(topology: Topology) -> Markup:
    """The GPUs of one node, the scale-up fabric and the NICs, labelled with link count and speed; drawn no larger
    than its own size, every label inside its box."""
    s, nic = topology.scaleup, topology.nic
    n = topology.gpus_per_node
    cols = min(n, 8)
    box_w, box_h, gap = 120, 60, 18
    width = max(cols * (box_w + gap) + 2 * gap, 720)
    gpu_rows = math.ceil(n / cols)
    left = (width - cols * (box_w + gap) + gap) / 2
    peers = s.kind != "none"
    fabric_y = 30 + gpu_rows * (box_h + gap) + (40 if peers else -gap)
    nic_y = fabric_y + (90 if peers else 40)
    height = (nic_y + box_h + 40) if nic else (fabric_y + (54 if peers else 30))
    gpu_xy = [(left + (i % cols) * (box_w + gap), 30 + (i // cols) * (box_h + gap)) for i in range(n)]
    if s.kind == "nvswitch":
        switches = f"{s.switches_per_node} × NVSwitch" if s.switches_per_node else "NVSwitch"
        fabric = f"{switches} ({s.generation}{', multicast' if s.multicast else ''})"
    elif s.kind == "nvlink":
        fabric = f"direct {s.generation} links, no switch"
    else:
        fabric = f"PCIe switch / root complex ({s.generation})"
    per_gpu = (
        f"{s.links_per_gpu} × {fmt_Bps(s.link_bandwidth_Bps)} = {fmt_Bps(s.total_bandwidth_Bps)} per GPU per direction"
    )
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width:.0f} {height:.0f}" width="100%" '
        f'style="max-width: {width:.0f}px" role="img">'
    ]
    text = '<text x="{x:.0f}" y="{y:.0f}" font-size="{size}" text-anchor="middle" fill="{fill}">{body}</text>'
    if nic:
        for i, (x, y) in enumerate(gpu_xy):
            k = i * nic.count_per_node // n
            nx = (width - nic.count_per_node * (box_w + gap) + gap) / 2 + k * (box_w + gap)
            parts.append(
                f'<line x1="{x + box_w / 2:.0f}" y1="{y + box_h:.0f}" x2="{nx + box_w / 2:.0f}" y2="{nic_y:.0f}" '
                'stroke="#9ca3af" stroke-dasharray="4 3"/>'
            )
    for x, y in gpu_xy if peers else ():
        parts.append(
            f'<line x1="{x + box_w / 2:.0f}" y1="{y + box_h:.0f}" x2="{x + box_w / 2:.0f}" y2="{fabric_y:.0f}" '
            'stroke="#d97706" stroke-width="2"/>'
        )
        if n <= 16:
            body = f"{s.links_per_gpu}×"
            parts.append(text.format(x=x + box_w / 2 + 14, y=fabric_y - 8, size=10, fill="#b45309", body=body))
    name = _wrapped(topology.gpu.name, 19)
    for i, (x, y) in enumerate(gpu_xy):
        parts.append(
            f'<rect x="{x:.0f}" y="{y:.0f}" width="{box_w}" height="{box_h}" rx="6" fill="#eff6ff" stroke="#2563eb"/>'
        )
        parts.append(text.format(x=x + box_w / 2, y=y + 20, size=13, fill="#1e3a8a", body=f"GPU {i}"))
        for j, line in enumerate(name):
            parts.append(text.format(x=x + box_w / 2, y=y + 37 + 13 * j, size=10, fill="#374151", body=escape(line)))
    if peers:
        bar = f'x="{gap}" y="{fabric_y:.0f}" width="{width - 2 * gap:.0f}" height="44"'
        parts.append(f'<rect {bar} rx="6" fill="#fffbeb" stroke="#d97706"/>')
        parts.append(text.format(x=width / 2, y=fabric_y + 18, size=13, fill="#92400e", body=escape(fabric)))
        parts.append(text.format(x=width / 2, y=fabric_y + 35, size=11, fill="#92400e", body=escape(per_gpu)))
    else:
        said = f"{s.generation}: no peer in this node, so nothing is communicated"
        parts.append(text.format(x=width / 2, y=fabric_y + 22, size=12, fill="#6b7280", body=escape(said)))
    if nic:
        start = (width - nic.count_per_node * (box_w + gap) + gap) / 2
        for k in range(nic.count_per_node):
            x = start + k * (box_w + gap)
            box = f'x="{x:.0f}" y="{nic_y:.0f}" width="{box_w}" height="{box_h}"'
            parts.append(f'<rect {box} rx="6" fill="#f0fdf4" stroke="#15803d"/>')
            parts.append(text.format(x=x + box_w / 2, y=nic_y + 20, size=12, fill="#14532d", body=f"NIC {k}"))
            for j, line in enumerate(_wrapped(f"{nic.model} · {fmt_Bps(nic.rate_Bps)}", 19)):
                at = nic_y + 37 + 13 * j
                parts.append(text.format(x=x + box_w / 2, y=at, size=10, fill="#374151", body=escape(line)))
        rdma = ", GPUDirect RDMA" if nic.gpudirect_rdma else ""
        caption = f"dashed: PCIe from each GPU to its NIC ({escape(nic.kind)}{rdma})"
        parts.append(text.format(x=width / 2, y=height - 8, size=11, fill="#6b7280", body=caption))
    if topology.nodes > 1:
        parts.append(text.format(x=width / 2, y=16, size=11, fill="#6b7280", body=f"one of {topology.nodes} nodes"))
    parts.append("</svg>")
    return Markup("\n".join(parts))
