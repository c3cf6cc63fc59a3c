"""`pkroof topology import`: nccl-tests' and nvbandwidth's output read as the tools print it, a preset or topology
file calibrated from them (each number measured, its file the source), and physics kept: no rate above the link, no
measured time below the roof. The files are in tests/data/logs/ (README.md there says where each came from)."""

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pkroof.analysis.imported_runs import import_runs
from pkroof.cli import app
from pkroof.rooflines import Collective, Mechanism, Schedule
from pkroof.rooflines.analyze import analyze
from pkroof.rooflines.builders import collective
from pkroof.topology import load, nccl_tests, nvbandwidth, resolve
from pkroof.topology.from_logs import NVBW_DEFAULT_BUFFER

LOGS = Path(__file__).parent / "data" / "logs"
PUBLISHED = LOGS / "published"
H200X2 = sorted(LOGS.glob("h200x2_*_perf.txt"))
runner = CliRunner()
KiB, MiB, GiB = 2**10, 2**20, 2**30


def _matrix(description: str, value: float) -> str:
    """A 2-GPU nvbandwidth matrix as it prints one: N/A on the diagonal, `value` GB/s both ways."""
    return f"{description}\n           0         1\n 0       N/A    {value:.2f}\n 1    {value:.2f}       N/A\n"


def _nccl_prediction(topo, kind: Collective, size: int, ranks: int) -> float:
    w = collective(kind, ranks, "fp8", size=size)
    return analyze(w, topo.system(ranks)).bound.prediction(Mechanism.NCCL, Schedule.SERIAL).t_s


def test_a_new_format_run_is_read_with_its_ranks_hosts_and_version():
    (run,) = nccl_tests.parse(PUBLISHED / "dgx-spark-2nodes_all_reduce_perf.txt")
    assert run.collective is Collective.ALL_REDUCE and run.num_ranks == 2
    assert run.hosts == ["node-a", "node-b"] and run.gpu_names == ["NVIDIA GB10"]
    assert run.nccl_version == "2.31.2" and run.iters == 100 and not run.graph  # nccl-library=23102
    first = run.rows[0]
    assert (first.size_bytes, first.count, first.dtype) == (8192, 2048, "float")
    assert first.out_of_place_s == pytest.approx(35.15e-6) and first.in_place_s == pytest.approx(30.33e-6)
    assert first.fastest_s == pytest.approx(30.33e-6)


def test_the_old_format_without_redop_or_root_is_read_where_the_files_name_names_the_collective(tmp_path):
    named = tmp_path / "all_reduce_perf.txt"
    shutil.copy(PUBLISHED / "rtx2080ti-2gpus-old-format.txt", named)
    (run,) = nccl_tests.parse(named)
    assert len(run.rows) == 13 and run.rows[-1].size_bytes == 128 * MiB
    assert run.rows[-1].out_of_place_s == pytest.approx(3298.6e-6) and run.rows[-1].in_place_s == pytest.approx(
        3070.3e-6
    )
    assert run.num_ranks == 2  # no Rank lines: busbw / algbw = 1 = 2(n−1)/n gives n = 2


def test_without_a_program_line_or_a_telling_name_it_says_how_to_name_the_file():
    with pytest.raises(ValueError, match=r"cannot tell which collective.*name the file after its test"):
        nccl_tests.parse(PUBLISHED / "rtx2080ti-2gpus-old-format.txt")


def test_nccl_info_lines_are_skipped_and_the_ranks_come_from_busbw_over_algbw():
    (run,) = nccl_tests.parse(PUBLISHED / "h100-pcie-nvlink-2gpus_all_reduce_perf.txt")
    assert run.num_ranks == 2 and [r.size_bytes for r in run.rows] == [GiB, 2 * GiB]
    (eight,) = nccl_tests.parse(PUBLISHED / "mooncake-8ranks_all_reduce_perf.txt")
    assert eight.num_ranks == 8  # busbw / algbw = 300.51 / 171.72 = 1.75 = 2·7/8


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("  4096  1024  float  sum  -1  10.0  0.41  0.41  0  10.0  0.41  0.41  0\n", ":1: a row before any nccl-tests"),
        (
            "# nThread 1 nGpus 1\n#  size count type redop root time algbw busbw #wrong time algbw busbw #wrong\n"
            "  4096  1024  float  sum  -1  10.0  0.41  0.41  3  10.0  0.41  0.41  0\n",
            ":3: nccl-tests counted 3 wrong",
        ),
        (
            "# nThread 1 nGpus 1\n#  size count type redop root time algbw busbw #wrong time algbw busbw #wrong\n"
            "  4096  1024  float  sum  -1  fast  0.41  0.41  0  10.0  0.41  0.41  0\n",
            ":3: 'fast' is not a number",
        ),
        ("# nThread 1 nGpus 1\n#  size count type redop root time algbw\n  4096\n", ":3: 1 columns, the header"),
        (
            "# nThread 1 nGpus 1\n#  size count type redop root cputime algbw busbw #wrong\n"
            "  4096  1024  float  sum  -1  10.0  0.41  0.41  0\n",
            "CPU times (nccl-tests -C 1)",
        ),
        (
            "# nThread 1 nGpus 1\n#  Rank  0 Group  0 Pid 1 on a device  0 [0x1] G\n"
            "#  Rank  0 Group  0 Pid 2 on b device  0 [0x1] G\n",
            ":3: rank 0 is listed twice",
        ),
        ("hello\n", "no nccl-tests run in it"),
    ],
)
def test_a_bad_file_is_one_line_naming_the_file_and_the_line(tmp_path, text, expected):
    path = tmp_path / "all_reduce_perf.txt"
    path.write_text(text)
    with pytest.raises(ValueError, match=None) as e:
        nccl_tests.parse(path)
    assert str(e.value).startswith(str(path)) and expected in str(e.value) and "\n" not in str(e.value)


def test_importing_the_2xh200_runs_predicts_them_within_5_percent_large_and_10_percent_small(tmp_path):
    # the checker's bar (512 MiB within 5%, 128 KiB within 10%) at the sizes these runs have: 256 KiB, 256 MiB, 1 GiB
    topo, lines = import_runs("h200x2", H200X2)
    assert len(lines) == 5 and all("below a measured time" in line for line in lines)
    for path in H200X2:
        (run,) = nccl_tests.parse(path)
        for row in run.rows:
            predicted = _nccl_prediction(topo, run.collective, row.size_bytes, 2)
            assert predicted <= row.fastest_s * (1 + 1e-9)  # an envelope: never above a measured time
            if run.collective is Collective.ALL_REDUCE and row.size_bytes >= 256 * KiB:
                tolerance = 0.05 if row.size_bytes >= 256 * MiB else 0.10
                assert predicted == pytest.approx(row.fastest_s, rel=tolerance), row.size_bytes


def test_a_dense_sweep_is_followed_where_nccls_curve_bends_the_right_way():
    # Mooncake's 8-rank all-reduce, 32 KiB ... 32 MiB by powers of 2: from 4 MiB on the model stays within 1%
    topo, _ = import_runs("hgx-h100-8", [PUBLISHED / "mooncake-8ranks_all_reduce_perf.txt"])
    (run,) = nccl_tests.parse(PUBLISHED / "mooncake-8ranks_all_reduce_perf.txt")
    for row in run.rows:
        predicted = _nccl_prediction(topo, Collective.ALL_REDUCE, row.size_bytes, 8)
        assert predicted <= row.fastest_s * (1 + 1e-9)
        if row.size_bytes >= 4 * MiB:
            assert predicted == pytest.approx(row.fastest_s, rel=0.01)


def test_every_imported_number_is_measured_and_cites_its_file_and_hash():
    import hashlib

    path = LOGS / "h200x2_all_reduce_perf.txt"
    topo, _ = import_runs("hgx-h200-8", [path])
    nccl = topo.mechanisms["nccl"]
    assert "all-reduce" in nccl.collectives
    for field in ("latency_s", "peak_bandwidth_Bps", "collectives"):
        source = topo.sources[nccl.sources[field]]
        assert source.basis == "measured"
        assert path.name in source.cite and hashlib.sha256(path.read_bytes()).hexdigest() in source.cite
    assert topo.probe is not None and topo.probe.command.startswith("pkroof topology import hgx-h200-8")
    assert topo.mechanisms["copy-engine"] == resolve("hgx-h200-8").mechanisms["copy-engine"]  # untouched


def test_the_roof_never_rises_above_a_measured_time():
    for base, files, ranks in (
        ("h200x2", H200X2, 2),
        ("hgx-h100-8", [PUBLISHED / "mooncake-8ranks_all_reduce_perf.txt"], 8),
    ):
        topo, _ = import_runs(base, files)
        for path in files:
            (run,) = nccl_tests.parse(path)
            for row in run.rows:
                w = collective(run.collective, ranks, "fp8", size=row.size_bytes)
                assert analyze(w, topo.system(ranks)).bound.t_roof_s <= row.fastest_s


def test_an_all_reduce_faster_than_a_ring_over_the_link_is_refused_as_nvls(tmp_path):
    # 8 ranks, a 4 GiB all-reduce at busbw 475 GB/s (nccl-tests issue 272 reports that peak on 8xH200 with NVLS): a
    # ring puts 2·7/8·4 GiB on each link, 475 GB/s of link bytes, above hgx-h200-8's 450 GB/s per direction
    size = 4 * GiB
    t_us = size * 2 * 7 / 8 / 475e9 * 1e6
    rows = [(size // 4, 100.0), (size // 2, t_us / 2 + 20), (size, t_us)]
    text = "# Collective test starting: all_reduce_perf\n# nThread 1 nGpus 1 iters: 20\n"
    text += "".join(f"#  Rank {r} Group 0 Pid {r} on h device {r} [0x{r}] NVIDIA H200\n" for r in range(8))
    text += "#  size count type redop root time algbw busbw #wrong time algbw busbw #wrong\n"
    text += "".join(f"  {s} {s // 4} float sum -1 {t:.2f} 1 1 0 {t:.2f} 1 1 0\n" for s, t in rows)
    path = tmp_path / "nvls.txt"
    path.write_text(text)
    with pytest.raises(ValueError, match="above hgx-h200-8's scale-up link") as e:
        import_runs("hgx-h200-8", [path])
    assert "NVLS" in str(e.value) and "NCCL_ALGO=Ring" in str(e.value)


def test_nvbandwidth_text_and_json_read_the_same():
    text = nvbandwidth.parse(PUBLISHED / "nvbandwidth-a6000x6_read_ce.txt")
    js = nvbandwidth.parse(PUBLISHED / "nvbandwidth-a6000x6_read_ce.json")
    assert (
        text.testcases["device_to_device_memcpy_read_ce"].matrix
        == js.testcases["device_to_device_memcpy_read_ce"].matrix
    )
    assert text.version == js.version == "v0.8" and text.driver == "580.95.05"
    case = text.testcases["device_to_device_memcpy_read_ce"]
    assert case.matrix[0][0] is None and max(case.values_GBps) == 26.35


def test_nvbandwidth_sets_the_copy_engines_peak_so_its_own_copy_stays_above_the_roof():
    base = resolve("pcie-l40s-8")
    topo, _ = import_runs(base, [PUBLISHED / "nvbandwidth-a6000x6_read_ce.txt"])
    ce = topo.mechanisms["copy-engine"]
    # the best pair, 26.35 GB/s over nvbandwidth's copy of S = 64 MiB (its smallest default: the least time,
    # the highest β): β = S / (S / 26.35e9 − α), so α + S/β is the measured time, not above it
    S, alpha = NVBW_DEFAULT_BUFFER, base.mechanisms["copy-engine"].latency_s
    assert ce.peak_bandwidth_Bps == pytest.approx(S / (S / 26.35e9 - alpha))
    assert alpha + S / ce.peak_bandwidth_Bps == pytest.approx(S / 26.35e9)
    assert topo.sources[ce.sources["peak_bandwidth_Bps"]].basis == "measured"
    assert topo.mechanisms["sm-load"] == base.mechanisms["sm-load"]  # not measured here
    # 18 of the 30 pairs run at 21.8-22.7 GB/s, 12 at 26.3: the median is 22.x, no pair 10% below it, no flag
    assert topo.probe.health == ()


def test_nvbandwidth_sm_both_ways_counts_one_direction(tmp_path):
    # nvbandwidth's SM bidirectional tests print the sum of both directions (its README): 600 GB/s is 300 each way
    m = _matrix("memcpy SM GPU(row) <-> GPU(column) bandwidth (GB/s)", 600.0)
    path = tmp_path / "nvbw.txt"
    path.write_text(f"nvbandwidth Version: v0.7\n\nRunning device_to_device_bidirectional_memcpy_read_sm.\n{m}")
    topo, _ = import_runs("hgx-h100-8", [path])
    assert topo.mechanisms["sm-load"].duplex_bandwidth_Bps == pytest.approx(300e9)


def test_host_link_rates_become_probe_ceilings():
    topo, _ = import_runs("pcie-l40s-8", [PUBLISHED / "nvbandwidth-rtx4090x8_host.txt"])
    assert topo.probe.ceilings["host_to_device_ce_Bps"] == pytest.approx(26.38e9)  # the best GPU's
    assert topo.probe.ceilings["device_to_host_ce_Bps"] == pytest.approx(27.11e9)


def test_a_copy_faster_than_the_link_is_refused(tmp_path):
    m = _matrix("memcpy CE GPU(row) <- GPU(column) bandwidth (GB/s)", 500.0)
    path = tmp_path / "nvbw.txt"
    path.write_text(f"nvbandwidth Version: v0.7\n\nRunning device_to_device_memcpy_read_ce.\n{m}")
    with pytest.raises(ValueError, match=r"nvbw.txt:3: device_to_device_memcpy_read_ce measured 500 GB/s, above"):
        import_runs("hgx-h100-8", [path])


def test_the_cli_writes_a_topology_that_bound_reads(tmp_path):
    out = tmp_path / "imported.json"
    result = runner.invoke(app, ["topology", "import", "h200x2", *map(str, H200X2), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "wrote" in result.stdout and load(out).name == "h200x2+imported"
    bound = json.loads(runner.invoke(app, ["bound", "all-reduce", "-t", str(out), "--size", "1G", "--json"]).stdout)
    (run,) = nccl_tests.parse(LOGS / "h200x2_all_reduce_perf.txt")
    nccl = next(p for p in bound["predictions"] if p["mechanism"] == "nccl")
    assert nccl["t_s"] == pytest.approx(run.rows[-1].fastest_s, rel=1e-6)  # 1 GiB is a sample the fit passes


def test_the_cli_refuses_a_file_of_something_else_in_one_line(tmp_path):
    path = tmp_path / "notes.txt"
    path.write_text("these are my notes\n")
    result = runner.invoke(app, ["topology", "import", "h200x2", str(path), "--out", str(tmp_path / "o.json")])
    assert result.exit_code == 2 and len(result.stderr.strip().splitlines()) == 1
    assert "neither nccl-tests output" in result.stderr and not (tmp_path / "o.json").exists()


def test_a_refit_of_an_imported_topology_is_refused():
    from pkroof.topology.from_probe import refit

    topo, _ = import_runs("h200x2", [LOGS / "h200x2_all_reduce_perf.txt"])
    with pytest.raises(ValueError, match="calibrated by pkroof topology import"):
        refit(topo)


def test_an_imported_curve_keeps_its_own_ranks_on_a_larger_base():
    # 2-rank runs imported onto an 8-GPU preset: the report's bus bandwidth of each sample is nccl-tests' busbw at
    # the 2 ranks it ran on (2(n−1)/n = 1), not at the preset's 8
    pytest.importorskip("pandas")
    from pkroof.reports import frames

    topo, _ = import_runs("hgx-h200-8", [LOGS / "h200x2_all_reduce_perf.txt"])
    (curve,) = [c for c in topo.probe.curves if c.name == "nccl all-reduce"]
    assert curve.num_ranks == 2
    samples = frames.curves_frame(topo)
    (run,) = nccl_tests.parse(LOGS / "h200x2_all_reduce_perf.txt")
    for row, (_, sample) in zip(run.rows, samples.iterrows(), strict=True):
        assert sample["bandwidth_Bps"] == pytest.approx(row.size_bytes / row.fastest_s)  # busbw = algbw at 2 ranks
