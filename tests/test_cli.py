"""The CLI end to end: documented JSON, text views, bad input as one line and exit 2."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pkroof.cli import app

runner = CliRunner()
GiB = 2**30


def _json(*args):
    result = runner.invoke(app, [*args, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_all_gather_on_h100_moves_seven_eighths_of_the_output():
    out = _json("bound", "all-gather", "--topology", "hgx-h100-8", "--size", "1GiB")
    assert out["world_size"] == 8
    assert out["link_bytes_per_rank"] == pytest.approx(7 / 8 * GiB)
    assert out["terms"]["link_s"] == pytest.approx(out["link_bytes_per_rank"] / out["link_bandwidth_Bps"])
    assert out["limiter"] in ("compute", "hbm", "link", "latency")
    assert out["t_roof_s"] == pytest.approx(
        max(out["terms"]["compute_s"], out["terms"]["hbm_s"], out["terms"]["link_s"]) + out["terms"]["latency_s"]
    )


def test_all_reduce_on_a100_moves_twice_seven_eighths():
    # no in-network reduction on NVSwitch gen2: the best algorithm moves 2·(n−1)/n·S per rank
    out = _json("bound", "all-reduce", "--topology", "dgx-a100-8", "--size", "1GiB")
    assert out["link_bytes_per_rank"] == pytest.approx(2 * 7 / 8 * GiB)


def test_bound_json_has_the_documented_keys():
    out = _json("bound", "gemm-all-reduce", "--topology", "hgx-h200-8")
    for key in (
        "problem",
        "topology",
        "world_size",
        "t_roof_s",
        "limiter",
        "terms",
        "link_bytes_per_rank",
        "link_bandwidth_Bps",
        "peak_flops",
        "predictions",
        "recommendation",
    ):
        assert key in out
    assert set(out["terms"]) == {"compute_s", "hbm_s", "link_s", "latency_s"}
    for p in out["predictions"]:
        assert {"mechanism", "schedule", "comm_sms", "t_s"} <= set(p)
        assert p["t_s"] >= out["t_roof_s"]
    rec = out["recommendation"]
    assert {"mechanism", "schedule", "t_s", "reason"} <= set(rec)
    assert rec["t_s"] == min(p["t_s"] for p in out["predictions"])


def _gemm_rs(k):
    """M = N = 32768 and K = `k` per rank on hgx-h100-8's 8 ranks: tokens = M, out_features = N, in_features = 8K."""
    return _json(
        "bound",
        "gemm-reduce-scatter",
        "--topology",
        "hgx-h100-8",
        "--param",
        "tokens=32768",
        "--param",
        "out_features=32768",
        "--param",
        f"in_features={8 * k}",
    )


def test_gemm_reduce_scatter_on_h100_link_bound_at_512_compute_bound_at_8192():
    # hiding threshold K* = (P−1)/P · s·R/(2B) = 7/8 · 2·989e12 / (2·450e9) ≈ 1924 (the switches reduce in the
    # network at the link's 450 GB/s): 512 below, 8192 above
    low, high = _gemm_rs(512), _gemm_rs(8192)
    assert low["limiter"] == "link"
    assert high["limiter"] == "compute"
    for out, k in ((low, 512), (high, 8192)):
        assert out["t_roof_s"] >= 2 * 32768 * 32768 * k / out["peak_flops"]


def test_gemm_reduce_scatter_roof_is_below_published_fused_kernels():
    # ParallelKittens' benchmark of M=N=32768, K=4096 per rank, bf16, 8 GPUs: fused 12.524 ms,
    # cuBLAS + NCCL 17.725 ms (their tp_matmul_summary.csv). The roof must not exceed what was achieved.
    out = _gemm_rs(4096)
    assert out["t_roof_s"] <= 12.524e-3
    nccl = next(p for p in out["predictions"] if (p["mechanism"], p["schedule"]) == ("nccl", "serial"))
    assert nccl["t_s"] <= 17.725e-3  # the model's serial baseline is not slower than the real one


def test_advise_prints_a_recommendation_and_reason():
    result = runner.invoke(app, ["advise", "gemm-reduce-scatter", "--topology", "hgx-h100-8"])
    assert result.exit_code == 0, result.output
    assert "build " in result.stdout and "why:" in result.stdout
    assert "k*=" in result.stdout


def test_advise_names_the_builtin_implementations_to_measure():
    result = runner.invoke(app, ["advise", "gemm-reduce-scatter", "--topology", "h200x2", "--shape", "llama3-8b-tp2"])
    assert result.exit_code == 0, result.output
    assert "pkroof profile gemm-reduce-scatter --impl NAME" in result.output
    for name in ("torch-fused-matmul-reduce-scatter", "pkroof-gemm-rs-ce", "pkroof-gemm-rs-epilogue"):
        assert name in result.output
    # a problem no built-in implements gets no such list
    other = runner.invoke(app, ["advise", "ddp-bucket-all-reduce", "--topology", "h200x2"])
    assert other.exit_code == 0 and "built-in implementations" not in other.output


def test_impls_lists_every_builtin_with_its_pair():
    result = runner.invoke(app, ["impls"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    # the two ecosystem all-reduces and pkroof's push all-reduce, with what they implement and how they run
    assert any(line.split()[:2] == ["torch-symm-mem-one-shot", "all-reduce"] for line in lines)
    assert any(line.startswith("pkroof-two-shot") and "--impl" in line for line in lines)  # ask-only
    push = next(line for line in lines if line.startswith("pkroof-one-shot-push"))
    assert "auto" in push
    pytest.importorskip("triton")
    assert "sm-store / serial / 128 comm CTAs" in push  # declared in kernels/symm_collectives.py (CTAS_STORE)
    inter = next(line for line in lines if line.startswith("pkroof-gemm-ar-inter-sm"))
    assert "sm-store / inter-sm / comm CTAs per shape" in inter  # kernels/inter_sm.py: comm_ctas(K), reported


def test_presets_and_topology_show():
    result = runner.invoke(app, ["presets"])
    assert result.exit_code == 0
    for name in ("hgx-h100-8", "hgx-h200-8", "hgx-b200-8", "gb200-nvl72", "gb200-nvl576", "dgx-a100-8", "pcie-l40s-8"):
        assert name in result.stdout
    shown = runner.invoke(app, ["topology", "show", "hgx-h100-8"])
    assert shown.exit_code == 0 and "NVIDIA H100 80GB HBM3" in shown.stdout and "sources:" in shown.stdout
    as_json = runner.invoke(app, ["topology", "show", "hgx-h100-8", "--json", "--nodes", "2"])
    assert json.loads(as_json.stdout)["nodes"] == 2
    # a preset shows its both-ways rates (H100's copy engine: p2pBandwidthLatencyTest's 775.34 GB/s summed over the
    # two directions); the probed h200x2 shows its own: the envelope of its recorded sm-load bidirectional curve
    from pkroof.rooflines.units import fmt_Bps
    from pkroof.topology import resolve
    from pkroof.topology.from_probe import duplex_rates

    assert "both directions busy" in shown.stdout and f"copy-engine {fmt_Bps(775.34e9 / 2)}" in shown.stdout
    probed = runner.invoke(app, ["topology", "show", "h200x2"]).stdout
    rate = duplex_rates(resolve("h200x2").probe.curves)["sm-load"]
    assert "both directions busy" in probed and f"sm-load {fmt_Bps(rate)}" in probed
    # and the rate its long GEMMs are predicted at, measured (h200x2.json: bf16 666.0e12); a preset's is the
    # published maximum achievable matmul rate (H100 bf16: 794.5 TFLOP/s)
    from pkroof.rooflines.units import fmt_flops

    assert f"under continuous load (predictions of ops of 2 ms or more): bf16 {fmt_flops(666.0e12)}" in probed
    assert f"bf16 {fmt_flops(794.5e12)}" in shown.stdout


def test_topology_file_works_everywhere(tmp_path):
    path = tmp_path / "t.json"
    path.write_text(runner.invoke(app, ["topology", "show", "dgx-a100-8", "--json"]).stdout)
    out = _json("bound", "all-reduce", "--topology", str(path), "--size", "1GiB")
    assert out["link_bytes_per_rank"] == pytest.approx(2 * 7 / 8 * GiB)


def test_multi_node_world_size_and_nodes():
    out = _json("bound", "all-reduce", "--topology", "hgx-h100-8", "--nodes", "4", "--size", "1GiB")
    assert out["world_size"] == 32 and out["nodes"] == 4
    assert out["link_tier"] == "scale-out"


def test_bound_on_two_nodes_shows_the_scale_up_and_the_scale_out_term():
    # hgx-h100-8 × 2, 1 GiB all-reduce (derivation: tests/test_bound.py, the two-node all-reduce): inside the node
    # NVLS moves S each way at 450 GB/s; across, each rail all-reduces S/8 over 2 nodes, 2·(1/2)·S/8 = S/8 at the
    # GPU's 50 GB/s of NIC. S/8 at 50 GB/s (2.68 ms) is the longer: scale-out binds.
    args = ["bound", "all-reduce", "-t", "hgx-h100-8", "--nodes", "2", "--size", "1GiB"]
    out = _json(*args)
    up, net = out["link_terms"]["scale-up"], out["link_terms"]["scale-out"]
    assert up["bytes_per_rank"] == pytest.approx(GiB) and up["bandwidth_Bps"] == pytest.approx(450e9)
    assert net["bytes_per_rank"] == pytest.approx(GiB / 8) and net["t_s"] == pytest.approx(GiB / 8 / 50e9)
    assert out["terms"]["link_s"] == net["t_s"] and out["link_tier"] == "scale-out"
    text = runner.invoke(app, args).stdout
    assert "scale-up 1 GiB per rank at 450 GB/s = 2.39 ms, scale-out 128 MiB per rank at 50 GB/s = 2.68 ms" in text
    assert "(scale-out binds)" in text
    one = _json("bound", "all-reduce", "-t", "hgx-h100-8", "--size", "1GiB")
    assert list(one["link_terms"]) == ["scale-up"] and one["link_terms"]["scale-up"]["t_s"] == one["terms"]["link_s"]


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["bound", "all-gatherr"], "unknown problem 'all-gatherr'"),
        (["bound", "all-gather", "--topology", "hgx-h20-8"], "unknown topology 'hgx-h20-8'"),
        (["bound", "all-gather", "--dtype", "fp6"], "unknown dtype 'fp6'"),
        (["bound", "gemm-reduce-scatter", "--param", "q=3"], "has no parameter q"),
        (["bound", "gemm-reduce-scatter", "-p", "tokens=1001"], "tokens=1001 is not divisible by the world size 8"),
        (["bound", "all-gather", "--size", "1002"], "501 bf16 elements do not split evenly over 8 ranks"),
        (["bound", "all-gather", "--size", "1001", "--dtype", "fp32"], "not a whole number of fp32 elements"),
        (["bound", "all-gather", "--world-size", "1"], "world size must be at least 2"),
        (["bound", "all-gather", "--world-size", "16"], "larger than hgx-h100-8's 8 GPUs"),
        (["bound", "all-gather", "--size", "lots"], "cannot read size 'lots'"),
        (["bound", "all-gather", "--size", "0"], "size '0' must be at least 1 byte"),
        (["bound", "all-gather", "--size", "-4096"], "size '-4096' must be positive"),
        (["bound", "gemm-reduce-scatter", "--size", "1GiB"], "gemm-reduce-scatter has no size"),
        (["bound", "gemm-reduce-scatter", "--size", "1GiB"], "--param name=value (tokens, in_features, out_features)"),
        (["bound", "all-gather", "--world-size", "0"], "world size must be at least 2, got 0"),
        (["bound", "all-gather", "-n", "-1"], "world size must be at least 2, got -1"),
        (["advise", "gemm-all-reduce", "-p", "tokens=0"], "--param tokens=0: must be a positive integer"),
        (["bound", "gemm-all-reduce", "-p", "tokens=-8"], "--param tokens=-8: must be a positive integer"),
        (["bound", "gemm-all-reduce", "-p", "in_features=64KiB"], "in_features is a count, not a byte size"),
        (["bound", "all-reduce", "-p", "size=-8"], "--param size: size '-8' must be positive"),
        # out of place, an all-reduce holds its send and its receive buffer: 2·10^12 B = 1.82 TiB > 140 GiB
        (["bound", "all-reduce", "-t", "h200x2", "--size", "1e12"], "1.82 TiB on each rank, more than one NVIDIA"),
        (["advise", "all-reduce", "-t", "h200x2", "--size", "1e30"], "more than one NVIDIA H200's 140 GiB of HBM"),
        (["bound", "all-reduce", "--size", "1PiB"], "needs 2 PiB on each rank"),
        # tokens·out_features·2 B ≈ 2.6e22 B for the all-reduce alone
        (["bound", "gemm-all-reduce", "-p", "tokens=99999999999999999999"], "on each rank, more than one NVIDIA H100"),
        (["bound", "gemm-reduce-scatter", "--topology", "dgx-a100-8", "--dtype", "fp8"], "has no fp8 peak"),
        (["advise", "all-reduce", "--param", "size"], "--param takes name=value"),
        (["topology", "show", "/nonexistent/t.json"], "cannot read"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args, expected):
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    assert expected in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert "Traceback" not in result.output


def test_malformed_topology_file_exits_2(tmp_path):
    bad = tmp_path / "bad.json"
    data = json.loads(runner.invoke(app, ["topology", "show", "hgx-h100-8", "--json"]).stdout)
    data["gpu"]["hbm_bandwidth_Bps"] = -1
    bad.write_text(json.dumps(data))
    result = runner.invoke(app, ["bound", "all-reduce", "--topology", str(bad)])
    assert result.exit_code == 2
    assert "gpu.hbm_bandwidth_Bps: must be positive" in result.stderr


def test_console_script_runs_without_torch_in_a_subprocess():
    # `bound` must not import torch, pynvml or plotly: check what the process actually loaded
    code = (
        "import sys; from typer.testing import CliRunner; from pkroof.cli import app; "
        "r = CliRunner().invoke(app, ['bound', 'all-reduce', '--json']); assert r.exit_code == 0, r.output; "
        "print(sorted(m for m in ('torch', 'pynvml', 'plotly') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_no_arguments_prints_help():
    result = runner.invoke(app, [])
    assert "bound" in result.output and "advise" in result.output


def test_a_gemm_problem_takes_its_own_parameters_and_splits_k_over_the_ranks():
    # gemm-all-reduce at 2 ranks: tokens=256 rows, in_features=2048 split into k = 1024 per rank, out_features=1024
    out = _json("bound", "gemm-all-reduce", "--topology", "h200x2", "-p", "tokens=256", "-p", "in_features=2048",
                "-p", "out_features=1024")  # fmt: skip
    assert out["params"] == {"tokens": 256, "in_features": 2048, "out_features": 1024}  # the ones -p takes
    assert out["flops"] == 2 * 256 * 1024 * (2048 // 2)  # m = tokens, n = out_features, k = in_features / 2 ranks
    assert out["comm"][0]["size_bytes"] == 256 * 1024 * 2  # the bf16 output, all-reduced


def test_small_all_reduce_advice_names_the_ll_protocol_and_its_kernel():
    # on hgx-h100-8 (the hand-off carried from the 2×H200 node, LL's not measured: both protocols pay the same) a
    # 4 KiB all-reduce: LL skips the flag step (the SM-store step latency carried from the 2×H200 node, 1.21 µs)
    # for 7·4 KiB more on the link (78 ns at 369 GB/s) and a few KiB more of HBM staging: it wins, and the advice
    # says why
    out = _json("bound", "all-reduce", "--topology", "hgx-h100-8", "--size", "4KiB")
    rows = {(p["mechanism"], p["schedule"], p["protocol"]): p["t_s"] for p in out["predictions"]}
    assert rows["sm-store", "serial", "ll"] < rows["sm-store", "serial", "simple"]
    assert out["recommendation"]["protocol"] == "ll"
    result = runner.invoke(app, ["advise", "all-reduce", "--topology", "hgx-h100-8", "--size", "4KiB"])
    assert result.exit_code == 0, result.output
    assert "build sm-store LL + serial" in result.stdout and "the LL protocol" in result.stdout


def test_bare_size_suffixes_are_binary_as_in_nccl_tests():
    # nccl-tests' `-b 64M` is 64 MiB: an all-gather of 64 MiB on 8 ranks puts 7/8 of it on each rank's link;
    # 64MB (SI) is 64·10^6 B
    assert _json("bound", "all-gather", "--size", "64M")["link_bytes_per_rank"] == pytest.approx(7 / 8 * 64 * 2**20)
    assert _json("bound", "all-gather", "--size", "64MB")["link_bytes_per_rank"] == pytest.approx(7 / 8 * 64e6)


def test_advice_without_an_nccl_baseline_has_no_headroom(tmp_path):
    data = json.loads(runner.invoke(app, ["topology", "show", "hgx-h100-8", "--json"]).stdout)
    data["mechanisms"]["nccl"] = {
        "available": False, "latency_s": 0.0, "peak_bandwidth_Bps": 0.0, "per_cta_bandwidth_Bps": None,
        "note": "not installed",
    }  # fmt: skip
    path = tmp_path / "no-nccl.json"
    path.write_text(json.dumps(data))
    rec = _json("advise", "all-reduce", "--topology", str(path))
    assert rec["baseline_t_s"] is None and rec["headroom"] is None
    with_nccl = _json("advise", "all-reduce", "--topology", "hgx-h100-8")
    assert with_nccl["headroom"] == pytest.approx(with_nccl["baseline_t_s"] / with_nccl["t_s"])


def _one_line_exit_2(args):
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.output
    return result.stderr


@pytest.mark.parametrize("timeout", ["0", "-1", "nan"])
def test_profile_refuses_a_timeout_that_is_not_positive(timeout, tmp_path):
    err = _one_line_exit_2(["profile", "all-reduce", "--timeout", timeout, "--out", str(tmp_path)])
    assert "timeout must be a positive number of seconds" in err
    assert not (tmp_path / "results.jsonl").exists()


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["-n", "0"], "world size must be at least 2, got 0"),
        (["-n", "3"], "world size 3 is larger than h200x2's 2 GPUs"),
        (["-p", "size_bytes=0"], "size '0' must be at least 1 byte"),
        (["--size", "1e12"], "1.82 TiB on each rank, more than one NVIDIA H200's 140 GiB"),
    ],
)
def test_profile_refuses_bad_options_before_anything_runs(args, expected, tmp_path):
    pytest.importorskip("torch")
    err = _one_line_exit_2(["profile", "all-reduce", "-t", "h200x2", *args, "--out", str(tmp_path)])
    assert expected in err
    assert not (tmp_path / "results.jsonl").exists()


@pytest.mark.parametrize("command", ["bound", "profile"])
def test_size_on_a_problem_without_one_says_how_to_set_its_shape(command, tmp_path):
    pytest.importorskip("torch")
    args = [command, "all-reduce-rmsnorm", "-t", "h200x2", "--size", "64MiB"]
    err = _one_line_exit_2(args + (["--out", str(tmp_path)] if command == "profile" else []))
    assert "all-reduce-rmsnorm has no size (--size applies to collectives)" in err
    assert "--shape (small, " in err and "--param name=value (tokens, hidden)" in err


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("def fast(x):\n    return x +\n", "f.py: cannot import it (SyntaxError: invalid syntax (f.py, line 2))"),
        ("raise RuntimeError('import-time boom')\n", "f.py: cannot import it (RuntimeError: import-time boom)"),
        ("import no_such_module_here\n", "f.py: cannot import it (ModuleNotFoundError: No module named 'no_such"),
        (
            "from pkroof.kernels.declare import declare\n\n@declare(\n    mechanism='warp-drive',\n"
            "    schedule='serial',\n)\ndef fast(x):\n    return x\n",
            "f.py:fast: @declare mechanism 'warp-drive' is not one of copy-engine, sm-load, sm-store, tma, multimem, "
            "nccl, network",
        ),
    ],
)
def test_an_implementation_file_that_does_not_import_is_one_line_before_any_rank_starts(
    source, expected, tmp_path, monkeypatch
):
    pytest.importorskip("torch")
    monkeypatch.chdir(tmp_path)
    Path("f.py").write_text(source)
    err = _one_line_exit_2(["profile", "all-reduce", "--impl", "f.py:fast", "--out", str(tmp_path)])
    assert err.startswith(f"pkroof: {expected}")
    assert not (tmp_path / "results.jsonl").exists()


def test_advice_is_over_nccls_default_and_never_advertises_a_pair_within_the_models_error():
    # dgx-a100-8, 64 MiB all-reduce: NCCL's tuning model runs ring/simple (A100 has no NVLS); the copy engine is
    # predicted faster, but by less than WIN (1.1): NCCL's default is the advice, the faster pair kept beside it
    from pkroof.rooflines.advice import WIN

    out = _json("bound", "all-reduce", "--topology", "dgx-a100-8", "--size", "64MiB")
    rec = out["recommendation"]
    assert (rec["mechanism"], rec["headroom"], rec["baseline_assumes"]) == ("nccl", 1.0, "ring/simple")
    assert rec["fastest_t_s"] < rec["baseline_t_s"] < WIN * rec["fastest_t_s"]
    assert "no gain the model can claim" in rec["reason"]
    # every NCCL prediction names its pair, and gives the eager figure beside the graph-captured one: each call
    # waited on pays the host's launch overhead (21.3 µs, carried from 8×H200) on top
    nccl = next(p for p in out["predictions"] if p["mechanism"] == "nccl")
    assert (nccl["algorithms"], nccl["protocols"]) == (["ring"], ["simple"])
    assert nccl["t_eager_s"] == pytest.approx(nccl["t_s"] + 21.3e-6, rel=1e-3)
    shown = runner.invoke(app, ["bound", "all-reduce", "--topology", "hgx-h100-8", "--size", "8GiB"]).stdout
    assert "nvls/simple" in shown  # the text table names the pair NCCL runs too
