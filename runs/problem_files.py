"""Problem files for the top opportunities: each one the trace's collective, or its GEMM and collective, at the
trace's shapes, dtype and group size, which `pkroof bound`, `advise` and `profile` take as they are
(docs/problems.md: `inputs` + `reference`, and a torch-free `workload()` from rooflines' builders).

The collective runs in groups of `group_size` consecutive ranks (the trace's group size by default): on the trace's
own topology every GPU takes part, as in the job; `-p group_size=2` runs it on 2 ranks (`pkroof profile FILE -n 2`).
Sizes that split over the group say so in one line where they do not.

Nothing a trace holds becomes code: numbers are written as integers, dtypes from a fixed table, and text (kernel
names, the opportunity's sentence) only inside the docstring and a comment, reduced to characters that cannot end
either.
"""

from __future__ import annotations

import re
import textwrap
from pathlib import Path
from typing import Any

import pandas as pd

from . import advise

TOP = 5  # problem files written by default: one for each of the top opportunities
_TORCH_DTYPES = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32", "tf32": "float32"}
_UNSAFE = re.compile(r"[^A-Za-z0-9 _.,:;()\[\]<>+*/=#@&%!?|~^$×→⇄…µ-]")  # no quote, backslash or newline survives

_HEADER = '''"""{title}.

{doc} Written by `pkroof trace` from the kernel(s):
{kernels}.
Trace: {instances} instance(s) on rank(s) {ranks}; {dtype}; {group} ranks a group.
`pkroof bound FILE --topology {topology}` bounds it on the trace's machine; `pkroof profile FILE -n 2 -p group_size=2`
runs it on 2 ranks.{divides}
"""

CATEGORY = "trace"
SOURCE = "pkroof trace: {source}"
# {what}
SHAPES = {{
    "trace": dict({trace_shape}),  # the trace's shape and group size
    "tiny": dict({tiny_shape}),  # 2 ranks, a few hundred bytes: a quick check on CPU ranks
}}
_GROUPS = {{}}  # (the default group, group_size) -> this rank's group, made once on every rank in the same order


def _group(group_size):
    """This rank's group of `group_size` consecutive ranks (None: the whole world)."""
    import torch.distributed as dist

    world = dist.get_world_size()
    if group_size == world:
        return None
    key = (dist.group.WORLD, group_size)
    if key not in _GROUPS:
        mine = None
        for first in range(0, world, group_size):
            made = dist.new_group(list(range(first, first + group_size)))
            mine = made if first <= dist.get_rank() < first + group_size else mine
        _GROUPS[key] = mine
    return _GROUPS[key]


def _check(world_size, group_size, **divisible):
    if group_size < 1 or world_size % group_size:
        raise ValueError(
            f"world size {{world_size}} is not a multiple of group_size={{group_size}}: run it on {{group_size}} ranks "
            f"(-n {{group_size}}) or set -p group_size={{world_size}}"
        )
    for name, value in divisible.items():
        if value % group_size:
            raise ValueError(f"{{name}}={{value}} is not divisible by group_size={{group_size}}")


def _all_gather(out, x, group):
    import torch.distributed as dist

    # torch 2.13 renamed all_gather_into_tensor and reduce_scatter_tensor to all_gather_single, reduce_scatter_single
    (getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor)(out, x, group=group)


def _reduce_scatter(out, x, group):
    import torch.distributed as dist

    (getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor)(out, x, group=group)


def _randn(shape, seed, rank, device, scale=1.0, stream=0):
    import torch

    meta = torch.device(device).type == "meta"
    g = None if meta else torch.Generator(device=device).manual_seed((seed * 1000 + rank) * 2 + stream)
    return (torch.randn(shape, generator=g, device=device) * scale).to(torch.{torch_dtype})
'''

_COLLECTIVE = '''

def inputs(rank, world_size, *, seed, device, group_size, size_bytes):
    """This rank's {input_doc}; {dtype}."""
    if size_bytes % {es}:
        raise ValueError(f"size_bytes={{size_bytes}} is not a whole number of {dtype} elements ({es} B each)")
    _check(world_size, group_size{divisible})
    return _randn(({input_elems},), seed, rank, device), group_size


def reference(x, group_size):
{imports}    group = _group(group_size)
{body}


def workload(world_size, *, group_size, size_bytes, dtype="{dtype}"):
    from pkroof.rooflines import Collective
    from pkroof.rooflines.builders import collective

    _check(world_size, group_size)
    return collective(Collective.{model_kind}, group_size, dtype, size=size_bytes)
'''

_COLLECTIVES = {  # collective → (input's doc, its elements, what must divide, the reference's body, the model's kind)
    "all_reduce": (
        "buffer: size_bytes / {es} elements",
        "size_bytes // {es}",
        "",
        "    out = x.clone()\n    dist.all_reduce(out, group=group)\n    return out",
        "ALL_REDUCE",
    ),
    "broadcast": (
        "buffer: size_bytes / {es} elements (the group's first rank's is sent)",
        "size_bytes // {es}",
        "",
        "    out = x.clone()\n    src = 0 if group is None else dist.get_global_rank(group, 0)\n"
        "    dist.broadcast(out, src=src, group=group)\n    return out",
        "BROADCAST",
    ),
    "all_gather": (
        "shard: size_bytes / {es} / group_size elements (size_bytes: the gathered output)",
        "size_bytes // {es} // group_size",
        "elements=size_bytes // {es}",
        "    out = x.new_empty(x.numel() * group_size)\n    _all_gather(out, x, group)\n    return out",
        "ALL_GATHER",
    ),
    "reduce_scatter": (
        "partial sum of the whole buffer: size_bytes / {es} elements; it keeps 1 / group_size of the sum",
        "size_bytes // {es}",
        "elements=size_bytes // {es}",
        "    out = x.new_empty(x.numel() // group_size)\n    _reduce_scatter(out, x, group)\n    return out",
        "REDUCE_SCATTER",
    ),
    "all_to_all": (
        "send buffer: size_bytes / {es} elements, 1 / group_size of it to each rank of the group",
        "size_bytes // {es}",
        "elements=size_bytes // {es}",
        "    out = x.new_empty(x.numel())\n    dist.all_to_all_single(out, x, group=group)\n    return out",
        "ALL_TO_ALL",
    ),
}

_FUSION = '''

def inputs(rank, world_size, *, seed, device, group_size, m, n, k):
    """{input_doc}; {dtype}."""
    _check(world_size, group_size, m=m)
{draw}


def reference({args}, group_size):
{imports}    group = _group(group_size)
{body}


def workload(world_size, *, group_size, m, n, k, dtype="{dtype}"):
    from pkroof.rooflines.builders import {builder}

    _check(world_size, group_size, m=m)
    return {builder}(group_size, dtype, m=m, n=n, k=k)
'''
_B = "_randn((k, n), seed, rank, device, scale=k**-0.5, stream=1)"  # B: another stream, C's entries O(1)
_B_SUMMED = "_randn((k, n), seed, rank, device, scale=(k * group_size) ** -0.5, stream=1)"  # the sum over ranks O(1)
_FUSIONS = {  # fusion → (title, inputs' doc, inputs' body, reference's arguments and body)
    "gemm-reduce-scatter": (
        "GEMM then reduce-scatter of its output (row-parallel linear, sequence parallel)",
        "A [m, k] (this rank's slice of K), B [k, n]; C = A·B summed over the group, m / group_size rows kept",
        f"    a = _randn((m, k), seed, rank, device)\n    b = {_B_SUMMED}\n    return a, b, group_size",
        "a, b",
        "    c = a @ b\n    out = c.new_empty(c.shape[0] // group_size, c.shape[1])\n"
        "    _reduce_scatter(out, c, group)\n"
        "    return out",
    ),
    "gemm-all-reduce": (
        "GEMM then all-reduce of its output (row-parallel linear)",
        "A [m, k] (this rank's slice of K), B [k, n]; C = A·B summed over the group",
        f"    a = _randn((m, k), seed, rank, device)\n    b = {_B_SUMMED}\n    return a, b, group_size",
        "a, b",
        "    c = a @ b\n    dist.all_reduce(c, group=group)\n    return c",
    ),
    "all-gather-gemm": (
        "all-gather of A's rows then GEMM (column-parallel linear, sequence parallel)",
        "A's shard [m / group_size, k], B [k, n]; C = all_gather(A)·B",
        f"    a_shard = _randn((m // group_size, k), seed, rank, device)\n"
        f"    b = {_B}\n    return a_shard, b, group_size",
        "a_shard, b",
        "    a = a_shard.new_empty(a_shard.shape[0] * group_size, a_shard.shape[1])\n"
        "    _all_gather(a, a_shard, group)\n"
        "    return a @ b",
    ),
    "all-to-all-gemm": (
        "MoE dispatch all-to-all then the expert GEMM",
        "Rows to send [m, k], m / group_size to each rank, the expert weight B [k, n]; C = (rows received)·B",
        f"    a = _randn((m, k), seed, rank, device)\n    b = {_B}\n    return a, b, group_size",
        "x, b",
        "    a = x.new_empty(x.shape)\n    dist.all_to_all_single(a, x, group=group)\n    return a @ b",
    ),
    "gemm-all-to-all": (
        "the expert GEMM then MoE combine all-to-all",
        "The expert's rows A [m, k], its weight B [k, n]; C = A·B, m / group_size rows to each rank",
        f"    a = _randn((m, k), seed, rank, device)\n    b = {_B}\n    return a, b, group_size",
        "a, b",
        "    c = a @ b\n    out = c.new_empty(c.shape)\n"
        "    dist.all_to_all_single(out, c, group=group)\n    return out",
    ),
}
_BUILDERS = {f: f.replace("-", "_") for f in _FUSIONS}  # rooflines/builders.py's function of each


def _safe(text: Any, most: int = 400) -> str:
    """`text` as it may sit in a docstring or a comment: characters that could end either are replaced with '?'."""
    clean = _UNSAFE.sub("?", " ".join(str(text).split()))
    return clean if len(clean) <= most else clean[: most - 1] + "…"


def _imports(body: str) -> str:
    return "    import torch.distributed as dist\n\n" if "dist." in body else ""


def _shape(**params: int) -> str:
    return ", ".join(f"{k}={int(v)}" for k, v in params.items())


def source(row: Any, topology: str) -> str:
    """The text of the problem file for one opportunity (a row of runs.opportunities.find's frame); a ValueError
    where none can be written (a collective without a problem form here, a dtype torch cannot draw)."""
    dtype = advise.model_dtype(row.dtype)
    if dtype not in _TORCH_DTYPES:
        raise ValueError(f"dtype {_safe(row.dtype)}: no problem file for it (bf16, fp16 and fp32 only)")
    es = advise.element_bytes(dtype)
    group = int(row.group_size)
    common = {
        "kernels": "\n".join(textwrap.wrap(_safe(row.kernels), 116)),
        "instances": int(row.instances),
        "ranks": _safe(row.ranks),
        "dtype": dtype,
        "group": group,
        "topology": _safe(topology, 80),
        "source": _safe(row.kernels, 200),
        "what": "\n# ".join(textwrap.wrap(_safe(row.what), 116)),
        "torch_dtype": _TORCH_DTYPES[dtype],
    }
    if row.kind == "collective":
        if row.collective not in _COLLECTIVES:
            raise ValueError(f"{_safe(row.collective)}: no problem form for it here")
        doc, elems, divisible, body, model_kind = _COLLECTIVES[row.collective]
        size = int(row.bytes)
        header = _HEADER.format(
            title=f"{advise.COLLECTIVES[row.collective].value} of {size} bytes over {group} ranks, as a trace ran it",
            doc="Size in nccl-tests' convention (size_bytes).",
            divides=f" size_bytes / {es} must divide by group_size." if divisible else "",
            trace_shape=_shape(group_size=group, size_bytes=size),
            tiny_shape=_shape(group_size=2, size_bytes=es * 2 * 64),
            **common,
        )
        fields = {"input_doc": doc.format(es=es), "input_elems": elems.format(es=es), "es": es, "dtype": dtype}
        fields |= {"divisible": divisible and ", " + divisible.format(es=es), "body": body, "model_kind": model_kind}
        return header + _COLLECTIVE.format(**fields, imports=_imports(body))
    title, doc, draw, args, body = _FUSIONS[row.kind]
    m, n, k = int(row.gemm_m), int(row.gemm_n), int(row.gemm_k)
    header = _HEADER.format(
        title=f"{title}, at a trace's shapes",
        doc=f"This rank's GEMM is m×n×k = {m}×{n}×{k}.",
        divides=" m must divide by group_size.",
        trace_shape=_shape(group_size=group, m=m, n=n, k=k),
        tiny_shape=_shape(group_size=2, m=64, n=32, k=16),
        **common,
    )
    fields = {
        "input_doc": doc,
        "draw": draw,
        "args": args,
        "body": body,
        "dtype": dtype,
        "builder": _BUILDERS[row.kind],
    }
    return header + _FUSION.format(**fields, imports=_imports(body))


def write(opportunities: pd.DataFrame, out_dir: Path | str, *, top: int = TOP, topology: str = "") -> pd.DataFrame:
    """A problem file for each of the first `top` opportunities, in `out_dir`/problems/ (top1_<kind>.py, ...); the
    frame again with problem_file set to each file's path (None where none could be written: the reason is in
    attrs["no_file"])."""
    folder = Path(out_dir) / "problems"
    out = opportunities.copy()
    out.attrs = dict(opportunities.attrs)
    no_file = []
    for i, row in enumerate(out.head(top).itertuples(), start=1):
        try:
            text = source(row, topology)
        except ValueError as e:
            no_file.append(f"opportunity {i}: {e}")
            continue
        folder.mkdir(parents=True, exist_ok=True)
        kind = row.collective if row.kind == "collective" else row.kind.replace("-", "_")
        path = folder / f"top{i}_{kind}.py"
        path.write_text(text, encoding="utf-8")
        out.at[row.Index, "problem_file"] = str(path)
    out.attrs["no_file"] = no_file
    return out
