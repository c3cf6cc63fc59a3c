"""analyze_traces pauses Python's cycle collector while it reads (runs/analyze_traces.py) and leaves it as it found it,
bad input included."""

import gc

import pytest
from trace_frames import two_rank_job

from pkroof.runs import analyze_traces


def test_the_cycle_collector_is_on_again_after_a_job(tmp_path):
    assert gc.isenabled()
    analyze_traces(two_rank_job(tmp_path), topology="hgx-h100-8")
    assert gc.isenabled()


def test_the_cycle_collector_is_on_again_after_bad_input(tmp_path):
    bad = tmp_path / "rank0.json"
    bad.write_text('{"traceEvents": [')
    with pytest.raises(ValueError):
        analyze_traces(bad)
    assert gc.isenabled()


def test_a_caller_that_paused_it_finds_it_paused(tmp_path):
    gc.disable()
    try:
        analyze_traces(two_rank_job(tmp_path), topology="hgx-h100-8")
        assert not gc.isenabled()
    finally:
        gc.enable()
