"""nccl-tests' conventions on the CLI (sweeps, algbw and busbw, out of place | in place), --version, plain flags,
the one default topology, and advice reasons of a few short lines."""

import json

import pytest
from typer.testing import CliRunner

from pkroof.cli import app

runner = CliRunner()
MiB, GiB = 2**20, 2**30


def _ok(*args):
    result = runner.invoke(app, list(args))
    assert result.exit_code == 0, result.output
    return result


def _json(*args):
    return json.loads(_ok(*args, "--json").stdout)


def _fails(*args):
    result = runner.invoke(app, list(args))
    assert result.exit_code == 2, result.output
    assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.output
    return result.stderr


def test_a_sweep_of_minbytes_maxbytes_and_stepfactor_gives_one_object_per_size():
    # nccl-tests' `-b 1M -e 16M -f 2`: 1, 2, 4, 8, 16 MiB
    out = _json("bound", "all-gather", "-t", "hgx-h100-8", "-b", "1M", "-e", "16M", "-f", "2")
    assert isinstance(out, list)
    assert [o["params"]["size_bytes"] for o in out] == [MiB, 2 * MiB, 4 * MiB, 8 * MiB, 16 * MiB]


def test_a_sweep_without_stepfactor_steps_by_stepbytes_as_nccl_tests():
    # nccl-tests: stepfactor 1 (its default) adds stepbytes each time: 1 MiB, 1 MiB + 512 KiB, 2 MiB
    out = _json("bound", "all-reduce", "-t", "h200x2", "-b", "1M", "-e", "2M", "-i", "512K")
    assert [o["params"]["size_bytes"] for o in out] == [MiB, MiB + 512 * 1024, 2 * MiB]


def test_one_size_stays_one_object():
    out = _json("bound", "all-reduce", "-t", "h200x2", "--size", "64M")
    assert isinstance(out, dict) and out["params"]["size_bytes"] == 64 * MiB


def test_a_repeated_size_takes_every_size_not_the_last():
    out = _json("bound", "all-reduce", "-t", "h200x2", "--size", "1M", "--size", "64M")
    assert [o["params"]["size_bytes"] for o in out] == [MiB, 64 * MiB]


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--size", "1M", "--size", "1MiB"], "--size 1M is given twice"),
        (["--size", "1M", "-b", "1M", "-e", "4M"], "not both"),
        (["-f", "2"], "give -b/--minbytes and -e/--maxbytes too"),
        (["-b", "4M", "-e", "1M"], "-b/--minbytes 4194304 is larger than -e/--maxbytes 1048576"),
        (["-b", "1", "-e", "8G"], "more than 4096 sizes"),
    ],
)
def test_bad_sizes_are_one_line(args, expected):
    assert expected in _fails("bound", "all-reduce", "-t", "h200x2", *args)


def test_algbw_and_busbw_follow_nccl_tests_factors():
    # PERFORMANCE.md: algbw = S / t; busbw = algbw · 2(n−1)/n for all-reduce, · (n−1)/n for all-gather
    for problem, factor in (("all-reduce", 2 * 7 / 8), ("all-gather", 7 / 8)):
        out = _json("bound", problem, "-t", "hgx-h100-8", "--size", "1G")
        assert out["algbw_Bps"] == pytest.approx(GiB / out["t_roof_s"])
        assert out["busbw_Bps"] == pytest.approx(GiB / out["t_roof_s"] * factor)
        for p in out["predictions"]:
            assert p["algbw_Bps"] == pytest.approx(GiB / p["t_s"])
            assert p["busbw_Bps"] == pytest.approx(GiB / p["t_s"] * factor)


def test_a_fused_problem_has_no_algbw_or_busbw():
    out = _json("bound", "gemm-reduce-scatter", "-t", "hgx-h100-8")
    assert out["algbw_Bps"] is None and out["busbw_Bps"] is None
    assert all(p["busbw_Bps"] is None for p in out["predictions"])


def test_the_sweep_table_prints_nccl_tests_columns():
    text = _ok("bound", "all-reduce", "-t", "h200x2", "-b", "64M", "-e", "256M", "-f", "4").stdout
    lines = text.splitlines()
    assert lines[1].split()[:4] == ["#", "size", "count", "type"] and "busbw" in lines[1]
    first = lines[3].split()
    assert first[:3] == [str(64 * MiB), str(64 * MiB // 2), "bf16"]  # count: bf16 elements
    out = _json("bound", "all-reduce", "-t", "h200x2", "--size", "64M")
    assert float(first[3]) == pytest.approx(out["t_roof_s"] * 1e6, abs=0.01)  # t_roof in µs
    assert float(first[5]) == pytest.approx(out["busbw_Bps"] / 1e9, abs=0.1)  # busbw in GB/s


def test_advise_json_for_several_sizes_is_a_list_of_recommendations_with_their_size():
    out = _json("advise", "all-reduce", "-t", "h200x2", "--size", "256K", "--size", "1G")
    assert [o["size_bytes"] for o in out] == [256 * 1024, GiB]
    assert all({"mechanism", "schedule", "t_s", "reason"} <= set(o) for o in out)


def test_version():
    from pkroof import __version__

    assert _ok("--version").stdout.strip() == f"pkroof {__version__}"


@pytest.mark.parametrize("command", [["bound"], ["profile"], ["probe"], ["report"], ["topology", "show"]])
def test_flags_are_shown_without_a_type(command):
    text = _ok(*command, "--help").stdout
    assert "<bool>" not in text
    assert "--no-" not in text  # no negative flag where none is useful


def test_bound_and_profile_share_one_default_topology(tmp_path, monkeypatch):
    from pkroof.cli import _topology
    from pkroof.topology.default import PRESET

    assert _topology(None) == PRESET
    assert _json("bound", "all-reduce")["topology"] == PRESET
    monkeypatch.setenv("PKROOF_TOPOLOGY", "h200x2")
    assert _topology(None) == "h200x2"
    assert _json("bound", "all-reduce")["topology"] == "h200x2"


def test_a_saved_topology_is_the_default(tmp_path, monkeypatch):
    from pkroof.topology.default import saved_path

    saved = saved_path()  # under the test's own XDG_CONFIG_HOME (conftest)
    saved.parent.mkdir(parents=True)
    saved.write_text(_ok("topology", "show", "dgx-a100-8", "--json").stdout)
    out = _json("bound", "all-reduce", "--size", "1G")
    assert out["topology"] == "dgx-a100-8" and out["world_size"] == 8


def test_advice_reason_is_a_few_short_lines_quoting_only_this_pairs_numbers():
    # on 8xB200 NCCL's default all-reduce is a ring (no NVLS baseline there), so in-network reduction is advised
    rec = _json("advise", "all-reduce", "-t", "hgx-b200-8", "--size", "1G")
    assert rec["mechanism"] == "multimem"
    lines = rec["reason"].splitlines()
    assert 2 <= len(lines) <= 6 and all(len(line) <= 120 for line in lines)
    assert "copy engine" not in rec["reason"] and "SMs to reach" not in rec["reason"]  # not what decided multimem
    assert "copy_engine_efficient_bytes" in rec["facts"] and "sm-store_ctas_for_90pct" in rec["facts"]  # kept
    small = _json("advise", "all-reduce", "-t", "h200x2", "--size", "256K")
    assert small["mechanism"] == "sm-store" and small["protocol"] == "ll"
    assert "the LL protocol" in small["reason"] and "of 132 SMs" in small["reason"]


def test_the_reason_names_the_runner_up_and_its_margin():
    out = _json("bound", "all-reduce", "-t", "h200x2", "--size", "64M")
    best, *rest = out["predictions"]
    runner_up = next(p for p in rest if (p["mechanism"], p["schedule"]) != (best["mechanism"], best["schedule"]))
    assert out["recommendation"]["facts"]["t_next_s"] == runner_up["t_s"]
    assert f"{runner_up['t_s'] / best['t_s'] - 1:+.0%}" in out["recommendation"]["reason"].splitlines()[-1]


def test_nccl_tests_table_pairs_the_reference_with_nccl_in_place():
    from pkroof.analysis.problem import analyze
    from pkroof.profilers.profile import nccl_tests_table

    pa = analyze("all-reduce", topology="h200x2", params={"size_bytes": 64 * MiB})
    size = float(64 * MiB)
    rows = [
        {"impl": "reference", "status": "correct", "comm_bytes": size, "median_s": 250e-6},
        {"impl": "nccl-all-reduce-in-place", "status": "correct", "comm_bytes": size, "median_s": 200e-6},
        {"impl": "pkroof-one-shot-push", "status": "correct", "comm_bytes": size, "median_s": 190e-6},
    ]
    for r in rows:  # nccl-tests' algbw and busbw as profile derives them (2 ranks: busbw = algbw)
        r |= {"algbw_Bps": size / r["median_s"], "busbw_Bps": size / r["median_s"]}
    table = nccl_tests_table(rows, pa, "nccl").splitlines()
    assert "out-of-place" in table[1] and "in-place" in table[1]
    columns = ["size", "count", "type", "redop", "root", *["time", "algbw", "busbw", "#wrong"] * 2]
    assert table[2].split()[1:] == columns
    cells = table[4].split()
    assert cells[:5] == [str(64 * MiB), str(32 * MiB), "bf16", "sum", "-1"]
    assert [float(c) for c in (cells[5], cells[9])] == [250.0, 200.0]  # out of place: the reference; in place
    assert float(cells[6]) == pytest.approx(size / 250e-6 / 1e9, abs=0.01)
