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

Every entry of the golden runs, one test per problem, shape and preset (bound and advise together) or per report
export: all 948 took 197 s of CPU with their rank processes (248 s wall) on the busy 2-core machine that made the
golden (2026-12-05), most of it the five problems traced on CPU ranks, which are the ones a move of the tracing
code puts most at risk; under the 4 minutes of CPU that would call for a subset, so none is left out.
"""

from __future__ import annotations

import importlib.util
import math
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


def _group(command: str) -> str:
    """The test a command line belongs to: bound and advise of one problem on one preset run together
    ("all-gather -t h200x2"); each report export is its own ("report <files> --format csv")."""
    argv = shlex.split(command)[1:]
    if argv[0] == "report":
        return " ".join(argv)
    return " ".join(a for a in argv[1:] if a != "--json")


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


def _listed(command: str, found: list[str]) -> str:
    """A command line and its first MAX_SHOWN differences, one a line."""
    more = [f"... and {len(found) - MAX_SHOWN} more"] if len(found) > MAX_SHOWN else []
    return "\n    ".join([f"{command}: {len(found)} differences", *found[:MAX_SHOWN], *more])


@pytest.mark.parametrize("group", list(GROUPS))
def test_same_numbers(group: str):
    found = {c: d for c in GROUPS[group] if (d := differences(GOLDEN[c], snapshot.run(c)))}
    listed = "\n  ".join(_listed(c, d) for c, d in found.items())
    assert not found, f"not what {snapshot.GOLDEN.name} holds (before -> now):\n  {listed}"


# ---- the comparison itself: what passes and what fails -------------------------------------------------------------


def test_a_float_moved_by_reordered_arithmetic_is_the_same():
    golden = 0.1 + 0.2 + 0.3
    assert differences({"t_s": golden}, {"t_s": 0.1 + (0.2 + 0.3)}) == []


def test_a_float_moved_beyond_the_tolerance_differs():
    golden = 2.0e-6
    assert differences({"t_s": golden}, {"t_s": golden * (1 + 10 * REL_TOL)}) == [
        f".t_s: {golden!r} -> {golden * (1 + 10 * REL_TOL)!r}"
    ]


def test_an_integer_and_the_same_float_are_the_same():
    assert differences({"compute_s": 0}, {"compute_s": 0.0}) == []


def test_two_integers_must_be_equal():
    assert differences({"comm_sms": 13}, {"comm_sms": 14}) == [".comm_sms: 13 -> 14"]


def test_a_renamed_field_differs():
    assert differences({"t_roof_s": 1.0}, {"t_roof": 1.0}) == [".t_roof_s: dropped", ".t_roof: new field"]


def test_a_null_that_became_a_number_differs():
    assert len(differences({"fastest_t_s": None}, {"fastest_t_s": 1e-6})) == 1


def test_a_list_that_lost_an_item_differs():
    golden = {"predictions": [{"t_s": 1.0}, {"t_s": 2.0}]}
    assert differences(golden, {"predictions": [{"t_s": 1.0}]}) == [".predictions: 2 items -> 1"]


def test_a_changed_string_differs():
    assert differences({"limiter": "link"}, {"limiter": "hbm"}) == [".limiter: 'link' -> 'hbm'"]


def test_a_boolean_is_not_a_number():
    assert len(differences({"reduction": True}, {"reduction": 1})) == 1
