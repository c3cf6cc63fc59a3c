"""pkroof trace on public traces of real jobs (HTA's test data, MIT: tests/data/runs/README.md). Expected values are
computed here from the raw events, read with the standard library and swept independently of runs/intervals.py."""

import gzip
import json
from pathlib import Path

import pytest

from pkroof.runs import analyze_traces

DATA = Path(__file__).parent / "data" / "runs"
NCCL_ARGS = DATA / "hta_nccl_args" / "nccl_data.json.gz"
TWO_RANKS = DATA / "hta_two_ranks"
ELEMENT = {"Float": 4, "Long": 8}  # bytes per element of the dtypes this trace's collectives record


def _events(path: Path) -> list[dict]:
    return json.load(gzip.open(path))["traceEvents"]


@pytest.fixture(scope="module")
def nccl_args():
    return analyze_traces(NCCL_ARGS, topology="dgx-a100-8")


def test_a_named_all_reduce_has_nccl_tests_busbw(nccl_args):
    # the kernel of correlation 60047: allreduce of 6637568 Float on [0, 1], 2636.669 µs (its args in the file)
    k = nccl_args.kernels.set_index("correlation").loc[60047]
    size, dur_s, n = 6637568 * 4, 2636.669e-6, 2
    assert k["bytes"] == size
    assert k["busbw_GBps"] == pytest.approx(size / dur_s * 2 * (n - 1) / n / 1e9)


def test_every_collective_that_records_its_size_is_sized_exactly(nccl_args):
    recorded = [e for e in _events(NCCL_ARGS) if e.get("cat") == "kernel" and "In msg nelems" in e["args"]]
    assert len(recorded) == 21
    by_corr = nccl_args.kernels.set_index("correlation")
    for e in recorded:
        a = e["args"]
        # allreduce and broadcast: the buffer, In msg nelems × the element size
        assert by_corr.loc[a["correlation"], "bytes"] == a["In msg nelems"] * ELEMENT[a["dtype"]]
        assert by_corr.loc[a["correlation"], "group"] == "0,1"


def test_no_kernel_of_a_real_trace_beats_its_roof(nccl_args):
    bounded = nccl_args.kernels["fraction_of_roof"].dropna()
    assert len(bounded) >= 21
    assert (bounded <= 1).all()


def test_a_missing_rank_is_a_labelled_partial_result(nccl_args):
    assert nccl_args.ranks == [0]
    assert nccl_args.notes[0] == "partial result: 1 of 2 ranks; missing ranks 1"


def test_what_is_not_sized_is_counted_by_reason(nccl_args):
    k = nccl_args.kernels
    assert sum(nccl_args.unsized.values()) == k["unsized"].notna().sum() > 0
    assert k.loc[k["category"] == "communication", "unsized"].isna().all()


def _sweep(spans: list[tuple[float, float]], covered_by: list[tuple[float, float]] = ()) -> float:
    """Time at least one of `spans` runs while none of `covered_by` does: a sweep over +1/−1 events."""
    events = [(s, 0, 1) for s, _ in spans] + [(e, 0, -1) for _, e in spans]
    events += [(s, 1, 1) for s, _ in covered_by] + [(e, 1, -1) for _, e in covered_by]
    events.sort()
    active, blocked, total, last = 0, 0, 0.0, None
    for t, which, delta in events:
        if last is not None and active > 0 and blocked == 0:
            total += t - last
        last = t
        if which == 0:
            active += delta
        else:
            blocked += delta
    return total


def _step_by_hand(path: Path, step: int) -> dict[str, float]:
    events = _events(path)
    span = next(e for e in events if e.get("name") == f"ProfilerStep#{step}")
    launched = {
        e["args"]["correlation"]
        for e in events
        if e.get("cat") == "cuda_runtime" and span["ts"] <= e["ts"] <= span["ts"] + span["dur"]
    }
    gpu = [e for e in events if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    gpu = [e for e in gpu if e["args"]["correlation"] in launched]
    comm = [(e["ts"], e["ts"] + e["dur"]) for e in gpu if e["cat"] == "kernel" and e["name"].startswith("nccl")]
    compute = [(e["ts"], e["ts"] + e["dur"]) for e in gpu if e["cat"] == "kernel" and not e["name"].startswith("nccl")]
    every = [(e["ts"], e["ts"] + e["dur"]) for e in gpu]
    wall = max(e for _, e in every) - min(s for s, _ in every)
    return {
        "wall_s": wall * 1e-6,
        "compute_s": _sweep(compute) * 1e-6,
        "communication_s": _sweep(comm) * 1e-6,
        "exposed_communication_s": _sweep(comm, compute) * 1e-6,
        "idle_s": (wall - _sweep(every)) * 1e-6,
    }


def test_the_step_breakdown_of_a_real_trace_matches_a_hand_sweep(nccl_args):
    row = nccl_args.steps.set_index("step").loc[5]
    for column, expected in _step_by_hand(NCCL_ARGS, 5).items():
        assert row[column] == pytest.approx(expected, rel=1e-9), column


def test_two_sampled_ranks_each_break_down_their_steps(tmp_path):
    r = analyze_traces(TWO_RANKS, topology="dgx-a100-8")
    assert sorted(zip(r.steps["rank"], r.steps["step"], strict=True)) == [(0, 551), (0, 552), (1, 551), (1, 552)]
    row = r.steps.set_index(["rank", "step"]).loc[(1, 552)]
    for column, expected in _step_by_hand(TWO_RANKS / "sampled_rank-1.json.gz", 552).items():
        assert row[column] == pytest.approx(expected, rel=1e-9), column


def test_collectives_of_no_recorded_group_in_another_order_are_not_matched():
    # the two sampled ranks record no process group, and their sixth and seventh collectives differ in order
    r = analyze_traces(TWO_RANKS, topology="dgx-a100-8")
    assert r.collectives.empty
    assert any("not matched across ranks" in n for n in r.notes)
    assert r.notes[0].startswith("partial result: 2 of 128 ranks")


def test_a_gpu_no_preset_has_asks_for_a_topology():
    with pytest.raises(ValueError, match=r"'NVIDIA A100-PG509-200' with 108 SMs .*give --topology"):
        analyze_traces(NCCL_ARGS)


def test_a_trace_without_device_properties_asks_for_a_topology():
    with pytest.raises(ValueError, match=r"no deviceProperties .*--topology"):
        analyze_traces(TWO_RANKS)
