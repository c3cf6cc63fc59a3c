"""A roof is a bound: every prediction at or above its roof (issue 32 item 7), over every suite problem, named shape
and preset, from what ships (hand-written workloads and shipped traces: no problem's code runs) and from the
same-numbers golden (the problems traced on CPU ranks, which ship no trace, at their default shapes); and for
unequal all-gather and reduce-scatter lists, whose NCCL prediction fell to 109% of the roof.
"""

import importlib.util
from pathlib import Path

import pytest

from pkroof.analysis.catalogue import suite
from pkroof.analysis.problem import shipped_workload
from pkroof.rooflines import Collective, CommOp, Workload
from pkroof.rooflines.analyze import analyze
from pkroof.topology import PRESETS, preset

REL = 1e-9  # a few units in the last place of sums taken in another order
SAME_NUMBERS = Path(__file__).parent / "data" / "same-numbers" / "snapshot.py"


def _below(bound) -> list[str]:
    return [f"{p.key}: {p.t_s:.6g} s < roof {bound.t_roof_s:.6g} s" for p in bound.predictions
            if p.t_s < bound.t_roof_s * (1 - REL)]  # fmt: skip


@pytest.mark.parametrize("name", list(PRESETS))
def test_every_shipped_workload_predicts_at_or_above_its_roof(name):
    system = preset(name).system(None, None)
    checked, below = 0, []
    for problem in suite():
        for shape in problem.shapes:
            try:
                w = shipped_workload(problem, system.world_size, problem.params(shape))
            except ValueError:  # no trace ships at this world size, or the shape does not divide
                continue
            b = analyze(w, system).bound
            checked += len(b.predictions)
            below += [f"{problem.name} {shape}: {line}" for line in _below(b)]
    assert checked and not below, "\n".join(below)


def test_every_golden_bound_predicts_at_or_above_its_roof():
    spec = importlib.util.spec_from_file_location("same_numbers_snapshot", SAME_NUMBERS)
    snapshot = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(snapshot)
    below, checked = [], 0
    for command, out in snapshot.read().items():
        if not command.startswith("pkroof bound ") or not isinstance(out, dict) or "t_roof_s" not in out:
            continue
        for p in out["predictions"]:
            checked += 1
            if p["t_s"] < out["t_roof_s"] * (1 - REL):
                below.append(f"{command}: {p['mechanism']} {p['schedule']} {p['t_s']:.6g} < {out['t_roof_s']:.6g}")
    assert checked and not below, "\n".join(below)


def _uneven_lists(world: int, row_bytes: float) -> Workload:
    """What the tracer makes of rank r gathering, then reduce-scattering, lists where rank j's block is j + 1 rows:
    the busiest views are rank 0 (receives every other block: world·(world+1)/2 − 1 rows) and rank world − 1 (sends
    its part of every other block)."""
    rows = world * (world + 1) // 2
    from pkroof.rooflines.workload import RankView

    def view(r: int) -> tuple[CommOp, ...]:
        own = (r + 1) * row_bytes
        gather = CommOp("ag", Collective.ALL_GATHER, rows * row_bytes, world, send_bytes=own,
                        recv_bytes=rows * row_bytes - own)  # fmt: skip
        scatter = CommOp("rs", Collective.REDUCE_SCATTER, rows * row_bytes, world,
                         send_bytes=rows * row_bytes - own, recv_bytes=own, after=("ag",))  # fmt: skip
        return gather, scatter

    views = tuple(RankView((r,), (), view(r), 0.0) for r in range(world))
    return Workload("uneven-lists", (), view(0), hbm_bytes=0.0, dtype="fp32", ranks=views)


@pytest.mark.parametrize("name", list(PRESETS))
@pytest.mark.parametrize("row_bytes", [64, 16 * 1024, 4 * 1024 * 1024])
def test_unequal_all_gather_and_reduce_scatter_lists_predict_at_or_above_the_roof(name, row_bytes):
    system = preset(name).system(None, None)
    b = analyze(_uneven_lists(system.world_size, row_bytes), system).bound
    assert b.predictions and not _below(b), "\n".join(_below(b))
