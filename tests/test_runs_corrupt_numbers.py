"""Numbers no profiler writes: events without a time, with a negative or absurd duration, are dropped with a note
counting them; a negative rank or world size is one line."""

import json

import pytest
from runs_traces import Synthetic

from pkroof.runs import analyze_traces

ADD = "void at::native::vectorized_elementwise_kernel<4>"


def _with_bad(tmp_path, bad: dict):
    """Step 1 over [0, 1000) µs with a good kernel at [100, 150) and a second kernel changed by `bad`."""
    t = Synthetic(rank=0, world=1)
    t.step(1, 0, 1000)
    t.kernel(ADD, 100, 50, op="aten::add")
    t.kernel(ADD, 200, 50, op="aten::add")
    event = next(e for e in reversed(t.doc["traceEvents"]) if e["cat"] == "kernel")
    event.update(bad)
    for key in [k for k, v in bad.items() if v is None]:
        del event[key]
    return t.write(tmp_path / "rank0.json")


@pytest.mark.parametrize("bad", [{"ts": None}, {"dur": -5}, {"dur": 1e308}], ids=["no ts", "dur -5", "dur 1e308"])
def test_a_kernel_with_a_corrupt_time_is_dropped_with_a_note(tmp_path, bad):
    r = analyze_traces(_with_bad(tmp_path, bad), topology="hgx-h100-8")
    assert len(r.kernels) == 1  # the good kernel only
    (step,) = r.steps.to_dict("records")
    assert step["wall_s"] == pytest.approx((150 - 100) * 1e-6)  # its own span, not one stretched by the bad one
    assert any("1 events dropped" in n for n in r.notes)


def test_a_negative_world_size_is_one_line(tmp_path):
    t = Synthetic(rank=0, world=1)
    t.doc["distributedInfo"]["world_size"] = -3
    t.kernel(ADD, 100, 50, op="aten::add")
    with pytest.raises(ValueError, match=r"rank0.json: distributedInfo world size -3 is invalid") as e:
        analyze_traces(t.write(tmp_path / "rank0.json"), topology="hgx-h100-8")
    assert "\n" not in str(e.value)


def test_a_string_world_size_is_one_line(tmp_path):
    t = Synthetic(rank=0, world=1)
    t.doc["distributedInfo"]["world_size"] = "two"
    t.kernel(ADD, 100, 50, op="aten::add")
    path = t.write(tmp_path / "rank0.json")
    assert json.loads(path.read_text())["distributedInfo"]["world_size"] == "two"
    with pytest.raises(ValueError, match=r"world size 'two' is invalid"):
        analyze_traces(path, topology="hgx-h100-8")
