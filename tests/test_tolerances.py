"""How outputs are judged: per-dtype tolerances, --rtol/--atol, and the oracle (the reference rerun on its inputs
widened: bf16/fp16 to fp32, fp32 to fp64), which lets an implementation that is closer to the exact answer than
the reference is count as correct. Pure cases on tensors, then 2 CPU ranks over gloo."""

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from pkroof.profilers.checks import TOLERANCES, _widened, compare, tolerance  # noqa: E402
from pkroof.profilers.run import Job, run_job  # noqa: E402

DATA = Path(__file__).parent / "data" / "problems"
RUNNING_SUM = str(DATA / "bf16_running_sum.py")
GEMM = str(DATA / "user_gemm_all_reduce.py")
IMPLS = str(DATA / "impls.py")


def test_defaults_by_dtype_and_overrides_apply_to_floating_outputs_only():
    assert tolerance("bfloat16") == TOLERANCES["bfloat16"] == (1.6e-2, 1e-2)
    assert tolerance("float32", rtol=2e-3) == (2e-3, 1e-5)  # the atol stays the dtype's
    assert tolerance("float16", atol=0.5) == (1e-3, 0.5)
    assert tolerance("int64", rtol=1.0, atol=1.0) == (0.0, 0.0)  # integers are compared exactly, always


def test_an_element_one_ulp_off_the_reference_but_on_the_exact_value_is_right_with_the_oracle():
    # bf16 has 8 significant bits: between 256 and 512 its spacing (ulp) is 2. Exact value 300; the reference
    # says 296 (2 ulps low), the implementation 300. rtol·|296| + atol = 1.6e-2·296 + 1e-2 = 4.746 ≥ |300 − 296|
    # = 4: within tolerance. Take the reference at 290 instead (5 ulps low): 1.6e-2·290 + 1e-2 = 4.65 < 10, so
    # outside the tolerance; but |300 − 300| = 0 ≤ |290 − 300| = 10: the implementation is the closer one.
    bf = torch.bfloat16
    want, got = torch.tensor([296.0, 290.0], dtype=bf), torch.tensor([300.0, 300.0], dtype=bf)
    exact = torch.tensor([300.0, 300.0], dtype=torch.float32)
    ok, worst, why = compare((got,), (want,))
    assert not ok and worst == 10.0 and why == "output 0: 1 of 2 elements differ (max |error| 10)"
    assert compare((got,), (want,), oracle=(exact,))[0]
    # farther from the exact value than the reference, and outside the tolerance: wrong with the oracle too
    assert not compare((torch.tensor([300.0, 280.0], dtype=bf),), (want,), oracle=(exact,))[0]


def test_the_oracle_widens_16_and_32_bit_floats_and_leaves_the_rest():
    x = (torch.ones(2, dtype=torch.bfloat16), torch.ones(2), torch.arange(2), 3)
    wide = _widened(x)
    assert [t.dtype for t in wide[:3]] == [torch.float32, torch.float64, torch.int64] and wide[3] == 3
    assert wide[2] is not x[2]  # a copy: the reference may write its inputs


def _run(problem: str, params: dict, impl: str, **tol) -> dict:
    return run_job(Job(problem, "small", params, impl, 2, "gloo", **tol), timeout_s=120)


SUM = {"rows": 64, "cols": 512}


def test_fp32_accumulation_beats_a_bf16_running_sum_reference_and_is_correct():
    # the reference's running bf16 sum of 512 terms in [0, 2) stalls as it grows (an ulp of 2 past 256): a few
    # percent off the exact sum; fp32 accumulation rounded once is within half a bf16 ulp of it (≤ 0.4%)
    record = _run(RUNNING_SUM, SUM, f"{RUNNING_SUM}:fp32_accumulation")
    assert record["status"] == "correct", record.get("message")
    assert record["judged_by_oracle"] is True and len(record["timing"]["samples_s"]) >= 1


def test_three_percent_high_is_wrong_although_the_reference_is_off_too():
    record = _run(RUNNING_SUM, SUM, f"{RUNNING_SUM}:three_percent_high")
    assert record["status"] == "incorrect" and "timing" not in record
    assert record["message"].endswith("and no closer than the reference to its widened rerun")


def test_rtol_widens_the_tolerance_and_the_record_says_so():
    # fp32 output 1.001× the reference: a relative error of 1e-3, above fp32's default rtol 1.3e-5 (plus atol
    # 1e-5 against outputs of order 1..10), below --rtol 2e-3; and no closer to the fp64 rerun than the fp32
    # reference (whose error is ~1e-7 relative), so the oracle does not save it by default
    impl = f"{IMPLS}:one_part_in_a_thousand_high"
    params = {"m": 64, "n": 32, "k": 16}
    assert _run(GEMM, params, impl)["status"] == "incorrect"
    record = _run(GEMM, params, impl, rtol=2e-3)
    assert record["status"] == "correct" and (record["rtol"], record["atol"]) == (2e-3, None)
    assert "judged_by_oracle" not in record


def test_profile_refuses_a_tolerance_that_is_not_a_finite_non_negative_number(tmp_path):
    from pkroof.profilers.profile import profile

    for flag, value in (("rtol", -1.0), ("atol", float("inf"))):
        with pytest.raises(ValueError, match=f"--{flag} must be a finite number at least 0"):
            profile(
                ["all-reduce"], impls=[], world_size=2, shape=None, overrides={}, out_dir=tmp_path,
                timeout_s=60, resume=False, topology="h200x2", **{flag: value},
            )  # fmt: skip


@pytest.mark.gpu
def test_on_a_gpu_the_oracle_judges_every_timed_sample_graphs_included():
    # one NCCL rank on one GPU runs the whole timing path: eager samples, the graph pilot and graph samples, each
    # sample's reference and its fp32 rerun drawn before it, outside the timed region
    record = run_job(Job(RUNNING_SUM, "small", SUM, f"{RUNNING_SUM}:fp32_accumulation", 1, "nccl"), timeout_s=300)
    assert record["status"] == "correct", record.get("message")
    assert record["judged_by_oracle"] is True and record["timing"]["mode"] in ("graph", "eager")
    wrong = run_job(Job(RUNNING_SUM, "small", SUM, f"{RUNNING_SUM}:three_percent_high", 1, "nccl"), timeout_s=300)
    assert wrong["status"] == "incorrect" and "timing" not in wrong


def test_complex_outputs_are_compared_part_by_part():
    # (1+2j) against the reference's (1+2j): right; its conjugate (1−2j) or its real part alone (1+0j) differ by
    # 4 and 2 in the imaginary part, far outside fp32's 1e-5 + 1.3e-5·2: wrong (a real-part-only compare said right)
    want = torch.tensor([1 + 2j, 3 - 1j], dtype=torch.complex64)
    assert compare((want.clone(),), (want,))[0]
    assert not compare((want.conj(),), (want,))[0]
    assert not compare((torch.complex(want.real, torch.zeros(2)),), (want,))[0]
    # 1 part in 10^6 off in the imaginary part: within fp32's tolerance, as a real output would be
    near = torch.complex(want.real, want.imag * (1 + 1e-6))
    assert compare((near,), (want,))[0]


def test_the_oracle_widens_a_modules_parameters_in_a_copy_and_looks_inside_containers():
    layer = torch.nn.Linear(4, 2).to(torch.bfloat16)
    x = torch.ones(3, 4, dtype=torch.bfloat16)
    wide_layer, (wide_x, n), table = _widened((layer, (x, 7), {"x": x}))
    assert wide_layer is not layer and wide_layer.weight.dtype == torch.float32 and layer.weight.dtype == torch.bfloat16
    assert wide_x.dtype == torch.float32 and n == 7 and table["x"].dtype == torch.float32
    assert torch.equal(
        wide_layer(wide_x), torch.nn.functional.linear(x.float(), layer.weight.float(), layer.bias.float())
    )
