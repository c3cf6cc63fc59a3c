"""Behaviour does not change: `pkroof bound --json`, `pkroof advise --json` and `pkroof report`'s exports print what
they printed at commit 7f02713 (tests/data/same-numbers/, made by its snapshot.py, which this test runs each entry
through: the same command line, the same normalisation).

Numbers are compared with a relative tolerance of 1e-9: a refactor may reorder floating-point arithmetic (a sum
taken in another order, a product regrouped), which moves a result by a few units in the last place (about 1e-16
relative per operation, far below 1e-9 even through thousands of them), while any change to the model itself (a
constant, a formula, a chosen algorithm) moves some number by far more. Two integers must be equal, and an integer
and a float (0 and 0.0) compare as numbers. Everything else is exact: strings, booleans, nulls, the length of
every list and the keys of every object (a field renamed, added or dropped fails). A command that exited non-zero
must exit with the same code and the same first line on stderr.

By default a subset runs (SUBSET below: every problem on three presets, every preset on four problems, and every
report export); PKROOF_SAME_NUMBERS=full runs every entry of the golden. What is left out of the default run is
skipped with that reason, never dropped.
"""

from __future__ import annotations

import importlib.util
import math
import os
import shlex
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).parent / "data" / "same-numbers"
REL_TOL = 1e-9
MAX_SHOWN = 8  # differences listed per failing group


def _load_snapshot():
    spec = importlib.util.spec_from_file_location("same_numbers_snapshot", HERE / "snapshot.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


snapshot = _load_snapshot()
GOLDEN: dict[str, Any] = snapshot.read()

# The default run: every problem on h200x2 (2 ranks, the measured node), hgx-h100-8 (8 ranks, NVLS) and gb200-nvl72
# (72 ranks, the most problems that do not divide); every preset on one problem of each kind of workload: a
# collective written by hand (all-reduce), a fused GEMM written by hand (gemm-all-reduce), one traced on meta tensors
# (tp-mlp-sequence-parallel) and one traced on CPU ranks because its routing needs values (moe-dispatch).
SUBSET_PRESETS = ("h200x2", "hgx-h100-8", "gb200-nvl72")
SUBSET_PROBLEMS = ("all-reduce", "gemm-all-reduce", "tp-mlp-sequence-parallel", "moe-dispatch")


def _group(command: str) -> str:
    """The test a command line belongs to: bound and advise of one problem on one preset run together
    ("all-gather -t h200x2"); each report export is its own ("report <files> --format csv")."""
    argv = shlex.split(command)[1:]
    if argv[0] == "report":
        return " ".join(argv)
    return " ".join(a for a in argv[1:] if a != "--json")


def _in_subset(group: str) -> bool:
    argv = group.split()
    if argv[0] == "report":
        return True
    preset = argv[argv.index("-t") + 1]
    return preset in SUBSET_PRESETS or argv[0] in SUBSET_PROBLEMS


GROUPS: dict[str, list[str]] = defaultdict(list)
for _command in GOLDEN:
    GROUPS[_group(_command)].append(_command)


def _is_number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def differences(golden: Any, now: Any, where: str = "") -> list[str]:
    """Where `now` is not `golden`: one line per difference, named by its path (.predictions[3].t_s)."""
    if _is_number(golden) and _is_number(now):
        if isinstance(golden, int) and isinstance(now, int):
            same = golden == now
        else:
            same = math.isclose(golden, now, rel_tol=REL_TOL, abs_tol=0.0)
        return [] if same else [f"{where}: {golden!r} -> {now!r}"]
    if type(golden) is not type(now):
        return [f"{where}: {golden!r} -> {now!r} ({type(golden).__name__} -> {type(now).__name__})"]
    if isinstance(golden, dict):
        out = [f"{where}.{k}: dropped" for k in golden if k not in now]
        out += [f"{where}.{k}: new field" for k in now if k not in golden]
        for k in golden:
            if k in now:
                out += differences(golden[k], now[k], f"{where}.{k}")
        return out
    if isinstance(golden, list):
        if len(golden) != len(now):
            return [f"{where}: {len(golden)} items -> {len(now)}"]
        return [d for i, (g, n) in enumerate(zip(golden, now, strict=True)) for d in differences(g, n, f"{where}[{i}]")]
    return [] if golden == now else [f"{where}: {golden!r} -> {now!r}"]


@pytest.fixture(scope="module", autouse=True)
def _fresh_trace_cache():
    """One trace cache for this module, empty at its start: every trace is made by the code under test, shared by
    bound and advise and by the presets of one world size, and never read from what another test left."""
    with snapshot.fresh_trace_cache():
        yield


@pytest.mark.parametrize("group", list(GROUPS))
def test_same_numbers(group: str):
    if not _in_subset(group) and os.environ.get("PKROOF_SAME_NUMBERS", "").strip().lower() != "full":
        pytest.skip("outside the default subset: PKROOF_SAME_NUMBERS=full compares every entry")
    found = []
    for command in GROUPS[group]:
        found += [f"{command}\n    {d}" for d in differences(GOLDEN[command], snapshot.run(command))]
    shown = "\n  ".join(found[:MAX_SHOWN])
    more = f"\n  ... and {len(found) - MAX_SHOWN} more" if len(found) > MAX_SHOWN else ""
    assert not found, f"{len(found)} differences from {snapshot.GOLDEN.name}:\n  {shown}{more}"
