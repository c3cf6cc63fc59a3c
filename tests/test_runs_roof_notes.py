"""A roof is a bound: kernels measured faster than their roof are said in a note (count and the highest fraction),
never clamped; --topology naming another GPU than the traces' deviceProperties is a note naming both."""

import pytest
from runs_traces import Synthetic, nccl_args
from typer.testing import CliRunner

from pkroof.cli import app
from pkroof.runs import analyze_traces
from pkroof.topology import preset

AR = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)"


def _above(tmp_path):
    """Two all-reduces of 2^24 bf16 elements on 2 ranks: 1 µs (far above its roof) and 1 s (far below)."""
    t = Synthetic(rank=0, world=2)
    t.kernel(AR, 10, 1, args=nccl_args("allreduce", 2**24, "BFloat16", [0, 1]))
    t.kernel(AR, 100, 1e6, args=nccl_args("allreduce", 2**24, "BFloat16", [0, 1]))
    return t.write(tmp_path / "r.json")


def test_kernels_above_their_roof_are_counted_in_a_note_with_the_highest_fraction(tmp_path):
    r = analyze_traces(_above(tmp_path), topology="hgx-h100-8")
    fast = r.kernels.sort_values("dur_us").iloc[0]
    highest = fast["t_roof_s"] / 1e-6  # the 1 µs kernel: roof time over measured time, unclamped
    assert highest > 1
    note = f"1 kernels above their roof (up to {highest:.0%}): the topology is not this machine's"
    assert any(n.startswith(note) for n in r.notes)


def test_no_note_when_every_kernel_is_at_or_below_its_roof(tmp_path):
    t = Synthetic(rank=0, world=2)
    t.kernel(AR, 100, 1e6, args=nccl_args("allreduce", 2**24, "BFloat16", [0, 1]))
    r = analyze_traces(t.write(tmp_path / "r.json"), topology="hgx-h100-8")
    assert not any("above their roof" in n for n in r.notes)


def test_a_topology_of_another_gpu_than_the_trace_is_a_note_naming_both(tmp_path):
    r = analyze_traces(_above(tmp_path), topology="hgx-b200-8")
    b200, h100 = preset("hgx-b200-8").gpu.name, "NVIDIA H100 80GB HBM3"  # tests/runs_traces.py's H100 device
    assert b200 != h100
    assert any(b200 in n and h100 in n for n in r.notes)


def test_the_matching_topology_gives_no_gpu_note(tmp_path):
    r = analyze_traces(_above(tmp_path), topology="hgx-h100-8")
    assert not any("but the traces ran on" in n for n in r.notes)


@pytest.mark.parametrize("flag", ["--json", None])
def test_the_cli_summary_and_json_carry_the_above_roof_note(tmp_path, flag):
    args = ["trace", str(_above(tmp_path)), "-t", "hgx-h100-8"] + ([flag] if flag else [])
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "1 kernels above their roof" in result.output


@pytest.mark.parametrize(("kind", "factor"), [("gather", (4 - 1) / 4), ("scatter", (4 - 1) / 4), ("broadcast", 1.0)])
def test_the_busbw_factor_of_gather_and_scatter_is_n_minus_1_over_n_as_docs_trace_says(kind, factor):
    from pkroof.runs.roofs import Model

    assert Model.busbw_factor(kind, 4) == pytest.approx(factor)
