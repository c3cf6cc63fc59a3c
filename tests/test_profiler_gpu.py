"""The profiler on GPUs (the 2xH200 node): references and torch's fast paths checked, timed under CUDA graphs,
never faster than their roofline, with the model's prediction error for the reference (NCCL, serial)."""

import pytest

pytestmark = [pytest.mark.gpu, pytest.mark.multigpu]


def test_references_and_torch_fast_paths_on_gpus(tmp_path):
    from pkroof.profilers.profile import profile
    from pkroof.profilers.sampling import calls_per_sample

    lines = []
    written = profile(
        ["all-reduce", "gemm-reduce-scatter", "all-gather-gemm"],
        impls=[],
        world_size=2,
        shape=None,
        overrides={},
        out_dir=tmp_path,
        timeout_s=120,
        resume=False,
        topology="h200x2",
        log=lines.append,
    )
    by = {(r["problem"], r["impl"]): r for r in written}
    assert ("all-reduce", "torch-symm-mem-one-shot") in by  # the fast paths ran as peers, unasked
    assert ("gemm-reduce-scatter", "torch-fused-matmul-reduce-scatter") in by
    for (problem, impl), r in by.items():
        assert r["status"] == "correct", (problem, impl, r.get("message"))
        assert r["environment"]["backend"] == "nccl" and r["environment"]["driver"]
        assert r["median_s"] >= r["t_roof_s"] * 0.95, (problem, impl)  # no correct run beats the roof (5% noise)
        assert 0 < r["fraction_of_roofline"] <= 1.05
        timing = r["timing"]
        if timing["mode"] == "graph":  # every rank sized its graph samples by the same pilot
            assert timing["calls_per_sample"] == calls_per_sample(timing["pilot_median_s"]), (problem, impl)
            assert timing["pilot_median_s"] >= r["median_s"] * 0.9  # 3-call samples carry the start-up: slower
        # every rank's GPU state during the kept samples; the record holds the slowest rank's clock
        assert [s["rank"] for s in timing["gpu_state"]] == [0, 1], (problem, impl)
        assert r["sm_clock_mhz"] == min(s["sm_clock_mhz"] for s in timing["gpu_state"])
    reference = by[("all-reduce", "reference")]
    assert (reference["mechanism"], reference["schedule"]) == ("nccl", "serial")
    assert "prediction_error" in reference


@pytest.mark.parametrize(
    "tokens, path",
    [(100, "one-shot"), (2048, "two-shot")],  # 100·512·2 B = 100 KiB; 2048·1536·2 B = 6 MiB > ONE_SHOT_MAX_BYTES
)
def test_gemm_all_reduce_copy_engine_both_paths(tmp_path, tokens, path):
    """The copy-engine GEMM + all-reduce's one-shot (100 rows: blocks of 50) and two-shot paths pass the
    profiler's check against matmul + NCCL on fresh inputs, and then time (every call after the first waits on
    the inbox credits the last one returned)."""
    from pkroof.kernels.fused import ONE_SHOT_MAX_BYTES
    from pkroof.profilers.profile import profile

    out_features = 512 if path == "one-shot" else 1536
    assert (tokens * out_features * 2 <= ONE_SHOT_MAX_BYTES) == (path == "one-shot")
    written = profile(
        ["gemm-all-reduce"],
        impls=["pkroof-gemm-ar-ce"],
        world_size=2,
        shape=None,
        overrides={"tokens": tokens, "in_features": 1024, "out_features": out_features},
        out_dir=tmp_path,
        timeout_s=120,
        resume=False,
        topology="h200x2",
        log=print,
    )
    (record,) = [r for r in written if r["impl"] == "pkroof-gemm-ar-ce"]
    assert record["status"] == "correct", record.get("message")
    assert record["median_s"] > 0
